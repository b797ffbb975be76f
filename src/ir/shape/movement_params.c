/* Parameter helpers shared by the data-movement shape functions and reference kernels (see
 * ir/shape/movement.h): small integer inputs, Slice ranges, Pad amounts, Split sizes. */
#include "ir/shape/movement.h"

#include <string.h>

#include "util/alloc.h"

bool af_movement_known(const af_tensor *t) {
    return t && t->rank >= 0 && (t->data || af_tensor_numel(t) == 0);
}

bool af_movement_is_int(af_dtype dt) {
    switch (dt) {
    case AF_DTYPE_INT8:
    case AF_DTYPE_UINT8:
    case AF_DTYPE_INT16:
    case AF_DTYPE_UINT16:
    case AF_DTYPE_INT32:
    case AF_DTYPE_UINT32:
    case AF_DTYPE_INT64:
    case AF_DTYPE_UINT64: return true;
    default: return false;
    }
}

af_status af_movement_check_dtype(const af_op_ctx *c, const af_tensor *t, const char *what) {
    if (t && t->dtype != AF_DTYPE_UNDEFINED && af_dtype_size(t->dtype) == 0)
        return af_ctx_fail(c, AF_ERR_UNSUPPORTED, "%s has dtype %s, which is not supported", what,
                           af_dtype_name(t->dtype));
    return AF_OK;
}

af_status af_movement_need_input(const af_op_ctx *c, int i, const char *name, const af_tensor **x) {
    *x = af_ctx_input(c, i);
    if (!*x) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs input %s", name);
    return af_movement_check_dtype(c, *x, name);
}

af_status af_movement_need_output(const af_op_ctx *c, af_tensor **out) {
    *out = af_ctx_output(c, 0);
    if (!*out) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs an output");
    return AF_OK;
}

af_status af_movement_read_ints(const af_op_ctx *c, const af_tensor *t, const char *what, int max,
                                int64_t *out, int *n) {
    if (t->rank > 1)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "%s must be 1-D, it has rank %d", what, t->rank);
    if (!af_movement_is_int(t->dtype))
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "%s must be an integer tensor, it is %s", what,
                           af_dtype_name(t->dtype));
    int64_t len = af_tensor_numel(t);
    if (len > max)
        return af_ctx_fail(c, AF_ERR_LIMIT, "%s has %lld values, at most %d are supported", what,
                           (long long)len, max);
    for (int64_t i = 0; i < len; i++) out[i] = af_tensor_get_i64(t, i);
    *n = (int)len;
    return AF_OK;
}

int64_t af_movement_len(const af_tensor *t) {
    if (!t || t->rank < 0) return -1;
    if (t->rank == 0) return 1;
    return t->rank == 1 ? t->dims[0] : -1;
}

af_status af_movement_check_numel(const af_op_ctx *c, int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0) continue;
        if (!af_mul_i64(n, dims[i], &n))
            return af_ctx_fail(c, AF_ERR_LIMIT, "the output's element count overflows");
    }
    return AF_OK;
}

void af_movement_unknown(af_tensor *out, af_dtype dtype, int rank) {
    out->dtype = dtype;
    out->rank = rank;
    for (int i = 0; i < AF_MAX_RANK; i++) out->dims[i] = i < rank ? -1 : 0;
}

af_status af_movement_check_rank(const af_op_ctx *c, int64_t rank) {
    if (rank > AF_MAX_RANK)
        return af_ctx_fail(c, AF_ERR_LIMIT, "the output would have rank %lld, at most %d is supported",
                           (long long)rank, AF_MAX_RANK);
    return AF_OK;
}

af_status af_movement_perm(const af_op_ctx *c, int rank, int *perm) {
    const int64_t *p;
    int n = af_node_attr_ints(c->node, "perm", &p);
    if (n < 0) {
        for (int i = 0; i < rank; i++) perm[i] = rank - 1 - i;
        return AF_OK;
    }
    if (n != rank)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "perm has %d values for an input of rank %d", n, rank);
    bool seen[AF_MAX_RANK] = {false};
    for (int i = 0; i < n; i++) {
        if (p[i] < 0 || p[i] >= rank || seen[p[i]])
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "perm is not a permutation of 0..%d", rank - 1);
        seen[p[i]] = true;
        perm[i] = (int)p[i];
    }
    return AF_OK;
}

/* ---- Slice ------------------------------------------------------------------------------------ */

