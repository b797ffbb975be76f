/* Shape functions of Conv and ConvTranspose: X is (N, C, D1..Dn), W is (M, C/group, k1..kn) for
 * Conv and (C, M/group, k1..kn) for ConvTranspose; spatial sizes come from ir/shape/conv_geom. */
#include "ir/shape/conv_geom.h"
#include "util/alloc.h"

/* Checks what Conv and ConvTranspose share and finds the rank; *rank is -1 when unknown. */
static af_status check_inputs(af_op_ctx *c, const char *op, int *rank) {
    const af_tensor *x = af_ctx_input(c, 0), *w = af_ctx_input(c, 1), *b = af_ctx_input(c, 2);
    if (!x || !w) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs inputs X and W");
    if (!af_conv_is_float(x->dtype))
        return af_ctx_fail(c, AF_ERR_UNSUPPORTED, "X has dtype %s; %s supports float types",
                           af_dtype_name(x->dtype), op);
    if (w->dtype != x->dtype)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "W has dtype %s but X has %s",
                           af_dtype_name(w->dtype), af_dtype_name(x->dtype));
    if (b && b->dtype != x->dtype)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "B has dtype %s but X has %s",
                           af_dtype_name(b->dtype), af_dtype_name(x->dtype));
    if (b && b->rank >= 0 && b->rank != 1)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "B has %d dims, expected 1", b->rank);
    if (x->rank >= 0 && w->rank >= 0 && x->rank != w->rank)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "X has %d dims but W has %d", x->rank, w->rank);
    *rank = x->rank >= 0 ? x->rank : w->rank;
    if (*rank < 0) {
        const int64_t *ks;
        int nk = af_node_attr_ints(c->node, "kernel_shape", &ks);
        if (nk >= 0) *rank = nk + 2;
    }
    if (*rank >= 0 && *rank < 3)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL,
                           "%s has %d dims; %s needs N, C and spatial dims",
                           x->rank >= 0 ? "X" : "W", *rank, op);
    if (*rank > 5)
        return af_ctx_fail(c, AF_ERR_UNSUPPORTED, "%d spatial dims; %s supports 1 to 3", *rank - 2,
                           op);
    if (af_node_attr_int(c->node, "group", 1) < 1)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "group must be at least 1");
    return AF_OK;
}

/* Output channels must agree with B's length when both are known. */
static af_status check_bias(af_op_ctx *c, int64_t m) {
    const af_tensor *b = af_ctx_input(c, 2);
    if (b && b->rank == 1 && b->dims[0] >= 0 && m >= 0 && b->dims[0] != m)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "B has %lld values for %lld output channels",
                           (long long)b->dims[0], (long long)m);
    return AF_OK;
}

static af_status infer(af_op_ctx *c, bool transpose) {
    const char *op = transpose ? "ConvTranspose" : "Conv";
    int rank = -1;
    af_status st = check_inputs(c, op, &rank);
    if (st != AF_OK) return st;
    const af_tensor *x = af_ctx_input(c, 0), *w = af_ctx_input(c, 1), *b = af_ctx_input(c, 2);
    af_tensor y = {.dtype = x->dtype, .rank = rank};
    if (rank >= 0) {
        int n_sp = rank - 2;
        int64_t group = af_node_attr_int(c->node, "group", 1);
        int64_t in[AF_CONV_MAX_SP], wk[AF_CONV_MAX_SP];
        for (int i = 0; i < n_sp; i++) {
            in[i] = x->rank >= 0 ? x->dims[2 + i] : -1;
            wk[i] = w->rank >= 0 ? w->dims[2 + i] : -1;
        }
        int64_t ch = x->rank >= 0 ? x->dims[1] : -1; /* input channels */
        int64_t w0 = w->rank >= 0 ? w->dims[0] : -1, w1 = w->rank >= 0 ? w->dims[1] : -1;
        int64_t m;
        if (!transpose) {
            m = w0;
            if (m >= 0 && m % group != 0)
                return af_ctx_fail(c, AF_ERR_INVALID_MODEL,
                                   "%lld output channels do not split into %lld groups",
                                   (long long)m, (long long)group);
            int64_t per_group_total;
            if (ch >= 0 && w1 >= 0 && (!af_mul_i64(w1, group, &per_group_total) || ch != per_group_total))
                return af_ctx_fail(c, AF_ERR_INVALID_MODEL,
                                   "X has %lld channels but W expects %lld per group x %lld groups",
                                   (long long)ch, (long long)w1, (long long)group);
        } else {
            m = -1;
            if (w1 >= 0 && !af_mul_i64(w1, group, &m))
                return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "%lld groups of %lld output channels overflow",
                                   (long long)group, (long long)w1);
            if (ch >= 0 && w0 >= 0 && ch != w0)
                return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "X has %lld channels but W has %lld",
                                   (long long)ch, (long long)w0);
            if (w0 >= 0 && w0 % group != 0)
                return af_ctx_fail(c, AF_ERR_INVALID_MODEL,
                                   "%lld input channels do not split into %lld groups",
                                   (long long)w0, (long long)group);
        }
        if ((st = check_bias(c, m)) != AF_OK) return st;
        if (m < 0 && b && b->rank == 1) m = b->dims[0];
        af_conv_geom g;
        if ((st = af_conv_geom_init(c, n_sp, wk, &g)) != AF_OK) return st;
        st = transpose ? af_conv_geom_transpose(c, &g, in, y.dims + 2)
                       : af_conv_geom_forward(c, &g, in, y.dims + 2);
        if (st != AF_OK) return st;
        y.dims[0] = x->rank >= 0 ? x->dims[0] : -1;
        y.dims[1] = m;
    }
    af_tensor *out = af_ctx_output(c, 0);
    if (out) af_shape_copy(out, &y);
    return AF_OK;
}

af_status af_infer_CONV(af_op_ctx *ctx) { return infer(ctx, false); }

af_status af_infer_CONV_TRANSPOSE(af_op_ctx *ctx) { return infer(ctx, true); }
