/* The pointwise_depthwise fusion (rules/cv.rules, pwdw_step.c, kernels/fast/pointwise_depthwise.c)
 * end to end: a 1x1 Conv (+BatchNormalization) (+activation) -> depthwise Conv (+BN) (+activation)
 * model, fused at the default level, must give the unfused session's outputs bit for bit (the fused kernel sums every element
 * in the unfused kernels' order) and the reference kernels' within the fixtures' tolerance, over
 * strides, kernel sizes, odd plane sizes, batches and thread counts (which change the bands). */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autofusion.h"
#include "kernels/fast/pointwise_depthwise.h"
#include "onnx_build.h"
#include "session_run.h"
#include "unit.h"

typedef struct pd_case {
    int64_t n, cin, c, h, w, k, s, pad;
    const char *act1, *act2; /* NULL: none */
    int threads;
    bool bn; /* a BatchNormalization after each conv, as exports that keep them write it */
    bool symbolic_batch; /* the model's batch dim symbolic (a dynamic-batch export); n per run */
    bool symbolic_plane; /* its H and W symbolic too (dynamic spatial axes); the plane per run */
    int64_t k1, s1, pad1; /* a dense first conv (a stem): kernel, stride, pads; k1 = 0: the 1x1 conv */
} pd_case;

static float *random_floats(int64_t n, unsigned *seed, float scale) {
    float *p = malloc((size_t)n * sizeof *p);
    for (int64_t i = 0; p && i < n; i++) {
        *seed = *seed * 1103515245u + 12345u;
        p[i] = scale * ((float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f);
    }
    return p;
}

/* The activation `op` on t: "Relu6" is Clip(t, 0, 6) with its bounds as inputs (opset 11+),
 * "Silu" Mul(t, Sigmoid(t)) as torch exports SiLU. */
static const char *activation(ob_model *b, const char *op, const char *t) {
    if (!strcmp(op, "Silu")) {
        const char *ins[2] = {t, ob_node1(b, "Sigmoid", t)};
        return ob_node(b, "Mul", 2, ins);
    }
    if (strcmp(op, "Relu6")) return ob_node1(b, op, t);
    const char *ins[3] = {t, ob_scalar(b, 0.0f), ob_scalar(b, 6.0f)};
    return ob_node(b, "Clip", 3, ins);
}

/* BatchNormalization of `ch` channels on t, with random statistics. */
static const char *batchnorm(ob_model *b, const char *t, int64_t ch, unsigned *seed) {
    float *p[4];
    const char *ins[5] = {t};
    for (int k = 0; k < 4; k++) {
        p[k] = random_floats(ch, seed, 0.4f);
        for (int64_t i = 0; p[k] && i < ch; i++) p[k][i] += k == 0 || k == 3 ? 1.0f : 0.0f; /* scale, var ~ 1 */
        ins[k + 1] = p[k] ? ob_const(b, 1, &ch, p[k]) : "";
    }
    const char *out = ob_node(b, "BatchNormalization", 5, ins);
    for (int k = 0; k < 4; k++) free(p[k]);
    return out;
}

static af_model *build(const pd_case *pc, unsigned seed) {
    ob_model *b = ob_new(17);
    const char *x = ob_input(b, 4, (int64_t[]){pc->symbolic_batch ? -1 : pc->n, pc->cin, pc->symbolic_plane ? -1 : pc->h,
                                                pc->symbolic_plane ? -1 : pc->w});
    const int64_t k1 = pc->k1 ? pc->k1 : 1;
    float *w1 = random_floats(pc->c * pc->cin * k1 * k1, &seed, 0.5f), *b1 = random_floats(pc->c, &seed, 0.2f);
    float *w2 = random_floats(pc->c * pc->k * pc->k, &seed, 0.5f), *b2 = random_floats(pc->c, &seed, 0.2f);
    af_model *m = NULL;
    if (w1 && b1 && w2 && b2) {
        const char *in1[3] = {x, ob_const(b, 4, (int64_t[]){pc->c, pc->cin, k1, k1}, w1), ob_const(b, 1, &pc->c, b1)};
        const char *t = ob_node(b, "Conv", 3, in1);
        ob_attr_ints(b, "kernel_shape", 2, (int64_t[]){k1, k1});
        if (pc->k1) {
            ob_attr_ints(b, "strides", 2, (int64_t[]){pc->s1, pc->s1});
            ob_attr_ints(b, "pads", 4, (int64_t[]){pc->pad1, pc->pad1, pc->pad1, pc->pad1});
        }
        if (pc->bn) t = batchnorm(b, t, pc->c, &seed);
        if (pc->act1) t = activation(b, pc->act1, t);
        const char *in2[3] = {t, ob_const(b, 4, (int64_t[]){pc->c, 1, pc->k, pc->k}, w2), ob_const(b, 1, &pc->c, b2)};
        t = ob_node(b, "Conv", 3, in2);
        ob_attr_i(b, "group", pc->c);
        ob_attr_ints(b, "kernel_shape", 2, (int64_t[]){pc->k, pc->k});
        ob_attr_ints(b, "strides", 2, (int64_t[]){pc->s, pc->s});
        ob_attr_ints(b, "pads", 4, (int64_t[]){pc->pad, pc->pad, pc->pad, pc->pad});
        if (pc->bn) t = batchnorm(b, t, pc->c, &seed);
        if (pc->act2) t = activation(b, pc->act2, t);
        ob_output(b, t);
        af_error err = {0};
        m = ob_load(b, &err);
    }
    free(w1), free(b1), free(w2), free(b2);
    ob_free(b);
    return m;
}

/* A config file that turns this family off: the plan then folds each BatchNormalization into
 * its conv by the conv_bn_relu groups' arithmetic, which the fused step must reproduce. */
static bool write_never_config(char *path, size_t size) {
    const char *t = getenv("TMPDIR");
    snprintf(path, size, "%s/af_pwdw_XXXXXX", t && *t ? t : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) return false;
    FILE *f = fdopen(fd, "w");
    if (!f) return false;
    fputs("{\"fusion_policy\": {\"pointwise_depthwise\": \"never\"}}\n", f);
    return fclose(f) == 0;
}

/* Runs the case fused, unfused and on the reference kernels; fused is expected where the ISA
 * allows it. Unfused is level 0, or with BatchNormalizations or SiLU the plan without this family
 * (level 0 runs them as nodes of their own, which rounds differently). */
static void check_case(const pd_case *pc, bool fusable) {
    af_model *m = build(pc, 7u + (unsigned)pc->h);
    CHECK(m != NULL);
    if (!m) return;
    unsigned seed = 99;
    const int64_t nx = pc->n * pc->cin * pc->h * pc->w;
    float *xd = random_floats(nx, &seed, 1.0f);
    af_tensor x = {.dtype = AF_DTYPE_FLOAT, .rank = 4, .dims = {pc->n, pc->cin, pc->h, pc->w}, .data = xd,
                   .nbytes = (size_t)nx * sizeof(float)};
    af_session_options o = af_session_options_default();
    o.n_threads = pc->threads;
    int64_t n_f = 0, n_u = 0, n_r = 0;
    char *report = NULL;
    float *fused = af_test_session_output(m, &o, &x, &n_f, &report);
    char cfg[300];
    float *plain = NULL;
    /* SiLU unfused at level 0 is a Sigmoid and a Mul, which round otherwise than the fused
     * activation: its plain plan is this family's "never" too. */
    const bool silu = (pc->act1 && !strcmp(pc->act1, "Silu")) || (pc->act2 && !strcmp(pc->act2, "Silu"));
    if (pc->bn || silu) {
        CHECK(write_never_config(cfg, sizeof cfg));
        o.config_path = cfg;
        plain = af_test_session_output(m, &o, &x, &n_u, NULL);
        remove(cfg);
        o.config_path = NULL;
    } else {
        o.fusion_level = 0;
        plain = af_test_session_output(m, &o, &x, &n_u, NULL);
    }
    o.fusion_level = 0;
    o.reference_kernels = 1;
    float *ref = af_test_session_output(m, &o, &x, &n_r, NULL);
    CHECK(fused && plain && ref && n_f == n_u && n_f == n_r && n_f > 0);
    const bool avx512 = report && strstr(report, "isa avx512");
    if (report && fusable && avx512) {
        /* One step: the two convolutions and their activations. */
        if (!strstr(report, "steps 1 ")) fputs(report, stderr);
        CHECK(strstr(report, "steps 1 ") != NULL);
        CHECK(strstr(report, "[pointwise_depthwise] rule pointwise_depthwise") != NULL);
    } else if (report && fusable) {
        CHECK(strstr(report, "needs AVX-512") != NULL);
    } else if (report) {
        CHECK(strstr(report, "the expanded tensor") != NULL || strstr(report, "the plane's size is unknown") != NULL);
        /* Declined, the group's place goes to the two conv + activation groups (the larger gain),
         * not to activations on their own (SiLU's Sigmoid + Mul as a region). */
        if (pc->act1 && pc->act2 && !pc->symbolic_plane) CHECK(strstr(report, "steps 2 ") != NULL);
    }
    int64_t differ = 0, far = 0;
    for (int64_t i = 0; fused && plain && ref && n_f == n_u && n_f == n_r && i < n_f; i++) {
        /* A dense first conv sums its products in another order than the unfused GEMM: a
         * float32 rounding or two apart, not bit for bit. */
        differ += pc->k1 ? !(fabs((double)fused[i] - plain[i]) <= 1e-5 + 1e-5 * fabs((double)plain[i]))
                         : memcmp(&fused[i], &plain[i], sizeof(float)) != 0;
        far += !(fabs((double)fused[i] - ref[i]) <= 1e-4 + 1e-3 * fabs((double)ref[i]));
    }
    if (differ || far)
        af_test_fail(__FILE__, __LINE__, "%lldx%lld %lldx%lld k%lld s%lld, %d threads: %lld of %lld differ from unfused, "
                     "%lld from the reference", (long long)pc->cin, (long long)pc->c, (long long)pc->h,
                     (long long)pc->w, (long long)pc->k, (long long)pc->s, pc->threads, (long long)differ,
                     (long long)n_f, (long long)far);
    free(report), free(fused), free(plain), free(ref), free(xd);
    af_model_free(m);
}

AF_TEST(pointwise_depthwise_fused_matches_unfused) {
    /* Expanded tensors over 1 MiB, so the scheduler builds the fused kernel. */
    const pd_case cases[] = {
        {1, 8, 48, 80, 80, 3, 1, 1, "Relu", "HardSwish", 1, false, false, false, 0, 0, 0},
        {1, 8, 48, 80, 80, 3, 1, 1, "Relu", "HardSwish", 2, false, false, false, 0, 0, 0},
        {2, 16, 48, 83, 77, 3, 2, 1, "HardSwish", NULL, 2, false, false, false, 0, 0, 0},  /* odd sizes, a batch */
        {1, 24, 48, 96, 64, 5, 2, 2, NULL, "Relu", 3, false, false, false, 0, 0, 0},       /* three threads: three bands at least */
        {1, 16, 64, 112, 112, 3, 2, 1, "Relu", "Relu", 2, false, false, false, 0, 0, 0},   /* MobileNetV3-L's features.2 */
        {1, 16, 96, 112, 112, 3, 2, 1, "Relu6", "Relu6", 2, false, false, false, 0, 0, 0}, /* MobileNetV2's features.2 */
        {1, 8, 48, 80, 80, 3, 1, 1, "Relu", "HardSwish", 2, true, false, false, 0, 0, 0},  /* BatchNormalizations kept */
        {1, 16, 48, 83, 77, 3, 2, 1, "Relu6", "Relu6", 1, true, false, false, 0, 0, 0},
        {3, 16, 48, 83, 77, 3, 2, 1, "HardSwish", NULL, 2, false, true, false, 0, 0, 0}, /* a symbolic batch, 3 */
        {2, 16, 48, 83, 77, 3, 2, 1, "Relu", "Relu", 2, false, true, true, 0, 0, 0},     /* symbolic batch and plane */
        {1, 16, 96, 112, 112, 3, 2, 1, "Silu", "Silu", 2, false, false, false, 0, 0, 0}, /* EfficientNet-B0's features.2 */
        {1, 8, 48, 83, 77, 5, 1, 2, "Silu", "Silu", 1, true, false, false, 0, 0, 0},
    };
    /* A plane of unknown size fuses where the CPU's gate is nothing (Intel): elsewhere its size
     * cannot be weighed against the gate. */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i], !cases[i].symbolic_plane || af_pwdw_min_expanded_bytes() == 0);
}

