/* See onnx_build.h. Every allocation hangs off the builder and is freed with it. */
#include "onnx_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"

#define OB_MAX_ATTRS 8

struct ob_model {
    int opset, n_names;
    const char *prefix; /* of generated names: "" unless ob_prefix set one */
    void **owned;
    int n_owned, cap_owned;
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset_id, *opset_ptr;
    Onnx__NodeProto nodes[OB_MAX_NODES], *node_ptrs[OB_MAX_NODES];
    Onnx__AttributeProto attrs[OB_MAX_NODES][OB_MAX_ATTRS], *attr_ptrs[OB_MAX_NODES][OB_MAX_ATTRS];
    Onnx__TensorProto inits[OB_MAX_INITS], *init_ptrs[OB_MAX_INITS];
    Onnx__ValueInfoProto io[2][OB_MAX_IO], *io_ptrs[2][OB_MAX_IO];
    Onnx__TypeProto types[2][OB_MAX_IO];
    Onnx__TypeProto__Tensor ttypes[2][OB_MAX_IO];
    Onnx__TensorShapeProto shapes[OB_MAX_IO];
    Onnx__TensorShapeProto__Dimension dims[OB_MAX_IO][8], *dim_ptrs[OB_MAX_IO][8];
};

static void *own(ob_model *m, size_t size) {
    if (m->n_owned == m->cap_owned) {
        m->cap_owned = m->cap_owned ? 2 * m->cap_owned : 64;
        m->owned = realloc(m->owned, (size_t)m->cap_owned * sizeof *m->owned);
        if (!m->owned) abort();
    }
    void *p = calloc(1, size ? size : 1);
    if (!p) abort();
    return m->owned[m->n_owned++] = p;
}

static char *name(ob_model *m, const char *prefix) {
    char *s = own(m, 48);
    snprintf(s, 48, "%s%s%d", m->prefix, prefix, m->n_names++);
    return s;
}

ob_model *ob_new(int opset) {
    ob_model *m = calloc(1, sizeof *m);
    if (!m) abort();
    m->opset = opset;
    m->prefix = "";
    onnx__model_proto__init(&m->model);
    onnx__graph_proto__init(&m->graph);
    onnx__operator_set_id_proto__init(&m->opset_id);
    m->model.has_ir_version = 1;
    m->model.ir_version = 8;
    m->model.producer_name = "autofusion-tests";
    m->opset_id.domain = "";
    m->opset_id.has_version = 1;
    m->opset_id.version = opset;
    m->opset_ptr = &m->opset_id;
    m->model.n_opset_import = 1;
    m->model.opset_import = &m->opset_ptr;
    m->graph.name = "generated";
    m->graph.node = m->node_ptrs;
    m->graph.initializer = m->init_ptrs;
    m->graph.input = m->io_ptrs[0];
    m->graph.output = m->io_ptrs[1];
    m->model.graph = &m->graph;
    return m;
}

void ob_free(ob_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m);
}

void ob_prefix(ob_model *m, const char *prefix) { m->prefix = prefix; }

static Onnx__ValueInfoProto *value_info(ob_model *m, int side, const char *nm, int elem_type) {
    size_t k = side ? m->graph.n_output : m->graph.n_input;
    if (k >= OB_MAX_IO) abort();
    Onnx__ValueInfoProto *v = &m->io[side][k];
    onnx__value_info_proto__init(v);
    onnx__type_proto__init(&m->types[side][k]);
    onnx__type_proto__tensor__init(&m->ttypes[side][k]);
    v->name = (char *)nm;
    v->type = &m->types[side][k];
    v->type->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    v->type->tensor_type = &m->ttypes[side][k];
    v->type->tensor_type->has_elem_type = 1;
    v->type->tensor_type->elem_type = elem_type;
    m->io_ptrs[side][k] = v;
    if (side) m->graph.n_output++;
    else m->graph.n_input++;
    return v;
}

const char *ob_input(ob_model *m, int rank, const int64_t *dims) {
    return ob_input_of(m, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, rank, dims);
}

