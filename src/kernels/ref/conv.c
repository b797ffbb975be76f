/* Reference Conv and ConvTranspose: direct loops that accumulate one output plane at a time in
 * double, row by row so the innermost loop walks contiguous memory; plus the family's helpers. */
#include "kernels/ref/conv.h"

#include <string.h>

#include "util/alloc.h"

double *af_convref_alloc(int64_t n) {
    size_t bytes;
    if (n < 0 || !af_mul_size((size_t)(n > 0 ? n : 1), sizeof(double), &bytes)) return NULL;
    return af_malloc(bytes);
}

double *af_convref_load(const af_tensor *t) {
    int64_t n = af_tensor_numel(t);
    double *v = af_convref_alloc(n);
    if (!v) return NULL;
    if (t->dtype == AF_DTYPE_FLOAT) {
        const float *p = t->data;
        for (int64_t i = 0; i < n; i++) v[i] = p[i];
    } else {
        for (int64_t i = 0; i < n; i++) v[i] = af_tensor_get_f64(t, i);
    }
    return v;
}

void af_convref_store(af_tensor *t, int64_t off, const double *v, int64_t n) {
    if (t->dtype == AF_DTYPE_FLOAT) {
        float *p = (float *)t->data + off;
        for (int64_t i = 0; i < n; i++) p[i] = (float)v[i];
    } else {
        for (int64_t i = 0; i < n; i++) af_tensor_set_f64(t, off + i, v[i]);
    }
}

af_status af_convref_recheck(af_op_ctx *c, af_op_fn infer) {
    enum { MAX_OUT = 8 };
    af_tensor shapes[MAX_OUT];
    af_tensor *outs[MAX_OUT];
    if (c->n_outputs > MAX_OUT)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "has %d outputs", c->n_outputs);
    memset(shapes, 0, sizeof shapes);
    for (int i = 0; i < c->n_outputs; i++) outs[i] = c->outputs[i] ? &shapes[i] : NULL;
    af_op_ctx check = *c;
    check.outputs = outs;
    af_status st = infer(&check);
    if (st != AF_OK) return st;
    for (int i = 0; i < c->n_outputs; i++) {
        const af_tensor *o = c->outputs[i];
        if (o && (o->dtype != shapes[i].dtype || !af_tensor_same_shape(o, &shapes[i])))
            return af_ctx_fail(c, AF_ERR_RUNTIME,
                               "output %d was not given the shape its inputs imply", i);
    }
    return AF_OK;
}

void af_convref_win_init(af_convref_win *w, const af_conv_geom *g, const int64_t *in,
                         const int64_t *out) {
    int lead = 3 - g->n_sp;
    for (int i = 0; i < 3; i++) {
        int j = i - lead;
        bool real = j >= 0;
        w->in[i] = real ? in[j] : 1;
        w->out[i] = real ? out[j] : 1;
        w->k[i] = real ? g->kernel[j] : 1;
        w->s[i] = real ? g->stride[j] : 1;
        w->d[i] = real ? g->dilation[j] : 1;
        w->pb[i] = real ? g->pad_begin[j] : 0;
        w->pe[i] = real ? g->pad_end[j] : 0;
    }
}

/* One Conv/ConvTranspose evaluation: the inputs as doubles and the geometry. */
typedef struct conv_job {
    double *x, *w, *b, *acc; /* b is NULL without bias; acc holds one output plane */
    int64_t n, c, m, group;  /* batch, input channels, output channels, groups */
    af_convref_win win;
} conv_job;

static void job_free(conv_job *j) {
    af_free(j->x);
    af_free(j->w);
    af_free(j->b);
    af_free(j->acc);
}

/* Re-runs shape inference on the actual inputs (so every check applies) and loads the data. */
static af_status job_init(af_op_ctx *c, bool transpose, conv_job *j) {
    memset(j, 0, sizeof *j);
    af_status st = af_convref_recheck(c, transpose ? af_infer_CONV_TRANSPOSE : af_infer_CONV);
    if (st != AF_OK) return st;
    af_tensor *y = af_ctx_output(c, 0);
    if (!y) return AF_OK;
    const af_tensor *x = af_ctx_input(c, 0), *w = af_ctx_input(c, 1), *b = af_ctx_input(c, 2);
    af_conv_geom g;
    int n_sp = x->rank - 2;
    if ((st = af_conv_geom_init(c, n_sp, w->dims + 2, &g)) != AF_OK) return st;
    int64_t out[AF_CONV_MAX_SP];
    st = transpose ? af_conv_geom_transpose(c, &g, x->dims + 2, out)
                   : af_conv_geom_forward(c, &g, x->dims + 2, out);
    if (st != AF_OK) return st;
    af_convref_win_init(&j->win, &g, x->dims + 2, out);
    j->n = x->dims[0];
    j->c = x->dims[1];
    j->m = y->dims[1];
    j->group = af_node_attr_int(c->node, "group", 1);
    j->x = af_convref_load(x);
    j->w = af_convref_load(w);
    j->b = b ? af_convref_load(b) : NULL;
    j->acc = af_convref_alloc(j->win.out[0] * j->win.out[1] * j->win.out[2]);
    if (!j->x || !j->w || (b && !j->b) || !j->acc) {
        job_free(j);
        return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory");
    }
    return AF_OK;
}

