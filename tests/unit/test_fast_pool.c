/*
 * The fast pooling kernels (src/kernels/fast/pool.c) against the reference kernels, for every ISA
 * level the CPU has and 1 and 2 threads: MaxPool and AveragePool over kernels, strides (1, 2, and
 * gathered), explicit and auto pads, ceil_mode and count_include_pad, at output widths that hit
 * every vector tail and windows wider than the input; the global pools over sizes 1 .. 100003.
 *
 * Tolerances: max pools are exact (a selection). A window average sums at most kh*kw floats in
 * float and scales once (by the reciprocal of its count; on AVX-512, where every window divides by
 * kh*kw, the depthwise kernel sums products with 1 / (kh*kw) instead), so with inputs in [-1, 1]
 * it is held to kh*kw * 2^-24 absolute plus one ULP; the global average sums in double and rounds once: one ULP (and 1e-9 absolute near zero).
 */
#include "fast_check.h"

typedef struct window_case {
    const char *label;
    af_op op;
    int64_t k[2], s[2], pads[4]; /* pads: begin h, begin w, end h, end w */
    int ceil_mode, include_pad;
    const char *auto_pad; /* NULL: explicit pads */
} window_case;

static const window_case window_cases[] = {
    {"max3x3s2p1", AF_OP_MAX_POOL, {3, 3}, {2, 2}, {1, 1, 1, 1}, 0, 0, NULL},
    {"max2x2s2", AF_OP_MAX_POOL, {2, 2}, {2, 2}, {0, 0, 0, 0}, 0, 0, NULL},
    {"max3x3s1p1", AF_OP_MAX_POOL, {3, 3}, {1, 1}, {1, 1, 1, 1}, 0, 0, NULL},
    {"max3x3s2_ceil", AF_OP_MAX_POOL, {3, 3}, {2, 2}, {0, 0, 0, 0}, 1, 0, NULL},
    {"max5x3s3_asym", AF_OP_MAX_POOL, {5, 3}, {3, 3}, {1, 0, 2, 1}, 0, 0, NULL},
    {"max2x2_same_upper", AF_OP_MAX_POOL, {2, 2}, {1, 1}, {0}, 0, 0, "SAME_UPPER"},
    {"max3x3s2_same_lower", AF_OP_MAX_POOL, {3, 3}, {2, 2}, {0}, 0, 0, "SAME_LOWER"},
    {"max3x3_valid", AF_OP_MAX_POOL, {3, 3}, {1, 1}, {0}, 0, 0, "VALID"},
    {"max1x1", AF_OP_MAX_POOL, {1, 1}, {1, 1}, {0, 0, 0, 0}, 0, 0, NULL},
    {"avg3x3s1p1", AF_OP_AVERAGE_POOL, {3, 3}, {1, 1}, {1, 1, 1, 1}, 0, 0, NULL},
    {"avg3x3s1p1_incl", AF_OP_AVERAGE_POOL, {3, 3}, {1, 1}, {1, 1, 1, 1}, 0, 1, NULL},
    {"avg2x2s2", AF_OP_AVERAGE_POOL, {2, 2}, {2, 2}, {0, 0, 0, 0}, 0, 0, NULL},
    {"avg3x3s2p1_ceil_incl", AF_OP_AVERAGE_POOL, {3, 3}, {2, 2}, {1, 1, 1, 1}, 1, 1, NULL},
    {"avg3x3s2p1_ceil", AF_OP_AVERAGE_POOL, {3, 3}, {2, 2}, {1, 1, 1, 1}, 1, 0, NULL},
    {"avg7x7p3", AF_OP_AVERAGE_POOL, {7, 7}, {1, 1}, {3, 3, 3, 3}, 0, 0, NULL},
    {"avg3x3s4x5_incl", AF_OP_AVERAGE_POOL, {3, 3}, {4, 5}, {1, 2, 1, 2}, 0, 1, NULL},
    {"avg2x2_same_upper_incl", AF_OP_AVERAGE_POOL, {2, 2}, {1, 1}, {0}, 0, 1, "SAME_UPPER"},
};

static const int64_t widths[] = {1, 7, 15, 16, 17, 31, 33, 100};

static void window_node(fx *f, const window_case *wc, int64_t n, int64_t c, int64_t h, int64_t w, uint64_t seed) {
    fx_init(f, wc->op, 17);
    fx_ints(f, "kernel_shape", 2, wc->k);
    fx_ints(f, "strides", 2, wc->s);
    if (wc->auto_pad) fx_str(f, "auto_pad", wc->auto_pad);
    else fx_ints(f, "pads", 4, wc->pads);
    if (wc->ceil_mode) fx_int(f, "ceil_mode", 1);
    if (wc->include_pad) fx_int(f, "count_include_pad", 1);
    const int64_t dims[4] = {n, c, h, w};
    fx_input(f, fx_rand(4, dims, -1, 1, seed), false);
}

/* False when the window does not fit this input (the shape function rejects it). */
static bool fits(fx *f) {
    af_tensor out[FX_MAX_OUT];
    af_status st = fx_alloc_outputs(f, out);
    fx_free_outputs(f, out);
    return st == AF_OK;
}

static fx_tol window_tol(const window_case *wc) {
    if (wc->op == AF_OP_MAX_POOL) return FX_EXACT;
    return (fx_tol){(double)(wc->k[0] * wc->k[1]) * 0x1p-24, 0, 1};
}

