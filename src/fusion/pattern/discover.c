/*
 * Region discovery (fusion level 3): clusters the nodes the fused region kernel can run (elementwise
 * and broadcast ops, af_fusion_region_node) that no rule match of another family holds into
 * anchor-less regions, by greedy agglomeration over the data-dependency graph weighted by bytes: the
 * heaviest value whose producer and readers can merge into one convex, single-output region of at
 * most max_fused_ops nodes is merged first. Nodes that elementwise_chain rule matches hold are
 * eligible too, so a region can span what linear chains cannot (a diamond); a region that one such
 * match already holds whole is not listed again, and the cost layer arbitrates overlaps
 * (docs/rules.md).
 */
#include <stdlib.h>
#include <string.h>

#include "fusion/config.h"
#include "fusion/pattern/rules_internal.h"
#include "kernels/fast/region.h"
#include "ir/tensor.h"
#include "util/alloc.h"
#include "util/error.h"

#define MAX_PASSES 8
#define UNKNOWN_DIM 64 /* a symbolic or unknown dim counts as this many elements */

typedef struct region_edge {
    double bytes;
    int value;
} region_edge;

static int by_weight(const void *a, const void *b) {
    const region_edge *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return (x->value > y->value) - (x->value < y->value);
}

static double value_bytes(const af_tensor *t) {
    double n = 1;
    if (t->rank < 0) n = UNKNOWN_DIM;
    for (int d = 0; d < t->rank; d++) n *= t->dims[d] >= 0 ? (double)t->dims[d] : UNKNOWN_DIM;
    size_t es = af_dtype_size(t->dtype);
    return n * (double)(es ? es : 4);
}

static bool has_subgraph(const af_node *n) {
    for (int a = 0; a < n->n_attrs; a++)
        if (n->attrs[a].g) return true;
    return false;
}

