/* The fused attention driver: argument checks, the tile plan and workspace layout, the partition
 * into (batch, head, query tile) tasks, the portable scalar tile, and the double-precision
 * reference twin. The vector tiles live in attention_avx512.c / attention_avx2.c. */
#include "kernels/fast/attention.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/fast/attention_internal.h"
#include "util/alloc.h"
#include "util/denormals.h"

#define SCALAR_TILE 16 /* query rows per scalar task */
#define SCALAR_RB 4     /* query rows x keys per scalar register block */
#define ALIGN_SLACK 64 /* the workspace may start anywhere; slices are 64-byte aligned */
#define MAX_LEN ((int64_t)1 << 31) /* seq_k and head_dim beyond this are refused: workspace sizes
                                      (tile x S_k, tile x D floats) then stay far inside size_t */

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t round16(int64_t n) { return (n + 15) & ~(int64_t)15; }

af_attention_desc af_attention_desc_packed(int64_t batch, int64_t seq_q, int64_t seq_k, int64_t heads,
                                           int64_t head_dim) {
    const int64_t hd = heads * head_dim;
    return (af_attention_desc){
        .batch = batch, .seq_q = seq_q, .seq_k = seq_k, .heads = heads, .head_dim = head_dim,
        .q_batch_stride = seq_q * hd, .q_row_stride = hd, .q_head_stride = head_dim,
        .k_batch_stride = seq_k * hd, .k_row_stride = hd, .k_head_stride = head_dim,
        .v_batch_stride = seq_k * hd, .v_row_stride = hd, .v_head_stride = head_dim,
        .scale = head_dim > 0 ? (float)(1.0 / sqrt((double)head_dim)) : 1.0f,
        .out_batch_stride = seq_q * hd, .out_row_stride = hd, .out_head_stride = head_dim,
        .isa = af_cpu_isa(),
    };
}

/* ---- checks ------------------------------------------------------------------------------------ */

/* The largest offset (b, s, h, e) reaches stays in int64 and all strides are >= 0. */
static bool extent_ok(int64_t nb, int64_t bs, int64_t ns, int64_t rs, int64_t nh, int64_t hs, int64_t ne) {
    if (bs < 0 || rs < 0 || hs < 0) return false;
    int64_t a, b, c;
    return af_mul_i64(nb - 1, bs, &a) && af_mul_i64(ns - 1, rs, &b) && af_mul_i64(nh - 1, hs, &c) &&
           a <= INT64_MAX - b && a + b <= INT64_MAX - c && a + b + c <= INT64_MAX - ne;
}

/* AF_OK with *empty set when there is nothing to compute (no output element). Sizes and strides
 * only when !pointers (the workspace size needs no tensors: a plan sizes it before any exist). */
static af_status check_desc(const af_attention_desc *d, bool pointers, bool *empty) {
    if (!d || d->batch < 0 || d->seq_q < 0 || d->seq_k < 0 || d->heads < 0 || d->head_dim < 0)
        return AF_ERR_INVALID_ARGUMENT;
    if (d->seq_k > MAX_LEN || d->head_dim > MAX_LEN) return AF_ERR_INVALID_ARGUMENT;
    *empty = d->batch == 0 || d->seq_q == 0 || d->heads == 0 || d->head_dim == 0;
    if (*empty) return AF_OK;
    const int64_t B = d->batch, Sq = d->seq_q, Sk = d->seq_k, H = d->heads, D = d->head_dim;
    if ((pointers && !d->out) || !extent_ok(B, d->out_batch_stride, Sq, d->out_row_stride, H, d->out_head_stride, D))
        return AF_ERR_INVALID_ARGUMENT;
    if (Sk == 0) return AF_OK; /* no keys: ctx is zero, nothing is read */
    if ((pointers && (!d->q || !d->k || !d->v)) ||
        !extent_ok(B, d->q_batch_stride, Sq, d->q_row_stride, H, d->q_head_stride, D) ||
        !extent_ok(B, d->k_batch_stride, Sk, d->k_row_stride, H, d->k_head_stride, D) ||
        !extent_ok(B, d->v_batch_stride, Sk, d->v_row_stride, H, d->v_head_stride, D))
        return AF_ERR_INVALID_ARGUMENT;
    if (d->mask && !extent_ok(B, d->mask_batch_stride, Sq, d->mask_row_stride, H, d->mask_head_stride, Sk))
        return AF_ERR_INVALID_ARGUMENT;
    return AF_OK;
}

