/*
 * The fusion engine: runs the three layers on one graph and returns the fused execution plan with
 * the verdict on every candidate and the time each layer took.
 *
 *   af_fusion_result res;
 *   af_exec_plan plan;
 *   af_fusion_plan(g, &cfg, isa, n_threads, &plan, &res, err);
 *   af_fusion_report_write(g, &res, stdout);
 *   af_fusion_result_free(&res);
 */
#ifndef AF_FUSION_ENGINE_H
#define AF_FUSION_ENGINE_H

#include <stdio.h>

#include "fusion/config.h"
#include "fusion/cost/hardware.h"
#include "fusion/fusion.h"
#include "runtime/plan.h"

typedef struct af_fusion_result {
    af_fusion_candidates candidates; /* every candidate with its verdict and reason */
    af_hw_model hw;
    af_fusion_strategy strategy;
    int fusion_level;
    double pattern_ms, cost_ms, sched_ms; /* wall time of each layer (sched without kernel preparation) */
    double prepare_ms;                    /* preparing the kernels: packing weights and freeing the raw
                                             ones packed, unfused or fused alike */
    double verify_ms;                     /* the verify mode's runs (config "verify"), 0 when off */
    char verify_note[256];                /* its one-line summary, "" when off */
    int verify_checked, verify_backed_out; /* groups it ran (each once), and of them the ones that differed */
} af_fusion_result;

/* Builds the plan for cfg->fusion_level (0: the unfused plan). On failure nothing is allocated.
 * release: NULL, or frees each packed constant once the final plan's kernels hold it (as steps
 * are built, or after the last verify round when verify rebuilds the plan). */
af_status af_fusion_plan(const af_graph *g, const af_fusion_config *cfg, af_isa isa, int n_threads,
                         struct af_weight_release *release, af_exec_plan *plan, af_fusion_result *res,
                         af_error *err);
void af_fusion_result_free(af_fusion_result *res);

/* The rounds af_fusion_plan's verify mode (config "verify") runs at most. */
#define AF_VERIFY_MAX_ROUNDS 4
/* The verify mode, as af_fusion_plan runs it on the plan it built from res->candidates: check each
 * fused step against its unfused ops, back out the groups that differ, rebuild (a candidate that
 * lost an overlap to a backed-out group may take its place) and check again, at most max_rounds
 * rounds. The rebuild after the last round revives nothing, so every group of the final plan has
 * passed a check (candidate.verified). ref: the unfused run to check against (a subgraph's, run
 * inside its enclosing graph's), or NULL for one on seeded inputs; when it did not run, nothing is
 * checked and the note says why. Fills res->verify_note, verify_checked, verify_backed_out and
 * verify_ms. On failure the plan is freed. Exposed so tests can run out of rounds. */
struct af_verify_ref;
af_status af_fusion_verify_plan(const af_graph *g, const af_fusion_config *cfg, af_isa isa, int n_threads,
                                int max_rounds, struct af_verify_ref *ref, af_exec_plan *plan, af_fusion_result *res,
                                af_error *err);
/* The fusion report: each group with its ops, rule, estimated gain; each rejected candidate with
 * the reason; and the time the fusion pass took. */
void af_fusion_report_write(const af_graph *g, const af_fusion_result *res, FILE *out);

#endif
