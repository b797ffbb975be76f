/* Channel-blocked depthwise and narrow-group convolution on AVX-512 (see conv_depthwise_blocked.h). */
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
/* Input channels per group the grouped kernel takes (see af_dw_blocked_groups_fit). */
#define MAX_GROUP_CHANNELS 32

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

bool af_dw_blocked_groups_fit(int64_t channels, int64_t group_channels) {
    return channels > 0 && group_channels >= 1 && group_channels <= MAX_GROUP_CHANNELS &&
           channels % group_channels == 0 && (LANES % group_channels == 0 || group_channels % LANES == 0);
}

af_status af_dw_blocked_prepare_grouped(const float *weights, int64_t channels, int64_t group_channels, int64_t kh,
                                        int64_t kw, af_dw_blocked *b) {
    memset(b, 0, sizeof *b);
    if (!af_dw_blocked_groups_fit(channels, group_channels) || kh < 1 || kw < 1) return AF_ERR_INVALID_ARGUMENT;
    const int64_t blocks = ceil_div(channels, LANES), taps = kh * kw, cg = group_channels;
    b->weights = af_calloc((size_t)(blocks * cg * taps * LANES), sizeof(float));
    if (!b->weights) return AF_ERR_OUT_OF_MEMORY;
    for (int64_t c = 0; c < channels; c++)
        for (int64_t j = 0; j < cg; j++)
            for (int64_t t = 0; t < taps; t++)
                b->weights[((c / LANES * cg + j) * taps + t) * LANES + c % LANES] = weights[(c * cg + j) * taps + t];
    b->channels = channels;
    b->group_channels = cg;
    b->kh = kh;
    b->kw = kw;
    return AF_OK;
}

af_status af_dw_blocked_prepare(const float *weights, int64_t channels, int64_t kh, int64_t kw, af_dw_blocked *b) {
    return af_dw_blocked_prepare_grouped(weights, channels, 1, kh, kw, b);
}

void af_dw_blocked_prepare_max(int64_t channels, int64_t kh, int64_t kw, af_dw_blocked *b) {
    *b = (af_dw_blocked){.channels = channels, .kh = kh, .kw = kw, .group_channels = 1, .max = true};
}

size_t af_dw_blocked_weight_bytes(const af_dw_blocked *b) {
    if (!b->weights) return 0;
    return (size_t)(ceil_div(b->channels, LANES) * b->group_channels * b->kh * b->kw * LANES) * sizeof(float);
}

void af_dw_blocked_release(af_dw_blocked *b) {
    af_free(b->weights);
    memset(b, 0, sizeof *b);
}

/* Channels of the input block a task interleaves, and so floats per block column: 16, or a
 * whole group's where groups are 16 channels or wider (the channels every lane of its outputs
 * reads). */
static int64_t unit_channels(const af_dw_blocked *b) {
    return b->group_channels > LANES ? b->group_channels : LANES;
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
    const int64_t row_bytes = block_width(b, geo, ow) * unit_channels(b) * (int64_t)sizeof(float);
    int64_t rows = 1;
    while (rows_in(b, geo, rows + 1) * row_bytes <= block_bytes) rows++;
    return rows;
}

/* Floats of one thread's block: the input rows of a chunk, padded columns of 16 lanes each. */
static int64_t block_floats(const af_dw_blocked *b, const af_conv_geom *geo, int64_t ow, int64_t block_bytes) {
    return rows_in(b, geo, chunk_rows(b, geo, ow, block_bytes)) * block_width(b, geo, ow) * unit_channels(b);
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
    int64_t h, w, oh, ow, wp, rows, chunks, units, block_floats;
    int64_t cs; /* floats per block column: unit_channels */
    int64_t y_plane; /* floats between output channel planes: oh * ow, or more for a band of rows */
    const af_epilogue *epi; /* what runs after the store; NULL: nothing */
    af_epilogue_tile_fn apply;
    /* A lone activation step runs on the accumulators instead: clamp to [lo, hi], or HardSwish. */
    af_gemm_fused act;
    int variant; /* the pixel kernel (see variant()) */
    float pad;   /* what the block holds outside the plane: 0, or -inf for a max */
    int32_t perm_base[LANES]; /* MODE_PERM: lane l reads block lane (l / cg) cg + j for input channel j */
} blocked_run;

/* Input row iy (any value: outside the plane it is padding) of channels c0 .. c0 + nc into the
 * block row dst: column j, at dst + j cs, holds input column j - pad_left, as 16 channel lanes. */
