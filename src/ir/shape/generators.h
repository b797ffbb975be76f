/*
 * Helpers shared by the shape functions and reference kernels of the generator ops (Shape,
 * ConstantOfShape, Range, NonZero, EyeLike): what both sides derive from a node's inputs.
 *
 *   int start, end;
 *   af_generators_shape_range(ctx, x->rank, &start, &end);  // Shape's dims[start..end)
 */
#ifndef AF_IR_SHAPE_GENERATORS_H
#define AF_IR_SHAPE_GENERATORS_H

#include "ir/op_ctx.h"

/* Shape's start/end attributes (opset 15) clamped to [0, rank]; end >= start. */
void af_generators_shape_range(const af_op_ctx *c, int rank, int *start, int *end);
/* Element count of Range over known scalar inputs; fails on a zero or non-finite delta. */
af_status af_generators_range_count(const af_op_ctx *c, int64_t *count);
/* Elements of t that are not zero (NaN counts as not zero). */
int64_t af_generators_count_nonzero(const af_tensor *t);
/* ConstantOfShape's fill value: the value attribute, or a float 0. Fails when malformed. */
af_status af_generators_fill_value(const af_op_ctx *c, af_tensor *value);

#endif
