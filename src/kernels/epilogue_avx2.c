/* The AVX2 epilogue applier: each step is one pass over the (L1-resident) tile, 8 lanes at a time;
 * the tail of a row goes through masked loads and stores. */
#include <immintrin.h>

#include "kernels/epilogue.h"
#include "kernels/vmath_x86.h"

#define TARGET __attribute__((target("avx2,fma")))

/* Lane masks for a tail of 0..8 lanes: load 8 ints starting at tail_masks + 8 - n. */
static const int tail_masks[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

TARGET static inline __m256i lane_mask(int n) {
    return _mm256_loadu_si256((const __m256i *)(tail_masks + 8 - (n > 8 ? 8 : n)));
}

/* Runs BODY (which updates __m256 x) over every vector of the tile; i, j, m (the lane mask) are in
 * scope for BODY. Full vectors use plain loads; the tail uses masked ones. */
#define LOADV(ptr) (full ? _mm256_loadu_ps(ptr) : _mm256_maskload_ps((ptr), m))
#define TILE_LOOP(BODY)                                                                            \
    for (int i = 0; i < rows; i++) {                                                               \
        float *row = c + i * ldc;                                                                  \
        for (int j = 0; j < cols; j += 8) {                                                        \
            const int full = cols - j >= 8;                                                        \
            const __m256i m = lane_mask(cols - j);                                                 \
            __m256 x = LOADV(row + j);                                                             \
            BODY;                                                                                  \
            if (full) _mm256_storeu_ps(row + j, x);                                                \
            else _mm256_maskstore_ps(row + j, m, x);                                               \
        }                                                                                          \
    }

TARGET static inline __m256 hard_clamp01(__m256 v) {
    return _mm256_max_ps(_mm256_setzero_ps(), _mm256_min_ps(_mm256_set1_ps(1.0f), v));
}

TARGET void af_epilogue_apply_avx2(const af_epilogue *e, float *c, int64_t ldc, int rows, int cols, int64_t m0,
                                   int64_t n0, int64_t batch) {
    if (!e) return;
    for (int k = 0; k < e->n_steps; k++) {
        const af_epi_step *s = &e->steps[k];
        const float *p = s->p ? s->p + batch * s->batch_stride : NULL;
        const float *q = s->q ? s->q + batch * s->batch_stride : NULL;
        const __m256 a = _mm256_set1_ps(s->a), b = _mm256_set1_ps(s->b);
        const __m256 zero = _mm256_setzero_ps(), half = _mm256_set1_ps(0.5f);
        switch (s->op) {
        case AF_EPI_BIAS_ROW: TILE_LOOP(x = _mm256_add_ps(x, _mm256_set1_ps(p[m0 + i]))); break;
        case AF_EPI_BIAS_COL: TILE_LOOP(x = _mm256_add_ps(x, LOADV(p + n0 + j))); break;
        case AF_EPI_SCALE_SHIFT_ROW:
            TILE_LOOP(x = _mm256_fmadd_ps(x, _mm256_set1_ps(p[m0 + i]), _mm256_set1_ps(q[m0 + i])));
            break;
        case AF_EPI_SCALE_SHIFT_COL: TILE_LOOP(x = _mm256_fmadd_ps(x, LOADV(p + n0 + j), LOADV(q + n0 + j))); break;
        case AF_EPI_ADD: TILE_LOOP(x = _mm256_add_ps(x, LOADV(p + (m0 + i) * s->ld + n0 + j))); break;
        case AF_EPI_MUL_SCALAR: TILE_LOOP(x = _mm256_mul_ps(x, a)); break;
        case AF_EPI_ADD_SCALAR: TILE_LOOP(x = _mm256_add_ps(x, a)); break;
        case AF_EPI_RELU: TILE_LOOP(x = _mm256_max_ps(zero, x)); break;
        case AF_EPI_CLIP: TILE_LOOP(x = _mm256_min_ps(b, _mm256_max_ps(a, x))); break;
        case AF_EPI_LEAKY_RELU:
            TILE_LOOP(x = _mm256_blendv_ps(x, _mm256_mul_ps(x, a), _mm256_cmp_ps(x, zero, _CMP_LT_OQ)));
            break;
        case AF_EPI_SIGMOID: TILE_LOOP(x = af_vsigmoid_avx2(x)); break;
        case AF_EPI_TANH: TILE_LOOP(x = af_vtanh_avx2(x)); break;
        case AF_EPI_HARD_SIGMOID: TILE_LOOP(x = hard_clamp01(_mm256_fmadd_ps(a, x, b))); break;
        case AF_EPI_HARD_SWISH:
            TILE_LOOP(x = _mm256_mul_ps(x, hard_clamp01(_mm256_fmadd_ps(x, _mm256_set1_ps(1.0f / 6.0f), half))));
            break;
        case AF_EPI_SILU: TILE_LOOP(x = _mm256_mul_ps(x, af_vsigmoid_avx2(x))); break;
        case AF_EPI_GELU_ERF: TILE_LOOP(x = af_vgelu_erf_avx2(x)); break;
        case AF_EPI_GELU_TANH:
            TILE_LOOP({
                __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
                __m256 u = _mm256_mul_ps(_mm256_set1_ps(AF_EPI_GELU_TANH_C),
                                         _mm256_fmadd_ps(_mm256_set1_ps(AF_EPI_GELU_TANH_K), x3, x));
                x = _mm256_mul_ps(_mm256_mul_ps(half, x), _mm256_add_ps(_mm256_set1_ps(1.0f), af_vtanh_avx2(u)));
            });
            break;
        default: break;
        }
    }
}
