/*
 * Checks the cost model's roofline estimates against the library's own kernels: every node of each
 * model runs alone on its fast kernel (or its reference kernel) with cache-warm operands, as one
 * step of a model run sees them, and every fused anchor+epilogue group the scheduler builds runs
 * as its one fused kernel. Prints est/measured per kernel, then per op the median ratio and the
 * median |ln(est/measured)|, and whole-model totals: an unfused session run vs the summed estimates,
 * and the saving of the default fusion plan (what af_session_create builds) vs its estimate.
 *
 *   cost_model_check [--threads N] [--ms M] [--verbose] [model.onnx ...]
 *
 * Without models: the fixtures in tests/models and the full models in build/models when present.
 * The estimates use the measured hardware model (af_hw_model_probe, cached on disk), scaled to N
 * threads (default 1). Kernel times are the minimum over 5 batches of >= M/5 ms (default 10).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fusion/cost/cost.h"
#include "fusion/engine.h"
#include "fusion/sched/sched.h"
#include "ir/model.h"
#include "ir/tensor.h"
#include "runtime/plan.h"
#include "util/alloc.h"

#define MAX_IO 64

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int opt_threads = 1, opt_verbose = 0;
static double opt_ms = 10;

/* ---- tensors for one kernel ------------------------------------------------------------------ */

/* Value v as a kernel input: the constant's data, or a buffer of its static shape with small
 * values (integer inputs are zeros: valid indices for Gather, valid masks). NULL if unknown. */
static af_tensor *bind(const af_graph *g, int v, af_tensor *slot) {
    const af_value *val = &g->values[v];
    *slot = val->t;
    if (val->t.data) return slot;
    if (!af_tensor_shape_known(&val->t) || !af_dtype_size(val->t.dtype)) return NULL;
    slot->data = NULL;
    if (af_tensor_alloc(slot, NULL) != AF_OK) return NULL;
    if (slot->dtype == AF_DTYPE_FLOAT) {
        float *p = slot->data;
        int64_t n = af_tensor_numel(slot);
        for (int64_t i = 0; i < n; i++) p[i] = (float)((i * 7919) % 2001 - 1000) * 1e-3f;
    }
    return slot;
}

static void unbind(const af_graph *g, int v, af_tensor *slot) {
    if (v >= 0 && !g->values[v].t.data) af_tensor_free_data(slot);
}

typedef struct kernel_call {
    const af_kernel *k;         /* NULL: the reference kernel */
    const af_epilogue *epi;
    af_op_ctx ctx;
    af_threadpool *pool;
    void *ws;
} kernel_call;

static af_status call(const kernel_call *c) {
    af_op_ctx ctx = c->ctx;
    if (c->k && c->k->run) return c->k->run(c->k, &ctx, c->epi, c->pool, c->ws);
    return af_op_info(ctx.node->op)->run(&ctx);
}

/* Microseconds per call: the minimum over 5 batches, each >= opt_ms/5 ms; < 0 if it fails. */
static double time_call(const kernel_call *c) {
    if (call(c) != AF_OK) return -1;
    double t0 = now_us();
    if (call(c) != AF_OK) return -1;
    double one = now_us() - t0;
    int reps = one > 0 ? (int)(opt_ms * 1e3 / 5 / one) + 1 : 1000;
    if (reps > 100000) reps = 100000;
    double best = 1e300;
    for (int b = 0; b < 5; b++) {
        t0 = now_us();
        for (int r = 0; r < reps; r++) call(c);
        double dt = (now_us() - t0) / reps;
        if (dt < best) best = dt;
    }
    return best;
}

/* ---- statistics ----------------------------------------------------------------------------- */

typedef struct sample {
    char op[32];
    double est, meas;
} sample;

typedef struct samples {
    int n, cap;
    sample *s;
} samples;

