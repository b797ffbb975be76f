#include "ir/op.h"

#include <string.h>

#include "ir/op_ctx.h"

/* Declarations of every op's shape function and reference kernel: an op listed in ops.def without
 * both fails to link. */
#define AF_OP(e, name, cls)                                                                        \
    af_status af_infer_##e(af_op_ctx *ctx);                                                        \
    af_status af_ref_##e(af_op_ctx *ctx);
#include "ir/ops.def"
#undef AF_OP

static const af_op_info_t op_table[] = {
#define AF_OP(e, name, cls) [AF_OP_##e] = {name, AF_OPCLASS_##cls, af_infer_##e, af_ref_##e},
#include "ir/ops.def"
#undef AF_OP
};
_Static_assert(sizeof op_table / sizeof op_table[0] == AF_OP_COUNT, "one row per op");

const af_op_info_t *af_op_info(af_op op) { return (unsigned)op < AF_OP_COUNT ? &op_table[op] : NULL; }

af_op af_op_from_name(const char *name) {
    for (int i = 0; i < AF_OP_COUNT; i++)
        if (strcmp(op_table[i].name, name) == 0) return (af_op)i;
    return AF_OP_UNKNOWN;
}

const char *af_opclass_name(af_opclass cls) {
    static const char *const names[] = {"elementwise", "broadcast",    "injective",
                                        "reduction",   "many-to-many", "opaque"};
    return (unsigned)cls < sizeof names / sizeof names[0] ? names[cls] : "unknown";
}
