/* Reference Conv, ConvTranspose, pool and normalization kernels against direct formulas, for the
 * cases the ONNX node tests leave out (groups, dilations, output_padding, storage_order, float16,
 * statistics outputs), plus the window geometry rules and attribute validation. */
#include <math.h>
#include <string.h>

#include "ir/op_ctx.h"
#include "ir/shape/conv_geom.h"
#include "unit.h"
#include "util/alloc.h"

af_status af_ref_CONV(af_op_ctx *ctx);
af_status af_ref_CONV_TRANSPOSE(af_op_ctx *ctx);
af_status af_ref_MAX_POOL(af_op_ctx *ctx);
af_status af_infer_BATCH_NORMALIZATION(af_op_ctx *ctx);
af_status af_ref_BATCH_NORMALIZATION(af_op_ctx *ctx);
af_status af_infer_LAYER_NORMALIZATION(af_op_ctx *ctx);
af_status af_ref_LAYER_NORMALIZATION(af_op_ctx *ctx);

/* A node with attributes, and the context that runs it. */
typedef struct fixture {
    af_attr attrs[8];
    int64_t ints[8][12];
    af_node node;
    af_error err;
    int opset;
} fixture;

static void fx_init(fixture *f, const char *op) {
    memset(f, 0, sizeof *f);
    f->node = (af_node){.name = "node", .op_type = (char *)op, .domain = "", .attrs = f->attrs};
    f->opset = 17;
}

static af_attr *fx_attr(fixture *f, const char *name, af_attr_type type) {
    af_attr *a = &f->attrs[f->node.n_attrs++];
    *a = (af_attr){.name = (char *)name, .type = type};
    return a;
}

static void fx_ints(fixture *f, const char *name, int n, const int64_t *v) {
    int64_t *store = f->ints[f->node.n_attrs];
    memcpy(store, v, (size_t)n * sizeof *v);
    af_attr *a = fx_attr(f, name, AF_ATTR_INTS);
    a->n = n;
    a->ints = store;
}

static void fx_int(fixture *f, const char *name, int64_t v) {
    fx_attr(f, name, AF_ATTR_INT)->i = v;
}

static void fx_str(fixture *f, const char *name, const char *s) {
    fx_attr(f, name, AF_ATTR_STRING)->s = (char *)s;
}

/* A tensor filled with a smooth, sign-changing pattern (seed varies it), or unallocated. */
static af_tensor make(af_dtype dtype, int rank, const int64_t *dims, double seed) {
    af_tensor t = {.dtype = dtype, .rank = rank};
    memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    if (seed == 0) return t;
    if (af_tensor_alloc(&t, NULL) != AF_OK) return t;
    for (int64_t i = 0; i < af_tensor_numel(&t); i++)
        af_tensor_set_f64(&t, i, sin(seed * (double)(i + 1)));
    return t;
}

static af_op_ctx ctx_of(fixture *f, int n_in, const af_tensor *const *in, int n_out,
                        af_tensor *const *out) {
    return (af_op_ctx){.node = &f->node,
                       .opset = f->opset,
                       .n_inputs = n_in,
                       .inputs = in,
                       .n_outputs = n_out,
                       .outputs = out,
                       .err = &f->err};
}

/* Infers, allocates the outputs and runs; returns the first failing status. */
static af_status infer_run(fixture *f, af_op_fn infer, af_op_fn run, int n_in,
                           const af_tensor *const *in, int n_out, af_tensor *const *out) {
    af_op_ctx c = ctx_of(f, n_in, in, n_out, out);
    af_status st = infer(&c);
    for (int i = 0; st == AF_OK && i < n_out; i++)
        if (out[i]) st = af_tensor_alloc(out[i], &f->err);
    return st == AF_OK ? run(&c) : st;
}

/* A Conv or ConvTranspose case over three spatial dims (leading ones of size 1 for lower ranks). */
typedef struct conv_case {
    int n_sp;
    int64_t n, group, cg, mg; /* batch, groups, input and output channels per group */
    int64_t in[3], k[3], s[3], d[3], pb[3], pe[3], op[3];
    af_dtype dtype;
} conv_case;

