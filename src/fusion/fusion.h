/*
 * The plain data the three fusion layers exchange (see docs/ARCHITECTURE.md):
 *   pattern (src/fusion/pattern/) finds candidate groups in a graph,
 *   cost    (src/fusion/cost/)    scores them on this hardware and accepts or rejects each,
 *   sched   (src/fusion/sched/)   turns the accepted ones into an execution plan.
 * No layer calls another's functions; each reads and writes these structures.
 *
 *   af_fusion_candidates cands = {0};
 *   af_pattern_find(graph, &rules, &config, &cands, err);     // layer 1
 *   af_cost_evaluate(graph, &hw, &config, &cands, err);       // layer 2: sets score, accepted
 *   af_sched_build(graph, &cands, ..., &plan, err);           // layer 3
 *   af_fusion_candidates_free(&cands);
 */
#ifndef AF_FUSION_FUSION_H
#define AF_FUSION_FUSION_H

#include <stdbool.h>

#include "ir/graph.h"

#define AF_FUSION_MAX_NODES 64 /* nodes in one group; also bounded by config max_fused_ops */
/* A node reading more values than this joins no group: no fused kernel takes that many, and every
 * candidate holding it would cost the later layers work in proportion to its inputs. */
#define AF_FUSION_MAX_NODE_INPUTS 16

/* Pattern families: the config's fusion_policy keys. */
#define AF_FUSION_FAMILIES(X)                                                                      \
    X(CONV_BN_RELU, "conv_bn_relu")         /* Conv (+BatchNormalization) (+activation) */         \
    X(CONV_RESIDUAL, "conv_residual")       /* Conv (+BN) + Add of another tensor (+activation) */ \
    X(SQUEEZE_EXCITE, "squeeze_excite")     /* GAP -> Conv -> act -> Conv -> HardSigmoid -> Mul */ \
    X(POINTWISE_DEPTHWISE, "pointwise_depthwise") /* 1x1 Conv (+BN)(+act) -> depthwise (+BN)(+act) */ \
    X(MATMUL_ADD, "matmul_add")             /* MatMul/Gemm + bias (+GELU/act) (+residual) */       \
    X(LAYERNORM, "layernorm")               /* (residual Add +) LayerNorm, also decomposed */      \
    X(ATTENTION, "attention_blocks")        /* QK^T, scale, mask, Softmax, .V with head layout */  \
    X(ELEMENTWISE, "elementwise_chain")     /* anchor-less elementwise/broadcast regions */

typedef enum af_fusion_family {
#define AF_FAMILY_ENUM(e, name) AF_FUSION_##e,
    AF_FUSION_FAMILIES(AF_FAMILY_ENUM)
#undef AF_FAMILY_ENUM
    AF_FUSION_FAMILY_COUNT
} af_fusion_family;

const char *af_fusion_family_name(af_fusion_family f);
/* -1 when `name` is not a family. */
int af_fusion_family_parse(const char *name);

typedef struct af_fusion_candidate {
    af_fusion_family family;
    char rule[64];   /* the rule that matched, or "discovery" for region discovery */
    int anchor;      /* node index of the anchor op (Conv, MatMul, Softmax...), -1 if none */
    int n_nodes;
    int nodes[AF_FUSION_MAX_NODES]; /* node indices, in topological order */
    int output;      /* the value id the group produces for the rest of the graph */
    /* Set by the cost layer: */
    double est_time_unfused_us, est_time_fused_us; /* latency estimates */
    double bytes_saved;    /* memory traffic between kernels that fusion removes */
    double peak_delta;     /* change of peak activation bytes (negative: saves) */
    double energy_saved_uj;
    double score;          /* weighted combination; > 0 means profitable */
    double gain;           /* the same over the whole model's totals: what decides overlaps */
    bool accepted;
    bool verified;         /* set by the verify mode (config "verify") when the group's fused step matched
                              its unfused ops; false when never checked or when it differed */
    char reason[160];      /* why rejected (cycle, policy, no_fusion_ops, max_fused_ops, cost, memory,
                              numeric check, overlap), or how accepted */
} af_fusion_candidate;

typedef struct af_fusion_candidates {
    int n, cap;
    af_fusion_candidate *items;
} af_fusion_candidates;

/* Appends a copy of c; AF_ERR_OUT_OF_MEMORY on failure. */
af_status af_fusion_candidates_push(af_fusion_candidates *cs, const af_fusion_candidate *c, af_error *err);
void af_fusion_candidates_free(af_fusion_candidates *cs);

/* True when merging `nodes` into one step keeps the graph acyclic: no path leaves the set and
 * re-enters it (the convexity check). Bounded: O(nodes + edges reachable between them). */
bool af_fusion_is_convex(const af_graph *g, const int *nodes, int n_nodes);
/* True when every value produced inside the set, except `output`, is read only inside it (so
 * intermediates need never reach memory) and is not a graph output. */
bool af_fusion_is_closed(const af_graph *g, const int *nodes, int n_nodes, int output);
/* True when node n can be one instruction of the fused elementwise region kernel
 * (src/kernels/fast/region.h), which evaluates it per element of the group output's index space:
 * an elementwise or broadcast op with a reference kernel (not BatchNormalization, which is per
 * channel), at most AF_REGION_MAX_ARGS inputs, one output, of an element type of 1 to 8 bytes.
 * Region discovery admits exactly these nodes and the region step builder checks them again. When
 * false and why is not NULL, why says which condition failed. */
bool af_fusion_region_node(const af_graph *g, const af_node *n, char *why, size_t why_size);

#endif
