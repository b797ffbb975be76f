/*
 * Runs a graph node by node with the reference kernels. Each node's output shapes are inferred
 * from the actual inputs just before it runs, so dynamic shapes work; values the memory plan sized
 * live in the arena, the rest on the heap until their last use.
 *
 *   af_exec e;
 *   af_exec_init(&e, g, NULL, plan, arena, last_use);   // plan/arena may be NULL
 *   e.env[g->inputs[0]] = input_view;                  // bind inputs (views, not owned)
 *   af_exec_run(&e, err);                               // outputs in e.env[g->outputs[i]]
 *   af_exec_release(&e);
 */
#ifndef AF_RUNTIME_EXECUTOR_H
#define AF_RUNTIME_EXECUTOR_H

#include "ir/graph.h"
#include "runtime/memory_plan.h"

typedef struct af_exec {
    const af_graph *g;
    struct af_exec *parent; /* the running graph a subgraph reads captured values from */
    af_tensor *env;         /* per value: the tensor it holds while running */
    bool *owned;            /* per value: env data is heap memory this exec frees */
    const af_memory_plan *plan;
    uint8_t *arena;
    const int *last_use;    /* per value, see af_graph_last_uses; NULL: free at the end */
    int *own_last_use;      /* computed when the caller passes none */
} af_exec;

af_status af_exec_init(af_exec *e, const af_graph *g, af_exec *parent, const af_memory_plan *plan, uint8_t *arena,
                       const int *last_use, af_error *err);
/* Runs every node. Graph outputs end up owned by the exec (take them with af_exec_take). */
af_status af_exec_run(af_exec *e, af_error *err);
/* Moves value v's tensor out into *out (a copy if the exec does not own it); out->data is the caller's. */
af_status af_exec_take(af_exec *e, int v, af_tensor *out, af_error *err);
void af_exec_release(af_exec *e);

#endif
