/*
 * Region discovery end to end: models built in memory (onnx_build.h) and loaded through the real
 * loader, run unfused (level 0, the reference) and at level 3. A region discovery finds must be
 * scheduled as one fused step, named "discovery" in the fusion report, and give the unfused
 * outputs; a region that would hold both ends of a path through an outside node is never formed.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autofusion.h"
#include "onnx_build.h"
#include "unit.h"

#define ROWS 64
#define COLS 1024
#define RTOL 1e-3
#define ATOL 1e-4

static af_model *load(ob_model *b) {
    uint8_t *buf = NULL;
    size_t size = 0;
    af_model *m = NULL;
    af_error err = {0};
    CHECK(ob_pack(b, &buf, &size) == 0);
    if (buf && af_model_load_buffer(buf, size, NULL, NULL, &m, &err) != AF_OK) {
        printf("  load: %s\n", err.message);
        m = NULL;
    }
    free(buf);
    ob_free(b);
    CHECK(m != NULL);
    return m;
}

/* The fusion report as one malloc'd string. */
static char *report(const af_session *s) { return af_test_capture(s, af_session_fusion_report); }

/* Whether `line` is listed under "accepted groups:" (before "rejected candidates:"). */
static bool accepted_line(const char *text, const char *line) {
    const char *acc = text ? strstr(text, "\naccepted groups:\n") : NULL;
    const char *rej = text ? strstr(text, "\nrejected candidates:\n") : NULL;
    const char *at = acc ? strstr(acc, line) : NULL;
    return at && rej && at < rej;
}

/* Runs both sessions on the same uniform random x in [-3, 3] (fixed seed) and compares the one
 * output element by element; returns the number of elements outside rtol/atol. */
static int64_t compare_runs(af_session *ref, af_session *fused, unsigned seed) {
    float *x = malloc((size_t)ROWS * COLS * sizeof *x);
    if (!x) return -1;
    srand(seed);
    for (int64_t i = 0; i < (int64_t)ROWS * COLS; i++) x[i] = 6.0f * (float)rand() / (float)RAND_MAX - 3.0f;
    af_tensor t = {.dtype = AF_DTYPE_FLOAT, .rank = 2, .dims = {ROWS, COLS}, .data = x};
    const char *names[1] = {"in0"};
    af_error err = {0};
    int64_t bad = -1;
    if (af_session_run(ref, 1, names, &t, &err) == AF_OK && af_session_run(fused, 1, names, &t, &err) == AF_OK) {
        const af_tensor *a = af_session_output(ref, 0), *b = af_session_output(fused, 0);
        if (a && b && a->rank == 2 && b->rank == 2 && a->dims[0] == ROWS && b->dims[0] == ROWS &&
            a->dims[1] == COLS && b->dims[1] == COLS) {
            bad = 0;
            const float *pa = a->data, *pb = b->data;
            for (int64_t i = 0; i < (int64_t)ROWS * COLS; i++)
                bad += !(fabs((double)pb[i] - (double)pa[i]) <= ATOL + RTOL * fabs((double)pa[i]));
        }
    } else {
        printf("  run: %s\n", err.message);
    }
    free(x);
    return bad;
}

AF_TEST(discovery_diamond_is_one_fused_step) {
    /* x -> Neg -> {Sigmoid, Abs} -> Add -> Mul(., c): one input, one output, an elementwise DAG the
     * linear elementwise_chain rules can only cover in pieces. */
    ob_model *b = ob_new(13);
    const char *x = ob_input(b, 2, (int64_t[]){ROWS, COLS});
    float c[COLS];
    for (int i = 0; i < COLS; i++) c[i] = 0.5f + (float)(i % 7) * 0.25f;
    const char *n = ob_node1(b, "Neg", x);
    const char *sig = ob_node1(b, "Sigmoid", n);
    const char *ab = ob_node1(b, "Abs", n);
    const char *add = ob_node2(b, "Add", sig, ab);
    ob_output(b, ob_node2(b, "Mul", add, ob_const(b, 1, (int64_t[]){COLS}, c)));
    af_model *m = load(b);
    if (!m) return;
    af_session *ref = af_test_session(m, 0, NULL), *fused = af_test_session(m, 3, NULL);
    if (ref && fused) {
        CHECK_EQ_INT(af_session_n_steps(ref), 5);
        CHECK_EQ_INT(af_session_n_steps(fused), 1);
        char *text = report(fused);
        bool named = accepted_line(text, "  [elementwise_chain] rule discovery: Neg 'n0' + Sigmoid 'n1' + Abs 'n2' + "
                                         "Add 'n3' + Mul 'n4'\n");
        CHECK(named);
        if (!named && text) printf("%s", text);
        free(text);
        for (unsigned seed = 1; seed <= 3; seed++) CHECK_EQ_INT(compare_runs(ref, fused, seed), 0);
    }
    af_session_free(ref);
    af_session_free(fused);
    af_model_free(m);
}

