/* Tests of the vector math (ULP sweeps against libm) and of the epilogue appliers of every ISA the
 * machine supports against the reference applier. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/epilogue.h"
#include "kernels/vmath.h"
#include "unit.h"
#include "util/alloc.h"
#include "util/cpu.h"

/* Distance in ULPs of `got` from `want`; results below FLT_MIN count in units of FLT_MIN (the
 * precision vmath_x86.h promises there). NaN must match NaN, infinities exactly. */
static double ulp_distance(float got, float want) {
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got) ? 0 : INFINITY;
    if (isinf(want) || isinf(got)) return got == want ? 0 : INFINITY;
    float aw = fabsf(want);
    double unit = aw < FLT_MIN ? (double)FLT_MIN : (double)(nextafterf(aw, INFINITY) - aw);
    return fabs((double)got - (double)want) / unit;
}

static float ref_fn(af_vmath_fn fn, float x) {
    switch (fn) {
    case AF_VMATH_EXP: return expf(x);
    case AF_VMATH_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case AF_VMATH_TANH: return tanhf(x);
    case AF_VMATH_LOG: return logf(x);
    case AF_VMATH_SOFTPLUS: return (float)(x > 0 ? x + log1p(exp(-(double)x)) : log1p(exp((double)x)));
    case AF_VMATH_EXPM1_NEG: return x > 0 ? 0.0f : expm1f(x);
    default: return erff(x);
    }
}

/* The sweep: every multiple of 1/64 in [-20, 20], every 1/16 over exp's whole range, log-spaced
 * magnitudes from 1e-40 to 1e30 of both signs, and the special values. */
static int64_t make_sweep(float *x, int64_t cap) {
    int64_t n = 0;
    for (int i = -20 * 64; i <= 20 * 64 && n < cap; i++) x[n++] = (float)i / 64.0f;
    for (int i = -104 * 16; i <= 89 * 16 && n < cap; i++) x[n++] = (float)i / 16.0f;
    for (float m = 1e-40f; m < 1e30f && n + 2 <= cap; m *= 1.07f) {
        x[n++] = m;
        x[n++] = -m;
    }
    const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX,
                              FLT_TRUE_MIN, 88.72f, 88.73f, -87.33f, -103.97f, -104.0f, 0.625f, -0.625f,
                              0.62499994f, 1.0f, -1.0f, 1.0000001f, 3.92f, -3.92f, 3.9199998f};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0] && n < cap; i++) x[n++] = specials[i];
    return n;
}

AF_TEST(vmath_ulp_sweep) {
    /* The bounds vmath_x86.h states, against libm float. */
    const double max_ulp[AF_VMATH_COUNT] = {[AF_VMATH_EXP] = 1,      [AF_VMATH_SIGMOID] = 3,  [AF_VMATH_TANH] = 2,
                                            [AF_VMATH_ERF] = 2,      [AF_VMATH_LOG] = 1,      [AF_VMATH_SOFTPLUS] = 2,
                                            [AF_VMATH_EXPM1_NEG] = 2};
    enum { CAP = 16384 };
    float *x = af_malloc(CAP * sizeof *x), *y = af_malloc(CAP * sizeof *y);
    CHECK(x && y);
    if (!x || !y) goto done;
    const int64_t n = make_sweep(x, CAP);
    for (int isa = AF_ISA_AVX2; isa <= (int)af_cpu_info_get()->isa_max; isa++) {
        for (int fn = 0; fn < AF_VMATH_COUNT; fn++) {
            af_vmath_f32((af_isa)isa, (af_vmath_fn)fn, n, x, y);
            double worst = 0;
            float worst_x = 0;
            for (int64_t i = 0; i < n; i++) {
                double e = ulp_distance(y[i], ref_fn((af_vmath_fn)fn, x[i]));
                if (e > worst) worst = e, worst_x = x[i];
            }
            if (worst > max_ulp[fn])
                af_test_fail(__FILE__, __LINE__, "%s fn %d: %.1f ULP at x = %.9g (bound %.0f)", af_isa_name(isa), fn,
                             worst, worst_x, max_ulp[fn]);
        }
        /* Signs of zero and NaN propagation. */
        const float z[2] = {0.0f, -0.0f};
        float o[2];
        af_vmath_f32((af_isa)isa, AF_VMATH_TANH, 2, z, o);
        CHECK(o[0] == 0 && !signbit(o[0]) && o[1] == 0 && signbit(o[1]));
        af_vmath_f32((af_isa)isa, AF_VMATH_ERF, 2, z, o);
        CHECK(o[0] == 0 && !signbit(o[0]) && o[1] == 0 && signbit(o[1]));
    }
done:
    af_free(x);
    af_free(y);
}

