/*
 * Fast selection along one axis of a float32 tensor: ArgMax and ArgMin (a segmentation head's
 * class per pixel, over a strided axis) and TopK with k up to 256 (a classifier's best classes).
 * The reference kernels read every element through a dtype switch, and TopK sorts the whole
 * slice: TopK 5 of 16 rows of 1000 took 2.8 ms against ONNX Runtime's 0.04, ArgMax over the 21
 * classes of 128x128 pixels 7.5 ms against 0.49. The order is the reference's: ArgMax and ArgMin
 * both pick a NaN, ties to the lower index (select_last_index: the higher); TopK counts NaN as
 * above every number, keeps equal values in index order, and sorts best first.
 * Slices split over the thread pool. Other dtypes and larger k run the reference kernels.
 */
#include <math.h>
#include <string.h>

#include "ir/shape/reduce.h"
#include "kernels/kernel.h"
#include "util/error.h"

#define SEL_CHUNK 16384 /* elements per task */
#define TOPK_MAX 256    /* larger k: the reference's sort */

typedef struct sel_job {
    af_op op;
    const float *x;
    float *vals;    /* TopK */
    int64_t *idx;   /* the indices: ArgMax/ArgMin's output, TopK's second */
    int64_t outer, n, inner, k;
    int sign;       /* 1: the largest first (ArgMax, TopK largest), -1: the smallest */
    bool last;      /* select_last_index */
    int64_t per_task; /* outer blocks (Arg*) or slices (TopK) a task */
} sel_job;

/* TopK: a ranks strictly before b in sign's order, NaN counting as above every number (so first
 * for the largest, last for the smallest). */
static inline bool before(float a, float b, int sign) {
    const int an = a != a, bn = b != b;
    if (an || bn) return (an - bn) * sign > 0;
    return sign > 0 ? a > b : a < b;
}

/* ArgMax/ArgMin: a beats the best b so far; NaN beats every number for both, as the reference. */
static inline bool beats(float a, float b, int sign) {
    const bool an = a != a, bn = b != b;
    if (an || bn) return an && !bn;
    return sign > 0 ? a > b : a < b;
}

#define ARG_COLS 1024 /* inner columns of ArgMax/ArgMin at a time: their running best stays in L1 */

/* ArgMax/ArgMin over outer blocks [o0, o1): the running best value and index of each of a chunk
 * of the block's inner columns, one row of the axis at a time (contiguous reads whatever the
 * axis; no branch per element). */
static void arg_blocks(const sel_job *j, int64_t o0, int64_t o1) {
    float bv[ARG_COLS];
    int64_t bi[ARG_COLS];
    for (int64_t o = o0; o < o1; o++)
        for (int64_t c0 = 0; c0 < j->inner; c0 += ARG_COLS) {
            const int64_t w = j->inner - c0 < ARG_COLS ? j->inner - c0 : ARG_COLS;
            const float *x = j->x + o * j->n * j->inner + c0;
            memcpy(bv, x, (size_t)w * sizeof *bv);
            for (int64_t in = 0; in < w; in++) bi[in] = 0;
            for (int64_t r = 1; r < j->n; r++) {
                const float *row = x + r * j->inner;
                for (int64_t in = 0; in < w; in++) {
                    const float v = row[in], b = bv[in];
                    const bool take = beats(v, b, j->sign) || (j->last && (v == b || (v != v && b != b)));
                    bv[in] = take ? v : b;
                    bi[in] = take ? r : bi[in];
                }
            }
            memcpy(j->idx + o * j->inner + c0, bi, (size_t)w * sizeof *bi);
        }
}

/* TopK of slices [s0, s1) (slice s: outer s / inner, column s % inner): insertion into the k best
 * so far, best first; an equal value goes after those already there (index order). */
static void topk_slices(const sel_job *j, int64_t s0, int64_t s1) {
    float bv[TOPK_MAX];
    int64_t bi[TOPK_MAX];
    for (int64_t s = s0; s < s1; s++) {
        const int64_t o = s / j->inner, in = s % j->inner;
        const float *x = j->x + o * j->n * j->inner + in;
        int64_t m = 0;
        for (int64_t r = 0; r < j->n; r++) {
            const float v = x[r * j->inner];
            if (m == j->k && !before(v, bv[m - 1], j->sign)) continue;
            int64_t p = m < j->k ? m : m - 1; /* the slot it takes, then moved up past the worse */
            while (p > 0 && before(v, bv[p - 1], j->sign)) {
                bv[p] = bv[p - 1];
                bi[p] = bi[p - 1];
                p--;
            }
            bv[p] = v;
            bi[p] = r;
            if (m < j->k) m++;
        }
        for (int64_t t = 0; t < j->k; t++) {
            const int64_t dst = (o * j->k + t) * j->inner + in;
            j->vals[dst] = bv[t];
            j->idx[dst] = bi[t];
        }
    }
}

