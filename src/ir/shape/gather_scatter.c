/* Shape functions of the indexing ops: Gather, GatherElements, GatherND, ScatterElements,
 * ScatterND, OneHot. Index values are checked by the kernels (AF_ERR_RUNTIME), not here. */
#include <string.h>

#include "ir/shape/movement.h"

/* Indices must be int32 or int64. */
static af_status check_indices(const af_op_ctx *c, const af_tensor *idx) {
    if (idx->dtype != AF_DTYPE_UNDEFINED && idx->dtype != AF_DTYPE_INT32 && idx->dtype != AF_DTYPE_INT64)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "indices are %s, int32 or int64 is needed",
                           af_dtype_name(idx->dtype));
    return AF_OK;
}

/* Known dims of a and b must agree over [0, n). */
static af_status same_dims(const af_op_ctx *c, const int64_t *a, const int64_t *b, int n, const char *what) {
    for (int i = 0; i < n; i++)
        if (a[i] >= 0 && b[i] >= 0 && a[i] != b[i])
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "%s: dim %d is %lld and %lld", what, i,
                               (long long)a[i], (long long)b[i]);
    return AF_OK;
}

af_status af_infer_GATHER(af_op_ctx *c) {
    const af_tensor *x, *idx;
    af_tensor *out;
    af_status st;
    if ((st = af_movement_need_input(c, 0, "data", &x)) || (st = af_movement_need_input(c, 1, "indices", &idx)) ||
        (st = af_movement_need_output(c, &out)) || (st = check_indices(c, idx)))
        return st;
    if (x->rank == 0) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "data must have rank 1 or more");
    if (x->rank < 0 || idx->rank < 0) {
        af_movement_unknown(out, x->dtype, -1);
        return AF_OK;
    }
    int axis;
    if ((st = af_ctx_axis(c, af_node_attr_int(c->node, "axis", 0), x->rank, &axis)) ||
        (st = af_movement_check_rank(c, x->rank + idx->rank - 1)))
        return st;
    af_movement_unknown(out, x->dtype, 0);
    for (int i = 0; i < axis; i++) out->dims[out->rank++] = x->dims[i];
    for (int i = 0; i < idx->rank; i++) out->dims[out->rank++] = idx->dims[i];
    for (int i = axis + 1; i < x->rank; i++) out->dims[out->rank++] = x->dims[i];
    return af_movement_check_numel(c, out->rank, out->dims);
}

af_status af_infer_GATHER_ELEMENTS(af_op_ctx *c) {
    const af_tensor *x, *idx;
    af_tensor *out;
    af_status st;
    if ((st = af_movement_need_input(c, 0, "data", &x)) || (st = af_movement_need_input(c, 1, "indices", &idx)) ||
        (st = af_movement_need_output(c, &out)) || (st = check_indices(c, idx)))
        return st;
    if (x->rank >= 0 && idx->rank >= 0 && x->rank != idx->rank)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "indices have rank %d, data %d", idx->rank, x->rank);
    int rank = x->rank >= 0 ? x->rank : idx->rank, axis;
    if (rank == 0) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "data must have rank 1 or more");
    if (rank > 0 && (st = af_ctx_axis(c, af_node_attr_int(c->node, "axis", 0), rank, &axis))) return st;
    af_shape_copy(out, idx);
    if (idx->rank < 0) out->rank = rank;
    for (int i = idx->rank < 0 ? 0 : rank; i < rank; i++) out->dims[i] = -1;
    out->dtype = x->dtype;
    return AF_OK;
}

af_status af_infer_GATHER_ND(af_op_ctx *c) {
    const af_tensor *x, *idx;
    af_tensor *out;
    af_status st;
    if ((st = af_movement_need_input(c, 0, "data", &x)) || (st = af_movement_need_input(c, 1, "indices", &idx)) ||
        (st = af_movement_need_output(c, &out)))
        return st;
    if (idx->dtype != AF_DTYPE_UNDEFINED && idx->dtype != AF_DTYPE_INT64)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "indices are %s, int64 is needed",
                           af_dtype_name(idx->dtype));
    int64_t b = c->opset >= 12 ? af_node_attr_int(c->node, "batch_dims", 0) : 0;
    if (b < 0) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "batch_dims %lld is negative", (long long)b);
    af_movement_unknown(out, x->dtype, -1);
    if (x->rank < 0 || idx->rank < 0) return AF_OK;
    int r = x->rank, q = idx->rank;
    if (r < 1 || q < 1) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "data and indices need rank 1 or more");
    if (b >= q || b >= r)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "batch_dims %lld needs data and indices of a higher rank",
                           (long long)b);
    if ((st = same_dims(c, x->dims, idx->dims, (int)b, "batch dims of data and indices"))) return st;
    int64_t k = idx->dims[q - 1];
    if (k < 0) return AF_OK;
    if (k < 1 || k > r - b)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "indices' last dim %lld must be in [1, %lld]",
                           (long long)k, (long long)(r - b));
    af_movement_unknown(out, x->dtype, 0);
    for (int i = 0; i < q - 1; i++) out->dims[out->rank++] = idx->dims[i];
    for (int i = (int)(b + k); i < r; i++) out->dims[out->rank++] = x->dims[i];
    return af_movement_check_numel(c, out->rank, out->dims);
}

