/* Convolution as an implicit GEMM over phase planes (see conv_implicit.h). */
#include "kernels/gemm/conv_implicit.h"

#include <string.h>

#include "kernels/fast/vec_internal.h"
#include "kernels/gemm/gemm_internal.h"
#include "util/alloc.h"

/* A block of output rows reads about this much of the phase planes; it stays in the core's L2
 * (1 MB here) while every weight panel of the task passes over it. */
#define BLOCK_B_BYTES (512 * 1024)

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The phase-plane layout of one geometry. */
typedef struct phases {
    int64_t sy, sx, py, px; /* strides, leading pads */
    int64_t na, nb;         /* phases used: rows a < na, columns b < nb */
    int64_t hq, wq;         /* phase plane size */
    int64_t plane;          /* floats per phase plane (64-byte multiple) */
    int64_t chan_ld;        /* floats per channel: na * nb planes */
    bool in_place;          /* the input is its own (only) phase plane */
} phases;

static phases phases_for(const af_conv_implicit *c, const af_conv_geom *geo, int64_t oh, int64_t ow) {
    phases p = {.sy = geo->stride[0], .sx = geo->stride[1], .py = geo->pad_begin[0], .px = geo->pad_begin[1]};
    p.na = min64(p.sy, c->kh);
    p.nb = min64(p.sx, c->kw);
    p.hq = oh + (c->kh - 1) / p.sy;
    p.wq = ow + (c->kw - 1) / p.sx;
    /* A pointwise convolution reads the input itself: its planes are the phase planes. */
    p.in_place = c->kh == 1 && c->kw == 1 && p.sy == 1 && p.sx == 1 && p.py == 0 && p.px == 0 &&
                 geo->pad_end[0] == 0 && geo->pad_end[1] == 0;
    p.plane = p.in_place ? p.hq * p.wq : (p.hq * p.wq + 15) & ~(int64_t)15;
    p.chan_ld = p.na * p.nb * p.plane;
    return p;
}

/* Few output channels fill one of the pixel-row tile's two channel vectors, and its 14 pixels take
 * a transpose: the tile turns around, 8 channels by 48 pixels. MobileNetV3-L, one thread, in the
 * model: the stem (3 -> 16, 3x3 stride 2, 112x112 out) 0.192-0.197 -> 0.163-0.172 ms; its
 * 16 -> 16 1x1 conv on 112x112 (here instead of the 1x1 GEMM, whose 14-row tiles left a 2-row
 * one) 0.071-0.075 -> 0.057-0.060 ms. */
bool af_conv_implicit_channel_rows(af_isa isa, int64_t cin, int64_t cout) {
    /* A stem turned around too: ResNet-50's (3 -> 64, 7x7 stride 2, 112x112 out), profiled in
     * the model, 1.82-1.90 -> 1.48-1.50 ms at one thread, 1.05-1.17 -> 0.88-0.92 at two (its
     * 3.2 MB output written as whole lines; alone, with the output hot in cache, both tiles
     * took 1.21-1.32 ms). Its 1x1 convs to 64 channels (K = 256) ran 20% slower turned around. */
    const int64_t most = cin <= 4 ? 8 * af_gemm_cfg_avx512_wide.mr : 2 * af_gemm_cfg_avx512_wide.mr;
    return af_cpu_isa_clamp(isa) == AF_ISA_AVX512 && cout <= most;
}

af_status af_conv_implicit_prepare(af_isa isa, const float *w, int64_t cout, int64_t cin, int64_t kh, int64_t kw,
                                   af_conv_implicit *c) {
    memset(c, 0, sizeof *c);
    *c = (af_conv_implicit){.isa = af_cpu_isa_clamp(isa), .cout = cout, .cin = cin, .kh = kh, .kw = kw};
    const int64_t k = cin * kh * kw;
    if (af_conv_implicit_channel_rows(c->isa, cin, cout)) {
        c->channel_rows = true;
        return af_gemm_pack_a_cfg(c->isa, &af_gemm_cfg_avx512_wide, cout, k, w, k, false, &c->w); /* op(A) = W */
    }
    /* W is [cout, K] row-major, i.e. op(B) = W^T stored transposed. */
    return af_gemm_pack_b(c->isa, 1, k, cout, w, k, true, 0, &c->w);
}