/* A network's stem as the first conv: MobileNetV2's and MnasNet's (3 channels, 3x3 at stride 2,
 * into 32), odd planes with a batch, stride 1 without padding (BatchNormalizations kept), a 5x5
 * over one channel; column tiles of 16 pixels, partial ones and the edge columns whose taps read
 * padding, at 1-3 threads. */
AF_TEST(pointwise_depthwise_dense_first_conv_matches_unfused) {
    const pd_case cases[] = {
        {1, 3, 32, 224, 224, 3, 1, 1, "Relu", "Relu", 1, false, false, false, 3, 2, 1},
        {1, 3, 32, 224, 224, 3, 1, 1, "Relu6", "Relu6", 2, false, false, false, 3, 2, 1},
        {2, 3, 48, 181, 171, 5, 2, 2, "HardSwish", NULL, 2, false, false, false, 3, 2, 1},
        {1, 2, 32, 120, 100, 3, 1, 1, "Relu6", "Relu6", 3, true, false, false, 3, 1, 0},
        {1, 1, 16, 400, 300, 3, 1, 1, NULL, "Relu", 1, false, false, false, 5, 2, 2},
        {1, 3, 32, 224, 224, 3, 1, 1, "Silu", "Silu", 2, true, false, false, 3, 2, 1}, /* EfficientNet's stem */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i], true);
}

