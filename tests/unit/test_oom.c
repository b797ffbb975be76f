/* Out of memory along the whole pipeline: load -> session create (fuse, plan) -> run. The Nth
 * allocation fails for every N the successful pipeline makes; each attempt must end with
 * AF_ERR_OUT_OF_MEMORY (or succeed where the failed allocation was optional, e.g. a fusion the
 * scheduler then skips) and, under the SAN build, LeakSanitizer proves nothing leaks. */
#include <stdlib.h>
#include <string.h>

#include "autofusion.h"
#include "util/alloc.h"
#include "unit.h"

#define NODE_TESTS "/usr/include/onnx/backend/test/data/node"

/* Fills every graph input with small deterministic data (symbolic dims become 1). */
static int make_inputs(const af_model *m, af_tensor *in, const char **names, int max) {
    int n = af_model_n_inputs(m);
    if (n > max) return -1;
    for (int i = 0; i < n; i++) {
        af_value_info vi;
        af_model_input_info(m, i, &vi);
        af_tensor *t = &in[i];
        memset(t, 0, sizeof *t);
        t->dtype = vi.dtype == AF_DTYPE_UNDEFINED ? AF_DTYPE_FLOAT : vi.dtype;
        t->rank = vi.rank < 0 ? 0 : vi.rank;
        size_t count = 1;
        for (int d = 0; d < t->rank; d++) {
            t->dims[d] = vi.dims[d] < 0 ? 1 : vi.dims[d];
            count *= (size_t)t->dims[d];
        }
        t->nbytes = count * af_dtype_size(t->dtype);
        t->data = calloc(1, t->nbytes ? t->nbytes : 1);
        if (t->dtype == AF_DTYPE_FLOAT)
            for (size_t k = 0; k < count; k++) ((float *)t->data)[k] = (float)((k * 7) % 13) * 0.1f;
        names[i] = vi.name;
    }
    return n;
}

/* One attempt at the whole pipeline; returns its status and fills err. */
static af_status pipeline(const char *path, int n_threads, af_error *err) {
    af_model *m = NULL;
    af_session *s = NULL;
    af_tensor in[16];
    const char *names[16];
    int n_in = 0;
    af_status st = af_model_load(path, NULL, &m, err);
    if (st == AF_OK) {
        af_session_options so = af_session_options_default();
        so.n_threads = n_threads;
        st = af_session_create(m, &so, &s, err);
    }
    if (st == AF_OK) {
        /* inputs are the test's own memory (plain calloc, outside the failure injection) */
        n_in = make_inputs(m, in, names, 16);
        st = n_in < 0 ? AF_ERR_INVALID_ARGUMENT : af_session_run(s, n_in, names, in, err);
        if (st == AF_OK && af_session_n_outputs(s) > 0 && !af_session_output(s, 0)) st = AF_ERR_RUNTIME;
    }
    for (int i = 0; i < n_in; i++) free(in[i].data);
    af_session_free(s);
    af_model_free(m);
    return st;
}

static void sweep(const char *path, int n_threads, long *points, long *absorbed) {
    af_error err = {0};
    af_alloc_fail_after(-1);
    if (pipeline(path, n_threads, &err) != AF_OK) {
        af_test_fail(__FILE__, __LINE__, "%s does not run: %s", path, err.message);
        return;
    }
    long total = af_alloc_count();
    *points = total;
    *absorbed = 0;
    for (long n = 0; n < total; n++) {
        af_alloc_fail_after(n);
        memset(&err, 0, sizeof err);
        af_status st = pipeline(path, n_threads, &err);
        af_alloc_fail_after(-1);
        if (st == AF_OK) {
            (*absorbed)++;
            continue;
        }
        if (st != AF_ERR_OUT_OF_MEMORY || err.status != st || !err.message[0] || strpbrk(err.message, "\r\n"))
            af_test_fail(__FILE__, __LINE__, "%s, allocation %ld failing: %s \"%s\"", path, n, af_status_name(st),
                         err.message);
    }
}

AF_TEST(oom_every_allocation_of_load_fuse_plan_run_fails_cleanly) {
    char path[1024];
    const char *env = getenv("AF_OOM_MODELS"); /* override: a ':'-separated list of model paths */
    static const char *const fixtures[] = {"models/resnet_small_bn/model.onnx", "models/bert_tiny/model.onnx"};
    static const char *const node_tests[] = {"test_if", "test_loop11", "test_conv_with_strides_padding",
                                             "test_lstm_with_peepholes"};
    int n_models = 0;
    char list[8][1024];
    if (env && *env) {
        char buf[4096];
        snprintf(buf, sizeof buf, "%s", env);
        for (char *tok = strtok(buf, ":"); tok && n_models < 8; tok = strtok(NULL, ":"))
            snprintf(list[n_models++], sizeof list[0], "%s", tok);
    } else {
        for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++)
            snprintf(list[n_models++], sizeof list[0], "%s/%s", af_test_dir(), fixtures[i]);
        for (size_t i = 0; i < sizeof node_tests / sizeof node_tests[0]; i++)
            snprintf(list[n_models++], sizeof list[0], "%s/%s/model.onnx", NODE_TESTS, node_tests[i]);
    }
    for (int i = 0; i < n_models; i++) {
        snprintf(path, sizeof path, "%s", list[i]);
        long points = 0, absorbed = 0;
        sweep(path, i == 0 ? 2 : 1, &points, &absorbed);
        printf("  %s: %ld allocation points, %ld absorbed (the pipeline still succeeded)\n", path, points, absorbed);
    }
}