static void add_sample(samples *ss, const char *op, double est, double meas) {
    if (ss->n == ss->cap) {
        ss->cap = ss->cap ? ss->cap * 2 : 256;
        ss->s = realloc(ss->s, (size_t)ss->cap * sizeof *ss->s);
        if (!ss->s) exit(1);
    }
    sample *x = &ss->s[ss->n++];
    snprintf(x->op, sizeof x->op, "%s", op);
    x->est = est;
    x->meas = meas;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    if (n == 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Median est/meas and median |ln(est/meas)| over the samples whose op matches (NULL: all). */
static void stats(const samples *ss, const char *op, int *count, double *med_ratio, double *med_abs_log,
                  double *within2) {
    double *r = malloc((size_t)(ss->n ? ss->n : 1) * sizeof *r), *l = malloc((size_t)(ss->n ? ss->n : 1) * sizeof *l);
    int n = 0, in2 = 0;
    for (int i = 0; i < ss->n; i++) {
        if (op && strcmp(ss->s[i].op, op)) continue;
        if (!(ss->s[i].meas > 0) || !(ss->s[i].est > 0)) continue;
        r[n] = ss->s[i].est / ss->s[i].meas;
        l[n] = fabs(log(r[n]));
        in2 += l[n] <= log(2.0);
        n++;
    }
    *count = n;
    *within2 = n ? (double)in2 / n : 0;
    *med_ratio = median(r, n);
    *med_abs_log = median(l, n);
    free(r);
    free(l);
}

static void report(const char *title, const samples *ss) {
    printf("\n%s\n  %-22s %5s %12s %14s %10s %10s\n", title, "op", "n", "median est/m", "median|ln err|",
           "within 2x", "sum est/m");
    char seen[64][32];
    int n_seen = 0;
    for (int i = 0; i < ss->n && n_seen < 64; i++) {
        bool dup = false;
        for (int j = 0; j < n_seen && !dup; j++) dup = !strcmp(seen[j], ss->s[i].op);
        if (!dup) snprintf(seen[n_seen++], sizeof seen[0], "%s", ss->s[i].op);
    }
    for (int j = 0; j <= n_seen; j++) {
        const char *op = j < n_seen ? seen[j] : NULL;
        int n;
        double mr, ml, w2, se = 0, sm = 0;
        stats(ss, op, &n, &mr, &ml, &w2);
        for (int i = 0; i < ss->n; i++)
            if (!op || !strcmp(ss->s[i].op, op)) se += ss->s[i].est, sm += ss->s[i].meas;
        char sum[32];
        if (sm > 0) snprintf(sum, sizeof sum, "%10.3f", se / sm);
        else snprintf(sum, sizeof sum, "%10s", "-"); /* measured total <= 0: noise larger than the effect */
        printf("  %-22s %5d %12.3f %14.3f %9.0f%% %s\n", op ? op : "ALL", n, mr, ml, 100 * w2, sum);
    }
}

/* ---- per model ------------------------------------------------------------------------------ */

static int only_consumer(const af_graph *g, int v) {
    int found = -1, n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] == v) found = i, n++;
    return n == 1 ? found : -1;
}

/* Anchor (Conv, MatMul, Gemm) + the chain of single-consumer elementwise nodes after it. */
static void anchor_chains(const af_graph *g, af_fusion_candidates *cs) {
    for (int i = 0; i < g->n_nodes; i++) {
        af_op op = g->nodes[i].op;
        if (op != AF_OP_CONV && op != AF_OP_MAT_MUL && op != AF_OP_GEMM) continue;
        af_fusion_candidate c = {.family = op == AF_OP_CONV ? AF_FUSION_CONV_BN_RELU : AF_FUSION_MATMUL_ADD,
                                 .anchor = i, .n_nodes = 1};
        snprintf(c.rule, sizeof c.rule, "anchor_chain");
        c.nodes[0] = i;
        int v = g->nodes[i].outputs[0], next;
        while (c.n_nodes < 8 && !g->values[v].is_output && (next = only_consumer(g, v)) >= 0) {
            af_opclass cls = af_op_info(g->nodes[next].op)->cls;
            if (cls != AF_OPCLASS_ELEMENTWISE && cls != AF_OPCLASS_BROADCAST) break;
            c.nodes[c.n_nodes++] = next;
            v = g->nodes[next].outputs[0];
        }
        c.output = v;
        if (c.n_nodes > 1) af_fusion_candidates_push(cs, &c, NULL);
    }
}

