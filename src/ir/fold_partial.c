/* Partial folding of shape arithmetic (see fold_partial.h). */
#include "ir/fold_partial.h"

#include <string.h>

#include "ir/op.h"
#include "ir/shape/generators.h"
#include "ir/tensor.h"
#include "util/alloc.h"

#define ELEMS 8 /* the longest shape-like value tracked: a rank-8 shape */

/* One element: known (v), or not and then maybe tied to dim `dim` of value `of` (of < 0: no tie). */
typedef struct elem {
    int64_t v;
    bool known;
    int of, dim;
} elem;

/* One small int64 value: n elements (n == 0: nothing known). */
typedef struct elems {
    int n;
    bool scalar; /* rank 0 (n == 1) */
    elem el[ELEMS];
} elems;

/* The element data per value, and which unknown dims are the same dim: a union-find over
 * (value, dim) pairs, joined where a Reshape or Transpose passes a dim through. */
struct af_shape_data {
    int n_values;
    int *same; /* parent of key v * AF_MAX_RANK + d */
    elems e[];
};

af_shape_data *af_shape_data_new(int n_values) {
    const size_t nv = (size_t)(n_values > 0 ? n_values : 1);
    af_shape_data *sd = af_calloc(1, sizeof *sd + nv * sizeof(elems));
    int *same = af_malloc(nv * AF_MAX_RANK * sizeof *same);
    if (!sd || !same) {
        af_free(sd);
        af_free(same);
        return NULL;
    }
    for (size_t k = 0; k < nv * AF_MAX_RANK; k++) same[k] = (int)k;
    sd->n_values = n_values;
    sd->same = same;
    return sd;
}

void af_shape_data_free(af_shape_data *sd) {
    if (sd) af_free(sd->same);
    af_free(sd);
}

static int root(const af_shape_data *sd, int v, int d) {
    int k = v * AF_MAX_RANK + d;
    while (sd->same[k] != k) k = sd->same[k];
    return k;
}

/* Dim a of value va is dim b of value vb. */
static void join(af_shape_data *sd, int va, int a, int vb, int b) {
    if (va < 0 || vb < 0 || va >= sd->n_values || vb >= sd->n_values || a < 0 || b < 0 || a >= AF_MAX_RANK ||
        b >= AF_MAX_RANK)
        return;
    const int ra = root(sd, va, a), rb = root(sd, vb, b);
    if (ra != rb) sd->same[ra] = rb;
}

/* The dim of value x that unknown element i of e is, or -1. */
static int tied_dim(const af_shape_data *sd, const elem *e, int x, const af_tensor *xt) {
    if (e->known || e->of < 0 || e->of >= sd->n_values) return -1;
    const int r = root(sd, e->of, e->dim);
    for (int d = 0; d < xt->rank && d < AF_MAX_RANK; d++)
        if (xt->dims[d] < 0 && root(sd, x, d) == r) return d;
    return -1;
}

/* Value v's elements: a constant int64/int32 of at most ELEMS elements and rank 0 or 1, or what
 * was recorded for it. */
static bool get(const af_graph *g, const af_shape_data *sd, int v, elems *out) {
    if (v < 0 || v >= sd->n_values) return false;
    const af_value *val = &g->values[v];
    if (val->kind == AF_VALUE_CONST) {
        const af_tensor *t = &val->t;
        const int64_t n = af_tensor_numel(t);
        if (!t->data || t->rank > 1 || n < 0 || n > ELEMS ||
            (t->dtype != AF_DTYPE_INT64 && t->dtype != AF_DTYPE_INT32))
            return false;
        *out = (elems){.n = (int)n, .scalar = t->rank == 0};
        for (int i = 0; i < out->n; i++)
            out->el[i] = (elem){.v = t->dtype == AF_DTYPE_INT64 ? ((const int64_t *)t->data)[i]
                                                                 : ((const int32_t *)t->data)[i],
                                .known = true};
        return out->n > 0;
    }
    if (sd->e[v].n == 0) return false;
    *out = sd->e[v];
    return true;
}

/* Node output v gets e: made a constant when every element is known (its declared shape must
 * hold them: rank 0 or 1 int64 of e.n elements), else recorded. */
