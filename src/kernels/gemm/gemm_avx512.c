/* AVX-512 GEMM microkernels: a 14x32 register tile (28 accumulators, two B vectors, A broadcast
 * from memory) and an 8x48 one (24 accumulators, three B vectors) for B prepacked in 48-wide
 * panels, with narrower/shorter variants for the edges, and the AVX-512 panel packer. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/gemm/gemm_internal.h"
#include "kernels/transpose_avx512.h"

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define MR 14
#define NR 32
#define WIDE_MR 8  /* the 8x48 tile (af_gemm_cfg_avx512_wide) */
#define WIDE_NR 48
#define MAX_NV 3   /* vectors of 16 columns in a tile row */

/* The fused steps on one vector of row i (columns 16v.. under mask m); see af_gemm_fused. */
TARGET static inline __attribute__((always_inline)) __m512 fused_vec(const af_gemm_fused *f, __m512 x, int i, int v,
                                                                     __mmask16 m) {
    if (f->row_scale) x = _mm512_fmadd_ps(x, _mm512_set1_ps(f->row_scale[i]), _mm512_set1_ps(f->row_shift[i]));
    else if (f->row_shift) x = _mm512_add_ps(x, _mm512_set1_ps(f->row_shift[i]));
    if (f->col_shift) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, f->col_shift + 16 * v));
    if (f->residual) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, f->residual + i * f->res_ld + 16 * v));
    if (f->clamp) x = _mm512_min_ps(_mm512_set1_ps(f->hi), _mm512_max_ps(_mm512_set1_ps(f->lo), x));
    if (f->hard_swish) { /* as the epilogue applier computes it, NaN passing through */
        __m512 g = _mm512_fmadd_ps(x, _mm512_set1_ps(1.0f / 6.0f), _mm512_set1_ps(0.5f));
        x = _mm512_mul_ps(x, _mm512_max_ps(_mm512_setzero_ps(), _mm512_min_ps(_mm512_set1_ps(1.0f), g)));
    }
    return x;
}

/* Scales, fuses and stores a row kernel's accumulators (MR_ rows by NV vectors of C). Each step
 * is applied to the whole tile in turn, in fused_vec's order and with its operations, so its test
 * is made once per tile: tested once per vector, they took a third of the time of a 1x1 conv
 * with K = 16 (64x3136x16 + bias + ReLU: 44 against 67 GFLOP/s without the epilogue). */
TARGET static inline __attribute__((always_inline)) void store_tile(const int MR_, const int NV, __m512 acc[MR][MAX_NV],
                                                                    const af_gemm_tile_args *t) {
    float *restrict c = t->c;
    const int64_t ldc = t->ldc;
    const int nfull = t->nr >> 4;
    const __mmask16 tail = (__mmask16)((1u << (t->nr & 15)) - 1);
    __mmask16 mask[MAX_NV];
    for (int v = 0; v < MAX_NV; v++) mask[v] = v < nfull ? (__mmask16)0xffff : v == nfull ? tail : 0;
#define EACH _Pragma("GCC unroll 14") for (int i = 0; i < MR_; i++) _Pragma("GCC unroll 3") for (int v = 0; v < NV; v++)
    if (t->alpha != 1.0f) EACH acc[i][v] = _mm512_mul_ps(acc[i][v], _mm512_set1_ps(t->alpha));
    if (t->beta != 0.0f)
        EACH acc[i][v] = _mm512_fmadd_ps(_mm512_set1_ps(t->beta), _mm512_maskz_loadu_ps(mask[v], c + i * ldc + 16 * v),
                                         acc[i][v]);
    const af_gemm_fused *f = t->fused;
    if (f && f->row_scale) {
        EACH acc[i][v] = _mm512_fmadd_ps(acc[i][v], _mm512_set1_ps(f->row_scale[i]), _mm512_set1_ps(f->row_shift[i]));
    } else if (f && f->row_shift) {
        EACH acc[i][v] = _mm512_add_ps(acc[i][v], _mm512_set1_ps(f->row_shift[i]));
    }
    if (f && f->col_shift) {
        __m512 cs[MAX_NV];
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++) cs[v] = _mm512_maskz_loadu_ps(mask[v], f->col_shift + 16 * v);
        EACH acc[i][v] = _mm512_add_ps(acc[i][v], cs[v]);
    }
    if (f && f->residual)
        EACH acc[i][v] = _mm512_add_ps(acc[i][v], _mm512_maskz_loadu_ps(mask[v], f->residual + i * f->res_ld + 16 * v));
    /* An infinite bound leaves every value, NaN included, as it was: ReLU is one max. */
    if (f && f->clamp && f->lo > -INFINITY) {
        const __m512 lo = _mm512_set1_ps(f->lo);
        EACH acc[i][v] = _mm512_max_ps(lo, acc[i][v]);
    }
    if (f && f->clamp && f->hi < INFINITY) {
        const __m512 hi = _mm512_set1_ps(f->hi);
        EACH acc[i][v] = _mm512_min_ps(hi, acc[i][v]);
    }
    if (f && f->hard_swish) /* as the epilogue applier computes it, NaN passing through */
        EACH {
            const __m512 g = _mm512_fmadd_ps(acc[i][v], _mm512_set1_ps(1.0f / 6.0f), _mm512_set1_ps(0.5f));
            acc[i][v] = _mm512_mul_ps(acc[i][v], _mm512_max_ps(_mm512_setzero_ps(), _mm512_min_ps(_mm512_set1_ps(1.0f), g)));
        }
    EACH {
        if (mask[v] == 0xffff) _mm512_storeu_ps(c + i * ldc + 16 * v, acc[i][v]);
        else if (mask[v]) _mm512_mask_storeu_ps(c + i * ldc + 16 * v, mask[v], acc[i][v]);
    }
