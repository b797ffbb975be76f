/*
 * The fast elementwise kernels (src/kernels/fast/elementwise.c) against the reference kernels, for
 * every ISA level the CPU has, 1 and 2 threads, sizes that hit every vector tail, the broadcast
 * patterns the kernel walks, and the cases it must leave to the reference.
 *
 * Tolerances, per op, against the reference's double computation rounded once:
 *   exact: Relu, LeakyRelu, Clip, Neg, Abs, Sqrt, Reciprocal, Identity, Dropout, Pow 2 / 0.5,
 *          Floor, Ceil, Round (ties to even, the sign of zero kept) and the binary ops (each is one
 *          IEEE operation, or a select, in float);
 *   Sigmoid 4 ULP, Tanh 3 ULP, Erf 3 ULP, Exp 2 ULP, Log 2 ULP, Softplus 3 ULP: vmath_x86.h's
 *          stated error against the correctly rounded value (2, 1, 2, 1, 1, 2 ULP) plus one, which
 *          also covers glibc's float functions on the scalar path; results below FLT_MIN to an
 *          absolute 2^-126; Elu 3 ULP: expm1's 2 and the product by alpha rounding once more;
 *   HardSigmoid 1 ULP + 2.5e-7 and HardSwish 2 ULP + 5e-7 absolute: a x + b rounds once (FMA) or
 *          twice (scalar) in float, and HardSwish uses 1/6 rounded to float, as the epilogue does.
 */
#include "fast_check.h"

static const int64_t sizes[] = {1, 7, 15, 16, 17, 31, 33, 1000, 100003};
#define N_SIZES (int)(sizeof sizes / sizeof sizes[0])

#define TRANSCENDENTAL(u) ((fx_tol){FLT_MIN, 0, (u)})

/* A random tensor with +-0, +-inf and NaN at fixed places (when it is long enough). */
static af_tensor with_specials(int rank, const int64_t *dims, float lo, float hi, uint64_t seed) {
    af_tensor t = fx_rand(rank, dims, lo, hi, seed);
    float *p = t.data;
    int64_t n = af_tensor_numel(&t);
    static const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN};
    for (int k = 0; k < 5 && n >= 16; k++) p[(k * 7 + 3) % n] = special[k];
    return t;
}

/* Extra input values: every third element a power of two from 2^-149 (denormals) to 2^127 times a
 * mantissa, alternating signs (IN_WIDE); every third element a multiple of 1/4 in [-10, 10], the
 * ties of Round among them (IN_QUARTERS). */
enum { IN_RANDOM, IN_WIDE, IN_QUARTERS };

static void add_values(af_tensor *t, int kind) {
    float *p = t->data;
    const int64_t n = af_tensor_numel(t);
    for (int64_t i = 1; kind != IN_RANDOM && i < n; i += 3) {
        if (isnan(p[i]) || isinf(p[i]) || p[i] == 0) continue; /* the specials stay */
        const float sign = i & 2 ? -1.0f : 1.0f;
        if (kind == IN_WIDE) p[i] = sign * ldexpf(1.0f + (float)(i % 29) / 29.0f, (int)(i * 7 % 277) - 149);
        else p[i] = (float)(i % 81 - 40) * 0.25f;
    }
}

typedef struct unary_case {
    const char *label;
    af_op op;
    int opset;
    float lo, hi;
    fx_tol tol;
    int setup; /* extra attributes or inputs, see add_params */
    int values; /* IN_* */
} unary_case;

enum { P_NONE, P_LEAKY, P_ELU, P_HSIG, P_CLIP11, P_CLIP11_MIN, P_CLIP11_SWAPPED, P_CLIP6, P_DROPOUT12, P_POW2,
       P_POW_HALF, P_POW2_INT };

