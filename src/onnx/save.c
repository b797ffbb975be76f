/* ONNX writer: af_model -> ModelProto file with every tensor inline as raw_data (the model's bytes
 * as they are: little endian on the little-endian hosts the loader assumes). The protobuf tree
 * points into the model, so no tensor is copied; every struct built for it is freed in one place. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "ir/model.h"
#include "onnx/tensor_pb.h"
#include "util/alloc.h"
#include "util/error.h"

/* protobuf (C++ and Python) refuses messages of 2 GiB or more. */
#define AF_MAX_PROTO_BYTES ((size_t)INT32_MAX)

/* Every allocation for the protobuf tree sits behind one of these headers, on the save context's
 * list, so any error path releases everything with sv_free_all. */
typedef union save_block {
    union save_block *next;
    max_align_t align;
} save_block;

typedef struct save_ctx {
    save_block *blocks;
    int64_t ir_version;
    const char *path;
    af_error *err;
} save_ctx;

static void *sv_alloc(save_ctx *sc, size_t n, size_t size) {
    size_t bytes;
    if (!af_mul_size(n, size, &bytes) || bytes > SIZE_MAX - sizeof(save_block)) return NULL;
    save_block *b = af_calloc(1, sizeof *b + bytes);
    if (!b) return NULL;
    b->next = sc->blocks;
    sc->blocks = b;
    return b + 1;
}

static void sv_free_all(save_ctx *sc) {
    while (sc->blocks) {
        save_block *next = sc->blocks->next;
        af_free(sc->blocks);
        sc->blocks = next;
    }
}

static af_status sv_oom(save_ctx *sc) {
    return af_errorf(sc->err, AF_ERR_OUT_OF_MEMORY, "out of memory saving '%s'", sc->path);
}

/* SV_NEW(sc, T): a tracked, initialized T, or NULL. */
#define SV_NEW(sc, type) sv_new_##type(sc)
#define SV_DEFINE_NEW(type, init)                                                                  \
    static type *sv_new_##type(save_ctx *sc) {                                                     \
        type *p = sv_alloc(sc, 1, sizeof *p);                                                      \
        if (p) init(p);                                                                            \
        return p;                                                                                  \
    }
SV_DEFINE_NEW(Onnx__ModelProto, onnx__model_proto__init)
SV_DEFINE_NEW(Onnx__OperatorSetIdProto, onnx__operator_set_id_proto__init)
SV_DEFINE_NEW(Onnx__GraphProto, onnx__graph_proto__init)
SV_DEFINE_NEW(Onnx__NodeProto, onnx__node_proto__init)
SV_DEFINE_NEW(Onnx__AttributeProto, onnx__attribute_proto__init)
SV_DEFINE_NEW(Onnx__ValueInfoProto, onnx__value_info_proto__init)
SV_DEFINE_NEW(Onnx__TypeProto, onnx__type_proto__init)
SV_DEFINE_NEW(Onnx__TypeProto__Tensor, onnx__type_proto__tensor__init)
SV_DEFINE_NEW(Onnx__TensorShapeProto, onnx__tensor_shape_proto__init)
SV_DEFINE_NEW(Onnx__TensorShapeProto__Dimension, onnx__tensor_shape_proto__dimension__init)

/* A TensorProto over t's bytes, named `name` (NULL for attributes); `label` names it in errors. */
static af_status build_tensor(save_ctx *sc, const af_tensor *t, const char *name, const char *label,
                              Onnx__TensorProto **out) {
    if (t->rank < 0 || t->rank > AF_MAX_RANK || (t->nbytes && !t->data))
        return af_errorf(sc->err, AF_ERR_INVALID_ARGUMENT, "saving '%s': tensor '%s' has no data", sc->path, label);
    struct {
        Onnx__TensorProto p;
        int64_t dims[AF_MAX_RANK];
    } *tp = sv_alloc(sc, 1, sizeof *tp);
    if (!tp) return sv_oom(sc);
    af_tensor_to_proto(t, name, tp->dims, &tp->p);
    *out = &tp->p;
    return AF_OK;
}

