/* Shape functions of MaxPool, AveragePool, GlobalMaxPool and GlobalAveragePool: X is
 * (N, C, D1..Dn); the windowed pools size their output through ir/shape/conv_geom. */
#include "ir/shape/conv_geom.h"

static af_status check_dtype(af_op_ctx *c, const af_tensor *x, bool ints, const char *op) {
    if (af_conv_is_float(x->dtype)) return AF_OK;
    if (ints && (x->dtype == AF_DTYPE_INT8 || x->dtype == AF_DTYPE_UINT8)) return AF_OK;
    return af_ctx_fail(c, AF_ERR_UNSUPPORTED, "X has dtype %s; %s supports float types%s",
                       af_dtype_name(x->dtype), op, ints ? ", int8 and uint8" : "");
}

static af_status infer_window(af_op_ctx *c, bool max) {
    const char *op = max ? "MaxPool" : "AveragePool";
    const af_tensor *x = af_ctx_input(c, 0);
    if (!x) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs input X");
    af_status st = check_dtype(c, x, max, op);
    if (st != AF_OK) return st;
    const int64_t *ks;
    int n_sp = af_node_attr_ints(c->node, "kernel_shape", &ks);
    if (n_sp < 0) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs the kernel_shape attribute");
    if (x->rank >= 0 && x->rank != n_sp + 2)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "X has %d dims but kernel_shape has %d values",
                           x->rank, n_sp);
    if (n_sp < 1 || n_sp > 3)
        return af_ctx_fail(c, n_sp < 1 ? AF_ERR_INVALID_MODEL : AF_ERR_UNSUPPORTED,
                           "%d spatial dims; %s supports 1 to 3", n_sp, op);
    int64_t order = af_node_attr_int(c->node, "storage_order", 0);
    if (max && order != 0 && order != 1)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "storage_order must be 0 or 1, not %lld",
                           (long long)order);
    int64_t cip = af_node_attr_int(c->node, "count_include_pad", 0);
    if (!max && cip != 0 && cip != 1)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "count_include_pad must be 0 or 1, not %lld",
                           (long long)cip);
    af_conv_geom g;
    if ((st = af_conv_geom_init(c, n_sp, NULL, &g)) != AF_OK) return st;
    af_tensor y = {.dtype = x->dtype, .rank = n_sp + 2};
    int64_t in[AF_CONV_MAX_SP];
    for (int i = 0; i < n_sp; i++) in[i] = x->rank >= 0 ? x->dims[2 + i] : -1;
    if ((st = af_conv_geom_forward(c, &g, in, y.dims + 2)) != AF_OK) return st;
    y.dims[0] = x->rank >= 0 ? x->dims[0] : -1;
    y.dims[1] = x->rank >= 0 ? x->dims[1] : -1;
    af_tensor *out = af_ctx_output(c, 0);
    if (out) af_shape_copy(out, &y);
    af_tensor *idx = max ? af_ctx_output(c, 1) : NULL;
    if (idx) {
        af_shape_copy(idx, &y);
        idx->dtype = AF_DTYPE_INT64;
    }
    return AF_OK;
}

static af_status infer_global(af_op_ctx *c, const char *op) {
    const af_tensor *x = af_ctx_input(c, 0);
    if (!x) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs input X");
    af_status st = check_dtype(c, x, false, op);
    if (st != AF_OK) return st;
    if (x->rank >= 0 && x->rank < 2)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "X has %d dims; %s needs N and C", x->rank, op);
    af_tensor *y = af_ctx_output(c, 0);
    if (!y) return AF_OK;
    af_shape_copy(y, x);
    for (int i = 2; i < x->rank; i++) y->dims[i] = 1;
    return AF_OK;
}

af_status af_infer_MAX_POOL(af_op_ctx *ctx) { return infer_window(ctx, true); }

af_status af_infer_AVERAGE_POOL(af_op_ctx *ctx) { return infer_window(ctx, false); }

af_status af_infer_GLOBAL_MAX_POOL(af_op_ctx *ctx) { return infer_global(ctx, "GlobalMaxPool"); }

af_status af_infer_GLOBAL_AVERAGE_POOL(af_op_ctx *ctx) {
    return infer_global(ctx, "GlobalAveragePool");
}