void af_conv_implicit_release(af_conv_implicit *c) {
    af_gemm_packed_free(c->w);
    memset(c, 0, sizeof *c);
}

bool af_conv_implicit_fit(const af_conv_implicit *c, const af_conv_geom *geo, int64_t oh, int64_t ow) {
    if (geo->n_sp != 2 || geo->dilation[0] != 1 || geo->dilation[1] != 1 || oh < 1 || ow < 1 ||
        geo->stride[0] < 1 || geo->stride[1] < 1)
        return false;
    const phases p = phases_for(c, geo, oh, ow);
    return p.chan_ld <= INT32_MAX;
}

/* Workspace: the tap offsets (64-byte rounded), then cin channels of phase planes. */
static size_t offsets_bytes(const af_conv_implicit *c) {
    return ((size_t)(c->kh * c->kw) * sizeof(int32_t) + 63) & ~(size_t)63;
}

size_t af_conv_implicit_workspace(const af_conv_implicit *c, const af_conv_geom *geo, int64_t oh, int64_t ow) {
    const phases p = phases_for(c, geo, oh, ow);
    return offsets_bytes(c) + (p.in_place ? 0 : (size_t)(c->cin * p.chan_ld) * sizeof(float));
}

static const af_gemm_isa_cfg *tile_cfg(const af_conv_implicit *c) {
    return c->channel_rows ? &af_gemm_cfg_avx512_wide : af_gemm_isa_cfg_for(c->isa);
}

/* A weight panel (K x panel width floats) larger than CHUNK_ABOVE bytes does not stay in L2 while
 * the tiles of a block pass over it, and each tile streamed all of it from memory: FCN-ResNet50's
 * 3x3 head (2048 -> 512 channels, K = 18432, 2.4 MB panels) ran at 37 GFLOP/s. Such a K runs in
 * chunks of whole channels, each panel chunk within CHUNK_BYTES reused by every tile of the block
 * before the next, the tiles' sums added up in the output. Panels up to 1 MiB (ResNet-50's
 * largest are 0.6 MB) run as before. */
#define CHUNK_ABOVE (1024 * 1024)
#define CHUNK_BYTES (512 * 1024)

/* How many K chunks c's tiles run in (1: K whole). */
static int64_t k_chunks(const af_conv_implicit *c) {
    if (c->channel_rows) return 1;
    const int64_t panel = c->cin * c->kh * c->kw * (int64_t)tile_cfg(c)->nr * (int64_t)sizeof(float);
    if (panel <= CHUNK_ABOVE) return 1;
    return min64(c->cin, ceil_div(panel, CHUNK_BYTES));
}

/* Whether c's tile function runs all of epi, in registers (into *f): not when K runs in chunks,
 * whose sums meet in the output before the epilogue. */
static bool epilogue_in_registers(const af_conv_implicit *c, const af_epilogue *epi, af_gemm_fused *f) {
    const af_gemm_isa_cfg *cfg = tile_cfg(c);
    return (c->channel_rows ? cfg->fused : cfg->conv_fused) && k_chunks(c) == 1 &&
           af_gemm_compile_fused(epi, 0, f) == epi->n_steps;
}

bool af_conv_implicit_residual_in_place(const af_conv_implicit *c, const af_epilogue *epi) {
    af_gemm_fused f;
    return c->w && epi && epilogue_in_registers(c, epi, &f) && af_gemm_residual_in_registers(epi);
}

