/* Constant folding: nodes whose inputs are all known are evaluated once with the reference kernel.
 * Shape and Size of statically shaped values fold too, which resolves the Shape->Gather->Concat->
 * Reshape chains exporters emit; with a symbolic dim those chains fold in part (fold_partial.h). */
#include <string.h>

#include "ir/fold_partial.h"
#include "ir/op_ctx.h"
#include "ir/shape/generators.h"
#include "util/alloc.h"
#include "util/error.h"

#define AF_MAX_FOLD_IO 64

static bool has_subgraph(const af_node *n) {
    for (int a = 0; a < n->n_attrs; a++)
        if (n->attrs[a].g) return true;
    return false;
}

static bool all_inputs_const(const af_graph *g, const af_node *n) {
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] >= 0 && g->values[n->inputs[k]].kind != AF_VALUE_CONST) return false;
    return true;
}

/* Shape/Size of a value whose shape is fully known, without running anything. */
static af_status fold_shape_query(af_graph *g, af_node *n, bool *done, af_error *err) {
    *done = false;
    if (n->n_inputs < 1 || n->inputs[0] < 0 || n->n_outputs < 1 || n->outputs[0] < 0) return AF_OK;
    const af_tensor *x = &g->values[n->inputs[0]].t;
    if (x->rank < 0 || af_tensor_numel(x) < 0) return AF_OK;
    af_value *out = &g->values[n->outputs[0]];
    if (out->t.rank < 0 || af_tensor_numel(&out->t) < 0) return AF_OK;
    af_tensor t = out->t;
    t.data = NULL;
    af_status st = af_tensor_alloc(&t, err);
    if (st != AF_OK) return st;
    if (n->op == AF_OP_SIZE) {
        ((int64_t *)t.data)[0] = af_tensor_numel(x);
    } else {
        const af_op_ctx ctx = {.node = n, .graph = g, .opset = g->opset};
        int start, end; /* as Shape's own inference takes them */
        af_generators_shape_range(&ctx, x->rank, &start, &end);
        for (int64_t d = start, i = 0; d < end && i < af_tensor_numel(&t); d++, i++)
            ((int64_t *)t.data)[i] = x->dims[d];
    }
    out->t = t;
    out->kind = AF_VALUE_CONST;
    *done = true;
    return AF_OK;
}

/* Whether shape `now` knows more than `old` and nothing else: a dim known in old is the same in
 * now, and some dim unknown in old is known in now (a symbolic batch leaves the rest static). */
static bool more_known(const af_tensor *old, const af_tensor *now) {
    if (now->rank < 0 || now->dtype != old->dtype) return false;
    if (old->rank < 0) return true;
    if (old->rank != now->rank) return false;
    bool more = false;
    for (int d = 0; d < old->rank; d++) {
        if (old->dims[d] >= 0 && now->dims[d] != old->dims[d]) return false;
        more |= old->dims[d] < 0 && now->dims[d] >= 0;
    }
    return more;
}

/* Inputs folded earlier in this pass (a Concat of shape pieces) may tell n's shape function what it
 * could not know at load (the shape Expand gets): outputs whose size is still unknown take what it
 * infers now. A failure leaves them as they were; the node then is not folded. Nodes that do not
 * fold are refreshed too: a Slice of a tensor whose starts and ends were shape arithmetic (torch's
 * chunk, ShuffleNetV2's channel split) has a static output once they fold, and so has everything
 * after it, which otherwise ran on the bounds-checked reference kernels for want of sizes. */
static void refresh_shapes(af_graph *g, const af_node *n, const af_op_info_t *info) {
    const af_tensor *ins[AF_MAX_FOLD_IO];
    af_tensor now[AF_MAX_FOLD_IO];
    af_tensor *outs[AF_MAX_FOLD_IO];
    bool stale = false;
    for (int o = 0; o < n->n_outputs; o++) {
        outs[o] = n->outputs[o] >= 0 ? &now[o] : NULL;
        if (!outs[o]) continue;
        now[o] = (af_tensor){0};
        af_shape_copy(&now[o], &g->values[n->outputs[o]].t);
        stale |= af_tensor_numel(&now[o]) < 0;
    }
    if (!stale || !info->infer) return;
    for (int k = 0; k < n->n_inputs; k++) ins[k] = n->inputs[k] >= 0 ? &g->values[n->inputs[k]].t : NULL;
    af_op_ctx c = {.node = n, .graph = g, .opset = g->opset, .n_inputs = n->n_inputs, .inputs = ins,
                   .n_outputs = n->n_outputs, .outputs = outs};
    if (info->infer(&c) != AF_OK) return;
    for (int o = 0; o < n->n_outputs; o++) {
        af_tensor *t = outs[o] ? &g->values[n->outputs[o]].t : NULL;
        if (t && ((af_tensor_numel(t) < 0 && af_tensor_numel(&now[o]) >= 0 && now[o].dtype == t->dtype) ||
                  more_known(t, &now[o])))
            af_shape_copy(t, &now[o]);
    }
}

