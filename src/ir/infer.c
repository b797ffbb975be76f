/* Static dtype and shape inference over a graph, node by node in topological order. */
#include <string.h>

#include "ir/op_ctx.h"
#include "util/alloc.h"
#include "util/error.h"

#define AF_MAX_NODE_IO 4096

/* Copies dtype and shape of the enclosing graph's values into a subgraph's captured values. */
static void refresh_outer(af_graph *sub) {
    for (int v = 0; v < sub->n_values; v++) {
        af_value *val = &sub->values[v];
        if (val->kind == AF_VALUE_OUTER) af_shape_copy(&val->t, &sub->parent->values[val->outer_id].t);
    }
}

/* Keeps a declared shape where inference knows less; fails where both are known and disagree. */
static af_status merge_declared(const af_node *n, af_value *v, const af_tensor *decl, af_error *err) {
    if (decl->dtype != AF_DTYPE_UNDEFINED && v->t.dtype != AF_DTYPE_UNDEFINED && decl->dtype != v->t.dtype)
        return af_errorf(err, AF_ERR_INVALID_MODEL, "node '%s' (%s): output '%s' is declared %s but computes %s",
                         n->name, n->op_type, v->name, af_dtype_name(decl->dtype), af_dtype_name(v->t.dtype));
    if (v->t.dtype == AF_DTYPE_UNDEFINED) v->t.dtype = decl->dtype;
    if (decl->rank < 0) return AF_OK;
    if (v->t.rank < 0) {
        af_shape_copy(&v->t, decl);
        v->t.dtype = v->t.dtype ? v->t.dtype : decl->dtype;
        return AF_OK;
    }
    bool mismatch = v->t.rank != decl->rank;
    for (int d = 0; !mismatch && d < decl->rank; d++) {
        if (decl->dims[d] >= 0 && v->t.dims[d] >= 0 && decl->dims[d] != v->t.dims[d]) mismatch = true;
        if (v->t.dims[d] < 0) v->t.dims[d] = decl->dims[d];
    }
    if (mismatch) {
        char a[128], b[128];
        return af_errorf(err, AF_ERR_INVALID_MODEL, "node '%s' (%s): output '%s' is declared %s but computes %s",
                         n->name, n->op_type, v->name, af_tensor_shape_str(decl, a, sizeof a),
                         af_tensor_shape_str(&v->t, b, sizeof b));
    }
    return AF_OK;
}

af_status af_graph_infer_shapes(af_graph *g, af_error *err) {
    const af_tensor *ins[AF_MAX_NODE_IO];
    af_tensor *outs[AF_MAX_NODE_IO];
    for (int i = 0; i < g->n_nodes; i++) {
        af_node *n = &g->nodes[i];
        const af_op_info_t *info = af_op_info(n->op);
        if (!info || !info->infer)
            return af_errorf(err, AF_ERR_UNSUPPORTED, "node '%s': operator %s is not supported", n->name, n->op_type);
        if (n->n_inputs > AF_MAX_NODE_IO || n->n_outputs > AF_MAX_NODE_IO)
            return af_errorf(err, AF_ERR_LIMIT, "node '%s' has too many inputs or outputs", n->name);
        for (int a = 0; a < n->n_attrs; a++) {
            if (!n->attrs[a].g) continue;
            refresh_outer(n->attrs[a].g);
            af_status st = af_graph_infer_shapes(n->attrs[a].g, err);
            if (st != AF_OK) return af_error_prefix(err, st, "in subgraph '%s' of node '%s'", n->attrs[a].name, n->name);
        }
        for (int k = 0; k < n->n_inputs; k++) ins[k] = n->inputs[k] >= 0 ? &g->values[n->inputs[k]].t : NULL;
        af_tensor declared[8];
        for (int k = 0; k < n->n_outputs; k++) {
            outs[k] = n->outputs[k] >= 0 ? &g->values[n->outputs[k]].t : NULL;
            if (k < 8 && outs[k]) declared[k] = *outs[k];
        }
        af_op_ctx c = {.node = n, .graph = g, .opset = g->opset, .n_inputs = n->n_inputs, .inputs = ins,
                       .n_outputs = n->n_outputs, .outputs = outs, .err = err};
        af_status st = info->infer(&c);
        if (st != AF_OK) return st;
        for (int k = 0; k < n->n_outputs && k < 8; k++) {
            if (!outs[k]) continue;
            outs[k]->data = NULL;
            outs[k]->nbytes = 0;
            st = merge_declared(n, &g->values[n->outputs[k]], &declared[k], err);
            if (st != AF_OK) return st;
        }
    }
    return AF_OK;
}
