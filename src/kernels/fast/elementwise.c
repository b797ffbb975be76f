/*
 * Fast float32 elementwise kernels: the one-input activations and math ops (Relu ... Reciprocal,
 * Log, Elu, Softplus, Floor, Ceil, Round, Clip with constant bounds, Identity, Dropout at
 * inference, Pow with a constant exponent of 2 or 0.5), the two-input Add, Sub, Mul, Div, Max, Min,
 * PRelu, the variadic Sum, Mean, Max and Min of up to EW_MAX_INPUTS inputs, and Cast from float32 to
 * int64. Broadcasting is collapsed, pair by pair, to at most three dims in which each operand is
 * either whole or broadcast (same shapes, a scalar, [C,1,1] against [N,C,H,W], a trailing [K]
 * against [..., K], and their mixes); anything needing more runs the reference kernel. A variadic
 * op folds its inputs into the output left to right, as the reference does, one block of the output
 * at a time while it is in L1. Big tensors split into fixed chunks over the thread pool.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/fast/vec_internal.h"
#include "kernels/kernel.h"
#include "util/alloc.h"
#include "util/error.h"

#define EW_CHUNK 16384          /* elements per task */
#define EW_PARALLEL_MIN 65536   /* smaller tensors run inline on the caller */
#define EW_MAX_DIMS 3           /* collapsed broadcast dims the kernel walks */
#define EW_MAX_INPUTS 8         /* inputs of a variadic op; more run the reference kernel */
#define EW_BLOCK 2048           /* elements a variadic op folds every input into at a time */

#define EW_NAMES(s) {"f32_" s "__scalar", "f32_" s "__avx2", "f32_" s "__avx512"}
static const char *const unary_names[AF_EW_UNARY_COUNT][AF_ISA_COUNT] = {
    [AF_EW_RELU] = EW_NAMES("vrelu"),          [AF_EW_LEAKY_RELU] = EW_NAMES("vlrelu"),
    [AF_EW_SIGMOID] = EW_NAMES("vsigmoid"),    [AF_EW_HARD_SIGMOID] = EW_NAMES("vhardsigmoid"),
    [AF_EW_HARD_SWISH] = EW_NAMES("vhswish"),  [AF_EW_TANH] = EW_NAMES("vtanh"),
    [AF_EW_ERF] = EW_NAMES("verf"),            [AF_EW_EXP] = EW_NAMES("vexp"),
    [AF_EW_LOG] = EW_NAMES("vlog"),            [AF_EW_ELU] = EW_NAMES("velu"),
    [AF_EW_SOFTPLUS] = EW_NAMES("vsoftplus"),  [AF_EW_FLOOR] = EW_NAMES("vfloor"),
    [AF_EW_CEIL] = EW_NAMES("vceil"),          [AF_EW_ROUND] = EW_NAMES("vround"),
    [AF_EW_CLIP] = EW_NAMES("vclamp"),         [AF_EW_NEG] = EW_NAMES("vneg"),
    [AF_EW_ABS] = EW_NAMES("vabs"),            [AF_EW_SQRT] = EW_NAMES("vsqrt"),
    [AF_EW_RECIPROCAL] = EW_NAMES("vrcp"),     [AF_EW_SQUARE] = EW_NAMES("vsqr"),
    [AF_EW_POW_HALF] = EW_NAMES("vpow_half"),  [AF_EW_COPY] = EW_NAMES("vcopy"),
};
static const char *const binary_names[AF_EW_BINARY_COUNT][AF_ISA_COUNT] = {
    [AF_EW_ADD] = EW_NAMES("vadd"), [AF_EW_SUB] = EW_NAMES("vsub"),     [AF_EW_MUL] = EW_NAMES("vmul"),
    [AF_EW_DIV] = EW_NAMES("vdiv"), [AF_EW_MAX] = EW_NAMES("vmax"),     [AF_EW_MIN] = EW_NAMES("vmin"),
    [AF_EW_PRELU] = EW_NAMES("vprelu"),
};
/* Variadic forms (other than Max and Min of two inputs), by their fold op; Mean is Sum's. */
static const char *const fold_names[AF_EW_BINARY_COUNT][AF_ISA_COUNT] = {
    [AF_EW_ADD] = EW_NAMES("vsum"), [AF_EW_MAX] = EW_NAMES("vmax_n"), [AF_EW_MIN] = EW_NAMES("vmin_n")};