static bool known_or_absent(const af_tensor *t) { return !t || af_movement_known(t); }

bool af_movement_slice_known(const af_op_ctx *c) {
    if (c->opset < 10) return true;
    return af_movement_known(af_ctx_input(c, 1)) && af_movement_known(af_ctx_input(c, 2)) &&
           known_or_absent(af_ctx_input(c, 3)) && known_or_absent(af_ctx_input(c, 4));
}

/* Reads one of starts/ends/axes/steps from the opset-1 attribute or the opset-10 input. n is -1
 * when absent. */
static af_status slice_list(const af_op_ctx *c, int input, const char *name, int64_t *out, int *n) {
    *n = -1;
    if (c->opset < 10) {
        const int64_t *v;
        int len = af_node_attr_ints(c->node, name, &v);
        if (len > 2 * AF_MAX_RANK) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "%s has %d values", name, len);
        if (len >= 0) memcpy(out, v, (size_t)len * sizeof *v);
        *n = len;
        return AF_OK;
    }
    const af_tensor *t = af_ctx_input(c, input);
    if (!t) return AF_OK;
    return af_movement_read_ints(c, t, name, 2 * AF_MAX_RANK, out, n);
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

af_status af_movement_slice_params(const af_op_ctx *c, const af_tensor *data, af_movement_slice *p) {
    int rank = data->rank;
    for (int i = 0; i < rank; i++) {
        p->start[i] = 0;
        p->step[i] = 1;
        p->len[i] = data->dims[i];
    }
    int64_t starts[2 * AF_MAX_RANK], ends[2 * AF_MAX_RANK], axes[2 * AF_MAX_RANK], steps[2 * AF_MAX_RANK];
    int ns, ne, na, nt;
    af_status st;
    if ((st = slice_list(c, 1, "starts", starts, &ns)) || (st = slice_list(c, 2, "ends", ends, &ne)) ||
        (st = slice_list(c, 3, "axes", axes, &na)) || (st = slice_list(c, 4, "steps", steps, &nt)))
        return st;
    if (ns < 0 || ne < 0) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs starts and ends");
    if (ns != ne || (na >= 0 && na != ns) || (nt >= 0 && nt != ns))
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "starts, ends, axes and steps must have the same length");
    if (ns > rank)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "slices %d axes of an input of rank %d", ns, rank);
    bool seen[AF_MAX_RANK] = {false};
    for (int i = 0; i < ns; i++) {
        int axis = i;
        if (na >= 0 && (st = af_ctx_axis(c, axes[i], rank, &axis))) return st;
        if (seen[axis]) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "axis %d is sliced twice", axis);
        seen[axis] = true;
        int64_t step = nt >= 0 ? steps[i] : 1, start = starts[i], end = ends[i];
        if (step == 0) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "step of axis %d is 0", axis);
        p->step[axis] = step;
        int64_t dim = data->dims[axis];
        if (dim < 0) {
            p->len[axis] = -1;
            continue;
        }
        if (start < 0) start += dim;
        if (end < 0) end += dim;
        int64_t len;
        if (step > 0) {
            start = clamp64(start, 0, dim);
            end = clamp64(end, 0, dim);
            len = end > start ? (end - start - 1) / step + 1 : 0;
        } else {
            start = clamp64(start, 0, dim - 1);
            end = clamp64(end, -1, dim - 1);
            len = start > end ? (start - end - 1) / -step + 1 : 0;
        }
        p->start[axis] = len > 0 ? start : 0;
        p->len[axis] = len;
    }
    return AF_OK;
}

/* ---- Pad -------------------------------------------------------------------------------------- */

af_status af_movement_pad_mode_of(const af_op_ctx *c, af_movement_pad_mode *mode) {
    const char *m = af_node_attr_string(c->node, "mode", "constant");
    if (strcmp(m, "constant") == 0)
        *mode = AF_MOVEMENT_PAD_CONSTANT;
    else if (strcmp(m, "reflect") == 0)
        *mode = AF_MOVEMENT_PAD_REFLECT;
    else if (strcmp(m, "edge") == 0)
        *mode = AF_MOVEMENT_PAD_EDGE;
    else if (strcmp(m, "wrap") == 0)
        *mode = AF_MOVEMENT_PAD_WRAP;
    else
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "unknown mode '%s'", m);
    return AF_OK;
}

