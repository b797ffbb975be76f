/* Dead-code elimination: drop nodes none of whose outputs reach a graph output, and omit the
 * unread optional outputs of the nodes kept. */
#include <string.h>

#include "ir/graph.h"
#include "ir/op.h"
#include "util/alloc.h"

/* Marks in the parent (`needed`) the outer values a subgraph (and its nested subgraphs) reads. */
static void mark_outer_reads(const af_graph *sub, bool *needed) {
    for (int v = 0; v < sub->n_values; v++)
        if (sub->values[v].kind == AF_VALUE_OUTER) needed[sub->values[v].outer_id] = true;
}

/* Ops whose outputs after the first are all optional (ONNX marks them so): Dropout's mask,
 * MaxPool's indices, LayerNormalization's mean and inverse deviation, BatchNormalization's
 * training statistics. */
static bool optional_tail(af_op op) {
    return op == AF_OP_DROPOUT || op == AF_OP_MAX_POOL || op == AF_OP_LAYER_NORMALIZATION ||
           op == AF_OP_BATCH_NORMALIZATION;
}

void af_graph_remove_dead(af_graph *g) {
    bool *needed = af_calloc((size_t)g->n_values + 1, sizeof *needed);
    bool *live = af_calloc((size_t)g->n_nodes + 1, sizeof *live);
    if (!needed || !live) goto done; /* out of memory: keeping dead nodes is still correct */
    for (int i = 0; i < g->n_outputs; i++) needed[g->outputs[i]] = true;
    if (g->parent) /* values a subgraph captures are read by its own nested graphs too */
        for (int v = 0; v < g->n_values; v++)
            if (g->values[v].kind == AF_VALUE_OUTER) needed[v] = true;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const af_node *n = &g->nodes[i];
        for (int o = 0; o < n->n_outputs && !live[i]; o++)
            if (n->outputs[o] >= 0 && needed[n->outputs[o]] && g->values[n->outputs[o]].kind == AF_VALUE_NODE)
                live[i] = true;
        if (!live[i]) continue;
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0) needed[n->inputs[k]] = true;
        for (int a = 0; a < n->n_attrs; a++)
            if (n->attrs[a].g) mark_outer_reads(n->attrs[a].g, needed);
    }
    /* Optional outputs past the first that nothing reads are omitted, as if the model had left them
     * out: exporters name Dropout's mask (Swin-T's 24 dropouts), and a fast kernel takes the node
     * only without it. */
    for (int i = 0; i < g->n_nodes; i++) {
        af_node *n = &g->nodes[i];
        if (!live[i] || !optional_tail(n->op)) continue;
        for (int o = 1; o < n->n_outputs; o++)
            if (n->outputs[o] >= 0 && !needed[n->outputs[o]]) n->outputs[o] = -1;
    }
    int w = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (live[i]) g->nodes[w++] = g->nodes[i];
        else af_node_clear(&g->nodes[i]);
    }
    g->n_nodes = w;
    for (int v = 0; v < g->n_values; v++) g->values[v].producer = -1;
    for (int i = 0; i < g->n_nodes; i++)
        for (int o = 0; o < g->nodes[i].n_outputs; o++)
            if (g->nodes[i].outputs[o] >= 0) g->values[g->nodes[i].outputs[o]].producer = i;
done:
    af_free(needed);
    af_free(live);
}
