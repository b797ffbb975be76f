/* Reference normalization kernels: BatchNormalization (inference and training), Instance-,
 * LayerNormalization, LRN and MeanVarianceNormalization, with statistics in double. */
#include <math.h>

#include "ir/shape/norm.h"
#include "kernels/ref/conv.h"
#include "util/alloc.h"

enum { BN_MAX_IN = 5 };

static af_status oom(af_op_ctx *c) { return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory"); }

/* Loads inputs 0..n-1 (NULL for absent ones); on failure frees what it loaded. */
static af_status load_inputs(af_op_ctx *c, int n, double **v) {
    for (int i = 0; i < n; i++) {
        const af_tensor *t = af_ctx_input(c, i);
        v[i] = t ? af_convref_load(t) : NULL;
        if (t && !v[i]) {
            for (int k = 0; k < i; k++) af_free(v[k]);
            return oom(c);
        }
    }
    return AF_OK;
}

static void free_all(int n, double **v) {
    for (int i = 0; i < n; i++) af_free(v[i]);
}

/* Stores n values into output i when the node asks for it. */
static void store_opt(af_op_ctx *c, int i, const double *v, int64_t n) {
    af_tensor *o = af_ctx_output(c, i);
    if (o) af_convref_store(o, 0, v, n);
}

af_status af_ref_BATCH_NORMALIZATION(af_op_ctx *c) {
    af_status st = af_convref_recheck(c, af_infer_BATCH_NORMALIZATION);
    if (st != AF_OK) return st;
    const af_tensor *x = af_ctx_input(c, 0);
    af_tensor *y = af_ctx_output(c, 0);
    int64_t ch = af_norm_bn_channels(c, x), n = af_tensor_numel(x);
    bool spatial = c->opset >= 9 || af_node_attr_int(c->node, "spatial", 1) != 0;
    int64_t inner = x->rank > 2 && spatial ? af_dims_numel(x->rank - 2, x->dims + 2) : 1;
    int64_t outer = ch * inner > 0 ? n / (ch * inner) : 0;
    double eps = af_node_attr_float(c->node, "epsilon", 1e-5f);
    double momentum = af_node_attr_float(c->node, "momentum", 0.9f);
    bool training = af_norm_bn_training(c);
    double *in[BN_MAX_IN];
    if ((st = load_inputs(c, BN_MAX_IN, in)) != AF_OK) return st;
    double *xv = in[0], *scale = in[1], *bias = in[2], *mean = in[3], *var = in[4];
    /* stats: batch mean, batch variance, running mean, running variance. */
    double *stats = af_convref_alloc(4 * ch), *yv = af_convref_alloc(n);
    if (!stats || !yv) {
        free_all(BN_MAX_IN, in);
        af_free(stats);
        af_free(yv);
        return oom(c);
    }
    double *bm = stats, *bv = stats + ch, *rm = stats + 2 * ch, *rv = stats + 3 * ch;
    for (int64_t k = 0; k < ch; k++) {
        if (training) {
            double sum = 0, sq = 0, cnt = (double)(outer * inner);
            for (int64_t o = 0; o < outer; o++)
                for (int64_t i = 0; i < inner; i++) sum += xv[(o * ch + k) * inner + i];
            bm[k] = cnt > 0 ? sum / cnt : 0;
            for (int64_t o = 0; o < outer; o++) {
                for (int64_t i = 0; i < inner; i++) {
                    double d = xv[(o * ch + k) * inner + i] - bm[k];
                    sq += d * d;
                }
            }
            bv[k] = cnt > 0 ? sq / cnt : 0;
            rm[k] = mean[k] * momentum + bm[k] * (1 - momentum);
            rv[k] = var[k] * momentum + bv[k] * (1 - momentum);
        } else {
            bm[k] = mean[k];
            bv[k] = var[k];
        }
        double mul = scale[k] / sqrt(bv[k] + eps), add = bias[k] - bm[k] * mul;
        for (int64_t o = 0; o < outer; o++) {
            int64_t base = (o * ch + k) * inner;
            for (int64_t i = 0; i < inner; i++) yv[base + i] = xv[base + i] * mul + add;
        }
    }
    if (y) af_convref_store(y, 0, yv, n);
    if (training) {
        store_opt(c, 1, rm, ch);
        store_opt(c, 2, rv, ch);
        store_opt(c, 3, bm, ch); /* saved statistics, before opset 14 */
        store_opt(c, 4, bv, ch);
    }
    free_all(BN_MAX_IN, in);
    af_free(stats);
    af_free(yv);
    return AF_OK;
}

/* Mean and population variance of n values spaced `stride` apart. */
static void moments(const double *v, int64_t n, int64_t stride, double *mean, double *var) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; i++) sum += v[i * stride];
    *mean = n > 0 ? sum / (double)n : 0;
    for (int64_t i = 0; i < n; i++) {
        double d = v[i * stride] - *mean;
        sq += d * d;
    }
    *var = n > 0 ? sq / (double)n : 0;
}

