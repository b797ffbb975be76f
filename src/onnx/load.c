/* ONNX loader: ModelProto (protobuf-c) -> af_model. Protobuf types end here. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/model.h"
#include "ir/op_ctx.h"
#include "ir/tensor.h"
#include "onnx/pb_wire.h"
#include "onnx/skeleton.h"
#include "onnx/tensor_pb.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/limits.h"

#define AF_MIN_OPSET 7
#define AF_MAX_OPSET 18

/* The main graph's initializer payloads when the skeleton was parsed: they are still in `file`. */
typedef struct raw_source {
    const uint8_t *file;
    const af_raw_ref *refs;
    size_t n_refs;
    bool drop_pages; /* file is the loader's own read-only mapping: its pages can go once copied */
} raw_source;

typedef struct load_ctx {
    const char *base_dir;
    const raw_source *raw; /* for the next graph loaded, the main one; NULL for subgraphs */
    int depth;
    af_limits lim;          /* resolved: no zero fields */
    int64_t n_nodes;        /* nodes seen so far, every graph */
    af_tensor_budget budget; /* what stored tensors may still take */
    char unsupported[400]; /* distinct unsupported op types, comma separated */
    int n_unsupported;
} load_ctx;

static af_status load_graph(load_ctx *lc, const Onnx__GraphProto *gp, af_graph *g, af_error *err);

af_load_options af_load_options_default(void) {
    af_limits lim = af_limits_default();
    return (af_load_options){.fold_constants = 1, .max_file_bytes = lim.max_file_bytes, .limits = lim};
}

/* The limits a load runs under: opts->limits with defaults, and the older max_file_bytes field
 * when it is the stricter one. */
static void load_limits(const af_load_options *opts, af_limits *lim) {
    af_limits_resolve(opts ? &opts->limits : NULL, lim);
    if (opts && opts->max_file_bytes && opts->max_file_bytes < lim->max_file_bytes)
        lim->max_file_bytes = opts->max_file_bytes;
}

/* Names and strings from the file: at most max_string_bytes each. */
static af_status check_string(const load_ctx *lc, const char *what, const char *s, size_t len, af_error *err) {
    if (len <= lc->lim.max_string_bytes) return AF_OK;
    return af_errorf(err, AF_ERR_LIMIT, "%s of %zu bytes (starting '%.24s'); the limit is %llu (max_string_bytes)",
                     what, len, s ? s : "", (unsigned long long)lc->lim.max_string_bytes);
}

static af_status check_name(const load_ctx *lc, const char *what, const char *s, af_error *err) {
    return s ? check_string(lc, what, s, strlen(s), err) : AF_OK;
}

static af_status check_list(const load_ctx *lc, const af_node *n, const char *attr, size_t count, af_error *err) {
    if ((uint64_t)count <= (uint64_t)lc->lim.max_attr_elems) return AF_OK;
    return af_errorf(err, AF_ERR_LIMIT, "node '%s': attribute '%s' has %zu elements; the limit is %lld (max_attr_elems)",
                     n ? n->name : "?", attr, count, (long long)lc->lim.max_attr_elems);
}

static void note_unsupported(load_ctx *lc, const char *op_type, const char *domain) {
    char item[160];
    snprintf(item, sizeof item, "%s%s%s", domain && *domain ? domain : "", domain && *domain ? "." : "", op_type);
    /* dedupe by searching ", item," in a padded copy */
    char padded[sizeof lc->unsupported + 4];
    snprintf(padded, sizeof padded, ", %s,", lc->unsupported);
    char needle[170];
    snprintf(needle, sizeof needle, ", %s,", item);
    if (strstr(padded, needle)) return;
    size_t used = strlen(lc->unsupported);
    snprintf(lc->unsupported + used, sizeof lc->unsupported - used, "%s%s", used ? ", " : "", item);
    lc->n_unsupported++;
}

/* Reads type and shape from a ValueInfoProto into v. */
static af_status read_value_info(const load_ctx *lc, const Onnx__ValueInfoProto *vi, af_value *v, af_error *err) {
    const Onnx__TypeProto *tp = vi->type;
    if (!tp) return AF_OK; /* subgraph values may omit types */
    if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        return af_errorf(err, AF_ERR_UNSUPPORTED, "value '%s': only tensor types are supported (not %s)", v->name,
                         tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE   ? "sequence"
                         : tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE ? "optional"
                         : tp->value_case == ONNX__TYPE_PROTO__VALUE_MAP_TYPE      ? "map"
                                                                                    : "sparse tensor");
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (tt->has_elem_type) {
        if (tt->elem_type < 0 || tt->elem_type >= AF_DTYPE_MAX)
            return af_errorf(err, AF_ERR_INVALID_MODEL, "value '%s' has unknown element type %d", v->name,
                             (int)tt->elem_type);
        if (af_dtype_size((af_dtype)tt->elem_type) == 0)
            return af_errorf(err, AF_ERR_UNSUPPORTED, "value '%s' has unsupported element type %s", v->name,
                             af_dtype_name((af_dtype)tt->elem_type));
        v->t.dtype = (af_dtype)tt->elem_type;
    }
    if (!tt->shape) return AF_OK;
    if (tt->shape->n_dim > (size_t)lc->lim.max_rank)
        return af_errorf(err, AF_ERR_LIMIT, "value '%s' has rank %zu; at most %d is supported (max_rank)", v->name,
                         tt->shape->n_dim, lc->lim.max_rank);
    v->t.rank = (int)tt->shape->n_dim;
    for (size_t d = 0; d < tt->shape->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        v->t.dims[d] = -1;
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (dim->dim_value < 0)
                return af_errorf(err, AF_ERR_INVALID_MODEL, "value '%s' has negative dim %lld", v->name,
                                 (long long)dim->dim_value);
            v->t.dims[d] = dim->dim_value;
        } else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dim->dim_param &&
                   *dim->dim_param) {
            af_status st = check_name(lc, "a dim name", dim->dim_param, err);
            if (st != AF_OK) return st;
            af_free(v->dim_params[d]);
            v->dim_params[d] = af_strdup(dim->dim_param);
            if (!v->dim_params[d]) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory");
        }
    }
    return AF_OK;
}

