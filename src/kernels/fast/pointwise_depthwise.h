/*
 * The fused pointwise + depthwise convolution of an inverted-residual block (MobileNetV2/V3,
 * EfficientNet): y = act2(dwconv(act1(W1 . x + b1)) + b2), where the 1x1 conv expands Cin to C
 * channels and the depthwise conv runs on those C channels. Unfused, the expanded tensor (C planes
 * at the input's resolution: 3.2 MB at MobileNetV3-L's 112x112 block) is written out by one
 * kernel and read back by the next. Here each task takes a band of output rows, runs the 1x1 conv
 * on just the input rows that band reads (its halo rows are computed by both neighbouring bands)
 * into the thread's scratch, and the depthwise conv from there while it is in L2. Every output
 * element is summed in the unfused kernels' order, so the result is the same bit for bit.
 *
 * AVX-512 only (the channel-blocked depthwise kernel); static shapes.
 *
 *   af_pwdw_desc d = {.cin = 16, .channels = 64, .h = 112, .w = 112, ...};
 *   af_pwdw_kernel_make(&d, isa, n_threads, &k, err);   // k.run on x [N, Cin, H, W]
 */
#ifndef AF_KERNELS_FAST_POINTWISE_DEPTHWISE_H
#define AF_KERNELS_FAST_POINTWISE_DEPTHWISE_H

#include "ir/shape/conv_geom.h"
#include "kernels/kernel.h"

typedef struct af_pwdw_desc {
    int64_t cin, channels; /* the 1x1 conv's input channels, and its output = the depthwise's */
    int64_t h, w;          /* the input plane (both convolutions') */
    int64_t oh, ow;        /* the depthwise conv's output plane */
    const float *w1, *b1;  /* [channels, cin], [channels] (b1 may be NULL) */
    const float *w2, *b2;  /* [channels, kh * kw], [channels] (b2 may be NULL) */
    int64_t kh, kw;
    af_conv_geom geo;      /* the depthwise conv's, pads resolved (2 spatial dims, undilated) */
    bool has_act1, has_act2;
    af_epi_step act1, act2; /* activations without vectors (af_sched_activation_step) */
} af_pwdw_desc;

/* The most of the 1x1 conv a band layout may compute twice (its halo rows), as a fraction. The one
 * pair measured to pay (MobileNetV3-L's 64 x 112 x 112, 0.322 against 0.347 ms at one thread)
 * recomputes 8%; the bound allows that and a little more, not measured finer. */
#define AF_PWDW_MAX_RECOMPUTE 0.12

/* Packs the weights and picks the bands for n_threads (the session's). AF_ERR_UNSUPPORTED, with
 * the reason in err, where the fused kernel does not apply (not AVX-512, a dilated or unusual
 * geometry, or bands that would recompute more than AF_PWDW_MAX_RECOMPUTE). */
af_status af_pwdw_kernel_make(const af_pwdw_desc *d, af_isa isa, int n_threads, af_kernel *k, af_error *err);

#endif
