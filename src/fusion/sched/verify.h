/*
 * The verify mode of layer 3 (config "verify", docs/config.md): checks each fused step of a plan
 * against the unfused ops on the same seeded inputs and rejects the candidates that differ, with
 * the reason "numeric check: ...". The caller rebuilds the plan without them.
 *
 *   af_verify_result r;
 *   af_sched_verify(g, &cands, &plan, &(af_verify_options){.isa = isa, .rtol = 1e-3, .atol = 1e-4}, &r, err);
 *   if (r.n_failed) ... af_sched_build again ...
 */
#ifndef AF_FUSION_SCHED_VERIFY_H
#define AF_FUSION_SCHED_VERIFY_H

#include "fusion/fusion.h"
#include "runtime/plan.h"

typedef struct af_verify_options {
    af_isa isa;
    double rtol, atol;         /* a value passes when |fused - unfused| <= atol + rtol |unfused| */
    const af_limits *limits;   /* for the runs; NULL: the defaults */
} af_verify_options;

typedef struct af_verify_result {
    int n_checked, n_failed;
    char note[256];            /* one line for the report: what was checked, or why it was skipped */
} af_verify_result;

/* Fails only when out of memory; a graph that cannot be verified (dynamic input shapes, a run
 * that fails on the seeded inputs) is left as it is, with the reason in res->note. */
af_status af_sched_verify(const af_graph *g, af_fusion_candidates *cands, const af_exec_plan *fused,
                          const af_verify_options *o, af_verify_result *res, af_error *err);

#endif
