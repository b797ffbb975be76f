/* AVX-512 GEMM microkernels: a 14x32 register tile (28 accumulators, two B vectors, A broadcast
 * from memory), with narrower/shorter variants for the edges, and the AVX-512 panel packer. */
#include <immintrin.h>
#include <string.h>

#include "kernels/gemm/gemm_internal.h"

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define MR 14
#define NR 32

/* The generic kernel: MR_ rows (<= MR) by NV vectors of 16 columns, reading panels of the full
 * MR/NR width. Inlined with constant MR_/NV so the accumulators live in registers. */
TARGET static inline __attribute__((always_inline)) void ukernel(const int MR_, const int NV, int64_t kc,
                                                                 const float *restrict a, const float *restrict b,
                                                                 float *restrict c, int64_t ldc, int nr, float alpha,
                                                                 float beta) {
    __m512 acc[MR][2];
#pragma GCC unroll 14
    for (int i = 0; i < MR_; i++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) acc[i][v] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = NV > 1 ? _mm512_loadu_ps(b + 16) : b0;
#pragma GCC unroll 14
        for (int i = 0; i < MR_; i++) {
            __m512 ai = _mm512_set1_ps(a[i]);
            acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
            if (NV > 1) acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
        }
        a += MR;
        b += NR;
    }
    /* Store: full vectors, then the masked tail of the row. */
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    const int nfull = nr >> 4;
    const __mmask16 tail = (__mmask16)((1u << (nr & 15)) - 1);
#pragma GCC unroll 14
    for (int i = 0; i < MR_; i++) {
        float *ci = c + i * ldc;
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) {
            __m512 r = _mm512_mul_ps(acc[i][v], va);
            if (v < nfull) {
                if (beta != 0.0f) r = _mm512_fmadd_ps(vb, _mm512_loadu_ps(ci + 16 * v), r);
                _mm512_storeu_ps(ci + 16 * v, r);
            } else if (v == nfull && tail) {
                if (beta != 0.0f) r = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(tail, ci + 16 * v), r);
                _mm512_mask_storeu_ps(ci + 16 * v, tail, r);
            }
        }
    }
}

#define DEF_KERNEL(R, NV)                                                                          \
    TARGET static void ukernel_##R##x##NV(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int nr, \
                                          float alpha, float beta) {                               \
        ukernel(R, NV, kc, a, b, c, ldc, nr, alpha, beta);                                         \
    }
#define DEF_ROWS(R) DEF_KERNEL(R, 1) DEF_KERNEL(R, 2)
DEF_ROWS(1) DEF_ROWS(2) DEF_ROWS(3) DEF_ROWS(4) DEF_ROWS(5) DEF_ROWS(6) DEF_ROWS(7)
DEF_ROWS(8) DEF_ROWS(9) DEF_ROWS(10) DEF_ROWS(11) DEF_ROWS(12) DEF_ROWS(13) DEF_ROWS(14)

typedef void (*kernel_fn)(int64_t, const float *, const float *, float *, int64_t, int, float, float);
#define ROW_PAIR(R) {ukernel_##R##x1, ukernel_##R##x2}
static const kernel_fn kernels[MR + 1][2] = {
    {NULL, NULL}, ROW_PAIR(1), ROW_PAIR(2), ROW_PAIR(3), ROW_PAIR(4), ROW_PAIR(5), ROW_PAIR(6), ROW_PAIR(7),
    ROW_PAIR(8), ROW_PAIR(9), ROW_PAIR(10), ROW_PAIR(11), ROW_PAIR(12), ROW_PAIR(13), ROW_PAIR(14),
};

/* The full tile, under its XNNPACK-style name. */
TARGET void af_f32_gemm_ukernel_14x32__avx512(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                                              float alpha, float beta) {
    ukernel(MR, 2, kc, a, b, c, ldc, NR, alpha, beta);
}

TARGET static void tile_avx512(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int mr, int nr,
                               float alpha, float beta) {
    if (mr == MR && nr == NR) {
        af_f32_gemm_ukernel_14x32__avx512(kc, a, b, c, ldc, alpha, beta);
        return;
    }
    kernels[mr][nr > 16](kc, a, b, c, ldc, nr, alpha, beta);
}

/* Lanes-contiguous blocks (B as stored, A transposed) stream each source row once, spreading it
 * over the panels; the transposing case goes through the portable packer. */
TARGET static void pack_avx512(const float *src, int64_t ld, int lanes_contiguous, int64_t lanes, int w, int64_t kc,
                               float *dst) {
    if (!lanes_contiguous || w != NR) {
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

const af_gemm_isa_cfg af_gemm_cfg_avx512 = {
    .mr = MR,
    .nr = NR,
    .tile = tile_avx512,
    .pack = pack_avx512,
    .epilogue = af_epilogue_apply_avx512,
};