static af_status put(af_graph *g, af_shape_data *sd, int v, const elems *e, af_error *err) {
    if (v < 0 || e->n == 0) return AF_OK;
    af_value *val = &g->values[v];
    bool all = true;
    for (int i = 0; i < e->n; i++) all &= e->el[i].known;
    const af_tensor *t = &val->t;
    const bool fits = t->dtype == AF_DTYPE_INT64 && t->rank == (e->scalar ? 0 : 1) && af_tensor_numel(t) == e->n;
    if (!fits) return AF_OK;
    if (!all) {
        sd->e[v] = *e;
        return AF_OK;
    }
    af_tensor c = *t;
    c.data = NULL;
    af_status st = af_tensor_alloc(&c, err);
    if (st != AF_OK) return st;
    for (int i = 0; i < e->n; i++) ((int64_t *)c.data)[i] = e->el[i].v;
    val->t = c;
    val->kind = AF_VALUE_CONST;
    return AF_OK;
}

static elems shape_of(const af_graph *g, const af_node *n) {
    elems e = {0};
    const int x = n->n_inputs > 0 ? n->inputs[0] : -1;
    const af_tensor *t = x >= 0 ? &g->values[x].t : NULL;
    if (!t || t->rank < 0) return e;
    const af_op_ctx ctx = {.node = n, .graph = g, .opset = g->opset};
    int start, end;
    af_generators_shape_range(&ctx, t->rank, &start, &end);
    if (end - start > ELEMS) return e;
    for (int d = start; d < end; d++)
        e.el[e.n++] = t->dims[d] >= 0 ? (elem){.v = t->dims[d], .known = true} : (elem){.of = x, .dim = d};
    return e;
}

/* Gather along axis 0 of a rank-1 value by constant indices. */
static elems gather(const af_graph *g, const af_shape_data *sd, const af_node *n) {
    elems e = {0}, data, idx;
    if (n->n_inputs < 2 || af_node_attr_int(n, "axis", 0) != 0 || !get(g, sd, n->inputs[0], &data) || data.scalar ||
        g->values[n->inputs[1]].kind != AF_VALUE_CONST || !get(g, sd, n->inputs[1], &idx))
        return e;
    for (int i = 0; i < idx.n; i++) {
        const int64_t k = idx.el[i].v < 0 ? idx.el[i].v + data.n : idx.el[i].v;
        if (k < 0 || k >= data.n) return (elems){0};
        e.el[i] = data.el[k];
    }
    e.n = idx.n;
    e.scalar = idx.scalar;
    return e;
}

/* Slice of a rank-1 value by constant one-element starts and ends (axes, if given, [0]; steps,
 * if given, positive), clamped as ONNX clamps them. */
static elems slice(const af_graph *g, const af_shape_data *sd, const af_node *n) {
    elems e = {0}, data, b, en;
    elems ax = {.n = 1, .el = {{.v = 0, .known = true}}}, st = {.n = 1, .el = {{.v = 1, .known = true}}};
    if (n->n_inputs < 3 || !get(g, sd, n->inputs[0], &data) || data.scalar) return e;
    for (int k = 1; k < n->n_inputs && k < 5; k++)
        if (n->inputs[k] >= 0 && g->values[n->inputs[k]].kind != AF_VALUE_CONST) return e;
    if (!get(g, sd, n->inputs[1], &b) || !get(g, sd, n->inputs[2], &en) || b.n != 1 || en.n != 1) return e;
    if (n->n_inputs > 3 && n->inputs[3] >= 0 && (!get(g, sd, n->inputs[3], &ax) || ax.n != 1)) return e;
    if (n->n_inputs > 4 && n->inputs[4] >= 0 && (!get(g, sd, n->inputs[4], &st) || st.n != 1)) return e;
    const int64_t axis = ax.el[0].v, step = st.el[0].v, len = data.n;
    if ((axis != 0 && axis != -1) || step < 1) return e;
    int64_t lo = b.el[0].v < 0 ? b.el[0].v + len : b.el[0].v, hi = en.el[0].v < 0 ? en.el[0].v + len : en.el[0].v;
    lo = lo < 0 ? 0 : lo > len ? len : lo;
    hi = hi < 0 ? 0 : hi > len ? len : hi;
    const int64_t count = hi > lo ? (hi - lo - 1) / step + 1 : 0; /* a huge step cannot overflow i */
    for (int64_t j = 0; j < count; j++) e.el[e.n++] = data.el[lo + j * step];
    return e;
}

