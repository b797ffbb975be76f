/* The AVX2+FMA instantiation of the elementwise, pool and norm loops: the fv_* vector layer on
 * __m256 (8 lanes; tails through maskload/maskstore) and the af_vec_avx2 table. */
#include <immintrin.h>
#include <math.h>

#include "kernels/fast/vec_internal.h"
#include "kernels/vmath_x86.h"

#define FV_TARGET __attribute__((target("avx2,fma")))
#define FV_INLINE FV_TARGET static inline __attribute__((always_inline))
#define FV_SUFFIX avx2
#define FV_CAT_(a, b) a##__##b
#define FV_CAT(a, b) FV_CAT_(a, b)
#define FV_NAME(f) FV_CAT(f, FV_SUFFIX)
#define FV_W 8

typedef __m256 fv_v;
typedef __m256i fv_m; /* all-ones lanes are on */
typedef struct fv_dacc {
    __m256d lo, hi;
} fv_dacc;

static const int32_t fv_tail_bits[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

/* The first n lanes, 0 <= n <= 8. */
FV_INLINE fv_m fv_tail(int64_t n) { return _mm256_loadu_si256((const __m256i *)(fv_tail_bits + 8 - n)); }
FV_INLINE fv_v fv_load(const float *p) { return _mm256_loadu_ps(p); }
FV_INLINE void fv_store(float *p, fv_v v) { _mm256_storeu_ps(p, v); }
FV_INLINE fv_v fv_loadm(const float *p, fv_m m) { return _mm256_maskload_ps(p, m); }
FV_INLINE fv_v fv_loadmf(const float *p, fv_m m, fv_v fill) {
    return _mm256_blendv_ps(fill, _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
FV_INLINE void fv_storem(float *p, fv_m m, fv_v v) { _mm256_maskstore_ps(p, m, v); }
FV_INLINE fv_v fv_set1(float x) { return _mm256_set1_ps(x); }
FV_INLINE fv_v fv_zero(void) { return _mm256_setzero_ps(); }
FV_INLINE fv_v fv_add(fv_v a, fv_v b) { return _mm256_add_ps(a, b); }
FV_INLINE fv_v fv_sub(fv_v a, fv_v b) { return _mm256_sub_ps(a, b); }
FV_INLINE fv_v fv_mul(fv_v a, fv_v b) { return _mm256_mul_ps(a, b); }
FV_INLINE fv_v fv_div(fv_v a, fv_v b) { return _mm256_div_ps(a, b); }
FV_INLINE fv_v fv_fma(fv_v a, fv_v b, fv_v c) { return _mm256_fmadd_ps(a, b, c); }
/* a > b ? a : b and a < b ? a : b per lane: b when either is NaN, as the x86 instructions do. */
FV_INLINE fv_v fv_max(fv_v a, fv_v b) { return _mm256_max_ps(a, b); }
FV_INLINE fv_v fv_min(fv_v a, fv_v b) { return _mm256_min_ps(a, b); }
FV_INLINE fv_v fv_sqrt(fv_v a) { return _mm256_sqrt_ps(a); }
FV_INLINE fv_v fv_neg(fv_v a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
FV_INLINE fv_v fv_abs(fv_v a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
/* x < 0 ? t : x */
FV_INLINE fv_v fv_select_neg(fv_v x, fv_v t) {
    return _mm256_blendv_ps(x, t, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
}
/* r, or a + b (NaN) where a or b is NaN. */
FV_INLINE fv_v fv_nan_either(fv_v a, fv_v b, fv_v r) {
    return _mm256_blendv_ps(r, _mm256_add_ps(a, b), _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
}
/* x == c ? t : f */
FV_INLINE fv_v fv_select_eq(fv_v x, fv_v c, fv_v t, fv_v f) {
    return _mm256_blendv_ps(f, t, _mm256_cmp_ps(x, c, _CMP_EQ_OQ));
}
/* Lanes outside m become 0. */
FV_INLINE fv_v fv_zerom(fv_m m, fv_v v) { return _mm256_and_ps(v, _mm256_castsi256_ps(m)); }
FV_INLINE float fv_hmax(fv_v v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}
FV_INLINE fv_v fv_exp(fv_v v) { return af_vexp_avx2(v); }
FV_INLINE fv_v fv_sigmoid(fv_v v) { return af_vsigmoid_avx2(v); }
FV_INLINE fv_v fv_tanh(fv_v v) { return af_vtanh_avx2(v); }
FV_INLINE fv_v fv_erf(fv_v v) { return af_verf_avx2(v); }
FV_INLINE fv_v fv_log(fv_v v) { return af_vlog_avx2(v); }
FV_INLINE fv_v fv_softplus(fv_v v) { return af_vsoftplus_avx2(v); }
FV_INLINE fv_v fv_expm1_neg(fv_v v) { return af_vexpm1_neg_avx2(v); }
FV_INLINE fv_v fv_floor(fv_v v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
FV_INLINE fv_v fv_ceil(fv_v v) { return _mm256_round_ps(v, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC); }
FV_INLINE fv_v fv_round(fv_v v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

/* Double accumulators: 8 float lanes widen into two vectors of 4 doubles. */
FV_INLINE fv_dacc fv_dacc_zero(void) { return (fv_dacc){_mm256_setzero_pd(), _mm256_setzero_pd()}; }
FV_INLINE void fv_dacc_add(fv_dacc *acc, fv_v v) {
    acc->lo = _mm256_add_pd(acc->lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    acc->hi = _mm256_add_pd(acc->hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}
/* acc += (v - mean)^2 in double. */
FV_INLINE void fv_dacc_add_sq(fv_dacc *acc, fv_v v, double mean) {
    const __m256d m = _mm256_set1_pd(mean);
    __m256d lo = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), m);
    __m256d hi = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), m);
    acc->lo = _mm256_fmadd_pd(lo, lo, acc->lo);
    acc->hi = _mm256_fmadd_pd(hi, hi, acc->hi);
}
FV_INLINE double fv_dacc_sum(fv_dacc acc) {
    __m256d s = _mm256_add_pd(acc.lo, acc.hi);
    __m128d t = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    return _mm_cvtsd_f64(_mm_add_sd(t, _mm_unpackhi_pd(t, t)));
}

/* Output lanes [0, n) (1 <= n <= 8) of a row read with stride 1, 2 or s: lane j is p[j * s].
 * Only the elements those lanes need are read. */
FV_INLINE fv_v fv_load_s1(const float *p, int64_t n) { return n == FV_W ? fv_load(p) : fv_loadm(p, fv_tail(n)); }
FV_INLINE fv_v fv_load_s2(const float *p, int64_t n) {
    const int64_t need = 2 * n - 1;
    const __m256 lo = _mm256_maskload_ps(p, fv_tail(need < 8 ? need : 8));
    const __m256 hi = _mm256_maskload_ps(p + 8, fv_tail(need > 8 ? need - 8 : 0));
    /* [lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6], then the 64-bit pairs reordered 0 2 1 3. */
    const __m256 ev = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), _MM_SHUFFLE(3, 1, 2, 0)));
}
FV_INLINE fv_v fv_load_sg(const float *p, int64_t s, int64_t n) {
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)s));
    return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), p, idx, _mm256_castsi256_ps(fv_tail(n)), 4);
}