/* The id of `name` visible from g: its own values, else a value of an enclosing graph, which is
 * then captured as an AF_VALUE_OUTER value of g (and of every graph in between). */
static int resolve_name(af_graph *g, const char *name, af_error *err) {
    int id = af_graph_find_value(g, name);
    if (id >= 0 || !g->parent) return id;
    int pid = resolve_name(g->parent, name, err);
    if (pid < 0) return pid;
    id = af_graph_add_value(g, name, err);
    if (id < 0) return -2;
    af_value *v = &g->values[id];
    v->kind = AF_VALUE_OUTER;
    v->outer_id = pid;
    af_shape_copy(&v->t, &g->parent->values[pid].t);
    return id;
}

/* Makes a constant value from a Constant node's attribute. */
static af_status constant_value(load_ctx *lc, const Onnx__NodeProto *np, af_tensor *t, af_error *err) {
    memset(t, 0, sizeof *t);
    if (np->n_attribute != 1)
        return af_errorf(err, AF_ERR_INVALID_MODEL, "Constant '%s' must have exactly one attribute", np->output[0]);
    const Onnx__AttributeProto *a = np->attribute[0];
    const char *an = a->name ? a->name : "";
    if (strcmp(an, "value") == 0 && a->t) return af_tensor_from_proto(a->t, lc->base_dir, &lc->budget, t, err);
    if (strcmp(an, "value_float") == 0 || strcmp(an, "value_int") == 0) {
        t->dtype = an[6] == 'f' ? AF_DTYPE_FLOAT : AF_DTYPE_INT64;
        t->rank = 0;
        af_status st = af_tensor_alloc(t, err);
        if (st != AF_OK) return st;
        if (t->dtype == AF_DTYPE_FLOAT) ((float *)t->data)[0] = a->f;
        else ((int64_t *)t->data)[0] = a->i;
        return AF_OK;
    }
    if (strcmp(an, "value_floats") == 0 || strcmp(an, "value_ints") == 0) {
        bool f = an[6] == 'f';
        af_status st = check_list(lc, NULL, an, f ? a->n_floats : a->n_ints, err);
        if (st != AF_OK) return st;
        t->dtype = f ? AF_DTYPE_FLOAT : AF_DTYPE_INT64;
        t->rank = 1;
        t->dims[0] = (int64_t)(f ? a->n_floats : a->n_ints);
        st = af_tensor_alloc(t, err);
        if (st != AF_OK) return st;
        if (t->nbytes) memcpy(t->data, f ? (void *)a->floats : (void *)a->ints, t->nbytes);
        return AF_OK;
    }
    return af_errorf(err, AF_ERR_UNSUPPORTED, "Constant '%s': attribute '%s' is not supported", np->output[0], an);
}

/* Prefixes a subgraph error with where it happened, unless that would push the cause out of the
 * fixed-size message (deep nesting): the cause matters more than the full path. */
static af_status subgraph_prefix(af_error *err, af_status st, const char *attr, const char *node) {
    char prefix[256];
    int n = snprintf(prefix, sizeof prefix, "in subgraph '%s' of node '%s'", attr, node);
    if (!err || n < 0 || (size_t)n + 2 + strlen(err->message) >= sizeof err->message) return st;
    return af_error_prefix(err, st, "%s", prefix);
}

