/* Tests for the fusion configuration (src/fusion/config.c): defaults, every key, the example files
 * in configs/, every error path, af_parse_size, and out-of-memory at every allocation. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fusion/config.h"
#include "unit.h"
#include "util/alloc.h"

static int str_eq(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

/* Field-by-field, strings by content. */
static int cfg_equal(const af_fusion_config *a, const af_fusion_config *b) {
    if (a->fusion_level != b->fusion_level || a->fusion_aggressiveness != b->fusion_aggressiveness ||
        a->max_fused_ops != b->max_fused_ops || a->max_mem_usage != b->max_mem_usage ||
        a->enable_dynamic_shape != b->enable_dynamic_shape || a->shape_elasticity != b->shape_elasticity ||
        a->lite_mode != b->lite_mode || a->strategy != b->strategy || a->n_rule_files != b->n_rule_files ||
        a->weight_latency != b->weight_latency || a->weight_memory != b->weight_memory ||
        a->weight_energy != b->weight_energy || a->winograd != b->winograd || a->verify != b->verify || a->verify_rtol != b->verify_rtol ||
        a->verify_atol != b->verify_atol || !str_eq(a->hardware_cache, b->hardware_cache) ||
        a->peak_gflops != b->peak_gflops || a->bandwidth_gbs != b->bandwidth_gbs)
        return 0;
    if (memcmp(a->no_fusion_ops, b->no_fusion_ops, sizeof a->no_fusion_ops)) return 0;
    if (memcmp(a->policy, b->policy, sizeof a->policy)) return 0;
    for (int i = 0; i < a->n_rule_files; i++)
        if (!str_eq(a->rule_files[i], b->rule_files[i])) return 0;
    return 1;
}

static int n_no_fusion(const af_fusion_config *c) {
    int n = 0;
    for (int i = 0; i < AF_OP_COUNT; i++) n += c->no_fusion_ops[i];
    return n;
}

AF_TEST(config_defaults) {
    af_fusion_config c;
    af_fusion_config_default(&c);
    CHECK_EQ_INT(c.fusion_level, 3);
    CHECK(c.fusion_aggressiveness == 0.5);
    CHECK_EQ_INT(c.max_fused_ops, 24);
    CHECK_EQ_INT(n_no_fusion(&c), 0);
    for (int f = 0; f < AF_FUSION_FAMILY_COUNT; f++)
        CHECK_EQ_INT(c.policy[f], f == AF_FUSION_ELEMENTWISE ? AF_POLICY_AGGRESSIVE : AF_POLICY_MEMORY_AWARE);
    CHECK(c.max_mem_usage == 0);
    CHECK(c.enable_dynamic_shape);
    CHECK(c.shape_elasticity == 0.25);
    CHECK(!c.lite_mode);
    CHECK_EQ_INT(c.strategy, AF_STRATEGY_AUTO);
    CHECK_EQ_INT(c.n_rule_files, 0);
    CHECK(c.weight_latency == 1.0 && c.weight_memory == 0.25 && c.weight_energy == 0.1);
    CHECK(c.winograd);
    CHECK(!c.verify);
    CHECK(c.verify_rtol == 1e-3 && c.verify_atol == 1e-4);
    CHECK(c.hardware_cache == NULL);
    CHECK(c.peak_gflops == 0 && c.bandwidth_gbs == 0);
    af_fusion_config_free(&c);
    af_fusion_config_free(NULL);
}

AF_TEST(config_names) {
    CHECK(!strcmp(af_fusion_policy_name(AF_POLICY_ALWAYS), "always"));
    CHECK(!strcmp(af_fusion_policy_name(AF_POLICY_MEMORY_AWARE), "memory_aware"));
    CHECK(!strcmp(af_fusion_policy_name(AF_POLICY_AGGRESSIVE), "aggressive"));
    CHECK(!strcmp(af_fusion_policy_name(AF_POLICY_NEVER), "never"));
    CHECK(!strcmp(af_fusion_policy_name(AF_POLICY_COUNT), "unknown"));
    CHECK(!strcmp(af_fusion_strategy_name(AF_STRATEGY_AUTO), "auto"));
    CHECK(!strcmp(af_fusion_strategy_name(AF_STRATEGY_CONSERVATIVE), "conservative"));
    CHECK(!strcmp(af_fusion_strategy_name(AF_STRATEGY_TEMPORAL), "temporal"));
    CHECK(!strcmp(af_fusion_strategy_name(AF_STRATEGY_AGGRESSIVE), "aggressive"));
    CHECK(!strcmp(af_fusion_strategy_name((af_fusion_strategy)-1), "unknown"));
}