static const char *const mean_names[AF_ISA_COUNT] = EW_NAMES("vmean");
static const char *const cast_names[AF_ISA_COUNT] = EW_NAMES("cast_to_i64");

typedef enum ew_kind {
    EW_UNARY, /* y = unary(x) */
    EW_NARY,  /* y = bin(... bin(bin(x0, x1), x2) ..., x[n_in - 1]), then / n_in for a mean */
    EW_CAST,  /* float32 -> int64 */
} ew_kind;

typedef struct ew_state {
    const af_vec_kernels *vk;
    ew_kind kind;
    af_ew_unary_op unary;
    af_ew_binary_op bin;
    int n_in;   /* EW_NARY: inputs, 1..EW_MAX_INPUTS (2 for the binary ops) */
    bool mean;  /* EW_NARY: divide the sum by n_in */
    float a, b; /* unary parameters */
} ew_state;

/* A binary broadcast collapsed to dims[0..3) (leading ones pad it); stride 0 where an operand is
 * broadcast along a dim, else its elements per step of that dim. The innermost strides are 0 or 1. */
typedef struct ew_bcast {
    int64_t dims[EW_MAX_DIMS];
    int64_t sa[EW_MAX_DIMS], sb[EW_MAX_DIMS];
    int64_t numel;
} ew_bcast;

/* Fills bc from the shapes of a and b broadcast to y. Returns AF_ERR_RUNTIME when they do not
 * broadcast to y, AF_ERR_UNSUPPORTED when more than EW_MAX_DIMS collapsed dims are needed. */
static af_status collapse(const af_tensor *a, const af_tensor *b, const af_tensor *y, ew_bcast *bc) {
    if (a->rank > y->rank || b->rank > y->rank) return AF_ERR_RUNTIME;
    int64_t dims[AF_MAX_RANK];
    bool fa[AF_MAX_RANK], fb[AF_MAX_RANK];
    int k = 0;
    for (int d = 0; d < y->rank; d++) {
        const int ia = d - (y->rank - a->rank), ib = d - (y->rank - b->rank);
        const int64_t n = y->dims[d], da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (n < 0 || (da != n && da != 1) || (db != n && db != 1)) return AF_ERR_RUNTIME;
        if (n == 1) continue;
        const bool wa = da == n, wb = db == n;
        if (k > 0 && fa[k - 1] == wa && fb[k - 1] == wb) { /* same pattern as the dim before: merge */
            dims[k - 1] *= n;
            continue;
        }
        dims[k] = n;
        fa[k] = wa;
        fb[k] = wb;
        k++;
    }
    if (k > EW_MAX_DIMS) return AF_ERR_UNSUPPORTED;
    const int pad = EW_MAX_DIMS - k;
    int64_t ra = 1, rb = 1;
    for (int j = EW_MAX_DIMS - 1; j >= 0; j--) {
        const int s = j - pad;
        bc->dims[j] = s >= 0 ? dims[s] : 1;
        bc->sa[j] = s >= 0 && fa[s] ? ra : 0;
        bc->sb[j] = s >= 0 && fb[s] ? rb : 0;
        if (s >= 0 && fa[s]) ra *= dims[s];
        if (s >= 0 && fb[s]) rb *= dims[s];
    }
    bc->numel = bc->dims[0] * bc->dims[1] * bc->dims[2];
    return AF_OK;
}

/* A tensor of dtype holding the data its shape needs. */
static bool ready(const af_tensor *t, af_dtype dtype) {
    int64_t n = t ? af_tensor_numel(t) : -1;
    return t && t->dtype == dtype && n >= 0 &&
           (n == 0 || (t->data && t->nbytes >= (size_t)n * af_dtype_size(dtype)));
}

typedef struct ew_job {
    const ew_state *s;
    const float *x[EW_MAX_INPUTS];
    float *y;
    int64_t *yi; /* EW_CAST's output */
    int64_t n;
    ew_bcast bc[EW_MAX_INPUTS]; /* EW_NARY: bc[1] walks (x0, x1), bc[k] (y, xk) after */
} ew_job;