static af_status convert_attr(load_ctx *lc, af_graph *g, const af_node *n, const Onnx__AttributeProto *ap,
                              af_attr *a, af_error *err) {
    af_status st = check_name(lc, "an attribute name", ap->name, err);
    if (st != AF_OK) return st;
    a->name = af_strdup(ap->name ? ap->name : "");
    if (!a->name) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory");
    if (ap->ref_attr_name && *ap->ref_attr_name)
        return af_errorf(err, AF_ERR_UNSUPPORTED, "node '%s': attribute references (functions) are not supported",
                         n->name);
    switch (ap->type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: a->type = AF_ATTR_FLOAT, a->f = ap->f; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: a->type = AF_ATTR_INT, a->i = ap->i; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        a->type = AF_ATTR_STRING;
        if ((st = check_string(lc, "a string attribute", (const char *)ap->s.data, ap->s.len, err)) != AF_OK)
            return st;
        a->s = af_malloc(ap->s.len + 1);
        if (!a->s) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory");
        if (ap->s.len) memcpy(a->s, ap->s.data, ap->s.len);
        a->s[ap->s.len] = 0;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
        a->type = AF_ATTR_TENSOR;
        if (!ap->t) return af_errorf(err, AF_ERR_INVALID_MODEL, "node '%s': attribute '%s' has no tensor", n->name, a->name);
        return af_tensor_from_proto(ap->t, lc->base_dir, &lc->budget, &a->t, err);
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH: {
        a->type = AF_ATTR_GRAPH;
        if (!ap->g) return af_errorf(err, AF_ERR_INVALID_MODEL, "node '%s': attribute '%s' has no graph", n->name, a->name);
        if (lc->depth >= lc->lim.max_graph_depth)
            return af_errorf(err, AF_ERR_LIMIT, "node '%s': subgraphs nest deeper than %d (max_graph_depth)", n->name,
                             lc->lim.max_graph_depth);
        a->g = af_graph_new(g);
        if (!a->g) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory");
        lc->depth++;
        st = load_graph(lc, ap->g, a->g, err);
        lc->depth--;
        if (st != AF_OK) return subgraph_prefix(err, st, a->name, n->name);
        break;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        a->type = AF_ATTR_FLOATS;
        if ((st = check_list(lc, n, a->name, ap->n_floats, err)) != AF_OK) return st;
        a->n = (int)ap->n_floats;
        a->floats = af_malloc((ap->n_floats ? ap->n_floats : 1) * sizeof(float));
        if (!a->floats) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory");
        if (ap->n_floats) memcpy(a->floats, ap->floats, ap->n_floats * sizeof(float));
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        a->type = AF_ATTR_INTS;
        if ((st = check_list(lc, n, a->name, ap->n_ints, err)) != AF_OK) return st;
        a->n = (int)ap->n_ints;
        a->ints = af_malloc((ap->n_ints ? ap->n_ints : 1) * sizeof(int64_t));
        if (!a->ints) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory");
        if (ap->n_ints) memcpy(a->ints, ap->ints, ap->n_ints * sizeof(int64_t));
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
        a->type = AF_ATTR_STRINGS;
        if ((st = check_list(lc, n, a->name, ap->n_strings, err)) != AF_OK) return st;
        for (size_t i = 0; i < ap->n_strings; i++)
            if ((st = check_string(lc, "a string attribute", (const char *)ap->strings[i].data, ap->strings[i].len,
                                   err)) != AF_OK)
                return st;
        a->strings = af_calloc(ap->n_strings ? ap->n_strings : 1, sizeof(char *));
        if (!a->strings) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory");
        for (size_t i = 0; i < ap->n_strings; i++) {
            a->strings[i] = af_malloc(ap->strings[i].len + 1);
            if (!a->strings[i]) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory");
            a->n = (int)i + 1;
            if (ap->strings[i].len) memcpy(a->strings[i], ap->strings[i].data, ap->strings[i].len);
            a->strings[i][ap->strings[i].len] = 0;
        }
        break;
    default:
        return af_errorf(err, AF_ERR_UNSUPPORTED, "node '%s': attribute '%s' has unsupported type %d", n->name,
                         a->name, (int)ap->type);
    }
    return AF_OK;
}

static bool is_default_domain(const char *d) { return !d || !*d || strcmp(d, "ai.onnx") == 0; }

/* Attribute names whose type is the same in every ONNX operator that has them. Kernels read an
 * attribute of another type as absent, so a wrong type is refused here instead of silently running
 * with the default. A float attribute given as an int is accepted (the readers convert it). */
static const struct {
    const char *name;
    af_attr_type type;
} attr_types[] = {
    {"axis", AF_ATTR_INT}, {"axes", AF_ATTR_INTS}, {"perm", AF_ATTR_INTS}, {"group", AF_ATTR_INT},
    {"strides", AF_ATTR_INTS}, {"pads", AF_ATTR_INTS}, {"dilations", AF_ATTR_INTS},
    {"kernel_shape", AF_ATTR_INTS}, {"output_padding", AF_ATTR_INTS}, {"output_shape", AF_ATTR_INTS},
    {"keepdims", AF_ATTR_INT}, {"transA", AF_ATTR_INT}, {"transB", AF_ATTR_INT}, {"to", AF_ATTR_INT},
    {"ceil_mode", AF_ATTR_INT}, {"count_include_pad", AF_ATTR_INT}, {"blocksize", AF_ATTR_INT},
    {"epsilon", AF_ATTR_FLOAT}, {"alpha", AF_ATTR_FLOAT}, {"beta", AF_ATTR_FLOAT}, {"gamma", AF_ATTR_FLOAT},
    {"auto_pad", AF_ATTR_STRING}, {"mode", AF_ATTR_STRING}, {"equation", AF_ATTR_STRING},
    {"then_branch", AF_ATTR_GRAPH}, {"else_branch", AF_ATTR_GRAPH}, {"body", AF_ATTR_GRAPH},
};

static const char *attr_type_name(af_attr_type t) {
    static const char *const names[] = {"undefined", "float", "int", "string", "tensor", "graph", "floats", "ints",
                                        "strings"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

static af_status check_attr_type(const af_node *n, const af_attr *a, af_error *err) {
    for (size_t i = 0; i < sizeof attr_types / sizeof attr_types[0]; i++) {
        if (strcmp(attr_types[i].name, a->name) != 0) continue;
        af_attr_type want = attr_types[i].type;
        if (a->type == want || (want == AF_ATTR_FLOAT && a->type == AF_ATTR_INT)) return AF_OK;
        return af_errorf(err, AF_ERR_INVALID_MODEL, "node '%s' (%s): attribute '%s' must be %s, not %s", n->name,
                         n->op_type, a->name, attr_type_name(want), attr_type_name(a->type));
    }
    return AF_OK;
}

/* Gives initializer i of the skeleton its raw_data back, copied out of the file one tensor at a
 * time; the mapped pages go behind it, so the file and the weights are never resident together. */
static af_status fill_raw_data(const raw_source *src, size_t i, Onnx__TensorProto *tp, af_error *err) {
    const af_raw_ref *r = &src->refs[i];
    if (!r->present) return AF_OK;
    uint8_t *copy = af_protobuf_allocator.alloc(NULL, r->length ? r->length : 1);
    if (!copy) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory reading initializer %zu", i);
    memcpy(copy, src->file + r->offset, r->length);
    tp->has_raw_data = 1;
    tp->raw_data.data = copy; /* the message's own now: freed with it unless taken */
    tp->raw_data.len = r->length;
    if (src->drop_pages && r->length) {
        uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
        uintptr_t lo = (uintptr_t)(src->file + r->offset) & ~(page - 1);
        uintptr_t hi = ((uintptr_t)(src->file + r->offset + r->length) + page - 1) & ~(page - 1);
        /* Clean file pages: a later read (a neighbour's header) faults them back in from the file. */
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
    }
    return AF_OK;
}

static af_status load_graph(load_ctx *lc, const Onnx__GraphProto *gp, af_graph *g, af_error *err) {
    const raw_source *raw = lc->raw;
    lc->raw = NULL; /* subgraphs were parsed whole */
    if (raw && raw->n_refs != gp->n_initializer)
        return af_errorf(err, AF_ERR_PARSE, "not a valid ONNX model (%zu initializers parsed, %zu found)",
                         gp->n_initializer, raw->n_refs);
    if (gp->name && !(g->name = af_strdup(gp->name))) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory");
    if (gp->n_sparse_initializer) return af_errorf(err, AF_ERR_UNSUPPORTED, "sparse initializers are not supported");
    if ((uint64_t)gp->n_node > (uint64_t)(lc->lim.max_nodes - lc->n_nodes))
        return af_errorf(err, AF_ERR_LIMIT, "the model has more than %lld nodes (max_nodes)",
                         (long long)lc->lim.max_nodes);
    lc->n_nodes += (int64_t)gp->n_node;
    /* Initializers first: a graph input with the same name is an overridable default. */
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        const char *name = tp->name ? tp->name : "";
        if (!*name) return af_errorf(err, AF_ERR_INVALID_MODEL, "initializer %zu has no name", i);
        af_status st = check_name(lc, "an initializer name", name, err);
        if (st != AF_OK) return st;
        if (af_graph_find_value(g, name) >= 0)
            return af_errorf(err, AF_ERR_INVALID_MODEL, "initializer '%s' is defined twice", name);
        int id = af_graph_add_value(g, name, err);
        if (id < 0) return err ? err->status : AF_ERR_OUT_OF_MEMORY;
        g->values[id].kind = AF_VALUE_CONST;
        if (raw && (st = fill_raw_data(raw, i, (Onnx__TensorProto *)tp, err)) != AF_OK) return st;
        /* The unpacked message is the loader's own: move the bytes instead of copying them. */
        st = af_tensor_take_proto((Onnx__TensorProto *)tp, lc->base_dir, &lc->budget, &g->values[id].t, err);
        if (st != AF_OK) return st;
    }
    g->inputs = af_malloc((gp->n_input ? gp->n_input : 1) * sizeof(int));
    if (!g->inputs) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < gp->n_input; i++) {
        const char *name = gp->input[i]->name ? gp->input[i]->name : "";
        if (!*name) return af_errorf(err, AF_ERR_INVALID_MODEL, "graph input %zu has no name", i);
        if (check_name(lc, "a graph input name", name, err) != AF_OK) return err ? err->status : AF_ERR_LIMIT;
        int id = af_graph_find_value(g, name);
        if (id >= 0 && g->values[id].kind != AF_VALUE_CONST)
            return af_errorf(err, AF_ERR_INVALID_MODEL, "graph input '%s' is declared twice", name);
        af_value tmp = {.name = (char *)name, .t = {.rank = -1}};
        af_status st = read_value_info(lc, gp->input[i], &tmp, err);
        if (st == AF_OK && id >= 0) {
            /* An initializer listed as input: keep the initializer's own type and shape. */
            g->values[id].kind = AF_VALUE_INPUT;
            g->values[id].has_default = true;
            for (int d = 0; d < AF_MAX_RANK; d++) g->values[id].dim_params[d] = tmp.dim_params[d];
        } else if (st == AF_OK) {
            id = af_graph_add_value(g, name, err);
            if (id < 0) st = err ? err->status : AF_ERR_OUT_OF_MEMORY;
            else {
                g->values[id].kind = AF_VALUE_INPUT;
                g->values[id].t = tmp.t;
                for (int d = 0; d < AF_MAX_RANK; d++) g->values[id].dim_params[d] = tmp.dim_params[d];
            }
        }
        if (st != AF_OK) {
            for (int d = 0; d < AF_MAX_RANK; d++) af_free(tmp.dim_params[d]);
            return st;
        }
        g->inputs[g->n_inputs++] = id;
    }
    /* Pass 1: every node output becomes a value, so nodes may appear in any order in the file. */
    for (size_t k = 0; k < gp->n_node; k++) {
        const Onnx__NodeProto *np = gp->node[k];
        const char *op_type = np->op_type ? np->op_type : "";
        bool is_const = is_default_domain(np->domain) && strcmp(op_type, "Constant") == 0;
        if (is_const && np->n_output != 1)
            return af_errorf(err, AF_ERR_INVALID_MODEL, "Constant node %zu must have one output", k);
        for (size_t o = 0; o < np->n_output; o++) {
            const char *name = np->output[o];
            if (!name || !*name) continue;
            af_status st = check_name(lc, "a value name", name, err);
            if (st != AF_OK) return st;
            if (af_graph_find_value(g, name) >= 0)
                return af_errorf(err, AF_ERR_INVALID_MODEL, "value '%s' is produced twice (node %zu, %s)", name, k,
                                 op_type);
            int id = af_graph_add_value(g, name, err);
            if (id < 0) return err ? err->status : AF_ERR_OUT_OF_MEMORY;
            if (is_const) {
                g->values[id].kind = AF_VALUE_CONST;
                st = constant_value(lc, np, &g->values[id].t, err);
                if (st != AF_OK) return st;
            }
        }
    }
    /* Pass 2: nodes with resolved inputs, attributes and subgraphs. */
    for (size_t k = 0; k < gp->n_node; k++) {
        const Onnx__NodeProto *np = gp->node[k];
        const char *op_type = np->op_type ? np->op_type : "";
        if (is_default_domain(np->domain) && strcmp(op_type, "Constant") == 0) continue;
        if (!*op_type)
            return af_errorf(err, AF_ERR_INVALID_MODEL, "node %zu ('%s') has no op_type", k,
                             np->name ? np->name : "");
        af_status st = check_name(lc, "an op_type", op_type, err);
        if (st == AF_OK) st = check_name(lc, "a node name", np->name, err);
        if (st == AF_OK) st = check_name(lc, "a domain", np->domain, err);
        for (size_t i = 0; st == AF_OK && i < np->n_input; i++) st = check_name(lc, "an input name", np->input[i], err);
        if (st != AF_OK) return st;
        char autoname[96];
        snprintf(autoname, sizeof autoname, "%s_%zu", op_type, k);
        const char *name = np->name && *np->name ? np->name : autoname;
        int ni = af_graph_add_node(g, name, op_type, np->domain, err);
        if (ni < 0) return err ? err->status : AF_ERR_OUT_OF_MEMORY;
        af_node *n = &g->nodes[ni];
        if (!is_default_domain(np->domain) || n->op == AF_OP_UNKNOWN || !af_op_info(n->op)->infer ||
            !af_op_info(n->op)->run)
            note_unsupported(lc, op_type, is_default_domain(np->domain) ? "" : np->domain);
        if (np->n_input > 4096 || np->n_output > 4096)
            return af_errorf(err, AF_ERR_LIMIT, "node '%s' has too many inputs or outputs", name);
        int *in = af_malloc((np->n_input + np->n_output + 1) * sizeof(int));
        if (!in) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory");
        int *out = in + np->n_input;
        for (size_t i = 0; i < np->n_input; i++) {
            const char *iname = np->input[i];
            if (!iname || !*iname) {
                in[i] = -1;
                continue;
            }
            in[i] = resolve_name(g, iname, err);
            if (in[i] < 0) {
                int why = in[i]; /* read before the array is freed */
                af_free(in);
                if (why == -2) return err ? err->status : AF_ERR_OUT_OF_MEMORY;
                return af_errorf(err, AF_ERR_INVALID_MODEL, "node '%s' (%s): input '%s' is not defined", name,
                                 op_type, iname);
            }
        }
        for (size_t o = 0; o < np->n_output; o++) {
            const char *oname = np->output[o];
            out[o] = oname && *oname ? af_graph_find_value(g, oname) : -1;
            if (out[o] >= 0) g->values[out[o]].producer = ni;
        }
        st = af_node_set_io(&g->nodes[ni], (int)np->n_input, in, (int)np->n_output, out, err);
        af_free(in);
        if (st != AF_OK) return st;
        n = &g->nodes[ni];
        n->attrs = af_calloc(np->n_attribute ? np->n_attribute : 1, sizeof(af_attr));
        if (!n->attrs) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory");
        for (size_t a = 0; a < np->n_attribute; a++) {
            n->n_attrs = (int)a + 1;
            st = convert_attr(lc, g, n, np->attribute[a], &n->attrs[a], err);
            n = &g->nodes[ni]; /* a subgraph never adds nodes to g, but keep the pointer fresh */
            if (st == AF_OK && is_default_domain(np->domain)) st = check_attr_type(n, &n->attrs[a], err);
            if (st != AF_OK) return st;
        }
    }
    g->outputs = af_malloc((gp->n_output ? gp->n_output : 1) * sizeof(int));
    if (!g->outputs) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *name = gp->output[i]->name ? gp->output[i]->name : "";
        int id = resolve_name(g, name, err);
        if (id == -2) return err ? err->status : AF_ERR_OUT_OF_MEMORY;
        if (id < 0) return af_errorf(err, AF_ERR_INVALID_MODEL, "graph output '%s' is not defined", name);
        af_value decl = {.name = (char *)name, .t = {.rank = -1}};
        af_status st = check_name(lc, "a graph output name", name, err);
        if (st != AF_OK) return st;
        st = read_value_info(lc, gp->output[i], &decl, err);
        af_value *v = &g->values[id];
        for (int d = 0; d < AF_MAX_RANK; d++) {
            if (st == AF_OK && decl.dim_params[d] && !v->dim_params[d]) v->dim_params[d] = decl.dim_params[d];
            else af_free(decl.dim_params[d]);
        }
        if (st != AF_OK) return st;
        /* Declared types seed inference; node outputs are re-inferred and checked against them. */
        if (v->kind == AF_VALUE_NODE && v->t.rank < 0 && v->t.dtype == AF_DTYPE_UNDEFINED) v->t = decl.t;
        v->is_output = true;
        g->outputs[g->n_outputs++] = id;
    }
    return AF_OK;
}

