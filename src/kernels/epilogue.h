/*
 * Epilogue programs: a short list of elementwise steps an anchor kernel (GEMM, Conv) applies to
 * each output tile right after computing it, while the tile is still in L1. Plain data, built once
 * when a fused group is planned and read concurrently by every thread while it runs.
 *
 *   af_epilogue e;
 *   af_epilogue_init(&e);
 *   af_epilogue_vec(&e, AF_EPI_SCALE_SHIFT_ROW, bn_scale, bn_shift);  // folded BatchNorm
 *   af_epilogue_residual(&e, skip, ldc);                              // + skip connection
 *   af_epilogue_unary(&e, AF_EPI_RELU, 0, 0);
 *   af_epilogue_tile_fn apply = af_epilogue_tile_fn_for(af_cpu_isa());
 *   apply(&e, tile, ldc, rows, cols, m0, n0, batch);   // what the GEMM does per tile
 *
 * Coordinates: the tile's element (i, j) is element (m0 + i, n0 + j) of the 2-D output of batch
 * item `batch`; "row" vectors are indexed by m, "column" vectors by n. Each step reads its own
 * vectors at p + batch * batch_stride (batch_stride 0: one vector shared by every batch item).
 */
#ifndef AF_KERNELS_EPILOGUE_H
#define AF_KERNELS_EPILOGUE_H

#include <stdint.h>

#include "autofusion.h"
#include "util/cpu.h"

#define AF_EPI_MAX_STEPS 8

/* The constants of the GELU forms, shared by every applier so they round alike. */
#define AF_EPI_GELU_RSQRT2 0.70710678f /* 1 / sqrt 2 */
#define AF_EPI_GELU_TANH_C 0.79788456f /* sqrt(2 / pi) */
#define AF_EPI_GELU_TANH_K 0.044715f

typedef enum af_epi_op {
    AF_EPI_BIAS_ROW,        /* x + p[m] */
    AF_EPI_BIAS_COL,        /* x + p[n] */
    AF_EPI_SCALE_SHIFT_ROW, /* x * p[m] + q[m]  (a BatchNormalization folded per output channel) */
    AF_EPI_SCALE_SHIFT_COL, /* x * p[n] + q[n] */
    AF_EPI_ADD,             /* x + p[m * ld + n]  (a residual of the output's shape) */
    AF_EPI_MUL_SCALAR,      /* x * a */
    AF_EPI_ADD_SCALAR,      /* x + a */
    AF_EPI_RELU,            /* max(x, 0) */
    AF_EPI_CLIP,            /* min(max(x, a), b) */
    AF_EPI_LEAKY_RELU,      /* x < 0 ? a * x : x */
    AF_EPI_SIGMOID,         /* 1 / (1 + exp(-x)) */
    AF_EPI_TANH,
    AF_EPI_HARD_SIGMOID,    /* max(0, min(1, a * x + b)) */
    AF_EPI_HARD_SWISH,      /* x * max(0, min(1, x / 6 + 1/2)) */
    AF_EPI_SILU,            /* x * sigmoid(x) */
    AF_EPI_GELU_ERF,        /* x/2 * (1 + erf(x / sqrt 2)) */
    AF_EPI_GELU_TANH,       /* x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) */
    AF_EPI_OP_COUNT
} af_epi_op;

typedef struct af_epi_step {
    af_epi_op op;
    float a, b;           /* scalar parameters (see af_epi_op); unused ones are ignored */
    const float *p;       /* row/column vector, scale, or residual; not owned */
    const float *q;       /* shift vector (SCALE_SHIFT ops); not owned */
    int64_t ld;           /* AF_EPI_ADD: elements between consecutive rows of p */
    int64_t batch_stride; /* elements between batch items' p (and q); 0: shared */
} af_epi_step;

typedef struct af_epilogue {
    int n_steps;
    af_epi_step steps[AF_EPI_MAX_STEPS];
} af_epilogue;

/* An empty program (the identity). A NULL program pointer means the same everywhere. */
void af_epilogue_init(af_epilogue *e);
/* Appends a step; AF_ERR_LIMIT when the program is full, AF_ERR_INVALID_ARGUMENT when the op
 * is unknown or a vector it needs is NULL. */
af_status af_epilogue_push(af_epilogue *e, const af_epi_step *step);
/* BIAS_ROW/BIAS_COL (q unused) and SCALE_SHIFT_ROW/SCALE_SHIFT_COL. */
af_status af_epilogue_vec(af_epilogue *e, af_epi_op op, const float *p, const float *q);
/* AF_EPI_ADD of r with row stride ld. */
af_status af_epilogue_residual(af_epilogue *e, const float *r, int64_t ld);
/* The scalar-parameter ops (MUL_SCALAR ... GELU_TANH). */
af_status af_epilogue_unary(af_epilogue *e, af_epi_op op, float a, float b);
/* Name of an op, e.g. "gelu_erf"; for logs and tests. */
const char *af_epi_op_name(af_epi_op op);

/* Applies e (NULL or empty: nothing) to the rows x cols tile at c with row stride ldc. */
typedef void (*af_epilogue_tile_fn)(const af_epilogue *e, float *c, int64_t ldc, int rows, int cols, int64_t m0,
                                    int64_t n0, int64_t batch);

/* The reference: plain C with the libm float functions (expf, tanhf, erff), step by step. */
void af_epilogue_apply_ref(const af_epilogue *e, float *c, int64_t ldc, int rows, int cols, int64_t m0,
                           int64_t n0, int64_t batch);
/* Vectorized twins; accuracy of the transcendental ops as stated in vmath_x86.h. Call only
 * where the CPU supports the ISA (af_epilogue_tile_fn_for checks). */
void af_epilogue_apply_avx512(const af_epilogue *e, float *c, int64_t ldc, int rows, int cols, int64_t m0,
                              int64_t n0, int64_t batch);
void af_epilogue_apply_avx2(const af_epilogue *e, float *c, int64_t ldc, int rows, int cols, int64_t m0,
                            int64_t n0, int64_t batch);
/* The applier for isa, clamped to what the CPU supports. */
af_epilogue_tile_fn af_epilogue_tile_fn_for(af_isa isa);

#endif
