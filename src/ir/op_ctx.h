/*
 * What an operator's shape function and reference kernel see. One context type serves both:
 *
 * infer: inputs[i] carry dtype and shape (rank -1 or dims -1 where unknown) and data when the value
 *        is known (a constant at load time, always at run time). The function sets dtype, rank and
 *        dims of every present output. Where an output's shape cannot be known yet (an unknown input
 *        shape or a non-constant shape input), it sets the dtype, rank -1 (or dims -1) and returns
 *        AF_OK. An error means the node is invalid (bad attribute, incompatible shapes).
 * run:   inputs as above, all known; outputs already have their inferred dtype/shape and allocated
 *        data (not zeroed). Ops whose output shapes only their kernel knows (If, Loop) call
 *        af_ctx_alloc_output instead.
 *
 *   static af_status af_infer_Relu(af_op_ctx *c) {
 *       const af_tensor *x = af_ctx_input(c, 0);
 *       if (!x) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs input X");
 *       *c->outputs[0] = (af_tensor){.dtype = x->dtype, .rank = x->rank};  ...copy dims...
 *   }
 */
#ifndef AF_IR_OP_CTX_H
#define AF_IR_OP_CTX_H

#include "ir/graph.h"
#include "ir/tensor.h"

struct af_exec;

/* Runs subgraph g of the current node with in[k] bound to g's k-th input; fills outs[0..n_out)
 * with newly allocated tensors (free with af_tensor_free_data). Captured values are read from
 * the running graph. */
typedef af_status (*af_subgraph_fn)(struct af_exec *exec, const af_graph *g, int n_in,
                                    const af_tensor *const *in, int n_out, af_tensor *outs,
                                    af_error *err);

typedef struct af_op_ctx {
    const af_node *node;
    const af_graph *graph;
    int opset;                       /* the default domain's opset of the model */
    int n_inputs;
    const af_tensor *const *inputs;  /* NULL entries for omitted optional inputs */
    int n_outputs;
    af_tensor *const *outputs;       /* NULL entries for omitted optional outputs */
    af_error *err;
    struct af_exec *exec;            /* run only: lets If/Loop run subgraphs */
    af_subgraph_fn run_subgraph;     /* run only */
} af_op_ctx;

/* Input i, or NULL when omitted or beyond the node's inputs. */
static inline const af_tensor *af_ctx_input(const af_op_ctx *c, int i) {
    return i < c->n_inputs ? c->inputs[i] : NULL;
}
/* Output i, or NULL when omitted or beyond the node's outputs. */
static inline af_tensor *af_ctx_output(const af_op_ctx *c, int i) {
    return i < c->n_outputs ? c->outputs[i] : NULL;
}
/* Fills c->err with "node 'NAME' (OP): <message>" and returns status. */
af_status af_ctx_fail(const af_op_ctx *c, af_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sets output i's dtype/shape and allocates its data (for ops that size outputs while running). */
af_status af_ctx_alloc_output(const af_op_ctx *c, int i, af_dtype dtype, int rank, const int64_t *dims);

/* Common shape helpers. */
/* Sets out to a copy of in's dtype and shape (no data). */
void af_shape_copy(af_tensor *out, const af_tensor *in);
/* Multidirectional (numpy) broadcast of n shapes into out's rank/dims; unknown dims stay -1.
 * Returns AF_ERR_INVALID_MODEL via c when the shapes are incompatible. */
af_status af_shape_broadcast(const af_op_ctx *c, int n, const af_tensor *const *in, af_tensor *out);
/* Normalizes a possibly negative axis against rank; fails via c when out of range. */
af_status af_ctx_axis(const af_op_ctx *c, int64_t axis, int rank, int *out);

#endif