/* A value whose shape is known statically (Expand, Tile, ConstantOfShape, Resize, Reshape of
 * constant shapes included) may not need more than max_tensor_bytes: refused at load, before a
 * session plans memory for it. */
static af_status check_static_sizes(const af_limits *lim, const af_graph *g, af_error *err) {
    for (int v = 0; v < g->n_values; v++) {
        const af_value *val = &g->values[v];
        int64_t numel = af_tensor_numel(&val->t);
        size_t es = af_dtype_size(val->t.dtype), bytes;
        if (numel < 0 || es == 0) continue;
        if ((uint64_t)numel > SIZE_MAX || !af_mul_size((size_t)numel, es, &bytes) || bytes > lim->max_tensor_bytes)
            return af_errorf(err, AF_ERR_LIMIT, "value '%s' (%s) is %lld elements of %zu bytes; the limit is %llu bytes (max_tensor_bytes)",
                             val->name, af_tensor_shape_str(&val->t, (char[128]){0}, 128), (long long)numel, es,
                             (unsigned long long)lim->max_tensor_bytes);
    }
    for (int i = 0; i < g->n_nodes; i++)
        for (int a = 0; a < g->nodes[i].n_attrs; a++)
            if (g->nodes[i].attrs[a].g) {
                af_status st = check_static_sizes(lim, g->nodes[i].attrs[a].g, err);
                if (st != AF_OK) return st;
            }
    return AF_OK;
}