AF_TEST(fast_pool_window) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    af_isa isas[AF_ISA_COUNT];
    int n_isa = fx_isas(isas);
    for (size_t c = 0; c < sizeof window_cases / sizeof window_cases[0]; c++) {
        const window_case *wc = &window_cases[c];
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
            for (int dynamic = 0; dynamic < 2; dynamic++) {
                fx f;
                window_node(&f, wc, 2, 3, 9 + (int64_t)wi % 3, widths[wi], c * 100 + wi);
                f.dynamic = dynamic;
                if (!fits(&f)) {
                    fx_free(&f);
                    continue;
                }
                for (int i = 0; i < n_isa; i++) {
                    const char *name = "";
                    /* Unknown rank at prepare: a 2-D window cannot be planned, the reference runs. */
                    int64_t bad = fx_compare(&f, isas[i], &pools, window_tol(wc), &name);
                    bool ok = dynamic ? bad == -1 : bad == 0 && fx_named_for(name, isas[i]);
                    if (!ok)
                        printf("  %s w=%lld dynamic=%d isa=%s: %lld off (kernel %s)\n", wc->label,
                               (long long)widths[wi], dynamic, af_isa_name(isas[i]), (long long)bad, name);
                    CHECK(ok);
                }
                fx_free(&f);
            }
        }
    }
    fx_pools_free(&pools);
}

/* Typical model sizes, big enough to split over the threads. */
AF_TEST(fast_pool_window_large) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    af_isa isas[AF_ISA_COUNT];
    int n_isa = fx_isas(isas);
    /* 64 planes split by planes over the threads; 3 planes by bands of rows. */
    const window_case *big[] = {&window_cases[0], &window_cases[1], &window_cases[10], &window_cases[0],
                                &window_cases[10]};
    for (int c = 0; c < 5; c++) {
        fx f;
        window_node(&f, big[c], 1, c < 3 ? 64 : 3, 112, 112, (uint64_t)c);
        for (int i = 0; i < n_isa; i++) CHECK(fx_compare(&f, isas[i], &pools, window_tol(big[c]), NULL) == 0);
        fx_free(&f);
    }
    fx_pools_free(&pools);
}

AF_TEST(fast_pool_global) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    af_isa isas[AF_ISA_COUNT];
    int n_isa = fx_isas(isas);
    static const int64_t sizes[] = {1, 7, 15, 16, 17, 31, 33, 1000, 100003};
    const fx_tol avg_tol = {1e-9, 0, 1};
    for (int op = 0; op < 2; op++) {
        const af_op o = op ? AF_OP_GLOBAL_AVERAGE_POOL : AF_OP_GLOBAL_MAX_POOL;
        const fx_tol tol = op ? avg_tol : FX_EXACT;
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0] + 3; s++) {
            int64_t dims[5] = {2, 3, 1, 1, 1};
            int rank = 4;
            if (s < sizeof sizes / sizeof sizes[0]) dims[3] = sizes[s];
            else if (s == sizeof sizes / sizeof sizes[0]) rank = 3, dims[2] = 49; /* 1-D spatial */
            else if (s == sizeof sizes / sizeof sizes[0] + 1) rank = 5, dims[2] = 3, dims[3] = 4, dims[4] = 5;
            else dims[0] = 1, dims[1] = 256, dims[2] = 56, dims[3] = 56; /* threads */
            fx f;
            fx_init(&f, o, 17);
            fx_input(&f, fx_rand(rank, dims, -1, 1, s), false);
            for (int i = 0; i < n_isa; i++) {
                const char *name = "";
                int64_t bad = fx_compare(&f, isas[i], &pools, tol, &name);
                if (bad != 0) printf("  %s case %zu isa=%s: %lld off\n", af_op_info(o)->name, s, af_isa_name(isas[i]),
                                     (long long)bad);
                CHECK(bad == 0);
                if (bad == 0) CHECK(fx_named_for(name, isas[i]));
            }
            fx_free(&f);
        }
    }
    fx_pools_free(&pools);
}

AF_TEST(fast_pool_not_covered) {
    fx f;
    bool ok;
    af_kernel k;
    /* MaxPool's Indices output. */
    window_node(&f, &window_cases[0], 1, 2, 8, 8, 1);
    fx_outputs(&f, 2, 3u);
    CHECK(!(ok = fx_prepare(&f, af_cpu_isa(), &k)));
    if (ok) af_kernel_release(&k);
    fx_free(&f);
    /* Dilations. */
    window_node(&f, &window_cases[0], 1, 2, 8, 8, 1);
    fx_ints(&f, "dilations", 2, (int64_t[]){2, 2});
    CHECK(!(ok = fx_prepare(&f, af_cpu_isa(), &k)));
    if (ok) af_kernel_release(&k);
    fx_free(&f);
    /* 1-D pooling. */
    fx_init(&f, AF_OP_MAX_POOL, 17);
    fx_ints(&f, "kernel_shape", 1, (int64_t[]){3});
    fx_input(&f, fx_rand(3, (int64_t[]){1, 2, 10}, -1, 1, 1), false);
    CHECK(!(ok = fx_prepare(&f, af_cpu_isa(), &k)));
    if (ok) af_kernel_release(&k);
    fx_free(&f);
}
