/*
 * The verify mode (config "verify") for subgraph plans. A Loop body or If branch cannot run on its
 * own: it reads values of the graph that encloses it. So each runs unfused on inputs built from
 * the enclosing graph's reference run (fusion/sched/verify.h), keeping every value: a Loop body
 * its first iteration (iteration number 0, condition true, the Loop's initial loop-carried
 * values), an If branch (both of them) no inputs; captured values are the enclosing run's. Then
 * each fused step of the subgraph's plan runs alone on those values, and the groups that differ
 * are backed out of that plan as at the top level (af_fusion_verify_plan). The top-level graph's
 * reference run is on the same seeded inputs as its own verify; a nested subgraph's is its
 * enclosing subgraph's run, at any depth.
 */
#include "runtime/subplans.h"

#include <stdio.h>
#include <string.h>

#include "fusion/sched/verify.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/error.h"

typedef struct verify_ctx {
    af_subplans *subs;
    const af_fusion_config *cfg;
    af_verify_options vo; /* vo.kernels: the session's ISA and threads under cfg */
} verify_ctx;

static bool has_fused_steps(const af_exec_plan *p) {
    for (int i = 0; i < p->n_steps; i++)
        if (p->steps[i].output >= 0) return true;
    return false;
}

/* The inputs one run of `body` gets from `owner`, whose own inputs are in outer's env: a Loop's
 * first iteration, or none for an If branch. iter and cond hold the scalars in[0] and in[1] point
 * at. False, with why filled, when there are none to build. */
static bool body_inputs(const af_node *owner, const af_graph *body, const af_exec *outer, af_tensor *in,
                        int64_t *iter, uint8_t *cond, char *why, size_t why_size) {
    if (owner->op == AF_OP_IF) {
        if (body->n_inputs == 0) return true;
        snprintf(why, why_size, "an If branch with %d formal inputs", body->n_inputs);
        return false;
    }
    if (owner->op != AF_OP_LOOP) {
        snprintf(why, why_size, "no inputs can be built for the subgraph of a %s node", owner->op_type);
        return false;
    }
    if (body->n_inputs != owner->n_inputs) {
        snprintf(why, why_size, "the body takes %d inputs, node '%s' (Loop) gives it %d", body->n_inputs, owner->name,
                 owner->n_inputs);
        return false;
    }
    *iter = 0;
    *cond = 1;
    in[0] = (af_tensor){.dtype = AF_DTYPE_INT64, .rank = 0, .data = iter, .nbytes = sizeof *iter};
    in[1] = (af_tensor){.dtype = AF_DTYPE_BOOL, .rank = 0, .data = cond, .nbytes = 1};
    for (int k = 2; k < owner->n_inputs; k++) {
        const int v = owner->inputs[k];
        if (v < 0 || (!outer->env[v].data && af_tensor_numel(&outer->env[v]) != 0)) {
            snprintf(why, why_size, "loop-carried input %d of node '%s' was not computed", k - 2, owner->name);
            return false;
        }
        in[k] = outer->env[v]; /* a view: the enclosing run keeps it */
    }
    return true;
}

/* Checks sp's fused steps against ref (NULL: not run, for the reason why) and notes the outcome. */
static af_status check_subplan(verify_ctx *x, af_subplan *sp, af_verify_ref *ref, const char *why, double ref_ms,
                               af_error *err) {
    af_fusion_result *res = &sp->fusion;
    const char *what = sp->owner->op == AF_OP_LOOP ? "Loop iteration 0" : "If branch";
    res->verify_ms = ref_ms;
    if (!ref) {
        snprintf(res->verify_note, sizeof res->verify_note, "verify skipped: %s", why);
        return AF_OK;
    }
    af_status st = af_fusion_verify_plan(sp->g, x->cfg, x->vo.kernels.isa, x->vo.kernels.n_threads,
                                         AF_VERIFY_MAX_ROUNDS, ref, &sp->plan, res, err);
    if (st != AF_OK) return st;
    snprintf(res->verify_note, sizeof res->verify_note,
             "verify (%s, captured values from the enclosing graph's unfused run): %d fused groups checked, %d backed "
             "out (reason \"numeric check\"); the plan's %d fused groups match their unfused ops",
             what, res->verify_checked, res->verify_backed_out, res->verify_checked - res->verify_backed_out);
    /* The plan may have been rebuilt: its lifetimes follow it. */
    af_lifetimes_free(&sp->lifetimes);
    return af_lifetimes_compute(sp->g, &sp->plan, &sp->lifetimes, err);
}

