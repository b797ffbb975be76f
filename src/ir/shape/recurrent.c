/* Shape functions of the recurrent ops RNN, GRU and LSTM, and the attribute and input checks their
 * reference kernels share (recurrent.h). */
#include "ir/shape/recurrent.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ir/shape/conv_geom.h"

static const struct {
    const char *name;
    bool alpha, beta; /* whether it consumes an activation_alpha / activation_beta value */
    float def_alpha, def_beta;
} act_table[] = {
    [AF_RNN_ACT_RELU] = {"Relu", false, false, 0, 0},
    [AF_RNN_ACT_TANH] = {"Tanh", false, false, 0, 0},
    [AF_RNN_ACT_SIGMOID] = {"Sigmoid", false, false, 0, 0},
    [AF_RNN_ACT_AFFINE] = {"Affine", true, true, 1.0f, 0.0f},
    [AF_RNN_ACT_LEAKY_RELU] = {"LeakyRelu", true, false, 0.01f, 0},
    [AF_RNN_ACT_THRESHOLDED_RELU] = {"ThresholdedRelu", true, false, 1.0f, 0},
    [AF_RNN_ACT_SCALED_TANH] = {"ScaledTanh", true, true, 1.0f, 1.0f},
    [AF_RNN_ACT_HARD_SIGMOID] = {"HardSigmoid", true, true, 0.2f, 0.5f},
    [AF_RNN_ACT_ELU] = {"Elu", true, false, 1.0f, 0},
    [AF_RNN_ACT_SOFTSIGN] = {"Softsign", false, false, 0, 0},
    [AF_RNN_ACT_SOFTPLUS] = {"Softplus", false, false, 0, 0},
};
enum { N_ACT_KINDS = sizeof act_table / sizeof act_table[0] };

/* The attribute `name`, failing when present with another type (an int stands for a float). */
static af_status attr_typed(const af_op_ctx *c, const char *name, af_attr_type type, const af_attr **out) {
    static const char *const type_names[] = {[AF_ATTR_FLOAT] = "a float", [AF_ATTR_INT] = "an int",
                                             [AF_ATTR_STRING] = "a string", [AF_ATTR_FLOATS] = "floats",
                                             [AF_ATTR_STRINGS] = "strings"};
    const af_attr *a = af_node_attr(c->node, name);
    *out = a;
    if (!a || a->type == type || (type == AF_ATTR_FLOAT && a->type == AF_ATTR_INT)) return AF_OK;
    return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "attribute '%s' must be %s", name, type_names[type]);
}

/* The activations: the defaults, or the activations attribute (one list per direction, or one
 * list both directions share), with activation_alpha and activation_beta consumed in order by the
 * activations that take them, as ONNX Runtime reads them. */
static af_status read_activations(const af_op_ctx *c, af_rnn_desc *d) {
    static const af_rnn_act_kind defaults[AF_RNN_MAX_ACTS] = {AF_RNN_ACT_SIGMOID, AF_RNN_ACT_TANH,
                                                              AF_RNN_ACT_TANH};
    const af_attr *names, *alphas, *betas;
    af_status st = attr_typed(c, "activations", AF_ATTR_STRINGS, &names);
    if (st == AF_OK) st = attr_typed(c, "activation_alpha", AF_ATTR_FLOATS, &alphas);
    if (st == AF_OK) st = attr_typed(c, "activation_beta", AF_ATTR_FLOATS, &betas);
    if (st != AF_OK) return st;
    int n_alpha = alphas ? alphas->n : 0, n_beta = betas ? betas->n : 0, ia = 0, ib = 0;
    if (!names) {
        if (n_alpha || n_beta)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL,
                               "activation_alpha or activation_beta is given without activations");
        for (int dir = 0; dir < d->n_dirs; dir++)
            for (int k = 0; k < d->n_acts; k++) {
                af_rnn_act_kind kind = d->n_acts == 1 ? AF_RNN_ACT_TANH : defaults[k];
                d->act[dir][k] = (af_rnn_act){kind, act_table[kind].def_alpha, act_table[kind].def_beta};
            }
        return AF_OK;
    }
    if (names->n != d->n_acts * d->n_dirs && names->n != d->n_acts)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "activations has %d names; %d per direction are needed (%d in all)",
                           names->n, d->n_acts, d->n_acts * d->n_dirs);
    for (int i = 0; i < names->n; i++) {
        int kind = 0;
        while (kind < N_ACT_KINDS && strcasecmp(names->strings[i], act_table[kind].name) != 0) kind++;
        if (kind == N_ACT_KINDS)
            return af_ctx_fail(c, AF_ERR_UNSUPPORTED,
                               "activation '%s' is not supported (Relu, Tanh, Sigmoid, Affine, LeakyRelu, "
                               "ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)",
                               names->strings[i]);
        af_rnn_act a = {(af_rnn_act_kind)kind, act_table[kind].def_alpha, act_table[kind].def_beta};
        if (act_table[kind].alpha && ia < n_alpha) a.alpha = alphas->floats[ia++];
        if (act_table[kind].beta && ib < n_beta) a.beta = betas->floats[ib++];
        d->act[i / d->n_acts][i % d->n_acts] = a;
        if (names->n == d->n_acts && d->n_dirs == 2) d->act[1][i] = a;
    }
    /* Values no activation takes mean the file counts them some other way: refuse, never guess. */
    if (ia < n_alpha || ib < n_beta)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL,
                           "activation_alpha / activation_beta have %d / %d values; the activations take %d / %d",
                           n_alpha, n_beta, ia, ib);
    return AF_OK;
}