static const char full_json[] =
    "{\n"
    "  \"fusion_level\": 3,\n"
    "  \"fusion_aggressiveness\": 0.75,\n"
    "  \"max_fused_ops\": 64,\n"
    "  \"no_fusion_ops\": [\"LayerNorm\", \"BatchNorm\", \"Softmax\"],\n"
    "  \"fusion_policy\": {\"conv_bn_relu\": \"always\", \"conv_residual\": \"never\",\n"
    "                     \"squeeze_excite\": \"aggressive\", \"matmul_add\": \"memory_aware\",\n"
    "                     \"layernorm\": \"never\", \"attention_blocks\": \"aggressive\",\n"
    "                     \"elementwise_chain\": \"always\"},\n"
    "  \"resource_constraints\": {\"max_mem_usage\": \"1.5GB\"},\n"
    "  \"enable_dynamic_shape\": false,\n"
    "  \"shape_elasticity\": 1,\n"
    "  \"lite_mode\": true,\n"
    "  \"strategy\": \"temporal\",\n"
    "  \"rules\": [\"my.rules\", \"/abs/other.rules\"],\n"
    "  \"cost_weights\": {\"latency\": 2.0, \"memory\": 0, \"energy\": 0.5},\n"
    "  \"winograd\": false,\n"
    "  \"verify\": true,\n"
    "  \"verify_tolerance\": {\"rtol\": 0.01, \"atol\": 0},\n"
    "  \"hardware\": {\"cache_file\": \"hw.cache\", \"peak_gflops\": 1200.5, \"bandwidth_gbs\": 80}\n"
    "}\n";

/* abs_rules: the absolute path full_json's second rules file stands for (see write_full_config). */
static void check_full(const af_fusion_config *c, const char *dir, const char *abs_rules) {
    CHECK_EQ_INT(c->fusion_level, 3);
    CHECK(c->fusion_aggressiveness == 0.75);
    CHECK_EQ_INT(c->max_fused_ops, 64);
    CHECK(c->no_fusion_ops[AF_OP_LAYER_NORMALIZATION]);
    CHECK(c->no_fusion_ops[AF_OP_BATCH_NORMALIZATION]);
    CHECK(c->no_fusion_ops[af_op_from_name("Softmax")]);
    CHECK_EQ_INT(n_no_fusion(c), 3);
    CHECK_EQ_INT(c->policy[AF_FUSION_CONV_BN_RELU], AF_POLICY_ALWAYS);
    CHECK_EQ_INT(c->policy[AF_FUSION_CONV_RESIDUAL], AF_POLICY_NEVER);
    CHECK_EQ_INT(c->policy[AF_FUSION_SQUEEZE_EXCITE], AF_POLICY_AGGRESSIVE);
    CHECK_EQ_INT(c->policy[AF_FUSION_MATMUL_ADD], AF_POLICY_MEMORY_AWARE);
    CHECK_EQ_INT(c->policy[AF_FUSION_LAYERNORM], AF_POLICY_NEVER);
    CHECK_EQ_INT(c->policy[AF_FUSION_ATTENTION], AF_POLICY_AGGRESSIVE);
    CHECK_EQ_INT(c->policy[AF_FUSION_ELEMENTWISE], AF_POLICY_ALWAYS);
    CHECK(c->max_mem_usage == 1500000000ull);
    CHECK(!c->enable_dynamic_shape);
    CHECK(c->shape_elasticity == 1.0);
    CHECK(c->lite_mode);
    CHECK_EQ_INT(c->strategy, AF_STRATEGY_TEMPORAL);
    CHECK_EQ_INT(c->n_rule_files, 2);
    char want[512];
    snprintf(want, sizeof want, "%smy.rules", dir);
    CHECK(c->n_rule_files == 2 && str_eq(c->rule_files[0], want));
    CHECK(c->n_rule_files == 2 && str_eq(c->rule_files[1], abs_rules));
    CHECK(c->weight_latency == 2.0 && c->weight_memory == 0 && c->weight_energy == 0.5);
    CHECK(!c->winograd);
    CHECK(c->verify);
    CHECK(c->verify_rtol == 0.01 && c->verify_atol == 0);
    snprintf(want, sizeof want, "%shw.cache", dir);
    CHECK(str_eq(c->hardware_cache, want));
    CHECK(c->peak_gflops == 1200.5 && c->bandwidth_gbs == 80);
}

AF_TEST(config_every_key) {
    af_fusion_config c;
    af_fusion_config_default(&c);
    af_error err = {0};
    CHECK_EQ_INT(af_fusion_config_parse(full_json, &c, &err), AF_OK);
    check_full(&c, "", "/abs/other.rules");
    af_fusion_config_free(&c);
    CHECK(c.hardware_cache == NULL && c.n_rule_files == 0);
}

