/* Reading a fixture's test data set (see unit.h). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"

bool af_test_read_set(const char *model_dir, const char *kind, af_test_tensors *x) {
    memset(x, 0, sizeof *x);
    for (int i = 0;; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/test_data_set_0/%s_%d.pb", model_dir, kind, i);
        if (access(path, R_OK) != 0) break;
        if (i == AF_TEST_MAX_TENSORS) {
            af_test_fail(__FILE__, __LINE__, "%s: more than %d test tensors", path, AF_TEST_MAX_TENSORS);
            af_test_tensors_free(x);
            return false;
        }
        af_error err = {0};
        if (af_tensor_read_pb(path, &x->t[i], &x->names[i], &err) != AF_OK) {
            af_test_fail(__FILE__, __LINE__, "%s", err.message); /* it names the file */
            af_test_tensors_free(x);
            return false;
        }
        x->n = i + 1;
    }
    if (x->n == 0) af_test_fail(__FILE__, __LINE__, "%s/test_data_set_0: no %s_0.pb", model_dir, kind);
    return x->n > 0;
}

void af_test_tensors_free(af_test_tensors *x) {
    for (int i = 0; i < x->n; i++) {
        af_tensor_free_data(&x->t[i]);
        free(x->names[i]);
    }
    memset(x, 0, sizeof *x);
}
