/*
 * The vector loops behind the fast Reduce* kernels (reduce.c), written once in reduce_body.h and
 * compiled per ISA by reduce_scalar.c, reduce_avx2.c and reduce_avx512.c into one table each; the
 * driver picks the table at prepare. Internal to src/kernels/fast.
 *
 *   const af_reduce_kernels *rk = af_reduce_kernels_for(isa);
 *   float s = rk->row(AF_RED_SUM, n, x, 0);              // sum of x[0..n)
 *   rk->accum(AF_RED_MAX, n, x, acc, NULL);              // acc[i] = max(acc[i], x[i])
 *
 * Every element of a row is combined the same way wherever the row starts, and the lanes are
 * folded in a fixed order, so results never depend on how rows are split over threads.
 */
#ifndef AF_KERNELS_FAST_REDUCE_INTERNAL_H
#define AF_KERNELS_FAST_REDUCE_INTERNAL_H

#include <math.h>
#include <stdint.h>

#include "util/cpu.h"

/* What each element contributes and how contributions combine. MAX and MIN let NaN win. */
typedef enum af_red_kind {
    AF_RED_SUM,     /* + x */
    AF_RED_ABS_SUM, /* + |x| */
    AF_RED_SQ_SUM,  /* + x * x */
    AF_RED_PROD,    /* * x */
    AF_RED_MAX,
    AF_RED_MIN,
    AF_RED_EXP_SUM, /* + exp(x - shift) */
    AF_RED_KIND_COUNT
} af_red_kind;

typedef struct af_reduce_kernels {
    af_isa isa;
    /* The combination of x[0..n) (the kind's identity when n == 0); shift is for EXP_SUM. */
    float (*row)(af_red_kind kind, int64_t n, const float *x, float shift);
    /* acc[i] = combine(acc[i], term(x[i])) for i < n; shift[i] for EXP_SUM (else unused, may be NULL). */
    void (*accum)(af_red_kind kind, int64_t n, const float *x, float *acc, const float *shift);
} af_reduce_kernels;

extern const af_reduce_kernels af_reduce_scalar, af_reduce_avx2, af_reduce_avx512;

/* The kind's identity: 0, 1, -inf or +inf. Inline, so that the AVX kernels calling it do not
 * run legacy SSE code with the upper register halves dirty (a stall per call on Intel). */
static inline float af_red_identity(af_red_kind kind) {
    switch (kind) {
    case AF_RED_PROD: return 1.0f;
    case AF_RED_MAX: return -INFINITY;
    case AF_RED_MIN: return INFINITY;
    default: return 0.0f;
    }
}

/* The table for isa lowered to what the CPU supports. */
const af_reduce_kernels *af_reduce_kernels_for(af_isa isa);

#endif
