/* The GEMM driver: argument checks, prepacking, cache blocking, the partition into tasks for the
 * thread pool, and the loops that feed the per-ISA microkernels and epilogue appliers. */
#include "kernels/gemm/gemm.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm/gemm_internal.h"
#include "util/alloc.h"
#include "util/denormals.h"

struct af_gemm_packed {
    af_isa isa;
    const af_gemm_isa_cfg *cfg; /* the tile its panels are for */
    bool is_b;           /* panels of NR columns of op(B); else of MR rows of op(A) */
    int w;               /* panel width (MR or NR of cfg) */
    int64_t batch;       /* 1: shared by every batch item */
    int64_t rows, K;     /* rows: M for A, N for B */
    int64_t item_stride; /* floats per batch item: panels * K * w */
    size_t bytes;
    float *data;
};

const af_gemm_isa_cfg *af_gemm_isa_cfg_for(af_isa isa) {
    switch (isa) {
    case AF_ISA_AVX512: return &af_gemm_cfg_avx512;
    case AF_ISA_AVX2: return &af_gemm_cfg_avx2;
    default: return &af_gemm_cfg_scalar;
    }
}

const float *af_gemm_packed_data(const af_gemm_packed *p) { return p->data; }

void af_gemm_tile_shape(af_isa isa, int *mr, int *nr) {
    const af_gemm_isa_cfg *cfg = af_gemm_isa_cfg_for(af_cpu_isa_clamp(isa));
    *mr = cfg->mr;
    *nr = cfg->nr;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

af_gemm_desc af_gemm_desc_default(void) {
    return (af_gemm_desc){.batch = 1, .alpha = 1.0f, .beta = 0.0f, .isa = af_cpu_isa()};
}

/* ---- prepacking --------------------------------------------------------------------------------- */

/* Packs op(A) or op(B) for the tile of cfg. lanes_contiguous: whether consecutive lanes (rows of
 * op(A) / columns of op(B)) are adjacent in memory, i.e. A transposed or B not transposed. Item b
 * comes from src + b * stride, or, when fill is set, from fill(ctx, b, item) writing it into one
 * item of scratch (ld as for src). */
static af_status pack_with(const af_gemm_isa_cfg *cfg, af_isa isa, bool is_b, int64_t batch, int64_t rows, int64_t K,
                           const float *src, int64_t ld, bool lanes_contiguous, int64_t stride, af_gemm_fill_fn fill,
                           void *ctx, af_gemm_packed **out) {
    *out = NULL;
    if (batch < 1 || rows < 1 || K < 1 || (!src && !fill) || ld < (lanes_contiguous ? rows : K) || stride < 0)
        return AF_ERR_INVALID_ARGUMENT;
    const int w = is_b ? cfg->nr : cfg->mr;
    const int64_t panels = ceil_div(rows, w);
    int64_t item, total, src_floats = 0;
    if (!af_mul_i64(panels, K, &item) || !af_mul_i64(item, w, &item) || !af_mul_i64(item, batch, &total) ||
        (uint64_t)total > SIZE_MAX / sizeof(float) ||
        (fill && (!af_mul_i64(lanes_contiguous ? K : rows, ld, &src_floats) ||
                  (uint64_t)src_floats > SIZE_MAX / sizeof(float))))
        return AF_ERR_INVALID_ARGUMENT;
    af_gemm_packed *p = af_malloc(sizeof *p);
    float *scratch = fill ? af_malloc((size_t)src_floats * sizeof *scratch) : NULL;
    if (!p || (fill && !scratch)) {
        af_free(p);
        af_free(scratch);
        return AF_ERR_OUT_OF_MEMORY;
    }
    *p = (af_gemm_packed){.isa = isa, .cfg = cfg, .is_b = is_b, .w = w, .batch = batch, .rows = rows, .K = K,
                          .item_stride = item, .bytes = (size_t)total * sizeof(float)};
    p->data = af_malloc_aligned(p->bytes);
    if (!p->data) {
        af_free(p);
        af_free(scratch);
        return AF_ERR_OUT_OF_MEMORY;
    }
    for (int64_t b = 0; b < batch; b++) {
        if (fill) fill(ctx, b, scratch);
        cfg->pack(fill ? scratch : src + b * stride, ld, lanes_contiguous, rows, w, K, p->data + b * item);
    }
    af_free(scratch);
    *out = p;
    return AF_OK;
}

/* pack_with for the isa's tile, or its 8x48 one (wide, AVX-512). */
static af_status pack_operand(af_isa isa, bool wide, bool is_b, int64_t batch, int64_t rows, int64_t K,
                              const float *src, int64_t ld, bool lanes_contiguous, int64_t stride, af_gemm_fill_fn fill,
                              void *ctx, af_gemm_packed **out) {
    isa = af_cpu_isa_clamp(isa);
    const af_gemm_isa_cfg *cfg = wide && isa == AF_ISA_AVX512 ? &af_gemm_cfg_avx512_wide : af_gemm_isa_cfg_for(isa);
    return pack_with(cfg, isa, is_b, batch, rows, K, src, ld, lanes_contiguous, stride, fill, ctx, out);
}

af_status af_gemm_pack_a_cfg(af_isa isa, const af_gemm_isa_cfg *cfg, int64_t M, int64_t K, const float *A,
                             int64_t lda, bool trans_a, af_gemm_packed **out) {
    return pack_with(cfg, af_cpu_isa_clamp(isa), false, 1, M, K, A, lda, trans_a, 0, NULL, NULL, out);
}

af_status af_gemm_pack_a(af_isa isa, int64_t batch, int64_t M, int64_t K, const float *A, int64_t lda, bool trans_a,
                         int64_t stride_a, af_gemm_packed **out) {
    return pack_operand(isa, false, false, batch, M, K, A, lda, trans_a, stride_a, NULL, NULL, out);
}

af_status af_gemm_pack_b(af_isa isa, int64_t batch, int64_t K, int64_t N, const float *B, int64_t ldb, bool trans_b,
                         int64_t stride_b, af_gemm_packed **out) {
    return pack_operand(isa, false, true, batch, N, K, B, ldb, !trans_b, stride_b, NULL, NULL, out);
}

int64_t af_gemm_narrow_rows(void) { return af_cpu_info_get()->vendor == AF_CPU_VENDOR_INTEL ? 257 : 128; }

af_status af_gemm_pack_b_for_rows(af_isa isa, int64_t rows, int64_t batch, int64_t K, int64_t N, const float *B,
                                  int64_t ldb, bool trans_b, int64_t stride_b, af_gemm_packed **out) {
    const bool wide = rows == 0 || (rows >= 8 && rows < af_gemm_narrow_rows());
    return pack_operand(isa, wide, true, batch, N, K, B, ldb, !trans_b, stride_b, NULL, NULL, out);
}

af_status af_gemm_pack_b_each(af_isa isa, int64_t batch, int64_t K, int64_t N, int64_t ldb, bool trans_b,
                              af_gemm_fill_fn fill, void *ctx, af_gemm_packed **out) {
    return pack_operand(isa, false, true, batch, N, K, NULL, ldb, !trans_b, 0, fill, ctx, out);
}

/* The tile a GEMM runs: its prepacked operands', else the isa's own. */
static const af_gemm_isa_cfg *desc_cfg(const af_gemm_desc *d, af_isa isa) {
    if (d->packed_b) return d->packed_b->cfg;
    if (d->packed_a) return d->packed_a->cfg;
    return af_gemm_isa_cfg_for(isa);
}

void af_gemm_packed_free(af_gemm_packed *p) {
    if (!p) return;
    af_free_aligned(p->data);
    af_free(p);
}

size_t af_gemm_packed_bytes(const af_gemm_packed *p) { return p ? p->bytes : 0; }

/* Every ISA's packer lays panel p of w lanes out as K rows of w: lane l at k is
 * data[(l / w) K w + k w + l % w] (the pad lanes of the last panel are zeros). */
void af_gemm_packed_unpack(const af_gemm_packed *p, float *dst) {
    for (int64_t l = 0; l < p->rows; l++) {
        const float *panel = p->data + (l / p->w) * p->K * p->w + l % p->w;
        for (int64_t k = 0; k < p->K; k++) dst[l * p->K + k] = panel[k * p->w];
    }
}

/* ---- blocking ----------------------------------------------------------------------------------- */

/* Cache blocking, fixed by the isa, the cache sizes, K and the desc's k_block only (never by the
 * thread count, so the summation order, and hence every result bit, is the same for any number of
 * threads). Loop order per task: N blocks (nc) > K blocks (kc) > M blocks (mc) > B panels (NR) >
 * A panels (MR), so a B panel is reused from L1/L2 by every A panel of the M block, and the A
 * block from L2 by every B panel:
 *   kc: K is cut into equal blocks of at most KC_MAX (or the desc's k_block where shorter), so C
 *       is read back only every kc steps.
 *       768 on a Zen 5 host (1 MB L2, 48 KB L1, where a B panel and an A panel stream from L2):
 *       BERT-base's 128x768x768, 128x3072x768 and 128x768x3072 with cold weights 193-200 ->
 *       200-205 GFLOP/s at one thread against 320 (with the whole-row column block below);
 *       ResNet-50 and MobileNetV3-L the same within noise;
 *   mc: the rows of A per block (mc x kc in about half of L2);
 *   nc: the columns of B per block (kc x nc in about half of L2). */
typedef struct blocking {
    int64_t kc, n_kb; /* block length and count of K blocks */
    int64_t mc, nc;   /* multiples of MR and NR */
} blocking;

#define KC_MAX 768

static blocking choose_blocking(const af_gemm_isa_cfg *cfg, const af_gemm_desc *d) {
    const af_cpu_info *ci = af_cpu_info_get();
    const int64_t K = d->K, kc_max = d->k_block > 0 && d->k_block < KC_MAX ? d->k_block : KC_MAX;
    blocking bl;
    bl.n_kb = K > 0 ? ceil_div(K, kc_max) : 1;
    bl.kc = K > 0 ? ceil_div(K, bl.n_kb) : 0;
    const int64_t kc_bytes = max64(bl.kc, 1) * (int64_t)sizeof(float);
    const int64_t half_l2 = (int64_t)ci->l2 / 2;
    bl.mc = max64(1, half_l2 / (kc_bytes * cfg->mr)) * cfg->mr;
    bl.nc = max64(1, half_l2 / (kc_bytes * cfg->nr)) * cfg->nr;
    return bl;
}

/* ---- the run ------------------------------------------------------------------------------------ */

typedef struct gemm_run {
    const af_gemm_desc *d;
    const af_gemm_isa_cfg *cfg;
    blocking bl;
    int64_t tm, tn;     /* task tile: rows and columns of C per task (multiples of MR, NR) */
    int64_t n_mt, n_nt; /* tasks per batch item along M and N */
    af_threadpool *pool;
    float *ws;          /* each thread's blocks where the pool has no scratch for it */
    int64_t ws_floats;  /* per thread */
    bool rows_outer;    /* each A panel sweeps the block's B panels (see choose_order) */
    bool even_rows;     /* A's rows spread evenly over its panels (see tile_row) */
} gemm_run;

/* The first row of row tile p of a row block of mcur rows (p up to the tile count, ceil(mcur /
 * MR), whose "first row" is mcur). A tile is one packed A panel. Where this GEMM packs all of A
 * into one row block's panels (activations times weights packed as B), its rows spread evenly
 * over them: 128 rows on the 14x32 tile as 8 x 13 + 2 x 12, not 9 x 14 + 2, whose 2-row tile
 * has 4 accumulators for 2 B loads a k step (at 128 rows, 128x768x3072 took 6% longer than at
 * 126). B packed by af_gemm_pack_b, one thread, hot, medians of 6 alternating runs: 128x768x768
 * 0.73 -> 0.72 ms, 128x2304x768 2.19 -> 2.16, 128x3072x768 2.96 -> 2.90. (BERT's MatMuls pack
 * their weights for the 8x48 tile, which 128 rows fill.) Otherwise (A prepacked, or split over
 * tasks and blocks) tiles are MR rows. */
static int64_t tile_row(const gemm_run *r, int64_t mcur, int64_t p) {
    const int64_t MR = r->cfg->mr;
    if (r->even_rows) return mcur * p / ceil_div(mcur, MR);
    return min64(p * MR, mcur);
}

/* Floats of workspace one thread needs: the A block and the B block it packs. */
static int64_t ws_floats_per_thread(const af_gemm_desc *d, const af_gemm_isa_cfg *cfg, const blocking *bl) {
    int64_t n = 0;
    if (!d->packed_a) n += min64(bl->mc, ceil_div(d->M, cfg->mr) * cfg->mr) * bl->kc;
    if (!d->packed_b) n += min64(bl->nc, ceil_div(d->N, cfg->nr) * cfg->nr) * bl->kc;
    return (n + 15) & ~(int64_t)15; /* keep each thread's slice 64-byte aligned */
}

/* Two threads or more, B prepacked and A not, one batch item whose rows fit one row block (a
 * transformer's linear layers): A is packed once, by all threads, into the workspace in a
 * prepacked operand's layout, and the GEMM then runs on it as on a prepacked A. Packing in each
 * task instead repeated it per task (each task's A is all of A's rows), so a GEMM took one task
 * per thread, and a thread the host slowed left the other nothing to take over: BERT-base at two
 * threads beside a busy process took 7% longer than with two tasks per thread. */
static bool shared_a(const af_gemm_desc *d, const af_gemm_isa_cfg *cfg, const blocking *bl, int n_threads) {
    return n_threads > 1 && d->packed_b && !d->packed_a && d->batch == 1 && d->K > 0 &&
           ceil_div(d->M, cfg->mr) * cfg->mr <= bl->mc;
}

static int64_t shared_a_floats(const af_gemm_desc *d, const af_gemm_isa_cfg *cfg) {
    return (ceil_div(d->M, cfg->mr) * cfg->mr * d->K + 15) & ~(int64_t)15;
}

/* Splits each batch item's C into n_mt x n_nt tasks for n_threads threads. The pool hands tasks
 * out dynamically, so several tasks per thread keep the threads busy to the end even when one of
 * them is slowed (a shared machine); the grid minimizes the estimated time of the slowest thread:
 * rounds of tasks times the cost of the largest, where a task costs its tile area plus the packing
 * it repeats (its rows of A and its columns of B, each worth about 8 rows or columns of compute).
 * The area counts the rows and columns C has, not the padding to whole panels: counted padded,
 * BERT's M = 128 (10 panels of 14) looked as cheap split 70 + 58 as whole, and the thread with
 * 70 rows set the pace (128x3072x768 on two threads: 357 -> 389 GFLOP/s split along N only). */
#define TASKS_PER_THREAD 2

static void choose_tasks(gemm_run *r, int n_threads) {
    const af_gemm_desc *d = r->d;
    const int64_t mr = r->cfg->mr, nr = r->cfg->nr;
    const int64_t mp = ceil_div(d->M, mr), np = ceil_div(d->N, nr);
    r->n_mt = r->n_nt = 1;
    if (n_threads > 1) {
        const int64_t want = min64((int64_t)TASKS_PER_THREAD * n_threads, d->batch * mp * np);
        double best = -1;
        for (int64_t sm = 1; sm <= mp && sm <= want; sm++) {
            for (int64_t sn = 1; sn <= np && sm * sn <= 2 * want; sn++) {
                const int64_t tm = ceil_div(mp, sm), tn = ceil_div(np, sn);
                /* Only grids without empty tasks, and enough tasks. */
                if (ceil_div(mp, tm) != sm || ceil_div(np, tn) != sn || d->batch * sm * sn < want) continue;
                const double rows = (double)min64(tm * mr, d->M), cols = (double)min64(tn * nr, d->N);
                double task = rows * cols;
                if (!d->packed_a) task += 8.0 * rows;
                if (!d->packed_b) task += 8.0 * cols;
                const double rounds = (double)ceil_div(d->batch * sm * sn, n_threads);
                if (best < 0 || rounds * task < best) {
                    best = rounds * task;
                    r->n_mt = sm;
                    r->n_nt = sn;
                }
            }
        }
    }
    r->tm = ceil_div(mp, r->n_mt) * mr;
    r->tn = ceil_div(np, r->n_nt) * nr;
    r->n_mt = ceil_div(d->M, r->tm);
    r->n_nt = ceil_div(d->N, r->tn);
}

/* Rows outside (sweep_rows_outer) when B is the activations (not prepacked), a task's C has
 * several row tiles and column panels, and K blocks are short: then C (and a fused residual) cost
 * as much to stream as the products, and walking it a line or two per row per B panel left most
 * lines demand misses. 1x1 convs with K <= 128, ResNet-50 layer1 conv3 + residual + ReLU (K = 64):
 * 1.41 -> 1.24 ms per layer; MobileNetV3-L at 1 thread 2% faster (alternating runs in one
 * process). With K = 256 (ResNet-50's conv1 layers) the row sweep, whose B panels then come from
 * L2, was 0.1 ms slower per layer. Those were AMD EPYC figures. On Intel (a Xeon of family 6,
 * model 207: 2 MiB of L2) the column sweep was the faster one there too: ResNet-50's 56x56 1x1
 * convs (K = 64) 2-18% faster on it, those with K = 128 within 4% either way, profiled in the
 * model; the whole model 0.985 / 0.981 at one / two threads (30 pairs, bench/inproc_ab.c),
 * MobileNetV3-L 0.996 / 0.981 (200 pairs; bench/RESULTS.md, session 28). So the rows go outside
 * on other vendors only. The desc's order forces one (the test that both give the same bits); so
 * does AF_GEMM_ORDER=rows|cols in the environment, read once per process (for A/B measurements of
 * whole models). */
static af_gemm_order env_order(void) {
    static atomic_int cached = -1; /* every thread reads the same environment: a race stores the same */
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv("AF_GEMM_ORDER");
        v = e && !strcmp(e, "cols") ? AF_GEMM_ORDER_COLS : e && !strcmp(e, "rows") ? AF_GEMM_ORDER_ROWS : AF_GEMM_ORDER_AUTO;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return (af_gemm_order)v;
}

static bool choose_order(const gemm_run *r) {
    const af_gemm_order o = r->d->order != AF_GEMM_ORDER_AUTO ? r->d->order : env_order();
    if (o != AF_GEMM_ORDER_AUTO) return o == AF_GEMM_ORDER_ROWS;
    return !r->d->packed_b && r->tm > r->cfg->mr && r->tn > r->cfg->nr && r->bl.kc <= 128 &&
           af_cpu_info_get()->vendor != AF_CPU_VENDOR_INTEL;
}

const float *af_gemm_packed_item(const af_gemm_packed *p, int64_t b) {
    return p->data + (p->batch > 1 ? b * p->item_stride : 0);
}

/* K == 0: the product is zero; C = beta * C, then the epilogue. */
static void run_k0_tile(const gemm_run *r, int64_t b, int64_t m_lo, int64_t m_hi, int64_t n_lo, int64_t n_hi) {
    const af_gemm_desc *d = r->d;
    float *c = d->C + b * d->stride_c;
    for (int64_t m = m_lo; m < m_hi; m++)
        for (int64_t n = n_lo; n < n_hi; n++) c[m * d->ldc + n] = d->beta != 0.0f ? d->beta * c[m * d->ldc + n] : 0.0f;
    if (d->epilogue)
        for (int64_t m = m_lo; m < m_hi; m += r->cfg->mr)
            for (int64_t n = n_lo; n < n_hi; n += r->cfg->nr)
                r->cfg->epilogue(d->epilogue, c + m * d->ldc + n, d->ldc, (int)min64(r->cfg->mr, m_hi - m),
                                 (int)min64(r->cfg->nr, n_hi - n), m, n, b);
}

/* Turns the longest prefix of an epilogue program that has the in-register steps' shape and
 * order, [BIAS_ROW | SCALE_SHIFT_ROW] [BIAS_COL] [ADD] [RELU | CLIP | HARD_SWISH], each optional,
 * into af_gemm_fused (vectors offset to batch item b); returns its length. The rest of the
 * program (a GELU, say) runs in the tile applier after the store, one pass per step. */
int af_gemm_compile_fused(const af_epilogue *e, int64_t b, af_gemm_fused *f) {
    *f = (af_gemm_fused){.lo = -INFINITY, .hi = INFINITY};
    int i = 0;
    const af_epi_step *s = e->steps;
#define VEC(x) ((x) ? (x) + b * s[i].batch_stride : NULL) /* NULL: a program looked at for its ops */
    if (i < e->n_steps && (s[i].op == AF_EPI_BIAS_ROW || s[i].op == AF_EPI_SCALE_SHIFT_ROW)) {
        if (s[i].op == AF_EPI_SCALE_SHIFT_ROW) f->row_scale = VEC(s[i].p), f->row_shift = VEC(s[i].q);
        else f->row_shift = VEC(s[i].p);
        i++;
    }
    if (i < e->n_steps && s[i].op == AF_EPI_BIAS_COL) f->col_shift = VEC(s[i].p), i++;
    if (i < e->n_steps && s[i].op == AF_EPI_ADD) f->residual = VEC(s[i].p), f->res_ld = s[i].ld, i++;
    if (i < e->n_steps && (s[i].op == AF_EPI_RELU || s[i].op == AF_EPI_CLIP)) {
        f->clamp = true;
        f->lo = s[i].op == AF_EPI_RELU ? 0.0f : s[i].a;
        f->hi = s[i].op == AF_EPI_RELU ? INFINITY : s[i].b;
        i++;
    } else if (i < e->n_steps && s[i].op == AF_EPI_HARD_SWISH) {
        f->hard_swish = true;
        i++;
    }
#undef VEC
    return i;
}

bool af_gemm_residual_in_registers(const af_epilogue *e) {
    int adds = 0, at = -1;
    for (int i = 0; e && i < e->n_steps; i++)
        if (e->steps[i].op == AF_EPI_ADD) adds++, at = i;
    af_gemm_fused f;
    return adds == 1 && at < af_gemm_compile_fused(e, 0, &f);
}

/* The fused steps for the tile at (m, n) of the batch item f was compiled for. */
void af_gemm_fused_at(const af_gemm_fused *f, int64_t m, int64_t n, af_gemm_fused *out) {
    *out = *f;
    if (out->row_scale) out->row_scale += m;
    if (out->row_shift) out->row_shift += m;
    if (out->col_shift) out->col_shift += n;
    if (out->residual) out->residual += m * out->res_ld + n;
}

/* Prefetches the rows (n floats each, stride ld) of the fused residual two tiles down: each row
 * is a stream of its own, which the hardware prefetchers do not follow, so every line was a
 * demand miss, and with a short K the microkernel's own prefetch at its start leaves too little
 * time (a 256x64 1x1 conv + residual + ReLU at 56x56 took 2.6 ms, the conv alone 1.4). Doing the
 * same for the output tile's rows (write intent) measured slower. */
static void prefetch_rows(const float *p, int64_t ld, int64_t rows, int64_t n) {
    for (int64_t i = 0; i < rows; i++, p += ld) {
        __builtin_prefetch(p, 0, 3);
        __builtin_prefetch(p + n - 1, 0, 3);
    }
}

/* Where the panel starting at lane l0 of a block begins in the source. */
static const float *panel_src(const float *src, int64_t ld, bool lanes_contiguous, int64_t l0) {
    return lanes_contiguous ? src + l0 : src + l0 * ld;
}

/* always_inline: GCC would otherwise judge the function free of side effects and drop the calls.
 * Prefetches (into L2) the source of a lanes x kc block about to be packed whose rows are strided
 * (lanes contiguous); k-contiguous sources are read sequentially, which the hardware prefetches. */
static inline __attribute__((always_inline)) void prefetch_block(const float *src, int64_t ld, bool lanes_contiguous,
                                                                 int64_t lanes, int64_t kc) {
    if (!lanes_contiguous) return;
    for (int64_t k = 0; k < kc; k++)
        for (int64_t l = 0; l < lanes + 15; l += 16) __builtin_prefetch(src + k * ld + min64(l, lanes - 1), 0, 2);
}

/* What the tile loops of one (column block, K block, row block) share. */
typedef struct block_ctx {
    const gemm_run *r;
    int64_t b, m_hi, ic, jc, kc, mcur, ncur;
    float beta;
    bool last;                   /* the last K block: the epilogue runs */
    bool pack_b;                 /* unpacked B panels are packed in this block (its first row block) */
    const float *a_base, *a_src; /* packed A panels; A's unpacked source (NULL: prepacked) */
    int64_t a_ps;                /* floats between consecutive A panels */
    float *wa, *wb;              /* the workspace's A and B panels */
    const float *b_base, *b_src;
    int64_t b_ps;
    float *C;
    const af_gemm_fused *fb;  /* NULL: no in-register steps */
    const af_epilogue *after; /* the steps applied after the store; NULL: none */
} block_ctx;

/* The B panel at column jr of the block and its row stride: a prepacked panel, a full panel of a
 * row-major B read in place (its rows are NR contiguous floats; measured faster than packing at
 * every ResNet and MobileNet shape, since packing B costs as much as reading it), or the panel
 * packed into the workspace. */
static bool b_in_place(const block_ctx *x, int nr) { return x->b_src && !x->r->d->trans_b && nr == x->r->cfg->nr; }

static const float *b_panel(const block_ctx *x, int64_t jr, int nr, int64_t *ld) {
    if (b_in_place(x, nr)) {
        *ld = x->r->d->ldb;
        return x->b_src + jr;
    }
    *ld = x->r->cfg->nr;
    return x->b_base + (jr / x->r->cfg->nr) * x->b_ps;
}

static void pack_b_panel(const block_ctx *x, int64_t jr, int nr) {
    const af_gemm_desc *d = x->r->d;
    const af_gemm_isa_cfg *cfg = x->r->cfg;
    cfg->pack(panel_src(x->b_src, d->ldb, !d->trans_b, jr), d->ldb, !d->trans_b, nr, (int)cfg->nr, x->kc,
              x->wb + (jr / cfg->nr) * x->b_ps);
}

/* Packs row tile p of the block, and prefetches the next tile's source rows. */
static void pack_a_panel(const block_ctx *x, int64_t p) {
    const af_gemm_desc *d = x->r->d;
    const af_gemm_isa_cfg *cfg = x->r->cfg;
    const int64_t ir = tile_row(x->r, x->mcur, p), next = tile_row(x->r, x->mcur, p + 1);
    cfg->pack(panel_src(x->a_src, d->lda, d->trans_a, ir), d->lda, d->trans_a, (int)(next - ir), cfg->mr, x->kc,
              x->wa + p * x->a_ps);
    if (next < x->mcur)
        prefetch_block(panel_src(x->a_src, d->lda, d->trans_a, next), d->lda, d->trans_a,
                       tile_row(x->r, x->mcur, p + 2) - next, x->kc);
}

/* One microkernel call on row tile p and columns jr.. of the block: the in-register steps on the
 * last K block, and the rest of the epilogue after the store. */
static void run_tile(const block_ctx *x, int64_t p, int64_t jr, int nr, const float *bp, int64_t bld,
                     const float *pf, int64_t pf_ld, bool prefetch_residual) {
    const af_gemm_desc *d = x->r->d;
    const af_gemm_isa_cfg *cfg = x->r->cfg;
    const int64_t MR = cfg->mr, ir = tile_row(x->r, x->mcur, p), m = x->ic + ir, n = x->jc + jr;
    const int mr = (int)(tile_row(x->r, x->mcur, p + 1) - ir);
    float *cp = x->C + m * d->ldc + n;
    af_gemm_fused ft;
    const bool fuse = x->last && x->fb;
    if (fuse) af_gemm_fused_at(x->fb, m, n, &ft);
    if (fuse && prefetch_residual && x->fb->residual)
        prefetch_rows(x->fb->residual + (m + 2 * MR) * x->fb->res_ld + n, x->fb->res_ld,
                      min64(MR, x->m_hi - m - 2 * MR), nr);
    const af_gemm_tile_args t = {.kc = x->kc,
                                 .a = x->a_base + p * x->a_ps,
                                 .b = bp,
                                 .ldb = bld,
                                 .c = cp,
                                 .ldc = d->ldc,
                                 .mr = mr,
                                 .nr = nr,
                                 .alpha = d->alpha,
                                 .beta = x->beta,
                                 .pf = pf,
                                 .pf_ld = pf_ld,
                                 .fused = fuse ? &ft : NULL};
    cfg->tile(&t);
    if (x->last && x->after) cfg->epilogue(x->after, cp, d->ldc, mr, nr, m, n, x->b);
}

/* B panels outside, A panels inside: a B panel is reused from L1 by every A panel of the block.
 * Unpacked A panels are packed during the first B panel, and the next panel's source is
 * prefetched, so the packing overlaps the microkernels. */
static void sweep_cols_outer(const block_ctx *x) {
    const af_gemm_desc *d = x->r->d;
    const int64_t MR = x->r->cfg->mr, NR = x->r->cfg->nr, n_tiles = ceil_div(x->mcur, MR);
    for (int64_t jr = 0; jr < x->ncur; jr += NR) {
        const int nr = (int)min64(NR, x->ncur - jr);
        const bool more = jr + NR < x->ncur;
        int64_t bld;
        const float *bp = b_panel(x, jr, nr, &bld);
        /* What the microkernels of this panel prefetch: the next B panel (the kernel spreads
         * those prefetches over its k loop). */
        const float *pf = bp;
        int64_t pf_ld = 0, pf_share = 0;
        if (d->packed_b) {
            if (more) {
                /* The next panel is K * NR floats away: no hardware stream. Each tile of this
                 * panel prefetches its share, pf_ld floats of each row (the kernel touches the
                 * two lines at its pointer each k step): all of it from the first tile asked DRAM
                 * for a row a k step, more than one core gets (as in conv_implicit.c). BERT-base's
                 * GEMMs with cold weights, one thread: 2-4% faster. */
                pf_ld = ceil_div(NR, n_tiles);
                pf_share = pf_ld * x->kc;
                pf = bp + x->b_ps;
            }
        } else {
            if (!b_in_place(x, nr) && x->pack_b) pack_b_panel(x, jr, nr);
            if (more && !d->trans_b) { /* the next panel's rows, read in place or packed */
                pf = x->b_src + jr + NR;
                pf_ld = d->ldb;
            }
        }
        for (int64_t p = 0; p < n_tiles; p++) {
            if (x->a_src && jr == 0) pack_a_panel(x, p);
            run_tile(x, p, jr, nr, bp, bld, pf, pf_ld, true);
            if (pf_share) pf += pf_share;
            else pf_ld = 0; /* one kernel per panel prefetches */
        }
    }
}

/* A panels outside, B panels inside: each row tile of C (and of a fused residual) is written
 * along its rows from the block's first column to its last, a few long streams instead of a
 * line or two of every row per B panel. The B panels come from L2 (see choose_order). */
static void sweep_rows_outer(const block_ctx *x) {
    const int64_t MR = x->r->cfg->mr, NR = x->r->cfg->nr, n_tiles = ceil_div(x->mcur, MR);
    if (x->pack_b && x->b_src)
        for (int64_t jr = 0; jr < x->ncur; jr += NR) {
            const int nr = (int)min64(NR, x->ncur - jr);
            if (!b_in_place(x, nr)) pack_b_panel(x, jr, nr);
        }
    for (int64_t p = 0; p < n_tiles; p++) {
        if (x->a_src) pack_a_panel(x, p);
        for (int64_t jr = 0; jr < x->ncur; jr += NR) {
            const int nr = (int)min64(NR, x->ncur - jr);
            int64_t bld;
            const float *bp = b_panel(x, jr, nr, &bld);
            run_tile(x, p, jr, nr, bp, bld, bp, 0, false);
        }
    }
}

static void run_task_body(void *ctx, int task, int thread) {
    const gemm_run *r = ctx;
    const af_gemm_desc *d = r->d;
    const af_gemm_isa_cfg *cfg = r->cfg;
    const int64_t MR = cfg->mr, NR = cfg->nr, K = d->K;
    const int64_t per_item = r->n_mt * r->n_nt;
    const int64_t b = task / per_item, t = task % per_item;
    const int64_t m_lo = (t / r->n_nt) * r->tm, m_hi = min64(d->M, m_lo + r->tm);
    /* The column tasks split the panels evenly (at most tn wide), so the affine shares are too:
     * ResNet-50's 28x28 1x1 convs (25 panels, 4 tasks) ran 7 + 7 + 7 + 4, 14 panels on one
     * thread and 11 on the other; now 6 + 6 + 6 + 7. */
    const int64_t np = ceil_div(d->N, NR), j = t % r->n_nt;
    const int64_t n_lo = NR * (np * j / r->n_nt), n_hi = min64(d->N, NR * (np * (j + 1) / r->n_nt));
    if (K == 0) {
        run_k0_tile(r, b, m_lo, m_hi, n_lo, n_hi);
        return;
    }
    float *wa = af_threadpool_scratch_or(r->pool, thread, (size_t)r->ws_floats * sizeof(float),
                                         r->ws + thread * r->ws_floats);
    float *wb = d->packed_a ? wa : wa + min64(r->bl.mc, ceil_div(d->M, MR) * MR) * r->bl.kc;
    const float *A = d->packed_a ? af_gemm_packed_item(d->packed_a, b) : d->A + b * d->stride_a;
    const float *B = d->packed_b ? af_gemm_packed_item(d->packed_b, b) : d->B + b * d->stride_b;
    const af_epilogue *epi = d->epilogue && d->epilogue->n_steps ? d->epilogue : NULL;
    af_gemm_fused fb;
    const int n_fused = epi && cfg->fused ? af_gemm_compile_fused(epi, b, &fb) : 0;
    af_epilogue rest; /* the steps the tile applier runs after the store */
    const af_epilogue *after = epi;
    if (n_fused > 0) {
        rest = *epi;
        rest.n_steps = epi->n_steps - n_fused;
        memmove(rest.steps, epi->steps + n_fused, (size_t)rest.n_steps * sizeof rest.steps[0]);
        after = rest.n_steps ? &rest : NULL;
    }
    block_ctx x = {.r = r, .b = b, .m_hi = m_hi, .wa = wa, .wb = wb, .C = d->C + b * d->stride_c,
                   .fb = n_fused > 0 ? &fb : NULL, .after = after};
    const bool b_contig = !d->trans_b, a_contig = d->trans_a;
    for (int64_t jc = n_lo; jc < n_hi; jc += r->bl.nc) {
        x.jc = jc;
        x.ncur = min64(r->bl.nc, n_hi - jc);
        for (int64_t kb = 0; kb < r->bl.n_kb; kb++) {
            const int64_t k0 = kb * r->bl.kc;
            x.kc = min64(r->bl.kc, K - k0);
            x.beta = kb == 0 ? d->beta : 1.0f;
            x.last = kb == r->bl.n_kb - 1;
            x.b_base = wb;
            x.b_src = NULL;
            x.b_ps = x.kc * NR;
            if (d->packed_b) {
                x.b_base = B + (jc / NR) * K * NR + k0 * NR;
                x.b_ps = K * NR;
            } else {
                x.b_src = d->trans_b ? B + jc * d->ldb + k0 : B + k0 * d->ldb + jc;
                prefetch_block(x.b_src, d->ldb, b_contig, min64(NR, x.ncur), x.kc);
            }
            for (int64_t ic = m_lo; ic < m_hi; ic += r->bl.mc) {
                x.ic = ic;
                x.mcur = min64(r->bl.mc, m_hi - ic);
                x.pack_b = ic == m_lo;
                x.a_base = wa;
                x.a_src = NULL;
                x.a_ps = x.kc * MR;
                if (d->packed_a) {
                    x.a_base = A + (ic / MR) * K * MR + k0 * MR;
                    x.a_ps = K * MR;
                } else {
                    x.a_src = d->trans_a ? A + k0 * d->lda + ic : A + ic * d->lda + k0;
                    prefetch_block(x.a_src, d->lda, a_contig, min64(MR, x.mcur), x.kc);
                }
                if (r->rows_outer) sweep_rows_outer(&x);
                else sweep_cols_outer(&x);
            }
        }
    }
}

static void run_task(void *ctx, int task, int thread) {
    const unsigned saved = af_denormals_as_zero_begin();
    run_task_body(ctx, task, thread);
    af_denormals_as_zero_end(saved);
}

/* ---- matrix-vector products ---------------------------------------------------------------- */

/* N = 1 on a prepacked A (a squeeze-excite block's layers) or M = 1 on a prepacked B (a
 * classifier's Gemm at batch 1): the tile kernels would run one panel's FMA chain at a time, a
 * latency-bound 8 floats of weights per cycle (25 GB/s, the two MobileNetV3 classifier layers took
 * 0.2 ms each), so the ISA's gemv kernel runs up to AF_GEMV_PANELS panels' chains at once. The
 * vector must be contiguous; the K blocks and the alpha / beta steps are the tile path's, so the
 * result is the same bit for bit. */
typedef struct gemv_run {
    const af_gemm_desc *d;
    const af_gemm_isa_cfg *cfg;
    blocking bl;
    bool on_b;                /* M == 1 on a packed B (panels of columns); else N == 1 on a packed A */
    int w;                    /* panel width */
    int64_t len;              /* elements of the result: N or M */
    int64_t per_task, n_tasks; /* panels per task; tasks per item */
} gemv_run;

static bool gemv_shape(const af_gemm_desc *d, const af_gemm_isa_cfg *cfg) {
    if (!cfg->gemv || d->K == 0) return false;
    if (d->N == 1 && d->packed_a && !d->packed_b && (d->trans_b || d->ldb == 1)) return true;
    return d->M == 1 && d->packed_b && !d->packed_a && (!d->trans_a || d->lda == 1);
}

static void gemv_task_body(void *ctx, int task, int thread) {
    (void)thread;
    const gemv_run *r = ctx;
    const af_gemm_desc *d = r->d;
    const int64_t b = task / r->n_tasks, w = r->w, K = d->K, ps = K * w;
    const float *panels = r->on_b ? af_gemm_packed_item(d->packed_b, b) : af_gemm_packed_item(d->packed_a, b);
    const float *v = r->on_b ? d->A + b * d->stride_a : d->B + b * d->stride_b;
    float *C = d->C + b * d->stride_c;
    const int64_t step = r->on_b ? 1 : d->ldc; /* between consecutive elements of the result */
    const int64_t p_end = min64(ceil_div(r->len, w), (task % r->n_tasks + 1) * r->per_task);
    float out[AF_GEMV_PANELS * AF_GEMV_MAX_W];
    for (int64_t p = (task % r->n_tasks) * r->per_task; p < p_end; p += AF_GEMV_PANELS) {
        const int np = (int)min64(AF_GEMV_PANELS, p_end - p);
        const int64_t e0 = p * w, n = min64(np * w, r->len - e0);
        for (int64_t kb = 0; kb < r->bl.n_kb; kb++) {
            const int64_t k0 = kb * r->bl.kc, kc = min64(r->bl.kc, K - k0);
            const float beta = kb == 0 ? d->beta : 1.0f;
            r->cfg->gemv(panels + p * ps + k0 * w, ps, (int)w, np, kc, v + k0, out);
            for (int64_t e = 0; e < n; e++) {
                float *c = C + (e0 + e) * step, x = d->alpha != 1.0f ? d->alpha * out[e] : out[e];
                *c = beta != 0.0f ? fmaf(beta, *c, x) : x;
            }
        }
        if (d->epilogue && d->epilogue->n_steps) {
            if (r->on_b) r->cfg->epilogue(d->epilogue, C + e0, d->ldc, 1, (int)n, 0, e0, b);
            else r->cfg->epilogue(d->epilogue, C + e0 * d->ldc, d->ldc, (int)n, 1, e0, 0, b);
        }
    }
}

/* The tasks read denormal operands as zero (util/denormals.h). */
static void gemv_task(void *ctx, int task, int thread) {
    const unsigned saved = af_denormals_as_zero_begin();
    gemv_task_body(ctx, task, thread);
    af_denormals_as_zero_end(saved);
}

static void run_gemv(const af_gemm_desc *d, const af_gemm_isa_cfg *cfg, af_threadpool *pool) {
    gemv_run r = {.d = d, .cfg = cfg, .bl = choose_blocking(cfg, d), .on_b = !(d->N == 1 && d->packed_a && !d->packed_b)};
    r.w = r.on_b ? cfg->nr : cfg->mr;
    r.len = r.on_b ? d->N : d->M;
    /* Tasks of whole panels: a squeeze-excite layer of 240 outputs is 8 panels of 32, one kernel
     * call's worth, which in groups of AF_GEMV_PANELS left a second thread idle. */
    const int64_t panels = ceil_div(r.len, r.w);
    const int n_threads = af_threadpool_n_threads(pool);
    r.n_tasks = n_threads > 1 ? min64(panels, (int64_t)TASKS_PER_THREAD * n_threads) : 1;
    r.per_task = ceil_div(panels, r.n_tasks);
    r.n_tasks = ceil_div(panels, r.per_task);
    af_threadpool_run(pool, (int)(d->batch * r.n_tasks), gemv_task, &r);
}

/* Checks a packed operand against the GEMM it is used in. */
static bool packed_ok(const af_gemm_packed *p, bool is_b, af_isa isa, int64_t rows, int64_t K, int64_t batch) {
    return p->is_b == is_b && p->isa == isa && p->rows == rows && p->K == K && (p->batch == 1 || p->batch == batch);
}

static af_status check_desc(const af_gemm_desc *d, af_isa isa) {
    if (!d || d->M < 0 || d->N < 0 || d->K < 0 || d->batch < 0 || d->k_block < 0 ||
        (unsigned)d->order > AF_GEMM_ORDER_ROWS)
        return AF_ERR_INVALID_ARGUMENT;
    if (d->M == 0 || d->N == 0 || d->batch == 0) return AF_OK;
    if (!d->C || d->ldc < d->N || d->stride_c < 0) return AF_ERR_INVALID_ARGUMENT;
    if (d->K == 0) return AF_OK;
    if (d->packed_a) {
        if (!packed_ok(d->packed_a, false, isa, d->M, d->K, d->batch)) return AF_ERR_INVALID_ARGUMENT;
    } else if (!d->A || d->stride_a < 0 || d->lda < (d->trans_a ? d->M : d->K)) {
        return AF_ERR_INVALID_ARGUMENT;
    }
    if (d->packed_a && d->packed_b && d->packed_a->cfg != d->packed_b->cfg) return AF_ERR_INVALID_ARGUMENT;
    if (d->packed_b) {
        if (!packed_ok(d->packed_b, true, isa, d->N, d->K, d->batch)) return AF_ERR_INVALID_ARGUMENT;
    } else if (!d->B || d->stride_b < 0 || d->ldb < (d->trans_b ? d->K : d->N)) {
        return AF_ERR_INVALID_ARGUMENT;
    }
    return AF_OK;
}

/* Workspace bytes of d on n_threads threads: the shared packed A, or each thread's blocks. */
static size_t workspace_bytes(const af_gemm_desc *d, const af_gemm_isa_cfg *cfg, const blocking *bl, int n_threads) {
    if (shared_a(d, cfg, bl, n_threads)) return (size_t)shared_a_floats(d, cfg) * sizeof(float);
    return (size_t)ws_floats_per_thread(d, cfg, bl) * sizeof(float) * (size_t)(n_threads > 0 ? n_threads : 1);
}

size_t af_sgemm_workspace_size(const af_gemm_desc *d, int n_threads) {
    const af_gemm_isa_cfg *cfg = desc_cfg(d, af_cpu_isa_clamp(d->isa));
    if (d->M <= 0 || d->N <= 0 || d->K <= 0 || d->batch <= 0) return 0;
    const blocking bl = choose_blocking(cfg, d);
    return workspace_bytes(d, cfg, &bl, n_threads);
}

bool af_sgemm_residual_in_place(const af_gemm_desc *d) {
    const af_gemm_isa_cfg *cfg = desc_cfg(d, af_cpu_isa_clamp(d->isa));
    if (d->K <= 0 || d->beta != 0.0f || !cfg->fused || gemv_shape(d, cfg)) return false;
    return choose_blocking(cfg, d).n_kb == 1 && af_gemm_residual_in_registers(d->epilogue);
}

typedef struct pack_a_run {
    const af_gemm_desc *d;
    const gemm_run *r;
    float *dst;
} pack_a_run;

/* Row tile p of op(A) over the whole K (all of A is one row block), where a prepacked A keeps
 * panel p. */
static void pack_a_task(void *ctx, int p, int thread) {
    (void)thread;
    const pack_a_run *pr = ctx;
    const af_gemm_desc *d = pr->d;
    const int64_t mr = pr->r->cfg->mr, m0 = tile_row(pr->r, d->M, p), m1 = tile_row(pr->r, d->M, p + 1);
    pr->r->cfg->pack(panel_src(d->A, d->lda, d->trans_a, m0), d->lda, d->trans_a, m1 - m0, (int)mr, d->K,
                     pr->dst + p * mr * d->K);
}

af_status af_sgemm(const af_gemm_desc *d, af_threadpool *pool) {
    if (!d) return AF_ERR_INVALID_ARGUMENT;
    const af_isa isa = af_cpu_isa_clamp(d->isa);
    af_status st = check_desc(d, isa);
    if (st != AF_OK || d->M == 0 || d->N == 0 || d->batch == 0) return st;
    const int n_threads = af_threadpool_n_threads(pool);
    gemm_run r = {.d = d, .cfg = desc_cfg(d, isa), .pool = pool};
    if (gemv_shape(d, r.cfg) && d->batch <= INT32_MAX / 64) {
        run_gemv(d, r.cfg, pool);
        return AF_OK;
    }
    r.bl = choose_blocking(r.cfg, d);
    const size_t need = d->K > 0 ? workspace_bytes(d, r.cfg, &r.bl, n_threads) : 0;
    void *own = NULL;
    if (need && (!d->workspace || d->workspace_size < need)) {
        if (d->workspace) return AF_ERR_INVALID_ARGUMENT;
        own = af_malloc_aligned(need);
        if (!own) return AF_ERR_OUT_OF_MEMORY;
    }
    r.ws = own ? own : d->workspace;
    af_gemm_desc with_a; /* d with A packed by all threads into the workspace (see shared_a) */
    af_gemm_packed view;
    const af_gemm_desc *unpacked = d; /* A's source when shared */
    const bool share_a = shared_a(d, r.cfg, &r.bl, n_threads), packs_a = !d->packed_a;
    const int64_t a_panels = ceil_div(d->M, r.cfg->mr); /* shared: A's rows fit one row block, so few */
    if (share_a) {
        view = (af_gemm_packed){.isa = isa, .cfg = r.cfg, .is_b = false, .w = r.cfg->mr, .batch = 1, .rows = d->M,
                                .K = d->K, .item_stride = a_panels * r.cfg->mr * d->K, .bytes = need, .data = r.ws};
        with_a = *d;
        with_a.packed_a = &view;
        r.d = d = &with_a; /* both operands packed now: no per-thread blocks */
    }
    choose_tasks(&r, n_threads);
    /* One row block holding all of A, packed here: its rows spread evenly over the tiles. */
    r.even_rows = packs_a && r.n_mt == 1 && d->M <= r.bl.mc;
    if (share_a) {
        pack_a_run pr = {.d = unpacked, .r = &r, .dst = r.ws};
        af_threadpool_run_affine(pool, (int)a_panels, pack_a_task, &pr);
    }
    r.rows_outer = choose_order(&r);
    /* With B prepacked and the task's rows in one row block, a column block buys nothing (each
     * B panel is used by every A panel once, in turn) and costs a packing of A per column block:
     * BERT-base's 128x3072x768 packed its activations 6 times per K block. One block of the
     * task's columns packs them once. */
    if (d->packed_b && r.tm <= r.bl.mc) r.bl.nc = r.tn;
    const int64_t n_tasks = d->batch * r.n_mt * r.n_nt;
    if (n_tasks > INT32_MAX) {
        af_free_aligned(own);
        return AF_ERR_INVALID_ARGUMENT;
    }
    r.ws_floats = d->K > 0 ? ws_floats_per_thread(d, r.cfg, &r.bl) : 0;
    /* Tasks along N only are column bands of equal width: each thread keeps its band from one
     * kernel to the next (a 1x1 convolution's pixels). A grid split along M too may have shares
     * of unequal rows (MR granularity), where dynamic claiming balances them. */
    if (r.n_mt == 1) af_threadpool_run_affine(pool, (int)n_tasks, run_task, &r);
    else af_threadpool_run(pool, (int)n_tasks, run_task, &r);
    af_free_aligned(own);
    return AF_OK;
}
