/* The fused squeeze-excite kernel (see squeeze_excite.h). */
#include "kernels/fast/squeeze_excite.h"

#include <string.h>

#include "kernels/fast/vec_internal.h"
#include "util/alloc.h"
#include "util/error.h"

#define SE_CHUNK 16384 /* elements per task in the two passes over x */

typedef struct se_state {
    af_se_desc d;                 /* weights point into `block` */
    float *block;                 /* w1, b1, w2, b2 and C zeros, one allocation */
    const float *zeros;
    const af_vec_kernels *vk;
    af_epilogue_tile_fn apply;
} se_state;

typedef struct se_job {
    const se_state *s;
    const float *x;
    float *y, *mean, *gate;
    int64_t plane, per_task;
    bool scale_pass;
} se_job;

static void se_free(void *p) {
    se_state *s = p;
    if (!s) return;
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

/* out[r] = b[r] + sum_k w[r * cols + k] * v[k], then the step. */
static void matvec(const se_state *s, const float *w, const float *b, const float *v, int64_t rows, int64_t cols,
                   const af_epi_step *step, float *out) {
    for (int64_t r = 0; r < rows; r++) {
        const float *wr = w + r * cols;
        float acc = 0.0f;
        for (int64_t k = 0; k < cols; k++) acc += wr[k] * v[k];
        out[r] = acc + (b ? b[r] : 0.0f);
    }
    if (step) {
        af_epilogue e = {.n_steps = 1, .steps = {*step}};
        s->apply(&e, out, rows, 1, (int)rows, 0, 0, 0);
    }
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
    const int64_t plane = af_dims_numel(x->rank - 2, x->dims + 2);
    for (int64_t n = 0; n < x->dims[0]; n++) {
        se_job j = {.s = s, .x = (const float *)x->data + n * C * plane, .y = (float *)y->data + n * C * plane,
                    .mean = mean, .gate = gate, .plane = plane};
        se_pass(&j, pool);
        matvec(s, s->d.w1, s->d.b1, mean, s->d.reduced, C, s->d.has_act ? &s->d.act : NULL, hidden);
        matvec(s, s->d.w2, s->d.b2, hidden, C, s->d.reduced, &s->d.gate, gate);
        j.scale_pass = true;
        se_pass(&j, pool);
    }
    return AF_OK;
}

af_status af_se_kernel_make(const af_se_desc *d, af_isa isa, af_kernel *k, af_error *err) {
    memset(k, 0, sizeof *k);
    const int64_t C = d->channels, R = d->reduced;
    if (C <= 0 || R <= 0 || !d->w1 || !d->w2 || C > (int64_t)1 << 24 || R > (int64_t)1 << 24)
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "squeeze-excite: bad description");
    se_state *s = af_calloc(1, sizeof *s);
    size_t n = (size_t)(2 * R * C + R + 2 * C);
    float *block = s ? af_calloc(n, sizeof *block) : NULL;
    if (!block) {
        af_free(s);
        return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory preparing a squeeze-excite kernel");
    }
    float *w1 = block, *b1 = w1 + R * C, *w2 = b1 + R, *b2 = w2 + C * R, *zeros = b2 + C;
    memcpy(w1, d->w1, (size_t)(R * C) * sizeof *w1);
    memcpy(w2, d->w2, (size_t)(C * R) * sizeof *w2);
    if (d->b1) memcpy(b1, d->b1, (size_t)R * sizeof *b1);
    if (d->b2) memcpy(b2, d->b2, (size_t)C * sizeof *b2);
    s->d = *d;
    s->d.w1 = w1, s->d.b1 = b1, s->d.w2 = w2, s->d.b2 = b2;
    s->block = block;
    s->zeros = zeros;
    s->vk = af_vec_kernels_for(isa);
    s->apply = af_epilogue_tile_fn_for(isa);
    *k = (af_kernel){.name = "f32_squeeze_excite", .state = s, .run = se_run, .free_state = se_free,
                     .workspace_bytes = (size_t)(2 * C + R) * sizeof(float)};
    return AF_OK;
}