static af_status fold(af_graph *g, size_t max_bytes, af_shape_data *sd, af_error *err);

af_status af_graph_fold_constants(af_graph *g, size_t max_bytes, af_error *err) {
    af_shape_data *sd = af_shape_data_new(g->n_values);
    af_status st = fold(g, max_bytes, sd, err);
    af_shape_data_free(sd);
    return st;
}

static af_status fold(af_graph *g, size_t max_bytes, af_shape_data *sd, af_error *err) {
    for (int i = 0; i < g->n_nodes; i++) {
        af_node *n = &g->nodes[i];
        const af_op_info_t *info = af_op_info(n->op);
        if (!info || !info->run || has_subgraph(n) || n->n_inputs > AF_MAX_FOLD_IO || n->n_outputs > AF_MAX_FOLD_IO)
            continue;
        if (n->op == AF_OP_SHAPE || n->op == AF_OP_SIZE) {
            bool done;
            af_status st = fold_shape_query(g, n, &done, err);
            if (st != AF_OK) return st;
            if (done) continue;
        }
        refresh_shapes(g, n, info);
        if (n->n_inputs > 0 && !all_inputs_const(g, n)) {
            af_status st = af_fold_partial(g, n, sd, err);
            if (st != AF_OK) return st;
            continue;
        }
        if (n->n_inputs == 0) continue;
        bool fits = true;
        for (int o = 0; o < n->n_outputs; o++) {
            if (n->outputs[o] < 0) continue;
            const af_tensor *t = &g->values[n->outputs[o]].t;
            int64_t numel = af_tensor_numel(t);
            size_t es = af_dtype_size(t->dtype);
            if (numel < 0 || es == 0 || (uint64_t)numel > max_bytes / es) fits = false;
        }
        if (!fits) continue;
        const af_tensor *ins[AF_MAX_FOLD_IO];
        af_tensor outv[AF_MAX_FOLD_IO];
        af_tensor *outs[AF_MAX_FOLD_IO];
        for (int k = 0; k < n->n_inputs; k++) ins[k] = n->inputs[k] >= 0 ? &g->values[n->inputs[k]].t : NULL;
        af_status st = AF_OK;
        int allocated = 0;
        for (int o = 0; o < n->n_outputs; o++, allocated++) {
            outs[o] = NULL;
            if (n->outputs[o] < 0) continue;
            outv[o] = g->values[n->outputs[o]].t;
            outv[o].data = NULL;
            outs[o] = &outv[o];
            if ((st = af_tensor_alloc(outs[o], err)) != AF_OK) break;
        }
        if (st == AF_OK) {
            af_op_ctx c = {.node = n, .graph = g, .opset = g->opset, .n_inputs = n->n_inputs, .inputs = ins,
                           .n_outputs = n->n_outputs, .outputs = outs, .err = err};
            st = info->run(&c);
        }
        if (st != AF_OK) {
            for (int o = 0; o < allocated; o++)
                if (outs[o]) af_tensor_free_data(outs[o]);
            /* Folding found a data error (e.g. an index out of range): the model is invalid. */
            if (st == AF_ERR_OUT_OF_MEMORY || st == AF_ERR_LIMIT) return st;
            return af_error_prefix(err, AF_ERR_INVALID_MODEL, "while folding constants");
        }
        for (int o = 0; o < n->n_outputs; o++) {
            if (!outs[o]) continue;
            af_value *v = &g->values[n->outputs[o]];
            v->t = outv[o];
            v->kind = AF_VALUE_CONST;
        }
    }
    return AF_OK;
}
