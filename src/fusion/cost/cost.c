/* Layer 2 decisions: fusion_level gating, legality, per-family policy, strategy, and overlap
 * resolution over the candidate list (rules in docs/cost_model.md). */
#include "fusion/cost/cost.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/alloc.h"
#include "util/error.h"

/* ---- strategy ------------------------------------------------------------------------------- */

/* Loops, and the recurrent layers whose steps repeat inside one node (RNN, GRU, LSTM). */
static bool has_recurrence(const af_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const af_op op = g->nodes[i].op;
        if (op == AF_OP_LOOP || op == AF_OP_RNN || op == AF_OP_GRU || op == AF_OP_LSTM ||
            !strcmp(g->nodes[i].op_type, "Scan"))
            return true;
    }
    return false;
}

static af_fusion_strategy choose(const af_cost_graph *cg, const af_hw_model *hw, const af_fusion_config *cfg) {
    if (cfg->strategy > AF_STRATEGY_AUTO && cfg->strategy < AF_STRATEGY_COUNT) return cfg->strategy;
    double weights, acts;
    af_cost_footprint(cg, &weights, &acts);
    const double footprint = weights + acts;
    if (hw->mem_available && footprint > AF_COST_AUTO_MEM_FRACTION * (double)hw->mem_available)
        return AF_STRATEGY_CONSERVATIVE;
    if (cfg->max_mem_usage && footprint > AF_COST_AUTO_LIMIT_FRACTION * (double)cfg->max_mem_usage)
        return AF_STRATEGY_CONSERVATIVE;
    if (has_recurrence(cg->g) || cg->g->parent) return AF_STRATEGY_TEMPORAL; /* a body repeats per iteration */
    return AF_STRATEGY_AGGRESSIVE;
}

af_fusion_strategy af_cost_choose_strategy(const af_graph *g, const af_hw_model *hw, const af_fusion_config *cfg) {
    if (cfg->strategy > AF_STRATEGY_AUTO && cfg->strategy < AF_STRATEGY_COUNT) return cfg->strategy;
    af_cost_graph cg;
    if (af_cost_graph_init(&cg, g, NULL) != AF_OK) return AF_STRATEGY_CONSERVATIVE; /* no memory: be careful */
    af_fusion_strategy s = choose(&cg, hw, cfg);
    af_cost_graph_free(&cg);
    return s;
}

/* ---- checks --------------------------------------------------------------------------------- */

static int family_level(af_fusion_family f) {
    switch (f) {
    case AF_FUSION_CONV_BN_RELU:
    case AF_FUSION_CONV_RESIDUAL:
    case AF_FUSION_MATMUL_ADD:
        return 1;
    case AF_FUSION_LAYERNORM:
    case AF_FUSION_SQUEEZE_EXCITE:
    case AF_FUSION_POINTWISE_DEPTHWISE:
    case AF_FUSION_ELEMENTWISE:
        return 2;
    default:
        return 3;
    }
}

static bool is_discovery(const af_fusion_candidate *c) { return !strcmp(c->rule, "discovery"); }

static bool member(const af_fusion_candidate *c, int node) {
    for (int i = 0; i < c->n_nodes; i++)
        if (c->nodes[i] == node) return true;
    return false;
}

/* Structure the estimates rely on; false with `why` when the candidate is malformed. */
static bool well_formed(const af_graph *g, const af_fusion_candidate *c, char *why, size_t size) {
    if ((unsigned)c->family >= AF_FUSION_FAMILY_COUNT) {
        snprintf(why, size, "invalid candidate: family %d", (int)c->family);
        return false;
    }
    if (c->n_nodes < 1 || c->n_nodes > AF_FUSION_MAX_NODES) {
        snprintf(why, size, "invalid candidate: %d nodes", c->n_nodes);
        return false;
    }
    for (int i = 0; i < c->n_nodes; i++) {
        if (c->nodes[i] < 0 || c->nodes[i] >= g->n_nodes) {
            snprintf(why, size, "invalid candidate: node index %d", c->nodes[i]);
            return false;
        }
        for (int j = 0; j < i; j++)
            if (c->nodes[j] == c->nodes[i]) {
                snprintf(why, size, "invalid candidate: node '%s' listed twice", g->nodes[c->nodes[i]].name);
                return false;
            }
    }
    if (c->anchor >= 0 && !member(c, c->anchor)) {
        snprintf(why, size, "invalid candidate: the anchor is not in the group");
        return false;
    }
    if (c->output < 0 || c->output >= g->n_values || g->values[c->output].kind != AF_VALUE_NODE ||
        !member(c, g->values[c->output].producer)) {
        snprintf(why, size, "invalid candidate: the output is not produced by the group");
        return false;
    }
    return true;
}