static af_status load_model(const Onnx__ModelProto *mp, const char *base_dir, const raw_source *raw,
                            const af_load_options *opts, af_model *m, af_error *err) {
    m->ir_version = mp->has_ir_version ? mp->ir_version : 0;
    m->producer_name = af_strdup(mp->producer_name ? mp->producer_name : "");
    m->producer_version = af_strdup(mp->producer_version ? mp->producer_version : "");
    m->opsets = af_calloc(mp->n_opset_import ? mp->n_opset_import : 1, sizeof *m->opsets);
    if (!m->producer_name || !m->producer_version || !m->opsets)
        return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory");
    int64_t opset = -1;
    bool has_default = false; /* a default-domain opset was imported (its version may be anything) */
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        m->opsets[i].domain = af_strdup(o->domain ? o->domain : "");
        if (!m->opsets[i].domain) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory");
        m->opsets[i].version = o->has_version ? o->version : 0;
        m->n_opsets++;
        if (is_default_domain(o->domain)) opset = m->opsets[i].version, has_default = true;
    }
    if (!mp->graph) return af_errorf(err, AF_ERR_INVALID_MODEL, "the model has no graph");
    if (!has_default && m->n_opsets > 0)
        return af_errorf(err, AF_ERR_UNSUPPORTED, "the model imports only domain '%s'", m->opsets[0].domain);
    if (!has_default) return af_errorf(err, AF_ERR_INVALID_MODEL, "the model imports no opset");
    if (opset < AF_MIN_OPSET || opset > AF_MAX_OPSET)
        return af_errorf(err, AF_ERR_UNSUPPORTED, "opset %lld is not supported (supported: %d to %d)",
                         (long long)opset, AF_MIN_OPSET, AF_MAX_OPSET);
    if (mp->n_functions) return af_errorf(err, AF_ERR_UNSUPPORTED, "model-local functions are not supported");
    m->graph = af_graph_new(NULL);
    if (!m->graph) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory");
    m->graph->opset = (int)opset;
    load_ctx lc = {.base_dir = base_dir, .raw = raw};
    load_limits(opts, &lc.lim);
    m->limits = lc.lim;
    lc.budget = (af_tensor_budget){.max_rank = lc.lim.max_rank, .max_tensor_bytes = lc.lim.max_tensor_bytes,
                                   .max_total_bytes = lc.lim.max_initializer_bytes,
                                   .bytes_left = lc.lim.max_initializer_bytes};
    af_status st = load_graph(&lc, mp->graph, m->graph, err);
    if (st != AF_OK) return st;
    if (lc.n_unsupported)
        return af_errorf(err, AF_ERR_UNSUPPORTED, "unsupported operator%s: %s", lc.n_unsupported > 1 ? "s" : "",
                         lc.unsupported);
    if ((st = af_graph_toposort(m->graph, err)) != AF_OK) return st;
    if ((st = af_graph_infer_shapes(m->graph, err)) != AF_OK) return st;
    if ((st = check_static_sizes(&lc.lim, m->graph, err)) != AF_OK) return st;
    if (opts->fold_constants) {
        size_t fold = lc.lim.max_fold_bytes > SIZE_MAX ? SIZE_MAX : (size_t)lc.lim.max_fold_bytes;
        if ((st = af_graph_fold_constants(m->graph, fold, err)) != AF_OK) return st;
        af_graph_merge_pads(m->graph);
        af_graph_prune_conv_taps(m->graph);
        af_graph_remove_dead(m->graph);
        /* Folding shape arithmetic in part removes nodes from the middle of chains, which leaves
         * an order the sort would not give: sort again, so a saved model reloads in its order. */
        if ((st = af_graph_toposort(m->graph, err)) != AF_OK) return st;
        /* Folding can make sizes static that were not (a Slice of computed bounds): check them too. */
        if ((st = check_static_sizes(&lc.lim, m->graph, err)) != AF_OK) return st;
    }
    return AF_OK;
}

