/* Shape functions of the data-movement ops: Reshape, Flatten, Transpose, Squeeze, Unsqueeze,
 * Concat, Split, Slice, Expand, Tile, Pad, DepthToSpace, SpaceToDepth, Trilu. */
#include <string.h>

#include "ir/shape/movement.h"
#include "util/alloc.h"

af_status af_infer_RESHAPE(af_op_ctx *c) {
    const af_tensor *x, *s;
    af_tensor *out;
    af_status st;
    if ((st = af_movement_need_input(c, 0, "data", &x)) || (st = af_movement_need_input(c, 1, "shape", &s)) ||
        (st = af_movement_need_output(c, &out)))
        return st;
    if (!af_movement_known(s)) {
        int64_t n = af_movement_len(s);
        if ((st = af_movement_check_rank(c, n))) return st;
        af_movement_unknown(out, x->dtype, (int)n);
        return AF_OK;
    }
    int64_t shape[AF_MAX_RANK];
    int n;
    if ((st = af_movement_read_ints(c, s, "shape", AF_MAX_RANK, shape, &n))) return st;
    bool allowzero = c->opset >= 14 && af_node_attr_int(c->node, "allowzero", 0) != 0;
    int infer_at = -1;
    bool has_zero = false, prod_known = true;
    int64_t prod = 1;
    af_movement_unknown(out, x->dtype, n);
    for (int i = 0; i < n; i++) {
        int64_t v = shape[i];
        if (v == -1) {
            if (infer_at >= 0) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "shape has more than one -1");
            infer_at = i;
            continue;
        }
        if (v < -1) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "shape value %lld is invalid", (long long)v);
        if (v == 0) has_zero = true;
        if (v == 0 && !allowzero) {
            if (x->rank >= 0 && i >= x->rank)
                return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "shape copies dim %d of an input of rank %d", i,
                                   x->rank);
            v = x->rank >= 0 ? x->dims[i] : -1;
        }
        out->dims[i] = v;
        if (v < 0)
            prod_known = false;
        else if (!af_mul_i64(prod, v, &prod))
            return af_ctx_fail(c, AF_ERR_LIMIT, "the output's element count overflows");
    }
    if (allowzero && has_zero && infer_at >= 0)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "shape has both 0 and -1 with allowzero set");
    int64_t in_n = af_tensor_numel(x);
    if (!prod_known || in_n < 0) return AF_OK;
    if (infer_at >= 0) {
        if (prod == 0 || in_n % prod != 0)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "cannot reshape %lld elements with a -1 dim",
                               (long long)in_n);
        out->dims[infer_at] = in_n / prod;
    } else if (prod != in_n) {
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "cannot reshape %lld elements into %lld", (long long)in_n,
                           (long long)prod);
    }
    return AF_OK;
}

/* Product of dims[from..to), -1 if any is unknown; the caller has checked for overflow. */
static int64_t dims_prod(const int64_t *dims, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) {
        if (dims[i] < 0 || !af_mul_i64(p, dims[i], &p)) return -1;
    }
    return p;
}

af_status af_infer_FLATTEN(af_op_ctx *c) {
    const af_tensor *x;
    af_tensor *out;
    af_status st;
    if ((st = af_movement_need_input(c, 0, "input", &x)) || (st = af_movement_need_output(c, &out))) return st;
    af_movement_unknown(out, x->dtype, 2);
    if (x->rank < 0) return AF_OK;
    int64_t axis = af_node_attr_int(c->node, "axis", 1);
    if (axis < -x->rank || axis > x->rank)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "axis %lld is out of range for rank %d", (long long)axis,
                           x->rank);
    int a = (int)(axis < 0 ? axis + x->rank : axis);
    if ((st = af_movement_check_numel(c, x->rank, x->dims))) return st;
    out->dims[0] = dims_prod(x->dims, 0, a);
    out->dims[1] = dims_prod(x->dims, a, x->rank);
    return AF_OK;
}

