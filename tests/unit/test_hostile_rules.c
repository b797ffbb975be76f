/*
 * User rules are data: a rules file may give any family to any subgraph it can match. The fused-step
 * builders (src/fusion/sched/) therefore get shapes they were not written for, and each must turn
 * such a group down with a reason, never crash or compute something else.
 *
 * Each case is a small model (tests/unit/onnx_build.h) and one rule, "hostile", written to a rules
 * file and named in a config that sets the rule's family to "always" and every other family to
 * "never" (fixed hardware figures, so nothing depends on this machine). The session must be created
 * and run; the report must list the rule's candidate as rejected by the scheduler, with a reason;
 * and output 0 must equal the unfused (level 0) run's.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autofusion.h"
#include "onnx_build.h"
#include "unit.h"

#define MAX_IN 4

static const char *const families[] = {"conv_bn_relu",     "conv_residual", "squeeze_excite",
                                       "pointwise_depthwise", "matmul_add", "layernorm",
                                       "attention_blocks", "elementwise_chain"};
#define N_FAMILIES (int)(sizeof families / sizeof families[0])

/* ---- models ---------------------------------------------------------------------------------- */

static const char *ramp_const(ob_model *b, int rank, const int64_t *dims, float scale) {
    int64_t n = 1;
    for (int d = 0; d < rank; d++) n *= dims[d];
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = scale * (float)((i * 7) % 11 - 5);
    const char *name = ob_const(b, rank, dims, v);
    free(v);
    return name;
}

/* y = Sigmoid(x) * x: SiLU, no squeeze-excite around it (the audit's repro). */
static void m_sigmoid_mul(ob_model *b) {
    const char *x = ob_input(b, 4, (int64_t[]){1, 4, 3, 3});
    ob_output(b, ob_node2(b, "Mul", ob_node1(b, "Sigmoid", x), x));
}

/* GlobalAveragePool, Relu, Relu, 1x1 Conv, Sigmoid, Mul with x: an SE whose first Conv is a Relu. */
static void m_se_relu_for_conv(ob_model *b) {
    const char *x = ob_input(b, 4, (int64_t[]){1, 4, 3, 3});
    const char *p = ob_node1(b, "GlobalAveragePool", x);
    const char *r = ob_node1(b, "Relu", ob_node1(b, "Relu", p));
    const char *c = ob_node2(b, "Conv", r, ramp_const(b, 4, (int64_t[]){4, 4, 1, 1}, 0.1f));
    ob_output(b, ob_node2(b, "Mul", ob_node1(b, "Sigmoid", c), x));
}

/* y = Relu(Conv(x)) + Conv(x): the "residual" is the anchor's own output. */
static void m_conv_relu_add_self(ob_model *b) {
    const char *x = ob_input(b, 4, (int64_t[]){1, 3, 6, 6});
    const char *c = ob_node2(b, "Conv", x, ramp_const(b, 4, (int64_t[]){4, 3, 3, 3}, 0.05f));
    ob_attr_ints(b, "pads", 4, (int64_t[]){1, 1, 1, 1});
    ob_output(b, ob_node2(b, "Add", ob_node1(b, "Relu", c), c));
}

/* y = Relu(x W) + x W. */
static void m_matmul_relu_add_self(ob_model *b) {
    const char *x = ob_input(b, 2, (int64_t[]){3, 8});
    const char *m = ob_node2(b, "MatMul", x, ramp_const(b, 2, (int64_t[]){8, 5}, 0.1f));
    ob_output(b, ob_node2(b, "Add", ob_node1(b, "Relu", m), m));
}

/* y = x - ReduceMean(x, last axis): half a LayerNorm. */
static void m_mean_sub(ob_model *b) {
    const char *x = ob_input(b, 2, (int64_t[]){2, 8});
    const char *m = ob_node1(b, "ReduceMean", x);
    ob_attr_ints(b, "axes", 1, (int64_t[]){-1});
    ob_output(b, ob_node2(b, "Sub", x, m));
}

/* LayerNorm's decomposition with the square as a product, without the scale and shift. */
static void m_layernorm_no_scale(ob_model *b) {
    const char *x = ob_input(b, 2, (int64_t[]){3, 8});
    const char *m = ob_node1(b, "ReduceMean", x);
    ob_attr_ints(b, "axes", 1, (int64_t[]){-1});
    const char *d = ob_node2(b, "Sub", x, m);
    const char *v = ob_node1(b, "ReduceMean", ob_node2(b, "Mul", d, d));
    ob_attr_ints(b, "axes", 1, (int64_t[]){-1});
    ob_output(b, ob_node2(b, "Div", d, ob_node1(b, "Sqrt", ob_node2(b, "Add", v, ob_scalar(b, 1e-5f)))));
}