void af_model_free(af_model *m) {
    if (!m) return;
    af_graph_free(m->graph);
    for (int i = 0; i < m->n_opsets; i++) af_free(m->opsets[i].domain);
    af_free(m->opsets);
    af_free(m->producer_name);
    af_free(m->producer_version);
    af_free(m);
}

/* protobuf-c recurses once per nested message with no depth limit, so a few MB of crafted nesting
 * would overflow the stack. This walks the wire format first, following the message descriptors
 * (bytes fields are skipped whole), and refuses nesting deeper than AF_MAX_PB_DEPTH. It rejects only
 * what protobuf-c rejects too (truncation, wire types other than 0, 1, 2 and 5). */
enum { PB_WALK_OK, PB_WALK_BAD, PB_WALK_DEEP };

/* Message levels allowed: each subgraph level takes three (Graph, Node, Attribute) and a tensor
 * inside the deepest adds a few; 100 at the default depth of 16. */
static int pb_max_depth(const af_limits *lim) {
    int d = 3 * lim->max_graph_depth + 52;
    return d < 100 ? 100 : d;
}

static int pb_walk(const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t n, int depth, int max_depth) {
    if (depth > max_depth) return PB_WALK_DEEP;
    size_t i = 0;
    while (i < n) {
        af_pb_field fd;
        if (!af_pb_next_field(p, n, &i, &fd)) return PB_WALK_BAD;
        if (fd.wire != 2) continue;
        const ProtobufCFieldDescriptor *f =
            fd.number <= 0x1fffffff ? protobuf_c_message_descriptor_get_field(desc, (unsigned)fd.number) : NULL;
        if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
            int r = pb_walk(f->descriptor, p + fd.value, fd.end - fd.value, depth + 1, max_depth);
            if (r != PB_WALK_OK) return r;
        }
    }
    return PB_WALK_OK;
}