#undef EACH
}

/* Blocked summation in the conv kernels (AF_CONV_FLUSH_K, gemm_internal.h). total is read only
 * once `flushed` says it was written, which GCC cannot follow. */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define FLUSH_TILE(ROWS, NV, acc, total, flushed) \
    AF_FLUSH_TILE(_mm512_add_ps, _mm512_setzero_ps, ROWS, NV, acc, total, flushed)
#define ADD_TOTAL(ROWS, NV, acc, total) AF_ADD_TOTAL(_mm512_add_ps, ROWS, NV, acc, total)

/* The row kernel: MR_ rows (<= PMR) by NV vectors of 16 columns (<= PNR); A panels have the
 * full PMR width, B rows the tile's PNR. Inlined with constants so the accumulators live in
 * registers. */
TARGET static inline __attribute__((always_inline)) void ukernel(const int PMR, const int PNR, const int MR_,
                                                                 const int NV, const af_gemm_tile_args *t) {
    const float *restrict a = t->a, *restrict b = t->b, *pf = t->pf;
    float *restrict c = t->c;
    const int64_t kc = t->kc, ldb = t->ldb, ldc = t->ldc, pf_ld = t->pf_ld;
    const int nr = t->nr;
    __m512 acc[MR][MAX_NV];
#pragma GCC unroll 14
    for (int i = 0; i < MR_; i++) {
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++) acc[i][v] = _mm512_setzero_ps();
        /* The C tile's lines arrive while the k loop runs instead of stalling the stores. */
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldc + nr - 1), _MM_HINT_T0);
        /* So do the residual's: each of its MR rows is another stream, which the hardware
         * prefetchers do not follow once C, A and B take theirs. */
        if (t->fused && t->fused->residual) {
            _mm_prefetch((const char *)(t->fused->residual + i * t->fused->res_ld), _MM_HINT_T0);
            _mm_prefetch((const char *)(t->fused->residual + i * t->fused->res_ld + nr - 1), _MM_HINT_T0);
        }
    }
    for (int64_t k = 0; k < kc; k++) {
        __m512 bv[MAX_NV];
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++) bv[v] = _mm512_loadu_ps(b + 16 * v);
#pragma GCC unroll 14
        for (int i = 0; i < MR_; i++) {
            __m512 ai = _mm512_set1_ps(a[i]);
#pragma GCC unroll 3
            for (int v = 0; v < NV; v++) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
        }
        _mm_prefetch((const char *)pf, _MM_HINT_T1);
        _mm_prefetch((const char *)(pf + PNR - 1), _MM_HINT_T1);
        pf += pf_ld;
        a += PMR;
        b += ldb;
    }
    store_tile(MR_, NV, acc, t);
}
#define UKERNEL(MR_, NV, t) ukernel(MR, NR, MR_, NV, t)
#define UKERNEL_WIDE(MR_, NV, t) ukernel(WIDE_MR, WIDE_NR, MR_, NV, t)