static void add_params(fx *f, int setup) {
    switch (setup) {
    case P_LEAKY: fx_float(f, "alpha", 0.1f); break;
    case P_ELU: fx_float(f, "alpha", 0.7f); break;
    case P_HSIG:
        fx_float(f, "alpha", 0.3f);
        fx_float(f, "beta", 0.4f);
        break;
    case P_CLIP11:
        fx_input(f, fx_scalar(AF_DTYPE_FLOAT, -0.5), true);
        fx_input(f, fx_scalar(AF_DTYPE_FLOAT, 0.7), true);
        break;
    case P_CLIP11_MIN: fx_input(f, fx_scalar(AF_DTYPE_FLOAT, -0.25), true); break;
    case P_CLIP11_SWAPPED: /* min > max: max everywhere */
        fx_input(f, fx_scalar(AF_DTYPE_FLOAT, 0.5), true);
        fx_input(f, fx_scalar(AF_DTYPE_FLOAT, -0.5), true);
        break;
    case P_CLIP6:
        fx_float(f, "min", -1.5f);
        fx_float(f, "max", 2.0f);
        break;
    case P_DROPOUT12:
        fx_input(f, fx_scalar(AF_DTYPE_FLOAT, 0.5), true);
        fx_input(f, fx_scalar(AF_DTYPE_BOOL, 0), true);
        break;
    case P_POW2: fx_input(f, fx_scalar(AF_DTYPE_FLOAT, 2.0), true); break;
    case P_POW_HALF: fx_input(f, fx_scalar(AF_DTYPE_FLOAT, 0.5), true); break;
    case P_POW2_INT: fx_input(f, fx_scalar(AF_DTYPE_INT64, 2), true); break;
    default: break;
    }
}

static const unary_case unary_cases[] = {
    {"relu", AF_OP_RELU, 17, -5, 5, FX_EXACT, P_NONE, IN_RANDOM},
    {"leaky_relu", AF_OP_LEAKY_RELU, 17, -5, 5, FX_EXACT, P_LEAKY, IN_RANDOM},
    {"sigmoid", AF_OP_SIGMOID, 17, -20, 20, TRANSCENDENTAL(4), P_NONE, IN_RANDOM},
    {"sigmoid_far", AF_OP_SIGMOID, 17, -100, 100, TRANSCENDENTAL(4), P_NONE, IN_RANDOM},
    {"hard_sigmoid", AF_OP_HARD_SIGMOID, 17, -5, 5, {2.5e-7, 0, 1}, P_HSIG, IN_RANDOM},
    {"hard_swish", AF_OP_HARD_SWISH, 17, -5, 5, {5e-7, 0, 2}, P_NONE, IN_RANDOM},
    {"tanh", AF_OP_TANH, 17, -6, 6, TRANSCENDENTAL(3), P_NONE, IN_RANDOM},
    {"erf", AF_OP_ERF, 17, -4, 4, TRANSCENDENTAL(3), P_NONE, IN_RANDOM},
    {"exp", AF_OP_EXP, 17, -90, 89, TRANSCENDENTAL(2), P_NONE, IN_RANDOM},
    {"clip11", AF_OP_CLIP, 13, -2, 2, FX_EXACT, P_CLIP11, IN_RANDOM},
    {"clip11_min_only", AF_OP_CLIP, 13, -2, 2, FX_EXACT, P_CLIP11_MIN, IN_RANDOM},
    {"clip11_swapped", AF_OP_CLIP, 13, -2, 2, FX_EXACT, P_CLIP11_SWAPPED, IN_RANDOM},
    {"clip11_none", AF_OP_CLIP, 13, -2, 2, FX_EXACT, P_NONE, IN_RANDOM},
    {"clip6", AF_OP_CLIP, 9, -3, 3, FX_EXACT, P_CLIP6, IN_RANDOM},
    {"clip6_default", AF_OP_CLIP, 9, -3, 3, FX_EXACT, P_NONE, IN_RANDOM},
    {"neg", AF_OP_NEG, 17, -5, 5, FX_EXACT, P_NONE, IN_RANDOM},
    {"abs", AF_OP_ABS, 17, -5, 5, FX_EXACT, P_NONE, IN_RANDOM},
    {"sqrt", AF_OP_SQRT, 17, -1, 100, FX_EXACT, P_NONE, IN_RANDOM},
    {"reciprocal", AF_OP_RECIPROCAL, 17, -5, 5, FX_EXACT, P_NONE, IN_RANDOM},
    {"identity", AF_OP_IDENTITY, 17, -5, 5, FX_EXACT, P_NONE, IN_RANDOM},
    {"dropout10", AF_OP_DROPOUT, 10, -5, 5, FX_EXACT, P_NONE, IN_RANDOM},
    {"dropout12", AF_OP_DROPOUT, 13, -5, 5, FX_EXACT, P_DROPOUT12, IN_RANDOM},
    {"pow2", AF_OP_POW, 15, -5, 5, FX_EXACT, P_POW2, IN_RANDOM},
    {"pow2_int", AF_OP_POW, 15, -5, 5, FX_EXACT, P_POW2_INT, IN_RANDOM},
    {"pow_half", AF_OP_POW, 15, -1, 50, FX_EXACT, P_POW_HALF, IN_RANDOM},
    {"log", AF_OP_LOG, 13, -1, 100, TRANSCENDENTAL(2), P_NONE, IN_WIDE},
    {"log_near_1", AF_OP_LOG, 13, 0.5f, 2, TRANSCENDENTAL(2), P_NONE, IN_RANDOM},
    {"softplus", AF_OP_SOFTPLUS, 17, -30, 30, TRANSCENDENTAL(3), P_NONE, IN_WIDE},
    {"softplus_near_0", AF_OP_SOFTPLUS, 17, -2, 2, TRANSCENDENTAL(3), P_NONE, IN_RANDOM},
    {"elu", AF_OP_ELU, 6, -20, 5, TRANSCENDENTAL(3), P_NONE, IN_WIDE},
    {"elu_alpha", AF_OP_ELU, 6, -1, 1, TRANSCENDENTAL(3), P_ELU, IN_RANDOM},
    {"floor", AF_OP_FLOOR, 13, -1e3f, 1e3f, FX_EXACT, P_NONE, IN_WIDE},
    {"ceil", AF_OP_CEIL, 13, -1e3f, 1e3f, FX_EXACT, P_NONE, IN_WIDE},
    {"round", AF_OP_ROUND, 11, -1e3f, 1e3f, FX_EXACT, P_NONE, IN_WIDE},
    {"round_ties", AF_OP_ROUND, 11, -2, 2, FX_EXACT, P_NONE, IN_QUARTERS},
    {"floor_quarters", AF_OP_FLOOR, 13, -1, 1, FX_EXACT, P_NONE, IN_QUARTERS},
    {"ceil_quarters", AF_OP_CEIL, 13, -1, 1, FX_EXACT, P_NONE, IN_QUARTERS},
};

