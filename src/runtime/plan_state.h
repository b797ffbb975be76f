/*
 * A plan state: everything a run needs from the plan side (the execution plan, its lifetimes and
 * memory plan, the arena, the kernels' workspace, how it was fused), built in one go and shared by
 * reference count. Nothing in it changes once built except what a run writes while it holds the
 * state (the arena, the workspace, the profile totals), and a session lets one run at a time, so a
 * new state can be built beside one that is running and swapped in (src/runtime/plan_slot.h).
 * The last reference frees it.
 *
 *   af_plan_request rq = {.fusion_level = -1, .isa = isa, .n_threads = n, .limits = &limits};
 *   af_plan_state *ps;
 *   af_plan_state_build(g, &rq, &ps, err);   // one reference, the caller's
 *   af_plan_state_retain(ps);                // another holder
 *   af_plan_state_release(ps);               // each holder drops its own; the last one frees
 */
#ifndef AF_RUNTIME_PLAN_STATE_H
#define AF_RUNTIME_PLAN_STATE_H

#include <stdatomic.h>

#include "fusion/engine.h"
#include "runtime/memory_plan.h"
#include "runtime/plan.h"
#include "runtime/subplans.h"

/* What to build. The graph must outlive the state. */
typedef struct af_plan_request {
    const char *config_path;  /* fusion config JSON, NULL: the defaults */
    int fusion_level;         /* -1: the config's; 0-3 overrides it */
    bool reference_kernels;   /* only the reference kernels, unfused (the correctness oracle) */
    af_isa isa;
    int n_threads;            /* the threads the kernels will run on */
    const af_limits *limits;  /* max_activation_bytes caps arena plus workspace */
    af_graph *release_from;   /* NULL, or the graph itself (a session's own model): the build frees
                                 each constant once every reader's kernel holds it packed, so it can
                                 never be built again (runtime/weight_release.h) */
} af_plan_request;

typedef struct af_plan_state {
    atomic_int refs;
    uint64_t id;              /* unique per state built in this process (an address may recur) */
    af_exec_plan plan;
    af_lifetimes lifetimes;
    af_memory_plan memory;
    uint8_t *arena;
    void *workspace;          /* the largest scratch any kernel needs, subplans' included */
    af_fusion_result fusion;  /* how the plan was fused (zeroed when unfused) */
    af_subplans subs;         /* plans of the If/Loop/Scan subgraphs, at the same level */
    double *profile_ms;       /* per step, summed over profile_runs profiled runs */
    double *profile_idle_ms;  /* per step, the same: the thread pool's idle time in it */
    double *profile_flops;    /* per step, the same: its contractions' flops at each run's shapes */
    int profile_runs;
    size_t kept_bytes;        /* allocations the plan kept (live bytes across its build), arena,
                                 workspace and profile excluded */
    size_t kernel_weight_bytes; /* the steps' kernels' weight_bytes */
    double shape_elasticity;  /* the config's: slack of the elastic arena (elastic_arena.h) */
    uint64_t max_mem;         /* the config's resource_constraints.max_mem_usage, 0: none */
    uint64_t max_activation_bytes; /* the session limit the arena and scratch were checked against */
    size_t workspace_bytes;   /* the scratch allocated */
} af_plan_state;

/* Builds a complete state: the plan (fused, or unfused at level 0), its memory plan, checked
 * against limits->max_activation_bytes and the config's resource_constraints.max_mem_usage before
 * the arena is allocated. On failure nothing is allocated and err says why. */
af_status af_plan_state_build(const af_graph *g, const af_plan_request *rq, af_plan_state **out, af_error *err);
void af_plan_state_retain(af_plan_state *ps);
/* Drops one reference; the last frees the state. Accepts NULL. */
void af_plan_state_release(af_plan_state *ps);

#endif
