#include "ir/graph.h"

#include <string.h>

#include "ir/tensor.h"
#include "util/alloc.h"
#include "util/error.h"

af_graph *af_graph_new(af_graph *parent) {
    af_graph *g = af_calloc(1, sizeof *g);
    if (!g) return NULL;
    g->parent = parent;
    g->opset = parent ? parent->opset : 0;
    return g;
}

void af_attr_clear(af_attr *a) {
    af_free(a->name);
    af_free(a->s);
    af_free(a->floats);
    af_free(a->ints);
    for (int i = 0; a->strings && i < a->n; i++) af_free(a->strings[i]);
    af_free(a->strings);
    af_tensor_free_data(&a->t);
    af_graph_free(a->g);
    memset(a, 0, sizeof *a);
}

void af_node_clear(af_node *n) {
    af_free(n->name);
    af_free(n->op_type);
    af_free(n->domain);
    af_free(n->inputs);
    af_free(n->outputs);
    for (int i = 0; i < n->n_attrs; i++) af_attr_clear(&n->attrs[i]);
    af_free(n->attrs);
    memset(n, 0, sizeof *n);
}

void af_graph_free(af_graph *g) {
    if (!g) return;
    for (int i = 0; i < g->n_values; i++) {
        af_value *v = &g->values[i];
        af_free(v->name);
        af_tensor_free_data(&v->t);
        for (int d = 0; d < AF_MAX_RANK; d++) af_free(v->dim_params[d]);
    }
    for (int i = 0; i < g->n_nodes; i++) af_node_clear(&g->nodes[i]);
    af_free(g->values);
    af_free(g->nodes);
    af_free(g->inputs);
    af_free(g->outputs);
    af_free(g->hash);
    af_free(g->name);
    af_free(g);
}

static uint32_t hash_name(const char *s) {
    uint32_t h = 2166136261u; /* FNV-1a */
    while (*s) h = (h ^ (uint8_t)*s++) * 16777619u;
    return h;
}

static int rehash(af_graph *g, int cap) {
    int *h = af_malloc((size_t)cap * sizeof *h);
    if (!h) return 0;
    for (int i = 0; i < cap; i++) h[i] = -1;
    for (int id = 0; id < g->n_values; id++) {
        uint32_t k = hash_name(g->values[id].name) & (uint32_t)(cap - 1);
        while (h[k] >= 0) k = (k + 1) & (uint32_t)(cap - 1);
        h[k] = id;
    }
    af_free(g->hash);
    g->hash = h;
    g->hash_cap = cap;
    return 1;
}

int af_graph_find_value(const af_graph *g, const char *name) {
    if (!g->hash_cap || !name) return -1;
    uint32_t k = hash_name(name) & (uint32_t)(g->hash_cap - 1);
    while (g->hash[k] >= 0) {
        if (strcmp(g->values[g->hash[k]].name, name) == 0) return g->hash[k];
        k = (k + 1) & (uint32_t)(g->hash_cap - 1);
    }
    return -1;
}

int af_graph_add_value(af_graph *g, const char *name, af_error *err) {
    if (g->n_values == g->cap_values) {
        int cap = g->cap_values ? g->cap_values * 2 : 16;
        af_value *v = af_realloc(g->values, (size_t)cap * sizeof *v);
        if (!v) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory adding value '%s'", name), -1;
        g->values = v;
        g->cap_values = cap;
    }
    af_value *v = &g->values[g->n_values];
    memset(v, 0, sizeof *v);
    v->name = af_strdup(name);
    if (!v->name) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory adding value '%s'", name), -1;
    v->producer = -1;
    v->outer_id = -1;
    v->t.rank = -1;
    int id = g->n_values++;
    if ((g->n_values + 1) * 2 > g->hash_cap) {
        if (!rehash(g, g->hash_cap ? g->hash_cap * 2 : 64)) {
            af_free(v->name);
            g->n_values--;
            return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory adding value '%s'", name), -1;
        }
    } else {
        uint32_t k = hash_name(name) & (uint32_t)(g->hash_cap - 1);
        while (g->hash[k] >= 0) k = (k + 1) & (uint32_t)(g->hash_cap - 1);
        g->hash[k] = id;
    }
    return id;
}

int af_graph_add_node(af_graph *g, const char *name, const char *op_type, const char *domain,
                      af_error *err) {
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? g->cap_nodes * 2 : 16;
        af_node *n = af_realloc(g->nodes, (size_t)cap * sizeof *n);
        if (!n) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory adding node '%s'", name), -1;
        g->nodes = n;
        g->cap_nodes = cap;
    }
    af_node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->name = af_strdup(name);
    n->op_type = af_strdup(op_type);
    n->domain = af_strdup(domain ? domain : "");
    if (!n->name || !n->op_type || !n->domain) {
        af_node_clear(n);
        return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory adding node '%s'", name), -1;
    }
    n->op = af_op_from_name(op_type);
    return g->n_nodes++;
}

