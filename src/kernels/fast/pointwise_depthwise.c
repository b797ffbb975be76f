/* The fused pointwise + depthwise convolution (see pointwise_depthwise.h). */
#include "kernels/fast/pointwise_depthwise.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "kernels/fast/conv_depthwise_blocked.h"
#include "kernels/gemm/gemm.h"
#include "util/alloc.h"
#include "util/error.h"

/* The expanded rows of one band stay in L2 (1 MB on the machines measured) beside the depthwise
 * kernel's interleaved block (96 KB) and the output rows. */
#define BAND_BYTES (384 * 1024)
/* The fusion pays where the expanded tensor would not stay in L2 between the kernels. */
#define EXPANDED_MIN_BYTES (1024 * 1024)

typedef struct pwdw_state {
    af_pwdw_desc d;          /* weights NULL (packed below); b1, b2 point into `biases` */
    af_isa isa;
    af_gemm_packed *w1;      /* W1 as the GEMM's A: C x Cin */
    af_dw_blocked dw;
    float *biases;           /* b1 then b2, zero where the graph has none */
    af_epilogue epi1, epi2;  /* bias + act1 on the 1x1 conv; act2 after the depthwise conv's bias */
    int64_t rows, bands;     /* output rows per band, bands per image */
    int64_t band_in_max;     /* the most input rows a band reads */
    int n_threads;           /* the thread count the scratch is sized for */
    size_t e_bytes, gemm_bytes, dw_bytes, thread_bytes; /* each thread's scratch, in that order */
} pwdw_state;

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* The input rows [*lo, *hi) that output rows [oy0, oy1) read, clipped to the plane. */
static void band_input(const af_pwdw_desc *d, int64_t oy0, int64_t oy1, int64_t *lo, int64_t *hi) {
    const int64_t s = d->geo.stride[0], pt = d->geo.pad_begin[0];
    *lo = max64(0, oy0 * s - pt);
    *hi = min64(d->h, (oy1 - 1) * s - pt + d->kh);
}

/* The 1x1 conv of input rows [lo, hi) of one image into e ([C][hi - lo][W]). */
static af_status pointwise_rows(const pwdw_state *s, const float *x, int64_t lo, int64_t hi, float *e, void *ws) {
    const af_pwdw_desc *d = &s->d;
    af_gemm_desc g = af_gemm_desc_default();
    g.isa = s->isa;
    g.M = d->channels;
    g.N = (hi - lo) * d->w;
    g.K = d->cin;
    g.packed_a = s->w1;
    g.B = x + lo * d->w;
    g.ldb = d->h * d->w;
    g.C = e;
    g.ldc = g.N;
    g.epilogue = &s->epi1;
    g.workspace = ws;
    g.workspace_size = s->gemm_bytes;
    return af_sgemm(&g, NULL);
}

typedef struct pwdw_job {
    const pwdw_state *s;
    const float *x;
    float *y;
    af_threadpool *pool; /* NULL: tasks run inline, on the workspace's first slice */
    char *workspace;
    _Atomic int failed;
} pwdw_job;

static void band_task(void *ctx, int task, int thread) {
    pwdw_job *j = ctx;
    const pwdw_state *s = j->s;
    const af_pwdw_desc *d = &s->d;
    const int64_t img = task / s->bands, band = task % s->bands;
    const int64_t oy0 = band * s->rows, oy1 = min64(d->oh, oy0 + s->rows);
    char *scratch = af_threadpool_scratch_or(j->pool, thread, s->thread_bytes,
                                             j->workspace + (size_t)(j->pool ? thread : 0) * s->thread_bytes);
    float *e = (float *)scratch;
    void *gemm_ws = scratch + s->e_bytes, *dw_ws = scratch + s->e_bytes + s->gemm_bytes;
    int64_t lo, hi;
    band_input(d, oy0, oy1, &lo, &hi);
    const float *x = j->x + img * d->cin * d->h * d->w;
    float *y = j->y + img * d->channels * d->oh * d->ow + oy0 * d->ow;
    /* The band's rows as a plane of hi - lo rows: its first row is input row lo, so the top pad
     * shrinks by what lies above it (to 0 inside the plane). */
    af_conv_geom geo = d->geo;
    geo.pad_begin[0] = d->geo.pad_begin[0] + lo - oy0 * d->geo.stride[0];
    af_status st = pointwise_rows(s, x, lo, hi, e, gemm_ws);
    if (st == AF_OK)
        st = af_dw_blocked_run_rows(&s->dw, &geo, e, y, d->oh * d->ow, hi - lo, d->w, oy1 - oy0, d->ow,
                                    s->d.b2, s->epi2.n_steps ? &s->epi2 : NULL, dw_ws, s->dw_bytes);
    if (st != AF_OK) j->failed = 1;
}

