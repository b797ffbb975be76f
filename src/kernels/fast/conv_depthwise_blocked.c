/* Channel-blocked depthwise convolution on AVX-512 (see conv_depthwise_blocked.h). */
#include "kernels/fast/conv_depthwise_blocked.h"

#include <math.h>
#include <string.h>

#include "kernels/gemm/fused_act_avx512.h"
#include "kernels/gemm/gemm_internal.h"
#include "kernels/transpose_avx512.h"
#include "util/alloc.h"

#define TARGET AF_TRANSPOSE_TARGET
#define LANES 16
/* The interleaved block of one task stays within L2 beside its output: */
#define BLOCK_BYTES (96 * 1024)
/* A filled block (af_dw_blocked_run_fill) costs its halo rows' computing, not a copy: larger
 * blocks (still in L2) fill fewer of them twice. */
#define FILL_BLOCK_BYTES (384 * 1024)

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

af_status af_dw_blocked_prepare(const float *weights, int64_t channels, int64_t kh, int64_t kw, af_dw_blocked *b) {
    memset(b, 0, sizeof *b);
    const int64_t groups = ceil_div(channels, LANES), taps = kh * kw;
    b->weights = af_calloc((size_t)(groups * taps * LANES), sizeof(float));
    if (!b->weights) return AF_ERR_OUT_OF_MEMORY;
    for (int64_t c = 0; c < channels; c++)
        for (int64_t t = 0; t < taps; t++)
            b->weights[(c / LANES * taps + t) * LANES + c % LANES] = weights[c * taps + t];
    b->channels = channels;
    b->kh = kh;
    b->kw = kw;
    return AF_OK;
}

void af_dw_blocked_release(af_dw_blocked *b) {
    af_free(b->weights);
    memset(b, 0, sizeof *b);
}

/* The padded block width: every column any tap of the output row reads. */
static int64_t block_width(const af_dw_blocked *b, const af_conv_geom *geo, int64_t ow) {
    return (ow - 1) * geo->stride[1] + (b->kw - 1) * geo->dilation[1] + 1;
}

/* Input rows the output rows [0, rows) read. */
static int64_t rows_in(const af_dw_blocked *b, const af_conv_geom *geo, int64_t rows) {
    return (rows - 1) * geo->stride[0] + (b->kh - 1) * geo->dilation[0] + 1;
}

/* Output rows per task: a block within block_bytes, at least one row. */
static int64_t chunk_rows(const af_dw_blocked *b, const af_conv_geom *geo, int64_t ow, int64_t block_bytes) {
    const int64_t row_bytes = block_width(b, geo, ow) * LANES * (int64_t)sizeof(float);
    int64_t rows = 1;
    while (rows_in(b, geo, rows + 1) * row_bytes <= block_bytes) rows++;
    return rows;
}

/* Floats of one thread's block: the input rows of a chunk, padded columns of 16 lanes each. */
static int64_t block_floats(const af_dw_blocked *b, const af_conv_geom *geo, int64_t ow, int64_t block_bytes) {
    return rows_in(b, geo, chunk_rows(b, geo, ow, block_bytes)) * block_width(b, geo, ow) * LANES;
}

static size_t scratch_bytes(const af_dw_blocked *b, const af_conv_geom *geo, int64_t ow, int n_threads,
                            int64_t block_bytes) {
    if (ow <= 0) return 0;
    return (size_t)block_floats(b, geo, ow, block_bytes) * sizeof(float) * (size_t)(n_threads > 0 ? n_threads : 1);
}

size_t af_dw_blocked_fill_scratch_bytes(const af_dw_blocked *b, const af_conv_geom *geo, int64_t ow, int n_threads) {
    return scratch_bytes(b, geo, ow, n_threads, FILL_BLOCK_BYTES);
}

size_t af_dw_blocked_scratch_bytes(const af_dw_blocked *b, const af_conv_geom *geo, int64_t ow, int n_threads) {
    return scratch_bytes(b, geo, ow, n_threads, BLOCK_BYTES);
}