af_status af_ref_INSTANCE_NORMALIZATION(af_op_ctx *c) {
    af_status st = af_convref_recheck(c, af_infer_INSTANCE_NORMALIZATION);
    if (st != AF_OK) return st;
    const af_tensor *x = af_ctx_input(c, 0);
    af_tensor *y = af_ctx_output(c, 0);
    if (!y) return AF_OK;
    int64_t n = af_tensor_numel(x), ch = x->dims[1], planes = x->dims[0] * ch;
    int64_t size = af_dims_numel(x->rank - 2, x->dims + 2);
    double eps = af_node_attr_float(c->node, "epsilon", 1e-5f);
    double *in[3];
    if ((st = load_inputs(c, 3, in)) != AF_OK) return st;
    double *yv = af_convref_alloc(n);
    if (!yv) {
        free_all(3, in);
        return oom(c);
    }
    for (int64_t p = 0; p < planes; p++) {
        const double *xp = in[0] + p * size;
        double mean, var;
        moments(xp, size, 1, &mean, &var);
        double mul = in[1][p % ch] / sqrt(var + eps), add = in[2][p % ch] - mean * mul;
        for (int64_t i = 0; i < size; i++) yv[p * size + i] = xp[i] * mul + add;
    }
    af_convref_store(y, 0, yv, n);
    free_all(3, in);
    af_free(yv);
    return AF_OK;
}

af_status af_ref_LAYER_NORMALIZATION(af_op_ctx *c) {
    af_status st = af_convref_recheck(c, af_infer_LAYER_NORMALIZATION);
    if (st != AF_OK) return st;
    const af_tensor *x = af_ctx_input(c, 0), *scale = af_ctx_input(c, 1), *b = af_ctx_input(c, 2);
    af_tensor *y = af_ctx_output(c, 0);
    int axis;
    if ((st = af_norm_ln_axis(c, x->rank, &axis)) != AF_OK) return st;
    int64_t outer = af_dims_numel(axis, x->dims),
            inner = af_dims_numel(x->rank - axis, x->dims + axis);
    double eps = af_node_attr_float(c->node, "epsilon", 1e-5f);
    double *in[3], *yv = NULL, *stat = NULL;
    int64_t *map = NULL;
    size_t map_bytes;
    if ((st = load_inputs(c, 3, in)) != AF_OK) return st;
    yv = af_convref_alloc(outer * inner);
    stat = af_convref_alloc(2 * outer); /* mean, then 1 / stddev */
    if (af_mul_size((size_t)(inner > 0 ? inner : 1), 2 * sizeof *map, &map_bytes))
        map = af_malloc(map_bytes);
    if (!yv || !stat || !map) {
        st = oom(c);
        goto done;
    }
    int64_t *smap = map, *bmap = map + inner;
    if ((st = af_norm_ln_param_map(c, x, axis, scale, "Scale", smap)) != AF_OK) goto done;
    if (b && (st = af_norm_ln_param_map(c, x, axis, b, "B", bmap)) != AF_OK) goto done;
    for (int64_t o = 0; o < outer; o++) {
        const double *xp = in[0] + o * inner;
        double mean, var;
        moments(xp, inner, 1, &mean, &var);
        double inv = 1 / sqrt(var + eps);
        stat[o] = mean;
        stat[outer + o] = inv;
        for (int64_t j = 0; j < inner; j++)
            yv[o * inner + j] = (xp[j] - mean) * inv * in[1][smap[j]] + (b ? in[2][bmap[j]] : 0);
    }
    if (y) af_convref_store(y, 0, yv, outer * inner);
    store_opt(c, 1, stat, outer);
    store_opt(c, 2, stat + outer, outer);
done:
    free_all(3, in);
    af_free(yv);
    af_free(stat);
    af_free(map);
    return st;
}

