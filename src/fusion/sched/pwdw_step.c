/*
 * The fused step of a pointwise_depthwise group: a 1x1 Conv (+bias) (+activation) whose output
 * only a depthwise Conv (+bias) (+activation) reads, as the expand and depthwise layers of an
 * inverted-residual block export. The chain is checked node by node here, whatever rule made the
 * group; shapes must be static.
 */
#include <stdio.h>
#include <string.h>

#include "fusion/sched/sched.h"
#include "ir/op.h"
#include "ir/shape/conv_geom.h"
#include "kernels/fast/pointwise_depthwise.h"

static const float *const_floats(const af_graph *g, const af_node *n, int k, int64_t numel) {
    if (k >= n->n_inputs || n->inputs[k] < 0) return NULL;
    const af_value *c = af_graph_const_value(g, n->inputs[k]);
    const af_tensor *t = c ? &c->t : NULL;
    return t && t->dtype == AF_DTYPE_FLOAT && t->data && af_tensor_numel(t) == numel ? t->data : NULL;
}

/* A static float32 [1.., C, H, W] value. */
static const af_tensor *static_nchw(const af_graph *g, int v) {
    const af_tensor *t = v >= 0 ? &g->values[v].t : NULL;
    if (!t || t->dtype != AF_DTYPE_FLOAT || t->rank != 4) return NULL;
    for (int i = 0; i < 4; i++)
        if (t->dims[i] < 1) return NULL;
    return t;
}

/* The activation after `conv` in the group (its output's one reader there), if any. */
static bool trailing_act(const af_graph *g, const af_fusion_candidate *c, const af_node *conv, const af_node **act,
                         af_epi_step *step, bool *has) {
    *act = af_group_consumer(g, c, conv->outputs[0]);
    *has = false;
    if (!*act || (*act)->op == AF_OP_CONV) {
        *act = NULL;
        return true;
    }
    *has = true;
    return (*act)->n_inputs >= 1 && (*act)->inputs[0] == conv->outputs[0] && af_sched_activation_step(g, *act, step);
}

/* The depthwise conv's geometry on its static input, pads resolved. */
static bool dw_geometry(const af_graph *g, const af_node *dw, const af_tensor *x, const af_tensor *w, af_conv_geom *geo,
                        int64_t out[2]) {
    const af_tensor *ins[3] = {x, w, NULL};
    af_op_ctx ctx = {.node = dw, .graph = g, .opset = g->opset, .n_inputs = 2, .inputs = ins};
    const int64_t kernel[2] = {w->dims[2], w->dims[3]};
    return af_conv_geom_init(&ctx, 2, kernel, geo) == AF_OK && af_conv_geom_forward(&ctx, geo, x->dims + 2, out) == AF_OK;
}

bool af_sched_build_pwdw(const af_graph *g, const af_fusion_candidate *c, const af_sched_options *o, af_step *s,
                         char *why, size_t why_size) {
    const af_node *pw = NULL, *dw = NULL, *act1 = NULL, *act2 = NULL;
    int n_conv = 0;
    for (int i = 0; i < c->n_nodes; i++) {
        const af_node *n = &g->nodes[c->nodes[i]];
        if (n->op != AF_OP_CONV || n->n_inputs < 2) continue;
        n_conv++;
        if (af_group_producer(g, c, n->inputs[0])) dw = n;
        else pw = n;
    }
    af_pwdw_desc d = {0};
    bool ok = n_conv == 2 && pw && dw && trailing_act(g, c, pw, &act1, &d.act1, &d.has_act1) &&
              trailing_act(g, c, dw, &act2, &d.act2, &d.has_act2);
    /* The depthwise conv reads the 1x1 conv's output, through act1 when present. */
    ok = ok && dw->inputs[0] == (act1 ? act1->outputs[0] : pw->outputs[0]);
    ok = ok && c->n_nodes == 2 + (act1 != NULL) + (act2 != NULL) &&
         c->output == (act2 ? act2->outputs[0] : dw->outputs[0]);
    if (!ok) {
        snprintf(why, why_size, "the group is not 1x1 Conv (+activation), depthwise Conv (+activation)");
        return false;
    }
    const af_tensor *x = static_nchw(g, pw->inputs[0]), *e = static_nchw(g, dw->inputs[0]),
                    *y = static_nchw(g, c->output);
    const af_tensor *w1 = &g->values[pw->inputs[1]].t, *w2 = &g->values[dw->inputs[1]].t;
    if (!x || !e || !y || x->dims[0] != y->dims[0] || w1->rank != 4 || w2->rank != 4) {
        snprintf(why, why_size, "needs static float32 NCHW shapes");
        return false;
    }
    d.cin = x->dims[1];
    d.channels = e->dims[1];
    d.h = x->dims[2];
    d.w = x->dims[3];
    d.kh = w2->dims[2];
    d.kw = w2->dims[3];
    const int64_t *v;
    bool plain_pw = af_node_attr_int(pw, "group", 1) == 1 && w1->dims[0] == d.channels && w1->dims[1] == d.cin &&
                    w1->dims[2] == 1 && w1->dims[3] == 1 && e->dims[2] == d.h && e->dims[3] == d.w;
    for (int i = 0, k = af_node_attr_ints(pw, "strides", &v); plain_pw && i < k; i++) plain_pw = v[i] == 1;
    for (int i = 0, k = af_node_attr_ints(pw, "pads", &v); plain_pw && i < k; i++) plain_pw = v[i] == 0;
    d.w1 = plain_pw ? const_floats(g, pw, 1, d.channels * d.cin) : NULL;
    d.b1 = const_floats(g, pw, 2, d.channels);
    if (!d.w1 || (pw->n_inputs > 2 && pw->inputs[2] >= 0 && !d.b1)) {
        snprintf(why, why_size, "the first Conv is not a 1x1 conv with constant weights");
        return false;
    }
    int64_t out[2];
    const bool depthwise = af_node_attr_int(dw, "group", 1) == d.channels && w2->dims[0] == d.channels &&
                           w2->dims[1] == 1 && dw_geometry(g, dw, e, w2, &d.geo, out) && out[0] == y->dims[2] &&
                           out[1] == y->dims[3] && y->dims[1] == d.channels;
    d.w2 = depthwise ? const_floats(g, dw, 1, d.channels * d.kh * d.kw) : NULL;
    d.b2 = const_floats(g, dw, 2, d.channels);
    if (!d.w2 || (dw->n_inputs > 2 && dw->inputs[2] >= 0 && !d.b2)) {
        snprintf(why, why_size, "the second Conv is not a depthwise conv with constant weights");
        return false;
    }
    d.oh = out[0];
    d.ow = out[1];
    af_error err = {0};
    if (af_pwdw_kernel_make(&d, o->isa, o->n_threads, &s->kernel, &err) != AF_OK) {
        snprintf(why, why_size, "%s", err.message);
        return false;
    }
    const int x_in = pw->inputs[0];
    if (!(s->kernel_node = af_sched_kernel_node(dw, "PointwiseDepthwiseConv", &x_in, 1, c->output))) {
        af_kernel_release(&s->kernel);
        snprintf(why, why_size, "out of memory");
        return false;
    }
    /* Weights are packed and the biases copied: the kernel reads none of them in place. */
    const int copied[4] = {pw->inputs[1], pw->n_inputs > 2 ? pw->inputs[2] : -1, dw->inputs[1],
                           dw->n_inputs > 2 ? dw->inputs[2] : -1};
    for (int i = 0; i < 4; i++) af_step_hold(s, copied[i]);
    return true;
}
