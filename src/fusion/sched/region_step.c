/*
 * The fused step of an anchor-less elementwise group (family elementwise_chain, from a rule or
 * from region discovery): its nodes become one region program (src/kernels/fast/region.h) over the
 * values the group reads from outside.
 */
#include <stdio.h>
#include <string.h>

#include "fusion/sched/sched.h"
#include "ir/op.h"
#include "kernels/fast/region.h"
#include "kernels/fast/vec_internal.h"

/* The ops the vector kernels run as the unfused elementwise kernels do (Pow, Elu and the variadic
 * ops aside: their exponent, alpha and inputs). */
static const struct {
    af_op op;
    af_region_vec_kind kind;
    int ew; /* af_ew_unary_op or af_ew_binary_op */
} vec_ops[] = {
    {AF_OP_ERF, AF_REGION_VEC_UNARY, AF_EW_ERF},         {AF_OP_EXP, AF_REGION_VEC_UNARY, AF_EW_EXP},
    {AF_OP_LOG, AF_REGION_VEC_UNARY, AF_EW_LOG},         {AF_OP_SOFTPLUS, AF_REGION_VEC_UNARY, AF_EW_SOFTPLUS},
    {AF_OP_FLOOR, AF_REGION_VEC_UNARY, AF_EW_FLOOR},     {AF_OP_CEIL, AF_REGION_VEC_UNARY, AF_EW_CEIL},
    {AF_OP_ROUND, AF_REGION_VEC_UNARY, AF_EW_ROUND},
    {AF_OP_NEG, AF_REGION_VEC_UNARY, AF_EW_NEG},         {AF_OP_ABS, AF_REGION_VEC_UNARY, AF_EW_ABS},
    {AF_OP_SQRT, AF_REGION_VEC_UNARY, AF_EW_SQRT},       {AF_OP_RECIPROCAL, AF_REGION_VEC_UNARY, AF_EW_RECIPROCAL},
    {AF_OP_IDENTITY, AF_REGION_VEC_UNARY, AF_EW_COPY},   {AF_OP_ADD, AF_REGION_VEC_BINARY, AF_EW_ADD},
    {AF_OP_SUB, AF_REGION_VEC_BINARY, AF_EW_SUB},        {AF_OP_MUL, AF_REGION_VEC_BINARY, AF_EW_MUL},
    {AF_OP_DIV, AF_REGION_VEC_BINARY, AF_EW_DIV},        {AF_OP_PRELU, AF_REGION_VEC_BINARY, AF_EW_PRELU},
};

static bool is_f32(const af_graph *g, int v) { return v >= 0 && g->values[v].t.dtype == AF_DTYPE_FLOAT; }

/* The vector kernels' form of node n when it and its inputs are float32 (see af_region_vec): the
 * ops the unfused elementwise kernels run, so a fused region gives their bits. */
