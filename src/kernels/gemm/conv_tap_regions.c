/* Convolution by live-tap rectangles (see conv_tap_regions.h). */
#include "kernels/gemm/conv_tap_regions.h"

#include <string.h>

#include "util/alloc.h"

/* The output coordinates [*o0, *o1) along one axis at which tap t of a kernel reads inside [0, in)
 * (row o s - pb + t d, monotone in o, so they are one run); empty: *o0 == *o1. */
static void live_run(int64_t in, int64_t out, int64_t s, int64_t d, int64_t pb, int64_t t, int64_t *o0, int64_t *o1) {
    /* o s >= pb - t d and o s < in + pb - t d, over 0 <= o < out */
    const int64_t lo = pb - t * d, hi = in + pb - t * d; /* o s in [lo, hi) */
    int64_t a = lo <= 0 ? 0 : (lo + s - 1) / s, b = hi <= 0 ? 0 : (hi + s - 1) / s;
    if (a > out) a = out;
    if (b > out) b = out;
    *o0 = a;
    *o1 = b > a ? b : a;
}

/* Tap (ky, kx)'s rectangle of output pixels; false where it is empty. */
static bool tap_rect(const af_conv_geom *geo, int64_t h, int64_t w, int64_t oh, int64_t ow, int64_t ky, int64_t kx,
                     int64_t r[4]) {
    live_run(h, oh, geo->stride[0], geo->dilation[0], geo->pad_begin[0], ky, &r[0], &r[1]);
    live_run(w, ow, geo->stride[1], geo->dilation[1], geo->pad_begin[1], kx, &r[2], &r[3]);
    return r[1] > r[0] && r[3] > r[2];
}

static bool applies(const af_conv_geom *geo, int64_t h, int64_t w, int64_t oh, int64_t ow) {
    return geo->n_sp == 2 && h > 0 && w > 0 && oh > 0 && ow > 0 && geo->stride[0] > 0 && geo->stride[1] > 0 &&
           geo->dilation[0] > 0 && geo->dilation[1] > 0;
}

double af_conv_tap_regions_live_share(const af_conv_geom *geo, int64_t kh, int64_t kw, int64_t h, int64_t w,
                                      int64_t oh, int64_t ow) {
    if (!applies(geo, h, w, oh, ow) || kh < 1 || kw < 1) return -1;
    double live = 0;
    int64_t r[4];
    for (int64_t ky = 0; ky < kh; ky++)
        for (int64_t kx = 0; kx < kw; kx++)
            if (tap_rect(geo, h, w, oh, ow, ky, kx, r)) live += (double)(r[1] - r[0]) * (double)(r[3] - r[2]);
    return live / ((double)oh * ow * kh * kw);
}

af_status af_conv_tap_regions_prepare(af_isa isa, const float *w, int64_t cout, int64_t cin, int64_t kh, int64_t kw,
                                      af_conv_tap_regions *c) {
    memset(c, 0, sizeof *c);
    if (!w || cout < 1 || cin < 1 || kh < 1 || kw < 1)
        return AF_ERR_INVALID_ARGUMENT;
    const int64_t taps = kh * kw;
    *c = (af_conv_tap_regions){.isa = isa, .cout = cout, .cin = cin, .kh = kh, .kw = kw};
    float *wt = af_malloc((size_t)(cout * cin) * sizeof *wt);
    c->w = af_calloc((size_t)taps, sizeof *c->w);
    af_status st = wt && c->w ? AF_OK : AF_ERR_OUT_OF_MEMORY;
    for (int64_t t = 0; t < taps && st == AF_OK; t++) {
        for (int64_t i = 0; i < cout * cin; i++) wt[i] = w[i * taps + t]; /* W[m][ci][t] as [m][ci] */
        st = af_gemm_pack_b(isa, 1, cin, cout, wt, cin, true, 0, &c->w[t]);
    }
    af_free(wt);
    if (st != AF_OK) af_conv_tap_regions_release(c);
    return st;
}

void af_conv_tap_regions_release(af_conv_tap_regions *c) {
    for (int64_t t = 0; c->w && t < c->kh * c->kw; t++) af_gemm_packed_free(c->w[t]);
    af_free(c->w);
    memset(c, 0, sizeof *c);
}

static size_t round64(size_t b) { return (b + 63) & ~(size_t)63; }