/* Conv flavours run different kernels: " dw" (depthwise), " 1x1" (a plain GEMM), " kxk" (im2col). */
static const char *conv_kind(const af_graph *g, const af_node *n) {
    if (n->op != AF_OP_CONV || n->n_inputs < 2 || n->inputs[1] < 0) return "";
    const af_tensor *w = &g->values[n->inputs[1]].t;
    if (af_node_attr_int(n, "group", 1) > 1 && w->rank >= 2 && w->dims[1] == 1) return " dw";
    int64_t k = 1;
    for (int d = 2; d < w->rank; d++) k *= w->dims[d];
    return k == 1 ? " 1x1" : " kxk";
}

/* Times node i alone on kernel k (NULL: reference). */
static double time_node(const af_graph *g, int i, const af_kernel *k, af_threadpool *pool, void *ws) {
    const af_node *n = &g->nodes[i];
    if (n->n_inputs > MAX_IO || n->n_outputs > MAX_IO || n->op == AF_OP_IF || n->op == AF_OP_LOOP) return -1;
    af_tensor in_t[MAX_IO], out_t[MAX_IO];
    const af_tensor *ins[MAX_IO];
    af_tensor *outs[MAX_IO];
    double t = -1;
    int bound_in = 0, bound_out = 0;
    for (; bound_in < n->n_inputs; bound_in++) {
        int v = n->inputs[bound_in];
        ins[bound_in] = v >= 0 ? bind(g, v, &in_t[bound_in]) : NULL;
        if (v >= 0 && !ins[bound_in]) goto done;
    }
    for (; bound_out < n->n_outputs; bound_out++) {
        int v = n->outputs[bound_out];
        if (v < 0) {
            outs[bound_out] = NULL;
            continue;
        }
        out_t[bound_out] = g->values[v].t;
        out_t[bound_out].data = NULL;
        if (!af_tensor_shape_known(&out_t[bound_out]) || af_tensor_alloc(&out_t[bound_out], NULL) != AF_OK) goto done;
        outs[bound_out] = &out_t[bound_out];
    }
    af_error err;
    kernel_call c = {.k = k, .pool = pool, .ws = ws,
                     .ctx = {.node = n, .graph = g, .opset = g->opset, .n_inputs = n->n_inputs, .inputs = ins,
                             .n_outputs = n->n_outputs, .outputs = outs, .err = &err}};
    t = time_call(&c);
done:
    for (int k2 = 0; k2 < bound_in; k2++)
        if (n->inputs[k2] >= 0 && ins[k2]) unbind(g, n->inputs[k2], &in_t[k2]);
    for (int k2 = 0; k2 < bound_out; k2++)
        if (outs[k2]) af_tensor_free_data(&out_t[k2]);
    return t;
}

/* Times fused step s as run_fused in the executor does: the kernel node's inputs, the group's
 * output, residual vectors bound into the epilogue. */
static double time_fused(const af_graph *g, const af_step *s, af_threadpool *pool, void *ws) {
    const af_node *kn = s->kernel_node ? s->kernel_node : &g->nodes[s->anchor];
    if (kn->n_inputs > MAX_IO) return -1;
    af_tensor in_t[MAX_IO], out_t, res_t[AF_EPI_MAX_STEPS];
    const af_tensor *ins[MAX_IO];
    int bound = 0, n_res = 0;
    double t = -1;
    out_t = g->values[s->output].t;
    out_t.data = NULL;
    if (af_tensor_alloc(&out_t, NULL) != AF_OK) return -1;
    af_epilogue epi = s->epi;
    for (; bound < kn->n_inputs; bound++) {
        int v = kn->inputs[bound];
        ins[bound] = v >= 0 ? bind(g, v, &in_t[bound]) : NULL;
        if (v >= 0 && !ins[bound]) goto done;
    }
    for (; n_res < s->n_residuals; n_res++) {
        if (!bind(g, s->residual_value[n_res], &res_t[n_res])) goto done;
        epi.steps[s->residual_step[n_res]].p = res_t[n_res].data;
    }
    af_error err;
    af_tensor *outs[1] = {&out_t};
    kernel_call c = {.k = &s->kernel, .epi = epi.n_steps ? &epi : NULL, .pool = pool, .ws = ws,
                     .ctx = {.node = kn, .graph = g, .opset = g->opset, .n_inputs = kn->n_inputs, .inputs = ins,
                             .n_outputs = 1, .outputs = outs, .err = &err}};
    t = time_call(&c);
done:
    for (int k = 0; k < bound; k++)
        if (kn->inputs[k] >= 0 && ins[k]) unbind(g, kn->inputs[k], &in_t[k]);
    for (int r = 0; r < n_res; r++) unbind(g, s->residual_value[r], &res_t[r]);
    af_tensor_free_data(&out_t);
    return t;
}

