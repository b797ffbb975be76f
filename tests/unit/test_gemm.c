/*
 * Tests of af_sgemm on every ISA the machine supports against a triple-loop reference with double
 * accumulation, and of the thread pool it runs on.
 *
 * Tolerance: |got - ref| <= 1e-5 + 1e-4 * G * (|alpha| * sum_k |a_mk| |b_kn| + |beta * c_mn|),
 * where G = 1 without an epilogue and 2 with one (the epilogue steps used here have slope <= 2, and
 * the vector transcendental functions add a few ULP, covered by the 1e-5). Results must also be
 * bit-identical for 1, 2 and 3 threads and for packed versus unpacked operands (the summation order
 * is fixed by the blocking, which never depends on either). Elements between rows (ldc > N) and
 * around C must never be written; with beta = 0, C starts as NaN to prove it is not read.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_internal.h"
#include "unit.h"
#include "util/alloc.h"
#include "util/threadpool.h"

#define SENTINEL 12345.0f

typedef struct gcase {
    int64_t M, N, K, batch;
    bool trans_a, trans_b, pack_a, pack_b;
    bool for_rows;                /* pack_b: af_gemm_pack_b_for_rows with rows_hint, not af_gemm_pack_b */
    int64_t rows_hint;            /* 0: unknown */
    int64_t pad_a, pad_b, pad_c;  /* extra leading-dimension elements */
    int64_t sa, sb, sc;           /* batch strides; -1: contiguous items, 0: broadcast */
    bool c_interleaved;           /* C items side by side in one wide row (attention heads) */
    float alpha, beta;
    const af_epilogue *epi;
    af_gemm_order order;          /* the tile sweep; AUTO: the library's rule */
    int64_t k_block;              /* af_gemm_desc.k_block; 0: the library's blocks */
} gcase;

/* Operand buffers of one case, laid out as the case describes. */
typedef struct gbufs {
    float *A, *B, *C0, *C, *ref;
    int64_t lda, ldb, ldc, sa, sb, sc;
    size_t na, nb, nc;
    double *bound; /* per C element: the error-scale term of the tolerance */
} gbufs;

static unsigned lcg = 12345u;
static float frand(void) {
    lcg = lcg * 1664525u + 1013904223u;
    return (float)(lcg >> 8) / 8388608.0f - 1.0f; /* [-1, 1) */
}

static int64_t item_stride(int64_t s, int64_t contiguous) { return s < 0 ? contiguous : s; }

static void free_bufs(gbufs *g) {
    af_free(g->A);
    af_free(g->B);
    af_free(g->C0);
    af_free(g->C);
    af_free(g->ref);
    af_free(g->bound);
    memset(g, 0, sizeof *g);
}

static bool make_bufs(const gcase *c, gbufs *g) {
    memset(g, 0, sizeof *g);
    const int64_t ar = c->trans_a ? c->K : c->M, ac = c->trans_a ? c->M : c->K;
    const int64_t br = c->trans_b ? c->N : c->K, bc = c->trans_b ? c->K : c->N;
    g->lda = ac + c->pad_a;
    g->ldb = bc + c->pad_b;
    g->ldc = (c->c_interleaved ? c->N * c->batch : c->N) + c->pad_c;
    g->sa = item_stride(c->sa, ar * g->lda);
    g->sb = item_stride(c->sb, br * g->ldb);
    g->sc = c->c_interleaved ? c->N : item_stride(c->sc, c->M * g->ldc);
    g->na = (size_t)((c->batch - 1) * g->sa + ar * g->lda);
    g->nb = (size_t)((c->batch - 1) * g->sb + br * g->ldb);
    g->nc = (size_t)((c->batch - 1) * g->sc + c->M * g->ldc) + 16; /* + a guard after C */
    g->A = af_malloc(g->na * sizeof(float) + 1);
    g->B = af_malloc(g->nb * sizeof(float) + 1);
    g->C0 = af_malloc(g->nc * sizeof(float));
    g->C = af_malloc(g->nc * sizeof(float));
    g->ref = af_malloc(g->nc * sizeof(float));
    g->bound = af_malloc(g->nc * sizeof(double));
    if (!g->A || !g->B || !g->C0 || !g->C || !g->ref || !g->bound) {
        free_bufs(g);
        return false;
    }
    for (size_t i = 0; i < g->na; i++) g->A[i] = frand();
    for (size_t i = 0; i < g->nb; i++) g->B[i] = frand();
    for (size_t i = 0; i < g->nc; i++) g->C0[i] = SENTINEL;
    for (int64_t b = 0; b < c->batch; b++)
        for (int64_t m = 0; m < c->M; m++)
            for (int64_t n = 0; n < c->N; n++) g->C0[b * g->sc + m * g->ldc + n] = c->beta != 0 ? frand() : NAN;
    return true;
}

static float op_a(const gcase *c, const gbufs *g, int64_t b, int64_t m, int64_t k) {
    return c->trans_a ? g->A[b * g->sa + k * g->lda + m] : g->A[b * g->sa + m * g->lda + k];
}
static float op_b(const gcase *c, const gbufs *g, int64_t b, int64_t k, int64_t n) {
    return c->trans_b ? g->B[b * g->sb + n * g->ldb + k] : g->B[b * g->sb + k * g->ldb + n];
}

/* The reference: double accumulation, then the reference epilogue on the whole matrix. */
static void reference(const gcase *c, gbufs *g) {
    memcpy(g->ref, g->C0, g->nc * sizeof(float));
    for (int64_t b = 0; b < c->batch; b++) {
        for (int64_t m = 0; m < c->M; m++)
            for (int64_t n = 0; n < c->N; n++) {
                double s = 0, bound = 0;
                for (int64_t k = 0; k < c->K; k++) {
                    double p = (double)op_a(c, g, b, m, k) * (double)op_b(c, g, b, k, n);
                    s += p;
                    bound += fabs(p);
                }
                const int64_t i = b * g->sc + m * g->ldc + n;
                double v = (double)c->alpha * s;
                bound *= fabs((double)c->alpha);
                if (c->beta != 0) {
                    v += (double)c->beta * (double)g->C0[i];
                    bound += fabs((double)c->beta * (double)g->C0[i]);
                }
                g->ref[i] = (float)v;
                g->bound[i] = bound;
            }
        if (c->epi) af_epilogue_apply_ref(c->epi, g->ref + b * g->sc, g->ldc, (int)c->M, (int)c->N, 0, 0, b);
    }
}

/* Runs the case on isa with pool into g->C. */
static af_status run_ours(const gcase *c, gbufs *g, af_isa isa, af_threadpool *pool) {
    memcpy(g->C, g->C0, g->nc * sizeof(float));
    af_gemm_packed *pa = NULL, *pb = NULL;
    af_gemm_desc d = af_gemm_desc_default();
    d.isa = isa;
    d.M = c->M, d.N = c->N, d.K = c->K, d.batch = c->batch;
    d.A = g->A, d.lda = g->lda, d.stride_a = g->sa, d.trans_a = c->trans_a;
    d.B = g->B, d.ldb = g->ldb, d.stride_b = g->sb, d.trans_b = c->trans_b;
    d.C = g->C, d.ldc = g->ldc, d.stride_c = g->sc;
    d.alpha = c->alpha, d.beta = c->beta, d.epilogue = c->epi, d.order = c->order, d.k_block = c->k_block;
    af_status st = AF_OK;
    if (c->pack_a && c->K > 0)
        st = af_gemm_pack_a(isa, g->sa ? c->batch : 1, c->M, c->K, g->A, g->lda, c->trans_a, g->sa, &pa);
    if (st == AF_OK && c->pack_b && c->K > 0)
        st = c->for_rows ? af_gemm_pack_b_for_rows(isa, c->rows_hint, g->sb ? c->batch : 1, c->K, c->N, g->B, g->ldb,
                                                   c->trans_b, g->sb, &pb)
                         : af_gemm_pack_b(isa, g->sb ? c->batch : 1, c->K, c->N, g->B, g->ldb, c->trans_b, g->sb, &pb);
    d.packed_a = pa, d.packed_b = pb;
    void *ws = NULL;
    if (st == AF_OK) {
        d.workspace_size = af_sgemm_workspace_size(&d, af_threadpool_n_threads(pool));
        ws = d.workspace_size ? af_malloc_aligned(d.workspace_size) : NULL;
        d.workspace = ws;
        st = d.workspace_size && !ws ? AF_ERR_OUT_OF_MEMORY : af_sgemm(&d, pool);
    }
    af_free_aligned(ws);
    af_gemm_packed_free(pa);
    af_gemm_packed_free(pb);
    return st;
}

