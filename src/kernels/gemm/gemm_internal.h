/*
 * What the GEMM driver (gemm.c) needs from each ISA's file: the register-tile shape, the tile
 * function that runs the right microkernel for a full or partial tile, the epilogue applier, and
 * the packing routine. Internal to src/kernels/gemm.
 *
 * Packed panel layout (prepacked operands and workspace blocks alike): a panel holds W lanes (MR
 * rows of op(A) or NR columns of op(B)) for consecutive k, k-major: panel[k * W + lane]; lanes past
 * the matrix edge are zero.
 */
#ifndef AF_KERNELS_GEMM_INTERNAL_H
#define AF_KERNELS_GEMM_INTERNAL_H

#include <stdint.h>

#include "kernels/epilogue.h"

/* C[0..mr) x [0..nr) (row stride ldc) = alpha * sum_k a[k*MR + i] * b[k*NR + j] + beta * C,
 * where beta == 0 means C is not read. mr <= MR, nr <= NR, kc >= 1. */
typedef void (*af_gemm_tile_fn)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int mr, int nr,
                                float alpha, float beta);

/* Packs the lanes x kc block of a source matrix into ceil(lanes / w) consecutive panels of kc * w
 * floats at dst (the last one zero-padded). Element (k, l) of the block is src[k * ld + l] when
 * lanes_contiguous, else src[l * ld + k]. */
typedef void (*af_gemm_pack_fn)(const float *src, int64_t ld, int lanes_contiguous, int64_t lanes, int w, int64_t kc,
                                float *dst);

typedef struct af_gemm_isa_cfg {
    int mr, nr;
    af_gemm_tile_fn tile;
    af_gemm_pack_fn pack;
    af_epilogue_tile_fn epilogue;
} af_gemm_isa_cfg;

extern const af_gemm_isa_cfg af_gemm_cfg_scalar;
extern const af_gemm_isa_cfg af_gemm_cfg_avx2;
extern const af_gemm_isa_cfg af_gemm_cfg_avx512;

/* The full-tile microkernels under their own names (benchmarks call them directly). */
void af_f32_gemm_ukernel_14x32__avx512(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                                       float alpha, float beta);
void af_f32_gemm_ukernel_6x16__avx2(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, float alpha,
                                    float beta);
void af_f32_gemm_ukernel_4x4__scalar(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int mr,
                                     int nr, float alpha, float beta);

/* The portable packer (gemm_scalar.c); ISA files may use it or their own. */
void af_gemm_pack_scalar(const float *src, int64_t ld, int lanes_contiguous, int64_t lanes, int w, int64_t kc,
                         float *dst);

#endif