/* Type and shape of v; no type at all when neither is known (as subgraph inputs may be). */
static Onnx__ValueInfoProto *build_value_info(save_ctx *sc, const af_value *v) {
    Onnx__ValueInfoProto *vi = SV_NEW(sc, Onnx__ValueInfoProto);
    if (!vi) return NULL;
    vi->name = v->name;
    if (v->t.dtype == AF_DTYPE_UNDEFINED && v->t.rank < 0) return vi;
    Onnx__TypeProto *tp = SV_NEW(sc, Onnx__TypeProto);
    Onnx__TypeProto__Tensor *tt = SV_NEW(sc, Onnx__TypeProto__Tensor);
    if (!tp || !tt) return NULL;
    vi->type = tp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    if (v->t.dtype != AF_DTYPE_UNDEFINED) {
        tt->has_elem_type = 1;
        tt->elem_type = (int32_t)v->t.dtype;
    }
    if (v->t.rank < 0) return vi;
    Onnx__TensorShapeProto *shape = SV_NEW(sc, Onnx__TensorShapeProto);
    Onnx__TensorShapeProto__Dimension **dims = sv_alloc(sc, (size_t)v->t.rank, sizeof *dims);
    if (!shape || !dims) return NULL;
    tt->shape = shape;
    shape->n_dim = (size_t)v->t.rank;
    shape->dim = dims;
    for (int d = 0; d < v->t.rank; d++) {
        if (!(dims[d] = SV_NEW(sc, Onnx__TensorShapeProto__Dimension))) return NULL;
        if (v->t.dims[d] >= 0) {
            dims[d]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dims[d]->dim_value = v->t.dims[d];
        } else if (v->dim_params[d]) {
            dims[d]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dims[d]->dim_param = v->dim_params[d];
        }
    }
    return vi;
}

static af_status build_graph(save_ctx *sc, const af_graph *g, Onnx__GraphProto **out);

static af_status build_attr(save_ctx *sc, const af_node *n, const af_attr *a, Onnx__AttributeProto **out) {
    Onnx__AttributeProto *ap = SV_NEW(sc, Onnx__AttributeProto);
    if (!ap) return sv_oom(sc);
    *out = ap;
    ap->name = a->name;
    ap->has_type = 1;
    ap->type = (Onnx__AttributeProto__AttributeType)a->type;
    switch (a->type) {
    case AF_ATTR_FLOAT: ap->has_f = 1, ap->f = a->f; break;
    case AF_ATTR_INT: ap->has_i = 1, ap->i = a->i; break;
    case AF_ATTR_STRING:
        ap->has_s = 1;
        ap->s.len = a->s ? strlen(a->s) : 0;
        ap->s.data = (uint8_t *)a->s;
        break;
    case AF_ATTR_TENSOR:
        return build_tensor(sc, &a->t, NULL, a->name, &ap->t);
    case AF_ATTR_GRAPH:
        if (!a->g)
            return af_errorf(sc->err, AF_ERR_INVALID_ARGUMENT, "saving '%s': attribute '%s' of node '%s' has no graph",
                             sc->path, a->name, n->name);
        return build_graph(sc, a->g, &ap->g);
    case AF_ATTR_FLOATS: ap->n_floats = (size_t)a->n, ap->floats = a->floats; break;
    case AF_ATTR_INTS: ap->n_ints = (size_t)a->n, ap->ints = a->ints; break;
    case AF_ATTR_STRINGS:
        ap->n_strings = (size_t)a->n;
        if (!(ap->strings = sv_alloc(sc, (size_t)a->n, sizeof *ap->strings))) return sv_oom(sc);
        for (int i = 0; i < a->n; i++) {
            ap->strings[i].len = strlen(a->strings[i]);
            ap->strings[i].data = (uint8_t *)a->strings[i];
        }
        break;
    default:
        return af_errorf(sc->err, AF_ERR_INVALID_ARGUMENT, "saving '%s': attribute '%s' of node '%s' has type %d",
                         sc->path, a->name, n->name, (int)a->type);
    }
    return AF_OK;
}

static af_status build_node(save_ctx *sc, const af_graph *g, const af_node *n, Onnx__NodeProto **out) {
    Onnx__NodeProto *np = SV_NEW(sc, Onnx__NodeProto);
    char **in = sv_alloc(sc, (size_t)n->n_inputs, sizeof *in);
    char **outs = sv_alloc(sc, (size_t)n->n_outputs, sizeof *outs);
    Onnx__AttributeProto **attrs = sv_alloc(sc, (size_t)n->n_attrs, sizeof *attrs);
    if (!np || !in || !outs || !attrs) return sv_oom(sc);
    *out = np;
    np->name = n->name;
    np->op_type = n->op_type;
    if (n->domain && *n->domain) np->domain = n->domain;
    static char empty[] = ""; /* an omitted optional input or output */
    np->n_input = (size_t)n->n_inputs;
    np->input = in;
    for (int i = 0; i < n->n_inputs; i++) in[i] = n->inputs[i] >= 0 ? g->values[n->inputs[i]].name : empty;
    np->n_output = (size_t)n->n_outputs;
    np->output = outs;
    for (int i = 0; i < n->n_outputs; i++) outs[i] = n->outputs[i] >= 0 ? g->values[n->outputs[i]].name : empty;
    np->n_attribute = (size_t)n->n_attrs;
    np->attribute = attrs;
    for (int a = 0; a < n->n_attrs; a++) {
        af_status st = build_attr(sc, n, &n->attrs[a], &attrs[a]);
        if (st != AF_OK) return st;
    }
    return AF_OK;
}

