/* The pattern layer's graph index (who reads each value) and its bounded legality checks, which
 * agree with fusion.h's af_fusion_is_convex / af_fusion_is_closed but cost only the group's
 * neighbourhood instead of a scan of the whole graph per value. */
#include <string.h>

#include "fusion/pattern/rules_internal.h"
#include "util/alloc.h"
#include "util/error.h"

/* A convexity walk that visits more nodes than this hands over to af_fusion_is_convex. */
#define CONVEX_WALK_BUDGET 65536

/* Visits each value node i reads once (inputs, and values its subgraphs capture): counts it in
 * count[v], or when count is NULL stores i as a reader of v. */
static void each_read(const af_graph *g, int i, int *last, int *count, int *fill, int *readers) {
    const af_node *n = &g->nodes[i];
    for (int pass = 0; pass < 2; pass++) {
        int k_end = pass == 0 ? n->n_inputs : n->n_attrs;
        for (int k = 0; k < k_end; k++) {
            int n_vals = 1;
            const af_graph *sub = NULL;
            if (pass == 1) {
                sub = n->attrs[k].g;
                if (!sub) continue;
                n_vals = sub->n_values;
            }
            for (int s = 0; s < n_vals; s++) {
                int v = pass == 0 ? n->inputs[k] : sub->values[s].kind == AF_VALUE_OUTER ? sub->values[s].outer_id : -1;
                if (v < 0 || v >= g->n_values || last[v] == i) continue;
                last[v] = i;
                if (count) count[v]++;
                else readers[fill[v]++] = i;
            }
        }
    }
}

af_status af_readers_build(const af_graph *g, af_readers *r, af_error *err) {
    memset(r, 0, sizeof *r);
    int nv = g->n_values;
    r->n_values = nv;
    r->start = af_calloc((size_t)nv + 1, sizeof *r->start);
    int *last = af_malloc((size_t)(nv ? nv : 1) * sizeof *last);
    int *fill = af_malloc((size_t)(nv ? nv : 1) * sizeof *fill);
    if (!r->start || !last || !fill) goto oom;
    for (int v = 0; v < nv; v++) last[v] = -1;
    for (int i = 0; i < g->n_nodes; i++) each_read(g, i, last, r->start + 1, NULL, NULL);
    for (int v = 0; v < nv; v++) r->start[v + 1] += r->start[v];
    r->readers = af_malloc((size_t)(r->start[nv] ? r->start[nv] : 1) * sizeof *r->readers);
    if (!r->readers) goto oom;
    for (int v = 0; v < nv; v++) {
        last[v] = -1;
        fill[v] = r->start[v];
    }
    for (int i = 0; i < g->n_nodes; i++) each_read(g, i, last, NULL, fill, r->readers);
    af_free(last);
    af_free(fill);
    return AF_OK;
oom:
    af_free(last);
    af_free(fill);
    af_readers_free(r);
    return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory indexing %d values for pattern matching", nv);
}

void af_readers_free(af_readers *r) {
    af_free(r->start);
    af_free(r->readers);
    memset(r, 0, sizeof *r);
}

af_status af_legal_scratch_init(af_legal_scratch *s, const af_graph *g, af_error *err) {
    memset(s, 0, sizeof *s);
    size_t n = (size_t)(g->n_nodes ? g->n_nodes : 1);
    s->n_nodes = g->n_nodes;
    s->member = af_calloc(n, sizeof *s->member);
    s->visited = af_calloc(n, sizeof *s->visited);
    s->stack = af_malloc(n * sizeof *s->stack);
    if (!s->member || !s->visited || !s->stack) {
        af_legal_scratch_free(s);
        return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory for pattern matching scratch");
    }
    return AF_OK;
}

void af_legal_scratch_free(af_legal_scratch *s) {
    af_free(s->member);
    af_free(s->visited);
    af_free(s->stack);
    memset(s, 0, sizeof *s);
}

/* Starts a new generation of marks and marks the set. */
static void mark(af_legal_scratch *s, const int *nodes, int n) {
    if (++s->stamp == 0) { /* wrapped: clear the old marks once */
        memset(s->member, 0, (size_t)s->n_nodes * sizeof *s->member);
        memset(s->visited, 0, (size_t)s->n_nodes * sizeof *s->visited);
        s->stamp = 1;
    }
    for (int i = 0; i < n; i++) s->member[nodes[i]] = s->stamp;
}

