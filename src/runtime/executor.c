#include "runtime/executor.h"

#include <string.h>

#include "ir/op_ctx.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/limits.h"

#define AF_MAX_NODE_IO 4096

static void drop(af_exec *e, int v) {
    if (e->owned[v]) af_tensor_free_data(&e->env[v]);
    e->owned[v] = false;
    e->env[v].data = NULL;
    e->env[v].nbytes = 0;
}

af_status af_exec_init(af_exec *e, const af_graph *g, af_exec *parent, af_error *err) {
    memset(e, 0, sizeof *e);
    e->g = g;
    e->parent = parent;
    if (parent) e->limits = parent->limits;
    size_t nv = (size_t)(g->n_values ? g->n_values : 1);
    e->env = af_calloc(nv, sizeof *e->env);
    e->owned = af_calloc(nv, sizeof *e->owned);
    if (!e->env || !e->owned) {
        af_exec_release(e);
        return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory starting a run");
    }
    for (int v = 0; v < g->n_values; v++) {
        const af_value *val = &g->values[v];
        if (val->kind == AF_VALUE_CONST || (val->kind == AF_VALUE_INPUT && val->has_default)) e->env[v] = val->t;
        else if (val->kind == AF_VALUE_OUTER && parent) e->env[v] = parent->env[val->outer_id];
        else af_shape_copy(&e->env[v], &val->t);
    }
    return AF_OK;
}

void af_exec_release(af_exec *e) {
    for (int v = 0; e->env && e->owned && v < e->g->n_values; v++)
        if (e->owned[v]) af_tensor_free_data(&e->env[v]);
    af_free(e->env);
    af_free(e->owned);
    memset(e, 0, sizeof *e);
}

static af_status run_subgraph(af_exec *parent, const af_graph *g, int n_in, const af_tensor *const *in, int n_out,
                              af_tensor *outs, af_error *err) {
    const af_node *caller = parent->running;
    if (caller && caller->op == AF_OP_LOOP) {
        int64_t max_iter = parent->limits ? parent->limits->max_loop_iterations : af_limits_default().max_loop_iterations;
        if (++parent->loop_iterations > max_iter)
            return af_errorf(err, AF_ERR_LIMIT, "node '%s' (Loop): more than %lld iterations (max_loop_iterations)",
                             caller->name, (long long)max_iter);
    }
    if (n_in > g->n_inputs || n_out > g->n_outputs)
        return af_errorf(err, AF_ERR_RUNTIME, "subgraph '%s' takes %d inputs and %d outputs, called with %d and %d",
                         g->name ? g->name : "", g->n_inputs, g->n_outputs, n_in, n_out);
    af_exec e;
    af_status st = af_exec_init(&e, g, parent, err);
    if (st != AF_OK) return st;
    /* The body's own plan, if the session made one: the running If/Loop step uses neither the
     * pool nor the workspace while its body runs. */
    const af_subplan *sp = af_subplans_find(parent->subplans, g);
    if (sp) {
        e.plan = &sp->plan;
        e.lifetimes = &sp->lifetimes;
        e.pool = parent->pool;
        e.workspace = parent->workspace;
    }
    e.subplans = parent->subplans;
    for (int k = 0; k < n_in; k++) e.env[g->inputs[k]] = *in[k];
    st = af_exec_run(&e, err);
    int taken = 0;
    for (; st == AF_OK && taken < n_out; taken++) st = af_exec_take(&e, g->outputs[taken], &outs[taken], err);
    if (st != AF_OK)
        for (int k = 0; k < taken; k++) af_tensor_free_data(&outs[k]);
    af_exec_release(&e);
    return st;
}

/* Graph output v reuses the buffer it had in the caller's previous run when that is large enough:
 * a fresh allocation of a large output costs page faults and zeroing on every run (2% of a
 * BERT-base run). Zeroed like a fresh one. */
