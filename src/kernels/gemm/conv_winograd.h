/*
 * 3x3 stride-1 convolution (groups 1, dilation 1, any pads) by Winograd's F(4x4, 3x3): each 4x4
 * block of output pixels (a tile) comes from a 6x6 block of the padded input with 36
 * multiplications per input-output channel pair instead of 144, so the GEMM work is a quarter of
 * the direct convolution's.
 *
 * One image runs in three passes over the thread pool:
 *   1. input transform, per input channel: V[xi][ci][t] = (B^T d_t B)[xi] for the 36 positions xi
 *      of every tile t (row-major over the tiles of the output);
 *   2. 36 GEMMs, M[xi] = U[xi] V[xi] (cout x cin times cin x tiles), on the ISA's convolution
 *      tile (tiles broadcast, 32 output channels from the packed U[xi]);
 *   3. output transform, per output channel: Y_t = A^T M_t A, then the epilogue on each row of
 *      tiles while it is in L1.
 * U[xi] = (G g G^T)[xi] of each 3x3 kernel g is computed once, in double, and packed.
 *
 * The rounding differs from the direct sum: the transforms scale inputs by up to 5x and the
 * weights' transform divides by 24, so errors are a few units in the last place of the largest
 * terms; the unit tests bound them against the reference kernel.
 *
 *   af_conv_winograd c;
 *   af_conv_winograd_prepare(isa, w, cout, cin, &c);                // w is [cout, cin, 3, 3]
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
    int64_t cout, cin;
    af_gemm_packed *u; /* 36 items of op(B) = U[xi]^T, cin x cout; NULL: not prepared */
} af_conv_winograd;

/* Whether Winograd is the convolution to use: a 3x3 kernel at stride 1, dilation 1, groups 1, on
 * an output plane with enough whole tiles and channels for the transforms to pay (measured on
 * ResNet-50's layers, see conv.c). */
bool af_conv_winograd_suits(const af_conv_geom *geo, int64_t kh, int64_t kw, int64_t groups, int64_t cin,
                            int64_t cout, int64_t oh, int64_t ow);
/* w is [cout, cin, 3, 3] float32. AF_ERR_OUT_OF_MEMORY, AF_ERR_INVALID_ARGUMENT, or AF_OK. */
af_status af_conv_winograd_prepare(af_isa isa, const float *w, int64_t cout, int64_t cin, af_conv_winograd *c);
void af_conv_winograd_release(af_conv_winograd *c);
/* Scratch bytes one image needs with n_threads threads (the transformed input and products, and
 * each thread's phase rows); 0 when the sizes overflow. */
size_t af_conv_winograd_workspace(const af_conv_winograd *c, int64_t oh, int64_t ow, int n_threads);
/* One image: x is [cin, h, w], y is [cout, oh, ow]; geo must be stride 1, dilation 1, 2-D. epi
 * (bias first, vectors offset to this image; m = output channel, n = flattened output pixel) is
 * applied to every output element once. AF_ERR_RUNTIME when the geometry is not one this kernel
 * runs or the workspace is too small, AF_ERR_LIMIT when the work does not fit the pool's task
 * count. */
af_status af_conv_winograd_run(const af_conv_winograd *c, const af_conv_geom *geo, const float *x, float *y,
                               int64_t h, int64_t w, int64_t oh, int64_t ow, const af_epilogue *epi,
                               af_threadpool *pool, void *workspace, size_t workspace_bytes);

#endif
