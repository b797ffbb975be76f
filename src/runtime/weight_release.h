/*
 * Dropping a model's weights while its plan is built, for sessions that own their model: a
 * constant's data is freed as soon as every node that reads it has been built into a kernel that
 * holds its own packed copy, so the originals and the packed copies are never all in memory at
 * once (BERT-base: about 1.8x its weights otherwise, at the peak).
 *
 *   af_weight_release wr;
 *   af_weight_release_init(graph, &wr, err);
 *   ... for each step once it is final (no later rebuild): af_weight_release_step(&wr, &step);
 *   af_weight_release_free(&wr);
 *
 * The rule is the one the kernels state through packed_inputs: only the anchor's own kernel keeps
 * packed copies; a fused group's other nodes, kernels that read a constant in place, subgraphs and
 * graph outputs keep the data. Constants a step copied when it was built (af_step.held: folded
 * BatchNorm statistics, the squeeze-excite weights) count too, for every read by its nodes.
 */
#ifndef AF_RUNTIME_WEIGHT_RELEASE_H
#define AF_RUNTIME_WEIGHT_RELEASE_H

#include "ir/graph.h"
#include "runtime/plan.h"

typedef struct af_weight_release {
    af_graph *g;       /* the graph whose constants are freed: the session's own model */
    int *readers_left; /* per value: reads still to be built into a packing kernel; -1: kept */
    size_t freed_bytes; /* what the frees gave back, so a build can still say what it kept */
} af_weight_release;

af_status af_weight_release_init(af_graph *g, af_weight_release *wr, af_error *err);
/* Counts step s's packed and held reads; frees the constants whose last reader this was. */
void af_weight_release_step(af_weight_release *wr, const af_step *s);
void af_weight_release_free(af_weight_release *wr);

#endif