static void sel_task(void *ctx, int task, int thread) {
    (void)thread;
    const sel_job *j = ctx;
    const int64_t total = j->op == AF_OP_TOP_K ? j->outer * j->inner : j->outer;
    const int64_t u0 = (int64_t)task * j->per_task, u1 = u0 + j->per_task < total ? u0 + j->per_task : total;
    if (j->op == AF_OP_TOP_K) topk_slices(j, u0, u1);
    else arg_blocks(j, u0, u1);
}

static bool f32_data(const af_tensor *t) {
    const int64_t n = t ? af_tensor_numel(t) : -1;
    return t && t->dtype == AF_DTYPE_FLOAT && n >= 0 && (n == 0 || (t->data && t->nbytes >= (size_t)n * 4));
}

static af_status sel_run(const af_kernel *k, af_op_ctx *c, const af_epilogue *epi, af_threadpool *pool,
                         void *workspace) {
    (void)k;
    (void)workspace;
    if (epi && epi->n_steps) return af_ctx_fail(c, AF_ERR_RUNTIME, "selection kernels take no epilogue");
    const af_op op = c->node->op;
    const af_tensor *x = af_ctx_input(c, 0);
    if (!f32_data(x) || x->rank < 1) return af_op_info(op)->run(c);
    int axis;
    af_status st = af_ctx_axis(c, af_node_attr_int(c->node, "axis", op == AF_OP_TOP_K ? -1 : 0), x->rank, &axis);
    if (st != AF_OK) return st;
    sel_job j = {.op = op, .x = x->data, .sign = op == AF_OP_ARG_MIN ? -1 : 1,
                 .last = af_node_attr_int(c->node, "select_last_index", 0) != 0};
    af_reduce_split(x, axis, axis + 1, &j.outer, &j.n, &j.inner);
    if (op == AF_OP_TOP_K) {
        const af_tensor *kt = c->opset >= 10 ? af_ctx_input(c, 1) : NULL;
        af_tensor *vals = af_ctx_output(c, 0), *inds = af_ctx_output(c, 1);
        if (c->opset < 10 || !kt || kt->dtype != AF_DTYPE_INT64 || af_tensor_numel(kt) != 1 || !kt->data || !vals ||
            !inds || vals->dtype != AF_DTYPE_FLOAT || inds->dtype != AF_DTYPE_INT64)
            return af_op_info(op)->run(c);
        j.k = *(const int64_t *)kt->data;
        if (j.k < 1 || j.k > TOPK_MAX || j.k > j.n || af_tensor_numel(vals) != j.outer * j.k * j.inner ||
            af_tensor_numel(inds) != j.outer * j.k * j.inner)
            return af_op_info(op)->run(c); /* k = 0, large k, or what the reference reports */
        if (!af_node_attr_int(c->node, "largest", 1)) j.sign = -1;
        j.vals = vals->data;
        j.idx = inds->data;
    } else {
        af_tensor *y = af_ctx_output(c, 0);
        if (!y || y->dtype != AF_DTYPE_INT64 || af_tensor_numel(y) != j.outer * j.inner || j.n < 1)
            return af_op_info(op)->run(c);
        j.idx = y->data;
    }
    const int64_t units = op == AF_OP_TOP_K ? j.outer * j.inner : j.outer;
    const int64_t unit_elems = op == AF_OP_TOP_K ? j.n : j.n * j.inner;
    if (units < 1) return AF_OK;
    j.per_task = unit_elems >= SEL_CHUNK ? 1 : SEL_CHUNK / (unit_elems > 0 ? unit_elems : 1);
    const int64_t n_tasks = (units + j.per_task - 1) / j.per_task;
    if (n_tasks < 2 || af_threadpool_n_threads(pool) <= 1 || n_tasks > 0x7fffffff) j.per_task = units, sel_task(&j, 0, 0);
    else af_threadpool_run(pool, (int)n_tasks, sel_task, &j);
    return AF_OK;
}

af_status af_fast_select_axis_prepare(const af_kernel_request *req, af_kernel *k, af_error *err) {
    (void)err;
    const af_tensor *x = af_kernel_input(req, 0);
    if (!x || x->dtype != AF_DTYPE_FLOAT) return AF_OK;
    k->name = req->node->op == AF_OP_TOP_K ? "f32_topk" : "f32_argmax_argmin";
    k->run = sel_run;
    return AF_OK;
}