/* Objects merge over what cfg holds; arrays and scalars replace. */
AF_TEST(config_overlay) {
    af_fusion_config c;
    af_fusion_config_default(&c);
    af_error err = {0};
    CHECK_EQ_INT(af_fusion_config_parse(full_json, &c, &err), AF_OK);
    CHECK_EQ_INT(af_fusion_config_parse("{\"fusion_policy\": {\"matmul_add\": \"never\"},"
                                        " \"no_fusion_ops\": [\"Relu\"], \"rules\": [\"x.rules\"],"
                                        " \"hardware\": {\"cache_file\": null},"
                                        " \"cost_weights\": {\"energy\": 3}}",
                                        &c, &err),
                 AF_OK);
    CHECK_EQ_INT(c.policy[AF_FUSION_MATMUL_ADD], AF_POLICY_NEVER);
    CHECK_EQ_INT(c.policy[AF_FUSION_CONV_BN_RELU], AF_POLICY_ALWAYS);
    CHECK_EQ_INT(n_no_fusion(&c), 1);
    CHECK(c.no_fusion_ops[af_op_from_name("Relu")]);
    CHECK(c.n_rule_files == 1 && str_eq(c.rule_files[0], "x.rules"));
    CHECK(c.hardware_cache == NULL);
    CHECK(c.weight_energy == 3 && c.weight_latency == 2.0);
    CHECK(c.peak_gflops == 1200.5);
    CHECK_EQ_INT(c.fusion_level, 3);
    CHECK_EQ_INT(af_fusion_config_parse("{\"rules\": [], \"no_fusion_ops\": []}", &c, &err), AF_OK);
    CHECK_EQ_INT(c.n_rule_files, 0);
    CHECK_EQ_INT(n_no_fusion(&c), 0);
    CHECK_EQ_INT(af_fusion_config_parse("  {}  ", &c, &err), AF_OK);
    CHECK_EQ_INT(af_fusion_config_parse("{\"resource_constraints\": {\"max_mem_usage\": 1048576}}", &c, &err),
                 AF_OK);
    CHECK(c.max_mem_usage == 1048576);
    CHECK_EQ_INT(
        af_fusion_config_parse("{\"resource_constraints\": {\"max_mem_usage\": \"64KiB\"}}", &c, &err),
        AF_OK);
    CHECK(c.max_mem_usage == 65536);
    af_fusion_config_free(&c);
}

static void config_path(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/../configs/%s", af_test_dir(), name);
}

AF_TEST(config_example_files) {
    char path[512];
    af_error err = {0};
    af_fusion_config def, c;
    af_fusion_config_default(&def);

    af_fusion_config_default(&c);
    config_path(path, sizeof path, "default.json");
    CHECK_EQ_INT(af_fusion_config_load_file(path, &c, &err), AF_OK);
    if (err.status) printf("  %s\n", err.message);
    CHECK(cfg_equal(&c, &def));
    af_fusion_config_free(&c);

    af_fusion_config_default(&c);
    config_path(path, sizeof path, "memory_saving.json");
    CHECK_EQ_INT(af_fusion_config_load_file(path, &c, &err), AF_OK);
    CHECK_EQ_INT(c.strategy, AF_STRATEGY_CONSERVATIVE);
    CHECK(c.max_mem_usage == 512ull << 20);
    CHECK(c.lite_mode);
    CHECK_EQ_INT(c.policy[AF_FUSION_ATTENTION], AF_POLICY_NEVER);
    CHECK(c.weight_memory > c.weight_latency);
    af_fusion_config_free(&c);

    af_fusion_config_default(&c);
    config_path(path, sizeof path, "aggressive.json");
    CHECK_EQ_INT(af_fusion_config_load_file(path, &c, &err), AF_OK);
    CHECK_EQ_INT(c.fusion_level, 3);
    CHECK_EQ_INT(c.strategy, AF_STRATEGY_AGGRESSIVE);
    CHECK_EQ_INT(c.max_fused_ops, AF_FUSION_MAX_NODES);
    CHECK(c.verify);
    af_fusion_config_free(&c);
}

/* Writes `text` (len bytes) to a fresh folder; returns the file path in path and the folder in dir. */
static int write_temp(const char *text, size_t len, char *dir, size_t dn, char *path, size_t pn) {
    snprintf(dir, dn, "/tmp/af_config_XXXXXX");
    if (!mkdtemp(dir)) return 0;
    snprintf(path, pn, "%s/fusion.json", dir);
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    size_t w = fwrite(text, 1, len, f);
    fclose(f);
    return w == len;
}

static void remove_temp(const char *dir, const char *path) {
    unlink(path);
    rmdir(dir);
}

static int write_file_in(const char *dir, const char *name, const char *text) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    fputs(text, f);
    return fclose(f) == 0;
}

static void unlink_in(const char *dir, const char *name) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
}

/* full_json as a file, with the rules files it names: my.rules beside it, and for "/abs/other.rules"
 * the absolute path of other.rules there too (returned in abs_rules). A loaded config reads them. */
static int write_full_config(char *dir, size_t dn, char *path, size_t pn, char *abs_rules, size_t an) {
    if (!write_temp("", 0, dir, dn, path, pn)) return 0;
    snprintf(abs_rules, an, "%s/other.rules", dir);
    const char *at = strstr(full_json, "/abs/other.rules");
    char json[sizeof full_json + 128];
    snprintf(json, sizeof json, "%.*s%s%s", (int)(at - full_json), full_json, abs_rules,
             at + strlen("/abs/other.rules"));
    return write_file_in(dir, "fusion.json", json) &&
           write_file_in(dir, "my.rules", "rule my_gate elementwise_chain\n  node a Relu\n  node b Sigmoid\n"
                                          "  anchor a\n  edge b.0 = a\nend\n") &&
           write_file_in(dir, "other.rules", "rule other_gate elementwise_chain\n  node a Tanh\n  node b Sigmoid\n"
                                             "  anchor a\n  edge b.0 = a\nend\n");
}

static void remove_full_config(const char *dir, const char *path) {
    unlink_in(dir, "my.rules");
    unlink_in(dir, "other.rules");
    remove_temp(dir, path);
}

