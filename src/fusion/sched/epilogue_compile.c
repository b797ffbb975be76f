/*
 * Compiles the elementwise tail of an anchor+epilogue group (Conv or MatMul/Gemm, then bias adds,
 * BatchNormalization, activations, residual adds) into the anchor kernel's epilogue program.
 *
 * Each node after the anchor transforms the running value r. Direct forms: per-channel or scalar
 * constants (Add/Sub/Mul/Div), BatchNormalization, residual Add of a tensor shaped like r, and the
 * activation ops. Exporters also write activations as small graphs of scalar ops (GELU as
 * Div/Erf/Add/Mul/Mul, SiLU as x*Sigmoid(x), HardSwish as x*Clip(x+3,0,6)/6); a run of nodes that
 * reads only r and scalar constants is a pure function of r, so it is recognized numerically: the
 * run is evaluated with the reference kernels on sample points and compared with each epilogue
 * activation. Fused results are still checked against the unfused graph by the tests (and by the
 * verify mode), so a recognition is never trusted blindly.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fusion/sched/sched.h"
#include "ir/op_ctx.h"
#include "util/alloc.h"

#define N_SAMPLES 97
#define N_FAR 8 /* of them, far outside [-8, 8] */

typedef struct compile {
    const af_graph *g;
    af_step *s;
    bool conv;            /* NCHW output: rows are channels, columns pixels; else MatMul rows/cols */
    const af_tensor *out; /* the anchor's output shape */
    int64_t channels;     /* conv: C; matmul: N (columns) */
    int64_t rows;         /* matmul: M of one batch item */
    int bias_value;       /* conv: the anchor's bias value, or -1 */
    char *why;
    size_t why_size;
} compile;

static bool fail(compile *c, const char *fmt, const char *a) {
    snprintf(c->why, c->why_size, fmt, a);
    return false;
}

static const af_tensor *constant(const af_graph *g, int v) {
    const af_value *c = af_graph_const_value(g, v);
    return c && c->t.dtype == AF_DTYPE_FLOAT ? &c->t : NULL;
}

typedef enum { VEC_NONE, VEC_SCALAR, VEC_ROW, VEC_COL } vec_kind;

/* How constant t broadcasts against the output: one value, one per row (channel), one per column. */
static vec_kind vector_kind(const compile *c, const af_tensor *t) {
    int64_t n = af_tensor_numel(t);
    if (n == 1) return VEC_SCALAR;
    int r = c->out->rank;
    if (t->rank > r) return VEC_NONE;
    int64_t aligned[AF_MAX_RANK];
    for (int d = 0; d < r; d++) aligned[d] = d < r - t->rank ? 1 : t->dims[d - (r - t->rank)];
    int non1 = -1;
    for (int d = 0; d < r; d++)
        if (aligned[d] != 1) {
            if (non1 >= 0) return VEC_NONE;
            non1 = d;
        }
    if (c->conv) return r == 4 && non1 == 1 && aligned[1] == c->channels ? VEC_ROW : VEC_NONE;
    if (non1 == r - 1 && aligned[non1] == c->channels) return VEC_COL;
    if (non1 == r - 2 && c->rows > 0 && af_tensor_numel(c->out) == c->rows * c->channels) return VEC_ROW;
    return VEC_NONE;
}

