#include "runtime/memory_plan.h"

#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"
#include "util/alloc.h"
#include "util/error.h"

void af_graph_last_uses(const af_graph *g, int *last_use) {
    for (int v = 0; v < g->n_values; v++) last_use[v] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const af_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0) last_use[n->inputs[k]] = i;
        for (int a = 0; a < n->n_attrs; a++) {
            const af_graph *sub = n->attrs[a].g;
            for (int v = 0; sub && v < sub->n_values; v++)
                if (sub->values[v].kind == AF_VALUE_OUTER) last_use[sub->values[v].outer_id] = i;
        }
    }
    for (int i = 0; i < g->n_outputs; i++) last_use[g->outputs[i]] = g->n_nodes;
}

typedef struct {
    int value;
    int first, last;
    size_t size;
} interval;

static int by_size_desc(const void *a, const void *b) {
    const interval *x = a, *y = b;
    if (x->size != y->size) return x->size < y->size ? 1 : -1;
    return x->first - y->first;
}

af_status af_memory_plan_build(const af_graph *g, const int *last_use, af_memory_plan *plan, af_error *err) {
    memset(plan, 0, sizeof *plan);
    plan->n_values = g->n_values;
    plan->offset = af_malloc((size_t)(g->n_values ? g->n_values : 1) * sizeof *plan->offset);
    plan->size = af_calloc((size_t)(g->n_values ? g->n_values : 1), sizeof *plan->size);
    interval *iv = af_malloc((size_t)(g->n_values ? g->n_values : 1) * sizeof *iv);
    int64_t *step_live = af_calloc((size_t)g->n_nodes + 1, sizeof *step_live);
    if (!plan->offset || !plan->size || !iv || !step_live) {
        af_free(iv);
        af_free(step_live);
        af_memory_plan_free(plan);
        return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory planning activations");
    }
    int n = 0;
    for (int v = 0; v < g->n_values; v++) {
        plan->offset[v] = -1;
        const af_value *val = &g->values[v];
        if (val->kind != AF_VALUE_NODE || val->is_output || val->producer < 0) continue;
        int64_t numel = af_tensor_numel(&val->t);
        size_t es = af_dtype_size(val->t.dtype);
        if (numel < 0 || es == 0) continue; /* dynamic: allocated while running */
        size_t bytes;
        if (!af_mul_size((size_t)numel, es, &bytes) || bytes > SIZE_MAX - 64) continue;
        bytes = (bytes + 63) & ~(size_t)63;
        int last = last_use[v] < val->producer ? val->producer : last_use[v];
        iv[n++] = (interval){v, val->producer, last, bytes};
        plan->size[v] = bytes;
        for (int s = val->producer; s <= last; s++) step_live[s] += (int64_t)bytes;
    }
    for (int s = 0; s <= g->n_nodes; s++)
        if ((size_t)step_live[s] > plan->live_bound) plan->live_bound = (size_t)step_live[s];
    /* Greedy by decreasing size: each interval takes the lowest offset that clears every placed
     * interval overlapping it in time. */
    qsort(iv, (size_t)n, sizeof *iv, by_size_desc);
    for (int i = 0; i < n; i++) {
        size_t off = 0;
        for (bool moved = true; moved;) {
            moved = false;
            for (int j = 0; j < i; j++) {
                if (iv[j].last < iv[i].first || iv[i].last < iv[j].first) continue;
                size_t jo = (size_t)plan->offset[iv[j].value];
                if (off < jo + iv[j].size && jo < off + iv[i].size) {
                    off = jo + iv[j].size;
                    moved = true;
                }
            }
        }
        plan->offset[iv[i].value] = (int64_t)off;
        if (off + iv[i].size > plan->arena_bytes) plan->arena_bytes = off + iv[i].size;
    }
    af_free(iv);
    af_free(step_live);
    return AF_OK;
}

void af_memory_plan_free(af_memory_plan *plan) {
    af_free(plan->offset);
    af_free(plan->size);
    memset(plan, 0, sizeof *plan);
}
