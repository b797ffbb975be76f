/* Reference kernels of the one-to-one elementwise ops (activations, math functions, Clip, Identity,
 * Dropout at inference). Floats compute in double and round once on store. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/ref/elementwise.h"

/* Attribute values an op reads, fetched once per run. */
typedef struct un_params {
    double alpha, beta, gamma;
} un_params;

/* One function per arithmetic class; NULL where the op does not take that class. */
typedef struct unary_op {
    double (*f)(double x, const un_params *p);
    int64_t (*i)(int64_t x, const un_params *p);
    uint64_t (*u)(uint64_t x, const un_params *p);
} unary_op;

static af_status run_unary(af_op_ctx *c, const unary_op *op, const un_params *p) {
    const af_tensor *x;
    af_tensor *y;
    af_status st = af_ew_check_unary(c, &x, &y);
    if (st != AF_OK) return st;
    int64_t n = af_tensor_numel(x);
    switch (af_ew_class_of(x->dtype)) {
    case AF_EW_FLOAT:
        if (!op->f) break;
        if (x->dtype == AF_DTYPE_FLOAT && y->dtype == AF_DTYPE_FLOAT) {
            const float *xs = x->data;
            float *ys = y->data;
            for (int64_t k = 0; k < n; k++) ys[k] = af_ew_f64_to_f32(op->f(xs[k], p));
        } else if (x->dtype == AF_DTYPE_DOUBLE && y->dtype == AF_DTYPE_DOUBLE) {
            const double *xs = x->data;
            double *ys = y->data;
            for (int64_t k = 0; k < n; k++) ys[k] = op->f(xs[k], p);
        } else {
            for (int64_t k = 0; k < n; k++) af_ew_store_f64(y, k, op->f(af_tensor_get_f64(x, k), p));
        }
        return AF_OK;
    case AF_EW_SINT:
        if (!op->i) break;
        for (int64_t k = 0; k < n; k++) af_tensor_set_i64(y, k, op->i(af_tensor_get_i64(x, k), p));
        return AF_OK;
    case AF_EW_UINT:
        if (!op->u) break;
        for (int64_t k = 0; k < n; k++) af_ew_set_u64(y, k, op->u(af_ew_get_u64(x, k), p));
        return AF_OK;
    case AF_EW_NONE: break;
    }
    return af_ctx_fail(c, AF_ERR_UNSUPPORTED, "dtype %s is not supported", af_dtype_name(x->dtype));
}

static af_status run_with(af_op_ctx *c, const unary_op *op, double alpha, double beta, double gamma) {
    un_params p = {alpha, beta, gamma};
    return run_unary(c, op, &p);
}

static double attr_f(const af_op_ctx *c, const char *name, float def) {
    return af_node_attr_float(c->node, name, def);
}

/* Defines af_ref_E for an op with no attributes. */
#define UNARY_KERNEL(E, F, I, U)                                                                   \
    af_status af_ref_##E(af_op_ctx *c) {                                                           \
        static const unary_op op = {F, I, U};                                                      \
        return run_with(c, &op, 0, 0, 0);                                                          \
    }

/* ---- activations ---------------------------------------------------------------------------- */

static double relu_f(double x, const un_params *p) { (void)p; return x < 0 ? 0 : x; }
static int64_t relu_i(int64_t x, const un_params *p) { (void)p; return x < 0 ? 0 : x; }
static uint64_t ident_u(uint64_t x, const un_params *p) { (void)p; return x; }
UNARY_KERNEL(RELU, relu_f, relu_i, ident_u)

static double leaky_relu_f(double x, const un_params *p) { return x < 0 ? p->alpha * x : x; }
af_status af_ref_LEAKY_RELU(af_op_ctx *c) {
    static const unary_op op = {leaky_relu_f, NULL, NULL};
    return run_with(c, &op, attr_f(c, "alpha", 0.01f), 0, 0);
}

/* Split by sign so exp never overflows. */
static double sigmoid_f(double x, const un_params *p) {
    (void)p;
    if (x >= 0) return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}
UNARY_KERNEL(SIGMOID, sigmoid_f, NULL, NULL)

/* max(0, min(1, alpha * x + beta)), letting NaN through. */
static double hard_sigmoid(double x, double alpha, double beta) {
    double v = alpha * x + beta;
    return v < 0 ? 0 : v > 1 ? 1 : v;
}
static double hard_sigmoid_f(double x, const un_params *p) { return hard_sigmoid(x, p->alpha, p->beta); }
af_status af_ref_HARD_SIGMOID(af_op_ctx *c) {
    static const unary_op op = {hard_sigmoid_f, NULL, NULL};
    return run_with(c, &op, attr_f(c, "alpha", 0.2f), attr_f(c, "beta", 0.5f), 0);
}