typedef struct implicit_run {
    const af_conv_implicit *c;
    const af_gemm_isa_cfg *cfg;
    const af_vec_kernels *vk; /* its phase-plane copy */
    phases p;
    const float *x;
    float *y;
    const float *planes;
    const int32_t *tap_off;
    int64_t h, w, oh, ow;
    /* The tiles run along rows of row_len output pixels (the last one may be shorter), row r
     * reading the planes from r * in_stride: the output rows, or for a 1x1 kernel, whose planes
     * are dense, runs of the flattened plane, so 7x7 planes fill whole tiles too. */
    int64_t rows, row_len, in_stride, halo;
    /* A 1x1 kernel's dense planes, split (when > 0): run r is the tiles [run_tiles r / rows,
     * run_tiles (r + 1) / rows) of the flattened plane, row_len and in_stride unused. */
    int64_t run_tiles;
    int64_t rows_per_block, panels_per_group, n_groups;
    int64_t n_chunks; /* K runs in this many chunks of whole channels (k_chunks) */
    bool panel_tasks; /* one row block, one weight panel a task (see choose_tasks) */
    int panel_w, tile_px; /* output channels per weight panel, pixels per tile (at most) */
    int tile_step;        /* tile widths are multiples of this (the last one in a row excepted) */
    const af_epilogue *epi;   /* NULL: none */
    bool in_registers;        /* the whole epilogue is `fused`, run by the tile function */
    af_gemm_fused fused;
} implicit_run;

/* Output pixels [*n0, *n0 + *len) of the flattened output plane that tile row oy computes. */
static void row_pixels(const implicit_run *r, int64_t oy, int64_t *n0, int64_t *len) {
    const int64_t hw = r->oh * r->ow;
    if (r->run_tiles > 0) {
        *n0 = r->run_tiles * oy / r->rows * r->tile_px;
        *len = min64(r->run_tiles * (oy + 1) / r->rows * r->tile_px, hw) - *n0;
    } else {
        *n0 = oy * r->row_len;
        *len = min64(r->row_len, hw - *n0);
    }
}

/* Tile i of the nt (ceil(len / tile_px)) a row of len output pixels runs as: its first pixel in
 * *ox, its width returned. A row's tiles split its vectors evenly (channel rows: 112 pixels as
 * 48 + 32 + 32, not 48 + 48 + 16, whose one-vector tile has 8 accumulators for 8 broadcasts). */
static int row_tile(const implicit_run *r, int64_t len, int64_t i, int64_t nt, int64_t *ox) {
    const int64_t nv = ceil_div(len, r->tile_step);
    *ox = nv * i / nt * r->tile_step;
    return (int)(min64(nv * (i + 1) / nt * r->tile_step, len) - *ox);
}

/* Where the planes of tile row oy, whose first output pixel is n0, start. */
static const float *row_planes(const implicit_run *r, int64_t oy, int64_t n0) {
    return r->planes + (r->run_tiles > 0 ? n0 : oy * r->in_stride);
}

/* Rows [i0, i1) of the column phases of row phase a of input channel ci, and with `last` the
 * padding after each plane (its rounding to 64 bytes). The workspace: never in place here. Row i
 * of phase (a, b) is input row sy i + a - py, columns sx j + b - px. */
static void make_phase_rows(const implicit_run *r, int64_t ci, int64_t a, int64_t i0, int64_t i1, bool last) {
    const phases *p = &r->p;
    float *planes = (float *)r->planes + ci * p->chan_ld + a * p->nb * p->plane;
    if (i1 > i0)
        r->vk->phase_planes(i1 - i0, p->wq, p->sy, p->sx, p->nb, r->x + ci * r->h * r->w, r->h, r->w,
                            p->sy * i0 + a - p->py, -p->px, planes + i0 * p->wq, p->plane);
    if (last)
        for (int64_t b = 0; b < p->nb; b++) {
            float *tail = planes + b * p->plane + p->hq * p->wq;
            memset(tail, 0, (size_t)(p->plane - p->hq * p->wq) * sizeof *tail);
        }
}

/* Task: the column phases of one row phase of one input channel (a stem's 3 channels at stride 2
 * are 6 tasks, where 3 left one of two threads a third of the work). */
