/* Layer 3: builds the execution plan, one step per accepted group and per remaining node. */
#include "fusion/sched/sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/weight_release.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/error.h"

static void reject(af_fusion_candidate *c, const char *why) {
    c->accepted = false;
    snprintf(c->reason, sizeof c->reason, "scheduler: %s", why);
}

/* Anchor + epilogue groups: the anchor's fast kernel with the compiled epilogue. */
static bool build_anchor_step(const af_graph *g, af_fusion_candidate *c, const af_sched_options *o, af_step *s,
                              af_error *err, af_status *st) {
    char why[160] = "";
    af_tensor w = {0}, b = {0};
    if (!af_sched_compile_epilogue(g, c, s, &w, &b, why, sizeof why)) {
        reject(c, why);
        return false;
    }
    const af_tensor *overrides[3] = {NULL, w.data ? &w : NULL, b.data ? &b : NULL};
    af_kernel_request req = {.graph = g, .node = &g->nodes[c->anchor], .choice = o->kernels,
                             .n_overrides = w.data ? 3 : 0, .overrides = overrides};
    *st = af_kernel_select(&req, &s->kernel, err);
    if (*st != AF_OK) return false;
    if (!s->kernel.run || !s->kernel.takes_epilogue) {
        af_kernel_release(&s->kernel);
        reject(c, "the anchor has no fast kernel for these shapes");
        return false;
    }
    return true;
}

static bool build_step(const af_graph *g, af_fusion_candidate *c, const af_sched_options *o, af_step *s,
                       af_error *err, af_status *st) {
    memset(s, 0, sizeof *s);
    *st = AF_OK;
    s->family = (int)c->family;
    snprintf(s->rule, sizeof s->rule, "%s", c->rule);
    s->n_nodes = c->n_nodes;
    s->nodes = af_malloc((size_t)c->n_nodes * sizeof *s->nodes);
    if (!s->nodes) {
        *st = af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory scheduling fusions");
        return false;
    }
    memcpy(s->nodes, c->nodes, (size_t)c->n_nodes * sizeof *s->nodes);
    s->output = c->output;
    s->anchor = c->anchor;
    bool ok = false;
    const af_op anchor_op = c->anchor >= 0 ? g->nodes[c->anchor].op : AF_OP_UNKNOWN;
    char why[160] = "";
    if (c->family == AF_FUSION_POINTWISE_DEPTHWISE) { /* two Conv anchors: a kernel of its own */
        ok = af_sched_build_pwdw(g, c, o, s, why, sizeof why);
        if (!ok) reject(c, why);
    } else if (anchor_op == AF_OP_CONV || anchor_op == AF_OP_MAT_MUL || anchor_op == AF_OP_GEMM) {
        ok = build_anchor_step(g, c, o, s, err, st);
    } else if (c->family == AF_FUSION_SQUEEZE_EXCITE) {
        ok = af_sched_build_se(g, c, o, s, why, sizeof why);
        if (!ok) reject(c, why);
    } else if (c->family == AF_FUSION_LAYERNORM) {
        ok = af_sched_build_layernorm(g, c, o, s, why, sizeof why);
        if (!ok) reject(c, why);
    } else if (c->family == AF_FUSION_ELEMENTWISE) {
        ok = af_sched_build_region(g, c, o, s, why, sizeof why);
        if (!ok) reject(c, why);
    } else if (c->family == AF_FUSION_ATTENTION) {
        ok = af_sched_build_attention(g, c, o, s, why, sizeof why);
        if (!ok) reject(c, why);
    } else {
        reject(c, "no fused kernel for this family yet");
    }
    if (!ok) af_step_release(s);
    return ok;
}

/* The prefix the cost layer gives candidates that lost an overlap (src/fusion/cost/cost.c). */
#define OVERLAP_REASON "overlaps group "
/* The prefix of the verify mode's rejections (verify.c), and of the scheduler's own (reject()). */
#define NUMERIC_REASON "numeric check:"
#define SCHED_REASON "scheduler:"

static bool starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

static bool share_a_node(const af_fusion_candidate *a, const af_fusion_candidate *b) {
    for (int i = 0; i < a->n_nodes; i++)
        for (int j = 0; j < b->n_nodes; j++)
            if (a->nodes[i] == b->nodes[j]) return true;
    return false;
}