static double hard_swish_f(double x, const un_params *p) {
    (void)p;
    return x * hard_sigmoid(x, 1.0 / 6.0, 0.5);
}
UNARY_KERNEL(HARD_SWISH, hard_swish_f, NULL, NULL)

static double elu_f(double x, const un_params *p) { return x < 0 ? p->alpha * expm1(x) : x; }
af_status af_ref_ELU(af_op_ctx *c) {
    static const unary_op op = {elu_f, NULL, NULL};
    return run_with(c, &op, attr_f(c, "alpha", 1.0f), 0, 0);
}

static double selu_f(double x, const un_params *p) {
    return x > 0 ? p->gamma * x : p->gamma * p->alpha * expm1(x);
}
af_status af_ref_SELU(af_op_ctx *c) {
    static const unary_op op = {selu_f, NULL, NULL};
    return run_with(c, &op, attr_f(c, "alpha", 1.67326319217681884765625f), 0,
                    attr_f(c, "gamma", 1.05070102214813232421875f));
}

/* max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) */
static double celu_f(double x, const un_params *p) {
    if (isnan(x)) return x;
    double neg = p->alpha * expm1(x / p->alpha);
    return (x > 0 ? x : 0) + (neg < 0 ? neg : 0);
}
af_status af_ref_CELU(af_op_ctx *c) {
    static const unary_op op = {celu_f, NULL, NULL};
    return run_with(c, &op, attr_f(c, "alpha", 1.0f), 0, 0);
}

/* log(1 + exp(x)) without overflow for large x. */
static double softplus_f(double x, const un_params *p) {
    (void)p;
    return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}
UNARY_KERNEL(SOFTPLUS, softplus_f, NULL, NULL)

static double softsign_f(double x, const un_params *p) { (void)p; return x / (1.0 + fabs(x)); }
UNARY_KERNEL(SOFTSIGN, softsign_f, NULL, NULL)

static double thresholded_relu_f(double x, const un_params *p) { return x > p->alpha ? x : 0; }
af_status af_ref_THRESHOLDED_RELU(af_op_ctx *c) {
    static const unary_op op = {thresholded_relu_f, NULL, NULL};
    return run_with(c, &op, attr_f(c, "alpha", 1.0f), 0, 0);
}

/* alpha = lambd, beta = bias; integers go through double like the spec's formula. */
static double shrink_f(double x, const un_params *p) {
    return x < -p->alpha ? x + p->beta : x > p->alpha ? x - p->beta : 0;
}
static int64_t shrink_i(int64_t x, const un_params *p) { return af_ew_f64_to_i64(shrink_f((double)x, p)); }
static uint64_t shrink_u(uint64_t x, const un_params *p) { return af_ew_f64_to_u64(shrink_f((double)x, p)); }
af_status af_ref_SHRINK(af_op_ctx *c) {
    static const unary_op op = {shrink_f, shrink_i, shrink_u};
    return run_with(c, &op, attr_f(c, "lambd", 0.5f), attr_f(c, "bias", 0.0f), 0);
}

/* ---- math ------------------------------------------------------------------------------------ */

#define MATH_FN(name, expr)                                                                        \
    static double name(double x, const un_params *p) {                                             \
        (void)p;                                                                                   \
        return expr;                                                                               \
    }
MATH_FN(tanh_f, tanh(x))
MATH_FN(erf_f, erf(x))
MATH_FN(exp_f, exp(x))
MATH_FN(log_f, log(x))
MATH_FN(sqrt_f, sqrt(x))
MATH_FN(reciprocal_f, 1.0 / x)
MATH_FN(floor_f, floor(x))
MATH_FN(ceil_f, ceil(x))
MATH_FN(round_f, af_ew_round_even(x))
MATH_FN(sin_f, sin(x))
MATH_FN(cos_f, cos(x))
MATH_FN(tan_f, tan(x))
MATH_FN(asin_f, asin(x))
MATH_FN(acos_f, acos(x))
MATH_FN(atan_f, atan(x))
MATH_FN(sinh_f, sinh(x))
MATH_FN(cosh_f, cosh(x))
MATH_FN(asinh_f, asinh(x))
MATH_FN(acosh_f, acosh(x))
MATH_FN(atanh_f, atanh(x))
MATH_FN(neg_f, -x)
MATH_FN(abs_f, fabs(x))
MATH_FN(sign_f, x > 0 ? 1.0 : x < 0 ? -1.0 : x) /* keeps 0 and NaN */
#undef MATH_FN