typedef struct blocked_run {
    const af_dw_blocked *b;
    const af_conv_geom *geo;
    const float *x, *bias;
    af_dw_fill_fn fill; /* non-NULL: makes the block rows instead of x */
    void *fill_ctx;
    float *y, *scratch; /* scratch: each thread's block where the pool has none for it */
    af_threadpool *pool;
    int64_t h, w, oh, ow, wp, rows, chunks, groups, block_floats;
    int64_t y_plane; /* floats between output channel planes: oh * ow, or more for a band of rows */
    const af_epilogue *epi; /* what runs after the store; NULL: nothing */
    af_epilogue_tile_fn apply;
    /* A lone activation step runs on the accumulators instead: clamp to [lo, hi], or HardSwish. */
    af_gemm_fused act;
    int variant; /* the pixel kernel (see variant()) */
} blocked_run;

/* Input row iy (any value: outside the plane it is padding) of channels c0 .. c0 + nc into the
 * block row dst: column j holds input column j - pad_left, as 16 channel lanes. */
TARGET static void interleave_row(const blocked_run *r, const float *x0, int64_t nc, int64_t iy, float *dst) {
    const int64_t wp = r->wp, left = r->geo->pad_begin[1];
    const int64_t j_lo = min64(wp, max64(0, left)), j_hi = iy < 0 || iy >= r->h ? j_lo : min64(wp, left + r->w);
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t j = 0; j < j_lo; j++) _mm512_storeu_ps(dst + j * LANES, zero);
    for (int64_t j = max64(j_hi, j_lo); j < wp; j++) _mm512_storeu_ps(dst + j * LANES, zero);
    for (int64_t j0 = j_lo; j0 < j_hi; j0 += LANES) {
        const int64_t n = min64(LANES, j_hi - j0);
        const __mmask16 m = (__mmask16)((1u << n) - 1);
        __m512 rows[LANES], cols[LANES];
#pragma GCC unroll 16
        for (int c = 0; c < LANES; c++)
            rows[c] = c < nc ? _mm512_maskz_loadu_ps(m, x0 + c * r->h * r->w + iy * r->w + (j0 - left)) : zero;
        af_transpose16x16(rows, cols);
        /* Unrolled with a test, not a loop to n, so cols stays in registers. */
#pragma GCC unroll 16
        for (int k = 0; k < LANES; k++)
            if (k < n) _mm512_storeu_ps(dst + (j0 + k) * LANES, cols[k]);
    }
}

/* The activation, then the R x 16 tile transposed into the nc channel planes (row yrow). */
TARGET static inline __attribute__((always_inline)) void store_tile(const int R, const blocked_run *r,
                                                                    __m512 acc[LANES],
                                                                    int64_t ox0, float *yrow, int64_t nc) {
    af_fused_act_avx512(&r->act, acc, R);
#pragma GCC unroll 16
    for (int i = R; i < LANES; i++) acc[i] = _mm512_setzero_ps();
    __m512 out[LANES];
    af_transpose16x16(acc, out);
    const __mmask16 m = (__mmask16)((1u << R) - 1);
    for (int64_t c = 0; c < nc; c++) _mm512_mask_storeu_ps(yrow + c * r->y_plane + ox0, m, out[c]);
}

/* R output pixels (ox0 .. ox0 + R of row oy) of the 16 channels, inlined with constants. KW > 0
 * (the kernel width, at column stride SX, undilated): each block column of a kernel row is loaded
 * once and feeds every (pixel, tap) that reads it, with the row's weights in registers. Loading
 * once per FMA instead (KW == 0, any geometry) is bound by L2 bandwidth: the rows a 3x3 kernel
 * reads on a 112-wide plane (22 KB) do not stay in L1 beside the rest. */