/* Compares g->C with g->ref under the stated tolerance; reports the first few misses. */
static int compare(const gcase *c, const gbufs *g, af_isa isa, int line) {
    const double gain = c->epi ? 2.0 : 1.0;
    int bad = 0;
    for (size_t i = 0; i < g->nc; i++) {
        const float got = g->C[i], want = g->ref[i];
        bool ok;
        if (g->C0[i] == SENTINEL) ok = got == SENTINEL; /* outside every C item */
        else if (isnan(want)) ok = isnan(got);
        else ok = fabs((double)got - (double)want) <= 1e-5 + 1e-4 * gain * g->bound[i];
        if (!ok && bad++ < 3)
            af_test_fail(__FILE__, line,
                         "%s M=%lld N=%lld K=%lld batch=%lld ta=%d tb=%d pa=%d pb=%d beta=%g: C[%zu] = %.9g, want %.9g",
                         af_isa_name(isa), (long long)c->M, (long long)c->N, (long long)c->K, (long long)c->batch,
                         c->trans_a, c->trans_b, c->pack_a, c->pack_b, (double)c->beta, i, got, want);
    }
    return bad;
}

static int n_isas(void) { return (int)af_cpu_info_get()->isa_max + 1; }

static const int64_t edge_dims[] = {1, 2, 3, 7, 13, 14, 15, 16, 17, 31, 32, 33, 64, 100, 257};
#define N_EDGE (int)(sizeof edge_dims / sizeof edge_dims[0])

AF_TEST(gemm_all_edge_shapes_all_isas) {
    /* Every M, N, K of the edge set: tails of every microkernel (14x32, 6x16, 4x4), K blocks. */
    for (int mi = 0; mi < N_EDGE; mi++)
        for (int ni = 0; ni < N_EDGE; ni++)
            for (int ki = 0; ki < N_EDGE; ki++) {
                gcase c = {.M = edge_dims[mi], .N = edge_dims[ni], .K = edge_dims[ki], .batch = 1, .sa = -1,
                           .sb = -1, .sc = -1, .alpha = 1.0f};
                gbufs g;
                if (!make_bufs(&c, &g)) {
                    CHECK(!"out of memory");
                    return;
                }
                reference(&c, &g);
                for (int isa = 0; isa < n_isas(); isa++) {
                    CHECK(run_ours(&c, &g, (af_isa)isa, NULL) == AF_OK);
                    compare(&c, &g, (af_isa)isa, __LINE__);
                }
                free_bufs(&g);
            }
}

AF_TEST(gemm_transposes_ld_beta_packing) {
    static const int64_t dims[] = {1, 13, 17, 33};
    for (int mi = 0; mi < 4; mi++)
        for (int ni = 0; ni < 4; ni++)
            for (int ki = 0; ki < 4; ki++)
                for (int v = 0; v < 32; v++) {
                    gcase c = {.M = dims[mi], .N = dims[ni], .K = dims[ki], .batch = 1, .trans_a = v & 1,
                               .trans_b = (v >> 1) & 1, .pack_a = (v >> 2) & 1, .pack_b = (v >> 3) & 1,
                               .beta = (v >> 4) & 1 ? 1.0f : 0.0f, .alpha = 0.75f, .pad_a = 3, .pad_b = 5,
                               .pad_c = 2, .sa = -1, .sb = -1, .sc = -1};
                    gbufs g;
                    if (!make_bufs(&c, &g)) {
                        CHECK(!"out of memory");
                        return;
                    }
                    reference(&c, &g);
                    for (int isa = 0; isa < n_isas(); isa++) {
                        CHECK(run_ours(&c, &g, (af_isa)isa, NULL) == AF_OK);
                        compare(&c, &g, (af_isa)isa, __LINE__);
                    }
                    free_bufs(&g);
                }
    /* A general beta scales C. */
    gcase c = {.M = 15, .N = 40, .K = 9, .batch = 1, .alpha = -2.0f, .beta = 0.5f, .sa = -1, .sb = -1, .sc = -1};
    gbufs g;
    if (make_bufs(&c, &g)) {
        reference(&c, &g);
        for (int isa = 0; isa < n_isas(); isa++) {
            CHECK(run_ours(&c, &g, (af_isa)isa, NULL) == AF_OK);
            compare(&c, &g, (af_isa)isa, __LINE__);
        }
        free_bufs(&g);
    }
}

AF_TEST(gemm_batched_strides_and_broadcast) {
    static const int64_t shapes[][3] = {{17, 33, 13}, {64, 70, 9}, {14, 32, 257}, {3, 100, 31}};
    for (int si = 0; si < 4; si++)
        for (int v = 0; v < 24; v++) {
            /* v: which operand broadcasts (none, A, B), packing of either, C layout. */
            const int bc = v % 3;
            gcase c = {.M = shapes[si][0], .N = shapes[si][1], .K = shapes[si][2], .batch = 3,
                       .trans_b = si == 1, .pack_a = (v / 3) & 1, .pack_b = (v / 6) & 1,
                       .c_interleaved = (v / 12) & 1, .alpha = 1.0f, .beta = si == 2 ? 1.0f : 0.0f, .pad_a = 1,
                       .sa = bc == 1 ? 0 : -1, .sb = bc == 2 ? 0 : -1, .sc = -1};
            gbufs g;
            if (!make_bufs(&c, &g)) {
                CHECK(!"out of memory");
                return;
            }
            reference(&c, &g);
            for (int isa = 0; isa < n_isas(); isa++) {
                CHECK(run_ours(&c, &g, (af_isa)isa, NULL) == AF_OK);
                compare(&c, &g, (af_isa)isa, __LINE__);
            }
            free_bufs(&g);
        }
}

/* Per-batch row/column vectors (batch_stride) and a residual of the output's layout. */
static float vec_m[2][80], vec_m2[2][80], vec_n[2][80], vec_n2[2][80];

static void fill_vectors(void) {
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 80; i++) {
            vec_m[b][i] = 0.5f + 0.01f * (float)i - 0.3f * (float)b;
            vec_m2[b][i] = 0.2f * (float)(i % 7) - 0.6f;
            vec_n[b][i] = 1.5f - 0.02f * (float)i + 0.25f * (float)b;
            vec_n2[b][i] = 0.1f * (float)(i % 5) - 0.2f + (float)b;
        }
}

