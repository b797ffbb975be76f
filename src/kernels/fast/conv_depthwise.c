#include "kernels/fast/conv_depthwise.h"

#include <immintrin.h>
#include <string.h>

#include "kernels/fast/pad_row.h"
#include "util/alloc.h"

af_status af_depthwise_conv_prepare(af_isa isa, const float *weights, int64_t channels, int64_t kh, int64_t kw,
                                    af_depthwise_conv *out) {
    memset(out, 0, sizeof *out);
    size_t n = (size_t)(channels * kh * kw);
    out->weights = af_malloc(n * sizeof(float));
    if (!out->weights) return AF_ERR_OUT_OF_MEMORY;
    memcpy(out->weights, weights, n * sizeof(float));
    out->isa = af_cpu_isa_clamp(isa);
    out->channels = channels;
    out->kh = kh;
    out->kw = kw;
    if (out->isa == AF_ISA_AVX512 && af_dw_blocked_prepare(weights, channels, kh, kw, &out->blocked) != AF_OK) {
        af_depthwise_conv_release(out);
        return AF_ERR_OUT_OF_MEMORY;
    }
    return AF_OK;
}

void af_depthwise_conv_release(af_depthwise_conv *dw) {
    af_dw_blocked_release(&dw->blocked);
    af_free(dw->weights);
    memset(dw, 0, sizeof *dw);
}

const char *af_depthwise_conv_name(const af_depthwise_conv *dw) {
    return dw->isa == AF_ISA_AVX512 ? "f32_dwconv_blocked__avx512" : dw->isa == AF_ISA_AVX2 ? "f32_dwconv__avx2"
                                                                                      : "f32_dwconv__scalar";
}

typedef struct dw_args {
    const af_depthwise_conv *dw;
    const af_conv_geom *geo;
    const float *x;
    float *y;
    int64_t h, w, oh, ow;
    af_epilogue epi; /* bias first, then the fused steps */
    af_epilogue_tile_fn apply;
    af_threadpool *pool;
    float *scratch;  /* per thread: one zero-padded plane of plane_floats (where the pool has
                        none for the thread), or NULL: the bounds-checked path */
    size_t plane_floats;
    int64_t ph, pw;  /* the padded plane's rows and columns */
    bool flat;       /* stride 1 with vectors: the flattened-plane path (scratch also holds its output) */
} dw_args;

/* Floats past a padded plane that the flattened path's last vectors may read: a pass is 64 floats
 * and the last one starts below oh * pw, so it reaches 63 floats plus the widest column offset
 * past the last output row's taps, which end at the plane's end. Their results are discarded. */
static int64_t dw_slack(const af_depthwise_conv *dw, const af_conv_geom *geo) {
    return 64 + (dw->kw - 1) * geo->dilation[1];
}

/* One output pixel with bounds checks: the border path. */
static float dw_pixel(const dw_args *a, const float *plane, const float *wk, int64_t oy, int64_t ox) {
    const af_conv_geom *g = a->geo;
    float acc = 0.0f;
    for (int64_t ky = 0; ky < a->dw->kh; ky++) {
        int64_t iy = oy * g->stride[0] - g->pad_begin[0] + ky * g->dilation[0];
        if (iy < 0 || iy >= a->h) continue;
        for (int64_t kx = 0; kx < a->dw->kw; kx++) {
            int64_t ix = ox * g->stride[1] - g->pad_begin[1] + kx * g->dilation[1];
            if (ix >= 0 && ix < a->w) acc += wk[ky * a->dw->kw + kx] * plane[iy * a->w + ix];
        }
    }
    return acc;
}

/* Output columns [lo, hi) whose every tap lies inside the input row. */
static void interior(const dw_args *a, int64_t *lo, int64_t *hi) {
    const af_conv_geom *g = a->geo;
    int64_t s = g->stride[1], p = g->pad_begin[1], span = (a->dw->kw - 1) * g->dilation[1];
    int64_t l = (p + s - 1) / s; /* first ox with ox*s - p >= 0 */
    int64_t last = a->w - 1 - span + p; /* need ox*s <= last */
    int64_t h_ = last < 0 ? 0 : last / s + 1;
    if (h_ > a->ow) h_ = a->ow;
    if (l > h_) l = h_;
    *lo = l;
    *hi = h_;
}

__attribute__((target("avx2,fma"))) static void row_avx2(const dw_args *a, const float *plane, const float *wk,
                                                         int64_t oy, float *yrow, int64_t lo, int64_t hi) {
    const af_conv_geom *g = a->geo;
    const int64_t dx = g->dilation[1];
    int64_t ox = lo;
    for (; ox + 8 <= hi; ox += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int64_t ky = 0; ky < a->dw->kh; ky++) {
            int64_t iy = oy * g->stride[0] - g->pad_begin[0] + ky * g->dilation[0];
            if (iy < 0 || iy >= a->h) continue;
            const float *row = plane + iy * a->w + ox - g->pad_begin[1];
            for (int64_t kx = 0; kx < a->dw->kw; kx++)
                acc = _mm256_fmadd_ps(_mm256_set1_ps(wk[ky * a->dw->kw + kx]), _mm256_loadu_ps(row + kx * dx), acc);
        }
        _mm256_storeu_ps(yrow + ox, acc);
    }
    for (; ox < hi; ox++) yrow[ox] = dw_pixel(a, plane, wk, oy, ox);
}

