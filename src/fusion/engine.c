/* The fusion engine: pattern -> cost -> sched, timed, with a report of every decision. */
#include "fusion/engine.h"

#include <string.h>

#include "fusion/cost/cost.h"
#include "fusion/pattern/pattern.h"
#include "fusion/sched/sched.h"
#include "fusion/sched/verify.h"
#include "runtime/weight_release.h"
#include "util/clock.h"
#include "util/error.h"

void af_fusion_result_free(af_fusion_result *res) {
    af_fusion_candidates_free(&res->candidates);
    memset(res, 0, sizeof *res);
}

af_status af_fusion_verify_plan(const af_graph *g, const af_fusion_config *cfg, af_isa isa, int n_threads,
                                int max_rounds, struct af_verify_ref *ref, af_exec_plan *plan, af_fusion_result *res,
                                af_error *err) {
    double t0 = af_now_ms();
    af_verify_options vo = {
        .kernels = af_fusion_kernel_choice(cfg, isa, n_threads), .rtol = cfg->verify_rtol, .atol = cfg->verify_atol};
    af_verify_ref seeded;
    af_status st = AF_OK;
    if (!ref) { /* one reference run serves every round: the unfused values do not change */
        st = af_verify_ref_run(g, NULL, NULL, &vo, &seeded, err);
        ref = &seeded;
    }
    if (st == AF_OK && !ref->ran) snprintf(res->verify_note, sizeof res->verify_note, "verify skipped: %s", ref->note);
    /* Back out the groups whose fused result differs, rebuild, and check the new plan too (a
     * second-chance group may have taken a backed-out group's place). */
    for (int round = 0; st == AF_OK && ref->ran && round < max_rounds; round++) {
        const bool last = round == max_rounds - 1;
        af_verify_result vr;
        if ((st = af_sched_verify_steps(ref, &res->candidates, plan, &vo, &vr, err)) != AF_OK) break;
        res->verify_backed_out += vr.n_failed;
        if (vr.n_failed == 0 || last) {
            /* Each group was checked once before it passed or was backed out. */
            res->verify_checked = res->verify_backed_out + vr.n_checked - vr.n_failed;
            snprintf(res->verify_note, sizeof res->verify_note,
                     "verify: %d fused groups backed out (reason \"numeric check\"); the plan's %d fused groups "
                     "match their unfused ops", res->verify_backed_out, vr.n_checked - vr.n_failed);
        }
        if (vr.n_failed == 0) break;
        /* The rebuild after the last round has no round to check what it adds, so it adds nothing:
         * no candidate is revived in place of a backed-out group. The groups that passed this round
         * stay; each was run on its own against the unfused ops, and the rebuild makes the same
         * steps for them. So every group of the final plan has been checked. */
        af_exec_plan_free(plan);
        af_sched_options o = {.kernels = vo.kernels, .fusion_level = cfg->fusion_level,
                              .no_second_chance = last ? "not tried in its place: the verify rounds ran out" : NULL};
        st = af_sched_build(g, &res->candidates, &o, plan, err);
    }
    if (ref == &seeded) af_verify_ref_free(&seeded);
    if (st != AF_OK) af_exec_plan_free(plan);
    res->verify_ms += af_now_ms() - t0;
    return st;
}

