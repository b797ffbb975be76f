/* Sessions: a model bound to a memory plan, run through the executor. */
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "ir/model.h"
#include "ir/tensor.h"
#include "fusion/config.h"
#include "fusion/engine.h"
#include "runtime/executor.h"
#include "runtime/plan.h"
#include "runtime/profile.h"
#include "runtime/memory_plan.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/limits.h"

struct af_session {
    const af_model *model;
    af_model *owned_model; /* freed with the session (af_session_create_owning) */
    af_session_options opts;
    af_exec_plan plan;
    af_lifetimes lifetimes;
    af_memory_plan memory;
    uint8_t *arena;
    int n_outputs;
    af_tensor *outputs; /* the last run's outputs, owned */
    af_isa isa;
    af_threadpool *pool;
    void *workspace;    /* the largest scratch any kernel needs */
    af_fusion_result fusion; /* how the plan was fused */
    af_limits limits;   /* the model's, with the session options' non-zero fields */
    atomic_flag running; /* set while af_session_run runs: a second, overlapping call is refused */
    double *profile_ms;  /* per step, summed over profiled runs; NULL while profiling is off */
    int profile_runs;
};

af_session_options af_session_options_default(void) {
    return (af_session_options){.n_threads = 0, .fusion_level = -1, .reference_kernels = 0, .isa = NULL};
}

void af_session_free(af_session *s) {
    if (!s) return;
    for (int i = 0; s->outputs && i < s->n_outputs; i++) af_tensor_free_data(&s->outputs[i]);
    af_free(s->outputs);
    af_free(s->profile_ms);
    af_exec_plan_free(&s->plan);
    af_fusion_result_free(&s->fusion);
    af_lifetimes_free(&s->lifetimes);
    af_free_aligned(s->workspace);
    af_threadpool_free(s->pool);
    af_memory_plan_free(&s->memory);
    af_model_free(s->owned_model);
    af_free_aligned(s->arena);
    af_free(s);
}

