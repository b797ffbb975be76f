/* The perf analyzer's report: per-step times of a profiled session, grouped by what ran. */
#ifndef AF_RUNTIME_PROFILE_H
#define AF_RUNTIME_PROFILE_H

#include <stdio.h>

#include "ir/graph.h"
#include "runtime/plan.h"

/* step_ms: total wall time per plan step over runs runs; step_idle_ms: the thread pool's idle time
 * in each (see af_pool_times), over n_threads threads. Prints every step (ops, anchor, kernel),
 * then one line per kind of step (an unfused op type, or "fused:RULE") and one per kernel, largest
 * first, each as ms per run, %, the GFLOP/s of its contractions (Conv, ConvTranspose, MatMul, Gemm
 * counted in their direct form, so a Winograd convolution can show more than the FMA peak; "-"
 * where there are none or their shapes are known only at run time) and, on several threads, the
 * share of the threads' time in it left idle ("-" on one thread). */
void af_profile_write(const af_graph *g, const af_exec_plan *plan, const double *step_ms, const double *step_idle_ms,
                      int n_threads, int runs, FILE *out);
/* The same per step, as the JSON object af_session_profile_write_json describes. */
void af_profile_write_json(const af_graph *g, const af_exec_plan *plan, const double *step_ms,
                           const double *step_idle_ms, int n_threads, int runs, FILE *out);

#endif
