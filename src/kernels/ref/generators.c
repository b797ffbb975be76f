/* Reference kernels of the generator ops: Shape, Size, ConstantOfShape, Range, NonZero, EyeLike.
 * Their outputs come from input shapes or a few scalars rather than from moving data. */
#include <string.h>

#include "ir/shape/generators.h"

static af_status shape_mismatch(const af_op_ctx *c) {
    return af_ctx_fail(c, AF_ERR_RUNTIME, "output shape does not match the inputs");
}

af_status af_ref_SHAPE(af_op_ctx *c) {
    const af_tensor *x = c->inputs[0];
    af_tensor *out = c->outputs[0];
    int start, end;
    af_generators_shape_range(c, x->rank, &start, &end);
    if (out->dtype != AF_DTYPE_INT64 || out->rank != 1 || out->dims[0] != end - start)
        return shape_mismatch(c);
    for (int i = start; i < end; i++) ((int64_t *)out->data)[i - start] = x->dims[i];
    return AF_OK;
}

af_status af_ref_SIZE(af_op_ctx *c) {
    af_tensor *out = c->outputs[0];
    if (out->dtype != AF_DTYPE_INT64 || out->rank != 0) return shape_mismatch(c);
    *(int64_t *)out->data = af_tensor_numel(c->inputs[0]);
    return AF_OK;
}

af_status af_ref_CONSTANT_OF_SHAPE(af_op_ctx *c) {
    af_tensor *out = c->outputs[0], value;
    af_status st = af_generators_fill_value(c, &value);
    if (st) return st;
    if (out->dtype != value.dtype) return shape_mismatch(c);
    size_t es = af_dtype_size(value.dtype);
    int64_t n = af_tensor_numel(out);
    for (int64_t i = 0; i < n; i++) memcpy((char *)out->data + (size_t)i * es, value.data, es);
    return AF_OK;
}

af_status af_ref_RANGE(af_op_ctx *c) {
    const af_tensor *s = c->inputs[0], *d = c->inputs[2];
    af_tensor *out = c->outputs[0];
    int64_t n;
    af_status st = af_generators_range_count(c, &n);
    if (st) return st;
    if (out->rank != 1 || out->dims[0] != n || out->dtype != s->dtype) return shape_mismatch(c);
    if (s->dtype == AF_DTYPE_INT64 || s->dtype == AF_DTYPE_UINT64 || s->dtype == AF_DTYPE_INT32 ||
        s->dtype == AF_DTYPE_UINT32 || s->dtype == AF_DTYPE_INT16 || s->dtype == AF_DTYPE_UINT16 ||
        s->dtype == AF_DTYPE_INT8 || s->dtype == AF_DTYPE_UINT8) {
        /* Every value lies between start and limit; unsigned steps avoid signed overflow. */
        uint64_t v = (uint64_t)af_tensor_get_i64(s, 0), step = (uint64_t)af_tensor_get_i64(d, 0);
        for (int64_t i = 0; i < n; i++, v += step) af_tensor_set_i64(out, i, (int64_t)v);
        return AF_OK;
    }
    double start = af_tensor_get_f64(s, 0), delta = af_tensor_get_f64(d, 0);
    for (int64_t i = 0; i < n; i++) af_tensor_set_f64(out, i, start + (double)i * delta);
    return AF_OK;
}

af_status af_ref_NON_ZERO(af_op_ctx *c) {
    const af_tensor *x = c->inputs[0];
    af_tensor *out = c->outputs[0];
    int rows = x->rank > 0 ? x->rank : 1;
    int64_t nz = af_generators_count_nonzero(x), dims[2] = {rows, nz};
    if (!out->data) {
        /* The executor left the data-dependent shape to the kernel. */
        af_status st = af_ctx_alloc_output(c, 0, AF_DTYPE_INT64, 2, dims);
        if (st) return st;
    }
    if (out->dtype != AF_DTYPE_INT64 || out->rank != 2 || out->dims[0] != rows || out->dims[1] != nz)
        return shape_mismatch(c);
    int64_t n = af_tensor_numel(x), idx[AF_MAX_RANK] = {0}, j = 0, *o = out->data;
    for (int64_t e = 0; e < n; e++) {
        if (af_tensor_get_f64(x, e) != 0) {
            for (int d = 0; d < rows; d++) o[d * nz + j] = x->rank > 0 ? idx[d] : 0;
            j++;
        }
        for (int d = x->rank - 1; d >= 0; d--) {
            if (++idx[d] < x->dims[d]) break;
            idx[d] = 0;
        }
    }
    return AF_OK;
}

af_status af_ref_EYE_LIKE(af_op_ctx *c) {
    const af_tensor *x = c->inputs[0];
    af_tensor *out = c->outputs[0];
    if (x->rank != 2 || !af_tensor_same_shape(x, out)) return shape_mismatch(c);
    int64_t k = af_node_attr_int(c->node, "k", 0), rows = x->dims[0], cols = x->dims[1];
    if (out->nbytes) memset(out->data, 0, out->nbytes);
    for (int64_t i = 0; i < rows; i++) {
        /* j = i + k, written so that an extreme k cannot overflow. */
        if (k >= cols - i || k < -i) continue;
        af_tensor_set_f64(out, i * cols + i + k, 1.0);
    }
    return AF_OK;
}
