/*
 * Fast float32 elementwise kernels: the one-input activations and math ops (Relu ... Reciprocal,
 * Log, Elu, Softplus, Floor, Ceil, Round, Clip with constant bounds, Identity, Dropout at
 * inference, Pow with a constant exponent of 2 or 0.5) and the two-input Add, Sub, Mul, Div, Max,
 * Min, PRelu. Binary broadcasting is collapsed to at most three dims in which each operand is
 * either whole or broadcast (same shapes, a scalar, [C,1,1] against [N,C,H,W], a trailing [K]
 * against [..., K], and their mixes); anything needing more runs the reference kernel. Big tensors
 * split into fixed chunks over the thread pool.
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

typedef struct ew_state {
    const af_vec_kernels *vk;
    bool binary;
    af_ew_unary_op unary;
    af_ew_binary_op bin;
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

/* A float tensor holding the data its shape needs. */
static bool f32_ready(const af_tensor *t) {
    int64_t n = t ? af_tensor_numel(t) : -1;
    return t && t->dtype == AF_DTYPE_FLOAT && n >= 0 && (n == 0 || (t->data && t->nbytes >= (size_t)n * 4));
}

typedef struct ew_job {
    const ew_state *s;
    const float *x, *xb;
    float *y;
    int64_t n;
    const ew_bcast *bc;
} ew_job;

/* Elements [start, end) of a binary op: runs along the innermost collapsed dim. */
static void binary_range(const ew_job *j, int64_t start, int64_t end) {
    const ew_bcast *bc = j->bc;
    const int64_t d1 = bc->dims[1], d2 = bc->dims[2];
    int64_t pos = start;
    while (pos < end) {
        const int64_t i2 = pos % d2, i1 = pos / d2 % d1, i0 = pos / (d1 * d2);
        const int64_t len = d2 - i2 < end - pos ? d2 - i2 : end - pos;
        const float *pa = j->x + i0 * bc->sa[0] + i1 * bc->sa[1] + i2 * bc->sa[2];
        const float *pb = j->xb + i0 * bc->sb[0] + i1 * bc->sb[1] + i2 * bc->sb[2];
        j->s->vk->ew_binary(j->s->bin, len, pa, (int)bc->sa[2], pb, (int)bc->sb[2], j->y + pos);
        pos += len;
    }
}

static void ew_range(const ew_job *j, int64_t start, int64_t end) {
    if (j->s->binary) binary_range(j, start, end);
    else j->s->vk->ew_unary(j->s->unary, j->s->a, j->s->b, end - start, j->x + start, j->y + start);
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
    const af_tensor *x = af_ctx_input(c, 0), *xb = s->binary ? af_ctx_input(c, 1) : NULL;
    af_tensor *y = af_ctx_output(c, 0);
    if (epi && epi->n_steps) return af_ctx_fail(c, AF_ERR_RUNTIME, "elementwise kernels take no epilogue");
    if (!f32_ready(x) || !f32_ready(y) || (s->binary && !f32_ready(xb)))
        return af_ctx_fail(c, AF_ERR_RUNTIME, "inputs and output must be float32 tensors with data");
    ew_job j = {.s = s, .x = x->data, .y = y->data, .n = af_tensor_numel(y)};
    ew_bcast bc;
    if (s->binary) {
        af_status st = collapse(x, xb, y, &bc);
        if (st == AF_ERR_UNSUPPORTED) return af_op_info(c->node->op)->run(c); /* a broadcast we do not walk */
        if (st != AF_OK) return af_ctx_fail(c, AF_ERR_RUNTIME, "input shapes do not broadcast to the output shape");
        j.xb = xb->data;
        j.bc = &bc;
    } else if (af_tensor_numel(x) != j.n) {
        return af_ctx_fail(c, AF_ERR_RUNTIME, "output has %lld elements, input %lld", (long long)j.n,
                           (long long)af_tensor_numel(x));
    }
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

static bool binary_of(const af_node *n, ew_state *s) {
    switch (n->op) {
    case AF_OP_ADD: s->bin = AF_EW_ADD; break;
    case AF_OP_SUB: s->bin = AF_EW_SUB; break;
    case AF_OP_MUL: s->bin = AF_EW_MUL; break;
    case AF_OP_DIV: s->bin = AF_EW_DIV; break;
    case AF_OP_MAX: s->bin = AF_EW_MAX; break;
    case AF_OP_MIN: s->bin = AF_EW_MIN; break;
    case AF_OP_PRELU: s->bin = AF_EW_PRELU; break;
    default: return false;
    }
    return n->n_inputs == 2; /* Max/Min are variadic: only their two-input form */
}

af_status af_fast_elementwise_prepare(const af_kernel_request *req, af_kernel *k, af_error *err) {
    const af_node *n = req->node;
    const af_tensor *x = af_kernel_input(req, 0);
    const af_tensor *y = n->n_outputs > 0 && n->outputs[0] >= 0 ? &req->graph->values[n->outputs[0]].t : NULL;
    if (!is_f32(x) || !is_f32(y)) return AF_OK;
    ew_state st = {.vk = af_vec_kernels_for(req->choice.isa)};
    if (!unary_of(req, &st)) {
        if (!binary_of(n, &st)) return AF_OK;
        const af_tensor *b = af_kernel_input(req, 1);
        if (!is_f32(b)) return AF_OK;
        st.binary = true;
        /* Static shapes with a broadcast we do not walk: the reference from the start. */
        ew_bcast bc;
        if (af_tensor_shape_known(x) && af_tensor_shape_known(b) && af_tensor_shape_known(y) &&
            collapse(x, b, y, &bc) != AF_OK)
            return AF_OK;
    }
    ew_state *s = af_malloc(sizeof *s);
    if (!s) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory preparing '%s'", n->name);
    *s = st;
    k->name = st.binary ? binary_names[st.bin][st.vk->isa] : unary_names[st.unary][st.vk->isa];
    k->state = s;
    k->free_state = af_free;
    k->run = ew_run;
    return AF_OK;
}
