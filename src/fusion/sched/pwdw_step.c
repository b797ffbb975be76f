/*
 * The fused step of a pointwise_depthwise group: a 1x1 Conv (+bias) (+BatchNormalization)
 * (+activation, SiLU as Mul(v, Sigmoid(v)) included) whose output only a depthwise Conv (+bias)
 * (+BN) (+activation) reads, as the expand and depthwise layers of an inverted-residual block
 * export; or, in place of the 1x1 conv, a small dense one (a network's stem before its first
 * depthwise conv). The chain is checked node by node here, whatever rule made the group; shapes
 * must be static.
 */
#include <stdio.h>
#include <string.h>

#include "fusion/sched/sched.h"
#include "ir/op.h"
#include "ir/shape/conv_geom.h"
#include "kernels/fast/pointwise_depthwise.h"
#include "util/alloc.h"

/* Input k of n as constant float32 data of `numel` elements, or NULL. */
static const float *const_floats(const af_graph *g, const af_node *n, int k, int64_t numel) {
    return k < n->n_inputs ? af_sched_const_floats(g, n->inputs[k], numel) : NULL;
}

/* A float32 [N, C, H, W] value with C known; N, and H and W together, known or symbolic (not
 * 0): the kernel takes N per run, and the plane per run where it is unknown. */
static const af_tensor *static_nchw(const af_graph *g, int v) {
    const af_tensor *t = v >= 0 ? &g->values[v].t : NULL;
    if (!t || t->dtype != AF_DTYPE_FLOAT || t->rank != 4 || t->dims[1] < 1 || t->dims[0] == 0) return NULL;
    const bool plane = t->dims[2] > 0 && t->dims[3] > 0, unknown = t->dims[2] < 0 && t->dims[3] < 0;
    return plane || unknown ? t : NULL;
}

/* What follows a conv in the group: an optional BatchNormalization, then an optional activation
 * (one node, or SiLU as Mul(v, Sigmoid(v)): act is then the Mul). */
typedef struct conv_tail {
    const af_node *bn, *act;
    bool has_act;
    int act_nodes;
    af_epi_step act_step;
    int out; /* the value the tail ends in: the last of conv, bn, act */
} conv_tail;

/* The group's Mul(v, Sigmoid(v)) (SiLU, either order) on v, or NULL. */
static const af_node *silu_of(const af_graph *g, const af_fusion_candidate *c, int v) {
    for (int i = 0; i < c->n_nodes; i++) {
        const af_node *mul = &g->nodes[c->nodes[i]], *sig = af_group_silu_sigmoid(g, c, mul);
        if (sig && sig->inputs[0] == v && mul->n_outputs >= 1) return mul;
    }
    return NULL;
}

/* The group's chain after `conv`; *next is the group node reading its end (NULL: none). */
static bool tail_of(const af_graph *g, const af_fusion_candidate *c, const af_node *conv, conv_tail *t,
                    const af_node **next) {
    memset(t, 0, sizeof *t);
    if (conv->n_outputs < 1) return false;
    t->out = conv->outputs[0];
    const af_node *n = af_group_consumer(g, c, t->out);
    if (n && n->op == AF_OP_BATCH_NORMALIZATION) {
        if (n->n_inputs < 5 || n->inputs[0] != t->out || n->n_outputs < 1) return false;
        t->bn = n;
        t->out = n->outputs[0];
        n = af_group_consumer(g, c, t->out);
    }
    const af_node *silu = n ? NULL : silu_of(g, c, t->out); /* its Sigmoid and Mul both read the conv */
    if (silu) {
        t->act = silu;
        t->act_step = (af_epi_step){.op = AF_EPI_SILU};
        t->has_act = true;
        t->act_nodes = 2;
        t->out = silu->outputs[0];
        n = af_group_consumer(g, c, t->out);
    } else if (n && n->op != AF_OP_CONV) {
        if (n->n_inputs < 1 || n->inputs[0] != t->out || n->n_outputs < 1 ||
            !af_sched_activation_step(g, n, &t->act_step))
            return false;
        t->act = n;
        t->has_act = true;
        t->act_nodes = 1;
        t->out = n->outputs[0];
        n = af_group_consumer(g, c, t->out);
    }
    *next = n;
    return true;
}