TARGET static inline __attribute__((always_inline)) void pixels(const int R, const int KW, const int SX,
                                                                const blocked_run *r, const float *blk,
                                                                const float *wg, __m512 bias, int64_t oy_in_blk,
                                                                int64_t ox0, float *yrow, int64_t nc) {
    const af_conv_geom *g = r->geo;
    const int64_t sx = g->stride[1] * LANES, kh = r->b->kh, kw = r->b->kw;
    const int64_t dy = g->dilation[0] * r->wp * LANES, dx = g->dilation[1] * LANES;
    const float *base = blk + (oy_in_blk * g->stride[0] * r->wp + ox0 * g->stride[1]) * LANES;
    __m512 acc[LANES];
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) acc[i] = bias;
    if (KW) {
        for (int64_t ky = 0; ky < kh; ky++, wg += KW * LANES) {
            const float *row = base + ky * dy;
            __m512 w[KW ? KW : 1];
#pragma GCC unroll 5
            for (int kx = 0; kx < KW; kx++) w[kx] = _mm512_loadu_ps(wg + kx * LANES);
#pragma GCC unroll 40
            for (int j = 0; j < (R - 1) * SX + KW; j++) {
                const __m512 v = _mm512_loadu_ps(row + j * LANES);
#pragma GCC unroll 5
                for (int kx = 0; kx < KW; kx++) {
                    const int d = j - kx; /* pixel d / SX reads column j at tap kx */
                    if (d >= 0 && d % SX == 0 && d / SX < R) acc[d / SX] = _mm512_fmadd_ps(w[kx], v, acc[d / SX]);
                }
            }
        }
    } else {
        for (int64_t ky = 0; ky < kh; ky++)
            for (int64_t kx = 0; kx < kw; kx++, wg += LANES) {
                const __m512 wv = _mm512_loadu_ps(wg);
                const float *p = base + ky * dy + kx * dx;
#pragma GCC unroll 16
                for (int i = 0; i < R; i++) acc[i] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p + i * sx), acc[i]);
            }
    }
    store_tile(R, r, acc, ox0, yrow, nc);
}

typedef void (*pixels_fn)(const blocked_run *, const float *, const float *, __m512, int64_t, int64_t, float *,
                          int64_t);
#define DEF_PIXELS(R, KW, SX)                                                                      \
    TARGET static void pixels_##R##_##KW##_##SX(const blocked_run *r, const float *blk, const float *wg, __m512 bias, \
                                                int64_t oy, int64_t ox0, float *yrow, int64_t nc) { \
        pixels(R, KW, SX, r, blk, wg, bias, oy, ox0, yrow, nc);                                    \
    }
/* Per pixel count: any geometry, then 3 and 5 wide at strides 1 and 2 (the MobileNets' shapes). */
#define DEF_ALL(R) DEF_PIXELS(R, 0, 1) DEF_PIXELS(R, 3, 1) DEF_PIXELS(R, 3, 2) DEF_PIXELS(R, 5, 1) DEF_PIXELS(R, 5, 2)
DEF_ALL(1) DEF_ALL(2) DEF_ALL(3) DEF_ALL(4) DEF_ALL(5) DEF_ALL(6) DEF_ALL(7) DEF_ALL(8) DEF_ALL(9) DEF_ALL(10)
DEF_ALL(11) DEF_ALL(12) DEF_ALL(13) DEF_ALL(14) DEF_ALL(15) DEF_ALL(16)
#define ROW(R) {pixels_##R##_0_1, pixels_##R##_3_1, pixels_##R##_3_2, pixels_##R##_5_1, pixels_##R##_5_2}
enum { GENERIC, K3S1, K3S2, K5S1, K5S2, VARIANTS };
static const pixels_fn pixel_kernels[LANES + 1][VARIANTS] = {
    {NULL}, ROW(1),  ROW(2),  ROW(3),  ROW(4),  ROW(5),  ROW(6),  ROW(7),  ROW(8),
    ROW(9), ROW(10), ROW(11), ROW(12), ROW(13), ROW(14), ROW(15), ROW(16),
};