AF_TEST(fast_elementwise_unary) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    af_isa isas[AF_ISA_COUNT];
    int n_isa = fx_isas(isas);
    for (size_t c = 0; c < sizeof unary_cases / sizeof unary_cases[0]; c++) {
        const unary_case *uc = &unary_cases[c];
        for (int s = 0; s < N_SIZES; s++) {
            fx f;
            fx_init(&f, uc->op, uc->opset);
            af_tensor x = with_specials(1, &sizes[s], uc->lo, uc->hi, (uint64_t)(c * 100 + s));
            add_values(&x, uc->values);
            fx_input(&f, x, false);
            add_params(&f, uc->setup);
            for (int i = 0; i < n_isa; i++) {
                const char *name = "";
                int64_t bad = fx_compare(&f, isas[i], &pools, uc->tol, &name);
                if (bad != 0 || !fx_named_for(name, isas[i]))
                    printf("  %s n=%lld isa=%s: %lld off (kernel %s)\n", uc->label, (long long)sizes[s],
                           af_isa_name(isas[i]), (long long)bad, name);
                CHECK(bad == 0);
                CHECK(fx_named_for(name, isas[i]));
            }
            fx_free(&f);
        }
    }
    fx_pools_free(&pools);
}

/* The reference Round, the oracle above: ties to even, and x's sign on a zero result (-0.4 and
 * -0.5 round to -0, as IEEE 754, numpy and ONNX Runtime give). */