/* BatchNormalization n folded into a conv's weights ([ch][per]) and bias (b, may be NULL) as
 * new arrays *nw, *nb, by the folds shared with conv_bn_relu (af_sched_bn_affine). False when n is
 * not inference with constant per-channel statistics. */
static bool fold_bn(const af_graph *g, const af_node *n, int64_t ch, int64_t per, const float *w, const float *b,
                    float **nw, float **nb) {
    const float *sc = const_floats(g, n, 1, ch), *sh = const_floats(g, n, 2, ch), *mean = const_floats(g, n, 3, ch),
                *var = const_floats(g, n, 4, ch);
    *nw = *nb = NULL;
    if (!sc || !sh || !mean || !var || n->n_outputs > 1 || af_node_attr_int(n, "training_mode", 0)) return false;
    float *affine = af_malloc((size_t)(2 * ch) * sizeof(float));
    *nw = af_malloc((size_t)(ch * per) * sizeof(float));
    *nb = af_malloc((size_t)ch * sizeof(float));
    if (affine && *nw && *nb) {
        af_sched_bn_affine(ch, sc, sh, mean, var, af_node_attr_float(n, "epsilon", 1e-5f), affine, affine + ch);
        af_sched_fold_affine(ch, per, w, b, affine, affine + ch, *nw, *nb);
    }
    const bool ok = affine && *nw && *nb;
    af_free(affine);
    return ok;
}

/* A conv's geometry on its input, pads resolved: on a plane of unknown size only explicit pads
 * resolve (a SAME auto_pad depends on it), and out is unknown (-1). */
static bool conv_geometry(const af_graph *g, const af_node *conv, const af_tensor *x, const af_tensor *w,
                          af_conv_geom *geo, int64_t out[2]) {
    const af_tensor *ins[3] = {x, w, NULL};
    af_op_ctx ctx = {.node = conv, .graph = g, .opset = g->opset, .n_inputs = 2, .inputs = ins};
    const int64_t kernel[2] = {w->dims[2], w->dims[3]};
    if (af_conv_geom_init(&ctx, 2, kernel, geo) != AF_OK) return false;
    if (x->dims[2] < 0) {
        out[0] = out[1] = -1;
        return geo->auto_pad == AF_CONV_PAD_NOTSET || geo->auto_pad == AF_CONV_PAD_VALID;
    }
    return af_conv_geom_forward(&ctx, geo, x->dims + 2, out) == AF_OK;
}

/* A first conv that is not 1x1 (a stem): ungrouped, undilated, static shapes, its output e.
 * Sets d's first-conv geometry and the depthwise conv's input plane (its output). */
static bool dense_first(const af_graph *g, const af_node *pw, const af_tensor *x, const af_tensor *w1,
                        const af_tensor *e, af_pwdw_desc *d) {
    if (af_node_attr_int(pw, "group", 1) != 1 || w1->dims[0] != d->channels || w1->dims[1] != d->cin ||
        w1->dims[2] < 1 || w1->dims[3] < 1 || x->dims[2] < 1 || x->dims[3] < 1 || e->dims[2] < 1 || e->dims[3] < 1)
        return false;
    af_conv_geom geo;
    int64_t out[2];
    if (!conv_geometry(g, pw, x, w1, &geo, out) || geo.dilation[0] != 1 || geo.dilation[1] != 1 ||
        out[0] != e->dims[2] || out[1] != e->dims[3])
        return false;
    d->kh1 = w1->dims[2], d->kw1 = w1->dims[3];
    d->sy1 = geo.stride[0], d->sx1 = geo.stride[1];
    d->pt1 = geo.pad_begin[0], d->pl1 = geo.pad_begin[1];
    d->xh = x->dims[2], d->xw = x->dims[3];
    d->h = e->dims[2], d->w = e->dims[3];
    return true;
}

