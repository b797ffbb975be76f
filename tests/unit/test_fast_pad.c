/*
 * The fast Pad kernel (src/kernels/fast/pad.c) against the reference, bit for bit, with 1 and 2
 * threads: the four modes, pads before and after every axis, negative pads (crops), an empty
 * source row, a nonzero constant, ranks 1 to 5, float32, int64 and uint8, opset 10's attribute
 * pads and opset 18's axes.
 */
#include "fast_check.h"

typedef struct pad_case {
    const char *label;
    int rank;
    int64_t dims[5];
    int64_t pads[10];
    const char *mode;
    af_dtype dtype;
    double value; /* the constant (constant mode) */
} pad_case;

static const pad_case cases[] = {
    {"nchw 1 each side", 4, {1, 3, 5, 7}, {0, 0, 1, 1, 0, 0, 1, 1}, "constant", AF_DTYPE_FLOAT, 0},
    {"nchw asymmetric", 4, {2, 3, 4, 9}, {0, 1, 2, 0, 0, 0, 1, 3}, "constant", AF_DTYPE_FLOAT, 0},
    {"nonzero constant", 4, {1, 2, 3, 5}, {0, 0, 2, 1, 0, 1, 0, 2}, "constant", AF_DTYPE_FLOAT, -2.5},
    {"crop and pad", 4, {1, 2, 6, 8}, {0, 0, -1, 2, 0, 0, 1, -3}, "constant", AF_DTYPE_FLOAT, 1},
    {"crop everything in a row", 2, {3, 4}, {0, -4, 0, 2}, "constant", AF_DTYPE_FLOAT, 3},
    {"pad past a cropped row", 2, {3, 4}, {1, 6, 0, -5}, "constant", AF_DTYPE_FLOAT, 3},
    {"reflect", 4, {1, 2, 5, 6}, {0, 0, 2, 3, 0, 0, 2, 4}, "reflect", AF_DTYPE_FLOAT, 0},
    {"reflect wider than the row", 2, {2, 3}, {1, 5, 1, 7}, "reflect", AF_DTYPE_FLOAT, 0},
    {"edge", 3, {2, 3, 4}, {1, 0, 2, 0, 2, 3}, "edge", AF_DTYPE_FLOAT, 0},
    {"wrap", 3, {2, 3, 4}, {0, 2, 5, 1, 1, 6}, "wrap", AF_DTYPE_FLOAT, 0},
    {"rank 1", 1, {10}, {3, 4}, "constant", AF_DTYPE_FLOAT, 0},
    {"rank 5", 5, {1, 2, 2, 3, 4}, {0, 1, 0, 1, 1, 0, 0, 1, 1, 2}, "edge", AF_DTYPE_FLOAT, 0},
    {"int64", 3, {2, 3, 5}, {0, 1, 2, 1, 0, 3}, "constant", AF_DTYPE_INT64, 7},
    {"uint8 reflect", 3, {2, 4, 5}, {0, 1, 2, 0, 2, 3}, "reflect", AF_DTYPE_UINT8, 0},
    {"big rows", 4, {1, 64, 17, 17}, {0, 0, 1, 1, 0, 0, 1, 1}, "constant", AF_DTYPE_FLOAT, 0},
};

/* Input values of any dtype: small integers, so every dtype holds them. */
static af_tensor input_of(const pad_case *pc) {
    af_tensor t = {.dtype = pc->dtype, .rank = pc->rank};
    memcpy(t.dims, pc->dims, (size_t)pc->rank * sizeof *pc->dims);
    if (af_tensor_alloc(&t, NULL) != AF_OK) return t;
    for (int64_t i = 0; i < af_tensor_numel(&t); i++) af_tensor_set_f64(&t, i, (double)(i * 37 % 101) - 20 * (pc->dtype != AF_DTYPE_UINT8));
    return t;
}

static af_tensor pads_tensor(int n, const int64_t *v) {
    af_tensor t = {.dtype = AF_DTYPE_INT64, .rank = 1, .dims = {n}};
    if (af_tensor_alloc(&t, NULL) == AF_OK) memcpy(t.data, v, (size_t)n * sizeof *v);
    return t;
}

AF_TEST(fast_pad_matches_the_reference) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const pad_case *pc = &cases[i];
        fx f;
        fx_init(&f, AF_OP_PAD, 13);
        fx_str(&f, "mode", pc->mode);
        fx_input(&f, input_of(pc), false);
        fx_input(&f, pads_tensor(2 * pc->rank, pc->pads), true);
        if (!strcmp(pc->mode, "constant")) fx_input(&f, fx_scalar(pc->dtype, pc->value), true);
        const char *name = NULL;
        const int64_t bad = fx_compare(&f, af_cpu_info_get()->isa_max, &pools, FX_EXACT, &name);
        if (bad) printf("  %s: %lld off\n", pc->label, (long long)bad);
        CHECK_EQ_INT(bad, 0);
        CHECK(name && !strcmp(name, "pad_rows"));
        fx_free(&f);
    }
    fx_pools_free(&pools);
}

/* Opset 10 reads pads and the constant from attributes; opset 18 may name the axes padded. */
AF_TEST(fast_pad_attribute_pads_and_axes) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    fx f;
    fx_init(&f, AF_OP_PAD, 10);
    fx_ints(&f, "pads", 8, (int64_t[]){0, 1, 2, 0, 0, 0, 1, 3});
    fx_float(&f, "value", 4.0f);
    fx_input(&f, fx_rand(4, (int64_t[]){1, 2, 3, 4}, -1, 1, 3), false);
    CHECK_EQ_INT(fx_compare(&f, af_cpu_info_get()->isa_max, &pools, FX_EXACT, NULL), 0);
    fx_free(&f);

    fx_init(&f, AF_OP_PAD, 18);
    fx_str(&f, "mode", "reflect");
    fx_input(&f, fx_rand(4, (int64_t[]){1, 2, 5, 6}, -1, 1, 4), false);
    fx_input(&f, pads_tensor(4, (int64_t[]){2, 1, 3, 2}), true);
    fx_no_input(&f);
    fx_input(&f, pads_tensor(2, (int64_t[]){-1, 2}), true); /* axes W and H */
    CHECK_EQ_INT(fx_compare(&f, af_cpu_info_get()->isa_max, &pools, FX_EXACT, NULL), 0);
    fx_free(&f);
    fx_pools_free(&pools);
}