/* Why c's nodes are free: the groups overlapping it that the cost layer had accepted are out of
 * the plan, because the scheduler could not build them or the numeric check backed them out. */
static const char *replaced_why(const af_fusion_candidates *cands, const af_fusion_candidate *c) {
    bool sched = false, numeric = false;
    for (int k = 0; k < cands->n; k++) {
        const af_fusion_candidate *o = &cands->items[k];
        if (o == c || o->accepted || !share_a_node(o, c)) continue;
        if (starts_with(o->reason, NUMERIC_REASON)) numeric = true;
        else if (starts_with(o->reason, SCHED_REASON)) sched = true;
    }
    if (numeric && sched) return "groups the scheduler could not build or the numeric check backed out";
    return numeric ? "a group the numeric check backed out" : "a group the scheduler could not build";
}

/* A candidate that lost an overlap, with its gain, for the second chance's order: larger gain
 * first, as the cost layer resolves overlaps (not score, which favours small groups: SiLU's
 * Sigmoid + Mul as a region of its own would take the nodes a conv + SiLU group needs), then lower
 * index (the candidates' own order). */
typedef struct lost_entry {
    double gain;
    int k;
} lost_entry;

static int by_gain_desc(const void *a, const void *b) {
    const lost_entry *x = a, *y = b;
    const bool nx = x->gain != x->gain, ny = y->gain != y->gain; /* a NaN sorts last: a total order */
    if (nx != ny) return nx ? 1 : -1;
    if (!nx && x->gain != y->gain) return x->gain > y->gain ? -1 : 1;
    return (x->k > y->k) - (x->k < y->k);
}

static bool nodes_free(const af_fusion_candidate *c, const int *group_of) {
    for (int i = 0; i < c->n_nodes; i++)
        if (group_of[c->nodes[i]] >= 0) return false;
    return true;
}

/* Builds c into fused[*n_fused] and claims its nodes; false when it could not be built (st says
 * whether that was a hard error or a rejection recorded in c->reason). */
static bool try_build(const af_graph *g, af_fusion_candidate *c, const af_sched_options *o, af_step *fused,
                      int *n_fused, int *group_of, int *last_of, af_exec_plan *plan, af_error *err, af_status *st) {
    /* Building the kernel and freeing the raw weights it packed are the same work unfused (freeing
     * ResNet-50's 100 MB took 20-30 ms, which the fusion pass used to count as its own). */
    double t0 = af_now_ms();
    bool built = build_step(g, c, o, &fused[*n_fused], err, st);
    if (built) af_weight_release_step(o->release, &fused[*n_fused]);
    plan->prepare_ms += af_now_ms() - t0;
    if (!built) return false;
    int last = -1;
    for (int i = 0; i < c->n_nodes; i++) {
        group_of[c->nodes[i]] = *n_fused;
        if (c->nodes[i] > last) last = c->nodes[i];
    }
    last_of[(*n_fused)++] = last;
    return true;
}

static void log_step(const af_graph *g, const af_step *s, int index) {
    char line[1024];
    size_t used = (size_t)snprintf(line, sizeof line, "fused");
    for (int i = 0; i < s->n_nodes && used < sizeof line; i++) {
        const af_node *n = &g->nodes[s->nodes[i]];
        used += (size_t)snprintf(line + used, sizeof line - used, "%s %s '%s'", i ? " +" : "", n->op_type, n->name);
    }
    fprintf(stderr, "%s into step %d (%s, %s)\n", line, index, s->rule, s->kernel.name ? s->kernel.name : "");
}

