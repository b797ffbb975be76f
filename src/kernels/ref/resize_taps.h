/*
 * Where Resize reads along one axis: for every output position, the source positions (as element
 * offsets) and their weights, as the ONNX reference maps coordinates (every mode, coordinate
 * transformation, nearest rounding, antialias and exclude_outside). The reference kernel and the
 * fast one both read them, so they sample the same points with the same weights.
 *
 *   af_resize_taps t;
 *   if (af_resize_taps_build(ctx, &params, axis, in_len, out_len, stride, &t) == AF_OK) {
 *       ... output position o: t.count[o] taps, t.off[t.first[o] + j] and t.w[t.first[o] + j] ...
 *   }
 *   af_resize_taps_free(&t);
 */
#ifndef AF_KERNELS_REF_RESIZE_TAPS_H
#define AF_KERNELS_REF_RESIZE_TAPS_H

#include "ir/shape/resize.h"

/* Output position o uses count[o] taps starting at index first[o] of off[] and w[]; count[o] is
 * -1 outside tf_crop_and_resize's crop (the extrapolation value), 0 where every weight is 0. */
typedef struct af_resize_taps {
    int64_t *first;
    int *count;
    int64_t *off; /* source offset: position times stride */
    double *w;
} af_resize_taps;

/* Taps of `axis` (input length in, output length out, stride elements per source step). On
 * failure (out of memory, a filter too wide) ctx carries the error; free t either way. */
af_status af_resize_taps_build(const af_op_ctx *c, const af_resize_params *p, int axis, int64_t in, int64_t out,
                               int64_t stride, af_resize_taps *t);
void af_resize_taps_free(af_resize_taps *t);

#endif
