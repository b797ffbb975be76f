/*
 * Times af_sgemm against oneDNN (dnnl_sgemm) and OpenBLAS (cblas_sgemm) on the GEMM shapes of
 * ResNet-50, BERT-base and MobileNetV3. The libraries take turns in --reps rounds; in each round a
 * library runs after a 30 ms pause (so the previous one's spinning workers are idle), makes one
 * warm-up call and then calls timed one by one for --ms milliseconds (operands stay cache-warm, as
 * inside a model run). The table reports the median GFLOP/s over all timed calls: on a shared
 * machine a call that lost its core is an outlier, not a shift of the whole sample.
 *
 *   gemm_bench [--libs ours,ours_raw,ours_epi,dnnl,openblas] [--threads 1,2] [--reps 5] [--ms 40]
 *              [--filter SUBSTRING] [--check] [--clock wall|cpu]
 *
 * ours:     weights prepacked once (what the runtime does), activations packed per call
 * ours_raw: nothing prepacked (packs both operands per call, like dnnl_sgemm/cblas_sgemm)
 * ours_epi: ours plus a fused epilogue (conv: bias+ReLU, linear: bias+GELU, attention: scale)
 * Output: one line per (shape, threads, lib) "RESULT name threads lib gflops", then a table.
 */
#include <cblas.h>
#include <dnnl.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/gemm/gemm.h"
#include "util/alloc.h"

typedef enum { W_NONE, W_A, W_B } weight_side; /* which operand is a constant weight */

typedef struct shape {
    const char *name;
    int64_t M, N, K, batch;
    weight_side w;
    /* attention: strided heads; A/B/C leading dims and batch strides */
    int trans_b;
    int64_t lda, ldb, ldc, sa, sb, sc;
} shape;

#define LIN(n, m, nn, k) {n, m, nn, k, 1, W_B, 0, k, nn, nn, 0, 0, 0}
#define CONV(n, m, nn, k) {n, m, nn, k, 1, W_A, 0, k, nn, nn, 0, 0, 0}
static const shape shapes[] = {
    CONV("r50_conv2_3x3", 64, 3136, 576),
    CONV("r50_conv2_1x1up", 256, 3136, 64),
    CONV("r50_conv3_1x1up", 512, 784, 128),
    CONV("r50_conv3_3x3", 128, 784, 1152),
    CONV("r50_conv4_1x1up", 1024, 196, 256),
    CONV("r50_conv4_3x3", 256, 196, 2304),
    CONV("r50_conv5_1x1up", 2048, 49, 512),
    CONV("r50_conv5_3x3", 512, 49, 4608),
    CONV("r50_stem_7x7", 64, 12544, 147),
    LIN("bert_qkv_768", 128, 768, 768),
    LIN("bert_ffn_up", 128, 3072, 768),
    LIN("bert_ffn_down", 128, 768, 3072),
    /* QK^T per head: Q [128, 12*64] (head h at column 64h), K the same: op(B) = K_h^T */
    {"bert_attn_qk", 128, 128, 64, 12, W_NONE, 1, 768, 768, 128, 64, 64, 128 * 128},
    /* P V per head: P [12, 128, 128], V [128, 12*64], output [128, 12*64] */
    {"bert_attn_pv", 128, 64, 128, 12, W_NONE, 0, 128, 768, 768, 128 * 128, 64, 64},
    CONV("mnv3_pw_72x24", 72, 3136, 24),
    CONV("mnv3_pw_64x16", 64, 12544, 16),
    CONV("mnv3_pw_16x16", 16, 12544, 16),
    CONV("mnv3_pw_120x40", 120, 784, 40),
    CONV("mnv3_pw_960x160", 960, 49, 160),
};
#define N_SHAPES (int)(sizeof shapes / sizeof shapes[0])

enum { L_OURS, L_OURS_RAW, L_OURS_EPI, L_DNNL, L_OPENBLAS, N_LIBS };
static const char *lib_names[N_LIBS] = {"ours", "ours_raw", "ours_epi", "dnnl", "openblas"};

/* --clock cpu: process CPU time instead of wall time; with 1 thread it discounts the time other
 * processes on a shared machine take the core away (their cache pollution still counts). */
static clockid_t bench_clock = CLOCK_MONOTONIC;

