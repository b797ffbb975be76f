/*
 * The fast Transpose kernel (src/kernels/fast/transpose.c) against the reference, bit for bit,
 * with 1 and 2 threads, on every ISA level the CPU has (AVX-512 moves whole 16 x 16 tiles of
 * 4-byte elements in registers): every permutation of ranks 2 to 4 over lengths that leave tile
 * edges (1, 3, 17, 33), the layouts real models use (BERT's heads, ConvNeXt's NCHW <-> NHWC,
 * Swin's windows at rank 6), and 1-, 2-, 4- and 8-byte elements.
 */
#include "fast_check.h"

static af_tensor input_of(af_dtype dtype, int rank, const int64_t *dims) {
    af_tensor t = {.dtype = dtype, .rank = rank};
    memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    if (af_tensor_alloc(&t, NULL) != AF_OK) return t;
    for (int64_t i = 0; i < af_tensor_numel(&t); i++) af_tensor_set_f64(&t, i, (double)(i % 251));
    return t;
}

/* Compares the fast kernel with the reference on one transpose; returns the elements off. */
static int64_t check_one(const fx_pools *pools, af_isa isa, af_dtype dtype, int rank, const int64_t *dims,
                         const int64_t *perm) {
    fx f;
    fx_init(&f, AF_OP_TRANSPOSE, 13);
    fx_ints(&f, "perm", rank, perm);
    fx_input(&f, input_of(dtype, rank, dims), false);
    const char *name = NULL;
    int64_t bad = fx_compare(&f, isa, pools, FX_EXACT, &name);
    if (!name || strcmp(name, "transpose_tiled")) bad = bad ? bad : 1;
    if (bad) {
        printf("  %s rank %d dims", af_dtype_name(dtype), rank);
        for (int i = 0; i < rank; i++) printf(" %lld", (long long)dims[i]);
        printf(" perm");
        for (int i = 0; i < rank; i++) printf(" %lld", (long long)perm[i]);
        printf(": %lld off\n", (long long)bad);
    }
    fx_free(&f);
    return bad;
}

/* Calls check_one for every permutation of rank r (Heap's algorithm over p). */
static int64_t every_perm(const fx_pools *pools, af_isa isa, af_dtype dtype, int r, const int64_t *dims) {
    int64_t p[4] = {0, 1, 2, 3}, bad = 0;
    int c[4] = {0};
    bad += check_one(pools, isa, dtype, r, dims, p);
    for (int i = 1; i < r;) {
        if (c[i] < i) {
            const int j = i % 2 ? c[i] : 0;
            const int64_t t = p[j];
            p[j] = p[i];
            p[i] = t;
            bad += check_one(pools, isa, dtype, r, dims, p);
            c[i]++;
            i = 1;
        } else {
            c[i++] = 0;
        }
    }
    return bad;
}

AF_TEST(fast_transpose_every_permutation) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    af_isa isas[8];
    const int n_isa = fx_isas(isas);
    static const int64_t shapes[][4] = {{17, 33, 3, 1}, {1, 16, 32, 5}, {3, 17, 1, 33}, {32, 16, 16, 2}};
    for (int i = 0; i < n_isa; i++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            CHECK_EQ_INT(every_perm(&pools, isas[i], AF_DTYPE_FLOAT, 2, shapes[s]), 0);
            CHECK_EQ_INT(every_perm(&pools, isas[i], AF_DTYPE_FLOAT, 3, shapes[s]), 0);
            CHECK_EQ_INT(every_perm(&pools, isas[i], AF_DTYPE_FLOAT, 4, shapes[s]), 0);
        }
    fx_pools_free(&pools);
}

AF_TEST(fast_transpose_model_layouts_and_dtypes) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    af_isa isas[8];
    const int n_isa = fx_isas(isas);
    static const struct {
        int rank;
        int64_t dims[6], perm[6];
    } cases[] = {
        {4, {1, 128, 12, 64}, {0, 2, 1, 3}},             /* BERT: tokens x heads -> heads x tokens */
        {4, {1, 12, 128, 64}, {0, 1, 3, 2}},             /* K transposed for QK^T */
        {4, {1, 96, 56, 56}, {0, 2, 3, 1}},              /* ConvNeXt: NCHW -> NHWC */
        {4, {1, 56, 56, 96}, {0, 3, 1, 2}},              /* and back */
        {6, {1, 8, 7, 8, 7, 96}, {0, 1, 3, 2, 4, 5}},    /* Swin: window partition */
        {3, {197, 3, 40}, {1, 0, 2}},                    /* ViT's q, k, v split */
    };
    static const af_dtype dtypes[] = {AF_DTYPE_FLOAT, AF_DTYPE_INT64, AF_DTYPE_UINT8, AF_DTYPE_INT16};
    for (int i = 0; i < n_isa; i++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
            for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++)
                CHECK_EQ_INT(check_one(&pools, isas[i], dtypes[d], cases[c].rank, cases[c].dims, cases[c].perm), 0);
    fx_pools_free(&pools);
}
