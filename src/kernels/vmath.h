/*
 * Array versions of the vector math in vmath_x86.h, for kernels outside the GEMM (softmax, fused
 * elementwise groups) and for the accuracy tests. AF_ISA_SCALAR runs libm (the reference).
 *
 *   af_vmath_f32(af_cpu_isa(), AF_VMATH_EXP, n, x, y);   // y[i] = exp(x[i]); y may equal x
 */
#ifndef AF_KERNELS_VMATH_H
#define AF_KERNELS_VMATH_H

#include <stdint.h>

#include "util/cpu.h"

typedef enum af_vmath_fn {
    AF_VMATH_EXP,
    AF_VMATH_SIGMOID, /* 1 / (1 + exp(-x)) */
    AF_VMATH_TANH,
    AF_VMATH_ERF,
    AF_VMATH_LOG,
    AF_VMATH_SOFTPLUS,  /* log(1 + exp(x)) */
    AF_VMATH_EXPM1_NEG, /* exp(x) - 1 for x <= 0; x above 0 gives 0 */
    AF_VMATH_COUNT
} af_vmath_fn;

/* y[i] = fn(x[i]) for i < n; isa is clamped to what the CPU supports. */
void af_vmath_f32(af_isa isa, af_vmath_fn fn, int64_t n, const float *x, float *y);

#endif