/* One tap's product over its rectangle, pixels as rows: [pixels, cout] = X^T W^T, with X the
 * gathered [cin, pixels] and W^T packed as B, so that the weights stream through the GEMM's
 * prefetched B panels (a few pixels make a matrix-vector product). */
static af_gemm_desc tap_gemm(const af_conv_tap_regions *c, int64_t pixels) {
    af_gemm_desc d = af_gemm_desc_default();
    d.isa = c->isa;
    d.M = pixels;
    d.N = d.ldc = c->cout;
    d.K = c->cin;
    d.trans_a = true;
    d.lda = pixels;
    d.packed_b = c->w[0];
    d.k_block = AF_CONV_FLUSH_K;
    return d;
}

/* The largest tap rectangle's pixels, and the most GEMM scratch a tap's product needs. */
static int64_t max_pixels(const af_conv_tap_regions *c, const af_conv_geom *geo, int64_t h, int64_t w, int64_t oh,
                          int64_t ow, int n_threads, size_t *gemm_bytes) {
    int64_t m = 0, r[4];
    *gemm_bytes = 0;
    for (int64_t ky = 0; ky < c->kh; ky++)
        for (int64_t kx = 0; kx < c->kw; kx++) {
            if (!tap_rect(geo, h, w, oh, ow, ky, kx, r)) continue;
            const int64_t p = (r[1] - r[0]) * (r[3] - r[2]);
            const af_gemm_desc d = tap_gemm(c, p);
            const size_t b = af_sgemm_workspace_size(&d, n_threads > 0 ? n_threads : 1);
            if (p > m) m = p;
            if (b > *gemm_bytes) *gemm_bytes = b;
        }
    return m;
}

size_t af_conv_tap_regions_workspace(const af_conv_tap_regions *c, const af_conv_geom *geo, int64_t h, int64_t w,
                                     int64_t oh, int64_t ow, int n_threads) {
    if (!c->w || !applies(geo, h, w, oh, ow)) return 0;
    size_t gemm_bytes;
    const int64_t p = max_pixels(c, geo, h, w, oh, ow, n_threads, &gemm_bytes);
    if (p == 0) return 64; /* no tap reads the input: the output is the epilogue's bias */
    return round64((size_t)(c->cin * p) * sizeof(float)) + round64((size_t)(c->cout * p) * sizeof(float)) + gemm_bytes;
}

/* One tap's rectangle r (rows r[0]..r[1], columns r[2]..r[3]): its input samples gathered as
 * [cin, pixels], or its product added into y's rectangle, both with channels as tasks. */
typedef struct rect_args {
    const af_conv_geom *geo;
    const float *x, *src; /* gather: x [cin, h, w]; add: src [pixels, cout] (the product) */
    float *dst;           /* gather: [cin, pixels]; add: y [cout, oh, ow] */
    const int64_t *r;
    int64_t h, w, ow, ky, kx, n, per_task;
} rect_args;

static void gather_task(void *ctx, int task, int thread) {
    (void)thread;
    const rect_args *a = ctx;
    const af_conv_geom *g = a->geo;
    const int64_t sy = g->stride[0], sx = g->stride[1], rows = a->r[1] - a->r[0], cols = a->r[3] - a->r[2];
    const int64_t iy0 = a->r[0] * sy - g->pad_begin[0] + a->ky * g->dilation[0];
    const int64_t ix0 = a->r[2] * sx - g->pad_begin[1] + a->kx * g->dilation[1];
    const int64_t c1 = (task + 1) * a->per_task < a->n ? (task + 1) * a->per_task : a->n;
    for (int64_t ci = task * a->per_task; ci < c1; ci++)
        for (int64_t i = 0; i < rows; i++) {
            /* Every sample is inside the plane: that is what the rectangle is. */
            const float *src = a->x + (ci * a->h + iy0 + i * sy) * a->w + ix0;
            float *d = a->dst + (ci * rows + i) * cols;
            if (sx == 1) memcpy(d, src, (size_t)cols * sizeof *d);
            else
                for (int64_t j = 0; j < cols; j++) d[j] = src[j * sx];
        }
}

