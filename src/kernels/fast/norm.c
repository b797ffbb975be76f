/*
 * Fast float32 normalizations: Softmax over a contiguous span (the last axis from opset 13, the
 * coerced 2-D rows before it) or over a strided axis (softmax_cols), LogSoftmax over a contiguous
 * span, LayerNormalization over its
 * trailing dims with a full-size Scale and optional B (without the Mean/InvStdDev outputs),
 * InstanceNormalization (each channel plane a LayerNorm row, then its channel's scale and B), and
 * BatchNormalization at inference with constant parameters, folded at prepare into one per-channel
 * scale and shift. Rows (or channel planes, or column chunks) are independent and split over the
 * thread pool; the loops and their numerics are in norm_body.h. Other layouts run the reference
 * kernel.
 */
#include <math.h>
#include <string.h>

#include "ir/shape/norm.h"
#include "ir/shape/reduce.h"
#include "kernels/fast/vec_internal.h"
#include "kernels/kernel.h"
#include "util/alloc.h"
#include "util/denormals.h"
#include "util/error.h"

#define NORM_CHUNK 16384        /* elements per task, at least one row */
#define NORM_PARALLEL_MIN 65536 /* smaller tensors run inline on the caller */

#define NORM_NAMES(s) {"f32_" s "__scalar", "f32_" s "__avx2", "f32_" s "__avx512"}
static const char *const softmax_names[AF_ISA_COUNT] = NORM_NAMES("softmax");
static const char *const layernorm_names[AF_ISA_COUNT] = NORM_NAMES("layernorm");
static const char *const batchnorm_names[AF_ISA_COUNT] = NORM_NAMES("batchnorm");
static const char *const instnorm_names[AF_ISA_COUNT] = NORM_NAMES("instancenorm");
static const char *const logsoftmax_names[AF_ISA_COUNT] = NORM_NAMES("logsoftmax");

typedef struct norm_state {
    const af_vec_kernels *vk;
    af_op op;
    float eps;           /* LayerNormalization, InstanceNormalization */
    int64_t channels;     /* BatchNormalization: C, and the folded parameters: */
    float *scale, *shift; /* scale / sqrt(var + eps) and B - mean * that, [C] each (one block) */
    bool flush_tiny;      /* Softmax: results below 2^-126 are flushed to zero (feeds_products_only) */
} norm_state;

static void norm_free(void *p) {
    norm_state *s = p;
    af_free(s->scale);
    af_free(s);
}

static bool f32_ready(const af_tensor *t) {
    int64_t n = t ? af_tensor_numel(t) : -1;
    return t && t->dtype == AF_DTYPE_FLOAT && n >= 0 && (n == 0 || (t->data && t->nbytes >= (size_t)n * 4));
}

/* Rows (softmax, layernorm), channel planes (batchnorm, instancenorm) or column chunks (a strided
 * softmax) [u0, u1) of `unit` elements each. */
typedef struct norm_job {
    const norm_state *s;
    const float *x, *scale, *bias;
    const float *res; /* LayerNormalization fused with the residual Add before it: x + res */
    float *y;
    int64_t units, unit; /* unit: row length, or the plane size for batchnorm and instancenorm */
    int64_t per_task;
    int64_t axis_len, inner; /* a strided softmax: [units / chunks, axis_len, inner], unit columns a chunk */
    int64_t channels;        /* instancenorm: C of this run */
} norm_job;

#define SOFTMAX_COLS 1024 /* columns of a strided softmax per chunk: its max and sum rows stay in L1 */

/* Softmax over the axis of one [axis_len, inner] block, columns [j0, j0 + w): the running max
 * over the axis, then exp(x - max) and its sum, then each divided by the sum, row by row on the
 * vector kernels (segmentation heads' softmax over classes: 21 x 512 x 512, say). */
static void softmax_cols(const norm_job *j, const float *x, float *y, int64_t w) {
    const af_vec_kernels *vk = j->s->vk;
    float m[SOFTMAX_COLS], sum[SOFTMAX_COLS];
    memcpy(m, x, (size_t)w * sizeof *m);
    for (int64_t i = 1; i < j->axis_len; i++) vk->ew_binary(AF_EW_MAX, w, m, 1, x + i * j->inner, 1, m);
    for (int64_t i = 0; i < j->axis_len; i++) {
        float *yr = y + i * j->inner;
        vk->ew_binary(AF_EW_SUB, w, x + i * j->inner, 1, m, 1, yr);
        vk->ew_unary(AF_EW_EXP, 0, 0, w, yr, yr);
        if (i == 0) memcpy(sum, yr, (size_t)w * sizeof *sum);
        else vk->ew_binary(AF_EW_ADD, w, sum, 1, yr, 1, sum);
    }
    for (int64_t i = 0; i < j->axis_len; i++) vk->ew_binary(AF_EW_DIV, w, y + i * j->inner, 1, sum, 1, y + i * j->inner);
}

