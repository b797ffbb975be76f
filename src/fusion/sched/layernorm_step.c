/*
 * The fused step of a layernorm group: a LayerNormalization (the op, or its decomposition
 * ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add as exporters write it before opset 17),
 * optionally with the residual Add in front. It becomes one LayerNormalization kernel node whose
 * fourth input is the residual, run by the fast norm kernel row by row: the sum and the
 * normalized row never leave L1. The structure is checked here node by node, whatever rule made
 * the group, so a rule that matched something else is rejected, never miscomputed.
 */
#include <stdio.h>
#include <string.h>

#include "fusion/sched/sched.h"
#include "ir/op.h"
#include "util/alloc.h"

typedef struct ln_parts {
    int x, residual, scale, bias; /* value ids; -1 absent */
    float eps;
    int64_t axis;                 /* of the LayerNormalization op; -1 for the decomposition */
    int used;                     /* group nodes accounted for */
} ln_parts;

static const af_tensor *const_float(const af_graph *g, int v) {
    const af_value *c = af_graph_const_value(g, v);
    return c && c->t.dtype == AF_DTYPE_FLOAT && c->t.data ? &c->t : NULL;
}

/* A ReduceMean over the last axis only, keeping dims. */
static bool mean_last_axis(const af_graph *g, const af_node *n) {
    if (!n || n->op != AF_OP_REDUCE_MEAN || af_node_attr_int(n, "keepdims", 1) != 1) return false;
    int rank = g->values[n->inputs[0]].t.rank;
    const int64_t *axes = NULL;
    int n_axes = af_node_attr_ints(n, "axes", &axes);
    int64_t axis;
    if (n_axes == 1) {
        axis = axes[0];
    } else if (n_axes <= 0 && n->n_inputs > 1) { /* opset 18: axes as an input */
        if (!af_graph_const_i64(g, n->inputs[1], &axis)) return false;
    } else {
        return false;
    }
    return rank > 0 && (axis == -1 || axis == rank - 1);
}

/* The other input of binary node n, given one of them. */
static int other_input(const af_node *n, int v) {
    if (n->n_inputs != 2) return -1;
    return n->inputs[0] == v ? n->inputs[1] : n->inputs[1] == v ? n->inputs[0] : -1;
}

static bool is_scalar_value(const af_tensor *t, float want, bool any) {
    return t && af_tensor_numel(t) == 1 && (any || ((const float *)t->data)[0] == want);
}

/* (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps), then * gamma, + beta. */
static bool decomposed(const af_graph *g, const af_fusion_candidate *c, ln_parts *p, char *why, size_t n_why) {
    const af_node *div = NULL;
    for (int i = 0; i < c->n_nodes; i++)
        if (g->nodes[c->nodes[i]].op == AF_OP_DIV) div = &g->nodes[c->nodes[i]];
    const af_node *sub = div ? af_group_producer(g, c, div->inputs[0]) : NULL;
    const af_node *sd = div ? af_group_producer(g, c, div->inputs[1]) : NULL;
    const af_node *add_eps = sd && sd->op == AF_OP_SQRT ? af_group_producer(g, c, sd->inputs[0]) : NULL;
    const af_node *var = NULL, *sq = NULL, *mean = NULL;
    if (add_eps && add_eps->op == AF_OP_ADD && add_eps->n_inputs == 2) {
        for (int k = 0; k < 2 && !var; k++) {
            const af_node *n = af_group_producer(g, c, add_eps->inputs[k]);
            const af_tensor *e = const_float(g, add_eps->inputs[1 - k]);
            if (n && is_scalar_value(e, 0, true)) {
                var = n;
                p->eps = ((const float *)e->data)[0];
            }
        }
    }
    if (var && mean_last_axis(g, var)) sq = af_group_producer(g, c, var->inputs[0]);
    bool sq_ok = sub && sub->op == AF_OP_SUB && sq &&
                 ((sq->op == AF_OP_POW && sq->inputs[0] == sub->outputs[0] &&
                   is_scalar_value(const_float(g, sq->inputs[1]), 2.0f, false)) ||
                  (sq->op == AF_OP_MUL && sq->inputs[0] == sub->outputs[0] && sq->inputs[1] == sub->outputs[0]));
    if (sq_ok) mean = af_group_producer(g, c, sub->inputs[1]);
    if (!sq_ok || !mean_last_axis(g, mean) || mean->inputs[0] != sub->inputs[0]) {
        snprintf(why, n_why, "the group is not a LayerNorm decomposition");
        return false;
    }
    p->x = sub->inputs[0];
    p->used = 7;
    p->axis = -1;
    int y = div->outputs[0];
    const af_node *gamma = af_group_consumer(g, c, y);
    if (!gamma || gamma->op != AF_OP_MUL || !const_float(g, other_input(gamma, y))) {
        snprintf(why, n_why, "a LayerNorm decomposition without a constant scale");
        return false;
    }
    p->scale = other_input(gamma, y);
    p->used++;
    y = gamma->outputs[0];
    const af_node *beta = af_group_consumer(g, c, y);
    if (beta && beta->op == AF_OP_ADD && const_float(g, other_input(beta, y))) {
        p->bias = other_input(beta, y);
        p->used++;
        y = beta->outputs[0];
    }
    if (y != c->output) {
        snprintf(why, n_why, "the group's output is not the normalized value");
        return false;
    }
    return true;
}

