/* Reference kernels for the Reduce* family, ArgMax/ArgMin and CumSum. Floating types accumulate in
 * double; integer types in 64-bit two's complement (wrapping like the narrower type would). */
#include <math.h>
#include <string.h>

#include "ir/shape/reduce.h"
#include "util/alloc.h"

/* The value each reduced element contributes before it is combined: x, |x| or x*x. */
static double term_f64(af_op op, double v) {
    switch (op) {
    case AF_OP_REDUCE_L1: return fabs(v);
    case AF_OP_REDUCE_L2:
    case AF_OP_REDUCE_SUM_SQUARE: return v * v;
    default: return v;
    }
}

static uint64_t term_u64(af_op op, int64_t v, bool is_unsigned) {
    switch (op) {
    case AF_OP_REDUCE_L1: return v < 0 && !is_unsigned ? 0 - (uint64_t)v : (uint64_t)v;
    case AF_OP_REDUCE_L2:
    case AF_OP_REDUCE_SUM_SQUARE: return (uint64_t)v * (uint64_t)v;
    default: return (uint64_t)v;
    }
}

/* Turns an accumulated sum (or product) of `count` terms into the result. */
static double finish(af_op op, double acc, int64_t count) {
    switch (op) {
    case AF_OP_REDUCE_MEAN: return count ? acc / (double)count : NAN;
    case AF_OP_REDUCE_L2: return sqrt(acc);
    case AF_OP_REDUCE_LOG_SUM: return log(acc);
    default: return acc;
    }
}

/* Max/Min: the index of the winning element (NaN wins, as numpy propagates it), copied bytewise. */
static af_status reduce_extreme(af_op_ctx *c, const af_tensor *x, af_tensor *y, const int64_t *ostride,
                                int64_t n_out) {
    bool want_max = c->node->op == AF_OP_REDUCE_MAX;
    int64_t *best = af_malloc((size_t)(n_out ? n_out : 1) * sizeof *best);
    if (!best) return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t o = 0; o < n_out; o++) best[o] = -1;
    int64_t n = af_tensor_numel(x), idx[AF_MAX_RANK] = {0}, o = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t b = best[o];
        if (b < 0 || (!af_reduce_isnan(x, b) && (af_reduce_isnan(x, i) ||
                                                 af_reduce_cmp(x, i, b) * (want_max ? 1 : -1) > 0)))
            best[o] = i;
        for (int d = x->rank - 1; d >= 0; d--) {
            o += ostride[d];
            if (++idx[d] < x->dims[d]) break;
            o -= ostride[d] * idx[d];
            idx[d] = 0;
        }
    }
    size_t es = af_dtype_size(x->dtype);
    for (int64_t k = 0; k < n_out; k++) {
        if (best[k] >= 0) {
            memcpy((char *)y->data + (size_t)k * es, (const char *)x->data + (size_t)best[k] * es, es);
        } else if (af_reduce_is_int(x->dtype)) { /* empty set: the type's lowest / highest value */
            bool u = af_reduce_is_unsigned(x->dtype);
            int bits = (int)es * 8;
            uint64_t hi = u ? (bits == 64 ? UINT64_MAX : (1ull << bits) - 1) : (1ull << (bits - 1)) - 1;
            if (want_max)
                af_tensor_set_i64(y, k, u ? 0 : -(int64_t)hi - 1);
            else
                af_tensor_set_i64(y, k, (int64_t)hi);
        } else {
            af_tensor_set_f64(y, k, want_max ? -INFINITY : INFINITY);
        }
    }
    af_free(best);
    return AF_OK;
}

