/* The AVX-512 instantiation of the elementwise, pool and norm loops: the fv_* vector layer on
 * __m512 (16 lanes, masked tails) and the af_vec_avx512 table. */
#include <immintrin.h>
#include <math.h>

#include "kernels/fast/vec_internal.h"
#include "kernels/vmath_x86.h"

#define FV_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define FV_INLINE FV_TARGET static inline __attribute__((always_inline))
#define FV_SUFFIX avx512
#define FV_CAT_(a, b) a##__##b
#define FV_CAT(a, b) FV_CAT_(a, b)
#define FV_NAME(f) FV_CAT(f, FV_SUFFIX) /* f32_ew_unary__avx512 */
#define FV_W 16

typedef __m512 fv_v;
typedef __mmask16 fv_m;
typedef struct fv_dacc {
    __m512d lo, hi;
} fv_dacc;

/* The first n lanes, 0 <= n <= 16. */
FV_INLINE fv_m fv_tail(int64_t n) { return (__mmask16)((1u << n) - 1u); }
FV_INLINE fv_v fv_load(const float *p) { return _mm512_loadu_ps(p); }
FV_INLINE void fv_store(float *p, fv_v v) { _mm512_storeu_ps(p, v); }
FV_INLINE fv_v fv_loadm(const float *p, fv_m m) { return _mm512_maskz_loadu_ps(m, p); }
FV_INLINE fv_v fv_loadmf(const float *p, fv_m m, fv_v fill) { return _mm512_mask_loadu_ps(fill, m, p); }
FV_INLINE void fv_storem(float *p, fv_m m, fv_v v) { _mm512_mask_storeu_ps(p, m, v); }
FV_INLINE fv_v fv_set1(float x) { return _mm512_set1_ps(x); }
FV_INLINE fv_v fv_zero(void) { return _mm512_setzero_ps(); }
FV_INLINE fv_v fv_add(fv_v a, fv_v b) { return _mm512_add_ps(a, b); }
FV_INLINE fv_v fv_sub(fv_v a, fv_v b) { return _mm512_sub_ps(a, b); }
FV_INLINE fv_v fv_mul(fv_v a, fv_v b) { return _mm512_mul_ps(a, b); }
FV_INLINE fv_v fv_div(fv_v a, fv_v b) { return _mm512_div_ps(a, b); }
FV_INLINE fv_v fv_fma(fv_v a, fv_v b, fv_v c) { return _mm512_fmadd_ps(a, b, c); }
/* a > b ? a : b and a < b ? a : b per lane: b when either is NaN, as the x86 instructions do. */
FV_INLINE fv_v fv_max(fv_v a, fv_v b) { return _mm512_max_ps(a, b); }
FV_INLINE fv_v fv_min(fv_v a, fv_v b) { return _mm512_min_ps(a, b); }
FV_INLINE fv_v fv_sqrt(fv_v a) { return _mm512_sqrt_ps(a); }
FV_INLINE fv_v fv_neg(fv_v a) {
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32((int)0x80000000u)));
}
FV_INLINE fv_v fv_abs(fv_v a) {
    return _mm512_castsi512_ps(_mm512_andnot_si512(_mm512_set1_epi32((int)0x80000000u), _mm512_castps_si512(a)));
}
/* x < 0 ? t : x */
FV_INLINE fv_v fv_select_neg(fv_v x, fv_v t) {
    return _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), t);
}
/* r, or a + b (NaN) where a or b is NaN. */
FV_INLINE fv_v fv_nan_either(fv_v a, fv_v b, fv_v r) {
    return _mm512_mask_add_ps(r, _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), a, b);
}
/* x == c ? t : f */
FV_INLINE fv_v fv_select_eq(fv_v x, fv_v c, fv_v t, fv_v f) {
    return _mm512_mask_mov_ps(f, _mm512_cmp_ps_mask(x, c, _CMP_EQ_OQ), t);
}
/* Lanes outside m become 0. */
FV_INLINE fv_v fv_zerom(fv_m m, fv_v v) { return _mm512_maskz_mov_ps(m, v); }
FV_INLINE float fv_hmax(fv_v v) { return _mm512_reduce_max_ps(v); }
FV_INLINE fv_v fv_exp(fv_v v) { return af_vexp_avx512(v); }
FV_INLINE fv_v fv_sigmoid(fv_v v) { return af_vsigmoid_avx512(v); }
FV_INLINE fv_v fv_tanh(fv_v v) { return af_vtanh_avx512(v); }
FV_INLINE fv_v fv_erf(fv_v v) { return af_verf_avx512(v); }
FV_INLINE fv_v fv_log(fv_v v) { return af_vlog_avx512(v); }
FV_INLINE fv_v fv_softplus(fv_v v) { return af_vsoftplus_avx512(v); }
FV_INLINE fv_v fv_expm1_neg(fv_v v) { return af_vexpm1_neg_avx512(v); }
FV_INLINE fv_v fv_floor(fv_v v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
FV_INLINE fv_v fv_ceil(fv_v v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC); }
FV_INLINE fv_v fv_round(fv_v v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

/* Double accumulators: 16 float lanes widen into two vectors of 8 doubles. */
FV_INLINE fv_dacc fv_dacc_zero(void) { return (fv_dacc){_mm512_setzero_pd(), _mm512_setzero_pd()}; }
FV_INLINE void fv_dacc_add(fv_dacc *acc, fv_v v) {
    acc->lo = _mm512_add_pd(acc->lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    acc->hi = _mm512_add_pd(acc->hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
}
/* acc += (v - mean)^2 in double. */
FV_INLINE void fv_dacc_add_sq(fv_dacc *acc, fv_v v, double mean) {
    const __m512d m = _mm512_set1_pd(mean);
    __m512d lo = _mm512_sub_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), m);
    __m512d hi = _mm512_sub_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)), m);
    acc->lo = _mm512_fmadd_pd(lo, lo, acc->lo);
    acc->hi = _mm512_fmadd_pd(hi, hi, acc->hi);
}
FV_INLINE double fv_dacc_sum(fv_dacc acc) { return _mm512_reduce_add_pd(_mm512_add_pd(acc.lo, acc.hi)); }