AF_TEST(reference_round_ties_to_even_with_the_sign) {
    static const float x[] = {0.5f,  1.5f,  2.5f, -0.5f,       -1.5f,         -2.5f,    -0.4f,     0.4f,
                              -0.0f, 0.0f,  3.7f, 8388607.5f,  -8388609.0f,   NAN,      INFINITY,  -INFINITY};
    static const float want[] = {0.0f,  2.0f, 2.0f, -0.0f,      -2.0f,         -2.0f,    -0.0f,     0.0f,
                                 -0.0f, 0.0f, 4.0f, 8388608.0f, -8388609.0f,   NAN,      INFINITY,  -INFINITY};
    const int n = (int)(sizeof x / sizeof *x);
    fx f;
    fx_init(&f, AF_OP_ROUND, 11);
    fx_input(&f, fx_vec(n, x), false);
    af_tensor y[FX_MAX_OUT];
    CHECK(fx_run_reference(&f, y) == AF_OK);
    const af_tensor w = {.dtype = AF_DTYPE_FLOAT, .rank = 1, .dims = {n}, .data = (void *)want};
    CHECK_EQ_INT(fx_count_off(&y[0], &w, FX_EXACT, "reference Round"), 0);
    fx_free_outputs(&f, y);
    fx_free(&f);
}

/* ---- binary ---------------------------------------------------------------------------------- */

typedef struct shape {
    int rank;
    int64_t dims[4];
} shape;

typedef struct bcast_case {
    shape a, b;
    bool covered; /* a static-shape kernel exists */
} bcast_case;

static const bcast_case bcast_cases[] = {
    {{1, {1}}, {1, {1}}, true},
    {{1, {17}}, {1, {17}}, true},
    {{1, {100003}}, {1, {100003}}, true},
    {{2, {31, 33}}, {2, {31, 33}}, true},
    {{1, {1000}}, {0, {0}}, true},           /* b a scalar */
    {{1, {15}}, {1, {1}}, true},
    {{0, {0}}, {1, {100003}}, true},         /* a a scalar */
    {{4, {2, 5, 7, 7}}, {3, {5, 1, 1}}, true}, /* per channel */
    {{4, {1, 3, 1, 17}}, {3, {3, 1, 1}}, true},
    {{3, {2, 16, 33}}, {2, {16, 1}}, true},
    {{4, {1, 64, 56, 56}}, {3, {64, 1, 1}}, true}, /* big enough to split over threads */
    {{2, {3, 17}}, {1, {17}}, true},         /* trailing vector */
    {{2, {128, 1000}}, {1, {1000}}, true},
    {{3, {2, 3, 33}}, {1, {33}}, true},
    {{1, {7}}, {2, {3, 7}}, true},           /* a the vector */
    {{4, {2, 4, 5, 6}}, {4, {2, 1, 5, 6}}, true},
    {{2, {7, 1}}, {2, {1, 9}}, true},        /* outer product */
    {{4, {2, 3, 4, 5}}, {3, {3, 1, 5}}, false}, /* four alternating dims */
    {{4, {2, 3, 4, 5}}, {4, {2, 1, 4, 1}}, false},
};

typedef struct binary_case {
    const char *label;
    af_op op;
    bool unidirectional; /* PRelu: the slope broadcasts to X */
} binary_case;

static const binary_case binary_cases[] = {
    {"add", AF_OP_ADD, false}, {"sub", AF_OP_SUB, false}, {"mul", AF_OP_MUL, false}, {"div", AF_OP_DIV, false},
    {"max", AF_OP_MAX, false}, {"min", AF_OP_MIN, false}, {"prelu", AF_OP_PRELU, true},
};

/* True when every dim of s broadcasts to (equals, right-aligned) those of x. */
static bool fits_into(const shape *s, const shape *x) {
    if (s->rank > x->rank) return false;
    for (int d = 0; d < s->rank; d++)
        if (s->dims[d] != 1 && s->dims[d] != x->dims[x->rank - s->rank + d]) return false;
    return true;
}

static void binary_node(fx *f, const binary_case *bc, const bcast_case *sc, uint64_t seed, bool b_const) {
    fx_init(f, bc->op, 17);
    fx_input(f, with_specials(sc->a.rank, sc->a.dims, -3, 3, seed), false);
    fx_input(f, with_specials(sc->b.rank, sc->b.dims, -3, 3, seed + 1), b_const);
}

