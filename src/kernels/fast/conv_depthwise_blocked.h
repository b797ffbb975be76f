/*
 * Depthwise 2-D convolution on AVX-512 with channels as the vector lanes (and grouped ones whose
 * groups are narrow, af_dw_blocked_prepare_grouped): 16 channels of a chunk
 * of input rows are interleaved (transposed in registers) into a zero-padded scratch block of
 * [row][column][16 channels], so every tap of every output pixel is one full-vector FMA of the
 * pixel's 16 channels by the tap's 16 weights, whatever the plane size, stride or dilation. A
 * register tile is 16 output pixels of one row; it is transposed back into the 16 channel planes
 * as it is stored. Small planes (MobileNetV3's 7x7 and 14x14 layers) have no per-plane overhead
 * and no partial vectors, which dominated the plane-at-a-time kernel (conv_depthwise.c).
 *
 *   af_dw_blocked b;
 *   af_dw_blocked_prepare(weights, channels, kh, kw, &b);   // weights regrouped per 16 channels
 *   size_t ws = af_dw_blocked_scratch_bytes(&b, geo, ow, n_threads);
 *   af_dw_blocked_run(&b, geo, x, y, n, h, w, oh, ow, bias, epi, pool, scratch, ws);
 *   af_dw_blocked_release(&b);
 */
#ifndef AF_KERNELS_FAST_CONV_DEPTHWISE_BLOCKED_H
#define AF_KERNELS_FAST_CONV_DEPTHWISE_BLOCKED_H

#include "ir/shape/conv_geom.h"
#include "kernels/epilogue.h"
#include "util/threadpool.h"

typedef struct af_dw_blocked {
    int64_t channels, kh, kw;
    int64_t group_channels; /* input channels per group: 1 depthwise */
    /* [channels / 16 rounded up][group_channels][kh * kw][16], zero past the last channel; owned
     * (NULL for a max) */
    float *weights;
    bool max; /* a max over each window instead (MaxPool): padding is -inf, no weights, no bias */
} af_dw_blocked;

/* weights is [channels, kh * kw]. AF_ERR_OUT_OF_MEMORY or AF_OK. */
af_status af_dw_blocked_prepare(const float *weights, int64_t channels, int64_t kh, int64_t kw, af_dw_blocked *b);
/* Whether a grouped convolution with as many output as input channels, group_channels of each per
 * group, runs here: groups of 1, 2, 4, 8, 16 or 32 channels. */
bool af_dw_blocked_groups_fit(int64_t channels, int64_t group_channels);
/* The grouped convolution: weights is [channels, group_channels, kh * kw]. AF_ERR_INVALID_ARGUMENT
 * where af_dw_blocked_groups_fit says no. A 16-lane block of output channels spans 16 /
 * group_channels groups, which read their input channels as a permutation of the block's lanes;
 * a group of 16 or 32 channels broadcasts each input channel to its 16-lane blocks. */
af_status af_dw_blocked_prepare_grouped(const float *weights, int64_t channels, int64_t group_channels, int64_t kh,
                                        int64_t kw, af_dw_blocked *b);
/* The window max of MaxPool on the same blocks (channels 16 to a vector), kh x kw windows. A
 * channel's NaN taps are skipped, as in the plane kernels (pool_body.h). */
void af_dw_blocked_prepare_max(int64_t channels, int64_t kh, int64_t kw, af_dw_blocked *b);
void af_dw_blocked_release(af_dw_blocked *b);
/* Bytes of b's regrouped weights. */
size_t af_dw_blocked_weight_bytes(const af_dw_blocked *b);
/* Scratch for n_threads threads: one interleaved block of input rows each. */
size_t af_dw_blocked_scratch_bytes(const af_dw_blocked *b, const af_conv_geom *geo, int64_t ow, int n_threads);
/* x is [n, channels, h, w], y [n, channels, oh, ow]; geo holds resolved pads. bias (may be NULL)
 * is added first, then epi runs (m = channel, n = output pixel, batch = image). AF_ERR_RUNTIME
 * when the scratch is smaller than af_dw_blocked_scratch_bytes for the pool's threads. */
af_status af_dw_blocked_run(const af_dw_blocked *b, const af_conv_geom *geo, const float *x, float *y, int64_t n,
                            int64_t h, int64_t w, int64_t oh, int64_t ow, const float *bias, const af_epilogue *epi,
                            af_threadpool *pool, void *scratch, size_t scratch_bytes);
/* Writes the block rows of input rows iy0 .. iy0 + rows (any values: outside [0, h) they are
 * padding) of channels c0 .. c0 + nc (nc <= 16) of image img: each row wp columns of 16 floats,
 * column j holding input column j - pad_left, zero outside the plane; lanes past nc may hold
 * anything. */
typedef void (*af_dw_fill_fn)(void *ctx, int64_t img, int64_t c0, int64_t nc, int64_t iy0, int64_t rows, int64_t wp,
                              float *dst);
/* af_dw_blocked_run with the input made by fill, row by row, instead of read from a tensor: a
 * producer (the 1x1 conv before it, say) writes straight into the block. A chunk's halo rows are
 * filled by each chunk that reads them. Depthwise only: AF_ERR_RUNTIME for a grouped b. */
af_status af_dw_blocked_run_fill(const af_dw_blocked *b, const af_conv_geom *geo, af_dw_fill_fn fill, void *ctx,
                                 float *y, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow, const float *bias,
                                 const af_epilogue *epi, af_threadpool *pool, void *scratch, size_t scratch_bytes);
/* Scratch for af_dw_blocked_run_fill on n_threads threads (its blocks are larger). */
size_t af_dw_blocked_fill_scratch_bytes(const af_dw_blocked *b, const af_conv_geom *geo, int64_t ow, int n_threads);
/* Input rows af_dw_blocked_run_fill fills per image on n_threads threads, over h: 1 when no row
 * is filled twice. */
double af_dw_blocked_fill_factor(const af_dw_blocked *b, const af_conv_geom *geo, int64_t h, int64_t oh, int64_t ow,
                                 int n_threads);

#endif
