/*
 * The matcher. A tail rule grows a group from each anchor through consumers whose op is in the
 * rule's tail set and whose other inputs are constants (or, with residual=1, one tensor from
 * outside), and keeps the largest prefix that is closed: every intermediate read only inside the
 * group, one value leaving it. A structure rule collects a fixed shape around its anchor (the
 * exported self-attention block around a Softmax). Work is bounded: at most AF_MATCH_FANOUT
 * consumers of a value are examined and a group never exceeds its rule's and the config's limits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusion/pattern/pattern_internal.h"
#include "ir/tensor.h"
#include "util/alloc.h"
#include "util/error.h"

#define AF_MATCH_FANOUT 64

typedef struct consumer_index {
    int *start; /* per value: first entry in `node` (CSR) */
    int *node;
} consumer_index;

static af_status index_consumers(const af_graph *g, consumer_index *ci, af_error *err) {
    ci->start = af_calloc((size_t)g->n_values + 1, sizeof *ci->start);
    int edges = 0;
    for (int i = 0; i < g->n_nodes; i++) edges += g->nodes[i].n_inputs;
    ci->node = af_malloc((size_t)(edges ? edges : 1) * sizeof *ci->node);
    int *fill = af_calloc((size_t)g->n_values + 1, sizeof *fill);
    if (!ci->start || !ci->node || !fill) {
        af_free(fill);
        return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory matching patterns");
    }
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0) ci->start[g->nodes[i].inputs[k] + 1]++;
    for (int v = 0; v < g->n_values; v++) ci->start[v + 1] += ci->start[v];
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++) {
            int v = g->nodes[i].inputs[k];
            if (v >= 0 && (k == 0 || g->nodes[i].inputs[k - 1] != v)) ci->node[ci->start[v] + fill[v]++] = i;
        }
    /* Entries left unfilled by a node reading the same value twice in a row repeat the last one. */
    for (int v = 0; v < g->n_values; v++)
        for (int e = ci->start[v] + fill[v]; e < ci->start[v + 1]; e++) ci->node[e] = ci->node[ci->start[v]];
    af_free(fill);
    return AF_OK;
}

static bool has(const int *set, int n, int x) {
    for (int i = 0; i < n; i++)
        if (set[i] == x) return true;
    return false;
}

static bool produced_in(const af_graph *g, const int *nodes, int n, int v) {
    return v >= 0 && g->values[v].producer >= 0 && has(nodes, n, g->values[v].producer);
}

/* Values of the group read outside it (or graph outputs); returns how many, and one of them. */
static int open_values(const af_graph *g, const consumer_index *ci, const int *nodes, int n, int *out) {
    int count = 0;
    for (int i = 0; i < n; i++) {
        const af_node *nd = &g->nodes[nodes[i]];
        for (int o = 0; o < nd->n_outputs; o++) {
            int v = nd->outputs[o];
            if (v < 0) continue;
            bool open = g->values[v].is_output;
            for (int e = ci->start[v]; e < ci->start[v + 1] && !open; e++) open = !has(nodes, n, ci->node[e]);
            if (open) {
                count++;
                *out = v;
            }
        }
    }
    return count;
}

/* Whether node m may join the group: op in the tail, one output, inputs from the group or constant
 * (or one outside tensor for a residual Add). */
static bool admissible(const af_graph *g, const af_rule *r, const int *nodes, int n, int m) {
    const af_node *nd = &g->nodes[m];
    if (!af_op_set_has(&r->tail, nd->op) || nd->n_outputs != 1 || nd->outputs[0] < 0) return false;
    int outside = 0;
    bool reads_group = false;
    for (int k = 0; k < nd->n_inputs; k++) {
        int v = nd->inputs[k];
        if (v < 0) continue;
        if (produced_in(g, nodes, n, v)) reads_group = true;
        else if (g->values[v].kind != AF_VALUE_CONST) outside++;
    }
    return reads_group && (outside == 0 || (r->residual && nd->op == AF_OP_ADD && outside == 1));
}

