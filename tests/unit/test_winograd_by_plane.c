/* 3x3 convolutions whose plane is symbolic (x: [n, 32, h, w], an export with dynamic spatial axes)
 * take Winograd at run time where the plane would have at prepare: F(4x4) at 40x40, F(2x2) at
 * 12x12 and the implicit GEMM at 6x6 (too few tiles), each tile size's U made by the first run that
 * needs it. Outputs must match the reference kernels at every plane, in any order of planes; that
 * Winograd ran is seen in the bits: against a session with "winograd": false (the implicit GEMM at
 * every plane) the outputs differ in rounding at 40x40 and 12x12 and are identical at 6x6. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autofusion.h"
#include "ir/tensor.h"
#include "onnx_build.h"
#include "unit.h"

static unsigned seed = 11u;
static float frand(void) {
    seed = seed * 1664525u + 1013904223u;
    return (float)(seed >> 8) / 8388608.0f - 1.0f;
}

/* y = Relu(Conv(Relu(Conv(x) + b1)) + b2 + x), both convs 3x3, 32 -> 32 channels, pads 1. */
static af_model *by_plane_model(void) {
    static float w1[32 * 32 * 9], w2[32 * 32 * 9], b1[32], b2[32];
    seed = 11u; /* the same weights every call */
    for (int i = 0; i < 32 * 32 * 9; i++) w1[i] = 0.08f * frand(), w2[i] = 0.08f * frand();
    for (int i = 0; i < 32; i++) b1[i] = 0.3f * frand(), b2[i] = 0.3f * frand();
    ob_model *m = ob_new(13);
    const char *x = ob_input(m, 4, (int64_t[]){-1, 32, -1, -1});
    const char *in1[3] = {x, ob_const(m, 4, (int64_t[]){32, 32, 3, 3}, w1), ob_const(m, 1, (int64_t[]){32}, b1)};
    const char *c1 = ob_node(m, "Conv", 3, in1);
    ob_attr_ints(m, "pads", 4, (int64_t[]){1, 1, 1, 1});
    const char *in2[3] = {ob_node1(m, "Relu", c1), ob_const(m, 4, (int64_t[]){32, 32, 3, 3}, w2),
                          ob_const(m, 1, (int64_t[]){32}, b2)};
    const char *c2 = ob_node(m, "Conv", 3, in2);
    ob_attr_ints(m, "pads", 4, (int64_t[]){1, 1, 1, 1});
    ob_output(m, ob_node1(m, "Relu", ob_node2(m, "Add", c2, x)));
    af_model *model = ob_load(m, NULL);
    CHECK(model != NULL);
    ob_free(m);
    return model;
}

static af_session *reference_session(const af_model *m) {
    af_session_options o = af_session_options_default();
    o.fusion_level = 0;
    o.n_threads = 1;
    o.reference_kernels = 1;
    af_session *s = NULL;
    af_error err = {0};
    CHECK(af_session_create(m, &o, &s, &err) == AF_OK);
    return s;
}

/* Runs every session on one random input of dims; returns the output of each (copies to free). */
static void run_all(af_session **s, int n, const int64_t dims[4], float **out, int64_t *numel) {
    const int64_t count = dims[0] * dims[1] * dims[2] * dims[3];
    float *x = malloc((size_t)count * sizeof *x);
    for (int64_t k = 0; x && k < count; k++) x[k] = frand();
    af_tensor in = {.dtype = AF_DTYPE_FLOAT, .rank = 4, .dims = {dims[0], dims[1], dims[2], dims[3]}, .data = x};
    const char *names[1] = {"in0"};
    *numel = count;
    for (int i = 0; i < n; i++) {
        out[i] = NULL;
        af_error err = {0};
        if (!x || af_session_run(s[i], 1, names, &in, &err) != AF_OK) {
            af_test_fail(__FILE__, __LINE__, "session %d: %s", i, err.message);
            continue;
        }
        const af_tensor *y = af_session_output(s[i], 0);
        if (!y || af_tensor_numel(y) != count) {
            af_test_fail(__FILE__, __LINE__, "session %d: output of the wrong size", i);
            continue;
        }
        out[i] = malloc((size_t)count * sizeof(float));
        if (out[i]) memcpy(out[i], y->data, (size_t)count * sizeof(float));
    }
    free(x);
}

