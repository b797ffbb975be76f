/* Plan states: build one beside whatever is running, share it by reference count. */
#include "runtime/plan_state.h"

#include "fusion/config.h"
#include "runtime/weight_release.h"
#include "util/alloc.h"
#include "util/error.h"

static void plan_state_free(af_plan_state *ps) {
    af_exec_plan_free(&ps->plan);
    af_fusion_result_free(&ps->fusion);
    af_subplans_free(&ps->subs);
    af_lifetimes_free(&ps->lifetimes);
    af_memory_plan_free(&ps->memory);
    af_free_aligned(ps->arena);
    af_free_aligned(ps->workspace);
    af_free(ps->profile_ms);
    af_free(ps->profile_idle_ms);
    af_free(ps->profile_flops);
    af_free(ps);
}

/* The steps: pattern + cost + schedule, or one step per node at level 0 and for the oracle. */
static af_status build_plan(const af_graph *g, const af_plan_request *rq, af_weight_release *release,
                            af_plan_state *ps, uint64_t *max_mem, af_error *err) {
    af_fusion_config cfg;
    af_fusion_config_default(&cfg);
    af_status st = AF_OK;
    if (rq->config_path && (st = af_fusion_config_load_file(rq->config_path, &cfg, err)) != AF_OK) {
        af_fusion_config_free(&cfg);
        return st;
    }
    if (rq->fusion_level >= 0) cfg.fusion_level = rq->fusion_level;
    if (rq->reference_kernels) cfg.fusion_level = 0; /* the oracle runs every node as written */
    /* Verify runs the unfused ops on the weights, for the subgraphs' check too: release after it. */
    const bool verify = cfg.verify && cfg.fusion_level > 0;
    if (cfg.fusion_level == 0) {
        const af_kernel_choice kernels = af_fusion_kernel_choice(&cfg, rq->isa, rq->n_threads);
        st = af_exec_plan_unfused(g, &kernels, rq->reference_kernels, release, &ps->plan, err);
    } else
        st = af_fusion_plan(g, &cfg, rq->isa, rq->n_threads, verify ? NULL : release, &ps->plan, &ps->fusion, err);
    /* Subgraphs are planned alike, but not verified on their own: a body reads its enclosing
     * graph's values, so af_subplans_verify runs them inside that graph's run. */
    cfg.verify = false;
    if (st == AF_OK) st = af_subplans_build(g, &cfg, rq->isa, rq->n_threads, rq->reference_kernels, &ps->subs, err);
    if (st == AF_OK && verify) st = af_subplans_verify(g, &cfg, rq->isa, rq->n_threads, &ps->subs, err);
    for (int i = 0; st == AF_OK && verify && i < ps->plan.n_steps; i++)
        af_weight_release_step(release, &ps->plan.steps[i]);
    *max_mem = cfg.max_mem_usage;
    ps->shape_elasticity = cfg.shape_elasticity;
    af_fusion_config_free(&cfg);
    return st;
}

/* Both caps (checked before anything that size is allocated), then the buffers. */
static af_status build_buffers(const af_plan_request *rq, af_plan_state *ps, uint64_t max_mem, af_error *err) {
    size_t arena = ps->memory.arena_bytes, need;
    size_t scratch = ps->plan.workspace_bytes > ps->subs.workspace_bytes ? ps->plan.workspace_bytes : ps->subs.workspace_bytes;
    need = arena + scratch;
    if (need < arena || need > rq->limits->max_activation_bytes)
        return af_errorf(err, AF_ERR_LIMIT,
                         "the plan needs %zu bytes of activations and %zu of scratch; the limit is %llu (max_activation_bytes)",
                         arena, scratch, (unsigned long long)rq->limits->max_activation_bytes);
    if (max_mem && need > max_mem)
        return af_errorf(err, AF_ERR_LIMIT,
                         "the plan needs %zu bytes of activations and scratch; resource_constraints.max_mem_usage is %llu",
                         need, (unsigned long long)max_mem);
    ps->max_mem = max_mem;
    ps->max_activation_bytes = rq->limits->max_activation_bytes;
    ps->workspace_bytes = scratch;
    if (arena && !(ps->arena = af_malloc_aligned(arena)))
        return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory: the activation arena needs %zu bytes", arena);
    if (scratch && !(ps->workspace = af_malloc_aligned(scratch)))
        return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory: kernels need %zu bytes of scratch", scratch);
    /* Allocated up front so that turning profiling on, or a swap while it is on, never allocates. */
    const size_t profile_len = (size_t)(ps->plan.n_steps ? ps->plan.n_steps : 1);
    if (!(ps->profile_ms = af_calloc(profile_len, sizeof *ps->profile_ms)) ||
        !(ps->profile_idle_ms = af_calloc(profile_len, sizeof *ps->profile_idle_ms)) ||
        !(ps->profile_flops = af_calloc(profile_len, sizeof *ps->profile_flops)))
        return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory for the profile");
    return AF_OK;
}

af_status af_plan_state_build(const af_graph *g, const af_plan_request *rq, af_plan_state **out, af_error *err) {
    *out = NULL;
    af_plan_state *ps = af_calloc(1, sizeof *ps);
    if (!ps) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory building a plan");
    atomic_init(&ps->refs, 1);
    static atomic_uint_fast64_t next_id = 1;
    ps->id = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed);
    uint64_t max_mem = 0;
    af_weight_release wr = {0};
    af_status st = AF_OK;
    if (rq->release_from && (st = af_weight_release_init(rq->release_from, &wr, err)) != AF_OK) {
        af_free(ps);
        return st;
    }
    const long long before = af_alloc_live_bytes();
    st = build_plan(g, rq, rq->release_from ? &wr : NULL, ps, &max_mem, err);
    if (st == AF_OK) st = af_lifetimes_compute(g, &ps->plan, &ps->lifetimes, err);
    if (st == AF_OK) st = af_memory_plan_build(g, &ps->lifetimes, &ps->memory, err);
    if (st == AF_OK) { /* what the plan keeps, before its activation and scratch buffers */
        const long long kept = af_alloc_live_bytes() - before + (long long)wr.freed_bytes;
        ps->kept_bytes = kept > 0 ? (size_t)kept : 0;
        for (int i = 0; i < ps->plan.n_steps; i++) ps->kernel_weight_bytes += ps->plan.steps[i].kernel.weight_bytes;
        st = build_buffers(rq, ps, max_mem, err);
    }
    af_weight_release_free(&wr);
    if (st != AF_OK) {
        plan_state_free(ps);
        return st;
    }
    *out = ps;
    return AF_OK;
}

/* Relaxed: a new holder got the pointer from a holder (or under the slot's lock), which orders it. */
void af_plan_state_retain(af_plan_state *ps) { atomic_fetch_add_explicit(&ps->refs, 1, memory_order_relaxed); }

/* acq_rel: whoever frees sees every other holder's writes (a run's arena, its profile totals). */
void af_plan_state_release(af_plan_state *ps) {
    if (ps && atomic_fetch_sub_explicit(&ps->refs, 1, memory_order_acq_rel) == 1) plan_state_free(ps);
}