static af_status read_attrs(const af_op_ctx *c, af_rnn_desc *d) {
    const af_attr *a;
    af_status st = attr_typed(c, "direction", AF_ATTR_STRING, &a);
    if (st != AF_OK) return st;
    const char *dir = a ? a->s : "forward";
    if (strcmp(dir, "forward") == 0) {
        d->n_dirs = 1;
    } else if (strcmp(dir, "reverse") == 0) {
        d->n_dirs = 1;
        d->reverse = true;
    } else if (strcmp(dir, "bidirectional") == 0) {
        d->n_dirs = 2;
    } else {
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "direction '%s' is not forward, reverse or bidirectional", dir);
    }
    if ((st = attr_typed(c, "hidden_size", AF_ATTR_INT, &a)) != AF_OK) return st;
    /* The bound keeps 8 x hidden_size (B's length for LSTM) an int64. */
    if (a && (a->i <= 0 || a->i > INT64_MAX / 8))
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "hidden_size is %lld; it must be positive (and below 2^60)",
                           (long long)a->i);
    d->hidden = a ? a->i : -1;
    if ((st = attr_typed(c, "layout", AF_ATTR_INT, &a)) != AF_OK) return st;
    if (a && a->i != 0 && a->i != 1)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "layout is %lld; it must be 0 or 1", (long long)a->i);
    d->batch_first = a && a->i == 1;
    if ((st = attr_typed(c, "clip", AF_ATTR_FLOAT, &a)) != AF_OK) return st;
    if (a) {
        d->clip = af_node_attr_float(c->node, "clip", 0);
        if (!(d->clip > 0) || isinf(d->clip))
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "clip is %g; it must be a positive number", (double)d->clip);
    }
    if ((st = attr_typed(c, "input_forget", AF_ATTR_INT, &a)) != AF_OK) return st;
    d->input_forget = c->node->op == AF_OP_LSTM && a && a->i != 0;
    if ((st = attr_typed(c, "linear_before_reset", AF_ATTR_INT, &a)) != AF_OK) return st;
    d->linear_before_reset = c->node->op == AF_OP_GRU && a && a->i != 0;
    return read_activations(c, d);
}

/* Input i, checked to have `rank` dims and X's dtype (when both are known). */
static af_status check_input(const af_op_ctx *c, int i, const char *name, int rank, af_dtype dtype) {
    const af_tensor *t = af_ctx_input(c, i);
    if (!t) return AF_OK;
    if (t->rank >= 0 && t->rank != rank)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "%s has %d dims; %s needs %d", name, t->rank, c->node->op_type,
                           rank);
    if (i == AF_RNN_IN_SEQ_LENS) {
        if (t->dtype != AF_DTYPE_UNDEFINED && t->dtype != AF_DTYPE_INT32 && t->dtype != AF_DTYPE_INT64)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "sequence_lens has dtype %s; it must be int32 (or int64)",
                               af_dtype_name(t->dtype));
    } else if (t->dtype != AF_DTYPE_UNDEFINED && dtype != AF_DTYPE_UNDEFINED && t->dtype != dtype) {
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "%s has dtype %s, X has %s", name, af_dtype_name(t->dtype),
                           af_dtype_name(dtype));
    }
    return AF_OK;
}