/* One LogSoftmax row of n contiguous elements: t = x - max in y, the sum of exp(t) in double
 * from chunks exponentiated into a stack buffer, then y = t - log(sum) (x - max is exact near
 * the max, so the result keeps its precision where it is near 0). */
static void logsoftmax_row(const af_vec_kernels *vk, int64_t n, const float *x, float *y) {
    float m, e[SOFTMAX_COLS];
    vk->global_pool(true, n, x, &m);
    vk->ew_binary(AF_EW_SUB, n, x, 1, &m, 0, y);
    double sum = 0;
    for (int64_t c0 = 0; c0 < n; c0 += SOFTMAX_COLS) {
        const int64_t w = n - c0 < SOFTMAX_COLS ? n - c0 : SOFTMAX_COLS;
        vk->ew_unary(AF_EW_EXP, 0, 0, w, y + c0, e);
        for (int64_t i = 0; i < w; i++) sum += e[i];
    }
    const float ls = (float)log(sum);
    vk->ew_binary(AF_EW_SUB, n, y, 1, &ls, 0, y);
}

static void norm_units_body(const norm_job *j, int64_t u0, int64_t u1) {
    const norm_state *s = j->s;
    if (j->axis_len > 0) { /* unit u: block u / chunks, columns (u % chunks) * unit on */
        const int64_t chunks = (j->inner + j->unit - 1) / j->unit;
        for (int64_t u = u0; u < u1; u++) {
            const int64_t b = u / chunks, c0 = u % chunks * j->unit;
            const int64_t w = j->inner - c0 < j->unit ? j->inner - c0 : j->unit, off = b * j->axis_len * j->inner + c0;
            softmax_cols(j, j->x + off, j->y + off, w);
        }
        return;
    }
    if (s->op == AF_OP_INSTANCE_NORMALIZATION) { /* unit u is channel u % C of item u / C */
        for (int64_t u = u0; u < u1; u++) {
            float *yr = j->y + u * j->unit;
            const int64_t c = u % j->channels;
            s->vk->layernorm_row(j->unit, j->x + u * j->unit, yr, NULL, NULL, s->eps);
            s->vk->scale_shift(1, 1, j->unit, yr, yr, j->scale + c, j->bias + c);
        }
        return;
    }
    if (s->op == AF_OP_BATCH_NORMALIZATION) { /* unit u is channel u % C of item u / C */
        const int64_t C = s->channels;
        for (int64_t u = u0; u < u1;) {
            const int64_t c0 = u % C, c1 = c0 + (u1 - u) < C ? c0 + (u1 - u) : C;
            s->vk->scale_shift(1, c1 - c0, j->unit, j->x + u * j->unit, j->y + u * j->unit, s->scale + c0,
                               s->shift + c0);
            u += c1 - c0;
        }
        return;
    }
    for (int64_t u = u0; u < u1; u++) {
        const float *xr = j->x + u * j->unit;
        float *yr = j->y + u * j->unit;
        if (s->op == AF_OP_SOFTMAX) {
            s->vk->softmax_row(j->unit, xr, yr);
        } else if (s->op == AF_OP_LOG_SOFTMAX) {
            logsoftmax_row(s->vk, j->unit, xr, yr);
        } else if (j->res) { /* the sum goes to y, then normalizes in place (stats come first) */
            const float *rr = j->res + u * j->unit;
            for (int64_t i = 0; i < j->unit; i++) yr[i] = xr[i] + rr[i];
            s->vk->layernorm_row(j->unit, yr, yr, j->scale, j->bias, s->eps);
        } else {
            s->vk->layernorm_row(j->unit, xr, yr, j->scale, j->bias, s->eps);
        }
    }
}

static void norm_units(const norm_job *j, int64_t u0, int64_t u1) {
    if (!j->s->flush_tiny) {
        norm_units_body(j, u0, u1);
        return;
    }
    const unsigned saved = af_denormals_flushed_begin();
    norm_units_body(j, u0, u1);
    af_denormals_as_zero_end(saved);
}

static void norm_task(void *ctx, int task, int thread) {
    (void)thread;
    const norm_job *j = ctx;
    const int64_t u0 = (int64_t)task * j->per_task, u1 = u0 + j->per_task < j->units ? u0 + j->per_task : j->units;
    norm_units(j, u0, u1);
}