/* Which kernel variant a geometry takes. */
static int variant(const af_dw_blocked *b, const af_conv_geom *g) {
    if (g->dilation[1] != 1 || (g->stride[1] != 1 && g->stride[1] != 2)) return GENERIC;
    if (b->kw == 3) return g->stride[1] == 1 ? K3S1 : K3S2;
    if (b->kw == 5) return g->stride[1] == 1 ? K5S1 : K5S2;
    return GENERIC;
}

/* Task (image, chunk of output rows, channel group), the group fastest so that a contiguous run of
 * tasks (a thread's share, see threadpool.c) is a band of rows: interleave the rows it reads,
 * compute, then the epilogue over its stretch of each channel plane. */
TARGET static void blocked_task(void *ctx, int task, int thread) {
    const blocked_run *r = ctx;
    const af_conv_geom *g = r->geo;
    const int64_t grp = task % r->groups, chunk = task / r->groups % r->chunks, img = task / (r->chunks * r->groups);
    const int64_t c0 = grp * LANES, nc = min64(LANES, r->b->channels - c0);
    const int64_t oy0 = chunk * r->rows, oy1 = min64(r->oh, oy0 + r->rows);
    const int64_t iy0 = oy0 * g->stride[0] - g->pad_begin[0], n_in = rows_in(r->b, g, oy1 - oy0);
    const float *x0 = r->x ? r->x + (img * r->b->channels + c0) * r->h * r->w : NULL;
    float *blk = af_threadpool_scratch_or(r->pool, thread, (size_t)r->block_floats * sizeof(float),
                                          r->scratch + (int64_t)thread * r->block_floats);
    if (r->fill) r->fill(r->fill_ctx, img, c0, nc, iy0, n_in, r->wp, blk);
    else
        for (int64_t i = 0; i < n_in; i++) interleave_row(r, x0, nc, iy0 + i, blk + i * r->wp * LANES);
    const __mmask16 cm = (__mmask16)((1u << nc) - 1);
    const __m512 bias = r->bias ? _mm512_maskz_loadu_ps(cm, r->bias + c0) : _mm512_setzero_ps();
    const float *wg = r->b->weights + grp * r->b->kh * r->b->kw * LANES;
    const int64_t plane = r->y_plane;
    float *y0 = r->y + (img * r->b->channels + c0) * plane;
    for (int64_t oy = oy0; oy < oy1; oy++)
        for (int64_t ox = 0; ox < r->ow; ox += LANES) {
            const int64_t n = min64(LANES, r->ow - ox);
            pixel_kernels[n][r->variant](r, blk, wg, bias, oy - oy0, ox, y0 + oy * r->ow, nc);
        }
    if (r->epi)
        r->apply(r->epi, y0 + oy0 * r->ow, plane, (int)nc, (int)((oy1 - oy0) * r->ow), c0, oy0 * r->ow, img);
}

/* Output rows per chunk: those of one block (chunk_rows), fewer where that leaves a thread
 * without two tasks. */
static int64_t task_rows(const af_dw_blocked *b, const af_conv_geom *geo, int64_t n, int64_t oh, int64_t ow,
                         int n_threads, int64_t block_bytes) {
    int64_t rows = chunk_rows(b, geo, ow, block_bytes);
    const int64_t groups = ceil_div(b->channels, LANES);
    while (rows > 1 && n * groups * ceil_div(oh, rows) < 2 * n_threads) rows = ceil_div(rows, 2);
    return rows;
}