/* Dim d of input i (when present and known) must equal *have, or sets *have when that is still
 * unknown; `what` names the size for the message. */
static af_status agree(const af_op_ctx *c, int i, const char *name, int d, int64_t *have, const char *what) {
    const af_tensor *t = af_ctx_input(c, i);
    if (!t || t->rank <= d || t->dims[d] < 0) return AF_OK;
    if (*have < 0) {
        *have = t->dims[d];
        return AF_OK;
    }
    if (t->dims[d] == *have) return AF_OK;
    char s[128];
    return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "%s is %s: dim %d (%s) is %lld, but %lld elsewhere", name,
                       af_tensor_shape_str(t, s, sizeof s), d, what, (long long)t->dims[d], (long long)*have);
}

/* Dim d of input i (when present and known) must be `want` (when known); `why` says where that
 * comes from. */
static af_status want_dim(const af_op_ctx *c, int i, const char *name, int d, int64_t want, const char *why) {
    const af_tensor *t = af_ctx_input(c, i);
    if (!t || t->rank <= d || t->dims[d] < 0 || want < 0 || t->dims[d] == want) return AF_OK;
    char s[128];
    return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "%s is %s: dim %d must be %lld (%s)", name,
                       af_tensor_shape_str(t, s, sizeof s), d, (long long)want, why);
}

/* Dim d of input i must be mult x hidden_size. */
static af_status per_hidden(const af_op_ctx *c, int i, const char *name, int d, int mult, int64_t hidden) {
    char why[64];
    if (mult == 1) snprintf(why, sizeof why, "hidden_size");
    else snprintf(why, sizeof why, "%d x hidden_size %lld", mult, (long long)hidden);
    return want_dim(c, i, name, d, hidden < 0 ? -1 : mult * hidden, why);
}