static void add_task(void *ctx, int task, int thread) {
    (void)thread;
    const rect_args *a = ctx;
    const int64_t rows = a->r[1] - a->r[0], cols = a->r[3] - a->r[2], oh_ow = a->h * a->ow;
    const int64_t m1 = (task + 1) * a->per_task < a->n ? (task + 1) * a->per_task : a->n;
    for (int64_t m = task * a->per_task; m < m1; m++)
        for (int64_t i = 0; i < rows; i++) {
            float *d = a->dst + m * oh_ow + (a->r[0] + i) * a->ow + a->r[2];
            const float *s = a->src + i * cols * a->n + m;
            for (int64_t j = 0; j < cols; j++) d[j] += s[j * a->n];
        }
}

/* The epilogue over bands of output channels. */
typedef struct epilogue_args {
    af_epilogue_tile_fn apply;
    const af_epilogue *epi;
    float *y;
    int64_t hw, cout, per_task;
} epilogue_args;

static void epilogue_task(void *ctx, int task, int thread) {
    (void)thread;
    const epilogue_args *a = ctx;
    const int64_t m0 = task * a->per_task, m1 = m0 + a->per_task < a->cout ? m0 + a->per_task : a->cout;
    a->apply(a->epi, a->y + m0 * a->hw, a->hw, (int)(m1 - m0), (int)a->hw, m0, 0, 0);
}

/* Items per task over n items: four tasks a thread, or one item a task where there are fewer. */
static int64_t per_task(int64_t n, int n_threads) {
    const int64_t tasks = 4 * (int64_t)n_threads;
    return n < tasks ? 1 : (n + tasks - 1) / tasks;
}

static int n_tasks(int64_t n, int64_t per) { return (int)((n + per - 1) / per); }

af_status af_conv_tap_regions_run(const af_conv_tap_regions *c, const af_conv_geom *geo, const float *x, float *y,
                                  int64_t h, int64_t w, int64_t oh, int64_t ow, const af_epilogue *epi,
                                  af_threadpool *pool, void *workspace, size_t workspace_bytes) {
    const int n_threads = af_threadpool_n_threads(pool);
    const size_t need = af_conv_tap_regions_workspace(c, geo, h, w, oh, ow, n_threads);
    if (need == 0 || workspace_bytes < need || oh * ow > INT32_MAX) return AF_ERR_RUNTIME;
    size_t gemm_bytes;
    const int64_t max_p = max_pixels(c, geo, h, w, oh, ow, n_threads, &gemm_bytes), hw = oh * ow;
    float *cols = workspace; /* [cin, pixels] of one tap */
    float *prod = (float *)((char *)workspace + round64((size_t)(c->cin * max_p) * sizeof(float))); /* [cout, pixels] */
    char *gemm_ws = (char *)prod + round64((size_t)(c->cout * max_p) * sizeof(float));
    memset(y, 0, (size_t)(c->cout * hw) * sizeof *y);
    int64_t r[4];
    for (int64_t ky = 0; ky < c->kh; ky++)
        for (int64_t kx = 0; kx < c->kw; kx++) {
            if (!tap_rect(geo, h, w, oh, ow, ky, kx, r)) continue;
            const int64_t pixels = (r[1] - r[0]) * (r[3] - r[2]);
            rect_args g = {.geo = geo, .x = x, .dst = cols, .r = r, .h = h, .w = w, .ky = ky, .kx = kx, .n = c->cin,
                           .per_task = per_task(c->cin, n_threads)};
            af_threadpool_run(pool, n_tasks(c->cin, g.per_task), gather_task, &g);
            af_gemm_desc d = tap_gemm(c, pixels);
            d.packed_b = c->w[ky * c->kw + kx];
            d.A = cols;
            d.C = prod;
            d.workspace = gemm_ws;
            d.workspace_size = workspace_bytes - (size_t)(gemm_ws - (char *)workspace);
            af_status st = af_sgemm(&d, pool);
            if (st != AF_OK) return st;
            rect_args a = {.src = prod, .dst = y, .r = r, .h = oh, .ow = ow, .n = c->cout,
                           .per_task = per_task(c->cout, n_threads)};
            af_threadpool_run(pool, n_tasks(c->cout, a.per_task), add_task, &a);
        }
    if (epi && epi->n_steps > 0) {
        epilogue_args e = {af_epilogue_tile_fn_for(c->isa), epi, y, hw, c->cout, per_task(c->cout, n_threads)};
        af_threadpool_run(pool, n_tasks(c->cout, e.per_task), epilogue_task, &e);
    }
    return AF_OK;
}