static void phases_task(void *ctx, int task, int thread) {
    (void)thread;
    const implicit_run *r = ctx;
    make_phase_rows(r, task / r->p.na, task % r->p.na, 0, r->p.hq, true);
}

/* The phase-plane rows block blk owns: those its own output rows start on, and the rest of the
 * planes for the last block (true returned). A block also reads its halo, the next block's first
 * rows. */
static bool block_phase_rows(const implicit_run *r, int64_t blk, int64_t *i0, int64_t *i1) {
    const int64_t y_lo = blk * r->rows_per_block, y_hi = min64(r->rows, y_lo + r->rows_per_block);
    if (r->c->kh == 1 && r->c->kw == 1) { /* rows are runs of the flattened plane (wq == ow) */
        int64_t n0, len, n1;
        row_pixels(r, y_lo, &n0, &len);
        row_pixels(r, y_hi - 1, &n1, &len);
        *i0 = n0 / r->p.wq;
        *i1 = (n1 + len) / r->p.wq;
    } else {
        *i0 = y_lo;
        *i1 = y_hi;
    }
    if (y_hi < r->rows) return false;
    *i1 = r->p.hq;
    return true;
}

/* Task: the phase-plane rows block `task` owns, of every channel and phase. Run with the same
 * affine split as the tiles, so a thread's tiles read rows its own core wrote (all but a halo):
 * made by channels instead, a block's tiles read half their rows from the other core, a line of
 * which takes ~200 ns to come over on this host (bench/RESULTS.md, session 18). MobileNetV3-L's
 * stem at two threads, alternating profiles: 0.106-0.115 -> 0.092-0.111 ms; ResNet-50's stem and
 * stride-2 layers the same within the noise. */
static void phase_rows_task(void *ctx, int task, int thread) {
    (void)thread;
    const implicit_run *r = ctx;
    int64_t i0, i1;
    const bool last = block_phase_rows(r, task, &i0, &i1);
    for (int64_t ci = 0; ci < r->c->cin; ci++)
        for (int64_t a = 0; a < r->p.na; a++) make_phase_rows(r, ci, a, i0, i1, last);
}

/* One weight panel (output channels [co, co + nc)) over the tiles of rows [y_lo, y_hi), K in
 * r->n_chunks chunks of whole channels: chunk by chunk, every tile of the rows (the panel chunk
 * stays in L2 across them), each tile's sums written (first chunk) or added (the others) into the
 * output, the epilogue over it after the last. Pixel-row tiles only (not channel rows). */
static void chunked_panel(const implicit_run *r, const float *panel, int64_t co, int nc, int64_t y_lo, int64_t y_hi) {
    const af_conv_implicit *c = r->c;
    const af_gemm_isa_cfg *cfg = r->cfg;
    const int PX = r->tile_px, CH = r->panel_w;
    const int64_t taps = c->kh * c->kw, hw = r->oh * r->ow;
    float tmp[AF_GEMV_MAX_W * 16]; /* one tile, CH rows of PX pixels (CH <= 48, PX <= 16) */
    for (int64_t q = 0; q < r->n_chunks; q++) {
        const int64_t ch0 = c->cin * q / r->n_chunks, ch1 = c->cin * (q + 1) / r->n_chunks;
        const bool first = q == 0, last = q + 1 == r->n_chunks;
        for (int64_t oy = y_lo; oy < y_hi; oy++) {
            int64_t n0, len;
            row_pixels(r, oy, &n0, &len);
            const int64_t nt = ceil_div(len, PX);
            for (int64_t i = 0; i < nt; i++) {
                int64_t ox;
                const int np = row_tile(r, len, i, nt, &ox);
                const float *pixels = row_planes(r, oy, n0) + ox + ch0 * r->p.chan_ld;
                float *cp = r->y + co * hw + n0 + ox;
                const af_gemm_tile_args t = {.kc = (ch1 - ch0) * taps,
                                             .a = pixels,
                                             .b = panel + ch0 * taps * CH,
                                             .tap_off = r->tap_off,
                                             .taps = (int)taps,
                                             .chan_ld = r->p.chan_ld,
                                             .c = first ? cp : tmp,
                                             .ldc = first ? hw : PX,
                                             .mr = np,
                                             .nr = nc,
                                             .alpha = 1.0f,
                                             .pf = panel,
                                             .pf_ld = 0};
                cfg->conv_tile(&t);
                if (!first)
                    for (int j = 0; j < nc; j++)
                        for (int p = 0; p < np; p++) cp[j * hw + p] += tmp[j * PX + p];
                if (last && r->epi) cfg->epilogue(r->epi, cp, hw, nc, np, co, n0 + ox, 0);
            }
        }
    }
}