bool af_sched_build_pwdw(const af_graph *g, const af_fusion_candidate *c, const af_sched_options *o, af_step *s,
                         char *why, size_t why_size) {
    const af_node *pw = NULL, *dw = NULL, *after_pw = NULL, *after_dw = NULL;
    int n_conv = 0;
    for (int i = 0; i < c->n_nodes; i++) {
        const af_node *n = &g->nodes[c->nodes[i]];
        if (n->op != AF_OP_CONV || n->n_inputs < 2) continue;
        n_conv++;
        if (af_group_producer(g, c, n->inputs[0])) dw = n;
        else pw = n;
    }
    af_pwdw_desc d = {0};
    conv_tail t1, t2;
    /* pw -> [bn1] -> [act1] -> dw -> [bn2] -> [act2], the group's output. */
    bool ok = n_conv == 2 && pw && dw && tail_of(g, c, pw, &t1, &after_pw) && after_pw == dw &&
              dw->inputs[0] == t1.out && tail_of(g, c, dw, &t2, &after_dw) && !after_dw && t2.out == c->output &&
              c->n_nodes == 2 + !!t1.bn + t1.act_nodes + !!t2.bn + t2.act_nodes;
    if (!ok) {
        snprintf(why, why_size,
                 "the group is not Conv (+BatchNormalization) (+activation), depthwise Conv (+BN) (+activation)");
        return false;
    }
    d.has_act1 = t1.has_act, d.act1 = t1.act_step;
    d.has_act2 = t2.has_act, d.act2 = t2.act_step;
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
    const bool dense = !plain_pw && dense_first(g, pw, x, w1, e, &d);
    const int64_t per1 = d.cin * w1->dims[2] * w1->dims[3]; /* weights per output channel */
    d.w1 = plain_pw || dense ? const_floats(g, pw, 1, d.channels * per1) : NULL;
    d.b1 = const_floats(g, pw, 2, d.channels);
    if (!d.w1 || (pw->n_inputs > 2 && pw->inputs[2] >= 0 && !d.b1)) {
        snprintf(why, why_size, "the first Conv is not a 1x1 conv, or an ungrouped undilated one of static shape, "
                                "with constant weights");
        return false;
    }
    int64_t out[2];
    const bool depthwise = af_node_attr_int(dw, "group", 1) == d.channels && w2->dims[0] == d.channels &&
                           w2->dims[1] == 1 && conv_geometry(g, dw, e, w2, &d.geo, out) && out[0] == y->dims[2] &&
                           out[1] == y->dims[3] && y->dims[1] == d.channels;
    d.w2 = depthwise ? const_floats(g, dw, 1, d.channels * d.kh * d.kw) : NULL;
    d.b2 = const_floats(g, dw, 2, d.channels);
    if (!d.w2 || (dw->n_inputs > 2 && dw->inputs[2] >= 0 && !d.b2)) {
        snprintf(why, why_size, "the second Conv is not a depthwise conv with constant weights");
        return false;
    }
    d.oh = out[0];
    d.ow = out[1];
    /* BatchNormalizations folded into copies of the weights, which the kernel packs. */
    float *fw1 = NULL, *fb1 = NULL, *fw2 = NULL, *fb2 = NULL;
    ok = (!t1.bn || fold_bn(g, t1.bn, d.channels, per1, d.w1, d.b1, &fw1, &fb1)) &&
         (!t2.bn || fold_bn(g, t2.bn, d.channels, d.kh * d.kw, d.w2, d.b2, &fw2, &fb2));
    af_error err = {0};
    if (!ok) snprintf(why, why_size, "a BatchNormalization is not inference with constant statistics per channel");
    if (ok && t1.bn) d.w1 = fw1, d.b1 = fb1;
    if (ok && t2.bn) d.w2 = fw2, d.b2 = fb2;
    if (ok && af_pwdw_kernel_make(&d, o->kernels.isa, o->kernels.n_threads, &s->kernel, &err) != AF_OK) {
        snprintf(why, why_size, "%s", err.message);
        ok = false;
    }
    af_free(fw1), af_free(fb1), af_free(fw2), af_free(fb2);
    if (!ok) return false;
    const int x_in = pw->inputs[0];
    if (!af_sched_attach_kernel_node(s, dw, "PointwiseDepthwiseConv", &x_in, 1, c->output, why, why_size))
        return false;
    /* Weights are packed, biases copied and BatchNormalizations folded: the kernel reads none of
     * these constants in place. */
    const int copied[4] = {pw->inputs[1], pw->n_inputs > 2 ? pw->inputs[2] : -1, dw->inputs[1],
                           dw->n_inputs > 2 ? dw->inputs[2] : -1};
    for (int i = 0; i < 4; i++) af_step_hold(s, copied[i]);
    for (int k = 1; k <= 4; k++) {
        if (t1.bn) af_step_hold(s, t1.bn->inputs[k]);
        if (t2.bn) af_step_hold(s, t2.bn->inputs[k]);
    }
    return true;
}