static int64_t erf_i(int64_t x, const un_params *p) { return af_ew_f64_to_i64(erf_f((double)x, p)); }
static uint64_t erf_u(uint64_t x, const un_params *p) { return af_ew_f64_to_u64(erf_f((double)x, p)); }
/* Negation wraps (INT64_MIN stays itself) instead of overflowing. */
static int64_t neg_i(int64_t x, const un_params *p) { (void)p; return (int64_t)(0u - (uint64_t)x); }
static int64_t abs_i(int64_t x, const un_params *p) { return x < 0 ? neg_i(x, p) : x; }
static int64_t sign_i(int64_t x, const un_params *p) { (void)p; return (x > 0) - (x < 0); }
static uint64_t sign_u(uint64_t x, const un_params *p) { (void)p; return x > 0; }
static uint64_t not_u(uint64_t x, const un_params *p) { (void)p; return !x; }

UNARY_KERNEL(TANH, tanh_f, NULL, NULL)
UNARY_KERNEL(ERF, erf_f, erf_i, erf_u)
UNARY_KERNEL(EXP, exp_f, NULL, NULL)
UNARY_KERNEL(LOG, log_f, NULL, NULL)
UNARY_KERNEL(SQRT, sqrt_f, NULL, NULL)
UNARY_KERNEL(RECIPROCAL, reciprocal_f, NULL, NULL)
UNARY_KERNEL(FLOOR, floor_f, NULL, NULL)
UNARY_KERNEL(CEIL, ceil_f, NULL, NULL)
UNARY_KERNEL(ROUND, round_f, NULL, NULL)
UNARY_KERNEL(SIN, sin_f, NULL, NULL)
UNARY_KERNEL(COS, cos_f, NULL, NULL)
UNARY_KERNEL(TAN, tan_f, NULL, NULL)
UNARY_KERNEL(ASIN, asin_f, NULL, NULL)
UNARY_KERNEL(ACOS, acos_f, NULL, NULL)
UNARY_KERNEL(ATAN, atan_f, NULL, NULL)
UNARY_KERNEL(SINH, sinh_f, NULL, NULL)
UNARY_KERNEL(COSH, cosh_f, NULL, NULL)
UNARY_KERNEL(ASINH, asinh_f, NULL, NULL)
UNARY_KERNEL(ACOSH, acosh_f, NULL, NULL)
UNARY_KERNEL(ATANH, atanh_f, NULL, NULL)
UNARY_KERNEL(NEG, neg_f, neg_i, NULL)
UNARY_KERNEL(ABS, abs_f, abs_i, ident_u)
UNARY_KERNEL(SIGN, sign_f, sign_i, sign_u)
UNARY_KERNEL(NOT, NULL, NULL, not_u)

/* The output is bool; 1.0 / 0.0 store as true / false. */
static double is_nan_f(double x, const un_params *p) { (void)p; return isnan(x) ? 1 : 0; }
UNARY_KERNEL(IS_NAN, is_nan_f, NULL, NULL)

/* alpha = detect_negative, beta = detect_positive */
static double is_inf_f(double x, const un_params *p) {
    return isinf(x) && ((x < 0 && p->alpha != 0) || (x > 0 && p->beta != 0)) ? 1 : 0;
}
af_status af_ref_IS_INF(af_op_ctx *c) {
    static const unary_op op = {is_inf_f, NULL, NULL};
    return run_with(c, &op, (double)af_node_attr_int(c->node, "detect_negative", 1),
                    (double)af_node_attr_int(c->node, "detect_positive", 1), 0);
}

/* ---- Clip ------------------------------------------------------------------------------------ */

/* Bounds come from attributes before opset 11 and from optional scalar inputs since. Lower bound
 * first, then upper, so min > max gives max everywhere as the spec says. */
