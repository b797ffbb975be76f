/*
 * Compiled fusion rules, shared by the rule parser (rules.c), the matcher (match.c) and region
 * discovery (discover.c). Not part of the pattern layer's interface: see pattern.h.
 */
#ifndef AF_FUSION_PATTERN_RULES_INTERNAL_H
#define AF_FUSION_PATTERN_RULES_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "fusion/fusion.h"

#define AF_PAT_MAX_NODES 32 /* pattern nodes per rule */
#define AF_PAT_MAX_EDGES 48
#define AF_PAT_MAX_CONDS 32
#define AF_PAT_MAX_ALTS 16  /* op alternatives per pattern node */
#define AF_PAT_MAX_LIST 8   /* elements of a list literal: [0,2,3,1] */
#define AF_PAT_ID_LEN 24

typedef enum af_pref_kind {
    AF_PREF_OUTPUT, /* output `index` of the node */
    AF_PREF_INPUT,  /* the value read by input `index` of the node (the same value, wherever it comes from) */
} af_pref_kind;

typedef struct af_pref {
    int node;
    af_pref_kind kind;
    int index;
} af_pref;

/* "edge N.K = SRC": input K of pattern node N (K = -1: any input) reads SRC. */
typedef struct af_pedge {
    int node;
    int input;
    af_pref src;
    int line;
} af_pedge;

typedef struct af_pnode {
    char id[AF_PAT_ID_LEN];
    bool optional;
    int n_ops;
    short ops[AF_PAT_MAX_ALTS]; /* af_op values */
    unsigned classes;         /* bit (1 << af_opclass) for each @class alternative */
    int primary;              /* edge giving the pass-through value when the node is absent, or -1 */
    int line;
} af_pnode;

typedef enum af_cond_kind {
    AF_COND_CONST,       /* N.K const: input K is a constant */
    AF_COND_SCALAR,      /* N.K scalar: a constant with one element */
    AF_COND_PER_CHANNEL, /* N.K per_channel: broadcasts along axis 1 of N's output only */
    AF_COND_PER_LAST,    /* N.K per_last: broadcasts along the last axis of N's output only */
    AF_COND_SAME_SHAPE,  /* N.K same_shape: the shape of N's output */
    AF_COND_VALUE,       /* N.K CMP NUM: a constant whose every element compares true */
    AF_COND_SINGLE,      /* N single: N's output has one reader and is not a graph output */
    AF_COND_ATTR,        /* N.attr.NAME CMP LITERAL */
    AF_COND_CLIP_MIN,    /* N.min CMP NUM: Clip's lower bound, attribute or constant input */
    AF_COND_CLIP_MAX,
} af_cond_kind;

typedef enum af_cmp { AF_CMP_EQ, AF_CMP_NE, AF_CMP_LT, AF_CMP_LE, AF_CMP_GT, AF_CMP_GE } af_cmp;

typedef enum af_lit_kind { AF_LIT_NONE, AF_LIT_NUM, AF_LIT_LIST, AF_LIT_STR } af_lit_kind;

typedef struct af_literal {
    af_lit_kind kind;
    double num;
    int n;
    double list[AF_PAT_MAX_LIST];
    char str[AF_PAT_ID_LEN];
} af_literal;

typedef struct af_pcond {
    af_cond_kind kind;
    int node;
    int input;   /* for input conditions */
    bool negate; /* "!const": the predicate must be false */
    af_cmp cmp;
    char attr[AF_PAT_ID_LEN];
    af_literal def; /* attribute default, kind NONE when none was given */
    af_literal value;
    int line;
} af_pcond;

typedef struct af_rule {
    char name[64];
    af_fusion_family family;
    int anchor;
    int n_nodes, n_edges, n_conds;
    af_pnode nodes[AF_PAT_MAX_NODES];
    af_pedge edges[AF_PAT_MAX_EDGES];
    af_pcond conds[AF_PAT_MAX_CONDS];
    int order[AF_PAT_MAX_NODES]; /* search order: the anchor, then breadth-first over the edges */
    char file[128];
    int line;
} af_rule;

struct af_rule_set {
    int n, cap;
    af_rule *rules;
};

/* The texts of the rules/ files, embedded at build time ($(BUILD)/gen/rules_builtin.c). */
extern const char *const af_rules_builtin_names[];
extern const char *const af_rules_builtin_texts[];

/* Per-graph reader index: readers of value v are readers[start[v] .. start[v + 1]), node indices in
 * increasing order, each once. A node whose subgraph captures v counts as a reader. */
typedef struct af_readers {
    int n_values;
    int *start;
    int *readers;
} af_readers;

af_status af_readers_build(const af_graph *g, af_readers *r, af_error *err);
void af_readers_free(af_readers *r);
static inline int af_readers_count(const af_readers *r, int v) {
    return v >= 0 && v < r->n_values ? r->start[v + 1] - r->start[v] : 0;
}

/* Scratch for the legality checks, sized to the graph. */
typedef struct af_legal_scratch {
    int n_nodes;
    uint32_t stamp;
    uint32_t *member;  /* member[i] == stamp: node i is in the set */
    uint32_t *visited; /* visited[i] == stamp: reached by the convexity walk */
    int *stack;
} af_legal_scratch;

af_status af_legal_scratch_init(af_legal_scratch *s, const af_graph *g, af_error *err);
void af_legal_scratch_free(af_legal_scratch *s);

/* Reasons the pattern layer gives (fusion.h's reason field). */
#define AF_PAT_REASON_CYCLE "cycle"
#define AF_PAT_REASON_CLOSED "intermediate used outside the group"
#define AF_PAT_REASON_NEVER "policy never for" /* followed by the family */

/* Checks `nodes` (sorted) as one group with the given output: NULL when legal, else the reason
 * (a cycle first, then an intermediate read outside). Uses the reader index, so the work is bounded
 * by the group's neighbourhood; on graphs of at most AF_PAT_SHARED_CHECK_MAX_NODES nodes fusion.h's
 * af_fusion_is_convex and af_fusion_is_closed confirm it (their scans cover the whole graph). */
const char *af_pattern_legality(const af_graph *g, const af_readers *rd, af_legal_scratch *s, const int *nodes,
                                int n_nodes, int output);

/* Number of values produced by `nodes` that are read outside the set or are graph outputs (stops
 * counting at 2); *exported is set to the first such value, or -1. */
int af_pattern_exports(const af_graph *g, const af_readers *rd, af_legal_scratch *s, const int *nodes,
                       int n_nodes, int *exported);

/* Convexity alone, with the same bounded walk. */
bool af_pattern_convex(const af_graph *g, const af_readers *rd, af_legal_scratch *s, const int *nodes, int n_nodes);

/* Graphs up to this many nodes also get fusion.h's whole-graph checks on every candidate (on
 * bert_base, 422 nodes, they would cost 7 ms of a 7.6 ms pass; the indexed checks agree with them on
 * every candidate of every test model, see tests/unit/test_pattern.c). */
#define AF_PAT_SHARED_CHECK_MAX_NODES 256

struct af_fusion_config;
/* Region discovery (level 3): clusters the nodes the region kernel runs (af_fusion_region_node)
 * into anchor-less regions appended to out (family elementwise_chain, rule "discovery"). The rule
 * matches are out->items[first ..]: nodes an undecided match of another family holds stay out, and
 * a region an undecided elementwise_chain match holds whole is not appended. */
af_status af_pattern_discover(const af_graph *g, const af_readers *rd, af_legal_scratch *s,
                              const struct af_fusion_config *cfg, int first, af_fusion_candidates *out, af_error *err);

#endif