/* The kernel K instantiated for 1..MR rows by 1 or 2 vectors, and the table of them. */
#define DEF_KERNEL(K, R, NV)                                                                       \
    TARGET static void K##_##R##x##NV(const af_gemm_tile_args *t) { K(R, NV, t); }
#define DEF_ROWS(K, R) DEF_KERNEL(K, R, 1) DEF_KERNEL(K, R, 2)
#define DEF_KERNELS(K)                                                                             \
    DEF_ROWS(K, 1) DEF_ROWS(K, 2) DEF_ROWS(K, 3) DEF_ROWS(K, 4) DEF_ROWS(K, 5) DEF_ROWS(K, 6) DEF_ROWS(K, 7)     \
    DEF_ROWS(K, 8) DEF_ROWS(K, 9) DEF_ROWS(K, 10) DEF_ROWS(K, 11) DEF_ROWS(K, 12) DEF_ROWS(K, 13) DEF_ROWS(K, 14)
#define ROW_PAIR(K, R) {K##_##R##x1, K##_##R##x2}
#define KERNEL_TABLE(K)                                                                            \
    {{NULL, NULL},     ROW_PAIR(K, 1),  ROW_PAIR(K, 2),  ROW_PAIR(K, 3), ROW_PAIR(K, 4),                \
     ROW_PAIR(K, 5),   ROW_PAIR(K, 6),  ROW_PAIR(K, 7),  ROW_PAIR(K, 8), ROW_PAIR(K, 9),                \
     ROW_PAIR(K, 10),  ROW_PAIR(K, 11), ROW_PAIR(K, 12), ROW_PAIR(K, 13), ROW_PAIR(K, 14)}

DEF_KERNELS(UKERNEL)
static const af_gemm_tile_fn row_kernels[MR + 1][2] = KERNEL_TABLE(UKERNEL);

/* A kernel K of the 8x48 shape instantiated for 1..8 rows by 1..3 vectors, and their table. */
#define DEF_WIDE_ROWS(K, R) DEF_KERNEL(K, R, 1) DEF_KERNEL(K, R, 2) DEF_KERNEL(K, R, 3)
#define DEF_WIDE_KERNELS(K)                                                                        \
    DEF_WIDE_ROWS(K, 1) DEF_WIDE_ROWS(K, 2) DEF_WIDE_ROWS(K, 3) DEF_WIDE_ROWS(K, 4) DEF_WIDE_ROWS(K, 5) \
    DEF_WIDE_ROWS(K, 6) DEF_WIDE_ROWS(K, 7) DEF_WIDE_ROWS(K, 8)
#define WIDE_ROW(K, R) {K##_##R##x1, K##_##R##x2, K##_##R##x3}
#define WIDE_TABLE(K)                                                                              \
    {{NULL, NULL, NULL}, WIDE_ROW(K, 1), WIDE_ROW(K, 2), WIDE_ROW(K, 3), WIDE_ROW(K, 4),           \
     WIDE_ROW(K, 5),     WIDE_ROW(K, 6), WIDE_ROW(K, 7), WIDE_ROW(K, 8)}

/* The 8x48 GEMM tile's kernels. */
DEF_WIDE_KERNELS(UKERNEL_WIDE)
static const af_gemm_tile_fn wide_kernels[WIDE_MR + 1][MAX_NV] = WIDE_TABLE(UKERNEL_WIDE);

/* A few columns (T < mr) of a tile, vectorized along M instead: one FMA per column and k covers
 * all mr rows, where the row kernels would spend one per row on mostly-masked vectors (N = 49 has
 * a 17-column tail: 16 columns by rows, 1 by this). Each element still sums its products in k
 * order with one FMA each, so results do not depend on which kernel computed them. */
TARGET static inline __attribute__((always_inline)) void ukernel_cols(const int T, const af_gemm_tile_args *t) {
    const float *restrict a = t->a, *restrict b = t->b;
    float *restrict c = t->c;
    const int64_t kc = t->kc, ldb = t->ldb, ldc = t->ldc;
    const int mr = t->mr;
    const __mmask16 rows = (__mmask16)((1u << mr) - 1);
    __m512 acc[16];
#pragma GCC unroll 16
    for (int j = 0; j < T; j++) acc[j] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        const __m512 av = _mm512_maskz_loadu_ps(rows, a);
#pragma GCC unroll 16
        for (int j = 0; j < T; j++) acc[j] = _mm512_fmadd_ps(av, _mm512_set1_ps(b[j]), acc[j]);
        a += MR;
        b += ldb;
    }
    /* Transpose through a buffer: C's rows are the accumulators' lanes. */
    float tmp[16][16];
