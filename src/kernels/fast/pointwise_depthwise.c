/* The fused pointwise + depthwise convolution (see pointwise_depthwise.h). */
#include "kernels/fast/pointwise_depthwise.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/fast/conv_depthwise_blocked.h"
#include "kernels/gemm/fused_act_avx512.h"
#include "kernels/gemm/gemm_internal.h"
#include "util/alloc.h"
#include "util/cpu.h"
#include "util/error.h"

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define LANES 16
/* Pixels one register tile expands: their accumulators and a weight vector stay in registers. */
#define PIXELS 16
/* On AMD (an EPYC of family 26, session 21) the fusion pays where the expanded tensor would not stay in L2 between the
 * kernels. MobileNetV3-L with every expand + depthwise pair fused (features.3 to .15, 0.9 MB down
 * to 0.2 MB expanded) against this gate (features.2 alone), per pair, medians of 3 alternating
 * profiles of 300 runs: at one thread (one CPU) -4 to +11% on features.3-.13 and +31% on .14-.15
 * (7x7, 160 -> 960 channels), the model 3.94 -> 4.18 ms; at two threads features.6-.13 14-26%
 * faster, .14-.15 3-4% slower, the model 3.00 -> 2.86 ms, within what the host's swings allow
 * (bench/RESULTS.md, session 21). (With the GEMM and bands before the fill kernel: 64 x 112 x 112,
 * 3.2 MB, 0.322 against 0.347 ms at one thread; 72 x 56 x 56 +1 to +5%; 960 x 7 x 7 +38%.)
 * On Intel (a Xeon of family 6, model 207) it pays at every size: what it saves is also the two
 * 16 x 16 register transposes each expanded element takes unfused (out of the 1x1 conv's tile,
 * into the depthwise conv's blocks), shuffles that there share the one 512-bit shuffle port with
 * the FMAs. MobileNetV3-L with every pair fused against the gate, bench/inproc_ab.c (300 pairs of
 * runs taken in turn): 0.957 [quartiles 0.941-0.975] at one thread, 0.951 [0.924-0.981] at two;
 * leaving out the 14x14 pairs (0.14-0.16 MB), or those under 0.4 MB as well, moved it by 1% at
 * most, either way (bench/RESULTS.md, session 28). */
#define EXPANDED_MIN_BYTES (1024 * 1024)
/* On AMD's Zen 4 (family 25), whose 512-bit shuffles run at half rate on 256-bit pipes, every pair
 * fused paid as on Intel: bench/inproc_ab with no gate against the 1 MiB one (40 pairs, B / A, one
 * / two threads): MobileNetV3-L 0.975 / 0.892, MnasNet 0.947 / 0.932, MobileNetV2 0.989 / 0.953,
 * EfficientNet-B0 0.974 / 0.955 (bench/RESULTS.md, session 34). */
#define AMD_ZEN4_FAMILY 25

size_t af_pwdw_min_expanded_bytes(void) {
    const af_cpu_info *ci = af_cpu_info_get();
    const bool zen4 = ci->vendor == AF_CPU_VENDOR_AMD && ci->family == AMD_ZEN4_FAMILY;
    return ci->vendor == AF_CPU_VENDOR_INTEL || zen4 ? 0 : EXPANDED_MIN_BYTES;
}

typedef struct pwdw_state {
    af_pwdw_desc d;        /* weights NULL (regrouped below); b2 points into `biases` */
    float *w1;             /* [channels / 16 rounded up][taps1][16], zero past the last channel */
    int64_t taps1;         /* products per expanded element: cin, or cin kh1 kw1 (a dense first conv) */
    float *biases;         /* b1 ([groups * 16], zero past the last channel) then b2 ([channels]) */
    af_dw_blocked dw;
    af_gemm_fused act1;    /* act1 in registers, as the GEMM's tiles apply it (clamp / HardSwish) */
    af_epilogue act1_rest; /* act1 where it is not one of those: the tile applier on each row */
    af_epilogue epi2;      /* act2, after the depthwise conv's bias */
    int n_threads;         /* the thread count the scratch is sized for */
    size_t scratch_bytes;  /* the depthwise kernel's blocks, for n_threads */
} pwdw_state;

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

typedef struct fill_ctx {
    const pwdw_state *s;
    const float *x; /* [N, cin, h, w] */
    int64_t h, w;   /* this run's plane (the desc's, or the input's where the desc has none) */
} fill_ctx;

