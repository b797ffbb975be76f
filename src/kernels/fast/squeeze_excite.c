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
} se_state;

/* One pass over x, all images: channel c of the job is channel c % C of image c / C. */
typedef struct se_job {
    const se_state *s;
    const float *x;
    float *y, *mean, *gate;
    int64_t plane, channels, per_task;
    bool scale_pass;
} se_job;

/* mean, hidden and gate of n images, rounded up to a cache line so the GEMM scratch after them is
 * aligned. */
static size_t se_vectors_bytes(int64_t C, int64_t R, int64_t n) {
    return ((size_t)(n * (2 * C + R)) * sizeof(float) + 63) & ~(size_t)63;
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
    const int64_t c1 = c0 + j->per_task < j->channels ? c0 + j->per_task : j->channels;
    if (j->scale_pass) {
        for (int64_t c = c0, e; c < c1; c = e) { /* the shift (zeros) is per channel of one image */
            e = c1 < (c / C + 1) * C ? c1 : (c / C + 1) * C;
            j->s->vk->scale_shift(1, e - c, j->plane, j->x + c * j->plane, j->y + c * j->plane, j->gate + c,
                                  j->s->zeros + c % C);
        }
        return;
    }
    for (int64_t c = c0; c < c1; c++) j->s->vk->global_pool(false, j->plane, j->x + c * j->plane, j->mean + c);
}

static void se_pass(se_job *j, af_threadpool *pool) {
    j->per_task = j->plane >= SE_CHUNK ? 1 : SE_CHUNK / (j->plane > 0 ? j->plane : 1);
    if (j->per_task > j->channels) j->per_task = j->channels;
    int n_tasks = (int)((j->channels + j->per_task - 1) / j->per_task);
    af_threadpool_run(n_tasks > 1 ? pool : NULL, n_tasks, se_task, j);
}

/* out = W v + b, then the epilogue's step, for the n images' vectors v (rows of cols floats) at
 * once: the GEMM out^T = v^T W^T on W^T packed as B, one row per image, so the weights are read
 * once per batch; one row runs the gemv kernel (a scalar dot product per row was 0.4 ms of a 7 ms
 * MobileNetV3 run). W^T as B rather than W as A: B panels are 32 floats a row, whole cache lines,
 * where A panels' 14-float rows straddle lines; the squeeze-excite steps of MobileNetV3-L took
 * 0.67-0.68 ms against 0.70-0.78 (three alternating pairs, 1 thread). */
static af_status matvec(const se_state *s, const af_gemm_packed *wt, int64_t n, int64_t rows, int64_t cols,
                        const float *v, const af_epilogue *epi, float *out, void *ws, size_t ws_bytes,
                        af_threadpool *pool) {
    af_gemm_desc d = af_gemm_desc_default();
    d.isa = s->isa;
    d.M = n;
    d.N = rows;
    d.K = cols;
    d.A = v;
    d.lda = cols;
    d.packed_b = wt;
    d.C = out;
    d.ldc = rows;
    d.epilogue = epi;
    d.workspace = ws;
    d.workspace_size = ws_bytes;
    return af_sgemm(&d, pool);
}

/* The GEMM scratch of the two products for n images on n_threads threads. */
static size_t se_gemm_ws(const se_state *s, int64_t n, int n_threads) {
    af_gemm_desc d1 = {.isa = s->isa, .M = n, .N = s->d.reduced, .K = s->d.channels, .packed_b = s->pw1, .batch = 1};
    af_gemm_desc d2 = {.isa = s->isa, .M = n, .N = s->d.channels, .K = s->d.reduced, .packed_b = s->pw2, .batch = 1};
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
    /* Every image in each pass: the pools, the two products (one row per image) and the scaling.
     * The workspace was planned for one image; a batch brings its own (its vectors are small). */
    const int64_t N = x->dims[0], R = s->d.reduced, plane = af_dims_numel(x->rank - 2, x->dims + 2);
    if (N == 0) return AF_OK;
    const size_t vec_bytes = se_vectors_bytes(C, R, N), gemm_bytes = se_gemm_ws(s, N, af_threadpool_n_threads(pool));
    void *own = NULL;
    if (vec_bytes + gemm_bytes > k->workspace_bytes && !(workspace = own = af_malloc_aligned(vec_bytes + gemm_bytes)))
        return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "squeeze-excite: out of memory for its workspace");
    float *mean = workspace, *hidden = mean + N * C, *gate = hidden + N * R;
    void *gemm_ws = (char *)workspace + vec_bytes;
    se_job j = {.s = s, .x = x->data, .y = y->data, .mean = mean, .gate = gate, .plane = plane, .channels = N * C};
    se_pass(&j, pool);
    af_status st = matvec(s, s->pw1, N, R, C, mean, &s->epi1, hidden, gemm_ws, gemm_bytes, pool);
    if (st == AF_OK) st = matvec(s, s->pw2, N, C, R, hidden, &s->epi2, gate, gemm_ws, gemm_bytes, pool);
    if (st == AF_OK) {
        j.scale_pass = true;
        se_pass(&j, pool);
    }
    af_free_aligned(own);
    if (st != AF_OK) return af_ctx_fail(c, st, "squeeze-excite: matrix-vector product failed");
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
    *k = (af_kernel){.name = "f32_squeeze_excite", .state = s, .run = se_run, .free_state = se_free,
                     .workspace_bytes = se_vectors_bytes(C, R, 1) + se_gemm_ws(s, 1, n_threads > 0 ? n_threads : 1),
                     .weight_bytes = af_gemm_packed_bytes(s->pw1) + af_gemm_packed_bytes(s->pw2) + n * sizeof *block};
    return AF_OK;
}
