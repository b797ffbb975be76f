/* Shape functions of the generator ops: Shape, Size, ConstantOfShape, Range, NonZero, EyeLike,
 * and the helpers their kernels share (ir/shape/generators.h). */
#include "ir/shape/generators.h"

#include <math.h>

#include "ir/shape/movement.h"

/* Unlike af_movement_need_input, no dtype check: Shape and Size read only the input's shape. */
static af_status need_input(const af_op_ctx *c, int i, const char *name, const af_tensor **x) {
    *x = af_ctx_input(c, i);
    if (!*x) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs input %s", name);
    return AF_OK;
}

void af_generators_shape_range(const af_op_ctx *c, int rank, int *start, int *end) {
    int64_t s = 0, e = rank;
    if (c->opset >= 15) {
        s = af_node_attr_int(c->node, "start", 0);
        e = af_node_attr_int(c->node, "end", rank);
    }
    if (s < 0) s += rank;
    if (e < 0) e += rank;
    s = s < 0 ? 0 : s > rank ? rank : s;
    e = e < 0 ? 0 : e > rank ? rank : e;
    *start = (int)s;
    *end = (int)(e > s ? e : s);
}

af_status af_infer_SHAPE(af_op_ctx *c) {
    const af_tensor *x;
    af_tensor *out;
    af_status st;
    if ((st = need_input(c, 0, "data", &x)) || (st = af_movement_need_output(c, &out))) return st;
    af_movement_unknown(out, AF_DTYPE_INT64, 1);
    if (x->rank < 0) return AF_OK;
    int start, end;
    af_generators_shape_range(c, x->rank, &start, &end);
    out->dims[0] = end - start;
    return AF_OK;
}

af_status af_infer_SIZE(af_op_ctx *c) {
    const af_tensor *x;
    af_tensor *out;
    af_status st;
    if ((st = need_input(c, 0, "data", &x)) || (st = af_movement_need_output(c, &out))) return st;
    af_movement_unknown(out, AF_DTYPE_INT64, 0);
    return AF_OK;
}

af_status af_generators_fill_value(const af_op_ctx *c, af_tensor *value) {
    static float zero = 0.0f;
    const af_attr *a = af_node_attr(c->node, "value");
    if (!a) {
        *value = (af_tensor){.dtype = AF_DTYPE_FLOAT, .rank = 0, .data = &zero, .nbytes = sizeof zero};
        return AF_OK;
    }
    if (a->type != AF_ATTR_TENSOR || af_tensor_numel(&a->t) != 1 || !a->t.data)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "value must be a tensor of one element");
    if (af_dtype_size(a->t.dtype) == 0)
        return af_ctx_fail(c, AF_ERR_UNSUPPORTED, "value has dtype %s, which is not supported",
                           af_dtype_name(a->t.dtype));
    *value = a->t;
    return AF_OK;
}

af_status af_infer_CONSTANT_OF_SHAPE(af_op_ctx *c) {
    const af_tensor *s;
    af_tensor *out, value;
    af_status st;
    if ((st = need_input(c, 0, "input", &s)) || (st = af_movement_need_output(c, &out)) ||
        (st = af_generators_fill_value(c, &value)))
        return st;
    if (!af_movement_known(s)) {
        int64_t n = af_movement_len(s);
        if ((st = af_movement_check_rank(c, n))) return st;
        af_movement_unknown(out, value.dtype, (int)n);
        return AF_OK;
    }
    int n;
    af_movement_unknown(out, value.dtype, 0);
    if ((st = af_movement_read_ints(c, s, "shape", AF_MAX_RANK, out->dims, &n))) return st;
    out->rank = n;
    for (int i = 0; i < n; i++)
        if (out->dims[i] < 0)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "shape value %lld is negative",
                               (long long)out->dims[i]);
    return af_movement_check_numel(c, n, out->dims);
}

static bool range_dtype(af_dtype dt) {
    return dt == AF_DTYPE_FLOAT || dt == AF_DTYPE_DOUBLE || dt == AF_DTYPE_FLOAT16 ||
           dt == AF_DTYPE_BFLOAT16 || af_movement_is_int(dt);
}