static int grow_tail(const af_graph *g, const consumer_index *ci, const af_rule *r, int limit, int anchor, int *best,
                     int *best_out) {
    int nodes[AF_FUSION_MAX_NODES], n = 1, best_n = 0;
    nodes[0] = anchor;
    while (n < limit) {
        int pick = -1; /* the lowest-indexed admissible consumer keeps growth in topological order */
        for (int i = 0; i < n; i++) {
            const af_node *nd = &g->nodes[nodes[i]];
            for (int o = 0; o < nd->n_outputs; o++) {
                int v = nd->outputs[o];
                if (v < 0) continue;
                int end = ci->start[v + 1] < ci->start[v] + AF_MATCH_FANOUT ? ci->start[v + 1] : ci->start[v] + AF_MATCH_FANOUT;
                for (int e = ci->start[v]; e < end; e++) {
                    int m = ci->node[e];
                    if (!has(nodes, n, m) && (pick < 0 || m < pick) && admissible(g, r, nodes, n, m)) pick = m;
                }
            }
        }
        if (pick < 0) break;
        nodes[n++] = pick;
        int out;
        if (open_values(g, ci, nodes, n, &out) == 1) {
            best_n = n;
            *best_out = out;
            memcpy(best, nodes, (size_t)n * sizeof *nodes);
        }
    }
    return best_n;
}

/* ---- the attention structure ------------------------------------------------------------------ */

static void add_unique(int *nodes, int *n, int x) {
    if (x >= 0 && !has(nodes, *n, x) && *n < AF_FUSION_MAX_NODES) nodes[(*n)++] = x;
}

/* Adds the Transpose/Reshape producers of v, up to two levels. */
static void add_layout_chain(const af_graph *g, int *nodes, int *n, int v) {
    for (int depth = 0; depth < 2 && v >= 0; depth++) {
        int p = g->values[v].producer;
        if (p < 0 || (g->nodes[p].op != AF_OP_TRANSPOSE && g->nodes[p].op != AF_OP_RESHAPE)) return;
        add_unique(nodes, n, p);
        v = g->nodes[p].inputs[0];
    }
}

static int single_consumer(const consumer_index *ci, int v) {
    return ci->start[v + 1] - ci->start[v] == 1 ? ci->node[ci->start[v]] : -1;
}

static int collect_attention(const af_graph *g, const consumer_index *ci, int sm, int *nodes, int *output) {
    int n = 0;
    add_unique(nodes, &n, sm);
    int v = g->nodes[sm].inputs[0];
    bool found_qk = false;
    for (int hop = 0; hop < 3 && !found_qk; hop++) { /* mask Add and scale Div/Mul, then Q K^T */
        int p = v >= 0 ? g->values[v].producer : -1;
        if (p < 0) return 0;
        const af_node *pn = &g->nodes[p];
        add_unique(nodes, &n, p);
        if (pn->op == AF_OP_MAT_MUL) {
            add_layout_chain(g, nodes, &n, pn->inputs[0]);
            add_layout_chain(g, nodes, &n, pn->inputs[1]);
            found_qk = true;
        } else if (pn->op == AF_OP_ADD || pn->op == AF_OP_DIV || pn->op == AF_OP_MUL) {
            /* follow the operand that leads back to the scores: it has the result's full shape (the
             * mask broadcasts, the scale is a constant); ties go to a MatMul/Div/Mul producer */
            int a = pn->inputs[0], b = pn->n_inputs > 1 ? pn->inputs[1] : -1;
            const af_tensor *y = &g->values[pn->outputs[0]].t;
            bool a_full = a >= 0 && g->values[a].kind != AF_VALUE_CONST && af_tensor_same_shape(&g->values[a].t, y);
            bool b_full = b >= 0 && g->values[b].kind != AF_VALUE_CONST && af_tensor_same_shape(&g->values[b].t, y);
            bool a_scores = a_full, b_scores = b_full;
            if (a_full && b_full) {
                int pa = g->values[a].producer, pb = g->values[b].producer;
                a_scores = pa >= 0 && (g->nodes[pa].op == AF_OP_MAT_MUL || g->nodes[pa].op == AF_OP_DIV);
                b_scores = pb >= 0 && (g->nodes[pb].op == AF_OP_MAT_MUL || g->nodes[pb].op == AF_OP_DIV);
            }
            if (a_scores == b_scores) return 0;
            v = a_scores ? a : b;
        } else {
            return 0;
        }
    }
    if (!found_qk) return 0;
    int pv = single_consumer(ci, g->nodes[sm].outputs[0]);
    if (pv < 0 || g->nodes[pv].op != AF_OP_MAT_MUL) return 0;
    add_unique(nodes, &n, pv);
    add_layout_chain(g, nodes, &n, g->nodes[pv].inputs[1]);
    int t = single_consumer(ci, g->nodes[pv].outputs[0]);
    if (t < 0 || g->nodes[t].op != AF_OP_TRANSPOSE) return 0;
    add_unique(nodes, &n, t);
    int r = single_consumer(ci, g->nodes[t].outputs[0]);
    if (r < 0 || g->nodes[r].op != AF_OP_RESHAPE) return 0;
    add_unique(nodes, &n, r);
    *output = g->nodes[r].outputs[0];
    return n;
}

