/*
 * Byte-moving helpers for the reference data-movement kernels; every dtype goes through them by
 * element size.
 *
 *   int64_t dims[2] = {3, 4}, strides[2] = {1, 3};     // a transposed 4x3 source
 *   af_movement_strided_copy(dst, src, 2, dims, strides, 4);
 */
#ifndef AF_KERNELS_REF_MOVEMENT_H
#define AF_KERNELS_REF_MOVEMENT_H

#include <stddef.h>
#include <stdint.h>

/* The most dims a strided copy takes (Tile and DepthToSpace view each axis as two). */
#define AF_MOVEMENT_MAX_VIEW 16

/* Writes the dense array of shape dims[0..rank) to dst, reading element (i_0, .., i_{rank-1}) at
 * src + sum(i_d * strides[d]) elements; strides may be 0 (broadcast) or negative. */
void af_movement_strided_copy(void *dst, const void *src, int rank, const int64_t *dims,
                              const int64_t *strides, size_t esize);
/* Writes count copies of the esize-byte element at one to dst. */
void af_movement_fill(void *dst, const void *one, size_t esize, int64_t count);
/* Dense row-major strides (in elements) of dims. */
void af_movement_dense_strides(int rank, const int64_t *dims, int64_t *strides);

#endif