TARGET static void interleave_row(const blocked_run *r, const float *x0, int64_t nc, int64_t iy, float *dst) {
    const int64_t cs = r->cs;
    const int64_t wp = r->wp, left = r->geo->pad_begin[1];
    const int64_t j_lo = min64(wp, max64(0, left)), j_hi = iy < 0 || iy >= r->h ? j_lo : min64(wp, left + r->w);
    const __m512 zero = _mm512_setzero_ps(), pad = _mm512_set1_ps(r->pad);
    for (int64_t j = 0; j < j_lo; j++) _mm512_storeu_ps(dst + j * cs, pad);
    for (int64_t j = max64(j_hi, j_lo); j < wp; j++) _mm512_storeu_ps(dst + j * cs, pad);
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
            if (k < n) _mm512_storeu_ps(dst + (j0 + k) * cs, cols[k]);
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

/* How a lane finds its input channel: depthwise, lane l is channel l of the block; narrow groups
 * (2, 4 or 8 channels), lane l's input channel j is block lane (l / cg) cg + j, a permutation;
 * groups of 16 or 32 channels, input channel j of every lane is the group's channel j, a
 * broadcast. */
enum { MODE_DW, MODE_PERM, MODE_BCAST, MODE_MAX, MODES };

/* Input channel j of the 16 lanes at block column p (see the modes). */
TARGET static inline __attribute__((always_inline)) __m512 lanes_in(const int MODE, const float *p, int64_t j,
                                                                  __m512i idx) {
    if (MODE == MODE_BCAST) return _mm512_set1_ps(p[j]);
    const __m512 v = _mm512_loadu_ps(p);
    return MODE == MODE_PERM ? _mm512_permutexvar_ps(idx, v) : v;
}

/* A max's weights: never read. */
TARGET static inline __attribute__((always_inline)) __m512 v_unused(void) { return _mm512_setzero_ps(); }

/* One tap into an accumulator: w v + acc, or for a max the larger of v and acc, acc where v is
 * NaN (MAXPS returns its second operand then). */
TARGET static inline __attribute__((always_inline)) __m512 tap(const int MODE, __m512 w, __m512 v, __m512 acc) {
    return MODE == MODE_MAX ? _mm512_max_ps(v, acc) : _mm512_fmadd_ps(w, v, acc);
}

/* R output pixels (ox0 .. ox0 + R of row oy) of the 16 channels, inlined with constants. KW > 0
 * (the kernel width, at column stride SX, undilated): each block column of a kernel row is loaded
 * once per input channel and feeds every (pixel, tap) that reads it, with the row's weights in
 * registers. Loading once per FMA instead (KW == 0, any geometry) is bound by L2 bandwidth: the
 * rows a 3x3 kernel reads on a 112-wide plane (22 KB) do not stay in L1 beside the rest. */
TARGET static inline __attribute__((always_inline)) void pixels(const int R, const int KW, const int SX,
                                                                const int MODE, const blocked_run *r,
                                                                const float *blk, const float *wg, __m512 bias,
                                                                int64_t oy_in_blk, int64_t ox0, float *yrow,
                                                                int64_t nc) {
    const af_conv_geom *g = r->geo;
    /* Only a broadcast unit is wider than 16 channels: a constant column stride otherwise. */
    const int64_t cs = MODE == MODE_BCAST ? r->cs : LANES, kh = r->b->kh, kw = r->b->kw, taps = kh * kw;
    const int64_t cg = MODE == MODE_DW ? 1 : r->b->group_channels;
    const int64_t sx = g->stride[1] * cs, dy = g->dilation[0] * r->wp * cs, dx = g->dilation[1] * cs;
    const float *base = blk + (oy_in_blk * g->stride[0] * r->wp + ox0 * g->stride[1]) * cs;
    __m512 acc[LANES];
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) acc[i] = MODE == MODE_MAX ? _mm512_set1_ps(-INFINITY) : bias;
    for (int64_t ch = 0; ch < cg; ch++) {
        const __m512i idx = MODE == MODE_PERM
                                ? _mm512_add_epi32(_mm512_loadu_si512(r->perm_base), _mm512_set1_epi32((int)ch))
                                : _mm512_setzero_si512();
        /* A max has no weights (wg NULL): no tap reads them, and no pointer is made from NULL. */
        const float *wc = MODE == MODE_MAX ? NULL : wg + ch * taps * LANES;
        if (KW) {
            for (int64_t ky = 0; ky < kh; ky++) {
                const float *wr = MODE == MODE_MAX ? NULL : wc + ky * KW * LANES;
                const float *row = base + ky * dy;
                __m512 w[KW ? KW : 1];
#pragma GCC unroll 5
                for (int kx = 0; kx < KW; kx++) w[kx] = MODE == MODE_MAX ? v_unused() : _mm512_loadu_ps(wr + kx * LANES);
#pragma GCC unroll 40
                for (int j = 0; j < (R - 1) * SX + KW; j++) {
                    const __m512 v = lanes_in(MODE, row + j * cs, ch, idx);
#pragma GCC unroll 5
                    for (int kx = 0; kx < KW; kx++) {
                        const int d = j - kx; /* pixel d / SX reads column j at tap kx */
                        if (d >= 0 && d % SX == 0 && d / SX < R)
                            acc[d / SX] = tap(MODE, w[kx], v, acc[d / SX]);
                    }
                }
            }
        } else {
            for (int64_t ky = 0; ky < kh; ky++)
                for (int64_t kx = 0; kx < kw; kx++) {
                    const __m512 wv = MODE == MODE_MAX ? v_unused() : _mm512_loadu_ps(wc + (ky * kw + kx) * LANES);
                    const float *p = base + ky * dy + kx * dx;
#pragma GCC unroll 16
                    for (int i = 0; i < R; i++) acc[i] = tap(MODE, wv, lanes_in(MODE, p + i * sx, ch, idx), acc[i]);
                }
        }
    }
    store_tile(R, r, acc, ox0, yrow, nc);
}