/* A node the loader folded keeps no live output; its constant outputs are written as initializers. */
static bool node_is_folded(const af_graph *g, const af_node *n) {
    bool any = false;
    for (int o = 0; o < n->n_outputs; o++) {
        if (n->outputs[o] < 0) continue;
        if (g->values[n->outputs[o]].kind != AF_VALUE_CONST) return false;
        any = true;
    }
    return any;
}

/* Values of g a node's subgraph reads; nested subgraphs read through captures of the direct child. */
static int n_outer_reads(const af_node *n) {
    int k = 0;
    for (int a = 0; a < n->n_attrs; a++)
        for (int v = 0; n->attrs[a].g && v < n->attrs[a].g->n_values; v++)
            k += n->attrs[a].g->values[v].kind == AF_VALUE_OUTER;
    return k;
}

/* Everything needed to write one graph: which nodes, in what order, and which values they read. */
typedef struct graph_plan {
    int *order;       /* indices of the nodes to write, dependencies first */
    int n_order;
    bool *read;       /* per value: read by a written node, a subgraph or the graph outputs */
    bool *produced;   /* per value: output of a written node */
} graph_plan;

/* Depth-first topological order over explicit inputs and subgraph captures. The IR keeps nodes
 * sorted, so this returns them unchanged; it also guards against a pass that forgot to. */
static af_status plan_graph(save_ctx *sc, const af_graph *g, graph_plan *p) {
    int nn = g->n_nodes, nv = g->n_values;
    int *prod = sv_alloc(sc, (size_t)nv, sizeof *prod);
    int *dep_start = sv_alloc(sc, (size_t)nn + 1, sizeof *dep_start);
    int *state = sv_alloc(sc, (size_t)nn, sizeof *state); /* 0 new, 1 on the stack, 2 written */
    int *cursor = sv_alloc(sc, (size_t)nn, sizeof *cursor);
    int *stack = sv_alloc(sc, (size_t)nn, sizeof *stack);
    p->order = sv_alloc(sc, (size_t)nn, sizeof *p->order);
    p->read = sv_alloc(sc, (size_t)nv, sizeof *p->read);
    p->produced = sv_alloc(sc, (size_t)nv, sizeof *p->produced);
    if (!prod || !dep_start || !state || !cursor || !stack || !p->order || !p->read || !p->produced)
        return sv_oom(sc);
    for (int v = 0; v < nv; v++) prod[v] = -1;
    for (int i = 0; i < nn; i++) {
        const af_node *n = &g->nodes[i];
        dep_start[i + 1] = dep_start[i];
        if (node_is_folded(g, n)) {
            state[i] = 2;
            continue;
        }
        dep_start[i + 1] += n->n_inputs + n_outer_reads(n);
        for (int o = 0; o < n->n_outputs; o++)
            if (n->outputs[o] >= 0) prod[n->outputs[o]] = i, p->produced[n->outputs[o]] = true;
    }
    int *deps = sv_alloc(sc, (size_t)dep_start[nn], sizeof *deps);
    if (!deps) return sv_oom(sc);
    for (int i = 0; i < nn; i++) {
        if (state[i]) continue;
        const af_node *n = &g->nodes[i];
        int k = dep_start[i];
        for (int j = 0; j < n->n_inputs; j++) deps[k++] = n->inputs[j];
        for (int a = 0; a < n->n_attrs; a++)
            for (int v = 0; n->attrs[a].g && v < n->attrs[a].g->n_values; v++)
                if (n->attrs[a].g->values[v].kind == AF_VALUE_OUTER) deps[k++] = n->attrs[a].g->values[v].outer_id;
        for (int j = dep_start[i]; j < k; j++)
            if (deps[j] >= 0) p->read[deps[j]] = true;
    }
    for (int i = 0; i < g->n_outputs; i++) p->read[g->outputs[i]] = true;
    p->n_order = 0;
    for (int root = 0; root < nn; root++) {
        if (state[root]) continue;
        int sp = 0;
        stack[sp++] = root;
        state[root] = 1;
        while (sp) {
            int t = stack[sp - 1];
            if (cursor[t] == dep_start[t + 1] - dep_start[t]) {
                state[t] = 2;
                p->order[p->n_order++] = t;
                sp--;
                continue;
            }
            int v = deps[dep_start[t] + cursor[t]++];
            int q = v >= 0 ? prod[v] : -1;
            if (q < 0 || state[q] == 2) continue;
            if (state[q] == 1)
                return af_errorf(sc->err, AF_ERR_INVALID_ARGUMENT, "saving '%s': the graph has a cycle through node '%s'",
                                 sc->path, g->nodes[q].name);
            state[q] = 1;
            stack[sp++] = q;
        }
    }
    return AF_OK;
}

