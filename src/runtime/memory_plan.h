/*
 * Activation memory plan: every intermediate value with a static size gets an offset in one arena,
 * chosen from its lifetime (producing node .. last reading node) so that values alive at the same
 * time never overlap. Graph inputs, outputs and constants are not in the arena.
 *
 *   af_memory_plan plan;
 *   af_memory_plan_build(g, last_use, &plan, err);   // plan.offset[v] < 0: not planned
 *   ... arena = af_malloc_aligned(plan.arena_bytes) ...
 *   af_memory_plan_free(&plan);
 */
#ifndef AF_RUNTIME_MEMORY_PLAN_H
#define AF_RUNTIME_MEMORY_PLAN_H

#include "ir/graph.h"

typedef struct af_memory_plan {
    int n_values;
    int64_t *offset;     /* per value: byte offset in the arena, or -1 */
    size_t *size;        /* per value: planned bytes (64-byte rounded), 0 if not planned */
    size_t arena_bytes;  /* the arena's size: the plan's peak */
    size_t live_bound;   /* max over steps of the bytes live at once: no plan can do better */
} af_memory_plan;

/* last_use[v]: index of the last node reading v (n_nodes for graph outputs, -1 if never read). */
af_status af_memory_plan_build(const af_graph *g, const int *last_use, af_memory_plan *plan, af_error *err);
void af_memory_plan_free(af_memory_plan *plan);

/* Fills last_use (n_values entries) for g, counting reads made by subgraphs of a node. */
void af_graph_last_uses(const af_graph *g, int *last_use);

#endif
