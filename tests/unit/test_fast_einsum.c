/*
 * The fast Einsum (src/kernels/fast/einsum.c) against the reference kernel, for every ISA level
 * the CPU has, 1 and 2 threads: two-operand equations that are batched matrix products (attention's
 * two, plain and transposed products, a batch label in the middle, an output order that needs a
 * copy, an inner product to a scalar, an elementwise product, the implicit output), and
 * equations the fast path leaves to the reference through the same kernel (a label summed within
 * one operand, a broadcast size, a diagonal). Tolerance: 1e-5 + 1e-4 |ref| (float sums in another
 * order than the double reference).
 */
#include "fast_check.h"

AF_TEST(fast_einsum_matches_reference) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    static const struct {
        const char *eq;
        int ra, rb;
        int64_t a[4], b[4];
    } cases[] = {
        {"bhqd,bhkd->bhqk", 4, 4, {1, 3, 9, 8}, {1, 3, 7, 8}},
        {"bhqk,bhkd->bhqd", 4, 4, {2, 2, 9, 7}, {2, 2, 7, 5}},
        {"ij,jk->ik", 2, 2, {33, 17}, {17, 40}},
        {"ik,jk->ij", 2, 2, {20, 31}, {18, 31}},
        {"ji,jk->ik", 2, 2, {12, 19}, {12, 23}},
        {"bij,bjk->bik", 3, 3, {4, 5, 6}, {4, 6, 7}},
        {"bnd,nhd->bnh", 3, 3, {3, 4, 16}, {4, 5, 16}},
        {"ij,jk->ki", 2, 2, {6, 9}, {9, 11}},
        {"i,i->", 1, 1, {100}, {100}},
        {"ij,ij->ij", 2, 2, {5, 7}, {5, 7}},
        {"ij,jk", 2, 2, {4, 3}, {3, 5}},
        /* left to the reference */
        {"ij,jk->i", 2, 2, {4, 3}, {3, 5}},
        {"ij,jk->ik", 2, 2, {4, 1}, {3, 5}},
        {"ii,ij->ij", 2, 2, {4, 4}, {4, 6}},
    };
    af_isa isas[AF_ISA_COUNT];
    const int n_isa = fx_isas(isas);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int i = 0; i < n_isa; i++) {
            fx f;
            fx_init(&f, AF_OP_EINSUM, 12);
            fx_str(&f, "equation", cases[c].eq);
            fx_input(&f, fx_rand(cases[c].ra, cases[c].a, -1, 1, 3 + c), false);
            fx_input(&f, fx_rand(cases[c].rb, cases[c].b, -1, 1, 5 + c), false);
            const char *name = "";
            const int64_t bad = fx_compare(&f, isas[i], &pools, (fx_tol){1e-5, 1e-4, 0}, &name);
            if (bad != 0 || strcmp(name, "f32_einsum_gemm") != 0)
                printf("  %s isa=%s: %lld off (kernel %s)\n", cases[c].eq, af_isa_name(isas[i]), (long long)bad, name);
            CHECK(bad == 0 && strcmp(name, "f32_einsum_gemm") == 0);
            fx_free(&f);
        }
    fx_pools_free(&pools);
}