/* y = Softmax(a b): scores without the head layout around them. */
static void m_softmax_matmul(ob_model *b) {
    const char *a = ob_input(b, 4, (int64_t[]){1, 2, 4, 4});
    const char *c = ob_input(b, 4, (int64_t[]){1, 2, 4, 4});
    ob_output(b, ob_node1(b, "Softmax", ob_node2(b, "MatMul", a, c)));
    ob_attr_i(b, "axis", -1);
}

/* y = Relu(Conv(x)). */
static void m_conv_relu(ob_model *b) {
    const char *x = ob_input(b, 4, (int64_t[]){1, 3, 5, 5});
    ob_output(b, ob_node1(b, "Relu", ob_node2(b, "Conv", x, ramp_const(b, 4, (int64_t[]){2, 3, 1, 1}, 0.1f))));
}

/* A 1x1 Conv, Relu, then a 3x3 Conv that is not depthwise (group 1), on a plane large enough
 * (64 x 64 x 64 floats expanded) that only the shape can turn a pointwise_depthwise group down. */
static void m_conv1x1_relu_conv3x3(ob_model *b) {
    const char *x = ob_input(b, 4, (int64_t[]){1, 4, 64, 64});
    const char *t = ob_node1(b, "Relu", ob_node2(b, "Conv", x, ramp_const(b, 4, (int64_t[]){64, 4, 1, 1}, 0.1f)));
    ob_attr_ints(b, "kernel_shape", 2, (int64_t[]){1, 1});
    t = ob_node2(b, "Conv", t, ramp_const(b, 4, (int64_t[]){4, 64, 3, 3}, 0.01f));
    ob_attr_ints(b, "pads", 4, (int64_t[]){1, 1, 1, 1});
    ob_output(b, t);
}

/* BERT's exported self-attention on [1, 4, 8] projections, except that the head split reshapes
 * them to `heads` = [B, S, H, D] with B*S*H*D = 32 but not [1, 4, H, 8 / H]: the fused kernel's
 * layout is not the graph's. */
static void attention_with_heads(ob_model *b, const int64_t *heads) {
    const char *in[3];
    for (int i = 0; i < 3; i++) in[i] = ob_input(b, 3, (int64_t[]){1, 4, 8});
    const char *split = ob_const_i64(b, 1, (int64_t[]){4}, heads);
    const char *merge = ob_const_i64(b, 1, (int64_t[]){3}, (int64_t[]){1, 4, 8});
    const char *proj[3];
    for (int i = 0; i < 3; i++) {
        proj[i] = ob_node1(b, "Transpose", ob_node2(b, "Reshape", in[i], split));
        ob_attr_ints(b, "perm", 4, i == 1 ? (int64_t[]){0, 2, 3, 1} : (int64_t[]){0, 2, 1, 3});
    }
    const char *s = ob_node2(b, "Div", ob_node2(b, "MatMul", proj[0], proj[1]), ob_scalar(b, 2.0f));
    const char *p = ob_node1(b, "Softmax", s);
    ob_attr_i(b, "axis", -1);
    const char *t = ob_node1(b, "Transpose", ob_node2(b, "MatMul", p, proj[2]));
    ob_attr_ints(b, "perm", 4, (int64_t[]){0, 2, 1, 3});
    ob_output(b, ob_node2(b, "Reshape", t, merge));
}

/* y = x + float(Shape(x)), x with a symbolic first dim (so the Shape is not folded): an opaque
 * node a rule can still match. */
static void m_shape_cast(ob_model *b) {
    const char *x = ob_input(b, 2, (int64_t[]){-1, 2});
    const char *c = ob_node1(b, "Cast", ob_node1(b, "Shape", x));
    ob_attr_i(b, "to", 1); /* FLOAT */
    ob_output(b, ob_node2(b, "Add", x, c));
}

static void m_attention_seq_split(ob_model *b) { attention_with_heads(b, (int64_t[]){1, 2, 2, 8}); }
static void m_attention_batch_split(ob_model *b) { attention_with_heads(b, (int64_t[]){2, 2, 2, 4}); }

/* ---- cases ----------------------------------------------------------------------------------- */