/* A dense first conv of more products per output than the kernel computes directly (8 channels
 * of 3x3: 72) is left to the GEMM: two steps, the outputs those of the unfused plan. */
AF_TEST(pointwise_depthwise_wide_dense_first_conv_stays_unfused) {
    const pd_case c = {1, 8, 32, 224, 224, 3, 1, 1, "Relu", "Relu", 1, false, false, false, 3, 2, 1};
    af_model *m = build(&c, 5u);
    CHECK(m != NULL);
    if (!m) return;
    unsigned seed = 3;
    const int64_t nx = c.cin * c.h * c.w;
    float *xd = random_floats(nx, &seed, 1.0f);
    af_tensor x = {.dtype = AF_DTYPE_FLOAT, .rank = 4, .dims = {1, c.cin, c.h, c.w}, .data = xd,
                   .nbytes = (size_t)nx * sizeof(float)};
    af_session_options o = af_session_options_default();
    int64_t n = 0;
    char *report = NULL;
    float *y = af_test_session_output(m, &o, &x, &n, &report);
    CHECK(y != NULL && report != NULL);
    if (report && strstr(report, "isa avx512")) {
        CHECK(strstr(report, "steps 2 ") != NULL);
        CHECK(strstr(report, "takes 72 products per output, more than the 64") != NULL);
    }
    free(y), free(report), free(xd);
    af_model_free(m);
}

AF_TEST(pointwise_depthwise_small_planes_follow_the_cpu_gate) {
    /* 16 x 32 x 32 expanded floats (64 KiB). Where the CPU's gate is above that (AMD and others:
     * the tensor stays in cache between the unfused kernels) the scheduler declines, the two conv
     * + activation groups run instead, and the outputs agree; where it is not (Intel) the fused
     * kernel runs on these small planes and matches the unfused plan bit for bit. One thread: at
     * two, the chunks' halo rows would recompute 31% of the 1x1 conv, past the kernel's bound. */
    const pd_case c = {1, 8, 16, 32, 32, 3, 1, 1, "Relu", "Relu", 1, false, false, false, 0, 0, 0};
    check_case(&c, af_pwdw_min_expanded_bytes() < 16 * 32 * 32 * sizeof(float));
    const pd_case silu = {1, 8, 16, 32, 32, 3, 1, 1, "Silu", "Silu", 1, false, false, false, 0, 0, 0};
    check_case(&silu, af_pwdw_min_expanded_bytes() < 16 * 32 * 32 * sizeof(float));
}