static bool take_spare(af_exec *e, int v, size_t bytes) {
    for (int i = 0; i < e->g->n_outputs; i++) {
        af_tensor *sp = &e->spare_outputs[i];
        if (e->g->outputs[i] != v || !sp->data || sp->nbytes < bytes) continue;
        e->env[v].data = sp->data;
        e->env[v].nbytes = bytes;
        e->owned[v] = true;
        sp->data = NULL;
        sp->nbytes = 0;
        memset(e->env[v].data, 0, bytes);
        return true;
    }
    return false;
}

/* Allocates value v with its freshly inferred shape: in the arena where the memory plan sized it
 * for exactly this many bytes, else on the heap. */
static af_status place_output(af_exec *e, int v, af_error *err) {
    af_tensor *t = &e->env[v];
    int64_t numel = af_tensor_numel(t);
    size_t es = af_dtype_size(t->dtype);
    if (numel < 0) return AF_ERR_RUNTIME;
    size_t bytes;
    uint64_t max_bytes = e->limits ? e->limits->max_tensor_bytes : af_limits_default().max_tensor_bytes;
    if ((uint64_t)numel > SIZE_MAX || !af_mul_size((size_t)numel, es, &bytes) || bytes > max_bytes) {
        char shape[128];
        return af_errorf(err, AF_ERR_LIMIT, "output '%s' is %s, over the limit of %llu bytes (max_tensor_bytes)",
                         e->g->values[v].name, af_tensor_shape_str(t, shape, sizeof shape),
                         (unsigned long long)max_bytes);
    }
    const af_memory_plan *mp = e->memory;
    const af_value *val = &e->g->values[v];
    /* A dynamic value (no static size) fits any slot at least its size: an elastic plan's. */
    const bool dynamic = val->kind == AF_VALUE_NODE && !val->is_output && af_tensor_numel(&val->t) < 0;
    const size_t rounded = (bytes + 63) & ~(size_t)63;
    if (dynamic && e->observed && bytes > e->observed[v]) e->observed[v] = bytes;
    if (mp && e->arena && mp->offset[v] >= 0 && (rounded == mp->size[v] || (dynamic && rounded <= mp->size[v]))) {
        t->data = e->arena + mp->offset[v];
        t->nbytes = bytes;
        e->owned[v] = false;
        return AF_OK;
    }
    if (dynamic && e->outgrown && bytes) *e->outgrown = true;
    if (e->spare_outputs && e->g->values[v].is_output && take_spare(e, v, bytes)) return AF_OK;
    af_status st = af_tensor_alloc(t, err);
    if (st == AF_OK) e->owned[v] = true;
    return st;
}

/* Runs node n's shape function on the current tensors, so its outputs carry this run's shapes. */
static af_status infer_node(af_exec *e, const af_node *n, af_op_ctx *c, const af_tensor **ins, af_tensor **outs,
                            af_error *err) {
    const af_graph *g = e->g;
    if (n->n_inputs > AF_MAX_NODE_IO || n->n_outputs > AF_MAX_NODE_IO)
        return af_errorf(err, AF_ERR_LIMIT, "node '%s' has too many inputs or outputs", n->name);
    for (int k = 0; k < n->n_inputs; k++) ins[k] = n->inputs[k] >= 0 ? &e->env[n->inputs[k]] : NULL;
    for (int k = 0; k < n->n_outputs; k++) {
        outs[k] = n->outputs[k] >= 0 ? &e->env[n->outputs[k]] : NULL;
        if (outs[k]) drop(e, n->outputs[k]);
    }
    *c = (af_op_ctx){.node = n, .graph = g, .opset = g->opset, .n_inputs = n->n_inputs, .inputs = ins,
                     .n_outputs = n->n_outputs, .outputs = outs, .err = err, .exec = e, .run_subgraph = run_subgraph};
    af_status st = af_op_info(n->op)->infer(c);
    if (st == AF_ERR_INVALID_MODEL) { /* the same check on run-time data is a bad input, not a bad file */
        if (err) err->status = AF_ERR_RUNTIME;
        return AF_ERR_RUNTIME;
    }
    for (int k = 0; k < n->n_outputs; k++)
        if (outs[k]) outs[k]->data = NULL;
    return st;
}

