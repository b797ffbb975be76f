/*
 * One row of a zero-padded, column-strided view of an input row, as the phase planes of the
 * implicit-GEMM and Winograd convolutions read it: dst[j] = src[c0 + j * s] for j < n where that
 * column lies in [0, w), else 0. Internal to src/kernels/gemm.
 */
#ifndef AF_KERNELS_GEMM_STRIDED_ROW_H
#define AF_KERNELS_GEMM_STRIDED_ROW_H

#include <string.h>

#include "kernels/fast/vec_internal.h"

static inline void af_strided_row(const af_vec_kernels *vk, const float *src, int64_t w, int64_t c0, int64_t s,
                                  int64_t n, float *dst) {
    /* Columns j in [lo, hi) read inside the row. */
    int64_t lo = c0 >= 0 ? 0 : (-c0 + s - 1) / s;
    int64_t hi = c0 > w - 1 ? 0 : (w - 1 - c0) / s + 1;
    if (hi > n) hi = n;
    if (lo > hi) lo = hi;
    memset(dst, 0, (size_t)lo * sizeof *dst);
    /* Strided rows go through the vector gather: a scalar loop was 40% of MobileNetV3's stem. */
    if (s == 1) memcpy(dst + lo, src + c0 + lo, (size_t)(hi - lo) * sizeof *dst);
    else vk->gather(hi - lo, s, src + c0 + lo * s, dst + lo);
    memset(dst + hi, 0, (size_t)(n - hi) * sizeof *dst);
}

#endif
