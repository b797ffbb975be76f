/* The elastic arena (see elastic_arena.h). */
#include "runtime/elastic_arena.h"

#include <math.h>
#include <string.h>

#include "ir/tensor.h"
#include "util/alloc.h"
#include "util/error.h"

static void drop_plan(af_elastic_arena *ea) {
    af_memory_plan_free(&ea->memory);
    af_free_aligned(ea->arena);
    ea->arena = NULL;
}

void af_elastic_arena_free(af_elastic_arena *ea) {
    if (!ea) return;
    drop_plan(ea);
    af_free(ea->observed);
    memset(ea, 0, sizeof *ea);
}

af_status af_elastic_arena_begin(af_elastic_arena *ea, const af_graph *g, const af_plan_state *ps, af_error *err) {
    if (ea->planned_for != ps->id || ea->n_values != g->n_values) {
        af_elastic_arena_free(ea);
        ea->observed = af_calloc((size_t)(g->n_values ? g->n_values : 1), sizeof *ea->observed);
        if (!ea->observed) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory for the elastic arena");
        ea->n_values = g->n_values;
        ea->planned_for = ps->id;
    }
    memset(ea->observed, 0, (size_t)ea->n_values * sizeof *ea->observed);
    ea->outgrown = false;
    return AF_OK;
}

af_status af_elastic_arena_update(af_elastic_arena *ea, const af_graph *g, const af_plan_state *ps, af_error *err) {
    if (!ea->outgrown) return AF_OK;
    size_t *hint = af_calloc((size_t)(g->n_values ? g->n_values : 1), sizeof *hint);
    if (!hint) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory for the elastic arena");
    /* A slot keeps what a value took before too: sizes that alternate never replan twice. */
    for (int v = 0; v < g->n_values; v++) {
        size_t was = ea->arena && ea->memory.offset[v] >= 0 ? ea->memory.size[v] : 0;
        double want = ceil((double)ea->observed[v] * (1.0 + ps->shape_elasticity));
        hint[v] = want >= (double)SIZE_MAX / 2 ? 0 : (size_t)want > was ? (size_t)want : was;
    }
    af_memory_plan mp;
    af_status st = af_memory_plan_build_hinted(g, &ps->lifetimes, hint, &mp, err);
    af_free(hint);
    if (st != AF_OK) return st;
    if (!mp.arena_bytes) { /* nothing to place */
        af_memory_plan_free(&mp);
        return AF_OK;
    }
    /* The caps the state's own plan was checked against, with its scratch. */
    size_t scratch = ps->workspace_bytes, need = mp.arena_bytes + scratch;
    if (need < mp.arena_bytes || need > ps->max_activation_bytes || (ps->max_mem && need > ps->max_mem)) {
        af_memory_plan_free(&mp);
        return AF_OK;
    }
    uint8_t *arena = af_malloc_aligned(mp.arena_bytes);
    if (!arena) {
        af_memory_plan_free(&mp);
        return AF_OK; /* the heap serves, as before */
    }
    drop_plan(ea);
    ea->memory = mp;
    ea->arena = arena;
    ea->replans++;
    return AF_OK;
}