static af_status place(af_exec *e, const af_node *n, int v, af_error *err) {
    af_status st = place_output(e, v, err);
    if (st == AF_ERR_RUNTIME)
        return af_errorf(err, AF_ERR_RUNTIME, "node '%s' (%s): the shape of output '%s' is unknown", n->name,
                         n->op_type, e->g->values[v].name);
    if (st != AF_OK) return af_error_prefix(err, st, "node '%s' (%s)", n->name, n->op_type);
    return AF_OK;
}

/* One node on its own: fast kernel k if given, else the reference kernel. */
static af_status run_single(af_exec *e, const af_node *n, const af_kernel *k, af_error *err) {
    const af_tensor *ins[AF_MAX_NODE_IO];
    af_tensor *outs[AF_MAX_NODE_IO];
    af_op_ctx c;
    af_status st = infer_node(e, n, &c, ins, outs, err);
    if (st != AF_OK) return st;
    bool self_alloc = n->op == AF_OP_IF || n->op == AF_OP_LOOP;
    for (int j = 0; j < n->n_outputs && !self_alloc; j++)
        if (outs[j] && (st = place(e, n, n->outputs[j], err)) != AF_OK) return st;
    const af_node *was_running = e->running;
    e->running = n;
    e->loop_iterations = 0;
    st = k && k->run ? k->run(k, &c, NULL, e->pool, e->workspace) : af_op_info(n->op)->run(&c);
    e->running = was_running;
    if (self_alloc)
        for (int j = 0; j < n->n_outputs; j++)
            if (outs[j] && outs[j]->data) e->owned[n->outputs[j]] = true;
    return st;
}

/* A fused step: infer every node of the group (intermediates get shapes, never data), allocate
 * the group's output, and run the one kernel on the anchor's inputs with the fused epilogue. */
static af_status run_fused(af_exec *e, const af_step *s, af_error *err) {
    const af_graph *g = e->g;
    const af_tensor *ins[AF_MAX_NODE_IO];
    af_tensor *outs[AF_MAX_NODE_IO];
    af_op_ctx c;
    for (int i = 0; i < s->n_nodes; i++) {
        af_status st = infer_node(e, &g->nodes[s->nodes[i]], &c, ins, outs, err);
        if (st != AF_OK) return st;
    }
    const af_node *kn = s->kernel_node ? s->kernel_node : &g->nodes[s->anchor];
    af_status st = place(e, kn, s->output, err);
    if (st != AF_OK) return st;
    for (int k = 0; k < kn->n_inputs; k++) ins[k] = kn->inputs[k] >= 0 ? &e->env[kn->inputs[k]] : NULL;
    af_tensor *out = &e->env[s->output];
    c = (af_op_ctx){.node = kn, .graph = g, .opset = g->opset, .n_inputs = kn->n_inputs, .inputs = ins,
                    .n_outputs = 1, .outputs = &out, .err = err, .exec = e, .run_subgraph = run_subgraph};
    af_epilogue epi = s->epi;
    for (int r = 0; r < s->n_residuals; r++) {
        const af_tensor *t = &e->env[s->residual_value[r]];
        if (!af_tensor_same_shape(t, out))
            return af_errorf(err, AF_ERR_RUNTIME, "fused group at node '%s': residual '%s' does not match the output",
                             kn->name, g->values[s->residual_value[r]].name);
        af_epi_step *step = &epi.steps[s->residual_step[r]];
        step->p = t->data;
        if (step->ld < 0) { /* a convolution's plane of symbolic size: [N, C, H, W] or [N, C, L] */
            step->ld = out->rank == 4 ? out->dims[2] * out->dims[3] : out->rank == 3 ? out->dims[2] : -1;
            step->batch_stride = out->rank >= 3 ? out->dims[1] * step->ld : -1;
            if (step->ld < 0)
                return af_errorf(err, AF_ERR_RUNTIME, "fused group at node '%s': its output is not [N, C, H, W]",
                                 kn->name);
        }
        if (step->batch_stride < 0) step->batch_stride = out->dims[out->rank - 2] * out->dims[out->rank - 1];
    }
    return s->kernel.run(&s->kernel, &c, epi.n_steps ? &epi : NULL, e->pool, e->workspace);
}

