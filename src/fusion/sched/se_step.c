/*
 * The fused step of a squeeze_excite group: GlobalAveragePool(x) -> 1x1 Conv (+bias) -> activation
 * (one node, or SiLU as Mul(v, Sigmoid(v))) -> 1x1 Conv (+bias) -> gate (HardSigmoid or Sigmoid) ->
 * Mul with x, as torchvision's MobileNetV3 and EfficientNets export it. The chain is checked node by node here, whatever rule made the group.
 */
#include <stdio.h>
#include <string.h>

#include "fusion/sched/sched.h"
#include "ir/op.h"
#include "kernels/fast/squeeze_excite.h"

/* A plain 1x1 convolution from `in_ch` to `out_ch` channels with constant weights. */
static bool pointwise(const af_graph *g, const af_node *n, int64_t in_ch, int64_t out_ch, const float **w,
                      const float **b) {
    if (!n || n->op != AF_OP_CONV || n->n_inputs < 2 || n->inputs[1] < 0 || af_node_attr_int(n, "group", 1) != 1)
        return false;
    const af_tensor *wt = &g->values[n->inputs[1]].t;
    if (wt->rank != 4 || wt->dims[0] != out_ch || wt->dims[1] != in_ch || wt->dims[2] != 1 || wt->dims[3] != 1)
        return false;
    const int64_t *v;
    int k = af_node_attr_ints(n, "pads", &v);
    for (int i = 0; i < k; i++)
        if (v[i] != 0) return false;
    k = af_node_attr_ints(n, "strides", &v);
    for (int i = 0; i < k; i++)
        if (v[i] != 1) return false;
    *w = af_sched_const_floats(g, n->inputs[1], out_ch * in_ch);
    *b = n->n_inputs > 2 && n->inputs[2] >= 0 ? af_sched_const_floats(g, n->inputs[2], out_ch) : NULL;
    return *w && (n->n_inputs < 3 || n->inputs[2] < 0 || *b);
}

bool af_sched_build_se(const af_graph *g, const af_fusion_candidate *c, const af_sched_options *o, af_step *s,
                       char *why, size_t why_size) {
    const af_node *mul = af_group_producer(g, c, c->output);
    const af_node *gate = NULL, *conv2 = NULL, *act = NULL, *conv1 = NULL, *gap = NULL;
    int x = -1;
    if (mul && mul->op == AF_OP_MUL && mul->n_inputs == 2) {
        for (int k = 0; k < 2 && !gate; k++) {
            const af_node *n = af_group_producer(g, c, mul->inputs[k]);
            if (n && n->op != AF_OP_GLOBAL_AVERAGE_POOL) gate = n, x = mul->inputs[1 - k];
        }
    }
    af_se_desc d = {0};
    bool ok = gate && af_sched_activation_step(g, gate, &d.gate);
    if (ok) conv2 = af_group_producer(g, c, gate->inputs[0]);
    /* Each link must be the group's own node of the expected op before anything reads through it:
     * a user rule may give this family any shape at all. */
    if (ok && (!conv2 || conv2->op != AF_OP_CONV || conv2->n_inputs < 2)) ok = false;
    int act_nodes = 0;
    if (ok) {
        const af_node *n = af_group_producer(g, c, conv2->inputs[0]);
        if (n && n->op != AF_OP_CONV) {
            act = n;
            d.has_act = true;
            const af_node *sig = af_group_silu_sigmoid(g, c, act);
            if (sig) { /* x * Sigmoid(x): the Mul and its Sigmoid */
                d.act = (af_epi_step){.op = AF_EPI_SILU};
                act_nodes = 2;
                n = af_group_producer(g, c, sig->inputs[0]);
            } else {
                ok = af_sched_activation_step(g, act, &d.act);
                act_nodes = 1;
                n = ok ? af_group_producer(g, c, act->inputs[0]) : NULL;
            }
        }
        conv1 = n;
    }
    if (ok && (!conv1 || conv1->op != AF_OP_CONV || conv1->n_inputs < 2 || conv1->inputs[1] < 0)) ok = false;
    if (ok) gap = af_group_producer(g, c, conv1->inputs[0]);
    const af_tensor *xt = x >= 0 ? &g->values[x].t : NULL;
    ok = ok && gap && gap->op == AF_OP_GLOBAL_AVERAGE_POOL && gap->inputs[0] == x && xt->rank == 4 &&
         xt->dims[1] > 0 && xt->dtype == AF_DTYPE_FLOAT;
    if (ok) {
        d.channels = xt->dims[1];
        const af_tensor *w1 = &g->values[conv1->inputs[1]].t;
        d.reduced = w1->rank == 4 ? w1->dims[0] : 0;
        ok = d.reduced > 0 && pointwise(g, conv1, d.channels, d.reduced, &d.w1, &d.b1) &&
             pointwise(g, conv2, d.reduced, d.channels, &d.w2, &d.b2);
    }
    if (!ok || c->n_nodes != 5 + act_nodes) {
        snprintf(why, why_size, "the group is not GlobalAveragePool, 1x1 Conv, activation, 1x1 Conv, gate, Mul");
        return false;
    }
    af_error err = {0};
    if (af_se_kernel_make(&d, o->kernels.isa, o->kernels.n_threads, &s->kernel, &err) != AF_OK) {
        snprintf(why, why_size, "%s", err.message);
        return false;
    }
    if (!af_sched_attach_kernel_node(s, mul, "SqueezeExcite", &x, 1, c->output, why, why_size)) return false;
    /* W1 and W2 are packed and the biases copied: the kernel reads none of them in place */
    const int copied[4] = {conv1->inputs[1], conv1->n_inputs > 2 ? conv1->inputs[2] : -1, conv2->inputs[1],
                           conv2->n_inputs > 2 ? conv2->inputs[2] : -1};
    for (int i = 0; i < 4; i++) af_step_hold(s, copied[i]);
    return true;
}