AF_TEST(fast_elementwise_binary) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    af_isa isas[AF_ISA_COUNT];
    int n_isa = fx_isas(isas);
    for (size_t o = 0; o < sizeof binary_cases / sizeof binary_cases[0]; o++) {
        const binary_case *bc = &binary_cases[o];
        for (size_t p = 0; p < sizeof bcast_cases / sizeof bcast_cases[0]; p++) {
            const bcast_case *sc = &bcast_cases[p];
            if (bc->unidirectional && !fits_into(&sc->b, &sc->a)) continue;
            for (int dynamic = 0; dynamic < 2; dynamic++) {
                fx f;
                binary_node(&f, bc, sc, o * 1000 + p * 10, p % 2 == 0);
                f.dynamic = dynamic;
                for (int i = 0; i < n_isa; i++) {
                    const char *name = "";
                    int64_t bad = fx_compare(&f, isas[i], &pools, FX_EXACT, &name);
                    /* Unknown shapes at prepare: the kernel exists and hands uncovered broadcasts
                     * to the reference at run time, with the reference's exact result. */
                    bool want_kernel = sc->covered || dynamic;
                    if ((bad != 0 && !(bad == -1 && !want_kernel)) || (bad == -1 && want_kernel))
                        printf("  %s case %zu dynamic=%d isa=%s: %lld off (kernel %s)\n", bc->label, p, dynamic,
                               af_isa_name(isas[i]), (long long)bad, name);
                    CHECK(want_kernel ? bad == 0 : bad == -1);
                    if (bad == 0) CHECK(fx_named_for(name, isas[i]));
                }
                fx_free(&f);
            }
        }
    }
    fx_pools_free(&pools);
}

/* ---- variadic -------------------------------------------------------------------------------- */

/* Input shapes of a variadic node (up to 5 inputs; rank 0 with count 0 ends the list). */
typedef struct variadic_case {
    int n;
    shape in[5];
    bool covered;
} variadic_case;

static const variadic_case variadic_cases[] = {
    {1, {{1, {17}}}, true},
    {2, {{1, {33}}, {1, {33}}}, true},
    {3, {{1, {1}}, {1, {1}}, {1, {1}}}, true},
    {3, {{1, {31}}, {1, {31}}, {1, {31}}}, true},
    {3, {{4, {1, 64, 56, 56}}, {4, {1, 64, 56, 56}}, {4, {1, 64, 56, 56}}}, true}, /* split over threads */
    {5, {{1, {1000}}, {1, {1000}}, {0, {0}}, {1, {1000}}, {1, {1}}}, true},      /* scalars among them */
    {3, {{4, {2, 5, 7, 7}}, {3, {5, 1, 1}}, {1, {7}}}, true},                    /* per channel, per row */
    {3, {{3, {5, 1, 1}}, {4, {2, 5, 7, 7}}, {4, {2, 5, 7, 7}}}, true},           /* the first one broadcast */
    {4, {{2, {3, 1}}, {2, {1, 4}}, {2, {3, 4}}, {1, {4}}}, true},                /* outer product first */
    {3, {{4, {2, 3, 4, 5}}, {4, {2, 3, 4, 5}}, {3, {3, 1, 5}}}, false},          /* four alternating dims */
};

/* Sum, Mean, Max and Min of 1 to 5 inputs against the reference's left-to-right fold, exactly:
 * the same float operations in the same order. */
AF_TEST(fast_elementwise_variadic) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    af_isa isas[AF_ISA_COUNT];
    const int n_isa = fx_isas(isas);
    static const af_op ops[] = {AF_OP_SUM, AF_OP_MEAN, AF_OP_MAX, AF_OP_MIN};
    for (size_t o = 0; o < sizeof ops / sizeof *ops; o++)
        for (size_t c = 0; c < sizeof variadic_cases / sizeof *variadic_cases; c++) {
            const variadic_case *vc = &variadic_cases[c];
            for (int dynamic = 0; dynamic < 2; dynamic++) {
                fx f;
                fx_init(&f, ops[o], 13);
                for (int i = 0; i < vc->n; i++)
                    fx_input(&f, with_specials(vc->in[i].rank, vc->in[i].dims, -3, 3, o * 100 + c * 10 + (size_t)i),
                             false);
                f.dynamic = dynamic;
                const bool want_kernel = vc->covered || dynamic;
                for (int i = 0; i < n_isa; i++) {
                    const char *name = "";
                    const int64_t bad = fx_compare(&f, isas[i], &pools, FX_EXACT, &name);
                    if (want_kernel ? bad != 0 : bad != -1)
                        printf("  %s case %zu dynamic=%d isa=%s: %lld off (kernel %s)\n", af_op_info(ops[o])->name, c,
                               dynamic, af_isa_name(isas[i]), (long long)bad, name);
                    CHECK(want_kernel ? bad == 0 : bad == -1);
                    if (bad == 0) CHECK(fx_named_for(name, isas[i]));
                }
                fx_free(&f);
            }
        }
    fx_pools_free(&pools);
}