int af_pattern_exports(const af_graph *g, const af_readers *rd, af_legal_scratch *s, const int *nodes,
                       int n_nodes, int *exported) {
    mark(s, nodes, n_nodes);
    int count = 0;
    *exported = -1;
    for (int i = 0; i < n_nodes && count < 2; i++) {
        const af_node *n = &g->nodes[nodes[i]];
        for (int o = 0; o < n->n_outputs && count < 2; o++) {
            int v = n->outputs[o];
            if (v < 0) continue;
            bool out = g->values[v].is_output;
            /* at most n_nodes readers are inside, so this stops within n_nodes + 1 steps */
            for (int k = rd->start[v]; k < rd->start[v + 1] && !out; k++) out = s->member[rd->readers[k]] != s->stamp;
            if (out && count++ == 0) *exported = v;
        }
    }
    return count;
}

/* Pushes the unvisited outside readers of x's outputs that come before `hi`; false when x is
 * outside the set and one of its readers is in it (a path left the set and came back). */
static bool expand(const af_graph *g, const af_readers *rd, af_legal_scratch *s, int x, bool from_set, int hi,
                   int *top, long *visits, bool *over_budget) {
    const af_node *n = &g->nodes[x];
    for (int o = 0; o < n->n_outputs; o++) {
        int v = n->outputs[o];
        if (v < 0) continue;
        for (int k = rd->start[v]; k < rd->start[v + 1]; k++) {
            int r = rd->readers[k];
            if (r > hi) break; /* readers are sorted; nodes after the last member cannot lead back */
            if (s->member[r] == s->stamp) {
                if (!from_set) return false;
                continue;
            }
            if (s->visited[r] == s->stamp) continue;
            if (++*visits > CONVEX_WALK_BUDGET) {
                *over_budget = true;
                return true;
            }
            s->visited[r] = s->stamp;
            s->stack[(*top)++] = r;
        }
    }
    return true;
}

/* Convex unless a path leaves the set and comes back. Node order is topological, so such a path
 * only runs through nodes before the set's last node: walk forward from the set's outside readers
 * within that window. Call after mark(). */
static bool convex_marked(const af_graph *g, const af_readers *rd, af_legal_scratch *s, const int *nodes,
                          int n_nodes) {
    int hi = nodes[n_nodes - 1], top = 0;
    long visits = 0;
    bool over = false;
    for (int i = 0; i < n_nodes && !over; i++) expand(g, rd, s, nodes[i], true, hi, &top, &visits, &over);
    while (top > 0 && !over)
        if (!expand(g, rd, s, s->stack[--top], false, hi, &top, &visits, &over)) return false;
    return over ? af_fusion_is_convex(g, nodes, n_nodes) : true;
}

const char *af_pattern_legality(const af_graph *g, const af_readers *rd, af_legal_scratch *s, const int *nodes,
                                int n_nodes, int output) {
    mark(s, nodes, n_nodes);
    /* A cycle is reported first: it is the reason no choice of output could make the group legal. */
    if (!convex_marked(g, rd, s, nodes, n_nodes)) return AF_PAT_REASON_CYCLE;
    for (int i = 0; i < n_nodes; i++) {
        const af_node *n = &g->nodes[nodes[i]];
        for (int o = 0; o < n->n_outputs; o++) {
            int v = n->outputs[o];
            if (v < 0 || v == output) continue;
            if (g->values[v].is_output) return AF_PAT_REASON_CLOSED;
            for (int k = rd->start[v]; k < rd->start[v + 1]; k++)
                if (s->member[rd->readers[k]] != s->stamp) return AF_PAT_REASON_CLOSED;
        }
    }
    /* The shared definitions have the last word where their whole-graph scans are cheap. */
    if (g->n_nodes <= AF_PAT_SHARED_CHECK_MAX_NODES) {
        if (!af_fusion_is_convex(g, nodes, n_nodes)) return AF_PAT_REASON_CYCLE;
        if (!af_fusion_is_closed(g, nodes, n_nodes, output)) return AF_PAT_REASON_CLOSED;
    }
    return NULL;
}

bool af_pattern_convex(const af_graph *g, const af_readers *rd, af_legal_scratch *s, const int *nodes, int n_nodes) {
    mark(s, nodes, n_nodes);
    return convex_marked(g, rd, s, nodes, n_nodes);
}