#pragma GCC unroll 16
    for (int j = 0; j < T; j++) _mm512_storeu_ps(tmp[j], acc[j]);
    const float alpha = t->alpha, beta = t->beta;
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < T; j++) {
            float r = alpha == 1.0f ? tmp[j][i] : alpha * tmp[j][i];
            if (beta != 0.0f) r = fmaf(beta, c[i * ldc + j], r);
            c[i * ldc + j] = r;
        }
}

#define DEF_COLS(T)                                                                                \
    TARGET static void ukernel_cols##T(const af_gemm_tile_args *t) { ukernel_cols(T, t); }
DEF_COLS(1) DEF_COLS(2) DEF_COLS(3) DEF_COLS(4) DEF_COLS(5) DEF_COLS(6) DEF_COLS(7)
DEF_COLS(8) DEF_COLS(9) DEF_COLS(10) DEF_COLS(11) DEF_COLS(12) DEF_COLS(13)
static const af_gemm_tile_fn col_kernels[MR] = {NULL, ukernel_cols1, ukernel_cols2, ukernel_cols3, ukernel_cols4,
                                                ukernel_cols5, ukernel_cols6, ukernel_cols7, ukernel_cols8,
                                                ukernel_cols9, ukernel_cols10, ukernel_cols11, ukernel_cols12,
                                                ukernel_cols13};

/* The column kernel's sub-tile with the fused steps: computed into a buffer (holding C's values
 * first when beta reads them), then each row through the steps and stored, so a residual that is C
 * itself is read before it is overwritten (see af_gemm_tile_args). */
TARGET static void cols_fused(const af_gemm_tile_args *t, int cols) {
    float buf[MR][16];
    const int rows = t->mr;
    const __mmask16 m = (__mmask16)((1u << cols) - 1);
    if (t->beta != 0.0f)
        for (int i = 0; i < rows; i++) _mm512_storeu_ps(buf[i], _mm512_maskz_loadu_ps(m, t->c + i * t->ldc));
    af_gemm_tile_args u = *t;
    u.c = &buf[0][0];
    u.ldc = 16;
    col_kernels[cols](&u);
    for (int i = 0; i < rows; i++)
        _mm512_mask_storeu_ps(t->c + i * t->ldc, m, fused_vec(t->fused, _mm512_loadu_ps(buf[i]), i, 0, m));
}

/* The tile function: the full 14x32 kernel, or the variant for an edge tile. */
TARGET void af_f32_gemm_ukernel_14x32__avx512(const af_gemm_tile_args *t) {
    const int mr = t->mr, nr = t->nr;
    if (mr == MR && nr == NR) {
        UKERNEL(MR, 2, t);
        return;
    }
    /* Columns past the last full 16 go to the column kernel when there are fewer than rows. */
    const int n16 = nr > 16 ? 16 : 0, rest = nr - n16;
    if (rest < mr && rest < 16) {
        af_gemm_tile_args u = *t;
        if (n16) {
            u.nr = 16;
            row_kernels[mr][0](&u);
        }
        u.b = t->b + n16, u.c = t->c + n16, u.nr = rest;
        af_gemm_fused g;
        if (t->fused) {
            g = *t->fused;
            if (g.col_shift) g.col_shift += n16;
            if (g.residual) g.residual += n16;
            u.fused = &g;
            cols_fused(&u, rest);
        } else {
            col_kernels[rest](&u);
        }
        return;
    }
    row_kernels[mr][nr > 16](t);
}

/* The 8x48 tile function: the full kernel, or for an edge tile the row kernel of its rows and
 * vectors, the last vector masked to its columns (no column kernel here). */
TARGET void af_f32_gemm_ukernel_8x48__avx512(const af_gemm_tile_args *t) {
    if (t->mr == WIDE_MR && t->nr == WIDE_NR) {
        UKERNEL_WIDE(WIDE_MR, 3, t);
        return;
    }
    wide_kernels[t->mr][(t->nr - 1) / 16](t);
}