af_status af_movement_reduction_of(const af_op_ctx *c, af_movement_reduction *r) {
    const char *s = c->opset >= 16 ? af_node_attr_string(c->node, "reduction", "none") : "none";
    if (strcmp(s, "none") == 0)
        *r = AF_MOVEMENT_REDUCE_NONE;
    else if (strcmp(s, "add") == 0)
        *r = AF_MOVEMENT_REDUCE_ADD;
    else if (strcmp(s, "mul") == 0)
        *r = AF_MOVEMENT_REDUCE_MUL;
    else if (strcmp(s, "max") == 0 && c->opset >= 18)
        *r = AF_MOVEMENT_REDUCE_MAX;
    else if (strcmp(s, "min") == 0 && c->opset >= 18)
        *r = AF_MOVEMENT_REDUCE_MIN;
    else
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "unknown reduction '%s' at opset %d", s, c->opset);
    return AF_OK;
}

/* Data, indices and updates of a scatter; the output is shaped like the data. */
static af_status scatter_setup(const af_op_ctx *c, const af_tensor **x, const af_tensor **idx,
                               const af_tensor **upd) {
    af_status st;
    af_tensor *out;
    af_movement_reduction r;
    if ((st = af_movement_need_input(c, 0, "data", x)) || (st = af_movement_need_input(c, 1, "indices", idx)) ||
        (st = af_movement_need_input(c, 2, "updates", upd)) || (st = af_movement_need_output(c, &out)) ||
        (st = check_indices(c, *idx)) || (st = af_movement_reduction_of(c, &r)))
        return st;
    if ((*upd)->dtype != AF_DTYPE_UNDEFINED && (*x)->dtype != AF_DTYPE_UNDEFINED &&
        (*upd)->dtype != (*x)->dtype)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "updates are %s, data is %s",
                           af_dtype_name((*upd)->dtype), af_dtype_name((*x)->dtype));
    af_shape_copy(out, *x);
    return AF_OK;
}

af_status af_infer_SCATTER_ELEMENTS(af_op_ctx *c) {
    const af_tensor *x, *idx, *upd;
    af_status st;
    if ((st = scatter_setup(c, &x, &idx, &upd))) return st;
    if (idx->rank >= 0 && upd->rank >= 0) {
        if (idx->rank != upd->rank)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "indices have rank %d, updates %d", idx->rank,
                               upd->rank);
        if ((st = same_dims(c, idx->dims, upd->dims, idx->rank, "indices and updates"))) return st;
    }
    int rank = x->rank >= 0 ? x->rank : idx->rank, axis;
    if (x->rank >= 0 && idx->rank >= 0 && x->rank != idx->rank)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "indices have rank %d, data %d", idx->rank, x->rank);
    if (rank == 0) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "data must have rank 1 or more");
    if (rank > 0 && (st = af_ctx_axis(c, af_node_attr_int(c->node, "axis", 0), rank, &axis))) return st;
    return AF_OK;
}

af_status af_infer_SCATTER_ND(af_op_ctx *c) {
    const af_tensor *x, *idx, *upd;
    af_status st;
    if ((st = scatter_setup(c, &x, &idx, &upd))) return st;
    if (idx->dtype != AF_DTYPE_UNDEFINED && idx->dtype != AF_DTYPE_INT64)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "indices are %s, int64 is needed",
                           af_dtype_name(idx->dtype));
    if (x->rank < 0 || idx->rank < 0) return AF_OK;
    int r = x->rank, q = idx->rank;
    if (r < 1 || q < 1) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "data and indices need rank 1 or more");
    int64_t k = idx->dims[q - 1];
    if (k < 0) return AF_OK;
    if (k > r)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "indices' last dim %lld exceeds the data's rank %d",
                           (long long)k, r);
    if (upd->rank < 0) return AF_OK;
    if (upd->rank != q - 1 + r - k)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "updates have rank %d, expected %lld", upd->rank,
                           (long long)(q - 1 + r - k));
    if ((st = same_dims(c, upd->dims, idx->dims, q - 1, "updates and indices")) ||
        (st = same_dims(c, upd->dims + q - 1, x->dims + k, (int)(r - k), "updates and data")))
        return st;
    return AF_OK;
}

af_status af_movement_onehot_depth(const af_op_ctx *c, int64_t *depth) {
    const af_tensor *d = af_ctx_input(c, 1);
    if (af_tensor_numel(d) != 1 || d->rank > 1)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "depth must hold one value");
    double v = af_tensor_get_f64(d, 0);
    if (!(v >= 1) || v > 9e18) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "depth %g is not positive", v);
    *depth = af_movement_is_int(d->dtype) ? af_tensor_get_i64(d, 0) : (int64_t)v;
    return AF_OK;
}

af_status af_infer_ONE_HOT(af_op_ctx *c) {
    const af_tensor *idx, *depth, *values;
    af_tensor *out;
    af_status st;
    if ((st = af_movement_need_input(c, 0, "indices", &idx)) || (st = af_movement_need_input(c, 1, "depth", &depth)) ||
        (st = af_movement_need_input(c, 2, "values", &values)) || (st = af_movement_need_output(c, &out)))
        return st;
    if (values->rank > 1 || (values->rank == 1 && values->dims[0] >= 0 && values->dims[0] != 2))
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "values must hold [off_value, on_value]");
    int rank = idx->rank >= 0 ? idx->rank + 1 : -1;
    if ((st = af_movement_check_rank(c, rank))) return st;
    af_movement_unknown(out, values->dtype, rank);
    if (rank < 0) return AF_OK;
    int axis;
    if ((st = af_ctx_axis(c, af_node_attr_int(c->node, "axis", -1), rank, &axis))) return st;
    int64_t d = -1;
    if (af_movement_known(depth) && (st = af_movement_onehot_depth(c, &d))) return st;
    for (int i = 0, j = 0; i < rank; i++) out->dims[i] = i == axis ? d : idx->dims[j++];
    return af_movement_check_numel(c, rank, out->dims);
}