/* Splits flat index p over 3-D dims into coordinates q. */
static void unflat(int64_t p, const int64_t *dims, int64_t *q) {
    q[2] = p % dims[2];
    q[1] = p / dims[2] % dims[1];
    q[0] = p / (dims[1] * dims[2]);
}

/* y = conv(x, w) + b by the defining sum (or the scatter of ConvTranspose), with 3-D indexing:
 * position `p` walks the side the op reads from, `r` is where kernel tap k takes it. */
static void direct(const conv_case *cc, bool transpose, const af_tensor *x, const af_tensor *w,
                   const af_tensor *b, const int64_t *out, double *y) {
    int64_t c = cc->group * cc->cg, m = cc->group * cc->mg;
    int64_t xs = cc->in[0] * cc->in[1] * cc->in[2], ys = out[0] * out[1] * out[2];
    int64_t ks = cc->k[0] * cc->k[1] * cc->k[2];
    const int64_t *pd = transpose ? cc->in : out, *rd = transpose ? out : cc->in;
    for (int64_t i = 0; i < cc->n * m * ys; i++) y[i] = af_tensor_get_f64(b, (i / ys) % m);
    for (int64_t n = 0; n < cc->n; n++) {
        for (int64_t oc = 0; oc < m; oc++) {
            for (int64_t icg = 0; icg < cc->cg; icg++) {
                int64_t ic = oc / cc->mg * cc->cg + icg;
                for (int64_t p = 0; p < pd[0] * pd[1] * pd[2]; p++) {
                    for (int64_t k = 0; k < ks; k++) {
                        int64_t q[3], kq[3], r[3];
                        unflat(p, pd, q);
                        unflat(k, cc->k, kq);
                        bool inside = true;
                        for (int i = 0; i < 3; i++) {
                            r[i] = q[i] * cc->s[i] - cc->pb[i] + kq[i] * cc->d[i];
                            inside = inside && r[i] >= 0 && r[i] < rd[i];
                        }
                        if (!inside) continue;
                        int64_t r_at = (r[0] * rd[1] + r[1]) * rd[2] + r[2];
                        int64_t x_at = (n * c + ic) * xs + (transpose ? p : r_at);
                        int64_t y_at = (n * m + oc) * ys + (transpose ? r_at : p);
                        int64_t w_at = transpose ? (ic * cc->mg + oc % cc->mg) * ks + k
                                                 : (oc * cc->cg + icg) * ks + k;
                        y[y_at] += af_tensor_get_f64(x, x_at) * af_tensor_get_f64(w, w_at);
                    }
                }
            }
        }
    }
}