AF_TEST(config_file_relative_paths) {
    char dir[64], path[128], prefix[128], abs_rules[128];
    CHECK(write_full_config(dir, sizeof dir, path, sizeof path, abs_rules, sizeof abs_rules));
    af_fusion_config c;
    af_fusion_config_default(&c);
    af_error err = {0};
    CHECK_EQ_INT(af_fusion_config_load_file(path, &c, &err), AF_OK);
    if (err.status) printf("  %s\n", err.message);
    snprintf(prefix, sizeof prefix, "%s/", dir);
    check_full(&c, prefix, abs_rules);
    af_fusion_config_free(&c);
    remove_full_config(dir, path);
}

AF_TEST(config_file_errors) {
    af_fusion_config c, def;
    af_fusion_config_default(&c);
    af_fusion_config_default(&def);
    af_error err = {0};
    CHECK_EQ_INT(af_fusion_config_load_file("/nonexistent/dir/fusion.json", &c, &err), AF_ERR_IO);
    CHECK(strstr(err.message, "/nonexistent/dir/fusion.json") != NULL);
    CHECK_EQ_INT(af_fusion_config_load_file("/tmp", &c, &err), AF_ERR_IO);
    CHECK(strstr(err.message, "/tmp") != NULL);
    CHECK_EQ_INT(af_fusion_config_load_file("/dev/zero", &c, &err), AF_ERR_LIMIT);
    CHECK(strstr(err.message, "/dev/zero: larger than") != NULL);
    CHECK_EQ_INT(af_fusion_config_load_file(NULL, &c, &err), AF_ERR_INVALID_ARGUMENT);
    CHECK_EQ_INT(af_fusion_config_parse(NULL, &c, &err), AF_ERR_INVALID_ARGUMENT);
    CHECK_EQ_INT(af_fusion_config_parse("{}", NULL, NULL), AF_ERR_INVALID_ARGUMENT);

    /* Errors from a file's content name the file. */
    char dir[64], path[128];
    const char bad[] = "{\n  \"fusion_level\": 2,\n  \"strategy\": \"fast\"\n}\n";
    CHECK(write_temp(bad, strlen(bad), dir, sizeof dir, path, sizeof path));
    CHECK_EQ_INT(af_fusion_config_load_file(path, &c, &err), AF_ERR_INVALID_ARGUMENT);
    CHECK(strstr(err.message, path) != NULL);
    CHECK(strstr(err.message, "strategy: 'fast' is not one of auto, conservative, temporal, aggressive") !=
          NULL);
    remove_temp(dir, path);

    const char nul[] = "{\"fusion_level\": 1}\0{\"x\": 1}";
    CHECK(write_temp(nul, sizeof nul - 1, dir, sizeof dir, path, sizeof path));
    CHECK_EQ_INT(af_fusion_config_load_file(path, &c, &err), AF_ERR_INVALID_ARGUMENT);
    CHECK(strstr(err.message, "NUL byte at byte 19") != NULL);
    remove_temp(dir, path);

    const char syntax[] = "{\n  \"fusion_level\": 2,\n  oops\n}\n";
    CHECK(write_temp(syntax, strlen(syntax), dir, sizeof dir, path, sizeof path));
    CHECK_EQ_INT(af_fusion_config_load_file(path, &c, &err), AF_ERR_INVALID_ARGUMENT);
    CHECK(strstr(err.message, "line 3") != NULL);
    remove_temp(dir, path);
    CHECK(cfg_equal(&c, &def));
}

/* A loaded config reads its rules files: one that is missing, or does not parse, or takes a rule
 * name already taken (built in or by an earlier file) is an error naming the key, whatever the
 * fusion level, and cfg is left as it was. */
