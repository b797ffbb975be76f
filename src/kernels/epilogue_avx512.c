/* The AVX-512 epilogue applier: each step is one pass over the (L1-resident) tile, 16 lanes at a
 * time with a masked tail, so any tile width works. */
#include <immintrin.h>
#include <stdbool.h>

#include "kernels/epilogue.h"
#include "kernels/vmath_x86.h"

#define TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

/* Runs BODY (which updates __m512 x) over every vector of the tile; i, j, m (the lane mask) are in
 * scope for BODY. */
#define TILE_LOOP(BODY)                                                                            \
    for (int i = 0; i < rows; i++) {                                                               \
        float *row = c + i * ldc;                                                                  \
        for (int j = 0; j < cols; j += 16) {                                                       \
            const __mmask16 m = cols - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (cols - j)) - 1); \
            __m512 x = _mm512_maskz_loadu_ps(m, row + j);                                          \
            BODY;                                                                                  \
            _mm512_mask_storeu_ps(row + j, m, x);                                                  \
        }                                                                                          \
    }

TARGET static inline __m512 hard_clamp01(__m512 v) {
    /* min/max return the second operand for NaN, so NaN passes through. */
    return _mm512_max_ps(_mm512_setzero_ps(), _mm512_min_ps(_mm512_set1_ps(1.0f), v));
}

/* GELU over the tile, two rows of two vectors at a time: its one long dependency chain (two
 * polynomials and a scale) leaves the FMA units idle unless several run side by side. Measured on a
 * 14x32 tile in L1: 8.3-8.7 ns a vector with af_verf_avx512 one vector at a time, 7.0-7.3 with
 * af_vgelu_erf_avx512 one at a time, 5.5-5.8 four at a time (eight spilled: 6.8-7.1). */
TARGET static void gelu_erf_tile(float *c, int64_t ldc, int rows, int cols) {
    for (int i = 0; i < rows; i += 2) {
        float *r0 = c + i * ldc, *r1 = r0 + ldc;
        const bool two = i + 1 < rows;
        for (int j = 0; j < cols; j += 32) {
            const int left = cols - j, n0 = left < 16 ? left : 16, n1 = left <= 16 ? 0 : left < 32 ? left - 16 : 16;
            const __mmask16 m0 = (__mmask16)((1u << n0) - 1), m1 = (__mmask16)((1u << n1) - 1);
            const __mmask16 m2 = two ? m0 : 0, m3 = two ? m1 : 0;
            __m512 a = _mm512_maskz_loadu_ps(m0, r0 + j), b = _mm512_maskz_loadu_ps(m1, r0 + j + 16);
            __m512 x = _mm512_maskz_loadu_ps(m2, r1 + j), y = _mm512_maskz_loadu_ps(m3, r1 + j + 16);
            a = af_vgelu_erf_avx512(a);
            b = af_vgelu_erf_avx512(b);
            x = af_vgelu_erf_avx512(x);
            y = af_vgelu_erf_avx512(y);
            _mm512_mask_storeu_ps(r0 + j, m0, a);
            _mm512_mask_storeu_ps(r0 + j + 16, m1, b);
            _mm512_mask_storeu_ps(r1 + j, m2, x);
            _mm512_mask_storeu_ps(r1 + j + 16, m3, y);
        }
    }
}

TARGET void af_epilogue_apply_avx512(const af_epilogue *e, float *c, int64_t ldc, int rows, int cols, int64_t m0,
                                     int64_t n0, int64_t batch) {
    if (!e) return;
    for (int k = 0; k < e->n_steps; k++) {
        const af_epi_step *s = &e->steps[k];
        const float *p = s->p ? s->p + batch * s->batch_stride : NULL;
        const float *q = s->q ? s->q + batch * s->batch_stride : NULL;
        const __m512 a = _mm512_set1_ps(s->a), b = _mm512_set1_ps(s->b);
        const __m512 zero = _mm512_setzero_ps(), half = _mm512_set1_ps(0.5f);
        switch (s->op) {
        case AF_EPI_BIAS_ROW: TILE_LOOP(x = _mm512_add_ps(x, _mm512_set1_ps(p[m0 + i]))); break;
        case AF_EPI_BIAS_COL: TILE_LOOP(x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, p + n0 + j))); break;
        case AF_EPI_SCALE_SHIFT_ROW:
            TILE_LOOP(x = _mm512_fmadd_ps(x, _mm512_set1_ps(p[m0 + i]), _mm512_set1_ps(q[m0 + i])));
            break;
        case AF_EPI_SCALE_SHIFT_COL:
            TILE_LOOP(x = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(m, p + n0 + j),
                                          _mm512_maskz_loadu_ps(m, q + n0 + j)));
            break;
        case AF_EPI_ADD:
            TILE_LOOP(x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, p + (m0 + i) * s->ld + n0 + j)));
            break;
        case AF_EPI_MUL_SCALAR: TILE_LOOP(x = _mm512_mul_ps(x, a)); break;
        case AF_EPI_ADD_SCALAR: TILE_LOOP(x = _mm512_add_ps(x, a)); break;
        case AF_EPI_RELU: TILE_LOOP(x = _mm512_max_ps(zero, x)); break;
        case AF_EPI_CLIP: TILE_LOOP(x = _mm512_min_ps(b, _mm512_max_ps(a, x))); break;
        case AF_EPI_LEAKY_RELU:
            TILE_LOOP(x = _mm512_mask_mul_ps(x, _mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ), x, a));
            break;
        case AF_EPI_SIGMOID: TILE_LOOP(x = af_vsigmoid_avx512(x)); break;
        case AF_EPI_TANH: TILE_LOOP(x = af_vtanh_avx512(x)); break;
        case AF_EPI_HARD_SIGMOID: TILE_LOOP(x = hard_clamp01(_mm512_fmadd_ps(a, x, b))); break;
        case AF_EPI_HARD_SWISH:
            TILE_LOOP(x = _mm512_mul_ps(x, hard_clamp01(_mm512_fmadd_ps(x, _mm512_set1_ps(1.0f / 6.0f), half))));
            break;
        case AF_EPI_SILU: TILE_LOOP(x = _mm512_mul_ps(x, af_vsigmoid_avx512(x))); break;
        case AF_EPI_GELU_ERF: gelu_erf_tile(c, ldc, rows, cols); break;
        case AF_EPI_GELU_TANH:
            TILE_LOOP({
                __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
                __m512 u = _mm512_mul_ps(_mm512_set1_ps(AF_EPI_GELU_TANH_C),
                                         _mm512_fmadd_ps(_mm512_set1_ps(AF_EPI_GELU_TANH_K), x3, x));
                x = _mm512_mul_ps(_mm512_mul_ps(half, x), _mm512_add_ps(_mm512_set1_ps(1.0f), af_vtanh_avx512(u)));
            });
            break;
        default: break;
        }
    }
}