/* Elements [start, end) of y = op(a, b) broadcast as bc: runs along the innermost collapsed dim. */
static void binary_range(const ew_job *j, const float *a, const float *b, const ew_bcast *bc, int64_t start,
                         int64_t end) {
    const int64_t d1 = bc->dims[1], d2 = bc->dims[2];
    int64_t pos = start;
    while (pos < end) {
        const int64_t i2 = pos % d2, i1 = pos / d2 % d1, i0 = pos / (d1 * d2);
        const int64_t len = d2 - i2 < end - pos ? d2 - i2 : end - pos;
        const float *pa = a + i0 * bc->sa[0] + i1 * bc->sa[1] + i2 * bc->sa[2];
        const float *pb = b + i0 * bc->sb[0] + i1 * bc->sb[1] + i2 * bc->sb[2];
        j->s->vk->ew_binary(j->s->bin, len, pa, (int)bc->sa[2], pb, (int)bc->sb[2], j->y + pos);
        pos += len;
    }
}

/* Elements [start, end) of an EW_NARY op: the fold, a block at a time. */
static void nary_range(const ew_job *j, int64_t start, int64_t end) {
    const ew_state *s = j->s;
    if (s->n_in == 1) { /* Sum, Mean, Max or Min of one input: the input */
        if (j->x[0] != j->y) memcpy(j->y + start, j->x[0] + start, (size_t)(end - start) * sizeof *j->y);
        return;
    }
    const int64_t block = s->n_in == 2 ? end - start : EW_BLOCK;
    const float count = (float)s->n_in;
    for (int64_t b0 = start; b0 < end; b0 += block) {
        const int64_t b1 = end - b0 < block ? end : b0 + block;
        binary_range(j, j->x[0], j->x[1], &j->bc[1], b0, b1);
        for (int k = 2; k < s->n_in; k++) binary_range(j, j->y, j->x[k], &j->bc[k], b0, b1);
        /* float y / n is the reference's double quotient rounded once (n is exact in both) */
        if (s->mean) s->vk->ew_binary(AF_EW_DIV, b1 - b0, j->y + b0, 1, &count, 0, j->y + b0);
    }
}

static void ew_range(const ew_job *j, int64_t start, int64_t end) {
    switch (j->s->kind) {
    case EW_UNARY:
        j->s->vk->ew_unary(j->s->unary, j->s->a, j->s->b, end - start, j->x[0] + start, j->y + start);
        break;
    case EW_NARY: nary_range(j, start, end); break;
    case EW_CAST: j->s->vk->cast_f32_i64(end - start, j->x[0] + start, j->yi + start); break;
    }
}

static void ew_task(void *ctx, int task, int thread) {
    (void)thread;
    const ew_job *j = ctx;
    const int64_t start = (int64_t)task * EW_CHUNK, end = start + EW_CHUNK < j->n ? start + EW_CHUNK : j->n;
    ew_range(j, start, end);
}

static af_status ew_run(const af_kernel *k, af_op_ctx *c, const af_epilogue *epi, af_threadpool *pool,
                        void *workspace) {
    (void)workspace;
    const ew_state *s = k->state;
    const int n_in = s->kind == EW_NARY ? s->n_in : 1;
    af_tensor *y = af_ctx_output(c, 0);
    if (epi && epi->n_steps) return af_ctx_fail(c, AF_ERR_RUNTIME, "elementwise kernels take no epilogue");
    if (c->n_inputs < n_in || !ready(y, s->kind == EW_CAST ? AF_DTYPE_INT64 : AF_DTYPE_FLOAT))
        return af_ctx_fail(c, AF_ERR_RUNTIME, "the output is not a %s tensor with data",
                           s->kind == EW_CAST ? "int64" : "float32");
    ew_job j = {.s = s, .n = af_tensor_numel(y)};
    if (s->kind == EW_CAST) j.yi = y->data;
    else j.y = y->data;
    bool fits = true;
    for (int i = 0; i < n_in && fits; i++) {
        const af_tensor *x = af_ctx_input(c, i);
        if (!ready(x, AF_DTYPE_FLOAT))
            return af_ctx_fail(c, AF_ERR_RUNTIME, "input %d must be a float32 tensor with data", i);
        j.x[i] = x->data;
        if (s->kind != EW_NARY || n_in == 1) {
            fits = af_tensor_numel(x) == j.n;
        } else if (i > 0) {
            const af_status st = collapse(i == 1 ? af_ctx_input(c, 0) : y, x, y, &j.bc[i]);
            if (st == AF_ERR_UNSUPPORTED) return af_op_info(c->node->op)->run(c); /* a broadcast we do not walk */
            fits = st == AF_OK;
        }
    }
    if (!fits) return af_ctx_fail(c, AF_ERR_RUNTIME, "input shapes do not fit the output shape");
    if (j.n <= EW_PARALLEL_MIN || af_threadpool_n_threads(pool) <= 1) ew_range(&j, 0, j.n);
    else af_threadpool_run(pool, (int)((j.n + EW_CHUNK - 1) / EW_CHUNK), ew_task, &j);
    return AF_OK;
}

