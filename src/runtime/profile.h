/* The perf analyzer's report: per-step times of a profiled session, grouped by what ran. */
#ifndef AF_RUNTIME_PROFILE_H
#define AF_RUNTIME_PROFILE_H

#include <stdio.h>

#include "ir/graph.h"
#include "runtime/plan.h"

/* What a profiled session summed per plan step over its runs. */
typedef struct af_profile_totals {
    const double *ms;      /* wall time */
    const double *idle_ms; /* the thread pool's idle time in it (see af_pool_times) */
    const double *flops;   /* its contractions' flops at each run's shapes */
    int runs, n_threads;
} af_profile_totals;

/* Prints every step (ops, anchor, kernel), then one line per kind of step (an unfused op type, or
 * "fused:RULE") and one per kernel, largest first, each as ms per run, %, the GFLOP/s of its
 * contractions (Conv, ConvTranspose, MatMul, Gemm counted in their direct form at the shapes the
 * runs had, so a Winograd convolution can show more than the FMA peak; "-" where there are none)
 * and, on several threads, the share of the threads' time in it left idle ("-" on one thread). */
void af_profile_write(const af_graph *g, const af_exec_plan *plan, af_profile_totals t, FILE *out);
/* The same per step, as the JSON object af_session_profile_write_json describes. */
void af_profile_write_json(const af_graph *g, const af_exec_plan *plan, af_profile_totals t, FILE *out);

#endif
