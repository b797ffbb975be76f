/* Reference kernels of the indexing ops: Gather, GatherElements, GatherND, ScatterElements,
 * ScatterND, OneHot. Every index is normalized (negative counts from the end) and range-checked;
 * an index out of range fails with AF_ERR_RUNTIME before anything is read through it. */
#include <string.h>

#include "ir/shape/movement.h"
#include "kernels/ref/movement.h"

static af_status shape_mismatch(const af_op_ctx *c) {
    return af_ctx_fail(c, AF_ERR_RUNTIME, "output shape does not match the inputs");
}

/* Index element i normalized against an axis of n elements. */
static af_status index_at(const af_op_ctx *c, const af_tensor *idx, int64_t i, int64_t n, int64_t *out) {
    int64_t v = af_tensor_get_i64(idx, i);
    *out = 0;
    if (v < -n || v >= n)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "index %lld is out of range for an axis of %lld", (long long)v,
                           (long long)n);
    *out = v < 0 ? v + n : v;
    return AF_OK;
}

static int64_t prod(const int64_t *dims, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= dims[i];
    return p;
}

af_status af_ref_GATHER(af_op_ctx *c) {
    const af_tensor *x = c->inputs[0], *idx = c->inputs[1];
    af_tensor *out = c->outputs[0];
    int axis;
    af_status st = af_ctx_axis(c, af_node_attr_int(c->node, "axis", 0), x->rank, &axis);
    if (st) return st;
    int64_t outer = prod(x->dims, 0, axis), n = x->dims[axis], nidx = af_tensor_numel(idx);
    size_t inner = (size_t)prod(x->dims, axis + 1, x->rank) * af_dtype_size(x->dtype);
    if (out->dtype != x->dtype || (int64_t)out->nbytes != (int64_t)(outer * nidx) * (int64_t)inner)
        return shape_mismatch(c);
    char *o = out->data;
    for (int64_t a = 0; a < outer; a++) {
        for (int64_t j = 0; j < nidx; j++, o += inner) {
            int64_t k;
            if ((st = index_at(c, idx, j, n, &k))) return st;
            const char *src = (const char *)x->data + (size_t)(a * n + k) * inner;
            if (inner && src != o) memcpy(o, src, inner); /* equal: planned inside x (memory_plan.h) */
        }
    }
    return AF_OK;
}

/* Steps the row-major multi-index idx over dims; false once it wraps around. */
static bool next_index(int rank, const int64_t *dims, int64_t *idx) {
    for (int d = rank - 1; d >= 0; d--) {
        if (++idx[d] < dims[d]) return true;
        idx[d] = 0;
    }
    return false;
}

/* GatherElements/ScatterElements: indices and data have one rank and, off the axis, indices must
 * not be larger than the data. */
static af_status check_elementwise(const af_op_ctx *c, const af_tensor *x, const af_tensor *idx, int axis) {
    if (idx->rank != x->rank) return shape_mismatch(c);
    for (int d = 0; d < x->rank; d++)
        if (d != axis && idx->dims[d] > x->dims[d])
            return af_ctx_fail(c, AF_ERR_RUNTIME, "indices dim %d is %lld, data has only %lld", d,
                               (long long)idx->dims[d], (long long)x->dims[d]);
    return AF_OK;
}

af_status af_ref_GATHER_ELEMENTS(af_op_ctx *c) {
    const af_tensor *x = c->inputs[0], *idx = c->inputs[1];
    af_tensor *out = c->outputs[0];
    int axis;
    af_status st = af_ctx_axis(c, af_node_attr_int(c->node, "axis", 0), x->rank, &axis);
    if (st || (st = check_elementwise(c, x, idx, axis))) return st;
    if (!af_tensor_same_shape(out, idx) || out->dtype != x->dtype) return shape_mismatch(c);
    int64_t n = af_tensor_numel(idx), str[AF_MAX_RANK], pos[AF_MAX_RANK] = {0};
    size_t es = af_dtype_size(x->dtype);
    af_movement_dense_strides(x->rank, x->dims, str);
    for (int64_t e = 0; e < n; e++, next_index(idx->rank, idx->dims, pos)) {
        int64_t k, off = 0;
        if ((st = index_at(c, idx, e, x->dims[axis], &k))) return st;
        for (int d = 0; d < x->rank; d++) off += (d == axis ? k : pos[d]) * str[d];
        memcpy((char *)out->data + (size_t)e * es, (const char *)x->data + (size_t)off * es, es);
    }
    return AF_OK;
}

