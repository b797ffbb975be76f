/* The perf analyzer's report (af_session_profile_write) on a real fused plan: every step named by a
 * node of its own (an anchor-less elementwise region too, whose anchor is -1), its kernel,
 * GFLOP/s on the steps with contractions, summing to the run's total, and the share of the two
 * threads' time each step left idle. */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autofusion.h"
#include "unit.h"

/* bert_tiny fused on two threads (af_test_session), with its inputs from its test data. */
typedef struct bert_tiny {
    af_model *m;
    af_session *s;
    af_test_tensors in;
} bert_tiny;

/* False where the fixture is absent (a skip) or a part failed to load (with a failure); either
 * way bert_tiny_close frees what was made. */
static bool bert_tiny_open(bert_tiny *b) {
    memset(b, 0, sizeof *b);
    b->m = af_test_fixture("bert_tiny");
    if (!b->m) return false;
    b->s = af_test_session(b->m, 3, NULL);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/models/bert_tiny", af_test_dir());
    return af_test_read_set(dir, "input", &b->in) && b->s != NULL;
}

static af_status bert_tiny_run(bert_tiny *b, af_error *err) {
    return af_session_run(b->s, b->in.n, (const char *const *)b->in.names, b->in.t, err);
}

static void bert_tiny_close(bert_tiny *b) {
    af_test_tensors_free(&b->in);
    af_session_free(b->s);
    af_model_free(b->m);
}

AF_TEST(profile_names_every_step_and_rates_contractions) {
    bert_tiny b;
    af_error err;
    if (bert_tiny_open(&b)) {
        af_session *s = b.s;
        CHECK_EQ_INT(af_session_set_profiling(s, 1, &err), AF_OK);
        CHECK_EQ_INT(bert_tiny_run(&b, &err), AF_OK);
        char *text = af_test_capture(s, af_session_profile_write);
        CHECK(text != NULL);
        if (text) {
            /* The mask's Cast+Sub+Mul is one discovered region: named by its last node. */
            CHECK(strstr(text, "Cast+Sub+Mul '/Mul' [fused_elementwise_region]") != NULL);
            CHECK(strstr(text, "(null)") == NULL);
            CHECK(strstr(text, "threads: 2, idle ") != NULL);
            double total = 0, sum = 0, slack = 0;
            const char *c = strstr(text, "contractions: ");
            CHECK(c != NULL);
            if (c) total = atof(c + strlen("contractions: "));
            char *kinds = strstr(text, "by kind:"); /* the per-step lines end there */
            CHECK(kinds != NULL);
            if (kinds) *kinds = '\0';
            int rated = 0, steps = 0, idle_ok = 0, serial_half = 0;
            for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                int step;
                double ms, pct, rate, idle = -1;
                char rest[16];
                if (sscanf(line, "%d %lf %lf%% %15s %lf%%", &step, &ms, &pct, rest, &idle) < 4) continue;
                steps++;
                if (idle >= 0 && idle <= 100) idle_ok++;
                /* A step without a pool job (Unsqueeze's reference kernel) holds one thread of two. */
                if (strstr(line, "Unsqueeze '/Unsqueeze' [reference]")) serial_half = idle == 50.0;
                if (sscanf(rest, "%lf", &rate) == 1) {
                    sum += rate * ms / 1000.0; /* GFLOP/s x ms = MFLOP; GFLOP as the total */
                    /* What the printing can account for: the rate to 0.1 GFLOP/s, ms to 1e-4. */
                    slack += (0.05 * ms + (rate + 0.05) * 0.00005) / 1000.0;
                    rated++;
                }
            }
            CHECK_EQ_INT(steps, af_session_n_steps(s));
            CHECK_EQ_INT(idle_ok, steps);
            CHECK(serial_half);
            CHECK(rated > 0 && rated < steps);
            CHECK(total > 0);
            /* The rates are printed to 0.1 GFLOP/s, the total to 4 digits: the sum may miss it by
             * what that rounding allows and no more. A fixed 2% held where the kernels run fast,
             * not on the scalar kernels under the sanitizers (0.0257 against 0.0263), whose
             * rates are a few GFLOP/s. */
            CHECK_NEAR(sum, total, slack, 0.0005);
            free(text);
        }
    }
    bert_tiny_close(&b);
}

/* The profile as JSON (bench --json --profile): valid, one entry per step whose times add up to the
 * run's, the kind and kernel of each, gflops on contractions only, and the idle share (exactly one
 * half on a step without a pool job, on two threads). Before any profiled run: null. */
AF_TEST(profile_as_json_lists_every_step) {
    bert_tiny b;
    af_error err;
    if (bert_tiny_open(&b)) {
        af_session *s = b.s;
        char *text = af_test_capture(s, af_session_profile_write_json);
        CHECK(text && strcmp(text, "null") == 0);
        free(text);
        CHECK_EQ_INT(af_session_n_threads(s), 2);
        CHECK_EQ_INT(af_session_set_profiling(s, 1, &err), AF_OK);
        for (int r = 0; r < 2; r++) CHECK_EQ_INT(bert_tiny_run(&b, &err), AF_OK);
        text = af_test_capture(s, af_session_profile_write_json);
        cJSON *root = text ? cJSON_Parse(text) : NULL;
        CHECK(root != NULL);
        const cJSON *steps = cJSON_GetObjectItemCaseSensitive(root, "steps");
        CHECK(cJSON_IsArray(steps));
        CHECK_EQ_INT(cJSON_GetArraySize(steps), af_session_n_steps(s));
        CHECK_EQ_INT((int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(root, "runs")), 2);
        CHECK_EQ_INT((int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(root, "threads")), 2);
        const double total = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(root, "ms_per_run"));
        const double idle = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(root, "idle_share"));
        CHECK(total > 0 && idle >= 0 && idle <= 1);
        double sum = 0;
        int rated = 0, serial_half = 0, named = 0;
        const cJSON *st;
        cJSON_ArrayForEach(st, steps) {
            sum += cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(st, "ms"));
            const cJSON *gflops = cJSON_GetObjectItemCaseSensitive(st, "gflops");
            const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "kind"));
            const char *node = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "node"));
            const char *kernel = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "kernel"));
            const double share = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(st, "idle_share"));
            CHECK(cJSON_IsNumber(gflops) || cJSON_IsNull(gflops));
            if (cJSON_IsNumber(gflops)) rated++;
            CHECK(share >= 0 && share <= 1);
            CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(st, "ops")) >= 1);
            if (kind && node && kernel) named++;
            if (node && strcmp(node, "/Unsqueeze") == 0) {
                CHECK(cJSON_IsNull(gflops));
                serial_half = share == 0.5;
            }
        }
        CHECK(rated > 0 && rated < af_session_n_steps(s));
        CHECK_EQ_INT(named, af_session_n_steps(s));
        CHECK(serial_half);
        CHECK_NEAR(sum, total, 1e-9, 1e-9);
        cJSON_Delete(root);
        free(text);
    }
    bert_tiny_close(&b);
}