/* ---- Cast ------------------------------------------------------------------------------------ */

/* float32 -> int64 bit for bit: toward zero, NaN to 0, saturated past the range; the edges of the
 * range, halves, denormals and huge values among random ones, at every vector tail. */
AF_TEST(fast_elementwise_cast_to_int64) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    static const float edges[] = {0x1p63f,    -0x1p63f,   0x1.fffffep62f, -0x1.fffffep62f, 0x1p64f, -0x1p64f,
                                  0x1p31f,    -0x1p31f,   0x1p24f + 2,    -0x1p23f - 1,    0.5f,    -0.5f,
                                  1.5f,       -1.5f,      0.99999994f,    -0.99999994f,    1e-45f,  -1e-45f,
                                  FLT_MAX,    -FLT_MAX,   123456.789f,    -2.5f,           0.0f,    -0.0f};
    for (int s = 0; s < N_SIZES; s++)
        for (int like = 0; like < 2; like++) {
            fx f;
            fx_init(&f, like ? AF_OP_CAST_LIKE : AF_OP_CAST, 19);
            af_tensor x = with_specials(1, &sizes[s], -1e4f, 1e4f, (uint64_t)s);
            add_values(&x, IN_WIDE);
            float *p = x.data;
            for (int64_t i = 0; i < sizes[s]; i += 5) p[i] = edges[(i / 5) % (int64_t)(sizeof edges / sizeof *edges)];
            fx_input(&f, x, false);
            if (like) {
                af_tensor t = {.dtype = AF_DTYPE_INT64, .rank = 1, .dims = {1}};
                CHECK(af_tensor_alloc(&t, NULL) == AF_OK);
                fx_input(&f, t, false);
            } else {
                fx_int(&f, "to", AF_DTYPE_INT64);
            }
            af_isa isas[AF_ISA_COUNT];
            const int n_isa = fx_isas(isas);
            for (int i = 0; i < n_isa; i++) {
                const char *name = "";
                const int64_t bad = fx_compare(&f, isas[i], &pools, FX_EXACT, &name);
                if (bad != 0)
                    printf("  n=%lld like=%d isa=%s: %lld off\n", (long long)sizes[s], like, af_isa_name(isas[i]),
                           (long long)bad);
                CHECK(bad == 0);
                CHECK(fx_named_for(name, isas[i]));
            }
            fx_free(&f);
        }
    fx_pools_free(&pools);
}

/* ---- what stays with the reference ----------------------------------------------------------- */

static bool covered(fx *f) {
    af_kernel k;
    bool ok = fx_prepare(f, af_cpu_isa(), &k);
    if (ok) af_kernel_release(&k);
    return ok;
}