static void check_conv_case(const conv_case *cc, bool transpose) {
    fixture f;
    fx_init(&f, transpose ? "ConvTranspose" : "Conv");
    int lead = 3 - cc->n_sp;
    int64_t s[3], d[3], pads[6], op[3], xd[5], wd[5], out[3] = {1, 1, 1};
    int64_t c = cc->group * cc->cg, m = cc->group * cc->mg;
    xd[0] = cc->n;
    xd[1] = c;
    wd[0] = transpose ? c : m;
    wd[1] = transpose ? cc->mg : cc->cg;
    for (int i = 0; i < cc->n_sp; i++) {
        s[i] = cc->s[lead + i];
        d[i] = cc->d[lead + i];
        pads[i] = cc->pb[lead + i];
        pads[cc->n_sp + i] = cc->pe[lead + i];
        op[i] = cc->op[lead + i];
        xd[2 + i] = cc->in[lead + i];
        wd[2 + i] = cc->k[lead + i];
    }
    fx_ints(&f, "strides", cc->n_sp, s);
    fx_ints(&f, "dilations", cc->n_sp, d);
    fx_ints(&f, "pads", 2 * cc->n_sp, pads);
    fx_int(&f, "group", cc->group);
    if (transpose) fx_ints(&f, "output_padding", cc->n_sp, op);
    af_tensor x = make(cc->dtype, cc->n_sp + 2, xd, 0.37),
              w = make(cc->dtype, cc->n_sp + 2, wd, 0.11);
    af_tensor b = make(cc->dtype, 1, &m, 0.7), y = {0};
    const af_tensor *in[3] = {&x, &w, &b};
    af_tensor *outs[1] = {&y};
    af_status st = infer_run(&f, transpose ? af_infer_CONV_TRANSPOSE : af_infer_CONV,
                             transpose ? af_ref_CONV_TRANSPOSE : af_ref_CONV, 3, in, 1, outs);
    CHECK(st == AF_OK);
    if (st != AF_OK) printf("  %s\n", f.err.message);
    for (int i = 0; st == AF_OK && i < cc->n_sp; i++) out[lead + i] = y.dims[2 + i];
    for (int i = 0; st == AF_OK && i < 3; i++) {
        int64_t dk = (cc->k[i] - 1) * cc->d[i] + 1;
        int64_t want = transpose
                           ? cc->s[i] * (cc->in[i] - 1) + cc->op[i] + dk - cc->pb[i] - cc->pe[i]
                           : (cc->in[i] + cc->pb[i] + cc->pe[i] - dk) / cc->s[i] + 1;
        CHECK_EQ_INT(out[i], want);
    }
    int64_t ny = af_tensor_numel(&y);
    double *want = st == AF_OK ? af_malloc((size_t)ny * sizeof *want) : NULL;
    if (want) {
        direct(cc, transpose, &x, &w, &b, out, want);
        double tol = cc->dtype == AF_DTYPE_FLOAT16 ? 2e-2 : 1e-5;
        int bad = 0;
        for (int64_t i = 0; i < ny && bad < 3; i++) {
            double got = af_tensor_get_f64(&y, i);
            if (fabs(got - want[i]) > tol * (1 + fabs(want[i]))) {
                bad++;
                CHECK_NEAR(got, want[i], tol, tol);
            }
        }
    }
    af_free(want);
    af_tensor_free_data(&x);
    af_tensor_free_data(&w);
    af_tensor_free_data(&b);
    af_tensor_free_data(&y);
}

#define F16 AF_DTYPE_FLOAT16
#define F32 AF_DTYPE_FLOAT
#define F64 AF_DTYPE_DOUBLE

/* One case per row: n_sp, n, group, cg, mg, in, k, s, d, pb, pe, op, dtype. */
/* clang-format off */
static const conv_case conv_cases[] = {
    /* grouped, strided, dilated, asymmetric pads */
    {2, 2, 2, 3, 2, {1, 7, 6}, {1, 3, 2}, {1, 2, 1}, {1, 1, 2}, {0, 1, 0}, {0, 2, 1}, {0}, F32},
    /* depthwise */
    {2, 1, 4, 1, 1, {1, 5, 5}, {1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}, {0}, F32},
    /* 1-D in float64 */
    {1, 2, 1, 2, 3, {1, 1, 9}, {1, 1, 3}, {1, 1, 2}, {1, 1, 3}, {0, 0, 2}, {0, 0, 0}, {0}, F64},
    /* 3-D in float16 */
    {3, 1, 1, 2, 2, {4, 3, 5}, {2, 2, 3}, {2, 1, 2}, {1, 1, 1}, {1, 0, 1}, {0, 1, 1}, {0}, F16},
};
/* clang-format on */

AF_TEST(conv_ref_matches_direct_sum) {
    for (size_t i = 0; i < sizeof conv_cases / sizeof conv_cases[0]; i++)
        check_conv_case(&conv_cases[i], false);
}

/* One case per row: n_sp, n, group, cg, mg, in, k, s, d, pb, pe, op, dtype. */
/* clang-format off */
static const conv_case transpose_cases[] = {
    /* grouped, with output_padding */
    {2, 1, 2, 2, 3, {1, 3, 4}, {1, 3, 3}, {1, 2, 3}, {1, 1, 1}, {0, 1, 0}, {0, 0, 1}, {0, 1, 2}, F32},
    /* depthwise, dilated */
    {2, 2, 3, 1, 1, {1, 4, 3}, {1, 2, 3}, {1, 1, 2}, {1, 2, 1}, {0, 0, 1}, {0, 1, 0}, {0, 0, 1}, F32},
    /* 1-D in float64 */
    {1, 1, 1, 2, 2, {1, 1, 5}, {1, 1, 4}, {1, 1, 3}, {1, 1, 2}, {0, 0, 2}, {0, 0, 1}, {0, 0, 2}, F64},
    /* 3-D */
    {3, 1, 1, 1, 2, {2, 3, 2}, {2, 2, 2}, {2, 1, 3}, {1, 2, 1}, {0, 1, 0}, {1, 0, 0}, {1, 0, 0}, F32},
};
/* clang-format on */