/* ctx with no keys: MatMul of [S_q, 0] by [0, D] is zero. */
static void write_zeros(const af_attention_desc *d) {
    for (int64_t b = 0; b < d->batch; b++)
        for (int64_t i = 0; i < d->seq_q; i++)
            for (int64_t h = 0; h < d->heads; h++)
                memset(d->out + b * d->out_batch_stride + i * d->out_row_stride + h * d->out_head_stride, 0,
                       (size_t)d->head_dim * sizeof(float));
}

/* ---- the plan ---------------------------------------------------------------------------------- */

static af_attention_plan make_plan(const af_attention_desc *d, int n_threads) {
    af_attention_plan p = {.isa = af_cpu_isa_clamp(d->isa), .lanes = 1, .nv = 1};
    const int64_t Sq = d->seq_q > 0 ? d->seq_q : 1, Sk = d->seq_k, D = d->head_dim;
    if (p.isa == AF_ISA_SCALAR) {
        p.tile = min64(Sq, SCALAR_TILE);
        p.s_floats = round16(SCALAR_RB * Sk);
    } else {
        p.lanes = p.isa == AF_ISA_AVX512 ? 16 : 8;
        const int nv_max = p.isa == AF_ISA_AVX512 ? AF_ATTENTION_NV_AVX512 : AF_ATTENTION_NV_AVX2;
        const int64_t bh = (d->batch > 0 ? d->batch : 1) * (d->heads > 0 ? d->heads : 1);
        const int64_t half_l2 = (int64_t)af_cpu_info_get()->l2 / 2;
        /* The widest tile whose scores fit in half of L2, unless narrower tiles spread better over
         * the threads: cost = rounds of tasks x (rows per tile + a per-tile overhead of K and V
         * streaming, counted as 16 rows). */
        int64_t best = -1;
        for (int nv = 1; nv <= nv_max && (nv - 1) * p.lanes < Sq; nv++) {
            const int64_t tile = (int64_t)nv * p.lanes;
            if (nv > 1 && tile * Sk * (int64_t)sizeof(float) > half_l2) break;
            const int64_t rounds = ceil_div(bh * ceil_div(Sq, tile), n_threads > 0 ? n_threads : 1);
            const int64_t cost = rounds * (tile + 16);
            if (best < 0 || cost <= best) {
                best = cost;
                p.nv = nv;
            }
        }
        p.tile = (int64_t)p.nv * p.lanes;
        p.qt_floats = round16(D * p.tile);
        p.s_floats = round16(Sk * p.tile);
    }
    p.n_qt = ceil_div(Sq, p.tile);
    p.ws_floats = p.qt_floats + p.s_floats + round16(p.tile);
    return p;
}

size_t af_attention_workspace_size(const af_attention_desc *d, int n_threads) {
    bool empty;
    if (check_desc(d, false, &empty) != AF_OK || empty || d->seq_k == 0) return 0;
    const af_attention_plan p = make_plan(d, n_threads);
    return (size_t)p.ws_floats * sizeof(float) * (size_t)(n_threads > 0 ? n_threads : 1) + ALIGN_SLACK;
}

/* The kernel names by [with projections][isa level: scalar, AVX2, AVX-512]. */
static const char *name_for(const af_attention_desc *d, bool qkv) {
    static const char *const names[2][3] = {
        {"f32_attention__scalar", "f32_attention__avx2", "f32_attention__avx512"},
        {"f32_qkv_attention__scalar", "f32_qkv_attention__avx2", "f32_qkv_attention__avx512"}};
    const af_isa isa = af_cpu_isa_clamp(d ? d->isa : AF_ISA_SCALAR);
    return names[qkv][isa == AF_ISA_AVX512 ? 2 : isa == AF_ISA_AVX2 ? 1 : 0];
}

const char *af_attention_name(const af_attention_desc *d) { return name_for(d, false); }

const char *af_attention_qkv_name(const af_attention_desc *d) { return name_for(d, true); }

/* ---- the scalar tile --------------------------------------------------------------------------- */

/* s[r * ls + c] = sum_e q[r][e] * k[c][e] for nq <= 4 rows and nk <= 4 keys: always a 4 x 4 block
 * of independent chains (missing rows and keys repeat the first; only real ones are stored). */
