#include "runtime/executor.h"

#include <string.h>

#include "ir/op_ctx.h"
#include "util/alloc.h"
#include "util/error.h"

#define AF_MAX_NODE_IO 4096

static void drop(af_exec *e, int v) {
    if (e->owned[v]) af_tensor_free_data(&e->env[v]);
    e->owned[v] = false;
    e->env[v].data = NULL;
    e->env[v].nbytes = 0;
}

af_status af_exec_init(af_exec *e, const af_graph *g, af_exec *parent, const af_memory_plan *plan, uint8_t *arena,
                       const int *last_use, af_error *err) {
    memset(e, 0, sizeof *e);
    e->g = g;
    e->parent = parent;
    e->plan = plan;
    e->arena = arena;
    size_t nv = (size_t)(g->n_values ? g->n_values : 1);
    e->env = af_calloc(nv, sizeof *e->env);
    e->owned = af_calloc(nv, sizeof *e->owned);
    if (!last_use) {
        e->own_last_use = af_malloc(nv * sizeof *e->own_last_use);
        if (e->own_last_use) af_graph_last_uses(g, e->own_last_use);
        last_use = e->own_last_use;
    }
    e->last_use = last_use;
    if (!e->env || !e->owned || !e->last_use) {
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
    if (!e->env) {
        af_free(e->owned);
        af_free(e->own_last_use);
        return;
    }
    for (int v = 0; v < e->g->n_values; v++)
        if (e->owned && e->owned[v]) af_tensor_free_data(&e->env[v]);
    af_free(e->env);
    af_free(e->owned);
    af_free(e->own_last_use);
    memset(e, 0, sizeof *e);
}

static af_status run_subgraph(af_exec *parent, const af_graph *g, int n_in, const af_tensor *const *in, int n_out,
                              af_tensor *outs, af_error *err) {
    if (n_in > g->n_inputs || n_out > g->n_outputs)
        return af_errorf(err, AF_ERR_RUNTIME, "subgraph '%s' takes %d inputs and %d outputs, called with %d and %d",
                         g->name ? g->name : "", g->n_inputs, g->n_outputs, n_in, n_out);
    af_exec e;
    af_status st = af_exec_init(&e, g, parent, NULL, NULL, NULL, err);
    if (st != AF_OK) return st;
    for (int k = 0; k < n_in; k++) e.env[g->inputs[k]] = *in[k];
    st = af_exec_run(&e, err);
    int taken = 0;
    for (; st == AF_OK && taken < n_out; taken++) st = af_exec_take(&e, g->outputs[taken], &outs[taken], err);
    if (st != AF_OK)
        for (int k = 0; k < taken; k++) af_tensor_free_data(&outs[k]);
    af_exec_release(&e);
    return st;
}

/* Allocates output value v with its freshly inferred shape: in the arena where the plan sized it
 * for exactly this many bytes, else on the heap. */
static af_status place_output(af_exec *e, int v, af_error *err) {
    af_tensor *t = &e->env[v];
    int64_t numel = af_tensor_numel(t);
    size_t es = af_dtype_size(t->dtype);
    if (numel < 0) return AF_ERR_RUNTIME;
    size_t bytes = (size_t)numel * es;
    if (e->plan && e->arena && e->plan->offset[v] >= 0 && ((bytes + 63) & ~(size_t)63) == e->plan->size[v]) {
        t->data = e->arena + e->plan->offset[v];
        t->nbytes = bytes;
        e->owned[v] = false;
        return AF_OK;
    }
    af_status st = af_tensor_alloc(t, err);
    if (st == AF_OK) e->owned[v] = true;
    return st;
}

af_status af_exec_run(af_exec *e, af_error *err) {
    const af_graph *g = e->g;
    const af_tensor *ins[AF_MAX_NODE_IO];
    af_tensor *outs[AF_MAX_NODE_IO];
    for (int v = 0; v < g->n_values; v++) {
        const af_value *val = &g->values[v];
        if (val->kind == AF_VALUE_INPUT && !e->env[v].data && af_tensor_numel(&e->env[v]) != 0)
            return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "graph input '%s' was not given", val->name);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const af_node *n = &g->nodes[i];
        const af_op_info_t *info = af_op_info(n->op);
        if (n->n_inputs > AF_MAX_NODE_IO || n->n_outputs > AF_MAX_NODE_IO)
            return af_errorf(err, AF_ERR_LIMIT, "node '%s' has too many inputs or outputs", n->name);
        for (int k = 0; k < n->n_inputs; k++) ins[k] = n->inputs[k] >= 0 ? &e->env[n->inputs[k]] : NULL;
        for (int k = 0; k < n->n_outputs; k++) {
            outs[k] = n->outputs[k] >= 0 ? &e->env[n->outputs[k]] : NULL;
            if (outs[k]) drop(e, n->outputs[k]);
        }
        af_op_ctx c = {.node = n, .graph = g, .opset = g->opset, .n_inputs = n->n_inputs, .inputs = ins,
                       .n_outputs = n->n_outputs, .outputs = outs, .err = err, .exec = e,
                       .run_subgraph = run_subgraph};
        af_status st = info->infer(&c);
        if (st == AF_ERR_INVALID_MODEL) { /* the same check on run-time data is a bad input, not a bad file */
            if (err) err->status = AF_ERR_RUNTIME;
            return AF_ERR_RUNTIME;
        }
        if (st != AF_OK) return st;
        bool self_alloc = n->op == AF_OP_IF || n->op == AF_OP_LOOP;
        for (int k = 0; k < n->n_outputs; k++) {
            if (!outs[k]) continue;
            outs[k]->data = NULL;
            if (self_alloc) continue;
            st = place_output(e, n->outputs[k], err);
            if (st == AF_ERR_RUNTIME)
                return af_errorf(err, AF_ERR_RUNTIME, "node '%s' (%s): the shape of output '%s' is unknown", n->name,
                                 n->op_type, g->values[n->outputs[k]].name);
            if (st != AF_OK) return af_error_prefix(err, st, "node '%s' (%s)", n->name, n->op_type);
        }
        st = info->run(&c);
        if (self_alloc)
            for (int k = 0; k < n->n_outputs; k++)
                if (outs[k] && outs[k]->data) e->owned[n->outputs[k]] = true;
        if (st != AF_OK) return st;
        /* Free heap values whose last reader just ran. */
        for (int k = 0; k < n->n_inputs; k++) {
            int v = n->inputs[k];
            if (v >= 0 && e->owned[v] && e->last_use[v] == i) drop(e, v);
        }
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
