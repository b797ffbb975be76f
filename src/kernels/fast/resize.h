/* The fast Resize kernel (resize.c): af_fast_resize_prepare in kernels/kernel.h selects it; this
 * tells whether a run takes its separable float path or hands the op to the reference kernel. */
#ifndef AF_KERNELS_FAST_RESIZE_H
#define AF_KERNELS_FAST_RESIZE_H

#include <stdbool.h>

#include "ir/op_ctx.h"

/* True when a run on ctx's inputs and outputs (shapes set) takes the separable path: float32,
 * rank >= 2, only the last two axes resampled, every output point with 1 to 16 taps per axis. */
bool af_fast_resize_separable(af_op_ctx *ctx);

#endif