static int find(int *parent, int x) {
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Whether the sorted set reads at most AF_REGION_MAX_INPUTS distinct values from outside it: the
 * most one fused region kernel takes. */
static bool inputs_fit(const af_graph *g, const int *members, int m) {
    int seen[AF_REGION_MAX_INPUTS + 1], n_seen = 0;
    for (int i = 0; i < m; i++) {
        const af_node *nd = &g->nodes[members[i]];
        for (int k = 0; k < nd->n_inputs; k++) {
            int v = nd->inputs[k];
            if (v < 0) continue;
            int p = g->values[v].kind == AF_VALUE_NODE ? g->values[v].producer : -1;
            if (p >= 0 && bsearch(&p, members, (size_t)m, sizeof *members, cmp_int)) continue;
            bool dup = false;
            for (int j = 0; j < n_seen && !dup; j++) dup = seen[j] == v;
            if (dup) continue;
            if (n_seen == AF_REGION_MAX_INPUTS) return false;
            seen[n_seen++] = v;
        }
    }
    return true;
}

/* An undecided rule match (legal and allowed so far) of the elementwise_chain family. */
static bool open_chain(const af_fusion_candidate *c) { return c->family == AF_FUSION_ELEMENTWISE && !c->reason[0]; }

af_status af_pattern_discover(const af_graph *g, const af_readers *rd, af_legal_scratch *s,
                              const af_fusion_config *cfg, int first, af_fusion_candidates *out, af_error *err) {
    int max_ops = cfg->max_fused_ops >= 1 && cfg->max_fused_ops < AF_FUSION_MAX_NODES ? cfg->max_fused_ops
                                                                                      : AF_FUSION_MAX_NODES;
    if (max_ops < 2 || g->n_nodes < 2) return AF_OK;
    const int n = g->n_nodes;
    bool *ok = af_calloc((size_t)n, sizeof *ok);
    int *parent = af_malloc((size_t)n * sizeof *parent), *size = af_malloc((size_t)n * sizeof *size);
    int *next = af_malloc((size_t)n * sizeof *next), *tail = af_malloc((size_t)n * sizeof *tail);
    int *left = af_malloc((size_t)n * sizeof *left);
    bool *contained = af_calloc((size_t)n, sizeof *contained);
    region_edge *edges = af_malloc((size_t)(g->n_values ? g->n_values : 1) * sizeof *edges);
    af_status st = AF_OK;
    if (!ok || !parent || !size || !next || !tail || !left || !contained || !edges) {
        st = af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory for region discovery");
        goto done;
    }
    /* Nodes an undecided match of another family holds stay out (ok doubles as that mark first). */
    const int n_rules = out->n;
    for (int c = first; c < n_rules; c++)
        if (!out->items[c].reason[0] && !open_chain(&out->items[c]))
            for (int k = 0; k < out->items[c].n_nodes; k++) ok[out->items[c].nodes[k]] = true;
    for (int i = 0; i < n; i++) {
        const af_node *nd = &g->nodes[i];
        ok[i] = !ok[i] && nd->op < AF_OP_COUNT && !cfg->no_fusion_ops[nd->op] && !has_subgraph(nd) &&
                nd->n_inputs <= AF_FUSION_MAX_NODE_INPUTS && af_fusion_region_node(g, nd, NULL, 0);
        parent[i] = tail[i] = i;
        size[i] = 1;
        next[i] = -1;
    }
    /* Candidate merges: a value between eligible nodes that could become internal (all its readers
     * fit in one region with its producer). */
    int n_edges = 0;
    for (int v = 0; v < g->n_values; v++) {
        int p = g->values[v].kind == AF_VALUE_NODE ? g->values[v].producer : -1;
        int readers = af_readers_count(rd, v);
        if (p < 0 || p >= n || !ok[p] || readers < 1 || readers > max_ops - 1) continue;
        bool any = false;
        for (int k = rd->start[v]; k < rd->start[v + 1] && !any; k++) any = ok[rd->readers[k]];
        if (any) edges[n_edges++] = (region_edge){value_bytes(&g->values[v].t), v};
    }
    qsort(edges, (size_t)n_edges, sizeof *edges, by_weight);
    int members[AF_FUSION_MAX_NODES], roots[AF_FUSION_MAX_NODES];
    for (int pass = 0; pass < MAX_PASSES; pass++) {
        bool changed = false;
        for (int e = 0; e < n_edges; e++) {
            int v = edges[e].value, n_roots = 0, total = 0;
            int cand[AF_FUSION_MAX_NODES];
            cand[0] = g->values[v].producer;
            int n_cand = 1;
            for (int k = rd->start[v]; k < rd->start[v + 1]; k++)
                if (ok[rd->readers[k]]) cand[n_cand++] = rd->readers[k];
            bool too_big = false;
            for (int c = 0; c < n_cand && !too_big; c++) {
                int root = find(parent, cand[c]);
                bool seen = false;
                for (int j = 0; j < n_roots && !seen; j++) seen = roots[j] == root;
                if (seen) continue;
                roots[n_roots++] = root;
                total += size[root];
                too_big = total > max_ops;
            }
            if (too_big || n_roots < 2) continue;
            int m = 0;
            for (int j = 0; j < n_roots; j++)
                for (int x = roots[j]; x >= 0; x = next[x]) members[m++] = x;
            qsort(members, (size_t)m, sizeof *members, cmp_int);
            int exported;
            if (af_pattern_exports(g, rd, s, members, m, &exported) > 1) continue;
            if (!inputs_fit(g, members, m)) continue;
            if (!af_pattern_convex(g, rd, s, members, m)) continue;
            /* merge: every root hangs under the first; member lists are concatenated */
            int r0 = roots[0];
            for (int j = 1; j < n_roots; j++) {
                int r = roots[j];
                parent[r] = r0;
                next[tail[r0]] = r;
                tail[r0] = tail[r];
                size[r0] += size[r];
            }
            changed = true;
        }
        if (!changed) break;
    }
    /* A region that one elementwise_chain match holds whole adds nothing, where every node of that
     * match is eligible (so the region kernel can run it): left[root] counts down, per match, the
     * region's nodes the match does not hold. */
    for (int i = 0; i < n; i++) left[i] = size[i];
    for (int c = first; c < n_rules; c++) {
        const af_fusion_candidate *rc = &out->items[c];
        bool all = open_chain(rc);
        for (int k = 0; k < rc->n_nodes && all; k++) all = rc->nodes[k] >= 0 && rc->nodes[k] < n && ok[rc->nodes[k]];
        if (!all) continue;
        int hits[AF_FUSION_MAX_NODES];
        for (int k = 0; k < rc->n_nodes; k++) left[hits[k] = find(parent, rc->nodes[k])]--;
        for (int k = 0; k < rc->n_nodes; k++) contained[hits[k]] |= left[hits[k]] == 0;
        for (int k = 0; k < rc->n_nodes; k++) left[hits[k]] = size[hits[k]];
    }
    /* Every other region of two or more nodes is a candidate. */
    for (int i = 0; i < n && st == AF_OK; i++) {
        if (!ok[i] || parent[i] != i || size[i] < 2 || contained[i]) continue;
        af_fusion_candidate c;
        memset(&c, 0, sizeof c);
        c.family = AF_FUSION_ELEMENTWISE;
        snprintf(c.rule, sizeof c.rule, "discovery");
        c.anchor = -1;
        for (int x = i; x >= 0; x = next[x]) c.nodes[c.n_nodes++] = x;
        qsort(c.nodes, (size_t)c.n_nodes, sizeof *c.nodes, cmp_int);
        int exported;
        af_pattern_exports(g, rd, s, c.nodes, c.n_nodes, &exported);
        const af_node *last = &g->nodes[c.nodes[c.n_nodes - 1]];
        c.output = exported >= 0 ? exported : last->outputs[0];
        if (c.output < 0) continue;
        const char *why = af_pattern_legality(g, rd, s, c.nodes, c.n_nodes, c.output);
        if (why) snprintf(c.reason, sizeof c.reason, "%s", why);
        else if (cfg->policy[AF_FUSION_ELEMENTWISE] == AF_POLICY_NEVER)
            snprintf(c.reason, sizeof c.reason, "%s %s", AF_PAT_REASON_NEVER, af_fusion_family_name(c.family));
        st = af_fusion_candidates_push(out, &c, err);
    }
done:
    af_free(ok);
    af_free(parent);
    af_free(size);
    af_free(next);
    af_free(tail);
    af_free(left);
    af_free(contained);
    af_free(edges);
    return st;
}