typedef void (*pixels_fn)(const blocked_run *, const float *, const float *, __m512, int64_t, int64_t, float *,
                          int64_t);
#define DEF_PIXELS(R, KW, SX, MODE)                                                                        \
    TARGET static void pixels_##R##_##KW##_##SX##_##MODE(const blocked_run *r, const float *blk, const float *wg, \
                                                         __m512 bias, int64_t oy, int64_t ox0, float *yrow,    \
                                                         int64_t nc) {                                         \
        pixels(R, KW, SX, MODE, r, blk, wg, bias, oy, ox0, yrow, nc);                                        \
    }
/* Per pixel count and mode: any geometry, then 3 and 5 wide at strides 1 and 2 (the MobileNets'
 * shapes); the grouped modes take 3 wide only (ResNeXt's and RegNet's shapes). */
#define DEF_MODE(R, MODE) DEF_PIXELS(R, 0, 1, MODE) DEF_PIXELS(R, 3, 1, MODE) DEF_PIXELS(R, 3, 2, MODE)
#define DEF_ALL(R)                                                                                     \
    DEF_MODE(R, MODE_DW) DEF_PIXELS(R, 5, 1, MODE_DW) DEF_PIXELS(R, 5, 2, MODE_DW) DEF_MODE(R, MODE_PERM) \
        DEF_MODE(R, MODE_BCAST) DEF_MODE(R, MODE_MAX)