AF_TEST(gemm_every_epilogue_op) {
    fill_vectors();
    enum { M = 33, N = 70, K = 19, LDR = 75 };
    static float resid[2 * M * LDR];
    for (int i = 0; i < 2 * M * LDR; i++) resid[i] = frand();
    for (int op = 0; op < AF_EPI_OP_COUNT; op++) {
        af_epilogue e;
        af_epilogue_init(&e);
        af_epi_step s = {.op = (af_epi_op)op, .a = 0.5f, .b = 0.25f};
        switch (op) {
        case AF_EPI_BIAS_ROW: s.p = vec_m[0], s.batch_stride = 80; break;
        case AF_EPI_SCALE_SHIFT_ROW: s.p = vec_m[0], s.q = vec_m2[0], s.batch_stride = 80; break;
        case AF_EPI_BIAS_COL: s.p = vec_n[0], s.batch_stride = 80; break;
        case AF_EPI_SCALE_SHIFT_COL: s.p = vec_n[0], s.q = vec_n2[0], s.batch_stride = 80; break;
        case AF_EPI_ADD: s.p = resid, s.ld = LDR, s.batch_stride = M * LDR; break;
        case AF_EPI_CLIP: s.a = -0.5f, s.b = 0.75f; break;
        case AF_EPI_LEAKY_RELU: s.a = 0.1f; break;
        case AF_EPI_HARD_SIGMOID: s.a = 0.2f, s.b = 0.5f; break;
        default: break;
        }
        CHECK(af_epilogue_push(&e, &s) == AF_OK);
        for (int v = 0; v < 4; v++) {
            gcase c = {.M = M, .N = N, .K = K, .batch = 2, .pack_a = v & 1, .beta = (v >> 1) & 1 ? 1.0f : 0.0f,
                       .alpha = 1.0f, .sa = -1, .sb = -1, .sc = -1, .epi = &e};
            gbufs g;
            if (!make_bufs(&c, &g)) {
                CHECK(!"out of memory");
                return;
            }
            reference(&c, &g);
            for (int isa = 0; isa < n_isas(); isa++) {
                CHECK(run_ours(&c, &g, (af_isa)isa, NULL) == AF_OK);
                if (compare(&c, &g, (af_isa)isa, __LINE__))
                    af_test_fail(__FILE__, __LINE__, "op %s", af_epi_op_name(op));
            }
            free_bufs(&g);
        }
    }
    /* A chain: folded BN, residual, ReLU, over a K split into several blocks. */
    af_epilogue e;
    af_epilogue_init(&e);
    CHECK(af_epilogue_vec(&e, AF_EPI_SCALE_SHIFT_ROW, vec_m[0], vec_m2[0]) == AF_OK);
    CHECK(af_epilogue_residual(&e, resid, LDR) == AF_OK);
    CHECK(af_epilogue_unary(&e, AF_EPI_RELU, 0, 0) == AF_OK);
    gcase c = {.M = M, .N = N, .K = 700, .batch = 1, .pack_a = true, .alpha = 1.0f, .sa = -1, .sb = -1, .sc = -1,
               .epi = &e};
    gbufs g;
    if (make_bufs(&c, &g)) {
        reference(&c, &g);
        for (int isa = 0; isa < n_isas(); isa++) {
            CHECK(run_ours(&c, &g, (af_isa)isa, NULL) == AF_OK);
            compare(&c, &g, (af_isa)isa, __LINE__);
        }
        free_bufs(&g);
    }
}

/* B packed for many rows (48-wide panels and the 8x48 tile on AVX-512) against the reference
 * and, bit for bit, against B packed for the 14x32 tile and B unpacked, at 1 and 2 threads (two
 * threads pack A once for all tasks, see shared_a in gemm.c): rows and columns around the 8-row
 * and 48-column edges, K over one and two blocks, A and B transposed or not, epilogues in
 * registers (bias, ReLU) and after the store (GELU); M = 1 runs the gemv. A prepacked A of the
 * other tile is refused. */
AF_TEST(gemm_wide_panels_match_narrow_bits) {
    fill_vectors();
    af_threadpool *pool2 = NULL;
    CHECK(af_threadpool_create(2, &pool2) == AF_OK);
    af_epilogue in_regs, after;
    af_epilogue_init(&in_regs);
    CHECK(af_epilogue_vec(&in_regs, AF_EPI_BIAS_COL, vec_n[0], NULL) == AF_OK);
    CHECK(af_epilogue_unary(&in_regs, AF_EPI_RELU, 0, 0) == AF_OK);
    af_epilogue_init(&after);
    CHECK(af_epilogue_vec(&after, AF_EPI_BIAS_COL, vec_n[0], NULL) == AF_OK);
    CHECK(af_epilogue_unary(&after, AF_EPI_GELU_ERF, 0, 0) == AF_OK);
    /* 100 rows: 8x48 tiles with a 4-row edge; 128: packed for the 14x32 tile on AMD and others, for
     * the 8x48 one on Intel (af_gemm_narrow_rows). */
    static const int64_t ms[] = {1, 2, 7, 8, 9, 16, 17, 33, 100, 128}, ns[] = {1, 16, 17, 47, 48, 49, 80, 150};
    static const int64_t ks[] = {5, 769};
    int cases = 0;
    for (int mi = 0; mi < (int)(sizeof ms / sizeof ms[0]); mi++)
        for (int ni = 0; ni < 8; ni++)
            for (int ki = 0; ki < 2; ki++) {
                const int v = ns[ni] <= 80 ? (mi + ni + ki) % 3 : 0; /* vec_n has 80 columns */
                gcase c = {.M = ms[mi], .N = ns[ni], .K = ks[ki], .batch = 1, .trans_a = (mi + ki) & 1,
                           .trans_b = (mi + ni) & 1,
                           .pack_b = true, .for_rows = true, .rows_hint = ms[mi] > 1 ? ms[mi] : 0, /* 1: unknown */
                           .alpha = 1.0f, .beta = ki ? 0.5f : 0.0f,
                           .sa = -1, .sb = -1, .sc = -1, .epi = v == 1 ? &in_regs : v == 2 ? &after : NULL};
                gbufs g;
                if (!make_bufs(&c, &g)) {
                    CHECK(!"out of memory");
                    break;
                }
                float *wide = af_malloc(g.nc * sizeof(float));
                for (int isa = 0; wide && isa < n_isas(); isa++) {
                    CHECK(run_ours(&c, &g, (af_isa)isa, NULL) == AF_OK);
                    memcpy(wide, g.C, g.nc * sizeof(float));
                    if (isa == n_isas() - 1) {
                        reference(&c, &g);
                        compare(&c, &g, (af_isa)isa, __LINE__);
                    }
                    CHECK(run_ours(&c, &g, (af_isa)isa, pool2) == AF_OK);
                    if (memcmp(wide, g.C, g.nc * sizeof(float)) != 0)
                        af_test_fail(__FILE__, __LINE__, "%s M=%lld N=%lld K=%lld: 2 threads differ", af_isa_name(isa),
                                     (long long)c.M, (long long)c.N, (long long)c.K);
                    gcase narrow = c;
                    narrow.for_rows = false;
                    for (int u = 0; u < 3; u++) { /* narrow at 1 and 2 threads, unpacked */
                        narrow.pack_b = u < 2;
                        CHECK(run_ours(&narrow, &g, (af_isa)isa, u == 1 ? pool2 : NULL) == AF_OK);
                        if (memcmp(wide, g.C, g.nc * sizeof(float)) != 0)
                            af_test_fail(__FILE__, __LINE__, "%s M=%lld N=%lld K=%lld: wide differs from %s",
                                         af_isa_name(isa), (long long)c.M, (long long)c.N, (long long)c.K,
                                         u == 0 ? "narrow" : u == 1 ? "narrow at 2 threads" : "unpacked");
                    }
                }
                cases++;
                af_free(wide);
                free_bufs(&g);
            }
    CHECK(cases == 10 * 8 * 2);
    { /* two threads, A packed by both, without a workspace given: the GEMM allocates one */
        gcase c = {.M = 40, .N = 100, .K = 300, .batch = 1, .pack_b = true, .for_rows = true, .rows_hint = 40,
                   .alpha = 1.0f,
                   .sa = -1, .sb = -1, .sc = -1};
        gbufs g;
        if (make_bufs(&c, &g)) {
            af_gemm_packed *pb = NULL;
            CHECK(af_gemm_pack_b_for_rows(af_cpu_isa(), 40, 1, 300, 100, g.B, g.ldb, false, 0, &pb) == AF_OK);
            af_gemm_desc d = af_gemm_desc_default();
            d.M = 40, d.N = 100, d.K = 300, d.A = g.A, d.lda = g.lda, d.packed_b = pb, d.C = g.C, d.ldc = g.ldc;
            memcpy(g.C, g.C0, g.nc * sizeof(float));
            CHECK(af_sgemm(&d, pool2) == AF_OK);
            reference(&c, &g);
            compare(&c, &g, af_cpu_isa(), __LINE__);
            af_gemm_packed_free(pb);
            free_bufs(&g);
        }
    }
    if (af_cpu_info_get()->isa_max >= AF_ISA_AVX512) { /* which tile af_gemm_pack_b_for_rows packs for */
        static float b[3 * 100];
        const struct {
            int64_t rows, panel_w;
        } want[] = {{0, 48},  {1, 32}, {7, 32}, {8, 48}, {af_gemm_narrow_rows() - 1, 48}, {af_gemm_narrow_rows(), 32},
                    {384, 32}};
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            af_gemm_packed *pb = NULL;
            CHECK(af_gemm_pack_b_for_rows(AF_ISA_AVX512, want[i].rows, 1, 3, 100, b, 100, false, 0, &pb) == AF_OK);
            /* 100 columns: 3 panels of 48 or 4 of 32 */
            const size_t w = (size_t)want[i].panel_w, bytes = 3 * ((100 + w - 1) / w) * w * sizeof(float);
            if (af_gemm_packed_bytes(pb) != bytes)
                af_test_fail(__FILE__, __LINE__, "rows %lld: %zu packed bytes, want %zu (%zu-wide panels)",
                             (long long)want[i].rows, af_gemm_packed_bytes(pb), bytes, w);
            af_gemm_packed_free(pb);
        }
    }
    if (af_cpu_info_get()->isa_max >= AF_ISA_AVX512) { /* operands packed for different tiles */
        float a[8 * 4] = {0}, b[4 * 48] = {0}, cm[8 * 48];
        af_gemm_packed *pa = NULL, *pb = NULL;
        CHECK(af_gemm_pack_a(AF_ISA_AVX512, 1, 8, 4, a, 4, false, 0, &pa) == AF_OK);
        CHECK(af_gemm_pack_b_for_rows(AF_ISA_AVX512, 8, 1, 4, 48, b, 48, false, 0, &pb) == AF_OK);
        af_gemm_desc d = af_gemm_desc_default();
        d.isa = AF_ISA_AVX512, d.M = 8, d.N = 48, d.K = 4, d.packed_a = pa, d.packed_b = pb, d.C = cm, d.ldc = 48;
        CHECK(af_sgemm(&d, NULL) == AF_ERR_INVALID_ARGUMENT);
        af_gemm_packed_free(pa);
        af_gemm_packed_free(pb);
    }
    af_threadpool_free(pool2);
}

