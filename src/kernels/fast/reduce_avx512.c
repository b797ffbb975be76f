/* The AVX-512 instantiation of the Reduce* loops: the rv_* layer on __m512 (16 lanes, masked
 * tails) and the af_reduce_avx512 table. */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

#include "kernels/fast/reduce_internal.h"
#include "kernels/vmath_x86.h"

#define RV_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define RV_INLINE RV_TARGET static inline __attribute__((always_inline))
#define RV_NAME(f) f##__avx512
#define RV_W 16

typedef __m512 rv_v;
typedef __mmask16 rv_m;

/* The first n lanes, 0 <= n <= 16. */
RV_INLINE rv_m rv_tail(int64_t n) { return (__mmask16)((1u << n) - 1u); }
RV_INLINE rv_v rv_load(const float *p) { return _mm512_loadu_ps(p); }
RV_INLINE void rv_store(float *p, rv_v v) { _mm512_storeu_ps(p, v); }
RV_INLINE rv_v rv_loadm(const float *p, rv_m m) { return _mm512_maskz_loadu_ps(m, p); }
RV_INLINE void rv_storem(float *p, rv_m m, rv_v v) { _mm512_mask_storeu_ps(p, m, v); }
RV_INLINE rv_v rv_blend(rv_m m, rv_v v, rv_v fill) { return _mm512_mask_mov_ps(fill, m, v); }
RV_INLINE rv_v rv_set1(float x) { return _mm512_set1_ps(x); }
RV_INLINE rv_v rv_zero(void) { return _mm512_setzero_ps(); }
RV_INLINE rv_v rv_add(rv_v a, rv_v b) { return _mm512_add_ps(a, b); }
RV_INLINE rv_v rv_sub(rv_v a, rv_v b) { return _mm512_sub_ps(a, b); }
RV_INLINE rv_v rv_mul(rv_v a, rv_v b) { return _mm512_mul_ps(a, b); }
RV_INLINE rv_v rv_fma(rv_v a, rv_v b, rv_v c) { return _mm512_fmadd_ps(a, b, c); }
RV_INLINE rv_v rv_abs(rv_v a) {
    return _mm512_castsi512_ps(_mm512_andnot_si512(_mm512_set1_epi32((int)0x80000000u), _mm512_castps_si512(a)));
}
/* max/min return their second operand when either is NaN: acc stays NaN once it is; a NaN x
 * is taken explicitly. */
RV_INLINE rv_v rv_maxnan(rv_v acc, rv_v x) {
    return _mm512_mask_mov_ps(_mm512_max_ps(x, acc), _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}
RV_INLINE rv_v rv_minnan(rv_v acc, rv_v x) {
    return _mm512_mask_mov_ps(_mm512_min_ps(x, acc), _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}
RV_INLINE rv_v rv_exp(rv_v v) { return af_vexp_avx512(v); }

#include "kernels/fast/reduce_body.h"

const af_reduce_kernels af_reduce_avx512 = {
    .isa = AF_ISA_AVX512,
    .row = RV_NAME(f32_reduce_row),
    .accum = RV_NAME(f32_reduce_accum),
};
