/* The squeeze_excite fusion end to end on EfficientNet's form of the block: GlobalAveragePool ->
 * 1x1 Conv -> SiLU (Mul(v, Sigmoid(v))) -> 1x1 Conv -> Sigmoid -> Mul with the block input. Fused
 * at the default level it must be one step (rule squeeze_excite_silu) and agree with the unfused
 * plan and the reference kernels; unfused, the gate's Sigmoid and Mul ran as an elementwise
 * region that took 1.1-1.7 ms per block on EfficientNet-B0 (against 0.01-0.05 fused). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autofusion.h"
#include "onnx_build.h"
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

static af_model *build(int64_t c, int64_t r, int64_t h, int64_t w) {
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

/* The session's output for x, copied, and (report != NULL) its fusion report and step count. */
static float *run_copy(af_model *m, const af_session_options *o, const af_tensor *x, char **report) {
    af_session *s = NULL;
    af_error err = {0};
    float *out = NULL;
    if (af_session_create(m, o, &s, &err) != AF_OK) return NULL;
    const char *names[1] = {"in0"};
    if (af_session_run(s, 1, names, x, &err) == AF_OK) {
        const af_tensor *y = af_session_output(s, 0);
        if (y->nbytes == x->nbytes && (out = malloc(y->nbytes))) memcpy(out, y->data, y->nbytes);
    }
    if (report) {
        size_t len = 0;
        FILE *f = open_memstream(report, &len);
        if (f) {
            af_session_fusion_report(s, f);
            fprintf(f, "steps %d\n", af_session_n_steps(s));
            fclose(f);
        }
    }
    af_session_free(s);
    return out;
}

AF_TEST(squeeze_excite_silu_fuses_and_matches_unfused) {
    const int64_t c = 96, r = 24, h = 28, w = 28, n = c * h * w;
    af_model *m = build(c, r, h, w);
    CHECK(m != NULL);
    if (!m) return;
    unsigned seed = 5;
    float *xd = random_floats(n, &seed, 2.0f);
    af_tensor x = {.dtype = AF_DTYPE_FLOAT, .rank = 4, .dims = {1, c, h, w}, .data = xd,
                   .nbytes = (size_t)n * sizeof(float)};
    af_session_options o = af_session_options_default();
    char *report = NULL;
    float *fused = run_copy(m, &o, &x, &report);
    o.fusion_level = 0;
    float *plain = run_copy(m, &o, &x, NULL);
    o.reference_kernels = 1;
    float *ref = run_copy(m, &o, &x, NULL);
    CHECK(fused && plain && ref && report);
    if (report) {
        if (!strstr(report, "steps 1\n")) fputs(report, stderr);
        CHECK(strstr(report, "steps 1\n") != NULL);
        CHECK(strstr(report, "[squeeze_excite] rule squeeze_excite_silu") != NULL);
    }
    /* The fused kernel sums the pool and the two products in its own order: within float
     * rounding of the unfused plan and of the reference. */
    int64_t far = 0;
    for (int64_t i = 0; fused && plain && ref && i < n; i++) {
        far += !(fabs((double)fused[i] - plain[i]) <= 1e-5 + 1e-5 * fabs((double)plain[i]));
        far += !(fabs((double)fused[i] - ref[i]) <= 1e-5 + 1e-5 * fabs((double)ref[i]));
    }
    CHECK_EQ_INT(far, 0);
    free(report), free(fused), free(plain), free(ref), free(xd);
    af_model_free(m);
}
