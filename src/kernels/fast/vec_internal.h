/*
 * The vector loops behind the fast elementwise, pool and norm kernels (elementwise.c, pool.c,
 * norm.c), written once in elementwise_body.h, pool_body.h and norm_body.h and compiled per ISA by
 * vec_scalar.c, vec_avx2.c and vec_avx512.c into one table each. A driver picks the table once,
 * at prepare, and never tests CPU features again:
 *
 *   const af_vec_kernels *vk = af_vec_kernels_for(req->choice.isa);      // clamped to the CPU
 *   vk->ew_unary(AF_EW_RELU, 0, 0, n, x, y);
 *
 * Every loop computes each output element the same way wherever a chunk starts or ends (tails
 * are masked vectors, not scalar code), so splitting work over threads never changes a result.
 * Internal to src/kernels (the implicit-GEMM conv in src/kernels/gemm builds its phase planes with
 * `phase_planes`, written in phase_body.h; the Winograd conv there runs its transforms through
 * `wino_input` / `wino_output`).
 */
#ifndef AF_KERNELS_FAST_VEC_INTERNAL_H
#define AF_KERNELS_FAST_VEC_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "util/cpu.h"

#define AF_PHASES_MAX 16 /* column phases phase_planes makes in one pass over the rows */

/* One-input float ops; a and b are the op's parameters. */
typedef enum af_ew_unary_op {
    AF_EW_RELU,         /* max(x, 0); NaN and -0 pass */
    AF_EW_LEAKY_RELU,   /* x < 0 ? a x : x */
    AF_EW_SIGMOID,
    AF_EW_HARD_SIGMOID, /* max(0, min(1, a x + b)) with one fused multiply-add */
    AF_EW_HARD_SWISH,   /* x max(0, min(1, x/6 + 1/2)), as the epilogue computes it */
    AF_EW_TANH,
    AF_EW_ERF,
    AF_EW_EXP,
    AF_EW_LOG,          /* -inf at +-0, NaN below 0 */
    AF_EW_ELU,          /* x < 0 ? a (e^x - 1) : x */
    AF_EW_SOFTPLUS,     /* log(1 + e^x), without overflow */
    AF_EW_FLOOR,
    AF_EW_CEIL,
    AF_EW_ROUND,        /* to nearest, ties to even */
    AF_EW_CLIP,         /* min(max(x, a), b): the lower bound first, as ONNX orders them */
    AF_EW_NEG,
    AF_EW_ABS,
    AF_EW_SQRT,
    AF_EW_RECIPROCAL,
    AF_EW_SQUARE,       /* Pow(x, 2) */
    AF_EW_POW_HALF,     /* Pow(x, 0.5): sqrt, but +0 for -0 and +inf for -inf as pow gives */
    AF_EW_COPY,         /* Identity, Dropout at inference */
    AF_EW_UNARY_COUNT
} af_ew_unary_op;

/* Two-input float ops. */
typedef enum af_ew_binary_op {
    AF_EW_ADD,
    AF_EW_SUB,
    AF_EW_MUL,
    AF_EW_DIV,
    AF_EW_MAX,   /* NaN wins, like the reference (numpy's maximum) */
    AF_EW_MIN,
    AF_EW_PRELU, /* a < 0 ? b a : a */
    AF_EW_BINARY_COUNT
} af_ew_binary_op;

/* A 2-D pooling window over one NCHW plane, resolved for one run (dilation 1). */
typedef struct af_pool2d {
    bool max;                  /* MaxPool; else AveragePool */
    bool include_pad;          /* AveragePool count_include_pad */
    int64_t h, w, oh, ow;      /* input and output plane sizes */
    int64_t kh, kw, sh, sw;    /* kernel and strides */
    int64_t ph, pw;            /* pads at the beginning */
    int64_t eh, ew;            /* padded extents h + pads, where count_include_pad counts taps */
    int64_t ox_lo, ox_hi;      /* interior columns [ox_lo, ox_hi): all kw taps inside [0, w) */
} af_pool2d;

typedef struct af_vec_kernels {
    af_isa isa;
    /* y[i] = op(x[i]) for i < n. */
    void (*ew_unary)(af_ew_unary_op op, float a, float b, int64_t n, const float *x, float *y);
    /* y[i] = op(a[i * sa], b[i * sb]) for i < n; sa, sb are 0 (a scalar) or 1. */
    void (*ew_binary)(af_ew_binary_op op, int64_t n, const float *a, int sa, const float *b, int sb, float *y);
    /* y[i] = x[i] as int64 for i < n, as the reference Cast converts: toward zero, NaN to 0, values
     * past the int64 range to INT64_MIN / INT64_MAX. */
    void (*cast_f32_i64)(int64_t n, const float *x, int64_t *y);
    /* y[i][j] (hq x wq) = x[sy i + r0][sx j + c0] of the h x w plane x, zero outside it, reading
     * only the elements copied. */
    void (*strided_plane)(int64_t hq, int64_t wq, int64_t sy, int64_t sx, const float *x, int64_t h, int64_t w,
                          int64_t r0, int64_t c0, float *y);
    /* Phases b < nb (<= sx) at once: phase b into y + b * plane, as strided_plane with c0 + b. */
    void (*phase_planes)(int64_t hq, int64_t wq, int64_t sy, int64_t sx, int64_t nb, const float *x, int64_t h,
                         int64_t w, int64_t r0, int64_t c0, float *y, int64_t plane);
    /* Output rows [oy0, oy1) of one plane: x is g->h x g->w, y is g->oh x g->ow. */
    void (*pool2d_plane)(const af_pool2d *g, const float *x, float *y, int64_t oy0, int64_t oy1);
    /* *y = the max (max) or mean of x[0..n); the mean's sum runs in double. */
    void (*global_pool)(bool max, int64_t n, const float *x, float *y);
    /* One softmax row of n contiguous elements. */
    void (*softmax_row)(int64_t n, const float *x, float *y);
    /* One LayerNormalization row: y = (x - mean) / sqrt(var + eps) * scale + bias (scale NULL:
     * ones, bias NULL: zeros); scale and bias hold n elements. */
    void (*layernorm_row)(int64_t n, const float *x, float *y, const float *scale, const float *bias, float eps);
    /* y[o, c, i] = x[o, c, i] * scale[c] + shift[c] over rows o < outer of C x inner. */
    void (*scale_shift)(int64_t outer, int64_t C, int64_t inner, const float *x, float *y, const float *scale,
                        const float *shift);
    /* The Winograd F(m x m, 3x3) convolution (m = 2 or 4): the input transform of a row of n tiles
     * from its m + 2 input rows (each of w floats read as if after lead zeros and before trailing
     * ones; NULL: a row of padding), output rows interleaved from their column phases, and the
     * output transform over a row of n tiles (winograd_body.h has the layouts). */
    void (*wino_input)(int m, int64_t n, const float *const rows[6], int64_t lead, int64_t w, float *v, int64_t v_ld);
    void (*interleave)(int m, int64_t n, const float *y, int64_t y_ld, float *x);
    void (*wino_output)(int m, int64_t n, const float *mp, int64_t m_ld, float *y, int64_t y_ld);
    /* y[i] = sum over j < n_rows of w[j] rows[j][i], for i < n, in j order (weighted_rows_body.h). */
    void (*weighted_rows)(int n_rows, const float *const *rows, const float *w, int64_t n, float *y);
} af_vec_kernels;

extern const af_vec_kernels af_vec_scalar, af_vec_avx2, af_vec_avx512;

/* The table for isa lowered to what the CPU supports. */
const af_vec_kernels *af_vec_kernels_for(af_isa isa);

#endif
