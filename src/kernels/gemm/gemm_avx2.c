/* AVX2+FMA GEMM microkernels: a 6x16 register tile (12 accumulators, two B vectors, A broadcast),
 * with shorter/narrower variants for the edges. */
#include <immintrin.h>
#include <math.h>

#include "kernels/gemm/gemm_internal.h"

#define TARGET __attribute__((target("avx2,fma")))
#define MR 6
#define NR 16

static const int tail_masks[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

TARGET static inline __m256i lane_mask(int n) {
    return _mm256_loadu_si256((const __m256i *)(tail_masks + 8 - n));
}

/* Scales, fuses and stores a row kernel's accumulators, one step over the whole tile at a time
 * (af_gemm_fused's order, with the epilogue applier's operations), so each test is made once
 * per tile, as in the AVX-512 kernel (gemm_avx512.c). */
TARGET static inline __attribute__((always_inline)) __m256 load_part(const float *p, int full, __m256i m) {
    return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}

TARGET static inline __attribute__((always_inline)) void store_tile(const int MR_, const int NV, __m256 acc[MR][2],
                                                                    const af_gemm_tile_args *t) {
    float *restrict c = t->c;
    const int64_t ldc = t->ldc;
    const int nfull = t->nr >> 3;
    const __m256i tail = lane_mask(t->nr & 7);
    int full[2], valid[2];
    for (int v = 0; v < 2; v++) full[v] = v < nfull, valid[v] = full[v] || (v == nfull && (t->nr & 7));
#define EACH _Pragma("GCC unroll 6") for (int i = 0; i < MR_; i++) _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++)
    if (t->alpha != 1.0f) EACH acc[i][v] = _mm256_mul_ps(acc[i][v], _mm256_set1_ps(t->alpha));
    if (t->beta != 0.0f)
        EACH acc[i][v] = _mm256_fmadd_ps(_mm256_set1_ps(t->beta), load_part(c + i * ldc + 8 * v, full[v], tail), acc[i][v]);
    const af_gemm_fused *f = t->fused;
    if (f && f->row_scale) {
        EACH acc[i][v] = _mm256_fmadd_ps(acc[i][v], _mm256_set1_ps(f->row_scale[i]), _mm256_set1_ps(f->row_shift[i]));
    } else if (f && f->row_shift) {
        EACH acc[i][v] = _mm256_add_ps(acc[i][v], _mm256_set1_ps(f->row_shift[i]));
    }
    if (f && f->col_shift) {
        __m256 cs[2];
        for (int v = 0; v < NV; v++) cs[v] = valid[v] ? load_part(f->col_shift + 8 * v, full[v], tail) : _mm256_setzero_ps();
        EACH acc[i][v] = _mm256_add_ps(acc[i][v], cs[v]);
    }
    if (f && f->residual)
        EACH if (valid[v]) acc[i][v] = _mm256_add_ps(acc[i][v], load_part(f->residual + i * f->res_ld + 8 * v, full[v], tail));
    /* An infinite bound leaves every value, NaN included, as it was: ReLU is one max. */
    if (f && f->clamp && f->lo > -INFINITY) {
        const __m256 lo = _mm256_set1_ps(f->lo);
        EACH acc[i][v] = _mm256_max_ps(lo, acc[i][v]);
    }
    if (f && f->clamp && f->hi < INFINITY) {
        const __m256 hi = _mm256_set1_ps(f->hi);
        EACH acc[i][v] = _mm256_min_ps(hi, acc[i][v]);
    }
    if (f && f->hard_swish) /* as the epilogue applier computes it, NaN passing through */
        EACH {
            const __m256 g = _mm256_fmadd_ps(acc[i][v], _mm256_set1_ps(1.0f / 6.0f), _mm256_set1_ps(0.5f));
            acc[i][v] = _mm256_mul_ps(acc[i][v], _mm256_max_ps(_mm256_setzero_ps(), _mm256_min_ps(_mm256_set1_ps(1.0f), g)));
        }
    EACH {
        if (full[v]) _mm256_storeu_ps(c + i * ldc + 8 * v, acc[i][v]);
        else if (valid[v]) _mm256_maskstore_ps(c + i * ldc + 8 * v, tail, acc[i][v]);
    }
#undef EACH
}

/* Blocked summation in the conv kernel (AF_CONV_FLUSH_K, gemm_internal.h). total is read only
 * once `flushed` says it was written, which GCC cannot follow. */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define FLUSH_TILE(ROWS, NV, acc, total, flushed) \
    AF_FLUSH_TILE(_mm256_add_ps, _mm256_setzero_ps, ROWS, NV, acc, total, flushed)
#define ADD_TOTAL(ROWS, NV, acc, total) AF_ADD_TOTAL(_mm256_add_ps, ROWS, NV, acc, total)

/* MR_ rows (<= MR) by NV vectors of 8 columns from full-width A panels; inlined with constants. */
TARGET static inline __attribute__((always_inline)) void ukernel(const int MR_, const int NV,
                                                                 const af_gemm_tile_args *t) {
    const float *restrict a = t->a, *restrict b = t->b, *pf = t->pf;
    float *restrict c = t->c;
    const int64_t kc = t->kc, ldb = t->ldb, ldc = t->ldc, pf_ld = t->pf_ld;
    const int nr = t->nr;
    __m256 acc[MR][2];
#pragma GCC unroll 6
    for (int i = 0; i < MR_; i++) {
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) acc[i][v] = _mm256_setzero_ps();
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
        __m256 b0 = _mm256_loadu_ps(b), b1 = NV > 1 ? _mm256_loadu_ps(b + 8) : b0;
#pragma GCC unroll 6
        for (int i = 0; i < MR_; i++) {
            __m256 ai = _mm256_broadcast_ss(a + i);
            acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
            if (NV > 1) acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
        }
        _mm_prefetch((const char *)pf, _MM_HINT_T1);
        pf += pf_ld;
        a += MR;
        b += ldb;
    }
    store_tile(MR_, NV, acc, t);
}