/* The convolution kernel (see af_gemm_isa_cfg.conv_tile): MR_ pixels of one output row, each
 * broadcast from the input planes, by NV vectors of 16 output channels from the packed weights;
 * 28 accumulators as in the GEMM kernel. The pixel-by-channel tile is transposed in registers
 * into rows of channels, so the fused steps and the stores are those of a GEMM tile of C. */
TARGET static inline __attribute__((always_inline)) void conv_kernel(const int MR_, const int NV,
                                                                     const af_gemm_tile_args *t) {
    const float *a = t->a, *restrict b = t->b, *pf = t->pf;
    const int taps = t->taps;
    const int32_t *off = t->tap_off;
    const int64_t chan_ld = t->chan_ld, nch = t->kc / taps, pf_ld = t->pf_ld;
    const int64_t flush_ch = af_conv_tile_flush_channels(t);
    const int64_t ahead_ld = af_conv_prefetch_channels(taps) * chan_ld; /* a division: not per channel */
    __m512 acc[MR][2], total[MR][2];
    bool flushed = false;
#pragma GCC unroll 14
    for (int i = 0; i < MR_; i++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) acc[i][v] = _mm512_setzero_ps();
    for (int64_t ch0 = 0; ch0 < nch; ch0 += flush_ch) {
        if (ch0 > 0) {
            FLUSH_TILE(MR_, NV, acc, total, flushed);
            flushed = true;
        }
        for (int64_t ch = ch0, ch1 = nch - ch0 < flush_ch ? nch : ch0 + flush_ch; ch < ch1; ch++, a += chan_ld) {
            const float *ahead = a + ahead_ld; /* prefetches never fault */
            for (int j = 0; j < taps; j++, b += NR) {
                const float *aj = a + off[j];
                const __m512 b0 = _mm512_loadu_ps(b), b1 = NV > 1 ? _mm512_loadu_ps(b + 16) : b0;
#pragma GCC unroll 14
                for (int i = 0; i < MR_; i++) {
                    const __m512 ai = _mm512_set1_ps(aj[i]);
                    acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
                    if (NV > 1) acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
                }
                _mm_prefetch((const char *)(ahead + off[j]), _MM_HINT_T0);
                _mm_prefetch((const char *)(ahead + off[j] + MR_ - 1), _MM_HINT_T0); /* the pixels may span two lines */
                _mm_prefetch((const char *)pf, _MM_HINT_T1);
                _mm_prefetch((const char *)(pf + 16), _MM_HINT_T1);
                pf += pf_ld;
            }
        }
    }
    if (flushed) ADD_TOTAL(MR_, NV, acc, total);
    float *restrict c = t->c;
    const int64_t ldc = t->ldc;
    const af_gemm_fused *f = t->fused;
    const __mmask16 pix = (__mmask16)((1u << MR_) - 1);
#pragma GCC unroll 2
    for (int v = 0; v < NV; v++) {
        __m512 r[16], o[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) r[i] = i < MR_ ? acc[i][v] : _mm512_setzero_ps();
        af_transpose16x16(r, o);
        const int rows = t->nr - 16 * v < 16 ? t->nr - 16 * v : 16;
        for (int l = 0; l < rows; l++) {
            const int j = 16 * v + l;
            const __m512 x = f ? fused_vec(f, o[l], j, 0, pix) : o[l];
            _mm512_mask_storeu_ps(c + j * ldc, pix, x);
        }
    }
}

DEF_KERNELS(conv_kernel)
static const af_gemm_tile_fn conv_kernels[MR + 1][2] = KERNEL_TABLE(conv_kernel);

TARGET void af_f32_conv_ukernel_14x32__avx512(const af_gemm_tile_args *t) { conv_kernels[t->mr][t->nr > 16](t); }

/* The convolution kernel with channels as rows (see af_gemm_isa_cfg.conv_rows_tile): MR_ output
 * channels, their weights broadcast from an 8-channel panel, by NV vectors of 16 consecutive
 * output pixels of one row loaded from the input planes (the last one masked to the tile's
 * pixels), 24 accumulators as in the 8x48 GEMM tile. The rows are channels already: no transpose,
 * and C and the fused steps are those of a GEMM tile. For few output channels: MobileNetV3's stem
 * (16) filled one of the pixel-row kernel's two channel vectors, and 14 pixels took a transpose. */
