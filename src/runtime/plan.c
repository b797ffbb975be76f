#include "runtime/plan.h"

#include <string.h>

#include "runtime/weight_release.h"
#include "util/alloc.h"
#include "util/error.h"

void af_step_release(af_step *s) {
    af_kernel_release(&s->kernel);
    af_free(s->nodes);
    if (s->kernel_node) {
        af_node_clear(s->kernel_node);
        af_free(s->kernel_node);
    }
    for (int i = 0; i < s->n_owned; i++) af_free_aligned(s->owned[i]);
    memset(s, 0, sizeof *s);
}

void af_step_hold(af_step *s, int v) {
    if (v < 0 || s->n_held >= (int)(sizeof s->held / sizeof s->held[0])) return;
    for (int i = 0; i < s->n_held; i++)
        if (s->held[i] == v) return;
    s->held[s->n_held++] = v;
}

void af_exec_plan_free(af_exec_plan *plan) {
    for (int i = 0; plan->steps && i < plan->n_steps; i++) af_step_release(&plan->steps[i]);
    af_free(plan->steps);
    memset(plan, 0, sizeof *plan);
}

af_status af_exec_plan_unfused(const af_graph *g, const af_kernel_choice *kernels, bool reference_only,
                               struct af_weight_release *release, af_exec_plan *plan, af_error *err) {
    memset(plan, 0, sizeof *plan);
    plan->steps = af_calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *plan->steps);
    if (!plan->steps) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory building the plan");
    for (int i = 0; i < g->n_nodes; i++) {
        af_step *s = &plan->steps[i];
        plan->n_steps = i + 1;
        s->anchor = i;
        s->output = -1;
        s->family = -1;
        s->n_nodes = 1;
        s->nodes = af_malloc(sizeof *s->nodes);
        if (!s->nodes) {
            af_exec_plan_free(plan);
            return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory building the plan");
        }
        s->nodes[0] = i;
        if (reference_only) continue;
        af_kernel_request req = {.graph = g, .node = &g->nodes[i], .choice = *kernels};
        af_status st = af_kernel_select(&req, &s->kernel, err);
        if (st != AF_OK) {
            af_exec_plan_free(plan);
            return st;
        }
        if (s->kernel.run && s->kernel.workspace_bytes > plan->workspace_bytes)
            plan->workspace_bytes = s->kernel.workspace_bytes;
        af_weight_release_step(release, s);
    }
    return AF_OK;
}

static bool produced_inside(const af_graph *g, const af_step *s, int v) {
    int p = g->values[v].producer;
    for (int i = 0; i < s->n_nodes; i++)
        if (s->nodes[i] == p) return true;
    return false;
}

int af_step_reads(const af_graph *g, const af_step *s, int *out, int cap) {
    int k = 0;
    for (int i = 0; i < s->n_nodes; i++) {
        const af_node *n = &g->nodes[s->nodes[i]];
        for (int j = 0; j < n->n_inputs; j++) {
            int v = n->inputs[j];
            if (v < 0 || produced_inside(g, s, v)) continue;
            bool seen = false;
            for (int q = 0; q < k && !seen; q++) seen = out[q] == v;
            if (!seen && k < cap) out[k++] = v;
        }
        for (int a = 0; a < n->n_attrs; a++) {
            const af_graph *sub = n->attrs[a].g;
            for (int v = 0; sub && v < sub->n_values; v++)
                if (sub->values[v].kind == AF_VALUE_OUTER && k < cap) out[k++] = sub->values[v].outer_id;
        }
    }
    return k;
}

int af_step_writes(const af_graph *g, const af_step *s, int *out, int cap) {
    if (s->output >= 0) {
        if (cap > 0) out[0] = s->output;
        return 1;
    }
    const af_node *n = &g->nodes[s->anchor];
    int k = 0;
    for (int o = 0; o < n->n_outputs; o++)
        if (n->outputs[o] >= 0 && k < cap) out[k++] = n->outputs[o];
    return k;
}
