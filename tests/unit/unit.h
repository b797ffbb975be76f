/*
 * A minimal unit-test harness. Tests register themselves; main.c runs them all (or those whose
 * name contains argv[1]) and prints "N passed, N failed".
 *
 *   AF_TEST(graph_add_value) {
 *       CHECK(af_graph_add_value(g, "x", NULL) == 0);
 *       CHECK_EQ_INT(g->n_values, 1);
 *   }
 */
#ifndef AF_TESTS_UNIT_H
#define AF_TESTS_UNIT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "autofusion.h"

typedef void (*af_test_fn)(void);
void af_test_register(const char *name, af_test_fn fn);
/* Records a failed check; tests continue so one run shows every failure. */
void af_test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Folder of the source tree's tests/ (for fixtures), from AF_TEST_DIR or "tests". */
const char *af_test_dir(void);
/* The model of fixture `name` (tests/models/NAME/model.onnx), or NULL with a failure recorded. */
af_model *af_test_fixture(const char *name);
/* A session at fusion level `level` (-1: the config's) on 2 threads with config_path (NULL: the
 * defaults), or NULL with a failure recorded. */
af_session *af_test_session(const af_model *m, int level, const char *config_path);
/* What write (af_session_fusion_report, af_session_profile_write, ...) printed of s, as a string
 * to free; NULL when out of memory. */
char *af_test_capture(const af_session *s, void (*write)(const af_session *, FILE *));
/* The float32 values of got beyond atol + rtol |want| of want's (NaN counts as beyond), computed
 * in double. A NULL tensor or data, or a different element count, records a failure and counts 0. */
int64_t af_test_count_beyond(const af_tensor *got, const af_tensor *want, double rtol, double atol);
/* Writes text to path (a config or rules file for a test), recording a failure if it cannot. */
void af_test_write_file(const char *path, const char *text);

/* Tensors of a fixture's test data set, with the names their files give (NULL where a file has
 * none). */
#define AF_TEST_MAX_TENSORS 16
typedef struct af_test_tensors {
    int n;
    char *names[AF_TEST_MAX_TENSORS];
    af_tensor t[AF_TEST_MAX_TENSORS];
} af_test_tensors;
/* Reads model_dir/test_data_set_0/KIND_0.pb, KIND_1.pb, ... (kind "input" or "output") up to
 * the first absent file. False, with a failure recorded and nothing held, when a file does not
 * parse, there is none or there are more than AF_TEST_MAX_TENSORS. */
bool af_test_read_set(const char *model_dir, const char *kind, af_test_tensors *x);
void af_test_tensors_free(af_test_tensors *x);

#define AF_TEST(name)                                                                              \
    static void test_##name(void);                                                                 \
    __attribute__((constructor)) static void register_##name(void) {                               \
        af_test_register(#name, test_##name);                                                      \
    }                                                                                              \
    static void test_##name(void)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) af_test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);                         \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                         \
    do {                                                                                           \
        long long va_ = (long long)(a), vb_ = (long long)(b);                                      \
        if (va_ != vb_) af_test_fail(__FILE__, __LINE__, "%s == %lld, expected %s == %lld", #a, va_, #b, vb_); \
    } while (0)

/* Checks |a-b| <= atol + rtol*|b|. */
#define CHECK_NEAR(a, b, atol, rtol)                                                               \
    do {                                                                                           \
        double va_ = (double)(a), vb_ = (double)(b);                                               \
        double d_ = va_ > vb_ ? va_ - vb_ : vb_ - va_;                                             \
        if (!(d_ <= (atol) + (rtol) * (vb_ < 0 ? -vb_ : vb_)))                                     \
            af_test_fail(__FILE__, __LINE__, "%s = %.9g, expected %.9g", #a, va_, vb_);            \
    } while (0)

#endif