AF_TEST(config_file_rules_checked) {
    static const struct {
        const char *json;
        af_status status;
        const char *want[2]; /* in the message, after the config file's path */
    } bad[] = {
        {"{\"rules\": [\"nonexistent.rules\"]}", AF_ERR_IO,
         {"rules[0]: ", "/nonexistent.rules: cannot open rules file: "}},
        {"{\"fusion_level\": 0, \"rules\": [\"nonexistent.rules\"]}", AF_ERR_IO,
         {"rules[0]: ", "/nonexistent.rules: cannot open rules file: "}},
        {"{\"rules\": [\"good.rules\", \"typo.rules\"]}", AF_ERR_INVALID_ARGUMENT,
         {"rules[1]: ", "/typo.rules:2: unknown op 'Relux'"}},
        {"{\"rules\": [\"good.rules\", \"good.rules\"]}", AF_ERR_INVALID_ARGUMENT, {"rules[1]: ", "good_gate"}},
        {"{\"fusion_level\": 0, \"rules\": [\"builtin_name.rules\"]}", AF_ERR_INVALID_ARGUMENT,
         {"rules[0]: ", "conv_bn_act"}},
    };
    char dir[64], path[128];
    CHECK(write_temp("", 0, dir, sizeof dir, path, sizeof path));
    CHECK(write_file_in(dir, "good.rules", "rule good_gate elementwise_chain\n  node a Relu\n  node b Sigmoid\n"
                                           "  anchor a\n  edge b.0 = a\nend\n"));
    CHECK(write_file_in(dir, "typo.rules", "rule typo elementwise_chain\n  node a Relux\n  node b Sigmoid\n"
                                           "  anchor a\n  edge b.0 = a\nend\n"));
    CHECK(write_file_in(dir, "builtin_name.rules", "rule conv_bn_act conv_bn_relu\n  node c Conv\n  node r Relu\n"
                                                   "  anchor c\n  edge r.0 = c\nend\n"));
    af_fusion_config c, def;
    af_fusion_config_default(&c);
    af_fusion_config_default(&def);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        af_error err = {0};
        CHECK(write_file_in(dir, "fusion.json", bad[i].json));
        af_status st = af_fusion_config_load_file(path, &c, &err);
        char want0[256];
        snprintf(want0, sizeof want0, "%s: %s%s", path, bad[i].want[0], dir);
        if (st != bad[i].status || strncmp(err.message, want0, strlen(want0)) ||
            !strstr(err.message, bad[i].want[1]))
            af_test_fail(__FILE__, __LINE__, "%s: got status %d '%s', want %d '%s...%s'", bad[i].json, (int)st,
                         err.message, (int)bad[i].status, want0, bad[i].want[1]);
        CHECK(cfg_equal(&c, &def));
    }
    /* Files that open and parse are kept, resolved against the config's folder. */
    CHECK(write_file_in(dir, "fusion.json", "{\"rules\": [\"good.rules\"]}"));
    af_error err = {0};
    CHECK_EQ_INT(af_fusion_config_load_file(path, &c, &err), AF_OK);
    char want[256];
    snprintf(want, sizeof want, "%s/good.rules", dir);
    CHECK(c.n_rule_files == 1 && str_eq(c.rule_files[0], want));
    /* The text parser reads no files: its paths are checked when a plan reads them. */
    CHECK_EQ_INT(af_fusion_config_parse("{\"rules\": [\"nonexistent.rules\"]}", &c, &err), AF_OK);
    af_fusion_config_free(&c);
    unlink_in(dir, "good.rules");
    unlink_in(dir, "typo.rules");
    unlink_in(dir, "builtin_name.rules");
    remove_temp(dir, path);
}

