/*
 * A numpy-style broadcasting index iterator: walks an output shape in row-major order and keeps, for
 * each of up to AF_BCAST_MAX_INPUTS inputs, the flat element offset that feeds the current output
 * element (a stride of 0 on every broadcast dim).
 *
 *   af_bcast_iter it;
 *   const af_tensor *in[2] = {a, b};
 *   if (!af_bcast_init(&it, out->rank, out->dims, 2, in)) return ...;  // shapes do not broadcast
 *   for (int64_t i = 0; i < it.numel; i++, af_bcast_next(&it))
 *       y[i] = pa[it.offset[0]] + pb[it.offset[1]];
 */
#ifndef AF_KERNELS_REF_BROADCAST_H
#define AF_KERNELS_REF_BROADCAST_H

#include <stdbool.h>
#include <stdint.h>

#include "autofusion.h"

#define AF_BCAST_MAX_INPUTS 8

typedef struct af_bcast_iter {
    int n_inputs;
    int rank;                                       /* of the output */
    int64_t dims[AF_MAX_RANK];                      /* output shape */
    int64_t strides[AF_BCAST_MAX_INPUTS][AF_MAX_RANK]; /* elements per output-dim step, 0 if broadcast */
    int64_t index[AF_MAX_RANK];                     /* multi-index of the current output element */
    int64_t offset[AF_BCAST_MAX_INPUTS];            /* flat element offset of each input */
    int64_t numel;                                  /* output elements; 0 for an empty output */
} af_bcast_iter;

/* Sets up iteration over the output shape (rank, dims). Each input (NULL entries are not allowed)
 * must broadcast to it: its rank at most `rank` and each of its dims, right-aligned, equal to the
 * output's or 1. Returns false when that fails or n_inputs is out of 1..AF_BCAST_MAX_INPUTS, so a
 * kernel handed mismatched shapes cannot read out of bounds. */
bool af_bcast_init(af_bcast_iter *it, int rank, const int64_t *dims, int n_inputs,
                   const af_tensor *const *inputs);

/* Moves to the next output element in row-major order (a no-op past the end). */
static inline void af_bcast_next(af_bcast_iter *it) {
    for (int d = it->rank - 1; d >= 0; d--) {
        for (int k = 0; k < it->n_inputs; k++) it->offset[k] += it->strides[k][d];
        if (++it->index[d] < it->dims[d]) return;
        for (int k = 0; k < it->n_inputs; k++) it->offset[k] -= it->strides[k][d] * it->dims[d];
        it->index[d] = 0;
    }
}

#endif
