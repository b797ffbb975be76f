/*
 * The verify mode of layer 3 (config "verify", docs/config.md): checks each fused step of a plan
 * against the unfused ops on the same inputs and rejects the candidates that differ, with the
 * reason "numeric check: ...". The caller rebuilds the plan without them.
 *
 * The unfused ops run first, over the whole graph, keeping every value (a reference run); each
 * fused step then runs alone on those values. A top-level graph runs on seeded inputs; a
 * subgraph on inputs its caller builds, reading its captured values from the reference run of
 * the graph that encloses it (src/runtime/subplans_verify.c).
 *
 *   af_verify_ref ref;
 *   af_verify_ref_run(g, NULL, NULL, &o, &ref, err);     // seeded inputs, no enclosing graph
 *   if (ref.ran) af_sched_verify_steps(&ref, &cands, &plan, &o, &r, err);
 *   af_verify_ref_free(&ref);
 *   if (r.n_failed) ... af_sched_build again ...
 */
#ifndef AF_FUSION_SCHED_VERIFY_H
#define AF_FUSION_SCHED_VERIFY_H

#include "fusion/fusion.h"
#include "runtime/executor.h"
#include "runtime/plan.h"

typedef struct af_verify_options {
    af_kernel_choice kernels;  /* the plan's; the unfused run takes them on one thread */
    double rtol, atol;         /* a value passes when |fused - unfused| <= atol + rtol |unfused| */
    const af_limits *limits;   /* for the runs; NULL: the defaults */
} af_verify_options;

typedef struct af_verify_result {
    int n_checked, n_failed;
    char note[256];            /* one line for the report: what was checked, or why it was skipped */
} af_verify_result;

/* An unfused run of a graph that kept every value. */
typedef struct af_verify_ref {
    af_exec run;               /* run.env: every value of run.g (when ran) */
    af_tensor *seeded;         /* the seeded inputs, owned; NULL when the caller gave the inputs */
    int n_seeded;
    bool ran;
    char note[200];            /* when not ran: why ("input 'x' has no static shape ...") */
} af_verify_ref;

/* Runs g unfused, keeping every value. inputs: one per graph input, views that must outlive ref,
 * or NULL for seeded ones (floats uniform in [-1, 1), other types zeros; static shapes only).
 * parent: the reference run of the graph enclosing g, which g's captured values are read from;
 * NULL for a top-level graph. Fails only when out of memory; a graph that cannot run there
 * leaves ref->ran false with the reason in ref->note. Free ref with af_verify_ref_free in every
 * case; a parent must outlive its children. */
af_status af_verify_ref_run(const af_graph *g, const af_tensor *inputs, af_verify_ref *parent,
                            const af_verify_options *o, af_verify_ref *ref, af_error *err);
void af_verify_ref_free(af_verify_ref *ref);

/* Checks each fused step of `fused` (a plan of ref's graph) against ref, which ran; marks the
 * candidates verified, or rejected with the reason. Fails only when out of memory. */
af_status af_sched_verify_steps(const af_verify_ref *ref, af_fusion_candidates *cands, const af_exec_plan *fused,
                                const af_verify_options *o, af_verify_result *res, af_error *err);

/* Both in one go, on seeded inputs. Fails only when out of memory; a graph that cannot be
 * verified (dynamic input shapes, a run that fails on the seeded inputs) is left as it is, with
 * the reason in res->note. */
af_status af_sched_verify(const af_graph *g, af_fusion_candidates *cands, const af_exec_plan *fused,
                          const af_verify_options *o, af_verify_result *res, af_error *err);

#endif
