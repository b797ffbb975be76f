/* Shape functions of the elementwise ops: one-to-one (activations, math, Clip, Cast, Identity,
 * Dropout) and broadcasting (arithmetic, comparisons, logic, variadic, PRelu, Where). Opsets 7-18. */
#include <stdio.h>
#include <string.h>

#include "ir/op_ctx.h"

/* Dtype families an input may belong to, as bit sets. */
enum {
    TY_FLOAT = 1, /* float16, bfloat16, float32, float64 */
    TY_SINT = 2,
    TY_UINT = 4,
    TY_BOOL = 8,
    TY_NUM = TY_FLOAT | TY_SINT | TY_UINT,
    TY_ANY = TY_NUM | TY_BOOL,
};

static int type_bits(af_dtype t) {
    switch (t) {
    case AF_DTYPE_FLOAT:
    case AF_DTYPE_DOUBLE:
    case AF_DTYPE_FLOAT16:
    case AF_DTYPE_BFLOAT16: return TY_FLOAT;
    case AF_DTYPE_INT8:
    case AF_DTYPE_INT16:
    case AF_DTYPE_INT32:
    case AF_DTYPE_INT64: return TY_SINT;
    case AF_DTYPE_UINT8:
    case AF_DTYPE_UINT16:
    case AF_DTYPE_UINT32:
    case AF_DTYPE_UINT64: return TY_UINT;
    case AF_DTYPE_BOOL: return TY_BOOL;
    default: return 0;
    }
}

static const char *type_set_name(int allowed) {
    switch (allowed) {
    case TY_FLOAT: return "float types";
    case TY_FLOAT | TY_SINT: return "float and signed integer types";
    case TY_NUM: return "numeric types";
    case TY_UINT: return "unsigned integer types";
    case TY_BOOL: return "bool";
    default: return "numeric types and bool";
    }
}

/* An unknown dtype (UNDEFINED) passes; a dtype the runtime cannot hold is unsupported; a known dtype
 * outside the op's type constraint makes the model invalid. */
static af_status check_type(af_op_ctx *c, const af_tensor *t, const char *name, int allowed) {
    if (t->dtype == AF_DTYPE_UNDEFINED) return AF_OK;
    int bits = type_bits(t->dtype);
    if (!bits)
        return af_ctx_fail(c, AF_ERR_UNSUPPORTED, "%s has dtype %s, which autofusion does not support",
                           name, af_dtype_name(t->dtype));
    if (!(bits & allowed))
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "%s has dtype %s; %s takes %s", name,
                           af_dtype_name(t->dtype), c->node->op_type, type_set_name(allowed));
    return AF_OK;
}

static af_status check_same_type(af_op_ctx *c, const af_tensor *a, const af_tensor *b,
                                 const char *na, const char *nb) {
    if (a->dtype == AF_DTYPE_UNDEFINED || b->dtype == AF_DTYPE_UNDEFINED || a->dtype == b->dtype)
        return AF_OK;
    return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "%s is %s but %s is %s; they must match", na,
                       af_dtype_name(a->dtype), nb, af_dtype_name(b->dtype));
}

/* Sets an output's dtype and shape without touching its data pointer. */
static void set_output(af_tensor *y, af_dtype dtype, int rank, const int64_t *dims) {
    if (!y) return;
    y->dtype = dtype;
    y->rank = rank;
    for (int d = 0; d < AF_MAX_RANK; d++) y->dims[d] = d < rank ? dims[d] : 0;
}

/* ---- one-to-one ------------------------------------------------------------------------------ */

/* Y has X's shape and X's dtype, or out_dtype when it is not UNDEFINED. */
static af_status infer_unary(af_op_ctx *c, int allowed, af_dtype out_dtype) {
    const af_tensor *x = af_ctx_input(c, 0);
    if (!x) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs input X");
    af_status st = check_type(c, x, "input X", allowed);
    if (st != AF_OK) return st;
    set_output(af_ctx_output(c, 0), out_dtype ? out_dtype : x->dtype, x->rank, x->dims);
    return AF_OK;
}

#define UNARY_INFER(E, allowed)                                                                    \
    af_status af_infer_##E(af_op_ctx *c) { return infer_unary(c, allowed, AF_DTYPE_UNDEFINED); }

