/*
 * The activation of an af_gemm_fused (clamp to [lo, hi], or HardSwish) on a row of AVX-512
 * accumulators, with the GEMM tile store's operations (and so the epilogue applier's bits), for
 * kernels whose accumulators are not a GEMM tile: the channel-blocked depthwise conv's pixels and
 * the pointwise + depthwise kernel's expansion. Inlined with a constant n, the loops unroll.
 *
 *   af_fused_act_avx512(&f, acc, R);   // inside a function with the AVX-512 target attribute
 */
#ifndef AF_KERNELS_GEMM_FUSED_ACT_AVX512_H
#define AF_KERNELS_GEMM_FUSED_ACT_AVX512_H

#include <immintrin.h>
#include <math.h>

#include "kernels/gemm/gemm_internal.h"

__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma"), always_inline)) static inline void
af_fused_act_avx512(const af_gemm_fused *f, __m512 *acc, const int n) {
    if (f->clamp && f->lo > -INFINITY)
#pragma GCC unroll 16
        for (int i = 0; i < n; i++) acc[i] = _mm512_max_ps(_mm512_set1_ps(f->lo), acc[i]);
    if (f->clamp && f->hi < INFINITY)
#pragma GCC unroll 16
        for (int i = 0; i < n; i++) acc[i] = _mm512_min_ps(_mm512_set1_ps(f->hi), acc[i]);
    if (f->hard_swish)
#pragma GCC unroll 16
        for (int i = 0; i < n; i++) {
            const __m512 g = _mm512_fmadd_ps(acc[i], _mm512_set1_ps(1.0f / 6.0f), _mm512_set1_ps(0.5f));
            acc[i] = _mm512_mul_ps(acc[i], _mm512_max_ps(_mm512_setzero_ps(), _mm512_min_ps(_mm512_set1_ps(1.0f), g)));
        }
}

#endif