/* Each bad text fails with AF_ERR_INVALID_ARGUMENT, a message containing `want`, and cfg unchanged. */
static const struct {
    const char *json, *want;
} bad_configs[] = {
    /* unknown and duplicate keys, at each level */
    {"{\"fusion_levl\": 2}", "fusion_levl: unknown key"},
    {"{\"fusion_policy\": {\"conv_bn_reluu\": \"always\"}}", "fusion_policy.conv_bn_reluu: unknown key"},
    {"{\"resource_constraints\": {\"max_mem\": \"1GB\"}}", "resource_constraints.max_mem: unknown key"},
    {"{\"cost_weights\": {\"power\": 1}}", "cost_weights.power: unknown key"},
    {"{\"verify_tolerance\": {\"tol\": 1}}", "verify_tolerance.tol: unknown key"},
    {"{\"hardware\": {\"gflops\": 1}}", "hardware.gflops: unknown key"},
    {"{\"Fusion_Level\": 2}", "Fusion_Level: unknown key"},
    {"{\"fusion_level\": 1, \"fusion_level\": 2}", "fusion_level: duplicate key"},
    {"{\"fusion_policy\": {\"layernorm\": \"never\", \"layernorm\": \"always\"}}",
     "fusion_policy.layernorm: duplicate key"},
    /* the top level */
    {"[]", "the configuration: expected an object, got an array"},
    {"3", "expected an object, got 3"},
    {"null", "expected an object, got null"},
    /* wrong types */
    {"{\"fusion_level\": \"2\"}", "fusion_level: expected an integer from 0 to 3, got the string \"2\""},
    {"{\"fusion_level\": true}", "fusion_level: expected an integer"},
    {"{\"fusion_aggressiveness\": \"high\"}", "fusion_aggressiveness: expected a number from 0 to 1"},
    {"{\"max_fused_ops\": null}", "max_fused_ops: expected an integer from 1 to 64, got null"},
    {"{\"no_fusion_ops\": \"Relu\"}", "no_fusion_ops: expected an array"},
    {"{\"no_fusion_ops\": [\"Relu\", 3]}", "no_fusion_ops[1]: expected an ONNX op type name"},
    {"{\"fusion_policy\": [\"always\"]}", "fusion_policy: expected an object, got an array"},
    {"{\"fusion_policy\": {\"matmul_add\": 1}}", "fusion_policy.matmul_add: expected one of always"},
    {"{\"resource_constraints\": \"1GB\"}", "resource_constraints: expected an object"},
    {"{\"resource_constraints\": {\"max_mem_usage\": true}}", "resource_constraints.max_mem_usage: expected"},
    {"{\"enable_dynamic_shape\": 1}", "enable_dynamic_shape: expected true or false, got 1"},
    {"{\"lite_mode\": \"false\"}", "lite_mode: expected true or false"},
    {"{\"winograd\": 0}", "winograd: expected true or false, got 0"},
    {"{\"verify\": null}", "verify: expected true or false, got null"},
    {"{\"strategy\": 1}", "strategy: expected one of auto, conservative, temporal, aggressive"},
    {"{\"rules\": \"a.rules\"}", "rules: expected an array"},
    {"{\"rules\": [\"a.rules\", 7]}", "rules[1]: expected a non-empty file path"},
    {"{\"rules\": [\"\"]}", "rules[0]: expected a non-empty file path"},
    {"{\"cost_weights\": [1, 2, 3]}", "cost_weights: expected an object"},
    {"{\"cost_weights\": {\"latency\": \"1\"}}", "cost_weights.latency: expected a finite number >= 0"},
    {"{\"verify_tolerance\": 0.1}", "verify_tolerance: expected an object"},
    {"{\"hardware\": {\"cache_file\": 5}}", "hardware.cache_file: expected a non-empty file path"},
    {"{\"hardware\": {\"cache_file\": \"\"}}", "hardware.cache_file: expected a non-empty file path"},
    {"{\"hardware\": {\"peak_gflops\": \"fast\"}}", "hardware.peak_gflops: expected a finite number"},
    /* out of range */
    {"{\"fusion_level\": 4}", "fusion_level: expected an integer from 0 to 3, got 4"},
    {"{\"fusion_level\": -1}", "fusion_level: expected an integer from 0 to 3, got -1"},
    {"{\"fusion_level\": 1.5}", "fusion_level: expected an integer from 0 to 3, got 1.5"},
    {"{\"fusion_aggressiveness\": 1.01}", "fusion_aggressiveness: expected a number from 0 to 1, got 1.01"},
    {"{\"fusion_aggressiveness\": -0.1}", "fusion_aggressiveness: expected a number from 0 to 1"},
    {"{\"max_fused_ops\": 0}", "max_fused_ops: expected an integer from 1 to 64, got 0"},
    {"{\"max_fused_ops\": 65}", "max_fused_ops: expected an integer from 1 to 64, got 65"},
    {"{\"shape_elasticity\": 2}", "shape_elasticity: expected a number from 0 to 1, got 2"},
    {"{\"cost_weights\": {\"memory\": -0.5}}",
     "cost_weights.memory: expected a finite number >= 0, got -0.5"},
    {"{\"cost_weights\": {\"energy\": 1e999}}",
     "cost_weights.energy: expected a finite number >= 0, got inf"},
    {"{\"verify_tolerance\": {\"rtol\": -1}}", "verify_tolerance.rtol: expected a finite number >= 0"},
    {"{\"verify_tolerance\": {\"atol\": -1e-9}}", "verify_tolerance.atol: expected a finite number >= 0"},
    {"{\"hardware\": {\"bandwidth_gbs\": -3}}",
     "hardware.bandwidth_gbs: expected a finite number >= 0, got -3"},
    /* bad names */
    {"{\"fusion_policy\": {\"conv_bn_relu\": \"sometimes\"}}",
     "fusion_policy.conv_bn_relu: 'sometimes' is not one of always, memory_aware, aggressive, never"},
    {"{\"fusion_policy\": {\"conv_bn_relu\": \"Always\"}}", "'Always' is not one of"},
    {"{\"strategy\": \"fast\"}", "strategy: 'fast' is not one of auto, conservative, temporal, aggressive"},
    {"{\"no_fusion_ops\": [\"Relu\", \"Frobnicate\"]}",
     "no_fusion_ops[1]: 'Frobnicate' is not a known ONNX op type"},
    {"{\"no_fusion_ops\": [\"layernorm\"]}", "no_fusion_ops[0]: 'layernorm' is not a known ONNX op type"},
    /* sizes */
    {"{\"resource_constraints\": {\"max_mem_usage\": \"1.5XB\"}}",
     "resource_constraints.max_mem_usage: '1.5XB' has an unknown unit 'XB'"},
    {"{\"resource_constraints\": {\"max_mem_usage\": \"-3MB\"}}", "max_mem_usage: '-3MB' is negative"},
    {"{\"resource_constraints\": {\"max_mem_usage\": \"\"}}", "max_mem_usage: '' is not a size"},
    {"{\"resource_constraints\": {\"max_mem_usage\": \"GB\"}}", "max_mem_usage: 'GB' is not a size"},
    {"{\"resource_constraints\": {\"max_mem_usage\": \"1.5.2GB\"}}", "'1.5.2GB' is not a size"},
    {"{\"resource_constraints\": {\"max_mem_usage\": \"99999999999GB\"}}", "'99999999999GB' is too large"},
    {"{\"resource_constraints\": {\"max_mem_usage\": \"1.5\"}}", "'1.5' is not a whole number of bytes"},
    {"{\"resource_constraints\": {\"max_mem_usage\": -1}}",
     "max_mem_usage: expected a whole number of bytes"},
    {"{\"resource_constraints\": {\"max_mem_usage\": 1.5}}",
     "max_mem_usage: expected a whole number of bytes"},
    {"{\"resource_constraints\": {\"max_mem_usage\": 1e300}}", "is too large to be exact as a JSON number"},
    /* too many rule files */
    {"{\"rules\": [\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\",\"12\",\"13\",\"14\","
     "\"15\",\"16\",\"17\"]}",
     "rules: at most 16 rule files, got 17"},
    /* malformed JSON */
    {"", "invalid JSON at line 1, column 1 (byte 0)"},
    {"{", "invalid JSON at line 1"},
    {"{\n  \"fusion_level\": 2\n  \"verify\": true\n}", "invalid JSON at line 3"},
    {"{} trailing", "invalid JSON at line 1, column 4 (byte 3)"},
    {"{\"fusion_level\": 02}", "invalid JSON at line 1, column 18 (byte 17): a number has a leading zero"},
    {"{\"fusion_level\": 2,}", "(byte 19): expected a \"key\" (no trailing commas)"},
    {"{\"rules\": [\"a\",]}", "(byte 15): expected a value (no trailing commas)"},
    {"{\"rules\": [\"a\" \"b\"]}", "(byte 15): expected ',' or ']'"},
    {"{\"verify\": true \"lite_mode\": true}", "(byte 16): expected ',' or '}'"},
    {"{\"verify\" true}", "(byte 10): expected ':' after a key"},
    {"{\"verify\": tru}", "(byte 11): expected a value"},
    {"{\"verify\": True}", "(byte 11): expected a value"},
    {"{\"verify\": truex}", "(byte 11): expected a value"},
    {"{\"strategy\": \"auto}", "(byte 13): unterminated string"},
    {"{\"strategy\": \"au\\xo\"}", "(byte 16): invalid escape in a string"},
    {"{\"strategy\": \"au\\u00\"}", "(byte 16): \\u needs four hex digits"},
    {"{\"fusion_level\\u0000x\": 1}", "(byte 14): \\u0000 is not allowed in a string"},
    {"{\"strategy\": \"a\tb\"}", "(byte 15): control character in a string"},
    {"{\"fusion_level\": -}", "(byte 18): expected a digit"},
    {"{\"fusion_level\": 1.}", "(byte 19): expected a digit after '.'"},
    {"{\"fusion_level\": 1e}", "(byte 19): expected a digit in the exponent"},
    {"{\"fusion_level\": +1}", "(byte 17): expected a value"},
    {"   ", "(byte 3): unexpected end of text; expected a value"},
    {"{\n  \"fusion_level\": 2,\n  \"verify\": true,\n  \"lite_mode\" false\n}",
     "invalid JSON at line 4, column 15 (byte 55): expected ':'"},
    {"{\"fusion_level\": 2.5e0}", "fusion_level: expected an integer from 0 to 3, got 2.5"},
    {"{\"fusion_level\": 2e0, \"strategy\": \"\\u0061uto\", \"verify\": 0}",
     "verify: expected true or false, got 0"},
    {"{'fusion_level': 2}", "invalid JSON at line 1, column 2 (byte 1)"},
};