/* ---- candidates -------------------------------------------------------------------------------- */

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static bool same_nodes(const af_fusion_candidate *a, const int *nodes, int n) {
    return a->n_nodes == n && !memcmp(a->nodes, nodes, (size_t)n * sizeof *nodes);
}

static void judge(const af_graph *g, const af_fusion_config *cfg, af_fusion_candidate *c) {
    for (int i = 0; i < c->n_nodes; i++)
        if (cfg->no_fusion_ops[g->nodes[c->nodes[i]].op]) {
            snprintf(c->reason, sizeof c->reason, "no_fusion_ops: %s", g->nodes[c->nodes[i]].op_type);
            return;
        }
    if (cfg->policy[c->family] == AF_POLICY_NEVER) {
        snprintf(c->reason, sizeof c->reason, "policy never for %s", af_fusion_family_name(c->family));
        return;
    }
    if (!af_fusion_is_convex(g, c->nodes, c->n_nodes)) {
        snprintf(c->reason, sizeof c->reason, "cycle: merging would create a cycle");
        return;
    }
    if (!af_fusion_is_closed(g, c->nodes, c->n_nodes, c->output))
        snprintf(c->reason, sizeof c->reason, "an intermediate is used outside the group");
}

af_status af_pattern_find(const af_graph *g, const af_rule_set *rs, const af_fusion_config *cfg,
                          af_fusion_candidates *out, af_error *err) {
    consumer_index ci = {0};
    af_status st = index_consumers(g, &ci, err);
    int first = out->n;
    for (int ri = 0; st == AF_OK && ri < rs->n; ri++) {
        const af_rule *r = &rs->rules[ri];
        int limit = r->max_nodes < cfg->max_fused_ops ? r->max_nodes : cfg->max_fused_ops;
        for (int a = 0; st == AF_OK && a < g->n_nodes; a++) {
            if (!af_op_set_has(&r->anchor, g->nodes[a].op) || g->nodes[a].n_outputs < 1) continue;
            af_fusion_candidate c = {.family = r->family, .anchor = a};
            snprintf(c.rule, sizeof c.rule, "%s", r->name);
            if (r->structure == AF_STRUCTURE_ATTENTION) {
                c.n_nodes = collect_attention(g, &ci, a, c.nodes, &c.output);
                if (c.n_nodes > limit) {
                    snprintf(c.reason, sizeof c.reason, "max_fused_ops: the block has %d nodes", c.n_nodes);
                }
            } else {
                c.n_nodes = grow_tail(g, &ci, r, limit, a, c.nodes, &c.output);
            }
            if (c.n_nodes < 2) continue;
            qsort(c.nodes, (size_t)c.n_nodes, sizeof c.nodes[0], cmp_int);
            bool dup = false;
            for (int k = first; k < out->n && !dup; k++) dup = same_nodes(&out->items[k], c.nodes, c.n_nodes);
            if (dup) continue;
            if (!c.reason[0]) judge(g, cfg, &c);
            st = af_fusion_candidates_push(out, &c, err);
        }
    }
    af_free(ci.start);
    af_free(ci.node);
    return st;
}
