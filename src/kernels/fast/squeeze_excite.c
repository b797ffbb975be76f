/* The fused squeeze-excite kernel (see squeeze_excite.h). */
#include "kernels/fast/squeeze_excite.h"

#include <string.h>

#include "kernels/fast/vec_internal.h"
#include "kernels/gemm/gemm.h"
#include "util/alloc.h"
#include "util/error.h"

#define SE_CHUNK 16384 /* elements per task in the two passes over x */

typedef struct se_state {
    af_se_desc d;                 /* biases point into `block`; the weights live packed (w1, w2 NULL) */
    float *block;                 /* b1, b2 and C zeros, one allocation */
    const float *zeros;
    const af_vec_kernels *vk;
    af_isa isa;
    af_gemm_packed *pw1, *pw2;    /* W1^T and W2^T packed as the B of one-row GEMMs */
    af_epilogue epi1, epi2;       /* bias then act; bias then gate */
    size_t gemm_ws;               /* GEMM scratch, after the vectors in the workspace */
} se_state;

typedef struct se_job {
    const se_state *s;
    const float *x;
    float *y, *mean, *gate;
    int64_t plane, per_task;
    bool scale_pass;
} se_job;

/* mean, hidden and gate, rounded up to a cache line so the GEMM scratch after them is aligned. */
static size_t se_vectors_bytes(int64_t C, int64_t R) {
    return ((size_t)(2 * C + R) * sizeof(float) + 63) & ~(size_t)63;
}

static void se_free(void *p) {
    se_state *s = p;
    if (!s) return;
    af_gemm_packed_free(s->pw1);
    af_gemm_packed_free(s->pw2);
    af_free(s->block);
    af_free(s);
}

static void se_task(void *ctx, int task, int thread) {
    (void)thread;
    const se_job *j = ctx;
    const int64_t C = j->s->d.channels, c0 = (int64_t)task * j->per_task;
    const int64_t c1 = c0 + j->per_task < C ? c0 + j->per_task : C;
    if (j->scale_pass) {
        j->s->vk->scale_shift(1, c1 - c0, j->plane, j->x + c0 * j->plane, j->y + c0 * j->plane, j->gate + c0,
                              j->s->zeros + c0);
        return;
    }
    for (int64_t c = c0; c < c1; c++) j->s->vk->global_pool(false, j->plane, j->x + c * j->plane, j->mean + c);
}

static void se_pass(se_job *j, af_threadpool *pool) {
    const int64_t C = j->s->d.channels;
    j->per_task = j->plane >= SE_CHUNK ? 1 : SE_CHUNK / (j->plane > 0 ? j->plane : 1);
    if (j->per_task > C) j->per_task = C;
    int n_tasks = (int)((C + j->per_task - 1) / j->per_task);
    af_threadpool_run(n_tasks > 1 ? pool : NULL, n_tasks, se_task, j);
}

/* out = W v + b, then the epilogue's step, as the one-row GEMM out^T = v^T W^T on W^T packed as
 * B, which runs the gemv kernel (a scalar dot product per row was 0.4 ms of a 7 ms MobileNetV3
 * run). W^T as B rather than W as A: B panels are 32 floats a row, whole cache lines, where A
 * panels' 14-float rows straddle lines; the squeeze-excite steps of MobileNetV3-L took 0.67-0.68
 * ms against 0.70-0.78 (three alternating pairs, 1 thread). */
static af_status matvec(const se_state *s, const af_gemm_packed *wt, int64_t rows, int64_t cols, const float *v,
                        const af_epilogue *epi, float *out, void *ws, af_threadpool *pool) {
    af_gemm_desc d = af_gemm_desc_default();
    d.isa = s->isa;
    d.M = 1;
    d.N = rows;
    d.K = cols;
    d.A = v;
    d.lda = cols;
    d.packed_b = wt;
    d.C = out;
    d.ldc = rows;
    d.epilogue = epi;
    d.workspace = ws;
    d.workspace_size = s->gemm_ws;
    return af_sgemm(&d, pool);
}

static size_t se_gemm_ws(const se_state *s, int n_threads) {
    af_gemm_desc d1 = {.isa = s->isa, .M = 1, .N = s->d.reduced, .K = s->d.channels, .packed_b = s->pw1, .batch = 1};
    af_gemm_desc d2 = {.isa = s->isa, .M = 1, .N = s->d.channels, .K = s->d.reduced, .packed_b = s->pw2, .batch = 1};
    size_t a = af_sgemm_workspace_size(&d1, n_threads), b = af_sgemm_workspace_size(&d2, n_threads);
    return a > b ? a : b;
}

