/*
 * The fast Expand kernel (src/kernels/fast/expand.c) against the reference, bit for bit, with 1 and
 * 2 threads: per-channel planes, rows repeated, leading axes added, a scalar, no broadcast at all,
 * a target shape smaller than the input's, empty outputs, float32, int64, float16 and uint8.
 */
#include "fast_check.h"

typedef struct expand_case {
    const char *label;
    int rank;
    int64_t dims[5];
    int n_shape;
    int64_t shape[5];
    af_dtype dtype;
} expand_case;

static const expand_case cases[] = {
    {"per channel", 4, {1, 64, 1, 1}, 4, {1, 64, 56, 56}, AF_DTYPE_FLOAT},
    {"rows repeated", 2, {1, 37}, 2, {300, 37}, AF_DTYPE_FLOAT},
    {"middle axis", 3, {2, 1, 5}, 3, {2, 3, 5}, AF_DTYPE_FLOAT},
    {"alternating", 4, {4, 1, 3, 1}, 5, {2, 4, 5, 3, 7}, AF_DTYPE_FLOAT},
    {"column to matrix", 2, {300, 1}, 2, {300, 300}, AF_DTYPE_FLOAT},
    {"scalar", 0, {0}, 3, {2, 3, 4}, AF_DTYPE_FLOAT},
    {"one element out", 0, {0}, 0, {0}, AF_DTYPE_FLOAT},
    {"ones in the shape", 2, {1, 1}, 4, {1, 1, 1, 1}, AF_DTYPE_FLOAT},
    {"no broadcast", 3, {2, 3, 17}, 3, {2, 3, 17}, AF_DTYPE_FLOAT},
    {"shape smaller than input", 2, {3, 4}, 1, {1}, AF_DTYPE_FLOAT},
    {"empty", 2, {0, 3}, 3, {2, 0, 3}, AF_DTYPE_FLOAT},
    {"int64", 3, {3, 1, 2}, 4, {2, 3, 5, 2}, AF_DTYPE_INT64},
    {"float16", 2, {5, 1}, 3, {3, 5, 9}, AF_DTYPE_FLOAT16},
    {"uint8", 2, {1, 7}, 3, {4, 3, 7}, AF_DTYPE_UINT8},
    {"big rows", 3, {1, 1, 4096}, 3, {16, 8, 4096}, AF_DTYPE_FLOAT},
};

static af_tensor input_of(const expand_case *ec) {
    af_tensor t = {.dtype = ec->dtype, .rank = ec->rank};
    memcpy(t.dims, ec->dims, (size_t)ec->rank * sizeof *ec->dims);
    if (af_tensor_alloc(&t, NULL) != AF_OK) return t;
    for (int64_t i = 0; i < af_tensor_numel(&t); i++)
        af_tensor_set_f64(&t, i, (double)(i * 37 % 101) - 20 * (ec->dtype != AF_DTYPE_UINT8));
    return t;
}

AF_TEST(fast_expand_matches_the_reference) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const expand_case *ec = &cases[i];
        fx f;
        fx_init(&f, AF_OP_EXPAND, 13);
        fx_input(&f, input_of(ec), false);
        af_tensor shape = {.dtype = AF_DTYPE_INT64, .rank = 1, .dims = {ec->n_shape}};
        CHECK(af_tensor_alloc(&shape, NULL) == AF_OK);
        if (ec->n_shape) memcpy(shape.data, ec->shape, (size_t)ec->n_shape * sizeof *ec->shape);
        fx_input(&f, shape, true);
        const char *name = NULL;
        const int64_t bad = fx_compare(&f, af_cpu_info_get()->isa_max, &pools, FX_EXACT, &name);
        if (bad) printf("  %s: %lld off\n", ec->label, (long long)bad);
        CHECK_EQ_INT(bad, 0);
        CHECK(name && !strcmp(name, "expand_rows"));
        fx_free(&f);
    }
    fx_pools_free(&pools);
}

/* Shapes that do not broadcast reach the reference, which fails with its message. */
AF_TEST(fast_expand_refuses_what_does_not_broadcast) {
    fx f;
    fx_init(&f, AF_OP_EXPAND, 13);
    fx_input(&f, fx_rand(2, (int64_t[]){3, 4}, -1, 1, 1), false);
    af_tensor shape = {.dtype = AF_DTYPE_INT64, .rank = 1, .dims = {2}};
    CHECK(af_tensor_alloc(&shape, NULL) == AF_OK);
    memcpy(shape.data, (int64_t[]){3, 4}, 2 * sizeof(int64_t));
    fx_input(&f, shape, true);
    af_kernel k;
    CHECK(fx_prepare(&f, af_cpu_isa(), &k));
    af_tensor x = fx_rand(2, (int64_t[]){2, 4}, -1, 1, 2), y = fx_rand(2, (int64_t[]){3, 4}, 0, 1, 3);
    const af_tensor *ins[2] = {&x, &f.in[1]};
    af_tensor *outs[1] = {&y};
    af_op_ctx c = {.node = &f.node, .graph = &f.g, .opset = 13, .n_inputs = 2, .inputs = ins, .n_outputs = 1,
                   .outputs = outs, .err = &f.err};
    CHECK(k.run(&k, &c, NULL, NULL, NULL) == AF_ERR_RUNTIME);
    af_kernel_release(&k);
    af_tensor_free_data(&x);
    af_tensor_free_data(&y);
    fx_free(&f);
}
