/* Topological order of a graph's nodes (Kahn's algorithm, stable on file order). A node depends on
 * the values it reads directly and on those its subgraphs capture from this graph. */
#include <string.h>

#include "ir/graph.h"
#include "util/alloc.h"
#include "util/error.h"

/* Writes into out (up to cap) every value of g that node n reads, including subgraph captures. */
static int node_reads(const af_node *n, int *out, int cap) {
    int k = 0;
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] >= 0 && k < cap) out[k++] = n->inputs[i];
    for (int a = 0; a < n->n_attrs; a++) {
        const af_graph *sub = n->attrs[a].g;
        for (int v = 0; sub && v < sub->n_values; v++)
            if (sub->values[v].kind == AF_VALUE_OUTER && k < cap) out[k++] = sub->values[v].outer_id;
    }
    return k;
}

static int node_n_reads(const af_node *n) {
    int k = n->n_inputs;
    for (int a = 0; a < n->n_attrs; a++)
        if (n->attrs[a].g) k += n->attrs[a].g->n_values;
    return k;
}

af_status af_graph_toposort(af_graph *g, af_error *err) {
    int n = g->n_nodes;
    af_status st = AF_OK;
    for (int i = 0; i < n && st == AF_OK; i++) /* subgraphs first: their order is their own */
        for (int a = 0; a < g->nodes[i].n_attrs && st == AF_OK; a++)
            if (g->nodes[i].attrs[a].g) st = af_graph_toposort(g->nodes[i].attrs[a].g, err);
    if (st != AF_OK || n == 0) return st;
    int n_edges = 0;
    for (int i = 0; i < n; i++) n_edges += node_n_reads(&g->nodes[i]);
    int *indeg = af_calloc((size_t)n, sizeof *indeg);
    int *order = af_malloc((size_t)n * sizeof *order);
    int *ccount = af_calloc((size_t)g->n_values + 1, sizeof *ccount);
    int *fill = af_calloc((size_t)g->n_values + 1, sizeof *fill);
    int *reads = af_malloc((size_t)(n_edges ? n_edges : 1) * sizeof *reads);
    int *read_start = af_malloc((size_t)(n + 1) * sizeof *read_start);
    int *cons = af_malloc((size_t)(n_edges ? n_edges : 1) * sizeof *cons);
    af_node *sorted = af_malloc((size_t)n * sizeof *sorted);
    if (!indeg || !order || !ccount || !fill || !reads || !read_start || !cons || !sorted) {
        st = af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory sorting the graph");
        goto done;
    }
    for (int v = 0; v < g->n_values; v++) g->values[v].producer = -1;
    for (int i = 0; i < n; i++)
        for (int o = 0; o < g->nodes[i].n_outputs; o++)
            if (g->nodes[i].outputs[o] >= 0) g->values[g->nodes[i].outputs[o]].producer = i;
    read_start[0] = 0;
    for (int i = 0; i < n; i++)
        read_start[i + 1] = read_start[i] + node_reads(&g->nodes[i], reads + read_start[i], n_edges - read_start[i]);
    /* consumers of each value as CSR, counting an edge per read of a produced value */
    for (int i = 0; i < n; i++)
        for (int r = read_start[i]; r < read_start[i + 1]; r++)
            if (g->values[reads[r]].producer >= 0) {
                ccount[reads[r] + 1]++;
                indeg[i]++;
            }
    for (int v = 0; v < g->n_values; v++) ccount[v + 1] += ccount[v];
    for (int i = 0; i < n; i++)
        for (int r = read_start[i]; r < read_start[i + 1]; r++)
            if (g->values[reads[r]].producer >= 0) cons[ccount[reads[r]] + fill[reads[r]]++] = i;
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
    af_free(fill);
    af_free(reads);
    af_free(read_start);
    af_free(cons);
    af_free(sorted);
    return st;
}