const char *ob_input_of(ob_model *m, int elem_type, int rank, const int64_t *dims) {
    char *nm = name(m, "in");
    size_t k = m->graph.n_input;
    Onnx__ValueInfoProto *v = value_info(m, 0, nm, elem_type);
    Onnx__TensorShapeProto *s = &m->shapes[k];
    onnx__tensor_shape_proto__init(s);
    for (int d = 0; d < rank && d < 8; d++) {
        Onnx__TensorShapeProto__Dimension *dd = &m->dims[k][d];
        onnx__tensor_shape_proto__dimension__init(dd);
        if (dims[d] < 0) { /* symbolic */
            dd->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dd->dim_param = (char *)"n";
        } else {
            dd->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dd->dim_value = dims[d];
        }
        m->dim_ptrs[k][d] = dd;
    }
    s->n_dim = (size_t)rank;
    s->dim = m->dim_ptrs[k];
    v->type->tensor_type->shape = s;
    return nm;
}

/* A new initializer of the given type and shape; *n receives its element count. */
static Onnx__TensorProto *new_init(ob_model *m, int data_type, int rank, const int64_t *dims, int64_t *n,
                                   const char **nm) {
    if (m->graph.n_initializer >= OB_MAX_INITS) abort();
    Onnx__TensorProto *t = &m->inits[m->graph.n_initializer];
    onnx__tensor_proto__init(t);
    *nm = name(m, "c");
    t->name = (char *)*nm;
    t->has_data_type = 1;
    t->data_type = data_type;
    *n = 1;
    t->n_dims = (size_t)rank;
    t->dims = own(m, (size_t)(rank ? rank : 1) * sizeof *t->dims);
    for (int d = 0; d < rank; d++) *n *= (t->dims[d] = dims[d]);
    m->init_ptrs[m->graph.n_initializer++] = t;
    return t;
}

const char *ob_const(ob_model *m, int rank, const int64_t *dims, const float *data) {
    int64_t n;
    const char *nm;
    Onnx__TensorProto *t = new_init(m, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, rank, dims, &n, &nm);
    t->n_float_data = (size_t)n;
    t->float_data = own(m, (size_t)n * sizeof(float));
    memcpy(t->float_data, data, (size_t)n * sizeof(float));
    return nm;
}

const char *ob_scalar(ob_model *m, float v) { return ob_const(m, 0, NULL, &v); }

const char *ob_const_i64(ob_model *m, int rank, const int64_t *dims, const int64_t *data) {
    int64_t n;
    const char *nm;
    Onnx__TensorProto *t = new_init(m, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, rank, dims, &n, &nm);
    t->n_int64_data = (size_t)n;
    t->int64_data = own(m, (size_t)(n ? n : 1) * sizeof(int64_t));
    memcpy(t->int64_data, data, (size_t)n * sizeof(int64_t));
    return nm;
}

const char *ob_const_i32(ob_model *m, int rank, const int64_t *dims, const int32_t *data) {
    int64_t n;
    const char *nm;
    Onnx__TensorProto *t = new_init(m, ONNX__TENSOR_PROTO__DATA_TYPE__INT32, rank, dims, &n, &nm);
    t->n_int32_data = (size_t)n;
    t->int32_data = own(m, (size_t)(n ? n : 1) * sizeof(int32_t));
    memcpy(t->int32_data, data, (size_t)n * sizeof(int32_t));
    return nm;
}

const char *ob_node(ob_model *m, const char *op, int n_in, const char *const *ins) {
    size_t k = m->graph.n_node;
    if (k >= OB_MAX_NODES) abort();
    Onnx__NodeProto *n = &m->nodes[k];
    onnx__node_proto__init(n);
    n->name = own(m, 32);
    snprintf(n->name, 32, "%sn%zu", m->prefix, k);
    n->op_type = (char *)op;
    n->domain = "";
    n->n_input = (size_t)n_in;
    n->input = own(m, (size_t)(n_in ? n_in : 1) * sizeof *n->input);
    for (int i = 0; i < n_in; i++) n->input[i] = (char *)ins[i];
    char *out = name(m, "t");
    n->n_output = 1;
    n->output = own(m, sizeof *n->output);
    n->output[0] = out;
    n->attribute = m->attr_ptrs[k];
    m->node_ptrs[m->graph.n_node++] = n;
    return out;
}