/* ---- prepare --------------------------------------------------------------------------------- */

/* Input i when it is a constant of the graph (or an override), else NULL. */
static const af_tensor *const_input(const af_kernel_request *req, int i) {
    const af_tensor *t = af_kernel_input(req, i);
    if (!t || !t->data) return NULL;
    if (i < req->n_overrides && req->overrides[i]) return t;
    return af_graph_const_value(req->graph, req->node->inputs[i]) ? t : NULL;
}

/* A constant scalar input read as a double; false when input i is not one. */
static bool const_scalar(const af_kernel_request *req, int i, double *v) {
    const af_tensor *t = const_input(req, i);
    if (!t || af_tensor_numel(t) != 1 || af_dtype_size(t->dtype) == 0 || t->dtype == AF_DTYPE_STRING) return false;
    *v = af_tensor_get_f64(t, 0);
    return true;
}

static bool is_f32(const af_tensor *t) { return t && t->dtype == AF_DTYPE_FLOAT; }

/* Sets *op and the parameters for a one-input node; false when no fast path covers it. */
static bool unary_of(const af_kernel_request *req, ew_state *s) {
    const af_node *n = req->node;
    const int opset = req->graph->opset;
    double v;
    switch (n->op) {
    case AF_OP_RELU: s->unary = AF_EW_RELU; return true;
    case AF_OP_SIGMOID: s->unary = AF_EW_SIGMOID; return true;
    case AF_OP_HARD_SWISH: s->unary = AF_EW_HARD_SWISH; return true;
    case AF_OP_TANH: s->unary = AF_EW_TANH; return true;
    case AF_OP_ERF: s->unary = AF_EW_ERF; return true;
    case AF_OP_EXP: s->unary = AF_EW_EXP; return true;
    case AF_OP_LOG: s->unary = AF_EW_LOG; return true;
    case AF_OP_SOFTPLUS: s->unary = AF_EW_SOFTPLUS; return true;
    case AF_OP_FLOOR: s->unary = AF_EW_FLOOR; return true;
    case AF_OP_CEIL: s->unary = AF_EW_CEIL; return true;
    case AF_OP_ROUND: s->unary = AF_EW_ROUND; return true;
    case AF_OP_NEG: s->unary = AF_EW_NEG; return true;
    case AF_OP_ABS: s->unary = AF_EW_ABS; return true;
    case AF_OP_SQRT: s->unary = AF_EW_SQRT; return true;
    case AF_OP_RECIPROCAL: s->unary = AF_EW_RECIPROCAL; return true;
    case AF_OP_IDENTITY: s->unary = AF_EW_COPY; return true;
    case AF_OP_ELU:
        s->unary = AF_EW_ELU;
        s->a = af_node_attr_float(n, "alpha", 1.0f);
        return true;
    case AF_OP_LEAKY_RELU:
        s->unary = AF_EW_LEAKY_RELU;
        s->a = af_node_attr_float(n, "alpha", 0.01f);
        return true;
    case AF_OP_HARD_SIGMOID:
        s->unary = AF_EW_HARD_SIGMOID;
        s->a = af_node_attr_float(n, "alpha", 0.2f);
        s->b = af_node_attr_float(n, "beta", 0.5f);
        return true;
    case AF_OP_CLIP:
        s->unary = AF_EW_CLIP;
        if (opset < 11) {
            s->a = af_node_attr_float(n, "min", -FLT_MAX);
            s->b = af_node_attr_float(n, "max", FLT_MAX);
            return true;
        }
        s->a = -INFINITY;
        s->b = INFINITY;
        for (int i = 1; i <= 2; i++) {
            if (!af_kernel_input(req, i)) continue;
            if (!is_f32(af_kernel_input(req, i)) || !const_scalar(req, i, &v)) return false;
            *(i == 1 ? &s->a : &s->b) = (float)v;
        }
        return true;
    case AF_OP_DROPOUT:
        /* Inference only (training_mode absent or a constant false), and no mask output. */
        if (n->n_outputs > 1 && n->outputs[1] >= 0) return false;
        if (opset >= 12 && af_kernel_input(req, 2) && (!const_scalar(req, 2, &v) || v != 0)) return false;
        s->unary = AF_EW_COPY;
        return true;
    case AF_OP_POW:
        if (!const_scalar(req, 1, &v) || (v != 2.0 && v != 0.5)) return false;
        s->unary = v == 2.0 ? AF_EW_SQUARE : AF_EW_POW_HALF;
        return true;
    default: return false;
    }
}

