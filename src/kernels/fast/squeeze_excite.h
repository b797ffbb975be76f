/*
 * The fused squeeze-excite kernel: y = x * gate(W2 . act(W1 . mean_hw(x) + b1) + b2), per image,
 * the channel gate applied to each plane. MobileNetV3 and EfficientNet blocks: the pooled vector
 * and the two 1x1 convolutions on it are tiny, so unfused they cost more in kernel calls and
 * intermediate tensors than in arithmetic. Two passes over x (mean, then scale), parallel over
 * the channels of every image; the matrix-vector products run on the GEMM with prepacked weights,
 * one row per image of the batch.
 *
 *   af_se_desc d = {.channels = C, .reduced = Cr, .w1 = ..., .gate = {.op = AF_EPI_HARD_SIGMOID, ...}};
 *   af_se_kernel_make(&d, isa, n_threads, &k, err);   // packs the weights; k.run on [N, C, H, W]
 */
#ifndef AF_KERNELS_FAST_SQUEEZE_EXCITE_H
#define AF_KERNELS_FAST_SQUEEZE_EXCITE_H

#include "kernels/kernel.h"

typedef struct af_se_desc {
    int64_t channels, reduced;  /* C and the squeezed width C' */
    const float *w1, *b1;       /* [C', C], [C'] (b1 may be NULL) */
    const float *w2, *b2;       /* [C, C'], [C] (b2 may be NULL) */
    bool has_act;
    af_epi_step act;            /* after the first product (a ReLU, say) */
    af_epi_step gate;           /* after the second (HardSigmoid or Sigmoid) */
} af_se_desc;

/* n_threads: the session's, to size the GEMM scratch in the kernel's workspace. */
af_status af_se_kernel_make(const af_se_desc *d, af_isa isa, int n_threads, af_kernel *k, af_error *err);

#endif
