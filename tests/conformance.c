/*
 * Conformance runner over test folders in the ONNX backend-test layout: DIR/<test>/model.onnx and
 * DIR/<test>/test_data_set_N/{input,output}_K.pb. Used for the ONNX node tests and for the real-model
 * fixtures. A model autofusion cannot load because it is unsupported is SKIPped with the reason;
 * every other mismatch FAILs.
 *
 *   test_conformance [--dir DIR] [--filter SUBSTR] [--rtol R] [--atol A] [--level N]
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "autofusion.h"

#define MAX_IO 64

static double rel_tol = 1e-3, abs_tol = 1e-5;
static int fusion_level = -1; /* -1: the default config's */

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int list_dir(const char *dir, const char *prefix, char ***out) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0, cap = 64;
    char **names = malloc((size_t)cap * sizeof *names);
    struct dirent *ent;
    while ((ent = readdir(d))) {
        if (ent->d_name[0] == '.' || strncmp(ent->d_name, prefix, strlen(prefix)) != 0) continue;
        if (n == cap) names = realloc(names, (size_t)(cap *= 2) * sizeof *names);
        names[n++] = strdup(ent->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    *out = names;
    return n;
}

static void free_list(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

static int file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

static double get(const af_tensor *t, int64_t i) {
    switch (t->dtype) {
    case AF_DTYPE_FLOAT: return ((const float *)t->data)[i];
    case AF_DTYPE_DOUBLE: return ((const double *)t->data)[i];
    case AF_DTYPE_INT64: return (double)((const int64_t *)t->data)[i];
    case AF_DTYPE_INT32: return ((const int32_t *)t->data)[i];
    case AF_DTYPE_INT16: return ((const int16_t *)t->data)[i];
    case AF_DTYPE_INT8: return ((const int8_t *)t->data)[i];
    case AF_DTYPE_UINT64: return (double)((const uint64_t *)t->data)[i];
    case AF_DTYPE_UINT32: return ((const uint32_t *)t->data)[i];
    case AF_DTYPE_UINT16: return ((const uint16_t *)t->data)[i];
    case AF_DTYPE_UINT8:
    case AF_DTYPE_BOOL: return ((const uint8_t *)t->data)[i];
    case AF_DTYPE_FLOAT16: {
        uint16_t h = ((const uint16_t *)t->data)[i];
        int e = (h >> 10) & 31, m = h & 1023;
        double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
        return h & 0x8000 ? -v : v;
    }
    case AF_DTYPE_BFLOAT16: {
        uint32_t bits = (uint32_t)((const uint16_t *)t->data)[i] << 16;
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    default: return NAN;
    }
}

static int is_float(af_dtype d) {
    return d == AF_DTYPE_FLOAT || d == AF_DTYPE_DOUBLE || d == AF_DTYPE_FLOAT16 || d == AF_DTYPE_BFLOAT16;
}

/* Compares got against want; fills why on mismatch. */
static int compare(const af_tensor *got, const af_tensor *want, char *why, size_t n) {
    if (got->dtype != want->dtype) {
        snprintf(why, n, "dtype %s, expected %s", af_dtype_name(got->dtype), af_dtype_name(want->dtype));
        return 0;
    }
    int same = got->rank == want->rank;
    for (int d = 0; same && d < got->rank; d++) same = got->dims[d] == want->dims[d];
    if (!same) {
        char a[128] = "", b[128] = "";
        for (int d = 0; d < got->rank; d++) snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", d ? "," : "", (long long)got->dims[d]);
        for (int d = 0; d < want->rank; d++) snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", d ? "," : "", (long long)want->dims[d]);
        snprintf(why, n, "shape [%s], expected [%s]", a, b);
        return 0;
    }
    int64_t numel = 1;
    for (int d = 0; d < want->rank; d++) numel *= want->dims[d];
    int64_t bad = 0, first = -1;
    double worst = 0;
    for (int64_t i = 0; i < numel; i++) {
        double g = get(got, i), w = get(want, i);
        int ok;
        if (is_float(want->dtype)) {
            if (isnan(w)) ok = isnan(g);
            else if (isinf(w)) ok = g == w;
            else ok = fabs(g - w) <= abs_tol + rel_tol * fabs(w);
            if (!isnan(g) && !isnan(w) && !isinf(w) && fabs(g - w) > worst) worst = fabs(g - w);
        } else {
            ok = g == w;
        }
        if (!ok && bad++ == 0) first = i;
    }
    if (bad) {
        snprintf(why, n, "%lld of %lld values differ; first at %lld: got %.9g, expected %.9g (max abs err %.3g)",
                 (long long)bad, (long long)numel, (long long)first, get(got, first), get(want, first), worst);
        return 0;
    }
    return 1;
}

typedef enum { R_PASS, R_FAIL, R_SKIP, R_DEVIATION } result;

/* Tests whose expected data autofusion deliberately does not reproduce, each with the reason.
 * They still run and are reported; they do not count as passes. */
static const struct {
    const char *test, *reason;
} deviations[] = {
    {"test_cast_FLOAT_to_BFLOAT16", "ONNX 1.12's data truncates to bfloat16; autofusion rounds to nearest even, "
                                    "as ONNX Runtime and later ONNX releases do"},
#define LIKE_SHAPE "the test data's 'like' input is [1] but the model declares [3,4]; autofusion rejects inputs " \
                   "that contradict the declared shape, as ONNX Runtime does"
    {"test_castlike_BFLOAT16_to_FLOAT", LIKE_SHAPE},
    {"test_castlike_BFLOAT16_to_FLOAT_expanded", LIKE_SHAPE},
    {"test_castlike_FLOAT_to_BFLOAT16", LIKE_SHAPE "; and the bfloat16 rounding of test_cast_FLOAT_to_BFLOAT16"},
    {"test_castlike_FLOAT_to_BFLOAT16_expanded", LIKE_SHAPE "; and the bfloat16 rounding of test_cast_FLOAT_to_BFLOAT16"},
};

static const char *deviation_reason(const char *test) {
    for (size_t i = 0; i < sizeof deviations / sizeof deviations[0]; i++)
        if (!strcmp(deviations[i].test, test)) return deviations[i].reason;
    return NULL;
}

/* ONNX 1.12's test data stores bfloat16 tensors with data_type uint16 (same bits). */
static void relabel_bfloat16(af_tensor *t, af_dtype declared) {
    if (declared == AF_DTYPE_BFLOAT16 && t->dtype == AF_DTYPE_UINT16) t->dtype = AF_DTYPE_BFLOAT16;
}

static result run_test(const char *dir, const char *name, char *why, size_t nwhy) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/model.onnx", dir, name);
    af_error err = {0};
    af_model *model = NULL;
    af_session *sess = NULL;
    af_status st = af_model_load(path, NULL, &model, &err);
    if (st != AF_OK) {
        snprintf(why, nwhy, "load: %s", err.message);
        return st == AF_ERR_UNSUPPORTED ? R_SKIP : R_FAIL;
    }
    result r = R_PASS;
    af_session_options opts = af_session_options_default();
    opts.fusion_level = fusion_level;
    if (af_session_create(model, &opts, &sess, &err) != AF_OK) {
        snprintf(why, nwhy, "session: %s", err.message);
        af_model_free(model);
        return R_FAIL;
    }
    char casedir[4096];
    snprintf(casedir, sizeof casedir, "%s/%s", dir, name);
    char **sets;
    int n_sets = list_dir(casedir, "test_data_set_", &sets);
    if (n_sets <= 0) {
        snprintf(why, nwhy, "no test_data_set_* folders");
        r = R_FAIL;
    }
    for (int s = 0; r == R_PASS && s < n_sets; s++) {
        af_tensor ins[MAX_IO], wants[MAX_IO];
        const char *names[MAX_IO];
        int n_in = 0, n_out = 0;
        for (; n_in < MAX_IO; n_in++) {
            snprintf(path, sizeof path, "%s/%s/input_%d.pb", casedir, sets[s], n_in);
            if (!file_exists(path)) break;
            if (af_tensor_read_pb(path, &ins[n_in], NULL, &err) != AF_OK) {
                snprintf(why, nwhy, "input: %s", err.message);
                r = err.status == AF_ERR_UNSUPPORTED ? R_SKIP : R_FAIL;
                break;
            }
            af_value_info info;
            if (af_model_input_info(model, n_in, &info) != AF_OK) {
                snprintf(why, nwhy, "test gives input %d, the model has %d inputs", n_in, af_model_n_inputs(model));
                r = R_FAIL;
                af_tensor_free_data(&ins[n_in]);
                break;
            }
            names[n_in] = info.name;
            relabel_bfloat16(&ins[n_in], info.dtype);
        }
        for (; r == R_PASS && n_out < MAX_IO; n_out++) {
            snprintf(path, sizeof path, "%s/%s/output_%d.pb", casedir, sets[s], n_out);
            if (!file_exists(path)) break;
            if (af_tensor_read_pb(path, &wants[n_out], NULL, &err) != AF_OK) {
                snprintf(why, nwhy, "expected output: %s", err.message);
                r = err.status == AF_ERR_UNSUPPORTED ? R_SKIP : R_FAIL;
                break;
            }
            af_value_info info;
            if (af_model_output_info(model, n_out, &info) == AF_OK) relabel_bfloat16(&wants[n_out], info.dtype);
        }
        if (r == R_PASS && af_session_run(sess, n_in, names, ins, &err) != AF_OK) {
            /* Unsupported only at run time: e.g. training-mode Dropout, whose output is random. */
            snprintf(why, nwhy, "run: %s", err.message);
            r = err.status == AF_ERR_UNSUPPORTED ? R_SKIP : R_FAIL;
        }
        for (int k = 0; r == R_PASS && k < n_out; k++) {
            const af_tensor *got = af_session_output(sess, k);
            char cwhy[400];
            if (!got) {
                snprintf(why, nwhy, "output %d missing", k);
                r = R_FAIL;
            } else if (!compare(got, &wants[k], cwhy, sizeof cwhy)) {
                snprintf(why, nwhy, "%s output %d '%s': %s", sets[s], k, af_session_output_name(sess, k), cwhy);
                r = R_FAIL;
            }
        }
        for (int k = 0; k < n_in; k++) af_tensor_free_data(&ins[k]);
        for (int k = 0; k < n_out; k++) af_tensor_free_data(&wants[k]);
    }
    if (n_sets > 0) free_list(sets, n_sets);
    af_session_free(sess);
    af_model_free(model);
    return r;
}

int main(int argc, char **argv) {
    const char *dir = "/usr/include/onnx/backend/test/data/node", *filter = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
        else if (!strcmp(argv[i], "--rtol") && i + 1 < argc) rel_tol = atof(argv[++i]);
        else if (!strcmp(argv[i], "--atol") && i + 1 < argc) abs_tol = atof(argv[++i]);
        else if (!strcmp(argv[i], "--level") && i + 1 < argc) fusion_level = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--dir DIR] [--filter SUBSTR] [--rtol R] [--atol A] [--level N]\n", argv[0]);
            return 2;
        }
    }
    char **tests;
    int n = list_dir(dir, "", &tests);
    if (n < 0) {
        fprintf(stderr, "cannot read %s\n", dir);
        return 2;
    }
    int pass = 0, fail = 0, skip = 0, deviate = 0;
    for (int i = 0; i < n; i++) {
        if (filter && !strstr(tests[i], filter)) continue;
        char why[1024] = "";
        result r = run_test(dir, tests[i], why, sizeof why);
        const char *reason = deviation_reason(tests[i]);
        if (reason && r == R_FAIL) {
            r = R_DEVIATION;
            printf("DEVIATION %s: %s (%s)\n", tests[i], reason, why);
        }
        if (r == R_PASS) pass++, printf("PASS %s\n", tests[i]);
        else if (r == R_FAIL) fail++, printf("FAIL %s: %s\n", tests[i], why);
        else if (r == R_SKIP) skip++, printf("SKIP %s: %s\n", tests[i], why);
        else deviate++;
        fflush(stdout);
    }
    free_list(tests, n);
    printf("tests in %s\n", dir);
    if (deviate) printf("%d known deviations (listed above with reasons)\n", deviate);
    printf("conformance: %d passed, %d failed, %d skipped\n", pass, fail, skip);
    return fail ? 1 : 0;
}