AF_TEST(conv_transpose_ref_matches_direct_scatter) {
    for (size_t i = 0; i < sizeof transpose_cases / sizeof transpose_cases[0]; i++)
        check_conv_case(&transpose_cases[i], true);
}

AF_TEST(conv_ref_reports_out_of_memory) {
    fixture f;
    fx_init(&f, "Conv");
    int64_t xd[4] = {1, 2, 4, 4}, wd[4] = {3, 2, 3, 3};
    af_tensor x = make(AF_DTYPE_FLOAT, 4, xd, 0.3), w = make(AF_DTYPE_FLOAT, 4, wd, 0.2), y = {0};
    const af_tensor *in[2] = {&x, &w};
    af_tensor *outs[1] = {&y};
    af_op_ctx c = ctx_of(&f, 2, in, 1, outs);
    CHECK(af_infer_CONV(&c) == AF_OK);
    CHECK(af_tensor_alloc(&y, NULL) == AF_OK);
    af_alloc_fail_after(1);
    CHECK(af_ref_CONV(&c) == AF_ERR_OUT_OF_MEMORY);
    af_alloc_fail_after(-1);
    af_tensor_free_data(&x);
    af_tensor_free_data(&w);
    af_tensor_free_data(&y);
}

/* Output sizes and resolved pads of one spatial dim. */
static void geom1(fixture *f, bool transpose, int64_t in, int64_t *out, int64_t *pb, int64_t *pe) {
    af_op_ctx c = ctx_of(f, 0, NULL, 0, NULL);
    af_conv_geom g;
    af_status st = af_conv_geom_init(&c, 1, NULL, &g);
    if (st == AF_OK)
        st = transpose ? af_conv_geom_transpose(&c, &g, &in, out)
                       : af_conv_geom_forward(&c, &g, &in, out);
    CHECK(st == AF_OK);
    *pb = g.pad_begin[0];
    *pe = g.pad_end[0];
}

AF_TEST(conv_geom_auto_pad_ceil_mode_and_output_shape) {
    fixture f;
    int64_t out, pb, pe, k4 = 4, k2 = 2, k3 = 3, s2 = 2, pads[2] = {0, 1}, os = 8;
    fx_init(&f, "Conv");
    fx_ints(&f, "kernel_shape", 1, &k4);
    fx_str(&f, "auto_pad", "SAME_LOWER");
    geom1(&f, false, 5, &out, &pb, &pe);
    CHECK(out == 5 && pb == 2 && pe == 1); /* the odd pad goes first */
    f.attrs[1].s = "SAME_UPPER";
    geom1(&f, false, 5, &out, &pb, &pe);
    CHECK(out == 5 && pb == 1 && pe == 2);

    /* ceil_mode drops a last window that would start in the end padding */
    fx_init(&f, "MaxPool");
    fx_ints(&f, "kernel_shape", 1, &k2);
    fx_ints(&f, "strides", 1, &s2);
    fx_ints(&f, "pads", 2, pads);
    fx_int(&f, "ceil_mode", 1);
    geom1(&f, false, 4, &out, &pb, &pe);
    CHECK_EQ_INT(out, 2);
    geom1(&f, false, 5, &out, &pb, &pe);
    CHECK_EQ_INT(out, 3);

    /* an output_shape beyond the natural size gives a negative end pad (extra zeros at the end) */
    fx_init(&f, "ConvTranspose");
    fx_ints(&f, "kernel_shape", 1, &k3);
    fx_ints(&f, "strides", 1, &s2);
    fx_ints(&f, "output_shape", 1, &os);
    geom1(&f, true, 3, &out, &pb, &pe);
    CHECK(out == 8 && pb == 0 && pe == -1);
}

