/* One row of a zero-padded copy of an input plane, for kernels that pad a plane into
 * scratch before vector work (today the plane-at-a-time depthwise conv). Internal to src/kernels/fast. */
#ifndef AF_KERNELS_FAST_PAD_ROW_H
#define AF_KERNELS_FAST_PAD_ROW_H

#include <stdint.h>
#include <string.h>

/* dst[0, width): zeros, then src[0, w) from column left on (clipped to width), then zeros. With
 * src NULL (a padding row) the whole row is zeros. */
static inline void af_pad_row(float *dst, int64_t width, const float *src, int64_t w, int64_t left) {
    if (!src) {
        memset(dst, 0, (size_t)width * sizeof *dst);
        return;
    }
    int64_t c0 = left < width ? left : width, n = w < width - c0 ? w : width - c0;
    memset(dst, 0, (size_t)c0 * sizeof *dst);
    memcpy(dst + c0, src, (size_t)n * sizeof *dst);
    memset(dst + c0 + n, 0, (size_t)(width - c0 - n) * sizeof *dst);
}

#endif
