/* Config "winograd": false keeps every 3x3 convolution on the direct kernels, at every fusion
 * level, in the verify mode's unfused reference too, and the outputs still match ONNX Runtime's.
 * resnet_small runs one F(4x4) and one F(2x2) Winograd convolution by default (its other 3x3
 * convolutions have stride 2). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autofusion.h"
#include "unit.h"

static int count(const char *text, const char *what) {
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

/* Runs the session once, profiled, on the fixture's inputs; its output must match the ONNX
 * Runtime reference (rtol 1e-3, atol 1e-4). Returns the number of Winograd steps it ran (-1: the
 * run failed). */
static int run_and_count_winograd(af_session *s, const af_test_tensors *in, const af_test_tensors *ref,
                                  const char *what) {
    af_error err = {0};
    CHECK(af_session_set_profiling(s, 1, &err) == AF_OK);
    if (af_session_run(s, in->n, (const char *const *)in->names, in->t, &err) != AF_OK) {
        af_test_fail(__FILE__, __LINE__, "%s: %s", what, err.message);
        return -1;
    }
    const int64_t bad = af_test_count_beyond(af_session_output(s, 0), &ref->t[0], 1e-3, 1e-4);
    if (bad) af_test_fail(__FILE__, __LINE__, "%s: %lld outputs differ from ONNX Runtime's", what, (long long)bad);
    char *profile = af_test_capture(s, af_session_profile_write_json); /* a "kernel" per step */
    const int k = count(profile, "\"kernel\":\"f32_conv3x3_winograd_");
    free(profile);
    return k;
}

AF_TEST(winograd_config_off_runs_direct_convs) {
    char dir[1024], off[256], verify[256];
    snprintf(dir, sizeof dir, "%s/models/resnet_small", af_test_dir());
    snprintf(off, sizeof off, "/tmp/af_winograd_off_%d.json", (int)getpid());
    snprintf(verify, sizeof verify, "/tmp/af_winograd_verify_%d.json", (int)getpid());
    af_test_write_file(off, "{\"winograd\": false}");
    /* At tolerance 0 the check passes only if the unfused reference runs the same conv kernels as
     * the fused steps (it backs out two groups when the reference keeps Winograd). */
    af_test_write_file(verify,
                       "{\"winograd\": false, \"verify\": true, \"verify_tolerance\": {\"rtol\": 0, \"atol\": 0}}");
    af_model *m = af_test_fixture("resnet_small");
    af_test_tensors in = {0}, ref = {0};
    if (m && af_test_read_set(dir, "input", &in) && af_test_read_set(dir, "output", &ref)) {
        const struct {
            int level;
            const char *config;
            bool winograd;
        } cases[] = {{3, NULL, true}, {0, NULL, true}, {3, off, false}, {1, off, false}, {0, off, false},
                     {3, verify, false}};
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            char what[320];
            snprintf(what, sizeof what, "level %d, config %s", cases[c].level,
                     cases[c].config ? cases[c].config : "default");
            af_session *s = af_test_session(m, cases[c].level, cases[c].config);
            if (!s) continue;
            const int k = run_and_count_winograd(s, &in, &ref, what);
            if (cases[c].winograd && k != 2)
                af_test_fail(__FILE__, __LINE__, "%s: %d Winograd steps, expected 2", what, k);
            if (!cases[c].winograd && k != 0)
                af_test_fail(__FILE__, __LINE__, "%s: %d Winograd steps, expected none", what, k);
            if (cases[c].config == verify) {
                char *report = af_test_capture(s, af_session_fusion_report);
                if (!report || !strstr(report, "verify: 0 fused groups backed out"))
                    af_test_fail(__FILE__, __LINE__, "%s: the verify mode backed out groups:\n%s", what,
                                 report ? report : "(no report)");
                CHECK(report && strstr(report, "; no Winograd (config)"));
                free(report);
            }
            af_session_free(s);
        }
    }
    af_test_tensors_free(&in);
    af_test_tensors_free(&ref);
    af_model_free(m);
    unlink(off);
    unlink(verify);
}
