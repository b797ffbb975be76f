/*
 * Resize (opsets 10-18) as both its shape function and its reference kernel read it: attributes,
 * per-axis scales, output sizes and the region of interest.
 *
 *   af_resize_params p;
 *   bool known;
 *   if (af_resize_params_of(ctx, x, &p, &known) == AF_OK && known) ...p.out_dims, p.scale...
 */
#ifndef AF_IR_SHAPE_RESIZE_H
#define AF_IR_SHAPE_RESIZE_H

#include "ir/op_ctx.h"

typedef enum af_resize_mode { AF_RESIZE_NEAREST, AF_RESIZE_LINEAR, AF_RESIZE_CUBIC } af_resize_mode;

typedef enum af_resize_coord {
    AF_RESIZE_HALF_PIXEL,
    AF_RESIZE_HALF_PIXEL_SYMMETRIC,
    AF_RESIZE_PYTORCH_HALF_PIXEL,
    AF_RESIZE_ALIGN_CORNERS,
    AF_RESIZE_ASYMMETRIC,
    AF_RESIZE_TF_HALF_PIXEL_FOR_NN,
    AF_RESIZE_TF_CROP_AND_RESIZE,
} af_resize_coord;

typedef enum af_resize_nearest {
    AF_RESIZE_ROUND_PREFER_FLOOR,
    AF_RESIZE_ROUND_PREFER_CEIL,
    AF_RESIZE_FLOOR,
    AF_RESIZE_CEIL,
} af_resize_nearest;

typedef struct af_resize_params {
    af_resize_mode mode;
    af_resize_coord coord;
    af_resize_nearest nearest;
    double cubic_a;
    bool exclude_outside;
    bool antialias;
    double extrapolation;
    int rank;
    int64_t out_dims[AF_MAX_RANK]; /* -1 where unknown */
    double scale[AF_MAX_RANK];     /* output / input per axis */
    double roi_start[AF_MAX_RANK]; /* tf_crop_and_resize only, normalized coordinates */
    double roi_end[AF_MAX_RANK];
} af_resize_params;

/* Reads the attributes and, when the scales or sizes are known, the output shape and scales of
 * data x (rank known). *known is false when they are not known yet (out_dims stay -1). */
af_status af_resize_params_of(const af_op_ctx *c, const af_tensor *x, af_resize_params *p, bool *known);

#endif