typedef struct hcase {
    const char *desc;
    void (*build)(ob_model *b);
    const char *family; /* NULL: every family in turn */
    const char *rule;   /* the rule's body, between "rule hostile FAMILY" and "end" */
    const char *name;   /* the rule whose candidate the scheduler must reject (NULL: "hostile") */
    const char *skip;   /* a family not to try (one that can build the group, or whose built-in rule
                           finds the same group first) */
    const char *expect; /* what the rejection reason starts with (NULL: "scheduler: ") */
} hcase;

static const char se_chain_rule[] = "node p GlobalAveragePool\nnode a Relu\nnode r Relu\nnode c Conv\n"
                                    "node g Sigmoid\nnode m Mul\nanchor g\nedge a.0 = p\nedge r.0 = a\n"
                                    "edge c.0 = r\nedge g.0 = c\nedge m.0 = g\n";
static const char layernorm_rule[] = "node m ReduceMean\nnode s Sub\nnode q Mul\nnode v ReduceMean\nnode e Add\n"
                                     "node r Sqrt\nnode d Div\nanchor m\nedge s.1 = m\nedge q.0 = s\n"
                                     "edge q.1 = s\nedge v.0 = q\nedge e.0 = v\nedge r.0 = e\nedge d.0 = s\n"
                                     "edge d.1 = r\n";
static const char attention_rule[] = "node q Reshape\nnode qt Transpose\nnode k Reshape\nnode kt Transpose\n"
                                     "node v Reshape\nnode vt Transpose\nnode s MatMul\nnode d Div\n"
                                     "node sm Softmax\nnode o MatMul\nnode t Transpose\nnode r Reshape\n"
                                     "anchor sm\nedge qt.0 = q\nedge kt.0 = k\nedge vt.0 = v\nedge s.0 = qt\n"
                                     "edge s.1 = kt\nedge d.0 = s\nedge sm.0 = d\nedge o.0 = sm\nedge o.1 = vt\n"
                                     "edge t.0 = o\nedge r.0 = t\n";

static const hcase cases[] = {
    /* The audit's repro: a Sigmoid gate with no Conv before it. */
    {.desc = "Sigmoid * x", .build = m_sigmoid_mul, .rule = "node g Sigmoid\nnode m Mul\nanchor g\nedge m.0 = g\n",
     .skip = "elementwise_chain"}, /* an anchor-less elementwise chain is what that family builds */
    {.desc = "Sigmoid * x, Mul anchor", .build = m_sigmoid_mul,
     .rule = "node g Sigmoid\nnode m Mul\nanchor m\nedge m.0 = g\n", .skip = "elementwise_chain"},
    {.desc = "SE with a Relu for its first Conv", .build = m_se_relu_for_conv, .family = "squeeze_excite",
     .rule = se_chain_rule},
    {.desc = "SE with a Relu for its first Conv", .build = m_se_relu_for_conv, .family = "elementwise_chain",
     .rule = se_chain_rule},
    {.desc = "Conv, Relu, Add of the Conv", .build = m_conv_relu_add_self,
     .rule = "node c Conv\nnode r Relu\nnode a Add\nanchor c\nedge r.0 = c\nedge a.0 = r\nedge a.1 = c\n"},
    {.desc = "MatMul, Relu, Add of the MatMul", .build = m_matmul_relu_add_self,
     .rule = "node c MatMul\nnode r Relu\nnode a Add\nanchor c\nedge r.0 = c\nedge a.0 = r\nedge a.1 = c\n",
     .skip = "matmul_add"},
    /* ... which the built-in matmul_bias_act (its bias absent, "res" the Add) matches too. */
    {.desc = "MatMul, Relu, Add of the MatMul", .build = m_matmul_relu_add_self, .family = "matmul_add",
     .rule = "node c MatMul\nnode r Relu\nnode a Add\nanchor c\nedge r.0 = c\nedge a.0 = r\nedge a.1 = c\n",
     .name = "matmul_bias_act"},
    {.desc = "ReduceMean, Sub", .build = m_mean_sub, .rule = "node m ReduceMean\nnode s Sub\nanchor m\nedge s.1 = m\n"},
    {.desc = "LayerNorm without scale", .build = m_layernorm_no_scale, .rule = layernorm_rule, .skip = "layernorm"},
    /* The built-in layernorm_decomposed_mul (gamma and beta absent) matches it whole. */
    {.desc = "LayerNorm without scale", .build = m_layernorm_no_scale, .family = "layernorm", .rule = layernorm_rule,
     .name = "layernorm_decomposed_mul"},
    {.desc = "MatMul, Softmax", .build = m_softmax_matmul,
     .rule = "node m MatMul\nnode s Softmax\nanchor s\nedge s.0 = m\n"},
    {.desc = "Conv, Relu", .build = m_conv_relu, .family = "elementwise_chain",
     .rule = "node c Conv\nnode r Relu\nanchor c\nedge r.0 = c\n"},
    {.desc = "1x1 Conv, Relu, 3x3 Conv (not depthwise)", .build = m_conv1x1_relu_conv3x3,
     .family = "pointwise_depthwise",
     .rule = "node p Conv\nnode r Relu\nnode d Conv\nanchor d\nedge r.0 = p\nedge d.0 = r\n"},
    {.desc = "Conv, Relu anchored at the Relu", .build = m_conv_relu,
     .rule = "node c Conv\nnode r Relu\nanchor r\nedge r.0 = c\n", .skip = "conv_bn_relu"},
    /* Opaque nodes are barriers: the cost layer refuses the group before any builder sees it. */
    {.desc = "Shape, Cast", .build = m_shape_cast, .rule = "node s Shape\nnode c Cast\nanchor s\nedge c.0 = s\n",
     .expect = "barrier: "},
    /* The built-in bert_self_attention finds these first; the hostile rule's copy is dropped. */
    {.desc = "attention, heads split along the sequence", .build = m_attention_seq_split,
     .family = "attention_blocks", .rule = attention_rule, .name = "bert_self_attention"},
    {.desc = "attention, heads split along the batch", .build = m_attention_batch_split,
     .family = "attention_blocks", .rule = attention_rule, .name = "bert_self_attention"},
};