AF_TEST(gemm_threads_and_packing_bit_identical) {
    fill_vectors();
    af_threadpool *pools[3] = {NULL, NULL, NULL};
    CHECK(af_threadpool_create(2, &pools[1]) == AF_OK);
    CHECK(af_threadpool_create(3, &pools[2]) == AF_OK);
    af_epilogue e;
    af_epilogue_init(&e);
    CHECK(af_epilogue_vec(&e, AF_EPI_BIAS_ROW, vec_m[0], NULL) == AF_OK);
    CHECK(af_epilogue_unary(&e, AF_EPI_GELU_ERF, 0, 0) == AF_OK);
    static const int64_t shapes[][4] = {{257, 257, 257, 1}, {64, 1000, 576, 1}, {2048 / 8, 49, 700, 1},
                                        {14, 3000, 33, 1},   {100, 64, 128, 3},  {31, 17, 2000, 2},
                                        {128, 400, 300, 1}}; /* BERT's rows: 10 tiles, not 9 and a 2-row one */
    for (int si = 0; si < 7; si++)
        for (int v = 0; v < 4; v++) {
            gcase c = {.M = shapes[si][0], .N = shapes[si][1], .K = shapes[si][2], .batch = shapes[si][3],
                       .trans_b = v & 1, .alpha = 1.0f, .sa = -1, .sb = -1, .sc = -1,
                       .epi = (v & 2) && shapes[si][0] <= 80 ? &e : NULL}; /* vec_m has 80 rows */
            gbufs g;
            if (!make_bufs(&c, &g)) {
                CHECK(!"out of memory");
                break;
            }
            float *first = af_malloc(g.nc * sizeof(float));
            for (int isa = 0; first && isa < n_isas(); isa++) {
                CHECK(run_ours(&c, &g, (af_isa)isa, NULL) == AF_OK);
                memcpy(first, g.C, g.nc * sizeof(float));
                for (int t = 1; t < 3; t++) {
                    CHECK(run_ours(&c, &g, (af_isa)isa, pools[t]) == AF_OK);
                    if (memcmp(first, g.C, g.nc * sizeof(float)) != 0)
                        af_test_fail(__FILE__, __LINE__, "%s shape %d: %d threads differ from 1", af_isa_name(isa), si,
                                     t + 1);
                }
                gcase packed = c;
                packed.pack_a = packed.pack_b = true;
                CHECK(run_ours(&packed, &g, (af_isa)isa, pools[1]) == AF_OK);
                if (memcmp(first, g.C, g.nc * sizeof(float)) != 0)
                    af_test_fail(__FILE__, __LINE__, "%s shape %d: packed differs from unpacked", af_isa_name(isa), si);
                /* B prepacked alone: the threads pack A once, its rows spread evenly over the tiles. */
                gcase shared = c;
                shared.pack_b = true;
                for (int t = 1; t < 3; t++) {
                    CHECK(run_ours(&shared, &g, (af_isa)isa, pools[t]) == AF_OK);
                    if (memcmp(first, g.C, g.nc * sizeof(float)) != 0)
                        af_test_fail(__FILE__, __LINE__, "%s shape %d: A shared by %d threads differs", af_isa_name(isa),
                                     si, t + 1);
                }
            }
            if (si == 0 && v == 0 && first) { /* and the values are right */
                reference(&c, &g);
                memcpy(g.C, first, g.nc * sizeof(float));
                compare(&c, &g, (af_isa)(n_isas() - 1), __LINE__);
            }
            af_free(first);
            free_bufs(&g);
        }
    af_threadpool_free(pools[1]);
    af_threadpool_free(pools[2]);
}

/* The two tile orders (sweep_rows_outer / sweep_cols_outer, the desc's order forces one) run the
 * same microkernel calls in another order: the results must be the same bits, and right, with the
 * residual and an after-store step, B read in place, packed (transposed) and with a tail panel. */