/* R consecutive pixels of the plane (they may span rows): the 16 channels of each,
 * act1(W1 x + b1), summed over the input channels in order from zero, the bias added after, as
 * the unfused 1x1 conv's GEMM tiles do, so the expanded values are the same bit for bit. Pixel i
 * goes to dst + off[i]. */
TARGET static inline __attribute__((always_inline)) void expand(const int R, const pwdw_state *s, const float *xp,
                                                                int64_t plane, const float *wg, __m512 bias,
                                                                float *dst, const int32_t *off) {
    __m512 acc[PIXELS];
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) acc[i] = _mm512_setzero_ps();
    for (int64_t k = 0; k < s->d.cin; k++, xp += plane, wg += LANES) {
        const __m512 wv = _mm512_loadu_ps(wg);
#pragma GCC unroll 16
        for (int i = 0; i < R; i++) acc[i] = _mm512_fmadd_ps(wv, _mm512_set1_ps(xp[i]), acc[i]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) acc[i] = _mm512_add_ps(acc[i], bias);
    af_fused_act_avx512(&s->act1, acc, R);
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) _mm512_storeu_ps(dst + off[i], acc[i]);
}

typedef void (*expand_fn)(const pwdw_state *, const float *, int64_t, const float *, __m512, float *, const int32_t *);
#define DEF_EXPAND(R)                                                                              \
    TARGET static void expand_##R(const pwdw_state *s, const float *xp, int64_t plane, const float *wg, __m512 bias, \
                                  float *dst, const int32_t *off) {                                \
        expand(R, s, xp, plane, wg, bias, dst, off);                                               \
    }
DEF_EXPAND(1) DEF_EXPAND(2) DEF_EXPAND(3) DEF_EXPAND(4) DEF_EXPAND(5) DEF_EXPAND(6) DEF_EXPAND(7) DEF_EXPAND(8)
DEF_EXPAND(9) DEF_EXPAND(10) DEF_EXPAND(11) DEF_EXPAND(12) DEF_EXPAND(13) DEF_EXPAND(14) DEF_EXPAND(15) DEF_EXPAND(16)
static const expand_fn expanders[PIXELS + 1] = {NULL,      expand_1,  expand_2,  expand_3,  expand_4,  expand_5,
                                                expand_6,  expand_7,  expand_8,  expand_9,  expand_10, expand_11,
                                                expand_12, expand_13, expand_14, expand_15, expand_16};

/* A fill's zeros: in block rows [iy0, iy0 + rows) (wp columns each), every column outside
 * [j_lo, j_hi) (the depthwise conv's padding), and whole rows outside the plane's h rows; the
 * first conv writes the rest. */
TARGET static void zero_padding(float *dst, int64_t iy0, int64_t rows, int64_t h, int64_t wp, int64_t j_lo,
                                int64_t j_hi) {
    for (int64_t i = 0; i < rows; i++) {
        float *row = dst + i * wp * LANES;
        const bool inside = iy0 + i >= 0 && iy0 + i < h && j_hi > j_lo;
        const int64_t z0 = inside ? j_lo : wp, z1 = inside ? j_hi : wp; /* columns the expansion writes */
        for (int64_t j = 0; j < z0; j++) _mm512_storeu_ps(row + j * LANES, _mm512_setzero_ps());
        for (int64_t j = z1; j < wp; j++) _mm512_storeu_ps(row + j * LANES, _mm512_setzero_ps());
    }
}

/* af_dw_fill_fn: block rows of expanded input rows, made from x's rows of every input channel.
 * The plane's rows are contiguous in x, so a register tile takes 16 consecutive pixels across
 * row ends (MobileNetV3's 7x7 layers: two rows a tile, not one short one). The depthwise conv
 * pads the expanded tensor, so rows and columns outside the plane are zero, not act1(b1). */
