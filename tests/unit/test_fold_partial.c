/* Partial folding of shape arithmetic (src/ir/fold_partial.c): with a symbolic batch, the
 * Shape -> Gather -> Concat -> Reshape chains exporters write still give the sizes they fix (a
 * channel shuffle's, a Resize to another tensor's plane), so the convolutions after them keep
 * static [C, H, W] and fuse; where a dim is not provably the input's, nothing is guessed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autofusion.h"
#include "ir/graph.h"
#include "ir/model.h"
#include "ir/tensor.h"
#include "onnx_build.h"
#include "session_run.h"
#include "unit.h"

static unsigned seed = 11u;
static float frand(void) {
    seed = seed * 1664525u + 1013904223u;
    return (float)(seed >> 8) / 8388608.0f - 1.0f;
}

static const char *i64(ob_model *b, int64_t v) { return ob_const_i64(b, 1, (int64_t[]){1}, (int64_t[]){v}); }
static const char *scalar_i64(ob_model *b, int64_t v) { return ob_const_i64(b, 0, NULL, (int64_t[]){v}); }

/* Shape(x)[k] as a one-element vector, the way torch exports x.size(k) into a shape. */
static const char *dim_of(ob_model *b, const char *x, int64_t k) {
    const char *g = ob_node2(b, "Gather", ob_node1(b, "Shape", x), scalar_i64(b, k));
    return ob_node2(b, "Unsqueeze", g, i64(b, 0));
}

/* Value `name` has rank `rank` and dims `want` (-1: unknown) after loading. */
static void check_dims(const af_model *m, const char *name, int rank, const int64_t *want) {
    const int v = af_graph_find_value(m->graph, name);
    const af_tensor *t = v >= 0 ? &m->graph->values[v].t : NULL;
    CHECK(t != NULL);
    if (!t) return;
    CHECK_EQ_INT(t->rank, rank);
    for (int d = 0; d < rank && d < t->rank; d++)
        if (t->dims[d] != want[d])
            af_test_fail(__FILE__, __LINE__, "%s: dim %d is %lld, expected %lld", name, d, (long long)t->dims[d],
                         (long long)want[d]);
}

/* ShuffleNetV2's channel shuffle of x: [n, 8, 4, 4] as torch exports it, then a 1x1 Conv + Relu:
 *   x.view(b, 2, c // 2, h, w).transpose(1, 2).view(b, -1, h, w)  (b, c, h, w = x.size()) */
static af_model *shuffle_model(char *shuffled, size_t size) {
    static float w[8 * 8], bias[8];
    for (int i = 0; i < 64; i++) w[i] = 0.3f * frand();
    for (int i = 0; i < 8; i++) bias[i] = 0.2f * frand();
    ob_model *b = ob_new(13);
    const char *x = ob_input(b, 4, (int64_t[]){-1, 8, 4, 4});
    const char *half = ob_node2(b, "Div", dim_of(b, x, 1), i64(b, 2));
    const char *t1 =
        ob_node(b, "Concat", 5, (const char *[]){dim_of(b, x, 0), i64(b, 2), half, dim_of(b, x, 2), dim_of(b, x, 3)});
    ob_attr_i(b, "axis", 0);
    const char *tr = ob_node1(b, "Transpose", ob_node2(b, "Reshape", x, t1));
    ob_attr_ints(b, "perm", 5, (int64_t[]){0, 2, 1, 3, 4});
    const char *t2 =
        ob_node(b, "Concat", 4, (const char *[]){dim_of(b, x, 0), i64(b, -1), dim_of(b, x, 2), dim_of(b, x, 3)});
    ob_attr_i(b, "axis", 0);
    const char *r2 = ob_node2(b, "Reshape", tr, t2);
    snprintf(shuffled, size, "%s", r2);
    const char *ins[3] = {r2, ob_const(b, 4, (int64_t[]){8, 8, 1, 1}, w), ob_const(b, 1, (int64_t[]){8}, bias)};
    ob_output(b, ob_node1(b, "Relu", ob_node(b, "Conv", 3, ins)));
    af_error err = {0};
    af_model *m = ob_load(b, &err);
    ob_free(b);
    return m;
}