af_status af_ref_CLIP(af_op_ctx *c) {
    const af_tensor *x;
    af_tensor *y;
    af_status st = af_ew_check_unary(c, &x, &y);
    if (st != AF_OK) return st;
    const af_tensor *lo_t = c->opset >= 11 ? af_ctx_input(c, 1) : NULL;
    const af_tensor *hi_t = c->opset >= 11 ? af_ctx_input(c, 2) : NULL;
    const af_tensor *bounds[2] = {lo_t, hi_t};
    for (int k = 0; k < 2; k++) {
        if (!bounds[k]) continue;
        st = af_ew_check(c, bounds[k], k == 0 ? "input 'min'" : "input 'max'");
        if (st != AF_OK) return st;
        if (af_tensor_numel(bounds[k]) != 1)
            return af_ctx_fail(c, AF_ERR_RUNTIME, "input '%s' must be a scalar, it has %lld elements",
                               k == 0 ? "min" : "max", (long long)af_tensor_numel(bounds[k]));
    }
    int64_t n = af_tensor_numel(x);
    switch (af_ew_class_of(x->dtype)) {
    case AF_EW_FLOAT: {
        double lo = lo_t ? af_tensor_get_f64(lo_t, 0)
                    : c->opset < 11 ? attr_f(c, "min", -FLT_MAX) : -INFINITY;
        double hi = hi_t ? af_tensor_get_f64(hi_t, 0)
                    : c->opset < 11 ? attr_f(c, "max", FLT_MAX) : INFINITY;
        for (int64_t k = 0; k < n; k++) {
            double v = af_tensor_get_f64(x, k);
            v = v < lo ? lo : v;
            af_ew_store_f64(y, k, v > hi ? hi : v);
        }
        return AF_OK;
    }
    case AF_EW_SINT: {
        int64_t lo = lo_t ? af_tensor_get_i64(lo_t, 0) : INT64_MIN;
        int64_t hi = hi_t ? af_tensor_get_i64(hi_t, 0) : INT64_MAX;
        for (int64_t k = 0; k < n; k++) {
            int64_t v = af_tensor_get_i64(x, k);
            v = v < lo ? lo : v;
            af_tensor_set_i64(y, k, v > hi ? hi : v);
        }
        return AF_OK;
    }
    case AF_EW_UINT: {
        uint64_t lo = lo_t ? af_ew_get_u64(lo_t, 0) : 0;
        uint64_t hi = hi_t ? af_ew_get_u64(hi_t, 0) : UINT64_MAX;
        for (int64_t k = 0; k < n; k++) {
            uint64_t v = af_ew_get_u64(x, k);
            v = v < lo ? lo : v;
            af_ew_set_u64(y, k, v > hi ? hi : v);
        }
        return AF_OK;
    }
    case AF_EW_NONE: break;
    }
    return af_ctx_fail(c, AF_ERR_UNSUPPORTED, "dtype %s is not supported", af_dtype_name(x->dtype));
}

/* ---- Identity, Dropout ----------------------------------------------------------------------- */

static af_status copy_input(af_op_ctx *c) {
    const af_tensor *x;
    af_tensor *y;
    af_status st = af_ew_check_unary(c, &x, &y);
    if (st != AF_OK) return st;
    if (x->dtype != y->dtype)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "output dtype %s differs from input dtype %s",
                           af_dtype_name(y->dtype), af_dtype_name(x->dtype));
    size_t bytes = (size_t)af_tensor_numel(x) * af_dtype_size(x->dtype);
    if (bytes && x->data != y->data) memcpy(y->data, x->data, bytes);
    return AF_OK;
}

af_status af_ref_IDENTITY(af_op_ctx *c) { return copy_input(c); }

/* Inference only: output = input and the mask is all true. A training-mode run drops elements at
 * random, which only a zero ratio makes deterministic (and equal to inference). */
af_status af_ref_DROPOUT(af_op_ctx *c) {
    const af_tensor *train = c->opset >= 12 ? af_ctx_input(c, 2) : NULL;
    if (train) {
        af_status st = af_ew_check(c, train, "input 'training_mode'");
        if (st != AF_OK) return st;
        if (af_tensor_numel(train) != 1)
            return af_ctx_fail(c, AF_ERR_RUNTIME, "input 'training_mode' must be a scalar");
        if (af_tensor_get_f64(train, 0) != 0) {
            const af_tensor *ratio = af_ctx_input(c, 1);
            double r = 0.5;
            if (ratio) {
                st = af_ew_check(c, ratio, "input 'ratio'");
                if (st != AF_OK) return st;
                if (af_tensor_numel(ratio) != 1)
                    return af_ctx_fail(c, AF_ERR_RUNTIME, "input 'ratio' must be a scalar");
                r = af_tensor_get_f64(ratio, 0);
            }
            if (r != 0)
                return af_ctx_fail(c, AF_ERR_UNSUPPORTED,
                                   "training-mode Dropout (random masking) is not supported");
        }
    }
    af_status st = copy_input(c);
    if (st != AF_OK) return st;
    af_tensor *mask = af_ctx_output(c, 1);
    if (!mask) return AF_OK;
    st = af_ew_check(c, mask, "output 'mask'");
    if (st != AF_OK) return st;
    int64_t n = af_tensor_numel(mask);
    for (int64_t k = 0; k < n; k++) af_tensor_set_f64(mask, k, 1.0);
    return AF_OK;
}
