/* Reference kernels of the broadcasting ops: arithmetic, comparisons, logic, bit shifts, the
 * variadic Max/Min/Sum/Mean, PRelu and Where. Integer math wraps; integer division by zero fails. */
#include <math.h>
#include <string.h>

#include "kernels/ref/broadcast.h"
#include "kernels/ref/elementwise.h"

/* One function per arithmetic class (NULL where the op does not take it). Integer functions set
 * *div0 on a division by zero. Comparisons return 1/0, which store into a bool output. */
typedef struct binary_op {
    double (*f)(double a, double b);
    int64_t (*i)(int64_t a, int64_t b, bool *div0);
    uint64_t (*u)(uint64_t a, uint64_t b, bool *div0);
} binary_op;

/* y = op(a, b) over the broadcast of a and b to y's shape, computing in class `cls`. y may be a. */
static af_status run_binary_as(af_op_ctx *c, const binary_op *op, af_ew_class cls,
                               const af_tensor *a, const af_tensor *b, af_tensor *y) {
    af_status st = af_ew_check(c, a, "input A");
    if (st == AF_OK) st = af_ew_check(c, b, "input B");
    if (st == AF_OK) st = af_ew_check(c, y, "output");
    if (st != AF_OK) return st;
    af_bcast_iter it;
    const af_tensor *in[2] = {a, b};
    if (!af_bcast_init(&it, y->rank, y->dims, 2, in))
        return af_ctx_fail(c, AF_ERR_RUNTIME, "input shapes do not broadcast to the output shape");
    bool div0 = false;
    switch (cls) {
    case AF_EW_FLOAT:
        if (!op->f) break;
        if (a->dtype == AF_DTYPE_FLOAT && b->dtype == AF_DTYPE_FLOAT && y->dtype == AF_DTYPE_FLOAT) {
            const float *pa = a->data, *pb = b->data;
            float *py = y->data;
            for (int64_t k = 0; k < it.numel; k++, af_bcast_next(&it))
                py[k] = af_ew_f64_to_f32(op->f(pa[it.offset[0]], pb[it.offset[1]]));
        } else {
            for (int64_t k = 0; k < it.numel; k++, af_bcast_next(&it))
                af_ew_store_f64(y, k, op->f(af_tensor_get_f64(a, it.offset[0]),
                                              af_tensor_get_f64(b, it.offset[1])));
        }
        return AF_OK;
    case AF_EW_SINT:
        if (!op->i) break;
        for (int64_t k = 0; k < it.numel && !div0; k++, af_bcast_next(&it))
            af_tensor_set_i64(y, k, op->i(af_tensor_get_i64(a, it.offset[0]),
                                          af_tensor_get_i64(b, it.offset[1]), &div0));
        break;
    case AF_EW_UINT:
        if (!op->u) break;
        for (int64_t k = 0; k < it.numel && !div0; k++, af_bcast_next(&it))
            af_ew_set_u64(y, k, op->u(af_ew_get_u64(a, it.offset[0]), af_ew_get_u64(b, it.offset[1]),
                                      &div0));
        break;
    case AF_EW_NONE: break;
    }
    if (div0) return af_ctx_fail(c, AF_ERR_RUNTIME, "integer division by zero");
    if ((cls == AF_EW_SINT && op->i) || (cls == AF_EW_UINT && op->u)) return AF_OK;
    return af_ctx_fail(c, AF_ERR_UNSUPPORTED, "dtype %s is not supported", af_dtype_name(a->dtype));
}

static af_status run_binary(af_op_ctx *c, const binary_op *op) {
    const af_tensor *a = af_ctx_input(c, 0), *b = af_ctx_input(c, 1);
    if (!a || !b) return af_ctx_fail(c, AF_ERR_RUNTIME, "needs two inputs");
    return run_binary_as(c, op, af_ew_class_of(a->dtype), a, b, af_ctx_output(c, 0));
}

#define BINARY_KERNEL(E, F, I, U)                                                                  \
    af_status af_ref_##E(af_op_ctx *c) {                                                           \
        static const binary_op op = {F, I, U};                                                     \
        return run_binary(c, &op);                                                                 \
    }

/* ---- arithmetic ------------------------------------------------------------------------------ */