AF_TEST(discovery_stops_at_data_movement) {
    /* Two diamonds joined by a Transpose: the region kernel runs elementwise and broadcast ops
     * only, so discovery makes two regions around the Transpose, and both are built. */
    ob_model *b = ob_new(13);
    const char *x = ob_input(b, 2, (int64_t[]){ROWS, COLS});
    const char *n = ob_node1(b, "Neg", x);
    const char *s1 = ob_node1(b, "Sigmoid", n);
    const char *d1 = ob_node2(b, "Add", s1, ob_node1(b, "Abs", n));
    const char *t = ob_node1(b, "Transpose", d1);
    ob_attr_ints(b, "perm", 2, (int64_t[]){1, 0});
    const char *t2 = ob_node1(b, "Transpose", t);
    ob_attr_ints(b, "perm", 2, (int64_t[]){1, 0});
    const char *e = ob_node1(b, "Tanh", t2);
    const char *r = ob_node1(b, "Relu", e);
    ob_output(b, ob_node2(b, "Mul", r, ob_node1(b, "Sigmoid", e)));
    af_model *m = load(b);
    if (!m) return;
    af_session *ref = af_test_session(m, 0, NULL), *fused = af_test_session(m, 3, NULL);
    if (ref && fused) {
        CHECK_EQ_INT(af_session_n_steps(ref), 10);
        CHECK_EQ_INT(af_session_n_steps(fused), 4); /* region, Transpose, Transpose, region */
        char *text = report(fused);
        CHECK(accepted_line(text, "rule discovery: Neg 'n0' + Sigmoid 'n1' + Abs 'n2' + Add 'n3'\n"));
        CHECK(accepted_line(text, "rule discovery: Tanh 'n6' + Relu 'n7' + Sigmoid 'n8' + Mul 'n9'\n"));
        CHECK(text && !strstr(text, "scheduler:"));
        free(text);
        CHECK_EQ_INT(compare_runs(ref, fused, 7), 0);
    }
    af_session_free(ref);
    af_session_free(fused);
    af_model_free(m);
}

AF_TEST(discovery_keeps_paths_through_outside_nodes_out) {
    /* x -> Neg -> {ReduceMean, Sub}; Sub(neg, mean) -> Mul(., .): holding Neg and Sub in one region
     * would put the ReduceMean between two halves of one step (a cycle), so no group does. */
    ob_model *b = ob_new(13);
    const char *x = ob_input(b, 2, (int64_t[]){ROWS, COLS});
    const char *n = ob_node1(b, "Neg", x);
    const char *mean = ob_node1(b, "ReduceMean", n);
    ob_attr_ints(b, "axes", 1, (int64_t[]){1});
    const char *sub = ob_node2(b, "Sub", n, mean);
    const char *ex = ob_node1(b, "Exp", sub);
    ob_output(b, ob_node2(b, "Mul", ex, sub));
    af_model *m = load(b);
    if (!m) return;
    af_session *ref = af_test_session(m, 0, NULL), *fused = af_test_session(m, 3, NULL);
    if (ref && fused) {
        char *text = report(fused);
        const char *acc = text ? strstr(text, "\naccepted groups:\n") : NULL;
        const char *rej = text ? strstr(text, "\nrejected candidates:\n") : NULL;
        /* every accepted group holding Neg 'n0' holds nothing else of the path's ends */
        for (const char *line = acc; line && rej && line < rej; line = strchr(line + 1, '\n')) {
            const char *end = strchr(line + 1, '\n');
            if (!end) break;
            char buf[512];
            size_t len = (size_t)(end - line) < sizeof buf - 1 ? (size_t)(end - line) : sizeof buf - 1;
            memcpy(buf, line, len);
            buf[len] = 0;
            CHECK(!(strstr(buf, "'n0'") && strstr(buf, "'n2'")));
        }
        /* what is left after Neg and the ReduceMean fuses: Sub, Exp, Mul are one discovered region */
        CHECK_EQ_INT(af_session_n_steps(fused), 3);
        CHECK(accepted_line(text, "Sub 'n2' + Exp 'n3' + Mul 'n4'\n"));
        free(text);
        CHECK_EQ_INT(compare_runs(ref, fused, 11), 0);
    }
    af_session_free(ref);
    af_session_free(fused);
    af_model_free(m);
}
