/* Reference kernels of Pad (constant, reflect, edge, wrap; negative pads crop) and Trilu. Both
 * copy bytes by element size, so every dtype takes the same path. */
#include <string.h>

#include "ir/shape/movement.h"
#include "kernels/ref/movement.h"
#include "kernels/ref/pad.h"
#include "util/alloc.h"

int64_t af_ref_pad_source(af_movement_pad_mode mode, int64_t i, int64_t n) {
    if (i >= 0 && i < n) return i;
    switch (mode) {
    case AF_MOVEMENT_PAD_EDGE: return i < 0 ? 0 : n - 1;
    case AF_MOVEMENT_PAD_WRAP: return ((i % n) + n) % n;
    case AF_MOVEMENT_PAD_REFLECT: {
        if (n == 1) return 0;
        int64_t period = 2 * (n - 1), m = ((i % period) + period) % period; /* repeats as numpy does */
        return m < n ? m : period - m;
    }
    default: return -1;
    }
}

af_status af_ref_pad_setup(af_op_ctx *c, af_ref_pad *p) {
    const af_tensor *x = c->inputs[0];
    const af_tensor *out = c->outputs[0];
    const int rank = x->rank;
    memset(p, 0, sizeof *p);
    af_status st;
    if ((st = af_movement_pad_mode_of(c, &p->mode)) || (st = af_movement_pad_params(c, rank, p->pads))) return st;
    if (out->rank != rank || out->dtype != x->dtype)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "output shape does not match the inputs");
    for (int d = 0; d < rank; d++) {
        int64_t want;
        if (__builtin_add_overflow(x->dims[d], p->pads[d], &want) ||
            __builtin_add_overflow(want, p->pads[rank + d], &want) || out->dims[d] != want)
            return af_ctx_fail(c, AF_ERR_RUNTIME, "output shape does not match the pads");
        if (p->mode != AF_MOVEMENT_PAD_CONSTANT && x->dims[d] == 0 && out->dims[d] > 0)
            return af_ctx_fail(c, AF_ERR_RUNTIME, "cannot pad the empty axis %d in this mode", d);
    }
    p->es = af_dtype_size(x->dtype);
    const af_tensor *v = c->opset >= 11 ? af_ctx_input(c, 2) : NULL;
    if (v && af_tensor_numel(v) == 1 && v->dtype == x->dtype) {
        memcpy(p->value, v->data, p->es);
    } else if (c->opset < 11) {
        af_tensor one = {.dtype = x->dtype, .rank = 0, .data = p->value, .nbytes = p->es};
        af_tensor_set_f64(&one, 0, af_node_attr_float(c->node, "value", 0.0f));
    }
    return AF_OK;
}

int64_t *af_ref_pad_tables(const af_ref_pad *p, int rank, const int64_t *in_dims, const int64_t *out_dims,
                           const int64_t **axis) {
    int64_t total = 0;
    for (int d = 0; d < rank; d++) total += out_dims[d];
    int64_t *tables = af_malloc((size_t)(total ? total : 1) * sizeof *tables);
    for (int64_t d = 0, pos = 0; tables && d < rank; pos += out_dims[d], d++) {
        axis[d] = tables + pos;
        for (int64_t o = 0; o < out_dims[d]; o++) tables[pos + o] = af_ref_pad_source(p->mode, o - p->pads[d], in_dims[d]);
    }
    return tables;
}

af_status af_ref_PAD(af_op_ctx *c) {
    const af_tensor *x = c->inputs[0];
    af_tensor *out = c->outputs[0];
    af_ref_pad p;
    af_status st = af_ref_pad_setup(c, &p);
    if (st) return st;
    const int rank = x->rank;
    const int64_t n_out = af_tensor_numel(out);
    if (n_out == 0) return AF_OK;
    const size_t es = p.es;
    /* src[d][o] is the source index along axis d of output index o, -1 for padding. */
    const int64_t *src[AF_MAX_RANK];
    int64_t *tables = af_ref_pad_tables(&p, rank, x->dims, out->dims, src);
    if (!tables) return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory");
    int64_t in_str[AF_MAX_RANK], idx[AF_MAX_RANK] = {0};
    af_movement_dense_strides(rank, x->dims, in_str);
    char *o = out->data;
    for (int64_t e = 0; e < n_out; e++, o += es) {
        int64_t s = 0;
        bool pad = false;
        for (int d = 0; d < rank && !pad; d++) {
            int64_t i = src[d][idx[d]];
            if (i < 0) pad = true;
            s += i * in_str[d];
        }
        memcpy(o, pad ? (const void *)p.value : (const char *)x->data + s * (int64_t)es, es);
        for (int d = rank - 1; d >= 0; d--) {
            if (++idx[d] < out->dims[d]) break;
            idx[d] = 0;
        }
    }
    af_free(tables);
    return AF_OK;
}

af_status af_ref_TRILU(af_op_ctx *c) {
    const af_tensor *x = c->inputs[0];
    af_tensor *out = c->outputs[0];
    if (x->rank < 2 || !af_tensor_same_shape(x, out))
        return af_ctx_fail(c, AF_ERR_RUNTIME, "output shape does not match the input");
    const af_tensor *kt = af_ctx_input(c, 1);
    int64_t k = kt && af_tensor_numel(kt) == 1 ? af_tensor_get_i64(kt, 0) : 0;
    bool upper = af_node_attr_int(c->node, "upper", 1) != 0;
    int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
    if (rows == 0 || cols == 0) return AF_OK;
    int64_t batch = af_tensor_numel(x) / (rows * cols);
    size_t es = af_dtype_size(x->dtype);
    const char *s = x->data;
    char *o = out->data;
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t i = 0; i < rows; i++) {
            for (int64_t j = 0; j < cols; j++, s += es, o += es) {
                bool keep = upper ? j - i >= k : j - i <= k;
                if (keep)
                    memcpy(o, s, es);
                else
                    memset(o, 0, es);
            }
        }
    }
    return AF_OK;
}
