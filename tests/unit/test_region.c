/*
 * The fused elementwise region kernel (src/kernels/fast/region.c) on y = x * s + b, with s and b
 * broadcast to x's shape in each way the kernel gathers them: per channel over whole planes (one
 * value filled per run, runs crossing its 2048-element tiles), along the last axis (one row copied
 * per run), along middle axes only (element by element), as a scalar and in full. Every output is
 * checked against the same arithmetic written out with explicit broadcast indexing, with 1 and 2
 * threads. (ConvNeXt's layer scale, x * gamma[C,1,1] + residual, is the first case.)
 */
#include <string.h>

#include "ir/op.h"
#include "kernels/fast/region.h"
#include "unit.h"
#include "util/alloc.h"
#include "util/threadpool.h"

/* A float tensor of dims (rank 4, leading ones allowed) holding a deterministic pattern. */
static af_tensor pattern(const int64_t dims[4], float scale, int seed) {
    af_tensor t = {.dtype = AF_DTYPE_FLOAT, .rank = 4};
    memcpy(t.dims, dims, 4 * sizeof *dims);
    if (af_tensor_alloc(&t, NULL) != AF_OK) return t;
    float *p = t.data;
    for (int64_t i = 0; i < af_tensor_numel(&t); i++) p[i] = scale * (float)((i * 7 + seed * 13) % 23 - 11);
    return t;
}

/* Element of t at output index (i0..i3), t broadcast along its dims of 1. */
static float at(const af_tensor *t, const int64_t i[4]) {
    int64_t off = 0;
    for (int d = 0; d < 4; d++) off = off * t->dims[d] + (t->dims[d] == 1 ? 0 : i[d]);
    return ((const float *)t->data)[off];
}

/* Runs the region for x, s, b on pool; returns the elements that differ from x * s + b. */
static int64_t check(af_threadpool *pool, const int64_t xd[4], const int64_t sd[4], const int64_t bd[4]) {
    af_node mul = {.name = "mul", .op = AF_OP_MUL, .n_inputs = 2, .n_outputs = 1};
    af_node add = {.name = "add", .op = AF_OP_ADD, .n_inputs = 2, .n_outputs = 1};
    af_region_instr ins[2] = {
        {.node = &mul, .dtype = AF_DTYPE_FLOAT, .n_args = 2,
         .args = {{AF_REGION_INPUT, 0}, {AF_REGION_INPUT, 1}}},
        {.node = &add, .dtype = AF_DTYPE_FLOAT, .n_args = 2, .args = {{AF_REGION_SLOT, 0}, {AF_REGION_INPUT, 2}}},
    };
    af_region_program p = {.n_instrs = 2, .instrs = ins, .n_inputs = 3};
    af_kernel k;
    af_error err = {0};
    if (af_region_kernel_make(&p, AF_ISA_SCALAR, 2, &k, &err) != AF_OK) return -1;
    af_tensor x = pattern(xd, 0.5f, 1), s = pattern(sd, 0.25f, 2), b = pattern(bd, 1.0f, 3);
    af_tensor y = {.dtype = AF_DTYPE_FLOAT, .rank = 4};
    memcpy(y.dims, xd, 4 * sizeof *xd);
    int64_t bad = -1;
    void *ws = af_malloc_aligned(k.workspace_bytes);
    if (af_tensor_alloc(&y, NULL) == AF_OK && ws) {
        const af_tensor *inputs[3] = {&x, &s, &b};
        af_tensor *outputs[1] = {&y};
        af_node node = {.name = "region", .op = AF_OP_ADD, .n_inputs = 3, .n_outputs = 1};
        af_op_ctx c = {.node = &node, .n_inputs = 3, .inputs = inputs, .n_outputs = 1, .outputs = outputs, .err = &err};
        if (k.run(&k, &c, NULL, pool, ws) == AF_OK) {
            bad = 0;
            const float *yp = y.data;
            int64_t e = 0, i[4];
            for (i[0] = 0; i[0] < xd[0]; i[0]++)
                for (i[1] = 0; i[1] < xd[1]; i[1]++)
                    for (i[2] = 0; i[2] < xd[2]; i[2]++)
                        for (i[3] = 0; i[3] < xd[3]; i[3]++, e++)
                            bad += yp[e] != at(&x, i) * at(&s, i) + at(&b, i);
        }
    }
    af_free_aligned(ws);
    af_tensor_free_data(&x), af_tensor_free_data(&s), af_tensor_free_data(&b), af_tensor_free_data(&y);
    af_kernel_release(&k);
    return bad;
}

AF_TEST(region_broadcasts_match_explicit_indexing) {
    static const struct {
        int64_t x[4], s[4], b[4];
    } cases[] = {
        {{1, 96, 56, 56}, {1, 96, 1, 1}, {1, 96, 56, 56}}, /* ConvNeXt's layer scale + residual */
        {{2, 5, 37, 41}, {1, 5, 1, 1}, {2, 1, 1, 1}},      /* runs across tiles, per image */
        {{1, 3, 50, 70}, {1, 1, 1, 70}, {1, 3, 50, 1}},    /* a row copied per run; one value per row */
        {{2, 4, 6, 9}, {2, 1, 6, 1}, {1, 4, 1, 9}},        /* middle axes: element by element */
        {{1, 1, 1, 5000}, {1, 1, 1, 1}, {1, 1, 1, 5000}},  /* a scalar */
        {{3, 1, 700, 3}, {3, 1, 1, 1}, {1, 1, 700, 3}},    /* short planes, several per tile */
    };
    af_threadpool *pools[2] = {NULL, NULL};
    CHECK(af_threadpool_create(1, &pools[0]) == AF_OK && af_threadpool_create(2, &pools[1]) == AF_OK);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (int t = 0; t < 2; t++) {
            const int64_t bad = check(pools[t], cases[c].x, cases[c].s, cases[c].b);
            if (bad) printf("  case %zu, %d thread(s): %lld off\n", c, t + 1, (long long)bad);
            CHECK_EQ_INT(bad, 0);
        }
    af_threadpool_free(pools[0]);
    af_threadpool_free(pools[1]);
}