AF_TEST(vmath_unaligned_tails) {
    /* Every length 0..40 from an odd offset: the tails must not touch memory past n. */
    float x[48], y[48];
    for (int i = 0; i < 48; i++) x[i] = (float)i * 0.25f - 5.0f;
    for (int isa = 0; isa <= (int)af_cpu_info_get()->isa_max; isa++)
        for (int n = 0; n <= 40; n++) {
            for (int i = 0; i < 48; i++) y[i] = 1234.0f;
            af_vmath_f32((af_isa)isa, AF_VMATH_SIGMOID, n, x + 1, y + 1);
            CHECK(y[0] == 1234.0f && y[n + 1] == 1234.0f);
            for (int i = 0; i < n; i++) CHECK_NEAR(y[i + 1], 1.0 / (1.0 + exp(-(double)x[i + 1])), 1e-6, 1e-6);
        }
}

/* A tile with NaN/inf/zero mixed into values spread over the activations' interesting range. */
static void fill_tile(float *c, int rows, int cols, int64_t ld, unsigned seed) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < ld; j++) {
            seed = seed * 1664525u + 1013904223u;
            float v = ((float)(seed >> 8) / 16777216.0f - 0.5f) * 16.0f;
            if ((seed & 1023) == 7) v = NAN;
            if ((seed & 1023) == 8) v = INFINITY;
            if ((seed & 1023) == 9) v = -INFINITY;
            if ((seed & 1023) == 10) v = -0.0f;
            c[i * ld + j] = j < cols ? v : 777.0f; /* past the tile: must stay untouched */
        }
}

/* Tolerance against the reference applier: within op_ulp_bound ULP of the reference, or within
 * 2^-19 * (1 + |x|) absolutely (the reference rounds x*p and +q separately where the vector code
 * fuses them, which can be many ULP of a result that nearly cancels; SiLU and GELU multiply an
 * approximation error by x). NaN and infinities must match exactly. */
static double op_ulp_bound(af_epi_op op) {
    switch (op) {
    case AF_EPI_SIGMOID: return 3;
    case AF_EPI_TANH: return 2;
    case AF_EPI_SILU:
    case AF_EPI_GELU_ERF:
    case AF_EPI_GELU_TANH: return 4;
    default: return 1;
    }
}

static int within_tolerance(af_epi_op op, float x, float got, float want) {
    if (ulp_distance(got, want) <= op_ulp_bound(op)) return 1;
    return isfinite(want) && isfinite(got) &&
           fabs((double)got - (double)want) <= ldexp(1.0, -19) * (1.0 + fabs((double)x));
}