static af_region_vec vec_form(const af_graph *g, const af_node *n) {
    const af_region_vec none = {.kind = AF_REGION_VEC_NONE};
    if (n->n_outputs < 1 || !is_f32(g, n->outputs[0]) || n->n_inputs < 1 || !is_f32(g, n->inputs[0])) return none;
    if (n->op == AF_OP_POW) { /* a constant exponent of 2 or 0.5, as the unfused kernel takes */
        const af_value *e = n->n_inputs == 2 && n->inputs[1] >= 0 ? &g->values[n->inputs[1]] : NULL;
        if (!e || e->kind != AF_VALUE_CONST || !e->t.data || e->t.dtype != AF_DTYPE_FLOAT || af_tensor_numel(&e->t) != 1)
            return none;
        const float x = *(const float *)e->t.data;
        if (x != 2.0f && x != 0.5f) return none;
        return (af_region_vec){.kind = AF_REGION_VEC_UNARY, .op = x == 2.0f ? AF_EW_SQUARE : AF_EW_POW_HALF};
    }
    if (n->op == AF_OP_SUM || n->op == AF_OP_MEAN || n->op == AF_OP_MAX || n->op == AF_OP_MIN) {
        if (n->n_inputs < 2) return none;
        for (int k = 1; k < n->n_inputs; k++)
            if (!is_f32(g, n->inputs[k])) return none;
        const bool pair = n->n_inputs == 2 && n->op != AF_OP_MEAN; /* the binary op, as unfused */
        const int ew = n->op == AF_OP_MAX ? AF_EW_MAX : n->op == AF_OP_MIN ? AF_EW_MIN : AF_EW_ADD;
        return (af_region_vec){.kind = pair ? AF_REGION_VEC_BINARY : AF_REGION_VEC_FOLD, .op = ew,
                               .mean = n->op == AF_OP_MEAN};
    }
    if (n->op == AF_OP_ELU)
        return (af_region_vec){.kind = AF_REGION_VEC_UNARY, .op = AF_EW_ELU, .a = af_node_attr_float(n, "alpha", 1.0f)};
    for (size_t i = 0; i < sizeof vec_ops / sizeof vec_ops[0]; i++) {
        if (vec_ops[i].op != n->op) continue;
        if (vec_ops[i].kind == AF_REGION_VEC_BINARY && (n->n_inputs != 2 || !is_f32(g, n->inputs[1]))) return none;
        return (af_region_vec){.kind = vec_ops[i].kind, .op = vec_ops[i].ew};
    }
    return none;
}

bool af_sched_build_region(const af_graph *g, const af_fusion_candidate *c, const af_sched_options *o, af_step *s,
                           char *why, size_t why_size) {
    af_region_instr instrs[AF_FUSION_MAX_NODES];
    int inputs[AF_FUSION_MAX_NODES * AF_REGION_MAX_ARGS];
    int n_inputs = 0;
    const af_node *last = &g->nodes[c->nodes[c->n_nodes - 1]];
    if (last->outputs[0] != c->output) {
        snprintf(why, why_size, "the group's output is not made by its last node");
        return false;
    }
    for (int i = 0; i < c->n_nodes; i++) {
        const af_node *n = &g->nodes[c->nodes[i]];
        if (!af_fusion_region_node(g, n, why, why_size)) return false; /* what discovery admits, too */
        af_region_instr *in = &instrs[i];
        *in = (af_region_instr){.node = n, .dtype = g->values[n->outputs[0]].t.dtype, .n_args = n->n_inputs};
        for (int k = 0; k < n->n_inputs; k++) {
            int v = n->inputs[k], slot = -1;
            if (v < 0) {
                in->args[k] = (af_region_arg){.kind = AF_REGION_NONE};
                continue;
            }
            for (int j = 0; j < i && slot < 0; j++)
                if (g->nodes[c->nodes[j]].outputs[0] == v) slot = j;
            if (slot >= 0) {
                in->args[k] = (af_region_arg){.kind = AF_REGION_SLOT, .index = slot};
                continue;
            }
            int idx = 0;
            while (idx < n_inputs && inputs[idx] != v) idx++;
            if (idx == n_inputs) inputs[n_inputs++] = v;
            in->args[k] = (af_region_arg){.kind = AF_REGION_INPUT, .index = idx};
        }
        in->has_epi = in->dtype == AF_DTYPE_FLOAT && n->n_inputs >= 1 && n->inputs[0] >= 0 &&
                      g->values[n->inputs[0]].t.dtype == AF_DTYPE_FLOAT && af_sched_activation_step(g, n, &in->epi);
        if (!in->has_epi) in->vec = vec_form(g, n);
    }
    if (n_inputs > AF_REGION_MAX_INPUTS) {
        snprintf(why, why_size, "the group reads more than %d values", AF_REGION_MAX_INPUTS);
        return false;
    }
    af_region_program p = {.n_instrs = c->n_nodes, .instrs = instrs, .n_inputs = n_inputs};
    af_error err = {0};
    if (af_region_kernel_make(&p, o->kernels.isa, o->kernels.n_threads, &s->kernel, &err) != AF_OK) {
        snprintf(why, why_size, "%s", err.message);
        return false;
    }
    return af_sched_attach_kernel_node(s, last, "FusedElementwise", inputs, n_inputs, c->output, why, why_size);
}