/* Copies one input plane into a zero-padded one, so every tap of every output is inside it: on
 * small planes (7x7, 14x14) the border is most of the output and the bounds-checked path would
 * otherwise do most of the work. */
static void pad_plane(const dw_args *a, const float *plane, float *p) {
    const int64_t top = a->geo->pad_begin[0], left = a->geo->pad_begin[1];
    for (int64_t r = 0; r < a->ph; r++) {
        int64_t ir = r - top;
        af_pad_row(p + r * a->pw, a->pw, ir >= 0 && ir < a->h ? plane + ir * a->w : NULL, a->w, left);
    }
    memset(p + a->ph * a->pw, 0, (size_t)dw_slack(a->dw, a->geo) * sizeof(float));
}

/* Stride 1 on a padded plane: output (oy, ox) is sum w[ky,kx] * p[(oy + ky*dy) * pw + ox + kx*dx],
 * a 1-D convolution over the flattened index q = oy * pw + ox. Computing every q in [0, oh * pw)
 * (the columns past ow are discarded) keeps whole vectors busy even on 7-wide planes, with four
 * accumulators per pass over the taps instead of one masked vector per row. */
__attribute__((target("avx2,fma"))) static void flat_avx2(const dw_args *a, const float *p, const float *wk, float *out,
                                                         int64_t q_total) {
    const int64_t kh = a->dw->kh, kw = a->dw->kw, dy = a->geo->dilation[0] * a->pw, dx = a->geo->dilation[1];
    for (int64_t q = 0; q < q_total; q += 32) {
        __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
        for (int64_t ky = 0; ky < kh; ky++)
            for (int64_t kx = 0; kx < kw; kx++) {
                const float *src = p + q + ky * dy + kx * dx;
                __m256 w = _mm256_set1_ps(wk[ky * kw + kx]);
                c0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(src), c0);
                c1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(src + 8), c1);
                c2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(src + 16), c2);
                c3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(src + 24), c3);
            }
        _mm256_storeu_ps(out + q, c0);
        _mm256_storeu_ps(out + q + 8, c1);
        _mm256_storeu_ps(out + q + 16, c2);
        _mm256_storeu_ps(out + q + 24, c3);
    }
}

/* The flattened path's result: rows of `stride` floats in out, of which the first ow are the
 * plane's outputs, copied out to y's plane. */
static void copy_rows(const dw_args *a, const float *out, int64_t stride, float *yp) {
    for (int64_t oy = 0; oy < a->oh; oy++) memcpy(yp + oy * a->ow, out + oy * stride, (size_t)a->ow * sizeof(float));
}

static void dw_task_padded(const dw_args *a, int task, int thread) {
    const int64_t ch = task % a->dw->channels, img = task / a->dw->channels;
    float *p = af_threadpool_scratch_or(a->pool, thread, a->plane_floats * sizeof(float),
                                        a->scratch + (size_t)thread * a->plane_floats);
    const float *plane = a->x + (int64_t)task * a->h * a->w;
    const float *wk = a->dw->weights + ch * a->dw->kh * a->dw->kw;
    float *yp = a->y + (int64_t)task * a->oh * a->ow;
    pad_plane(a, plane, p);
    if (a->flat) { /* stride 1, AVX2 or better */
        float *out = p + a->ph * a->pw + dw_slack(a->dw, a->geo);
        flat_avx2(a, p, wk, out, a->oh * a->pw);
        copy_rows(a, out, a->pw, yp);
    } else { /* the row kernels on the padded plane, whose taps are all inside */
        af_conv_geom geo = *a->geo;
        geo.pad_begin[0] = geo.pad_begin[1] = 0;
        dw_args pa = *a;
        pa.geo = &geo;
        pa.h = a->ph;
        pa.w = a->pw;
        const int64_t s = geo.stride[1];
        bool vec256 = a->dw->isa >= AF_ISA_AVX2 && s == 1;
        for (int64_t oy = 0; oy < a->oh; oy++) {
            float *yrow = yp + oy * a->ow;
            if (vec256) row_avx2(&pa, p, wk, oy, yrow, 0, a->ow);
            else
                for (int64_t ox = 0; ox < a->ow; ox++) yrow[ox] = dw_pixel(&pa, p, wk, oy, ox);
        }
    }
    if (a->epi.n_steps) a->apply(&a->epi, yp, a->oh * a->ow, 1, (int)(a->oh * a->ow), ch, 0, img);
}