/* Whole runs of an unfused session and of a default-config fused session (the fusion engine:
 * pattern -> cost -> sched), interleaved, the minimum of 7 each after a warm-up (us; -1 on failure). */
static void time_sessions(const af_model *m, double *unfused, double *fused) {
    const af_graph *g = m->graph;
    af_session *s[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        af_session_options o = af_session_options_default();
        o.n_threads = opt_threads;
        o.fusion_level = k == 0 ? 0 : -1;
        if (af_session_create(m, &o, &s[k], NULL) != AF_OK) s[k] = NULL;
    }
    af_tensor in[16];
    const char *names[16];
    int n = g->n_inputs < 16 ? g->n_inputs : 16;
    for (int i = 0; i < n; i++) {
        names[i] = g->values[g->inputs[i]].name;
        if (!bind(g, g->inputs[i], &in[i])) n = i;
    }
    double best[2] = {-1, -1};
    for (int k = 0; k < 2; k++)
        if (s[k] && af_session_run(s[k], n, names, in, NULL) == AF_OK) best[k] = 1e300;
    for (int r = 0; r < 7; r++)
        for (int k = 0; k < 2; k++) {
            if (best[k] < 0) continue;
            double t0 = now_us();
            af_session_run(s[k], n, names, in, NULL);
            double dt = now_us() - t0;
            if (dt < best[k]) best[k] = dt;
        }
    for (int i = 0; i < n; i++) unbind(g, g->inputs[i], &in[i]);
    af_session_free(s[0]);
    af_session_free(s[1]);
    *unfused = best[0];
    *fused = best[1];
}

/* The engine's decisions for the default config: the estimated saving of the groups it builds. */
static double predicted_saving(const af_graph *g, const af_hw_model *hw, int *n_groups) {
    af_fusion_config cfg;
    af_fusion_config_default(&cfg);
    af_exec_plan plan;
    af_fusion_result res;
    double saved = 0;
    *n_groups = 0;
    if (af_fusion_plan(g, &cfg, hw->isa, opt_threads, NULL, &plan, &res, NULL) != AF_OK) return -1;
    for (int i = 0; i < res.candidates.n; i++) {
        const af_fusion_candidate *c = &res.candidates.items[i];
        if (!c->accepted) continue;
        saved += c->est_time_unfused_us - c->est_time_fused_us;
        (*n_groups)++;
    }
    af_fusion_result_free(&res);
    af_exec_plan_free(&plan);
    return saved;
}