/* The legality rules a candidate must meet whatever its policy. */
static bool legal(const af_cost_graph *cg, const af_fusion_config *cfg, const af_fusion_candidate *c, char *why,
                  size_t size) {
    const af_graph *g = cg->g;
    int max_ops = cfg->max_fused_ops > 0 && cfg->max_fused_ops < AF_FUSION_MAX_NODES ? cfg->max_fused_ops
                                                                                    : AF_FUSION_MAX_NODES;
    if (c->n_nodes > max_ops) {
        snprintf(why, size, "max_fused_ops: %d nodes > %d", c->n_nodes, max_ops);
        return false;
    }
    for (int i = 0; i < c->n_nodes; i++) {
        const af_node *n = &g->nodes[c->nodes[i]];
        if (n->op < AF_OP_COUNT && cfg->no_fusion_ops[n->op]) {
            snprintf(why, size, "no_fusion_ops: %s '%s'", n->op_type, n->name);
            return false;
        }
        /* Opaque nodes (control flow, shape- or data-dependent outputs, unknown ops) are barriers:
         * no group holds one, whatever a rule matched. */
        if (n->op >= AF_OP_COUNT || af_op_info(n->op)->cls == AF_OPCLASS_OPAQUE) {
            snprintf(why, size, "barrier: %s '%s' is opaque", n->op_type, n->name);
            return false;
        }
    }
    if (!af_fusion_is_convex(g, c->nodes, c->n_nodes)) {
        snprintf(why, size, "cycle: merging the group would create a cycle");
        return false;
    }
    if (!af_cost_group_closed(cg, c)) {
        snprintf(why, size, "not closed: an intermediate is read outside the group");
        return false;
    }
    return true;
}

/* ---- temporal: repeated candidates ---------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

/* Rule, op sequence and output shape: equal for the same block repeated layer after layer. */
static uint64_t signature(const af_graph *g, const af_fusion_candidate *c) {
    uint64_t h = 1469598103934665603ull;
    for (const char *p = c->rule; *p; p++) h = mix(h, (unsigned char)*p);
    for (int i = 0; i < c->n_nodes; i++) h = mix(h, (uint64_t)g->nodes[c->nodes[i]].op + 1000);
    const af_tensor *t = &g->values[c->output].t;
    for (int d = 0; d < t->rank && d < AF_MAX_RANK; d++) h = mix(h, (uint64_t)t->dims[d]);
    return h;
}

/* ---- the decision --------------------------------------------------------------------------- */

typedef struct decision_ctx {
    const af_graph *g;
    const af_cost_graph *cg;
    const af_fusion_config *cfg;
    af_fusion_strategy strategy;
    double threshold;
    bool loop_body; /* g is the body of a Loop/If: everything in it repeats per iteration */
} decision_ctx;

