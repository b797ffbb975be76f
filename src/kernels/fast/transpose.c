/* Fast Transpose, every dtype. The permutation is first simplified: axes of length 1 dropped and
 * axes that stay neighbours in the same order merged (BERT's [1,128,12,64] by (0,2,1,3) becomes
 * [128,12,64] by (1,0,2)). Then either the innermost axis stays innermost, and each output row is
 * one memcpy of a source run, or it moves, and the tensor is a batch of 2-D transposes between
 * the input's innermost axis and the output's, done in 16 x 16 tiles (in AVX-512 registers for
 * 4-byte elements where the CPU has it). The reference walks every element through every axis:
 * ConvNeXt-T's 46 layout transposes took 11.9 ms of its run on it. */
#include <string.h>

#include "ir/shape/movement.h"
#include "kernels/kernel.h"
#include "kernels/ref/movement.h"
#include "kernels/transpose_avx512.h"
#include "util/alloc.h"
#include "util/error.h"

#define TILE 16

typedef struct transpose_run {
    const char *x;
    char *y;
    size_t es;
    bool avx512;
    int rank;                                       /* of the simplified view */
    int64_t out_dims[AF_MAX_RANK], src_str[AF_MAX_RANK]; /* per output axis: length, input stride */
    int64_t out_str[AF_MAX_RANK];                    /* per output axis: output stride */
    /* Tiled case: the input's innermost axis is output axis q; the output's innermost axis reads
     * the input at stride a_str. Units: (outer index, block of TILE along q). */
    int q;
    int64_t units, blocks_q;
} transpose_run;

/* Simplifies (dims, perm) of rank r in place: out axis k reads in axis perm[k]. Returns the new
 * rank (0 for one element). */
static int simplify(int r, int64_t *dims, int *perm) {
    /* Drop axes of length 1. */
    int map[AF_MAX_RANK], n = 0;
    for (int i = 0; i < r; i++) map[i] = dims[i] == 1 ? -1 : n++;
    int64_t d2[AF_MAX_RANK];
    int p2[AF_MAX_RANK], m = 0;
    for (int i = 0; i < r; i++)
        if (map[i] >= 0) d2[map[i]] = dims[i];
    for (int k = 0; k < r; k++)
        if (map[perm[k]] >= 0) p2[m++] = map[perm[k]];
    /* Merge output neighbours k, k+1 reading input neighbours p, p+1. */
    for (int k = 0; k + 1 < m;) {
        if (p2[k + 1] != p2[k] + 1) {
            k++;
            continue;
        }
        const int a = p2[k];
        d2[a] *= d2[a + 1];
        for (int i = a + 1; i + 1 < n; i++) d2[i] = d2[i + 1];
        n--;
        for (int j = k + 1; j + 1 < m; j++) p2[j] = p2[j + 1];
        m--;
        for (int j = 0; j < m; j++)
            if (p2[j] > a) p2[j]--;
    }
    memcpy(dims, d2, (size_t)n * sizeof *dims);
    memcpy(perm, p2, (size_t)m * sizeof *perm);
    return n;
}

/* Source and destination offsets (elements) of outer index u over the output axes other than
 * skip0 and skip1 (-1: none), the last of them fastest. */
static void outer_offsets(const transpose_run *r, int64_t u, int skip0, int skip1, int64_t *src, int64_t *dst) {
    *src = *dst = 0;
    for (int k = r->rank - 1; k >= 0; k--) {
        if (k == skip0 || k == skip1) continue;
        const int64_t i = u % r->out_dims[k];
        u /= r->out_dims[k];
        *src += i * r->src_str[k];
        *dst += i * r->out_str[k];
    }
}

/* Rows case: the innermost axis stays; a unit is one output row, one memcpy. */
static void rows_task(void *ctx, int task, int thread) {
    (void)thread;
    const transpose_run *r = ctx;
    const int last = r->rank - 1;
    const size_t run = (size_t)r->out_dims[last] * r->es;
    const int64_t per = (r->units + 63) / 64, u0 = task * per, u1 = u0 + per < r->units ? u0 + per : r->units;
    for (int64_t u = u0; u < u1; u++) {
        int64_t s, d;
        outer_offsets(r, u, last, -1, &s, &d);
        memcpy(r->y + (size_t)d * r->es, r->x + (size_t)s * r->es, run);
    }
}

/* dst[j * ldd + i] = src[i * lds + j] for i < ni, j < nj, elements of es bytes. */
static void tile_scalar(const char *src, int64_t lds, char *dst, int64_t ldd, int ni, int nj, size_t es) {
#define TILE_LOOP(T)                                                                                     \
    for (int j = 0; j < nj; j++)                                                                         \
        for (int i = 0; i < ni; i++) ((T *)dst)[j * ldd + i] = ((const T *)src)[i * lds + j];
    switch (es) {
    case 1: TILE_LOOP(uint8_t) break;
    case 2: TILE_LOOP(uint16_t) break;
    case 4: TILE_LOOP(uint32_t) break;
    case 8: TILE_LOOP(uint64_t) break;
    default:
        for (int j = 0; j < nj; j++)
            for (int i = 0; i < ni; i++) memcpy(dst + (size_t)(j * ldd + i) * es, src + (size_t)(i * lds + j) * es, es);
    }
#undef TILE_LOOP
}