#include "kernels/fast/elementwise_body.h"
#include "kernels/fast/norm_body.h"
#include "kernels/fast/pool_body.h"
/* For winograd_body.h: lanes i = x[c + i] where 0 <= c + i < w, zero elsewhere. The lanes in
 * range are loaded from x[c + lo] into the low lanes (never reading outside the row) and moved up
 * by lo; the lanes moved in from past the load are its zeroed ones. */
FV_INLINE fv_v fv_load_window(const float *x, int64_t c, int64_t w) {
    if (c >= 0 && c + 8 <= w) return _mm256_loadu_ps(x + c);
    const int64_t lo = c < 0 ? -c : 0, hi = w - c < 8 ? w - c : 8;
    if (hi <= lo) return _mm256_setzero_ps();
    const __m256 v = _mm256_maskload_ps(x + c + lo, fv_tail(hi - lo));
    const __m256i up = _mm256_sub_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)lo));
    return _mm256_permutevar8x32_ps(v, up);
}
/* Splits the 32 floats of in[0..3] by index mod 4: out[b] lane u = element 4 u + b. Per 128-bit
 * lane, a 4x4 transpose leaves tiles 0, 2, 4, 6 (low lane) and 1, 3, 5, 7 (high); a permute
 * puts them in order. */
#define FV_HAS_DEINT
FV_INLINE void fv_deint4(const fv_v in[4], fv_v out[4]) {
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256 t0 = _mm256_unpacklo_ps(in[0], in[1]), t1 = _mm256_unpacklo_ps(in[2], in[3]);
    const __m256 t2 = _mm256_unpackhi_ps(in[0], in[1]), t3 = _mm256_unpackhi_ps(in[2], in[3]);
    out[0] = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t0, t1, _MM_SHUFFLE(1, 0, 1, 0)), order);
    out[1] = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t0, t1, _MM_SHUFFLE(3, 2, 3, 2)), order);
    out[2] = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t2, t3, _MM_SHUFFLE(1, 0, 1, 0)), order);
    out[3] = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t2, t3, _MM_SHUFFLE(3, 2, 3, 2)), order);
}
/* The `count` floats of q[0..] stored at p: whole vectors, then one masked. */
FV_INLINE void fv_store_first(float *p, const __m256 *q, int64_t count) {
    for (int k = 0; 8 * k < count; k++) {
        const int64_t left = count - 8 * k;
        if (left >= 8) _mm256_storeu_ps(p + 8 * k, q[k]);
        else _mm256_maskstore_ps(p + 8 * k, fv_tail(left), q[k]);
    }
}
/* The inverse of fv_deint4: p[4 u + b] = in[b] lane u, for the first 4 n floats (n <= 8). */
FV_INLINE void fv_int4(const fv_v in[4], float *p, int64_t n) {
    const __m256i split = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    __m256 r[4];
    for (int b = 0; b < 4; b++) r[b] = _mm256_permutevar8x32_ps(in[b], split);
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpacklo_ps(r[2], r[3]);
    const __m256 t2 = _mm256_unpackhi_ps(r[0], r[1]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 q[4] = {_mm256_shuffle_ps(t0, t1, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(t0, t1, _MM_SHUFFLE(3, 2, 3, 2)),
                         _mm256_shuffle_ps(t2, t3, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(t2, t3, _MM_SHUFFLE(3, 2, 3, 2))};
    fv_store_first(p, q, 4 * n);
}
/* The same by index mod 2 over the 16 floats of in[0..1] (out[0], out[1]), and its inverse for
 * 2 n floats. */
FV_INLINE void fv_deint2(const fv_v in[4], fv_v out[4]) {
    const __m256 ev = _mm256_shuffle_ps(in[0], in[1], _MM_SHUFFLE(2, 0, 2, 0));
    const __m256 od = _mm256_shuffle_ps(in[0], in[1], _MM_SHUFFLE(3, 1, 3, 1));
    out[0] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), _MM_SHUFFLE(3, 1, 2, 0)));
    out[1] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), _MM_SHUFFLE(3, 1, 2, 0)));
}
FV_INLINE void fv_int2(const fv_v in[4], float *p, int64_t n) {
    const __m256 a = _mm256_unpacklo_ps(in[0], in[1]), b = _mm256_unpackhi_ps(in[0], in[1]);
    const __m256 q[2] = {_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31)};
    fv_store_first(p, q, 2 * n);
}
#include "kernels/fast/winograd_body.h"
#include "kernels/fast/phase_body.h"
#include "kernels/fast/weighted_rows_body.h"

