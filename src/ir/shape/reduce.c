/* Shape and dtype inference for the reductions along axes: Reduce*, ArgMax/ArgMin, CumSum,
 * Softmax/LogSoftmax/Hardmax and TopK, plus the axis helpers their kernels share (reduce.h). */
#include "ir/shape/reduce.h"

#include <math.h>
#include <string.h>

static bool is_float(af_dtype t) {
    return t == AF_DTYPE_FLOAT || t == AF_DTYPE_DOUBLE || t == AF_DTYPE_FLOAT16 || t == AF_DTYPE_BFLOAT16;
}

bool af_reduce_is_unsigned(af_dtype t) {
    return t == AF_DTYPE_UINT8 || t == AF_DTYPE_UINT16 || t == AF_DTYPE_UINT32 || t == AF_DTYPE_UINT64 ||
           t == AF_DTYPE_BOOL;
}

bool af_reduce_is_int(af_dtype t) {
    return af_reduce_is_unsigned(t) || t == AF_DTYPE_INT8 || t == AF_DTYPE_INT16 || t == AF_DTYPE_INT32 ||
           t == AF_DTYPE_INT64;
}

bool af_reduce_isnan(const af_tensor *t, int64_t i) {
    return is_float(t->dtype) && isnan(af_tensor_get_f64(t, i));
}

int af_reduce_cmp(const af_tensor *t, int64_t i, int64_t j) {
    if (t->dtype == AF_DTYPE_UINT64) {
        uint64_t a = ((const uint64_t *)t->data)[i], b = ((const uint64_t *)t->data)[j];
        return (a > b) - (a < b);
    }
    if (af_reduce_is_int(t->dtype)) {
        int64_t a = af_tensor_get_i64(t, i), b = af_tensor_get_i64(t, j);
        return (a > b) - (a < b);
    }
    double a = af_tensor_get_f64(t, i), b = af_tensor_get_f64(t, j);
    if (isnan(a) || isnan(b)) return isnan(a) - isnan(b);
    return (a > b) - (a < b);
}

void af_reduce_split(const af_tensor *t, int first, int last, int64_t *outer, int64_t *mid, int64_t *inner) {
    *outer = *mid = *inner = 1;
    for (int d = 0; d < t->rank; d++) {
        int64_t *p = d < first ? outer : d < last ? mid : inner;
        *p *= t->dims[d];
    }
}

/* The spec's element types: numeric always, bool where allowed; strings are never held. */
static af_status check_dtype(const af_op_ctx *c, af_dtype t, bool allow_int, bool allow_bool) {
    if (t == AF_DTYPE_UNDEFINED) return AF_OK;
    if (af_dtype_size(t) == 0 || t == AF_DTYPE_STRING)
        return af_ctx_fail(c, AF_ERR_UNSUPPORTED, "dtype %s is not supported", af_dtype_name(t));
    if ((t == AF_DTYPE_BOOL && !allow_bool) || (t != AF_DTYPE_BOOL && !is_float(t) && !allow_int))
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "input dtype %s is not allowed", af_dtype_name(t));
    return AF_OK;
}

static const af_tensor *need_input(const af_op_ctx *c, int i, const char *name) {
    const af_tensor *t = af_ctx_input(c, i);
    if (!t) af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs input %s", name);
    return t;
}

static af_status need_output(const af_op_ctx *c, int i) {
    if (!af_ctx_output(c, i)) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs output %d", i);
    return AF_OK;
}

af_status af_reduce_axes(const af_op_ctx *c, int rank, bool mask[AF_MAX_RANK], bool *known) {
    bool from_input = c->node->op == AF_OP_REDUCE_SUM ? c->opset >= 13 : c->opset >= 18;
    int64_t axes[AF_MAX_RANK];
    int64_t n = 0;
    *known = true;
    if (from_input) {
        const af_tensor *a = af_ctx_input(c, 1);
        if (a) {
            if (a->dtype != AF_DTYPE_INT64 && a->dtype != AF_DTYPE_INT32 && a->dtype != AF_DTYPE_UNDEFINED)
                return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "axes must be int64, not %s", af_dtype_name(a->dtype));
            if (a->rank > 1) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "axes must be 1-D, not rank %d", a->rank);
            if (!a->data) {
                *known = false;
                return AF_OK;
            }
            n = af_tensor_numel(a);
            if (n > rank) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "%lld axes for rank %d", (long long)n, rank);
            for (int64_t i = 0; i < n; i++) axes[i] = af_tensor_get_i64(a, i);
        }
    } else {
        const int64_t *v;
        int na = af_node_attr_ints(c->node, "axes", &v);
        if (na > rank) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "%d axes for rank %d", na, rank);
        for (int i = 0; i < na; i++) axes[i] = v[i];
        n = na > 0 ? na : 0;
    }
    if (n == 0) {
        bool noop = af_node_attr_int(c->node, "noop_with_empty_axes", 0) != 0;
        for (int d = 0; d < AF_MAX_RANK; d++) mask[d] = !noop && d < rank;
        return AF_OK;
    }
    for (int d = 0; d < AF_MAX_RANK; d++) mask[d] = false;
    for (int64_t i = 0; i < n; i++) {
        int ax;
        af_status st = af_ctx_axis(c, axes[i], rank, &ax);
        if (st != AF_OK) return st;
        if (mask[ax]) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "axis %lld is repeated", (long long)axes[i]);
        mask[ax] = true;
    }
    return AF_OK;
}

