/*
 * The fast comparisons and Where (src/kernels/fast/mask.c) against the reference kernels, exactly
 * (bool outputs and selected elements), for every ISA level the CPU has, 1 and 2 threads: operands
 * of the output's shape or single elements, NaN, -0 against +0 and infinities among the values,
 * tensors large enough to split over the threads; Where on float and int32 elements. Broadcasts
 * the loops do not walk must give the reference's result too (the kernel hands them to it).
 */
#include "fast_check.h"

static const af_op compares[] = {AF_OP_EQUAL, AF_OP_LESS, AF_OP_LESS_OR_EQUAL, AF_OP_GREATER, AF_OP_GREATER_OR_EQUAL};

/* Random values from a small set, so that equal pairs occur, with NaN, -0, +0 and infinities. */
static af_tensor values(int rank, const int64_t *dims, uint64_t seed) {
    af_tensor t = fx_rand(rank, dims, -3, 3, seed);
    float *p = t.data;
    static const float special[] = {NAN, -0.0f, 0.0f, INFINITY, -INFINITY};
    for (int64_t i = 0; i < af_tensor_numel(&t); i++) {
        const uint64_t h = (uint64_t)i * 2654435761u + seed * 97;
        p[i] = h % 7 == 0 ? special[h / 7 % 5] : (float)(int)(p[i] * 2) / 2; /* halves: ties happen */
    }
    return t;
}

/* A bool (0/1) or int32 tensor of a fixed pattern. */
static af_tensor pattern(af_dtype dtype, int rank, const int64_t *dims, uint64_t seed) {
    af_tensor t = {.dtype = dtype, .rank = rank};
    memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    if (af_tensor_alloc(&t, NULL) != AF_OK) return t;
    for (int64_t i = 0; i < af_tensor_numel(&t); i++)
        if (dtype == AF_DTYPE_BOOL) ((uint8_t *)t.data)[i] = (uint8_t)(((uint64_t)i * 40503u + seed) >> 7 & 1);
        else ((int32_t *)t.data)[i] = (int32_t)((uint64_t)i * 7919u + seed) - 1000;
    return t;
}

AF_TEST(fast_mask_compares) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    static const int64_t big[2] = {2, 50001}, small[3] = {3, 7, 5}, col[2] = {2, 1};
    char label[96];
    for (size_t o = 0; o < sizeof compares / sizeof compares[0]; o++)
        for (int form = 0; form < 4; form++) {
            fx f;
            fx_init(&f, compares[o], 17);
            const bool large = form == 0;
            const int64_t *dims = large ? big : small;
            const int rank = large ? 2 : 3;
            /* same shapes (large), a scalar B, a scalar A, a column broadcast (the reference) */
            fx_input(&f, form == 2 ? fx_scalar(AF_DTYPE_FLOAT, 0.5) : values(rank, dims, 1 + o), false);
            fx_input(&f, form == 1 ? fx_scalar(AF_DTYPE_FLOAT, -0.0) : form == 3 ? values(2, col, 3) : values(rank, dims, 2 + o), false);
            snprintf(label, sizeof label, "%s form %d", af_op_info(compares[o])->name, form);
            if (form == 3) { /* [2, 1] against [3, 7, 5] does not broadcast: make A [2, 5] */
                fx_free(&f);
                fx_init(&f, compares[o], 17);
                fx_input(&f, values(2, (int64_t[]){2, 5}, 4), false);
                fx_input(&f, values(2, col, 3), false);
            }
            fx_check_exact_all(&f, &pools, "f32_compare", label);
            fx_free(&f);
        }
    fx_pools_free(&pools);
}

AF_TEST(fast_mask_where) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    static const int64_t big[2] = {3, 40003}, small[3] = {2, 9, 4};
    char label[96];
    for (int dt = 0; dt < 2; dt++)
        for (int form = 0; form < 5; form++) {
            fx f;
            fx_init(&f, AF_OP_WHERE, 17);
            const bool large = form == 0;
            const int64_t *dims = large ? big : small;
            const int rank = large ? 2 : 3;
            /* all shaped, X scalar, Y scalar, the condition scalar, the condition a row broadcast */
            fx_input(&f, form == 3 ? fx_scalar(AF_DTYPE_BOOL, 1) : form == 4 ? pattern(AF_DTYPE_BOOL, 1, &dims[2], 5) : pattern(AF_DTYPE_BOOL, rank, dims, 5),
                     false);
            fx_input(&f, form == 1 ? fx_scalar(dt ? AF_DTYPE_INT32 : AF_DTYPE_FLOAT, 7)
                                   : dt ? pattern(AF_DTYPE_INT32, rank, dims, 6) : values(rank, dims, 6),
                     false);
            fx_input(&f, form == 2 ? (dt ? fx_scalar(AF_DTYPE_INT32, -5) : fx_scalar(AF_DTYPE_FLOAT, -INFINITY))
                                   : dt ? pattern(AF_DTYPE_INT32, rank, dims, 7) : values(rank, dims, 7),
                     false);
            snprintf(label, sizeof label, "Where %s form %d", dt ? "int32" : "float", form);
            fx_check_exact_all(&f, &pools, "where_4byte", label);
            fx_free(&f);
        }
    fx_pools_free(&pools);
}
