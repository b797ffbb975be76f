/* The fusions of SiLU as exporters write it, Mul(v, Sigmoid(v)), end to end against the unfused
 * plan (within float rounding) and the reference kernels (within the fixtures' rtol 1e-3 / atol
 * 1e-4: a 3x3 conv may run Winograd, whose rounding differs from direct sums):
 * - EfficientNet's squeeze-excite block: GlobalAveragePool -> 1x1 Conv -> SiLU -> 1x1 Conv ->
 *   Sigmoid -> Mul with the block input, one step by rule squeeze_excite_silu. Unfused, the gate's
 *   Sigmoid and Mul ran as an elementwise region that took 1.1-1.7 ms per block on
 *   EfficientNet-B0 (against 0.01-0.05 fused).
 * - EfficientNetV2's fused block: Conv -> SiLU -> Add with the block input, one step by rule
 *   conv_silu_residual (before it, an elementwise region of Sigmoid, Mul and Add after the conv). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autofusion.h"
#include "onnx_build.h"
#include "session_run.h"
#include "unit.h"

static float *random_floats(int64_t n, unsigned *seed, float scale) {
    float *p = malloc((size_t)n * sizeof *p);
    for (int64_t i = 0; p && i < n; i++) {
        *seed = *seed * 1103515245u + 12345u;
        p[i] = scale * ((float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f);
    }
    return p;
}

/* A 1x1 Conv from `in` to `out` channels with random weights and bias. */
static const char *pointwise(ob_model *b, const char *t, int64_t in, int64_t out, unsigned *seed) {
    float *w = random_floats(in * out, seed, 0.5f), *bias = random_floats(out, seed, 0.2f);
    const char *ins[3] = {t, w ? ob_const(b, 4, (int64_t[]){out, in, 1, 1}, w) : "",
                          bias ? ob_const(b, 1, &out, bias) : ""};
    free(w), free(bias);
    const char *y = ob_node(b, "Conv", 3, ins);
    ob_attr_ints(b, "kernel_shape", 2, (int64_t[]){1, 1});
    return y;
}

static af_model *build_se(int64_t c, int64_t r, int64_t h, int64_t w) {
    unsigned seed = 11;
    ob_model *b = ob_new(17);
    const char *x = ob_input(b, 4, (int64_t[]){1, c, h, w});
    const char *t = pointwise(b, ob_node1(b, "GlobalAveragePool", x), c, r, &seed);
    t = ob_node2(b, "Mul", t, ob_node1(b, "Sigmoid", t)); /* SiLU as torch exports it */
    const char *gate = ob_node1(b, "Sigmoid", pointwise(b, t, r, c, &seed));
    ob_output(b, ob_node2(b, "Mul", gate, x));
    af_error err = {0};
    af_model *m = ob_load(b, &err);
    ob_free(b);
    return m;
}

/* Runs m fused (default config), unfused (level 0) and on the reference kernels on a random
 * input of dims; the fused plan must be one step made by `rule`, and agree with the other two. */
static void check_one_step(af_model *m, const int64_t dims[4], const char *rule) {
    const int64_t n = dims[0] * dims[1] * dims[2] * dims[3];
    unsigned seed = 5;
    float *xd = random_floats(n, &seed, 2.0f);
    af_tensor x = {.dtype = AF_DTYPE_FLOAT, .rank = 4, .dims = {dims[0], dims[1], dims[2], dims[3]}, .data = xd,
                   .nbytes = (size_t)n * sizeof(float)};
    af_session_options o = af_session_options_default();
    char *report = NULL;
    int64_t n_f = 0, n_u = 0, n_r = 0;
    float *fused = af_test_session_output(m, &o, &x, &n_f, &report);
    o.fusion_level = 0;
    float *plain = af_test_session_output(m, &o, &x, &n_u, NULL);
    o.reference_kernels = 1;
    float *ref = af_test_session_output(m, &o, &x, &n_r, NULL);
    CHECK(fused && plain && ref && report && n_f == n && n_u == n && n_r == n);
    if (report) {
        char want[96];
        snprintf(want, sizeof want, "] rule %s:", rule);
        if (!strstr(report, "steps 1 ") || !strstr(report, want)) fputs(report, stderr);
        CHECK(strstr(report, "steps 1 ") != NULL);
        CHECK(strstr(report, want) != NULL);
    }
    /* Against the unfused plan (the same conv kernel): float rounding of the epilogue's order.
     * Against the reference's direct sums: the fixtures' tolerance, as the conv may run Winograd. */
    int64_t far_plain = 0, far_ref = 0;
    for (int64_t i = 0; fused && plain && ref && n_f == n && n_u == n && n_r == n && i < n; i++) {
        far_plain += !(fabs((double)fused[i] - plain[i]) <= 1e-5 + 1e-5 * fabs((double)plain[i]));
        far_ref += !(fabs((double)fused[i] - ref[i]) <= 1e-4 + 1e-3 * fabs((double)ref[i]));
    }
    CHECK_EQ_INT(far_plain, 0);
    CHECK_EQ_INT(far_ref, 0);
    free(report), free(fused), free(plain), free(ref), free(xd);
}

AF_TEST(squeeze_excite_silu_fuses_and_matches_unfused) {
    const int64_t dims[4] = {1, 96, 28, 28};
    af_model *m = build_se(dims[1], 24, dims[2], dims[3]);
    CHECK(m != NULL);
    if (m) check_one_step(m, dims, "squeeze_excite_silu");
    af_model_free(m);
}

/* Conv 3x3 (pads 1) -> SiLU -> Add with the conv's input. */
static af_model *build_conv_silu_residual(int64_t c, int64_t h, int64_t w) {
    unsigned seed = 3;
    ob_model *b = ob_new(17);
    const char *x = ob_input(b, 4, (int64_t[]){1, c, h, w});
    float *wt = random_floats(c * c * 9, &seed, 0.2f), *bias = random_floats(c, &seed, 0.2f);
    const char *ins[3] = {x, wt ? ob_const(b, 4, (int64_t[]){c, c, 3, 3}, wt) : "", bias ? ob_const(b, 1, &c, bias) : ""};
    free(wt), free(bias);
    const char *t = ob_node(b, "Conv", 3, ins);
    ob_attr_ints(b, "kernel_shape", 2, (int64_t[]){3, 3});
    ob_attr_ints(b, "pads", 4, (int64_t[]){1, 1, 1, 1});
    t = ob_node2(b, "Mul", t, ob_node1(b, "Sigmoid", t));
    ob_output(b, ob_node2(b, "Add", t, x));
    af_error err = {0};
    af_model *m = ob_load(b, &err);
    ob_free(b);
    return m;
}

AF_TEST(conv_silu_residual_fuses_and_matches_unfused) {
    const int64_t dims[4] = {1, 32, 40, 40};
    af_model *m = build_conv_silu_residual(dims[1], dims[2], dims[3]);
    CHECK(m != NULL);
    if (m) check_one_step(m, dims, "conv_silu_residual");
    af_model_free(m);
}