AF_TEST(epilogue_ops_match_reference) {
    enum { ROWS = 5, COLS = 37, LD = 41 };
    static float ref[ROWS * LD], got[ROWS * LD], x0[ROWS * LD];
    /* Vectors cover the tile's global coordinates (m0, n0) = (2, 9) plus its size. */
    float rowv[2][16], colv[2][64], rowq[2][16], colq[2][64], resid[2][(ROWS + 2) * 48];
    for (int b = 0; b < 2; b++) {
        for (int i = 0; i < 16; i++) rowv[b][i] = 0.5f + 0.1f * (float)i - (float)b, rowq[b][i] = -0.3f * (float)i;
        for (int i = 0; i < 64; i++) colv[b][i] = 1.5f - 0.05f * (float)i + (float)b, colq[b][i] = 0.01f * (float)i;
        for (int i = 0; i < (ROWS + 2) * 48; i++) resid[b][i] = (float)((i * 7 + b * 3) % 13) - 6.0f;
    }
    for (int isa = AF_ISA_AVX2; isa <= (int)af_cpu_info_get()->isa_max; isa++) {
        af_epilogue_tile_fn apply = af_epilogue_tile_fn_for((af_isa)isa);
        for (int op = 0; op < AF_EPI_OP_COUNT; op++) {
            af_epilogue e;
            af_epilogue_init(&e);
            af_epi_step s = {.op = (af_epi_op)op, .a = 0.25f, .b = 0.6f, .batch_stride = 0};
            switch (op) {
            case AF_EPI_BIAS_ROW: s.p = rowv[0], s.batch_stride = 16; break;
            case AF_EPI_SCALE_SHIFT_ROW: s.p = rowv[0], s.q = rowq[0], s.batch_stride = 16; break;
            case AF_EPI_BIAS_COL: s.p = colv[0], s.batch_stride = 64; break;
            case AF_EPI_SCALE_SHIFT_COL: s.p = colv[0], s.q = colq[0], s.batch_stride = 64; break;
            case AF_EPI_ADD: s.p = resid[0], s.ld = 48, s.batch_stride = (ROWS + 2) * 48; break;
            case AF_EPI_CLIP: s.a = -1.5f, s.b = 2.0f; break;
            case AF_EPI_HARD_SIGMOID: s.a = 0.2f, s.b = 0.5f; break;
            default: break;
            }
            CHECK(af_epilogue_push(&e, &s) == AF_OK);
            for (int shape = 0; shape < 3; shape++) {
                const int rows = shape == 0 ? ROWS : shape == 1 ? 1 : 3;
                const int cols = shape == 0 ? COLS : shape == 1 ? 7 : 16;
                /* The tile is element (m0, n0) = (2, 9) of batch item 1 of the output. */
                fill_tile(x0, rows, cols, LD, 17u + (unsigned)op * 31u + (unsigned)shape);
                memcpy(ref, x0, sizeof ref);
                memcpy(got, x0, sizeof got);
                af_epilogue_apply_ref(&e, ref, LD, rows, cols, 2, 9, 1);
                apply(&e, got, LD, rows, cols, 2, 9, 1);
                for (int i = 0; i < rows; i++)
                    for (int j = 0; j < LD; j++) {
                        const float g = got[i * LD + j], r = ref[i * LD + j], x = x0[i * LD + j];
                        if (j >= cols) {
                            if (g != 777.0f)
                                af_test_fail(__FILE__, __LINE__, "%s: wrote past the tile", af_epi_op_name(op));
                            continue;
                        }
                        if (!within_tolerance((af_epi_op)op, x, g, r))
                            af_test_fail(__FILE__, __LINE__, "%s %s: x = %.9g got %.9g want %.9g (%.1f ULP)",
                                         af_isa_name(isa), af_epi_op_name(op), x, g, r, ulp_distance(g, r));
                    }
            }
        }
    }
}

/* The vector GELU (erf form) against x/2 erfc(-x / sqrt 2) in double, every multiple of 2^-10 in
 * [-12, 12] plus the special values, on 14 x 32 tiles: the bounds vmath_x86.h states. The
 * reference applier's libm formula is no yardstick on the negative side, where 1 + erff cancels
 * (millions of ULP at x = -5). */