AF_TEST(gemm_row_and_column_sweeps_bit_identical) {
    fill_vectors();
    enum { M = 75, N = 230, LDR = 240 };
    static float resid[M * LDR];
    for (int i = 0; i < M * LDR; i++) resid[i] = frand();
    af_epilogue e;
    af_epilogue_init(&e);
    CHECK(af_epilogue_vec(&e, AF_EPI_BIAS_ROW, vec_m[0], NULL) == AF_OK);
    CHECK(af_epilogue_residual(&e, resid, LDR) == AF_OK);
    CHECK(af_epilogue_unary(&e, AF_EPI_GELU_ERF, 0, 0) == AF_OK); /* applied after the store */
    af_threadpool *pool = NULL;
    CHECK(af_threadpool_create(2, &pool) == AF_OK);
    static const int64_t ks[] = {16, 64, 128, 300};
    for (int ki = 0; ki < 4; ki++)
        for (int v = 0; v < 8; v++) {
            gcase c = {.M = M, .N = N, .K = ks[ki], .batch = 1, .trans_b = v & 1, .pack_a = (v >> 1) & 1,
                       .beta = (v >> 2) & 1 ? 1.0f : 0.0f, .alpha = 1.0f, .pad_b = 3, .pad_c = 5, .sa = -1,
                       .sb = -1, .sc = -1, .epi = &e};
            gbufs g;
            if (!make_bufs(&c, &g)) {
                CHECK(!"out of memory");
                break;
            }
            reference(&c, &g);
            float *rows = af_malloc(g.nc * sizeof(float));
            for (int isa = 0; rows && isa < n_isas(); isa++)
                for (int t = 0; t < 2; t++) {
                    af_threadpool *p = t ? pool : NULL;
                    c.order = AF_GEMM_ORDER_ROWS;
                    CHECK(run_ours(&c, &g, (af_isa)isa, p) == AF_OK);
                    compare(&c, &g, (af_isa)isa, __LINE__);
                    memcpy(rows, g.C, g.nc * sizeof(float));
                    c.order = AF_GEMM_ORDER_COLS;
                    CHECK(run_ours(&c, &g, (af_isa)isa, p) == AF_OK);
                    if (memcmp(rows, g.C, g.nc * sizeof(float)) != 0)
                        af_test_fail(__FILE__, __LINE__, "%s K %d case %d, %d threads: row sweep differs from column sweep",
                                     af_isa_name(isa), (int)c.K, v, t + 1);
                }
            af_free(rows);
            free_bufs(&g);
        }
    af_threadpool_free(pool);
}

AF_TEST(gemm_vector_products_match_tile_path) {
    /* N = 1 on a packed A and M = 1 on a packed B run the ISA's gemv kernel; the same product
     * with the vector's operand packed too, or strided, runs the tile kernels. Both must match the
     * reference and each other bit for bit, at every thread count, over several K blocks, with
     * alpha, beta, per-item weights or shared ones, and an epilogue (bias then HardSigmoid). */
    static float bias[2][1000];
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 1000; i++) bias[b][i] = 0.001f * (float)(i % 97) - 0.05f + 0.5f * (float)b;
    af_threadpool *pools[3] = {NULL, NULL, NULL};
    CHECK(af_threadpool_create(2, &pools[1]) == AF_OK);
    CHECK(af_threadpool_create(3, &pools[2]) == AF_OK);
    static const int64_t lens[] = {1000, 257, 33, 14, 1};
    static const int64_t ks[] = {700, 33, 1};
    for (int li = 0; li < 5; li++)
        for (int ki = 0; ki < 3; ki++)
            for (int v = 0; v < 16; v++) {
                const bool column = v & 1; /* N = 1 (weights are A); else M = 1 (weights are B) */
                af_epilogue e;
                af_epilogue_init(&e);
                CHECK(af_epilogue_vec(&e, column ? AF_EPI_BIAS_ROW : AF_EPI_BIAS_COL, bias[0], NULL) == AF_OK);
                e.steps[0].batch_stride = 1000;
                CHECK(af_epilogue_unary(&e, AF_EPI_HARD_SIGMOID, 0.2f, 0.5f) == AF_OK);
                gcase c = {.M = column ? lens[li] : 1, .N = column ? 1 : lens[li], .K = ks[ki], .batch = 2,
                           .trans_a = (v >> 1) & 1, .trans_b = (v >> 1) & 1, .pack_a = column, .pack_b = !column,
                           .alpha = (v >> 2) & 1 ? -0.75f : 1.0f, .beta = (v >> 3) & 1 ? 0.5f : 0.0f,
                           .sa = column && li % 2 ? 0 : -1, .sb = !column && li % 2 ? 0 : -1, .sc = -1,
                           .epi = ki == 0 ? &e : NULL};
                gbufs g;
                if (!make_bufs(&c, &g)) {
                    CHECK(!"out of memory");
                    break;
                }
                reference(&c, &g);
                float *first = af_malloc(g.nc * sizeof(float));
                for (int isa = 0; first && isa < n_isas(); isa++) {
                    CHECK(run_ours(&c, &g, (af_isa)isa, NULL) == AF_OK);
                    compare(&c, &g, (af_isa)isa, __LINE__);
                    memcpy(first, g.C, g.nc * sizeof(float));
                    for (int t = 1; t < 3; t++) {
                        CHECK(run_ours(&c, &g, (af_isa)isa, pools[t]) == AF_OK);
                        if (memcmp(first, g.C, g.nc * sizeof(float)) != 0)
                            af_test_fail(__FILE__, __LINE__, "%s len %lld K %lld v %d: %d threads differ from 1",
                                         af_isa_name(isa), (long long)lens[li], (long long)ks[ki], v, t + 1);
                    }
                    gcase tiles = c;
                    tiles.pack_a = tiles.pack_b = true; /* the vector packed as well: the tile path */
                    CHECK(run_ours(&tiles, &g, (af_isa)isa, pools[1]) == AF_OK);
                    if (memcmp(first, g.C, g.nc * sizeof(float)) != 0)
                        af_test_fail(__FILE__, __LINE__, "%s len %lld K %lld v %d: gemv differs from the tiles",
                                     af_isa_name(isa), (long long)lens[li], (long long)ks[ki], v);
                }
                af_free(first);
                free_bufs(&g);
            }
    af_threadpool_free(pools[1]);
    af_threadpool_free(pools[2]);
}

/* k_block (what convolutions pass, AF_CONV_FLUSH_K) cuts K into shorter blocks, each summed on
 * its own and added into C: the same bits as one GEMM per block with beta 1 after the first, on
 * the tile path and the gemv path alike, at any thread count, and right. */
AF_TEST(gemm_k_block_sums_in_shorter_blocks) {
    enum { K = 1000, BLOCK = 250 };
    af_threadpool *pool = NULL;
    CHECK(af_threadpool_create(2, &pool) == AF_OK);
    static const int64_t shapes[][2] = {{64, 300}, {300, 1}}; /* M, N: tiles; N = 1 on a packed A: gemv */
    for (int si = 0; si < 2; si++) {
        gcase c = {.M = shapes[si][0], .N = shapes[si][1], .K = K, .batch = 1, .pack_a = si == 1, .alpha = 1.0f,
                   .sa = -1, .sb = -1, .sc = -1, .k_block = BLOCK};
        gbufs g;
        if (!make_bufs(&c, &g)) {
            CHECK(!"out of memory");
            break;
        }
        reference(&c, &g);
        float *blocked = af_malloc(g.nc * sizeof(float));
        for (int isa = 0; blocked && isa < n_isas(); isa++) {
            CHECK(run_ours(&c, &g, (af_isa)isa, NULL) == AF_OK);
            compare(&c, &g, (af_isa)isa, __LINE__);
            memcpy(blocked, g.C, g.nc * sizeof(float));
            /* one GEMM per block, by hand */
            memcpy(g.C, g.C0, g.nc * sizeof(float));
            for (int64_t k0 = 0; k0 < K; k0 += BLOCK) {
                af_gemm_desc d = af_gemm_desc_default();
                d.isa = (af_isa)isa;
                d.M = c.M, d.N = c.N, d.K = BLOCK;
                d.A = g.A + k0, d.lda = g.lda;
                d.B = g.B + k0 * g.ldb, d.ldb = g.ldb;
                d.C = g.C, d.ldc = g.ldc;
                d.beta = k0 ? 1.0f : 0.0f;
                CHECK(af_sgemm(&d, NULL) == AF_OK);
            }
            if (memcmp(blocked, g.C, g.nc * sizeof(float)) != 0)
                af_test_fail(__FILE__, __LINE__, "%s shape %d: k_block differs from a GEMM per block", af_isa_name(isa),
                             si);
            gcase other = c;
            other.pack_a = other.pack_b = true; /* the tile path for the gemv shape too */
            CHECK(run_ours(&other, &g, (af_isa)isa, pool) == AF_OK);
            if (memcmp(blocked, g.C, g.nc * sizeof(float)) != 0)
                af_test_fail(__FILE__, __LINE__, "%s shape %d: packed, 2 threads differ", af_isa_name(isa), si);
            other = c;
            other.k_block = 0; /* K = 1000 is 2 blocks of 500 by default */
            CHECK(run_ours(&other, &g, (af_isa)isa, NULL) == AF_OK);
            if (memcmp(blocked, g.C, g.nc * sizeof(float)) == 0)
                af_test_fail(__FILE__, __LINE__, "%s shape %d: k_block changed nothing", af_isa_name(isa), si);
        }
        af_free(blocked);
        free_bufs(&g);
    }
    gcase bad = {.M = 4, .N = 4, .K = 4, .batch = 1, .alpha = 1.0f, .sa = -1, .sb = -1, .sc = -1, .k_block = -1};
    gbufs g;
    if (make_bufs(&bad, &g)) {
        CHECK(run_ours(&bad, &g, af_cpu_isa(), NULL) == AF_ERR_INVALID_ARGUMENT);
        free_bufs(&g);
    }
    af_threadpool_free(pool);
}