static af_status pwdw_run(const af_kernel *k, af_op_ctx *c, const af_epilogue *epi, af_threadpool *pool,
                          void *workspace) {
    (void)epi;
    const pwdw_state *s = k->state;
    const af_pwdw_desc *d = &s->d;
    const af_tensor *x = af_ctx_input(c, 0);
    af_tensor *y = af_ctx_output(c, 0);
    if (!x || x->dtype != AF_DTYPE_FLOAT || x->rank != 4 || x->dims[1] != d->cin || x->dims[2] != d->h ||
        x->dims[3] != d->w || !y || y->rank != 4 || y->dims[0] != x->dims[0] || y->dims[1] != d->channels ||
        y->dims[2] != d->oh || y->dims[3] != d->ow)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "pointwise+depthwise conv: X must be float32 [N, %lld, %lld, %lld]",
                           (long long)d->cin, (long long)d->h, (long long)d->w);
    if (x->dims[0] * s->bands > 0x7fffffff) return af_ctx_fail(c, AF_ERR_LIMIT, "too many images");
    /* More threads than the scratch is sized for: the caller alone runs the bands. */
    if (af_threadpool_n_threads(pool) > s->n_threads) pool = NULL;
    pwdw_job j = {.s = s, .x = x->data, .y = y->data, .pool = pool, .workspace = workspace};
    af_threadpool_run_affine(pool, (int)(x->dims[0] * s->bands), band_task, &j);
    if (j.failed) return af_ctx_fail(c, AF_ERR_RUNTIME, "pointwise+depthwise conv: a band failed");
    return AF_OK;
}

static void pwdw_free(void *p) {
    pwdw_state *s = p;
    if (!s) return;
    af_gemm_packed_free(s->w1);
    af_dw_blocked_release(&s->dw);
    af_free(s->biases);
    af_free(s);
}

/* Output rows per band: the most whose input rows fit BAND_BYTES, then fewer where that leaves
 * a thread without a band. False when the halo rows would be recomputed past
 * AF_PWDW_MAX_RECOMPUTE (*recompute: the fraction). */
static bool choose_bands(pwdw_state *s, int n_threads, double *recompute) {
    const af_pwdw_desc *d = &s->d;
    const int64_t row_bytes = d->channels * d->w * (int64_t)sizeof(float), sy = d->geo.stride[0];
    /* The most rows r with ((r - 1) * sy + kh) input rows within BAND_BYTES (in double: no overflow). */
    const double fit = floor(((double)BAND_BYTES / (double)row_bytes - (double)d->kh) / (double)sy) + 1;
    const int64_t rows = fit < 1 ? 1 : fit > (double)d->oh ? d->oh : (int64_t)fit;
    int64_t bands = ceil_div(d->oh, rows);
    if (bands < n_threads) bands = min64(d->oh, n_threads);
    s->rows = ceil_div(d->oh, bands);
    s->bands = ceil_div(d->oh, s->rows);
    int64_t computed = 0;
    s->band_in_max = 0;
    for (int64_t b = 0; b < s->bands; b++) {
        int64_t lo, hi;
        band_input(d, b * s->rows, min64(d->oh, (b + 1) * s->rows), &lo, &hi);
        computed += hi - lo;
        s->band_in_max = max64(s->band_in_max, hi - lo);
    }
    *recompute = (double)computed / (double)d->h - 1.0;
    return *recompute <= AF_PWDW_MAX_RECOMPUTE;
}