AF_TEST(conv_infer_unknown_dims_and_invalid_attributes) {
    fixture f;
    fx_init(&f, "Conv");
    int64_t xd[4] = {-1, 4, -1, 9}, wd[4] = {6, 2, 3, 3}, two[2] = {2, 2};
    af_tensor x = make(AF_DTYPE_FLOAT, 4, xd, 0), w = make(AF_DTYPE_FLOAT, 4, wd, 0), y = {0};
    const af_tensor *in[2] = {&x, &w};
    af_tensor *outs[1] = {&y};
    af_op_ctx c = ctx_of(&f, 2, in, 1, outs);
    fx_int(&f, "group", 2);
    CHECK(af_infer_CONV(&c) == AF_OK);
    CHECK(y.rank == 4 && y.dims[0] == -1 && y.dims[1] == 6 && y.dims[2] == -1 && y.dims[3] == 7);
    x.rank = -1;
    CHECK(af_infer_CONV(&c) == AF_OK);
    CHECK(y.rank == 4 && y.dims[1] == 6 && y.dims[3] == -1);
    x.rank = 4;
    f.attrs[0].i = 3; /* 4 channels do not split into 3 groups */
    CHECK(af_infer_CONV(&c) == AF_ERR_INVALID_MODEL);
    f.attrs[0].i = 2;
    fx_ints(&f, "strides", 1, two);
    CHECK(af_infer_CONV(&c) == AF_ERR_INVALID_MODEL);
    CHECK(strstr(f.err.message, "strides") != NULL);
    f.node.n_attrs = 1;
    x.dtype = w.dtype = AF_DTYPE_INT32;
    CHECK(af_infer_CONV(&c) == AF_ERR_UNSUPPORTED);
}

AF_TEST(max_pool_ref_indices_in_column_major_order) {
    fixture f;
    fx_init(&f, "MaxPool");
    int64_t k[2] = {2, 2}, s[2] = {2, 2}, xd[4] = {2, 1, 4, 5};
    fx_ints(&f, "kernel_shape", 2, k);
    fx_ints(&f, "strides", 2, s);
    fx_int(&f, "ceil_mode", 1);
    fx_int(&f, "storage_order", 1);
    af_tensor x = make(AF_DTYPE_FLOAT, 4, xd, 0.9), y = {0}, idx = {0};
    const af_tensor *in[1] = {&x};
    af_tensor *outs[2] = {&y, &idx};
    CHECK(infer_run(&f, af_infer_MAX_POOL, af_ref_MAX_POOL, 1, in, 2, outs) == AF_OK);
    CHECK(y.rank == 4 && y.dims[2] == 2 && y.dims[3] == 3 && idx.dtype == AF_DTYPE_INT64);
    const float *xv = x.data;
    for (int64_t p = 0; p < 2; p++)
        for (int64_t oh = 0; oh < 2; oh++)
            for (int64_t ow = 0; ow < 3; ow++) {
                float best = -INFINITY;
                int64_t at = -1;
                for (int64_t h = 2 * oh; h < 2 * oh + 2 && h < 4; h++)
                    for (int64_t w = 2 * ow; w < 2 * ow + 2 && w < 5; w++)
                        if (xv[p * 20 + h * 5 + w] > best) {
                            best = xv[p * 20 + h * 5 + w];
                            at = p * 20 + w * 4 + h;
                        }
                int64_t o = p * 6 + oh * 3 + ow;
                CHECK_NEAR(((const float *)y.data)[o], best, 0, 0);
                CHECK_EQ_INT(((const int64_t *)idx.data)[o], at);
            }
    af_tensor_free_data(&x);
    af_tensor_free_data(&y);
    af_tensor_free_data(&idx);
}

