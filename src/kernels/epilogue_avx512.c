/* The AVX-512 epilogue applier: each step is one pass over the (L1-resident) tile, 16 lanes at a
 * time with a masked tail, so any tile width works. */
#include <immintrin.h>

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
        case AF_EPI_GELU_ERF:
            TILE_LOOP({
                __m512 t = af_verf_avx512(_mm512_mul_ps(x, _mm512_set1_ps(AF_EPI_GELU_RSQRT2)));
                x = _mm512_mul_ps(_mm512_mul_ps(half, x), _mm512_add_ps(_mm512_set1_ps(1.0f), t));
            });
            break;
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
