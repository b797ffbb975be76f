/*
 * The operator enum and its per-op facts, generated from ops.def so that adding an op without its
 * row fails to build.
 *
 *   af_op op = af_op_from_name("Conv");           // AF_OP_UNKNOWN if not in the set
 *   if (af_op_info(op)->cls == AF_OPCLASS_ELEMENTWISE) ...
 */
#ifndef AF_IR_OP_H
#define AF_IR_OP_H

#include "autofusion.h"

typedef enum af_op {
#define AF_OP(e, name, cls) AF_OP_##e,
#include "ir/ops.def"
#undef AF_OP
    AF_OP_COUNT,
    AF_OP_UNKNOWN = AF_OP_COUNT
} af_op;

/* What may fuse with what is decided from these classes (see docs/ARCHITECTURE.md). */
typedef enum af_opclass {
    AF_OPCLASS_ELEMENTWISE,  /* one output element from the same-index input element */
    AF_OPCLASS_BROADCAST,    /* elementwise over broadcast inputs */
    AF_OPCLASS_INJECTIVE,    /* moves or selects data: reshape, transpose, slice, concat */
    AF_OPCLASS_REDUCTION,    /* reduces or normalizes along axes */
    AF_OPCLASS_MANY_TO_MANY, /* conv, gemm, pooling: the anchors */
    AF_OPCLASS_OPAQUE,       /* barriers: shape-dependent, data-dependent, control flow */
} af_opclass;

struct af_op_ctx;
typedef af_status (*af_op_fn)(struct af_op_ctx *ctx);

typedef struct af_op_info_t {
    const char *name;
    af_opclass cls;
    af_op_fn infer; /* dtype and shape of the outputs; see ir/op_ctx.h */
    af_op_fn run;   /* the reference kernel */
} af_op_info_t;

const af_op_info_t *af_op_info(af_op op);
af_op af_op_from_name(const char *name);
const char *af_opclass_name(af_opclass cls);

#endif
