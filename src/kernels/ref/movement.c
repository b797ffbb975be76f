/* Reference kernels of the data-movement ops: Reshape, Flatten, Squeeze, Unsqueeze, Transpose,
 * Concat, Split, Slice, Expand, Tile, DepthToSpace, SpaceToDepth. They copy bytes by element size,
 * so every dtype takes the same path. Pad and Trilu live in movement_pad.c. */
#include "kernels/ref/movement.h"

#include <string.h>

#include "ir/shape/movement.h"
#include "util/alloc.h"

void af_movement_dense_strides(int rank, const int64_t *dims, int64_t *strides) {
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= dims[d];
    }
}

void af_movement_fill(void *dst, const void *one, size_t esize, int64_t count) {
    char *o = dst;
    if (esize == 4) { /* a fixed-size copy the compiler turns into stores */
        uint32_t v;
        memcpy(&v, one, 4);
        for (int64_t i = 0; i < count; i++) memcpy(o + 4 * i, &v, 4);
        return;
    }
    for (int64_t i = 0; i < count; i++) memcpy(o + (size_t)i * esize, one, esize);
}

void af_movement_strided_copy(void *dst, const void *src, int rank, const int64_t *dims,
                              const int64_t *strides, size_t esize) {
    for (int d = 0; d < rank; d++)
        if (dims[d] == 0) return;
    char *o = dst;
    const char *base = src;
    if (rank == 0) {
        memcpy(o, base, esize);
        return;
    }
    int64_t idx[AF_MOVEMENT_MAX_VIEW] = {0};
    int64_t inner = dims[rank - 1], inner_stride = strides[rank - 1];
    int64_t off = 0; /* source element offset of idx */
    for (;;) {
        const char *s = base + off * (int64_t)esize;
        if (inner_stride == 1) {
            memcpy(o, s, (size_t)inner * esize);
            o += inner * (int64_t)esize;
        } else {
            for (int64_t i = 0; i < inner; i++, o += esize)
                memcpy(o, s + i * inner_stride * (int64_t)esize, esize);
        }
        int d = rank - 2;
        for (; d >= 0; d--) {
            off += strides[d];
            if (++idx[d] < dims[d]) break;
            off -= strides[d] * dims[d];
            idx[d] = 0;
        }
        if (d < 0) return;
    }
}

static size_t esize_of(const af_tensor *t) { return af_dtype_size(t->dtype); }

/* Reshape, Flatten, Squeeze and Unsqueeze keep the bytes and change only the shape. */
static af_status copy_all(af_op_ctx *c) {
    const af_tensor *x = c->inputs[0];
    af_tensor *out = c->outputs[0];
    if (out->nbytes != x->nbytes)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "output holds %zu bytes, input %zu", out->nbytes, x->nbytes);
    if (x->nbytes && out->data != x->data) memmove(out->data, x->data, x->nbytes);
    return AF_OK;
}

af_status af_ref_RESHAPE(af_op_ctx *c) { return copy_all(c); }
af_status af_ref_FLATTEN(af_op_ctx *c) { return copy_all(c); }
af_status af_ref_SQUEEZE(af_op_ctx *c) { return copy_all(c); }
af_status af_ref_UNSQUEEZE(af_op_ctx *c) { return copy_all(c); }

static af_status shape_mismatch(const af_op_ctx *c) {
    return af_ctx_fail(c, AF_ERR_RUNTIME, "output shape does not match the inputs");
}

af_status af_ref_TRANSPOSE(af_op_ctx *c) {
    const af_tensor *x = c->inputs[0];
    af_tensor *out = c->outputs[0];
    int perm[AF_MAX_RANK];
    af_status st = af_movement_perm(c, x->rank, perm);
    if (st) return st;
    if (out->rank != x->rank) return shape_mismatch(c);
    int64_t in_str[AF_MAX_RANK], str[AF_MAX_RANK];
    af_movement_dense_strides(x->rank, x->dims, in_str);
    for (int i = 0; i < x->rank; i++) {
        if (out->dims[i] != x->dims[perm[i]]) return shape_mismatch(c);
        str[i] = in_str[perm[i]];
    }
    af_movement_strided_copy(out->data, x->data, x->rank, out->dims, str, esize_of(x));
    return AF_OK;
}

