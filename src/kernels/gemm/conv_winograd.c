/* 3x3 convolution by Winograd's F(4x4, 3x3) or F(2x2, 3x3) (see conv_winograd.h). */
#include "kernels/gemm/conv_winograd.h"

#include <string.h>

#include "kernels/fast/vec_internal.h"
#include "kernels/gemm/gemm_internal.h"
#include "util/alloc.h"
#include "util/cpu.h"

#define MAX_ALPHA 6 /* input pixels per tile side, m + 3 - 1, for the largest tile */

/* A block of tiles whose transformed input ((m + 2)^2 cin floats a tile) stays in L2 while every
 * panel of U passes over it. */
#define BLOCK_V_BYTES (512 * 1024)

/* How many channels ahead the input transform asks for its input rows (see transform_input). */
#define PREFETCH_CHANNELS 2

/* The channels a product tile sums before adding them into its running total (the direct
 * kernels: 256 k steps). The output transform takes differences of the products' sums, so their
 * rounding weighs more than a direct sum's: RMS error against float64, |y| about 1
 * (bench/conv_accuracy.py), F(2x2) over 256 channels 4.7e-7 in blocks of 256, 2.1e-7 in blocks
 * of 32 (ONNX Runtime's direct sums 2.1e-7, ours 2.7e-7); F(4x4) over 64 channels 1.7e-6 ->
 * 1.3e-6, at no measured cost. 16 took F(4x4) to 1.1e-6 (8: 1.0e-6, the transforms' floor) and
 * cost ResNet-50 1.009x its time at one thread. */
#define FLUSH_CHANNELS 32

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

int af_conv_winograd_tile(const af_conv_geom *geo, int64_t kh, int64_t kw, int64_t groups, int64_t cin,
                          int64_t cout, int64_t oh, int64_t ow, int n_threads) {
    if (geo->n_sp != 2 || kh != 3 || kw != 3 || groups != 1 || geo->stride[0] != 1 || geo->stride[1] != 1 ||
        geo->dilation[0] != 1 || geo->dilation[1] != 1 || cin < 16 || cout < 16 || oh < 1 || ow < 1)
        return 0; /* few channels leave the transforms to dominate */
    /* Each element of U serves every tile, so with few tiles the products stream (m + 2)^2 / 9 times
     * the direct kernel's weights for little work: on ResNet-50's 14x14 layers (256 channels)
     * F(4x4) has 16 tiles and ran 5-10% slower than the implicit GEMM, F(2x2) has 49; the 28x28
     * (49 tiles of 4x4) and 56x56 (196) layers ran 1.9x faster on F(4x4). F(2x2) on the 7x7
     * layers (16 tiles, 512 channels) ran 20-30% faster than the implicit GEMM on one thread;
     * on more, each thread takes every tile and its share of the output channels
     * (layout_for), so it needs a 32-channel panel per thread. Those figures are AMD EPYC ones. On
     * Intel (a Xeon of family 6, model 207) the 7x7 layers ran 9-15% slower on F(2x2) than on the
     * implicit GEMM on one thread too, profiled in the model with bench/inproc_ab.c; without it,
     * one thread: ResNet-50 0.990 (80 pairs), ResNet-18 0.929, DenseNet-121 0.990, Inception-v3
     * (8x8) 1.006 (40 pairs each; bench/RESULTS.md, session 28). There it takes 32 tiles. */
    if (n_threads < 1) n_threads = 1;
    if (ceil_div(oh, 4) * ceil_div(ow, 4) >= 32) return 4;
    const int64_t tiles2 = ceil_div(oh, 2) * ceil_div(ow, 2);
    const bool few_tiles_pay = af_cpu_info_get()->vendor != AF_CPU_VENDOR_INTEL;
    if (tiles2 >= 32 || (few_tiles_pay && tiles2 >= 16 && cout >= 32 * (int64_t)n_threads)) return 2;
    return 0;
}

