#include "runtime/memory_plan.h"

#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"
#include "runtime/plan.h"
#include "util/alloc.h"
#include "util/error.h"

af_status af_lifetimes_compute(const af_graph *g, const af_exec_plan *plan, af_lifetimes *lt, af_error *err) {
    memset(lt, 0, sizeof *lt);
    int n_steps = plan ? plan->n_steps : g->n_nodes;
    lt->n_values = g->n_values;
    lt->n_steps = n_steps;
    lt->first = af_malloc((size_t)(g->n_values ? g->n_values : 1) * sizeof *lt->first);
    lt->last = af_malloc((size_t)(g->n_values ? g->n_values : 1) * sizeof *lt->last);
    int *buf = af_malloc(4096 * sizeof *buf);
    if (!lt->first || !lt->last || !buf) {
        af_free(buf);
        af_lifetimes_free(lt);
        return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory planning activations");
    }
    for (int v = 0; v < g->n_values; v++) lt->first[v] = lt->last[v] = -1;
    for (int i = 0; i < n_steps; i++) {
        af_step one = {.anchor = i, .n_nodes = 1, .nodes = &i, .output = -1};
        const af_step *s = plan ? &plan->steps[i] : &one;
        int n = af_step_writes(g, s, buf, 4096);
        for (int k = 0; k < n; k++) lt->first[buf[k]] = i;
        n = af_step_reads(g, s, buf, 4096);
        for (int k = 0; k < n; k++) lt->last[buf[k]] = i;
    }
    for (int i = 0; i < g->n_outputs; i++) lt->last[g->outputs[i]] = n_steps;
    af_free(buf);
    return AF_OK;
}

void af_lifetimes_free(af_lifetimes *lt) {
    af_free(lt->first);
    af_free(lt->last);
    memset(lt, 0, sizeof *lt);
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

af_status af_memory_plan_build(const af_graph *g, const af_lifetimes *lt, af_memory_plan *plan, af_error *err) {
    memset(plan, 0, sizeof *plan);
    plan->n_values = g->n_values;
    plan->offset = af_malloc((size_t)(g->n_values ? g->n_values : 1) * sizeof *plan->offset);
    plan->size = af_calloc((size_t)(g->n_values ? g->n_values : 1), sizeof *plan->size);
    interval *iv = af_malloc((size_t)(g->n_values ? g->n_values : 1) * sizeof *iv);
    int64_t *step_live = af_calloc((size_t)lt->n_steps + 1, sizeof *step_live);
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
        if (val->kind != AF_VALUE_NODE || val->is_output || lt->first[v] < 0) continue;
        int64_t numel = af_tensor_numel(&val->t);
        size_t es = af_dtype_size(val->t.dtype);
        if (numel < 0 || es == 0) continue; /* dynamic: allocated while running */
        size_t bytes;
        if (!af_mul_size((size_t)numel, es, &bytes) || bytes > SIZE_MAX - 64) continue;
        bytes = (bytes + 63) & ~(size_t)63;
        int first = lt->first[v], last = lt->last[v] < first ? first : lt->last[v];
        iv[n++] = (interval){v, first, last, bytes};
        plan->size[v] = bytes;
        for (int s = first; s <= last; s++) step_live[s] += (int64_t)bytes;
    }
    for (int s = 0; s <= lt->n_steps; s++)
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
