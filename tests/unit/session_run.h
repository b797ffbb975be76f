/*
 * Runs a model once in a session of its own, for the end-to-end fusion tests: the output copied
 * out, and the session's fusion report with its step count and ISA appended.
 *
 *   int64_t n;
 *   char *report = NULL;
 *   float *y = af_test_session_output(model, &opts, &x, &n, &report);   // free(y), free(report)
 */
#ifndef AF_TESTS_UNIT_SESSION_RUN_H
#define AF_TESTS_UNIT_SESSION_RUN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autofusion.h"
#include "ir/tensor.h"
#include "unit.h"

/* Output 0 of m for its one input "in0" = x, copied (NULL on failure), *numel its floats. With
 * report, *report gets the fusion report and a last line "steps N isa ISA". */
static inline float *af_test_session_output(af_model *m, const af_session_options *o, const af_tensor *x,
                                            int64_t *numel, char **report) {
    af_session *s = NULL;
    af_error err = {0};
    float *out = NULL;
    if (af_session_create(m, o, &s, &err) != AF_OK) return NULL;
    const char *names[1] = {"in0"};
    if (af_session_run(s, 1, names, x, &err) == AF_OK) {
        const af_tensor *y = af_session_output(s, 0);
        *numel = (int64_t)(y->nbytes / sizeof(float));
        if ((out = malloc(y->nbytes))) memcpy(out, y->data, y->nbytes);
    }
    if (report) {
        size_t len = 0;
        FILE *f = open_memstream(report, &len);
        if (f) {
            af_session_fusion_report(s, f);
            fprintf(f, "steps %d isa %s\n", af_session_n_steps(s), af_session_isa(s));
            fclose(f);
        }
    }
    af_session_free(s);
    return out;
}

/* Runs sessions a and b on one random float input of shape dims[4] (values from frand, named
 * `name`) and returns how many elements of output 0 differ beyond rtol/atol; -1 when a run fails
 * or the outputs' element counts differ. */
static inline int64_t af_test_compare_runs(af_session *a, af_session *b, const char *name, const int64_t dims[4],
                                           float (*frand)(void), double rtol, double atol) {
    const int64_t numel = dims[0] * dims[1] * dims[2] * dims[3];
    float *xd = malloc((size_t)numel * sizeof *xd);
    if (!xd) return -1;
    for (int64_t k = 0; k < numel; k++) xd[k] = frand();
    af_tensor in = {.dtype = AF_DTYPE_FLOAT, .rank = 4, .dims = {dims[0], dims[1], dims[2], dims[3]}, .data = xd};
    const char *names[1] = {name};
    af_error err = {0};
    int64_t bad = -1;
    if (af_session_run(a, 1, names, &in, &err) == AF_OK && af_session_run(b, 1, names, &in, &err) == AF_OK) {
        const af_tensor *ya = af_session_output(a, 0), *yb = af_session_output(b, 0);
        if (ya && yb && af_tensor_numel(ya) == af_tensor_numel(yb) && ya->dims[0] == dims[0])
            bad = af_test_count_beyond(ya, yb, rtol, atol);
    }
    free(xd);
    return bad;
}

#endif