/* Messages carry names from the file; keep them on one line. */
static af_status one_line(af_error *err, af_status st) {
    if (st != AF_OK && err)
        for (char *c = err->message; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = ' ';
    return st;
}

/* Parses the skeleton (the model without its initializer payloads) when it can be built, so
 * protobuf-c never copies the weights: they are copied out of `data` one initializer at a time.
 * mapped: data is the loader's own read-only mapping of the file, whose pages it may drop. */
static af_status load_buffer(const void *data, size_t size, bool mapped, const char *base_dir,
                             const af_load_options *opts, af_model **out, af_error *err) {
    if (!out || (!data && size)) return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "af_model_load_buffer: NULL argument");
    *out = NULL;
    af_load_options defaults = af_load_options_default();
    if (!opts) opts = &defaults;
    af_limits lim;
    load_limits(opts, &lim);
    if (size > lim.max_file_bytes)
        return af_errorf(err, AF_ERR_LIMIT, "model is %zu bytes; the limit is %llu (max_file_bytes)", size,
                         (unsigned long long)lim.max_file_bytes);
    /* an empty buffer is a valid, empty ModelProto; say what it more likely is */
    if (size == 0) return af_errorf(err, AF_ERR_PARSE, "not a valid ONNX model (the model is empty)");
    int max_depth = pb_max_depth(&lim);
    int walk = pb_walk(&onnx__model_proto__descriptor, data, size, 0, max_depth);
    if (walk == PB_WALK_DEEP)
        return af_errorf(err, AF_ERR_LIMIT, "protobuf messages nest deeper than %d levels (max_graph_depth)", max_depth);
    if (walk == PB_WALK_BAD) return af_errorf(err, AF_ERR_PARSE, "not a valid ONNX model (protobuf parse failed)");
    af_skeleton sk;
    bool stripped = af_skeleton_build(data, size, &sk); /* else the whole buffer is parsed */
    bool oom = false; /* set by the allocator, so a failed allocation is not reported as bad bytes */
    ProtobufCAllocator alloc = af_protobuf_allocator;
    alloc.allocator_data = &oom;
    Onnx__ModelProto *mp = stripped ? onnx__model_proto__unpack(&alloc, sk.size, sk.bytes)
                                    : onnx__model_proto__unpack(&alloc, size, data);
    raw_source raw = {.file = data, .refs = sk.refs, .n_refs = sk.n_refs, .drop_pages = mapped};
    af_free(sk.bytes);
    sk.bytes = NULL;
    af_status st;
    af_model *m = NULL;
    if (!mp && oom) st = af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory parsing the model");
    else if (!mp) st = af_errorf(err, AF_ERR_PARSE, "not a valid ONNX model (protobuf parse failed)");
    else if (!(m = af_calloc(1, sizeof *m))) st = af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory");
    else st = load_model(mp, base_dir, stripped ? &raw : NULL, opts, m, err);
    if (mp) onnx__model_proto__free_unpacked(mp, &alloc);
    if (stripped) af_skeleton_free(&sk);
    if (st != AF_OK) {
        af_model_free(m);
        return st;
    }
    *out = m;
    return AF_OK;
}

