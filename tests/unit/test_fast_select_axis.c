/*
 * The fast ArgMax, ArgMin and TopK (src/kernels/fast/select_axis.c) against the reference kernels,
 * exactly (indices and the values chosen), for every ISA level the CPU has, 1 and 2 threads: the
 * last axis and a middle one (inner columns past one chunk), NaN and ties among the values,
 * select_last_index, keepdims, TopK largest and smallest with k from 1 to the whole axis, and a k
 * past the fast path's limit (the reference's result through the same kernel).
 */
#include "fast_check.h"

/* Values from a small set (ties), with NaN and infinities. */
static af_tensor values(int rank, const int64_t *dims, uint64_t seed) {
    af_tensor t = fx_rand(rank, dims, -4, 4, seed);
    float *p = t.data;
    for (int64_t i = 0; i < af_tensor_numel(&t); i++) {
        const uint64_t h = (uint64_t)i * 2654435761u + seed * 131;
        p[i] = h % 13 == 0 ? NAN : h % 17 == 0 ? INFINITY : h % 19 == 0 ? -INFINITY : (float)(int)(p[i] * 2) / 2;
    }
    return t;
}

AF_TEST(fast_select_axis_argmax_argmin) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    static const struct {
        int rank;
        int64_t dims[4];
        int axis;
    } shapes[] = {{2, {16, 1000}, 1}, {4, {1, 21, 37, 41}, 1}, {3, {2, 7, 1500}, 1}, {3, {3, 5, 4}, 0}, {1, {33}, 0}};
    char label[96];
    for (int op = 0; op < 2; op++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int v = 0; v < 4; v++) { /* select_last_index, keepdims */
                fx f;
                fx_init(&f, op ? AF_OP_ARG_MIN : AF_OP_ARG_MAX, 13);
                fx_input(&f, values(shapes[s].rank, shapes[s].dims, 3 + s), false);
                fx_int(&f, "axis", shapes[s].axis);
                fx_int(&f, "select_last_index", v & 1);
                fx_int(&f, "keepdims", v >> 1);
                snprintf(label, sizeof label, "%s shape %zu variant %d", op ? "ArgMin" : "ArgMax", s, v);
                fx_check_exact_all(&f, &pools, "f32_argmax_argmin", label);
                fx_free(&f);
            }
    fx_pools_free(&pools);
}

AF_TEST(fast_select_axis_topk) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    static const struct {
        int rank;
        int64_t dims[3];
        int axis;
        int64_t k;
    } cases[] = {{2, {16, 1000}, -1, 5},  {2, {4, 1000}, 1, 1},  {2, {3, 37}, 1, 37}, {3, {2, 40, 9}, 1, 7},
                 {3, {2, 3, 300}, 2, 256}, {2, {2, 600}, 1, 300}, {1, {50}, 0, 50}};
    char label[96];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int largest = 0; largest < 2; largest++) {
            fx f;
            fx_init(&f, AF_OP_TOP_K, 13);
            fx_input(&f, values(cases[c].rank, cases[c].dims, 9 + c), false);
            fx_input(&f, fx_scalar(AF_DTYPE_INT64, (double)cases[c].k), true);
            f.in[1].rank = 1; /* K is a 1-D tensor of one element */
            f.in[1].dims[0] = 1;
            fx_int(&f, "axis", cases[c].axis);
            fx_int(&f, "largest", largest);
            fx_outputs(&f, 2, 3);
            snprintf(label, sizeof label, "TopK case %zu largest %d", c, largest);
            fx_check_exact_all(&f, &pools, "f32_topk", label);
            fx_free(&f);
        }
    fx_pools_free(&pools);
}