static void norm_split(norm_job *j, af_threadpool *pool) {
    const int64_t total = j->units * (j->axis_len > 0 ? j->axis_len * j->unit : j->unit);
    if (total <= NORM_PARALLEL_MIN || af_threadpool_n_threads(pool) <= 1 || j->units <= 1) {
        norm_units(j, 0, j->units);
        return;
    }
    const int64_t unit_elems = j->axis_len > 0 ? j->axis_len * j->unit : j->unit;
    j->per_task = unit_elems >= NORM_CHUNK ? 1 : NORM_CHUNK / (unit_elems > 0 ? unit_elems : 1);
    af_threadpool_run(pool, (int)((j->units + j->per_task - 1) / j->per_task), norm_task, j);
}

/* Scale or B fits the fast path: its own elements line up with the normalized block's. */
static bool ln_param_ok(af_op_ctx *c, const af_tensor *x, int axis, const af_tensor *p, int64_t inner) {
    return f32_ready(p) && af_tensor_numel(p) == inner && af_norm_ln_param_map(c, x, axis, p, "param", NULL) == AF_OK;
}

static af_status norm_run(const af_kernel *k, af_op_ctx *c, const af_epilogue *epi, af_threadpool *pool,
                          void *workspace) {
    (void)workspace;
    const norm_state *s = k->state;
    const af_tensor *x = af_ctx_input(c, 0);
    af_tensor *y = af_ctx_output(c, 0);
    if (epi && epi->n_steps) return af_ctx_fail(c, AF_ERR_RUNTIME, "norm kernels take no epilogue");
    if (!f32_ready(x) || !f32_ready(y) || !af_tensor_same_shape(x, y))
        return af_ctx_fail(c, AF_ERR_RUNTIME, "X and Y must be float32 tensors of the same shape");
    norm_job j = {.s = s, .x = x->data, .y = y->data};
    int64_t outer, inner;
    int axis;
    af_status st;
    switch (s->op) {
    case AF_OP_LOG_SOFTMAX: /* contiguous rows only */
        if (x->rank == 0) return af_op_info(c->node->op)->run(c);
        if ((st = af_reduce_softmax_axis(c, x->rank, &axis)) != AF_OK) return st;
        af_reduce_split(x, axis, c->opset >= 13 ? axis + 1 : x->rank, &outer, &j.unit, &inner);
        if (inner != 1) return af_op_info(c->node->op)->run(c);
        j.units = outer;
        break;
    case AF_OP_SOFTMAX:
        if (x->rank == 0) return af_op_info(c->node->op)->run(c);
        if ((st = af_reduce_softmax_axis(c, x->rank, &axis)) != AF_OK) return st;
        af_reduce_split(x, axis, c->opset >= 13 ? axis + 1 : x->rank, &outer, &j.unit, &inner);
        j.units = outer;
        if (inner != 1) { /* a strided axis: chunks of columns of each [axis, inner] block */
            j.axis_len = j.unit;
            j.inner = inner;
            j.unit = inner < SOFTMAX_COLS ? inner : SOFTMAX_COLS;
            j.units = outer * ((inner + j.unit - 1) / j.unit);
            if (j.axis_len == 0) return AF_OK;
        }
        break;
    case AF_OP_LAYER_NORMALIZATION: {
        if ((st = af_norm_ln_axis(c, x->rank, &axis)) != AF_OK) return st;
        const af_tensor *scale = af_ctx_input(c, 1), *b = af_ctx_input(c, 2);
        j.units = af_dims_numel(axis, x->dims);
        j.unit = af_dims_numel(x->rank - axis, x->dims + axis);
        if (!ln_param_ok(c, x, axis, scale, j.unit) || (b && !ln_param_ok(c, x, axis, b, j.unit))) {
            if (af_ctx_input(c, 3)) /* the reference knows no residual */
                return af_ctx_fail(c, AF_ERR_RUNTIME, "fused LayerNorm: Scale and B must match the normalized dims");
            return af_op_info(c->node->op)->run(c); /* broadcast parameters */
        }
        j.scale = scale->data;
        j.bias = b ? b->data : NULL;
        /* Input 3 exists only on the node the fusion scheduler makes for residual Add + LayerNorm. */
        const af_tensor *res = af_ctx_input(c, 3);
        if (res) {
            if (!f32_ready(res) || !af_tensor_same_shape(res, x))
                return af_ctx_fail(c, AF_ERR_RUNTIME, "the residual must be float32 shaped like X");
            j.res = res->data;
        }
        break;
    }
    case AF_OP_INSTANCE_NORMALIZATION: {
        const af_tensor *scale = af_ctx_input(c, 1), *b = af_ctx_input(c, 2);
        if (x->rank < 3 || !f32_ready(scale) || !f32_ready(b) || af_tensor_numel(scale) != x->dims[1] ||
            af_tensor_numel(b) != x->dims[1])
            return af_op_info(c->node->op)->run(c); /* the reference reports what is wrong */
        j.channels = x->dims[1];
        j.units = x->dims[0] * x->dims[1];
        j.unit = af_dims_numel(x->rank - 2, x->dims + 2);
        j.scale = scale->data;
        j.bias = b->data;
        break;
    }
    default: /* BatchNormalization */
        if (x->rank < 2 || x->dims[1] != s->channels)
            return af_ctx_fail(c, AF_ERR_RUNTIME, "X must be [N, %lld, ...]", (long long)s->channels);
        j.units = x->dims[0] * s->channels;
        j.unit = af_dims_numel(x->rank - 2, x->dims + 2);
        break;
    }
    if (j.units > 0 && j.unit > 0) norm_split(&j, pool);
    return AF_OK;
}