af_status af_model_load_buffer(const void *data, size_t size, const char *base_dir, const af_load_options *opts,
                               af_model **out, af_error *err) {
    return one_line(err, load_buffer(data, size, false, base_dir, opts, out, err));
}

/* The whole file in memory: a private read-only mapping where the file allows one (its pages are
 * dropped as initializers are copied out), read() into a buffer where not. Like any runtime that
 * maps its model, a file truncated by someone else while it loads faults (SIGBUS). */
static af_status map_file(int fd, const char *path, size_t size, void **data, bool *mapped, af_error *err) {
    *mapped = false;
    if (size == 0) {
        *data = NULL;
        return AF_OK;
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map != MAP_FAILED) {
        madvise(map, size, MADV_SEQUENTIAL);
        *data = map;
        *mapped = true;
        return AF_OK;
    }
    uint8_t *buf = af_malloc(size);
    if (!buf) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory reading '%s'", path);
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    if (got != size) {
        af_free(buf);
        return af_errorf(err, AF_ERR_IO, "short read on '%s'", path);
    }
    *data = buf;
    return AF_OK;
}

static af_status load_file(const char *path, const af_load_options *opts, af_model **out, af_error *err) {
    if (!path || !out) return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "af_model_load: NULL argument");
    *out = NULL;
    af_limits lim;
    load_limits(opts, &lim);
    uint64_t max_bytes = lim.max_file_bytes;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused just below */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return af_errorf(err, AF_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return af_errorf(err, AF_ERR_IO, "'%s' is not a regular file", path);
    }
    if ((uint64_t)sb.st_size > max_bytes) {
        close(fd);
        return af_errorf(err, AF_ERR_LIMIT, "'%s' is %lld bytes; the limit is %llu (max_file_bytes)", path,
                         (long long)sb.st_size,
                         (unsigned long long)max_bytes);
    }
    size_t size = (size_t)sb.st_size;
    void *data = NULL;
    bool mapped = false;
    af_status st = map_file(fd, path, size, &data, &mapped, err);
    close(fd);
    if (st != AF_OK) return st;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    if (slash == dir) snprintf(dir, sizeof dir, "/");
    st = load_buffer(data, size, mapped, dir, opts, out, err);
    if (mapped) munmap(data, size);
    else af_free(data);
    return st;
}

af_status af_model_load(const char *path, const af_load_options *opts, af_model **out, af_error *err) {
    return one_line(err, load_file(path, opts, out, err));
}
