/*
 * Execution plans for the subgraphs of a graph (Loop and Scan bodies, If branches), so that a
 * body runs fast kernels and fused groups like the top-level graph instead of one reference
 * kernel per node. Built with the top-level plan, at the same fusion level and config; the cost
 * layer plans a subgraph under the temporal strategy (its work repeats per iteration). Bodies
 * have no arena: their values live on the heap until their last reader, as dynamic values do.
 *
 *   af_subplans sp;
 *   af_subplans_build(g, &cfg, isa, n_threads, false, &sp, err);  // cfg->fusion_level 0: unfused
 *   af_subplans_verify(g, &cfg, isa, n_threads, &sp, err);       // with config "verify"
 *   const af_subplan *b = af_subplans_find(&sp, body);            // NULL: run it unplanned
 *   af_subplans_free(&sp);
 */
#ifndef AF_RUNTIME_SUBPLANS_H
#define AF_RUNTIME_SUBPLANS_H

#include "fusion/engine.h"
#include "runtime/memory_plan.h"
#include "runtime/plan.h"

typedef struct af_subplan {
    const af_graph *g;
    const af_node *owner;     /* the If/Loop/Scan node in the enclosing graph */
    af_exec_plan plan;
    af_lifetimes lifetimes;
    af_fusion_result fusion;  /* zeroed when unfused */
} af_subplan;

typedef struct af_subplans {
    int n;
    af_subplan *items;
    size_t workspace_bytes;   /* the largest scratch of any subplan's kernels */
} af_subplans;

/* Plans every subgraph reachable from g's nodes (nested ones too). reference_only: plain
 * reference kernels, unfused (the oracle). On failure nothing is kept and err says why. */
af_status af_subplans_build(const af_graph *g, const af_fusion_config *cfg, af_isa isa, int n_threads,
                            bool reference_only, af_subplans *out, af_error *err);
/* The verify mode (config "verify") for the subplans of g's subgraphs (subplans_verify.c): each
 * runs unfused on inputs built from its enclosing graph's unfused run (g's on seeded inputs), its
 * fused steps are checked against that run, and the groups that differ are backed out of its plan
 * (the plan rebuilt, its lifetimes too). Each subplan's fusion.verify_note says what was checked,
 * or why it was skipped (a subgraph that could not be run keeps its groups unverified). Fails only
 * when out of memory. */
af_status af_subplans_verify(const af_graph *g, const af_fusion_config *cfg, af_isa isa, int n_threads,
                             af_subplans *subs, af_error *err);
const af_subplan *af_subplans_find(const af_subplans *s, const af_graph *g);
void af_subplans_free(af_subplans *s);

#endif