/* ---- running --------------------------------------------------------------------------------- */

static char tmp_dir[256];

static bool write_text(const char *dir, const char *name, const char *text, char *path, size_t n) {
    snprintf(path, n, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) return false;
    fputs(text, f);
    return fclose(f) == 0;
}

/* The rules file and the config for one family; paths in rules_path and cfg_path. */
static bool write_case_files(const hcase *c, const char *family, char *rules_path, char *cfg_path, size_t n) {
    char rules[2048], json[1024];
    snprintf(rules, sizeof rules, "rule hostile %s\n%send\n", family, c->rule);
    int used = snprintf(json, sizeof json,
                        "{\"rules\": [\"hostile.rules\"], \"hardware\": {\"peak_gflops\": 100, \"bandwidth_gbs\": "
                        "20}, \"fusion_policy\": {");
    for (int f = 0; f < N_FAMILIES; f++)
        used += snprintf(json + used, sizeof json - (size_t)used, "%s\"%s\": \"%s\"", f ? ", " : "", families[f],
                         strcmp(families[f], family) ? "never" : "always");
    snprintf(json + used, sizeof json - (size_t)used, "}}\n");
    return write_text(tmp_dir, "hostile.rules", rules, rules_path, n) &&
           write_text(tmp_dir, "hostile.json", json, cfg_path, n);
}

/* The reason the report gives for the rejected candidate of rule `name`; "" when it has none. */
static void rejected_reason(const af_session *s, const char *name, char *reason, size_t n) {
    reason[0] = 0;
    char *text = af_test_capture(s, af_session_fusion_report);
    if (!text) return;
    char want[96];
    snprintf(want, sizeof want, "] rule %s:", name);
    bool rejected = false, found = false;
    for (char *line = strtok(text, "\n"); line && !reason[0]; line = strtok(NULL, "\n")) {
        if (!strncmp(line, "accepted groups:", 16)) rejected = false;
        else if (!strncmp(line, "rejected candidates:", 20)) rejected = true;
        else if (!strncmp(line, "  [", 3)) found = rejected && strstr(line, want) != NULL;
        else if (found && !strncmp(line, "      ", 6)) snprintf(reason, n, "%s", line + 6);
    }
    free(text);
}