static void check_model(const char *path, const af_hw_model *hw, samples *nodes, samples *fused, samples *saved,
                        samples *models, samples *model_saved) {
    af_model *m = NULL;
    af_error err = {0};
    if (af_model_load(path, NULL, &m, &err) != AF_OK) {
        printf("%s: %s\n", path, err.message);
        return;
    }
    const af_graph *g = m->graph;
    af_threadpool *pool = NULL;
    if (opt_threads > 1) af_threadpool_create(opt_threads, &pool);
    af_exec_plan plain = {0}, fplan = {0};
    af_fusion_candidates cs = {0};
    const af_kernel_choice kernels = {.isa = hw->isa, .n_threads = opt_threads};
    if (af_exec_plan_unfused(g, &kernels, false, NULL, &plain, &err) != AF_OK) {
        printf("%s: %s\n", path, err.message);
        goto done;
    }
    anchor_chains(g, &cs);
    af_fusion_config cfg;
    af_fusion_config_default(&cfg);
    cfg.fusion_level = 3;
    for (int f = 0; f < AF_FUSION_FAMILY_COUNT; f++) cfg.policy[f] = AF_POLICY_ALWAYS; /* time every group */
    af_cost_evaluate(g, hw, &cfg, &cs, &err);
    af_sched_options so = {.kernels = kernels, .fusion_level = 3};
    if (af_sched_build(g, &cs, &so, &fplan, &err) != AF_OK) {
        printf("%s: sched: %s\n", path, err.message);
        goto done;
    }
    size_t ws_bytes = plain.workspace_bytes > fplan.workspace_bytes ? plain.workspace_bytes : fplan.workspace_bytes;
    void *ws = ws_bytes ? af_malloc_aligned(ws_bytes) : NULL;
    double *meas = calloc((size_t)g->n_nodes + 1, sizeof *meas);
    double sum_est = 0, sum_meas = 0;
    int n_fast = 0, n_ref = 0, n_skip = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const af_kernel *k = plain.steps[i].kernel.run ? &plain.steps[i].kernel : NULL;
        af_node_cost nc;
        af_cost_node(g, hw, i, &nc);
        double t = time_node(g, i, k, pool, ws);
        meas[i] = t;
        sum_est += nc.time_us;
        if (t < 0) {
            n_skip++;
            continue;
        }
        sum_meas += t;
        /* the roofline part only: the per-kernel overhead is the executor's, not the kernel's */
        double est = nc.time_us - hw->kernel_overhead_us;
        char op[32];
        snprintf(op, sizeof op, "%s%s%s", g->nodes[i].op_type, conv_kind(g, &g->nodes[i]), k ? "" : " (ref)");
        k ? n_fast++ : n_ref++;
        add_sample(nodes, op, est, t);
        if (opt_verbose)
            printf("  node %-40.40s %-22s flops %10.3g bytes %10.3g est %9.2f us meas %9.2f us ratio %.2f\n",
                   g->nodes[i].name, op, nc.flops, nc.bytes, est, t, t > 0 ? est / t : 0);
    }
    int n_groups = 0;
    for (int s = 0; s < fplan.n_steps; s++) {
        const af_step *st = &fplan.steps[s];
        if (st->output < 0) continue;
        const af_fusion_candidate *c = NULL;
        for (int k = 0; k < cs.n && !c; k++)
            if (cs.items[k].accepted && cs.items[k].anchor == st->anchor) c = &cs.items[k];
        if (!c) continue;
        double t = time_fused(g, st, pool, ws);
        if (t < 0) continue;
        double unf = 0;
        bool all = true;
        for (int j = 0; j < c->n_nodes; j++) {
            unf += meas[c->nodes[j]];
            all = all && meas[c->nodes[j]] >= 0;
        }
        char op[32];
        snprintf(op, sizeof op, "%s%s+%d", g->nodes[st->anchor].op_type, conv_kind(g, &g->nodes[st->anchor]),
                 c->n_nodes - 1);
        double est = c->est_time_fused_us - hw->kernel_overhead_us;
        add_sample(fused, op, est, t);
        /* savings include the per-step overhead of the nodes that no longer run as their own step */
        /* only where the saving stands out of the timing noise (a few % of a kernel) */
        if (all && c->est_time_unfused_us - c->est_time_fused_us >= 0.05 * c->est_time_unfused_us) {
            double est_saved = c->est_time_unfused_us - c->est_time_fused_us;
            double meas_saved = unf - t + (c->n_nodes - 1) * hw->kernel_overhead_us;
            add_sample(saved, op, est_saved, meas_saved);
        }
        if (opt_verbose)
            printf("  fused %-39.39s %-22s est %9.2f us meas %9.2f us (unfused meas %9.2f, est saved %.2f)\n",
                   g->nodes[st->anchor].name, op, est, t, unf, c->est_time_unfused_us - c->est_time_fused_us);
        n_groups++;
    }
    double sess, sess_fused;
    time_sessions(m, &sess, &sess_fused);
    int n_engine = 0;
    double pred = predicted_saving(g, hw, &n_engine);
    const char *slash = strrchr(path, '/');
    char name[64];
    snprintf(name, sizeof name, "%.*s", slash ? (int)(slash - path) : (int)strlen(path), path);
    const char *base = strrchr(name, '/');
    printf("%s: %d nodes (%d fast, %d reference, %d not timed), %d fused groups; sum of kernels: est %.0f us, "
           "measured %.0f us; session run %.0f us (%.2f us per step beyond the kernels)\n",
           base ? base + 1 : name, g->n_nodes, n_fast, n_ref, n_skip, n_groups, sum_est, sum_meas, sess,
           sess > 0 ? (sess - sum_meas) / g->n_nodes : 0);
    if (sess > 0) add_sample(models, base ? base + 1 : name, sum_est, sess);
    printf("  default fusion (%d groups built): session %.0f -> %.0f us, measured saving %.0f us, estimated %.0f us\n",
           n_engine, sess, sess_fused, sess - sess_fused, pred);
    if (sess > 0 && sess_fused > 0 && pred >= 0) add_sample(model_saved, base ? base + 1 : name, pred, sess - sess_fused);
    free(meas);
    af_free_aligned(ws);