af_status af_fusion_plan(const af_graph *g, const af_fusion_config *cfg, af_isa isa, int n_threads,
                         struct af_weight_release *release, af_exec_plan *plan, af_fusion_result *res,
                         af_error *err) {
    memset(res, 0, sizeof *res);
    res->fusion_level = cfg->fusion_level;
    const af_kernel_choice kernels = af_fusion_kernel_choice(cfg, isa, n_threads);
    if (cfg->fusion_level == 0) return af_exec_plan_unfused(g, &kernels, false, release, plan, err);
    af_rule_set *rules = NULL;
    double t0 = af_now_ms();
    af_status st = af_rules_builtin(&rules, err);
    for (int i = 0; st == AF_OK && i < cfg->n_rule_files; i++) st = af_rules_load_file(rules, cfg->rule_files[i], err);
    if (st == AF_OK) st = af_pattern_find(g, rules, cfg, &res->candidates, err);
    af_rules_free(rules);
    double t1 = af_now_ms();
    res->pattern_ms = t1 - t0;
    if (st == AF_OK) st = af_hw_model_probe(cfg, &res->hw, err);
    if (st == AF_OK) {
        af_hw_model_scale_threads(&res->hw, n_threads > 0 ? n_threads : 1);
        double t2 = af_now_ms();
        res->strategy = af_cost_choose_strategy(g, &res->hw, cfg);
        st = af_cost_evaluate(g, &res->hw, cfg, &res->candidates, err);
        res->cost_ms = af_now_ms() - t2;
    }
    if (st == AF_OK) {
        double t3 = af_now_ms();
        /* Verify runs the unfused ops on the weights and may rebuild: release after its last round. */
        af_sched_options o = {.kernels = kernels, .fusion_level = cfg->fusion_level,
                              .release = cfg->verify ? NULL : release};
        st = af_sched_build(g, &res->candidates, &o, plan, err);
        /* Packing weights is the same work unfused; the pass is what fusion adds on top. */
        res->prepare_ms = st == AF_OK ? plan->prepare_ms : 0;
        res->sched_ms = af_now_ms() - t3 - res->prepare_ms;
    }
    if (st == AF_OK && cfg->verify)
        st = af_fusion_verify_plan(g, cfg, isa, n_threads, AF_VERIFY_MAX_ROUNDS, NULL, plan, res, err);
    for (int i = 0; st == AF_OK && cfg->verify && i < plan->n_steps; i++)
        af_weight_release_step(release, &plan->steps[i]);
    if (st != AF_OK) af_fusion_result_free(res);
    return st;
}

void af_fusion_report_write(const af_graph *g, const af_fusion_result *res, FILE *out) {
    const af_fusion_candidates *cs = &res->candidates;
    int accepted = 0;
    for (int i = 0; i < cs->n; i++) accepted += cs->items[i].accepted;
    fprintf(out, "fusion level %d, strategy %s: %d groups accepted of %d candidates\n", res->fusion_level,
            af_fusion_strategy_name(res->strategy), accepted, cs->n);
    fprintf(out, "hardware: %s, %d cores, %s, %.0f GFLOP/s peak, %.1f GB/s DRAM%s\n", res->hw.cpu_model,
            res->hw.n_cores, af_isa_name(res->hw.isa), res->hw.peak_gflops, res->hw.bandwidth_gbs,
            res->hw.winograd ? "" : "; no Winograd (config)");
    for (int pass = 0; pass < 2; pass++) {
        fprintf(out, pass == 0 ? "\naccepted groups:\n" : "\nrejected candidates:\n");
        for (int i = 0; i < cs->n; i++) {
            const af_fusion_candidate *c = &cs->items[i];
            if (c->accepted != (pass == 0)) continue;
            fprintf(out, "  [%s] rule %s:", af_fusion_family_name(c->family), c->rule);
            for (int k = 0; k < c->n_nodes; k++) {
                const af_node *n = &g->nodes[c->nodes[k]];
                fprintf(out, "%s %s '%s'", k ? " +" : "", n->op_type, n->name);
            }
            fprintf(out, "\n      est. %.1f -> %.1f us, %.1f KiB less traffic, peak %+.1f KiB; %s\n",
                    c->est_time_unfused_us, c->est_time_fused_us, c->bytes_saved / 1024.0, c->peak_delta / 1024.0,
                    c->reason);
        }
    }
    fprintf(out, "\nfusion pass: %.2f ms (pattern %.2f, cost %.2f, schedule %.2f); kernel preparation (weight "
            "packing and freeing the weights packed, also done unfused) %.2f ms\n",
            res->pattern_ms + res->cost_ms + res->sched_ms, res->pattern_ms, res->cost_ms, res->sched_ms,
            res->prepare_ms);
    if (res->verify_note[0]) fprintf(out, "%s (%.1f ms)\n", res->verify_note, res->verify_ms);
}