TARGET static void fill_rows(void *ctx, int64_t img, int64_t c0, int64_t nc, int64_t iy0, int64_t rows, int64_t wp,
                             float *dst) {
    (void)nc;
    const fill_ctx *fc = ctx;
    const pwdw_state *s = fc->s;
    const af_pwdw_desc *d = &s->d;
    const int64_t w = fc->w, left = d->geo.pad_begin[1], j_lo = min64(wp, left > 0 ? left : 0);
    const int64_t j_hi = min64(wp, left + w), y0 = iy0 < 0 ? 0 : iy0, y1 = min64(fc->h, iy0 + rows);
    zero_padding(dst, iy0, rows, fc->h, wp, j_lo, j_hi);
    if (y1 <= y0 || j_hi <= j_lo) return;
    /* Input columns [j_lo - left, j_hi - left) of rows [y0, y1); a full-width run when they are
     * all the row's columns. */
    const int64_t x_lo = j_lo - left, x_n = j_hi - j_lo, plane = fc->h * w;
    const float *xb = fc->x + img * d->cin * plane;
    const float *wg = s->w1 + c0 * d->cin; /* c0 / 16 groups of cin x 16 */
    const __m512 bias = _mm512_loadu_ps(d->b1 + c0);
    const bool flat = x_lo == 0 && x_n == w;
    const int64_t runs = flat ? 1 : y1 - y0, run_len = flat ? (y1 - y0) * w : x_n;
    int32_t off[PIXELS];
    for (int64_t r = 0; r < runs; r++) {
        const int64_t first = (y0 + r) * w + x_lo; /* the run's first pixel in the plane */
        for (int64_t p0 = 0; p0 < run_len; p0 += PIXELS) {
            const int n = (int)min64(PIXELS, run_len - p0);
            int64_t yy = (first + p0) / w, xx = (first + p0) % w;
            if (xx + n <= w) { /* within one row: consecutive columns */
                const int32_t o = (int32_t)(((yy - iy0) * wp + xx + left) * LANES);
                for (int i = 0; i < n; i++) off[i] = o + i * LANES;
            } else {
                for (int i = 0; i < n; i++, xx++) {
                    if (xx == w) xx = 0, yy++;
                    off[i] = (int32_t)(((yy - iy0) * wp + xx + left) * LANES);
                }
            }
            expanders[n](s, xb + first + p0, plane, wg, bias, dst, off);
        }
    }
    if (s->act1_rest.n_steps)
        for (int64_t y = y0; y < y1; y++)
            af_epilogue_apply_avx512(&s->act1_rest, dst + ((y - iy0) * wp + j_lo) * LANES, 0, 1, (int)(x_n * LANES), 0,
                                     0, 0);
}

/* A dense first conv: R pixels of one row, at stride sx in x, from the taps that read inside x:
 * tap j reads xp[off[j] + i sx] for pixel i and weighs it by the 16 channels at wg + wi[j]. The
 * taps come in the order of the weights (input channel, kernel row, kernel column); those that
 * read padding are left out (their products are zero). */
TARGET static inline __attribute__((always_inline)) void expand_taps(const int R, const pwdw_state *s, const float *xp,
                                                                     int64_t sx, const int32_t *off,
                                                                     const int32_t *wi, int n_taps, const float *wg,
                                                                     __m512 bias, float *dst) {
    __m512 acc[PIXELS];
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) acc[i] = _mm512_setzero_ps();
    for (int j = 0; j < n_taps; j++) {
        const __m512 wv = _mm512_loadu_ps(wg + wi[j]);
        const float *p = xp + off[j];
#pragma GCC unroll 16
        for (int i = 0; i < R; i++) acc[i] = _mm512_fmadd_ps(wv, _mm512_set1_ps(p[i * sx]), acc[i]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) acc[i] = _mm512_add_ps(acc[i], bias);
    af_fused_act_avx512(&s->act1, acc, R);
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) _mm512_storeu_ps(dst + i * LANES, acc[i]);
}

typedef void (*expand_taps_fn)(const pwdw_state *, const float *, int64_t, const int32_t *, const int32_t *, int,
                               const float *, __m512, float *);
/* One function per tile width R and x stride (1, 2: a constant, so the pixels' addresses are
 * displacements of one register, not a chain of adds; 0: the stride the call passes). */
#define DEF_EXPAND_TAPS(R, SX)                                                                                    \
    TARGET static void expand_taps_##R##_##SX(const pwdw_state *s, const float *xp, int64_t sx, const int32_t *off, \
                                              const int32_t *wi, int n_taps, const float *wg, __m512 bias,        \
                                              float *dst) {                                                      \
        expand_taps(R, s, xp, SX ? SX : sx, off, wi, n_taps, wg, bias, dst);                                      \
    }