/* Task (block of output rows, group of weight panels): every panel of the group over every tile
 * of the block, so a panel (K x panel_w) is reused from L2 across the tiles, and the block's
 * planes from L2 across the panels. A tile is tile_px pixels of one row by the panel's channels:
 * pixels broadcast and the panel a packed B, or with channel_rows the panel a packed A broadcast
 * and the pixels loaded as vectors. */
static void tile_task(void *ctx, int task, int thread) {
    (void)thread;
    const implicit_run *r = ctx;
    const af_conv_implicit *c = r->c;
    const af_gemm_isa_cfg *cfg = r->cfg;
    const int PX = r->tile_px, CH = r->panel_w;
    const bool rows = c->channel_rows;
    const int64_t K = c->cin * c->kh * c->kw, hw = r->oh * r->ow;
    const int64_t blk = task / r->n_groups, grp = task % r->n_groups;
    const int64_t y_lo = blk * r->rows_per_block, y_hi = min64(r->rows, y_lo + r->rows_per_block);
    const int64_t n_panels = ceil_div(c->cout, CH);
    const int64_t p_lo = grp * r->panels_per_group, p_hi = min64(n_panels, p_lo + r->panels_per_group);
    const float *panels = af_gemm_packed_data(c->w);
    for (int64_t jp = p_lo; jp < p_hi; jp++) {
        const int64_t co = jp * CH;
        const int nc = (int)min64(CH, c->cout - co);
        const float *panel = panels + jp * K * CH;
        /* The tiles of a panel prefetch the next panel, each its share (a row of CH weights is
         * CH / n_tiles floats of prefetch stride per k step; the kernel touches the two lines at
         * its pointer each step): the weights of the large layers stream from DRAM once per run, a
         * latency the hardware prefetcher leaves exposed. All of it from the first tile asked for
         * a row a k step, more than DRAM gives one core (26 GB/s here), and stalled that tile:
         * ResNet-50's 512-channel 3x3 stride-2 layer from cold caches, one thread, 1.40 -> 1.34
         * ms; the whole model 37.5 -> 36.8 ms (one thread), 20.9 -> 20.2 ms (two). (The channel
         * rows' weights are small: no prefetch.) With a panel a task, the next panel is most
         * likely this thread's next task. */
        if (r->n_chunks > 1) {
            chunked_panel(r, panel, co, nc, y_lo, y_hi);
            continue;
        }
        const int64_t p_next_end = r->panel_tasks ? n_panels : p_hi;
        const float *next = !rows && jp + 1 < p_next_end ? panel + K * CH : NULL;
        int64_t n_tiles = 0;
        for (int64_t oy = y_lo; oy < y_hi; oy++) {
            int64_t n0, len;
            row_pixels(r, oy, &n0, &len);
            n_tiles += ceil_div(len, PX);
        }
        const int64_t pf_ld = ceil_div(CH, n_tiles > 0 ? n_tiles : 1), pf_share = pf_ld * K;
        int64_t tile = 0;
        for (int64_t oy = y_lo; oy < y_hi; oy++) {
            int64_t n0, len;
            row_pixels(r, oy, &n0, &len);
            const int64_t nt = ceil_div(len, PX);
            for (int64_t i = 0; i < nt; i++, tile++) {
                int64_t ox;
                const int np = row_tile(r, len, i, nt, &ox);
                const float *pixels = row_planes(r, oy, n0) + ox;
                float *cp = r->y + co * hw + n0 + ox;
                af_gemm_fused ft;
                if (r->in_registers) af_gemm_fused_at(&r->fused, co, n0 + ox, &ft);
                const af_gemm_tile_args t = {.kc = K,
                                             .a = rows ? panel : pixels,
                                             .b = rows ? pixels : panel,
                                             .tap_off = r->tap_off,
                                             .taps = (int)(c->kh * c->kw),
                                             .chan_ld = r->p.chan_ld,
                                             .c = cp,
                                             .ldc = hw,
                                             .mr = rows ? nc : np,
                                             .nr = rows ? np : nc,
                                             .alpha = 1.0f,
                                             .pf = next ? next + tile * pf_share : panel,
                                             .pf_ld = next ? pf_ld : 0,
                                             .fused = r->in_registers ? &ft : NULL};
                if (rows) cfg->conv_rows_tile(&t);
                else cfg->conv_tile(&t);
                if (r->epi && !r->in_registers) cfg->epilogue(r->epi, cp, hw, nc, np, co, n0 + ox, 0);
            }
        }
    }
}