af_status af_ref_CONCAT(af_op_ctx *c) {
    af_tensor *out = c->outputs[0];
    int axis;
    af_status st = af_ctx_axis(c, af_node_attr_int(c->node, "axis", 0), out->rank, &axis);
    if (st) return st;
    int64_t sum = 0;
    for (int i = 0; i < c->n_inputs; i++) {
        const af_tensor *x = c->inputs[i];
        if (x->rank != out->rank || x->dtype != out->dtype) return shape_mismatch(c);
        for (int d = 0; d < out->rank; d++)
            if (d != axis && x->dims[d] != out->dims[d]) return shape_mismatch(c);
        sum += x->dims[axis];
    }
    if (sum != out->dims[axis]) return shape_mismatch(c);
    size_t es = esize_of(out);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= out->dims[d];
    for (int d = axis + 1; d < out->rank; d++) inner *= out->dims[d];
    char *o = out->data;
    for (int64_t n = 0; n < outer; n++) {
        for (int i = 0; i < c->n_inputs; i++) {
            const af_tensor *x = c->inputs[i];
            size_t chunk = (size_t)(x->dims[axis] * inner) * es;
            if (!chunk) continue;
            const char *src = (const char *)x->data + (size_t)n * chunk;
            if (src != o) memcpy(o, src, chunk); /* equal: planned inside the output (memory_plan.h) */
            o += chunk;
        }
    }
    return AF_OK;
}

af_status af_ref_SPLIT(af_op_ctx *c) {
    const af_tensor *x = c->inputs[0];
    int axis;
    af_status st = af_ctx_axis(c, af_node_attr_int(c->node, "axis", 0), x->rank, &axis);
    if (st) return st;
    int64_t *sizes = af_malloc((size_t)c->n_outputs * sizeof *sizes);
    if (!sizes) return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory");
    bool known;
    st = af_movement_split_sizes(c, x->dims[axis], sizes, &known);
    if (st == AF_OK && !known) st = af_ctx_fail(c, AF_ERR_RUNTIME, "split sizes are unknown");
    for (int i = 0; st == AF_OK && i < c->n_outputs; i++) {
        af_tensor *out = af_ctx_output(c, i);
        if (!out) continue;
        if (out->rank != x->rank || out->dims[axis] != sizes[i]) st = shape_mismatch(c);
        for (int d = 0; st == AF_OK && d < x->rank; d++)
            if (d != axis && out->dims[d] != x->dims[d]) st = shape_mismatch(c);
    }
    if (st) {
        af_free(sizes);
        return st;
    }
    size_t es = esize_of(x);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= x->dims[d];
    for (int d = axis + 1; d < x->rank; d++) inner *= x->dims[d];
    size_t row = (size_t)(x->dims[axis] * inner) * es; /* one outer step of the input */
    size_t pos = 0;
    for (int i = 0; i < c->n_outputs; i++) {
        size_t chunk = (size_t)(sizes[i] * inner) * es;
        af_tensor *out = af_ctx_output(c, i);
        if (out && chunk) {
            for (int64_t n = 0; n < outer; n++)
                memcpy((char *)out->data + (size_t)n * chunk, (const char *)x->data + (size_t)n * row + pos,
                       chunk);
        }
        pos += chunk;
    }
    af_free(sizes);
    return AF_OK;
}

af_status af_ref_SLICE(af_op_ctx *c) {
    const af_tensor *x = c->inputs[0];
    af_tensor *out = c->outputs[0];
    af_movement_slice p;
    af_status st = af_movement_slice_params(c, x, &p);
    if (st) return st;
    if (out->rank != x->rank) return shape_mismatch(c);
    int64_t in_str[AF_MAX_RANK], str[AF_MAX_RANK], off = 0;
    af_movement_dense_strides(x->rank, x->dims, in_str);
    for (int d = 0; d < x->rank; d++) {
        if (out->dims[d] != p.len[d]) return shape_mismatch(c);
        off += p.start[d] * in_str[d];
        str[d] = p.step[d] * in_str[d];
    }
    if (af_tensor_numel(out) == 0) return AF_OK;
    size_t es = esize_of(x);
    const char *src = (const char *)x->data + off * (int64_t)es;
    if (src == (const char *)out->data) return AF_OK; /* planned inside the input: one run (memory_plan.h) */
    af_movement_strided_copy(out->data, src, x->rank, out->dims, str, es);
    return AF_OK;
}