#define DEF_EXPAND_TAPS_ALL(SX)                                                                                   \
    DEF_EXPAND_TAPS(1, SX) DEF_EXPAND_TAPS(2, SX) DEF_EXPAND_TAPS(3, SX) DEF_EXPAND_TAPS(4, SX)                   \
    DEF_EXPAND_TAPS(5, SX) DEF_EXPAND_TAPS(6, SX) DEF_EXPAND_TAPS(7, SX) DEF_EXPAND_TAPS(8, SX)                   \
    DEF_EXPAND_TAPS(9, SX) DEF_EXPAND_TAPS(10, SX) DEF_EXPAND_TAPS(11, SX) DEF_EXPAND_TAPS(12, SX)                \
    DEF_EXPAND_TAPS(13, SX) DEF_EXPAND_TAPS(14, SX) DEF_EXPAND_TAPS(15, SX) DEF_EXPAND_TAPS(16, SX)
DEF_EXPAND_TAPS_ALL(0) DEF_EXPAND_TAPS_ALL(1) DEF_EXPAND_TAPS_ALL(2)
#define EXPAND_TAPS_ROW(SX)                                                                                       \
    {NULL,                  expand_taps_1_##SX,  expand_taps_2_##SX,  expand_taps_3_##SX,  expand_taps_4_##SX,    \
     expand_taps_5_##SX,    expand_taps_6_##SX,  expand_taps_7_##SX,  expand_taps_8_##SX,  expand_taps_9_##SX,    \
     expand_taps_10_##SX,   expand_taps_11_##SX, expand_taps_12_##SX, expand_taps_13_##SX, expand_taps_14_##SX,   \
     expand_taps_15_##SX,   expand_taps_16_##SX}
static const expand_taps_fn tap_expanders[3][PIXELS + 1] = {EXPAND_TAPS_ROW(0), EXPAND_TAPS_ROW(1),
                                                              EXPAND_TAPS_ROW(2)};

/* The taps of output row iy (of the first conv) whose input rows are inside x: with all_columns
 * every one (for the columns whose taps all read inside), else those of column ix0 whose input
 * columns are inside too. Offsets are from x's column ix0 sx1 of the image (ix0 = 0: from its
 * first column), weight offsets in a group's [taps1][16]. */
static int dense_taps(const af_pwdw_desc *d, int64_t iy, int64_t ix0, bool all_columns, int32_t *off, int32_t *wi) {
    int n = 0;
    for (int64_t ci = 0; ci < d->cin; ci++)
        for (int64_t ky = 0; ky < d->kh1; ky++) {
            const int64_t sy = iy * d->sy1 + ky - d->pt1;
            if (sy < 0 || sy >= d->xh) continue;
            for (int64_t kx = 0; kx < d->kw1; kx++) {
                const int64_t sx = ix0 * d->sx1 + kx - d->pl1;
                if (!all_columns && (sx < 0 || sx >= d->xw)) continue;
                off[n] = (int32_t)((ci * d->xh + sy) * d->xw + kx - d->pl1);
                wi[n++] = (int32_t)(((ci * d->kh1 + ky) * d->kw1 + kx) * LANES);
            }
        }
    return n;
}

/* af_dw_fill_fn for a dense first conv: each block row is 16 of its output channels along one of
 * its output rows. Columns whose every tap reads inside x run in register tiles of 16 pixels,
 * the others (a column or two at each side) one at a time with their taps checked. */
TARGET static void fill_rows_dense(void *ctx, int64_t img, int64_t c0, int64_t nc, int64_t iy0, int64_t rows,
                                   int64_t wp, float *dst) {
    (void)nc;
    const fill_ctx *fc = ctx;
    const pwdw_state *s = fc->s;
    const af_pwdw_desc *d = &s->d;
    const int64_t w = d->w, left = d->geo.pad_begin[1], j_lo = min64(wp, left > 0 ? left : 0);
    const int64_t j_hi = min64(wp, left + w), y0 = max64(iy0, 0), y1 = min64(d->h, iy0 + rows);
    zero_padding(dst, iy0, rows, d->h, wp, j_lo, j_hi);
    if (y1 <= y0 || j_hi <= j_lo) return;
    /* The output columns [x_lo, x_hi) the block holds; of them, [in_lo, in_hi) read x only inside. */
    const int64_t x_lo = j_lo - left, x_hi = j_hi - left;
    const int64_t in_lo = min64(max64(ceil_div(d->pl1, d->sx1), x_lo), x_hi);
    const int64_t in_hi = max64(min64(d->xw + d->pl1 - d->kw1 >= 0 ? (d->xw + d->pl1 - d->kw1) / d->sx1 + 1 : 0, x_hi),
                                in_lo);
    const float *xb = fc->x + img * d->cin * d->xh * d->xw;
    const float *wg = s->w1 + c0 * s->taps1;
    const __m512 bias = _mm512_loadu_ps(d->b1 + c0);
    int32_t off[AF_PWDW_MAX_TAPS], wi[AF_PWDW_MAX_TAPS];
    const expand_taps_fn *expanders_sx = tap_expanders[d->sx1 <= 2 ? d->sx1 : 0];
    for (int64_t y = y0; y < y1; y++) {
        float *row = dst + ((y - iy0) * wp + left) * LANES;
        const int n_taps = dense_taps(d, y, 0, true, off, wi);
        for (int64_t p0 = in_lo; p0 < in_hi; p0 += PIXELS) {
            const int n = (int)min64(PIXELS, in_hi - p0);
            expanders_sx[n](s, xb + p0 * d->sx1, d->sx1, off, wi, n_taps, wg, bias, row + p0 * LANES);
        }
        for (int64_t xx = x_lo; xx < x_hi; xx++) {
            if (xx == in_lo && in_hi > in_lo) xx = in_hi;
            if (xx >= x_hi) break;
            const int n_edge = dense_taps(d, y, xx, false, off, wi);
            expanders_sx[1](s, xb + xx * d->sx1, d->sx1, off, wi, n_edge, wg, bias, row + xx * LANES);
        }
        if (s->act1_rest.n_steps)
            af_epilogue_apply_avx512(&s->act1_rest, row + x_lo * LANES, 0, 1, (int)((x_hi - x_lo) * LANES), 0, 0, 0);
    }
}

static af_status pwdw_run(const af_kernel *k, af_op_ctx *c, const af_epilogue *epi, af_threadpool *pool,
                          void *workspace) {
    (void)epi;
    const pwdw_state *s = k->state;
    const af_pwdw_desc *d = &s->d;
    const af_tensor *x = af_ctx_input(c, 0);
    af_tensor *y = af_ctx_output(c, 0);
    /* A plane of unknown size at make (a dynamic-size export) is the input's, per run, and its
     * output the depthwise window's over it (the pads were resolved at make: explicit or VALID). */
    const bool sized = d->h >= 0, dense = d->kh1 > 0;
    af_conv_geom geo = d->geo;
    const af_conv_geom *g = &geo;
    int64_t h = d->h, w = d->w, oh = d->oh, ow = d->ow;
    if (!sized && x && x->rank == 4) {
        int64_t out[2];
        if (af_conv_geom_forward(c, &geo, x->dims + 2, out) != AF_OK) return AF_ERR_RUNTIME;
        h = x->dims[2], w = x->dims[3], oh = out[0], ow = out[1];
    }
    const int64_t xh = dense ? d->xh : h, xw = dense ? d->xw : w; /* x's plane, after the run's */
    if (!x || x->dtype != AF_DTYPE_FLOAT || x->rank != 4 || x->dims[1] != d->cin || x->dims[2] != xh ||
        x->dims[3] != xw || h < 1 || w < 1 || h * w > INT32_MAX || oh < 1 || ow < 1 || !y ||
        y->rank != 4 || y->dims[0] != x->dims[0] || y->dims[1] != d->channels || y->dims[2] != oh || y->dims[3] != ow)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "pointwise+depthwise conv: X must be float32 [N, %lld, %lld, %lld]",
                           (long long)d->cin, (long long)xh, (long long)xw);
    /* More threads than the scratch is sized for: the caller alone runs the tasks. */
    if (af_threadpool_n_threads(pool) > s->n_threads) pool = NULL;
    size_t need = sized ? s->scratch_bytes : af_dw_blocked_fill_scratch_bytes(&s->dw, g, ow, s->n_threads);
    void *own = NULL;
    if (need > k->workspace_bytes && !(workspace = own = af_malloc_aligned(need)))
        return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory for the pointwise+depthwise conv's scratch");
    fill_ctx fc = {.s = s, .x = x->data, .h = h, .w = w};
    af_status st = af_dw_blocked_run_fill(&s->dw, g, dense ? fill_rows_dense : fill_rows, &fc, y->data, x->dims[0],
                                          h, w, oh, ow, d->b2, s->epi2.n_steps ? &s->epi2 : NULL, pool, workspace,
                                          need);
    af_free_aligned(own);
    if (st != AF_OK) return af_ctx_fail(c, st, "pointwise+depthwise conv failed (%s)", af_status_name(st));
    return AF_OK;
}

