/* Runs every registered unit test; a test passes when it records no failed check. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"
#include "unit.h"

#define MAX_TESTS 1024

struct test_entry {
    const char *name;
    af_test_fn fn;
};
static struct test_entry tests[MAX_TESTS];
static int n_tests, current_failures;

void af_test_register(const char *name, af_test_fn fn) {
    if (n_tests < MAX_TESTS) tests[n_tests++] = (struct test_entry){name, fn};
}

void af_test_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("  %s:%d: ", file, line);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    current_failures++;
}

const char *af_test_dir(void) {
    const char *d = getenv("AF_TEST_DIR");
    return d && *d ? d : "tests";
}

af_model *af_test_fixture(const char *name) {
    char path[1100];
    snprintf(path, sizeof path, "%s/models/%s/model.onnx", af_test_dir(), name);
    af_model *m = NULL;
    af_error err = {0};
    if (af_model_load(path, NULL, &m, &err) != AF_OK) af_test_fail(__FILE__, __LINE__, "%s: %s", path, err.message);
    return m;
}

af_session *af_test_session(const af_model *m, int level, const char *config_path) {
    af_session_options o = af_session_options_default();
    o.fusion_level = level;
    o.n_threads = 2;
    o.config_path = config_path;
    af_session *s = NULL;
    af_error err = {0};
    if (af_session_create(m, &o, &s, &err) != AF_OK) {
        af_test_fail(__FILE__, __LINE__, "session (level %d): %s", level, err.message);
        s = NULL;
    }
    return s;
}

char *af_test_capture(const af_session *s, void (*write)(const af_session *, FILE *)) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    write(s, f);
    fclose(f);
    return text;
}

int64_t af_test_count_beyond(const af_tensor *got, const af_tensor *want, double rtol, double atol) {
    const int64_t n = want ? af_tensor_numel(want) : -1;
    if (!got || !want || af_tensor_numel(got) != n || (n > 0 && (!got->data || !want->data))) {
        af_test_fail(__FILE__, __LINE__, "af_test_count_beyond: %lld values against %lld",
                     got ? (long long)af_tensor_numel(got) : -1LL, (long long)n);
        return 0;
    }
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        const double x = ((const float *)got->data)[i], y = ((const float *)want->data)[i];
        bad += !(fabs(x - y) <= atol + rtol * fabs(y));
    }
    return bad;
}

void af_test_write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0) af_test_fail(__FILE__, __LINE__, "cannot write %s", path);
    if (f) fclose(f);
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const struct test_entry *)a)->name, ((const struct test_entry *)b)->name);
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    qsort(tests, (size_t)n_tests, sizeof tests[0], by_name);
    int pass = 0, fail = 0;
    for (int i = 0; i < n_tests; i++) {
        if (filter && !strstr(tests[i].name, filter)) continue;
        current_failures = 0;
        tests[i].fn();
        if (current_failures) {
            fail++;
            printf("FAIL %s\n", tests[i].name);
        } else {
            pass++;
            printf("PASS %s\n", tests[i].name);
        }
        fflush(stdout);
    }
    printf("unit: %d passed, %d failed\n", pass, fail);
    return fail ? 1 : 0;
}