static af_status verify_graph(verify_ctx *x, const af_graph *g, af_verify_ref *ref, const char *why, af_error *err);

/* One subgraph of owner (outer: the enclosing graph's reference run, NULL when it did not run, for
 * the reason outer_why): its own reference run, its plan's check, then its subgraphs. */
static af_status verify_body(verify_ctx *x, const af_node *owner, const af_graph *body, af_verify_ref *outer,
                             const char *outer_why, af_error *err) {
    af_tensor *in = af_calloc((size_t)(body->n_inputs ? body->n_inputs : 1), sizeof *in);
    if (!in) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory verifying subgraphs");
    char why[200] = "";
    int64_t iter;
    uint8_t cond;
    af_verify_ref ref;
    memset(&ref, 0, sizeof ref);
    const double t0 = af_now_ms();
    af_status st = AF_OK;
    if (!outer) snprintf(why, sizeof why, "the enclosing graph did not run: %s", outer_why);
    else if (body_inputs(owner, body, &outer->run, in, &iter, &cond, why, sizeof why) &&
             (st = af_verify_ref_run(body, in, outer, &x->vo, &ref, err)) == AF_OK && !ref.ran)
        snprintf(why, sizeof why, "%s", ref.note);
    af_subplan *sp = (af_subplan *)af_subplans_find(x->subs, body); /* x->subs is ours to change */
    if (st == AF_OK && sp && sp->plan.fusion_level > 0 && !has_fused_steps(&sp->plan))
        snprintf(sp->fusion.verify_note, sizeof sp->fusion.verify_note, "verify: no fused groups to check");
    else if (st == AF_OK && sp && sp->plan.fusion_level > 0)
        st = check_subplan(x, sp, ref.ran ? &ref : NULL, why, af_now_ms() - t0, err);
    if (st == AF_OK) st = verify_graph(x, body, ref.ran ? &ref : NULL, why, err);
    af_verify_ref_free(&ref);
    af_free(in); /* after ref, which viewed it */
    return st;
}

static af_status verify_graph(verify_ctx *x, const af_graph *g, af_verify_ref *ref, const char *why, af_error *err) {
    for (int i = 0; i < g->n_nodes; i++) {
        const af_node *n = &g->nodes[i];
        for (int a = 0; a < n->n_attrs; a++) {
            const af_graph *body = n->attrs[a].type == AF_ATTR_GRAPH ? n->attrs[a].g : NULL;
            af_status st = body ? verify_body(x, n, body, ref, why, err) : AF_OK;
            if (st != AF_OK) return st;
        }
    }
    return AF_OK;
}

af_status af_subplans_verify(const af_graph *g, const af_fusion_config *cfg, af_isa isa, int n_threads,
                             af_subplans *subs, af_error *err) {
    bool any = false;
    for (int i = 0; i < subs->n; i++) any = any || has_fused_steps(&subs->items[i].plan);
    if (!any) { /* nothing to check: spare the reference runs */
        for (int i = 0; i < subs->n; i++)
            if (subs->items[i].plan.fusion_level > 0)
                snprintf(subs->items[i].fusion.verify_note, sizeof subs->items[i].fusion.verify_note,
                         "verify: no fused groups to check");
        return AF_OK;
    }
    verify_ctx x = {.subs = subs, .cfg = cfg,
                    .vo = {.kernels = af_fusion_kernel_choice(cfg, isa, n_threads), .rtol = cfg->verify_rtol,
                           .atol = cfg->verify_atol}};
    af_verify_ref top;
    af_status st = af_verify_ref_run(g, NULL, NULL, &x.vo, &top, err);
    if (st == AF_OK) st = verify_graph(&x, g, top.ran ? &top : NULL, top.note, err);
    af_verify_ref_free(&top);
    subs->workspace_bytes = 0; /* rebuilt plans may need other scratch */
    for (int i = 0; i < subs->n; i++)
        if (subs->items[i].plan.workspace_bytes > subs->workspace_bytes)
            subs->workspace_bytes = subs->items[i].plan.workspace_bytes;
    return st;
}
