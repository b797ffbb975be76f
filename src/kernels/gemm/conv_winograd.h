/*
 * 3x3 stride-1 convolution (groups 1, dilation 1, any pads) by Winograd's F(m x m, 3x3), m = 4 or
 * 2: each m x m block of output pixels (a tile) comes from an (m + 2) x (m + 2) block of the
 * padded input with (m + 2)^2 multiplications per input-output channel pair instead of 9 m^2, so
 * the GEMM work is 1/4 (m = 4) or 4/9 (m = 2) of the direct convolution's.
 *
 * One image runs as blocks of tile rows over the thread pool, each block in its thread's scratch
 * (at several threads, when the tile rows do not divide evenly over them, each thread runs every
 * block for its share of the output-channel panels instead):
 *   1. input transform, per input channel: V[ci][xi][t] = (B^T d_t B)[xi] for the (m + 2)^2
 *      positions xi of every tile t of the block;
 *   2. per panel of 32 output channels, (m + 2)^2 products M[co][xi] = U[xi] V[xi] (cout x cin
 *      times cin x tiles) on the ISA's convolution tile (tiles broadcast, channels from the
 *      packed U[xi]);
 *   3. output transform of each of the panel's channels, Y_t = A^T M_t A, interleaved into the
 *      output rows, then the epilogue on those rows while they are in L1.
 * U[xi] = (G g G^T)[xi] of each 3x3 kernel g is computed once, in double, and packed.
 *
 * The rounding differs from the direct sum: the transforms add and subtract scaled inputs and
 * weights before the products, so the error scales with sum |x w| over a window rather than with
 * the output (a few float epsilons of it for m = 4; the unit tests bound it).
 *
 *   int m = af_conv_winograd_tile(geo, 3, 3, groups, cin, cout, oh, ow, n_threads);   // 0: use another kernel
 *   af_conv_winograd c;
 *   af_conv_winograd_prepare(isa, m, w, cout, cin, &c);                    // w is [cout, cin, 3, 3]
 *   size_t ws = af_conv_winograd_workspace(&c, oh, ow, n_threads);
 *   af_conv_winograd_run(&c, geo, x, y, h, w, oh, ow, epi, pool, workspace, ws);   // one image
 *   af_conv_winograd_release(&c);
 */
#ifndef AF_KERNELS_GEMM_CONV_WINOGRAD_H
#define AF_KERNELS_GEMM_CONV_WINOGRAD_H

#include "ir/shape/conv_geom.h"
#include "kernels/epilogue.h"
#include "kernels/gemm/gemm.h"
#include "util/threadpool.h"

typedef struct af_conv_winograd {
    af_isa isa;
    int m; /* output pixels per tile side: 4 or 2 */
    int64_t cout, cin;
    af_gemm_packed *u; /* (m + 2)^2 items of op(B) = U[xi]^T, cin x cout; NULL: not prepared */
} af_conv_winograd;

/* The tile side to run this convolution with, 4 or 2, or 0 when Winograd is not the kernel to
 * use: it takes a 3x3 kernel at stride 1, dilation 1, groups 1, 16+ channels each way, and an
 * output plane with enough tiles for U to pay for itself on n_threads threads (measured on
 * ResNet-50's layers; fewer than 32 tiles of 2x2 pay on AMD only). */
int af_conv_winograd_tile(const af_conv_geom *geo, int64_t kh, int64_t kw, int64_t groups, int64_t cin,
                          int64_t cout, int64_t oh, int64_t ow, int n_threads);
/* w is [cout, cin, 3, 3] float32, m 4 or 2. AF_ERR_OUT_OF_MEMORY, AF_ERR_INVALID_ARGUMENT, or
 * AF_OK. */
af_status af_conv_winograd_prepare(af_isa isa, int m, const float *w, int64_t cout, int64_t cin,
                                   af_conv_winograd *c);
void af_conv_winograd_release(af_conv_winograd *c);
/* Scratch bytes one image needs with n_threads threads (each thread's block of transformed input,
 * products and output rows); 0 when the sizes overflow. */
size_t af_conv_winograd_workspace(const af_conv_winograd *c, int64_t oh, int64_t ow, int n_threads);
/* One image: x is [cin, h, w], y is [cout, oh, ow]; geo must be 2-D at stride 1 and dilation 1
 * (any plane size whose workspace fits, not only those af_conv_winograd_tile picks c->m for). epi
 * (bias first, vectors offset to this image; m = output channel, n = flattened output pixel) is
 * applied to every output element once. AF_ERR_RUNTIME when the geometry is not one this kernel
 * runs or the workspace is too small, AF_ERR_LIMIT when the work does not fit the pool's task
 * count. */
af_status af_conv_winograd_run(const af_conv_winograd *c, const af_conv_geom *geo, const float *x, float *y,
                               int64_t h, int64_t w, int64_t oh, int64_t ow, const af_epilogue *epi,
                               af_threadpool *pool, void *workspace, size_t workspace_bytes);

#endif