/* ---- prepare --------------------------------------------------------------------------------- */

/* Input i when it is a float32 constant of the graph (or an override) with n elements. */
static const float *const_f32(const af_kernel_request *req, int i, int64_t n) {
    const af_tensor *t = af_kernel_input(req, i);
    if (!t || !t->data || t->dtype != AF_DTYPE_FLOAT || af_tensor_numel(t) != n) return NULL;
    bool overridden = i < req->n_overrides && req->overrides[i];
    if (!overridden && !af_graph_const_value(req->graph, req->node->inputs[i])) return NULL;
    return t->data;
}

/* BatchNormalization at inference: y = x * scale' + shift' with the statistics folded in double,
 * as the reference computes them. False when the parameters are not constants of one size. */
static af_status bn_fold(const af_kernel_request *req, norm_state *s, bool *ok) {
    const af_tensor *p = af_kernel_input(req, 1);
    const int64_t C = p ? af_tensor_numel(p) : -1;
    const float *scale = const_f32(req, 1, C), *b = const_f32(req, 2, C), *mean = const_f32(req, 3, C),
                *var = const_f32(req, 4, C);
    const af_tensor *x = af_kernel_input(req, 0);
    *ok = C > 0 && scale && b && mean && var && (x->rank < 0 || (x->rank >= 2 && (x->dims[1] < 0 || x->dims[1] == C)));
    if (!*ok) return AF_OK;
    s->channels = C;
    s->scale = af_malloc((size_t)C * 2 * sizeof(float));
    if (!s->scale) return AF_ERR_OUT_OF_MEMORY;
    s->shift = s->scale + C;
    const double eps = af_node_attr_float(req->node, "epsilon", 1e-5f);
    for (int64_t c = 0; c < C; c++) {
        const double mul = scale[c] / sqrt((double)var[c] + eps);
        s->scale[c] = (float)mul;
        s->shift[c] = (float)(b[c] - mean[c] * mul);
    }
    return AF_OK;
}

/* Whether every reader of value v is a matrix product (MatMul, Gemm, Einsum), directly or through
 * Dropout, Identity or Reshape. A Softmax over scores masked with -100 (Swin's shifted windows)
 * leaves many probabilities near exp(-100), denormal; each costs a microcode assist where the
 * exponential makes it and where it is normalized (its rows ran 3-10x slower than unmasked
 * ones). A product adds such a term as under 2^-126 of its other factor, so flushing them to zero
 * moves nothing that matters there; any other reader (a Log would turn -92 into -inf) keeps them. */
static bool feeds_products_only(const af_graph *g, int v, int depth) {
    bool any = false;
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == v) return false;
    for (int i = 0; i < g->n_nodes; i++) {
        const af_node *n = &g->nodes[i];
        bool reads = false;
        for (int k = 0; k < n->n_inputs; k++) reads = reads || n->inputs[k] == v;
        if (!reads) continue;
        any = true;
        if (n->op == AF_OP_MAT_MUL || n->op == AF_OP_GEMM || n->op == AF_OP_EINSUM) continue;
        const bool pass = n->op == AF_OP_DROPOUT || n->op == AF_OP_IDENTITY || n->op == AF_OP_RESHAPE;
        if (!pass || depth >= 3 || n->inputs[0] != v || n->outputs[0] < 0) return false;
        for (int k = 1; k < n->n_outputs; k++)
            if (n->outputs[k] >= 0) return false; /* Dropout's mask */
        if (!feeds_products_only(g, n->outputs[0], depth + 1)) return false;
    }
    return any;
}