af_status af_pwdw_kernel_make(const af_pwdw_desc *d, af_isa isa, int n_threads, af_kernel *k, af_error *err) {
    memset(k, 0, sizeof *k);
    isa = af_cpu_isa_clamp(isa);
    if (n_threads < 1) n_threads = 1;
    const af_conv_geom *g = &d->geo;
    /* Every size in int32 range first, so that no product below overflows. */
    const int64_t sizes[] = {d->cin, d->channels, d->h,        d->w,           d->oh,          d->ow,
                             d->kh,  d->kw,       g->stride[0], g->stride[1], g->pad_begin[0], g->pad_begin[1]};
    bool sane = g->n_sp == 2;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) sane = sane && sizes[i] >= 0 && sizes[i] <= INT32_MAX;
    if (!sane || d->cin < 1 || d->channels < 1 || d->h < 1 || d->w < 1 || d->oh < 1 || d->ow < 1 || d->kh < 1 ||
        d->kw < 1 || !d->w1 || !d->w2 || g->stride[0] < 1 || g->stride[1] < 1 || g->dilation[0] != 1 ||
        g->dilation[1] != 1 || g->pad_begin[0] >= d->kh || d->channels > (int64_t)1 << 24 ||
        d->cin > (int64_t)1 << 24 || d->h * d->w > INT32_MAX || d->oh * d->ow > INT32_MAX)
        return af_errorf(err, AF_ERR_UNSUPPORTED, "the fused kernel takes undilated 2-D convolutions of static shape");
    /* Smaller expanded tensors stay in cache between the unfused kernels, and then the bands'
     * halo rows and shorter GEMMs cost about what the fusion saves, or more. MobileNetV3-L per
     * step, fused against unfused (profiles of 300-400 runs): 64 x 112 x 112 (3.2 MB) 0.322
     * against 0.347 ms at one thread, 0.207 against 0.309 and 0.180 against 0.201 at two (a slow
     * and a quiet hour); its two 72 x 56 x 56 (0.9 MB) pairs +1 to +5% at one thread, -9 to -11%
     * at two in the slow hour and +19 to +25% in the quiet one; 240 x 28 x 28 (0.75 MB) +12% and
     * +7%; 960 x 7 x 7 (a short GEMM in place of the implicit kernel) +38% at one thread. */
    const double expanded = (double)d->channels * (double)d->h * (double)d->w * sizeof(float);
    if (expanded <= EXPANDED_MIN_BYTES)
        return af_errorf(err, AF_ERR_UNSUPPORTED,
                         "the expanded tensor (%.0f KiB) is at most %d KiB: unfused it stays in cache, and the "
                         "fused bands would cost about what they save",
                         expanded / 1024, EXPANDED_MIN_BYTES / 1024);
    if (isa != AF_ISA_AVX512)
        return af_errorf(err, AF_ERR_UNSUPPORTED, "the fused kernel needs AVX-512 (the channel-blocked depthwise conv)");
    pwdw_state *s = af_calloc(1, sizeof *s);
    if (!s) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory preparing a pointwise+depthwise kernel");
    s->d = *d;
    s->isa = isa;
    s->n_threads = n_threads;
    double recompute;
    if (!choose_bands(s, n_threads, &recompute)) {
        af_free(s);
        return af_errorf(err, AF_ERR_UNSUPPORTED,
                         "bands of %lld output rows would compute %.0f%% of the 1x1 conv twice (more than %.0f%%)",
                         (long long)s->rows, recompute * 100, AF_PWDW_MAX_RECOMPUTE * 100);
    }
    af_status st = AF_OK;
    if (!(s->biases = af_calloc((size_t)(2 * d->channels), sizeof *s->biases))) st = AF_ERR_OUT_OF_MEMORY;
    if (st == AF_OK) {
        if (d->b1) memcpy(s->biases, d->b1, (size_t)d->channels * sizeof *s->biases);
        if (d->b2) memcpy(s->biases + d->channels, d->b2, (size_t)d->channels * sizeof *s->biases);
        s->d.w1 = s->d.w2 = NULL;
        s->d.b1 = s->biases;
        s->d.b2 = s->biases + d->channels;
        af_epilogue_init(&s->epi1);
        af_epilogue_init(&s->epi2);
        st = af_epilogue_vec(&s->epi1, AF_EPI_BIAS_ROW, s->d.b1, NULL);
    }
    if (st == AF_OK && d->has_act1) st = af_epilogue_push(&s->epi1, &d->act1);
    if (st == AF_OK && d->has_act2) st = af_epilogue_push(&s->epi2, &d->act2);
    if (st == AF_OK) st = af_gemm_pack_a(isa, 1, d->channels, d->cin, d->w1, d->cin, false, 0, &s->w1);
    if (st == AF_OK) st = af_dw_blocked_prepare(d->w2, d->channels, d->kh, d->kw, &s->dw);
    if (st == AF_OK) {
        af_gemm_desc gd = af_gemm_desc_default();
        gd.isa = isa;
        gd.M = d->channels;
        gd.N = s->band_in_max * d->w;
        gd.K = d->cin;
        gd.packed_a = s->w1;
        gd.ldb = d->h * d->w;
        gd.ldc = gd.N;
        s->e_bytes = round64((size_t)(d->channels * s->band_in_max * d->w) * sizeof(float));
        s->gemm_bytes = round64(af_sgemm_workspace_size(&gd, 1));
        s->dw_bytes = round64(af_dw_blocked_scratch_bytes(&s->dw, &d->geo, d->ow, 1));
        s->thread_bytes = s->e_bytes + s->gemm_bytes + s->dw_bytes;
    }
    if (st != AF_OK) {
        pwdw_free(s);
        return af_errorf(err, st, "cannot prepare a pointwise+depthwise kernel (%s)", af_status_name(st));
    }
    *k = (af_kernel){.name = "f32_pointwise_depthwise__avx512", .state = s, .run = pwdw_run, .free_state = pwdw_free,
                     .workspace_bytes = (size_t)n_threads * s->thread_bytes,
                     .weight_bytes = af_gemm_packed_bytes(s->w1) +
                                     (size_t)(ceil_div(d->channels, 16) * 16 * d->kh * d->kw) * sizeof(float) +
                                     (size_t)(2 * d->channels) * sizeof(float)};
    return AF_OK;
}