af_status af_infer_TRANSPOSE(af_op_ctx *c) {
    const af_tensor *x;
    af_tensor *out;
    af_status st;
    if ((st = af_movement_need_input(c, 0, "data", &x)) || (st = af_movement_need_output(c, &out))) return st;
    if (x->rank < 0) {
        const int64_t *p;
        int n = af_node_attr_ints(c->node, "perm", &p);
        if ((st = af_movement_check_rank(c, n))) return st;
        af_movement_unknown(out, x->dtype, n);
        return AF_OK;
    }
    int perm[AF_MAX_RANK];
    if ((st = af_movement_perm(c, x->rank, perm))) return st;
    af_movement_unknown(out, x->dtype, x->rank);
    for (int i = 0; i < x->rank; i++) out->dims[i] = x->dims[perm[i]];
    return AF_OK;
}

/* Squeeze/Unsqueeze axes: from the attribute before opset 13, the optional input from 13. Sets
 * *n to -1 when absent and *known false when the input's values are not known yet (*n is then
 * its length or -1). */
static af_status read_axes(const af_op_ctx *c, int64_t *axes, int *n, bool *known) {
    *known = true;
    *n = -1;
    if (c->opset < 13) {
        const int64_t *v;
        int len = af_node_attr_ints(c->node, "axes", &v);
        if (len > AF_MAX_RANK) return af_ctx_fail(c, AF_ERR_LIMIT, "axes has %d values", len);
        if (len > 0) memcpy(axes, v, (size_t)len * sizeof *v);
        *n = len;
        return AF_OK;
    }
    const af_tensor *t = af_ctx_input(c, 1);
    if (!t) return AF_OK;
    if (!af_movement_known(t)) {
        *known = false;
        *n = (int)(af_movement_len(t) > AF_MAX_RANK ? AF_MAX_RANK + 1 : af_movement_len(t));
        return AF_OK;
    }
    return af_movement_read_ints(c, t, "axes", AF_MAX_RANK, axes, n);
}

af_status af_infer_SQUEEZE(af_op_ctx *c) {
    const af_tensor *x;
    af_tensor *out;
    af_status st;
    if ((st = af_movement_need_input(c, 0, "data", &x)) || (st = af_movement_need_output(c, &out))) return st;
    int64_t axes[AF_MAX_RANK];
    int n;
    bool known;
    if ((st = read_axes(c, axes, &n, &known))) return st;
    if (x->rank < 0 || !known) {
        int rank = x->rank >= 0 && n >= 0 && n <= x->rank ? x->rank - n : -1;
        af_movement_unknown(out, x->dtype, rank);
        return AF_OK;
    }
    bool drop[AF_MAX_RANK] = {false};
    if (n < 0) {
        for (int i = 0; i < x->rank; i++) {
            if (x->dims[i] < 0) { /* whether it is 1 decides the rank */
                af_movement_unknown(out, x->dtype, -1);
                return AF_OK;
            }
            drop[i] = x->dims[i] == 1;
        }
    }
    for (int i = 0; i < n; i++) {
        int a;
        if ((st = af_ctx_axis(c, axes[i], x->rank, &a))) return st;
        if (drop[a]) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "axis %d is listed twice", a);
        if (x->dims[a] >= 0 && x->dims[a] != 1)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "cannot squeeze axis %d of size %lld", a,
                               (long long)x->dims[a]);
        drop[a] = true;
    }
    af_movement_unknown(out, x->dtype, 0);
    for (int i = 0; i < x->rank; i++)
        if (!drop[i]) out->dims[out->rank++] = x->dims[i];
    return AF_OK;
}

af_status af_infer_UNSQUEEZE(af_op_ctx *c) {
    const af_tensor *x;
    af_tensor *out;
    af_status st;
    if ((st = af_movement_need_input(c, 0, "data", &x)) || (st = af_movement_need_output(c, &out))) return st;
    int64_t axes[AF_MAX_RANK];
    int n;
    bool known;
    if ((st = read_axes(c, axes, &n, &known))) return st;
    if (known && n < 0) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs axes");
    int rank = x->rank >= 0 && n >= 0 ? x->rank + n : -1;
    if ((st = af_movement_check_rank(c, rank))) return st;
    af_movement_unknown(out, x->dtype, rank);
    if (rank < 0 || !known) return AF_OK;
    bool added[AF_MAX_RANK] = {false};
    for (int i = 0; i < n; i++) {
        int a;
        if ((st = af_ctx_axis(c, axes[i], rank, &a))) return st;
        if (added[a]) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "axis %d is listed twice", a);
        added[a] = true;
    }
    for (int i = 0, j = 0; i < rank; i++) out->dims[i] = added[i] ? 1 : x->dims[j++];
    return AF_OK;
}

