/*
 * Helpers shared by the data-movement shape functions (src/ir/shape/movement.c and friends) and
 * their reference kernels: reading small integer inputs, and the parameters both sides derive from
 * a node (Slice ranges, Pad amounts, Split sizes, Transpose permutations).
 *
 *   int64_t v[AF_MAX_RANK]; int n;
 *   if (!af_movement_known(t)) ...unknown at load time...
 *   st = af_movement_read_ints(ctx, t, "shape", AF_MAX_RANK, v, &n);
 */
#ifndef AF_IR_SHAPE_MOVEMENT_H
#define AF_IR_SHAPE_MOVEMENT_H

#include "ir/op_ctx.h"

/* True when t is present and its values can be read (data set, or no elements at all). */
bool af_movement_known(const af_tensor *t);
/* True for the integer dtypes (not bool). */
bool af_movement_is_int(af_dtype dt);
/* Fails AF_ERR_UNSUPPORTED for dtypes the runtime does not hold (strings, complex). */
af_status af_movement_check_dtype(const af_op_ctx *c, const af_tensor *t, const char *what);
/* Input i, which the op requires, in *x; fails naming it when absent or of an unsupported dtype. */
af_status af_movement_need_input(const af_op_ctx *c, int i, const char *name, const af_tensor **x);
/* Output 0, which the op requires, in *out. */
af_status af_movement_need_output(const af_op_ctx *c, af_tensor **out);
/* Reads a known scalar or 1-D integer tensor of at most max values into out[], *n its length. */
af_status af_movement_read_ints(const af_op_ctx *c, const af_tensor *t, const char *what, int max,
                                int64_t *out, int *n);
/* Length of a 1-D input from its shape alone, -1 when unknown. */
int64_t af_movement_len(const af_tensor *t);
/* Fails AF_ERR_LIMIT when the known dims multiply past int64. */
af_status af_movement_check_numel(const af_op_ctx *c, int rank, const int64_t *dims);
/* Sets out to dtype and rank with every dim unknown (rank -1 leaves the rank unknown). */
void af_movement_unknown(af_tensor *out, af_dtype dtype, int rank);
/* Fails AF_ERR_LIMIT when rank exceeds AF_MAX_RANK. */
af_status af_movement_check_rank(const af_op_ctx *c, int64_t rank);

/* Transpose: perm[i] is the input axis of output axis i. */
af_status af_movement_perm(const af_op_ctx *c, int rank, int *perm);

/* Slice over every axis of the data: output dim i reads start[i] + k * step[i]. len[i] is -1 when
 * the dim is unknown. Fails when starts/ends/axes/steps are inconsistent; the caller checks that
 * they are known (af_movement_slice_known). */
typedef struct af_movement_slice {
    int64_t start[AF_MAX_RANK];
    int64_t step[AF_MAX_RANK];
    int64_t len[AF_MAX_RANK];
} af_movement_slice;
bool af_movement_slice_known(const af_op_ctx *c);
af_status af_movement_slice_params(const af_op_ctx *c, const af_tensor *data, af_movement_slice *p);

/* Pad: pads[i] before and pads[rank + i] after axis i (negative crops). */
typedef enum af_movement_pad_mode {
    AF_MOVEMENT_PAD_CONSTANT,
    AF_MOVEMENT_PAD_REFLECT,
    AF_MOVEMENT_PAD_EDGE,
    AF_MOVEMENT_PAD_WRAP,
} af_movement_pad_mode;
af_status af_movement_pad_mode_of(const af_op_ctx *c, af_movement_pad_mode *mode);
bool af_movement_pad_known(const af_op_ctx *c);
af_status af_movement_pad_params(const af_op_ctx *c, int rank, int64_t *pads);

/* Split along axis (already normalized) of length dim into c->n_outputs parts; sizes[i] of output
 * i. *known is false when the sizes come from an input whose values are not known yet. */
af_status af_movement_split_sizes(const af_op_ctx *c, int64_t dim, int64_t *sizes, bool *known);

/* ScatterElements / ScatterND reduction attribute (opset 16: add, mul; 18: max, min). */
typedef enum af_movement_reduction {
    AF_MOVEMENT_REDUCE_NONE,
    AF_MOVEMENT_REDUCE_ADD,
    AF_MOVEMENT_REDUCE_MUL,
    AF_MOVEMENT_REDUCE_MAX,
    AF_MOVEMENT_REDUCE_MIN,
} af_movement_reduction;
af_status af_movement_reduction_of(const af_op_ctx *c, af_movement_reduction *r);

/* OneHot depth from a known input 1; fails unless it is positive. */
af_status af_movement_onehot_depth(const af_op_ctx *c, int64_t *depth);

#endif
