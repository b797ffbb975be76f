/* Fast Reduce* against the reference reductions on the same inputs, at every ISA level and 1/2
 * threads: every op, axes patterns that give contiguous rows ([K R]), accumulated rows ([R K],
 * [K R K]), everything, nothing (noop_with_empty_axes) and the interleaved patterns the reference
 * keeps; keepdims both ways; axes as an attribute (opset 13) and as an input (opset 18, constant
 * or not); widths 1..40 for the vector tails; NaN and infinities for Max/Min/LogSumExp; empty
 * groups; tensors large enough to split over threads. Tolerance: 1e-5 + 1e-5 |ref| (float sums
 * against the reference's double ones). */
#include "fast_check.h"

static const af_op reduce_ops[] = {
    AF_OP_REDUCE_SUM, AF_OP_REDUCE_MEAN, AF_OP_REDUCE_MAX,     AF_OP_REDUCE_MIN,        AF_OP_REDUCE_PROD,
    AF_OP_REDUCE_L1,  AF_OP_REDUCE_L2,   AF_OP_REDUCE_LOG_SUM, AF_OP_REDUCE_LOG_SUM_EXP, AF_OP_REDUCE_SUM_SQUARE,
};

static af_tensor axes_tensor(int n, const int64_t *axes) {
    af_tensor t = {.dtype = AF_DTYPE_INT64, .rank = 1, .dims = {n}};
    if (af_tensor_alloc(&t, NULL) == AF_OK && n) memcpy(t.data, axes, (size_t)n * sizeof *axes);
    return t;
}

typedef struct red_case {
    int rank;
    int64_t dims[4];
    int n_axes;
    int64_t axes[4];
    bool keep, noop;
} red_case;

/* mode 0: axes attribute at opset 13 (ReduceSum: a constant input); 1: a constant input at
 * opset 18; 2: a run-time input at opset 18. */
static void setup(fx *f, af_op op, const red_case *rc, int mode, float lo, float hi, uint64_t seed) {
    const bool input = mode > 0 || op == AF_OP_REDUCE_SUM;
    fx_init(f, op, mode == 0 ? 13 : 18);
    fx_input(f, fx_rand(rc->rank, rc->dims, lo, hi, seed), false);
    if (input && (rc->n_axes || mode == 2)) fx_input(f, axes_tensor(rc->n_axes, rc->axes), mode != 2);
    if (!input && rc->n_axes) fx_ints(f, "axes", rc->n_axes, rc->axes);
    fx_int(f, "keepdims", rc->keep);
    if (rc->noop) fx_int(f, "noop_with_empty_axes", 1);
    fx_outputs(f, 1, 1);
}

static int64_t check_case(af_op op, const red_case *rc, int mode, af_isa isa, const fx_pools *pools, float lo,
                          float hi, int *covered) {
    fx f;
    setup(&f, op, rc, mode, lo, hi, 31 + (uint64_t)rc->dims[rc->rank - 1]);
    const char *name = "";
    int64_t bad = fx_compare(&f, isa, pools, (fx_tol){1e-5, 1e-5, 0}, &name);
    fx_free(&f);
    if (bad < 0) return -1;
    (*covered)++;
    if (!fx_named_for(name, isa)) bad++;
    if (bad)
        printf("  %s rank %d last dim %lld axes %d (first %lld) keep %d noop %d mode %d isa %s (%s): %lld off\n",
               af_op_info(op)->name, rc->rank, (long long)rc->dims[rc->rank - 1], rc->n_axes,
               (long long)rc->axes[0], rc->keep, rc->noop, mode, af_isa_name(isa), name, (long long)bad);
    return bad;
}