static bool layernorm_op(const af_graph *g, const af_fusion_candidate *c, ln_parts *p, char *why, size_t n_why) {
    const af_node *ln = af_group_producer(g, c, c->output);
    if (!ln || ln->op != AF_OP_LAYER_NORMALIZATION || ln->n_inputs < 2) return false;
    for (int k = 1; k < ln->n_outputs; k++)
        if (ln->outputs[k] >= 0) {
            snprintf(why, n_why, "the LayerNorm's Mean or InvStdDev output is used");
            return false;
        }
    p->x = ln->inputs[0];
    p->scale = ln->inputs[1];
    p->bias = ln->n_inputs > 2 ? ln->inputs[2] : -1;
    p->eps = af_node_attr_float(ln, "epsilon", 1e-5f);
    p->axis = af_node_attr_int(ln, "axis", -1);
    p->used = 1;
    return true;
}

bool af_sched_build_layernorm(const af_graph *g, const af_fusion_candidate *c, const af_sched_options *o, af_step *s,
                              char *why, size_t why_size) {
    ln_parts p = {.x = -1, .residual = -1, .scale = -1, .bias = -1};
    why[0] = 0;
    if (!layernorm_op(g, c, &p, why, why_size) && (why[0] || !decomposed(g, c, &p, why, why_size))) return false;
    /* The residual: an Add of two tensors from outside the group, shaped alike, making x. */
    const af_node *res = af_group_producer(g, c, p.x);
    if (res) {
        if (res->op != AF_OP_ADD || res->n_inputs != 2 || af_group_producer(g, c, res->inputs[0]) ||
            af_group_producer(g, c, res->inputs[1]) || !af_tensor_same_shape(&g->values[res->inputs[0]].t,
                                                                      &g->values[res->inputs[1]].t) ||
            af_tensor_numel(&g->values[res->inputs[0]].t) < 0) {
            snprintf(why, why_size, "the LayerNorm's input is not a residual Add of two like tensors");
            return false;
        }
        p.x = res->inputs[0];
        p.residual = res->inputs[1];
        p.used++;
    }
    if (p.used != c->n_nodes) {
        snprintf(why, why_size, "the group holds nodes besides the LayerNorm and its residual");
        return false;
    }
    af_attr *attrs = af_calloc(2, sizeof *attrs);
    char *eps_name = af_malloc(8), *axis_name = af_malloc(5);
    int ins[4] = {p.x, p.scale, p.bias, p.residual};
    af_node *kn = attrs && eps_name && axis_name
                      ? af_sched_kernel_node(&g->nodes[c->nodes[c->n_nodes - 1]], "LayerNormalization", ins,
                                             p.residual >= 0 ? 4 : 3, c->output)
                      : NULL;
    if (!kn) {
        af_free(attrs), af_free(eps_name), af_free(axis_name);
        snprintf(why, why_size, "out of memory");
        return false;
    }
    strcpy(eps_name, "epsilon");
    strcpy(axis_name, "axis");
    attrs[0] = (af_attr){.name = eps_name, .type = AF_ATTR_FLOAT, .f = p.eps};
    attrs[1] = (af_attr){.name = axis_name, .type = AF_ATTR_INT, .i = p.axis};
    kn->op = AF_OP_LAYER_NORMALIZATION;
    kn->n_attrs = 2;
    kn->attrs = attrs;
    s->kernel_node = kn;
    af_kernel_request req = {.graph = g, .node = kn, .choice = o->kernels};
    af_error err = {0};
    if (af_kernel_select(&req, &s->kernel, &err) != AF_OK || !s->kernel.run) {
        af_kernel_release(&s->kernel);
        snprintf(why, why_size, "%s", err.message[0] ? err.message : "no fast LayerNorm kernel for these shapes");
        return false;
    }
    return true;
}
