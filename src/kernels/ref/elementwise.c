/* Helpers shared by the elementwise reference kernels: dtype classes, checked access, exact
 * conversions (see elementwise.h). */
#include "kernels/ref/elementwise.h"

#include <float.h>
#include <math.h>

af_ew_class af_ew_class_of(af_dtype dtype) {
    switch (dtype) {
    case AF_DTYPE_FLOAT:
    case AF_DTYPE_DOUBLE:
    case AF_DTYPE_FLOAT16:
    case AF_DTYPE_BFLOAT16: return AF_EW_FLOAT;
    case AF_DTYPE_INT8:
    case AF_DTYPE_INT16:
    case AF_DTYPE_INT32:
    case AF_DTYPE_INT64: return AF_EW_SINT;
    case AF_DTYPE_UINT8:
    case AF_DTYPE_UINT16:
    case AF_DTYPE_UINT32:
    case AF_DTYPE_UINT64:
    case AF_DTYPE_BOOL: return AF_EW_UINT;
    default: return AF_EW_NONE;
    }
}

af_status af_ew_check(const af_op_ctx *c, const af_tensor *t, const char *what) {
    if (!t) return af_ctx_fail(c, AF_ERR_RUNTIME, "%s is missing", what);
    int64_t n = af_tensor_numel(t);
    size_t esize = af_dtype_size(t->dtype);
    if (n < 0) return af_ctx_fail(c, AF_ERR_RUNTIME, "%s has an unknown shape", what);
    if (esize == 0)
        return af_ctx_fail(c, AF_ERR_UNSUPPORTED, "%s has dtype %s, which is not supported", what,
                           af_dtype_name(t->dtype));
    if (n > 0 && (!t->data || t->nbytes / esize < (uint64_t)n))
        return af_ctx_fail(c, AF_ERR_RUNTIME, "%s holds %zu bytes, fewer than its %lld elements need",
                           what, t->nbytes, (long long)n);
    return AF_OK;
}

af_status af_ew_check_unary(const af_op_ctx *c, const af_tensor **x, af_tensor **y) {
    *x = af_ctx_input(c, 0);
    *y = af_ctx_output(c, 0);
    af_status st = af_ew_check(c, *x, "input 0");
    if (st == AF_OK) st = af_ew_check(c, *y, "output 0");
    if (st != AF_OK) return st;
    if (af_tensor_numel(*x) != af_tensor_numel(*y))
        return af_ctx_fail(c, AF_ERR_RUNTIME, "output has %lld elements, input %lld",
                           (long long)af_tensor_numel(*y), (long long)af_tensor_numel(*x));
    return AF_OK;
}

double af_ew_round_even(double x) {
    if (!isfinite(x)) return x;
    double r = floor(x), frac = x - r; /* exact: r and x are within one binade's integer part */
    if (frac > 0.5 || (frac == 0.5 && fmod(r, 2.0) != 0)) r += 1.0;
    return copysign(r, x); /* -0.5 .. -0 round to -0, not +0 */
}

int64_t af_ew_f64_to_i64(double v) {
    if (isnan(v)) return 0;
    if (v >= 9223372036854775808.0) return INT64_MAX;
    if (v < -9223372036854775808.0) return INT64_MIN;
    return (int64_t)v;
}

uint64_t af_ew_f64_to_u64(double v) {
    if (isnan(v)) return 0;
    if (v >= 18446744073709551616.0) return UINT64_MAX;
    if (v < 0) return (uint64_t)af_ew_f64_to_i64(v); /* wraps like C integer conversion */
    return (uint64_t)v;
}

/* Rounds v to a binary format with `mant_bits` stored mantissa bits and smallest normal exponent
 * `emin`, ties to even, keeping the double type; the exponent's upper range is the caller's. */
static double round_to_format(double v, int mant_bits, int emin) {
    if (!isfinite(v) || v == 0) return v;
    int e;
    frexp(v, &e); /* |v| in [2^(e-1), 2^e) */
    int lead = e - 1 < emin ? emin : e - 1;
    double quantum = ldexp(1.0, lead - mant_bits);
    return af_ew_round_even(v / quantum) * quantum;
}

float af_ew_f64_to_f32(double v) {
    if (fabs(v) > FLT_MAX) {
        if (fabs(v) >= 0x1.ffffffp127) return v < 0 ? -INFINITY : INFINITY; /* past FLT_MAX + ulp/2 */
        return v < 0 ? -FLT_MAX : FLT_MAX;
    }
    return (float)v;
}

void af_ew_store_f64(af_tensor *t, int64_t i, double v) {
    switch (t->dtype) {
    case AF_DTYPE_FLOAT: ((float *)t->data)[i] = af_ew_f64_to_f32(v); break;
    case AF_DTYPE_DOUBLE: ((double *)t->data)[i] = v; break;
    /* Both round exactly in double first; the float they then pass through holds the result. */
    case AF_DTYPE_FLOAT16:
        ((uint16_t *)t->data)[i] = af_f32_to_f16(af_ew_f64_to_f32(round_to_format(v, 10, -14)));
        break;
    case AF_DTYPE_BFLOAT16:
        ((uint16_t *)t->data)[i] = af_f32_to_bf16(af_ew_f64_to_f32(round_to_format(v, 7, -126)));
        break;
    case AF_DTYPE_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
    default:
        if (af_ew_class_of(t->dtype) == AF_EW_UINT)
            af_ew_set_u64(t, i, af_ew_f64_to_u64(v));
        else
            af_tensor_set_i64(t, i, af_ew_f64_to_i64(v));
        break;
    }
}