af_status af_infer_CONCAT(af_op_ctx *c) {
    af_tensor *out;
    af_status st;
    if ((st = af_movement_need_output(c, &out))) return st;
    if (c->n_inputs < 1) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs at least one input");
    if (!af_node_attr(c->node, "axis"))
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs the axis attribute");
    af_dtype dtype = AF_DTYPE_UNDEFINED;
    for (int i = 0; i < c->n_inputs; i++) {
        const af_tensor *x = af_ctx_input(c, i);
        if (!x) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "input %d is missing", i);
        if ((st = af_movement_check_dtype(c, x, "input"))) return st;
        if (x->dtype == AF_DTYPE_UNDEFINED) continue;
        if (dtype != AF_DTYPE_UNDEFINED && x->dtype != dtype)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "input %d is %s, another is %s", i,
                               af_dtype_name(x->dtype), af_dtype_name(dtype));
        dtype = x->dtype;
    }
    int rank = -1;
    for (int i = 0; i < c->n_inputs; i++) {
        int r = c->inputs[i]->rank;
        if (r < 0) continue;
        if (rank >= 0 && r != rank)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "input %d has rank %d, another has %d", i, r, rank);
        rank = r;
    }
    af_movement_unknown(out, dtype, rank);
    if (rank < 0) return AF_OK;
    int axis;
    if ((st = af_ctx_axis(c, af_node_attr_int(c->node, "axis", 0), rank, &axis))) return st;
    int64_t sum = 0;
    for (int i = 0; i < c->n_inputs; i++) {
        const af_tensor *x = c->inputs[i];
        if (x->rank < 0) {
            sum = -1;
            continue;
        }
        for (int d = 0; d < rank; d++) {
            int64_t v = x->dims[d];
            if (d == axis) {
                if (v < 0)
                    sum = -1;
                else if (sum >= 0 && __builtin_add_overflow(sum, v, &sum))
                    return af_ctx_fail(c, AF_ERR_LIMIT, "the output's element count overflows");
            } else if (v >= 0) {
                if (out->dims[d] >= 0 && out->dims[d] != v)
                    return af_ctx_fail(c, AF_ERR_INVALID_MODEL,
                                       "input %d has dim %d = %lld, another has %lld", i, d, (long long)v,
                                       (long long)out->dims[d]);
                out->dims[d] = v;
            }
        }
    }
    out->dims[axis] = sum;
    return af_movement_check_numel(c, rank, out->dims);
}

af_status af_infer_SPLIT(af_op_ctx *c) {
    const af_tensor *x;
    af_status st;
    if ((st = af_movement_need_input(c, 0, "input", &x))) return st;
    if (c->n_outputs < 1) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs at least one output");
    int axis = 0;
    if (x->rank >= 0 && (st = af_ctx_axis(c, af_node_attr_int(c->node, "axis", 0), x->rank, &axis)))
        return st;
    int64_t *sizes = af_malloc((size_t)c->n_outputs * sizeof *sizes);
    if (!sizes) return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory");
    bool known = false;
    st = af_movement_split_sizes(c, x->rank >= 0 ? x->dims[axis] : -1, sizes, &known);
    for (int i = 0; st == AF_OK && i < c->n_outputs; i++) {
        af_tensor *out = af_ctx_output(c, i);
        if (!out) continue;
        af_shape_copy(out, x);
        if (x->rank >= 0) out->dims[axis] = known ? sizes[i] : -1;
    }
    af_free(sizes);
    return st;
}

af_status af_infer_SLICE(af_op_ctx *c) {
    const af_tensor *x;
    af_tensor *out;
    af_status st;
    if ((st = af_movement_need_input(c, 0, "data", &x)) || (st = af_movement_need_output(c, &out))) return st;
    if (x->rank < 0 || !af_movement_slice_known(c)) {
        af_movement_unknown(out, x->dtype, x->rank);
        return AF_OK;
    }
    af_movement_slice p;
    if ((st = af_movement_slice_params(c, x, &p))) return st;
    af_shape_copy(out, x);
    for (int i = 0; i < x->rank; i++) out->dims[i] = p.len[i];
    return AF_OK;
}