AF_TEST(epilogue_gelu_erf_accuracy) {
    enum { ROWS = 14, COLS = 32, N = 24 * 1024 + 1 };
    static float x[N + 6], tile[ROWS * COLS];
    int64_t n = 0;
    for (int i = -12 * 1024; i <= 12 * 1024; i++) x[n++] = (float)i / 1024.0f;
    const float specials[] = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, -5.5437f};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) x[n++] = specials[i];
    af_epilogue e;
    af_epilogue_init(&e);
    CHECK(af_epilogue_unary(&e, AF_EPI_GELU_ERF, 0, 0) == AF_OK);
    for (int isa = AF_ISA_AVX2; isa <= (int)af_cpu_info_get()->isa_max; isa++) {
        af_epilogue_tile_fn apply = af_epilogue_tile_fn_for((af_isa)isa);
        double worst_abs = 0, worst_rel[2] = {0, 0}; /* relative: x >= 0, -5.5 < x < 0 */
        float worst_abs_x = 0, worst_rel_x[2] = {0, 0};
        for (int64_t b = 0; b < n; b += ROWS * COLS) {
            const int64_t cnt = n - b < ROWS * COLS ? n - b : ROWS * COLS;
            memcpy(tile, x + b, (size_t)cnt * sizeof(float));
            apply(&e, tile, COLS, ROWS, COLS, 0, 0, 0);
            for (int64_t i = 0; i < cnt; i++) {
                const float xi = x[b + i], got = tile[i];
                const double want = 0.5 * (double)xi * erfc(-(double)xi / sqrt(2.0));
                if (!isfinite(xi)) {
                    /* +inf -> +inf; -inf and NaN -> NaN, as the formula gives. */
                    if (xi > 0 ? got != INFINITY : !isnan(got))
                        af_test_fail(__FILE__, __LINE__, "%s: gelu(%g) = %g", af_isa_name(isa), xi, got);
                    continue;
                }
                if (xi == 0 && (got != 0 || signbit(got) != signbit(xi)))
                    af_test_fail(__FILE__, __LINE__, "%s: gelu(%g) = %g", af_isa_name(isa), xi, got);
                const double err = fabs((double)got - want), abs_unit = err / (1.0 + fabs((double)xi));
                if (abs_unit > worst_abs) worst_abs = abs_unit, worst_abs_x = xi;
                const int side = xi < 0;
                if (xi > -5.5f && want != 0 && err / fabs(want) > worst_rel[side])
                    worst_rel[side] = err / fabs(want), worst_rel_x[side] = xi;
            }
        }
        if (worst_abs > ldexp(1.0, -23))
            af_test_fail(__FILE__, __LINE__, "%s: gelu error %.3g (1 + |x|) at x = %.9g", af_isa_name(isa), worst_abs,
                         worst_abs_x);
        for (int side = 0; side < 2; side++)
            if (worst_rel[side] > ldexp(1.0, side ? -18 : -22))
                af_test_fail(__FILE__, __LINE__, "%s: gelu relative error %.3g at x = %.9g", af_isa_name(isa),
                             worst_rel[side], worst_rel_x[side]);
    }
}

AF_TEST(epilogue_chain_matches_reference) {
    /* Folded BN + residual + HardSwish, then a scalar: the steps run in order. */
    enum { R = 3, C = 20 };
    float scale[R] = {0.5f, -1.0f, 2.0f}, shift[R] = {0.1f, 0.2f, -0.3f}, res[R * C], ref[R * C], got[R * C];
    for (int i = 0; i < R * C; i++) res[i] = (float)(i % 5) - 2.0f;
    af_epilogue e;
    af_epilogue_init(&e);
    CHECK(af_epilogue_vec(&e, AF_EPI_SCALE_SHIFT_ROW, scale, shift) == AF_OK);
    CHECK(af_epilogue_residual(&e, res, C) == AF_OK);
    CHECK(af_epilogue_unary(&e, AF_EPI_HARD_SWISH, 0, 0) == AF_OK);
    CHECK(af_epilogue_unary(&e, AF_EPI_ADD_SCALAR, 1.0f, 0) == AF_OK);
    for (int isa = 0; isa <= (int)af_cpu_info_get()->isa_max; isa++) {
        for (int i = 0; i < R * C; i++) ref[i] = got[i] = (float)i * 0.37f - 9.0f;
        af_epilogue_apply_ref(&e, ref, C, R, C, 0, 0, 0);
        af_epilogue_tile_fn_for((af_isa)isa)(&e, got, C, R, C, 0, 0, 0);
        for (int i = 0; i < R * C; i++) CHECK_NEAR(got[i], ref[i], 1e-6, 1e-6);
    }
    /* x = 1 through the chain by hand for row 0: (1*0.5+0.1) + res[0] = -1.4; hardswish(-1.4) =
     * -1.4 * (0.5 - 1.4/6); + 1. */
    float one[R * C];
    for (int i = 0; i < R * C; i++) one[i] = 1.0f;
    af_epilogue_apply_ref(&e, one, C, R, C, 0, 0, 0);
    CHECK_NEAR(one[0], -1.4 * (0.5 - 1.4 / 6.0) + 1.0, 1e-6, 1e-6);
}

