/* Reference MaxPool (with its optional Indices), AveragePool, GlobalMaxPool and GlobalAveragePool,
 * one window at a time in double. */
#include <math.h>

#include "kernels/ref/conv.h"
#include "util/alloc.h"

/* Re-runs shape inference on the actual inputs and resolves the window geometry. */
static af_status window_init(af_op_ctx *c, bool max, af_convref_win *w) {
    af_status st = af_convref_recheck(c, max ? af_infer_MAX_POOL : af_infer_AVERAGE_POOL);
    if (st != AF_OK) return st;
    const af_tensor *x = af_ctx_input(c, 0);
    af_conv_geom g;
    if ((st = af_conv_geom_init(c, x->rank - 2, NULL, &g)) != AF_OK) return st;
    int64_t out[AF_CONV_MAX_SP];
    if ((st = af_conv_geom_forward(c, &g, x->dims + 2, out)) != AF_OK) return st;
    af_convref_win_init(w, &g, x->dims + 2, out);
    return AF_OK;
}

/* The kernel taps of output position o along dim i that land inside the input: [*lo, *hi). */
static void taps(const af_convref_win *w, int i, int64_t o, int64_t *lo, int64_t *hi) {
    af_convref_range(o * w->s[i] - w->pb[i], w->d[i], w->in[i], w->k[i], lo, hi);
}

static af_status run_window(af_op_ctx *c, bool max) {
    af_convref_win w;
    af_status st = window_init(c, max, &w);
    if (st != AF_OK) return st;
    const af_tensor *x = af_ctx_input(c, 0);
    af_tensor *y = af_ctx_output(c, 0), *idx = max ? af_ctx_output(c, 1) : NULL;
    if (!y) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs output Y");
    bool col_major = af_node_attr_int(c->node, "storage_order", 0) == 1;
    bool include_pad = af_node_attr_int(c->node, "count_include_pad", 0) == 1;
    int64_t planes = x->dims[0] * x->dims[1];
    int64_t xs = w.in[0] * w.in[1] * w.in[2], ys = w.out[0] * w.out[1] * w.out[2];
    double *xv = af_convref_load(x), *yv = af_convref_alloc(planes * ys);
    if (!xv || !yv) {
        af_free(xv);
        af_free(yv);
        return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory");
    }
    int64_t *iv = idx ? idx->data : NULL;
    for (int64_t p = 0; p < planes; p++) {
        const double *xp = xv + p * xs;
        for (int64_t od = 0; od < w.out[0]; od++) {
            for (int64_t oh = 0; oh < w.out[1]; oh++) {
                for (int64_t ow = 0; ow < w.out[2]; ow++) {
                    int64_t o[3] = {od, oh, ow}, lo[3], hi[3], pos[3];
                    for (int i = 0; i < 3; i++) taps(&w, i, o[i], &lo[i], &hi[i]);
                    double best = -INFINITY, sum = 0;
                    int64_t best_at = -1, count = 0;
                    for (int64_t a = lo[0]; a < hi[0]; a++) {
                        pos[0] = o[0] * w.s[0] - w.pb[0] + a * w.d[0];
                        for (int64_t b = lo[1]; b < hi[1]; b++) {
                            pos[1] = o[1] * w.s[1] - w.pb[1] + b * w.d[1];
                            for (int64_t k = lo[2]; k < hi[2]; k++) {
                                pos[2] = o[2] * w.s[2] - w.pb[2] + k * w.d[2];
                                int64_t at = (pos[0] * w.in[1] + pos[1]) * w.in[2] + pos[2];
                                double v = xp[at];
                                if (best_at < 0 || v > best) {
                                    best = v;
                                    best_at = at;
                                    if (col_major)
                                        best_at = pos[0] + (pos[1] + pos[2] * w.in[1]) * w.in[0];
                                }
                                sum += v;
                                count++;
                            }
                        }
                    }
                    int64_t at = p * ys + (od * w.out[1] + oh) * w.out[2] + ow;
                    if (max) {
                        yv[at] = best;
                        if (iv) iv[at] = best_at < 0 ? -1 : p * xs + best_at;
                        continue;
                    }
                    if (include_pad) {
                        /* Taps inside the padded extent count, even where they read padding. */
                        count = 1;
                        for (int i = 0; i < 3; i++) {
                            int64_t l, h;
                            af_convref_range(o[i] * w.s[i], w.d[i], w.in[i] + w.pb[i] + w.pe[i],
                                             w.k[i], &l, &h);
                            count *= h > l ? h - l : 0;
                        }
                    }
                    yv[at] = count > 0 ? sum / (double)count : NAN;
                }
            }
        }
    }
    af_convref_store(y, 0, yv, planes * ys);
    af_free(xv);
    af_free(yv);
    return AF_OK;
}

static af_status run_global(af_op_ctx *c, bool max) {
    af_status st =
        af_convref_recheck(c, max ? af_infer_GLOBAL_MAX_POOL : af_infer_GLOBAL_AVERAGE_POOL);
    if (st != AF_OK) return st;
    const af_tensor *x = af_ctx_input(c, 0);
    af_tensor *y = af_ctx_output(c, 0);
    if (!y) return AF_OK;
    int64_t planes = x->dims[0] * x->dims[1], n = af_tensor_numel(x);
    int64_t size = planes > 0 ? n / planes : 0;
    double *xv = af_convref_load(x), *yv = af_convref_alloc(planes);
    if (!xv || !yv) {
        af_free(xv);
        af_free(yv);
        return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (int64_t p = 0; p < planes; p++) {
        const double *xp = xv + p * size;
        double acc = max ? -INFINITY : 0;
        for (int64_t i = 0; i < size; i++) {
            if (max)
                acc = i == 0 || xp[i] > acc ? xp[i] : acc;
            else
                acc += xp[i];
        }
        yv[p] = max ? acc : size > 0 ? acc / (double)size : NAN;
    }
    af_convref_store(y, 0, yv, planes);
    af_free(xv);
    af_free(yv);
    return AF_OK;
}

af_status af_ref_MAX_POOL(af_op_ctx *ctx) { return run_window(ctx, true); }

af_status af_ref_AVERAGE_POOL(af_op_ctx *ctx) { return run_window(ctx, false); }

af_status af_ref_GLOBAL_MAX_POOL(af_op_ctx *ctx) { return run_global(ctx, true); }

af_status af_ref_GLOBAL_AVERAGE_POOL(af_op_ctx *ctx) { return run_global(ctx, false); }
