/*
 * 2-D convolution (groups 1, any kernel, stride, dilation and pads) that computes only the
 * (output pixel, tap) pairs whose tap reads inside the input: a GEMM per tap over the output
 * pixels that tap reaches, instead of im2col's GEMM over every pair, zeros from the padding
 * included.
 *
 * A tap's input row is monotone in the output row, so each tap reads inside the input over one run
 * of output rows and one run of columns: a rectangle of output pixels. For each tap, the
 * rectangle's samples of that tap are gathered as a [cin, pixels] matrix and multiplied by the
 * tap's weights (packed once as B, pixels as rows: [pixels, cout]), and the product is added into
 * the rectangle of the output, which starts from zero; the epilogue (bias first) runs over the
 * whole output at the end. Rectangles of 64 pixels or more split their gather, GEMM and add over
 * the threads; smaller ones (a corner's, whose GEMM streams the tap's weights past a few pixels)
 * run a tap per task, on one thread each, and are added after.
 *
 * It pays where most pairs read padding: DeepLabV3's ASPP convolution of dilation 12 over a 14x14
 * plane reads the input with 324 of its 1764 pairs (the centre tap everywhere, the others only
 * at the borders). af_conv_tap_regions_live_share says how many a geometry has.
 *
 *   af_conv_tap_regions c;
 *   af_conv_tap_regions_prepare(isa, w, cout, cin, kh, kw, &c);
 *   size_t ws = af_conv_tap_regions_workspace(&c, geo, h, w, oh, ow, n_threads);
 *   af_conv_tap_regions_run(&c, geo, x, y, h, w, oh, ow, epi, pool, workspace, ws);   // one image
 *   af_conv_tap_regions_release(&c);
 */
#ifndef AF_KERNELS_GEMM_CONV_TAP_REGIONS_H
#define AF_KERNELS_GEMM_CONV_TAP_REGIONS_H

#include "ir/shape/conv_geom.h"
#include "kernels/epilogue.h"
#include "kernels/gemm/gemm.h"
#include "util/threadpool.h"

typedef struct af_conv_tap_regions {
    af_isa isa;
    int64_t cout, cin, kh, kw;
    af_gemm_packed **w; /* [kh * kw]: tap (ky, kx)'s weights W^T as op(B), cin x cout; NULL: not prepared */
} af_conv_tap_regions;

/* The share of (output pixel, tap) pairs of this geometry whose tap reads inside the input, in
 * [0, 1]; -1 where the rectangles do not apply (not 2-D, an empty plane or kernel). */
double af_conv_tap_regions_live_share(const af_conv_geom *geo, int64_t kh, int64_t kw, int64_t h, int64_t w,
                                      int64_t oh, int64_t ow);
/* w is [cout, cin, kh, kw] float32. AF_ERR_OUT_OF_MEMORY, AF_ERR_INVALID_ARGUMENT, or AF_OK. */
af_status af_conv_tap_regions_prepare(af_isa isa, const float *w, int64_t cout, int64_t cin, int64_t kh, int64_t kw,
                                      af_conv_tap_regions *c);
void af_conv_tap_regions_release(af_conv_tap_regions *c);
/* Scratch bytes one image of this geometry needs on n_threads threads; 0 where it does not apply. */
size_t af_conv_tap_regions_workspace(const af_conv_tap_regions *c, const af_conv_geom *geo, int64_t h, int64_t w,
                                     int64_t oh, int64_t ow, int n_threads);
/* One image: x is [cin, h, w], y is [cout, oh, ow]. epi (bias first, vectors offset to this image;
 * m = output channel, n = flattened output pixel) is applied to every output element once, after
 * every element is written: the residual must not be y. AF_ERR_RUNTIME when the geometry does not
 * apply or the workspace is too small; a GEMM's failure as it returned it. */
af_status af_conv_tap_regions_run(const af_conv_tap_regions *c, const af_conv_geom *geo, const float *x, float *y,
                                  int64_t h, int64_t w, int64_t oh, int64_t ow, const af_epilogue *epi,
                                  af_threadpool *pool, void *workspace, size_t workspace_bytes);

#endif