af_status af_generators_range_count(const af_op_ctx *c, int64_t *count) {
    const af_tensor *s = c->inputs[0], *l = c->inputs[1], *d = c->inputs[2];
    for (int i = 0; i < 3; i++)
        if (af_tensor_numel(c->inputs[i]) != 1)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "input %d must be a scalar", i);
    *count = 0;
    if (af_movement_is_int(s->dtype)) {
        /* Exact in integers: the difference of two int64 fits in uint64. */
        int64_t a = af_tensor_get_i64(s, 0), b = af_tensor_get_i64(l, 0), step = af_tensor_get_i64(d, 0);
        if (step == 0) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "delta is 0");
        uint64_t span, mag;
        if (step > 0 && b > a)
            span = (uint64_t)b - (uint64_t)a, mag = (uint64_t)step;
        else if (step < 0 && a > b)
            span = (uint64_t)a - (uint64_t)b, mag = 0 - (uint64_t)step;
        else
            return AF_OK;
        uint64_t n = span / mag + (span % mag != 0);
        if (n > (uint64_t)INT64_MAX) return af_ctx_fail(c, AF_ERR_LIMIT, "range has too many elements");
        *count = (int64_t)n;
        return AF_OK;
    }
    double a = af_tensor_get_f64(s, 0), b = af_tensor_get_f64(l, 0), step = af_tensor_get_f64(d, 0);
    if (step == 0 || !isfinite(a) || !isfinite(b) || !isfinite(step))
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "start, limit and delta must be finite, delta not 0");
    double n = ceil((b - a) / step);
    if (n > 9e18) return af_ctx_fail(c, AF_ERR_LIMIT, "range has too many elements");
    *count = n > 0 ? (int64_t)n : 0;
    return AF_OK;
}

af_status af_infer_RANGE(af_op_ctx *c) {
    const af_tensor *in[3];
    af_tensor *out;
    af_status st;
    if ((st = need_input(c, 0, "start", &in[0])) || (st = need_input(c, 1, "limit", &in[1])) ||
        (st = need_input(c, 2, "delta", &in[2])) || (st = af_movement_need_output(c, &out)))
        return st;
    af_dtype dt = in[0]->dtype;
    for (int i = 0; i < 3; i++) {
        if (in[i]->dtype != dt)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "input %d is %s, start is %s", i,
                               af_dtype_name(in[i]->dtype), af_dtype_name(dt));
        if (in[i]->rank > 1 || (in[i]->rank >= 0 && af_tensor_numel(in[i]) > 1))
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "input %d must be a scalar", i);
    }
    if (dt != AF_DTYPE_UNDEFINED && !range_dtype(dt))
        return af_ctx_fail(c, AF_ERR_UNSUPPORTED, "Range of %s is not supported", af_dtype_name(dt));
    af_movement_unknown(out, dt, 1);
    if (!af_movement_known(in[0]) || !af_movement_known(in[1]) || !af_movement_known(in[2])) return AF_OK;
    return af_generators_range_count(c, &out->dims[0]);
}

int64_t af_generators_count_nonzero(const af_tensor *t) {
    int64_t n = af_tensor_numel(t), nz = 0;
    for (int64_t i = 0; i < n; i++) nz += af_tensor_get_f64(t, i) != 0;
    return nz;
}

af_status af_infer_NON_ZERO(af_op_ctx *c) {
    const af_tensor *x;
    af_tensor *out;
    af_status st;
    if ((st = need_input(c, 0, "X", &x)) || (st = af_movement_need_output(c, &out)) ||
        (st = af_movement_check_dtype(c, x, "X")))
        return st;
    af_movement_unknown(out, AF_DTYPE_INT64, 2);
    /* A scalar reports one coordinate row, as numpy's atleast_1d view of it does. */
    if (x->rank >= 0) out->dims[0] = x->rank > 0 ? x->rank : 1;
    if (af_movement_known(x)) out->dims[1] = af_generators_count_nonzero(x);
    return AF_OK;
}

af_status af_infer_EYE_LIKE(af_op_ctx *c) {
    const af_tensor *x;
    af_tensor *out;
    af_status st;
    if ((st = need_input(c, 0, "input", &x)) || (st = af_movement_need_output(c, &out))) return st;
    if (x->rank >= 0 && x->rank != 2)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "input has rank %d, expected 2", x->rank);
    int64_t dt = af_node_attr_int(c->node, "dtype", x->dtype);
    if (dt != AF_DTYPE_UNDEFINED || af_node_attr(c->node, "dtype"))
        if (dt <= AF_DTYPE_UNDEFINED || dt >= AF_DTYPE_MAX || af_dtype_size((af_dtype)dt) == 0)
            return af_ctx_fail(c, AF_ERR_UNSUPPORTED, "dtype %lld is not supported", (long long)dt);
    af_shape_copy(out, x);
    if (x->rank < 0) af_movement_unknown(out, (af_dtype)dt, 2);
    out->dtype = (af_dtype)dt;
    return AF_OK;
}