af_status af_ref_EXPAND(af_op_ctx *c) {
    const af_tensor *x = c->inputs[0];
    af_tensor *out = c->outputs[0];
    int lead = out->rank - x->rank;
    if (lead < 0) return shape_mismatch(c);
    int64_t in_str[AF_MAX_RANK], str[AF_MAX_RANK];
    af_movement_dense_strides(x->rank, x->dims, in_str);
    for (int d = 0; d < out->rank; d++) {
        if (d < lead) {
            str[d] = 0;
            continue;
        }
        int64_t n = x->dims[d - lead];
        if (n != out->dims[d] && n != 1) return shape_mismatch(c);
        str[d] = n == 1 ? 0 : in_str[d - lead];
    }
    af_movement_strided_copy(out->data, x->data, out->rank, out->dims, str, esize_of(x));
    return AF_OK;
}

/* The output of Tile viewed as [r0, n0, r1, n1, ...]: the repeat index does not move the source. */
af_status af_ref_TILE(af_op_ctx *c) {
    const af_tensor *x = c->inputs[0];
    af_tensor *out = c->outputs[0];
    if (out->rank != x->rank) return shape_mismatch(c);
    int64_t in_str[AF_MAX_RANK], dims[2 * AF_MAX_RANK], str[2 * AF_MAX_RANK];
    af_movement_dense_strides(x->rank, x->dims, in_str);
    for (int d = 0; d < x->rank; d++) {
        int64_t n = x->dims[d];
        if (n == 0 ? out->dims[d] != 0 : out->dims[d] % n != 0) return shape_mismatch(c);
        dims[2 * d] = n == 0 ? 0 : out->dims[d] / n;
        dims[2 * d + 1] = n;
        str[2 * d] = 0;
        str[2 * d + 1] = in_str[d];
    }
    af_movement_strided_copy(out->data, x->data, 2 * x->rank, dims, str, esize_of(x));
    return AF_OK;
}

/* DepthToSpace and SpaceToDepth as one 6-D strided view each: the output [N, C', H', b, W', b] or
 * [N, b, b, C, H', W'] read from the input's strides. */
static af_status block_copy(af_op_ctx *c, bool to_space) {
    const af_tensor *x = c->inputs[0];
    af_tensor *out = c->outputs[0];
    int64_t b = af_node_attr_int(c->node, "blocksize", 0);
    if (x->rank != 4 || out->rank != 4 || b <= 0) return shape_mismatch(c);
    int64_t n = x->dims[0], ch = x->dims[1], h = x->dims[2], w = x->dims[3], dims[6], str[6];
    if (to_space) {
        int64_t oc = ch / (b * b);
        if (ch % (b * b) || out->dims[0] != n || out->dims[1] != oc || out->dims[2] != h * b ||
            out->dims[3] != w * b)
            return shape_mismatch(c);
        bool crd = strcmp(af_node_attr_string(c->node, "mode", "DCR"), "CRD") == 0;
        int64_t hw = h * w;
        /* DCR reads channel (i * b + j) * C' + c, CRD reads c * b * b + i * b + j. */
        int64_t s_c = crd ? b * b * hw : hw, s_i = crd ? b * hw : b * oc * hw, s_j = crd ? hw : oc * hw;
        int64_t d6[6] = {n, oc, h, b, w, b}, s6[6] = {ch * hw, s_c, w, s_i, 1, s_j};
        memcpy(dims, d6, sizeof d6);
        memcpy(str, s6, sizeof s6);
    } else {
        int64_t oh = h / b, ow = w / b;
        if (h % b || w % b || out->dims[0] != n || out->dims[1] != ch * b * b || out->dims[2] != oh ||
            out->dims[3] != ow)
            return shape_mismatch(c);
        /* Output channel (i * b + j) * C + c reads input row h' * b + i, column w' * b + j. */
        int64_t d6[6] = {n, b, b, ch, oh, ow}, s6[6] = {ch * h * w, w, 1, h * w, b * w, b};
        memcpy(dims, d6, sizeof d6);
        memcpy(str, s6, sizeof s6);
    }
    af_movement_strided_copy(out->data, x->data, 6, dims, str, esize_of(x));
    return AF_OK;
}

af_status af_ref_DEPTH_TO_SPACE(af_op_ctx *c) { return block_copy(c, true); }
af_status af_ref_SPACE_TO_DEPTH(af_op_ctx *c) { return block_copy(c, false); }