static elems concat(const af_graph *g, const af_shape_data *sd, const af_node *n) {
    elems e = {0}, part;
    const int64_t axis = af_node_attr_int(n, "axis", 0);
    if (axis != 0 && axis != -1) return e;
    for (int k = 0; k < n->n_inputs; k++) {
        if (!get(g, sd, n->inputs[k], &part) || part.scalar || e.n + part.n > ELEMS) return (elems){0};
        for (int i = 0; i < part.n; i++) e.el[e.n++] = part.el[i];
    }
    return e;
}

/* Add, Sub, Mul, Div elementwise, a one-element side broadcast; an element is known when both
 * are (a Div by zero, or of negatives, whose rounding ONNX leaves to the runtime, is not). */
static elems arith(const af_graph *g, const af_shape_data *sd, const af_node *n) {
    elems e = {0}, a, b;
    if (n->n_inputs != 2 || !get(g, sd, n->inputs[0], &a) || !get(g, sd, n->inputs[1], &b)) return e;
    if (a.n != b.n && a.n != 1 && b.n != 1) return e;
    e.n = a.n > b.n ? a.n : b.n;
    e.scalar = a.scalar && b.scalar;
    for (int i = 0; i < e.n; i++) {
        const elem *x_ = &a.el[a.n == 1 ? 0 : i], *y_ = &b.el[b.n == 1 ? 0 : i];
        e.el[i] = (elem){.of = -1}; /* unknown and untied unless computed below */
        if (!x_->known || !y_->known) continue;
        const int64_t x = x_->v, y = y_->v;
        int64_t r;
        bool ok = true;
        switch (n->op) {
        case AF_OP_ADD: ok = !__builtin_add_overflow(x, y, &r); break;
        case AF_OP_SUB: ok = !__builtin_sub_overflow(x, y, &r); break;
        case AF_OP_MUL: ok = !__builtin_mul_overflow(x, y, &r); break;
        default: ok = x >= 0 && y > 0, r = ok ? x / y : 0; break;
        }
        if (ok) e.el[i] = (elem){.v = r, .known = true};
    }
    return e;
}

/* Reshape of x by a partly known target: known elements are dims (0 copies x's dim, -1 is
 * solved below), an unknown element tied to dim d of x is x's dim d, others stay unknown. The -1
 * is solved when every unknown dim of x is matched by a tied target element and the rest of both
 * sides is known. Only output dims still unknown are set. */
static void reshape(af_graph *g, af_shape_data *sd, const af_node *n) {
    elems s;
    if (n->n_inputs < 2 || n->n_outputs < 1 || n->outputs[0] < 0 || g->values[n->inputs[1]].kind == AF_VALUE_CONST ||
        !get(g, sd, n->inputs[1], &s) || s.scalar)
        return;
    const int x = n->inputs[0];
    const af_tensor *in = &g->values[x].t;
    af_tensor *out = &g->values[n->outputs[0]].t;
    if (in->rank < 0 || out->rank != s.n || (g->opset >= 14 && af_node_attr_int(n, "allowzero", 0))) return;
    int64_t dims[ELEMS];
    bool tied_in[AF_MAX_RANK] = {false};
    int infer_at = -1;
    int64_t prod_out = 1, prod_in = 1;
    bool solvable = true;
    for (int i = 0; i < s.n; i++) {
        const elem *t = &s.el[i];
        dims[i] = -1;
        if (t->known && t->v == -1) {
            if (infer_at >= 0) return;
            infer_at = i;
            continue;
        }
        int tie = -1;
        if (t->known && t->v == 0) tie = i < in->rank ? i : -2; /* copies x's dim i */
        else if (t->known) dims[i] = t->v;
        else tie = tied_dim(sd, t, x, in);
        if (tie == -2) return;
        if (tie >= 0) {
            join(sd, n->outputs[0], i, x, tie);
            dims[i] = in->dims[tie];
            if (in->dims[tie] < 0) {
                if (tied_in[tie]) solvable = false; /* one dim of x used twice */
                tied_in[tie] = true;
                continue;
            }
        }
        if (dims[i] < 0 || __builtin_mul_overflow(prod_out, dims[i], &prod_out)) solvable = false;
    }
    for (int d = 0; d < in->rank && solvable; d++)
        if (in->dims[d] >= 0) solvable = !__builtin_mul_overflow(prod_in, in->dims[d], &prod_in);
        else solvable = tied_in[d];
    if (infer_at >= 0 && solvable && prod_out > 0 && prod_in % prod_out == 0) dims[infer_at] = prod_in / prod_out;
    for (int i = 0; i < s.n; i++)
        if (out->dims[i] < 0 && dims[i] >= 0) out->dims[i] = dims[i];
}