/* Reduce*: same dtype, reduced dims kept as 1 or removed. */
static af_status infer_reduce(af_op_ctx *c) {
    const af_tensor *x = need_input(c, 0, "data");
    if (!x) return AF_ERR_INVALID_MODEL;
    if (need_output(c, 0) != AF_OK) return AF_ERR_INVALID_MODEL;
    af_op op = c->node->op;
    af_status st = check_dtype(c, x->dtype, true, op == AF_OP_REDUCE_MAX || op == AF_OP_REDUCE_MIN);
    if (st != AF_OK) return st;
    bool keep = af_node_attr_int(c->node, "keepdims", 1) != 0;
    af_tensor *y = c->outputs[0];
    *y = (af_tensor){.dtype = x->dtype, .rank = -1};
    if (x->rank < 0) return AF_OK;
    bool mask[AF_MAX_RANK], known;
    st = af_reduce_axes(c, x->rank, mask, &known);
    if (st != AF_OK) return st;
    if (!known) {
        if (!keep) return AF_OK;
        y->rank = x->rank;
        for (int d = 0; d < x->rank; d++) y->dims[d] = x->dims[d] == 1 ? 1 : -1;
        return AF_OK;
    }
    y->rank = 0;
    for (int d = 0; d < x->rank; d++) {
        if (!mask[d])
            y->dims[y->rank++] = x->dims[d];
        else if (keep)
            y->dims[y->rank++] = 1;
    }
    return AF_OK;
}

af_status af_infer_REDUCE_MEAN(af_op_ctx *c) { return infer_reduce(c); }
af_status af_infer_REDUCE_SUM(af_op_ctx *c) { return infer_reduce(c); }
af_status af_infer_REDUCE_MAX(af_op_ctx *c) { return infer_reduce(c); }
af_status af_infer_REDUCE_MIN(af_op_ctx *c) { return infer_reduce(c); }
af_status af_infer_REDUCE_PROD(af_op_ctx *c) { return infer_reduce(c); }
af_status af_infer_REDUCE_L1(af_op_ctx *c) { return infer_reduce(c); }
af_status af_infer_REDUCE_L2(af_op_ctx *c) { return infer_reduce(c); }
af_status af_infer_REDUCE_LOG_SUM(af_op_ctx *c) { return infer_reduce(c); }
af_status af_infer_REDUCE_LOG_SUM_EXP(af_op_ctx *c) { return infer_reduce(c); }
af_status af_infer_REDUCE_SUM_SQUARE(af_op_ctx *c) { return infer_reduce(c); }

/* ArgMax/ArgMin: int64 indices, the axis kept as 1 or removed. */
static af_status infer_arg(af_op_ctx *c) {
    const af_tensor *x = need_input(c, 0, "data");
    if (!x) return AF_ERR_INVALID_MODEL;
    if (need_output(c, 0) != AF_OK) return AF_ERR_INVALID_MODEL;
    af_status st = check_dtype(c, x->dtype, true, false);
    if (st != AF_OK) return st;
    bool keep = af_node_attr_int(c->node, "keepdims", 1) != 0;
    af_tensor *y = c->outputs[0];
    *y = (af_tensor){.dtype = AF_DTYPE_INT64, .rank = -1};
    if (x->rank < 0) return AF_OK;
    int axis;
    st = af_ctx_axis(c, af_node_attr_int(c->node, "axis", 0), x->rank, &axis);
    if (st != AF_OK) return st;
    if (x->dims[axis] == 0) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "axis %d has no elements", axis);
    y->rank = 0;
    for (int d = 0; d < x->rank; d++) {
        if (d != axis)
            y->dims[y->rank++] = x->dims[d];
        else if (keep)
            y->dims[y->rank++] = 1;
    }
    return AF_OK;
}

af_status af_infer_ARG_MAX(af_op_ctx *c) { return infer_arg(c); }
af_status af_infer_ARG_MIN(af_op_ctx *c) { return infer_arg(c); }