static void decide(const decision_ctx *d, af_fusion_candidate *c, const af_group_estimate *e, bool recurrent) {
    char *why = c->reason;
    const size_t size = sizeof c->reason;
    const af_fusion_config *cfg = d->cfg;
    c->accepted = false;
    const char *fam = af_fusion_family_name(c->family);
    if (cfg->fusion_level <= 0) {
        snprintf(why, size, "fusion_level 0");
        return;
    }
    int need = is_discovery(c) ? 3 : family_level(c->family);
    if (cfg->fusion_level < need) {
        snprintf(why, size, "fusion_level %d excludes %s%s", cfg->fusion_level, is_discovery(c) ? "discovery " : fam,
                 is_discovery(c) ? "candidates" : "");
        return;
    }
    if (!legal(d->cg, cfg, c, why, size)) return;
    if (e->nominal_dims && !cfg->enable_dynamic_shape) {
        snprintf(why, size, "dynamic shapes: enable_dynamic_shape is false");
        return;
    }
    af_fusion_policy pol = cfg->policy[c->family];
    if ((unsigned)pol >= AF_POLICY_COUNT) pol = AF_POLICY_MEMORY_AWARE;
    if (pol == AF_POLICY_NEVER) {
        snprintf(why, size, "policy never for %s", fam);
        return;
    }
    if (pol == AF_POLICY_ALWAYS) { /* the user's explicit choice: neither cost nor strategy vetoes it */
        c->accepted = true;
        return;
    }
    const double dt = e->time_unfused_us - e->time_fused_us;
    const double kib_peak = e->peak_delta / 1024.0;
    if (pol == AF_POLICY_MEMORY_AWARE) {
        double thr = d->threshold;
        /* temporal: savings inside loops and repeated layers recur, so they need no margin beyond
         * break-even (the threshold of aggressiveness 1) */
        if (d->strategy == AF_STRATEGY_TEMPORAL && (recurrent || d->loop_body) && thr > 0) thr = 0;
        if (!(c->score >= thr)) {
            snprintf(why, size, "cost: score %.4f < threshold %.4f (saves %.2f us, %.1f KiB)", c->score, thr, dt,
                     c->bytes_saved / 1024.0);
            return;
        }
        if (e->peak_delta > 0) {
            snprintf(why, size, "memory: raises peak activation memory by %.1f KiB", kib_peak);
            return;
        }
    } else if (dt < 0) { /* aggressive */
        snprintf(why, size, "cost: predicted slowdown of %.2f us (policy aggressive)", -dt);
        return;
    }
    if (d->strategy == AF_STRATEGY_CONSERVATIVE) {
        if (!(c->bytes_saved > 0)) {
            snprintf(why, size, "strategy conservative: saves no memory traffic");
            return;
        }
        if (e->peak_delta > 0) {
            snprintf(why, size, "strategy conservative: raises peak memory by %.1f KiB", kib_peak);
            return;
        }
    }
    c->accepted = true;
}

static void accepted_reason(af_fusion_candidate *c, const af_fusion_config *cfg, bool nominal) {
    af_fusion_policy pol = (unsigned)cfg->policy[c->family] < AF_POLICY_COUNT ? cfg->policy[c->family]
                                                                             : AF_POLICY_MEMORY_AWARE;
    snprintf(c->reason, sizeof c->reason, "accepted%s%s%s: saves %.2f us, %.1f KiB traffic%s",
             pol == AF_POLICY_ALWAYS ? " (policy " : "", pol == AF_POLICY_ALWAYS ? af_fusion_policy_name(pol) : "",
             pol == AF_POLICY_ALWAYS ? ")" : "", c->est_time_unfused_us - c->est_time_fused_us,
             c->bytes_saved / 1024.0, nominal ? " (symbolic dims taken as 64)" : "");
}

/* Higher gain first; on a tie (within 1e-12 of the model) the larger group, then the earlier one. */
static bool ranks_before(const af_fusion_candidates *cs, int a, int b) {
    const double ga = cs->items[a].gain, gb = cs->items[b].gain;
    if (fabs(ga - gb) > 1e-12) return ga > gb;
    if (cs->items[a].n_nodes != cs->items[b].n_nodes) return cs->items[a].n_nodes > cs->items[b].n_nodes;
    return a < b;
}

/* Keeps the best-ranked of every set of accepted candidates sharing nodes. order holds cands->n
 * ints and owner g->n_nodes, scratch the caller allocated (so nothing here can fail). */
