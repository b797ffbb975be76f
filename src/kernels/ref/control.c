/* Reference kernels of If and Loop: they run subgraphs through the executor's callback and size
 * their outputs themselves. */
#include <string.h>

#include "ir/op_ctx.h"
#include "util/alloc.h"
#include "util/error.h"

#define AF_LOOP_MAX_ITERATIONS 100000000LL /* bounds a loop whose condition never turns false */
#define AF_LOOP_MAX_VALUES 256

static const af_graph *subgraph(const af_node *n, const char *name) {
    const af_attr *a = af_node_attr(n, name);
    return a && a->type == AF_ATTR_GRAPH ? a->g : NULL;
}

static bool scalar_true(const af_tensor *t) { return af_tensor_numel(t) >= 1 && af_tensor_get_i64(t, 0) != 0; }

af_status af_ref_IF(af_op_ctx *c) {
    const af_tensor *cond = af_ctx_input(c, 0);
    if (af_tensor_numel(cond) != 1) return af_ctx_fail(c, AF_ERR_RUNTIME, "condition must hold one element");
    const af_graph *g = subgraph(c->node, scalar_true(cond) ? "then_branch" : "else_branch");
    af_tensor outs[AF_LOOP_MAX_VALUES];
    if (c->n_outputs > AF_LOOP_MAX_VALUES) return af_ctx_fail(c, AF_ERR_LIMIT, "too many outputs");
    af_status st = c->run_subgraph(c->exec, g, 0, NULL, c->n_outputs, outs, c->err);
    if (st != AF_OK) return af_error_prefix(c->err, st, "node '%s' (If)", c->node->name);
    for (int k = 0; k < c->n_outputs; k++) {
        af_tensor *out = af_ctx_output(c, k);
        if (out) *out = outs[k];
        else af_tensor_free_data(&outs[k]);
    }
    return AF_OK;
}

/* Scan outputs grow by one slice per iteration; they are stacked along a new first axis. */
typedef struct scan_buf {
    af_tensor slice; /* shape of one iteration's slice */
    uint8_t *data;
    size_t used, cap;
} scan_buf;

static af_status scan_append(const af_op_ctx *c, scan_buf *s, const af_tensor *t, int64_t iter) {
    if (iter == 0) {
        s->slice = *t;
        s->slice.data = NULL;
    } else if (!af_tensor_same_shape(&s->slice, t) || s->slice.dtype != t->dtype) {
        return af_ctx_fail(c, AF_ERR_RUNTIME, "scan output changes shape at iteration %lld", (long long)iter);
    }
    if (s->used + t->nbytes > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        while (cap < s->used + t->nbytes) cap *= 2;
        uint8_t *d = af_realloc(s->data, cap);
        if (!d) return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory growing a scan output");
        s->data = d;
        s->cap = cap;
    }
    if (t->nbytes) memcpy(s->data + s->used, t->data, t->nbytes);
    s->used += t->nbytes;
    return AF_OK;
}

