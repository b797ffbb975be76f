/* Epilogue programs: the builder, the reference applier and the per-ISA dispatch. */
#include "kernels/epilogue.h"

#include <math.h>
#include <stddef.h>

static const char *const op_names[AF_EPI_OP_COUNT] = {
    [AF_EPI_BIAS_ROW] = "bias_row",
    [AF_EPI_BIAS_COL] = "bias_col",
    [AF_EPI_SCALE_SHIFT_ROW] = "scale_shift_row",
    [AF_EPI_SCALE_SHIFT_COL] = "scale_shift_col",
    [AF_EPI_ADD] = "add",
    [AF_EPI_MUL_SCALAR] = "mul_scalar",
    [AF_EPI_ADD_SCALAR] = "add_scalar",
    [AF_EPI_RELU] = "relu",
    [AF_EPI_CLIP] = "clip",
    [AF_EPI_LEAKY_RELU] = "leaky_relu",
    [AF_EPI_SIGMOID] = "sigmoid",
    [AF_EPI_TANH] = "tanh",
    [AF_EPI_HARD_SIGMOID] = "hard_sigmoid",
    [AF_EPI_HARD_SWISH] = "hard_swish",
    [AF_EPI_SILU] = "silu",
    [AF_EPI_GELU_ERF] = "gelu_erf",
    [AF_EPI_GELU_TANH] = "gelu_tanh",
};

const char *af_epi_op_name(af_epi_op op) {
    return (int)op >= 0 && op < AF_EPI_OP_COUNT ? op_names[op] : "unknown";
}

void af_epilogue_init(af_epilogue *e) { e->n_steps = 0; }

af_status af_epilogue_push(af_epilogue *e, const af_epi_step *step) {
    if ((int)step->op < 0 || step->op >= AF_EPI_OP_COUNT) return AF_ERR_INVALID_ARGUMENT;
    if (step->op <= AF_EPI_ADD && !step->p) return AF_ERR_INVALID_ARGUMENT;
    if ((step->op == AF_EPI_SCALE_SHIFT_ROW || step->op == AF_EPI_SCALE_SHIFT_COL) && !step->q)
        return AF_ERR_INVALID_ARGUMENT;
    if (e->n_steps >= AF_EPI_MAX_STEPS) return AF_ERR_LIMIT;
    e->steps[e->n_steps++] = *step;
    return AF_OK;
}

af_status af_epilogue_vec(af_epilogue *e, af_epi_op op, const float *p, const float *q) {
    if (op != AF_EPI_BIAS_ROW && op != AF_EPI_BIAS_COL && op != AF_EPI_SCALE_SHIFT_ROW &&
        op != AF_EPI_SCALE_SHIFT_COL)
        return AF_ERR_INVALID_ARGUMENT;
    return af_epilogue_push(e, &(af_epi_step){.op = op, .p = p, .q = q});
}

af_status af_epilogue_residual(af_epilogue *e, const float *r, int64_t ld) {
    return af_epilogue_push(e, &(af_epi_step){.op = AF_EPI_ADD, .p = r, .ld = ld});
}

af_status af_epilogue_unary(af_epilogue *e, af_epi_op op, float a, float b) {
    if (op < AF_EPI_MUL_SCALAR || op >= AF_EPI_OP_COUNT) return AF_ERR_INVALID_ARGUMENT;
    return af_epilogue_push(e, &(af_epi_step){.op = op, .a = a, .b = b});
}

static float sigmoid_ref(float x) { return 1.0f / (1.0f + expf(-x)); }

/* One step on one element; row and column vectors already offset to this element. */
static float step_ref(const af_epi_step *s, float x, const float *p, const float *q) {
    switch (s->op) {
    case AF_EPI_BIAS_ROW:
    case AF_EPI_BIAS_COL:
    case AF_EPI_ADD: return x + *p;
    case AF_EPI_SCALE_SHIFT_ROW:
    case AF_EPI_SCALE_SHIFT_COL: return x * *p + *q;
    case AF_EPI_MUL_SCALAR: return x * s->a;
    case AF_EPI_ADD_SCALAR: return x + s->a;
    case AF_EPI_RELU: return x < 0 ? 0.0f : x;
    case AF_EPI_CLIP: return x < s->a ? s->a : x > s->b ? s->b : x;
    case AF_EPI_LEAKY_RELU: return x < 0 ? s->a * x : x;
    case AF_EPI_SIGMOID: return sigmoid_ref(x);
    case AF_EPI_TANH: return tanhf(x);
    case AF_EPI_HARD_SIGMOID: {
        float v = s->a * x + s->b;
        return v < 0 ? 0.0f : v > 1 ? 1.0f : v;
    }
    case AF_EPI_HARD_SWISH: {
        float v = x * (1.0f / 6.0f) + 0.5f;
        return x * (v < 0 ? 0.0f : v > 1 ? 1.0f : v);
    }
    case AF_EPI_SILU: return x * sigmoid_ref(x);
    case AF_EPI_GELU_ERF: return 0.5f * x * (1.0f + erff(x * AF_EPI_GELU_RSQRT2));
    case AF_EPI_GELU_TANH: return 0.5f * x * (1.0f + tanhf(AF_EPI_GELU_TANH_C * (x + AF_EPI_GELU_TANH_K * x * x * x)));
    default: return x;
    }
}

void af_epilogue_apply_ref(const af_epilogue *e, float *c, int64_t ldc, int rows, int cols, int64_t m0,
                           int64_t n0, int64_t batch) {
    if (!e) return;
    for (int k = 0; k < e->n_steps; k++) {
        const af_epi_step *s = &e->steps[k];
        const float *p = s->p ? s->p + batch * s->batch_stride : NULL;
        const float *q = s->q ? s->q + batch * s->batch_stride : NULL;
        for (int i = 0; i < rows; i++) {
            float *row = c + i * ldc;
            const int64_t m = m0 + i;
            for (int j = 0; j < cols; j++) {
                const int64_t n = n0 + j;
                const float *pe = NULL, *qe = NULL;
                switch (s->op) {
                case AF_EPI_BIAS_ROW:
                case AF_EPI_SCALE_SHIFT_ROW: pe = p + m, qe = q ? q + m : NULL; break;
                case AF_EPI_BIAS_COL:
                case AF_EPI_SCALE_SHIFT_COL: pe = p + n, qe = q ? q + n : NULL; break;
                case AF_EPI_ADD: pe = p + m * s->ld + n; break;
                default: break;
                }
                row[j] = step_ref(s, row[j], pe, qe);
            }
        }
    }
}

af_epilogue_tile_fn af_epilogue_tile_fn_for(af_isa isa) {
    switch (af_cpu_isa_clamp(isa)) {
    case AF_ISA_AVX512: return af_epilogue_apply_avx512;
    case AF_ISA_AVX2: return af_epilogue_apply_avx2;
    default: return af_epilogue_apply_ref;
    }
}
