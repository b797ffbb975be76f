/* The rule set's layout, shared by the parser (rules.c) and the matcher (match.c). */
#ifndef AF_FUSION_PATTERN_INTERNAL_H
#define AF_FUSION_PATTERN_INTERNAL_H

#include "fusion/pattern/pattern.h"

#define AF_MAX_RULES 64

typedef struct af_op_set {
    bool ops[AF_OP_COUNT];
    unsigned classes; /* bit per af_opclass */
} af_op_set;

typedef enum { AF_STRUCTURE_NONE, AF_STRUCTURE_ATTENTION } af_structure;

typedef struct af_rule {
    char name[48];
    af_fusion_family family;
    af_op_set anchor;
    af_op_set tail;      /* ops the group may grow through from the anchor's output */
    bool residual;       /* a tail Add may read one tensor from outside the group */
    int max_nodes;
    af_structure structure; /* a fixed structure collected around the anchor instead of a tail */
} af_rule;

struct af_rule_set {
    int n;
    af_rule rules[AF_MAX_RULES];
};

static inline bool af_op_set_has(const af_op_set *s, af_op op) {
    const af_op_info_t *info = af_op_info(op);
    return info && (s->ops[op] || (s->classes >> info->cls & 1u));
}

#endif