DEF_ALL(1) DEF_ALL(2) DEF_ALL(3) DEF_ALL(4) DEF_ALL(5) DEF_ALL(6) DEF_ALL(7) DEF_ALL(8) DEF_ALL(9) DEF_ALL(10)
DEF_ALL(11) DEF_ALL(12) DEF_ALL(13) DEF_ALL(14) DEF_ALL(15) DEF_ALL(16)
enum { GENERIC, K3S1, K3S2, K5S1, K5S2, VARIANTS };
#define MODE_ROW(R, MODE) \
    {pixels_##R##_0_1_##MODE, pixels_##R##_3_1_##MODE, pixels_##R##_3_2_##MODE, NULL, NULL}
#define ROW(R)                                                                                                   \
    {{pixels_##R##_0_1_MODE_DW, pixels_##R##_3_1_MODE_DW, pixels_##R##_3_2_MODE_DW, pixels_##R##_5_1_MODE_DW,    \
      pixels_##R##_5_2_MODE_DW},                                                                                 \
     MODE_ROW(R, MODE_PERM), MODE_ROW(R, MODE_BCAST), MODE_ROW(R, MODE_MAX)}
static const pixels_fn pixel_kernels[LANES + 1][MODES][VARIANTS] = {
    {{NULL}}, ROW(1),  ROW(2),  ROW(3),  ROW(4),  ROW(5),  ROW(6),  ROW(7),  ROW(8),
    ROW(9),   ROW(10), ROW(11), ROW(12), ROW(13), ROW(14), ROW(15), ROW(16),
};

static int mode(const af_dw_blocked *b) {
    if (b->max) return MODE_MAX;
    return b->group_channels == 1 ? MODE_DW : b->group_channels < LANES ? MODE_PERM : MODE_BCAST;
}

/* Which kernel variant a geometry takes (one that pixel_kernels has for the mode). */
static int variant(const af_dw_blocked *b, const af_conv_geom *g) {
    if (g->dilation[1] != 1 || (g->stride[1] != 1 && g->stride[1] != 2)) return GENERIC;
    if (b->kw == 3) return g->stride[1] == 1 ? K3S1 : K3S2;
    if (b->kw == 5 && mode(b) == MODE_DW) return g->stride[1] == 1 ? K5S1 : K5S2;
    return GENERIC;
}

/* Task (image, chunk of output rows, unit of channels), the unit fastest so that a contiguous run
 * of tasks (a thread's share, see threadpool.c) is a band of rows: interleave the rows it reads,
 * compute each block of 16 output channels, then the epilogue over its stretch of each channel
 * plane. A unit is 16 channels, or a group of 32 (its input and output channels alike). */
TARGET static void blocked_task(void *ctx, int task, int thread) {
    const blocked_run *r = ctx;
    const af_conv_geom *g = r->geo;
    const int64_t unit = task % r->units, chunk = task / r->units % r->chunks, img = task / (r->chunks * r->units);
    const int64_t c0 = unit * r->cs, nc = min64(r->cs, r->b->channels - c0);
    const int64_t oy0 = chunk * r->rows, oy1 = min64(r->oh, oy0 + r->rows);
    const int64_t iy0 = oy0 * g->stride[0] - g->pad_begin[0], n_in = rows_in(r->b, g, oy1 - oy0);
    float *blk = af_threadpool_scratch_or(r->pool, thread, (size_t)r->block_floats * sizeof(float),
                                          r->scratch + (int64_t)thread * r->block_floats);
    if (r->fill) r->fill(r->fill_ctx, img, c0, nc, iy0, n_in, r->wp, blk);
    else
        for (int64_t s = 0; s < nc; s += LANES) {
            const float *xs = r->x + (img * r->b->channels + c0 + s) * r->h * r->w;
            for (int64_t i = 0; i < n_in; i++)
                interleave_row(r, xs, min64(LANES, nc - s), iy0 + i, blk + i * r->wp * r->cs + s);
        }
    const int64_t plane = r->y_plane, taps = r->b->kh * r->b->kw;
    const int m = mode(r->b);
    for (int64_t s = 0; s < nc; s += LANES) {
        const int64_t ns = min64(LANES, nc - s);
        const __mmask16 cm = (__mmask16)((1u << ns) - 1);
        const __m512 bias = r->bias ? _mm512_maskz_loadu_ps(cm, r->bias + c0 + s) : _mm512_setzero_ps();
        const float *wg = r->b->weights ? r->b->weights + (c0 + s) / LANES * r->b->group_channels * taps * LANES : NULL;
        float *ys = r->y + (img * r->b->channels + c0 + s) * plane;
        for (int64_t oy = oy0; oy < oy1; oy++)
            for (int64_t ox = 0; ox < r->ow; ox += LANES) {
                const int64_t n = min64(LANES, r->ow - ox);
                pixel_kernels[n][m][r->variant](r, blk, wg, bias, oy - oy0, ox, ys + oy * r->ow, ns);
            }
    }
    float *y0 = r->y + (img * r->b->channels + c0) * plane;
    if (r->epi)
        r->apply(r->epi, y0 + oy0 * r->ow, plane, (int)nc, (int)((oy1 - oy0) * r->ow), c0, oy0 * r->ow, img);
}

/* Output rows per chunk: those of one block (chunk_rows), fewer where that leaves a thread
 * without two tasks. */
static int64_t task_rows(const af_dw_blocked *b, const af_conv_geom *geo, int64_t n, int64_t oh, int64_t ow,
                         int n_threads, int64_t block_bytes) {
    int64_t rows = chunk_rows(b, geo, ow, block_bytes);
    const int64_t units = ceil_div(b->channels, unit_channels(b));
    while (rows > 1 && n * units * ceil_div(oh, rows) < 2 * n_threads) rows = ceil_div(rows, 2);
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
                     .wp = block_width(b, geo, ow), .cs = unit_channels(b),
                     .units = ceil_div(b->channels, unit_channels(b)),
                     .epi = epi && epi->n_steps ? epi : NULL, .apply = af_epilogue_tile_fn_for(AF_ISA_AVX512),
                     .act = {.lo = -INFINITY, .hi = INFINITY}, .pad = b->max ? -INFINITY : 0.0f};
    const int cg = (int)b->group_channels;
    for (int l = 0; l < LANES; l++) r.perm_base[l] = cg < LANES ? l / cg * cg : 0;
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
    const int64_t tasks = n * r.units * r.chunks;
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
    if (!fill || b->group_channels != 1 || b->max) return AF_ERR_RUNTIME;
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