AF_TEST(winograd_by_plane_picks_the_tile_per_run_and_matches_reference) {
    char off[256];
    snprintf(off, sizeof off, "/tmp/af_winograd_by_plane_off_%d.json", (int)getpid());
    af_test_write_file(off, "{\"winograd\": false}");
    af_model *m = by_plane_model();
    CHECK(m != NULL);
    /* By plane, implicit GEMM, reference, and by plane on a session that dropped the graph's
     * weights as it packed them (U comes from the packed copy). */
    af_session *s[4] = {m ? af_test_session(m, 3, NULL) : NULL, m ? af_test_session(m, 3, off) : NULL,
                        m ? reference_session(m) : NULL, NULL};
    af_model *own = by_plane_model();
    af_session_options o = af_session_options_default();
    o.n_threads = 2;
    af_error err = {0};
    if (own && af_session_create_owning(own, &o, &s[3], &err) != AF_OK) af_model_free(own);
    CHECK(s[0] && s[1] && s[2] && s[3]);
    if (s[0]) CHECK(af_session_set_profiling(s[0], 1, NULL) == AF_OK);
    static const struct {
        int64_t n, h, w;
        bool winograd;
        const char *ran; /* the kernel the profile names after the run */
    } runs[] = {{2, 40, 40, true, "f32_conv3x3_winograd_f4x4 (by plane)"},
                {1, 12, 12, true, "f32_conv3x3_winograd_f2x2 (by plane)"},
                {1, 6, 6, false, "f32_conv_implicit_gemm (by plane)"},
                {1, 12, 12, true, "f32_conv3x3_winograd_f2x2 (by plane)"},
                {1, 41, 37, true, "f32_conv3x3_winograd_f4x4 (by plane)"}};
    for (size_t r = 0; s[0] && s[1] && s[2] && s[3] && r < sizeof runs / sizeof runs[0]; r++) {
        const int64_t dims[4] = {runs[r].n, 32, runs[r].h, runs[r].w};
        float *out[4];
        int64_t numel = 0;
        run_all(s, 4, dims, out, &numel);
        if (out[0] && out[3] && memcmp(out[0], out[3], (size_t)numel * sizeof(float)))
            af_test_fail(__FILE__, __LINE__, "%lldx%lld: the owning session's outputs differ", (long long)runs[r].h,
                         (long long)runs[r].w);
        if (out[0] && out[1] && out[2]) {
            const af_tensor ref = {.dtype = AF_DTYPE_FLOAT, .rank = 1, .dims = {numel}, .data = out[2]};
            const af_tensor got = {.dtype = AF_DTYPE_FLOAT, .rank = 1, .dims = {numel}, .data = out[0]};
            const int64_t bad = af_test_count_beyond(&got, &ref, 1e-3, 1e-4);
            if (bad)
                af_test_fail(__FILE__, __LINE__, "%lldx%lld: %lld values beyond the reference's", (long long)runs[r].h,
                             (long long)runs[r].w, (long long)bad);
            const bool same_bits = memcmp(out[0], out[1], (size_t)numel * sizeof(float)) == 0;
            if (same_bits == runs[r].winograd)
                af_test_fail(__FILE__, __LINE__, "%lldx%lld: %s the implicit GEMM's bits, expected %s",
                             (long long)runs[r].h, (long long)runs[r].w, same_bits ? "has" : "differs from",
                             runs[r].winograd ? "Winograd's" : "them");
        }
        for (int i = 0; i < 4; i++) free(out[i]);
        /* The profile names what ran (both convs) and rates it at the run's shapes. */
        char *prof = af_test_capture(s[0], af_session_profile_write_json), k[128];
        snprintf(k, sizeof k, "\"kernel\":\"%s\"", runs[r].ran);
        const char *first = prof ? strstr(prof, k) : NULL;
        if (!first || !strstr(first + strlen(k), k))
            af_test_fail(__FILE__, __LINE__, "%lldx%lld: the profile does not name %s twice", (long long)runs[r].h,
                         (long long)runs[r].w, runs[r].ran);
        for (const char *c = prof; c && (c = strstr(c, "\"ops\":[\"Conv\"")) != NULL; c++) {
            const char *g = c;
            while (g > prof && strncmp(g, "\"gflops\":", 9) != 0) g--;
            if (strncmp(g, "\"gflops\":null", 13) == 0)
                af_test_fail(__FILE__, __LINE__, "%lldx%lld: a conv step without GFLOP/s", (long long)runs[r].h,
                             (long long)runs[r].w);
        }
        free(prof);
    }
    for (int i = 0; i < 4; i++) af_session_free(s[i]);
    af_model_free(m);
    remove(off);
}
