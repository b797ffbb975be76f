/*
 * The verify mode (config "verify"): every fused step of a new plan runs once against the unfused
 * plan on the same inputs, and a group whose output differs beyond the tolerance is backed out.
 * The unfused plan runs the whole graph on seeded inputs (a subgraph: on the inputs its caller
 * built) keeping every value; each fused step then runs alone on those very values, so an error is
 * the group's own, not one carried in from an earlier group.
 */
#include "fusion/sched/verify.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/executor.h"
#include "util/alloc.h"
#include "util/error.h"

#define VERIFY_MAX_INPUT_BYTES ((size_t)1 << 28) /* larger inputs: verification is skipped */

/* Seeded inputs: floats uniform in [-1, 1), every other type zeros (valid ids and masks). */
static bool make_inputs(const af_graph *g, af_tensor *in, char *note, size_t note_size) {
    uint32_t state = 12345u;
    for (int k = 0; k < g->n_inputs; k++) {
        const af_value *v = &g->values[g->inputs[k]];
        int64_t n = af_tensor_numel(&v->t);
        size_t es = af_dtype_size(v->t.dtype);
        if (n < 0 || es == 0 || (size_t)n > VERIFY_MAX_INPUT_BYTES / es) {
            snprintf(note, note_size, "input '%s' has no static shape of a known type", v->name);
            return false;
        }
        in[k] = v->t;
        in[k].nbytes = (size_t)n * es;
        in[k].data = af_calloc(in[k].nbytes ? in[k].nbytes : 1, 1);
        if (!in[k].data) {
            snprintf(note, note_size, "out of memory for inputs");
            return false;
        }
        if (v->t.dtype != AF_DTYPE_FLOAT) continue;
        float *f = in[k].data;
        for (int64_t i = 0; i < n; i++) {
            state = state * 1664525u + 1013904223u;
            f[i] = (float)(state >> 8) / 8388608.0f - 1.0f;
        }
    }
    return true;
}

/* The largest excess of |a - b| over atol + rtol |b| (0: within tolerance); exact for non-floats. */
static double excess(const af_tensor *a, const af_tensor *b, double rtol, double atol, double *max_err) {
    *max_err = 0;
    if (!a->data || !b->data || !af_tensor_same_shape(a, b) || a->dtype != b->dtype) return INFINITY;
    int64_t n = af_tensor_numel(a);
    if (a->dtype != AF_DTYPE_FLOAT) return memcmp(a->data, b->data, (size_t)n * af_dtype_size(a->dtype)) ? 1 : 0;
    const float *x = a->data, *y = b->data;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        if (x[i] == y[i]) continue; /* also equal infinities, whose difference is NaN */
        double d = fabs((double)x[i] - (double)y[i]);
        if (!(d == d) && !(x[i] != x[i] && y[i] != y[i])) return INFINITY; /* a NaN on one side only */
        if (d > *max_err) *max_err = d;
        double over = d - (atol + rtol * fabs((double)y[i]));
        if (over > worst) worst = over;
    }
    return worst;
}

static af_fusion_candidate *candidate_of(af_fusion_candidates *cands, const af_step *s) {
    for (int k = 0; k < cands->n; k++)
        if (cands->items[k].accepted && cands->items[k].output == s->output) return &cands->items[k];
    return NULL;
}

/* Runs fused step i alone, its inputs taken from the reference run; compares with its output. */
static af_status check_step(const af_exec_plan *fused, int i, const af_verify_ref *ref, void *workspace,
                            const af_verify_options *o, bool *ok, double *max_err, af_error *err) {
    const af_exec *u = &ref->run;
    const af_graph *g = u->g;
    const af_step *s = &fused->steps[i];
    af_exec_plan one = *fused;
    one.n_steps = 1;
    one.steps = (af_step *)s;
    af_exec f;
    af_status st = af_exec_init(&f, g, u->parent, err); /* a subgraph's captures: the enclosing run's */
    if (st != AF_OK) return st;
    f.plan = &one;
    f.workspace = workspace;
    f.limits = o->limits;
    for (int k = 0; k < g->n_inputs; k++) f.env[g->inputs[k]] = u->env[g->inputs[k]];
    int reads[256];
    int n = af_step_reads(g, s, reads, 256);
    for (int k = 0; k < n && k < 256; k++) f.env[reads[k]] = u->env[reads[k]]; /* views: u owns them */
    st = af_exec_run(&f, err);
    if (st == AF_OK) *ok = !(excess(&f.env[s->output], &u->env[s->output], o->rtol, o->atol, max_err) > 0);
    af_exec_release(&f);
    return st;
}