TARGET static inline __attribute__((always_inline)) void conv_rows_kernel(const int MR_, const int NV,
                                                                          const af_gemm_tile_args *t) {
    const float *a = t->a, *b = t->b;
    const int taps = t->taps;
    const int32_t *off = t->tap_off;
    const int64_t chan_ld = t->chan_ld, nch = t->kc / taps;
    const __mmask16 last = (__mmask16)((1u << (t->nr - 16 * (NV - 1))) - 1u);
    const int64_t flush_ch = af_conv_tile_flush_channels(t);
    __m512 acc[MR][MAX_NV], total[MR][MAX_NV];
    bool flushed = false;
#pragma GCC unroll 8
    for (int i = 0; i < MR_; i++)
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++) acc[i][v] = _mm512_setzero_ps();
    for (int64_t ch0 = 0; ch0 < nch; ch0 += flush_ch) {
        if (ch0 > 0) {
            FLUSH_TILE(MR_, NV, acc, total, flushed);
            flushed = true;
        }
        for (int64_t ch = ch0, ch1 = nch - ch0 < flush_ch ? nch : ch0 + flush_ch; ch < ch1; ch++, b += chan_ld) {
            for (int j = 0; j < taps; j++, a += WIDE_MR) {
                const float *bj = b + off[j];
                __m512 bv[MAX_NV];
#pragma GCC unroll 3
                for (int v = 0; v < NV; v++)
                    bv[v] = v < NV - 1 ? _mm512_loadu_ps(bj + 16 * v) : _mm512_maskz_loadu_ps(last, bj + 16 * v);
#pragma GCC unroll 8
                for (int i = 0; i < MR_; i++) {
                    const __m512 ai = _mm512_set1_ps(a[i]);
#pragma GCC unroll 3
                    for (int v = 0; v < NV; v++) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
                }
            }
        }
    }
    if (flushed) ADD_TOTAL(MR_, NV, acc, total);
    store_tile(MR_, NV, acc, t);
}

DEF_WIDE_KERNELS(conv_rows_kernel)
static const af_gemm_tile_fn conv_rows_kernels[WIDE_MR + 1][MAX_NV] = WIDE_TABLE(conv_rows_kernel);

TARGET void af_f32_conv_rows_ukernel_8x48__avx512(const af_gemm_tile_args *t) {
    conv_rows_kernels[t->mr][(t->nr - 1) / 16](t);
}

/* The transposing case (A as stored, B transposed): 16 x 16 blocks through registers. */
TARGET static void pack_transposed(const float *src, int64_t ld, int64_t lanes, int w, int64_t kc, float *dst) {
    for (int64_t l0 = 0; l0 < lanes; l0 += w, dst += kc * w) {
        const int64_t n = lanes - l0 < w ? lanes - l0 : w;
        for (int64_t k0 = 0; k0 < kc; k0 += 16) {
            const int64_t nk = kc - k0 < 16 ? kc - k0 : 16;
            const __mmask16 km = (__mmask16)(nk == 16 ? 0xffff : (1u << nk) - 1);
            for (int lb = 0; lb < w; lb += 16) {
                __m512 r[16], out[16];
#pragma GCC unroll 16
                for (int l = 0; l < 16; l++)
                    r[l] = lb + l < n ? _mm512_maskz_loadu_ps(km, src + (l0 + lb + l) * ld + k0) : _mm512_setzero_ps();
                af_transpose16x16(r, out);
                const int wl = w - lb < 16 ? w - lb : 16;
                const __mmask16 lm = (__mmask16)(wl == 16 ? 0xffff : (1u << wl) - 1);
#pragma GCC unroll 16
                for (int64_t k = 0; k < nk; k++) _mm512_mask_storeu_ps(dst + (k0 + k) * w + lb, lm, out[k]);
            }
        }
    }
}

/* Lanes-contiguous blocks (B as stored, A transposed) stream each source row once, spreading it
 * over the panels. */