/* Output lanes [0, n) (1 <= n <= 16) of a row read with stride 1, 2 or s: lane j is p[j * s].
 * Only the elements those lanes need are read. */
FV_INLINE fv_v fv_load_s1(const float *p, int64_t n) { return n == FV_W ? fv_load(p) : fv_loadm(p, fv_tail(n)); }
FV_INLINE fv_v fv_load_s2(const float *p, int64_t n) {
    const int64_t need = 2 * n - 1;
    const __m512 lo = _mm512_maskz_loadu_ps(fv_tail(need < 16 ? need : 16), p);
    const __m512 hi = _mm512_maskz_loadu_ps(fv_tail(need > 16 ? need - 16 : 0), p + 16);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    return _mm512_permutex2var_ps(lo, even, hi);
}
FV_INLINE fv_v fv_load_sg(const float *p, int64_t s, int64_t n) {
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)s));
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), fv_tail(n), idx, p, 4);
}

#include "kernels/fast/elementwise_body.h"
#include "kernels/fast/norm_body.h"
#include "kernels/fast/pool_body.h"
/* For winograd_body.h: lanes i = x[c + i] where 0 <= c + i < w, zero elsewhere (the expand load
 * fills the lanes in range from consecutive floats, never reading outside the row). */
FV_INLINE fv_v fv_load_window(const float *x, int64_t c, int64_t w) {
    if (c >= 0 && c + 16 <= w) return _mm512_loadu_ps(x + c);
    const int64_t lo = c < 0 ? -c : 0, hi = w - c < 16 ? w - c : 16;
    if (hi <= lo) return _mm512_setzero_ps();
    return _mm512_maskz_expandloadu_ps((__mmask16)(fv_tail(hi) & ~fv_tail(lo)), x + c + lo);
}
/* Splits the 64 floats of in[0..3] by index mod 4: out[b] lane u = element 4 u + b. */
#define FV_HAS_DEINT
FV_INLINE void fv_deint4(const fv_v in[4], fv_v out[4]) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const __m512 e0 = _mm512_permutex2var_ps(in[0], even, in[1]), o0 = _mm512_permutex2var_ps(in[0], odd, in[1]);
    const __m512 e1 = _mm512_permutex2var_ps(in[2], even, in[3]), o1 = _mm512_permutex2var_ps(in[2], odd, in[3]);
    out[0] = _mm512_permutex2var_ps(e0, even, e1);
    out[2] = _mm512_permutex2var_ps(e0, odd, e1);
    out[1] = _mm512_permutex2var_ps(o0, even, o1);
    out[3] = _mm512_permutex2var_ps(o0, odd, o1);
}
/* The inverse of fv_deint4: p[4 u + b] = in[b] lane u, for the first 4 n floats (n <= 16). */
FV_INLINE void fv_int4(const fv_v in[4], float *p, int64_t n) {
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
    const __m512 a0 = _mm512_permutex2var_ps(in[0], lo, in[2]), a1 = _mm512_permutex2var_ps(in[0], hi, in[2]);
    const __m512 b0 = _mm512_permutex2var_ps(in[1], lo, in[3]), b1 = _mm512_permutex2var_ps(in[1], hi, in[3]);
    const __m512 q[4] = {_mm512_permutex2var_ps(a0, lo, b0), _mm512_permutex2var_ps(a0, hi, b0),
                         _mm512_permutex2var_ps(a1, lo, b1), _mm512_permutex2var_ps(a1, hi, b1)};
    for (int k = 0; k < 4; k++) {
        const int64_t left = 4 * n - 16 * k;
        if (left >= 16) _mm512_storeu_ps(p + 16 * k, q[k]);
        else if (left > 0) _mm512_mask_storeu_ps(p + 16 * k, fv_tail(left), q[k]);
    }
}
/* The same by index mod 2 over the 32 floats of in[0..1] (out[0], out[1]), and its inverse for
 * 2 n floats. */