static af_status reduce_run(af_op_ctx *c) {
    const af_tensor *x = af_ctx_input(c, 0);
    af_tensor *y = af_ctx_output(c, 0);
    af_op op = c->node->op;
    bool mask[AF_MAX_RANK], known;
    af_status st = af_reduce_axes(c, x->rank, mask, &known);
    if (st != AF_OK) return st;
    if (!known) return af_ctx_fail(c, AF_ERR_RUNTIME, "axes have no value");
    /* ostride[d]: how far the output offset moves per step of input dim d (0 when reduced). */
    int64_t ostride[AF_MAX_RANK], n_out = 1, count = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        ostride[d] = mask[d] ? 0 : n_out;
        if (mask[d])
            count *= x->dims[d];
        else
            n_out *= x->dims[d];
    }
    if (af_tensor_numel(y) != n_out)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "output has %lld elements, expected %lld",
                           (long long)af_tensor_numel(y), (long long)n_out);
    if (op == AF_OP_REDUCE_MAX || op == AF_OP_REDUCE_MIN) return reduce_extreme(c, x, y, ostride, n_out);

    bool is_int = af_reduce_is_int(x->dtype) && op != AF_OP_REDUCE_LOG_SUM_EXP;
    bool is_unsigned = af_reduce_is_unsigned(x->dtype);
    bool prod = op == AF_OP_REDUCE_PROD;
    size_t n_acc = (size_t)(n_out ? n_out : 1);
    double *acc = af_malloc(n_acc * sizeof *acc), *shift = NULL;
    uint64_t *iacc = af_malloc(n_acc * sizeof *iacc);
    if (op == AF_OP_REDUCE_LOG_SUM_EXP) shift = af_malloc(n_acc * sizeof *shift);
    if (!acc || !iacc || (op == AF_OP_REDUCE_LOG_SUM_EXP && !shift)) {
        af_free(acc);
        af_free(iacc);
        af_free(shift);
        return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int64_t o = 0; o < n_out; o++) {
        acc[o] = prod ? 1 : 0;
        iacc[o] = prod ? 1 : 0;
        if (shift) shift[o] = -INFINITY;
    }
    int64_t n = af_tensor_numel(x);
    /* LogSumExp subtracts each group's max first (a finite one) so exp cannot overflow. */
    for (int pass = shift ? 0 : 1; pass < 2; pass++) {
        int64_t idx[AF_MAX_RANK] = {0}, o = 0;
        for (int64_t i = 0; i < n; i++) {
            if (pass == 0) {
                double v = af_tensor_get_f64(x, i);
                if (v > shift[o] || isnan(v)) shift[o] = v;
            } else if (shift) {
                acc[o] += exp(af_tensor_get_f64(x, i) - shift[o]);
            } else if (is_int) {
                uint64_t t = term_u64(op, af_tensor_get_i64(x, i), is_unsigned);
                iacc[o] = prod ? iacc[o] * t : iacc[o] + t;
            } else {
                double t = term_f64(op, af_tensor_get_f64(x, i));
                acc[o] = prod ? acc[o] * t : acc[o] + t;
            }
            for (int d = x->rank - 1; d >= 0; d--) {
                o += ostride[d];
                if (++idx[d] < x->dims[d]) break;
                o -= ostride[d] * idx[d];
                idx[d] = 0;
            }
        }
        if (pass == 0)
            for (int64_t k = 0; k < n_out; k++)
                if (!isfinite(shift[k]) && !isnan(shift[k])) shift[k] = 0;
    }
    for (int64_t o = 0; o < n_out; o++) {
        if (shift) {
            af_tensor_set_f64(y, o, log(acc[o]) + shift[o]);
        } else if (is_int) {
            bool exact = op != AF_OP_REDUCE_MEAN && op != AF_OP_REDUCE_L2 && op != AF_OP_REDUCE_LOG_SUM;
            double v = is_unsigned ? (double)iacc[o] : (double)(int64_t)iacc[o];
            if (exact)
                af_tensor_set_i64(y, o, (int64_t)iacc[o]);
            else
                af_tensor_set_f64(y, o, finish(op, v, count));
        } else {
            af_tensor_set_f64(y, o, finish(op, acc[o], count));
        }
    }
    af_free(acc);
    af_free(iacc);
    af_free(shift);
    return AF_OK;
}