/* Type constraints are the union over opsets 7-18 (e.g. Relu takes signed integers from 14). */
UNARY_INFER(RELU, TY_FLOAT | TY_SINT)
UNARY_INFER(LEAKY_RELU, TY_FLOAT)
UNARY_INFER(SIGMOID, TY_FLOAT)
UNARY_INFER(HARD_SIGMOID, TY_FLOAT)
UNARY_INFER(HARD_SWISH, TY_FLOAT)
UNARY_INFER(TANH, TY_FLOAT)
UNARY_INFER(ERF, TY_NUM)
UNARY_INFER(EXP, TY_FLOAT)
UNARY_INFER(LOG, TY_FLOAT)
UNARY_INFER(SQRT, TY_FLOAT)
UNARY_INFER(RECIPROCAL, TY_FLOAT)
UNARY_INFER(NEG, TY_FLOAT | TY_SINT)
UNARY_INFER(ABS, TY_NUM)
UNARY_INFER(FLOOR, TY_FLOAT)
UNARY_INFER(CEIL, TY_FLOAT)
UNARY_INFER(ROUND, TY_FLOAT)
UNARY_INFER(SIGN, TY_NUM)
UNARY_INFER(NOT, TY_BOOL)
UNARY_INFER(ELU, TY_FLOAT)
UNARY_INFER(SELU, TY_FLOAT)
UNARY_INFER(CELU, TY_FLOAT)
UNARY_INFER(SOFTPLUS, TY_FLOAT)
UNARY_INFER(SOFTSIGN, TY_FLOAT)
UNARY_INFER(THRESHOLDED_RELU, TY_FLOAT)
UNARY_INFER(SHRINK, TY_NUM)
UNARY_INFER(SIN, TY_FLOAT)
UNARY_INFER(COS, TY_FLOAT)
UNARY_INFER(TAN, TY_FLOAT)
UNARY_INFER(ASIN, TY_FLOAT)
UNARY_INFER(ACOS, TY_FLOAT)
UNARY_INFER(ATAN, TY_FLOAT)
UNARY_INFER(SINH, TY_FLOAT)
UNARY_INFER(COSH, TY_FLOAT)
UNARY_INFER(ASINH, TY_FLOAT)
UNARY_INFER(ACOSH, TY_FLOAT)
UNARY_INFER(ATANH, TY_FLOAT)
UNARY_INFER(IDENTITY, TY_ANY)

af_status af_infer_IS_NAN(af_op_ctx *c) { return infer_unary(c, TY_FLOAT, AF_DTYPE_BOOL); }
af_status af_infer_IS_INF(af_op_ctx *c) { return infer_unary(c, TY_FLOAT, AF_DTYPE_BOOL); }

/* min and max are attributes before opset 11, optional scalar inputs of X's dtype from 11. */
af_status af_infer_CLIP(af_op_ctx *c) {
    af_status st = infer_unary(c, TY_NUM, AF_DTYPE_UNDEFINED);
    if (st != AF_OK || c->opset < 11) return st;
    const af_tensor *x = af_ctx_input(c, 0);
    static const char *const names[] = {"input 'min'", "input 'max'"};
    for (int k = 1; k <= 2; k++) {
        const af_tensor *b = af_ctx_input(c, k);
        if (!b) continue;
        st = check_same_type(c, x, b, "input X", names[k - 1]);
        if (st != AF_OK) return st;
        int64_t n = af_tensor_numel(b);
        if (n >= 0 && n != 1)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "%s must be a scalar, it has %lld elements",
                               names[k - 1], (long long)n);
    }
    return AF_OK;
}

/* Cast's `to` as a dtype the runtime holds; strings (and complex) are valid ONNX but unsupported. */
static af_status cast_target(af_op_ctx *c, int64_t to, af_dtype *out) {
    if (to <= AF_DTYPE_UNDEFINED || to >= AF_DTYPE_MAX)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "'to' = %lld is not a tensor data type", (long long)to);
    if (!type_bits((af_dtype)to))
        return af_ctx_fail(c, AF_ERR_UNSUPPORTED, "casting to %s is not supported",
                           af_dtype_name((af_dtype)to));
    *out = (af_dtype)to;
    return AF_OK;
}

af_status af_infer_CAST(af_op_ctx *c) {
    const af_attr *to = af_node_attr(c->node, "to");
    if (!to || to->type != AF_ATTR_INT)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs the integer attribute 'to'");
    af_dtype target;
    af_status st = cast_target(c, to->i, &target);
    if (st != AF_OK) return st;
    return infer_unary(c, TY_ANY, target);
}