/* Item b of a [batch][N][ld] source for pack_b_each (transposed B, as Winograd's U). */
typedef struct fill_src {
    const float *src;
    int64_t item;
} fill_src;

static void fill_item(void *ctx, int64_t b, float *dst) {
    const fill_src *f = ctx;
    memcpy(dst, f->src + b * f->item, (size_t)f->item * sizeof *dst);
}

AF_TEST(gemm_pack_b_each_matches_pack_b) {
    /* Items made one at a time must pack to the same bytes as the whole batched operand, for both
     * layouts of op(B), widths off the panel size, and on every ISA. */
    static const int64_t ns[] = {1, 31, 33, 64}, ks[] = {1, 17};
    for (int isa = 0; isa < n_isas(); isa++)
        for (int ni = 0; ni < 4; ni++)
            for (int ki = 0; ki < 2; ki++)
                for (int trans = 0; trans < 2; trans++) {
                    const int64_t N = ns[ni], K = ks[ki], batch = 3, ld = (trans ? K : N) + 2;
                    const int64_t item = (trans ? N : K) * ld;
                    float *src = af_malloc((size_t)(batch * item) * sizeof *src);
                    if (!src) {
                        CHECK(!"out of memory");
                        return;
                    }
                    for (int64_t i = 0; i < batch * item; i++) src[i] = (float)(i % 101) - 50.0f;
                    af_gemm_packed *whole = NULL, *each = NULL;
                    fill_src f = {src, item};
                    CHECK(af_gemm_pack_b((af_isa)isa, batch, K, N, src, ld, trans, item, &whole) == AF_OK);
                    CHECK(af_gemm_pack_b_each((af_isa)isa, batch, K, N, ld, trans, fill_item, &f, &each) == AF_OK);
                    if (whole && each) {
                        CHECK(af_gemm_packed_bytes(whole) == af_gemm_packed_bytes(each));
                        if (memcmp(af_gemm_packed_data(whole), af_gemm_packed_data(each), af_gemm_packed_bytes(whole)))
                            af_test_fail(__FILE__, __LINE__, "%s N %lld K %lld trans %d: items packed differently",
                                         af_isa_name(isa), (long long)N, (long long)K, trans);
                    }
                    af_gemm_packed *none = NULL;
                    CHECK(af_gemm_pack_b_each((af_isa)isa, batch, K, N, ld, trans, NULL, NULL, &none) ==
                          AF_ERR_INVALID_ARGUMENT);
                    CHECK(none == NULL);
                    af_gemm_packed_free(whole);
                    af_gemm_packed_free(each);
                    af_free(src);
                }
}

AF_TEST(gemm_packed_unpack_gives_the_source_back) {
    /* Every packer (A, B, the 8x48 tile's B, the conv's channel-rows A) laid out as a row-major
     * [rows, K] weight, lanes off the panel width: unpacking must give those floats back. */
    static const int64_t rs[] = {1, 13, 33, 50}, ks[] = {1, 9, 40};
    for (int isa = 0; isa < n_isas(); isa++)
        for (int ri = 0; ri < 4; ri++)
            for (int ki = 0; ki < 3; ki++)
                for (int kind = 0; kind < (isa == AF_ISA_AVX512 ? 4 : 3); kind++) { /* the 8x48 tile's own */
                    const int64_t R = rs[ri], K = ks[ki];
                    float *w = af_malloc((size_t)(R * K) * sizeof *w), *back = af_malloc((size_t)(R * K) * sizeof *back);
                    for (int64_t i = 0; w && i < R * K; i++) w[i] = (float)(i % 97) * 0.5f - 20.0f;
                    af_gemm_packed *p = NULL;
                    af_status st = AF_ERR_OUT_OF_MEMORY;
                    if (w && back) {
                        if (kind == 0) st = af_gemm_pack_a((af_isa)isa, 1, R, K, w, K, false, 0, &p);
                        if (kind == 1) st = af_gemm_pack_b((af_isa)isa, 1, K, R, w, K, true, 0, &p);
                        if (kind == 2) st = af_gemm_pack_b_for_rows((af_isa)isa, 64, 1, K, R, w, K, true, 0, &p);
                        if (kind == 3) st = af_gemm_pack_a_cfg((af_isa)isa, &af_gemm_cfg_avx512_wide, R, K, w, K, false, &p);
                    }
                    CHECK(st == AF_OK);
                    if (p) {
                        memset(back, 0xff, (size_t)(R * K) * sizeof *back);
                        af_gemm_packed_unpack(p, back);
                        if (memcmp(w, back, (size_t)(R * K) * sizeof *w))
                            af_test_fail(__FILE__, __LINE__, "%s rows %lld K %lld packer %d: unpacked differently",
                                         af_isa_name(isa), (long long)R, (long long)K, kind);
                    }
                    af_gemm_packed_free(p);
                    af_free(w);
                    af_free(back);
                }
}