static void dot_4x4(int64_t D, const float *const q[SCALAR_RB], const float *k, int64_t krs, int nq, int nk,
                    float *s, int64_t ls) {
    const float *kc[SCALAR_RB];
    for (int c = 0; c < SCALAR_RB; c++) kc[c] = k + (c < nk ? c : 0) * krs;
    float acc[SCALAR_RB][SCALAR_RB] = {{0}};
    for (int64_t e = 0; e < D; e++) {
        float qe[SCALAR_RB], ke[SCALAR_RB];
#pragma GCC unroll 4
        for (int r = 0; r < SCALAR_RB; r++) qe[r] = q[r][e], ke[r] = kc[r][e];
#pragma GCC unroll 4
        for (int r = 0; r < SCALAR_RB; r++)
#pragma GCC unroll 4
            for (int c = 0; c < SCALAR_RB; c++) acc[r][c] += qe[r] * ke[c];
    }
    for (int r = 0; r < nq; r++)
        for (int c = 0; c < nk; c++) s[r * ls + c] = acc[r][c];
}

/* y += a x, four at a time (the compiler's SLP pass makes one SSE multiply-add of them). */
static void axpy(int64_t n, float a, const float *restrict x, float *restrict y) {
    int64_t e = 0;
    for (; e + 4 <= n; e += 4) {
        y[e] += a * x[e];
        y[e + 1] += a * x[e + 1];
        y[e + 2] += a * x[e + 2];
        y[e + 3] += a * x[e + 3];
    }
    for (; e < n; e++) y[e] += a * x[e];
}

/* Four query rows at a time: their scores in ws (4 x S_k floats), then each row's softmax and ctx,
 * accumulated in the output row (all four rows' Q has been read by then, so out may be q). */
static void tile_scalar(const af_attention_desc *d, const af_attention_plan *p, int64_t b, int64_t h, int64_t i0,
                        int64_t rows, float *ws) {
    (void)p;
    const int64_t Sk = d->seq_k, D = d->head_dim;
    const float *k = d->k + b * d->k_batch_stride + h * d->k_head_stride;
    const float *v = d->v + b * d->v_batch_stride + h * d->v_head_stride;
    const float *mask = d->mask ? d->mask + b * d->mask_batch_stride + h * d->mask_head_stride : NULL;
    for (int64_t g = i0; g < i0 + rows; g += SCALAR_RB) {
        const int nq = (int)min64(SCALAR_RB, i0 + rows - g);
        const float *q[SCALAR_RB];
        for (int r = 0; r < SCALAR_RB; r++)
            q[r] = d->q + b * d->q_batch_stride + (g + (r < nq ? r : 0)) * d->q_row_stride + h * d->q_head_stride;
        for (int64_t j = 0; j < Sk; j += SCALAR_RB)
            dot_4x4(D, q, k + j * d->k_row_stride, d->k_row_stride, nq, (int)min64(SCALAR_RB, Sk - j), ws + j, Sk);
        for (int r = 0; r < nq; r++) {
            float *s = ws + r * Sk;
            const float *m = mask ? mask + (g + r) * d->mask_row_stride : NULL;
            float mx = -INFINITY;
            for (int64_t j = 0; j < Sk; j++) {
                float x = s[j] * d->scale;
                if (m) x += m[j];
                s[j] = x;
                if (x > mx || isnan(x)) mx = x;
            }
            float sum = 0.0f;
            for (int64_t j = 0; j < Sk; j++) {
                s[j] = expf(s[j] - mx);
                sum += s[j];
            }
            const float inv = 1.0f / sum;
            float *o = d->out + b * d->out_batch_stride + (g + r) * d->out_row_stride + h * d->out_head_stride;
            for (int64_t e = 0; e < D; e++) o[e] = 0.0f;
            for (int64_t j = 0; j < Sk; j++) axpy(D, s[j], v + j * d->v_row_stride, o);
            for (int64_t e = 0; e < D; e++) o[e] *= inv;
        }
    }
}

/* ---- the run ----------------------------------------------------------------------------------- */

typedef struct attention_run {
    const af_attention_desc *d;
    af_attention_plan plan;
    af_attention_tile_fn tile;
    af_threadpool *pool;
    float *ws; /* 64-byte aligned; plan.ws_floats per thread where the pool has none for it */
} attention_run;

