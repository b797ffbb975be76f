/*
 * What Pad's reference and fast kernels share: the mode, the pads of every axis, the constant's
 * bytes, checked against the input and output shapes, and where a padded position reads.
 *
 *   af_ref_pad p;
 *   if ((st = af_ref_pad_setup(ctx, &p))) return st;
 *   int64_t i = af_ref_pad_source(p.mode, o - p.pads[d], x->dims[d]);   // -1: the constant
 */
#ifndef AF_KERNELS_REF_PAD_H
#define AF_KERNELS_REF_PAD_H

#include "ir/shape/movement.h"

typedef struct af_ref_pad {
    af_movement_pad_mode mode;
    int64_t pads[2 * AF_MAX_RANK]; /* before axis i at i, after it at rank + i; negative crops */
    unsigned char value[16];       /* the constant, es bytes */
    size_t es;                     /* element size */
} af_ref_pad;

/* Reads ctx's node and inputs (input 0 and output 0 with their shapes) into *p; fails naming what
 * does not match. */
af_status af_ref_pad_setup(af_op_ctx *c, af_ref_pad *p);
/* Source index along an axis of n elements for padded position i (output index - pad before), or
 * -1 for the constant. n > 0 unless the mode is constant. */
int64_t af_ref_pad_source(af_movement_pad_mode mode, int64_t i, int64_t n);

/* Every axis's source index per output index (af_ref_pad_source), in one allocation the caller
 * frees with af_free: axis[d][o] for d < rank. NULL when out of memory. */
int64_t *af_ref_pad_tables(const af_ref_pad *p, int rank, const int64_t *in_dims, const int64_t *out_dims,
                           const int64_t **axis);

#endif