/* Splits the work into blocks of output rows (each within BLOCK_B_BYTES of planes) times groups
 * of weight panels, with at least two tasks per thread when there are several. Each block
 * re-reads its group's weights and each group its block's planes, so while there are too few
 * tasks the larger of the two is split further. */
static void choose_tasks(implicit_run *r, int n_threads) {
    const af_conv_implicit *c = r->c;
    const int64_t n_panels = ceil_div(c->cout, r->panel_w);
    /* A block's rows of planes stay in L2 across the panels (or panel chunks: only the chunk's
     * channels at a time). */
    const int64_t row_bytes =
        r->in_stride * r->p.na * r->p.nb * ceil_div(c->cin, r->n_chunks) * (int64_t)sizeof(float);
    int64_t rows = BLOCK_B_BYTES / (row_bytes > 0 ? row_bytes : 1) - r->halo;
    if (rows < 1) rows = 1;
    int64_t n_blocks = ceil_div(r->rows, rows), n_groups = 1;
    const int64_t w_bytes = c->cout * c->cin * c->kh * c->kw * (int64_t)sizeof(float);
    const int64_t x_bytes = c->cin * r->p.chan_ld * (int64_t)sizeof(float);
    const int64_t want = n_threads > 1 ? 2 * (int64_t)n_threads : 1;
    while (n_blocks * n_groups < want) {
        if ((w_bytes >= x_bytes || n_blocks >= r->rows) && n_groups < n_panels) n_groups++;
        else if (n_blocks < r->rows) n_blocks++;
        else break;
    }
    r->rows_per_block = ceil_div(r->rows, n_blocks);
    /* Split by weight panels only (7x7 and 14x14 planes: one block), a task is one panel: a thread
     * runs its share panel by panel, the block's planes staying in its L2 as with groups, and the
     * thread done first takes single panels from the other's end. Four groups left a thread idle
     * for up to a quarter of the step: MobileNetV3-L's expand convs (30 panels) sat at 8.0% idle
     * in the profile, 6.5-6.8% now; the model at two threads, bench/ab.py, 20 pairs: 0.990 and
     * 0.985 (one thread: untouched, 1.001). ResNet-50 two threads 0.989 and 1.001 (10 pairs). */
    r->panel_tasks = n_threads > 1 && n_blocks == 1 && n_groups > 1;
    if (r->panel_tasks) n_groups = n_panels;
    r->panels_per_group = ceil_div(n_panels, n_groups);
    r->n_groups = ceil_div(n_panels, r->panels_per_group);
}