/* A constant as `Constant` node: IR version 3 and older allow initializers only for graph inputs. */
static af_status build_constant_node(save_ctx *sc, const af_value *v, Onnx__NodeProto **out) {
    Onnx__NodeProto *np = SV_NEW(sc, Onnx__NodeProto);
    Onnx__AttributeProto *ap = SV_NEW(sc, Onnx__AttributeProto);
    Onnx__AttributeProto **attrs = sv_alloc(sc, 1, sizeof *attrs);
    char **outs = sv_alloc(sc, 1, sizeof *outs);
    if (!np || !ap || !attrs || !outs) return sv_oom(sc);
    static char op_type[] = "Constant", value[] = "value";
    np->name = v->name;
    np->op_type = op_type;
    np->n_output = 1;
    np->output = outs;
    outs[0] = v->name;
    np->n_attribute = 1;
    np->attribute = attrs;
    attrs[0] = ap;
    ap->name = value;
    ap->has_type = 1;
    ap->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    *out = np;
    return build_tensor(sc, &v->t, NULL, v->name, &ap->t);
}

/* value_info for intermediates whose type is known, so other tools need not infer it again. */
static bool wants_value_info(const af_value *v) {
    return v->kind == AF_VALUE_NODE && !v->is_output && v->t.dtype != AF_DTYPE_UNDEFINED;
}

static af_status build_graph(save_ctx *sc, const af_graph *g, Onnx__GraphProto **out) {
    Onnx__GraphProto *gp = SV_NEW(sc, Onnx__GraphProto);
    if (!gp) return sv_oom(sc);
    *out = gp;
    gp->name = g->name;
    graph_plan plan = {0};
    af_status st = plan_graph(sc, g, &plan);
    if (st != AF_OK) return st;

    /* Constants first: initializers, or Constant nodes ahead of every other node. */
    bool as_nodes = sc->ir_version < 4;
    int n_init = 0, n_const_nodes = 0, n_vi = 0;
    for (int v = 0; v < g->n_values; v++) {
        const af_value *val = &g->values[v];
        if (val->kind == AF_VALUE_INPUT && val->has_default) n_init++;
        else if (val->kind == AF_VALUE_CONST && plan.read[v] && !plan.produced[v] && as_nodes) n_const_nodes++;
        else if (val->kind == AF_VALUE_CONST && plan.read[v] && !plan.produced[v]) n_init++;
    }
    for (int k = 0; k < plan.n_order; k++) {
        const af_node *n = &g->nodes[plan.order[k]];
        for (int o = 0; o < n->n_outputs; o++) n_vi += n->outputs[o] >= 0 && wants_value_info(&g->values[n->outputs[o]]);
    }
    gp->initializer = sv_alloc(sc, (size_t)n_init, sizeof *gp->initializer);
    gp->node = sv_alloc(sc, (size_t)(n_const_nodes + plan.n_order), sizeof *gp->node);
    gp->value_info = sv_alloc(sc, (size_t)n_vi, sizeof *gp->value_info);
    gp->input = sv_alloc(sc, (size_t)g->n_inputs, sizeof *gp->input);
    gp->output = sv_alloc(sc, (size_t)g->n_outputs, sizeof *gp->output);
    if (!gp->initializer || !gp->node || !gp->value_info || !gp->input || !gp->output) return sv_oom(sc);
    for (int v = 0; v < g->n_values; v++) {
        const af_value *val = &g->values[v];
        if (val->kind == AF_VALUE_INPUT && val->has_default) {
            st = build_tensor(sc, &val->t, val->name, val->name, &gp->initializer[gp->n_initializer++]);
        } else if (val->kind == AF_VALUE_CONST && plan.read[v] && !plan.produced[v]) {
            if (as_nodes) st = build_constant_node(sc, val, &gp->node[gp->n_node++]);
            else st = build_tensor(sc, &val->t, val->name, val->name, &gp->initializer[gp->n_initializer++]);
        }
        if (st != AF_OK) return st;
    }
    for (int k = 0; k < plan.n_order; k++) {
        const af_node *n = &g->nodes[plan.order[k]];
        if ((st = build_node(sc, g, n, &gp->node[gp->n_node++])) != AF_OK) return st;
        for (int o = 0; o < n->n_outputs; o++) {
            const af_value *val = n->outputs[o] >= 0 ? &g->values[n->outputs[o]] : NULL;
            if (val && wants_value_info(val) && !(gp->value_info[gp->n_value_info++] = build_value_info(sc, val)))
                return sv_oom(sc);
        }
    }
    for (int i = 0; i < g->n_inputs; i++)
        if (!(gp->input[gp->n_input++] = build_value_info(sc, &g->values[g->inputs[i]]))) return sv_oom(sc);
    for (int i = 0; i < g->n_outputs; i++)
        if (!(gp->output[gp->n_output++] = build_value_info(sc, &g->values[g->outputs[i]]))) return sv_oom(sc);
    return AF_OK;
}

