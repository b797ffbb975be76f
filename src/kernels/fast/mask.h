/* The fast comparison and Where loops of mask.c, for the kernels' own nodes and for the fused
 * elementwise region's tiles. */
#ifndef AF_KERNELS_FAST_MASK_H
#define AF_KERNELS_FAST_MASK_H

#include <stdbool.h>

#include "ir/op.h"
#include "ir/tensor.h"
#include "util/threadpool.h"

/* y = op(ins) for Equal, Less, LessOrEqual, Greater, GreaterOrEqual (two float32 operands, a bool
 * y) or Where (a bool condition, two operands of y's 4-byte dtype), each operand y's shape or one
 * element, over pool (NULL: the caller). False, touching nothing, for anything else: the caller
 * runs the reference kernel. */
bool af_mask_try(af_op op, const af_tensor *const *ins, int n_ins, af_tensor *y, af_threadpool *pool);

#endif