/* 4 floats to int64 toward zero, from their bits (AVX2 has no such conversion): the 24-bit
 * significand shifted by the biased exponent - 150, left or right (counts of 64 and up shift
 * everything out, so fractions and denormals give 0), then the sign; NaN gives 0, and magnitudes
 * from 2^63 up (biased exponent 190 and up, infinities included) INT64_MAX or INT64_MIN, as the
 * reference converts. */
FV_INLINE __m256i cast_i64_4(__m128 v) {
    const __m256i bits = _mm256_cvtepu32_epi64(_mm_castps_si128(v));
    const __m256i e = _mm256_and_si256(_mm256_srli_epi64(bits, 23), _mm256_set1_epi64x(0xff));
    const __m256i m =
        _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi64x(0x7fffff)), _mm256_set1_epi64x(0x800000));
    const __m256i mag = _mm256_or_si256(_mm256_sllv_epi64(m, _mm256_sub_epi64(e, _mm256_set1_epi64x(150))),
                                        _mm256_srlv_epi64(m, _mm256_sub_epi64(_mm256_set1_epi64x(150), e)));
    const __m256i neg = _mm256_cvtepi32_epi64(_mm_srai_epi32(_mm_castps_si128(v), 31)); /* all ones below 0 */
    __m256i r = _mm256_sub_epi64(_mm256_xor_si256(mag, neg), neg);
    const __m256i big = _mm256_cmpgt_epi64(e, _mm256_set1_epi64x(189));
    r = _mm256_blendv_epi8(r, _mm256_xor_si256(_mm256_set1_epi64x(INT64_MAX), neg), big);
    return _mm256_andnot_si256(_mm256_cvtepi32_epi64(_mm_castps_si128(_mm_cmpunord_ps(v, v))), r);
}

/* The first k of 4 int64 lanes (0 <= k <= 4). */
FV_INLINE __m256i tail_i64(int64_t k) {
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(k), _mm256_setr_epi64x(0, 1, 2, 3));
}

FV_TARGET static void FV_NAME(f32_cast_i64)(int64_t n, const float *x, int64_t *y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        _mm256_storeu_si256((__m256i *)(y + i), cast_i64_4(_mm256_castps256_ps128(v)));
        _mm256_storeu_si256((__m256i *)(y + i + 4), cast_i64_4(_mm256_extractf128_ps(v, 1)));
    }
    if (i < n) {
        const int64_t k = n - i;
        const __m256 v = _mm256_maskload_ps(x + i, fv_tail(k));
        _mm256_maskstore_epi64((long long *)(y + i), tail_i64(k < 4 ? k : 4), cast_i64_4(_mm256_castps256_ps128(v)));
        if (k > 4)
            _mm256_maskstore_epi64((long long *)(y + i + 4), tail_i64(k - 4), cast_i64_4(_mm256_extractf128_ps(v, 1)));
    }
}

const af_vec_kernels af_vec_avx2 = {
    .isa = AF_ISA_AVX2,
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