AF_TEST(gemm_fused_epilogue_matches_applier) {
    /* A program the microkernel runs in registers (all of it, or a prefix with the rest in the
     * tile applier) versus the same program made unfusable by a leading * 1 (exact), which sends
     * all of it through the tile applier: the bits must agree. */
    fill_vectors();
    enum { M = 45, N = 77, K = 30, LDR = 80 };
    static float resid[2 * M * LDR];
    for (int i = 0; i < 2 * M * LDR; i++) resid[i] = frand();
    for (int variant = 0; variant < 5; variant++) {
        af_epilogue fused, plain;
        af_epilogue_init(&fused);
        af_epi_step steps[4];
        int n = 0;
        const af_epi_step scale = {.op = AF_EPI_SCALE_SHIFT_ROW, .p = vec_m[0], .q = vec_m2[0], .batch_stride = 80};
        const af_epi_step bias_m = {.op = AF_EPI_BIAS_ROW, .p = vec_m[0], .batch_stride = 80};
        const af_epi_step bias_n = {.op = AF_EPI_BIAS_COL, .p = vec_n[0], .batch_stride = 80};
        const af_epi_step add = {.op = AF_EPI_ADD, .p = resid, .ld = LDR, .batch_stride = M * LDR};
        const af_epi_step clip = {.op = AF_EPI_CLIP, .a = -0.25f, .b = 0.5f}, relu = {.op = AF_EPI_RELU};
        const af_epi_step hswish = {.op = AF_EPI_HARD_SWISH}, gelu = {.op = AF_EPI_GELU_ERF};
        if (variant == 0) steps[n++] = scale;
        if (variant == 1 || variant >= 3) steps[n++] = bias_m;
        if (variant == 1 || variant == 2) steps[n++] = bias_n;
        if (variant != 1 && variant != 3) steps[n++] = add;
        /* 3: HardSwish in registers; 4: bias + residual in registers, then GELU in the applier */
        steps[n++] = variant == 2 ? clip : variant == 3 ? hswish : variant == 4 ? gelu : relu;
        for (int i = 0; i < n; i++) CHECK(af_epilogue_push(&fused, &steps[i]) == AF_OK);
        af_epilogue_init(&plain);
        CHECK(af_epilogue_unary(&plain, AF_EPI_MUL_SCALAR, 1.0f, 0) == AF_OK);
        for (int i = 0; i < n; i++) CHECK(af_epilogue_push(&plain, &steps[i]) == AF_OK);
        gcase c = {.M = M, .N = N, .K = K, .batch = 2, .alpha = 1.0f, .beta = variant == 1 ? 1.0f : 0.0f, .sa = -1,
                   .sb = -1, .sc = -1, .epi = &fused};
        gbufs g;
        if (!make_bufs(&c, &g)) {
            CHECK(!"out of memory");
            return;
        }
        float *first = af_malloc(g.nc * sizeof(float));
        reference(&c, &g);
        for (int isa = 0; first && isa < n_isas(); isa++) {
            c.epi = &fused;
            CHECK(run_ours(&c, &g, (af_isa)isa, NULL) == AF_OK);
            compare(&c, &g, (af_isa)isa, __LINE__);
            memcpy(first, g.C, g.nc * sizeof(float));
            c.epi = &plain;
            CHECK(run_ours(&c, &g, (af_isa)isa, NULL) == AF_OK);
            if (memcmp(first, g.C, g.nc * sizeof(float)) != 0)
                af_test_fail(__FILE__, __LINE__, "%s variant %d: fused and applied epilogues differ", af_isa_name(isa),
                             variant);
        }
        af_free(first);
        free_bufs(&g);
    }
}

AF_TEST(gemm_degenerate_sizes) {
    fill_vectors();
    af_epilogue e;
    af_epilogue_init(&e);
    CHECK(af_epilogue_vec(&e, AF_EPI_BIAS_COL, vec_n[0], NULL) == AF_OK);
    for (int isa = 0; isa < n_isas(); isa++) {
        /* K = 0: C = beta * C, then the epilogue. */
        for (int beta = 0; beta < 2; beta++) {
            gcase c = {.M = 5, .N = 40, .K = 0, .batch = 2, .alpha = 1.0f, .beta = (float)beta, .sa = -1, .sb = -1,
                       .sc = -1, .epi = &e};
            gbufs g;
            if (!make_bufs(&c, &g)) continue;
            reference(&c, &g);
            CHECK(run_ours(&c, &g, (af_isa)isa, NULL) == AF_OK);
            compare(&c, &g, (af_isa)isa, __LINE__);
            free_bufs(&g);
        }
        /* M, N or batch 0: nothing happens, and no pointer is needed. */
        af_gemm_desc d = af_gemm_desc_default();
        d.isa = (af_isa)isa;
        d.M = 0, d.N = 5, d.K = 3;
        CHECK(af_sgemm(&d, NULL) == AF_OK);
        d.M = 5, d.N = 0;
        CHECK(af_sgemm(&d, NULL) == AF_OK);
        d.N = 5, d.batch = 0;
        CHECK(af_sgemm(&d, NULL) == AF_OK);
        CHECK_EQ_INT(af_sgemm_workspace_size(&d, 2), 0);
    }
}

AF_TEST(gemm_invalid_arguments_and_oom) {
    float a[64] = {0}, b[64] = {0}, c[64];
    af_gemm_desc d = af_gemm_desc_default();
    d.M = 4, d.N = 4, d.K = 4;
    d.A = a, d.lda = 4, d.B = b, d.ldb = 4, d.C = c, d.ldc = 4;
    CHECK(af_sgemm(NULL, NULL) == AF_ERR_INVALID_ARGUMENT);
    CHECK(af_sgemm(&d, NULL) == AF_OK);
    d.lda = 3;
    CHECK(af_sgemm(&d, NULL) == AF_ERR_INVALID_ARGUMENT);
    d.lda = 4, d.ldc = 2;
    CHECK(af_sgemm(&d, NULL) == AF_ERR_INVALID_ARGUMENT);
    d.ldc = 4, d.B = NULL;
    CHECK(af_sgemm(&d, NULL) == AF_ERR_INVALID_ARGUMENT);
    d.B = b, d.M = -1;
    CHECK(af_sgemm(&d, NULL) == AF_ERR_INVALID_ARGUMENT);
    d.M = 4, d.order = (af_gemm_order)3; /* no such sweep order */
    CHECK(af_sgemm(&d, NULL) == AF_ERR_INVALID_ARGUMENT);
    d.order = AF_GEMM_ORDER_AUTO;
    /* A workspace that is too small is refused; none at all is allocated internally. */
    d.workspace = c, d.workspace_size = 4;
    CHECK(af_sgemm(&d, NULL) == AF_ERR_INVALID_ARGUMENT);
    d.workspace = NULL, d.workspace_size = 0;
    af_alloc_fail_after(0);
    CHECK(af_sgemm(&d, NULL) == AF_ERR_OUT_OF_MEMORY);
    af_gemm_packed *p = NULL;
    CHECK(af_gemm_pack_a(d.isa, 1, 4, 4, a, 4, false, 0, &p) == AF_ERR_OUT_OF_MEMORY && !p);
    af_alloc_fail_after(1);
    CHECK(af_gemm_pack_a(d.isa, 1, 4, 4, a, 4, false, 0, &p) == AF_ERR_OUT_OF_MEMORY && !p);
    af_alloc_fail_after(-1);
    /* Packed operands must match the GEMM: side, isa, shape, batch. */
    CHECK(af_gemm_pack_a(d.isa, 1, 4, 3, a, 4, false, 0, &p) == AF_OK);
    d.packed_a = p;
    CHECK(af_sgemm(&d, NULL) == AF_ERR_INVALID_ARGUMENT); /* K 3 vs 4 */
    af_gemm_packed_free(p);
    CHECK(af_gemm_pack_b(d.isa, 1, 4, 4, b, 4, false, 0, &p) == AF_OK);
    d.packed_a = p;
    CHECK(af_sgemm(&d, NULL) == AF_ERR_INVALID_ARGUMENT); /* a B panel as A */
    d.packed_a = NULL, d.packed_b = p;
    CHECK(af_sgemm(&d, NULL) == AF_OK);
    CHECK(af_gemm_packed_bytes(p) >= 16 * sizeof(float));
    if (af_cpu_isa_clamp(d.isa) > AF_ISA_SCALAR) { /* not so when AF_ISA=scalar picked d's isa */
        d.isa = AF_ISA_SCALAR;
        CHECK(af_sgemm(&d, NULL) == AF_ERR_INVALID_ARGUMENT); /* packed for another isa */
    }
    af_gemm_packed_free(p);
    af_gemm_packed_free(NULL);
    CHECK(af_gemm_pack_b(AF_ISA_SCALAR, 2, 4, 4, b, 4, false, -1, &p) == AF_ERR_INVALID_ARGUMENT && !p);
    CHECK(af_gemm_pack_b(AF_ISA_SCALAR, 1, 4, 4, b, 3, false, 0, &p) == AF_ERR_INVALID_ARGUMENT && !p);
    int mr, nr;
    af_gemm_tile_shape(AF_ISA_SCALAR, &mr, &nr);
    CHECK(mr == 4 && nr == 4);
}