af_status af_node_set_io(af_node *n, int n_in, const int *in, int n_out, const int *out, af_error *err) {
    int *i = af_malloc((size_t)(n_in ? n_in : 1) * sizeof *i);
    int *o = af_malloc((size_t)(n_out ? n_out : 1) * sizeof *o);
    if (!i || !o) {
        af_free(i);
        af_free(o);
        return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "node '%s': out of memory", n->name);
    }
    if (n_in) memcpy(i, in, (size_t)n_in * sizeof *i);
    if (n_out) memcpy(o, out, (size_t)n_out * sizeof *o);
    af_free(n->inputs);
    af_free(n->outputs);
    n->inputs = i;
    n->outputs = o;
    n->n_inputs = n_in;
    n->n_outputs = n_out;
    return AF_OK;
}

const af_attr *af_node_attr(const af_node *n, const char *name) {
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

int64_t af_node_attr_int(const af_node *n, const char *name, int64_t def) {
    const af_attr *a = af_node_attr(n, name);
    return a && a->type == AF_ATTR_INT ? a->i : def;
}

float af_node_attr_float(const af_node *n, const char *name, float def) {
    const af_attr *a = af_node_attr(n, name);
    if (a && a->type == AF_ATTR_FLOAT) return a->f;
    if (a && a->type == AF_ATTR_INT) return (float)a->i;
    return def;
}

const char *af_node_attr_string(const af_node *n, const char *name, const char *def) {
    const af_attr *a = af_node_attr(n, name);
    return a && a->type == AF_ATTR_STRING ? a->s : def;
}

int af_node_attr_ints(const af_node *n, const char *name, const int64_t **out) {
    const af_attr *a = af_node_attr(n, name);
    if (!a || a->type != AF_ATTR_INTS) return -1;
    *out = a->ints;
    return a->n;
}

/* Attribute `name` of n, appended (zeroed, named) when absent; NULL when out of memory. */
static af_attr *attr_slot(af_node *n, const char *name) {
    for (int a = 0; a < n->n_attrs; a++)
        if (!strcmp(n->attrs[a].name, name)) return &n->attrs[a];
    char *copy = af_strdup(name);
    af_attr *grown = copy ? af_realloc(n->attrs, (size_t)(n->n_attrs + 1) * sizeof *grown) : NULL;
    if (!grown) {
        af_free(copy);
        return NULL;
    }
    n->attrs = grown;
    af_attr *a = &n->attrs[n->n_attrs++];
    memset(a, 0, sizeof *a);
    a->name = copy;
    return a;
}

bool af_node_set_int(af_node *n, const char *name, int64_t v) {
    af_attr *a = attr_slot(n, name);
    if (!a || (a->type != AF_ATTR_INT && a->type != AF_ATTR_UNDEFINED)) return false;
    a->type = AF_ATTR_INT;
    a->i = v;
    return true;
}

bool af_node_set_ints(af_node *n, const char *name, int count, const int64_t *v) {
    int64_t *copy = af_malloc((size_t)count * sizeof *copy);
    af_attr *a = copy ? attr_slot(n, name) : NULL;
    if (!a || (a->type != AF_ATTR_INTS && a->type != AF_ATTR_UNDEFINED)) {
        af_free(copy);
        return false;
    }
    memcpy(copy, v, (size_t)count * sizeof *copy);
    af_free(a->ints);
    a->type = AF_ATTR_INTS;
    a->ints = copy;
    a->n = count;
    return true;
}

int af_node_attr_floats(const af_node *n, const char *name, const float **out) {
    const af_attr *a = af_node_attr(n, name);
    if (!a || a->type != AF_ATTR_FLOATS) return -1;
    *out = a->floats;
    return a->n;
}

const af_value *af_graph_const_value(const af_graph *g, int v) {
    while (g && v >= 0 && v < g->n_values && g->values[v].kind == AF_VALUE_OUTER) {
        v = g->values[v].outer_id;
        g = g->parent;
    }
    return g && v >= 0 && v < g->n_values && g->values[v].kind == AF_VALUE_CONST ? &g->values[v] : NULL;
}

bool af_graph_const_i64(const af_graph *g, int v, int64_t *out) {
    const af_value *c = af_graph_const_value(g, v);
    if (!c || c->t.dtype != AF_DTYPE_INT64 || !c->t.data || af_tensor_numel(&c->t) != 1) return false;
    *out = ((const int64_t *)c->t.data)[0];
    return true;
}
