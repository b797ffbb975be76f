/*
 * Fast float32 reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
 * ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum and ReduceLogSumExp over any axes (attribute,
 * or the axes input from opset 13/18, read at run time), keepdims and noop_with_empty_axes, with
 * the reference kernel's rules (NaN wins Max/Min; LogSumExp subtracts each group's finite max;
 * empty groups give the identity).
 *
 * The input's dims collapse into runs of kept (K) and reduced (R) dims (size-1 dims dropped):
 *   [R], [K R]        each output reduces one contiguous row: vectorized along the row;
 *   [K], [R K], [K R K]  each output row accumulates R contiguous rows: vectorized over the kept
 *                     inner dims, in chunks that stay in L1;
 * other patterns run the reference kernel. Rows (or row chunks) split over the thread pool; each
 * output is computed the same way whichever thread runs it. Sums accumulate in float (several
 * vector accumulators per row); the reference accumulates in double.
 */
#include <math.h>
#include <string.h>

#include "ir/shape/reduce.h"
#include "kernels/fast/reduce_internal.h"
#include "kernels/kernel.h"
#include "util/alloc.h"
#include "util/error.h"

#define RED_PARALLEL_MIN 65536 /* input elements below which one thread runs */
#define RED_CHUNK 1024         /* kept inner elements one column task accumulates at a time */

static const char *const red_names[2][AF_ISA_COUNT] = {
    {"f32_reduce_rows__scalar", "f32_reduce_rows__avx2", "f32_reduce_rows__avx512"},
    {"f32_reduce_cols__scalar", "f32_reduce_cols__avx2", "f32_reduce_cols__avx512"},
};

typedef struct red_state {
    const af_reduce_kernels *rk;
} red_state;

typedef struct red_job {
    const af_reduce_kernels *rk;
    af_op op;
    af_red_kind kind;
    bool cols;                  /* [R K] / [K R K]; else [K R] rows */
    int64_t outer, r, inner;    /* rows: outer outputs of r elements; cols: outer x (r rows of inner) */
    int64_t count;              /* elements per output (for the mean) */
    int64_t n_chunks;           /* cols: chunks of RED_CHUNK per outer row */
    int64_t units;              /* rows: outer; cols: outer * n_chunks */
    int n_tasks;
    const float *x;
    float *y;
} red_job;

static af_red_kind kind_of(af_op op) {
    switch (op) {
    case AF_OP_REDUCE_L1: return AF_RED_ABS_SUM;
    case AF_OP_REDUCE_L2:
    case AF_OP_REDUCE_SUM_SQUARE: return AF_RED_SQ_SUM;
    case AF_OP_REDUCE_PROD: return AF_RED_PROD;
    case AF_OP_REDUCE_MAX: return AF_RED_MAX;
    case AF_OP_REDUCE_MIN: return AF_RED_MIN;
    case AF_OP_REDUCE_LOG_SUM_EXP: return AF_RED_EXP_SUM;
    default: return AF_RED_SUM;
    }
}

/* The result from an accumulated value (LogSumExp: the sum of exp(x - shift)). */
static float finish(af_op op, float acc, int64_t count, float shift) {
    switch (op) {
    case AF_OP_REDUCE_MEAN: return (float)((double)acc / (double)count);
    case AF_OP_REDUCE_L2: return sqrtf(acc);
    case AF_OP_REDUCE_LOG_SUM: return (float)log((double)acc);
    case AF_OP_REDUCE_LOG_SUM_EXP: return (float)(log((double)acc) + (double)shift);
    default: return acc;
    }
}

/* LogSumExp's shift: the group's max, or 0 where that is infinite (NaN stays). */
static float fix_shift(float m) { return isinf(m) ? 0.0f : m; }

static void red_rows(const red_job *j, int64_t u0, int64_t u1) {
    for (int64_t o = u0; o < u1; o++) {
        const float *xo = j->x + o * j->r;
        float shift = 0;
        if (j->kind == AF_RED_EXP_SUM) shift = fix_shift(j->rk->row(AF_RED_MAX, j->r, xo, 0));
        j->y[o] = finish(j->op, j->rk->row(j->kind, j->r, xo, shift), j->count, shift);
    }
}

static void red_cols(const red_job *j, int64_t u0, int64_t u1) {
    float shift[RED_CHUNK];
    for (int64_t u = u0; u < u1; u++) {
        const int64_t o = u / j->n_chunks, i0 = u % j->n_chunks * RED_CHUNK;
        const int64_t len = j->inner - i0 < RED_CHUNK ? j->inner - i0 : RED_CHUNK;
        const float *xo = j->x + o * j->r * j->inner + i0;
        float *acc = j->y + o * j->inner + i0;
        if (j->kind == AF_RED_EXP_SUM) {
            for (int64_t i = 0; i < len; i++) shift[i] = -INFINITY;
            for (int64_t r = 0; r < j->r; r++) j->rk->accum(AF_RED_MAX, len, xo + r * j->inner, shift, NULL);
            for (int64_t i = 0; i < len; i++) shift[i] = fix_shift(shift[i]);
        }
        const float id = af_red_identity(j->kind);
        for (int64_t i = 0; i < len; i++) acc[i] = id;
        for (int64_t r = 0; r < j->r; r++) j->rk->accum(j->kind, len, xo + r * j->inner, acc, shift);
        if (j->kind == AF_RED_EXP_SUM)
            for (int64_t i = 0; i < len; i++) acc[i] = finish(j->op, acc[i], j->count, shift[i]);
        else
            for (int64_t i = 0; i < len; i++) acc[i] = finish(j->op, acc[i], j->count, 0);
    }
}

