/* Sessions: a model bound to its current plan state, run through the executor. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "ir/model.h"
#include "ir/tensor.h"
#include "runtime/elastic_arena.h"
#include "runtime/executor.h"
#include "runtime/plan_slot.h"
#include "runtime/plan_state.h"
#include "runtime/profile.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/limits.h"

struct af_session {
    const af_model *model;
    af_model *owned_model; /* freed with the session (af_session_create_owning) */
    af_session_options opts;
    int n_outputs;
    af_tensor *outputs; /* the last run's outputs, owned */
    af_isa isa;
    af_threadpool *pool;
    af_limits limits;   /* the model's, with the session options' non-zero fields */
    af_plan_slot *slot; /* the current plan state; its own allocation so const accessors can acquire */
    pthread_mutex_t replan_lock; /* taken by replans only: they build one at a time */
    atomic_flag running; /* set while af_session_run runs: a second, overlapping call is refused */
    atomic_bool profiling; /* runs add each step's time to their plan state's profile */
    af_elastic_arena elastic; /* dynamic values' arena; used by one run at a time (running) */
    atomic_size_t elastic_bytes; /* its size and replans, for af_session_plan_memory */
    atomic_int elastic_replans;
};

af_session_options af_session_options_default(void) {
    return (af_session_options){.n_threads = 0, .fusion_level = -1, .reference_kernels = 0, .isa = NULL};
}

void af_session_free(af_session *s) {
    if (!s) return;
    for (int i = 0; s->outputs && i < s->n_outputs; i++) af_tensor_free_data(&s->outputs[i]);
    af_free(s->outputs);
    af_elastic_arena_free(&s->elastic);
    af_plan_slot_free(s->slot);
    af_threadpool_free(s->pool);
    af_model_free(s->owned_model);
    pthread_mutex_destroy(&s->replan_lock);
    af_free(s);
}

/* What every plan of this session is built for: its ISA, threads, limits and kernel choice. */
static af_plan_request plan_request(const af_session *s, const char *config_path, int fusion_level) {
    return (af_plan_request){.config_path = config_path,
                             .fusion_level = fusion_level,
                             .reference_kernels = s->opts.reference_kernels != 0,
                             .isa = s->isa,
                             .n_threads = af_threadpool_n_threads(s->pool),
                             .limits = &s->limits};
}

/* -1 (from the config) or 0 to 3. */
static af_status check_fusion_level(int level, af_error *err) {
    if (level < -1 || level > 3)
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "fusion_level must be -1 (from the config) or 0 to 3, not %d",
                         level);
    return AF_OK;
}

/* The first plan state: built as a replan builds one, then put in a new slot. release_from: the
 * model's graph when the session will own it, so the build drops each weight it packs. */
static af_status first_plan(af_session *s, af_graph *release_from, af_error *err) {
    af_plan_state *ps;
    af_plan_request rq = plan_request(s, s->opts.config_path, s->opts.fusion_level);
    rq.release_from = release_from;
    af_status st = af_plan_state_build(s->model->graph, &rq, &ps, err);
    if (st != AF_OK) return st;
    if (!(s->slot = af_plan_slot_new(ps))) {
        af_plan_state_release(ps);
        return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory creating a session");
    }
    return AF_OK;
}