af_status af_ref_LOOP(af_op_ctx *c) {
    const af_graph *body = subgraph(c->node, "body");
    const af_tensor *max_trip = af_ctx_input(c, 0), *cond_in = af_ctx_input(c, 1);
    int n_carried = c->n_inputs - 2, n_scan = body->n_outputs - 1 - n_carried;
    if (n_carried + 2 > AF_LOOP_MAX_VALUES || body->n_outputs > AF_LOOP_MAX_VALUES)
        return af_ctx_fail(c, AF_ERR_LIMIT, "too many loop values");
    int64_t limit = max_trip ? af_tensor_get_i64(max_trip, 0) : AF_LOOP_MAX_ITERATIONS;
    if (max_trip && af_tensor_numel(max_trip) != 1) return af_ctx_fail(c, AF_ERR_RUNTIME, "M must hold one element");
    bool cond = cond_in ? scalar_true(cond_in) : true;

    af_tensor carried[AF_LOOP_MAX_VALUES], outs[AF_LOOP_MAX_VALUES];
    scan_buf scans[AF_LOOP_MAX_VALUES];
    memset(carried, 0, sizeof carried);
    memset(scans, 0, sizeof scans);
    af_status st = AF_OK;
    int n_copied = 0;
    for (; n_copied < n_carried && st == AF_OK; n_copied++) {
        const af_tensor *init = af_ctx_input(c, 2 + n_copied);
        if (!init) st = af_ctx_fail(c, AF_ERR_RUNTIME, "loop-carried input %d is missing", n_copied);
        else st = af_tensor_copy(&carried[n_copied], init, c->err);
    }
    int64_t iter = 0;
    af_tensor iter_t = {.dtype = AF_DTYPE_INT64, .rank = 0}, cond_t = {.dtype = AF_DTYPE_BOOL, .rank = 0};
    int64_t iter_v = 0;
    uint8_t cond_v = 1;
    iter_t.data = &iter_v, iter_t.nbytes = 8;
    cond_t.data = &cond_v, cond_t.nbytes = 1;
    for (; st == AF_OK && cond && iter < limit; iter++) {
        if (iter >= AF_LOOP_MAX_ITERATIONS) {
            st = af_ctx_fail(c, AF_ERR_LIMIT, "loop ran %lld iterations without ending", (long long)iter);
            break;
        }
        const af_tensor *ins[AF_LOOP_MAX_VALUES];
        iter_v = iter;
        cond_v = cond;
        ins[0] = &iter_t;
        ins[1] = &cond_t;
        for (int k = 0; k < n_carried; k++) ins[2 + k] = &carried[k];
        st = c->run_subgraph(c->exec, body, 2 + n_carried, ins, body->n_outputs, outs, c->err);
        if (st != AF_OK) {
            af_error_prefix(c->err, st, "node '%s' (Loop) iteration %lld", c->node->name, (long long)iter);
            break;
        }
        cond = scalar_true(&outs[0]);
        af_tensor_free_data(&outs[0]);
        for (int k = 0; k < n_carried; k++) {
            af_tensor_free_data(&carried[k]);
            carried[k] = outs[1 + k];
        }
        for (int k = 0; k < n_scan; k++) {
            if (st == AF_OK) st = scan_append(c, &scans[k], &outs[1 + n_carried + k], iter);
            af_tensor_free_data(&outs[1 + n_carried + k]);
        }
    }
    for (int k = 0; k < c->n_outputs && st == AF_OK; k++) {
        af_tensor *out = af_ctx_output(c, k);
        if (!out) continue;
        if (k < n_carried) {
            *out = carried[k];
            carried[k].data = NULL;
            continue;
        }
        scan_buf *s = &scans[k - n_carried];
        int64_t dims[AF_MAX_RANK];
        int rank = iter ? s->slice.rank + 1 : 1;
        if (rank > AF_MAX_RANK) {
            st = af_ctx_fail(c, AF_ERR_LIMIT, "scan output rank exceeds %d", AF_MAX_RANK);
            break;
        }
        dims[0] = iter;
        for (int d = 1; d < rank; d++) dims[d] = s->slice.dims[d - 1];
        af_dtype dt = iter ? s->slice.dtype : body->values[body->outputs[1 + k]].t.dtype;
        if ((st = af_ctx_alloc_output(c, k, dt ? dt : AF_DTYPE_FLOAT, rank, dims)) != AF_OK) break;
        if (s->used) memcpy(out->data, s->data, s->used);
    }
    for (int k = 0; k < n_carried; k++) af_tensor_free_data(&carried[k]);
    for (int k = 0; k < n_scan; k++) af_free(scans[k].data);
    if (st != AF_OK)
        for (int k = 0; k < c->n_outputs; k++)
            if (af_ctx_output(c, k)) af_tensor_free_data(af_ctx_output(c, k));
    return st;
}
