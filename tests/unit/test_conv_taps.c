/* Conv taps that read only padding at every output are dropped at load (src/ir/conv_taps.c):
 * the Conv left reads the kept rectangle of its weights with pads shrunk to match, and its output
 * is the one a direct convolution over the original weights gives. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autofusion.h"
#include "ir/graph.h"
#include "ir/model.h"
#include "ir/tensor.h"
#include "onnx_build.h"
#include "unit.h"

enum { C = 8, M = 4, H = 6, W = 6 };

typedef struct taps_case {
    const char *label;
    int64_t pads[4], dil[2];
    int64_t oh, ow;       /* the output plane */
    int64_t kept[2];      /* the kernel after load */
    int64_t kept_pads[4]; /* its pads */
    bool inf_in_dropped;  /* a weight of a dropped tap is infinite: nothing may be dropped */
} taps_case;

/* y[m][oy][ox] = sum of w x over the taps inside the plane, in double. */
static void direct_conv(const taps_case *tc, const float *x, const float *w, double *y) {
    for (int64_t m = 0; m < M; m++)
        for (int64_t oy = 0; oy < tc->oh; oy++)
            for (int64_t ox = 0; ox < tc->ow; ox++) {
                double acc = 0;
                for (int64_t c = 0; c < C; c++)
                    for (int64_t ky = 0; ky < 3; ky++)
                        for (int64_t kx = 0; kx < 3; kx++) {
                            const int64_t iy = oy - tc->pads[0] + ky * tc->dil[0], ix = ox - tc->pads[1] + kx * tc->dil[1];
                            if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                                acc += (double)w[((m * C + c) * 3 + ky) * 3 + kx] * x[(c * H + iy) * W + ix];
                        }
                y[(m * tc->oh + oy) * tc->ow + ox] = acc;
            }
}

AF_TEST(conv_taps_reading_only_padding_are_dropped) {
    static const taps_case cases[] = {
        /* ASPP-like: a dilation as wide as the plane leaves only the centre tap, a 1x1 conv */
        {"dilation 6, pads 6", {6, 6, 6, 6}, {6, 6}, 6, 6, {1, 1}, {0, 0, 0, 0}, false},
        /* one side: rows o - 3 are all padding, o and o + 3 are inside */
        {"dilation 3, pads 3 at the start", {3, 3, 0, 0}, {3, 3}, 3, 3, {2, 2}, {0, 0, 0, 0}, false},
        {"an ordinary 3x3, pads 1", {1, 1, 1, 1}, {1, 1}, 6, 6, {3, 3}, {1, 1, 1, 1}, false},
        {"an infinite weight in a dead tap", {6, 6, 6, 6}, {6, 6}, 6, 6, {3, 3}, {6, 6, 6, 6}, true},
    };
    static float x[C * H * W], w[M * C * 9];
    for (int i = 0; i < C * H * W; i++) x[i] = (float)((i * 37) % 29) / 14.0f - 1.0f;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const taps_case *tc = &cases[k];
        for (int i = 0; i < M * C * 9; i++) w[i] = (float)((i * 13) % 17) / 16.0f - 0.5f;
        if (tc->inf_in_dropped) w[0] = INFINITY; /* tap (0, 0) of the first filter */
        ob_model *b = ob_new(13);
        const char *in[2] = {ob_input(b, 4, (int64_t[]){1, C, H, W}), ob_const(b, 4, (int64_t[]){M, C, 3, 3}, w)};
        ob_output(b, ob_node(b, "Conv", 2, in));
        ob_attr_ints(b, "kernel_shape", 2, (int64_t[]){3, 3});
        ob_attr_ints(b, "pads", 4, tc->pads);
        ob_attr_ints(b, "dilations", 2, tc->dil);
        af_error err = {0};
        af_model *m = ob_load(b, &err);
        ob_free(b);
        CHECK(m != NULL);
        if (!m) continue;
        const af_graph *g = m->graph;
        const af_node *conv = NULL;
        for (int i = 0; i < g->n_nodes; i++)
            if (g->nodes[i].op == AF_OP_CONV) conv = &g->nodes[i];
        CHECK(conv != NULL);
        const int64_t *kernel = NULL, *pads = NULL;
        const af_tensor *wt = conv ? &g->values[conv->inputs[1]].t : NULL;
        const bool shaped = conv && af_node_attr_ints(conv, "kernel_shape", &kernel) == 2 &&
                            af_node_attr_ints(conv, "pads", &pads) == 4 && wt->rank == 4;
        if (!shaped || kernel[0] != tc->kept[0] || kernel[1] != tc->kept[1] || wt->dims[2] != tc->kept[0] ||
            wt->dims[3] != tc->kept[1] || memcmp(pads, tc->kept_pads, sizeof tc->kept_pads) != 0)
            af_test_fail(__FILE__, __LINE__, "%s: kernel %lldx%lld, weights %lldx%lld, pads %lld %lld %lld %lld",
                         tc->label, shaped ? (long long)kernel[0] : -1LL, shaped ? (long long)kernel[1] : -1LL,
                         wt ? (long long)wt->dims[2] : -1LL, wt ? (long long)wt->dims[3] : -1LL,
                         shaped ? (long long)pads[0] : -1LL, shaped ? (long long)pads[1] : -1LL,
                         shaped ? (long long)pads[2] : -1LL, shaped ? (long long)pads[3] : -1LL);
        if (!tc->inf_in_dropped) {
            af_session *s = af_test_session(m, 3, NULL);
            af_tensor xt = {.dtype = AF_DTYPE_FLOAT, .rank = 4, .dims = {1, C, H, W}, .data = x, .nbytes = sizeof x};
            const char *names[1] = {"in0"};
            if (s && af_session_run(s, 1, names, &xt, &err) == AF_OK) {
                const af_tensor *y = af_session_output(s, 0);
                double *want = malloc((size_t)(M * tc->oh * tc->ow) * sizeof *want);
                CHECK(want && y && af_tensor_numel(y) == M * tc->oh * tc->ow);
                int off = 0;
                if (want && y && af_tensor_numel(y) == M * tc->oh * tc->ow) {
                    direct_conv(tc, x, w, want);
                    for (int64_t i = 0; i < M * tc->oh * tc->ow; i++)
                        off += fabs(((const float *)y->data)[i] - want[i]) > 1e-5 * (1 + fabs(want[i]));
                }
                if (off) af_test_fail(__FILE__, __LINE__, "%s: %d outputs off the direct conv", tc->label, off);
                free(want);
            } else {
                af_test_fail(__FILE__, __LINE__, "%s: the run failed: %s", tc->label, err.message);
            }
            af_session_free(s);
        }
        af_model_free(m);
    }
}