af_status af_infer_CUM_SUM(af_op_ctx *c) {
    const af_tensor *x = need_input(c, 0, "x");
    if (!x) return AF_ERR_INVALID_MODEL;
    const af_tensor *a = need_input(c, 1, "axis");
    if (!a) return AF_ERR_INVALID_MODEL;
    if (need_output(c, 0) != AF_OK) return AF_ERR_INVALID_MODEL;
    af_status st = check_dtype(c, x->dtype, true, false);
    if (st != AF_OK) return st;
    if (a->dtype != AF_DTYPE_INT64 && a->dtype != AF_DTYPE_INT32 && a->dtype != AF_DTYPE_UNDEFINED)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "axis must be int32 or int64, not %s", af_dtype_name(a->dtype));
    if (a->rank > 1 || (a->rank == 1 && a->dims[0] >= 0 && a->dims[0] != 1))
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "axis must hold one value");
    if (a->data && x->rank >= 0) {
        int axis;
        st = af_ctx_axis(c, af_tensor_get_i64(a, 0), x->rank, &axis);
        if (st != AF_OK) return st;
    }
    af_shape_copy(c->outputs[0], x);
    return AF_OK;
}

af_status af_reduce_softmax_axis(const af_op_ctx *c, int rank, int *axis) {
    if (c->opset >= 13) return af_ctx_axis(c, af_node_attr_int(c->node, "axis", -1), rank, axis);
    /* Coerced to 2-D like Flatten, so axis == rank is valid (all of the input is the batch). */
    int64_t a = af_node_attr_int(c->node, "axis", 1);
    if (a < -rank || a > rank)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "axis %lld is out of range for rank %d", (long long)a, rank);
    *axis = (int)(a < 0 ? a + rank : a);
    return AF_OK;
}

static af_status infer_softmax(af_op_ctx *c) {
    const af_tensor *x = need_input(c, 0, "input");
    if (!x) return AF_ERR_INVALID_MODEL;
    if (need_output(c, 0) != AF_OK) return AF_ERR_INVALID_MODEL;
    af_status st = check_dtype(c, x->dtype, false, false);
    if (st != AF_OK) return st;
    if (x->rank >= 0) {
        int axis;
        st = af_reduce_softmax_axis(c, x->rank, &axis);
        if (st != AF_OK) return st;
    }
    af_shape_copy(c->outputs[0], x);
    return AF_OK;
}

af_status af_infer_SOFTMAX(af_op_ctx *c) { return infer_softmax(c); }
af_status af_infer_LOG_SOFTMAX(af_op_ctx *c) { return infer_softmax(c); }
af_status af_infer_HARDMAX(af_op_ctx *c) { return infer_softmax(c); }

af_status af_infer_TOP_K(af_op_ctx *c) {
    const af_tensor *x = need_input(c, 0, "X");
    if (!x) return AF_ERR_INVALID_MODEL;
    if (need_output(c, 0) != AF_OK || need_output(c, 1) != AF_OK) return AF_ERR_INVALID_MODEL;
    af_status st = check_dtype(c, x->dtype, true, false);
    if (st != AF_OK) return st;
    int64_t k = -1;
    bool k_known = true;
    if (c->opset >= 10) {
        const af_tensor *kt = need_input(c, 1, "K");
        if (!kt) return AF_ERR_INVALID_MODEL;
        if (kt->dtype != AF_DTYPE_INT64 && kt->dtype != AF_DTYPE_UNDEFINED)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "K must be int64, not %s", af_dtype_name(kt->dtype));
        if (kt->rank > 1 || (kt->rank == 1 && kt->dims[0] >= 0 && kt->dims[0] != 1))
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "K must hold one value");
        k_known = kt->data != NULL;
        if (k_known) k = af_tensor_get_i64(kt, 0);
    } else {
        if (!af_node_attr(c->node, "k")) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs attribute k");
        k = af_node_attr_int(c->node, "k", 0);
    }
    if (k_known && k < 0)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "k is %lld, must be >= 0", (long long)k);
    af_tensor *v = c->outputs[0], *idx = c->outputs[1];
    *v = (af_tensor){.dtype = x->dtype, .rank = x->rank};
    *idx = (af_tensor){.dtype = AF_DTYPE_INT64, .rank = x->rank};
    if (x->rank < 0) return AF_OK;
    int axis;
    st = af_ctx_axis(c, af_node_attr_int(c->node, "axis", -1), x->rank, &axis);
    if (st != AF_OK) return st;
    if (k_known && x->dims[axis] >= 0 && k > x->dims[axis])
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "k %lld exceeds dim %d of size %lld", (long long)k, axis,
                           (long long)x->dims[axis]);
    for (int d = 0; d < x->rank; d++) v->dims[d] = idx->dims[d] = d == axis ? k : x->dims[d];
    return AF_OK;
}