bool af_movement_pad_known(const af_op_ctx *c) {
    if (c->opset < 11) return true;
    return af_movement_known(af_ctx_input(c, 1)) && (c->opset < 18 || known_or_absent(af_ctx_input(c, 3)));
}

af_status af_movement_pad_params(const af_op_ctx *c, int rank, int64_t *pads) {
    int64_t raw[2 * AF_MAX_RANK], axes[AF_MAX_RANK];
    int n, na = -1;
    af_status st;
    if (c->opset < 11) {
        const int64_t *v;
        n = af_node_attr_ints(c->node, "pads", &v);
        if (n < 0) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs the pads attribute");
        if (n > 2 * AF_MAX_RANK) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "pads has %d values", n);
        memcpy(raw, v, (size_t)n * sizeof *v);
    } else {
        const af_tensor *t = af_ctx_input(c, 1);
        if (!t) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs input pads");
        if ((st = af_movement_read_ints(c, t, "pads", 2 * AF_MAX_RANK, raw, &n))) return st;
        const af_tensor *a = c->opset >= 18 ? af_ctx_input(c, 3) : NULL;
        if (a && (st = af_movement_read_ints(c, a, "axes", AF_MAX_RANK, axes, &na))) return st;
    }
    int naxes = na >= 0 ? na : rank;
    if (n != 2 * naxes)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "pads has %d values, expected %d", n, 2 * naxes);
    for (int i = 0; i < 2 * rank; i++) pads[i] = 0;
    bool seen[AF_MAX_RANK] = {false};
    for (int i = 0; i < naxes; i++) {
        int axis = i;
        if (na >= 0 && (st = af_ctx_axis(c, axes[i], rank, &axis))) return st;
        if (seen[axis]) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "axis %d is padded twice", axis);
        seen[axis] = true;
        pads[axis] = raw[i];
        pads[rank + axis] = raw[naxes + i];
    }
    return AF_OK;
}

/* ---- Split ------------------------------------------------------------------------------------ */

af_status af_movement_split_sizes(const af_op_ctx *c, int64_t dim, int64_t *sizes, bool *known) {
    int n_out = c->n_outputs;
    const int64_t *attr = NULL;
    int n_split = -1;
    const af_tensor *t = NULL;
    *known = true;
    if (n_out < 1) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs at least one output");
    if (c->opset < 13) {
        n_split = af_node_attr_ints(c->node, "split", &attr);
    } else {
        t = af_ctx_input(c, 1);
        if (t && af_tensor_numel(t) == 0 && t->rank == 1) t = NULL; /* an empty split means none */
        if (t) {
            if (!af_movement_known(t)) {
                *known = false;
                return AF_OK;
            }
            if (t->rank > 1 || !af_movement_is_int(t->dtype))
                return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "split must be a 1-D integer tensor");
            n_split = (int)af_tensor_numel(t);
        }
    }
    if (c->opset >= 18) {
        int64_t num = af_node_attr_int(c->node, "num_outputs", -1);
        if (num >= 0 && n_split >= 0)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "split and num_outputs are both given");
        if (num >= 0 && num != n_out)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "num_outputs is %lld but the node has %d outputs",
                               (long long)num, n_out);
    }
    if (n_split >= 0) {
        if (n_split != n_out)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "split has %d values for %d outputs", n_split, n_out);
        int64_t sum = 0;
        for (int i = 0; i < n_out; i++) {
            sizes[i] = attr ? attr[i] : af_tensor_get_i64(t, i);
            if (sizes[i] < 0)
                return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "split value %lld is negative",
                                   (long long)sizes[i]);
            if (__builtin_add_overflow(sum, sizes[i], &sum))
                return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "split values overflow");
        }
        if (dim >= 0 && sum != dim)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "split values sum to %lld, the axis has %lld",
                               (long long)sum, (long long)dim);
        return AF_OK;
    }
    if (dim < 0) {
        *known = false;
        return AF_OK;
    }
    /* Equal parts; when uneven, every part but the last is one larger (opset 18 rule). */
    int64_t part = dim / n_out + (dim % n_out != 0);
    int64_t last = dim - part * (n_out - 1);
    if (last < 0)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "an axis of %lld cannot be split into %d parts",
                           (long long)dim, n_out);
    for (int i = 0; i < n_out; i++) sizes[i] = i == n_out - 1 ? last : part;
    return AF_OK;
}