/* A whole 16 x 16 tile of 4-byte elements through registers. */
AF_TRANSPOSE_TARGET static void tile16_avx512(const float *src, int64_t lds, float *dst, int64_t ldd) {
    __m512 rows[16], cols[16];
    for (int i = 0; i < 16; i++) rows[i] = _mm512_loadu_ps(src + i * lds);
    af_transpose16x16(rows, cols);
    for (int j = 0; j < 16; j++) _mm512_storeu_ps(dst + j * ldd, cols[j]);
}

/* Tiled case: a unit is one block of TILE along output axis q (the input's innermost) of one
 * outer index, over the whole output-innermost axis. */
static void tiles_task(void *ctx, int task, int thread) {
    (void)thread;
    const transpose_run *r = ctx;
    const int last = r->rank - 1, q = r->q;
    const int64_t n_in = r->out_dims[q], n_out = r->out_dims[last];
    const int64_t lds = r->src_str[last], ldd = r->out_str[q];
    const int64_t per = (r->units + 63) / 64, u0 = task * per, u1 = u0 + per < r->units ? u0 + per : r->units;
    for (int64_t u = u0; u < u1; u++) {
        int64_t s, d;
        const int64_t j0 = u % r->blocks_q * TILE;
        outer_offsets(r, u / r->blocks_q, q, last, &s, &d);
        const int nj = (int)(n_in - j0 < TILE ? n_in - j0 : TILE);
        for (int64_t i0 = 0; i0 < n_out; i0 += TILE) {
            const int ni = (int)(n_out - i0 < TILE ? n_out - i0 : TILE);
            const char *src = r->x + (size_t)(s + i0 * lds + j0) * r->es;
            char *dst = r->y + (size_t)(d + j0 * ldd + i0) * r->es;
            if (r->avx512 && ni == TILE && nj == TILE) tile16_avx512((const float *)src, lds, (float *)dst, ldd);
            else tile_scalar(src, lds, dst, ldd, ni, nj, r->es);
        }
    }
}

static af_status transpose_run_fn(const af_kernel *k, af_op_ctx *c, const af_epilogue *epi, af_threadpool *pool,
                                  void *workspace) {
    (void)epi, (void)workspace;
    const af_tensor *x = c->inputs[0];
    af_tensor *out = c->outputs[0];
    if (!x || !out || x->rank < 1 || out->rank != x->rank || out->dtype != x->dtype)
        return af_op_info(c->node->op)->run(c);
    int perm[AF_MAX_RANK];
    af_status st = af_movement_perm(c, x->rank, perm);
    if (st) return st;
    for (int i = 0; i < x->rank; i++)
        if (out->dims[i] != x->dims[perm[i]]) return af_op_info(c->node->op)->run(c);
    const size_t es = af_dtype_size(x->dtype);
    const int64_t numel = af_tensor_numel(x);
    if (es == 0 || numel < 0) return af_op_info(c->node->op)->run(c);
    if (numel == 0) return AF_OK;
    int64_t dims[AF_MAX_RANK];
    memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
    const int rank = simplify(x->rank, dims, perm);
    if (rank <= 1) { /* the order of the elements does not change: over the same slot, nothing to do */
        if (out->data != x->data) memcpy(out->data, x->data, (size_t)numel * es);
        return AF_OK;
    }
    transpose_run r = {.x = x->data, .y = out->data, .es = es, .rank = rank,
                       .avx512 = es == 4 && *(const af_isa *)k->state >= AF_ISA_AVX512};
    int64_t in_str[AF_MAX_RANK];
    af_movement_dense_strides(rank, dims, in_str);
    for (int k2 = 0; k2 < rank; k2++) {
        r.out_dims[k2] = dims[perm[k2]];
        r.src_str[k2] = in_str[perm[k2]];
    }
    af_movement_dense_strides(rank, r.out_dims, r.out_str);
    const int last = rank - 1;
    if (perm[last] == last) {
        r.units = numel / r.out_dims[last];
        const int64_t tasks = r.units < 64 ? r.units : 64;
        af_threadpool_run(pool, (int)tasks, rows_task, &r);
        return AF_OK;
    }
    for (int k2 = 0; k2 < rank; k2++)
        if (perm[k2] == last) r.q = k2;
    r.blocks_q = (r.out_dims[r.q] + TILE - 1) / TILE;
    r.units = numel / (r.out_dims[r.q] * r.out_dims[last]) * r.blocks_q;
    const int64_t tasks = r.units < 64 ? r.units : 64;
    af_threadpool_run(pool, (int)tasks, tiles_task, &r);
    return AF_OK;
}

af_status af_fast_transpose_prepare(const af_kernel_request *req, af_kernel *k, af_error *err) {
    af_isa *isa = af_malloc(sizeof *isa);
    if (!isa) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory preparing Transpose '%s'", req->node->name);
    *isa = req->choice.isa;
    k->state = isa;
    k->free_state = af_free;
    k->name = "transpose_tiled";
    k->run = transpose_run_fn;
    return AF_OK;
}
