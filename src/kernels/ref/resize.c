/* Reference kernel of Resize: nearest (every nearest_mode), N-D linear and cubic, optional
 * antialias and exclude_outside, every coordinate transformation mode. Each output axis position
 * gets a list of source taps and weights; an output element sums the product over its axes. */
#include <math.h>
#include <string.h>

#include "ir/shape/resize.h"
#include "util/alloc.h"

/* Taps of one axis: output position o uses count[o] taps at first[o], or none when count[o] is
 * -1 (outside the crop: the extrapolation value). off[] is the source offset in elements. */
typedef struct axis_taps {
    int64_t *first;
    int *count;
    int64_t *off;
    double *w;
} axis_taps;

/* Source coordinate of output index o along an axis of length in, as the ONNX reference maps it:
 * the resized length is scale * in even where the output was rounded down. */
static double source_coord(const af_resize_params *p, int axis, int64_t o, int64_t in, int64_t out) {
    double s = p->scale[axis], lr = s * (double)in, x = (double)o;
    switch (p->coord) {
    case AF_RESIZE_HALF_PIXEL: return (x + 0.5) / s - 0.5;
    case AF_RESIZE_HALF_PIXEL_SYMMETRIC: {
        double adjust = (double)out / lr, offset = (double)in / 2 * (1 - adjust);
        return offset + (x + 0.5) / s - 0.5;
    }
    case AF_RESIZE_PYTORCH_HALF_PIXEL: return out > 1 ? (x + 0.5) / s - 0.5 : 0.0;
    case AF_RESIZE_ALIGN_CORNERS: return lr == 1 ? 0.0 : x * (double)(in - 1) / (lr - 1);
    case AF_RESIZE_ASYMMETRIC: return x / s;
    case AF_RESIZE_TF_HALF_PIXEL_FOR_NN: return (x + 0.5) / s;
    case AF_RESIZE_TF_CROP_AND_RESIZE: {
        double a = p->roi_start[axis], b = p->roi_end[axis], span = (double)(in - 1);
        if (lr == 1) return 0.5 * (a + b) * span;
        return a * span + x * (b - a) * span / (lr - 1);
    }
    }
    return 0.0;
}

static int64_t nearest_index(af_resize_nearest mode, double x) {
    double f = floor(x), r = x - f;
    if (r == 0) return (int64_t)f;
    switch (mode) {
    case AF_RESIZE_ROUND_PREFER_FLOOR: return (int64_t)(r <= 0.5 ? f : f + 1);
    case AF_RESIZE_ROUND_PREFER_CEIL: return (int64_t)(r < 0.5 ? f : f + 1);
    case AF_RESIZE_FLOOR: return (int64_t)f;
    case AF_RESIZE_CEIL: return (int64_t)(f + 1);
    }
    return (int64_t)f;
}

/* Weight of a tap at distance d (already scaled for antialias). */
static double tap_weight(const af_resize_params *p, double d) {
    d = fabs(d);
    if (p->mode == AF_RESIZE_LINEAR) return d < 1 ? 1 - d : 0;
    double a = p->cubic_a;
    if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
    if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
    return 0;
}

/* First tap relative to floor(x) and the filter's scale: antialias widens the filter by 1/scale
 * when downsampling. */
static void filter_shape(const af_resize_params *p, double scale, int64_t *start, double *fs) {
    *fs = p->antialias && scale < 1 ? scale : 1.0;
    double support = p->mode == AF_RESIZE_LINEAR ? 1 : 2;
    *start = (int64_t)floor(-support / *fs) + 1;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static af_status build_taps(const af_op_ctx *c, const af_resize_params *p, int axis, int64_t in, int64_t out,
                            int64_t stride, axis_taps *t) {
    int64_t start = 0, n = 1;
    double fs = 1;
    if (p->mode != AF_RESIZE_NEAREST) {
        filter_shape(p, p->scale[axis], &start, &fs);
        n = 2 - 2 * start;
        if (n > (1 << 16))
            return af_ctx_fail(c, AF_ERR_LIMIT, "antialias filter of axis %d is too wide", axis);
    }
    size_t slots = (size_t)(out > 0 ? out * n : 1);
    t->first = af_malloc((size_t)(out ? out : 1) * sizeof *t->first);
    t->count = af_malloc((size_t)(out ? out : 1) * sizeof *t->count);
    t->off = af_malloc(slots * sizeof *t->off);
    t->w = af_malloc(slots * sizeof *t->w);
    if (!t->first || !t->count || !t->off || !t->w)
        return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t o = 0; o < out; o++) {
        double x = source_coord(p, axis, o, in, out);
        int64_t base = o * n;
        t->first[o] = base;
        if (p->coord == AF_RESIZE_TF_CROP_AND_RESIZE && (x < 0 || x > (double)(in - 1))) {
            t->count[o] = -1;
            continue;
        }
        if (p->mode == AF_RESIZE_NEAREST) {
            t->off[base] = clamp64(nearest_index(p->nearest, x), 0, in - 1) * stride;
            t->w[base] = 1;
            t->count[o] = 1;
            continue;
        }
        double f = floor(x), ratio = x - f, sum = 0;
        int64_t i0 = (int64_t)f;
        for (int64_t k = 0; k < n; k++) {
            int64_t pos = i0 + start + k;
            double wk = tap_weight(p, ((double)(start + k) - ratio) * fs);
            if (p->exclude_outside && (pos < 0 || pos >= in)) wk = 0;
            t->w[base + k] = wk;
            t->off[base + k] = clamp64(pos, 0, in - 1) * stride;
            sum += wk;
        }
        if ((p->antialias || p->exclude_outside) && sum != 0)
            for (int64_t k = 0; k < n; k++) t->w[base + k] /= sum;
        /* Keep only the taps that contribute, so identity axes cost one tap. */
        int used = 0;
        for (int64_t k = 0; k < n; k++) {
            if (t->w[base + k] == 0) continue;
            t->w[base + used] = t->w[base + k];
            t->off[base + used] = t->off[base + k];
            used++;
        }
        t->count[o] = used;
    }
    return AF_OK;
}

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
    axis_taps taps[AF_MAX_RANK];
    memset(taps, 0, sizeof taps);
    int64_t stride = 1;
    for (int d = rank - 1; d >= 0 && st == AF_OK; d--) {
        st = build_taps(c, &p, d, x->dims[d], out->dims[d], stride, &taps[d]);
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
    for (int d = 0; d < rank; d++) {
        af_free(taps[d].first);
        af_free(taps[d].count);
        af_free(taps[d].off);
        af_free(taps[d].w);
    }
    return st;
}