/* ---- thread pool ---------------------------------------------------------------------------- */

typedef struct pool_ctx {
    _Atomic int hits[1000];
    _Atomic int bad_thread;
    int n_threads;
    af_threadpool *pool;
} pool_ctx;

static void count_task(void *ctx, int task, int thread) {
    pool_ctx *p = ctx;
    atomic_fetch_add(&p->hits[task], 1);
    if (thread < 0 || thread >= p->n_threads) atomic_store(&p->bad_thread, 1);
}

static void nested_task(void *ctx, int task, int thread) {
    pool_ctx *p = ctx;
    (void)thread;
    /* A run from inside a task must run inline instead of deadlocking. */
    af_threadpool_run(p->pool, 3, count_task, ctx);
    atomic_fetch_add(&p->hits[500 + task], 1);
}

/* Each task waits until every task has started, so no thread can finish its own and take another:
 * an affine run must put task t on thread t. */
static void barrier_task(void *ctx, int task, int thread) {
    pool_ctx *p = ctx;
    atomic_store(&p->hits[500 + task], thread);
    atomic_fetch_add(&p->hits[0], 1);
    while (atomic_load(&p->hits[0]) < p->n_threads) {
    }
}

AF_TEST(gemm_threadpool_affine_runs_share_t_on_thread_t) {
    static pool_ctx ctx;
    for (int nt = 2; nt <= 3; nt++) {
        af_threadpool *pool = NULL;
        CHECK(af_threadpool_create(nt, &pool) == AF_OK);
        ctx.n_threads = nt;
        for (int round = 0; round < 20; round++) {
            atomic_store(&ctx.hits[0], 0);
            af_threadpool_run_affine(pool, nt, barrier_task, &ctx);
            for (int t = 0; t < nt; t++) CHECK_EQ_INT(atomic_load(&ctx.hits[500 + t]), t);
        }
        af_threadpool_free(pool);
    }
}

AF_TEST(gemm_threadpool_runs_each_task_once) {
    static pool_ctx ctx;
    af_threadpool *pool = NULL;
    CHECK(af_threadpool_create(-1, &pool) == AF_ERR_INVALID_ARGUMENT && !pool);
    CHECK(af_threadpool_create(0, &pool) == AF_OK);
    CHECK_EQ_INT(af_threadpool_n_threads(pool), af_cpu_count());
    af_threadpool_free(pool);
    CHECK_EQ_INT(af_threadpool_n_threads(NULL), 1);
    for (int nt = 1; nt <= 4; nt++) {
        CHECK(af_threadpool_create(nt, &pool) == AF_OK);
        ctx.n_threads = nt;
        ctx.pool = pool;
        /* Many short runs back to back (races between runs), then one large one. */
        for (int round = 0; round < 300; round++) {
            const int n = 1 + round % 37;
            for (int i = 0; i < n; i++) atomic_store(&ctx.hits[i], 0);
            (round % 2 ? af_threadpool_run_affine : af_threadpool_run)(pool, n, count_task, &ctx);
            for (int i = 0; i < n; i++) CHECK_EQ_INT(atomic_load(&ctx.hits[i]), 1);
        }
        for (int affine = 0; affine < 2; affine++) {
            for (int i = 0; i < 1000; i++) atomic_store(&ctx.hits[i], 0);
            (affine ? af_threadpool_run_affine : af_threadpool_run)(pool, 1000, count_task, &ctx);
            for (int i = 0; i < 1000; i++) CHECK_EQ_INT(atomic_load(&ctx.hits[i]), 1);
        }
        af_threadpool_run(pool, 0, count_task, &ctx);
        for (int i = 0; i < 1000; i++) atomic_store(&ctx.hits[i], 0);
        af_threadpool_run(pool, 4, nested_task, &ctx);
        for (int i = 0; i < 3; i++) CHECK_EQ_INT(atomic_load(&ctx.hits[i]), 4);
        for (int i = 0; i < 4; i++) CHECK_EQ_INT(atomic_load(&ctx.hits[500 + i]), 1);
        CHECK(!atomic_load(&ctx.bad_thread));
        af_threadpool_free(pool);
    }
    /* NULL runs inline, in order. */
    ctx.n_threads = 1;
    for (int i = 0; i < 10; i++) atomic_store(&ctx.hits[i], 0);
    af_threadpool_run(NULL, 10, count_task, &ctx);
    for (int i = 0; i < 10; i++) CHECK_EQ_INT(atomic_load(&ctx.hits[i]), 1);
    af_threadpool_free(NULL);
    /* Out of memory while creating: no leak, an error. */
    af_alloc_fail_after(1);
    CHECK(af_threadpool_create(3, &pool) == AF_ERR_OUT_OF_MEMORY && !pool);
    af_alloc_fail_after(-1);
}

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>

static atomic_uint daz_seen; /* bit 0: some task saw DAZ set; bit 1: some task ran */

static void read_csr_task(void *ctx, int task, int thread) {
    (void)ctx, (void)task, (void)thread;
    atomic_fetch_or(&daz_seen, 2u | ((_mm_getcsr() & 0x0040u) ? 1u : 0u));
}

/* The GEMM reads denormal operands as zero (util/denormals.h: softmax probabilities near
 * exp(-100) made the product with V ten times slower), which moves each sum by less than
 * 2^-126 of the other factor; and it leaves every thread's MXCSR as it found it, so the ops
 * around it still see denormals. Attention-like: A = probabilities with most entries ~1e-40. */
AF_TEST(gemm_denormal_operands_read_as_zero_only_inside) {
    enum { M = 49, N = 32, K = 49, BATCH = 6 };
    float *a = af_malloc(sizeof(float) * BATCH * M * K), *b = af_malloc(sizeof(float) * BATCH * K * N),
          *c = af_malloc(sizeof(float) * BATCH * M * N);
    af_threadpool *pool = NULL;
    CHECK(a && b && c && af_threadpool_create(2, &pool) == AF_OK);
    if (!a || !b || !c || !pool) goto done;
    for (int i = 0; i < BATCH * M * K; i++) a[i] = i % 7 == 0 ? 0.25f * (float)(i % 5) : 3e-40f * (float)(1 + i % 3);
    for (int i = 0; i < BATCH * K * N; i++) b[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    const unsigned before = _mm_getcsr();
    for (int isa = 0; isa < n_isas(); isa++) {
        af_gemm_desc d = af_gemm_desc_default();
        d.isa = (af_isa)isa;
        d.M = M, d.N = N, d.K = K, d.batch = BATCH;
        d.A = a, d.lda = K, d.stride_a = M * K;
        d.B = b, d.ldb = N, d.stride_b = K * N;
        d.C = c, d.ldc = N, d.stride_c = M * N;
        CHECK(af_sgemm(&d, pool) == AF_OK);
        CHECK_EQ_INT((int)_mm_getcsr(), (int)before);
        int off = 0;
        for (int t = 0; t < BATCH; t++)
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double want = 0;
                    for (int k = 0; k < K; k++)
                        want += (double)a[(t * M + i) * K + k] * (double)b[(t * K + k) * N + j];
                    off += fabs((double)c[(t * M + i) * N + j] - want) > 1e-5 * (1 + fabs(want));
                }
        CHECK_EQ_INT(off, 0);
    }
    atomic_store(&daz_seen, 0u);
    af_threadpool_run_affine(pool, 8, read_csr_task, NULL);
    CHECK_EQ_INT((int)atomic_load(&daz_seen), 2); /* tasks ran, none with DAZ */
    const volatile float tiny = 1e-40f;
    CHECK(tiny * 1e30f > 0.0f); /* the caller still computes with denormals */
done:
    af_threadpool_free(pool);
    af_free(a);
    af_free(b);
    af_free(c);
}
#endif