done:
    af_exec_plan_free(&plain);
    af_exec_plan_free(&fplan);
    af_fusion_candidates_free(&cs);
    af_threadpool_free(pool);
    af_model_free(m);
}

static bool exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

int main(int argc, char **argv) {
    const char *paths[64];
    int n_paths = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) opt_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ms") && i + 1 < argc) opt_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--verbose")) opt_verbose = 1;
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: %s [--threads N] [--ms M] [--verbose] [model.onnx ...]\n", argv[0]);
            return 2;
        } else if (n_paths < 64) paths[n_paths++] = argv[i];
    }
    if (opt_threads < 1) opt_threads = 1;
    static const char *const defaults[] = {
        "tests/models/resnet_small/model.onnx",     "tests/models/mobilenet_v3_small/model.onnx",
        "tests/models/bert_tiny/model.onnx",        "build/models/resnet50/model.onnx",
        "build/models/mobilenet_v3_large/model.onnx", "build/models/bert_base/model.onnx",
    };
    if (!n_paths)
        for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
            if (exists(defaults[i])) paths[n_paths++] = defaults[i];
    af_hw_model hw;
    af_hw_model_probe(NULL, &hw, NULL);
    af_hw_model_scale_threads(&hw, opt_threads);
    printf("hardware: %s, %s, %d thread(s): peak %.1f GFLOP/s (%s); bandwidth L2 %.1f, L3 %.1f, DRAM %.1f GB/s "
           "per core, DRAM %.1f GB/s for %d thread(s) (%s); overhead %.1f us per kernel\n",
           hw.cpu_model, af_isa_name(hw.isa), hw.n_cores, hw.peak_gflops, af_hw_source_name(hw.peak_source),
           hw.bw_l2_core_gbs, hw.bw_l3_core_gbs, hw.bw_dram_core_gbs, hw.bandwidth_gbs, hw.n_cores,
           af_hw_source_name(hw.bandwidth_source), hw.kernel_overhead_us);
    samples nodes = {0}, fused = {0}, saved = {0}, models = {0}, model_saved = {0};
    for (int i = 0; i < n_paths; i++) check_model(paths[i], &hw, &nodes, &fused, &saved, &models, &model_saved);
    report("single nodes: roofline estimate (without the per-kernel overhead) vs the kernel alone", &nodes);
    report("fused groups: estimate vs the fused kernel", &fused);
    report("fused groups whose estimated saving is >= 5% of their time: estimated vs measured saving "
           "(unfused kernels + overheads - fused kernel)", &saved);
    report("whole models: summed unfused estimates (with overheads) vs one session run", &models);
    report("whole models: estimated saving of the default-config fusion plan vs measured (unfused - fused "
           "session run)", &model_saved);
    free(model_saved.s);
    free(nodes.s);
    free(fused.s);
    free(saved.s);
    free(models.s);
    return 0;
}