static void dw_task(void *ctx, int task, int thread) {
    const dw_args *a = ctx;
    if (a->scratch) {
        dw_task_padded(a, task, thread);
        return;
    }
    const int64_t ch = task % a->dw->channels, img = task / a->dw->channels;
    const float *plane = a->x + (int64_t)task * a->h * a->w;
    const float *wk = a->dw->weights + ch * a->dw->kh * a->dw->kw;
    float *yp = a->y + (int64_t)task * a->oh * a->ow;
    int64_t lo, hi;
    interior(a, &lo, &hi);
    const int64_t s = a->geo->stride[1];
    bool vec256 = a->dw->isa >= AF_ISA_AVX2 && s == 1;
    for (int64_t oy = 0; oy < a->oh; oy++) {
        float *yrow = yp + oy * a->ow;
        for (int64_t ox = 0; ox < lo; ox++) yrow[ox] = dw_pixel(a, plane, wk, oy, ox);
        if (vec256) row_avx2(a, plane, wk, oy, yrow, lo, hi);
        else
            for (int64_t ox = lo; ox < hi; ox++) yrow[ox] = dw_pixel(a, plane, wk, oy, ox);
        for (int64_t ox = hi; ox < a->ow; ox++) yrow[ox] = dw_pixel(a, plane, wk, oy, ox);
    }
    if (a->epi.n_steps) a->apply(&a->epi, yp, a->oh * a->ow, 1, (int)(a->oh * a->ow), ch, 0, img);
}

/* The padded plane, dw_slack floats read past it, then (for the flattened path) its output of
 * oh * pw floats rounded up to a whole pass; a cache line multiple in all. */
static size_t padded_plane_floats(const af_depthwise_conv *dw, const af_conv_geom *geo, int64_t oh, int64_t ow,
                                  int64_t *ph, int64_t *pw) {
    *ph = (oh - 1) * geo->stride[0] + (dw->kh - 1) * geo->dilation[0] + 1;
    *pw = (ow - 1) * geo->stride[1] + (dw->kw - 1) * geo->dilation[1] + 1;
    size_t out = ((size_t)(oh * *pw) + 63) & ~(size_t)63;
    return ((size_t)(*ph * *pw + dw_slack(dw, geo)) + out + 15) & ~(size_t)15;
}

size_t af_depthwise_conv_scratch_bytes(const af_depthwise_conv *dw, const af_conv_geom *geo, int64_t oh, int64_t ow,
                                       int n_threads) {
    int64_t ph, pw;
    if (oh <= 0 || ow <= 0) return 0;
    if (dw->blocked.weights) return af_dw_blocked_scratch_bytes(&dw->blocked, geo, ow, n_threads);
    return padded_plane_floats(dw, geo, oh, ow, &ph, &pw) * sizeof(float) * (size_t)(n_threads > 0 ? n_threads : 1);
}

af_status af_depthwise_conv_run(const af_depthwise_conv *dw, const af_conv_geom *geo, const float *x, float *y,
                                int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow, const float *bias,
                                const af_epilogue *epi, af_threadpool *pool, void *scratch, size_t scratch_bytes) {
    if (oh * ow > 0x7fffffff || n * dw->channels > 0x7fffffff) return AF_ERR_LIMIT;
    if (dw->blocked.weights && scratch && oh > 0 && ow > 0 &&
        af_dw_blocked_scratch_bytes(&dw->blocked, geo, ow, af_threadpool_n_threads(pool)) <= scratch_bytes)
        return af_dw_blocked_run(&dw->blocked, geo, x, y, n, h, w, oh, ow, bias, epi, pool, scratch, scratch_bytes);
    dw_args a = {.dw = dw, .geo = geo, .pool = pool, .x = x, .y = y, .h = h, .w = w, .oh = oh, .ow = ow,
                 .apply = af_epilogue_tile_fn_for(dw->isa)};
    if (scratch && oh > 0 && ow > 0) {
        a.plane_floats = padded_plane_floats(dw, geo, oh, ow, &a.ph, &a.pw);
        size_t need = a.plane_floats * sizeof(float) * (size_t)af_threadpool_n_threads(pool);
        if (need <= scratch_bytes) a.scratch = scratch; /* else the bounds-checked path */
        a.flat = geo->stride[0] == 1 && geo->stride[1] == 1 && dw->isa >= AF_ISA_AVX2;
    }
    af_epilogue_init(&a.epi);
    af_status st = AF_OK;
    if (bias) st = af_epilogue_vec(&a.epi, AF_EPI_BIAS_ROW, bias, NULL);
    for (int i = 0; st == AF_OK && epi && i < epi->n_steps; i++) st = af_epilogue_push(&a.epi, &epi->steps[i]);
    if (st != AF_OK) return st;
    af_threadpool_run(pool, (int)(n * dw->channels), dw_task, &a);
    return AF_OK;
}
