/* Portable GEMM pieces: the 4x4 scalar microkernel (the fallback ISA) and the generic packer. */
#include <string.h>

#include "kernels/gemm/gemm_internal.h"

#define MR 4
#define NR 4

void af_gemm_pack_scalar(const float *src, int64_t ld, int lanes_contiguous, int64_t lanes, int w, int64_t kc,
                         float *dst) {
    for (int64_t l0 = 0; l0 < lanes; l0 += w, dst += kc * w) {
        const int n = lanes - l0 < w ? (int)(lanes - l0) : w;
        if (lanes_contiguous) {
            for (int64_t k = 0; k < kc; k++) {
                memcpy(dst + k * w, src + k * ld + l0, (size_t)n * sizeof *dst);
                for (int l = n; l < w; l++) dst[k * w + l] = 0.0f;
            }
            continue;
        }
        /* Transposing: read each source lane contiguously, write with stride w (in L1). */
        for (int l = 0; l < n; l++) {
            const float *s = src + (l0 + l) * ld;
            for (int64_t k = 0; k < kc; k++) dst[k * w + l] = s[k];
        }
        for (int l = n; l < w; l++)
            for (int64_t k = 0; k < kc; k++) dst[k * w + l] = 0.0f;
    }
}

/* Blocked summation (AF_CONV_FLUSH_K): acc goes into total, which then holds the sum so far. */
static void flush(float acc[MR][NR], float total[MR][NR]) {
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) {
            total[i][j] += acc[i][j];
            acc[i][j] = 0.0f;
        }
}

/* The portable tile function (no prefetching, no fused steps: the reference applier runs after). */
void af_f32_gemm_ukernel_4x4__scalar(const af_gemm_tile_args *t) {
    const float *a = t->a, *b = t->b;
    float acc[MR][NR] = {{0}};
    for (int64_t k = 0; k < t->kc; k++) {
        for (int i = 0; i < MR; i++)
            for (int j = 0; j < NR; j++) acc[i][j] += a[i] * b[j];
        a += MR;
        b += t->ldb;
    }
    for (int i = 0; i < t->mr; i++)
        for (int j = 0; j < t->nr; j++) {
            float *c = t->c + i * t->ldc + j;
            float r = t->alpha * acc[i][j];
            if (t->beta != 0.0f) r += t->beta * *c;
            *c = r;
        }
}

/* The portable convolution tile (see af_gemm_isa_cfg.conv_tile), stored transposed. */
static void conv_tile_scalar(const af_gemm_tile_args *t) {
    const float *b = t->b;
    const int64_t flush_k = af_conv_tile_flush_channels(t) * t->taps;
    float acc[MR][NR] = {{0}}, total[MR][NR] = {{0}};
    for (int64_t k = 0; k < t->kc; k++, b += NR) {
        if (k > 0 && k % flush_k == 0) flush(acc, total);
        const float *a = t->a + k / t->taps * t->chan_ld + t->tap_off[k % t->taps];
        for (int i = 0; i < t->mr; i++)
            for (int j = 0; j < NR; j++) acc[i][j] += a[i] * b[j];
    }
    flush(acc, total);
    for (int j = 0; j < t->nr; j++)
        for (int i = 0; i < t->mr; i++) t->c[j * t->ldc + i] = total[i][j];
}

const af_gemm_isa_cfg af_gemm_cfg_scalar = {
    .mr = MR,
    .nr = NR,
    .tile = af_f32_gemm_ukernel_4x4__scalar,
    .fused = false,
    .conv_tile = conv_tile_scalar,
    .conv_fused = false,
    .pack = af_gemm_pack_scalar,
    .epilogue = af_epilogue_apply_ref,
};