/* acc[o] += wv * x[i] along one row, for the output (Conv) or input (ConvTranspose) positions
 * t in [lo, hi); the other side's position is t * s + base. */
static void row_forward(double *acc, const double *xr, double wv, int64_t lo, int64_t hi, int64_t s,
                        int64_t base) {
    if (s == 1) {
        for (int64_t t = lo; t < hi; t++) acc[t] += wv * xr[t + base];
    } else {
        for (int64_t t = lo; t < hi; t++) acc[t] += wv * xr[t * s + base];
    }
}

static void row_transpose(double *acc, const double *xr, double wv, int64_t lo, int64_t hi,
                          int64_t s, int64_t base) {
    for (int64_t t = lo; t < hi; t++) acc[t * s + base] += wv * xr[t];
}

/* Accumulates one (input channel plane, kernel) pair into j->acc. */
static void plane(const conv_job *j, bool transpose, const double *xp, const double *wp) {
    const af_convref_win *w = &j->win;
    /* Conv walks output positions and reads inputs; ConvTranspose the other way round. */
    const int64_t *src = transpose ? w->in : w->out, *dst = transpose ? w->out : w->in;
    for (int64_t kd = 0; kd < w->k[0]; kd++) {
        for (int64_t kh = 0; kh < w->k[1]; kh++) {
            for (int64_t kw = 0; kw < w->k[2]; kw++) {
                double wv = wp[(kd * w->k[1] + kh) * w->k[2] + kw];
                int64_t base[3] = {kd * w->d[0] - w->pb[0], kh * w->d[1] - w->pb[1],
                                   kw * w->d[2] - w->pb[2]};
                int64_t lo[3], hi[3];
                for (int i = 0; i < 3; i++)
                    af_convref_range(base[i], w->s[i], dst[i], src[i], &lo[i], &hi[i]);
                for (int64_t a = lo[0]; a < hi[0]; a++) {
                    int64_t a2 = a * w->s[0] + base[0];
                    for (int64_t b = lo[1]; b < hi[1]; b++) {
                        int64_t b2 = b * w->s[1] + base[1];
                        if (transpose) {
                            const double *xr = xp + (a * w->in[1] + b) * w->in[2];
                            double *ar = j->acc + (a2 * w->out[1] + b2) * w->out[2];
                            row_transpose(ar, xr, wv, lo[2], hi[2], w->s[2], base[2]);
                        } else {
                            const double *xr = xp + (a2 * w->in[1] + b2) * w->in[2];
                            double *ar = j->acc + (a * w->out[1] + b) * w->out[2];
                            row_forward(ar, xr, wv, lo[2], hi[2], w->s[2], base[2]);
                        }
                    }
                }
            }
        }
    }
}

static af_status run(af_op_ctx *c, bool transpose) {
    conv_job j;
    af_status st = job_init(c, transpose, &j);
    af_tensor *y = af_ctx_output(c, 0);
    if (st != AF_OK || !y) return st;
    const af_convref_win *w = &j.win;
    int64_t xs = w->in[0] * w->in[1] * w->in[2], ys = w->out[0] * w->out[1] * w->out[2];
    int64_t ks = w->k[0] * w->k[1] * w->k[2];
    int64_t cg = j.c / j.group, mg = j.m / j.group;
    for (int64_t n = 0; n < j.n; n++) {
        for (int64_t oc = 0; oc < j.m; oc++) {
            int64_t g = oc / mg, ocg = oc % mg;
            double bias = j.b ? j.b[oc] : 0.0;
            for (int64_t i = 0; i < ys; i++) j.acc[i] = bias;
            for (int64_t icg = 0; icg < cg; icg++) {
                int64_t ic = g * cg + icg;
                const double *xp = j.x + (n * j.c + ic) * xs;
                /* Conv's W is (M, C/group, k); ConvTranspose's is (C, M/group, k). */
                const double *wp =
                    transpose ? j.w + (ic * mg + ocg) * ks : j.w + (oc * cg + icg) * ks;
                plane(&j, transpose, xp, wp);
            }
            af_convref_store(y, (n * j.m + oc) * ys, j.acc, ys);
        }
    }
    job_free(&j);
    return AF_OK;
}

af_status af_ref_CONV(af_op_ctx *ctx) { return run(ctx, false); }

af_status af_ref_CONV_TRANSPOSE(af_op_ctx *ctx) { return run(ctx, true); }