/* One position of U for af_gemm_pack_b_each: U[xi][k] = (G g_k G^T)[i][j], xi = i alpha + j. The
 * items come in order, alpha of them per row i, so row i of G g_k (3 values per k) is made once
 * per i into gg and serves the alpha positions of that row. */
typedef struct u_fill {
    const double (*G)[3];
    const float *w;
    int alpha;
    int64_t plane; /* cout * cin */
    double *gg;    /* [plane][3]: row gg_i of G g_k */
    int gg_i;      /* the row gg holds; -1: none */
} u_fill;

static void fill_u(void *ctx, int64_t xi, float *dst) {
    u_fill *f = ctx;
    const double(*G)[3] = f->G;
    const int i = (int)(xi / f->alpha), j = (int)(xi % f->alpha);
    if (f->gg_i != i) {
        for (int64_t k = 0; k < f->plane; k++) {
            const float *g = f->w + k * 9;
            for (int b = 0; b < 3; b++) f->gg[3 * k + b] = G[i][0] * g[b] + G[i][1] * g[3 + b] + G[i][2] * g[6 + b];
        }
        f->gg_i = i;
    }
    for (int64_t k = 0; k < f->plane; k++) {
        const double *r = f->gg + 3 * k;
        dst[k] = (float)(r[0] * G[j][0] + r[1] * G[j][1] + r[2] * G[j][2]);
    }
}