af_status af_session_create(const af_model *model, const af_session_options *opts, af_session **out, af_error *err) {
    if (!model || !out) return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "af_session_create: NULL argument");
    *out = NULL;
    af_session_options defaults = af_session_options_default();
    if (!opts) opts = &defaults;
    if (opts->n_threads < 0) return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "n_threads must be >= 0");
    if (opts->fusion_level < -1 || opts->fusion_level > 3)
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "fusion_level must be -1 (from the config) or 0 to 3, not %d",
                         opts->fusion_level);
    const af_graph *g = model->graph;
    af_session *s = af_calloc(1, sizeof *s);
    if (!s) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory creating a session");
    s->model = model;
    s->opts = *opts;
    atomic_flag_clear(&s->running);
    af_limits_override(&model->limits, &opts->limits, &s->limits);
    s->n_outputs = g->n_outputs;
    s->outputs = af_calloc((size_t)(g->n_outputs ? g->n_outputs : 1), sizeof *s->outputs);
    af_status st = AF_OK;
    if (!s->outputs) {
        st = af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory creating a session");
        goto fail;
    }
    s->isa = af_cpu_isa();
    if (opts->isa && *opts->isa) {
        int want = af_isa_parse(opts->isa);
        if (want < 0) {
            st = af_errorf(err, AF_ERR_INVALID_ARGUMENT, "isa '%s' is not one of avx512, avx2, scalar", opts->isa);
            goto fail;
        }
        s->isa = af_cpu_isa_clamp((af_isa)want);
    }
    if ((st = af_threadpool_create(opts->n_threads, &s->pool)) != AF_OK) {
        af_errorf(err, st, "cannot start %d threads", opts->n_threads);
        goto fail;
    }
    int n_threads = af_threadpool_n_threads(s->pool);
    af_fusion_config cfg;
    af_fusion_config_default(&cfg);
    if (opts->config_path && (st = af_fusion_config_load_file(opts->config_path, &cfg, err)) != AF_OK) {
        af_fusion_config_free(&cfg);
        goto fail;
    }
    if (opts->fusion_level >= 0) cfg.fusion_level = opts->fusion_level;
    if (opts->reference_kernels) cfg.fusion_level = 0; /* the oracle runs every node as written */
    if (cfg.fusion_level == 0 || opts->reference_kernels)
        st = af_exec_plan_unfused(g, s->isa, n_threads, opts->reference_kernels != 0, &s->plan, err);
    else
        st = af_fusion_plan(g, &cfg, s->isa, n_threads, &s->plan, &s->fusion, err);
    uint64_t max_mem = cfg.max_mem_usage;
    af_fusion_config_free(&cfg);
    if (st != AF_OK) goto fail;
    if ((st = af_lifetimes_compute(g, &s->plan, &s->lifetimes, err)) != AF_OK) goto fail;
    if ((st = af_memory_plan_build(g, &s->lifetimes, &s->memory, err)) != AF_OK) goto fail;
    /* Both caps are checked before anything that size is allocated. */
    size_t need = s->memory.arena_bytes + s->plan.workspace_bytes;
    if (need < s->memory.arena_bytes || need > s->limits.max_activation_bytes) {
        st = af_errorf(err, AF_ERR_LIMIT,
                       "the plan needs %zu bytes of activations and %zu of scratch; the limit is %llu (max_activation_bytes)",
                       s->memory.arena_bytes, s->plan.workspace_bytes,
                       (unsigned long long)s->limits.max_activation_bytes);
        goto fail;
    }
    if (max_mem && need > max_mem) {
        st = af_errorf(err, AF_ERR_LIMIT,
                       "the plan needs %zu bytes of activations and scratch; resource_constraints.max_mem_usage is %llu",
                       need, (unsigned long long)max_mem);
        goto fail;
    }
    if (s->memory.arena_bytes && !(s->arena = af_malloc_aligned(s->memory.arena_bytes))) {
        st = af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory: the activation arena needs %zu bytes",
                       s->memory.arena_bytes);
        goto fail;
    }
    if (s->plan.workspace_bytes && !(s->workspace = af_malloc_aligned(s->plan.workspace_bytes))) {
        st = af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory: kernels need %zu bytes of scratch",
                       s->plan.workspace_bytes);
        goto fail;
    }
    *out = s;
    return AF_OK;
fail:
    af_session_free(s);
    return st;
}

/* Frees the model's data of constants that every reader holds packed: the packed copy replaces
 * the original instead of sitting beside it. The value keeps its shape, which kernels still read. */
static void release_packed_weights(af_session *s) {
    af_graph *g = s->owned_model->graph;
    for (int v = 0; v < g->n_values; v++) {
        af_value *val = &g->values[v];
        if (val->kind != AF_VALUE_CONST || !val->t.data || val->is_output) continue;
        bool all_packed = true, read = false;
        for (int i = 0; i < s->plan.n_steps && all_packed; i++) {
            const af_step *st = &s->plan.steps[i];
            for (int j = 0; j < st->n_nodes && all_packed; j++) {
                const af_node *n = &g->nodes[st->nodes[j]];
                for (int k = 0; k < n->n_inputs; k++) {
                    if (n->inputs[k] != v) continue;
                    read = true;
                    /* Only the anchor's own kernel holds packed copies; a fused group's other
                     * nodes were compiled into the epilogue, which keeps no pointer into W. */
                    bool packed = st->nodes[j] == st->anchor && !st->kernel_node && k < 32 &&
                                  (st->kernel.packed_inputs >> k & 1u);
                    if (!packed) all_packed = false;
                }
                for (int a = 0; a < n->n_attrs; a++) /* read by a subgraph */
                    for (int q = 0; n->attrs[a].g && q < n->attrs[a].g->n_values; q++)
                        if (n->attrs[a].g->values[q].kind == AF_VALUE_OUTER && n->attrs[a].g->values[q].outer_id == v)
                            all_packed = false;
            }
        }
        if (read && all_packed) af_tensor_free_data(&val->t);
    }
}

