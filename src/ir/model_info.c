/* Public accessors over a loaded model: graph inputs/outputs and summary statistics. */
#include <string.h>

#include "ir/model.h"
#include "ir/tensor.h"
#include "util/error.h"

int af_model_n_inputs(const af_model *m) { return m ? m->graph->n_inputs : 0; }
int af_model_n_outputs(const af_model *m) { return m ? m->graph->n_outputs : 0; }
int af_model_opset(const af_model *m) { return m ? m->graph->opset : 0; }

static void fill_info(const af_value *v, af_value_info *info) {
    memset(info, 0, sizeof *info);
    info->name = v->name;
    info->dtype = v->t.dtype;
    info->rank = v->t.rank;
    for (int d = 0; d < v->t.rank && d < AF_MAX_RANK; d++) {
        info->dims[d] = v->t.dims[d];
        info->dim_params[d] = v->dim_params[d];
    }
}

af_status af_model_input_info(const af_model *m, int i, af_value_info *info) {
    if (!m || !info || i < 0 || i >= m->graph->n_inputs)
        return AF_ERR_INVALID_ARGUMENT;
    fill_info(&m->graph->values[m->graph->inputs[i]], info);
    return AF_OK;
}

af_status af_model_output_info(const af_model *m, int i, af_value_info *info) {
    if (!m || !info || i < 0 || i >= m->graph->n_outputs)
        return AF_ERR_INVALID_ARGUMENT;
    fill_info(&m->graph->values[m->graph->outputs[i]], info);
    return AF_OK;
}

double af_node_flops(const af_graph *g, const af_node *n) {
    const af_tensor *y = n->n_outputs > 0 && n->outputs[0] >= 0 ? &g->values[n->outputs[0]].t : NULL;
    const af_tensor *x = n->n_inputs > 0 && n->inputs[0] >= 0 ? &g->values[n->inputs[0]].t : NULL;
    const af_tensor *w = n->n_inputs > 1 && n->inputs[1] >= 0 ? &g->values[n->inputs[1]].t : NULL;
    const af_tensor *r = n->n_inputs > 2 && n->inputs[2] >= 0 ? &g->values[n->inputs[2]].t : NULL;
    return af_node_flops_of(n, x, w, r, y);
}

double af_node_flops_of(const af_node *n, const af_tensor *x, const af_tensor *w, const af_tensor *r,
                        const af_tensor *y) {
    if (n->op == AF_OP_RNN || n->op == AF_OP_GRU || n->op == AF_OP_LSTM) {
        /* each step of each batch item: every row of W [dirs, gates*hidden, input] and R [dirs,
         * gates*hidden, hidden] once (Y may be omitted, so count from the inputs) */
        int64_t nx = x ? af_tensor_numel(x) : -1, nw = w ? af_tensor_numel(w) : -1, nr = r ? af_tensor_numel(r) : -1;
        if (nx < 0 || nw < 0 || nr < 0 || x->rank != 3 || x->dims[2] <= 0) return 0;
        return 2.0 * (double)(nx / x->dims[2]) * (double)(nw + nr);
    }
    if (!y || af_tensor_numel(y) < 0) return 0;
    double out = (double)af_tensor_numel(y);
    switch (n->op) {
    case AF_OP_CONV: /* each output: C_in/group * prod(kernel) MACs */
        if (w && af_tensor_numel(w) > 0 && w->rank >= 2 && w->dims[0] > 0)
            return 2.0 * out * (double)af_tensor_numel(w) / (double)w->dims[0];
        return 0;
    case AF_OP_CONV_TRANSPOSE:
        if (x && w && af_tensor_numel(x) > 0 && af_tensor_numel(w) > 0 && w->dims[0] > 0)
            return 2.0 * (double)af_tensor_numel(x) * (double)af_tensor_numel(w) / (double)w->dims[0];
        return 0;
    case AF_OP_MAT_MUL:
    case AF_OP_GEMM: {
        if (!x || x->rank < 1 || x->dims[x->rank - 1] < 0) return 0;
        int64_t k = x->dims[x->rank - 1];
        if (n->op == AF_OP_GEMM && af_node_attr_int(n, "transA", 0) && x->rank == 2) k = x->dims[0];
        return 2.0 * out * (double)k;
    }
    default:
        return out; /* one operation per output element is a fair count for the rest */
    }
}

void af_model_get_stats(const af_model *m, af_model_stats *st) {
    memset(st, 0, sizeof *st);
    if (!m) return;
    const af_graph *g = m->graph;
    st->n_nodes = g->n_nodes;
    for (int v = 0; v < g->n_values; v++) {
        const af_value *val = &g->values[v];
        if (val->kind == AF_VALUE_CONST || (val->kind == AF_VALUE_INPUT && val->has_default)) {
            int64_t numel = af_tensor_numel(&val->t);
            if (numel > 0) st->n_params += numel;
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const af_node *n = &g->nodes[i];
        st->flops += af_node_flops(g, n);
        const char *name = af_op_info(n->op) ? af_op_info(n->op)->name : n->op_type;
        int k = 0;
        while (k < st->n_op_types && strcmp(st->op_types[k], name) != 0) k++;
        if (k == st->n_op_types) {
            if (k == 256) continue;
            st->op_types[st->n_op_types++] = name;
        }
        st->op_counts[k]++;
    }
}