static af_status se_run(const af_kernel *k, af_op_ctx *c, const af_epilogue *epi, af_threadpool *pool,
                        void *workspace) {
    (void)epi;
    const se_state *s = k->state;
    const af_tensor *x = af_ctx_input(c, 0);
    af_tensor *y = af_ctx_output(c, 0);
    const int64_t C = s->d.channels;
    if (!x || x->dtype != AF_DTYPE_FLOAT || x->rank < 3 || x->dims[1] != C || !af_tensor_same_shape(x, y))
        return af_ctx_fail(c, AF_ERR_RUNTIME, "squeeze-excite: X must be float32 [N, %lld, ...] like Y",
                           (long long)C);
    float *mean = workspace, *hidden = mean + C, *gate = hidden + s->d.reduced;
    void *gemm_ws = (char *)workspace + se_vectors_bytes(C, s->d.reduced);
    if (se_gemm_ws(s, af_threadpool_n_threads(pool)) > s->gemm_ws)
        pool = NULL; /* more threads than prepared for: the caller alone fits the scratch */
    const int64_t plane = af_dims_numel(x->rank - 2, x->dims + 2);
    for (int64_t n = 0; n < x->dims[0]; n++) {
        se_job j = {.s = s, .x = (const float *)x->data + n * C * plane, .y = (float *)y->data + n * C * plane,
                    .mean = mean, .gate = gate, .plane = plane};
        se_pass(&j, pool);
        af_status st = matvec(s, s->pw1, s->d.reduced, C, mean, &s->epi1, hidden, gemm_ws, pool);
        if (st == AF_OK) st = matvec(s, s->pw2, C, s->d.reduced, hidden, &s->epi2, gate, gemm_ws, pool);
        if (st != AF_OK) return af_ctx_fail(c, st, "squeeze-excite: matrix-vector product failed");
        j.scale_pass = true;
        se_pass(&j, pool);
    }
    return AF_OK;
}

af_status af_se_kernel_make(const af_se_desc *d, af_isa isa, int n_threads, af_kernel *k, af_error *err) {
    memset(k, 0, sizeof *k);
    const int64_t C = d->channels, R = d->reduced;
    if (C <= 0 || R <= 0 || !d->w1 || !d->w2 || C > (int64_t)1 << 24 || R > (int64_t)1 << 24)
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "squeeze-excite: bad description");
    se_state *s = af_calloc(1, sizeof *s);
    size_t n = (size_t)(R + 2 * C);
    float *block = s ? af_calloc(n, sizeof *block) : NULL;
    if (!block) {
        af_free(s);
        return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory preparing a squeeze-excite kernel");
    }
    float *b1 = block, *b2 = b1 + R, *zeros = b2 + C;
    if (d->b1) memcpy(b1, d->b1, (size_t)R * sizeof *b1);
    if (d->b2) memcpy(b2, d->b2, (size_t)C * sizeof *b2);
    s->d = *d;
    s->d.w1 = s->d.w2 = NULL, s->d.b1 = b1, s->d.b2 = b2;
    s->block = block;
    s->zeros = zeros;
    s->vk = af_vec_kernels_for(isa);
    s->isa = af_cpu_isa_clamp(isa);
    af_epilogue_init(&s->epi1);
    af_epilogue_init(&s->epi2);
    /* The products are one-row GEMMs (matvec): their outputs are columns. */
    af_status st = af_epilogue_vec(&s->epi1, AF_EPI_BIAS_COL, b1, NULL);
    if (st == AF_OK && d->has_act) st = af_epilogue_push(&s->epi1, &d->act);
    if (st == AF_OK) st = af_epilogue_vec(&s->epi2, AF_EPI_BIAS_COL, b2, NULL);
    if (st == AF_OK) st = af_epilogue_push(&s->epi2, &d->gate);
    /* W1 [R, C] row-major is op(B) = W1^T (C x R) stored transposed; W2 likewise. */
    if (st == AF_OK) st = af_gemm_pack_b(s->isa, 1, C, R, d->w1, C, true, 0, &s->pw1);
    if (st == AF_OK) st = af_gemm_pack_b(s->isa, 1, R, C, d->w2, R, true, 0, &s->pw2);
    if (st != AF_OK) {
        se_free(s);
        return af_errorf(err, st, "cannot prepare a squeeze-excite kernel (%s)", af_status_name(st));
    }
    s->gemm_ws = se_gemm_ws(s, n_threads > 0 ? n_threads : 1);
    *k = (af_kernel){.name = "f32_squeeze_excite", .state = s, .run = se_run, .free_state = se_free,
                     .workspace_bytes = se_vectors_bytes(C, R) + s->gemm_ws,
                     .weight_bytes = af_gemm_packed_bytes(s->pw1) + af_gemm_packed_bytes(s->pw2) + n * sizeof *block};
    return AF_OK;
}
