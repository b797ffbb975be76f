/* Moves a zero Pad of the spatial axes into the Conv or counting AveragePool that alone reads it
 * (see graph.h, af_graph_merge_pads). */
#include <string.h>

#include "ir/graph.h"
#include "ir/op.h"
#include "ir/tensor.h"

/* The Pad's pads (begin of every axis, then end) when it is a constant-mode pad by a known
 * amount with a zero constant; false otherwise. */
static bool zero_pad_amounts(const af_graph *g, const af_node *p, int rank, int64_t *pads) {
    if (strcmp(af_node_attr_string(p, "mode", "constant"), "constant") != 0) return false;
    if (g->opset < 11) {
        const int64_t *v;
        if (af_node_attr_ints(p, "pads", &v) != 2 * rank || af_node_attr_float(p, "value", 0.0f) != 0.0f) return false;
        memcpy(pads, v, (size_t)(2 * rank) * sizeof *pads);
        return true;
    }
    if (p->n_inputs > 3 && p->inputs[3] >= 0) return false; /* opset 18 axes: not taken */
    const af_value *amounts = p->n_inputs > 1 ? af_graph_const_value(g, p->inputs[1]) : NULL;
    if (!amounts || amounts->t.dtype != AF_DTYPE_INT64 || !amounts->t.data || af_tensor_numel(&amounts->t) != 2 * rank)
        return false;
    memcpy(pads, amounts->t.data, (size_t)(2 * rank) * sizeof *pads);
    if (p->n_inputs > 2 && p->inputs[2] >= 0) {
        const af_value *c = af_graph_const_value(g, p->inputs[2]);
        if (!c || !c->t.data || af_tensor_numel(&c->t) != 1 || af_tensor_get_f64(&c->t, 0) != 0.0) return false;
    }
    return true;
}

/* The one node reading value v, at its input 0, or NULL (none, several, another input, or a
 * graph output). */
static af_node *only_reader(af_graph *g, int v) {
    if (g->values[v].is_output) return NULL;
    af_node *reader = NULL;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++) {
            if (g->nodes[i].inputs[k] != v) continue;
            if (reader || k != 0) return NULL;
            reader = &g->nodes[i];
        }
    return reader;
}

/* Whether consumer c takes the Pad: a Conv, or an AveragePool that counts padding (or has none
 * of its own), with explicit pads and, for the pool, no ceil_mode. */
static bool takes_pads(const af_node *c, int spatial) {
    const char *auto_pad = af_node_attr_string(c, "auto_pad", "NOTSET");
    if (strcmp(auto_pad, "NOTSET") != 0) return false;
    const int64_t *own;
    const int n_own = af_node_attr_ints(c, "pads", &own);
    if (n_own >= 0 && n_own != 2 * spatial) return false;
    if (c->op == AF_OP_CONV) return true;
    if (c->op != AF_OP_AVERAGE_POOL || af_node_attr_int(c, "ceil_mode", 0) != 0) return false;
    bool own_pads = false;
    for (int i = 0; i < n_own; i++) own_pads |= own[i] != 0;
    return !own_pads || af_node_attr_int(c, "count_include_pad", 0) != 0;
}

int af_graph_merge_pads(af_graph *g) {
    for (int i = 0; i < g->n_nodes; i++)
        for (int a = 0; a < g->nodes[i].n_attrs; a++)
            if (g->nodes[i].attrs[a].g) return 0; /* a subgraph might read the Pad's output */
    int merged = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        af_node *p = &g->nodes[i];
        if (p->op != AF_OP_PAD || p->n_inputs < 1 || p->inputs[0] < 0 || p->n_outputs != 1 || p->outputs[0] < 0)
            continue;
        const int rank = g->values[p->inputs[0]].t.rank, spatial = rank - 2;
        int64_t pads[2 * AF_MAX_RANK];
        if (rank < 3 || rank > AF_MAX_RANK || !zero_pad_amounts(g, p, rank, pads)) continue;
        bool ok = pads[0] == 0 && pads[1] == 0 && pads[rank] == 0 && pads[rank + 1] == 0;
        for (int d = 2; d < rank && ok; d++) ok = pads[d] >= 0 && pads[rank + d] >= 0;
        af_node *c = ok ? only_reader(g, p->outputs[0]) : NULL;
        if (!c || !takes_pads(c, spatial)) continue;
        int64_t merged_pads[2 * AF_MAX_RANK] = {0};
        const int64_t *own;
        const int n_own = af_node_attr_ints(c, "pads", &own);
        for (int d = 0; d < 2 * spatial; d++) merged_pads[d] = n_own > 0 ? own[d] : 0;
        for (int d = 0; d < spatial; d++) {
            merged_pads[d] += pads[2 + d];
            merged_pads[spatial + d] += pads[rank + 2 + d];
        }
        /* Counting padding changes nothing while the pool has no pads of its own, or counts them
         * already (takes_pads): set it first, so a failure after it leaves the graph as it was. */
        if (c->op == AF_OP_AVERAGE_POOL && !af_node_set_int(c, "count_include_pad", 1)) continue;
        if (!af_node_set_ints(c, "pads", 2 * spatial, merged_pads)) continue;
        c->inputs[0] = p->inputs[0]; /* the Pad is now unread: dead-code removal drops it */
        merged++;
    }
    return merged;
}