static float *owned_floats(compile *c, int64_t n) {
    if (c->s->n_owned >= (int)(sizeof c->s->owned / sizeof c->s->owned[0])) return NULL;
    float *p = af_malloc_aligned((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (p) c->s->owned[c->s->n_owned++] = p;
    return p;
}

static bool push(compile *c, af_epi_step step) {
    if (af_epilogue_push(&c->s->epi, &step) != AF_OK) return fail(c, "the epilogue needs more than %s steps", "8");
    return true;
}

/* x*op(const) as an epilogue step, for op one of Add, Sub, Mul, Div with r as the first input
 * (or either input of Add/Mul). */
static bool const_arith(compile *c, af_op op, int id, const af_tensor *k, bool r_first) {
    vec_kind kind = vector_kind(c, k);
    if (kind == VEC_NONE) return fail(c, "a constant of shape that does not broadcast per %s", c->conv ? "channel" : "row or column");
    if ((op == AF_OP_SUB || op == AF_OP_DIV) && !r_first) return fail(c, "%s with the running value second", op == AF_OP_SUB ? "Sub" : "Div");
    const float *kd = k->data;
    if (kind == VEC_SCALAR || op != AF_OP_ADD) af_step_hold(c->s, id); /* copied below; a bias is read in place */
    if (kind == VEC_SCALAR) {
        float v = kd[0];
        if (op == AF_OP_ADD) return push(c, (af_epi_step){.op = AF_EPI_ADD_SCALAR, .a = v});
        if (op == AF_OP_SUB) return push(c, (af_epi_step){.op = AF_EPI_ADD_SCALAR, .a = -v});
        if (op == AF_OP_MUL) return push(c, (af_epi_step){.op = AF_EPI_MUL_SCALAR, .a = v});
        return push(c, (af_epi_step){.op = AF_EPI_MUL_SCALAR, .a = 1.0f / v});
    }
    int64_t n = af_tensor_numel(k);
    bool row = kind == VEC_ROW;
    if (op == AF_OP_ADD) return push(c, (af_epi_step){.op = row ? AF_EPI_BIAS_ROW : AF_EPI_BIAS_COL, .p = kd});
    float *p = owned_floats(c, n), *q = owned_floats(c, n);
    if (!p || !q) return fail(c, "%s", "out of memory");
    for (int64_t i = 0; i < n; i++) {
        p[i] = op == AF_OP_MUL ? kd[i] : op == AF_OP_DIV ? 1.0f / kd[i] : 1.0f;
        q[i] = op == AF_OP_SUB ? -kd[i] : 0.0f;
    }
    return push(c, (af_epi_step){.op = row ? AF_EPI_SCALE_SHIFT_ROW : AF_EPI_SCALE_SHIFT_COL, .p = p, .q = q});
}

void af_sched_bn_affine(int64_t ch, const float *gamma, const float *beta, const float *mean, const float *var,
                        float eps, float *scale, float *shift) {
    for (int64_t i = 0; i < ch; i++) {
        scale[i] = gamma[i] / sqrtf(var[i] + eps);
        shift[i] = beta[i] - mean[i] * scale[i];
    }
}

void af_sched_fold_affine(int64_t ch, int64_t per, const float *w, const float *b, const float *scale,
                          const float *shift, float *nw, float *nb) {
    for (int64_t o = 0; o < ch; o++) {
        for (int64_t k = 0; k < per; k++) nw[o * per + k] = w[o * per + k] * scale[o];
        nb[o] = (b ? b[o] : 0.0f) * scale[o] + shift[o];
    }
}

static bool batchnorm(compile *c, const af_node *n, bool first, af_tensor *w_override, af_tensor *b_override,
                      const af_tensor *w, const af_tensor *bias) {
    const af_tensor *sc = constant(c->g, n->inputs[1]), *b = constant(c->g, n->inputs[2]),
                    *mean = constant(c->g, n->inputs[3]), *var = constant(c->g, n->inputs[4]);
    if (!sc || !b || !mean || !var || n->n_outputs > 1 || af_node_attr_int(n, "training_mode", 0))
        return fail(c, "BatchNormalization '%s' is not inference with constant statistics", n->name);
    int64_t ch = c->channels;
    if (!c->conv || af_tensor_numel(sc) != ch || af_tensor_numel(b) != ch || af_tensor_numel(mean) != ch ||
        af_tensor_numel(var) != ch)
        return fail(c, "BatchNormalization '%s' does not follow a Conv channel for channel", n->name);
    float *scale = owned_floats(c, ch), *shift = owned_floats(c, ch);
    if (!scale || !shift) return fail(c, "%s", "out of memory");
    af_sched_bn_affine(ch, sc->data, b->data, mean->data, var->data, af_node_attr_float(n, "epsilon", 1e-5f), scale,
                       shift);
    for (int k = 1; k <= 4; k++) af_step_hold(c->s, n->inputs[k]); /* only scale and shift are read */
    if (!first || !w || !w->data) return push(c, (af_epi_step){.op = AF_EPI_SCALE_SHIFT_ROW, .p = scale, .q = shift});
    /* Right after the Conv: fold into its weights and bias, which costs nothing per run. */
    int64_t per = af_tensor_numel(w) / ch;
    float *nw = owned_floats(c, af_tensor_numel(w)), *nb = owned_floats(c, ch);
    if (!nw || !nb) return fail(c, "%s", "out of memory");
    af_sched_fold_affine(ch, per, w->data, bias ? bias->data : NULL, scale, shift, nw, nb);
    if (bias) af_step_hold(c->s, c->bias_value); /* the kernel reads the folded bias instead */
    *w_override = *w;
    w_override->data = nw;
    *b_override = (af_tensor){.dtype = AF_DTYPE_FLOAT, .rank = 1, .dims = {ch}, .data = nb,
                              .nbytes = (size_t)ch * sizeof(float)};
    return true;
}

bool af_sched_activation_step(const af_graph *g, const af_node *n, af_epi_step *out) {
    switch (n->op) {
    case AF_OP_RELU: *out = (af_epi_step){.op = AF_EPI_RELU}; return true;
    case AF_OP_SIGMOID: *out = (af_epi_step){.op = AF_EPI_SIGMOID}; return true;
    case AF_OP_TANH: *out = (af_epi_step){.op = AF_EPI_TANH}; return true;
    case AF_OP_HARD_SWISH: *out = (af_epi_step){.op = AF_EPI_HARD_SWISH}; return true;
    case AF_OP_LEAKY_RELU:
        *out = (af_epi_step){.op = AF_EPI_LEAKY_RELU, .a = af_node_attr_float(n, "alpha", 0.01f)};
        return true;
    case AF_OP_HARD_SIGMOID:
        *out = (af_epi_step){.op = AF_EPI_HARD_SIGMOID, .a = af_node_attr_float(n, "alpha", 0.2f),
                             .b = af_node_attr_float(n, "beta", 0.5f)};
        return true;
    case AF_OP_CLIP: {
        float lo = -INFINITY, hi = INFINITY;
        if (g->opset < 11) {
            lo = af_node_attr_float(n, "min", -INFINITY);
            hi = af_node_attr_float(n, "max", INFINITY);
        } else {
            const af_tensor *tl = n->n_inputs > 1 ? constant(g, n->inputs[1]) : NULL;
            const af_tensor *th = n->n_inputs > 2 ? constant(g, n->inputs[2]) : NULL;
            if ((n->n_inputs > 1 && n->inputs[1] >= 0 && !tl) || (n->n_inputs > 2 && n->inputs[2] >= 0 && !th))
                return false;
            if (tl) lo = ((const float *)tl->data)[0];
            if (th) hi = ((const float *)th->data)[0];
        }
        *out = (af_epi_step){.op = AF_EPI_CLIP, .a = lo, .b = hi};
        return true;
    }
    default: return false;
    }
}

/* ---- numeric recognition of scalar-function runs --------------------------------------------- */

static bool reads_only(const af_graph *g, const af_node *n, int r, const int *run_outputs, int n_run) {
    for (int k = 0; k < n->n_inputs; k++) {
        int v = n->inputs[k];
        if (v < 0 || v == r) continue;
        bool ok = false;
        for (int j = 0; j < n_run && !ok; j++) ok = run_outputs[j] == v;
        const af_tensor *t = constant(g, v);
        if (!ok && !(t && af_tensor_numel(t) == 1)) return false;
    }
    return n->n_outputs >= 1 && n->outputs[0] >= 0;
}

/* Evaluates nodes[0..count) on the sample vector x (as value r), returning the last output in y. */
static bool evaluate(const af_graph *g, const af_node *const *nodes, int count, int r, const float *x, float *y) {
    af_tensor vals[AF_FUSION_MAX_NODES];
    float store[AF_FUSION_MAX_NODES][N_SAMPLES];
    af_tensor xt = {.dtype = AF_DTYPE_FLOAT, .rank = 1, .dims = {N_SAMPLES}, .data = (void *)x,
                    .nbytes = sizeof(float) * N_SAMPLES};
    bool ok = true;
    for (int i = 0; i < count && ok; i++) {
        const af_node *n = nodes[i];
        const af_tensor *ins[8] = {0};
        if (n->n_inputs > 8) return false;
        for (int k = 0; k < n->n_inputs; k++) {
            int v = n->inputs[k];
            if (v < 0) continue;
            if (v == r) ins[k] = &xt;
            for (int j = 0; j < i; j++)
                if (nodes[j]->outputs[0] == v) ins[k] = &vals[j];
            /* else a scalar constant (reads_only checked), maybe captured from an enclosing graph:
             * the capture's own value has the shape but not the data */
            if (!ins[k]) ins[k] = constant(g, v);
            if (!ins[k] || !ins[k]->data) return false;
        }
        vals[i] = (af_tensor){.dtype = AF_DTYPE_FLOAT, .rank = 1, .dims = {N_SAMPLES}, .data = store[i],
                              .nbytes = sizeof(float) * N_SAMPLES};
        af_tensor probe = vals[i];
        af_tensor *outs[1] = {&probe};
        af_op_ctx ctx = {.node = n, .graph = g, .opset = g->opset, .n_inputs = n->n_inputs, .inputs = ins,
                         .n_outputs = 1, .outputs = outs};
        /* The shape function must agree that the result is one value per sample. */
        if (af_op_info(n->op)->infer(&ctx) != AF_OK || probe.dtype != AF_DTYPE_FLOAT || probe.rank != 1 ||
            probe.dims[0] != N_SAMPLES)
            return false;
        outs[0] = &vals[i];
        ok = af_op_info(n->op)->run(&ctx) == AF_OK;
    }
    if (ok) memcpy(y, store[count - 1], sizeof(float) * N_SAMPLES);
    return ok;
}

/* The activation matching y = f(x) on every sample, if any. */
static bool match_activation(const float *x, const float *y, af_epi_step *out) {
    static const af_epi_step known[] = {
        {.op = AF_EPI_GELU_ERF}, {.op = AF_EPI_GELU_TANH}, {.op = AF_EPI_SILU},
        {.op = AF_EPI_HARD_SWISH}, {.op = AF_EPI_SIGMOID}, {.op = AF_EPI_TANH}, {.op = AF_EPI_RELU},
        {.op = AF_EPI_HARD_SIGMOID, .a = 1.0f / 6.0f, .b = 0.5f}, {.op = AF_EPI_HARD_SIGMOID, .a = 0.2f, .b = 0.5f},
    };
    float f[N_SAMPLES];
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
        memcpy(f, x, sizeof f);
        af_epilogue e;
        af_epilogue_init(&e);
        af_epilogue_push(&e, &known[k]);
        af_epilogue_apply_ref(&e, f, N_SAMPLES, 1, N_SAMPLES, 0, 0, 0);
        bool same = true;
        for (int i = 0; i < N_SAMPLES && same; i++) same = fabsf(f[i] - y[i]) <= 1e-5f + 1e-4f * fabsf(f[i]);
        if (same) {
            *out = known[k];
            return true;
        }
    }
    return false;
}

/* Tries the longest run of nodes starting at nodes[0] that is a scalar function of r and equals an
 * epilogue activation; returns its length (0: none). */
static int recognize_run(compile *c, const af_node *const *nodes, int avail, int r, af_epi_step *step) {
    int outs[AF_FUSION_MAX_NODES];
    int len = 0;
    while (len < avail && reads_only(c->g, nodes[len], r, outs, len)) {
        outs[len] = nodes[len]->outputs[0];
        len++;
    }
    float x[N_SAMPLES], y[N_SAMPLES];
    /* Dense samples where activations bend, plus far ones: a Clip bound or other kink beyond
     * [-8, 8] must not pass for an activation that has none there. */
    static const float far[N_FAR] = {-1e4f, -1e3f, -64.0f, -16.0f, 16.0f, 64.0f, 1e3f, 1e4f};
    for (int i = 0; i < N_SAMPLES - N_FAR; i++) x[i] = -8.0f + 16.0f * (float)i / (N_SAMPLES - N_FAR - 1);
    for (int i = 0; i < N_FAR; i++) x[N_SAMPLES - N_FAR + i] = far[i];
    for (; len >= 2; len--) {
        /* Only the run's last output may be read after it: the rest must stay inside. */
        bool closed = true;
        for (int j = 0; j < len - 1 && closed; j++)
            for (int m = len; m < avail && closed; m++)
                for (int k = 0; k < nodes[m]->n_inputs; k++)
                    if (nodes[m]->inputs[k] == outs[j]) closed = false;
        if (closed && evaluate(c->g, nodes, len, r, x, y) && match_activation(x, y, step)) return len;
    }
    return 0;
}

/* A convolution output [N, C, H, W] or [N, C, L] whose channel count is known (N and the plane
 * may be symbolic: the epilogue's vectors run per channel, and a residual's strides are set per
 * run where the plane is unknown); other ranks need every dim. */
static bool conv_channels_static(const af_tensor *out) {
    return out->rank == 4 || out->rank == 3 ? out->dims[1] >= 0 : af_tensor_numel(out) >= 0;
}

bool af_sched_compile_epilogue(const af_graph *g, const af_fusion_candidate *cand, af_step *s, af_tensor *w_override,
                               af_tensor *b_override, char *why, size_t why_size) {
    const af_node *anchor = &g->nodes[cand->anchor];
    const af_tensor *out = &g->values[anchor->outputs[0]].t;
    compile c = {.g = g, .s = s, .conv = anchor->op == AF_OP_CONV, .out = out, .why = why, .why_size = why_size,
                 .bias_value = anchor->op == AF_OP_CONV && anchor->n_inputs > 2 ? anchor->inputs[2] : -1};
    /* A MatMul/Gemm output may have symbolic rows (a dynamic batch or sequence): the kernel takes
     * M from the actual input, and the epilogue's vectors run along the static last dimension. A
     * convolution's vectors run per channel: its batch and plane may be symbolic, the kernel
     * running image by image (a residual's shape is checked, and its strides set, per run). */
    if (out->rank < 2 || out->dtype != AF_DTYPE_FLOAT)
        return fail(&c, "the anchor's output is not float32 of rank 2 or more%s", "");
    if (c.conv ? !conv_channels_static(out) : out->dims[out->rank - 1] < 0)
        return fail(&c, c.conv ? "the convolution's output channels are not static%s"
                               : "the anchor's output has a symbolic last dimension%s",
                    "");
    c.channels = c.conv ? out->dims[1] : out->dims[out->rank - 1];
    c.rows = out->dims[out->rank - 2];
    af_epilogue_init(&s->epi);
    const af_tensor *w = anchor->op == AF_OP_CONV ? constant(g, anchor->inputs[1]) : NULL;
    const af_tensor *bias = anchor->op == AF_OP_CONV && anchor->n_inputs > 2 ? constant(g, anchor->inputs[2]) : NULL;

    const af_node *rest[AF_FUSION_MAX_NODES];
    int n_rest = 0;
    for (int i = 0; i < cand->n_nodes; i++)
        if (cand->nodes[i] != cand->anchor) rest[n_rest++] = &g->nodes[cand->nodes[i]];
    int r = anchor->outputs[0];
    for (int i = 0; i < n_rest;) {
        const af_node *n = rest[i];
        int other = -1;
        bool reads_r = false, r_first = n->n_inputs > 0 && n->inputs[0] == r;
        for (int k = 0; k < n->n_inputs; k++) {
            if (n->inputs[k] == r) reads_r = true;
            else if (n->inputs[k] >= 0 && other < 0) other = n->inputs[k];
        }
        if (!reads_r) return fail(&c, "node '%s' does not continue the chain", n->name);
        af_epi_step idiom;
        int len = recognize_run(&c, rest + i, n_rest - i, r, &idiom);
        if (len > 0) {
            if (!push(&c, idiom)) return false;
            i += len;
            r = rest[i - 1]->outputs[0];
            continue;
        }
        bool ok;
        if (n->op == AF_OP_BATCH_NORMALIZATION) {
            ok = batchnorm(&c, n, s->epi.n_steps == 0 && w_override->data == NULL, w_override, b_override, w, bias);
        } else if (af_sched_activation_step(g, n, &idiom)) {
            ok = push(&c, idiom);
        } else if ((n->op == AF_OP_ADD || n->op == AF_OP_SUB || n->op == AF_OP_MUL || n->op == AF_OP_DIV) &&
                   n->n_inputs == 2 && other >= 0 && constant(g, other)) {
            ok = const_arith(&c, n->op, other, constant(g, other), r_first);
        } else if (n->op == AF_OP_ADD && n->n_inputs == 2 && other >= 0 &&
                   af_tensor_same_shape(&g->values[other].t, out)) {
            /* A residual: its data arrives at run time, so it must come from outside the group
             * (a value the group makes itself, the anchor's output say, is never stored). */
            static const float placeholder = 0.0f;
            if (af_group_producer(g, cand, other))
                return fail(&c, "node '%s' adds a value computed inside the group", n->name);
            if (s->n_residuals >= AF_EPI_MAX_STEPS) return fail(&c, "too many residual inputs%s", "");
            /* -1: a symbolic plane (conv) or symbolic rows (MatMul), set per run (run_fused) */
            int64_t plane = 1; /* a conv's spatial dims, 1-D or 2-D */
            for (int d = 2; d < out->rank && plane >= 0; d++) plane = out->dims[d] >= 0 ? plane * out->dims[d] : -1;
            int64_t ld = !c.conv ? c.channels : plane;
            /* per image / batch item */
            int64_t bstride = c.conv ? (ld >= 0 ? c.channels * ld : -1) : c.rows >= 0 ? c.rows * c.channels : -1;
            s->residual_step[s->n_residuals] = s->epi.n_steps;
            s->residual_value[s->n_residuals++] = other;
            ok = push(&c, (af_epi_step){.op = AF_EPI_ADD, .p = &placeholder, .ld = ld, .batch_stride = bstride});
        } else {
            return fail(&c, "node '%s' has no epilogue form", n->name);
        }
        if (!ok) return false;
        r = n->outputs[0];
        i++;
    }
    return true;
}
