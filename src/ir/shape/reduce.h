/*
 * Facts shared by the reduction shape functions (ir/shape/reduce.c) and kernels (kernels/ref/).
 *
 *   bool mask[AF_MAX_RANK], known;
 *   if (af_reduce_axes(ctx, x->rank, mask, &known) != AF_OK) return ...;  // mask[d]: dim d reduced
 *   int axis; af_reduce_softmax_axis(ctx, x->rank, &axis);                 // opset-dependent default
 */
#ifndef AF_IR_SHAPE_REDUCE_H
#define AF_IR_SHAPE_REDUCE_H

#include <stdbool.h>

#include "ir/op_ctx.h"

/* The dims a Reduce* node reduces, from its `axes` attribute or (ReduceSum from opset 13, the others
 * from 18) its second input. Empty axes reduce every dim, or none with noop_with_empty_axes=1.
 * *known is false (and mask untouched) when the axes input has no value yet. Fails on an axis out
 * of range or repeated. rank must be >= 0. */
af_status af_reduce_axes(const af_op_ctx *c, int rank, bool mask[AF_MAX_RANK], bool *known);

/* Softmax, LogSoftmax, Hardmax: the normalized `axis`. Before opset 13 the input is seen as 2-D
 * [prod(dims[:axis]), prod(dims[axis:])] (default 1, axis may equal rank); from 13 it is the
 * single axis normalized over (default -1). */
af_status af_reduce_softmax_axis(const af_op_ctx *c, int rank, int *axis);

/* Splits dims around [first, last) into outer * mid * inner element counts. */
void af_reduce_split(const af_tensor *t, int first, int last, int64_t *outer, int64_t *mid, int64_t *inner);

/* Exact three-way comparison of elements i and j of t (any numeric dtype); NaN orders above
 * every number and equal to NaN. */
int af_reduce_cmp(const af_tensor *t, int64_t i, int64_t j);
bool af_reduce_isnan(const af_tensor *t, int64_t i);
/* True for the integer dtypes and bool; false for the floating ones. */
bool af_reduce_is_int(af_dtype dtype);
bool af_reduce_is_unsigned(af_dtype dtype);

#endif
