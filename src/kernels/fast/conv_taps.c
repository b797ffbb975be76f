/* Stride-1 convolution as one GEMM per tap on a padded input (see conv_taps.h). */
#include "kernels/fast/conv_taps.h"

#include <stdatomic.h>
#include <string.h>

#include "kernels/fast/pad_row.h"
#include "util/alloc.h"

/* A chunk's C (cout x rows * Wp) and its B rows (cin x (rows + kh - 1) x Wp) should both stay in
 * a core's L2 (1 MB here) while the taps sum into C. */
#define TAPS_C_BYTES (192 * 1024)
#define TAPS_B_BYTES (512 * 1024)

static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

/* How the output is split: rows per chunk, and whether chunks run one per task (GEMMs on one
 * thread each) or there is one chunk whose GEMMs use the pool. */
typedef struct taps_split {
    int64_t hp, wp, plane; /* padded planes, and their stride (with slack for the last reads) */
    int64_t rows;          /* output rows per chunk */
    bool per_task;
} taps_split;

static taps_split split_for(const af_conv_taps *t, int64_t oh, int64_t ow, int n_threads) {
    taps_split s = {.hp = oh + t->kh - 1, .wp = ow + t->kw - 1};
    s.plane = (int64_t)align16((size_t)(s.hp * s.wp + t->kw));
    int64_t by_c = TAPS_C_BYTES / (int64_t)(t->cout * s.wp * (int64_t)sizeof(float));
    int64_t by_b = TAPS_B_BYTES / (int64_t)(t->cin * s.wp * (int64_t)sizeof(float)) - (t->kh - 1);
    int64_t rows = by_c < by_b ? by_c : by_b;
    if (rows < 1) rows = 1;
    if (rows > oh) rows = oh;
    int64_t chunks = (oh + rows - 1) / rows;
    if (chunks < 2 * n_threads && oh >= 4 * n_threads) { /* enough rows to give every thread two chunks */
        rows = (oh + 2 * n_threads - 1) / (2 * n_threads);
        chunks = (oh + rows - 1) / rows;
    }
    /* Chunks narrower than a few microkernel tiles make poor GEMMs: one chunk, threaded GEMMs. */
    s.per_task = n_threads > 1 ? chunks >= 2 * n_threads && rows * s.wp >= 96 : chunks > 1;
    s.rows = s.per_task ? rows : oh;
    return s;
}

static size_t gemm_ws(const af_conv_taps *t, int64_t n, int threads) {
    af_gemm_desc d = af_gemm_desc_default();
    d.isa = t->isa;
    d.M = t->cout;
    d.N = n;
    d.K = t->cin;
    d.packed_a = t->packed[0];
    return align16(af_sgemm_workspace_size(&d, threads) / sizeof(float) + 1) * sizeof(float);
}

/* Per thread (per task) or once: the chunk's C and the GEMM's scratch, in floats. */
static size_t chunk_floats(const af_conv_taps *t, const taps_split *s, int n_threads) {
    return align16((size_t)(t->cout * s->rows * s->wp)) +
           gemm_ws(t, s->rows * s->wp, s->per_task ? 1 : n_threads) / sizeof(float);
}

size_t af_conv_taps_workspace(const af_conv_taps *t, int64_t oh, int64_t ow, int n_threads) {
    /* The most any thread count up to n_threads needs: a pool may run with fewer. */
    size_t most = 0;
    for (int n = 1; n <= (n_threads > 1 ? n_threads : 1); n++) {
        taps_split s = split_for(t, oh, ow, n);
        size_t per = chunk_floats(t, &s, n);
        size_t need = ((size_t)(t->cin * s.plane) + per * (size_t)(s.per_task ? n : 1)) * sizeof(float);
        if (need > most) most = need;
    }
    return most;
}

bool af_conv_taps_fit(const af_conv_geom *geo, int64_t ow) {
    return ow >= 14 && geo->n_sp == 2 && geo->stride[0] == 1 && geo->stride[1] == 1 && geo->dilation[0] == 1 &&
           geo->dilation[1] == 1;
}

af_status af_conv_taps_prepare(af_isa isa, const float *w, int64_t cout, int64_t cin, int64_t kh, int64_t kw,
                               af_conv_taps *t) {
    memset(t, 0, sizeof *t);
    *t = (af_conv_taps){.isa = af_cpu_isa_clamp(isa), .cout = cout, .cin = cin, .kh = kh, .kw = kw};
    const int64_t taps = kh * kw;
    float *wt = af_malloc((size_t)(cout * cin) * sizeof *wt);
    t->packed = af_calloc((size_t)taps, sizeof *t->packed);
    af_status st = wt && t->packed ? AF_OK : AF_ERR_OUT_OF_MEMORY;
    for (int64_t tap = 0; tap < taps && st == AF_OK; tap++) {
        for (int64_t i = 0; i < cout * cin; i++) wt[i] = w[i * taps + tap];
        st = af_gemm_pack_a(t->isa, 1, cout, cin, wt, cin, false, 0, &t->packed[tap]);
    }
    af_free(wt);
    if (st != AF_OK) af_conv_taps_release(t);
    return st;
}

