/* What the fused-step builders ask of a group: which member makes or reads a value, the node that
 * stands for the group in the executor, and a constant's data (see sched.h). */
#include <stdio.h>
#include <string.h>

#include "fusion/sched/sched.h"
#include "util/alloc.h"

static bool in_group(const af_fusion_candidate *c, int node) {
    for (int i = 0; i < c->n_nodes; i++)
        if (c->nodes[i] == node) return true;
    return false;
}

const af_node *af_group_producer(const af_graph *g, const af_fusion_candidate *c, int v) {
    int p = v >= 0 ? g->values[v].producer : -1;
    return p >= 0 && in_group(c, p) ? &g->nodes[p] : NULL;
}

const af_node *af_group_consumer(const af_graph *g, const af_fusion_candidate *c, int v) {
    const af_node *found = NULL;
    for (int i = 0; i < c->n_nodes; i++) {
        const af_node *n = &g->nodes[c->nodes[i]];
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] == v) {
                if (found && found != n) return NULL;
                found = n;
            }
    }
    return found;
}

const af_node *af_group_silu_sigmoid(const af_graph *g, const af_fusion_candidate *c, const af_node *mul) {
    if (mul->op != AF_OP_MUL || mul->n_inputs != 2) return NULL;
    for (int k = 0; k < 2; k++) {
        const af_node *sig = af_group_producer(g, c, mul->inputs[k]);
        if (sig && sig->op == AF_OP_SIGMOID && sig->n_inputs >= 1 && sig->inputs[0] == mul->inputs[1 - k]) return sig;
    }
    return NULL;
}

static char *dup_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = af_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

af_node *af_sched_kernel_node(const af_node *like, const char *op_type, const int *inputs, int n_inputs, int output) {
    af_node *kn = af_calloc(1, sizeof *kn);
    int *ins = af_malloc((size_t)(n_inputs ? n_inputs : 1) * sizeof *ins), *outs = af_malloc(sizeof *outs);
    char *name = dup_string(like->name), *type = dup_string(op_type), *domain = dup_string("");
    if (!kn || !ins || !outs || !name || !type || !domain) {
        af_free(kn), af_free(ins), af_free(outs), af_free(name), af_free(type), af_free(domain);
        return NULL;
    }
    if (n_inputs) memcpy(ins, inputs, (size_t)n_inputs * sizeof *ins);
    outs[0] = output;
    *kn = (af_node){.name = name, .op_type = type, .domain = domain, .op = like->op, .n_inputs = n_inputs,
                    .inputs = ins, .n_outputs = 1, .outputs = outs};
    return kn;
}

bool af_sched_attach_kernel_node(af_step *s, const af_node *like, const char *op_type, const int *inputs, int n_inputs,
                                 int output, char *why, size_t why_size) {
    if ((s->kernel_node = af_sched_kernel_node(like, op_type, inputs, n_inputs, output))) return true;
    af_kernel_release(&s->kernel);
    snprintf(why, why_size, "out of memory");
    return false;
}

const float *af_sched_const_floats(const af_graph *g, int v, int64_t numel) {
    const af_value *c = af_graph_const_value(g, v);
    const af_tensor *t = c ? &c->t : NULL;
    return t && t->dtype == AF_DTYPE_FLOAT && t->data && af_tensor_numel(t) == numel ? t->data : NULL;
}