static void pwdw_free(void *p) {
    pwdw_state *s = p;
    if (!s) return;
    af_free(s->w1);
    af_dw_blocked_release(&s->dw);
    af_free(s->biases);
    af_free(s);
}

af_status af_pwdw_kernel_make(const af_pwdw_desc *d, af_isa isa, int n_threads, af_kernel *k, af_error *err) {
    memset(k, 0, sizeof *k);
    isa = af_cpu_isa_clamp(isa);
    if (n_threads < 1) n_threads = 1;
    const af_conv_geom *g = &d->geo;
    /* The plane: all four sizes known, or none (a dynamic-size export: sized per run). */
    const bool sized = d->h >= 0 && d->w >= 0 && d->oh >= 0 && d->ow >= 0;
    const bool unsized = d->h < 0 && d->w < 0 && d->oh < 0 && d->ow < 0;
    /* Every size in int32 range first, so that no product below overflows. */
    const int64_t sizes[] = {d->cin, d->channels, sized ? d->h : 1, sized ? d->w : 1, sized ? d->oh : 1,
                             sized ? d->ow : 1, d->kh, d->kw, g->stride[0], g->stride[1], g->pad_begin[0],
                             g->pad_begin[1], g->pad_end[0], g->pad_end[1]};
    bool sane = g->n_sp == 2 && (sized || unsized);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) sane = sane && sizes[i] >= 0 && sizes[i] <= INT32_MAX;
    if (!sane || d->cin < 1 || d->channels < 1 || sizes[2] < 1 || sizes[3] < 1 || sizes[4] < 1 || sizes[5] < 1 ||
        d->kh < 1 || d->kw < 1 || !d->w1 || !d->w2 || g->stride[0] < 1 || g->stride[1] < 1 || g->dilation[0] != 1 ||
        g->dilation[1] != 1 || g->pad_begin[0] >= d->kh || d->channels > (int64_t)1 << 24 ||
        d->cin > (int64_t)1 << 24 || sizes[2] * sizes[3] > INT32_MAX || sizes[4] * sizes[5] > INT32_MAX)
        return af_errorf(err, AF_ERR_UNSUPPORTED, "the fused kernel takes undilated 2-D convolutions of static shape");
    /* A dense first conv: static sizes, its output plane h x w, and few taps. */
    const bool dense = d->kh1 > 0;
    if (dense) {
        const int64_t more[] = {d->kh1, d->kw1, d->sy1, d->sx1, d->pt1, d->pl1, d->xh, d->xw};
        bool ok = sized;
        for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) ok = ok && more[i] >= 0 && more[i] <= INT32_MAX;
        ok = ok && d->kw1 >= 1 && d->sy1 >= 1 && d->sx1 >= 1 && d->pt1 < d->kh1 && d->pl1 < d->kw1 && d->xh >= 1 &&
             d->xw >= 1 && d->xh * d->xw <= INT32_MAX / (d->cin > 0 ? d->cin : 1);
        if (!ok) return af_errorf(err, AF_ERR_UNSUPPORTED, "the fused kernel takes a dense first conv of static shape");
        if (d->cin * d->kh1 * d->kw1 > AF_PWDW_MAX_TAPS)
            return af_errorf(err, AF_ERR_UNSUPPORTED,
                             "the first conv takes %lld products per output, more than the %d the fused kernel "
                             "computes directly",
                             (long long)(d->cin * d->kh1 * d->kw1), AF_PWDW_MAX_TAPS);
    }
    const size_t min_bytes = af_pwdw_min_expanded_bytes();
    if (unsized && min_bytes > 0)
        return af_errorf(err, AF_ERR_UNSUPPORTED,
                         "the plane's size is unknown: on this CPU the fused kernel pays only past %zu KiB expanded",
                         min_bytes / 1024);
    const double expanded = (double)d->channels * (double)sizes[2] * (double)sizes[3] * sizeof(float);
    if (sized && expanded <= (double)min_bytes)
        return af_errorf(err, AF_ERR_UNSUPPORTED,
                         "the expanded tensor (%.0f KiB) is at most %zu KiB: unfused it stays in cache, and the "
                         "fused kernel would cost about what it saves",
                         expanded / 1024, min_bytes / 1024);
    if (isa != AF_ISA_AVX512)
        return af_errorf(err, AF_ERR_UNSUPPORTED, "the fused kernel needs AVX-512 (the channel-blocked depthwise conv)");
    pwdw_state *s = af_calloc(1, sizeof *s);
    if (!s) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory preparing a pointwise+depthwise kernel");
    s->d = *d;
    s->n_threads = n_threads;
    af_status st = af_dw_blocked_prepare(d->w2, d->channels, d->kh, d->kw, &s->dw);
    if (st != AF_OK) {
        af_free(s);
        return af_errorf(err, st, "cannot prepare a pointwise+depthwise kernel (%s)", af_status_name(st));
    }
    /* Each depthwise chunk expands the input rows it reads, its halo rows too (unknown for an
     * unknown plane: small planes then pay it, as they pay the scratch made per run). */
    const double recompute = sized ? af_dw_blocked_fill_factor(&s->dw, g, d->h, d->oh, d->ow, n_threads) - 1.0 : 0.0;
    if (recompute > AF_PWDW_MAX_RECOMPUTE) {
        pwdw_free(s);
        return af_errorf(err, AF_ERR_UNSUPPORTED, "the depthwise conv's chunks would compute %.0f%% of the 1x1 conv "
                         "twice (more than %.0f%%)", recompute * 100, AF_PWDW_MAX_RECOMPUTE * 100);
    }
    const int64_t groups = ceil_div(d->channels, LANES);
    s->taps1 = dense ? d->cin * d->kh1 * d->kw1 : d->cin;
    s->w1 = af_calloc((size_t)(groups * LANES * s->taps1), sizeof *s->w1);
    s->biases = af_calloc((size_t)(groups * LANES + d->channels), sizeof *s->biases);
    if (!s->w1 || !s->biases) st = AF_ERR_OUT_OF_MEMORY;
    if (st == AF_OK) {
        for (int64_t ch = 0; ch < d->channels; ch++)
            for (int64_t k = 0; k < s->taps1; k++)
                s->w1[(ch / LANES * s->taps1 + k) * LANES + ch % LANES] = d->w1[ch * s->taps1 + k];
        if (d->b1) memcpy(s->biases, d->b1, (size_t)d->channels * sizeof *s->biases);
        if (d->b2) memcpy(s->biases + groups * LANES, d->b2, (size_t)d->channels * sizeof *s->biases);
        s->d.w1 = s->d.w2 = NULL;
        s->d.b1 = s->biases;
        s->d.b2 = s->biases + groups * LANES;
        /* act1 as the 1x1 conv's GEMM tile would apply it: in registers where it can, else after. */
        af_epilogue act1;
        af_epilogue_init(&act1);
        af_epilogue_init(&s->act1_rest);
        af_epilogue_init(&s->epi2);
        if (d->has_act1) st = af_epilogue_push(&act1, &d->act1);
        const int n_in_registers = st == AF_OK ? af_gemm_compile_fused(&act1, 0, &s->act1) : 0;
        if (st == AF_OK && n_in_registers < act1.n_steps) {
            s->act1 = (af_gemm_fused){.lo = -INFINITY, .hi = INFINITY};
            s->act1_rest = act1;
        }
        if (st == AF_OK && d->has_act2) st = af_epilogue_push(&s->epi2, &d->act2);
        s->scratch_bytes = sized ? af_dw_blocked_fill_scratch_bytes(&s->dw, g, d->ow, n_threads) : 0;
    }
    if (st != AF_OK) {
        pwdw_free(s);
        return af_errorf(err, st, "cannot prepare a pointwise+depthwise kernel (%s)", af_status_name(st));
    }
    *k = (af_kernel){.name = dense ? "f32_conv_depthwise__avx512" : "f32_pointwise_depthwise__avx512",
                     .state = s,
                     .run = pwdw_run,
                     .free_state = pwdw_free,
                     .workspace_bytes = s->scratch_bytes,
                     .weight_bytes = (size_t)(groups * LANES * s->taps1) * sizeof(float) +
                                     (size_t)(groups * LANES * d->kh * d->kw) * sizeof(float) +
                                     (size_t)(groups * LANES + d->channels) * sizeof(float)};
    return AF_OK;
}
