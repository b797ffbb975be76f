/*
 * Partial folding of shape arithmetic. A model exported with a symbolic batch computes its
 * reshape targets at run time: Shape(x) -> Gather -> Unsqueeze -> Concat -> Reshape, where x is
 * [N, 116, 28, 28] and only N is unknown. Constant folding cannot fold that chain, so every size
 * after the Reshape stayed unknown, and with them the convolutions' shapes the fused kernels need.
 * Here such small int64 values are tracked element by element (known, or unknown and, where it
 * is one, tied to the dim of the tensor it was read from); a value whose elements all become
 * known is made a constant, and a Reshape whose target is partly known gets the output dims it
 * implies. Nothing is guessed: an element is known only when computed from known elements, and a
 * Reshape's -1 is solved only when every unknown dim on both sides is the same dim of its input.
 *
 *   af_shape_data *sd = af_shape_data_new(g->n_values);
 *   for each node n in order: af_fold_partial(g, n, sd, err);   // before the node's refresh
 *   af_shape_data_free(sd);
 */
#ifndef AF_IR_FOLD_PARTIAL_H
#define AF_IR_FOLD_PARTIAL_H

#include "ir/graph.h"
#include "util/error.h"

typedef struct af_shape_data af_shape_data;

/* Per-value element data for a graph of n_values values; NULL when out of memory (then folding
 * simply goes without it). */
af_shape_data *af_shape_data_new(int n_values);
void af_shape_data_free(af_shape_data *sd);

/* Node n (Shape, Gather, Slice, Unsqueeze, Squeeze, Identity, Cast to int64, Concat, Add, Sub, Mul,
 * Div; Reshape, Resize and Transpose; others are left alone) on the element data of its inputs:
 * records its output's, or makes the output a constant when every element is known (the node then
 * is dead), or for a Reshape or Resize refines its output's unknown dims (a Reshape or Transpose
 * also records which dims pass through). Fails only on allocation. */
af_status af_fold_partial(af_graph *g, const af_node *n, af_shape_data *sd, af_error *err);

#endif
