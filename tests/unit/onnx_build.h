/*
 * Builds small ONNX models in memory for tests: graph inputs, float initializers, nodes with one
 * output and float/int/ints attributes, packed into ModelProto bytes with the generated protobuf-c
 * types, so a test can load them through the real loader (af_model_load_buffer).
 *
 *   ob_model *b = ob_new(13);
 *   const char *x = ob_input(b, 2, (int64_t[]){4, 8});
 *   const char *y = ob_node1(b, "Relu", x);
 *   ob_output(b, y);
 *   uint8_t *buf; size_t size;
 *   ob_pack(b, &buf, &size);   // buf is malloc'd: free(buf)
 *   ob_free(b);
 *
 * Names are generated ("in0", "c3", "t5") and owned by the builder; nodes are named "n<index>".
 *
 * A node with several outputs (RNN's Y and Y_h) gets them from ob_node_outputs after ob_node.
 *
 * A subgraph (a Loop body, an If branch) is a builder of its own with a name prefix, so its names
 * differ from the enclosing graph's; its nodes may read the enclosing graph's names:
 *
 *   ob_model *body = ob_new(13);
 *   ob_prefix(body, "b_");
 *   ... ob_input_of(body, OB_INT64, 0, NULL) ... ob_output_of(body, cond, OB_BOOL) ...
 *   ob_node(b, "Loop", 3, ins);
 *   ob_attr_graph(b, "body", body);      // body must outlive ob_pack(b, ...)
 */
#ifndef AF_TESTS_UNIT_ONNX_BUILD_H
#define AF_TESTS_UNIT_ONNX_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "autofusion.h"

#define OB_MAX_NODES 64
#define OB_MAX_INITS 64
#define OB_MAX_IO 8

typedef struct ob_model ob_model;

enum { OB_FLOAT = 1, OB_INT32 = 6, OB_INT64 = 7, OB_BOOL = 9 }; /* ONNX TensorProto data types */

ob_model *ob_new(int opset);
void ob_free(ob_model *m);
/* A float32 graph input of the given shape (a negative dim is the symbolic dim "n"). */
const char *ob_input(ob_model *m, int rank, const int64_t *dims);
/* The same of another element type (OB_INT64, OB_BOOL). */
const char *ob_input_of(ob_model *m, int elem_type, int rank, const int64_t *dims);
/* Generated names (values and nodes) start with prefix from now on; the string must outlive m. */
void ob_prefix(ob_model *m, const char *prefix);
/* A float32 initializer (rank 0: a scalar) holding data (numel values). */
const char *ob_const(ob_model *m, int rank, const int64_t *dims, const float *data);
const char *ob_scalar(ob_model *m, float v);
/* An int64 initializer (shapes for Reshape, axes). */
const char *ob_const_i64(ob_model *m, int rank, const int64_t *dims, const int64_t *data);
/* An int32 initializer (RNN's sequence_lens). */
const char *ob_const_i32(ob_model *m, int rank, const int64_t *dims, const int32_t *data);
/* A node with one output; an input name "" is an omitted optional input. Attributes added next go
 * to this node. */
const char *ob_node(ob_model *m, const char *op, int n_in, const char *const *ins);
const char *ob_node1(ob_model *m, const char *op, const char *x);
const char *ob_node2(ob_model *m, const char *op, const char *x, const char *y);
/* Gives the last node n outputs instead of one: outs[i] receives output i's name, or "" (an
 * omitted optional output) when bit i of omit is set. */
void ob_node_outputs(ob_model *m, int n, unsigned omit, const char **outs);
void ob_attr_f(ob_model *m, const char *name, float v);
void ob_attr_i(ob_model *m, const char *name, int64_t v);
void ob_attr_ints(ob_model *m, const char *name, int n, const int64_t *v);
void ob_attr_floats(ob_model *m, const char *name, int n, const float *v);
/* String attributes; the strings must outlive m. */
void ob_attr_s(ob_model *m, const char *name, const char *v);
void ob_attr_strings(ob_model *m, const char *name, int n, const char *const *v);
/* A graph attribute (a Loop's "body", an If's branches) holding body's graph. */
void ob_attr_graph(ob_model *m, const char *name, const ob_model *body);
/* Declares `name` a float32 graph output (shape left to the loader's inference). */
void ob_output(ob_model *m, const char *name);
void ob_output_of(ob_model *m, const char *name, int elem_type);
/* Serializes the model; 0 on success. *buf is malloc'd. */
int ob_pack(const ob_model *m, uint8_t **buf, size_t *size);
/* Serializes and loads the model (no external data); NULL with err filled on failure. */
af_model *ob_load(const ob_model *m, af_error *err);
/* Index of the last node added (its name is "n<index>"). */
int ob_last_node(const ob_model *m);

#endif
