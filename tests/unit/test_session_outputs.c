/* A session's outputs across runs: each run's outputs are right whether it reuses the previous
 * run's buffers (same or smaller size) or needs new ones (larger), and a failed run leaves the
 * last successful outputs readable when it failed before running. */
#include <stdlib.h>
#include <string.h>

#include "autofusion.h"
#include "onnx_build.h"
#include "unit.h"

static af_session *open_scale_model(af_model **m) {
    *m = NULL;
    ob_model *b = ob_new(13);
    const char *x = ob_input(b, 1, (int64_t[]){-1});
    ob_output(b, ob_node2(b, "Mul", x, ob_scalar(b, 2.0f)));
    uint8_t *buf = NULL;
    size_t size = 0;
    int rc = ob_pack(b, &buf, &size);
    ob_free(b);
    af_error err = {0};
    af_session *s = NULL;
    if (rc == 0 && af_model_load_buffer(buf, size, NULL, NULL, m, &err) == AF_OK)
        if (af_session_create(*m, NULL, &s, &err) != AF_OK) s = NULL;
    free(buf);
    return s;
}

/* Runs x = base + i for n elements and checks y = 2x; returns the output's data pointer. */
static const void *run_and_check(af_session *s, int64_t n, float base) {
    float *x = malloc((size_t)n * sizeof *x);
    if (!x) return NULL;
    for (int64_t i = 0; i < n; i++) x[i] = base + (float)i;
    af_tensor t = {.dtype = AF_DTYPE_FLOAT, .rank = 1, .dims = {n}, .data = x};
    af_error err = {0};
    const char *names[1] = {"in0"};
    CHECK(af_session_run(s, 1, names, &t, &err) == AF_OK);
    const af_tensor *y = af_session_output(s, 0);
    const void *p = y ? y->data : NULL;
    CHECK(y && y->rank == 1 && y->dims[0] == n);
    int64_t bad = 0;
    for (int64_t i = 0; y && i < n; i++) bad += ((const float *)y->data)[i] != 2.0f * x[i];
    CHECK_EQ_INT(bad, 0);
    free(x);
    return p;
}

AF_TEST(session_outputs_reuse_buffers_and_stay_right) {
    af_model *m;
    af_session *s = open_scale_model(&m);
    CHECK(s != NULL);
    if (!s) {
        af_model_free(m);
        return;
    }
    const void *first = run_and_check(s, 200000, 1.0f);
    const void *again = run_and_check(s, 200000, -5.0f);
    CHECK(first == again); /* the same size reuses the buffer */
    run_and_check(s, 10, 3.0f);        /* smaller: reused, only 10 elements valid */
    run_and_check(s, 400000, 7.0f);    /* larger: a new buffer */
    const void *kept = run_and_check(s, 1000, 0.5f);
    /* A run refused before it starts (wrong dtype) leaves the last outputs readable. */
    double xd[4] = {0};
    af_tensor bad = {.dtype = AF_DTYPE_DOUBLE, .rank = 1, .dims = {4}, .data = xd};
    const char *names[1] = {"in0"};
    af_error err = {0};
    CHECK(af_session_run(s, 1, names, &bad, &err) == AF_ERR_INVALID_ARGUMENT);
    const af_tensor *y = af_session_output(s, 0);
    CHECK(y && y->data == kept && y->dims[0] == 1000 && ((const float *)y->data)[999] == 2.0f * 999.5f);
    af_session_free(s);
    af_model_free(m);
}