AF_TEST(fast_elementwise_not_covered) {
    const int64_t n = 64;
    fx f;
    /* Pow with an exponent other than 2 or 0.5, or one known only at run time. */
    fx_init(&f, AF_OP_POW, 15);
    fx_input(&f, fx_rand(1, &n, -2, 2, 1), false);
    fx_input(&f, fx_scalar(AF_DTYPE_FLOAT, 3.0), true);
    CHECK(!covered(&f));
    fx_free(&f);
    fx_init(&f, AF_OP_POW, 15);
    fx_input(&f, fx_rand(1, &n, -2, 2, 1), false);
    fx_input(&f, fx_scalar(AF_DTYPE_FLOAT, 2.0), false);
    CHECK(!covered(&f));
    fx_free(&f);
    /* Clip with a bound that is not a constant. */
    fx_init(&f, AF_OP_CLIP, 13);
    fx_input(&f, fx_rand(1, &n, -2, 2, 1), false);
    fx_input(&f, fx_scalar(AF_DTYPE_FLOAT, -1.0), false);
    CHECK(!covered(&f));
    fx_free(&f);
    /* Dropout asked for its mask, or in training mode. */
    fx_init(&f, AF_OP_DROPOUT, 13);
    fx_input(&f, fx_rand(1, &n, -2, 2, 1), false);
    fx_outputs(&f, 2, 3u);
    CHECK(!covered(&f));
    fx_free(&f);
    fx_init(&f, AF_OP_DROPOUT, 13);
    fx_input(&f, fx_rand(1, &n, -2, 2, 1), false);
    fx_input(&f, fx_scalar(AF_DTYPE_FLOAT, 0.0), true);
    fx_input(&f, fx_scalar(AF_DTYPE_BOOL, 1), true);
    CHECK(!covered(&f));
    fx_free(&f);
    /* Other dtypes. */
    fx_init(&f, AF_OP_RELU, 17);
    af_tensor d = {.dtype = AF_DTYPE_DOUBLE, .rank = 1, .dims = {n}};
    CHECK(af_tensor_alloc(&d, NULL) == AF_OK);
    fx_input(&f, d, false);
    CHECK(!covered(&f));
    fx_free(&f);
    /* A variadic Sum whose third input broadcasts in a way the kernel does not walk. */
    fx_init(&f, AF_OP_SUM, 17);
    fx_input(&f, fx_rand(4, (int64_t[]){2, 3, 4, 5}, -2, 2, 1), false);
    fx_input(&f, fx_rand(4, (int64_t[]){2, 3, 4, 5}, -2, 2, 2), false);
    fx_input(&f, fx_rand(3, (int64_t[]){3, 1, 5}, -2, 2, 3), false);
    CHECK(!covered(&f));
    fx_free(&f);
    /* Cast to another type than int64. */
    fx_init(&f, AF_OP_CAST, 17);
    fx_int(&f, "to", AF_DTYPE_INT32);
    fx_input(&f, fx_rand(1, &n, -2, 2, 1), false);
    CHECK(!covered(&f));
    fx_free(&f);
    /* Ops outside the family. */
    fx_init(&f, AF_OP_SIN, 17);
    fx_input(&f, fx_rand(1, &n, -2, 2, 1), false);
    CHECK(!covered(&f));
    fx_free(&f);
}

/* A run whose tensors do not match what the kernel needs fails instead of reading out of bounds. */
AF_TEST(fast_elementwise_run_checks_shapes) {
    const int64_t n = 100, m = 50;
    fx f;
    fx_init(&f, AF_OP_ADD, 17);
    fx_input(&f, fx_rand(1, &n, -2, 2, 1), false);
    fx_input(&f, fx_rand(1, &n, -2, 2, 2), false);
    af_kernel k;
    CHECK(fx_prepare(&f, af_cpu_isa(), &k));
    af_tensor small = fx_rand(1, &m, 0, 1, 3), y = fx_rand(1, &n, 0, 1, 4);
    const af_tensor *ins[2] = {&f.in[0], &small};
    af_tensor *outs[1] = {&y};
    af_op_ctx c = {.node = &f.node, .graph = &f.g, .opset = 17, .n_inputs = 2, .inputs = ins, .n_outputs = 1,
                   .outputs = outs, .err = &f.err};
    CHECK(k.run(&k, &c, NULL, NULL, NULL) == AF_ERR_RUNTIME);
    af_kernel_release(&k);
    fx_free(&f);

    fx_init(&f, AF_OP_RELU, 17);
    fx_input(&f, fx_rand(1, &n, -2, 2, 1), false);
    CHECK(fx_prepare(&f, af_cpu_isa(), &k));
    const af_tensor *in1[1] = {&f.in[0]};
    af_tensor *out1[1] = {&small};
    c = (af_op_ctx){.node = &f.node, .graph = &f.g, .opset = 17, .n_inputs = 1, .inputs = in1, .n_outputs = 1,
                    .outputs = out1, .err = &f.err};
    CHECK(k.run(&k, &c, NULL, NULL, NULL) == AF_ERR_RUNTIME);
    af_kernel_release(&k);
    af_tensor_free_data(&small);
    af_tensor_free_data(&y);
    fx_free(&f);
}