FV_INLINE void fv_deint2(const fv_v in[4], fv_v out[4]) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    out[0] = _mm512_permutex2var_ps(in[0], even, in[1]);
    out[1] = _mm512_permutex2var_ps(in[0], _mm512_add_epi32(even, _mm512_set1_epi32(1)), in[1]);
}
FV_INLINE void fv_int2(const fv_v in[4], float *p, int64_t n) {
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
    const __m512 q[2] = {_mm512_permutex2var_ps(in[0], lo, in[1]), _mm512_permutex2var_ps(in[0], hi, in[1])};
    for (int k = 0; k < 2; k++) {
        const int64_t left = 2 * n - 16 * k;
        if (left >= 16) _mm512_storeu_ps(p + 16 * k, q[k]);
        else if (left > 0) _mm512_mask_storeu_ps(p + 16 * k, fv_tail(left), q[k]);
    }
}
#include "kernels/fast/winograd_body.h"
#include "kernels/fast/phase_body.h"
#include "kernels/fast/weighted_rows_body.h"

/* 8 floats to int64 toward zero: vcvttps2qq gives INT64_MIN (its "integer indefinite") for NaN and
 * past the range, which is right below -2^63; NaN becomes 0 and 2^63 and up INT64_MAX, as the
 * reference converts. */
FV_INLINE __m512i cast_i64_8(__m256 v) {
    const __mmask8 nan = _mm256_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    const __mmask8 big = _mm256_cmp_ps_mask(v, _mm256_set1_ps(0x1p63f), _CMP_GE_OQ);
    const __m512i r = _mm512_mask_mov_epi64(_mm512_cvttps_epi64(v), big, _mm512_set1_epi64(INT64_MAX));
    return _mm512_maskz_mov_epi64((__mmask8)~nan, r);
}

FV_TARGET static void FV_NAME(f32_cast_i64)(int64_t n, const float *x, int64_t *y) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        _mm512_storeu_si512(y + i, cast_i64_8(_mm512_castps512_ps256(v)));
        _mm512_storeu_si512(y + i + 8, cast_i64_8(_mm512_extractf32x8_ps(v, 1)));
    }
    if (i < n) { /* masked-off lanes neither load nor store, even past the end */
        const __mmask16 m = fv_tail(n - i);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        _mm512_mask_storeu_epi64(y + i, (__mmask8)m, cast_i64_8(_mm512_castps512_ps256(v)));
        _mm512_mask_storeu_epi64(y + i + 8, (__mmask8)(m >> 8), cast_i64_8(_mm512_extractf32x8_ps(v, 1)));
    }
}

const af_vec_kernels af_vec_avx512 = {
    .isa = AF_ISA_AVX512,
    .ew_unary = FV_NAME(f32_ew_unary),
    .ew_binary = FV_NAME(f32_ew_binary),
    .cast_f32_i64 = FV_NAME(f32_cast_i64),
    .strided_plane = FV_NAME(f32_strided_plane),
    .phase_planes = FV_NAME(f32_phase_planes),
    .pool2d_plane = FV_NAME(f32_pool2d_plane),
    .global_pool = FV_NAME(f32_global_pool),
    .softmax_row = FV_NAME(f32_softmax_row),
    .layernorm_row = FV_NAME(f32_layernorm_row),
    .scale_shift = FV_NAME(f32_scale_shift),
    .interleave = FV_NAME(f32_interleave),
    .wino_input = FV_NAME(f32_wino_input),
    .wino_output = FV_NAME(f32_wino_output),
    .weighted_rows = FV_NAME(f32_weighted_rows),
};
