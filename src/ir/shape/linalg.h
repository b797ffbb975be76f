/*
 * Einsum equations parsed into per-dim labels, shared by the Einsum shape function and its kernel.
 *
 *   af_linalg_einsum e;
 *   if (af_linalg_einsum_parse(ctx, &e) != AF_OK) return ...;   // fails naming the cause
 *   if (e.known) ... e.out_rank, e.size[e.out_label[d]] ...
 */
#ifndef AF_IR_SHAPE_LINALG_H
#define AF_IR_SHAPE_LINALG_H

#include <stdbool.h>

#include "ir/op_ctx.h"

#define AF_LINALG_EINSUM_MAX_INPUTS 16
#define AF_LINALG_EINSUM_LETTERS 52 /* label ids 0-25 'A'-'Z', 26-51 'a'-'z' (ASCII order) */
#define AF_LINALG_EINSUM_MAX_LABELS (AF_LINALG_EINSUM_LETTERS + AF_MAX_RANK)

typedef struct af_linalg_einsum {
    bool known;   /* false when an input rank is unknown: only the syntax was checked */
    int n_inputs;
    int n_labels; /* ids from 0 to n_labels-1; ellipsis dims are 52.. (right-aligned, broadcast) */
    int64_t size[AF_LINALG_EINSUM_MAX_LABELS]; /* -2 when the label is unused, -1 when unknown */
    int rank[AF_LINALG_EINSUM_MAX_INPUTS];
    int label[AF_LINALG_EINSUM_MAX_INPUTS][AF_MAX_RANK]; /* label of each input dim */
    int out_rank;
    int out_label[AF_MAX_RANK];
} af_linalg_einsum;

/* Parses the node's `equation` against its input shapes: explicit ("ij,jk->ik") or implicit output
 * (labels seen once, in ASCII order, after the ellipsis dims). Labels repeated in one input take
 * its diagonal; labels missing from the output are summed. Sizes of one label must agree, where a
 * size of 1 broadcasts. */
af_status af_linalg_einsum_parse(const af_op_ctx *c, af_linalg_einsum *e);

#endif