/* The kernel K instantiated for 1..MR rows by 1 or 2 vectors, and the table of them. */
#define DEF_KERNEL(K, R, NV)                                                                       \
    TARGET static void K##_##R##x##NV(const af_gemm_tile_args *t) { K(R, NV, t); }
#define DEF_ROWS(K, R) DEF_KERNEL(K, R, 1) DEF_KERNEL(K, R, 2)
#define DEF_KERNELS(K) DEF_ROWS(K, 1) DEF_ROWS(K, 2) DEF_ROWS(K, 3) DEF_ROWS(K, 4) DEF_ROWS(K, 5) DEF_ROWS(K, 6)
#define ROW_PAIR(K, R) {K##_##R##x1, K##_##R##x2}
#define KERNEL_TABLE(K)                                                                            \
    {{NULL, NULL}, ROW_PAIR(K, 1), ROW_PAIR(K, 2), ROW_PAIR(K, 3), ROW_PAIR(K, 4), ROW_PAIR(K, 5), ROW_PAIR(K, 6)}

DEF_KERNELS(ukernel)
static const af_gemm_tile_fn row_kernels[MR + 1][2] = KERNEL_TABLE(ukernel);

/* The tile function: the full 6x16 kernel or the variant for an edge tile. */
TARGET void af_f32_gemm_ukernel_6x16__avx2(const af_gemm_tile_args *t) {
    if (t->mr == MR && t->nr == NR) ukernel(MR, 2, t);
    else row_kernels[t->mr][t->nr > 8](t);
}