void af_conv_taps_release(af_conv_taps *t) {
    for (int64_t i = 0; t->packed && i < t->kh * t->kw; i++) af_gemm_packed_free(t->packed[i]);
    af_free(t->packed);
    memset(t, 0, sizeof *t);
}

typedef struct taps_run {
    const af_conv_taps *t;
    const af_conv_geom *geo;
    taps_split s;
    const float *x;
    float *y, *xp, *chunks; /* padded input; per-task chunk buffers */
    size_t chunk_floats;
    size_t gemm_bytes;      /* the GEMM scratch after each chunk buffer */
    int64_t h, w, oh, ow;
    const af_epilogue *epi;
    af_epilogue_tile_fn apply;
    af_threadpool *pool;    /* the GEMMs' pool when there is one chunk */
    int gemm_threads;
    atomic_int failed;
} taps_run;

/* Zero-padded plane ci: rows r of the input at r + pad_top, columns at c + pad_left. */
static void pad_task(void *ctx, int ci, int thread) {
    (void)thread;
    const taps_run *r = ctx;
    const int64_t top = r->geo->pad_begin[0], left = r->geo->pad_begin[1], wp = r->s.wp;
    float *p = r->xp + ci * r->s.plane;
    const float *src = r->x + (int64_t)ci * r->h * r->w;
    for (int64_t row = 0; row < r->s.hp; row++) {
        int64_t ir = row - top;
        af_pad_row(p + row * wp, wp, ir >= 0 && ir < r->h ? src + ir * r->w : NULL, r->w, left);
    }
    memset(p + r->s.hp * wp, 0, (size_t)(r->s.plane - r->s.hp * wp) * sizeof *p);
}

/* Output rows [oy0, oy0 + rows): the taps' GEMMs into buf, then the valid columns out to y and
 * the epilogue over them while they are in cache. */
static void chunk_task(void *ctx, int task, int thread) {
    taps_run *r = ctx;
    const af_conv_taps *t = r->t;
    const int64_t wp = r->s.wp, oy0 = (int64_t)task * r->s.rows;
    const int64_t rows = oy0 + r->s.rows <= r->oh ? r->s.rows : r->oh - oy0, n = rows * wp;
    float *buf = r->chunks + (size_t)thread * r->chunk_floats;
    float *gws = buf + align16((size_t)(t->cout * r->s.rows * wp));
    for (int64_t ky = 0; ky < t->kh; ky++)
        for (int64_t kx = 0; kx < t->kw; kx++) {
            af_gemm_desc d = af_gemm_desc_default();
            d.isa = t->isa;
            d.M = t->cout;
            d.N = n;
            d.K = t->cin;
            d.packed_a = t->packed[ky * t->kw + kx];
            d.B = r->xp + (oy0 + ky) * wp + kx;
            d.ldb = r->s.plane;
            d.C = buf;
            d.ldc = n;
            d.beta = ky == 0 && kx == 0 ? 0.0f : 1.0f;
            d.workspace = gws;
            d.workspace_size = r->gemm_bytes;
            if (af_sgemm(&d, r->gemm_threads > 1 ? r->pool : NULL) != AF_OK) atomic_store(&r->failed, 1);
        }
    const int64_t hw = r->oh * r->ow;
    float *y0 = r->y + oy0 * r->ow;
    for (int64_t co = 0; co < t->cout; co++)
        for (int64_t i = 0; i < rows; i++)
            memcpy(y0 + co * hw + i * r->ow, buf + co * n + i * wp, (size_t)r->ow * sizeof *buf);
    if (r->epi && r->epi->n_steps)
        r->apply(r->epi, y0, hw, (int)t->cout, (int)(rows * r->ow), 0, oy0 * r->ow, 0);
}

af_status af_conv_taps_run(const af_conv_taps *t, const af_conv_geom *geo, const float *x, float *y, int64_t h,
                           int64_t w, int64_t oh, int64_t ow, const af_epilogue *epi, af_threadpool *pool,
                           void *workspace, size_t workspace_bytes) {
    const int n_threads = af_threadpool_n_threads(pool);
    if (!workspace || af_conv_taps_workspace(t, oh, ow, n_threads) > workspace_bytes)
        return AF_ERR_RUNTIME;
    taps_run r = {.t = t, .geo = geo, .s = split_for(t, oh, ow, n_threads), .x = x, .y = y, .xp = workspace,
                  .h = h, .w = w, .oh = oh, .ow = ow, .epi = epi, .apply = af_epilogue_tile_fn_for(t->isa),
                  .pool = pool};
    r.chunks = r.xp + t->cin * r.s.plane;
    r.chunk_floats = chunk_floats(t, &r.s, n_threads);
    r.gemm_threads = r.s.per_task ? 1 : n_threads;
    r.gemm_bytes = gemm_ws(t, r.s.rows * r.s.wp, r.gemm_threads); /* a shorter last chunk needs no more */
    atomic_init(&r.failed, 0);
    af_threadpool_run(pool, (int)t->cin, pad_task, &r);
    int chunks = (int)((oh + r.s.rows - 1) / r.s.rows);
    if (r.s.per_task) af_threadpool_run(pool, chunks, chunk_task, &r);
    else
        for (int c = 0; c < chunks; c++) chunk_task(&r, c, 0);
    return atomic_load(&r.failed) ? AF_ERR_RUNTIME : AF_OK;
}