const char *ob_node1(ob_model *m, const char *op, const char *x) { return ob_node(m, op, 1, &x); }
const char *ob_node2(ob_model *m, const char *op, const char *x, const char *y) {
    const char *ins[2] = {x, y};
    return ob_node(m, op, 2, ins);
}

void ob_node_outputs(ob_model *m, int n, unsigned omit, const char **outs) {
    if (!m->graph.n_node) abort();
    Onnx__NodeProto *nd = &m->nodes[m->graph.n_node - 1];
    nd->n_output = (size_t)n;
    nd->output = own(m, (size_t)(n ? n : 1) * sizeof *nd->output);
    for (int i = 0; i < n; i++) outs[i] = nd->output[i] = omit >> i & 1 ? (char *)"" : name(m, "t");
}

int ob_last_node(const ob_model *m) { return (int)m->graph.n_node - 1; }

static Onnx__AttributeProto *attr(ob_model *m, const char *nm, Onnx__AttributeProto__AttributeType type) {
    if (!m->graph.n_node) abort();
    size_t k = m->graph.n_node - 1;
    Onnx__NodeProto *n = &m->nodes[k];
    if (n->n_attribute >= OB_MAX_ATTRS) abort();
    Onnx__AttributeProto *a = &m->attrs[k][n->n_attribute];
    onnx__attribute_proto__init(a);
    a->name = (char *)nm;
    a->has_type = 1;
    a->type = type;
    m->attr_ptrs[k][n->n_attribute++] = a;
    return a;
}

void ob_attr_f(ob_model *m, const char *nm, float v) {
    Onnx__AttributeProto *a = attr(m, nm, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

void ob_attr_i(ob_model *m, const char *nm, int64_t v) {
    Onnx__AttributeProto *a = attr(m, nm, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

void ob_attr_ints(ob_model *m, const char *nm, int n, const int64_t *v) {
    Onnx__AttributeProto *a = attr(m, nm, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = (size_t)n;
    a->ints = own(m, (size_t)(n ? n : 1) * sizeof *a->ints);
    memcpy(a->ints, v, (size_t)n * sizeof *v);
}

void ob_attr_floats(ob_model *m, const char *nm, int n, const float *v) {
    Onnx__AttributeProto *a = attr(m, nm, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
    a->n_floats = (size_t)n;
    a->floats = own(m, (size_t)(n ? n : 1) * sizeof *a->floats);
    memcpy(a->floats, v, (size_t)n * sizeof *v);
}

void ob_attr_s(ob_model *m, const char *nm, const char *v) {
    Onnx__AttributeProto *a = attr(m, nm, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.data = (uint8_t *)v;
    a->s.len = strlen(v);
}

void ob_attr_strings(ob_model *m, const char *nm, int n, const char *const *v) {
    Onnx__AttributeProto *a = attr(m, nm, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
    a->n_strings = (size_t)n;
    a->strings = own(m, (size_t)(n ? n : 1) * sizeof *a->strings);
    for (int i = 0; i < n; i++) a->strings[i] = (ProtobufCBinaryData){.len = strlen(v[i]), .data = (uint8_t *)v[i]};
}

void ob_attr_graph(ob_model *m, const char *nm, const ob_model *body) {
    Onnx__AttributeProto *a = attr(m, nm, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH);
    a->g = (Onnx__GraphProto *)&body->graph;
}

void ob_output(ob_model *m, const char *nm) { value_info(m, 1, nm, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT); }
void ob_output_of(ob_model *m, const char *nm, int elem_type) { value_info(m, 1, nm, elem_type); }

int ob_pack(const ob_model *m, uint8_t **buf, size_t *size) {
    *size = onnx__model_proto__get_packed_size(&m->model);
    *buf = malloc(*size ? *size : 1);
    if (!*buf) return -1;
    return onnx__model_proto__pack(&m->model, *buf) == *size ? 0 : -1;
}

af_model *ob_load(const ob_model *m, af_error *err) {
    uint8_t *buf = NULL;
    size_t size = 0;
    af_model *model = NULL;
    if (ob_pack(m, &buf, &size) != 0) {
        if (err) snprintf(err->message, sizeof err->message, "the model builder could not serialize the model");
        return NULL;
    }
    if (af_model_load_buffer(buf, size, NULL, NULL, &model, err) != AF_OK) model = NULL;
    free(buf);
    return model;
}