/* An 8x8 block through registers: o[l][i] = r[i][l]. */
TARGET static inline __attribute__((always_inline)) void transpose8x8(const __m256 r[8], __m256 o[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int i = 0; i < 4; i++) {
        o[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        o[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

/* The fused steps on row (channel) j of a transposed conv tile, its pixels the lanes in `pix`:
 * af_gemm_fused's order with the epilogue applier's operations, as store_tile applies them. */
TARGET static inline __attribute__((always_inline)) __m256 fused_row(const af_gemm_fused *f, __m256 x, int j,
                                                                     __m256i pix) {
    if (f->row_scale) x = _mm256_fmadd_ps(x, _mm256_set1_ps(f->row_scale[j]), _mm256_set1_ps(f->row_shift[j]));
    else if (f->row_shift) x = _mm256_add_ps(x, _mm256_set1_ps(f->row_shift[j]));
    if (f->col_shift) x = _mm256_add_ps(x, _mm256_maskload_ps(f->col_shift, pix));
    if (f->residual) x = _mm256_add_ps(x, _mm256_maskload_ps(f->residual + j * f->res_ld, pix));
    if (f->clamp && f->lo > -INFINITY) x = _mm256_max_ps(_mm256_set1_ps(f->lo), x);
    if (f->clamp && f->hi < INFINITY) x = _mm256_min_ps(_mm256_set1_ps(f->hi), x);
    if (f->hard_swish) {
        const __m256 g = _mm256_fmadd_ps(x, _mm256_set1_ps(1.0f / 6.0f), _mm256_set1_ps(0.5f));
        x = _mm256_mul_ps(x, _mm256_max_ps(_mm256_setzero_ps(), _mm256_min_ps(_mm256_set1_ps(1.0f), g)));
    }
    return x;
}

/* The convolution kernel (see af_gemm_isa_cfg.conv_tile): MR_ pixels broadcast from the input
 * by NV vectors of 8 channels from the packed weights. Each vector of 8 channels is transposed in
 * registers into rows of channels (8x8, the pixels past MR_ zero), where the fused steps run
 * and each row is one masked store. Stored through a buffer one float at a time, with the
 * epilogue applied after in its own pass, MobileNetV3-L spent 8% of its time in that pass. */
TARGET static inline __attribute__((always_inline)) void conv_kernel(const int MR_, const int NV,
                                                                     const af_gemm_tile_args *t) {
    const float *a = t->a, *restrict b = t->b, *pf = t->pf;
    const int taps = t->taps;
    const int32_t *off = t->tap_off;
    const int64_t chan_ld = t->chan_ld, nch = t->kc / taps, pf_ld = t->pf_ld;
    const int64_t flush_ch = af_conv_tile_flush_channels(t);
    const int64_t ahead_ld = af_conv_prefetch_channels(taps) * chan_ld; /* a division: not per channel */
    __m256 acc[MR][2], total[MR][2];
    bool flushed = false;
#pragma GCC unroll 6
    for (int i = 0; i < MR_; i++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) acc[i][v] = _mm256_setzero_ps();
    for (int64_t ch0 = 0; ch0 < nch; ch0 += flush_ch) {
        if (ch0 > 0) {
            FLUSH_TILE(MR_, NV, acc, total, flushed);
            flushed = true;
        }
        for (int64_t ch = ch0, ch1 = nch - ch0 < flush_ch ? nch : ch0 + flush_ch; ch < ch1; ch++, a += chan_ld) {
            const float *ahead = a + ahead_ld; /* prefetches never fault */
            for (int j = 0; j < taps; j++, b += NR) {
                const float *aj = a + off[j];
                const __m256 b0 = _mm256_loadu_ps(b), b1 = NV > 1 ? _mm256_loadu_ps(b + 8) : b0;
#pragma GCC unroll 6
                for (int i = 0; i < MR_; i++) {
                    const __m256 ai = _mm256_broadcast_ss(aj + i);
                    acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
                    if (NV > 1) acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
                }
                _mm_prefetch((const char *)(ahead + off[j]), _MM_HINT_T0);
                _mm_prefetch((const char *)pf, _MM_HINT_T1);
                pf += pf_ld;
            }
        }
    }
    if (flushed) ADD_TOTAL(MR_, NV, acc, total);
    const af_gemm_fused *f = t->fused;
    const __m256i pix = lane_mask(MR_);
#pragma GCC unroll 2
    for (int v = 0; v < NV; v++) {
        __m256 r[8], o[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) r[i] = i < MR_ ? acc[i][v] : _mm256_setzero_ps();
        transpose8x8(r, o);
        const int rows = t->nr - 8 * v < 8 ? t->nr - 8 * v : 8;
        for (int l = 0; l < rows; l++) {
            const int j = 8 * v + l;
            _mm256_maskstore_ps(t->c + j * t->ldc, pix, f ? fused_row(f, o[l], j, pix) : o[l]);
        }
    }
}

DEF_KERNELS(conv_kernel)
static const af_gemm_tile_fn conv_kernels[MR + 1][2] = KERNEL_TABLE(conv_kernel);

TARGET void af_f32_conv_ukernel_6x16__avx2(const af_gemm_tile_args *t) { conv_kernels[t->mr][t->nr > 8](t); }

/* Floats ahead of each panel's stream that the gemv kernel prefetches: measured 35 -> 46 GB/s
 * on MobileNetV3's squeeze-excite weights streamed from memory (AVX-512; 256..1024 alike). */
#define GEMV_AHEAD 512
/* af_gemm_gemv_fn on NP panels of NV vectors each (w <= 8 * NV, the last vector masked to the
 * panel's lanes, which also keeps the loads inside the panel). */
TARGET static inline __attribute__((always_inline)) void gemv_panels(const int NP, const int NV, const float *a,
                                                                     int64_t ps, int w, int64_t kc,
                                                                     const float *v, float *out) {
    const int rest = w - 8 * (NV - 1);
    const __m256i last = lane_mask(rest < 8 ? rest : 8);
    __m256 acc[AF_GEMV_PANELS][2];
#pragma GCC unroll 8
    for (int p = 0; p < NP; p++)
#pragma GCC unroll 2
        for (int u = 0; u < NV; u++) acc[p][u] = _mm256_setzero_ps();
    for (int64_t k = 0; k < kc; k++, a += w) {
        const __m256 vk = _mm256_broadcast_ss(v + k);
#pragma GCC unroll 8
        for (int p = 0; p < NP; p++)
#pragma GCC unroll 2
            for (int u = 0; u < NV; u++) {
                const float *src = a + p * ps + 8 * u;
                const __m256 x = u == NV - 1 ? load_part(src, rest >= 8, last) : _mm256_loadu_ps(src);
                acc[p][u] = _mm256_fmadd_ps(x, vk, acc[p][u]);
            }
#pragma GCC unroll 8
        for (int p = 0; p < NP; p++) _mm_prefetch((const char *)(a + p * ps + GEMV_AHEAD), _MM_HINT_T0);
    }
#pragma GCC unroll 8
    for (int p = 0; p < NP; p++)
#pragma GCC unroll 2
        for (int u = 0; u < NV; u++) _mm256_maskstore_ps(out + p * w + 8 * u, u == NV - 1 ? last : lane_mask(8), acc[p][u]);
}

#define GEMV_LANES 8
#define GEMV_NAME gemv_avx2
#include "kernels/gemm/gemv_dispatch.h"

const af_gemm_isa_cfg af_gemm_cfg_avx2 = {
    .mr = MR,
    .nr = NR,
    .tile = af_f32_gemm_ukernel_6x16__avx2,
    .fused = true,
    .conv_tile = af_f32_conv_ukernel_6x16__avx2,
    .conv_fused = true,
    .pack = af_gemm_pack_scalar,
    .epilogue = af_epilogue_apply_avx2,
    .gemv = gemv_avx2,
};