AF_TEST(config_errors) {
    af_fusion_config c, before;
    af_fusion_config_default(&c);
    af_error err = {0};
    /* Start from a config that owns strings, to check a failed parse neither frees nor changes them. */
    CHECK_EQ_INT(af_fusion_config_parse(full_json, &c, &err), AF_OK);
    af_fusion_config_default(&before);
    CHECK_EQ_INT(af_fusion_config_parse(full_json, &before, &err), AF_OK);
    for (size_t i = 0; i < sizeof bad_configs / sizeof bad_configs[0]; i++) {
        memset(&err, 0, sizeof err);
        af_status st = af_fusion_config_parse(bad_configs[i].json, &c, &err);
        if (st != AF_ERR_INVALID_ARGUMENT || err.status != st || !strstr(err.message, bad_configs[i].want))
            af_test_fail(__FILE__, __LINE__, "%s: got status %d '%s', want '%s'", bad_configs[i].json,
                         (int)st, err.message, bad_configs[i].want);
        CHECK(cfg_equal(&c, &before));
    }
    /* 65 nested arrays: one more than the syntax check allows. */
    char deep[200];
    int n = snprintf(deep, sizeof deep, "{\"rules\": ");
    for (int i = 0; i < 65; i++) deep[n++] = '[';
    for (int i = 0; i < 65; i++) deep[n++] = ']';
    snprintf(deep + n, sizeof deep - (size_t)n, "}");
    CHECK_EQ_INT(af_fusion_config_parse(deep, &c, &err), AF_ERR_INVALID_ARGUMENT);
    CHECK(strstr(err.message, "nested too deeply") != NULL);
    CHECK(cfg_equal(&c, &before));
    /* A failing key after a good rules/cache key does not leak or keep the new strings. */
    CHECK_EQ_INT(af_fusion_config_parse("{\"rules\": [\"n.rules\"], \"hardware\": {\"cache_file\": \"n\"},"
                                        " \"verify\": 1}",
                                        &c, &err),
                 AF_ERR_INVALID_ARGUMENT);
    CHECK(cfg_equal(&c, &before));
    CHECK_EQ_INT(af_fusion_config_parse("{}", &c, NULL), AF_OK);
    CHECK_EQ_INT(af_fusion_config_parse("{\"verify\": 1}", &c, NULL), AF_ERR_INVALID_ARGUMENT);
    af_fusion_config_free(&c);
    af_fusion_config_free(&before);
}

