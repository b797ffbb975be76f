/* A 16 x 16 float transpose in AVX-512 registers, shared by the kernels that change between
 * pixel-major and channel-major tiles (the GEMM packer, the implicit conv's store, the
 * channel-blocked depthwise conv). Include only from files compiled for AVX-512 call sites. */
#ifndef AF_KERNELS_TRANSPOSE_AVX512_H
#define AF_KERNELS_TRANSPOSE_AVX512_H

#include <immintrin.h>

#define AF_TRANSPOSE_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

/* Transposes the 16 x 16 block r (r[l][k]) in registers into out[k][l]. */
AF_TRANSPOSE_TARGET static inline __attribute__((always_inline)) void af_transpose16x16(const __m512 r[16],
                                                                                   __m512 out[16]) {
    __m512 t[16], u[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* u[4g + q], 128-bit lane j: element 4j + q of rows 4g .. 4g+3 */
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        u[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xee);
        u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xee);
    }
    /* Gather lane j of u[q], u[4+q], u[8+q], u[12+q] into out[4j + q]. */
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
        __m512 v02 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0x88), v13 = _mm512_shuffle_f32x4(u[q], u[4 + q], 0xdd);
        __m512 w02 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0x88),
               w13 = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0xdd);
        out[q] = _mm512_shuffle_f32x4(v02, w02, 0x88);
        out[8 + q] = _mm512_shuffle_f32x4(v02, w02, 0xdd);
        out[4 + q] = _mm512_shuffle_f32x4(v13, w13, 0x88);
        out[12 + q] = _mm512_shuffle_f32x4(v13, w13, 0xdd);
    }
}

#endif