static void run_task(void *ctx, int task, int thread) {
    const attention_run *r = ctx;
    const af_attention_desc *d = r->d;
    const int64_t bh = task / r->plan.n_qt, t = task % r->plan.n_qt;
    const int64_t i0 = t * r->plan.tile;
    float *ws = af_threadpool_scratch_or(r->pool, thread, (size_t)r->plan.ws_floats * sizeof(float),
                                         r->ws + (int64_t)thread * r->plan.ws_floats);
    /* Denormals flushed (util/denormals.h): a mask of -100 (Swin's shifted windows) leaves
     * probabilities near exp(-100), and each costs an assist where exp makes it and again in
     * P.V; they weigh under 2^-126 of a value there, and no one else reads them. */
    const unsigned saved = af_denormals_flushed_begin();
    r->tile(d, &r->plan, bh / d->heads, bh % d->heads, i0, min64(r->plan.tile, d->seq_q - i0), ws);
    af_denormals_as_zero_end(saved);
}

af_status af_attention_run(const af_attention_desc *d, af_threadpool *pool) {
    bool empty;
    af_status st = check_desc(d, true, &empty);
    if (st != AF_OK || empty) return st;
    if (d->seq_k == 0) {
        write_zeros(d);
        return AF_OK;
    }
    const int n_threads = af_threadpool_n_threads(pool);
    attention_run r = {.d = d, .plan = make_plan(d, n_threads), .pool = pool};
    int64_t n_tasks;
    if (!af_mul_i64(d->batch, d->heads, &n_tasks) || !af_mul_i64(n_tasks, r.plan.n_qt, &n_tasks) ||
        n_tasks > INT32_MAX)
        return AF_ERR_INVALID_ARGUMENT;
    const size_t need = (size_t)r.plan.ws_floats * sizeof(float) * (size_t)n_threads + ALIGN_SLACK;
    if (!d->workspace || d->workspace_size < need) return AF_ERR_INVALID_ARGUMENT;
    r.ws = (float *)(((uintptr_t)d->workspace + ALIGN_SLACK - 1) & ~(uintptr_t)(ALIGN_SLACK - 1));
    switch (r.plan.isa) {
    case AF_ISA_AVX512: r.tile = af_attention_tile_avx512; break;
    case AF_ISA_AVX2: r.tile = af_attention_tile_avx2; break;
    default: r.tile = tile_scalar; break;
    }
    af_threadpool_run(pool, (int)n_tasks, run_task, &r);
    return AF_OK;
}

/* ---- the reference twin ------------------------------------------------------------------------ */

af_status af_attention_ref(const af_attention_desc *d) {
    bool empty;
    af_status st = check_desc(d, true, &empty);
    if (st != AF_OK || empty) return st;
    const int64_t Sk = d->seq_k, D = d->head_dim;
    if (Sk == 0) {
        write_zeros(d);
        return AF_OK;
    }
    double *p = af_malloc((size_t)(Sk + D) * sizeof *p);
    if (!p) return AF_ERR_OUT_OF_MEMORY;
    double *ctx = p + Sk;
    for (int64_t b = 0; b < d->batch; b++)
        for (int64_t h = 0; h < d->heads; h++)
            for (int64_t i = 0; i < d->seq_q; i++) {
                const float *q = d->q + b * d->q_batch_stride + i * d->q_row_stride + h * d->q_head_stride;
                const float *m = d->mask ? d->mask + b * d->mask_batch_stride + h * d->mask_head_stride +
                                               i * d->mask_row_stride
                                         : NULL;
                double mx = -INFINITY;
                for (int64_t j = 0; j < Sk; j++) {
                    const float *kj = d->k + b * d->k_batch_stride + j * d->k_row_stride + h * d->k_head_stride;
                    double s = 0;
                    for (int64_t e = 0; e < D; e++) s += (double)q[e] * kj[e];
                    p[j] = s * d->scale + (m ? m[j] : 0.0);
                    if (p[j] > mx || isnan(p[j])) mx = p[j];
                }
                double sum = 0;
                for (int64_t j = 0; j < Sk; j++) {
                    p[j] = exp(p[j] - mx);
                    sum += p[j];
                }
                for (int64_t e = 0; e < D; e++) ctx[e] = 0;
                for (int64_t j = 0; j < Sk; j++) {
                    const float *vj = d->v + b * d->v_batch_stride + j * d->v_row_stride + h * d->v_head_stride;
                    for (int64_t e = 0; e < D; e++) ctx[e] += p[j] * vj[e];
                }
                float *o = d->out + b * d->out_batch_stride + i * d->out_row_stride + h * d->out_head_stride;
                for (int64_t e = 0; e < D; e++) o[e] = (float)(ctx[e] / sum);
            }
    af_free(p);
    return AF_OK;
}
