#include "ir/op_ctx.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"

af_status af_ctx_fail(const af_op_ctx *c, af_status status, const char *fmt, ...) {
    if (!c->err) return status;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return af_errorf(c->err, status, "node '%s' (%s): %s", c->node->name, c->node->op_type, msg);
}

af_status af_ctx_alloc_output(const af_op_ctx *c, int i, af_dtype dtype, int rank, const int64_t *dims) {
    af_tensor *t = af_ctx_output(c, i);
    if (!t) return AF_OK;
    if (rank < 0 || rank > AF_MAX_RANK) return af_ctx_fail(c, AF_ERR_RUNTIME, "output %d has rank %d", i, rank);
    af_tensor_free_data(t);
    t->dtype = dtype;
    t->rank = rank;
    for (int d = 0; d < rank; d++) t->dims[d] = dims[d];
    af_status st = af_tensor_alloc(t, c->err);
    if (st != AF_OK) return af_error_prefix(c->err, st, "node '%s' (%s)", c->node->name, c->node->op_type);
    return AF_OK;
}

void af_shape_copy(af_tensor *out, const af_tensor *in) {
    out->dtype = in->dtype;
    out->rank = in->rank;
    for (int d = 0; d < AF_MAX_RANK; d++) out->dims[d] = d < in->rank ? in->dims[d] : 0;
}

af_status af_shape_broadcast(const af_op_ctx *c, int n, const af_tensor *const *in, af_tensor *out) {
    int rank = 0;
    for (int k = 0; k < n; k++) {
        if (!in[k]) continue;
        if (in[k]->rank < 0) {
            out->rank = -1;
            return AF_OK;
        }
        if (in[k]->rank > rank) rank = in[k]->rank;
    }
    out->rank = rank;
    for (int d = 0; d < rank; d++) {
        int64_t dim = 1;
        bool unknown = false;
        for (int k = 0; k < n; k++) {
            if (!in[k]) continue;
            int off = rank - in[k]->rank;
            if (d < off) continue;
            int64_t v = in[k]->dims[d - off];
            if (v < 0) {
                unknown = true;
            } else if (v != 1) {
                if (dim != 1 && dim != v)
                    return af_ctx_fail(c, AF_ERR_INVALID_MODEL,
                                       "inputs cannot broadcast: dim %d is %lld and %lld", d,
                                       (long long)dim, (long long)v);
                dim = v;
            }
        }
        /* An unknown dim broadcast against a known dim > 1 must equal it. */
        out->dims[d] = unknown && dim == 1 ? -1 : dim;
    }
    return AF_OK;
}

af_status af_ctx_axis(const af_op_ctx *c, int64_t axis, int rank, int *out) {
    if (axis < -rank || axis >= rank)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "axis %lld is out of range for rank %d",
                           (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return AF_OK;
}
