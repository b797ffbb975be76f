/* The portable instantiation of the elementwise, pool and norm loops (one lane, libm for the
 * transcendental functions), the af_vec_scalar table, and the per-ISA table choice. */
#include <math.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "kernels/fast/vec_internal.h"

#define FV_TARGET
#define FV_INLINE static inline
#define FV_SUFFIX scalar
#define FV_CAT_(a, b) a##__##b
#define FV_CAT(a, b) FV_CAT_(a, b)
#define FV_NAME(f) FV_CAT(f, FV_SUFFIX)
#define FV_W 1

typedef float fv_v;
typedef int fv_m;
typedef double fv_dacc;

/* With one lane a tail never occurs; these keep the shared loops well defined anyway. */
FV_INLINE fv_m fv_tail(int64_t n) { return n > 0; }
FV_INLINE fv_v fv_load(const float *p) { return *p; }
FV_INLINE void fv_store(float *p, fv_v v) { *p = v; }
FV_INLINE fv_v fv_loadm(const float *p, fv_m m) { return m ? *p : 0.0f; }
FV_INLINE fv_v fv_loadmf(const float *p, fv_m m, fv_v fill) { return m ? *p : fill; }
FV_INLINE void fv_storem(float *p, fv_m m, fv_v v) {
    if (m) *p = v;
}
FV_INLINE fv_v fv_set1(float x) { return x; }
FV_INLINE fv_v fv_zero(void) { return 0.0f; }
FV_INLINE fv_v fv_add(fv_v a, fv_v b) { return a + b; }
FV_INLINE fv_v fv_sub(fv_v a, fv_v b) { return a - b; }
FV_INLINE fv_v fv_mul(fv_v a, fv_v b) { return a * b; }
FV_INLINE fv_v fv_div(fv_v a, fv_v b) { return a / b; }
/* Two roundings: fmaf is a slow library call on CPUs without FMA, which is where this runs. */
FV_INLINE fv_v fv_fma(fv_v a, fv_v b, fv_v c) { return a * b + c; }
/* a > b ? a : b and a < b ? a : b, the x86 semantics, so every ISA treats NaN alike (b when
 * either is NaN). SSE is part of x86-64; the one-lane instructions keep these branch-free, which
 * the compiler does not do for the C expressions under IEEE rules. */
#if defined(__SSE__)
FV_INLINE fv_v fv_max(fv_v a, fv_v b) { return _mm_cvtss_f32(_mm_max_ss(_mm_set_ss(a), _mm_set_ss(b))); }
FV_INLINE fv_v fv_min(fv_v a, fv_v b) { return _mm_cvtss_f32(_mm_min_ss(_mm_set_ss(a), _mm_set_ss(b))); }
#else
FV_INLINE fv_v fv_max(fv_v a, fv_v b) { return a > b ? a : b; }
FV_INLINE fv_v fv_min(fv_v a, fv_v b) { return a < b ? a : b; }
#endif
FV_INLINE fv_v fv_sqrt(fv_v a) { return sqrtf(a); }
FV_INLINE fv_v fv_neg(fv_v a) { return -a; }
FV_INLINE fv_v fv_abs(fv_v a) { return fabsf(a); }
FV_INLINE fv_v fv_select_neg(fv_v x, fv_v t) { return x < 0 ? t : x; }
FV_INLINE fv_v fv_nan_either(fv_v a, fv_v b, fv_v r) { return isnan(a) || isnan(b) ? a + b : r; }
FV_INLINE fv_v fv_select_eq(fv_v x, fv_v c, fv_v t, fv_v f) { return x == c ? t : f; }
FV_INLINE fv_v fv_zerom(fv_m m, fv_v v) { return m ? v : 0.0f; }
FV_INLINE float fv_hmax(fv_v v) { return v; }
FV_INLINE fv_v fv_exp(fv_v v) { return expf(v); }
/* Split by sign so exp never overflows, as the vector versions do. */
FV_INLINE fv_v fv_sigmoid(fv_v v) {
    const float e = expf(-fabsf(v));
    return (v < 0 ? e : 1.0f) / (1.0f + e);
}
FV_INLINE fv_v fv_tanh(fv_v v) { return tanhf(v); }
FV_INLINE fv_v fv_erf(fv_v v) { return erff(v); }
FV_INLINE fv_v fv_log(fv_v v) { return logf(v); }
/* Split by sign so exp never overflows; NaN passes (v > 0 is false, then log1p(NaN)). */
FV_INLINE fv_v fv_softplus(fv_v v) { return (v > 0 ? v : 0.0f) + log1pf(expf(-fabsf(v))); }
FV_INLINE fv_v fv_expm1_neg(fv_v v) { return v > 0 ? 0.0f : expm1f(v); }
FV_INLINE fv_v fv_floor(fv_v v) { return floorf(v); }
FV_INLINE fv_v fv_ceil(fv_v v) { return ceilf(v); }
/* Ties to even whatever the rounding mode (rintf would follow it), as the reference rounds. Floats
 * of 2^23 and up, infinities and NaN are their own value. */
FV_INLINE fv_v fv_round(fv_v v) {
    if (!(fabsf(v) < 8388608.0f)) return v;
    float r = floorf(v);
    const float d = v - r; /* exact */
    if (d > 0.5f || (d == 0.5f && ((int32_t)r & 1))) r += 1.0f;
    return copysignf(r, v); /* -0.4 rounds to -0 */
}

FV_INLINE fv_dacc fv_dacc_zero(void) { return 0.0; }
FV_INLINE void fv_dacc_add(fv_dacc *acc, fv_v v) { *acc += v; }
FV_INLINE void fv_dacc_add_sq(fv_dacc *acc, fv_v v, double mean) {
    const double d = (double)v - mean;
    *acc += d * d;
}
FV_INLINE double fv_dacc_sum(fv_dacc acc) { return acc; }

FV_INLINE fv_v fv_load_s1(const float *p, int64_t n) { return fv_loadm(p, fv_tail(n)); }
FV_INLINE fv_v fv_load_s2(const float *p, int64_t n) { return fv_loadm(p, fv_tail(n)); }
FV_INLINE fv_v fv_load_sg(const float *p, int64_t s, int64_t n) {
    (void)s;
    return fv_loadm(p, fv_tail(n));
}

#include "kernels/fast/elementwise_body.h"
#include "kernels/fast/norm_body.h"
#include "kernels/fast/pool_body.h"
#include "kernels/fast/winograd_body.h"
#include "kernels/fast/phase_body.h"
#include "kernels/fast/weighted_rows_body.h"

/* Toward zero; NaN 0, and past the int64 range INT64_MIN / INT64_MAX, as the reference converts. */
static void FV_NAME(f32_cast_i64)(int64_t n, const float *x, int64_t *y) {
    for (int64_t i = 0; i < n; i++) {
        const float v = x[i];
        y[i] = v != v ? 0 : v >= 0x1p63f ? INT64_MAX : v < -0x1p63f ? INT64_MIN : (int64_t)v;
    }
}

const af_vec_kernels af_vec_scalar = {
    .isa = AF_ISA_SCALAR,
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

const af_vec_kernels *af_vec_kernels_for(af_isa isa) {
    switch (af_cpu_isa_clamp(isa)) {
    case AF_ISA_AVX512: return &af_vec_avx512;
    case AF_ISA_AVX2: return &af_vec_avx2;
    default: return &af_vec_scalar;
    }
}