static af_status create_session(const af_model *model, af_graph *release_from, const af_session_options *opts,
                                af_session **out, af_error *err) {
    if (!model || !out) return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "af_session_create: NULL argument");
    *out = NULL;
    af_session_options defaults = af_session_options_default();
    if (!opts) opts = &defaults;
    if (opts->n_threads < 0) return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "n_threads must be >= 0");
    af_status st = check_fusion_level(opts->fusion_level, err);
    if (st != AF_OK) return st;
    const af_graph *g = model->graph;
    if (g->weights_released)
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT,
                         "the model's weights were released by af_session_create_owning (which failed, or whose "
                         "session owns it); load the model again");
    af_session *s = af_calloc(1, sizeof *s);
    if (!s) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory creating a session");
    if (pthread_mutex_init(&s->replan_lock, NULL) != 0) {
        af_free(s);
        return af_errorf(err, AF_ERR_RUNTIME, "cannot create the session's replan lock");
    }
    s->model = model;
    s->opts = *opts;
    atomic_flag_clear(&s->running);
    atomic_init(&s->profiling, false);
    af_limits_override(&model->limits, &opts->limits, &s->limits);
    s->n_outputs = g->n_outputs;
    s->outputs = af_calloc((size_t)(g->n_outputs ? g->n_outputs : 1), sizeof *s->outputs);
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
    if ((st = first_plan(s, release_from, err)) != AF_OK) goto fail;
    *out = s;
    return AF_OK;
fail:
    af_session_free(s);
    return st;
}

af_status af_session_replan(af_session *s, const char *config_path, int fusion_level, af_error *err) {
    if (!s) return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "af_session_replan: NULL session");
    af_status st = check_fusion_level(fusion_level, err);
    if (st != AF_OK) return st;
    if (s->owned_model)
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT,
                         "af_session_replan: this session released its weights after packing "
                         "(af_session_create_owning); create it with af_session_create to replan");
    pthread_mutex_lock(&s->replan_lock);
    af_plan_state *ps;
    af_plan_request rq = plan_request(s, config_path, fusion_level);
    st = af_plan_state_build(s->model->graph, &rq, &ps, err);
    if (st == AF_OK) af_plan_slot_publish(s->slot, ps);
    pthread_mutex_unlock(&s->replan_lock);
    if (st != AF_OK) af_error_prefix(err, st, "af_session_replan (the current plan stays)");
    return st;
}

af_status af_session_create(const af_model *model, const af_session_options *opts, af_session **out, af_error *err) {
    return create_session(model, NULL, opts, out, err);
}

af_status af_session_create_owning(af_model *model, const af_session_options *opts, af_session **out,
                                   af_error *err) {
    af_status st = create_session(model, model ? model->graph : NULL, opts, out, err);
    if (st != AF_OK) return st;
    (*out)->owned_model = model; /* from here on af_session_replan refuses: it would need the weights */
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

static af_status run_on(af_session *s, af_plan_state *ps, int n_inputs, const char *const *names,
                         const af_tensor *inputs, af_error *err);

af_status af_session_run(af_session *s, int n_inputs, const char *const *names, const af_tensor *inputs,
                         af_error *err) {
    if (!s || (n_inputs > 0 && (!names || !inputs)) || n_inputs < 0)
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "af_session_run: NULL argument");
    if (atomic_flag_test_and_set(&s->running))
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT,
                         "af_session_run: the session is already running on another thread (use one session per thread)");
    /* The whole run is on the state current now; a replan meanwhile publishes beside it. */
    af_plan_state *ps = af_plan_slot_acquire(s->slot);
    af_status st = run_on(s, ps, n_inputs, names, inputs, err);
    af_plan_state_release(ps);
    atomic_flag_clear(&s->running);
    return st;
}

