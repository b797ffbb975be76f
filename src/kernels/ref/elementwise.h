/*
 * Helpers shared by the elementwise reference kernels (unary.c, binary.c, cast.c): the arithmetic
 * class a dtype computes in, checked tensor access, and exact conversions.
 *
 *   switch (af_ew_class(x->dtype)) { case AF_EW_FLOAT: ...double...; case AF_EW_SINT: ...int64...; }
 */
#ifndef AF_KERNELS_REF_ELEMENTWISE_H
#define AF_KERNELS_REF_ELEMENTWISE_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/op_ctx.h"

/* Floats compute in double, signed integers in int64 (wrapping), unsigned integers and bool in
 * uint64 (wrapping); each holds every value of its dtypes exactly. */
typedef enum af_ew_class {
    AF_EW_NONE,  /* string, complex, undefined: not computable */
    AF_EW_FLOAT, /* float16, bfloat16, float32, float64 */
    AF_EW_SINT,  /* int8..int64 */
    AF_EW_UINT,  /* uint8..uint64, bool */
} af_ew_class;

af_ew_class af_ew_class_of(af_dtype dtype);

/* Fails with AF_ERR_RUNTIME unless t is present, has a known shape and holds at least as many
 * bytes as its shape needs; `what` names it in the message ("input 0"). */
af_status af_ew_check(const af_op_ctx *c, const af_tensor *t, const char *what);

/* Checks input 0 and output 0 for a one-to-one op: both present and of the same element count. */
af_status af_ew_check_unary(const af_op_ctx *c, const af_tensor **x, af_tensor **y);

/* Element access in the class domains; unsigned values travel as their uint64 bit pattern. */
static inline uint64_t af_ew_get_u64(const af_tensor *t, int64_t i) {
    return (uint64_t)af_tensor_get_i64(t, i);
}
static inline void af_ew_set_u64(af_tensor *t, int64_t i, uint64_t v) {
    af_tensor_set_i64(t, i, (int64_t)v);
}

/* Rounds to the nearest integer, ties to even (ONNX Round), without depending on the FP mode. The
 * result has x's sign, as IEEE 754's roundToIntegralTiesToEven (numpy, ONNX Runtime) gives it:
 * -0.4 rounds to -0. */
double af_ew_round_even(double x);

/* double -> integer without UB: truncates toward zero, saturates out of range, NaN gives 0. */
int64_t af_ew_f64_to_i64(double v);
uint64_t af_ew_f64_to_u64(double v);

/* double -> float rounding to nearest even, overflowing to infinity (never an out-of-range
 * conversion, which C leaves undefined). */
float af_ew_f64_to_f32(double v);

/* Writes v into element i of any numeric tensor: floats round once (to nearest even) straight from
 * double, out-of-range values becoming infinities; integers truncate as af_ew_f64_to_i64/u64 (then
 * wrap to their width); bool is v != 0. */
void af_ew_store_f64(af_tensor *t, int64_t i, double v);

#endif