AF_TEST(fast_reduce_matches_reference) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    af_isa isas[AF_ISA_COUNT];
    int n_isa = fx_isas(isas);
    int covered = 0;
    for (int i = 0; i < n_isa; i++) {
        for (size_t o = 0; o < sizeof reduce_ops / sizeof reduce_ops[0]; o++) {
            const af_op op = reduce_ops[o];
            /* Prod and the logs want positive inputs of moderate size. */
            const bool pos = op == AF_OP_REDUCE_PROD || op == AF_OP_REDUCE_LOG_SUM;
            const float lo = pos ? 0.5f : -2, hi = pos ? 1.5f : 2;
            for (int64_t w = 1; w <= 40; w += (w < 20 ? 1 : 7)) {
                const red_case cases[] = {
                    {3, {2, 3, w}, 1, {2}, true, false},       /* [K R]: rows */
                    {3, {2, 3, w}, 1, {-1}, false, false},
                    {3, {2, w, 5}, 1, {1}, true, false},       /* [K R K]: accumulated rows */
                    {3, {w, 3, 4}, 1, {0}, false, false},      /* [R K] */
                    {4, {2, 3, w, 2}, 2, {1, 2}, true, false}, /* [K R K] over two dims */
                    {4, {2, 3, w, w}, 2, {2, 3}, false, false}, /* spatial: [K R] */
                    {3, {2, 3, w}, 0, {0}, true, false},       /* everything */
                    {3, {2, 3, w}, 0, {0}, false, true},       /* noop: the terms alone */
                    {3, {2, w, 3}, 2, {0, 2}, true, false},    /* [R K R]: the reference */
                    {3, {1, w, 1}, 1, {1}, false, false},      /* size-1 dims around */
                };
                for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
                    for (int mode = 0; mode < 3; mode++) {
                        if (mode > 0 && w % 3) continue; /* opset 18 on a subset */
                        int64_t bad = check_case(op, &cases[c], mode, isas[i], &pools, lo, hi, &covered);
                        CHECK(bad >= 0);
                        CHECK_EQ_INT(bad, 0);
                    }
                }
            }
            /* Big enough to run on both threads: rows, accumulated rows, and both in one. */
            const red_case big[] = {
                {3, {64, 40, 33}, 1, {2}, true, false},
                {3, {4, 300, 70}, 1, {1}, false, false},
                {3, {3, 50, 1500}, 1, {1}, true, false},
                {2, {70000, 1}, 1, {0}, true, false},
            };
            for (size_t c = 0; c < sizeof big / sizeof big[0]; c++) {
                int64_t bad = check_case(op, &big[c], 0, isas[i], &pools, pos ? 0.99f : lo, pos ? 1.01f : hi,
                                         &covered);
                CHECK_EQ_INT(bad, 0);
            }
        }
    }
    CHECK(covered > 1000);
    fx_pools_free(&pools);
}

/* NaN wins Max and Min wherever it sits; infinities through LogSumExp; empty groups. */
AF_TEST(fast_reduce_special_values) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    af_isa isas[AF_ISA_COUNT];
    int n_isa = fx_isas(isas);
    const float specials[] = {NAN, INFINITY, -INFINITY, -0.0f};
    for (int i = 0; i < n_isa; i++) {
        for (size_t o = 0; o < sizeof reduce_ops / sizeof reduce_ops[0]; o++) {
            for (size_t sv = 0; sv < sizeof specials / sizeof specials[0]; sv++) {
                for (int64_t at = 0; at < 37; at += 5) {
                    for (int axis = 1; axis <= 2; axis++) {
                        red_case rc = {3, {2, 37, 37}, 1, {axis}, true, false};
                        fx f;
                        setup(&f, reduce_ops[o], &rc, 0, -2, 2, 41);
                        float *x = f.in[0].data;
                        x[at * 37 + at] = specials[sv];             /* image 0 */
                        x[37 * 37 + at * 37 + 36 - at] = specials[sv]; /* image 1 */
                        x[37 * 37 + at] = specials[(sv + 1) % 4];
                        const char *name = "";
                        int64_t bad = fx_compare(&f, isas[i], &pools, (fx_tol){1e-5, 1e-5, 0}, &name);
                        if (bad)
                            printf("  %s special %zu at %lld axis %d isa %s: %lld off\n",
                                   af_op_info(reduce_ops[o])->name, sv, (long long)at, axis, af_isa_name(isas[i]),
                                   (long long)bad);
                        CHECK_EQ_INT(bad, 0);
                        fx_free(&f);
                    }
                }
            }
            /* An empty reduced dim: the identity (Mean: NaN, Max: -inf, LogSum: -inf, ...). */
            red_case empty = {3, {2, 0, 5}, 1, {1}, false, false};
            int covered = 0;
            int64_t bad = check_case(reduce_ops[o], &empty, 0, isas[i], &pools, -1, 1, &covered);
            CHECK_EQ_INT(bad, 0);
        }
    }
    fx_pools_free(&pools);
}
