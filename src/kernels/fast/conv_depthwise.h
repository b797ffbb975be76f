/*
 * Depthwise 2-D convolution (one filter per channel, NCHW float32). On AVX-512 with scratch it
 * runs the channel-blocked kernel (conv_depthwise_blocked.h). Otherwise each task computes one
 * channel plane of one image, then applies the bias and the fused epilogue to it while it is in
 * cache. With scratch the plane is first copied into its zero-padded stride phases, where every
 * tap of consecutive outputs reads consecutive floats at any stride: the whole plane runs in
 * vectors (AVX2, or plain C the compiler vectorizes), borders included. Without, it goes along
 * the output rows with bounds checks at the borders (AVX2 vectors inside at stride 1).
 *
 *   af_depthwise_conv dw;
 *   af_depthwise_conv_prepare(isa, weights, channels, kh, kw, &dw);   // copies the weights
 *   af_depthwise_conv_run(&dw, &geo, x, y, n, h, w, oh, ow, bias, epi, pool, scratch, scratch_bytes);
 *   af_depthwise_conv_release(&dw);
 */
#ifndef AF_KERNELS_FAST_CONV_DEPTHWISE_H
#define AF_KERNELS_FAST_CONV_DEPTHWISE_H

#include "ir/shape/conv_geom.h"
#include "kernels/epilogue.h"
#include "kernels/fast/conv_depthwise_blocked.h"
#include "util/threadpool.h"

typedef struct af_depthwise_conv {
    af_isa isa;
    int64_t channels, kh, kw;
    float *weights; /* [channels, kh * kw], owned */
    af_dw_blocked blocked; /* AVX-512: the channel-blocked kernel, which runs when scratch allows */
} af_depthwise_conv;

af_status af_depthwise_conv_prepare(af_isa isa, const float *weights, int64_t channels, int64_t kh, int64_t kw,
                                    af_depthwise_conv *out);
void af_depthwise_conv_release(af_depthwise_conv *dw);
const char *af_depthwise_conv_name(const af_depthwise_conv *dw);
/* Scratch for the phase-plane path: per thread, one input plane's phase planes and their output. */
size_t af_depthwise_conv_scratch_bytes(const af_depthwise_conv *dw, const af_conv_geom *geo, int64_t oh, int64_t ow,
                                       int n_threads);
/* geo holds resolved pads, strides and dilations. Epilogue coordinates: m = channel, n = output
 * pixel, batch = image; bias (may be NULL) is added first. With scratch of at least
 * af_depthwise_conv_scratch_bytes for the pool's threads (and kernels up to 32 taps a side), each
 * plane is copied into its phase planes and every output is computed by the vector path; with less
 * (or NULL), borders go bounds-checked. */
af_status af_depthwise_conv_run(const af_depthwise_conv *dw, const af_conv_geom *geo, const float *x, float *y,
                                int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow, const float *bias,
                                const af_epilogue *epi, af_threadpool *pool, void *scratch, size_t scratch_bytes);

#endif