af_status af_infer_CAST_LIKE(af_op_ctx *c) {
    const af_tensor *like = af_ctx_input(c, 1);
    if (!like) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs input target_type");
    af_dtype target = like->dtype;
    if (target != AF_DTYPE_UNDEFINED) {
        af_status st = cast_target(c, target, &target);
        if (st != AF_OK) return st;
    }
    af_status st = infer_unary(c, TY_ANY, target);
    af_tensor *y = af_ctx_output(c, 0);
    if (st == AF_OK && y) y->dtype = target;
    return st;
}

/* Inference form only: output = data, mask (bool from opset 10, data's dtype before) all true.
 * Training mode (an opset 12 input) drops at random, which this runtime does not do unless the
 * ratio is zero; a mode known at load time to be on is rejected here. */
af_status af_infer_DROPOUT(af_op_ctx *c) {
    af_status st = infer_unary(c, TY_FLOAT, AF_DTYPE_UNDEFINED);
    if (st != AF_OK) return st;
    const af_tensor *x = af_ctx_input(c, 0);
    if (c->opset >= 12) {
        const af_tensor *ratio = af_ctx_input(c, 1), *train = af_ctx_input(c, 2);
        if (ratio && (st = check_type(c, ratio, "input 'ratio'", TY_FLOAT)) != AF_OK) return st;
        if (train && (st = check_type(c, train, "input 'training_mode'", TY_BOOL)) != AF_OK) return st;
        const af_tensor *scalars[2] = {ratio, train};
        for (int k = 0; k < 2; k++) {
            int64_t n = scalars[k] ? af_tensor_numel(scalars[k]) : 1;
            if (n >= 0 && n != 1)
                return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "input '%s' must be a scalar",
                                   k ? "training_mode" : "ratio");
        }
        bool train_on = train && train->data && train->dtype == AF_DTYPE_BOOL &&
                        ((const uint8_t *)train->data)[0] != 0;
        bool ratio_known_nonzero = !ratio || (ratio->data && af_tensor_get_f64(ratio, 0) != 0);
        if (train_on && ratio_known_nonzero)
            return af_ctx_fail(c, AF_ERR_UNSUPPORTED,
                               "training-mode Dropout (random masking) is not supported");
    }
    set_output(af_ctx_output(c, 1), c->opset >= 10 ? AF_DTYPE_BOOL : x->dtype, x->rank, x->dims);
    return AF_OK;
}

/* ---- broadcasting ---------------------------------------------------------------------------- */

/* Inputs 0..n-1 are all required and of `allowed` dtypes (the same one when same_type); the output
 * takes their multidirectional broadcast and input 0's dtype, or out_dtype when not UNDEFINED. */
static af_status infer_broadcast(af_op_ctx *c, int n, int allowed, bool same_type, af_dtype out_dtype) {
    if (n < 1) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs at least one input");
    for (int k = 0; k < n; k++) {
        const af_tensor *t = af_ctx_input(c, k);
        char name[32];
        snprintf(name, sizeof name, "input %d", k);
        if (!t) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs %s", name);
        af_status st = check_type(c, t, name, allowed);
        if (st == AF_OK && same_type && k > 0) st = check_same_type(c, c->inputs[0], t, "input 0", name);
        if (st != AF_OK) return st;
    }
    af_tensor shape = {0};
    af_status st = af_shape_broadcast(c, n, c->inputs, &shape);
    if (st != AF_OK) return st;
    set_output(af_ctx_output(c, 0), out_dtype ? out_dtype : c->inputs[0]->dtype, shape.rank, shape.dims);
    return AF_OK;
}

#define BROADCAST_INFER(E, n, allowed, out_dtype)                                                  \
    af_status af_infer_##E(af_op_ctx *c) { return infer_broadcast(c, n, allowed, true, out_dtype); }

BROADCAST_INFER(ADD, 2, TY_NUM, AF_DTYPE_UNDEFINED)
BROADCAST_INFER(SUB, 2, TY_NUM, AF_DTYPE_UNDEFINED)
BROADCAST_INFER(MUL, 2, TY_NUM, AF_DTYPE_UNDEFINED)
BROADCAST_INFER(DIV, 2, TY_NUM, AF_DTYPE_UNDEFINED)
BROADCAST_INFER(MAX, c->n_inputs, TY_NUM, AF_DTYPE_UNDEFINED)
BROADCAST_INFER(MIN, c->n_inputs, TY_NUM, AF_DTYPE_UNDEFINED)
BROADCAST_INFER(SUM, c->n_inputs, TY_FLOAT, AF_DTYPE_UNDEFINED)
BROADCAST_INFER(MEAN, c->n_inputs, TY_FLOAT, AF_DTYPE_UNDEFINED)
BROADCAST_INFER(EQUAL, 2, TY_ANY, AF_DTYPE_BOOL)
BROADCAST_INFER(LESS, 2, TY_NUM, AF_DTYPE_BOOL)
BROADCAST_INFER(LESS_OR_EQUAL, 2, TY_NUM, AF_DTYPE_BOOL)
BROADCAST_INFER(GREATER, 2, TY_NUM, AF_DTYPE_BOOL)
BROADCAST_INFER(GREATER_OR_EQUAL, 2, TY_NUM, AF_DTYPE_BOOL)
BROADCAST_INFER(AND, 2, TY_BOOL, AF_DTYPE_BOOL)
BROADCAST_INFER(OR, 2, TY_BOOL, AF_DTYPE_BOOL)
BROADCAST_INFER(XOR, 2, TY_BOOL, AF_DTYPE_BOOL)