AF_TEST(config_parse_size) {
    static const struct {
        const char *text;
        uint64_t bytes;
    } good[] = {
        {"0", 0},
        {"1000000", 1000000},
        {"007", 7},
        {"18446744073709551615", UINT64_MAX},
        {"1B", 1},
        {"1.0B", 1},
        {"1KB", 1000},
        {"1.5KB", 1500},
        {"512MB", 512000000},
        {"1.5GB", 1500000000},
        {"2TB", 2000000000000ull},
        {"1KiB", 1024},
        {"64KiB", 65536},
        {"1.5MiB", 1572864},
        {"0.5GiB", 1ull << 29},
        {"1TiB", 1ull << 40},
        {"0.1KiB", 102},         /* 102.4 rounds down */
        {"0.0009765625KiB", 1},  /* exactly 1/1024 */
        {"0.00097656249KiB", 0}, /* just below */
        {"1.0000000000000000000001KB", 1000},
        {"16777215.99999999999TiB", 18446744073709551605ull},
        {"512mb", 512000000},
        {"1gib", 1ull << 30},
        {"512 MB", 512000000},
        {" 1GB ", 1000000000},
        {"0GB", 0},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint64_t v = 12345;
        af_status st = af_parse_size(good[i].text, &v);
        if (st != AF_OK || v != good[i].bytes)
            af_test_fail(__FILE__, __LINE__, "af_parse_size(\"%s\") = %d, %llu; want %llu", good[i].text,
                         (int)st, (unsigned long long)v, (unsigned long long)good[i].bytes);
    }
    static const char *const bad[] = {
        "", " ", "GB", "-3MB", "-0", "+3MB", "1.5XB", "1.5.2GB", "1.", ".5GB", "1,5GB", "1e9", "1 G B",
        "0x10", "1.5", "2.5B", "18446744073709551616", "99999999999GB", "16777216TiB", "1KBB", "1\nGB",
        "nan", "inf", "12 34",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 777;
        af_status st = af_parse_size(bad[i], &v);
        if (st != AF_ERR_INVALID_ARGUMENT || v != 777)
            af_test_fail(__FILE__, __LINE__, "af_parse_size(\"%s\") = %d, want AF_ERR_INVALID_ARGUMENT",
                         bad[i], (int)st);
    }
    uint64_t v;
    CHECK_EQ_INT(af_parse_size(NULL, &v), AF_ERR_INVALID_ARGUMENT);
    CHECK_EQ_INT(af_parse_size("1GB", NULL), AF_ERR_INVALID_ARGUMENT);
}

/* Fails the 1st, 2nd, ... allocation of a parse in turn: each must fail cleanly with
 * AF_ERR_OUT_OF_MEMORY and leave cfg as it was, until one succeeds. ASan checks for leaks. */
AF_TEST(config_out_of_memory) {
    af_fusion_config c, before;
    af_fusion_config_default(&c);
    af_fusion_config_default(&before);
    af_error err = {0};
    CHECK_EQ_INT(af_fusion_config_parse(
                     "{\"rules\": [\"old.rules\"], \"hardware\": {\"cache_file\": \"old\"}}", &c, &err),
                 AF_OK);
    CHECK_EQ_INT(af_fusion_config_parse(
                     "{\"rules\": [\"old.rules\"], \"hardware\": {\"cache_file\": \"old\"}}", &before, &err),
                 AF_OK);
    int failures = 0, ok = 0;
    for (long n = 0; n < 10000 && !ok; n++) {
        af_alloc_fail_after(n);
        af_status st = af_fusion_config_parse(full_json, &c, &err);
        af_alloc_fail_after(-1);
        if (st == AF_OK) {
            ok = 1;
        } else {
            failures++;
            if (st != AF_ERR_OUT_OF_MEMORY)
                af_test_fail(__FILE__, __LINE__, "n=%ld: status %d: %s", n, (int)st, err.message);
            CHECK(cfg_equal(&c, &before));
        }
    }
    CHECK(ok);
    CHECK(failures > 20); /* cJSON allocates through af_malloc: one node per value at least */
    check_full(&c, "", "/abs/other.rules");
    af_fusion_config_free(&c);
    af_fusion_config_free(&before);

    char dir[64], path[128], prefix[128], abs_rules[128];
    CHECK(write_full_config(dir, sizeof dir, path, sizeof path, abs_rules, sizeof abs_rules));
    snprintf(prefix, sizeof prefix, "%s/", dir);
    ok = 0;
    for (long n = 0; n < 10000 && !ok; n++) {
        af_fusion_config_default(&c);
        af_alloc_fail_after(n);
        af_status st = af_fusion_config_load_file(path, &c, &err);
        af_alloc_fail_after(-1);
        if (st == AF_OK) {
            ok = 1;
            check_full(&c, prefix, abs_rules);
        } else {
            if (st != AF_ERR_OUT_OF_MEMORY)
                af_test_fail(__FILE__, __LINE__, "n=%ld: status %d: %s", n, (int)st, err.message);
            af_fusion_config_default(&before);
            CHECK(cfg_equal(&c, &before));
        }
        af_fusion_config_free(&c);
    }
    CHECK(ok);
    remove_full_config(dir, path);
}