static void resolve_overlaps(const af_graph *g, af_fusion_candidates *cands, int *order, int *owner) {
    int n_acc = 0;
    for (int i = 0; i < cands->n; i++)
        if (cands->items[i].accepted) order[n_acc++] = i;
    for (int i = 1; i < n_acc; i++) { /* insertion sort: stable, and lists are short */
        int x = order[i], j = i - 1;
        while (j >= 0 && ranks_before(cands, x, order[j])) {
            order[j + 1] = order[j];
            j--;
        }
        order[j + 1] = x;
    }
    for (int i = 0; i < g->n_nodes; i++) owner[i] = -1;
    for (int r = 0; r < n_acc; r++) {
        af_fusion_candidate *c = &cands->items[order[r]];
        int clash = -1;
        for (int i = 0; i < c->n_nodes && clash < 0; i++)
            if (owner[c->nodes[i]] >= 0) clash = c->nodes[i];
        if (clash < 0) {
            for (int i = 0; i < c->n_nodes; i++) owner[c->nodes[i]] = order[r];
            continue;
        }
        c->accepted = false;
        snprintf(c->reason, sizeof c->reason, "overlaps group %s at node '%s'", cands->items[owner[clash]].rule,
                 g->nodes[clash].name);
    }
}

af_status af_cost_evaluate(const af_graph *g, const af_hw_model *hw, const af_fusion_config *cfg,
                           af_fusion_candidates *cands, af_error *err) {
    if (!g || !hw || !cfg || !cands)
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "af_cost_evaluate: NULL argument");
    if (cands->n == 0) return AF_OK;
    af_cost_graph cg;
    af_status st = af_cost_graph_init(&cg, g, err);
    if (st != AF_OK) return st;
    const int n = cands->n;
    af_group_estimate *est = af_calloc((size_t)n, sizeof *est);
    uint64_t *sig = af_calloc((size_t)n, sizeof *sig);
    bool *ok = af_calloc((size_t)n, sizeof *ok), *touched = af_calloc((size_t)n, sizeof *touched);
    int *order = af_malloc((size_t)n * sizeof *order);
    int *owner = af_malloc((size_t)(g->n_nodes ? g->n_nodes : 1) * sizeof *owner);
    if (!est || !sig || !ok || !touched || !order || !owner) {
        st = af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory evaluating %d fusion candidates", n);
        goto done;
    }
    af_cost_totals totals;
    af_cost_graph_totals(&cg, hw, &totals);
    decision_ctx d = {.g = g, .cg = &cg, .cfg = cfg, .strategy = choose(&cg, hw, cfg), .threshold = af_cost_threshold(cfg),
                      .loop_body = g->parent != NULL};
    for (int i = 0; i < n; i++) {
        af_fusion_candidate *c = &cands->items[i];
        char why[sizeof c->reason];
        ok[i] = well_formed(g, c, why, sizeof why);
        bool undecided = !c->accepted && !c->reason[0];
        c->gain = 0;
        if (!ok[i]) {
            if (undecided || c->accepted) {
                c->accepted = false;
                snprintf(c->reason, sizeof c->reason, "%s", why);
            }
            continue;
        }
        af_cost_estimate_group(&cg, hw, c, &est[i]);
        c->est_time_unfused_us = est[i].time_unfused_us;
        c->est_time_fused_us = est[i].time_fused_us;
        c->bytes_saved = est[i].bytes_unfused - est[i].bytes_fused;
        c->peak_delta = est[i].peak_delta;
        c->energy_saved_uj = est[i].energy_unfused_uj - est[i].energy_fused_uj;
        c->score = af_cost_score(&est[i], cfg);
        c->gain = af_cost_gain(&est[i], cfg, &totals);
        sig[i] = signature(g, c);
        touched[i] = undecided;
    }
    for (int i = 0; i < n; i++) {
        if (!touched[i]) continue;
        int repeats = 0;
        if (d.strategy == AF_STRATEGY_TEMPORAL)
            for (int j = 0; j < n; j++) repeats += ok[j] && sig[j] == sig[i];
        decide(&d, &cands->items[i], &est[i], repeats >= AF_COST_REPEAT_MIN);
    }
    resolve_overlaps(g, cands, order, owner);
    for (int i = 0; i < n; i++)
        if (touched[i] && cands->items[i].accepted) accepted_reason(&cands->items[i], cfg, est[i].nominal_dims);
done:
    af_free(est);
    af_free(sig);
    af_free(ok);
    af_free(touched);
    af_free(order);
    af_free(owner);
    af_cost_graph_free(&cg);
    return st;
}

