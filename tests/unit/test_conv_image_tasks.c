/* Batches of images at two threads run whole images as tasks, one thread each, and the images
 * left over (fewer than the threads) split over the threads as a batch of one does. Every conv
 * kernel that takes this path is in the model: Winograd (3x3 stride 1 at 24x24), the implicit GEMM
 * (3x3 stride 2), the 1x1 GEMM with a residual, im2col (a dilated 3x3) and the grouped GEMM
 * (groups of 16 channels, too wide for the channel-blocked kernel). At batches 1 to 5, static and
 * symbolic, the two-thread session must give the one-thread session's bits (no kernel's summation
 * order depends on its thread count) and match the reference kernels. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autofusion.h"
#include "ir/tensor.h"
#include "onnx_build.h"
#include "unit.h"

static unsigned seed = 5u;
static float frand(void) {
    seed = seed * 1664525u + 1013904223u;
    return (float)(seed >> 8) / 8388608.0f - 1.0f;
}

static const char *conv(ob_model *m, const char *x, int64_t cout, int64_t cin_g, int64_t k, float scale) {
    static float w[64 * 64 * 9], b[64];
    for (int64_t i = 0; i < cout * cin_g * k * k; i++) w[i] = scale * frand();
    for (int64_t i = 0; i < cout; i++) b[i] = 0.2f * frand();
    const char *in[3] = {x, ob_const(m, 4, (int64_t[]){cout, cin_g, k, k}, w), ob_const(m, 1, (int64_t[]){cout}, b)};
    return ob_node(m, "Conv", 3, in);
}

/* x: [batch, 32, 24, 24] (batch -1: symbolic). */
static af_model *image_tasks_model(int64_t batch) {
    seed = 5u; /* the same weights for every batch */
    ob_model *m = ob_new(13);
    const char *x = ob_input(m, 4, (int64_t[]){batch, 32, 24, 24});
    const char *a = conv(m, x, 32, 32, 3, 0.06f); /* Winograd */
    ob_attr_ints(m, "pads", 4, (int64_t[]){1, 1, 1, 1});
    a = ob_node1(m, "Relu", a);
    const char *r = ob_node1(m, "Relu", ob_node2(m, "Add", conv(m, a, 32, 32, 1, 0.15f), x)); /* 1x1 GEMM */
    const char *d = conv(m, r, 32, 32, 3, 0.06f); /* im2col */
    ob_attr_ints(m, "pads", 4, (int64_t[]){2, 2, 2, 2});
    ob_attr_ints(m, "dilations", 2, (int64_t[]){2, 2});
    const char *g = conv(m, ob_node1(m, "Relu", d), 64, 16, 3, 0.08f); /* grouped */
    ob_attr_i(m, "group", 2);
    ob_attr_ints(m, "pads", 4, (int64_t[]){1, 1, 1, 1});
    const char *s = conv(m, ob_node1(m, "Relu", g), 64, 64, 3, 0.04f); /* implicit, stride 2 */
    ob_attr_ints(m, "strides", 2, (int64_t[]){2, 2});
    ob_attr_ints(m, "pads", 4, (int64_t[]){1, 1, 1, 1});
    ob_output(m, s);
    af_model *model = ob_load(m, NULL);
    CHECK(model != NULL);
    ob_free(m);
    return model;
}

static af_session *session(const af_model *m, int threads, int reference) {
    af_session_options o = af_session_options_default();
    o.n_threads = threads;
    o.reference_kernels = reference;
    if (reference) o.fusion_level = 0;
    af_session *s = NULL;
    af_error err = {0};
    if (af_session_create(m, &o, &s, &err) != AF_OK) af_test_fail(__FILE__, __LINE__, "session: %s", err.message);
    return s;
}

AF_TEST(conv_images_as_tasks_match_one_thread_bits) {
    for (int symbolic = 0; symbolic < 2; symbolic++)
        for (int64_t batch = 1; batch <= 5; batch++) {
            af_model *m = image_tasks_model(symbolic ? -1 : batch);
            af_session *s[3] = {m ? session(m, 2, 0) : NULL, m ? session(m, 1, 0) : NULL, m ? session(m, 1, 1) : NULL};
            const int64_t numel = batch * 32 * 24 * 24;
            float *x = malloc((size_t)numel * sizeof *x);
            for (int64_t i = 0; x && i < numel; i++) x[i] = frand();
            const af_tensor in = {.dtype = AF_DTYPE_FLOAT, .rank = 4, .dims = {batch, 32, 24, 24}, .data = x};
            const char *names[1] = {"in0"};
            const af_tensor *y[3] = {NULL, NULL, NULL};
            if (s[0]) CHECK(af_session_set_profiling(s[0], 1, NULL) == AF_OK);
            for (int i = 0; i < 3 && s[0] && s[1] && s[2] && x; i++) {
                af_error err = {0};
                if (af_session_run(s[i], 1, names, &in, &err) != AF_OK)
                    af_test_fail(__FILE__, __LINE__, "batch %lld: %s", (long long)batch, err.message);
                else y[i] = af_session_output(s[i], 0);
            }
            if (y[0] && y[1] && y[2]) {
                const int64_t n = af_tensor_numel(y[1]);
                CHECK(af_tensor_numel(y[0]) == n && y[0]->dims[0] == batch && y[0]->dims[1] == 64);
                if (af_tensor_numel(y[0]) == n && memcmp(y[0]->data, y[1]->data, (size_t)n * sizeof(float)))
                    af_test_fail(__FILE__, __LINE__, "batch %lld%s: two threads differ from one in the bits",
                                 (long long)batch, symbolic ? " (symbolic)" : "");
                const int64_t bad = af_test_count_beyond(y[0], y[2], 1e-3, 1e-4);
                if (bad)
                    af_test_fail(__FILE__, __LINE__, "batch %lld%s: %lld outputs beyond the reference's",
                                 (long long)batch, symbolic ? " (symbolic)" : "", (long long)bad);
            }
            char *prof = s[0] ? af_test_capture(s[0], af_session_profile_write_json) : NULL;
            static const char *const kernels[] = {"winograd", "implicit_gemm", "conv1x1_gemm", "im2col_gemm"};
            for (int k = 0; k < 4; k++) /* the model runs what it says (im2col twice: dilated, grouped) */
                if (!prof || !strstr(prof, kernels[k]))
                    af_test_fail(__FILE__, __LINE__, "batch %lld: no %s step", (long long)batch, kernels[k]);
            free(prof);
            free(x);
            for (int i = 0; i < 3; i++) af_session_free(s[i]);
            af_model_free(m);
        }
}