AF_TEST(fold_partial_channel_shuffle_keeps_its_sizes) {
    char shuffled[128];
    af_model *m = shuffle_model(shuffled, sizeof shuffled);
    CHECK(m != NULL);
    if (!m) return;
    /* [batch, 8, 4, 4]: the -1 solved through the Transpose, c // 2 folded. */
    check_dims(m, shuffled, 4, (int64_t[]){-1, 8, 4, 4});
    af_session *fused = af_test_session(m, 3, NULL), *plain = af_test_session(m, 0, NULL);
    CHECK(fused && plain);
    for (int64_t n = 1; fused && plain && n <= 3; n++) {
        const int64_t bad = af_test_compare_runs(fused, plain, "in0", (int64_t[]){n, 8, 4, 4}, frand, 1e-5, 1e-6);
        if (bad) af_test_fail(__FILE__, __LINE__, "batch %lld: %lld values differ", (long long)n, (long long)bad);
    }
    /* The Conv + Relu fused: it needs the shuffled tensor's [C, H, W]. */
    char *report = fused ? af_test_capture(fused, af_session_fusion_report) : NULL;
    const char *rejected = report ? strstr(report, "rejected candidates:") : NULL;
    const char *group = report ? strstr(report, "[conv_bn_relu]") : NULL;
    CHECK(group && (!rejected || group < rejected));
    free(report);
    af_session_free(fused);
    af_session_free(plain);
    af_model_free(m);
}

/* x: [n, 8, 4, 4] reshaped to [b, -1, 4] where b is another input's batch: nothing says it is
 * x's, so the -1 stays unknown (at run time the two may differ). */
AF_TEST(fold_partial_does_not_guess_an_unrelated_dim) {
    ob_model *b = ob_new(13);
    const char *x = ob_input(b, 4, (int64_t[]){-1, 8, 4, 4});
    const char *other = ob_input(b, 2, (int64_t[]){-1, 3});
    const char *t = ob_node(b, "Concat", 3, (const char *[]){dim_of(b, other, 0), i64(b, -1), i64(b, 4)});
    ob_attr_i(b, "axis", 0);
    const char *r = ob_node2(b, "Reshape", x, t);
    char name[128];
    snprintf(name, sizeof name, "%s", r);
    ob_output(b, ob_node1(b, "Relu", r));
    ob_output(b, ob_node1(b, "Relu", other));
    af_error err = {0};
    af_model *m = ob_load(b, &err);
    ob_free(b);
    CHECK(m != NULL);
    if (!m) return;
    check_dims(m, name, 3, (int64_t[]){-1, -1, 4});
    af_model_free(m);
}

/* A Resize to [Shape(x)[0:2], 6, 6] (torch's interpolate(x, size=(6, 6)) with a symbolic batch):
 * the output plane is known. */
AF_TEST(fold_partial_resize_to_known_sizes) {
    ob_model *b = ob_new(13);
    const char *x = ob_input(b, 4, (int64_t[]){-1, 5, 3, 3});
    const char *nc = ob_node(b, "Slice", 3, (const char *[]){ob_node1(b, "Shape", x), i64(b, 0), i64(b, 2)});
    const char *sizes = ob_node2(b, "Concat", nc, ob_const_i64(b, 1, (int64_t[]){2}, (int64_t[]){6, 6}));
    ob_attr_i(b, "axis", 0);
    const char *r = ob_node(b, "Resize", 4, (const char *[]){x, "", "", sizes});
    char name[128];
    snprintf(name, sizeof name, "%s", r);
    ob_output(b, r);
    af_error err = {0};
    af_model *m = ob_load(b, &err);
    ob_free(b);
    CHECK(m != NULL);
    if (!m) return;
    check_dims(m, name, 4, (int64_t[]){-1, 5, 6, 6});
    af_model_free(m);
}

/* Loads b's model with folding on and off; where both load, runs both on x ([2, 8, 4, 4]) and
 * the first output must agree exactly (ints or floats), or both runs fail. */
