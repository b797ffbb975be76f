/* Convolution by live-tap rectangles (see conv_tap_regions.h). */
#include "kernels/gemm/conv_tap_regions.h"

#include <stdatomic.h>
#include <string.h>

#include "util/alloc.h"

/* Tap (ky, kx)'s rectangle of output pixels; false where it is empty. */
static bool tap_rect(const af_conv_geom *geo, int64_t h, int64_t w, int64_t oh, int64_t ow, int64_t ky, int64_t kx,
                     int64_t r[4]) {
    af_conv_tap_outputs(h, oh, geo->stride[0], geo->dilation[0], geo->pad_begin[0], ky, &r[0], &r[1]);
    af_conv_tap_outputs(w, ow, geo->stride[1], geo->dilation[1], geo->pad_begin[1], kx, &r[2], &r[3]);
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
    if (!w || cout < 1 || cin < 1 || kh < 1 || kw < 1) return AF_ERR_INVALID_ARGUMENT;
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

/* Taps whose rectangle has fewer pixels run whole, one per task, several at once; larger ones
 * split each of their steps over the threads. A corner's few pixels make its GEMM a stream of the
 * tap's weights that one thread runs about as fast as two: DeepLabV3's ASPP conv at two threads
 * took 1.30-1.50 ms with every tap split (1.43-1.48 at one thread), 0.93-0.97 so. */
#define SMALL_TAP_PIXELS 64

/* Where a run's scratch goes: the large taps' samples, product and GEMM scratch (one tap at a
 * time), then per thread a small tap's samples and GEMM scratch, then every small tap's product. */
typedef struct tap_layout {
    int64_t big_p, small_p, small_products; /* the largest rectangles; floats of the small products */
    size_t big_gemm, small_gemm;            /* GEMM scratch: on the pool; on one thread */
    size_t thread_bytes, bytes;
} tap_layout;

static size_t round64(size_t b) { return (b + 63) & ~(size_t)63; }

static size_t floats(int64_t n) { return round64((size_t)n * sizeof(float)); }

static void layout_of(const af_conv_tap_regions *c, const af_conv_geom *geo, int64_t h, int64_t w, int64_t oh,
                      int64_t ow, int n_threads, tap_layout *l) {
    memset(l, 0, sizeof *l);
    int64_t r[4];
    for (int64_t ky = 0; ky < c->kh; ky++)
        for (int64_t kx = 0; kx < c->kw; kx++) {
            if (!tap_rect(geo, h, w, oh, ow, ky, kx, r)) continue;
            const int64_t p = (r[1] - r[0]) * (r[3] - r[2]);
            const af_gemm_desc d = tap_gemm(c, p);
            if (p >= SMALL_TAP_PIXELS) {
                const size_t b = af_sgemm_workspace_size(&d, n_threads);
                if (p > l->big_p) l->big_p = p;
                if (b > l->big_gemm) l->big_gemm = b;
            } else {
                const size_t b = af_sgemm_workspace_size(&d, 1);
                if (p > l->small_p) l->small_p = p;
                if (b > l->small_gemm) l->small_gemm = b;
                l->small_products += p * c->cout;
            }
        }
    l->thread_bytes = floats(c->cin * l->small_p) + round64(l->small_gemm);
    l->bytes = floats(c->cin * l->big_p) + floats(c->cout * l->big_p) + round64(l->big_gemm) +
               l->thread_bytes * (size_t)n_threads + floats(l->small_products) + 64;
}

size_t af_conv_tap_regions_workspace(const af_conv_tap_regions *c, const af_conv_geom *geo, int64_t h, int64_t w,
                                     int64_t oh, int64_t ow, int n_threads) {
    if (!c->w || !applies(geo, h, w, oh, ow)) return 0;
    tap_layout l;
    layout_of(c, geo, h, w, oh, ow, n_threads > 0 ? n_threads : 1, &l);
    return l.bytes;
}

/* One tap's rectangle r (rows r[0]..r[1], columns r[2]..r[3]): its input samples gathered as
 * [cin, pixels], channels as tasks. */
typedef struct gather_args {
    const af_conv_geom *geo;
    const float *x; /* [cin, h, w] */
    float *dst;     /* [cin, pixels] */
    const int64_t *r;
    int64_t h, w, ky, kx, cin, per_task;
} gather_args;

static void gather_task(void *ctx, int task, int thread) {
    (void)thread;
    const gather_args *a = ctx;
    const af_conv_geom *g = a->geo;
    const int64_t sy = g->stride[0], sx = g->stride[1], rows = a->r[1] - a->r[0], cols = a->r[3] - a->r[2];
    const int64_t iy0 = a->r[0] * sy - g->pad_begin[0] + a->ky * g->dilation[0];
    const int64_t ix0 = a->r[2] * sx - g->pad_begin[1] + a->kx * g->dilation[1];
    const int64_t c1 = (task + 1) * a->per_task < a->cin ? (task + 1) * a->per_task : a->cin;
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

/* Taps' products ([pixels, cout] each) added into their rectangles of y ([cout, oh, ow]), in tap
 * order at every element, output channels as tasks. */
#define TAPS_PER_BATCH 32
typedef struct tap_batch {
    int n;
    int tap[TAPS_PER_BATCH];
    int64_t rect[TAPS_PER_BATCH][4];
    float *product[TAPS_PER_BATCH];
} tap_batch;

typedef struct add_args {
    const tap_batch *b;
    float *y;
    int64_t oh, ow, cout, per_task;
} add_args;

static void add_task(void *ctx, int task, int thread) {
    (void)thread;
    const add_args *a = ctx;
    const int64_t m1 = (task + 1) * a->per_task < a->cout ? (task + 1) * a->per_task : a->cout;
    for (int k = 0; k < a->b->n; k++) {
        const int64_t *r = a->b->rect[k], cols = r[3] - r[2];
        for (int64_t m = task * a->per_task; m < m1; m++)
            for (int64_t i = 0; i < r[1] - r[0]; i++) {
                float *d = a->y + (m * a->oh + r[0] + i) * a->ow + r[2];
                const float *s = a->b->product[k] + i * cols * a->cout + m;
                for (int64_t j = 0; j < cols; j++) d[j] += s[j * a->cout];
            }
    }
}

/* The small taps of a batch, one per task: each gathers its samples into its thread's slice and
 * runs its GEMM on that thread alone, into its own product. */
typedef struct small_args {
    const af_conv_tap_regions *c;
    const af_conv_geom *geo;
    const tap_layout *l;
    const tap_batch *b;
    const float *x;
    int64_t h, w;
    char *scratch; /* thread t's slice at t * l->thread_bytes */
    _Atomic int failed;
} small_args;

static void small_tap_task(void *ctx, int task, int thread) {
    small_args *a = ctx;
    const af_conv_tap_regions *c = a->c;
    const int64_t *r = a->b->rect[task];
    float *cols = (float *)(a->scratch + (size_t)thread * a->l->thread_bytes);
    const int tap = a->b->tap[task];
    gather_args g = {a->geo, a->x, cols, r, a->h, a->w, tap / c->kw, tap % c->kw, c->cin, c->cin};
    gather_task(&g, 0, thread);
    af_gemm_desc d = tap_gemm(c, (r[1] - r[0]) * (r[3] - r[2]));
    d.packed_b = c->w[tap];
    d.A = cols;
    d.C = a->b->product[task];
    d.workspace = (char *)cols + floats(c->cin * a->l->small_p);
    d.workspace_size = round64(a->l->small_gemm);
    const af_status st = af_sgemm(&d, NULL);
    if (st != AF_OK) atomic_store(&a->failed, (int)st);
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

static void add_batch(const tap_batch *b, float *y, int64_t oh, int64_t ow, int64_t cout, af_threadpool *pool) {
    add_args a = {b, y, oh, ow, cout, per_task(cout, af_threadpool_n_threads(pool))};
    af_threadpool_run(pool, n_tasks(cout, a.per_task), add_task, &a);
}

af_status af_conv_tap_regions_run(const af_conv_tap_regions *c, const af_conv_geom *geo, const float *x, float *y,
                                  int64_t h, int64_t w, int64_t oh, int64_t ow, const af_epilogue *epi,
                                  af_threadpool *pool, void *workspace, size_t workspace_bytes) {
    const int n_threads = af_threadpool_n_threads(pool);
    tap_layout l;
    if (!c->w || !applies(geo, h, w, oh, ow) || oh * ow > INT32_MAX) return AF_ERR_RUNTIME;
    layout_of(c, geo, h, w, oh, ow, n_threads, &l);
    if (workspace_bytes < l.bytes) return AF_ERR_RUNTIME;
    char *ws = workspace;
    float *cols = (float *)ws, *prod = (float *)(ws + floats(c->cin * l.big_p));
    char *gemm_ws = (char *)prod + floats(c->cout * l.big_p);
    char *per_thread = gemm_ws + round64(l.big_gemm);
    float *products = (float *)(per_thread + l.thread_bytes * (size_t)n_threads);
    memset(y, 0, (size_t)(c->cout * oh * ow) * sizeof *y);
    /* The large taps first, each split over the threads; then the small ones, a batch at a time. */
    tap_batch small = {.n = 0};
    float *next_product = products;
    int64_t r[4];
    for (int tap = 0; tap < c->kh * c->kw; tap++) {
        if (!tap_rect(geo, h, w, oh, ow, tap / c->kw, tap % c->kw, r)) continue;
        const int64_t pixels = (r[1] - r[0]) * (r[3] - r[2]);
        if (pixels < SMALL_TAP_PIXELS) continue;
        gather_args g = {geo, x, cols, r, h, w, tap / c->kw, tap % c->kw, c->cin, per_task(c->cin, n_threads)};
        af_threadpool_run(pool, n_tasks(c->cin, g.per_task), gather_task, &g);
        af_gemm_desc d = tap_gemm(c, pixels);
        d.packed_b = c->w[tap];
        d.A = cols;
        d.C = prod;
        d.workspace = gemm_ws;
        d.workspace_size = round64(l.big_gemm);
        af_status st = af_sgemm(&d, pool);
        if (st != AF_OK) return st;
        tap_batch one = {.n = 1, .tap = {tap}, .rect = {{r[0], r[1], r[2], r[3]}}, .product = {prod}};
        add_batch(&one, y, oh, ow, c->cout, pool);
    }
    for (int tap = 0; tap <= c->kh * c->kw; tap++) {
        const bool last = tap == c->kh * c->kw;
        if (!last && tap_rect(geo, h, w, oh, ow, tap / c->kw, tap % c->kw, r) &&
            (r[1] - r[0]) * (r[3] - r[2]) < SMALL_TAP_PIXELS) {
            small.tap[small.n] = tap;
            memcpy(small.rect[small.n], r, sizeof r);
            small.product[small.n++] = next_product;
            next_product += (r[1] - r[0]) * (r[3] - r[2]) * c->cout;
        }
        if (small.n == 0 || (small.n < TAPS_PER_BATCH && !last)) continue;
        small_args a = {.c = c, .geo = geo, .l = &l, .b = &small, .x = x, .h = h, .w = w, .scratch = per_thread};
        atomic_init(&a.failed, AF_OK);
        af_threadpool_run(pool, small.n, small_tap_task, &a);
        const af_status st = (af_status)atomic_load(&a.failed);
        if (st != AF_OK) return st;
        add_batch(&small, y, oh, ow, c->cout, pool);
        small.n = 0;
        next_product = products;
    }
    if (epi && epi->n_steps > 0) {
        epilogue_args e = {af_epilogue_tile_fn_for(c->isa), epi, y, oh * ow, c->cout, per_task(c->cout, n_threads)};
        af_threadpool_run(pool, n_tasks(c->cout, e.per_task), epilogue_task, &e);
    }
    return AF_OK;
}
