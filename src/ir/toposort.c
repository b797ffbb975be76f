/* Topological order of a graph's nodes (Kahn's algorithm, stable on file order). */
#include <string.h>

#include "ir/graph.h"
#include "util/alloc.h"
#include "util/error.h"

af_status af_graph_toposort(af_graph *g, af_error *err) {
    int n = g->n_nodes;
    if (n == 0) return AF_OK;
    int *indeg = af_calloc((size_t)n, sizeof *indeg);
    int *order = af_malloc((size_t)n * sizeof *order);
    /* consumers as CSR: for each value, the nodes reading it */
    int *ccount = af_calloc((size_t)g->n_values + 1, sizeof *ccount);
    int n_edges = 0;
    for (int i = 0; i < n; i++) n_edges += g->nodes[i].n_inputs;
    int *cons = af_malloc((size_t)(n_edges ? n_edges : 1) * sizeof *cons);
    af_node *sorted = af_malloc((size_t)n * sizeof *sorted);
    af_status st = AF_OK;
    if (!indeg || !order || !ccount || !cons || !sorted) {
        st = af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory sorting the graph");
        goto done;
    }
    for (int v = 0; v < g->n_values; v++) g->values[v].producer = -1;
    for (int i = 0; i < n; i++)
        for (int o = 0; o < g->nodes[i].n_outputs; o++)
            if (g->nodes[i].outputs[o] >= 0) g->values[g->nodes[i].outputs[o]].producer = i;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++) {
            int v = g->nodes[i].inputs[k];
            if (v >= 0 && g->values[v].producer >= 0) {
                ccount[v + 1]++;
                indeg[i]++;
            }
        }
    for (int v = 0; v < g->n_values; v++) ccount[v + 1] += ccount[v];
    {
        int *fill = af_calloc((size_t)g->n_values + 1, sizeof *fill);
        if (!fill) {
            st = af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory sorting the graph");
            goto done;
        }
        for (int i = 0; i < n; i++)
            for (int k = 0; k < g->nodes[i].n_inputs; k++) {
                int v = g->nodes[i].inputs[k];
                if (v >= 0 && g->values[v].producer >= 0) cons[ccount[v] + fill[v]++] = i;
            }
        af_free(fill);
    }
    /* A min-ordered ready list keeps file order where the graph allows it: scan with a cursor. */
    int head = 0, tail = 0;
    for (int i = 0; i < n; i++)
        if (indeg[i] == 0) order[tail++] = i;
    while (head < tail) {
        int i = order[head++];
        for (int o = 0; o < g->nodes[i].n_outputs; o++) {
            int v = g->nodes[i].outputs[o];
            if (v < 0) continue;
            for (int c = ccount[v]; c < ccount[v + 1]; c++)
                if (--indeg[cons[c]] == 0) order[tail++] = cons[c];
        }
    }
    if (tail < n) {
        for (int i = 0; i < n; i++)
            if (indeg[i] > 0) {
                st = af_errorf(err, AF_ERR_INVALID_MODEL, "the graph has a cycle through node '%s' (%s)",
                               g->nodes[i].name, g->nodes[i].op_type);
                break;
            }
        goto done;
    }
    for (int i = 0; i < n; i++) sorted[i] = g->nodes[order[i]];
    memcpy(g->nodes, sorted, (size_t)n * sizeof *sorted);
    for (int i = 0; i < n; i++)
        for (int o = 0; o < g->nodes[i].n_outputs; o++)
            if (g->nodes[i].outputs[o] >= 0) g->values[g->nodes[i].outputs[o]].producer = i;
done:
    af_free(indeg);
    af_free(order);
    af_free(ccount);
    af_free(cons);
    af_free(sorted);
    return st;
}
