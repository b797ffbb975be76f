/*
 * Runs a graph step by step. Each node's output shapes are inferred from the actual inputs just
 * before its step runs, so dynamic shapes work; values the memory plan sized live in the arena,
 * the rest on the heap until their last reader.
 *
 *   af_exec e;
 *   af_exec_init(&e, g, NULL, err);
 *   e.plan = &plan; e.lifetimes = &lt; e.memory = &mp; e.arena = arena;   // all optional
 *   e.pool = pool; e.workspace = ws;
 *   e.env[g->inputs[0]] = input_view;       // bind inputs (views, not owned)
 *   af_exec_run(&e, err);                    // outputs in e.env[g->outputs[i]]
 *   af_exec_release(&e);
 *
 * Without a plan every node runs its reference kernel. A subgraph (If/Loop body) runs its plan
 * from `subplans` when there is one, on the parent's pool and workspace.
 */
#ifndef AF_RUNTIME_EXECUTOR_H
#define AF_RUNTIME_EXECUTOR_H

#include "ir/graph.h"
#include "runtime/memory_plan.h"
#include "runtime/plan.h"
#include "util/threadpool.h"
#include "runtime/subplans.h"

typedef struct af_exec {
    const af_graph *g;
    struct af_exec *parent;     /* the running graph a subgraph reads captured values from */
    af_tensor *env;             /* per value: the tensor it holds while running */
    bool *owned;                /* per value: env data is heap memory this exec frees */
    const af_exec_plan *plan;   /* NULL: one reference step per node */
    const af_subplans *subplans; /* plans for subgraphs, or NULL; subgraph execs inherit it */
    const af_lifetimes *lifetimes; /* for plan; NULL: heap values live to the end of the run */
    const af_memory_plan *memory;  /* arena offsets, or NULL */
    uint8_t *arena;
    af_threadpool *pool;        /* for fast kernels; NULL runs them on the caller */
    void *workspace;            /* scratch shared by the fast kernels, one step at a time */
    const af_limits *limits;    /* max_tensor_bytes per allocation, max_loop_iterations; NULL: the
                                   defaults. Subgraph execs inherit their parent's. */
    const af_node *running;     /* the node whose kernel is running (If/Loop call back into us) */
    int64_t loop_iterations;    /* bodies the running Loop node has run */
    double *step_ms;            /* per plan step: wall time added each run (profiling), or NULL */
    double *step_idle_ms;       /* per plan step, with step_ms: the pool's threads' idle time, or NULL */
    double *step_flops;         /* per plan step, with step_ms: its contractions' flops at this run's
                                   shapes (af_node_flops_of), or NULL */
    const af_pool_times *pool_times; /* the sink this thread's pool jobs add to (set by the caller
                                        with af_threadpool_time_into), for step_idle_ms */
    size_t *observed;           /* per value, or NULL: the most bytes each dynamic arena candidate
                                   took this run (runtime/elastic_arena.h) */
    bool *outgrown;             /* set when such a value found no slot in memory's plan */
    af_tensor *spare_outputs;   /* per graph output i, or NULL: the caller's heap buffer from an
                                   earlier run, which the output may reuse (then its entry's data
                                   is set to NULL: the exec owns it) instead of a fresh allocation */
} af_exec;

af_status af_exec_init(af_exec *e, const af_graph *g, af_exec *parent, af_error *err);
/* Runs every step. Graph outputs end up owned by the exec (take them with af_exec_take). */
af_status af_exec_run(af_exec *e, af_error *err);
/* Moves value v's tensor out into *out (a copy if the exec does not own it); out->data is the caller's. */
af_status af_exec_take(af_exec *e, int v, af_tensor *out, af_error *err);
void af_exec_release(af_exec *e);

#endif