/* The flops of a step's contractions (Conv, ConvTranspose, MatMul, Gemm, in their direct form) at
 * the shapes this run gave its values: the profile's GFLOP/s, which static shapes cannot give
 * where they are symbolic. The other ops' "one per element" would make a rate of bytes look like
 * one of arithmetic. */
static double step_flops(const af_exec *e, const af_step *s) {
    double f = 0;
    for (int k = 0; k < s->n_nodes; k++) {
        const af_node *n = &e->g->nodes[s->nodes[k]];
        if (n->op != AF_OP_CONV && n->op != AF_OP_CONV_TRANSPOSE && n->op != AF_OP_MAT_MUL && n->op != AF_OP_GEMM)
            continue;
        const af_tensor *io[4] = {NULL, NULL, NULL, NULL}; /* inputs 0..2, output 0 */
        for (int i = 0; i < 3 && i < n->n_inputs; i++) io[i] = n->inputs[i] >= 0 ? &e->env[n->inputs[i]] : NULL;
        if (n->n_outputs > 0 && n->outputs[0] >= 0) io[3] = &e->env[n->outputs[0]];
        f += af_node_flops_of(n, io[0], io[1], io[2], io[3]);
    }
    return f;
}

/* The pool's threads' idle time in a step of `ms` wall time (see af_pool_times): the workers'
 * time outside its jobs' tasks, and the caller's waits in them. */
static double idle_ms(const af_exec *e, const af_pool_times *before, double ms) {
    const int T = af_threadpool_n_threads(e->pool);
    const double wait = (double)(e->pool_times->caller_wait_ns - before->caller_wait_ns) * 1e-6;
    const double busy = (double)(e->pool_times->workers_busy_ns - before->workers_busy_ns) * 1e-6;
    const double idle = ms * (T - 1) + wait - busy;
    return idle > 0 ? idle : 0;
}

af_status af_exec_run(af_exec *e, af_error *err) {
    const af_graph *g = e->g;
    for (int v = 0; v < g->n_values; v++) {
        const af_value *val = &g->values[v];
        if (val->kind == AF_VALUE_INPUT && !e->env[v].data && af_tensor_numel(&e->env[v]) != 0)
            return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "graph input '%s' was not given", val->name);
    }
    int n_steps = e->plan ? e->plan->n_steps : g->n_nodes;
    int reads[AF_MAX_NODE_IO];
    for (int i = 0; i < n_steps; i++) {
        const af_step *s = e->plan ? &e->plan->steps[i] : NULL;
        af_status st;
        double t0 = e->step_ms ? af_now_ms() : 0;
        const af_pool_times pt0 = e->pool_times ? *e->pool_times : (af_pool_times){0, 0};
        if (!s) st = run_single(e, &g->nodes[i], NULL, err);
        else if (s->output < 0) st = run_single(e, &g->nodes[s->anchor], &s->kernel, err);
        else st = run_fused(e, s, err);
        if (e->step_ms) {
            const double ms = af_now_ms() - t0;
            e->step_ms[i] += ms;
            if (e->step_idle_ms && e->pool_times) e->step_idle_ms[i] += idle_ms(e, &pt0, ms);
            if (e->step_flops && s && st == AF_OK) e->step_flops[i] += step_flops(e, s);
        }
        if (st != AF_OK) return st;
        if (!s || !e->lifetimes) continue;
        /* Free heap values whose last reader just ran. */
        int n = af_step_reads(g, s, reads, AF_MAX_NODE_IO);
        for (int k = 0; k < n; k++)
            if (e->owned[reads[k]] && e->lifetimes->last[reads[k]] == i) drop(e, reads[k]);
    }
    return AF_OK;
}

af_status af_exec_take(af_exec *e, int v, af_tensor *out, af_error *err) {
    if (e->owned[v]) {
        *out = e->env[v];
        e->owned[v] = false;
        e->env[v].data = NULL;
        return AF_OK;
    }
    if (!e->env[v].data && af_tensor_numel(&e->env[v]) != 0)
        return af_errorf(err, AF_ERR_RUNTIME, "output '%s' was not computed", e->g->values[v].name);
    return af_tensor_copy(out, &e->env[v], err);
}