static af_status build_model(save_ctx *sc, const af_model *m, Onnx__ModelProto **out) {
    Onnx__ModelProto *mp = SV_NEW(sc, Onnx__ModelProto);
    Onnx__OperatorSetIdProto **opsets = sv_alloc(sc, (size_t)m->n_opsets, sizeof *opsets);
    if (!mp || !opsets) return sv_oom(sc);
    if (m->ir_version > 0) mp->has_ir_version = 1, mp->ir_version = m->ir_version;
    if (m->producer_name && *m->producer_name) mp->producer_name = m->producer_name;
    if (m->producer_version && *m->producer_version) mp->producer_version = m->producer_version;
    mp->n_opset_import = (size_t)m->n_opsets;
    mp->opset_import = opsets;
    for (int i = 0; i < m->n_opsets; i++) {
        if (!(opsets[i] = SV_NEW(sc, Onnx__OperatorSetIdProto))) return sv_oom(sc);
        opsets[i]->domain = m->opsets[i].domain;
        opsets[i]->has_version = 1;
        opsets[i]->version = m->opsets[i].version;
    }
    *out = mp;
    return build_graph(sc, m->graph, &mp->graph);
}

/* Streams the packed message to a file, so no second copy of the weights is ever held. */
typedef struct file_buffer {
    ProtobufCBuffer base;
    FILE *f;
    bool failed;
} file_buffer;

static void file_append(ProtobufCBuffer *b, size_t len, const uint8_t *data) {
    file_buffer *fb = (file_buffer *)b;
    if (!fb->failed && len && fwrite(data, 1, len, fb->f) != len) fb->failed = true;
}

af_status af_model_save(const af_model *model, const char *path, af_error *err) {
    if (!model || !model->graph || !path)
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "af_model_save: NULL argument");
    if (model->graph->weights_released)
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT,
                         "cannot save '%s': the model's weights were released by af_session_create_owning", path);
    save_ctx sc = {.ir_version = model->ir_version, .path = path, .err = err};
    Onnx__ModelProto *mp = NULL;
    af_status st = build_model(&sc, model, &mp);
    if (st != AF_OK) goto done;
    size_t size = onnx__model_proto__get_packed_size(mp);
    if (size > AF_MAX_PROTO_BYTES) {
        st = af_errorf(err, AF_ERR_LIMIT,
                       "cannot save '%s': the model is %zu bytes and ONNX protobuf files must stay under 2 GiB",
                       path, size);
        goto done;
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        st = af_errorf(err, AF_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
        goto done;
    }
    struct stat sb;
    bool regular = fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode);
    file_buffer fb = {.base = {.append = file_append}, .f = f};
    errno = 0;
    size_t written = onnx__model_proto__pack_to_buffer(mp, &fb.base);
    int saved_errno = errno;
    bool bad = fb.failed || written != size || ferror(f);
    if (fclose(f) != 0 && !bad) bad = true, saved_errno = errno;
    if (bad) {
        if (regular) remove(path); /* leave no truncated model behind (but never touch a device) */
        st = af_errorf(err, AF_ERR_IO, "error writing '%s'%s%s", path, saved_errno ? ": " : "",
                       saved_errno ? strerror(saved_errno) : "");
    }
done:
    sv_free_all(&sc);
    return st;
}
