/*
 * The graph IR: values (typed, shaped, optionally constant), nodes in topological order, and
 * nested subgraphs for If/Loop that may read values of the enclosing graph.
 *
 *   af_graph *g = af_graph_new(NULL);
 *   int x = af_graph_add_value(g, "x", err);               // id, or -1 on failure
 *   int n = af_graph_add_node(g, "relu1", "Relu", "", err); // then fill g->nodes[n] inputs/outputs
 *   af_graph_free(g);
 *
 * Every name is owned by the graph. Value ids are stable for the graph's lifetime.
 */
#ifndef AF_IR_GRAPH_H
#define AF_IR_GRAPH_H

#include <stdbool.h>

#include "autofusion.h"
#include "ir/op.h"

/* Numbering matches ONNX's AttributeProto.AttributeType. */
typedef enum af_attr_type {
    AF_ATTR_UNDEFINED = 0,
    AF_ATTR_FLOAT = 1,
    AF_ATTR_INT = 2,
    AF_ATTR_STRING = 3,
    AF_ATTR_TENSOR = 4,
    AF_ATTR_GRAPH = 5,
    AF_ATTR_FLOATS = 6,
    AF_ATTR_INTS = 7,
    AF_ATTR_STRINGS = 8,
} af_attr_type;

typedef struct af_graph af_graph;

typedef struct af_attr {
    char *name;
    af_attr_type type;
    float f;
    int64_t i;
    char *s;          /* STRING: NUL-terminated copy */
    int n;            /* element count of floats / ints / strings */
    float *floats;
    int64_t *ints;
    char **strings;
    af_tensor t;      /* TENSOR: data owned by the attribute */
    af_graph *g;      /* GRAPH: owned by the attribute */
} af_attr;

typedef enum af_value_kind {
    AF_VALUE_NODE,  /* produced by a node */
    AF_VALUE_INPUT, /* graph input; t.data holds the default when has_default */
    AF_VALUE_CONST, /* initializer, Constant node or folded result: t.data holds it */
    AF_VALUE_OUTER, /* subgraphs only: a value of the enclosing graph, outer_id there */
} af_value_kind;

typedef struct af_value {
    char *name;
    af_tensor t; /* dtype and shape (rank -1 / dims -1 where unknown); data for constants */
    char *dim_params[AF_MAX_RANK]; /* symbolic dim names from the file, or NULL */
    af_value_kind kind;
    int producer;  /* node index for AF_VALUE_NODE, else -1 */
    int outer_id;  /* AF_VALUE_OUTER: value id in the parent graph */
    bool has_default;
    bool is_output;
} af_value;

typedef struct af_node {
    char *name;    /* never NULL: loader names unnamed nodes "<op>_<index>" */
    char *op_type; /* as in the file */
    char *domain;  /* "" for the default ONNX domain */
    af_op op;
    int n_inputs;
    int *inputs;   /* value ids; -1 for an omitted optional input */
    int n_outputs;
    int *outputs;  /* value ids; -1 for an omitted optional output */
    int n_attrs;
    af_attr *attrs;
} af_node;

struct af_graph {
    char *name;
    int n_values, cap_values;
    af_value *values;
    int n_nodes, cap_nodes;
    af_node *nodes;
    int n_inputs;  /* graph inputs in declared order (initializer-only names excluded) */
    int *inputs;
    int n_outputs;
    int *outputs;
    int opset;     /* default-domain opset, inherited by subgraphs */
    af_graph *parent;
    int hash_cap;  /* open-addressing name -> value id table */
    int *hash;
    bool weights_released; /* an owning session freed constants' data (runtime/weight_release.c):
                              no other session or save may use this graph */
};

af_graph *af_graph_new(af_graph *parent);
void af_graph_free(af_graph *g);
/* Adds a value named `name` (must not exist yet in this graph); returns its id or -1. */
int af_graph_add_value(af_graph *g, const char *name, af_error *err);
/* The id of `name` in this graph only, or -1. */
int af_graph_find_value(const af_graph *g, const char *name);
/* The constant value v is: v itself when constant, or, for a subgraph's capture of an enclosing
 * graph's value (AF_VALUE_OUTER, through any depth), that value when it is a constant there; else
 * NULL. Its data may be NULL (weights released after packing). Lets a Loop body's MatMul read
 * the enclosing graph's weight as a weight. */