af_status af_ref_LRN(af_op_ctx *c) {
    af_status st = af_convref_recheck(c, af_infer_LRN);
    if (st != AF_OK) return st;
    const af_tensor *x = af_ctx_input(c, 0);
    af_tensor *y = af_ctx_output(c, 0);
    if (!y) return AF_OK;
    int64_t n = af_tensor_numel(x), ch = x->dims[1];
    int64_t size = af_dims_numel(x->rank - 2, x->dims + 2);
    int64_t win = af_node_attr_int(c->node, "size", 1);
    double alpha = af_node_attr_float(c->node, "alpha", 1e-4f);
    double beta = af_node_attr_float(c->node, "beta", 0.75f);
    double bias = af_node_attr_float(c->node, "bias", 1.0f);
    /* Channels c - floor((size-1)/2) .. c + ceil((size-1)/2), clipped to the tensor. */
    int64_t before = (win - 1) / 2, after = win - 1 - before;
    double *xv = af_convref_load(x), *yv = af_convref_alloc(n);
    if (!xv || !yv) {
        af_free(xv);
        af_free(yv);
        return oom(c);
    }
    for (int64_t b = 0; b < x->dims[0]; b++) {
        for (int64_t k = 0; k < ch; k++) {
            int64_t lo = k - before > 0 ? k - before : 0, hi = k + after < ch ? k + after : ch - 1;
            for (int64_t i = 0; i < size; i++) {
                double sq = 0;
                for (int64_t j = lo; j <= hi; j++) {
                    double v = xv[(b * ch + j) * size + i];
                    sq += v * v;
                }
                int64_t at = (b * ch + k) * size + i;
                yv[at] = xv[at] / pow(bias + alpha / (double)win * sq, beta);
            }
        }
    }
    af_convref_store(y, 0, yv, n);
    af_free(xv);
    af_free(yv);
    return AF_OK;
}

af_status af_ref_MEAN_VARIANCE_NORMALIZATION(af_op_ctx *c) {
    af_status st = af_convref_recheck(c, af_infer_MEAN_VARIANCE_NORMALIZATION);
    if (st != AF_OK) return st;
    const af_tensor *x = af_ctx_input(c, 0);
    af_tensor *y = af_ctx_output(c, 0);
    if (!y) return AF_OK;
    bool reduced[AF_MAX_RANK];
    if ((st = af_norm_mvn_axes(c, x->rank, reduced)) != AF_OK) return st;
    /* Each element belongs to the group given by its coordinates on the kept dims. */
    int64_t groups = 1, kstride[AF_MAX_RANK];
    for (int d = x->rank - 1; d >= 0; d--) {
        kstride[d] = reduced[d] ? 0 : groups;
        if (!reduced[d]) groups *= x->dims[d];
    }
    int64_t n = af_tensor_numel(x), per = groups > 0 ? n / groups : 0;
    double *xv = af_convref_load(x), *yv = af_convref_alloc(n),
           *stat = af_convref_alloc(2 * groups);
    int64_t *gid = NULL;
    size_t gid_bytes;
    if (af_mul_size((size_t)(n > 0 ? n : 1), sizeof *gid, &gid_bytes)) gid = af_malloc(gid_bytes);
    if (!xv || !yv || !stat || !gid) {
        st = oom(c);
        goto done;
    }
    double *mean = stat, *sd = stat + groups;
    int64_t idx[AF_MAX_RANK] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t g = 0;
        for (int d = 0; d < x->rank; d++) g += idx[d] * kstride[d];
        gid[i] = g;
        for (int d = x->rank - 1; d >= 0; d--) {
            if (++idx[d] < x->dims[d]) break;
            idx[d] = 0;
        }
    }
    for (int64_t g = 0; g < groups; g++) mean[g] = sd[g] = 0;
    for (int64_t i = 0; i < n; i++) mean[gid[i]] += xv[i];
    for (int64_t g = 0; g < groups; g++) mean[g] = per > 0 ? mean[g] / (double)per : 0;
    for (int64_t i = 0; i < n; i++) {
        double d = xv[i] - mean[gid[i]];
        sd[gid[i]] += d * d;
    }
    for (int64_t g = 0; g < groups; g++) sd[g] = per > 0 ? sqrt(sd[g] / (double)per) : 0;
    /* The spec's function adds 1e-9 to the standard deviation. */
    for (int64_t i = 0; i < n; i++) yv[i] = (xv[i] - mean[gid[i]]) / (sd[gid[i]] + 1e-9);
    af_convref_store(y, 0, yv, n);
done:
    af_free(xv);
    af_free(yv);
    af_free(stat);
    af_free(gid);
    return st;
}
