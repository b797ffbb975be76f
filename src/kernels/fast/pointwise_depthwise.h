/*
 * The fused pointwise + depthwise convolution of an inverted-residual block (MobileNetV2/V3,
 * EfficientNet): y = act2(dwconv(act1(W1 . x + b1)) + b2), where the 1x1 conv expands Cin to C
 * channels and the depthwise conv runs on those C channels. The first conv may also be a small
 * dense one, a network's stem before its first depthwise conv (MobileNetV2, MnasNet). Unfused,
 * the expanded tensor (C planes at the input's resolution: 3.2 MB at MobileNetV3-L's 112x112
 * block) is written out by one kernel and read back, transposed into 16-channel blocks, by
 * the next. Here the channel-blocked depthwise kernel (conv_depthwise_blocked.h) has its blocks
 * filled by the 1x1 conv itself: each block row is 16 expanded channels of an input row, computed
 * from x straight into the block (a chunk's halo rows are computed by both chunks that read
 * them). Every expanded element is summed in the unfused 1x1 conv's order, so the result is the
 * same bit for bit (a dense first conv's are summed over input channels, then kernel rows and
 * columns, not in the GEMM's order).
 *
 * AVX-512 only (the channel-blocked depthwise kernel); static channel counts. The batch is the
 * input's; so is the plane where the desc's h, w, oh, ow are all -1 (a dynamic-size export: its
 * scratch is then made per run, and the halo recompute is not bounded in advance).
 *
 *   af_pwdw_desc d = {.cin = 16, .channels = 64, .h = 112, .w = 112, ...};
 *   af_pwdw_kernel_make(&d, isa, n_threads, &k, err);   // k.run on x [N, Cin, H, W]
 */
#ifndef AF_KERNELS_FAST_POINTWISE_DEPTHWISE_H
#define AF_KERNELS_FAST_POINTWISE_DEPTHWISE_H

#include <stddef.h>

#include "ir/shape/conv_geom.h"
#include "kernels/kernel.h"

typedef struct af_pwdw_desc {
    int64_t cin, channels; /* the 1x1 conv's input channels, and its output = the depthwise's */
    int64_t h, w;          /* the depthwise conv's input plane (the 1x1 conv's too) */
    int64_t oh, ow;        /* the depthwise conv's output plane */
    const float *w1, *b1;  /* [channels, cin, kh1, kw1], [channels] (b1 may be NULL) */
    /* A first conv that is not 1x1 (a network's stem: 3x3 at stride 2 over 3 channels) has a
     * kernel of kh1 x kw1 at strides sy1, sx1 with leading pads pt1, pl1 over x's plane xh x xw,
     * and h x w is then its output plane; static sizes only, and cin kh1 kw1 <= AF_PWDW_MAX_TAPS.
     * kh1 = 0: the 1x1 conv (x's plane is h x w). */
    int64_t kh1, kw1, sy1, sx1, pt1, pl1, xh, xw;
    const float *w2, *b2;  /* [channels, kh * kw], [channels] (b2 may be NULL) */
    int64_t kh, kw;
    af_conv_geom geo;      /* the depthwise conv's, pads resolved (2 spatial dims, undilated) */
    bool has_act1, has_act2;
    af_epi_step act1, act2; /* activations without vectors (af_sched_activation_step) */
} af_pwdw_desc;

/* The most of the 1x1 conv the depthwise kernel's chunks may compute twice (their halo rows), as a
 * fraction. MobileNetV3-L's 64 x 112 x 112 (3x3, stride 2) recomputes 1.8%, the unit tests' cases
 * 1.2-3.1% (af_dw_blocked_fill_factor); the bound is not measured finer. */
#define AF_PWDW_MAX_RECOMPUTE 0.12

/* The most products per output of a first conv that is not 1x1: the fused kernel computes it
 * directly, 16 channels in a register, which pays for a network's stem (27: 3 channels, 3x3),
 * whose few input channels leave a GEMM short rows; wider convs are left to the GEMM. */
#define AF_PWDW_MAX_TAPS 64

/* The largest expanded tensor, in bytes, left to the two unfused kernels on this CPU: 0 on Intel
 * and AMD's Zen 4, 1 MiB on other AMD (Zen 5) and others (the measurements are in
 * pointwise_depthwise.c). */
size_t af_pwdw_min_expanded_bytes(void);

/* Regroups the weights, for n_threads (the session's). AF_ERR_UNSUPPORTED, with the reason in err,
 * where the fused kernel does not apply (not AVX-512, a dilated or unusual geometry, an expanded
 * tensor of at most af_pwdw_min_expanded_bytes(), or chunks that would recompute more than
 * AF_PWDW_MAX_RECOMPUTE). */
af_status af_pwdw_kernel_make(const af_pwdw_desc *d, af_isa isa, int n_threads, af_kernel *k, af_error *err);

#endif
