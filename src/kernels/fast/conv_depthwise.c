#include "kernels/fast/conv_depthwise.h"

#include <immintrin.h>
#include <string.h>

#include "kernels/fast/vec_internal.h"
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
    const af_vec_kernels *vk; /* its phase-plane copy */
    float *scratch;  /* per thread: plane_floats for the phase planes and their output (where the
                        pool has none for the thread), or NULL: the bounds-checked path */
    size_t plane_floats;
    int64_t na, nb, hq, wq; /* the stride phases used (rows, columns) and their planes' size */
} dw_args;

/* Floats read past the last phase plane: a pass is 32 floats and starts below oh * wq, and the
 * furthest tap of a discarded column reaches up to wq floats past the planes. Their results are
 * discarded. */
static int64_t dw_slack(const dw_args *a) { return 32 + a->wq; }

/* One output pixel with bounds checks: the border path. Inlined, so that in row_avx2 it is AVX2
 * code too (a legacy-SSE call from AVX code with the upper register halves dirty stalls on
 * Intel). */
static inline __attribute__((always_inline)) float dw_pixel(const dw_args *a, const float *plane, const float *wk, int64_t oy, int64_t ox) {
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

/* The phase planes of one input plane: for strides (sy, sx), phase (a, b) is
 * P[i][j] = xpad[sy i + a][sx j + b], hq x wq, the planes one after another (stride 1: the
 * zero-padded plane itself). Output (oy, ox) reads tap (ky, kx) from phase (ky dy % sy,
 * kx dx % sx) at row oy + ky dy / sy, column ox + kx dx / sx: at any stride a tap reads
 * consecutive floats for consecutive outputs, and nothing is bounds-checked. */
static void make_phases(const dw_args *a, const float *plane, float *p) {
    const af_conv_geom *g = a->geo;
    const int64_t n = a->hq * a->wq;
    for (int64_t r = 0; r < a->na; r++)
        a->vk->phase_planes(a->hq, a->wq, g->stride[0], g->stride[1], a->nb, plane, a->h, a->w, r - g->pad_begin[0],
                            -g->pad_begin[1], p + r * a->nb * n, n);
    memset(p + a->na * a->nb * n, 0, (size_t)dw_slack(a) * sizeof(float));
}

/* Kernels up to this many taps a side run on the phase planes, larger ones bounds-checked. */
#define DW_MAX_SIDE 32

/* Where the taps of output 0 lie in the phase planes: tap (ky, kx) at row[ky] + col[kx]. */
static void tap_offsets(const dw_args *a, int64_t row[DW_MAX_SIDE], int64_t col[DW_MAX_SIDE]) {
    const af_conv_geom *g = a->geo;
    const int64_t sy = g->stride[0], sx = g->stride[1], plane = a->hq * a->wq;
    for (int64_t ky = 0; ky < a->dw->kh; ky++) {
        const int64_t ty = ky * g->dilation[0];
        row[ky] = ty % sy * a->nb * plane + ty / sy * a->wq;
    }
    for (int64_t kx = 0; kx < a->dw->kw; kx++) {
        const int64_t tx = kx * g->dilation[1];
        col[kx] = tx % sx * plane + tx / sx;
    }
}

/* Output (oy, ox) is the sum over taps of w[tap] * p[tap_offset + oy * wq + ox], a 1-D
 * convolution over the flattened index q = oy * wq + ox. Computing every q in [0, oh * wq) (the
 * columns past ow are discarded) keeps whole vectors busy even on 7-wide planes, with four
 * accumulators per pass over the taps instead of one masked vector per row. At stride 2 it ran
 * MobileNetV3-L's four strided depthwise layers on AVX2 in 0.99 ms instead of 8.0 (profiled, one
 * thread), where the padded plane had been read one output at a time. */
__attribute__((target("avx2,fma"))) static void flat_avx2(const dw_args *a, const float *p, const float *wk,
                                                         float *out, int64_t q_total) {
    const int64_t kh = a->dw->kh, kw = a->dw->kw;
    int64_t row[DW_MAX_SIDE], col[DW_MAX_SIDE];
    tap_offsets(a, row, col);
    for (int64_t q = 0; q < q_total; q += 32) {
        __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
        for (int64_t ky = 0; ky < kh; ky++)
            for (int64_t kx = 0; kx < kw; kx++) {
                const float *src = p + q + row[ky] + col[kx];
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

/* The same in plain C, in passes the compiler vectorizes for the baseline ISA. */
static void flat_portable(const dw_args *a, const float *p, const float *wk, float *out, int64_t q_total) {
    const int64_t kh = a->dw->kh, kw = a->dw->kw;
    int64_t row[DW_MAX_SIDE], col[DW_MAX_SIDE];
    tap_offsets(a, row, col);
    for (int64_t q = 0; q < q_total; q += 32) {
        float acc[32] = {0};
        for (int64_t ky = 0; ky < kh; ky++)
            for (int64_t kx = 0; kx < kw; kx++) {
                const float *src = p + q + row[ky] + col[kx], w = wk[ky * kw + kx];
                for (int i = 0; i < 32; i++) acc[i] += w * src[i];
            }
        memcpy(out + q, acc, sizeof acc);
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
    make_phases(a, plane, p);
    float *out = p + a->na * a->nb * a->hq * a->wq + dw_slack(a);
    if (a->dw->isa >= AF_ISA_AVX2) flat_avx2(a, p, wk, out, a->oh * a->wq);
    else flat_portable(a, p, wk, out, a->oh * a->wq);
    copy_rows(a, out, a->wq, yp);
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

/* The phase layout of a geometry (into a's na, nb, hq, wq), and the floats of one thread's
 * scratch: the planes, dw_slack floats read past them, then their output of oh * wq floats
 * rounded up to a whole pass; a cache line multiple in all. */
static size_t phase_plane_floats(const af_depthwise_conv *dw, const af_conv_geom *geo, int64_t oh, int64_t ow,
                                 dw_args *a) {
    const int64_t ty = (dw->kh - 1) * geo->dilation[0], tx = (dw->kw - 1) * geo->dilation[1];
    a->na = geo->stride[0] < ty + 1 ? geo->stride[0] : ty + 1;
    a->nb = geo->stride[1] < tx + 1 ? geo->stride[1] : tx + 1;
    a->hq = oh + ty / geo->stride[0];
    a->wq = ow + tx / geo->stride[1];
    const size_t out = ((size_t)(oh * a->wq) + 63) & ~(size_t)63;
    return ((size_t)(a->na * a->nb * a->hq * a->wq + dw_slack(a)) + out + 15) & ~(size_t)15;
}

size_t af_depthwise_conv_scratch_bytes(const af_depthwise_conv *dw, const af_conv_geom *geo, int64_t oh, int64_t ow,
                                       int n_threads) {
    if (oh <= 0 || ow <= 0) return 0;
    if (dw->blocked.weights) return af_dw_blocked_scratch_bytes(&dw->blocked, geo, ow, n_threads);
    dw_args a;
    return phase_plane_floats(dw, geo, oh, ow, &a) * sizeof(float) * (size_t)(n_threads > 0 ? n_threads : 1);
}

af_status af_depthwise_conv_run(const af_depthwise_conv *dw, const af_conv_geom *geo, const float *x, float *y,
                                int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow, const float *bias,
                                const af_epilogue *epi, af_threadpool *pool, void *scratch, size_t scratch_bytes) {
    if (oh * ow > 0x7fffffff || n * dw->channels > 0x7fffffff) return AF_ERR_LIMIT;
    if (dw->blocked.weights && scratch && oh > 0 && ow > 0 &&
        af_dw_blocked_scratch_bytes(&dw->blocked, geo, ow, af_threadpool_n_threads(pool)) <= scratch_bytes)
        return af_dw_blocked_run(&dw->blocked, geo, x, y, n, h, w, oh, ow, bias, epi, pool, scratch, scratch_bytes);
    dw_args a = {.dw = dw, .geo = geo, .pool = pool, .x = x, .y = y, .h = h, .w = w, .oh = oh, .ow = ow,
                 .apply = af_epilogue_tile_fn_for(dw->isa), .vk = af_vec_kernels_for(dw->isa)};
    if (scratch && oh > 0 && ow > 0) {
        a.plane_floats = phase_plane_floats(dw, geo, oh, ow, &a);
        size_t need = a.plane_floats * sizeof(float) * (size_t)af_threadpool_n_threads(pool);
        if (need <= scratch_bytes && dw->kh <= DW_MAX_SIDE && dw->kw <= DW_MAX_SIDE)
            a.scratch = scratch; /* else the bounds-checked path */
    }
    af_epilogue_init(&a.epi);
    af_status st = AF_OK;
    if (bias) st = af_epilogue_vec(&a.epi, AF_EPI_BIAS_ROW, bias, NULL);
    for (int i = 0; st == AF_OK && epi && i < epi->n_steps; i++) st = af_epilogue_push(&a.epi, &epi->steps[i]);
    if (st != AF_OK) return st;
    af_threadpool_run(pool, (int)(n * dw->channels), dw_task, &a);
    return AF_OK;
}
