/*
 * Sliding-window geometry shared by Conv, ConvTranspose and the pools, used by both their shape
 * functions and their reference kernels: attribute parsing, auto_pad resolution, output sizes.
 *
 *   af_conv_geom g;
 *   af_status st = af_conv_geom_init(ctx, n_sp, w_kernel, &g);  // reads and checks attributes
 *   if (st == AF_OK) st = af_conv_geom_forward(ctx, &g, x->dims + 2, y_dims + 2);  // resolves pads
 */
#ifndef AF_IR_SHAPE_CONV_GEOM_H
#define AF_IR_SHAPE_CONV_GEOM_H

#include <stdbool.h>

#include "ir/op_ctx.h"

#define AF_CONV_MAX_SP (AF_MAX_RANK - 2) /* spatial dims after N and C */

typedef enum af_conv_auto_pad {
    AF_CONV_PAD_NOTSET,
    AF_CONV_PAD_SAME_UPPER, /* an odd total pad puts the extra element at the end */
    AF_CONV_PAD_SAME_LOWER, /* ... at the beginning */
    AF_CONV_PAD_VALID,
} af_conv_auto_pad;

typedef struct af_conv_geom {
    int n_sp; /* spatial dims */
    af_conv_auto_pad auto_pad;
    bool ceil_mode;                 /* pools: round output sizes up */
    int64_t kernel[AF_CONV_MAX_SP]; /* -1 while W's shape is unknown */
    int64_t stride[AF_CONV_MAX_SP];
    int64_t dilation[AF_CONV_MAX_SP];
    int64_t pad_begin[AF_CONV_MAX_SP]; /* attribute pads; the size functions overwrite them when */
    int64_t pad_end[AF_CONV_MAX_SP];   /* auto_pad or output_shape decides the padding */
    int64_t out_pad[AF_CONV_MAX_SP];   /* ConvTranspose output_padding */
    int n_out_shape;                   /* ConvTranspose output_shape: 0 when absent */
    int64_t out_shape[AF_CONV_MAX_SP]; /* its spatial part */
} af_conv_geom;

/* The dtypes the conv, pool and normalization ops compute in (through double in the reference). */
static inline bool af_conv_is_float(af_dtype t) {
    return t == AF_DTYPE_FLOAT || t == AF_DTYPE_DOUBLE || t == AF_DTYPE_FLOAT16 ||
           t == AF_DTYPE_BFLOAT16;
}

/* Reads kernel_shape, strides, dilations, pads, auto_pad, ceil_mode, output_padding and
 * output_shape, checking their lengths and values. w_kernel is W's spatial dims (entries -1 where
 * unknown) for Conv/ConvTranspose, or NULL for pools, which then require kernel_shape. */
af_status af_conv_geom_init(const af_op_ctx *c, int n_sp, const int64_t *w_kernel, af_conv_geom *g);
/* Output sizes of a forward window (Conv, pools) over input sizes `in`; resolves the pads. Entries
 * of `in` that are -1 give -1. Fails when the window does not fit the padded input. */
af_status af_conv_geom_forward(const af_op_ctx *c, af_conv_geom *g, const int64_t *in,
                               int64_t *out);
/* The same for ConvTranspose. */
af_status af_conv_geom_transpose(const af_op_ctx *c, af_conv_geom *g, const int64_t *in,
                                 int64_t *out);
/* Along one axis of a forward window (stride s, dilation d, leading pad pb, s >= 1): the output
 * positions [*o0, *o1) of [0, out) at which kernel tap t reads inside an input of `in` positions
 * (input position o s - pb + t d, monotone in o, so they are one run); empty: *o0 == *o1. */
void af_conv_tap_outputs(int64_t in, int64_t out, int64_t s, int64_t d, int64_t pb, int64_t t, int64_t *o0,
                         int64_t *o1);

/* Shape functions of the family; kernels re-run them on the actual inputs to validate. */
af_status af_infer_CONV(af_op_ctx *ctx);
af_status af_infer_CONV_TRANSPOSE(af_op_ctx *ctx);
af_status af_infer_MAX_POOL(af_op_ctx *ctx);
af_status af_infer_AVERAGE_POOL(af_op_ctx *ctx);
af_status af_infer_GLOBAL_MAX_POOL(af_op_ctx *ctx);
af_status af_infer_GLOBAL_AVERAGE_POOL(af_op_ctx *ctx);

#endif