static void same_folded_and_not(ob_model *b, const char *what) {
    uint8_t *buf = NULL;
    size_t size = 0;
    CHECK(ob_pack(b, &buf, &size) == 0);
    af_model *m[2] = {NULL, NULL};
    af_status st[2];
    for (int fold = 0; fold < 2; fold++) {
        af_load_options lo = af_load_options_default();
        lo.fold_constants = fold;
        af_error err = {0};
        st[fold] = af_model_load_buffer(buf, size, NULL, &lo, &m[fold], &err);
    }
    free(buf);
    if (st[0] != st[1]) af_test_fail(__FILE__, __LINE__, "%s: loads %d unfolded, %d folded", what, st[0], st[1]);
    float xd[2 * 8 * 4 * 4];
    for (int k = 0; k < 2 * 8 * 4 * 4; k++) xd[k] = frand();
    af_tensor in = {.dtype = AF_DTYPE_FLOAT, .rank = 4, .dims = {2, 8, 4, 4}, .data = xd};
    const char *names[1] = {"in0"};
    af_session *s[2] = {NULL, NULL};
    af_status rs[2] = {AF_ERR_RUNTIME, AF_ERR_RUNTIME};
    for (int f = 0; f < 2 && st[0] == AF_OK && st[1] == AF_OK; f++) {
        af_session_options o = af_session_options_default();
        o.n_threads = 1;
        af_error err = {0};
        if (af_session_create(m[f], &o, &s[f], &err) == AF_OK) rs[f] = af_session_run(s[f], 1, names, &in, &err);
    }
    if ((rs[0] == AF_OK) != (rs[1] == AF_OK))
        af_test_fail(__FILE__, __LINE__, "%s: runs %d unfolded, %d folded", what, rs[0], rs[1]);
    if (rs[0] == AF_OK && rs[1] == AF_OK) {
        const af_tensor *a = af_session_output(s[0], 0), *c = af_session_output(s[1], 0);
        CHECK(a && c && a->dtype == c->dtype && af_tensor_numel(a) == af_tensor_numel(c));
        if (a && c && a->dtype == c->dtype && af_tensor_numel(a) == af_tensor_numel(c) &&
            memcmp(a->data, c->data, (size_t)af_tensor_numel(a) * (a->dtype == AF_DTYPE_INT64 ? 8 : 4)) != 0)
            af_test_fail(__FILE__, __LINE__, "%s: outputs differ", what);
    }
    for (int f = 0; f < 2; f++) {
        af_session_free(s[f]);
        af_model_free(m[f]);
    }
    ob_free(b);
}

/* Shape arithmetic at its edges: nothing crashes at load, and what folds computes what the
 * unfolded graph computes at run time (or both fail). */
AF_TEST(fold_partial_edge_cases_match_the_unfolded_graph) {
    ob_model *b = ob_new(13); /* a slice of a shape with extreme bounds and step */
    const char *x = ob_input(b, 4, (int64_t[]){-1, 8, 4, 4});
    const char *sl[5] = {ob_node1(b, "Shape", x), i64(b, 1), i64(b, INT64_MAX), i64(b, 0), i64(b, INT64_MAX)};
    ob_output(b, ob_node(b, "Slice", 5, sl));
    same_folded_and_not(b, "slice with extreme bounds");

    b = ob_new(13); /* a gather past the shape */
    x = ob_input(b, 4, (int64_t[]){-1, 8, 4, 4});
    ob_output(b, ob_node2(b, "Gather", ob_node1(b, "Shape", x), scalar_i64(b, 9)));
    same_folded_and_not(b, "gather past the end");

    b = ob_new(13); /* dims multiplied past int64: not folded */
    x = ob_input(b, 4, (int64_t[]){-1, 8, 4, 4});
    const char *c = dim_of(b, x, 1);
    ob_output(b, ob_node2(b, "Mul", c, i64(b, INT64_MAX)));
    same_folded_and_not(b, "overflowing product");

    b = ob_new(13); /* a reshape target with two -1: refused at run time either way */
    x = ob_input(b, 4, (int64_t[]){-1, 8, 4, 4});
    const char *t = ob_node(b, "Concat", 3, (const char *[]){dim_of(b, x, 0), i64(b, -1), i64(b, -1)});
    ob_attr_i(b, "axis", 0);
    ob_output(b, ob_node2(b, "Reshape", x, t));
    same_folded_and_not(b, "two -1");

    b = ob_new(13); /* batch * 8 as a flat size: the first dim unknown, the rest solved */
    x = ob_input(b, 4, (int64_t[]){-1, 8, 4, 4});
    t = ob_node(b, "Concat", 3, (const char *[]){dim_of(b, x, 0), i64(b, -1), dim_of(b, x, 3)});
    ob_attr_i(b, "axis", 0);
    ob_output(b, ob_node1(b, "Relu", ob_node2(b, "Reshape", x, t)));
    same_folded_and_not(b, "flattened middle");
}