af_status af_session_create_owning(af_model *model, const af_session_options *opts, af_session **out,
                                   af_error *err) {
    af_status st = af_session_create(model, opts, out, err);
    if (st != AF_OK) return st;
    (*out)->owned_model = model;
    release_packed_weights(*out);
    return AF_OK;
}

static af_status check_input(const af_session *s, const af_value *decl, const af_tensor *t, af_error *err) {
    char want[128], got[128];
    if (t->rank < 0 || t->rank > s->limits.max_rank)
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "input '%s' has invalid rank %d (at most %d)", decl->name,
                         t->rank, s->limits.max_rank);
    if (!t->data && af_tensor_numel(t) != 0)
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "input '%s' has no data", decl->name);
    if (af_dtype_size(t->dtype) == 0)
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "input '%s' has unsupported dtype %s (%d)", decl->name,
                         af_dtype_name(t->dtype), (int)t->dtype);
    if (af_tensor_numel(t) < 0)
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "input '%s' has invalid dims %s", decl->name,
                         af_tensor_shape_str(t, got, sizeof got));
    bool ok = decl->t.dtype == AF_DTYPE_UNDEFINED || decl->t.dtype == t->dtype;
    if (ok && decl->t.rank >= 0) {
        ok = decl->t.rank == t->rank;
        for (int d = 0; ok && d < t->rank; d++) ok = decl->t.dims[d] < 0 || decl->t.dims[d] == t->dims[d];
    }
    if (!ok)
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "input '%s' is %s, the model expects %s", decl->name,
                         af_tensor_shape_str(t, got, sizeof got), af_tensor_shape_str(&decl->t, want, sizeof want));
    size_t need;
    if (!af_mul_size((size_t)af_tensor_numel(t), af_dtype_size(t->dtype), &need))
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "input '%s': dims overflow", decl->name);
    if (t->nbytes && t->nbytes < need)
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "input '%s' holds %zu bytes, its shape needs %zu", decl->name,
                         t->nbytes, need);
    return AF_OK;
}

static af_status run_locked(af_session *s, int n_inputs, const char *const *names, const af_tensor *inputs,
                            af_error *err);

af_status af_session_run(af_session *s, int n_inputs, const char *const *names, const af_tensor *inputs,
                         af_error *err) {
    if (!s || (n_inputs > 0 && (!names || !inputs)) || n_inputs < 0)
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "af_session_run: NULL argument");
    if (atomic_flag_test_and_set(&s->running))
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT,
                         "af_session_run: the session is already running on another thread (use one session per thread)");
    af_status st = run_locked(s, n_inputs, names, inputs, err);
    atomic_flag_clear(&s->running);
    return st;
}

static af_status run_locked(af_session *s, int n_inputs, const char *const *names, const af_tensor *inputs,
                            af_error *err) {
    const af_graph *g = s->model->graph;
    af_exec e;
    af_status st = af_exec_init(&e, g, NULL, err);
    if (st != AF_OK) return st;
    e.limits = &s->limits;
    e.plan = &s->plan;
    e.lifetimes = &s->lifetimes;
    e.memory = &s->memory;
    e.arena = s->arena;
    e.pool = s->pool;
    e.workspace = s->workspace;
    for (int i = 0; i < n_inputs; i++) {
        int v = names[i] ? af_graph_find_value(g, names[i]) : -1;
        if (v < 0 || g->values[v].kind != AF_VALUE_INPUT) {
            st = af_errorf(err, AF_ERR_INVALID_ARGUMENT, "'%s' is not an input of the model", names[i] ? names[i] : "(null)");
            goto done;
        }
        if ((st = check_input(s, &g->values[v], &inputs[i], err)) != AF_OK) goto done;
        for (int j = 0; j < i; j++)
            if (names[j] && strcmp(names[j], names[i]) == 0) {
                st = af_errorf(err, AF_ERR_INVALID_ARGUMENT, "input '%s' is given twice", names[i]);
                goto done;
            }
        e.env[v] = inputs[i];
        e.env[v].nbytes = (size_t)af_tensor_numel(&inputs[i]) * af_dtype_size(inputs[i].dtype);
    }
    e.step_ms = s->profile_ms;
    if ((st = af_exec_run(&e, err)) != AF_OK) goto done;
    if (s->profile_ms) s->profile_runs++;
    for (int i = 0; i < s->n_outputs; i++) af_tensor_free_data(&s->outputs[i]);
    for (int i = 0; i < s->n_outputs; i++)
        if ((st = af_exec_take(&e, g->outputs[i], &s->outputs[i], err)) != AF_OK) goto done;
done:
    af_exec_release(&e);
    return st;
}