/* Runs the model under opts; output 0 copied into *out (free out->data). false on any failure. */
static bool run_session(const af_model *m, const af_session_options *o, const char *const *names,
                        const af_tensor *ins, int n_in, af_tensor *out, af_session **keep, const char *label) {
    af_session *s = NULL;
    af_error err = {0};
    if (af_session_create(m, o, &s, &err) != AF_OK) {
        printf("    %s: session: %s\n", label, err.message);
        return false;
    }
    if (af_session_run(s, n_in, names, ins, &err) != AF_OK) {
        printf("    %s: run: %s\n", label, err.message);
        af_session_free(s);
        return false;
    }
    const af_tensor *y = af_session_output(s, 0);
    *out = *y;
    out->data = malloc(y->nbytes ? y->nbytes : 1);
    memcpy(out->data, y->data, y->nbytes);
    if (keep) *keep = s;
    else af_session_free(s);
    return true;
}

static void run_case(const hcase *c, const char *family) {
    char label[160], rules_path[400], cfg_path[400];
    snprintf(label, sizeof label, "%s (%s)", c->desc, family);
    if (!write_case_files(c, family, rules_path, cfg_path, sizeof rules_path)) {
        printf("    %s: cannot write the rules and config files\n", label);
        CHECK(false);
        return;
    }
    ob_model *b = ob_new(13);
    c->build(b);
    uint8_t *buf = NULL;
    size_t size = 0;
    CHECK(ob_pack(b, &buf, &size) == 0);
    ob_free(b);
    af_model *m = NULL;
    af_error err = {0};
    if (af_model_load_buffer(buf, size, NULL, NULL, &m, &err) != AF_OK) {
        printf("    %s: load: %s\n", label, err.message);
        CHECK(false);
        free(buf);
        return;
    }
    free(buf);

    int n_in = af_model_n_inputs(m);
    const char *names[MAX_IN];
    af_tensor ins[MAX_IN];
    memset(ins, 0, sizeof ins);
    for (int i = 0; i < n_in && i < MAX_IN; i++) {
        af_value_info vi;
        af_model_input_info(m, i, &vi);
        names[i] = vi.name;
        int64_t n = 1;
        ins[i] = (af_tensor){.dtype = AF_DTYPE_FLOAT, .rank = vi.rank};
        for (int d = 0; d < vi.rank; d++) n *= ins[i].dims[d] = vi.dims[d] < 0 ? 2 : vi.dims[d]; /* symbolic: 2 */
        ins[i].nbytes = (size_t)n * sizeof(float);
        float *v = malloc((size_t)n * sizeof *v);
        for (int64_t k = 0; k < n; k++) v[k] = 0.25f * (float)((k * 5 + i * 3) % 13 - 6);
        ins[i].data = v;
    }

    af_session_options plain = af_session_options_default(), fused = plain;
    plain.fusion_level = 0;
    fused.config_path = cfg_path;
    af_tensor want = {0}, got = {0};
    af_session *s = NULL;
    bool ok = run_session(m, &plain, names, ins, n_in, &want, NULL, "unfused") &&
              run_session(m, &fused, names, ins, n_in, &got, &s, label);
    CHECK(ok);
    if (ok) {
        char reason[512];
        rejected_reason(s, c->name ? c->name : "hostile", reason, sizeof reason);
        const char *expect = c->expect ? c->expect : "scheduler: ";
        if (!strstr(reason, expect)) {
            printf("    %s: rule %s not rejected with '%s...' (got '%s'); report:\n", label,
                   c->name ? c->name : "hostile", expect, reason);
            af_session_fusion_report(s, stdout);
            CHECK(false);
        }
        bool same = got.rank == want.rank && got.nbytes == want.nbytes;
        for (int d = 0; same && d < got.rank; d++) same = got.dims[d] == want.dims[d];
        const float *x = got.data, *y = want.data;
        for (size_t k = 0; same && k < want.nbytes / sizeof(float); k++)
            same = fabsf(x[k] - y[k]) <= 1e-5f + 1e-4f * fabsf(y[k]);
        if (!same) printf("    %s: fused output differs from the unfused run\n", label);
        CHECK(same);
    }
    af_session_free(s);
    free(want.data);
    free(got.data);
    for (int i = 0; i < n_in && i < MAX_IN; i++) free(ins[i].data);
    af_model_free(m);
    unlink(rules_path);
    unlink(cfg_path);
}

AF_TEST(hostile_user_rules_are_rejected_not_crashed) {
    const char *t = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/af_hostile_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmp_dir)) {
        CHECK(false);
        return;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const hcase *c = &cases[i];
        for (int f = 0; f < N_FAMILIES; f++) {
            if ((c->family && strcmp(c->family, families[f])) || (c->skip && !strcmp(c->skip, families[f]))) continue;
            run_case(c, families[f]);
        }
    }
    rmdir(tmp_dir);
}
