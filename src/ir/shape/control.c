/* Shape functions of the control-flow ops If and Loop: output types come from the subgraphs. */
#include "ir/op_ctx.h"

static const af_graph *subgraph(const af_node *n, const char *name) {
    const af_attr *a = af_node_attr(n, name);
    return a && a->type == AF_ATTR_GRAPH ? a->g : NULL;
}

af_status af_infer_IF(af_op_ctx *c) {
    const af_graph *then_g = subgraph(c->node, "then_branch"), *else_g = subgraph(c->node, "else_branch");
    if (!then_g || !else_g) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs then_branch and else_branch graphs");
    if (then_g->n_outputs != c->n_outputs || else_g->n_outputs != c->n_outputs)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "has %d outputs but its branches give %d and %d", c->n_outputs,
                           then_g->n_outputs, else_g->n_outputs);
    const af_tensor *cond = af_ctx_input(c, 0);
    if (!cond) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs a condition input");
    for (int k = 0; k < c->n_outputs; k++) {
        af_tensor *out = af_ctx_output(c, k);
        if (!out) continue;
        const af_tensor *a = &then_g->values[then_g->outputs[k]].t, *b = &else_g->values[else_g->outputs[k]].t;
        af_shape_copy(out, a);
        if (out->dtype == AF_DTYPE_UNDEFINED) out->dtype = b->dtype;
        if (!af_tensor_same_shape(a, b)) out->rank = -1; /* the branch taken decides */
    }
    return AF_OK;
}

af_status af_infer_LOOP(af_op_ctx *c) {
    const af_graph *body = subgraph(c->node, "body");
    if (!body) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs a body graph");
    int n_carried = c->n_inputs - 2;
    if (n_carried < 0) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs inputs M and cond (either may be empty)");
    if (body->n_inputs != n_carried + 2 || body->n_outputs < n_carried + 1)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "body takes %d inputs and gives %d outputs; %d carried values",
                           body->n_inputs, body->n_outputs, n_carried);
    int n_scan = body->n_outputs - 1 - n_carried;
    if (c->n_outputs > n_carried + n_scan)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "has %d outputs, the body gives %d", c->n_outputs,
                           n_carried + n_scan);
    for (int k = 0; k < c->n_outputs; k++) {
        af_tensor *out = af_ctx_output(c, k);
        if (!out) continue;
        const af_tensor *init = af_ctx_input(c, 2 + k);
        af_dtype dt = body->values[body->outputs[1 + k]].t.dtype;
        if (k < n_carried && init) dt = init->dtype;
        *out = (af_tensor){.dtype = dt, .rank = -1}; /* known only after running */
    }
    return AF_OK;
}