/* Signed integer results are computed on the uint64 bit patterns so overflow wraps, not UB. */
static double add_f(double a, double b) { return a + b; }
static int64_t add_i(int64_t a, int64_t b, bool *z) { (void)z; return (int64_t)((uint64_t)a + (uint64_t)b); }
static uint64_t add_u(uint64_t a, uint64_t b, bool *z) { (void)z; return a + b; }
static double sub_f(double a, double b) { return a - b; }
static int64_t sub_i(int64_t a, int64_t b, bool *z) { (void)z; return (int64_t)((uint64_t)a - (uint64_t)b); }
static uint64_t sub_u(uint64_t a, uint64_t b, bool *z) { (void)z; return a - b; }
static double mul_f(double a, double b) { return a * b; }
static int64_t mul_i(int64_t a, int64_t b, bool *z) { (void)z; return (int64_t)((uint64_t)a * (uint64_t)b); }
static uint64_t mul_u(uint64_t a, uint64_t b, bool *z) { (void)z; return a * b; }

/* Truncates toward zero like C; INT64_MIN / -1 wraps to INT64_MIN. */
static double div_f(double a, double b) { return a / b; }
static int64_t div_i(int64_t a, int64_t b, bool *div0) {
    if (b == 0) {
        *div0 = true;
        return 0;
    }
    return b == -1 ? (int64_t)(0u - (uint64_t)a) : a / b;
}
static uint64_t div_u(uint64_t a, uint64_t b, bool *div0) {
    if (b == 0) {
        *div0 = true;
        return 0;
    }
    return a / b;
}

BINARY_KERNEL(ADD, add_f, add_i, add_u)
BINARY_KERNEL(SUB, sub_f, sub_i, sub_u)
BINARY_KERNEL(MUL, mul_f, mul_i, mul_u)
BINARY_KERNEL(DIV, div_f, div_i, div_u)

