/*
 * Stride-1 convolution without im2col: one GEMM per kernel tap on a zero-padded copy of the input.
 * With the padded planes Hp x Wp, output pixel (oy, ox) at flattened index q = oy * Wp + ox reads
 * input element q + ky * Wp + kx of every padded plane, so tap (ky, kx) is the GEMM
 * W[:, :, ky, kx] (cout x cin) times the padded input viewed from offset ky * Wp + kx (cin rows
 * of the plane stride): B is read in place, and the taps accumulate into C. The columns q with
 * ox >= OW are computed and dropped. The padded input is kh * kw times smaller than the im2col
 * unfolding (7 MB on ResNet-50's 64-channel 3x3 layers), and the output goes in chunks of rows,
 * one per task, whose C and B rows stay in the core's L2.
 *
 *   af_conv_taps t;
 *   af_conv_taps_prepare(isa, w, cout, cin, kh, kw, &t);           // packs one A per tap
 *   size_t ws = af_conv_taps_workspace(&t, oh, ow, n_threads);
 *   af_conv_taps_run(&t, geo, x, y, h, w, oh, ow, epi, pool, workspace, ws);   // one image
 *   af_conv_taps_release(&t);
 */
#ifndef AF_KERNELS_FAST_CONV_TAPS_H
#define AF_KERNELS_FAST_CONV_TAPS_H

#include "ir/shape/conv_geom.h"
#include "kernels/epilogue.h"
#include "kernels/gemm/gemm.h"
#include "util/threadpool.h"

typedef struct af_conv_taps {
    af_isa isa;
    int64_t cout, cin, kh, kw;
    af_gemm_packed **packed; /* per tap ky * kw + kx: W[:, :, ky, kx] as cout x cin; NULL: not prepared */
} af_conv_taps;

/* w is [cout, cin, kh, kw] float32. AF_ERR_OUT_OF_MEMORY, or AF_OK (t->packed set). */
af_status af_conv_taps_prepare(af_isa isa, const float *w, int64_t cout, int64_t cin, int64_t kh, int64_t kw,
                               af_conv_taps *t);
void af_conv_taps_release(af_conv_taps *t);
/* Whether the tap GEMMs apply: stride 1 and dilation 1 in both dims (any pads), and output rows of
 * at least 14 pixels: on 7x7 planes the kw - 1 dropped columns per row and the short GEMMs cost
 * more than the unfolding saves (ResNet-50's 512-channel 3x3 layers: 4.3 ms against 3.1). */
bool af_conv_taps_fit(const af_conv_geom *geo, int64_t ow);
/* Scratch one run needs for this geometry on up to n_threads threads. */
size_t af_conv_taps_workspace(const af_conv_taps *t, int64_t oh, int64_t ow, int n_threads);
/* One image: x is [cin, h, w], y is [cout, oh, ow]. epi (bias first, vectors offset to this image)
 * is applied to each chunk of output rows once the taps have summed. AF_ERR_RUNTIME when the
 * workspace is smaller than af_conv_taps_workspace for the pool's threads. */
af_status af_conv_taps_run(const af_conv_taps *t, const af_conv_geom *geo, const float *x, float *y, int64_t h,
                           int64_t w, int64_t oh, int64_t ow, const af_epilogue *epi, af_threadpool *pool,
                           void *workspace, size_t workspace_bytes);

#endif