static af_status run_blocked(const af_dw_blocked *b, const af_conv_geom *geo, const float *x, af_dw_fill_fn fill,
                             void *fill_ctx, float *y, int64_t y_plane, int64_t n, int64_t h, int64_t w, int64_t oh,
                             int64_t ow, const float *bias, const af_epilogue *epi, af_threadpool *pool, void *scratch,
                             size_t scratch_size) {
    const int n_threads = af_threadpool_n_threads(pool);
    const int64_t block_bytes = fill ? FILL_BLOCK_BYTES : BLOCK_BYTES;
    if (oh <= 0 || ow <= 0 || !scratch || scratch_bytes(b, geo, ow, n_threads, block_bytes) > scratch_size)
        return AF_ERR_RUNTIME;
    blocked_run r = {.b = b, .geo = geo, .x = x, .fill = fill, .fill_ctx = fill_ctx, .bias = bias, .y = y,
                     .scratch = scratch, .pool = pool, .h = h, .w = w, .oh = oh, .ow = ow, .y_plane = y_plane,
                     .wp = block_width(b, geo, ow), .groups = ceil_div(b->channels, LANES),
                     .epi = epi && epi->n_steps ? epi : NULL, .apply = af_epilogue_tile_fn_for(AF_ISA_AVX512),
                     .act = {.lo = -INFINITY, .hi = INFINITY}};
    /* The GEMM's reading of an epilogue into in-register steps; only the activations apply here
     * (the accumulators hold 16 channels of one pixel, not a tile of C). */
    af_gemm_fused f;
    if (r.epi && af_gemm_compile_fused(r.epi, 0, &f) == r.epi->n_steps && !f.row_scale && !f.row_shift &&
        !f.col_shift && !f.residual) {
        r.act = f;
        r.epi = NULL;
    }
    r.variant = variant(b, geo);
    r.block_floats = block_floats(b, geo, ow, block_bytes);
    r.rows = task_rows(b, geo, n, oh, ow, n_threads, block_bytes);
    r.chunks = ceil_div(oh, r.rows);
    const int64_t tasks = n * r.groups * r.chunks;
    if (tasks > 0x7fffffff) return AF_ERR_LIMIT;
    af_threadpool_run_affine(pool, (int)tasks, blocked_task, &r);
    return AF_OK;
}

af_status af_dw_blocked_run(const af_dw_blocked *b, const af_conv_geom *geo, const float *x, float *y, int64_t n,
                            int64_t h, int64_t w, int64_t oh, int64_t ow, const float *bias, const af_epilogue *epi,
                            af_threadpool *pool, void *scratch, size_t scratch_bytes) {
    return run_blocked(b, geo, x, NULL, NULL, y, oh * ow, n, h, w, oh, ow, bias, epi, pool, scratch, scratch_bytes);
}

af_status af_dw_blocked_run_fill(const af_dw_blocked *b, const af_conv_geom *geo, af_dw_fill_fn fill, void *ctx,
                                 float *y, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow, const float *bias,
                                 const af_epilogue *epi, af_threadpool *pool, void *scratch, size_t scratch_bytes) {
    if (!fill) return AF_ERR_RUNTIME;
    return run_blocked(b, geo, NULL, fill, ctx, y, oh * ow, n, h, w, oh, ow, bias, epi, pool, scratch, scratch_bytes);
}

double af_dw_blocked_fill_factor(const af_dw_blocked *b, const af_conv_geom *geo, int64_t h, int64_t oh, int64_t ow,
                                 int n_threads) {
    if (h <= 0 || oh <= 0 || ow <= 0) return 1.0;
    const int64_t rows = task_rows(b, geo, 1, oh, ow, n_threads > 0 ? n_threads : 1, FILL_BLOCK_BYTES);
    int64_t filled = 0; /* rows_in of each chunk, clipped to the plane (padding rows cost nothing) */
    for (int64_t oy0 = 0; oy0 < oh; oy0 += rows) {
        const int64_t iy0 = oy0 * geo->stride[0] - geo->pad_begin[0], n_in = rows_in(b, geo, min64(rows, oh - oy0));
        filled += max64(0, min64(h, iy0 + n_in) - max64(0, iy0));
    }
    return (double)filled / (double)h;
}