TARGET static void pack_avx512(const float *src, int64_t ld, int lanes_contiguous, int64_t lanes, int w, int64_t kc,
                               float *dst) {
    if (!lanes_contiguous) {
        pack_transposed(src, ld, lanes, w, kc, dst);
        return;
    }
    if (w != NR) {
        af_gemm_pack_scalar(src, ld, lanes_contiguous, lanes, w, kc, dst);
        return;
    }
    const int64_t full = lanes / NR, rest = lanes % NR;
    const __mmask16 m0 = (__mmask16)(rest >= 16 ? 0xffff : (1u << rest) - 1);
    const __mmask16 m1 = (__mmask16)(rest <= 16 ? 0 : (1u << (rest - 16)) - 1);
    for (int64_t k = 0; k < kc; k++) {
        const float *s = src + k * ld;
        float *d = dst + k * NR;
        for (int64_t p = 0; p < full; p++) {
            _mm512_storeu_ps(d + p * kc * NR, _mm512_loadu_ps(s + p * NR));
            _mm512_storeu_ps(d + p * kc * NR + 16, _mm512_loadu_ps(s + p * NR + 16));
        }
        if (rest) {
            _mm512_storeu_ps(d + full * kc * NR, _mm512_maskz_loadu_ps(m0, s + full * NR));
            _mm512_storeu_ps(d + full * kc * NR + 16, _mm512_maskz_loadu_ps(m1, s + full * NR + 16));
        }
    }
}

/* Floats ahead of each panel's stream that the gemv kernel prefetches: measured 35 -> 46 GB/s
 * on MobileNetV3's squeeze-excite weights streamed from memory (256..1024 alike). */
#define GEMV_AHEAD 512
/* af_gemm_gemv_fn on NP panels of NV vectors each (w <= 16 * NV, the last vector masked to
 * the panel's lanes, which also keeps the loads inside the panel). */
TARGET static inline __attribute__((always_inline)) void gemv_panels(const int NP, const int NV, const float *a,
                                                                     int64_t ps, int w, int64_t kc,
                                                                     const float *v, float *out) {
    const __mmask16 last = (__mmask16)(w - 16 * (NV - 1) >= 16 ? 0xffff : (1u << (w - 16 * (NV - 1))) - 1);
    __m512 acc[AF_GEMV_PANELS][MAX_NV];
#pragma GCC unroll 8
    for (int p = 0; p < NP; p++)
#pragma GCC unroll 3
        for (int u = 0; u < NV; u++) acc[p][u] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; k++, a += w) {
        const __m512 vk = _mm512_set1_ps(v[k]);
#pragma GCC unroll 8
        for (int p = 0; p < NP; p++)
#pragma GCC unroll 3
            for (int u = 0; u < NV; u++) {
                const float *src = a + p * ps + 16 * u;
                const __m512 x = u == NV - 1 ? _mm512_maskz_loadu_ps(last, src) : _mm512_loadu_ps(src);
                acc[p][u] = _mm512_fmadd_ps(x, vk, acc[p][u]);
            }
#pragma GCC unroll 8
        for (int p = 0; p < NP; p++) _mm_prefetch((const char *)(a + p * ps + GEMV_AHEAD), _MM_HINT_T0);
    }
#pragma GCC unroll 8
    for (int p = 0; p < NP; p++)
#pragma GCC unroll 3
        for (int u = 0; u < NV; u++)
            _mm512_mask_storeu_ps(out + p * w + 16 * u, u == NV - 1 ? last : (__mmask16)0xffff, acc[p][u]);
}

#define GEMV_LANES 16
#define GEMV_NAME gemv_avx512
#define GEMV_THREE_VECTORS /* the 8x48 tile's 48-wide panels */
#include "kernels/gemm/gemv_dispatch.h"

const af_gemm_isa_cfg af_gemm_cfg_avx512 = {
    .mr = MR,
    .nr = NR,
    .tile = af_f32_gemm_ukernel_14x32__avx512,
    .fused = true,
    .conv_tile = af_f32_conv_ukernel_14x32__avx512,
    .conv_fused = true,
    .pack = pack_avx512,
    .epilogue = af_epilogue_apply_avx512,
    .gemv = gemv_avx512,
};

/* For B prepacked in 48-wide panels (af_gemm_pack_b_for_rows), and convolutions with channels as
 * rows (their weights packed as A in 8-row panels); no pixel-row convolution tile. */
const af_gemm_isa_cfg af_gemm_cfg_avx512_wide = {
    .mr = WIDE_MR,
    .nr = WIDE_NR,
    .tile = af_f32_gemm_ukernel_8x48__avx512,
    .fused = true,
    .conv_rows_tile = af_f32_conv_rows_ukernel_8x48__avx512,
    .pack = pack_avx512,
    .epilogue = af_epilogue_apply_avx512,
    .gemv = gemv_avx512,
};
