/*
 * Attribute and layout rules of the normalization ops, shared by their shape functions and kernels.
 *
 *   int axis;
 *   if (af_norm_ln_axis(ctx, x->rank, &axis) != AF_OK) return ...;  // LayerNormalization's axis
 */
#ifndef AF_IR_SHAPE_NORM_H
#define AF_IR_SHAPE_NORM_H

#include <stdbool.h>

#include "ir/op_ctx.h"

/* BatchNormalization computes batch statistics: training_mode = 1 from opset 14, or any of the
 * optional statistics outputs requested before it. */
bool af_norm_bn_training(const af_op_ctx *c);
/* The number of separate statistics BatchNormalization keeps for X (C, or C x D1..Dn when the
 * pre-opset-9 attribute spatial is 0; 1 for a 1-D X); -1 when unknown. */
int64_t af_norm_bn_channels(const af_op_ctx *c, const af_tensor *x);

/* LayerNormalization's axis normalized against rank, failing via c when out of range. */
af_status af_norm_ln_axis(const af_op_ctx *c, int rank, int *axis);
/* LayerNormalization's stash_type (the dtype of Mean and InvStdDev). */
af_dtype af_norm_ln_stash(const af_op_ctx *c);
/* Checks that p (Scale or B, called name) broadcasts to X's dims from axis on. When map is not
 * NULL (shapes known), fills map[j] with p's element index for element j of the normalized block.
 */
af_status af_norm_ln_param_map(const af_op_ctx *c, const af_tensor *x, int axis, const af_tensor *p,
                               const char *name, int64_t *map);

/* MeanVarianceNormalization: reduced[d] for d < rank says whether its axes attribute (default
 * {0, 2, 3}) names dim d; fails via c on an axis out of range. */
af_status af_norm_mvn_axes(const af_op_ctx *c, int rank, bool *reduced);

/* The family's shape functions; kernels re-run them on the actual inputs to validate. */
af_status af_infer_BATCH_NORMALIZATION(af_op_ctx *ctx);
af_status af_infer_INSTANCE_NORMALIZATION(af_op_ctx *ctx);
af_status af_infer_LAYER_NORMALIZATION(af_op_ctx *ctx);
af_status af_infer_LRN(af_op_ctx *ctx);
af_status af_infer_MEAN_VARIANCE_NORMALIZATION(af_op_ctx *ctx);

#endif
