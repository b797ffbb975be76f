/* Plans for subgraphs (see subplans.h). */
#include "runtime/subplans.h"

#include <string.h>

#include "util/alloc.h"
#include "util/error.h"

static void subplan_free(af_subplan *p) {
    af_exec_plan_free(&p->plan);
    af_lifetimes_free(&p->lifetimes);
    af_fusion_result_free(&p->fusion);
}

void af_subplans_free(af_subplans *s) {
    for (int i = 0; s && i < s->n; i++) subplan_free(&s->items[i]);
    if (s) {
        af_free(s->items);
        memset(s, 0, sizeof *s);
    }
}

static af_status plan_one(af_subplans *s, const af_node *owner, const af_graph *g, const af_fusion_config *cfg,
                          af_isa isa, int n_threads, bool reference_only, af_error *err) {
    af_subplan *grown = af_realloc(s->items, (size_t)(s->n + 1) * sizeof *grown);
    if (!grown) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory planning subgraphs");
    s->items = grown;
    af_subplan *p = &s->items[s->n];
    memset(p, 0, sizeof *p);
    p->g = g;
    p->owner = owner;
    af_status st;
    if (reference_only || cfg->fusion_level <= 0) {
        const af_kernel_choice kernels = af_fusion_kernel_choice(cfg, isa, n_threads);
        st = af_exec_plan_unfused(g, &kernels, reference_only, NULL, &p->plan, err);
    } else
        st = af_fusion_plan(g, cfg, isa, n_threads, NULL, &p->plan, &p->fusion, err);
    if (st == AF_OK) st = af_lifetimes_compute(g, &p->plan, &p->lifetimes, err);
    if (st != AF_OK) {
        subplan_free(p);
        return af_error_prefix(err, st, "the subgraph of node '%s' (%s)", owner->name, owner->op_type);
    }
    if (p->plan.workspace_bytes > s->workspace_bytes) s->workspace_bytes = p->plan.workspace_bytes;
    s->n++;
    return AF_OK;
}

/* Depth first: a subgraph's own subgraphs follow it. */
static af_status walk(af_subplans *s, const af_graph *g, const af_fusion_config *cfg, af_isa isa, int n_threads,
                      bool reference_only, af_error *err) {
    for (int i = 0; i < g->n_nodes; i++) {
        const af_node *n = &g->nodes[i];
        for (int a = 0; a < n->n_attrs; a++) {
            const af_graph *body = n->attrs[a].type == AF_ATTR_GRAPH ? n->attrs[a].g : NULL;
            if (!body) continue;
            af_status st = plan_one(s, n, body, cfg, isa, n_threads, reference_only, err);
            if (st == AF_OK) st = walk(s, body, cfg, isa, n_threads, reference_only, err);
            if (st != AF_OK) return st;
        }
    }
    return AF_OK;
}

af_status af_subplans_build(const af_graph *g, const af_fusion_config *cfg, af_isa isa, int n_threads,
                            bool reference_only, af_subplans *out, af_error *err) {
    memset(out, 0, sizeof *out);
    if (!g || !cfg) return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "af_subplans_build: NULL argument");
    af_status st = walk(out, g, cfg, isa, n_threads, reference_only, err);
    if (st != AF_OK) af_subplans_free(out);
    return st;
}

const af_subplan *af_subplans_find(const af_subplans *s, const af_graph *g) {
    for (int i = 0; s && i < s->n; i++)
        if (s->items[i].g == g) return &s->items[i];
    return NULL;
}