/* A Resize to partly known sizes (input 3, over every axis: no `axes`, the default `stretch`
 * policy): the output has each known size. */
static void resize(af_graph *g, const af_shape_data *sd, const af_node *n) {
    elems s;
    if (n->n_inputs < 4 || n->inputs[3] < 0 || g->values[n->inputs[3]].kind == AF_VALUE_CONST ||
        !get(g, sd, n->inputs[3], &s) || s.scalar || af_node_attr(n, "axes") ||
        strcmp(af_node_attr_string(n, "keep_aspect_ratio_policy", "stretch"), "stretch") != 0)
        return;
    af_tensor *out = &g->values[n->outputs[0]].t;
    if (out->rank != s.n) return;
    for (int i = 0; i < s.n; i++)
        if (out->dims[i] < 0 && s.el[i].known && s.el[i].v >= 0) out->dims[i] = s.el[i].v;
}

/* Output dim i of a Transpose is input dim perm[i] (reversed without perm). */
static void transpose(const af_graph *g, af_shape_data *sd, const af_node *n) {
    if (n->n_inputs < 1 || n->inputs[0] < 0) return;
    const int rank = g->values[n->inputs[0]].t.rank;
    const int64_t *perm = NULL;
    const int np = af_node_attr_ints(n, "perm", &perm);
    if (rank < 0 || rank > AF_MAX_RANK || (np >= 0 && np != rank)) return;
    for (int i = 0; i < rank; i++) {
        const int64_t p = np >= 0 ? perm[i] : rank - 1 - i;
        if (p >= 0 && p < rank) join(sd, n->outputs[0], i, n->inputs[0], (int)p);
    }
}

af_status af_fold_partial(af_graph *g, const af_node *n, af_shape_data *sd, af_error *err) {
    if (!sd || n->n_outputs < 1 || n->outputs[0] < 0) return AF_OK;
    elems e = {0}, in;
    switch (n->op) {
    case AF_OP_SHAPE: e = shape_of(g, n); break;
    case AF_OP_GATHER: e = gather(g, sd, n); break;
    case AF_OP_CONCAT: e = concat(g, sd, n); break;
    case AF_OP_SLICE: e = slice(g, sd, n); break;
    case AF_OP_ADD:
    case AF_OP_SUB:
    case AF_OP_MUL:
    case AF_OP_DIV: e = arith(g, sd, n); break;
    case AF_OP_CAST:
        if (af_node_attr_int(n, "to", 0) != AF_DTYPE_INT64) break;
        /* fall through */
    case AF_OP_IDENTITY:
    case AF_OP_UNSQUEEZE:
    case AF_OP_SQUEEZE:
        if (n->n_inputs >= 1 && get(g, sd, n->inputs[0], &in) && in.n == 1) {
            e = in; /* a scalar to one element and back, the only rank change tracked */
            e.scalar = g->values[n->outputs[0]].t.rank == 0;
        } else if (n->n_inputs >= 1 && (n->op == AF_OP_IDENTITY || n->op == AF_OP_CAST) &&
                   get(g, sd, n->inputs[0], &in)) {
            e = in;
        }
        break;
    case AF_OP_RESHAPE: reshape(g, sd, n); return AF_OK;
    case AF_OP_TRANSPOSE: transpose(g, sd, n); return AF_OK;
    case AF_OP_RESIZE: resize(g, sd, n); return AF_OK;
    default: return AF_OK;
    }
    return put(g, sd, n->outputs[0], &e, err);
}