af_status af_rnn_desc_init(const af_op_ctx *c, af_rnn_desc *d) {
    bool lstm = c->node->op == AF_OP_LSTM;
    *d = (af_rnn_desc){.n_gates = lstm ? 4 : c->node->op == AF_OP_GRU ? 3 : 1,
                       .n_acts = lstm ? 3 : c->node->op == AF_OP_GRU ? 2 : 1,
                       .seq = -1, .batch = -1, .input = -1};
    int max_in = lstm ? 8 : 6, max_out = lstm ? 3 : 2;
    if (c->n_inputs > max_in || c->n_outputs > max_out)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "has %d inputs and %d outputs; %s takes at most %d and %d",
                           c->n_inputs, c->n_outputs, c->node->op_type, max_in, max_out);
    const af_tensor *x = af_ctx_input(c, AF_RNN_IN_X);
    if (!x || !af_ctx_input(c, AF_RNN_IN_W) || !af_ctx_input(c, AF_RNN_IN_R))
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs inputs X, W and R");
    if (x->dtype != AF_DTYPE_UNDEFINED && !af_conv_is_float(x->dtype))
        return af_ctx_fail(c, AF_ERR_UNSUPPORTED, "X has dtype %s; %s supports float types", af_dtype_name(x->dtype),
                           c->node->op_type);
    af_status st = read_attrs(c, d);
    if (st != AF_OK) return st;
    static const char *const names[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
    static const int ranks[] = {3, 3, 3, 2, 1, 3, 3, 2};
    for (int i = 0; i < max_in; i++)
        if ((st = check_input(c, i, names[i], ranks[i], x->dtype)) != AF_OK) return st;
    /* The state inputs are [dirs, batch, hidden], or [batch, dirs, hidden] batch first. */
    int s_dir = d->batch_first ? 1 : 0, s_batch = d->batch_first ? 0 : 1;
    if ((st = agree(c, AF_RNN_IN_X, "X", d->batch_first ? 1 : 0, &d->seq, "the sequence length")) != AF_OK ||
        (st = agree(c, AF_RNN_IN_X, "X", d->batch_first ? 0 : 1, &d->batch, "the batch size")) != AF_OK ||
        (st = agree(c, AF_RNN_IN_SEQ_LENS, "sequence_lens", 0, &d->batch, "the batch size")) != AF_OK ||
        (st = agree(c, AF_RNN_IN_INITIAL_H, "initial_h", s_batch, &d->batch, "the batch size")) != AF_OK ||
        (st = agree(c, AF_RNN_IN_INITIAL_C, "initial_c", s_batch, &d->batch, "the batch size")) != AF_OK ||
        (st = agree(c, AF_RNN_IN_X, "X", 2, &d->input, "the input size")) != AF_OK ||
        (st = agree(c, AF_RNN_IN_W, "W", 2, &d->input, "the input size")) != AF_OK)
        return st;
    /* hidden_size: the attribute, else what R (then W) implies. */
    const af_tensor *w = af_ctx_input(c, AF_RNN_IN_W), *r = af_ctx_input(c, AF_RNN_IN_R);
    if (d->hidden < 0 && r->rank == 3 && r->dims[2] >= 0) d->hidden = r->dims[2];
    if (d->hidden < 0 && w->rank == 3 && w->dims[1] >= 0 && w->dims[1] % d->n_gates == 0)
        d->hidden = w->dims[1] / d->n_gates;
    int g = d->n_gates;
    if ((st = per_hidden(c, AF_RNN_IN_W, "W", 1, g, d->hidden)) != AF_OK ||
        (st = per_hidden(c, AF_RNN_IN_R, "R", 1, g, d->hidden)) != AF_OK ||
        (st = per_hidden(c, AF_RNN_IN_R, "R", 2, 1, d->hidden)) != AF_OK ||
        (st = per_hidden(c, AF_RNN_IN_B, "B", 1, 2 * g, d->hidden)) != AF_OK ||
        (st = per_hidden(c, AF_RNN_IN_INITIAL_H, "initial_h", 2, 1, d->hidden)) != AF_OK ||
        (lstm && (st = per_hidden(c, AF_RNN_IN_INITIAL_C, "initial_c", 2, 1, d->hidden)) != AF_OK) ||
        (lstm && (st = per_hidden(c, AF_RNN_IN_P, "P", 1, 3, d->hidden)) != AF_OK))
        return st;
    char why[64];
    snprintf(why, sizeof why, "the directions of direction '%s'",
             d->n_dirs == 2 ? "bidirectional" : d->reverse ? "reverse" : "forward");
    for (int i = AF_RNN_IN_W; i < max_in; i++) {
        if (i == AF_RNN_IN_SEQ_LENS) continue;
        int at = i == AF_RNN_IN_INITIAL_H || i == AF_RNN_IN_INITIAL_C ? s_dir : 0;
        if ((st = want_dim(c, i, names[i], at, d->n_dirs, why)) != AF_OK) return st;
    }
    return AF_OK;
}

/* Y [seq, dirs, batch, hidden] (batch first: [batch, seq, dirs, hidden]); Y_h and Y_c [dirs,
 * batch, hidden] (batch first: [batch, dirs, hidden]). */
static af_status infer(af_op_ctx *c) {
    af_rnn_desc d;
    af_status st = af_rnn_desc_init(c, &d);
    if (st != AF_OK) return st;
    af_dtype dt = af_ctx_input(c, AF_RNN_IN_X)->dtype;
    af_tensor *y = af_ctx_output(c, AF_RNN_OUT_Y);
    if (y) {
        *y = d.batch_first ? (af_tensor){.dtype = dt, .rank = 4, .dims = {d.batch, d.seq, d.n_dirs, d.hidden}}
                           : (af_tensor){.dtype = dt, .rank = 4, .dims = {d.seq, d.n_dirs, d.batch, d.hidden}};
    }
    for (int i = AF_RNN_OUT_Y_H; i < c->n_outputs; i++) {
        af_tensor *s = af_ctx_output(c, i);
        if (!s) continue;
        *s = d.batch_first ? (af_tensor){.dtype = dt, .rank = 3, .dims = {d.batch, d.n_dirs, d.hidden}}
                           : (af_tensor){.dtype = dt, .rank = 3, .dims = {d.n_dirs, d.batch, d.hidden}};
    }
    return AF_OK;
}

af_status af_infer_RNN(af_op_ctx *c) { return infer(c); }
af_status af_infer_GRU(af_op_ctx *c) { return infer(c); }
af_status af_infer_LSTM(af_op_ctx *c) { return infer(c); }
