/* Every fusion policy end to end, on the real-model fixtures: a session whose config gives every
 * family one policy must give the unfused session's outputs (and ONNX Runtime's, within the
 * fixtures' tolerance), and accept the expected number of groups. The hardware figures are fixed
 * in the config, so the cost decisions do not depend on this machine:
 *  - never: no group, as many steps as the unfused plan;
 *  - always: every legal candidate, overlaps resolved by gain;
 *  - aggressive: those not predicted to be slower;
 *  - memory_aware: those past the score threshold that do not raise peak memory.
 * The counts below were read off the reports at the commit that added this test; a change in them
 * is a change in what the pattern or cost layer decides, to be explained in that commit. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autofusion.h"
#include "kernels/fast/pointwise_depthwise.h"
#include "util/cpu.h"
#include "unit.h"

static const char *const policies[] = {"never", "always", "aggressive", "memory_aware"};

typedef struct fixture {
    const char *name;
    int groups[4]; /* per policy, in the order above, with no expand + depthwise pair fused */
    /* Expand + depthwise pairs built as one pointwise_depthwise group (each in place of two) by
     * the accepting policies, where the fused kernel runs (AVX-512; elsewhere none): under the
     * 1 MiB gate, and where the gate is 0 (af_pwdw_min_expanded_bytes: Intel, Zen 4), every pair within
     * the kernel's recompute bound. */
    int pairs_gated, pairs_ungated;
} fixture;

static bool write_config(const char *path, const char *policy) {
    FILE *f = fopen(path, "w");
    if (!f) return false;
    fprintf(f,
            "{\"hardware\": {\"peak_gflops\": 100, \"bandwidth_gbs\": 20}, \"fusion_policy\": {\"conv_bn_relu\": "
            "\"%s\", \"conv_residual\": \"%s\", \"squeeze_excite\": \"%s\", \"pointwise_depthwise\": \"%s\", "
            "\"matmul_add\": \"%s\", \"layernorm\": \"%s\", \"attention_blocks\": \"%s\", \"elementwise_chain\": "
            "\"%s\"}}\n",
            policy, policy, policy, policy, policy, policy, policy, policy);
    return fclose(f) == 0;
}

/* "fusion level 3, strategy X: N groups accepted of M candidates" -> N, or -1. */
static int accepted_groups(const af_session *s) {
    char *text = af_test_capture(s, af_session_fusion_report);
    int n = -1;
    const char *p = text ? strstr(text, ": ") : NULL;
    if (p && strstr(text, "groups accepted")) n = atoi(p + 2);
    free(text);
    return n;
}

static af_status run(af_session *s, int n_in, const char *const *names, const af_tensor *in, af_tensor *out) {
    af_status st = af_session_run(s, n_in, names, in, NULL);
    const af_tensor *y = st == AF_OK ? af_session_output(s, 0) : NULL;
    if (!y) return st == AF_OK ? AF_ERR_RUNTIME : st;
    *out = *y;
    out->data = malloc(y->nbytes ? y->nbytes : 1);
    if (out->data) memcpy(out->data, y->data, y->nbytes);
    return out->data ? AF_OK : AF_ERR_OUT_OF_MEMORY;
}

static void check_fixture(const fixture *fx, const char *cfg_path) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/models/%s", af_test_dir(), fx->name);
    af_model *m = af_test_fixture(fx->name);
    af_test_tensors in;
    if (!m || !af_test_read_set(dir, "input", &in)) {
        af_model_free(m);
        return;
    }
    const char *const *names = (const char *const *)in.names;
    af_session_options o = af_session_options_default();
    o.n_threads = 2;
    o.fusion_level = 0;
    af_session *plain = NULL;
    CHECK(af_session_create(m, &o, &plain, NULL) == AF_OK);
    af_tensor want = {0};
    CHECK(plain && run(plain, in.n, names, in.t, &want) == AF_OK);
    for (int p = 0; p < 4 && want.data; p++) {
        CHECK(write_config(cfg_path, policies[p]));
        af_session_options fo = af_session_options_default();
        fo.n_threads = 2;
        fo.config_path = cfg_path;
        af_session *s = NULL;
        CHECK(af_session_create(m, &fo, &s, NULL) == AF_OK);
        if (!s) continue;
        const int groups = accepted_groups(s);
        const int pairs = af_cpu_isa() != AF_ISA_AVX512            ? 0
                          : af_pwdw_min_expanded_bytes() == 0 ? fx->pairs_ungated
                                                              : fx->pairs_gated;
        const int want_groups = fx->groups[p] - (p > 0 ? pairs : 0);
        if (groups != want_groups)
            af_test_fail(__FILE__, __LINE__, "%s, policy %s: %d groups accepted, expected %d", fx->name, policies[p],
                         groups, want_groups);
        if (p == 0) CHECK_EQ_INT(af_session_n_steps(s), af_session_n_steps(plain));
        else CHECK(af_session_n_steps(s) < af_session_n_steps(plain));
        af_tensor got = {0};
        CHECK(run(s, in.n, names, in.t, &got) == AF_OK);
        const int64_t bad = af_test_count_beyond(&got, &want, 1e-3, 1e-4);
        if (bad) af_test_fail(__FILE__, __LINE__, "%s, policy %s: %lld outputs differ from unfused", fx->name,
                              policies[p], (long long)bad);
        free(got.data);
        af_session_free(s);
    }
    free(want.data);
    af_session_free(plain);
    af_test_tensors_free(&in);
    af_model_free(m);
}

AF_TEST(policies_end_to_end_on_fixtures) {
    char cfg_path[300];
    const char *t = getenv("TMPDIR");
    snprintf(cfg_path, sizeof cfg_path, "%s/af_policy_XXXXXX", t && *t ? t : "/tmp");
    int fd = mkstemp(cfg_path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    static const fixture fixtures[] = {
        /* With these figures every candidate of the CNNs and of bert_tiny pays and none raises
         * peak memory, so the three accepting policies agree there; in bert_tiny_dynamic one group
         * (symbolic dims taken as 64) raises peak activations by 2 MiB, which memory_aware refuses. */
        {"resnet_small", {0, 16, 16, 16}, 0, 0},
        /* None of its pairs reaches the gate; ungated, 11 are built (10 expand + depthwise, and
         * the stem + first depthwise conv). */
        {"mobilenet_v3_small", {0, 40, 40, 40}, 0, 11},
        /* 35 conv + ReLU6, 10 residual: 45. Of the 16 expand + depthwise pairs and the stem's, 3
         * pass the gate (the others decline, their expanded tensors under 1 MiB, and their two
         * conv groups run): 42; ungated, 28. */
        {"mobilenet_v2_small", {0, 45, 45, 45}, 3, 17},
        {"bert_tiny", {0, 11, 11, 11}, 0, 0}, /* per layer Q, K, V and attention: one group */
        {"bert_tiny_dynamic", {0, 17, 17, 16}, 0, 0},
    };
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) check_fixture(&fixtures[i], cfg_path);
    remove(cfg_path);
}
