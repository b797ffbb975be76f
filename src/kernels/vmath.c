/* Array drivers for the vector math functions: libm for scalar, vmath_x86.h for AVX2/AVX-512. */
#include "kernels/vmath.h"

#include <math.h>
#include <string.h>

#include "kernels/vmath_x86.h"

static float scalar_fn(af_vmath_fn fn, float x) {
    switch (fn) {
    case AF_VMATH_EXP: return expf(x);
    case AF_VMATH_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case AF_VMATH_TANH: return tanhf(x);
    case AF_VMATH_ERF: return erff(x);
    case AF_VMATH_LOG: return logf(x);
    case AF_VMATH_SOFTPLUS: return (x > 0 ? x : 0.0f) + log1pf(expf(-fabsf(x)));
    case AF_VMATH_EXPM1_NEG: return x > 0 ? 0.0f : expm1f(x);
    default: return x;
    }
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma"))) static __m512 apply_avx512(af_vmath_fn fn,
                                                                                          __m512 v) {
    switch (fn) {
    case AF_VMATH_EXP: return af_vexp_avx512(v);
    case AF_VMATH_SIGMOID: return af_vsigmoid_avx512(v);
    case AF_VMATH_TANH: return af_vtanh_avx512(v);
    case AF_VMATH_ERF: return af_verf_avx512(v);
    case AF_VMATH_LOG: return af_vlog_avx512(v);
    case AF_VMATH_SOFTPLUS: return af_vsoftplus_avx512(v);
    case AF_VMATH_EXPM1_NEG: return af_vexpm1_neg_avx512(v);
    default: return v;
    }
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma"))) static void run_avx512(af_vmath_fn fn, int64_t n,
                                                                                       const float *x, float *y) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, apply_avx512(fn, _mm512_loadu_ps(x + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, apply_avx512(fn, _mm512_maskz_loadu_ps(m, x + i)));
    }
}

__attribute__((target("avx2,fma"))) static __m256 apply_avx2(af_vmath_fn fn, __m256 v) {
    switch (fn) {
    case AF_VMATH_EXP: return af_vexp_avx2(v);
    case AF_VMATH_SIGMOID: return af_vsigmoid_avx2(v);
    case AF_VMATH_TANH: return af_vtanh_avx2(v);
    case AF_VMATH_ERF: return af_verf_avx2(v);
    case AF_VMATH_LOG: return af_vlog_avx2(v);
    case AF_VMATH_SOFTPLUS: return af_vsoftplus_avx2(v);
    case AF_VMATH_EXPM1_NEG: return af_vexpm1_neg_avx2(v);
    default: return v;
    }
}

__attribute__((target("avx2,fma"))) static void run_avx2(af_vmath_fn fn, int64_t n, const float *x, float *y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, apply_avx2(fn, _mm256_loadu_ps(x + i)));
    if (i < n) {
        float buf[8] = {0};
        memcpy(buf, x + i, (size_t)(n - i) * sizeof *buf);
        _mm256_storeu_ps(buf, apply_avx2(fn, _mm256_loadu_ps(buf)));
        memcpy(y + i, buf, (size_t)(n - i) * sizeof *buf);
    }
}

void af_vmath_f32(af_isa isa, af_vmath_fn fn, int64_t n, const float *x, float *y) {
    switch (af_cpu_isa_clamp(isa)) {
    case AF_ISA_AVX512: run_avx512(fn, n, x, y); return;
    case AF_ISA_AVX2: run_avx2(fn, n, x, y); return;
    default:
        for (int64_t i = 0; i < n; i++) y[i] = scalar_fn(fn, x[i]);
        return;
    }
}