/* Sets the op for a node of two or more float inputs (the binary ops) or one or more (the variadic
 * Sum, Mean, Max, Min); false when no fast path covers it. */
static bool nary_of(const af_node *n, ew_state *s) {
    switch (n->op) {
    case AF_OP_ADD: s->bin = AF_EW_ADD; break;
    case AF_OP_SUB: s->bin = AF_EW_SUB; break;
    case AF_OP_MUL: s->bin = AF_EW_MUL; break;
    case AF_OP_DIV: s->bin = AF_EW_DIV; break;
    case AF_OP_PRELU: s->bin = AF_EW_PRELU; break;
    case AF_OP_MAX: s->bin = AF_EW_MAX; break;
    case AF_OP_MIN: s->bin = AF_EW_MIN; break;
    case AF_OP_SUM: s->bin = AF_EW_ADD; break;
    case AF_OP_MEAN:
        s->bin = AF_EW_ADD;
        s->mean = true;
        break;
    default: return false;
    }
    s->n_in = n->n_inputs;
    const bool variadic = n->op == AF_OP_MAX || n->op == AF_OP_MIN || n->op == AF_OP_SUM || n->op == AF_OP_MEAN;
    return variadic ? s->n_in >= 1 && s->n_in <= EW_MAX_INPUTS : s->n_in == 2;
}

static const char *kernel_name(const af_node *n, const ew_state *s) {
    const af_isa isa = s->vk->isa;
    switch (s->kind) {
    case EW_UNARY: return unary_names[s->unary][isa];
    case EW_CAST: return cast_names[isa];
    case EW_NARY: break;
    }
    if (s->mean) return mean_names[isa];
    if (n->op == AF_OP_SUM || s->n_in != 2) return fold_names[s->bin][isa];
    return binary_names[s->bin][isa];
}

af_status af_fast_elementwise_prepare(const af_kernel_request *req, af_kernel *k, af_error *err) {
    const af_node *n = req->node;
    const af_tensor *x = af_kernel_input(req, 0);
    const af_tensor *y = n->n_outputs > 0 && n->outputs[0] >= 0 ? &req->graph->values[n->outputs[0]].t : NULL;
    if (!is_f32(x) || !y) return AF_OK;
    ew_state st = {.vk = af_vec_kernels_for(req->choice.isa)};
    if (n->op == AF_OP_CAST || n->op == AF_OP_CAST_LIKE) {
        if (y->dtype != AF_DTYPE_INT64) return AF_OK;
        st.kind = EW_CAST;
    } else if (!is_f32(y)) {
        return AF_OK;
    } else if (unary_of(req, &st)) {
        st.kind = EW_UNARY;
    } else if (nary_of(n, &st)) {
        st.kind = EW_NARY;
        for (int i = 1; i < st.n_in; i++) {
            const af_tensor *b = af_kernel_input(req, i);
            if (!is_f32(b)) return AF_OK;
            /* Static shapes with a broadcast we do not walk: the reference from the start. */
            const af_tensor *a = i == 1 ? x : y;
            ew_bcast bc;
            if (af_tensor_shape_known(a) && af_tensor_shape_known(b) && af_tensor_shape_known(y) &&
                collapse(a, b, y, &bc) != AF_OK)
                return AF_OK;
        }
    } else {
        return AF_OK;
    }
    ew_state *s = af_malloc(sizeof *s);
    if (!s) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory preparing '%s'", n->name);
    *s = st;
    k->name = kernel_name(n, s);
    k->state = s;
    k->free_state = af_free;
    k->run = ew_run;
    return AF_OK;
}