af_status af_infer_EXPAND(af_op_ctx *c) {
    const af_tensor *x, *s;
    af_tensor *out;
    af_status st;
    if ((st = af_movement_need_input(c, 0, "input", &x)) || (st = af_movement_need_input(c, 1, "shape", &s)) ||
        (st = af_movement_need_output(c, &out)))
        return st;
    if (!af_movement_known(s)) {
        int64_t n = af_movement_len(s);
        int64_t rank = n >= 0 && x->rank >= 0 ? (n > x->rank ? n : x->rank) : -1;
        if ((st = af_movement_check_rank(c, rank))) return st;
        af_movement_unknown(out, x->dtype, (int)rank);
        return AF_OK;
    }
    af_tensor target = {.dtype = x->dtype};
    int n;
    if ((st = af_movement_read_ints(c, s, "shape", AF_MAX_RANK, target.dims, &n))) return st;
    target.rank = n;
    for (int i = 0; i < n; i++)
        if (target.dims[i] < 0)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "shape value %lld is negative",
                               (long long)target.dims[i]);
    if (x->rank < 0) {
        af_movement_unknown(out, x->dtype, -1);
        return AF_OK;
    }
    const af_tensor *both[2] = {x, &target};
    if ((st = af_shape_broadcast(c, 2, both, out))) return st;
    out->dtype = x->dtype;
    return af_movement_check_numel(c, out->rank, out->dims);
}

af_status af_infer_TILE(af_op_ctx *c) {
    const af_tensor *x, *r;
    af_tensor *out;
    af_status st;
    if ((st = af_movement_need_input(c, 0, "input", &x)) || (st = af_movement_need_input(c, 1, "repeats", &r)) ||
        (st = af_movement_need_output(c, &out)))
        return st;
    int rank = x->rank >= 0 ? x->rank : (int)af_movement_len(r);
    if ((st = af_movement_check_rank(c, rank))) return st;
    af_movement_unknown(out, x->dtype, rank);
    if (!af_movement_known(r)) return AF_OK;
    int64_t rep[AF_MAX_RANK];
    int n;
    if ((st = af_movement_read_ints(c, r, "repeats", AF_MAX_RANK, rep, &n))) return st;
    if (rank >= 0 && n != rank)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "repeats has %d values for an input of rank %d", n, rank);
    out->rank = n;
    for (int i = 0; i < n; i++) {
        if (rep[i] < 0)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "repeats value %lld is negative", (long long)rep[i]);
        int64_t d = x->rank >= 0 ? x->dims[i] : -1;
        out->dims[i] = -1;
        if (d >= 0 && !af_mul_i64(d, rep[i], &out->dims[i]))
            return af_ctx_fail(c, AF_ERR_LIMIT, "the output's element count overflows");
    }
    return af_movement_check_numel(c, out->rank, out->dims);
}

af_status af_infer_PAD(af_op_ctx *c) {
    const af_tensor *x;
    af_tensor *out;
    af_status st;
    if ((st = af_movement_need_input(c, 0, "data", &x)) || (st = af_movement_need_output(c, &out))) return st;
    af_movement_pad_mode mode;
    if ((st = af_movement_pad_mode_of(c, &mode))) return st;
    const af_tensor *v = c->opset >= 11 ? af_ctx_input(c, 2) : NULL;
    if (v && v->dtype != AF_DTYPE_UNDEFINED && x->dtype != AF_DTYPE_UNDEFINED && v->dtype != x->dtype)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "constant_value is %s, data is %s",
                           af_dtype_name(v->dtype), af_dtype_name(x->dtype));
    if (v && af_tensor_numel(v) > 1)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "constant_value must hold one value");
    if (x->rank < 0 || !af_movement_pad_known(c)) {
        af_movement_unknown(out, x->dtype, x->rank);
        return AF_OK;
    }
    int64_t pads[2 * AF_MAX_RANK];
    if ((st = af_movement_pad_params(c, x->rank, pads))) return st;
    af_shape_copy(out, x);
    for (int i = 0; i < x->rank; i++) {
        int64_t d = x->dims[i], o;
        if (d < 0) continue;
        if (__builtin_add_overflow(d, pads[i], &o) || __builtin_add_overflow(o, pads[x->rank + i], &o))
            return af_ctx_fail(c, AF_ERR_LIMIT, "padded axis %d overflows", i);
        if (o < 0)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "pads remove more than the %lld elements of axis %d",
                               (long long)d, i);
        if (mode != AF_MOVEMENT_PAD_CONSTANT && d == 0 && o > 0)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "cannot pad the empty axis %d in this mode", i);
        out->dims[i] = o;
    }
    return af_movement_check_numel(c, out->rank, out->dims);
}