af_status af_conv_implicit_run(const af_conv_implicit *c, const af_conv_geom *geo, const float *x, float *y,
                               int64_t h, int64_t w, int64_t oh, int64_t ow, const af_epilogue *epi,
                               af_threadpool *pool, void *workspace, size_t workspace_bytes) {
    if (!c->w || !af_conv_implicit_fit(c, geo, oh, ow) || !workspace ||
        af_conv_implicit_workspace(c, geo, oh, ow) > workspace_bytes)
        return AF_ERR_RUNTIME;
    implicit_run r = {.c = c,
                      .cfg = tile_cfg(c),
                      .vk = af_vec_kernels_for(c->isa),
                      .p = phases_for(c, geo, oh, ow),
                      .x = x,
                      .y = y,
                      .h = h,
                      .w = w,
                      .oh = oh,
                      .ow = ow,
                      .epi = epi && epi->n_steps ? epi : NULL};
    r.panel_w = c->channel_rows ? r.cfg->mr : r.cfg->nr;
    r.tile_px = c->channel_rows ? r.cfg->nr : r.cfg->mr;
    r.tile_step = c->channel_rows ? 16 : r.tile_px; /* channel rows: whole vectors of pixels */
    r.in_registers = r.epi && epilogue_in_registers(c, r.epi, &r.fused);
    r.n_chunks = k_chunks(c);
    int32_t *off = workspace;
    for (int64_t ky = 0; ky < c->kh; ky++)
        for (int64_t kx = 0; kx < c->kw; kx++) {
            const int64_t phase = (ky % r.p.sy) * r.p.nb + kx % r.p.sx;
            off[ky * c->kw + kx] = (int32_t)(phase * r.p.plane + (ky / r.p.sy) * r.p.wq + kx / r.p.sx);
        }
    r.tap_off = off;
    if (c->kh == 1 && c->kw == 1) { /* dense planes (wq == ow): runs of 4 tiles */
        r.row_len = r.in_stride = 4 * (int64_t)r.tile_px;
        r.rows = ceil_div(oh * ow, r.row_len);
    } else {
        r.rows = oh, r.row_len = ow, r.in_stride = r.p.wq, r.halo = (c->kh - 1) / r.p.sy;
    }
    r.planes = r.p.in_place ? x : (const float *)((char *)workspace + offsets_bytes(c));
    choose_tasks(&r, af_threadpool_n_threads(pool));
    if (c->kh == 1 && c->kw == 1 && !c->channel_rows) {
        /* Dense planes split into blocks of whole runs left them uneven (14x14: 14 tiles as runs of
         * 4 + 4 | 4 + 2, one thread's block a third larger than the other's): each block is one
         * run of an equal share of the tiles instead, each block's bounds rounded on their own:
         * four blocks of 14 tiles run 3 + 4 | 3 + 4, where runs of ceil(14 / 4) tiles made
         * 4 + 4 | 4 + 2 (MobileNetV3-L's 14x14 projections at two threads: 15-17% -> 7-8% idle,
         * 0.87-0.92x the time; bench/inproc_ab.c, 60 pairs). */
        const int64_t n_blocks = ceil_div(r.rows, r.rows_per_block), tiles = ceil_div(oh * ow, r.tile_px);
        r.run_tiles = tiles;
        r.rows = min64(n_blocks, tiles);
        r.rows_per_block = 1;
    }
    const int64_t blocks = ceil_div(r.rows, r.rows_per_block);
    if (c->cin * r.p.na > INT32_MAX || blocks * r.n_groups > INT32_MAX) return AF_ERR_LIMIT;
    if (!r.p.in_place) {
        /* Tiles split by rows across threads: each thread makes the phase rows of its blocks. */
        const int n_threads = af_threadpool_n_threads(pool);
        if (r.n_groups == 1 && n_threads > 1 && blocks >= n_threads)
            af_threadpool_run_affine(pool, (int)blocks, phase_rows_task, &r);
        else
            af_threadpool_run(pool, (int)(c->cin * r.p.na), phases_task, &r);
    }
    af_threadpool_run_affine(pool, (int)(blocks * r.n_groups), tile_task, &r); /* row blocks outermost */
    return AF_OK;
}