int af_session_n_outputs(const af_session *s) { return s ? s->n_outputs : 0; }

const af_tensor *af_session_output(const af_session *s, int i) {
    return s && i >= 0 && i < s->n_outputs && s->outputs[i].data ? &s->outputs[i] : NULL;
}

const char *af_session_output_name(const af_session *s, int i) {
    if (!s || i < 0 || i >= s->n_outputs) return NULL;
    return s->model->graph->values[s->model->graph->outputs[i]].name;
}

size_t af_session_arena_bytes(const af_session *s) { return s ? s->memory.arena_bytes : 0; }

void af_session_fusion_report(const af_session *s, FILE *out) {
    if (!s || !out) return;
    if (s->plan.fusion_level == 0 && !s->fusion.candidates.n) {
        fprintf(out, "fusion level 0: no fusion (%d steps)\n", s->plan.n_steps);
        return;
    }
    af_fusion_report_write(s->model->graph, &s->fusion, out);
    fprintf(out, "plan: %d steps for %d nodes\n", s->plan.n_steps, s->model->graph->n_nodes);
}

double af_session_fusion_ms(const af_session *s) {
    return s ? s->fusion.pattern_ms + s->fusion.cost_ms + s->fusion.sched_ms : 0;
}

int af_session_n_steps(const af_session *s) { return s ? s->plan.n_steps : 0; }

uint64_t af_session_traffic_bytes(const af_session *s) {
    if (!s) return 0;
    const af_graph *g = s->model->graph;
    uint64_t total = 0;
    int vals[4096];
    for (int i = 0; i < s->plan.n_steps; i++) {
        const af_step *st = &s->plan.steps[i];
        for (int pass = 0; pass < 2; pass++) {
            int n = pass ? af_step_writes(g, st, vals, 4096) : af_step_reads(g, st, vals, 4096);
            for (int k = 0; k < n; k++) {
                const af_value *v = &g->values[vals[k]];
                int64_t numel = af_tensor_numel(&v->t);
                if (v->kind == AF_VALUE_CONST || numel < 0) continue; /* weights are not activations */
                total += (uint64_t)numel * af_dtype_size(v->t.dtype);
            }
        }
    }
    return total;
}

int af_session_fusion_level(const af_session *s) { return s ? s->plan.fusion_level : 0; }

const char *af_session_isa(const af_session *s) { return s ? af_isa_name(s->isa) : "unknown"; }

af_status af_session_set_profiling(af_session *s, int on, af_error *err) {
    if (!s) return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "af_session_set_profiling: NULL session");
    if (atomic_flag_test_and_set(&s->running))
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "af_session_set_profiling: the session is running");
    af_free(s->profile_ms);
    s->profile_ms = NULL;
    s->profile_runs = 0;
    af_status st = AF_OK;
    if (on && !(s->profile_ms = af_calloc((size_t)(s->plan.n_steps ? s->plan.n_steps : 1), sizeof *s->profile_ms)))
        st = af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory for the profile");
    atomic_flag_clear(&s->running);
    return st;
}

void af_session_profile_write(const af_session *s, FILE *out) {
    if (!s || !out) return;
    if (!s->profile_ms || !s->profile_runs) {
        fprintf(out, "no profile: turn profiling on and run first\n");
        return;
    }
    af_profile_write(s->model->graph, &s->plan, s->profile_ms, s->profile_runs, out);
}
