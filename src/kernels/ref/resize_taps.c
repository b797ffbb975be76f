/* The source taps of Resize's output positions along one axis (see resize_taps.h). */
#include "kernels/ref/resize_taps.h"

#include <math.h>
#include <string.h>

#include "util/alloc.h"

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

af_status af_resize_taps_build(const af_op_ctx *c, const af_resize_params *p, int axis, int64_t in, int64_t out,
                              int64_t stride, af_resize_taps *t) {
    memset(t, 0, sizeof *t);
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

void af_resize_taps_free(af_resize_taps *t) {
    af_free(t->first);
    af_free(t->count);
    af_free(t->off);
    af_free(t->w);
    memset(t, 0, sizeof *t);
}