static double now(void) {
    struct timespec t;
    clock_gettime(bench_clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sleep_ms(int ms) {
    struct timespec t = {0, ms * 1000000L};
    nanosleep(&t, NULL);
}

typedef struct problem {
    const shape *s;
    float *A, *B, *C, *bias_m, *bias_n;
    size_t a_len, b_len, c_len;
    af_gemm_packed *pa, *pb;
    af_gemm_desc d_packed, d_raw, d_epi;
    af_epilogue epi;
    void *ws;
} problem;

static float *rand_buf(size_t n) {
    float *p = af_malloc_aligned(n * sizeof *p);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) p[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    return p;
}

static void setup(problem *p, const shape *s, int max_threads) {
    memset(p, 0, sizeof *p);
    p->s = s;
    const int64_t ka = s->batch > 1 ? s->sa * (s->batch - 1) : 0, kb = s->batch > 1 ? s->sb * (s->batch - 1) : 0;
    const int64_t kcn = s->batch > 1 ? s->sc * (s->batch - 1) : 0;
    p->a_len = (size_t)(ka + s->M * s->lda);
    p->b_len = (size_t)(kb + (s->trans_b ? s->N : s->K) * s->ldb);
    p->c_len = (size_t)(kcn + s->M * s->ldc);
    p->A = rand_buf(p->a_len);
    p->B = rand_buf(p->b_len);
    p->C = rand_buf(p->c_len);
    p->bias_m = rand_buf((size_t)s->M);
    p->bias_n = rand_buf((size_t)s->N);
    af_gemm_desc d = af_gemm_desc_default();
    d.M = s->M, d.N = s->N, d.K = s->K, d.batch = s->batch;
    d.A = p->A, d.lda = s->lda, d.stride_a = s->sa;
    d.B = p->B, d.ldb = s->ldb, d.stride_b = s->sb, d.trans_b = s->trans_b;
    d.C = p->C, d.ldc = s->ldc, d.stride_c = s->sc;
    p->d_raw = d;
    if (s->w == W_A && af_gemm_pack_a(d.isa, 1, s->M, s->K, p->A, s->lda, false, 0, &p->pa) != AF_OK) exit(1);
    /* Linear weights as the runtime packs them, for the rows they meet (af_gemm_pack_b_for_rows). */
    if (s->w == W_B && af_gemm_pack_b_for_rows(d.isa, s->M, 1, s->K, s->N, p->B, s->ldb, false, 0, &p->pb) != AF_OK)
        exit(1);
    d.packed_a = p->pa;
    d.packed_b = p->pb;
    p->d_packed = d;
    af_epilogue_init(&p->epi);
    if (s->w == W_A) {
        af_epilogue_vec(&p->epi, AF_EPI_BIAS_ROW, p->bias_m, NULL);
        af_epilogue_unary(&p->epi, AF_EPI_RELU, 0, 0);
    } else if (s->w == W_B) {
        af_epilogue_vec(&p->epi, AF_EPI_BIAS_COL, p->bias_n, NULL);
        af_epilogue_unary(&p->epi, AF_EPI_GELU_ERF, 0, 0);
    } else {
        af_epilogue_unary(&p->epi, AF_EPI_MUL_SCALAR, 0.125f, 0);
    }
    p->d_epi = d;
    p->d_epi.epilogue = &p->epi;
    size_t ws = af_sgemm_workspace_size(&p->d_raw, max_threads);
    size_t ws2 = af_sgemm_workspace_size(&p->d_packed, max_threads);
    if (ws2 > ws) ws = ws2;
    p->ws = af_malloc_aligned(ws ? ws : 64);
    p->d_raw.workspace = p->d_packed.workspace = p->d_epi.workspace = p->ws;
    p->d_raw.workspace_size = p->d_packed.workspace_size = p->d_epi.workspace_size = ws;
}

static void teardown(problem *p) {
    af_gemm_packed_free(p->pa);
    af_gemm_packed_free(p->pb);
    af_free_aligned(p->A);
    af_free_aligned(p->B);
    af_free_aligned(p->C);
    af_free_aligned(p->bias_m);
    af_free_aligned(p->bias_n);
    af_free_aligned(p->ws);
}

static void run_once(problem *p, int lib, af_threadpool *pool) {
    const shape *s = p->s;
    switch (lib) {
    case L_OURS: af_sgemm(&p->d_packed, pool); break;
    case L_OURS_RAW: af_sgemm(&p->d_raw, pool); break;
    case L_OURS_EPI: af_sgemm(&p->d_epi, pool); break;
    case L_DNNL:
        for (int64_t b = 0; b < s->batch; b++)
            dnnl_sgemm('N', s->trans_b ? 'T' : 'N', s->M, s->N, s->K, 1.0f, p->A + b * s->sa, s->lda, p->B + b * s->sb,
                       s->ldb, 0.0f, p->C + b * s->sc, s->ldc);
        break;
    case L_OPENBLAS:
        for (int64_t b = 0; b < s->batch; b++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, s->trans_b ? CblasTrans : CblasNoTrans, (int)s->M, (int)s->N,
                        (int)s->K, 1.0f, p->A + b * s->sa, (int)s->lda, p->B + b * s->sb, (int)s->ldb, 0.0f,
                        p->C + b * s->sc, (int)s->ldc);
        break;
    default: break;
    }
}

/* One round of a library: a warm-up call, then calls timed one by one for at least min_s;
 * appends each call's GFLOP/s to out (up to cap values in all). */
static void sample(problem *p, int lib, af_threadpool *pool, double min_s, double *out, int *n_out, int cap) {
    const double flops = 2.0 * (double)p->s->M * (double)p->s->N * (double)p->s->K * (double)p->s->batch;
    run_once(p, lib, pool);
    const double start = now();
    double t;
    do {
        const double t0 = now();
        run_once(p, lib, pool);
        t = now();
        if (*n_out < cap) out[(*n_out)++] = flops / (t - t0) * 1e-9;
    } while (t - start < min_s);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Max |ours - dnnl| relative to sum |a||b| over C, for --check. */
static double compare(problem *p, af_threadpool *pool) {
    float *ref = af_malloc_aligned(p->c_len * sizeof *ref);
    run_once(p, L_DNNL, NULL);
    memcpy(ref, p->C, p->c_len * sizeof *ref);
    run_once(p, L_OURS, pool);
    double worst = 0;
    for (size_t i = 0; i < p->c_len; i++) {
        double e = fabs((double)ref[i] - (double)p->C[i]) / (1e-3 + 0.25 * (double)p->s->K);
        if (e > worst) worst = e;
    }
    af_free_aligned(ref);
    return worst;
}

#define MAX_REPS 64
#define MAX_CALLS 100000

int main(int argc, char **argv) {
    int use[N_LIBS] = {1, 0, 0, 1, 1};
    int threads[4] = {1, 2}, n_threads = 2, reps = 5, check = 0;
    double ms = 40;
    const char *filter = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--libs") && i + 1 < argc) {
            memset(use, 0, sizeof use);
            char buf[256];
            snprintf(buf, sizeof buf, "%s", argv[++i]);
            for (char *t = strtok(buf, ","); t; t = strtok(NULL, ","))
                for (int l = 0; l < N_LIBS; l++)
                    if (!strcmp(t, lib_names[l])) use[l] = 1;
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            n_threads = 0;
            char buf[64];
            snprintf(buf, sizeof buf, "%s", argv[++i]);
            for (char *t = strtok(buf, ","); t && n_threads < 4; t = strtok(NULL, ",")) threads[n_threads++] = atoi(t);
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
            if (reps < 1) reps = 1;
            if (reps > MAX_REPS) reps = MAX_REPS;
        } else if (!strcmp(argv[i], "--ms") && i + 1 < argc) {
            ms = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--filter") && i + 1 < argc) {
            filter = argv[++i];
        } else if (!strcmp(argv[i], "--clock") && i + 1 < argc) {
            bench_clock = !strcmp(argv[++i], "cpu") ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC;
        } else if (!strcmp(argv[i], "--check")) {
            check = 1;
        } else {
            fprintf(stderr, "usage: see the comment at the top of bench/gemm_bench.c\n");
            return 2;
        }
    }
    int max_threads = 1;
    for (int t = 0; t < n_threads; t++)
        if (threads[t] > max_threads) max_threads = threads[t];
    printf("# isa %s; OpenBLAS core %s; OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s\n", af_isa_name(af_cpu_isa()),
           openblas_get_corename(), getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "(unset)",
           getenv("OPENBLAS_L2_SIZE") ? getenv("OPENBLAS_L2_SIZE") : "(unset)");
    printf("%-18s %3s", "shape", "thr");
    for (int l = 0; l < N_LIBS; l++)
        if (use[l]) printf(" %9s", lib_names[l]);
    if (use[L_OURS] && use[L_DNNL]) printf(" %10s", "ours/dnnl");
    printf("   (GFLOP/s, median over calls in %d interleaved rounds of %g ms)\n", reps, ms);
    fflush(stdout);
    for (int ti = 0; ti < n_threads; ti++) {
        const int nt = threads[ti];
        af_threadpool *pool = NULL;
        if (nt > 1 && af_threadpool_create(nt, &pool) != AF_OK) return 1;
        omp_set_num_threads(nt);
        openblas_set_num_threads(nt);
        for (int si = 0; si < N_SHAPES; si++) {
            if (filter && !strstr(shapes[si].name, filter)) continue;
            problem p;
            setup(&p, &shapes[si], max_threads);
            if (check) printf("# check %s: max |ours-dnnl| / (K/4) = %.3g\n", shapes[si].name, compare(&p, pool));
            static double g[N_LIBS][MAX_CALLS];
            int n_g[N_LIBS] = {0};
            for (int r = 0; r < reps; r++)
                for (int l = 0; l < N_LIBS; l++) {
                    if (!use[l]) continue;
                    sleep_ms(30); /* let the last library's spinning workers (libgomp: ~300k spins) go idle */
                    sample(&p, l, pool, ms * 1e-3, g[l], &n_g[l], MAX_CALLS);
                }
            double med[N_LIBS] = {0};
            printf("%-18s %3d", shapes[si].name, nt);
            for (int l = 0; l < N_LIBS; l++) {
                if (!use[l]) continue;
                qsort(g[l], (size_t)n_g[l], sizeof g[l][0], cmp_double);
                med[l] = n_g[l] ? g[l][n_g[l] / 2] : 0;
                printf(" %9.1f", med[l]);
            }
            if (use[L_OURS] && use[L_DNNL]) printf(" %10.2f", med[L_OURS] / med[L_DNNL]);
            printf("\n");
            for (int l = 0; l < N_LIBS; l++)
                if (use[l]) printf("RESULT %s %d %s %.2f\n", shapes[si].name, nt, lib_names[l], med[l]);
            fflush(stdout);
            teardown(&p);
        }
        af_threadpool_free(pool);
    }
    return 0;
}