static af_status run_on(af_session *s, af_plan_state *ps, int n_inputs, const char *const *names,
                         const af_tensor *inputs, af_error *err) {
    const af_graph *g = s->model->graph;
    af_exec e;
    af_status st = af_exec_init(&e, g, NULL, err);
    if (st != AF_OK) return st;
    e.limits = &s->limits;
    e.plan = &ps->plan;
    e.lifetimes = &ps->lifetimes;
    e.memory = &ps->memory;
    e.arena = ps->arena;
    e.pool = s->pool;
    e.workspace = ps->workspace;
    e.subplans = &ps->subs;
    /* The elastic arena is an optimization: when it cannot be set up or planned (out of memory),
     * dynamic values stay on the heap and the run goes on. */
    const bool elastic = af_elastic_arena_begin(&s->elastic, g, ps, NULL) == AF_OK;
    if (elastic && s->elastic.arena) {
        e.memory = &s->elastic.memory;
        e.arena = s->elastic.arena;
    }
    if (elastic) {
        e.observed = s->elastic.observed;
        e.outgrown = &s->elastic.outgrown;
    }
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
    e.step_ms = atomic_load(&s->profiling) ? ps->profile_ms : NULL;
    af_pool_times pool_times = {0, 0};
    if (e.step_ms) {
        e.step_idle_ms = ps->profile_idle_ms;
        e.step_flops = ps->profile_flops;
        e.pool_times = &pool_times;
        af_threadpool_time_into(&pool_times);
    }
    e.spare_outputs = s->outputs; /* the last run's output buffers, reused where they fit */
    st = af_exec_run(&e, err);
    if (e.step_ms) af_threadpool_time_into(NULL);
    if (st != AF_OK) goto done;
    if (e.step_ms) ps->profile_runs++;
    if (elastic) (void)af_elastic_arena_update(&s->elastic, g, ps, NULL);
    atomic_store(&s->elastic_bytes, s->elastic.arena ? s->elastic.memory.arena_bytes : 0);
    atomic_store(&s->elastic_replans, s->elastic.replans);
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

/* Every accessor of the plan holds a reference while it reads, so a swap cannot free the state
 * under it. */
size_t af_session_arena_bytes(const af_session *s) {
    if (!s) return 0;
    af_plan_state *ps = af_plan_slot_acquire(s->slot);
    size_t n = ps->memory.arena_bytes;
    af_plan_state_release(ps);
    return n;
}

void af_session_fusion_report(const af_session *s, FILE *out) {
    if (!s || !out) return;
    af_plan_state *ps = af_plan_slot_acquire(s->slot);
    if (ps->plan.fusion_level == 0 && !ps->fusion.candidates.n) {
        fprintf(out, "fusion level 0: no fusion (%d steps)\n", ps->plan.n_steps);
    } else {
        af_fusion_report_write(s->model->graph, &ps->fusion, out);
        fprintf(out, "plan: %d steps for %d nodes\n", ps->plan.n_steps, s->model->graph->n_nodes);
    }
    for (int i = 0; i < ps->subs.n; i++) {
        const af_subplan *sp = &ps->subs.items[i];
        fprintf(out, "\nsubgraph '%s' of node '%s' (%s):\n", sp->g->name ? sp->g->name : "", sp->owner->name,
                sp->owner->op_type);
        if (sp->plan.fusion_level > 0 || sp->fusion.candidates.n) af_fusion_report_write(sp->g, &sp->fusion, out);
        fprintf(out, "plan: %d steps for %d nodes\n", sp->plan.n_steps, sp->g->n_nodes);
    }
    af_plan_state_release(ps);
}

double af_session_fusion_ms(const af_session *s) {
    if (!s) return 0;
    af_plan_state *ps = af_plan_slot_acquire(s->slot);
    double ms = ps->fusion.pattern_ms + ps->fusion.cost_ms + ps->fusion.sched_ms;
    af_plan_state_release(ps);
    return ms;
}

int af_session_n_steps(const af_session *s) {
    if (!s) return 0;
    af_plan_state *ps = af_plan_slot_acquire(s->slot);
    int n = ps->plan.n_steps;
    af_plan_state_release(ps);
    return n;
}

static uint64_t traffic_bytes(const af_graph *g, const af_exec_plan *plan) {
    uint64_t total = 0;
    int vals[4096];
    for (int i = 0; i < plan->n_steps; i++) {
        const af_step *st = &plan->steps[i];
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

uint64_t af_session_traffic_bytes(const af_session *s) {
    if (!s) return 0;
    af_plan_state *ps = af_plan_slot_acquire(s->slot);
    uint64_t total = traffic_bytes(s->model->graph, &ps->plan);
    af_plan_state_release(ps);
    return total;
}

int af_session_fusion_level(const af_session *s) {
    if (!s) return 0;
    af_plan_state *ps = af_plan_slot_acquire(s->slot);
    int level = ps->plan.fusion_level;
    af_plan_state_release(ps);
    return level;
}

/* Fixed for the session: every plan it builds is for this level. */
af_plan_memory af_session_plan_memory(const af_session *s) {
    af_plan_memory m = {0};
    if (!s) return m;
    const af_graph *g = s->model->graph;
    for (int v = 0; v < g->n_values; v++) {
        const af_value *val = &g->values[v];
        int64_t numel = af_tensor_numel(&val->t);
        if (val->kind == AF_VALUE_CONST && numel > 0) m.model_constant_bytes += (size_t)numel * af_dtype_size(val->t.dtype);
    }
    af_plan_state *ps = af_plan_slot_acquire(s->slot);
    m.kernel_weight_bytes = ps->kernel_weight_bytes;
    m.metadata_bytes = ps->kept_bytes > ps->kernel_weight_bytes ? ps->kept_bytes - ps->kernel_weight_bytes : 0;
    m.elastic_arena_bytes = atomic_load(&s->elastic_bytes);
    m.elastic_replans = atomic_load(&s->elastic_replans);
    m.workspace_bytes = ps->workspace_bytes;
    m.thread_scratch_bytes = af_threadpool_scratch_bytes(s->pool);
    af_plan_state_release(ps);
    return m;
}

const char *af_session_isa(const af_session *s) { return s ? af_isa_name(s->isa) : "unknown"; }

/* Totals live in each plan state, so a replan starts a fresh profile for its new steps. */
af_status af_session_set_profiling(af_session *s, int on, af_error *err) {
    if (!s) return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "af_session_set_profiling: NULL session");
    if (atomic_flag_test_and_set(&s->running))
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "af_session_set_profiling: the session is running");
    if (on) {
        af_plan_state *ps = af_plan_slot_acquire(s->slot);
        const size_t n = (size_t)(ps->plan.n_steps ? ps->plan.n_steps : 1);
        memset(ps->profile_ms, 0, n * sizeof *ps->profile_ms);
        memset(ps->profile_idle_ms, 0, n * sizeof *ps->profile_idle_ms);
        memset(ps->profile_flops, 0, n * sizeof *ps->profile_flops);
        ps->profile_runs = 0;
        af_plan_state_release(ps);
    }
    atomic_store(&s->profiling, on != 0);
    atomic_flag_clear(&s->running);
    return AF_OK;
}

int af_session_n_threads(const af_session *s) { return s ? af_threadpool_n_threads(s->pool) : 0; }

static af_profile_totals profile_totals(const af_session *s, const af_plan_state *ps) {
    return (af_profile_totals){.ms = ps->profile_ms, .idle_ms = ps->profile_idle_ms, .flops = ps->profile_flops,
                               .runs = ps->profile_runs, .n_threads = af_threadpool_n_threads(s->pool)};
}

void af_session_profile_write_json(const af_session *s, FILE *out) {
    if (!s || !out) return;
    af_plan_state *ps = af_plan_slot_acquire(s->slot);
    if (!atomic_load(&s->profiling) || !ps->profile_runs)
        fputs("null", out);
    else
        af_profile_write_json(s->model->graph, &ps->plan, profile_totals(s, ps), out);
    af_plan_state_release(ps);
}

void af_session_profile_write(const af_session *s, FILE *out) {
    if (!s || !out) return;
    af_plan_state *ps = af_plan_slot_acquire(s->slot);
    if (!atomic_load(&s->profiling) || !ps->profile_runs)
        fprintf(out, "no profile: turn profiling on and run first\n");
    else
        af_profile_write(s->model->graph, &ps->plan, profile_totals(s, ps), out);
    af_plan_state_release(ps);
}