af_status af_verify_ref_run(const af_graph *g, const af_tensor *inputs, af_verify_ref *parent,
                            const af_verify_options *o, af_verify_ref *ref, af_error *err) {
    memset(ref, 0, sizeof *ref);
    if (!inputs) {
        if (!(ref->seeded = af_calloc((size_t)(g->n_inputs ? g->n_inputs : 1), sizeof *ref->seeded)))
            return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory verifying fusions");
        ref->n_seeded = g->n_inputs;
        if (!make_inputs(g, ref->seeded, ref->note, sizeof ref->note)) return AF_OK;
        inputs = ref->seeded;
    }
    af_exec_plan unfused = {0};
    void *workspace = NULL;
    af_kernel_choice one_thread = o->kernels;
    one_thread.n_threads = 1;
    af_status st = af_exec_plan_unfused(g, &one_thread, false, NULL, &unfused, err);
    if (st == AF_OK && unfused.workspace_bytes && !(workspace = af_malloc_aligned(unfused.workspace_bytes)))
        st = af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory verifying fusions");
    if (st == AF_OK) st = af_exec_init(&ref->run, g, parent ? &parent->run : NULL, err);
    if (st == AF_OK) {
        ref->run.plan = &unfused; /* no lifetimes: every value is kept, on the heap */
        ref->run.workspace = workspace;
        ref->run.limits = o->limits;
        for (int k = 0; k < g->n_inputs; k++) ref->run.env[g->inputs[k]] = inputs[k]; /* views */
        af_error run_err = {0};
        st = af_exec_run(&ref->run, &run_err);
        ref->run.plan = NULL; /* the values do not point into the plan or the workspace */
        ref->run.workspace = NULL;
        ref->ran = st == AF_OK;
        if (st == AF_ERR_OUT_OF_MEMORY) {
            if (err) *err = run_err;
        } else if (st != AF_OK) { /* the graph itself fails on these inputs: nothing to compare */
            snprintf(ref->note, sizeof ref->note, "the unfused run failed on %s inputs: %s",
                     ref->seeded ? "seeded" : "these", run_err.message);
            st = AF_OK;
        }
    }
    af_free_aligned(workspace);
    af_exec_plan_free(&unfused);
    return st;
}

void af_verify_ref_free(af_verify_ref *ref) {
    af_exec_release(&ref->run); /* the inputs are views: not owned by the run */
    for (int k = 0; k < ref->n_seeded; k++) af_free(ref->seeded[k].data);
    af_free(ref->seeded);
    memset(ref, 0, sizeof *ref);
}

af_status af_sched_verify_steps(const af_verify_ref *ref, af_fusion_candidates *cands, const af_exec_plan *fused,
                                const af_verify_options *o, af_verify_result *res, af_error *err) {
    memset(res, 0, sizeof *res);
    void *workspace = NULL;
    if (fused->workspace_bytes && !(workspace = af_malloc_aligned(fused->workspace_bytes)))
        return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory verifying fusions");
    af_status st = AF_OK;
    for (int i = 0; i < fused->n_steps; i++) {
        const af_step *s = &fused->steps[i];
        if (s->output < 0) continue;
        bool ok = false;
        double max_err = 0;
        af_error step_err = {0};
        af_status sst = check_step(fused, i, ref, workspace, o, &ok, &max_err, &step_err);
        if (sst == AF_ERR_OUT_OF_MEMORY) {
            if (err) *err = step_err;
            st = sst;
            break;
        }
        res->n_checked++;
        af_fusion_candidate *c = candidate_of(cands, s);
        if (c) c->verified = sst == AF_OK && ok;
        if (sst == AF_OK && ok) continue;
        if (!c) continue;
        c->accepted = false;
        if (sst != AF_OK) snprintf(c->reason, sizeof c->reason, "numeric check: the fused step failed: %s", step_err.message);
        else snprintf(c->reason, sizeof c->reason, "numeric check: max error %.3g beyond rtol %g / atol %g", max_err,
                      o->rtol, o->atol);
        res->n_failed++;
    }
    snprintf(res->note, sizeof res->note, "verify: %d fused groups checked against their unfused ops, %d backed out",
             res->n_checked, res->n_failed);
    af_free_aligned(workspace);
    return st;
}

af_status af_sched_verify(const af_graph *g, af_fusion_candidates *cands, const af_exec_plan *fused,
                          const af_verify_options *o, af_verify_result *res, af_error *err) {
    memset(res, 0, sizeof *res);
    af_verify_ref ref;
    af_status st = af_verify_ref_run(g, NULL, NULL, o, &ref, err);
    if (st == AF_OK && ref.ran) st = af_sched_verify_steps(&ref, cands, fused, o, res, err);
    else if (st == AF_OK) snprintf(res->note, sizeof res->note, "verify skipped: %s", ref.note);
    af_verify_ref_free(&ref);
    return st;
}
