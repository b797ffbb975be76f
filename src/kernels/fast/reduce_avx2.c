/* The AVX2+FMA instantiation of the Reduce* loops: the rv_* layer on __m256 (8 lanes, tails
 * through maskload/maskstore) and the af_reduce_avx2 table. */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

#include "kernels/fast/reduce_internal.h"
#include "kernels/vmath_x86.h"

#define RV_TARGET __attribute__((target("avx2,fma")))
#define RV_INLINE RV_TARGET static inline __attribute__((always_inline))
#define RV_NAME(f) f##__avx2
#define RV_W 8

typedef __m256 rv_v;
typedef __m256i rv_m; /* all-ones lanes are on */

static const int32_t rv_tail_bits[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

/* The first n lanes, 0 <= n <= 8. */
RV_INLINE rv_m rv_tail(int64_t n) { return _mm256_loadu_si256((const __m256i *)(rv_tail_bits + 8 - n)); }
RV_INLINE rv_v rv_load(const float *p) { return _mm256_loadu_ps(p); }
RV_INLINE void rv_store(float *p, rv_v v) { _mm256_storeu_ps(p, v); }
RV_INLINE rv_v rv_loadm(const float *p, rv_m m) { return _mm256_maskload_ps(p, m); }
RV_INLINE void rv_storem(float *p, rv_m m, rv_v v) { _mm256_maskstore_ps(p, m, v); }
RV_INLINE rv_v rv_blend(rv_m m, rv_v v, rv_v fill) { return _mm256_blendv_ps(fill, v, _mm256_castsi256_ps(m)); }
RV_INLINE rv_v rv_set1(float x) { return _mm256_set1_ps(x); }
RV_INLINE rv_v rv_zero(void) { return _mm256_setzero_ps(); }
RV_INLINE rv_v rv_add(rv_v a, rv_v b) { return _mm256_add_ps(a, b); }
RV_INLINE rv_v rv_sub(rv_v a, rv_v b) { return _mm256_sub_ps(a, b); }
RV_INLINE rv_v rv_mul(rv_v a, rv_v b) { return _mm256_mul_ps(a, b); }
RV_INLINE rv_v rv_fma(rv_v a, rv_v b, rv_v c) { return _mm256_fmadd_ps(a, b, c); }
RV_INLINE rv_v rv_abs(rv_v a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
/* max/min return their second operand when either is NaN: acc stays NaN once it is; a NaN x
 * is taken explicitly. */
RV_INLINE rv_v rv_maxnan(rv_v acc, rv_v x) {
    return _mm256_blendv_ps(_mm256_max_ps(x, acc), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
RV_INLINE rv_v rv_minnan(rv_v acc, rv_v x) {
    return _mm256_blendv_ps(_mm256_min_ps(x, acc), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
RV_INLINE rv_v rv_exp(rv_v v) { return af_vexp_avx2(v); }

#include "kernels/fast/reduce_body.h"

const af_reduce_kernels af_reduce_avx2 = {
    .isa = AF_ISA_AVX2,
    .row = RV_NAME(f32_reduce_row),
    .accum = RV_NAME(f32_reduce_accum),
};