AF_TEST(epilogue_builder_errors) {
    af_epilogue e;
    af_epilogue_init(&e);
    CHECK(af_epilogue_vec(&e, AF_EPI_BIAS_ROW, NULL, NULL) == AF_ERR_INVALID_ARGUMENT);
    CHECK(af_epilogue_vec(&e, AF_EPI_RELU, NULL, NULL) == AF_ERR_INVALID_ARGUMENT);
    float v[1] = {0};
    CHECK(af_epilogue_vec(&e, AF_EPI_SCALE_SHIFT_COL, v, NULL) == AF_ERR_INVALID_ARGUMENT);
    CHECK(af_epilogue_residual(&e, NULL, 4) == AF_ERR_INVALID_ARGUMENT);
    CHECK(af_epilogue_unary(&e, AF_EPI_BIAS_COL, 0, 0) == AF_ERR_INVALID_ARGUMENT);
    CHECK(af_epilogue_unary(&e, AF_EPI_OP_COUNT, 0, 0) == AF_ERR_INVALID_ARGUMENT);
    CHECK_EQ_INT(e.n_steps, 0);
    for (int i = 0; i < AF_EPI_MAX_STEPS; i++) CHECK(af_epilogue_unary(&e, AF_EPI_RELU, 0, 0) == AF_OK);
    CHECK(af_epilogue_unary(&e, AF_EPI_RELU, 0, 0) == AF_ERR_LIMIT);
    CHECK_EQ_INT(e.n_steps, AF_EPI_MAX_STEPS);
    CHECK(strcmp(af_epi_op_name(AF_EPI_GELU_TANH), "gelu_tanh") == 0);
    CHECK(strcmp(af_epi_op_name(AF_EPI_OP_COUNT), "unknown") == 0);
    /* A NULL program and an empty one change nothing. */
    float t[3] = {1, -2, 3};
    for (int isa = 0; isa <= (int)af_cpu_info_get()->isa_max; isa++) {
        af_epilogue_tile_fn_for((af_isa)isa)(NULL, t, 3, 1, 3, 0, 0, 0);
        af_epilogue empty;
        af_epilogue_init(&empty);
        af_epilogue_tile_fn_for((af_isa)isa)(&empty, t, 3, 1, 3, 0, 0, 0);
        CHECK(t[0] == 1 && t[1] == -2 && t[2] == 3);
    }
}

AF_TEST(cpu_isa_names_and_clamp) {
    const af_cpu_info *ci = af_cpu_info_get();
    CHECK(ci->isa <= ci->isa_max);
    CHECK(ci->l1d >= 4096 && ci->l2 >= ci->l1d && ci->l3 > 0);
    for (int i = 0; i < AF_ISA_COUNT; i++) CHECK_EQ_INT(af_isa_parse(af_isa_name((af_isa)i)), i);
    CHECK_EQ_INT(af_isa_parse("sse9"), -1);
    CHECK_EQ_INT(af_isa_parse(NULL), -1);
    CHECK(strcmp(af_isa_name(AF_ISA_COUNT), "unknown") == 0);
    CHECK(af_cpu_isa_clamp(AF_ISA_AVX512) == ci->isa_max);
    CHECK(af_cpu_isa_clamp(AF_ISA_SCALAR) == AF_ISA_SCALAR);
    CHECK(af_cpu_isa_clamp((af_isa)-3) == AF_ISA_SCALAR);
}