AF_TEST(batch_norm_ref_opset9_training_outputs) {
    fixture f;
    fx_init(&f, "BatchNormalization");
    f.opset = 9;
    fx_attr(&f, "momentum", AF_ATTR_FLOAT)->f = 0.8f;
    int64_t xd[3] = {3, 2, 4}, cd[1] = {2};
    af_tensor x = make(AF_DTYPE_FLOAT, 3, xd, 0.5), p[4], o[5] = {{0}};
    for (int i = 0; i < 4; i++) p[i] = make(AF_DTYPE_FLOAT, 1, cd, 0.3 + 0.2 * i);
    ((float *)p[3].data)[0] = ((float *)p[3].data)[1] = 1.5f; /* variance must be positive */
    const af_tensor *in[5] = {&x, &p[0], &p[1], &p[2], &p[3]};
    af_tensor *outs[5] = {&o[0], &o[1], &o[2], &o[3], &o[4]};
    CHECK(infer_run(&f, af_infer_BATCH_NORMALIZATION, af_ref_BATCH_NORMALIZATION, 5, in, 5, outs) ==
          AF_OK);
    const float *xv = x.data;
    for (int64_t c = 0; c < 2; c++) {
        double sum = 0, sq = 0;
        for (int64_t n = 0; n < 3; n++)
            for (int64_t i = 0; i < 4; i++) sum += xv[(n * 2 + c) * 4 + i];
        double mean = sum / 12;
        for (int64_t n = 0; n < 3; n++)
            for (int64_t i = 0; i < 4; i++) sq += pow(xv[(n * 2 + c) * 4 + i] - mean, 2);
        double var = sq / 12;
        double sc = af_tensor_get_f64(&p[0], c), b = af_tensor_get_f64(&p[1], c);
        CHECK_NEAR(af_tensor_get_f64(&o[1], c), 0.8 * af_tensor_get_f64(&p[2], c) + 0.2 * mean,
                   1e-6, 1e-5);
        CHECK_NEAR(af_tensor_get_f64(&o[2], c), 0.8 * 1.5 + 0.2 * var, 1e-6, 1e-5);
        CHECK_NEAR(af_tensor_get_f64(&o[3], c), mean, 1e-6, 1e-5);
        CHECK_NEAR(af_tensor_get_f64(&o[4], c), var, 1e-6, 1e-5);
        int64_t at = (2 * 2 + c) * 4 + 3;
        CHECK_NEAR(af_tensor_get_f64(&o[0], at), sc * (xv[at] - mean) / sqrt(var + 1e-5) + b, 1e-5,
                   1e-4);
    }
    af_tensor_free_data(&x);
    for (int i = 0; i < 4; i++) af_tensor_free_data(&p[i]);
    for (int i = 0; i < 5; i++) af_tensor_free_data(&o[i]);
}

AF_TEST(layer_norm_ref_broadcasts_scale_and_bias) {
    fixture f;
    fx_init(&f, "LayerNormalization");
    fx_int(&f, "axis", 1);
    int64_t xd[3] = {2, 3, 4}, sd[1] = {4}, bd[2] = {3, 1};
    af_tensor x = make(AF_DTYPE_FLOAT, 3, xd, 0.45), s = make(AF_DTYPE_FLOAT, 1, sd, 0.8);
    af_tensor b = make(AF_DTYPE_FLOAT, 2, bd, 1.3), o[3] = {{0}};
    const af_tensor *in[3] = {&x, &s, &b};
    af_tensor *outs[3] = {&o[0], &o[1], &o[2]};
    CHECK(infer_run(&f, af_infer_LAYER_NORMALIZATION, af_ref_LAYER_NORMALIZATION, 3, in, 3, outs) ==
          AF_OK);
    CHECK(o[1].rank == 3 && o[1].dims[0] == 2 && o[1].dims[1] == 1 && o[1].dims[2] == 1);
    const float *xv = x.data;
    for (int64_t r = 0; r < 2; r++) {
        double sum = 0, sq = 0;
        for (int64_t j = 0; j < 12; j++) sum += xv[r * 12 + j];
        double mean = sum / 12;
        for (int64_t j = 0; j < 12; j++) sq += pow(xv[r * 12 + j] - mean, 2);
        double inv = 1 / sqrt(sq / 12 + 1e-5);
        CHECK_NEAR(af_tensor_get_f64(&o[1], r), mean, 1e-6, 1e-5);
        CHECK_NEAR(af_tensor_get_f64(&o[2], r), inv, 1e-6, 1e-5);
        for (int64_t j = 0; j < 12; j++) {
            double want = (xv[r * 12 + j] - mean) * inv * af_tensor_get_f64(&s, j % 4) +
                          af_tensor_get_f64(&b, j / 4);
            CHECK_NEAR(af_tensor_get_f64(&o[0], r * 12 + j), want, 1e-5, 1e-4);
        }
    }
    af_tensor_free_data(&x);
    af_tensor_free_data(&s);
    af_tensor_free_data(&b);
    for (int i = 0; i < 3; i++) af_tensor_free_data(&o[i]);
}
