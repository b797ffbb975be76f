/* Shape functions of the normalizations: BatchNormalization (inference and training forms),
 * InstanceNormalization, LayerNormalization, LRN and MeanVarianceNormalization. */
#include "ir/shape/norm.h"

#include "ir/shape/conv_geom.h"

static af_status need_float(af_op_ctx *c, const af_tensor *t, const char *name) {
    if (af_conv_is_float(t->dtype)) return AF_OK;
    return af_ctx_fail(c, AF_ERR_UNSUPPORTED, "%s has dtype %s; %s supports float types", name,
                       af_dtype_name(t->dtype), c->node->op_type);
}

/* Y has X's dtype and shape. */
static af_status same_as_x(af_op_ctx *c, int min_rank) {
    const af_tensor *x = af_ctx_input(c, 0);
    if (!x) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs input X");
    af_status st = need_float(c, x, "X");
    if (st != AF_OK) return st;
    if (x->rank >= 0 && x->rank < min_rank)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "X has %d dims; at least %d are needed",
                           x->rank, min_rank);
    af_tensor *y = af_ctx_output(c, 0);
    if (y) af_shape_copy(y, x);
    return AF_OK;
}

/* A per-channel parameter must be float and hold `want` values when both counts are known. */
static af_status check_param(af_op_ctx *c, int i, const char *name, int64_t want) {
    const af_tensor *p = af_ctx_input(c, i);
    if (!p) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs input %s", name);
    af_status st = need_float(c, p, name);
    if (st != AF_OK) return st;
    int64_t n = af_tensor_numel(p);
    if (n >= 0 && want >= 0 && n != want)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "%s has %lld values, expected %lld", name,
                           (long long)n, (long long)want);
    return AF_OK;
}

bool af_norm_bn_training(const af_op_ctx *c) {
    if (c->opset >= 14) return af_node_attr_int(c->node, "training_mode", 0) != 0;
    for (int i = 1; i < c->n_outputs; i++)
        if (c->outputs[i]) return true;
    return false;
}

int64_t af_norm_bn_channels(const af_op_ctx *c, const af_tensor *x) {
    if (x->rank < 0) return -1;
    if (x->rank < 2) return 1;
    /* spatial = 0 (before opset 9) keeps statistics per element of (C, D1..Dn). */
    bool spatial = c->opset >= 9 || af_node_attr_int(c->node, "spatial", 1) != 0;
    return spatial ? x->dims[1] : af_dims_numel(x->rank - 1, x->dims + 1);
}

af_status af_infer_BATCH_NORMALIZATION(af_op_ctx *c) {
    af_status st = same_as_x(c, 1);
    if (st != AF_OK) return st;
    const af_tensor *x = af_ctx_input(c, 0);
    int64_t ch = af_norm_bn_channels(c, x);
    static const char *const names[] = {"scale", "B", "input_mean", "input_var"};
    for (int i = 0; i < 4; i++)
        if ((st = check_param(c, i + 1, names[i], ch)) != AF_OK) return st;
    const af_tensor *mean = af_ctx_input(c, 3);
    bool training = af_norm_bn_training(c);
    int max_out = c->opset >= 14 ? 3 : 5;
    for (int i = 1; i < c->n_outputs; i++) {
        af_tensor *o = af_ctx_output(c, i);
        if (!o) continue;
        if (i >= max_out)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "has %d outputs; opset %d allows %d",
                               c->n_outputs, c->opset, max_out);
        if (!training)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL,
                               "output %d is only produced with training_mode = 1", i);
        af_shape_copy(o, mean);
        /* Saved statistics (opsets before 14) have X's type, running ones the mean's. */
        if (i >= 3) o->dtype = x->dtype;
    }
    return AF_OK;
}

af_status af_infer_INSTANCE_NORMALIZATION(af_op_ctx *c) {
    af_status st = same_as_x(c, 2);
    if (st != AF_OK) return st;
    const af_tensor *x = af_ctx_input(c, 0);
    int64_t ch = x->rank >= 2 ? x->dims[1] : -1;
    if ((st = check_param(c, 1, "scale", ch)) != AF_OK) return st;
    return check_param(c, 2, "B", ch);
}

af_status af_norm_ln_axis(const af_op_ctx *c, int rank, int *axis) {
    return af_ctx_axis(c, af_node_attr_int(c->node, "axis", -1), rank, axis);
}