/* Element offset into data of the index tuple starting at element t of idx: k values for the
 * data axes from `first`. */
static af_status tuple_offset(const af_op_ctx *c, const af_tensor *x, const af_tensor *idx, int64_t t,
                              int first, int64_t k, const int64_t *str, int64_t *off) {
    *off = 0;
    for (int64_t j = 0; j < k; j++) {
        int64_t v;
        af_status st = index_at(c, idx, t + j, x->dims[first + j], &v);
        if (st) return st;
        *off += v * str[first + j];
    }
    return AF_OK;
}

af_status af_ref_GATHER_ND(af_op_ctx *c) {
    const af_tensor *x = c->inputs[0], *idx = c->inputs[1];
    af_tensor *out = c->outputs[0];
    int b = (int)(c->opset >= 12 ? af_node_attr_int(c->node, "batch_dims", 0) : 0), q = idx->rank;
    if (q < 1 || b < 0 || b >= q || b >= x->rank) return shape_mismatch(c);
    int64_t k = idx->dims[q - 1];
    if (k < 1 || k > x->rank - b) return shape_mismatch(c);
    for (int d = 0; d < b; d++)
        if (x->dims[d] != idx->dims[d]) return shape_mismatch(c);
    int64_t batch = prod(x->dims, 0, b), tuples = prod(idx->dims, b, q - 1);
    int64_t slice = prod(x->dims, b + (int)k, x->rank), batch_len = prod(x->dims, b, x->rank);
    size_t es = af_dtype_size(x->dtype);
    if (out->dtype != x->dtype || (int64_t)out->nbytes != batch * tuples * slice * (int64_t)es)
        return shape_mismatch(c);
    int64_t str[AF_MAX_RANK];
    af_movement_dense_strides(x->rank, x->dims, str);
    char *o = out->data;
    for (int64_t bi = 0; bi < batch; bi++) {
        for (int64_t t = 0; t < tuples; t++, o += slice * (int64_t)es) {
            int64_t off;
            af_status st = tuple_offset(c, x, idx, (bi * tuples + t) * k, b, k, str, &off);
            if (st) return st;
            if (slice)
                memcpy(o, (const char *)x->data + (size_t)(bi * batch_len + off) * es, (size_t)slice * es);
        }
    }
    return AF_OK;
}

/* dst op= src for one element of dtype dt. Integers wrap (computed unsigned) instead of
 * overflowing; bool add/mul are or/and. */
#define COMBINE_INT(T)                                                                                       \
    do {                                                                                                     \
        T a, b;                                                                                              \
        memcpy(&a, dst, sizeof a);                                                                           \
        memcpy(&b, src, sizeof b);                                                                           \
        if (r == AF_MOVEMENT_REDUCE_ADD)                                                                     \
            a = (T)((uint64_t)a + (uint64_t)b);                                                              \
        else if (r == AF_MOVEMENT_REDUCE_MUL)                                                                \
            a = (T)((uint64_t)a * (uint64_t)b);                                                              \
        else if (r == AF_MOVEMENT_REDUCE_MAX)                                                                \
            a = b > a ? b : a;                                                                               \
        else                                                                                                 \
            a = b < a ? b : a;                                                                               \
        memcpy(dst, &a, sizeof a);                                                                           \
    } while (0)