af_status af_sched_build(const af_graph *g, af_fusion_candidates *cands, const af_sched_options *o,
                         af_exec_plan *plan, af_error *err) {
    memset(plan, 0, sizeof *plan);
    plan->fusion_level = o->fusion_level;
    int n = g->n_nodes;
    int *group_of = af_malloc((size_t)(n ? n : 1) * sizeof *group_of); /* node -> fused step slot, or -1 */
    int *last_of = af_malloc((size_t)(cands->n ? cands->n : 1) * sizeof *last_of);
    lost_entry *lost = af_malloc((size_t)(cands->n ? cands->n : 1) * sizeof *lost);
    af_step *fused = af_calloc((size_t)(cands->n ? cands->n : 1), sizeof *fused);
    plan->steps = af_calloc((size_t)(n ? n : 1), sizeof *plan->steps);
    af_status st = AF_OK;
    int n_fused = 0;
    if (!group_of || !last_of || !lost || !fused || !plan->steps) {
        st = af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory scheduling fusions");
        goto done;
    }
    for (int i = 0; i < n; i++) group_of[i] = -1;
    for (int k = 0; k < cands->n; k++) {
        af_fusion_candidate *c = &cands->items[k];
        if (!c->accepted) continue;
        if (!nodes_free(c, group_of)) { /* the cost layer resolves overlaps; this is the scheduler's own guard */
            reject(c, "overlaps another accepted group");
            continue;
        }
        if (!try_build(g, c, o, fused, &n_fused, group_of, last_of, plan, err, &st) && st != AF_OK) goto done;
    }
    /* Second chance: a profitable candidate that lost an overlap to a group the scheduler could not
     * build, or one the verify mode backed out, is tried now, largest gain first, wherever its nodes
     * are still free; unless the caller forbids it (verify's last rebuild: nothing would check it). */
    int n_lost = 0;
    for (int k = 0; k < cands->n; k++) {
        const af_fusion_candidate *c = &cands->items[k];
        if (!c->accepted && starts_with(c->reason, OVERLAP_REASON)) lost[n_lost++] = (lost_entry){c->gain, k};
    }
    /* A sort, not insertions: a hostile rules file made 24,000 losers, and the insertions were
     * quadratic. Ties keep the candidates' order. */
    qsort(lost, (size_t)n_lost, sizeof *lost, by_gain_desc);
    for (int r = 0; r < n_lost; r++) {
        af_fusion_candidate *c = &cands->items[lost[r].k];
        if (!nodes_free(c, group_of)) continue;
        char before[sizeof c->reason];
        snprintf(before, sizeof before, "%s", c->reason);
        if (o->no_second_chance) {
            snprintf(c->reason, sizeof c->reason, "%s; %s", before, o->no_second_chance);
            continue;
        }
        if (try_build(g, c, o, fused, &n_fused, group_of, last_of, plan, err, &st)) {
            /* Asked only of a candidate that made it (it scans every candidate; c is not among
             * those it reads): each success claims nodes, so this runs at most once per node. */
            const char *why = replaced_why(cands, c);
            c->accepted = true;
            c->verified = false;
            snprintf(c->reason, sizeof c->reason, "accepted: in place of %s", why);
        } else {
            if (st != AF_OK) goto done;
            snprintf(c->reason, sizeof c->reason, "%s", before); /* keep the cost layer's verdict */
        }
    }
    /* Steps in node order; a group runs where its last node stood, after every input it reads
     * (their producers come earlier) and before every reader of its output (they come later). */
    for (int i = 0; i < n; i++) {
        af_step *s = &plan->steps[plan->n_steps];
        if (group_of[i] >= 0) {
            if (last_of[group_of[i]] != i) continue;
            *s = fused[group_of[i]];
            memset(&fused[group_of[i]], 0, sizeof fused[0]);
            if (o->log) log_step(g, s, plan->n_steps);
        } else {
            s->anchor = i;
            s->output = -1;
            s->family = -1;
            s->n_nodes = 1;
            if (!(s->nodes = af_malloc(sizeof *s->nodes))) {
                st = af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory scheduling fusions");
                goto done;
            }
            s->nodes[0] = i;
            plan->n_steps++;
            af_kernel_request req = {.graph = g, .node = &g->nodes[i], .choice = o->kernels};
            double t0 = af_now_ms();
            st = af_kernel_select(&req, &s->kernel, err);
            if (st == AF_OK) af_weight_release_step(o->release, s);
            plan->prepare_ms += af_now_ms() - t0;
            if (st != AF_OK) goto done;
            if (s->kernel.run && s->kernel.workspace_bytes > plan->workspace_bytes)
                plan->workspace_bytes = s->kernel.workspace_bytes;
            continue;
        }
        plan->n_steps++;
        if (s->kernel.workspace_bytes > plan->workspace_bytes) plan->workspace_bytes = s->kernel.workspace_bytes;
    }
done:
    for (int k = 0; fused && k < n_fused; k++) af_step_release(&fused[k]);
    af_free(fused);
    af_free(group_of);
    af_free(last_of);
    af_free(lost);
    if (st != AF_OK) af_exec_plan_free(plan);
    return st;
}