af_status af_fast_norm_prepare(const af_kernel_request *req, af_kernel *k, af_error *err) {
    const af_node *n = req->node;
    const af_graph *g = req->graph;
    const af_tensor *x = af_kernel_input(req, 0);
    const af_tensor *y = n->n_outputs > 0 && n->outputs[0] >= 0 ? &g->values[n->outputs[0]].t : NULL;
    if (!x || !y || x->dtype != AF_DTYPE_FLOAT || y->dtype != AF_DTYPE_FLOAT) return AF_OK;
    for (int i = 1; i < n->n_outputs; i++) /* LayerNorm's Mean/InvStdDev, BatchNorm's training outputs */
        if (n->outputs[i] >= 0) return AF_OK;
    af_tensor *outs[1] = {NULL};
    const af_op_ctx c = {.node = n, .graph = g, .opset = g->opset, .n_inputs = 0, .n_outputs = 1, .outputs = outs};
    int axis;
    switch (n->op) {
    case AF_OP_SOFTMAX:
        /* Opset 13's axis must be one of X's where the rank is known. */
        if (g->opset >= 13 && x->rank >= 0 && (x->rank == 0 || af_reduce_softmax_axis(&c, x->rank, &axis) != AF_OK))
            return AF_OK;
        break;
    case AF_OP_INSTANCE_NORMALIZATION:
        if (x->rank >= 0 && x->rank < 3) return AF_OK;
        break;
    case AF_OP_LOG_SOFTMAX: /* the last axis (or one followed by dims of 1) from opset 13 */
        if (g->opset >= 13 && x->rank >= 0) {
            if (x->rank == 0 || af_reduce_softmax_axis(&c, x->rank, &axis) != AF_OK) return AF_OK;
            if (af_dims_numel(x->rank - axis - 1, x->dims + axis + 1) != 1) return AF_OK;
        }
        break;
    case AF_OP_LAYER_NORMALIZATION: {
        const af_tensor *scale = af_kernel_input(req, 1), *b = af_kernel_input(req, 2);
        if (!scale || scale->dtype != AF_DTYPE_FLOAT || (b && b->dtype != AF_DTYPE_FLOAT)) return AF_OK;
        if (af_tensor_shape_known(x) && af_tensor_shape_known(scale) && (!b || af_tensor_shape_known(b))) {
            if (af_norm_ln_axis(&c, x->rank, &axis) != AF_OK) return AF_OK;
            int64_t inner = af_dims_numel(x->rank - axis, x->dims + axis);
            if (af_tensor_numel(scale) != inner || (b && af_tensor_numel(b) != inner)) return AF_OK;
        }
        break;
    }
    case AF_OP_BATCH_NORMALIZATION:
        if (af_norm_bn_training(&c)) return AF_OK;
        if (g->opset < 9 && af_node_attr_int(n, "spatial", 1) == 0) return AF_OK;
        break;
    default: return AF_OK;
    }
    norm_state *s = af_calloc(1, sizeof *s);
    if (!s) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory preparing '%s'", n->name);
    s->vk = af_vec_kernels_for(req->choice.isa);
    s->op = n->op;
    s->eps = af_node_attr_float(n, "epsilon", 1e-5f);
    s->flush_tiny = n->op == AF_OP_SOFTMAX && feeds_products_only(g, n->outputs[0], 0);
    if (n->op == AF_OP_BATCH_NORMALIZATION) {
        bool ok;
        if (bn_fold(req, s, &ok) != AF_OK) {
            norm_free(s);
            return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory preparing '%s'", n->name);
        }
        if (!ok) {
            norm_free(s);
            return AF_OK;
        }
        k->packed_inputs = 0x1eu; /* scale, B, mean and var are folded into s */
    }
    k->name = n->op == AF_OP_SOFTMAX                   ? softmax_names[s->vk->isa]
              : n->op == AF_OP_LAYER_NORMALIZATION     ? layernorm_names[s->vk->isa]
              : n->op == AF_OP_INSTANCE_NORMALIZATION ? instnorm_names[s->vk->isa]
              : n->op == AF_OP_LOG_SOFTMAX            ? logsoftmax_names[s->vk->isa]
                                                       : batchnorm_names[s->vk->isa];
    k->state = s;
    k->free_state = norm_free;
    k->run = norm_run;
    return AF_OK;
}