static void red_task(void *ctx, int task, int thread) {
    (void)thread;
    const red_job *j = ctx;
    const int64_t u0 = j->units * task / j->n_tasks, u1 = j->units * (task + 1) / j->n_tasks;
    if (j->cols) red_cols(j, u0, u1);
    else red_rows(j, u0, u1);
}

static af_status red_run(const af_kernel *k, af_op_ctx *c, const af_epilogue *epi, af_threadpool *pool,
                         void *workspace) {
    (void)workspace;
    const red_state *s = k->state;
    const af_tensor *x = af_ctx_input(c, 0);
    af_tensor *y = af_ctx_output(c, 0);
    if (epi && epi->n_steps) return af_ctx_fail(c, AF_ERR_RUNTIME, "reduce kernels take no epilogue");
    if (!x || !y || x->dtype != AF_DTYPE_FLOAT || y->dtype != AF_DTYPE_FLOAT || x->rank < 0)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "X and Y must be float32");
    bool mask[AF_MAX_RANK], known;
    af_status st = af_reduce_axes(c, x->rank, mask, &known);
    if (st != AF_OK) return st;
    if (!known) return af_ctx_fail(c, AF_ERR_RUNTIME, "axes have no value");
    const af_op op = c->node->op;
    /* Runs of kept / reduced dims, size-1 dims dropped. */
    int64_t run[AF_MAX_RANK];
    bool red[AF_MAX_RANK];
    int n_runs = 0;
    int64_t n_out = 1, count = 1;
    bool empty = false;
    for (int d = 0; d < x->rank; d++) {
        const int64_t n = x->dims[d];
        if (mask[d]) count *= n;
        else n_out *= n;
        if (n == 0) empty = true;
        if (n == 1) continue;
        if (n_runs && red[n_runs - 1] == mask[d]) {
            run[n_runs - 1] *= n;
        } else {
            run[n_runs] = n;
            red[n_runs++] = mask[d];
        }
    }
    if (af_tensor_numel(y) != n_out)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "output has %lld elements, expected %lld",
                           (long long)af_tensor_numel(y), (long long)n_out);
    if (n_out == 0) return AF_OK;
    if ((!x->data && !empty) || !y->data) return af_ctx_fail(c, AF_ERR_RUNTIME, "X and Y must have data");
    float *yd = y->data;
    const af_red_kind kind = kind_of(op);
    if (empty) { /* every group is empty: the identity, finished */
        const float v = finish(op, kind == AF_RED_EXP_SUM ? 0.0f : af_red_identity(kind), 0, 0);
        for (int64_t o = 0; o < n_out; o++) yd[o] = v;
        return AF_OK;
    }
    red_job j = {.rk = s->rk, .op = op, .kind = kind, .count = count, .x = x->data, .y = yd, .outer = 1,
                 .r = 1, .inner = 1};
    if (n_runs == 0) {
        j.cols = false;
    } else if (n_runs == 1) {
        j.cols = !red[0];
        if (red[0]) j.r = run[0];
        else j.inner = run[0];
    } else if (n_runs == 2) {
        j.cols = red[0];
        if (red[0]) j.r = run[0], j.inner = run[1];
        else j.outer = run[0], j.r = run[1];
    } else if (n_runs == 3 && !red[0]) {
        j.cols = true;
        j.outer = run[0];
        j.r = run[1];
        j.inner = run[2];
    } else {
        return af_op_info(op)->run(c); /* interleaved kept and reduced dims: the reference */
    }
    if (j.cols) {
        j.n_chunks = (j.inner + RED_CHUNK - 1) / RED_CHUNK;
        j.units = j.outer * j.n_chunks;
    } else {
        j.units = j.outer;
    }
    const int threads = af_threadpool_n_threads(pool);
    if (af_tensor_numel(x) <= RED_PARALLEL_MIN || threads <= 1 || j.units <= 1) {
        j.n_tasks = 1;
        red_task(&j, 0, 0);
        return AF_OK;
    }
    j.n_tasks = j.units < 4 * (int64_t)threads ? (int)j.units : 4 * threads;
    af_threadpool_run(pool, j.n_tasks, red_task, &j);
    return AF_OK;
}

af_status af_fast_reduce_prepare(const af_kernel_request *req, af_kernel *k, af_error *err) {
    const af_node *n = req->node;
    const af_op_info_t *info = af_op_info(n->op);
    if (!info || info->cls != AF_OPCLASS_REDUCTION || n->n_outputs < 1 || n->outputs[0] < 0) return AF_OK;
    const af_tensor *x = af_kernel_input(req, 0), *y = &req->graph->values[n->outputs[0]].t;
    if (!x || x->dtype != AF_DTYPE_FLOAT || y->dtype != AF_DTYPE_FLOAT) return AF_OK;
    red_state *s = af_malloc(sizeof *s);
    if (!s) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory preparing '%s'", n->name);
    s->rk = af_reduce_kernels_for(req->choice.isa);
    /* The name reports the layout the declared shapes give; the run decides again. */
    bool cols = false;
    const af_tensor *ins[2] = {x, af_kernel_input(req, 1)};
    af_op_ctx c = {.node = n, .graph = req->graph, .opset = req->graph->opset, .n_inputs = n->n_inputs,
                   .inputs = ins};
    bool mask[AF_MAX_RANK], known = false;
    if (x->rank > 0 && af_reduce_axes(&c, x->rank, mask, &known) == AF_OK && known) {
        int last = x->rank - 1;
        while (last > 0 && x->dims[last] == 1) last--;
        cols = !mask[last];
    }
    k->name = red_names[cols][s->rk->isa];
    k->state = s;
    k->free_state = af_free;
    k->run = red_run;
    return AF_OK;
}