#define COMBINE_FLOAT(T, get_a, get_b, put)                                                                  \
    do {                                                                                                     \
        T a = get_a, b = get_b;                                                                              \
        if (r == AF_MOVEMENT_REDUCE_ADD)                                                                     \
            a = a + b;                                                                                       \
        else if (r == AF_MOVEMENT_REDUCE_MUL)                                                                \
            a = a * b;                                                                                       \
        else if (r == AF_MOVEMENT_REDUCE_MAX)                                                                \
            a = b > a ? b : a;                                                                               \
        else                                                                                                 \
            a = b < a ? b : a;                                                                               \
        put;                                                                                                 \
    } while (0)

static float load_f32(const void *p) {
    float v;
    memcpy(&v, p, 4);
    return v;
}
static double load_f64(const void *p) {
    double v;
    memcpy(&v, p, 8);
    return v;
}
static uint16_t load_u16(const void *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static void combine(af_dtype dt, void *dst, const void *src, af_movement_reduction r, size_t es) {
    uint16_t h;
    switch (r == AF_MOVEMENT_REDUCE_NONE ? AF_DTYPE_UNDEFINED : dt) {
    case AF_DTYPE_FLOAT: COMBINE_FLOAT(float, load_f32(dst), load_f32(src), memcpy(dst, &a, 4)); break;
    case AF_DTYPE_DOUBLE: COMBINE_FLOAT(double, load_f64(dst), load_f64(src), memcpy(dst, &a, 8)); break;
    case AF_DTYPE_FLOAT16:
        COMBINE_FLOAT(float, af_f16_to_f32(load_u16(dst)), af_f16_to_f32(load_u16(src)),
                      (h = af_f32_to_f16(a), memcpy(dst, &h, 2)));
        break;
    case AF_DTYPE_BFLOAT16:
        COMBINE_FLOAT(float, af_bf16_to_f32(load_u16(dst)), af_bf16_to_f32(load_u16(src)),
                      (h = af_f32_to_bf16(a), memcpy(dst, &h, 2)));
        break;
    case AF_DTYPE_INT8: COMBINE_INT(int8_t); break;
    case AF_DTYPE_UINT8: COMBINE_INT(uint8_t); break;
    case AF_DTYPE_INT16: COMBINE_INT(int16_t); break;
    case AF_DTYPE_UINT16: COMBINE_INT(uint16_t); break;
    case AF_DTYPE_INT32: COMBINE_INT(int32_t); break;
    case AF_DTYPE_UINT32: COMBINE_INT(uint32_t); break;
    case AF_DTYPE_INT64: COMBINE_INT(int64_t); break;
    case AF_DTYPE_UINT64: COMBINE_INT(uint64_t); break;
    case AF_DTYPE_BOOL: {
        uint8_t a = *(uint8_t *)dst != 0, b = *(const uint8_t *)src != 0;
        *(uint8_t *)dst = r == AF_MOVEMENT_REDUCE_ADD || r == AF_MOVEMENT_REDUCE_MAX ? (a | b) : (a & b);
        break;
    }
    default: memcpy(dst, src, es);
    }
}

/* Scatters start from a copy of the data. */
static af_status scatter_begin(af_op_ctx *c, af_movement_reduction *r) {
    const af_tensor *x = c->inputs[0], *upd = c->inputs[2];
    af_tensor *out = c->outputs[0];
    af_status st = af_movement_reduction_of(c, r);
    if (st) return st;
    if (!af_tensor_same_shape(out, x) || out->dtype != x->dtype || upd->dtype != x->dtype)
        return shape_mismatch(c);
    if (x->nbytes && out->data != x->data) memmove(out->data, x->data, x->nbytes);
    return AF_OK;
}

af_status af_ref_SCATTER_ELEMENTS(af_op_ctx *c) {
    const af_tensor *x = c->inputs[0], *idx = c->inputs[1], *upd = c->inputs[2];
    af_tensor *out = c->outputs[0];
    af_movement_reduction r;
    int axis;
    af_status st = af_ctx_axis(c, af_node_attr_int(c->node, "axis", 0), x->rank, &axis);
    if (st || (st = check_elementwise(c, x, idx, axis))) return st;
    if (!af_tensor_same_shape(idx, upd)) return shape_mismatch(c);
    if ((st = scatter_begin(c, &r))) return st;
    int64_t n = af_tensor_numel(idx), str[AF_MAX_RANK], pos[AF_MAX_RANK] = {0};
    size_t es = af_dtype_size(x->dtype);
    af_movement_dense_strides(x->rank, x->dims, str);
    for (int64_t e = 0; e < n; e++, next_index(idx->rank, idx->dims, pos)) {
        int64_t k, off = 0;
        if ((st = index_at(c, idx, e, x->dims[axis], &k))) return st;
        for (int d = 0; d < x->rank; d++) off += (d == axis ? k : pos[d]) * str[d];
        combine(x->dtype, (char *)out->data + (size_t)off * es, (const char *)upd->data + (size_t)e * es, r,
                es);
    }
    return AF_OK;
}

af_status af_ref_SCATTER_ND(af_op_ctx *c) {
    const af_tensor *x = c->inputs[0], *idx = c->inputs[1], *upd = c->inputs[2];
    af_tensor *out = c->outputs[0];
    af_movement_reduction r;
    af_status st;
    int q = idx->rank;
    if (q < 1 || x->rank < 1) return shape_mismatch(c);
    int64_t k = idx->dims[q - 1];
    if (k < 0 || k > x->rank) return shape_mismatch(c);
    int64_t tuples = prod(idx->dims, 0, q - 1), slice = prod(x->dims, (int)k, x->rank);
    if (af_tensor_numel(upd) != tuples * slice) return shape_mismatch(c);
    if ((st = scatter_begin(c, &r))) return st;
    size_t es = af_dtype_size(x->dtype);
    int64_t str[AF_MAX_RANK];
    af_movement_dense_strides(x->rank, x->dims, str);
    for (int64_t t = 0; t < tuples; t++) {
        int64_t off;
        if ((st = tuple_offset(c, x, idx, t * k, 0, k, str, &off))) return st;
        char *o = (char *)out->data + (size_t)off * es;
        const char *u = (const char *)upd->data + (size_t)(t * slice) * es;
        for (int64_t s = 0; s < slice; s++) combine(x->dtype, o + (size_t)s * es, u + (size_t)s * es, r, es);
    }
    return AF_OK;
}

af_status af_ref_ONE_HOT(af_op_ctx *c) {
    const af_tensor *idx = c->inputs[0], *values = c->inputs[2];
    af_tensor *out = c->outputs[0];
    int64_t depth;
    int axis;
    af_status st = af_movement_onehot_depth(c, &depth);
    if (st || (st = af_ctx_axis(c, af_node_attr_int(c->node, "axis", -1), idx->rank + 1, &axis))) return st;
    if (af_tensor_numel(values) != 2 || out->dtype != values->dtype || out->rank != idx->rank + 1 ||
        out->dims[axis] != depth)
        return shape_mismatch(c);
    for (int i = 0, j = 0; i < out->rank; i++)
        if (i != axis && out->dims[i] != idx->dims[j++]) return shape_mismatch(c);
    size_t es = af_dtype_size(values->dtype);
    const char *off_v = values->data, *on_v = off_v + es;
    int64_t n_out = af_tensor_numel(out), inner = prod(idx->dims, axis, idx->rank);
    char *o = out->data;
    for (int64_t e = 0; e < n_out; e++) memcpy(o + (size_t)e * es, off_v, es);
    int64_t n = af_tensor_numel(idx);
    for (int64_t e = 0; e < n; e++) {
        /* Indices outside [-depth, depth) select nothing: the row stays off_value. */
        int64_t v = af_tensor_get_i64(idx, e);
        if (v < -depth || v >= depth) continue;
        if (v < 0) v += depth;
        int64_t a = e / inner, i = e % inner;
        memcpy(o + (size_t)((a * depth + v) * inner + i) * es, on_v, es);
    }
    return AF_OK;
}