/* The exponent's dtype may differ from the base's (opset 12+); the result has the base's. */
af_status af_infer_POW(af_op_ctx *c) { return infer_broadcast(c, 2, TY_NUM, false, AF_DTYPE_UNDEFINED); }

/* fmod = 0 (Python-style, the divisor's sign) is defined for integers only. */
af_status af_infer_MOD(af_op_ctx *c) {
    af_status st = infer_broadcast(c, 2, TY_NUM, true, AF_DTYPE_UNDEFINED);
    if (st != AF_OK) return st;
    int64_t fmod = af_node_attr_int(c->node, "fmod", 0);
    if (fmod != 0 && fmod != 1)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "fmod is %lld; it must be 0 or 1", (long long)fmod);
    if (fmod == 0 && type_bits(c->inputs[0]->dtype) == TY_FLOAT)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "fmod must be 1 for %s inputs",
                           af_dtype_name(c->inputs[0]->dtype));
    return AF_OK;
}

af_status af_infer_BIT_SHIFT(af_op_ctx *c) {
    const char *dir = af_node_attr_string(c->node, "direction", NULL);
    if (!dir || (strcmp(dir, "LEFT") != 0 && strcmp(dir, "RIGHT") != 0))
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "direction must be \"LEFT\" or \"RIGHT\", not \"%s\"",
                           dir ? dir : "(absent)");
    return infer_broadcast(c, 2, TY_UINT, true, AF_DTYPE_UNDEFINED);
}

/* condition is bool; X and Y share any dtype; all three broadcast together. */
af_status af_infer_WHERE(af_op_ctx *c) {
    for (int k = 0; k < 3; k++)
        if (!af_ctx_input(c, k))
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs inputs condition, X and Y");
    af_status st = check_type(c, c->inputs[0], "input 'condition'", TY_BOOL);
    if (st == AF_OK) st = check_type(c, c->inputs[1], "input X", TY_ANY);
    if (st == AF_OK) st = check_same_type(c, c->inputs[1], c->inputs[2], "input X", "input Y");
    if (st != AF_OK) return st;
    af_tensor shape = {0};
    st = af_shape_broadcast(c, 3, c->inputs, &shape);
    if (st != AF_OK) return st;
    set_output(af_ctx_output(c, 0), c->inputs[1]->dtype, shape.rank, shape.dims);
    return AF_OK;
}

/* slope broadcasts unidirectionally to X: the broadcast of the two must be X's own shape. */
af_status af_infer_PRELU(af_op_ctx *c) {
    const af_tensor *x = af_ctx_input(c, 0), *slope = af_ctx_input(c, 1);
    if (!x || !slope) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs inputs X and slope");
    af_status st = check_type(c, x, "input X", TY_NUM);
    if (st == AF_OK) st = check_same_type(c, x, slope, "input X", "input slope");
    if (st != AF_OK) return st;
    af_tensor shape = {0};
    st = af_shape_broadcast(c, 2, c->inputs, &shape);
    if (st != AF_OK) return st;
    if (x->rank >= 0 && shape.rank >= 0) {
        bool ok = shape.rank == x->rank;
        for (int d = 0; ok && d < x->rank; d++)
            ok = x->dims[d] < 0 || shape.dims[d] == x->dims[d];
        if (!ok) {
            char xs[96], ss[96];
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "slope %s does not broadcast to X %s",
                               af_tensor_shape_str(slope, ss, sizeof ss),
                               af_tensor_shape_str(x, xs, sizeof xs));
        }
    }
    /* The broadcast may pin an unknown dim of X that slope knows. */
    set_output(af_ctx_output(c, 0), x->dtype, x->rank < 0 ? -1 : shape.rank, shape.dims);
    return AF_OK;
}
