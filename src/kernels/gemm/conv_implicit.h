/*
 * 2-D convolution (groups 1, dilation 1, any kernel, stride and pads) as an implicit GEMM: no
 * im2col, and every output element sums its cin * kh * kw products in registers in one pass.
 *
 * The input is copied into zero-padded phase planes: for stride (sy, sx), phase (a, b) of a
 * channel is P[i][j] = xpad[sy * i + a][sx * j + b], Hq x Wq with Hq = oh + (kh - 1) / sy and
 * Wq = ow + (kw - 1) / sx (stride 1: the padded plane itself). Output pixel (oy, ox) reads tap
 * (ky, kx) from phase (ky % sy, kx % sx) at row oy + ky / sy, column ox + kx / sx: consecutive
 * output pixels of a row read consecutive floats of a phase row, whatever the stride. A register
 * tile is MR pixels of one output row (each broadcast from the planes) by NR output channels
 * (vectors of the weights, packed once as panels of op(B) = W^T, K = cin kh kw in im2col order),
 * transposed in registers into rows of channels before the epilogue and the store. Nothing is
 * computed for padding, and rows of any width fill whole tiles but for the last of each row.
 * With 16 output channels or fewer on AVX-512 the tile is turned around: 8 channels (weights
 * broadcast, packed as A) by 48 pixels of a row (vectors loaded from the planes), no transpose.
 *
 *   af_conv_implicit c;
 *   af_conv_implicit_prepare(isa, w, cout, cin, kh, kw, &c);
 *   size_t ws = af_conv_implicit_workspace(&c, geo, oh, ow);
 *   af_conv_implicit_run(&c, geo, x, y, h, w, oh, ow, epi, pool, workspace, ws);   // one image
 *   af_conv_implicit_release(&c);
 */
#ifndef AF_KERNELS_GEMM_CONV_IMPLICIT_H
#define AF_KERNELS_GEMM_CONV_IMPLICIT_H

#include "ir/shape/conv_geom.h"
#include "kernels/epilogue.h"
#include "kernels/gemm/gemm.h"
#include "util/threadpool.h"

typedef struct af_conv_implicit {
    af_isa isa;
    int64_t cout, cin, kh, kw;
    af_gemm_packed *w; /* op(B) = W^T, (cin kh kw) x cout; NULL: not prepared */
    bool channel_rows; /* w is op(A) = W instead, for the tile with channels as rows (few channels) */
} af_conv_implicit;

/* Whether a convolution from cin to cout channels runs the tile with channels as rows on isa
 * (AVX-512: 16 output channels or fewer, or 64 or fewer from a stem's few input channels). */
bool af_conv_implicit_channel_rows(af_isa isa, int64_t cin, int64_t cout);
/* w is [cout, cin, kh, kw] float32. AF_ERR_OUT_OF_MEMORY, AF_ERR_INVALID_ARGUMENT, or AF_OK. */
af_status af_conv_implicit_prepare(af_isa isa, const float *w, int64_t cout, int64_t cin, int64_t kh, int64_t kw,
                                   af_conv_implicit *c);
void af_conv_implicit_release(af_conv_implicit *c);
/* Whether this geometry runs here: 2-D, dilation 1, and phase planes whose offsets fit in 32 bits. */
bool af_conv_implicit_fit(const af_conv_implicit *c, const af_conv_geom *geo, int64_t oh, int64_t ow);
/* Scratch bytes one image of this geometry needs (the phase planes and the tap offsets). */
size_t af_conv_implicit_workspace(const af_conv_implicit *c, const af_conv_geom *geo, int64_t oh, int64_t ow);
/* One image: x is [cin, h, w], y is [cout, oh, ow]. epi (bias first, vectors offset to this image;
 * m = output channel, n = flattened output pixel) is applied to every output element once.
 * AF_ERR_RUNTIME when the geometry does not fit or the workspace is too small, AF_ERR_LIMIT when
 * the work does not fit the thread pool's task count. */
af_status af_conv_implicit_run(const af_conv_implicit *c, const af_conv_geom *geo, const float *x, float *y,
                               int64_t h, int64_t w, int64_t oh, int64_t ow, const af_epilogue *epi,
                               af_threadpool *pool, void *workspace, size_t workspace_bytes);
/* True when a run with an epilogue of epi's ops reads each element of its residual (its one
 * AF_EPI_ADD) before it writes y's element at the same position, and never after, so that the
 * residual may be y itself: where the tile kernel applies the whole epilogue in registers. */
bool af_conv_implicit_residual_in_place(const af_conv_implicit *c, const af_epilogue *epi);

#endif