/* fmod = 1: C remainder, the sign of the dividend. */
static double fmod_f(double a, double b) { return fmod(a, b); }
static int64_t fmod_i(int64_t a, int64_t b, bool *div0) {
    if (b == 0) {
        *div0 = true;
        return 0;
    }
    return b == -1 ? 0 : a % b;
}
static uint64_t mod_u(uint64_t a, uint64_t b, bool *div0) {
    if (b == 0) {
        *div0 = true;
        return 0;
    }
    return a % b;
}
/* fmod = 0 (integers only): Python's %, the sign of the divisor. */
static int64_t pymod_i(int64_t a, int64_t b, bool *div0) {
    int64_t r = fmod_i(a, b, div0);
    return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

af_status af_ref_MOD(af_op_ctx *c) {
    static const binary_op c_mod = {fmod_f, fmod_i, mod_u}, py_mod = {fmod_f, pymod_i, mod_u};
    return run_binary(c, af_node_attr_int(c->node, "fmod", 0) ? &c_mod : &py_mod);
}

/* Integer powers by squaring, wrapping (the base's bit pattern works for either signedness). A
 * negative exponent truncates 1 / a^-b toward zero; 0 to a negative power divides by zero. */
static uint64_t ipow(uint64_t base, uint64_t e) {
    uint64_t r = 1;
    for (; e; e >>= 1) {
        if (e & 1) r *= base;
        base *= base;
    }
    return r;
}
static double pow_f(double a, double b) { return pow(a, b); }
static int64_t pow_i(int64_t a, int64_t b, bool *div0) {
    if (b >= 0) return (int64_t)ipow((uint64_t)a, (uint64_t)b);
    if (a == 0) *div0 = true;
    return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
}
static uint64_t pow_u(uint64_t a, uint64_t b, bool *z) { (void)z; return ipow(a, b); }

/* The exponent may have another dtype than the base (opset 12+); the output has the base's. Any
 * float operand makes it a float power, stored into the base's dtype (integers truncate);
 * otherwise the exponent's signedness picks the integer path. */
af_status af_ref_POW(af_op_ctx *c) {
    static const binary_op op = {pow_f, pow_i, pow_u};
    const af_tensor *a = af_ctx_input(c, 0), *b = af_ctx_input(c, 1);
    if (!a || !b) return af_ctx_fail(c, AF_ERR_RUNTIME, "needs two inputs");
    af_ew_class ca = af_ew_class_of(a->dtype), cb = af_ew_class_of(b->dtype);
    if (ca == AF_EW_NONE || cb == AF_EW_NONE)
        return af_ctx_fail(c, AF_ERR_UNSUPPORTED, "dtypes %s and %s are not supported",
                           af_dtype_name(a->dtype), af_dtype_name(b->dtype));
    af_ew_class cls = ca == AF_EW_FLOAT || cb == AF_EW_FLOAT ? AF_EW_FLOAT : cb;
    return run_binary_as(c, &op, cls, a, b, af_ctx_output(c, 0));
}

/* ---- comparisons and logic ------------------------------------------------------------------- */

#define CMP_FNS(name, OP)                                                                          \
    static double name##_f(double a, double b) { return a OP b; }                                  \
    static int64_t name##_i(int64_t a, int64_t b, bool *z) { (void)z; return a OP b; }             \
    static uint64_t name##_u(uint64_t a, uint64_t b, bool *z) { (void)z; return a OP b; }
CMP_FNS(eq, ==)
CMP_FNS(lt, <)
CMP_FNS(le, <=)
CMP_FNS(gt, >)
CMP_FNS(ge, >=)
#undef CMP_FNS

BINARY_KERNEL(EQUAL, eq_f, eq_i, eq_u)
BINARY_KERNEL(LESS, lt_f, lt_i, lt_u)
BINARY_KERNEL(LESS_OR_EQUAL, le_f, le_i, le_u)
BINARY_KERNEL(GREATER, gt_f, gt_i, gt_u)
BINARY_KERNEL(GREATER_OR_EQUAL, ge_f, ge_i, ge_u)

static uint64_t and_u(uint64_t a, uint64_t b, bool *z) { (void)z; return a && b; }
static uint64_t or_u(uint64_t a, uint64_t b, bool *z) { (void)z; return a || b; }
static uint64_t xor_u(uint64_t a, uint64_t b, bool *z) { (void)z; return !a != !b; }
BINARY_KERNEL(AND, NULL, NULL, and_u)
BINARY_KERNEL(OR, NULL, NULL, or_u)
BINARY_KERNEL(XOR, NULL, NULL, xor_u)

/* Shifting by the width or more gives 0 (bits shifted out) instead of UB; the store truncates
 * to the dtype's width. */
static uint64_t shl_u(uint64_t a, uint64_t b, bool *z) { (void)z; return b >= 64 ? 0 : a << b; }
static uint64_t shr_u(uint64_t a, uint64_t b, bool *z) { (void)z; return b >= 64 ? 0 : a >> b; }

af_status af_ref_BIT_SHIFT(af_op_ctx *c) {
    static const binary_op left = {NULL, NULL, shl_u}, right = {NULL, NULL, shr_u};
    const char *dir = af_node_attr_string(c->node, "direction", "");
    return run_binary(c, strcmp(dir, "LEFT") == 0 ? &left : &right);
}

/* x for x >= 0, slope * x otherwise; slope broadcasts to x's shape. */
static double prelu_f(double x, double s) { return x < 0 ? s * x : x; }
static int64_t prelu_i(int64_t x, int64_t s, bool *z) { return x < 0 ? mul_i(x, s, z) : x; }
static uint64_t prelu_u(uint64_t x, uint64_t s, bool *z) { (void)s; (void)z; return x; }
BINARY_KERNEL(PRELU, prelu_f, prelu_i, prelu_u)

/* ---- variadic -------------------------------------------------------------------------------- */

/* NaN wins, like numpy's maximum/minimum. */
static double max_f(double a, double b) { return isnan(a) || isnan(b) ? NAN : a > b ? a : b; }
static int64_t max_i(int64_t a, int64_t b, bool *z) { (void)z; return a > b ? a : b; }
static uint64_t max_u(uint64_t a, uint64_t b, bool *z) { (void)z; return a > b ? a : b; }
static double min_f(double a, double b) { return isnan(a) || isnan(b) ? NAN : a < b ? a : b; }
static int64_t min_i(int64_t a, int64_t b, bool *z) { (void)z; return a < b ? a : b; }
static uint64_t min_u(uint64_t a, uint64_t b, bool *z) { (void)z; return a < b ? a : b; }
static double first_f(double a, double b) { (void)b; return a; }
static int64_t first_i(int64_t a, int64_t b, bool *z) { (void)b; (void)z; return a; }
static uint64_t first_u(uint64_t a, uint64_t b, bool *z) { (void)b; (void)z; return a; }

/* Folds the inputs left to right into the output, which holds the running result; each step
 * rounds to the output dtype as numpy's pairwise evaluation does. */
static af_status run_variadic(af_op_ctx *c, const binary_op *op) {
    static const binary_op first = {first_f, first_i, first_u};
    af_tensor *y = af_ctx_output(c, 0);
    if (c->n_inputs < 1) return af_ctx_fail(c, AF_ERR_RUNTIME, "needs at least one input");
    for (int k = 0; k < c->n_inputs; k++)
        if (!c->inputs[k]) return af_ctx_fail(c, AF_ERR_RUNTIME, "input %d is missing", k);
    const af_tensor *x0 = c->inputs[0];
    af_ew_class cls = af_ew_class_of(x0->dtype);
    af_status st = c->n_inputs == 1 ? run_binary_as(c, &first, cls, x0, x0, y)
                                    : run_binary_as(c, op, cls, x0, c->inputs[1], y);
    for (int k = 2; k < c->n_inputs && st == AF_OK; k++)
        st = run_binary_as(c, op, cls, y, c->inputs[k], y);
    return st;
}

af_status af_ref_MAX(af_op_ctx *c) {
    static const binary_op op = {max_f, max_i, max_u};
    return run_variadic(c, &op);
}

af_status af_ref_MIN(af_op_ctx *c) {
    static const binary_op op = {min_f, min_i, min_u};
    return run_variadic(c, &op);
}

af_status af_ref_SUM(af_op_ctx *c) {
    static const binary_op op = {add_f, add_i, add_u};
    return run_variadic(c, &op);
}

af_status af_ref_MEAN(af_op_ctx *c) {
    static const binary_op op = {add_f, NULL, NULL};
    af_status st = run_variadic(c, &op);
    if (st != AF_OK) return st;
    af_tensor *y = c->outputs[0];
    int64_t n = af_tensor_numel(y);
    for (int64_t k = 0; k < n; k++) af_ew_store_f64(y, k, af_tensor_get_f64(y, k) / c->n_inputs);
    return AF_OK;
}

/* ---- Where ----------------------------------------------------------------------------------- */

/* Copies whole elements, so it serves every dtype the runtime holds. */
af_status af_ref_WHERE(af_op_ctx *c) {
    const af_tensor *in[3] = {af_ctx_input(c, 0), af_ctx_input(c, 1), af_ctx_input(c, 2)};
    af_tensor *y = af_ctx_output(c, 0);
    static const char *const names[3] = {"input 'condition'", "input X", "input Y"};
    for (int k = 0; k < 3; k++) {
        af_status st = af_ew_check(c, in[k], names[k]);
        if (st != AF_OK) return st;
    }
    af_status st = af_ew_check(c, y, "output");
    if (st != AF_OK) return st;
    size_t esize = af_dtype_size(y->dtype);
    if (af_dtype_size(in[1]->dtype) != esize || af_dtype_size(in[2]->dtype) != esize)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "X, Y and the output differ in dtype");
    af_bcast_iter it;
    if (!af_bcast_init(&it, y->rank, y->dims, 3, in))
        return af_ctx_fail(c, AF_ERR_RUNTIME, "input shapes do not broadcast to the output shape");
    const uint8_t *px = in[1]->data, *py = in[2]->data;
    uint8_t *out = y->data;
    for (int64_t k = 0; k < it.numel; k++, af_bcast_next(&it)) {
        bool take_x = af_tensor_get_f64(in[0], it.offset[0]) != 0;
        const uint8_t *src = take_x ? px + (size_t)it.offset[1] * esize : py + (size_t)it.offset[2] * esize;
        memcpy(out + (size_t)k * esize, src, esize);
    }
    return AF_OK;
}
