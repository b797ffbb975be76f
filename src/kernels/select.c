/* Chooses the fast kernel for a node by its operator family. */
#include <string.h>

#include "kernels/kernel.h"
#include "util/alloc.h"

af_status af_kernel_select(const af_kernel_request *req, af_kernel *k, af_error *err) {
    memset(k, 0, sizeof *k);
    switch (req->node->op) {
    case AF_OP_CONV:
        return af_fast_conv_prepare(req, k, err);
    case AF_OP_CONV_TRANSPOSE:
        return af_fast_conv_transpose_prepare(req, k, err);
    case AF_OP_REDUCE_MEAN:
    case AF_OP_REDUCE_SUM:
    case AF_OP_REDUCE_MAX:
    case AF_OP_REDUCE_MIN:
    case AF_OP_REDUCE_PROD:
    case AF_OP_REDUCE_L1:
    case AF_OP_REDUCE_L2:
    case AF_OP_REDUCE_LOG_SUM:
    case AF_OP_REDUCE_LOG_SUM_EXP:
    case AF_OP_REDUCE_SUM_SQUARE:
        return af_fast_reduce_prepare(req, k, err);
    case AF_OP_RNN:
    case AF_OP_GRU:
    case AF_OP_LSTM:
        return af_fast_recurrent_prepare(req, k, err);
    case AF_OP_MAT_MUL:
    case AF_OP_GEMM:
        return af_fast_matmul_prepare(req, k, err);
    case AF_OP_MAX_POOL:
    case AF_OP_AVERAGE_POOL:
    case AF_OP_GLOBAL_AVERAGE_POOL:
    case AF_OP_GLOBAL_MAX_POOL:
        return af_fast_pool_prepare(req, k, err);
    case AF_OP_TRANSPOSE:
        return af_fast_transpose_prepare(req, k, err);
    case AF_OP_WHERE:
    case AF_OP_EQUAL:
    case AF_OP_LESS:
    case AF_OP_LESS_OR_EQUAL:
    case AF_OP_GREATER:
    case AF_OP_GREATER_OR_EQUAL:
        return af_fast_mask_prepare(req, k, err);
    case AF_OP_ARG_MAX:
    case AF_OP_ARG_MIN:
    case AF_OP_TOP_K:
        return af_fast_select_axis_prepare(req, k, err);
    case AF_OP_EINSUM:
        return af_fast_einsum_prepare(req, k, err);
    case AF_OP_PAD:
        return af_fast_pad_prepare(req, k, err);
    case AF_OP_EXPAND:
        return af_fast_expand_prepare(req, k, err);
    case AF_OP_RESIZE:
        return af_fast_resize_prepare(req, k, err);
    case AF_OP_SOFTMAX:
    case AF_OP_LOG_SOFTMAX:
    case AF_OP_LAYER_NORMALIZATION:
    case AF_OP_INSTANCE_NORMALIZATION:
    case AF_OP_BATCH_NORMALIZATION:
        return af_fast_norm_prepare(req, k, err);
    default:
        break;
    }
    const af_op_info_t *info = af_op_info(req->node->op);
    if (info && (info->cls == AF_OPCLASS_ELEMENTWISE || info->cls == AF_OPCLASS_BROADCAST))
        return af_fast_elementwise_prepare(req, k, err);
    return AF_OK;
}

const af_tensor *af_kernel_input(const af_kernel_request *req, int i) {
    if (i < req->n_overrides && req->overrides[i]) return req->overrides[i];
    const af_node *n = req->node;
    if (i >= n->n_inputs || n->inputs[i] < 0) return NULL;
    /* A subgraph's capture of an enclosing graph's constant is that constant, data and all. */
    const af_value *c = af_graph_const_value(req->graph, n->inputs[i]);
    return c ? &c->t : &req->graph->values[n->inputs[i]].t;
}

void af_kernel_release(af_kernel *k) {
    if (k->free_state && k->state) k->free_state(k->state);
    memset(k, 0, sizeof *k);
}