af_status af_conv_winograd_prepare(af_isa isa, int m, const float *w, int64_t cout, int64_t cin,
                                   af_conv_winograd *c) {
    memset(c, 0, sizeof *c);
    const int alpha = m + 2, xi = alpha * alpha;
    if ((m != 2 && m != 4) || cout < 1 || cin < 1 || cout > INT32_MAX / xi || cin > INT32_MAX / xi)
        return AF_ERR_INVALID_ARGUMENT;
    *c = (af_conv_winograd){.isa = af_cpu_isa_clamp(isa), .m = m, .cout = cout, .cin = cin};
    /* U[xi][co][ci] = (G g G^T)[xi]: rows of G are the kernel's values at the interpolation
     * points (scaled so that A^T and B^T stay small integers) and at infinity. */
    static const double G4[6][3] = {{1.0 / 4, 0, 0},
                                    {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                    {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                    {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                    {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                    {0, 0, 1}};
    static const double G2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    u_fill f = {.G = m == 4 ? G4 : G2, .w = w, .alpha = alpha, .plane = cout * cin, .gg_i = -1};
    f.gg = af_malloc((size_t)(3 * f.plane) * sizeof *f.gg);
    if (!f.gg) return AF_ERR_OUT_OF_MEMORY;
    /* U[xi] is stored [cout][cin]: op(B) = U[xi]^T (cin x cout) transposed; made one position at
     * a time, so that only one position's U exists unpacked (ResNet-50's 512-channel layers' U
     * is 16 MB at F(2x2), gg 6 MB). */
    af_status st = af_gemm_pack_b_each(c->isa, xi, cin, cout, cin, true, fill_u, &f, &c->u);
    af_free(f.gg);
    return st;
}

void af_conv_winograd_release(af_conv_winograd *c) {
    af_gemm_packed_free(c->u);
    memset(c, 0, sizeof *c);
}

/* The tiling of one output plane into blocks of tile rows, and each thread's scratch. */
typedef struct wino_layout {
    int64_t nty, ntx;        /* tile rows and columns */
    int64_t n_blocks;        /* block b: tile rows [b nty / n_blocks, (b + 1) nty / n_blocks) */
    int64_t n_groups;        /* group g: panels [g np / n_groups, (g + 1) np / n_groups) of np */
    size_t v_off, m_off, px_off, thread_bytes, total;
} wino_layout;

static bool layout_for(const af_conv_winograd *c, int64_t oh, int64_t ow, int n_threads, int mr, int nr,
                       wino_layout *l) {
    if (oh < 1 || ow < 1 || oh > INT32_MAX || ow > INT32_MAX || n_threads < 1) return false;
    const int64_t m = c->m, xi = (m + 2) * (m + 2);
    l->nty = ceil_div(oh, m);
    l->ntx = ceil_div(ow, m);
    /* Blocks of tiles whose transformed input stays in L2, at least MR tiles, and a block for
     * every thread. */
    int64_t rows_max = BLOCK_V_BYTES / (xi * c->cin * (int64_t)sizeof(float)) / l->ntx;
    if (rows_max * l->ntx < mr) rows_max = ceil_div(mr, l->ntx);
    if (rows_max < 1) rows_max = 1;
    int64_t n_blocks = ceil_div(l->nty, rows_max);
    /* Tile rows that divide unevenly over the threads (ResNet-50's 28x28 and 14x14 layers: 7 rows,
     * blocks of 3 and 4) are not split: the threads split the panels of output channels instead,
     * each transforming every block's input itself and streaming only its share of U. Two
     * threads, 28x28 (F(4x4), 128 channels) 340 -> 290 us, 14x14 (F(2x2), 256) 400 -> 365 us; on
     * the 56x56 layer (14 rows, 64 channels) the repeated transform cost more than it saved,
     * 300 -> 325 us. So are rows too few to give each thread two tiles of MR (ResNet-50's 7x7
     * layers: 16 tiles, 8 per thread), where the products' rows would be mostly empty: two
     * threads, 0.93-0.99 ms against the implicit GEMM's 1.12 (one thread's F(2x2) 1.71). */
    const int64_t n_panels = ceil_div(c->cout, nr);
    const bool few_tiles = l->nty / n_threads * l->ntx < 2 * mr;
    l->n_groups = n_threads > 1 && (l->nty % n_threads != 0 || few_tiles) && n_panels >= n_threads ? n_threads : 1;
    /* Otherwise rows spread evenly over a multiple of n_threads blocks, so the threads' shares
     * are equal, and no more blocks than that: every block streams all of U. */
    if (l->n_groups == 1 && n_threads > 1)
        n_blocks = min64(l->nty, ceil_div(max64(n_blocks, (int64_t)n_threads), n_threads) * n_threads);
    l->n_blocks = n_blocks;
    /* Scratch is sized for the largest block any thread count picks (one thread's), so a
     * workspace planned for n threads serves runs on fewer. */
    const int64_t bt = min64(l->nty, rows_max) * l->ntx;
    if (bt > (INT64_C(1) << 30) / (xi * (c->cin > nr ? c->cin : nr))) return false;
    size_t at = 0;
    l->v_off = at;
    at += round64((size_t)(xi * c->cin * bt) * sizeof(float));
    l->m_off = at;
    at += round64((size_t)(xi * nr * bt) * sizeof(float));
    l->px_off = at;
    at += round64((size_t)(m * m * bt) * sizeof(float));
    l->thread_bytes = at;
    l->total = (size_t)n_threads * at;
    return true;
}

size_t af_conv_winograd_workspace(const af_conv_winograd *c, int64_t oh, int64_t ow, int n_threads) {
    const af_gemm_isa_cfg *cfg = af_gemm_isa_cfg_for(c->isa);
    wino_layout l;
    return layout_for(c, oh, ow, n_threads, cfg->mr, cfg->nr, &l) ? l.total : 0;
}

typedef struct wino_run {
    const af_conv_winograd *c;
    const af_gemm_isa_cfg *cfg;
    const af_vec_kernels *vk;
    wino_layout l;
    const float *x;
    float *y;
    int64_t h, w, oh, ow, pt, pl; /* input and output sizes, leading pads */
    af_threadpool *pool;
    char *scratch; /* each thread's where the pool has none for it */
    const af_epilogue *epi; /* NULL: none */
} wino_run;

/* One block's input transform: for each input channel and tile row, V[ci][xi][t] for the
 * block's tiles t (channel-major: each channel's transform writes consecutive rows), read from
 * the tile row's m + 2 input rows. */
static void transform_input(const wino_run *r, int64_t ty0, int64_t n_rows, float *v) {
    const wino_layout *l = &r->l;
    const int m = r->c->m, alpha = m + 2, xi = alpha * alpha;
    const int64_t bt = n_rows * l->ntx;
    /* The block's input rows of channel ci + PREFETCH_CHANNELS are asked for while channel ci
     * runs: the convolution before this one often wrote them on the other core, and such lines
     * arrive at the latency of a line between the cores unless asked for ahead. Two threads,
     * input written by pixel halves (as in the model): 28x28 F(4x4) 507-527 -> 388-430 us, 14x14
     * F(2x2) 548-597 -> 464-499 us; one thread unchanged. */
    const int64_t y0 = max64(m * ty0 - r->pt, 0), y1 = min64(m * (ty0 + n_rows) + 2 - r->pt, r->h);
    for (int64_t ci = 0; ci < r->c->cin; ci++) {
        const float *in = r->x + ci * r->h * r->w;
        if (ci + PREFETCH_CHANNELS < r->c->cin) {
            const float *ahead = in + PREFETCH_CHANNELS * r->h * r->w;
            for (int64_t k = y0 * r->w; k < y1 * r->w; k += 16) __builtin_prefetch(ahead + k, 0, 3);
            if (y1 > y0) __builtin_prefetch(ahead + y1 * r->w - 1, 0, 3); /* the last line */
        }
        for (int64_t j = 0; j < n_rows; j++) {
            const float *rows[MAX_ALPHA];
            for (int i = 0; i < alpha; i++) {
                const int64_t iy = m * (ty0 + j) + i - r->pt;
                rows[i] = iy >= 0 && iy < r->h ? in + iy * r->w : NULL;
            }
            r->vk->wino_input(m, l->ntx, rows, r->pl, r->w, v + ci * xi * bt + j * l->ntx, bt);
        }
    }
}

/* One block, one panel of NR output channels: M[co][xi] = U[xi] V[xi] for the (m + 2)^2
 * positions on the convolution tile (tiles broadcast, one channel of V[xi] per k step), then each
 * channel's output transform, interleaved into its output rows, and the epilogue on those rows
 * while in L1. more: the task's next panel follows. */
static void panel_products(const wino_run *r, int64_t ty0, int64_t n_rows, int64_t co, bool more, char *scratch,
                           const float *v) {
    const af_conv_winograd *c = r->c;
    const af_gemm_isa_cfg *cfg = r->cfg;
    const wino_layout *l = &r->l;
    const int MR = cfg->mr, NR = cfg->nr, nr = (int)min64(NR, c->cout - co), m = c->m, xi_n = (m + 2) * (m + 2);
    const int64_t ntx = l->ntx, bt = n_rows * ntx, hw = r->oh * r->ow;
    float *mp = (float *)(scratch + l->m_off), *px = (float *)(scratch + l->px_off);
    static const int32_t zero_offset = 0;
    for (int64_t xi = 0; xi < xi_n; xi++) {
        const float *u = af_gemm_packed_item(c->u, xi) + co * c->cin;
        /* The first tile prefetches the next position's panel (see conv_implicit.c), the last
         * position's the next panel's first. */
        const float *next = xi + 1 < xi_n ? af_gemm_packed_item(c->u, xi + 1) + co * c->cin
                            : more       ? af_gemm_packed_item(c->u, 0) + (co + NR) * c->cin
                                         : u;
        for (int64_t t = 0; t < bt; t += MR) {
            const af_gemm_tile_args a = {.kc = c->cin,
                                         .a = v + xi * bt + t,
                                         .tap_off = &zero_offset,
                                         .taps = 1,
                                         .chan_ld = xi_n * bt,
                                         .flush_ch = FLUSH_CHANNELS,
                                         .b = u,
                                         .c = mp + xi * bt + t,
                                         .ldc = xi_n * bt,
                                         .mr = (int)min64(MR, bt - t),
                                         .nr = nr,
                                         .alpha = 1.0f,
                                         .pf = t == 0 ? next : u,
                                         .pf_ld = t == 0 ? NR : 0};
            cfg->conv_tile(&a);
        }
    }
    const int64_t full_tx = r->ow / m; /* tiles whose m columns are all inside */
    const int64_t y0 = m * ty0, y1 = min64(r->oh, m * (ty0 + n_rows));
    for (int j = 0; j < nr; j++) {
        r->vk->wino_output(m, bt, mp + j * xi_n * bt, bt, px, bt);
        float *plane = r->y + (co + j) * hw;
        for (int64_t oy = y0; oy < y1; oy++) {
            const int64_t a = oy % m, t0 = (oy / m - ty0) * ntx;
            float *out = plane + oy * r->ow;
            const float *p = px + (m * a) * bt + t0;
            r->vk->interleave(m, full_tx, p, bt, out);
            for (int64_t ox = m * full_tx; ox < r->ow; ox++) out[ox] = p[(ox % m) * bt + ox / m];
        }
        if (r->epi)
            cfg->epilogue(r->epi, plane + y0 * r->ow, hw, 1, (int)((y1 - y0) * r->ow), co + j, y0 * r->ow, 0);
    }
}

/* One block of tile rows and one group of output-channel panels: the block's transformed input,
 * its products and outputs all stay in this thread's scratch, in L2. Task t is group
 * t / n_blocks, block t % n_blocks, so a thread's contiguous share is one group. */
static void block_task(void *ctx, int task, int thread) {
    const wino_run *r = ctx;
    const wino_layout *l = &r->l;
    char *scratch = af_threadpool_scratch_or(r->pool, thread, l->thread_bytes,
                                             r->scratch + (size_t)thread * l->thread_bytes);
    float *v = (float *)(scratch + l->v_off);
    const int64_t blk = task % l->n_blocks, grp = task / l->n_blocks, nr = r->cfg->nr;
    const int64_t ty0 = blk * l->nty / l->n_blocks, n_rows = (blk + 1) * l->nty / l->n_blocks - ty0;
    const int64_t n_panels = ceil_div(r->c->cout, nr);
    const int64_t p0 = grp * n_panels / l->n_groups, p1 = (grp + 1) * n_panels / l->n_groups;
    transform_input(r, ty0, n_rows, v);
    for (int64_t p = p0; p < p1; p++) panel_products(r, ty0, n_rows, p * nr, p + 1 < p1, scratch, v);
}

af_status af_conv_winograd_run(const af_conv_winograd *c, const af_conv_geom *geo, const float *x, float *y,
                               int64_t h, int64_t w, int64_t oh, int64_t ow, const af_epilogue *epi,
                               af_threadpool *pool, void *workspace, size_t workspace_bytes) {
    wino_run r = {.c = c, .cfg = af_gemm_isa_cfg_for(c->isa), .vk = af_vec_kernels_for(c->isa), .x = x, .y = y,
                  .h = h, .w = w, .oh = oh, .ow = ow, .epi = epi && epi->n_steps ? epi : NULL,
                  .pool = pool, .scratch = workspace};
    /* Any plane size runs (a smaller one than prepared for, with dynamic shapes): the tile
     * thresholds of af_conv_winograd_tile are for speed only. */
    const bool unit = geo->n_sp == 2 && geo->stride[0] == 1 && geo->stride[1] == 1 && geo->dilation[0] == 1 &&
                      geo->dilation[1] == 1;
    if (!c->u || !unit ||
        !layout_for(c, oh, ow, af_threadpool_n_threads(pool), r.cfg->mr, r.cfg->nr, &r.l) || !workspace ||
        r.l.total > workspace_bytes || oh * ow > INT32_MAX)
        return AF_ERR_RUNTIME;
    r.pt = geo->pad_begin[0];
    r.pl = geo->pad_begin[1];
    if (r.l.n_blocks * r.l.n_groups > INT32_MAX) return AF_ERR_LIMIT;
    af_threadpool_run_affine(pool, (int)(r.l.n_blocks * r.l.n_groups), block_task, &r);
    return AF_OK;
}