const af_value *af_graph_const_value(const af_graph *g, int v);
/* Whether v is (or captures) a one-element int64 constant with data; its value in *out. */
bool af_graph_const_i64(const af_graph *g, int v, int64_t *out);
/* Appends a node with no inputs/outputs/attrs; returns its index or -1. */
int af_graph_add_node(af_graph *g, const char *name, const char *op_type, const char *domain,
                      af_error *err);
/* Sets the node's input/output arrays to copies of ids. */
af_status af_node_set_io(af_node *n, int n_in, const int *in, int n_out, const int *out, af_error *err);
void af_attr_clear(af_attr *a);
void af_node_clear(af_node *n);

/* Attribute access; return the default when the attribute is absent. */
const af_attr *af_node_attr(const af_node *n, const char *name);
int64_t af_node_attr_int(const af_node *n, const char *name, int64_t def);
float af_node_attr_float(const af_node *n, const char *name, float def);
const char *af_node_attr_string(const af_node *n, const char *name, const char *def);
/* Number of ints and *out pointing at them, or -1 when absent. */
int af_node_attr_ints(const af_node *n, const char *name, const int64_t **out);
/* Sets n's int / ints attribute `name`, appending it when absent; false (n unchanged but for a
 * new attribute of no type) when out of memory or the attribute has another type. */
bool af_node_set_int(af_node *n, const char *name, int64_t v);
bool af_node_set_ints(af_node *n, const char *name, int count, const int64_t *v);

/* FLOPs of one node from static shapes (0 where a shape is unknown); multiply-adds count as two,
 * a convolution as its direct form whatever algorithm runs it, a recurrent op (RNN, GRU, LSTM) its
 * gate products W x_t and R h_{t-1}, other ops one per output element. */
double af_node_flops(const af_graph *g, const af_node *n);
/* The same from given tensors: inputs 0, 1, 2 and output 0 (NULL where absent), e.g. the shapes
 * of one run of a graph whose shapes are symbolic. */
double af_node_flops_of(const af_node *n, const af_tensor *x, const af_tensor *w, const af_tensor *r,
                        const af_tensor *y);
int af_node_attr_floats(const af_node *n, const char *name, const float **out);

/* Sorts nodes topologically (stable); fails naming a node on a cycle. Recomputes producers. */
af_status af_graph_toposort(af_graph *g, af_error *err);
/* Removes nodes whose outputs reach no graph output (recursing into subgraph reads). */
void af_graph_remove_dead(af_graph *g);
/* Moves each Pad of constant zero on the spatial axes (none on N and C, none negative) into the
 * one node reading it, a Conv or an AveragePool (which then counts padding; not one with
 * ceil_mode, auto_pad or uncounted pads of its own), and reads the Pad's input there instead: the
 * same arithmetic without the padded copy. The Pad is left unread for af_graph_remove_dead.
 * Graphs with subgraphs are left alone. Returns the pads moved. */
int af_graph_merge_pads(af_graph *g);
/* Drops the taps of a 2-D Conv (constant float weights, explicit pads, static shapes) that read
 * only padding at every output position, when the taps kept are the kernel's own rectangle and
 * the pads shrink to match: a dilated 3x3 over a plane smaller than its dilation (DeepLabV3's
 * ASPP: dilation 24 and 36 on 14x14) is then the 1x1 conv it computes. The node reads a new
 * constant of the kept taps; a tap it drops multiplied zeros only (it is not dropped where one of
 * its weights is not finite: 0 x inf is NaN). Returns the convs changed. */
int af_graph_prune_conv_taps(af_graph *g);
/* Infers dtypes and shapes of every node output from the inputs' declared shapes. */
af_status af_graph_infer_shapes(af_graph *g, af_error *err);
/* Evaluates nodes whose inputs are all constant, and Shape/Size of statically shaped values,
 * turning their outputs into constants (results above max_bytes are left alone). */
af_status af_graph_fold_constants(af_graph *g, size_t max_bytes, af_error *err);

#endif
