/* AVX2+FMA GEMM microkernels: a 6x16 register tile (12 accumulators, two B vectors, A broadcast),
 * with shorter/narrower variants for the edges. */
#include <immintrin.h>

#include "kernels/gemm/gemm_internal.h"

#define TARGET __attribute__((target("avx2,fma")))
#define MR 6
#define NR 16

static const int tail_masks[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

/* MR_ rows (<= MR) by NV vectors of 8 columns from full-width panels; inlined with constants. */
TARGET static inline __attribute__((always_inline)) void ukernel(const int MR_, const int NV, int64_t kc,
                                                                 const float *restrict a, const float *restrict b,
                                                                 float *restrict c, int64_t ldc, int nr, float alpha,
                                                                 float beta) {
    __m256 acc[MR][2];
#pragma GCC unroll 6
    for (int i = 0; i < MR_; i++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) acc[i][v] = _mm256_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = NV > 1 ? _mm256_loadu_ps(b + 8) : b0;
#pragma GCC unroll 6
        for (int i = 0; i < MR_; i++) {
            __m256 ai = _mm256_broadcast_ss(a + i);
            acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
            if (NV > 1) acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
        }
        a += MR;
        b += NR;
    }
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    const int nfull = nr >> 3;
    const __m256i tail = _mm256_loadu_si256((const __m256i *)(tail_masks + 8 - (nr & 7)));
#pragma GCC unroll 6
    for (int i = 0; i < MR_; i++) {
        float *ci = c + i * ldc;
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) {
            __m256 r = _mm256_mul_ps(acc[i][v], va);
            if (v < nfull) {
                if (beta != 0.0f) r = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci + 8 * v), r);
                _mm256_storeu_ps(ci + 8 * v, r);
            } else if (v == nfull && (nr & 7)) {
                if (beta != 0.0f) r = _mm256_fmadd_ps(vb, _mm256_maskload_ps(ci + 8 * v, tail), r);
                _mm256_maskstore_ps(ci + 8 * v, tail, r);
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
DEF_ROWS(1) DEF_ROWS(2) DEF_ROWS(3) DEF_ROWS(4) DEF_ROWS(5) DEF_ROWS(6)

typedef void (*kernel_fn)(int64_t, const float *, const float *, float *, int64_t, int, float, float);
#define ROW_PAIR(R) {ukernel_##R##x1, ukernel_##R##x2}
static const kernel_fn kernels[MR + 1][2] = {
    {NULL, NULL}, ROW_PAIR(1), ROW_PAIR(2), ROW_PAIR(3), ROW_PAIR(4), ROW_PAIR(5), ROW_PAIR(6),
};

TARGET void af_f32_gemm_ukernel_6x16__avx2(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                                           float alpha, float beta) {
    ukernel(MR, 2, kc, a, b, c, ldc, NR, alpha, beta);
}

TARGET static void tile_avx2(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int mr, int nr,
                             float alpha, float beta) {
    if (mr == MR && nr == NR) {
        af_f32_gemm_ukernel_6x16__avx2(kc, a, b, c, ldc, alpha, beta);
        return;
    }
    kernels[mr][nr > 8](kc, a, b, c, ldc, nr, alpha, beta);
}

const af_gemm_isa_cfg af_gemm_cfg_avx2 = {
    .mr = MR,
    .nr = NR,
    .tile = tile_avx2,
    .pack = af_gemm_pack_scalar,
    .epilogue = af_epilogue_apply_avx2,
};
