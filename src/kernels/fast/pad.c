/* Fast Pad, every mode and dtype: row by row instead of element by element. The reference kernel
 * maps each output element through every axis; here an output row (all axes but the last) maps
 * its leading indices once, copies its overlap with the source row in one memcpy, and fills or
 * copies only the padded ends element by element. Inception-v3's and DenseNet's pads in front of
 * their average pools, and Swin's window pads, ran 0.4-1.5 ms each on the reference. */
#include <string.h>

#include "kernels/kernel.h"
#include "kernels/ref/movement.h"
#include "kernels/ref/pad.h"
#include "util/alloc.h"

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

typedef struct pad_run {
    const af_ref_pad *p;
    const char *x;
    char *y;
    int rank;
    int64_t rows, rows_per_task;
    int64_t out_dims[AF_MAX_RANK], in_str[AF_MAX_RANK]; /* in_str: elements */
    const int64_t *src[AF_MAX_RANK];                   /* per axis: source index per output index, -1 pads */
    int64_t lo, hi;                                    /* the last axis's run [lo, hi) copied whole */
    bool zero;                                         /* the constant is all zero bytes */
} pad_run;

static void fill(const pad_run *r, char *dst, int64_t n) {
    const size_t es = r->p->es;
    if (r->zero) memset(dst, 0, (size_t)n * es);
    else af_movement_fill(dst, r->p->value, es, n);
}

/* Output positions [a, b) of the last axis of one row (a padded end): filled with the constant,
 * or element by element in the other modes. */
static void ends(const pad_run *r, const char *src_row, char *dst, int64_t a, int64_t b) {
    const size_t es = r->p->es;
    if (r->p->mode == AF_MOVEMENT_PAD_CONSTANT) {
        if (b > a) fill(r, dst + (size_t)a * es, b - a);
        return;
    }
    const int64_t *s = r->src[r->rank - 1];
    for (int64_t o = a; o < b; o++) {
        if (s[o] < 0) fill(r, dst + (size_t)o * es, 1);
        else memcpy(dst + (size_t)o * es, src_row + (size_t)s[o] * es, es);
    }
}

static void pad_task(void *ctx, int task, int thread) {
    (void)thread;
    const pad_run *r = ctx;
    const size_t es = r->p->es;
    const int last = r->rank - 1;
    const int64_t width = r->out_dims[last];
    int64_t row0 = task * r->rows_per_task, row1 = row0 + r->rows_per_task;
    if (row1 > r->rows) row1 = r->rows;
    int64_t idx[AF_MAX_RANK] = {0};
    for (int64_t rem = row0, d = last - 1; d >= 0; d--) {
        idx[d] = rem % r->out_dims[d];
        rem /= r->out_dims[d];
    }
    for (int64_t row = row0; row < row1; row++) {
        char *dst = r->y + (size_t)row * (size_t)width * es;
        int64_t s = 0;
        bool pad = false;
        for (int d = 0; d < last && !pad; d++) {
            const int64_t i = r->src[d][idx[d]];
            pad = i < 0;
            s += i * r->in_str[d];
        }
        if (pad) {
            fill(r, dst, width);
        } else {
            const char *src_row = r->x + (size_t)s * es;
            ends(r, src_row, dst, 0, r->lo);
            if (r->hi > r->lo) /* src[last][lo] = lo - pad before: the run reads the source in order */
                memcpy(dst + (size_t)r->lo * es, src_row + (size_t)r->src[last][r->lo] * es,
                       (size_t)(r->hi - r->lo) * es);
            ends(r, src_row, dst, r->hi, width);
        }
        for (int d = last - 1; d >= 0; d--) {
            if (++idx[d] < r->out_dims[d]) break;
            idx[d] = 0;
        }
    }
}

static af_status pad_run_fn(const af_kernel *k, af_op_ctx *c, const af_epilogue *epi, af_threadpool *pool,
                            void *workspace) {
    (void)k, (void)epi, (void)workspace;
    const af_tensor *x = c->inputs[0];
    af_tensor *out = c->outputs[0];
    if (!x || !out || x->rank < 1 || x->rank > AF_MAX_RANK) return af_op_info(c->node->op)->run(c);
    af_ref_pad p;
    af_status st = af_ref_pad_setup(c, &p);
    if (st) return st;
    const int64_t n_out = af_tensor_numel(out);
    if (n_out == 0) return AF_OK;
    if (p.es == 0 || p.es > sizeof p.value) return af_op_info(c->node->op)->run(c);
    const int rank = x->rank, last = rank - 1;
    pad_run r = {.p = &p, .x = x->data, .y = out->data, .rank = rank, .rows = n_out / out->dims[last], .zero = true};
    for (size_t i = 0; i < p.es; i++) r.zero &= p.value[i] == 0;
    memcpy(r.out_dims, out->dims, (size_t)rank * sizeof *out->dims);
    af_movement_dense_strides(rank, x->dims, r.in_str);
    int64_t *tables = af_ref_pad_tables(&p, rank, x->dims, out->dims, r.src);
    if (!tables) return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory");
    /* The last axis's positions that read the source in order, [lo, hi): one memcpy. */
    const int64_t width = out->dims[last];
    r.lo = clamp64(p.pads[last], 0, width);
    r.hi = clamp64(p.pads[last] + x->dims[last], r.lo, width);
    const int n_threads = pool ? af_threadpool_n_threads(pool) : 1;
    /* About 8 tasks a thread, each at least 16 KiB of output. */
    const int64_t row_bytes = out->dims[last] * (int64_t)p.es, min_rows = (16384 + row_bytes - 1) / row_bytes;
    r.rows_per_task = (r.rows + 8 * n_threads - 1) / (8 * n_threads);
    if (r.rows_per_task < min_rows) r.rows_per_task = min_rows;
    const int64_t tasks = (r.rows + r.rows_per_task - 1) / r.rows_per_task;
    if (tasks > 0x7fffffff) st = af_op_info(c->node->op)->run(c);
    else af_threadpool_run(pool, (int)tasks, pad_task, &r);
    af_free(tables);
    return st;
}

af_status af_fast_pad_prepare(const af_kernel_request *req, af_kernel *k, af_error *err) {
    (void)req, (void)err;
    k->name = "pad_rows";
    k->run = pad_run_fn;
    return AF_OK;
}