/* DepthToSpace / SpaceToDepth: a 4-D input and a positive blocksize. */
static af_status block_setup(const af_op_ctx *c, const af_tensor **x, af_tensor **out, int64_t *b) {
    af_status st;
    if ((st = af_movement_need_input(c, 0, "input", x)) || (st = af_movement_need_output(c, out))) return st;
    *b = af_node_attr_int(c->node, "blocksize", 0);
    if (*b <= 0 || *b > (1 << 20))
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "blocksize %lld is invalid", (long long)*b);
    if ((*x)->rank >= 0 && (*x)->rank != 4)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "input has rank %d, expected 4", (*x)->rank);
    af_movement_unknown(*out, (*x)->dtype, 4);
    return AF_OK;
}

/* d * b, or -1 when d is unknown; fails on overflow. */
static af_status scale_dim(const af_op_ctx *c, int64_t d, int64_t b, int64_t *out) {
    *out = -1;
    if (d >= 0 && !af_mul_i64(d, b, out)) return af_ctx_fail(c, AF_ERR_LIMIT, "the output overflows");
    return AF_OK;
}

/* d / b, or -1 when d is unknown; fails when b does not divide d. */
static af_status div_dim(const af_op_ctx *c, int64_t d, int64_t b, const char *what, int64_t *out) {
    *out = -1;
    if (d < 0) return AF_OK;
    if (d % b != 0)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "%s %lld is not divisible by %lld", what, (long long)d,
                           (long long)b);
    *out = d / b;
    return AF_OK;
}

af_status af_infer_DEPTH_TO_SPACE(af_op_ctx *c) {
    const af_tensor *x;
    af_tensor *out;
    int64_t b;
    af_status st;
    if ((st = block_setup(c, &x, &out, &b))) return st;
    const char *mode = af_node_attr_string(c->node, "mode", "DCR");
    if (strcmp(mode, "DCR") != 0 && strcmp(mode, "CRD") != 0)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "unknown mode '%s'", mode);
    if (x->rank < 0) return AF_OK;
    out->dims[0] = x->dims[0];
    if ((st = div_dim(c, x->dims[1], b * b, "channel count", &out->dims[1])) ||
        (st = scale_dim(c, x->dims[2], b, &out->dims[2])) ||
        (st = scale_dim(c, x->dims[3], b, &out->dims[3])))
        return st;
    return af_movement_check_numel(c, 4, out->dims);
}

af_status af_infer_SPACE_TO_DEPTH(af_op_ctx *c) {
    const af_tensor *x;
    af_tensor *out;
    int64_t b;
    af_status st;
    if ((st = block_setup(c, &x, &out, &b))) return st;
    if (x->rank < 0) return AF_OK;
    out->dims[0] = x->dims[0];
    if ((st = scale_dim(c, x->dims[1], b * b, &out->dims[1])) ||
        (st = div_dim(c, x->dims[2], b, "height", &out->dims[2])) ||
        (st = div_dim(c, x->dims[3], b, "width", &out->dims[3])))
        return st;
    return af_movement_check_numel(c, 4, out->dims);
}

af_status af_infer_TRILU(af_op_ctx *c) {
    const af_tensor *x;
    af_tensor *out;
    af_status st;
    if ((st = af_movement_need_input(c, 0, "input", &x)) || (st = af_movement_need_output(c, &out))) return st;
    if (x->rank >= 0 && x->rank < 2)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "input has rank %d, at least 2 is needed", x->rank);
    const af_tensor *k = af_ctx_input(c, 1);
    if (k && (k->rank > 1 || af_tensor_numel(k) > 1 ||
              (k->dtype != AF_DTYPE_UNDEFINED && !af_movement_is_int(k->dtype))))
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "k must be a single integer");
    af_shape_copy(out, x);
    return AF_OK;
}