af_dtype af_norm_ln_stash(const af_op_ctx *c) {
    return (af_dtype)af_node_attr_int(c->node, "stash_type", AF_DTYPE_FLOAT);
}

af_status af_norm_ln_param_map(const af_op_ctx *c, const af_tensor *x, int axis, const af_tensor *p,
                               const char *name, int64_t *map) {
    int nr = x->rank - axis;
    if (p->rank < 0) return AF_OK;
    for (int i = 0; i < p->rank; i++) {
        int xi = x->rank - p->rank + i; /* right-aligned against X */
        int64_t pd = p->dims[i];
        bool ok = xi >= axis ? pd < 0 || x->dims[xi] < 0 || pd == 1 || pd == x->dims[xi] : pd == 1;
        if (!ok)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL,
                               "%s does not broadcast to the normalized dims of X", name);
    }
    if (!map) return AF_OK;
    /* map[j] = p's element for position j of the normalized block. */
    int64_t n = af_dims_numel(nr, x->dims + axis);
    int64_t idx[AF_MAX_RANK] = {0};
    for (int64_t j = 0; j < n; j++) {
        int64_t at = 0;
        for (int i = 0; i < p->rank; i++) {
            int xi = x->rank - p->rank + i;
            int64_t v = xi >= axis && p->dims[i] != 1 ? idx[xi - axis] : 0;
            at = at * p->dims[i] + v;
        }
        map[j] = at;
        for (int d = nr - 1; d >= 0; d--) {
            if (++idx[d] < x->dims[axis + d]) break;
            idx[d] = 0;
        }
    }
    return AF_OK;
}

af_status af_infer_LAYER_NORMALIZATION(af_op_ctx *c) {
    af_status st = same_as_x(c, 1);
    if (st != AF_OK) return st;
    const af_tensor *x = af_ctx_input(c, 0), *scale = af_ctx_input(c, 1), *b = af_ctx_input(c, 2);
    if (!scale) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs input Scale");
    if ((st = need_float(c, scale, "Scale")) != AF_OK) return st;
    if (b && (st = need_float(c, b, "B")) != AF_OK) return st;
    af_dtype stash = af_norm_ln_stash(c);
    if (!af_conv_is_float(stash))
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "stash_type %d is not a float type",
                           (int)stash);
    int axis = 0;
    if (x->rank >= 0) {
        if ((st = af_norm_ln_axis(c, x->rank, &axis)) != AF_OK) return st;
        if ((st = af_norm_ln_param_map(c, x, axis, scale, "Scale", NULL)) != AF_OK) return st;
        if (b && (st = af_norm_ln_param_map(c, x, axis, b, "B", NULL)) != AF_OK) return st;
    }
    for (int i = 1; i < 3; i++) {
        af_tensor *o = af_ctx_output(c, i);
        if (!o) continue;
        af_shape_copy(o, x);
        o->dtype = stash;
        for (int d = axis; d < x->rank; d++) o->dims[d] = 1;
    }
    return AF_OK;
}

af_status af_infer_LRN(af_op_ctx *c) {
    if (af_node_attr_int(c->node, "size", 0) < 1)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs the size attribute, at least 1");
    return same_as_x(c, 2);
}

af_status af_norm_mvn_axes(const af_op_ctx *c, int rank, bool *reduced) {
    static const int64_t def[] = {0, 2, 3};
    const int64_t *axes = def;
    int n = af_node_attr_ints(c->node, "axes", &axes);
    if (n < 0) {
        axes = def;
        n = 3;
    }
    for (int d = 0; d < rank; d++) reduced[d] = false;
    for (int i = 0; i < n; i++) {
        int a;
        af_status st = af_ctx_axis(c, axes[i], rank, &a);
        if (st != AF_OK) return st;
        reduced[a] = true;
    }
    return AF_OK;
}

af_status af_infer_MEAN_VARIANCE_NORMALIZATION(af_op_ctx *c) {
    af_status st = same_as_x(c, 0);
    if (st != AF_OK) return st;
    const af_tensor *x = af_ctx_input(c, 0);
    bool reduced[AF_MAX_RANK];
    return x->rank >= 0 ? af_norm_mvn_axes(c, x->rank, reduced) : AF_OK;
}