af_status af_ref_REDUCE_MEAN(af_op_ctx *c) { return reduce_run(c); }
af_status af_ref_REDUCE_SUM(af_op_ctx *c) { return reduce_run(c); }
af_status af_ref_REDUCE_MAX(af_op_ctx *c) { return reduce_run(c); }
af_status af_ref_REDUCE_MIN(af_op_ctx *c) { return reduce_run(c); }
af_status af_ref_REDUCE_PROD(af_op_ctx *c) { return reduce_run(c); }
af_status af_ref_REDUCE_L1(af_op_ctx *c) { return reduce_run(c); }
af_status af_ref_REDUCE_L2(af_op_ctx *c) { return reduce_run(c); }
af_status af_ref_REDUCE_LOG_SUM(af_op_ctx *c) { return reduce_run(c); }
af_status af_ref_REDUCE_LOG_SUM_EXP(af_op_ctx *c) { return reduce_run(c); }
af_status af_ref_REDUCE_SUM_SQUARE(af_op_ctx *c) { return reduce_run(c); }

/* ArgMax/ArgMin along one axis; ties go to the first index, or the last with select_last_index. */
static af_status arg_run(af_op_ctx *c, bool want_max) {
    const af_tensor *x = af_ctx_input(c, 0);
    af_tensor *y = af_ctx_output(c, 0);
    int axis;
    af_status st = af_ctx_axis(c, af_node_attr_int(c->node, "axis", 0), x->rank, &axis);
    if (st != AF_OK) return st;
    bool last = af_node_attr_int(c->node, "select_last_index", 0) != 0;
    int64_t outer, n, inner;
    af_reduce_split(x, axis, axis + 1, &outer, &n, &inner);
    if (af_tensor_numel(y) != outer * inner)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "output has %lld elements, expected %lld",
                           (long long)af_tensor_numel(y), (long long)(outer * inner));
    if (n == 0 && outer * inner > 0) return af_ctx_fail(c, AF_ERR_RUNTIME, "axis %d has no elements", axis);
    int64_t *out = y->data;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * n * inner + in, best = 0;
            for (int64_t j = 1; j < n; j++) {
                int64_t i = base + j * inner, b = base + best * inner;
                bool bnan = af_reduce_isnan(x, b), inan = af_reduce_isnan(x, i);
                int cmp = bnan || inan ? inan - bnan : af_reduce_cmp(x, i, b) * (want_max ? 1 : -1);
                if (cmp > 0 || (cmp == 0 && last)) best = j;
            }
            out[o * inner + in] = best;
        }
    }
    return AF_OK;
}

af_status af_ref_ARG_MAX(af_op_ctx *c) { return arg_run(c, true); }
af_status af_ref_ARG_MIN(af_op_ctx *c) { return arg_run(c, false); }

af_status af_ref_CUM_SUM(af_op_ctx *c) {
    const af_tensor *x = af_ctx_input(c, 0), *a = af_ctx_input(c, 1);
    af_tensor *y = af_ctx_output(c, 0);
    if (af_tensor_numel(a) != 1) return af_ctx_fail(c, AF_ERR_RUNTIME, "axis must hold one value");
    int axis;
    af_status st = af_ctx_axis(c, af_tensor_get_i64(a, 0), x->rank, &axis);
    if (st != AF_OK) return st;
    if (!af_tensor_same_shape(x, y)) return af_ctx_fail(c, AF_ERR_RUNTIME, "output shape differs from input");
    bool exclusive = af_node_attr_int(c->node, "exclusive", 0) != 0;
    bool reverse = af_node_attr_int(c->node, "reverse", 0) != 0;
    bool is_int = af_reduce_is_int(x->dtype);
    int64_t outer, n, inner;
    af_reduce_split(x, axis, axis + 1, &outer, &n, &inner);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t in = 0; in < inner; in++) {
            double acc = 0;
            uint64_t iacc = 0;
            for (int64_t s = 0; s < n; s++) {
                int64_t i = o * n * inner + (reverse ? n - 1 - s : s) * inner + in;
                if (exclusive) {
                    if (is_int)
                        af_tensor_set_i64(y, i, (int64_t)iacc);
                    else
                        af_tensor_set_f64(y, i, acc);
                }
                if (is_int)
                    iacc += (uint64_t)af_tensor_get_i64(x, i);
                else
                    acc += af_tensor_get_f64(x, i);
                if (!exclusive) {
                    if (is_int)
                        af_tensor_set_i64(y, i, (int64_t)iacc);
                    else
                        af_tensor_set_f64(y, i, acc);
                }
            }
        }
    }
    return AF_OK;
}
