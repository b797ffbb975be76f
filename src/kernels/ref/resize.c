/* Reference kernel of Resize: nearest (every nearest_mode), N-D linear and cubic, optional
 * antialias and exclude_outside, every coordinate transformation mode. Each output axis position
 * gets a list of source taps and weights (kernels/ref/resize_taps.h); an output element sums the
 * product over its axes. */
#include <math.h>
#include <string.h>

#include "ir/shape/resize.h"
#include "kernels/ref/resize_taps.h"
#include "util/alloc.h"

/* Stores v into element i, rounding and saturating for integer outputs. */
static void store(af_tensor *out, int64_t i, double v) {
    double lo, hi;
    switch (out->dtype) {
    case AF_DTYPE_INT8: lo = INT8_MIN, hi = INT8_MAX; break;
    case AF_DTYPE_UINT8: lo = 0, hi = UINT8_MAX; break;
    case AF_DTYPE_INT16: lo = INT16_MIN, hi = INT16_MAX; break;
    case AF_DTYPE_UINT16: lo = 0, hi = UINT16_MAX; break;
    case AF_DTYPE_INT32: lo = INT32_MIN, hi = INT32_MAX; break;
    case AF_DTYPE_UINT32: lo = 0, hi = UINT32_MAX; break;
    case AF_DTYPE_INT64:
    case AF_DTYPE_UINT64: af_tensor_set_f64(out, i, nearbyint(v)); return;
    default: af_tensor_set_f64(out, i, v); return;
    }
    v = nearbyint(v);
    af_tensor_set_f64(out, i, v < lo ? lo : v > hi ? hi : v);
}

af_status af_ref_RESIZE(af_op_ctx *c) {
    const af_tensor *x = c->inputs[0];
    af_tensor *out = c->outputs[0];
    af_resize_params p;
    bool known = false;
    af_status st = af_resize_params_of(c, x, &p, &known);
    if (st) return st;
    if (!known || out->rank != x->rank || out->dtype != x->dtype)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "output shape does not match the inputs");
    for (int d = 0; d < x->rank; d++)
        if (out->dims[d] != p.out_dims[d])
            return af_ctx_fail(c, AF_ERR_RUNTIME, "output shape does not match");
    int64_t n_out = af_tensor_numel(out);
    if (n_out == 0) return AF_OK;
    if (af_tensor_numel(x) == 0) return af_ctx_fail(c, AF_ERR_RUNTIME, "cannot resize an empty input");
    int rank = x->rank;
    af_resize_taps taps[AF_MAX_RANK];
    memset(taps, 0, sizeof taps);
    int64_t stride = 1;
    for (int d = rank - 1; d >= 0 && st == AF_OK; d--) {
        st = af_resize_taps_build(c, &p, d, x->dims[d], out->dims[d], stride, &taps[d]);
        stride *= x->dims[d];
    }
    size_t es = af_dtype_size(x->dtype);
    int64_t pos[AF_MAX_RANK] = {0};
    for (int64_t e = 0; st == AF_OK && e < n_out; e++) {
        bool outside = false, empty = false;
        for (int d = 0; d < rank; d++) {
            outside |= taps[d].count[pos[d]] < 0;
            empty |= taps[d].count[pos[d]] == 0;
        }
        if (outside) {
            store(out, e, p.extrapolation);
        } else if (empty) {
            store(out, e, 0);
        } else if (p.mode == AF_RESIZE_NEAREST) {
            int64_t off = 0;
            for (int d = 0; d < rank; d++) off += taps[d].off[taps[d].first[pos[d]]];
            memcpy((char *)out->data + (size_t)e * es, (const char *)x->data + (size_t)off * es, es);
        } else {
            /* Sum over every combination of one tap per axis. */
            int j[AF_MAX_RANK] = {0};
            double acc = 0;
            for (;;) {
                int64_t off = 0;
                double w = 1;
                for (int d = 0; d < rank; d++) {
                    int64_t k = taps[d].first[pos[d]] + j[d];
                    off += taps[d].off[k];
                    w *= taps[d].w[k];
                }
                acc += w * af_tensor_get_f64(x, off);
                int d = rank - 1;
                for (; d >= 0; d--) {
                    if (++j[d] < taps[d].count[pos[d]]) break;
                    j[d] = 0;
                }
                if (d < 0) break;
            }
            store(out, e, acc);
        }
        for (int d = rank - 1; d >= 0; d--) {
            if (++pos[d] < out->dims[d]) break;
            pos[d] = 0;
        }
    }
    for (int d = 0; d < rank; d++) af_resize_taps_free(&taps[d]);
    return st;
}
