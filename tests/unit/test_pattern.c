/* Layer 1 (pattern): every built-in rule on the real fixtures with exact group counts read off the
 * graphs, legality verdicts against fusion.h's checks, negative cases on graphs built here, the
 * config's exclusions, region discovery, rule-file errors, the fan-out bound and the pass's time. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fusion/pattern/pattern.h"
#include "ir/model.h"
#include "ir/tensor.h"
#include "unit.h"
#include "util/alloc.h"

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* ---- graphs built in memory ------------------------------------------------------------------ */

typedef struct builder {
    af_graph *g;
    int last; /* the node added last */
    int n;
} builder;

static builder build_new(int opset) {
    builder b = {.g = af_graph_new(NULL), .last = -1};
    b.g->opset = opset;
    return b;
}

static int value(builder *b, af_value_kind kind) {
    char name[32];
    snprintf(name, sizeof name, "v%d", b->n++);
    int v = af_graph_add_value(b->g, name, NULL);
    b->g->values[v].kind = kind;
    return v;
}

static int input(builder *b, int rank, const int64_t *dims) {
    int v = value(b, AF_VALUE_INPUT);
    af_tensor *t = &b->g->values[v].t;
    t->dtype = AF_DTYPE_FLOAT;
    t->rank = rank;
    for (int d = 0; d < rank; d++) t->dims[d] = dims[d];
    return v;
}

/* A float constant of the given shape filled with `fill`. */
static int constant(builder *b, int rank, const int64_t *dims, float fill) {
    int v = value(b, AF_VALUE_CONST);
    af_tensor *t = &b->g->values[v].t;
    t->dtype = AF_DTYPE_FLOAT;
    t->rank = rank;
    for (int d = 0; d < rank; d++) t->dims[d] = dims[d];
    af_tensor_alloc(t, NULL);
    for (int64_t i = 0; i < af_tensor_numel(t); i++) ((float *)t->data)[i] = fill;
    return v;
}

static int scalar(builder *b, float x) { return constant(b, 0, NULL, x); }

/* Adds a node with one output; returns the output value. */
static int node(builder *b, const char *op, int n_in, const int *ins) {
    char name[32];
    snprintf(name, sizeof name, "%s_%d", op, b->g->n_nodes);
    int n = af_graph_add_node(b->g, name, op, "", NULL);
    int out = value(b, AF_VALUE_NODE);
    af_node_set_io(&b->g->nodes[n], n_in, ins, 1, &out, NULL);
    b->g->values[out].producer = n;
    b->last = n;
    return out;
}

static int node1(builder *b, const char *op, int x) { return node(b, op, 1, &x); }
static int node2(builder *b, const char *op, int x, int y) {
    int ins[2] = {x, y};
    return node(b, op, 2, ins);
}

static af_attr *new_attr(builder *b, const char *name, af_attr_type type) {
    af_node *n = &b->g->nodes[b->last];
    n->attrs = af_realloc(n->attrs, (size_t)(n->n_attrs + 1) * sizeof *n->attrs);
    af_attr *a = &n->attrs[n->n_attrs++];
    memset(a, 0, sizeof *a);
    a->name = af_strdup(name);
    a->type = type;
    return a;
}

static void attr_f(builder *b, const char *name, float f) { new_attr(b, name, AF_ATTR_FLOAT)->f = f; }
static void attr_i(builder *b, const char *name, int64_t i) { new_attr(b, name, AF_ATTR_INT)->i = i; }
static void attr_ints(builder *b, const char *name, int n, const int64_t *v) {
    af_attr *a = new_attr(b, name, AF_ATTR_INTS);
    a->ints = af_malloc((size_t)n * sizeof *a->ints);
    memcpy(a->ints, v, (size_t)n * sizeof *v);
    a->n = n;
}

/* Marks `out` as the graph output, sorts and infers shapes. */
static af_graph *finish(builder *b, int out) {
    b->g->values[out].is_output = true;
    b->g->outputs = af_malloc(sizeof *b->g->outputs);
    b->g->outputs[0] = out;
    b->g->n_outputs = 1;
    af_error err = {0};
    CHECK(af_graph_toposort(b->g, &err) == AF_OK);
    CHECK(af_graph_infer_shapes(b->g, &err) == AF_OK);
    if (err.message[0]) printf("  build: %s\n", err.message);
    return b->g;
}

/* x [1,8,8,8] -> Conv(8 -> 8, 3x3, pad 1, bias) */
static int conv(builder *b, int x) {
    static const int64_t w[4] = {8, 8, 3, 3}, c[1] = {8}, pads[4] = {1, 1, 1, 1};
    int ins[3] = {x, constant(b, 4, w, 0.01f), constant(b, 1, c, 0.1f)};
    int y = node(b, "Conv", 3, ins);
    attr_ints(b, "pads", 4, pads);
    return y;
}

static int batchnorm(builder *b, int x, int scale) {
    static const int64_t c[1] = {8};
    int ins[5] = {x, scale >= 0 ? scale : constant(b, 1, c, 1.0f), constant(b, 1, c, 0.0f), constant(b, 1, c, 0.0f),
                  constant(b, 1, c, 1.0f)};
    return node(b, "BatchNormalization", 5, ins);
}

static int clip(builder *b, int x, float lo, float hi) {
    if (b->g->opset < 11) {
        int y = node1(b, "Clip", x);
        attr_f(b, "min", lo);
        attr_f(b, "max", hi);
        return y;
    }
    int ins[3] = {x, scalar(b, lo), scalar(b, hi)};
    return node(b, "Clip", 3, ins);
}

static const int64_t nchw[4] = {1, 8, 8, 8};

/* ---- running the pass ------------------------------------------------------------------------ */

static af_status find_cfg(const af_graph *g, const af_fusion_config *cfg, af_fusion_candidates *cs) {
    af_rule_set *rs = NULL;
    af_error err = {0};
    af_status st = af_rules_builtin(&rs, &err);
    CHECK(st == AF_OK);
    if (st == AF_OK) st = af_pattern_find(g, rs, cfg, cs, &err);
    if (st != AF_OK) printf("  pattern: %s\n", err.message);
    af_rules_free(rs);
    return st;
}

static void find(const af_graph *g, af_fusion_candidates *cs) {
    af_fusion_config cfg;
    af_fusion_config_default(&cfg);
    CHECK(find_cfg(g, &cfg, cs) == AF_OK);
}

/* One rule parsed from text (file names it in errors), and its candidates in g with the default
 * config. */
static void find_with_rule(const char *text, const char *file, const af_graph *g, af_fusion_candidates *cs) {
    af_rule_set *rs = NULL;
    af_error err = {0};
    CHECK(af_rules_new(&rs, &err) == AF_OK);
    CHECK(af_rules_parse(rs, text, file, &err) == AF_OK);
    if (err.message[0]) printf("  %s\n", err.message);
    CHECK_EQ_INT(af_rules_count(rs), 1);
    af_fusion_config cfg;
    af_fusion_config_default(&cfg);
    CHECK(af_pattern_find(g, rs, &cfg, cs, &err) == AF_OK);
    af_rules_free(rs);
}

/* Candidates of rule `rule` that are undecided (legal, left to the cost layer) / rejected. */
static int count_rule(const af_fusion_candidates *cs, const char *rule, bool legal) {
    int n = 0;
    for (int i = 0; i < cs->n; i++)
        n += !strcmp(cs->items[i].rule, rule) && !cs->items[i].reason[0] == legal;
    return n;
}

/* The first candidate of `rule` (any verdict), or NULL. */
static const af_fusion_candidate *first_of(const af_fusion_candidates *cs, const char *rule) {
    for (int i = 0; i < cs->n; i++)
        if (!strcmp(cs->items[i].rule, rule)) return &cs->items[i];
    return NULL;
}

static int count_op_in(const af_graph *g, const af_fusion_candidate *c, af_op op) {
    int n = 0;
    for (int k = 0; k < c->n_nodes; k++) n += g->nodes[c->nodes[k]].op == op;
    return n;
}

/* Structure every candidate must have, and agreement with fusion.h's legality checks. */
static void check_well_formed(const af_graph *g, const af_fusion_candidates *cs, const char *model) {
    for (int i = 0; i < cs->n; i++) {
        const af_fusion_candidate *c = &cs->items[i];
        bool ok = c->n_nodes >= 2 && c->n_nodes <= AF_FUSION_MAX_NODES && !c->accepted;
        for (int k = 1; k < c->n_nodes; k++) ok = ok && c->nodes[k - 1] < c->nodes[k];
        bool anchor_in = c->anchor < 0;
        for (int k = 0; k < c->n_nodes; k++) anchor_in = anchor_in || c->nodes[k] == c->anchor;
        ok = ok && anchor_in && (c->family == AF_FUSION_ELEMENTWISE) == (c->anchor < 0);
        ok = ok && c->output >= 0 && g->values[c->output].producer >= 0;
        bool convex = af_fusion_is_convex(g, c->nodes, c->n_nodes);
        bool closed = af_fusion_is_closed(g, c->nodes, c->n_nodes, c->output);
        if (!strcmp(c->reason, "cycle")) ok = ok && !convex;
        else if (!strcmp(c->reason, "intermediate used outside the group")) ok = ok && convex && !closed;
        else ok = ok && convex && closed;
        if (!ok) {
            printf("  %s: malformed candidate %d (%s, %d nodes, reason '%s', convex %d closed %d)\n", model, i, c->rule,
                   c->n_nodes, c->reason, convex, closed);
            CHECK(ok);
            return;
        }
    }
}

static af_model *load(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s/model.onnx", dir, name);
    af_model *m = NULL;
    af_model_load(path, NULL, &m, NULL);
    return m;
}

/* ---- the built-in rules ---------------------------------------------------------------------- */

AF_TEST(pattern_builtin_rules_load) {
    af_rule_set *rs = NULL;
    af_error err = {0};
    CHECK(af_rules_builtin(&rs, &err) == AF_OK);
    if (!rs) return;
    CHECK_EQ_INT(af_rules_count(rs), 30);
    const char *want[] = {"conv_bn_act", "conv_relu6", "conv_silu", "conv_hardswish_hardsigmoid",
                          "conv_hardswish_clip", "conv_residual", "conv_silu_residual", "squeeze_excite",
                          "squeeze_excite_silu",
                          "pointwise_depthwise",
                          "pointwise_depthwise_relu6", "pointwise_depthwise_silu", "cv_elementwise_chain",
                          "matmul_bias_act", "matmul_bias_gelu_erf", "matmul_bias_gelu_tanh", "residual_layernorm",
                          "layernorm_decomposed", "bert_self_attention_qkv", "bert_self_attention_qkv_heads",
                          "bert_self_attention", "bert_self_attention_heads", "mha_packed_self_attention",
                          "swin_window_attention", "nlp_elementwise_chain"};
    for (size_t w = 0; w < sizeof want / sizeof want[0]; w++) {
        bool found = false;
        for (int i = 0; i < af_rules_count(rs); i++) found = found || !strcmp(af_rules_name(rs, i), want[w]);
        if (!found) printf("  missing rule %s\n", want[w]);
        CHECK(found);
    }
    CHECK(af_rules_name(rs, af_rules_count(rs)) == NULL);
    af_rules_free(rs);
}

/* Exact counts, read off each fixture's graph (node indices after loading):
 *  resnet_small: 20 Convs; 11 are followed by a Relu (conv_bn_act); the 5 residual Adds take 9
 *   Conv branches (4 downsampling blocks offer two, the identity block one), each Add -> Relu;
 *   the 5 Add -> Relu pairs are elementwise chains, plus one chain rejected because a Relu feeds
 *   both the next block's Conv and its skip Add.
 *  resnet_small_bn(_op11): every one of the 20 Convs has a BatchNormalization (conv_bn_act with or
 *   without the Relu), the same 9 residual groups, 20 BN(+Add)+Relu chains and 2 rejected ones.
 *  mobilenet_v3_small: 41 Conv+activation groups (18 with HardSwish), 9 squeeze-excite blocks, 7
 *   residual Adds (3 of them also offer the skip branch's Conv, rejected because that output feeds
 *   the next Conv too), Gemm + HardSwish; the 10 blocks with an expand layer offer it with their
 *   depthwise layer (pointwise_depthwise), as in its _bn twin, which keeps the BatchNormalizations.
 *  mobilenet_v2_small: 35 Conv + ReLU6 (Clip(0, 6)) groups (stem, every expand and depthwise conv,
 *   the last 1x1), none for the 17 projections without an activation; 10 residual Adds with their
 *   projection, and 5 with the skip branch's conv instead, rejected as cycles (that value also
 *   feeds the block's convs, which lead to the same Add), as are the 4 Add -> Add chains of
 *   consecutive residual blocks; the 16 blocks with an expand layer offer it with their
 *   depthwise layer (pointwise_depthwise_relu6).
 *  bert_tiny (opset 17): per layer the Q, K, V, attention-output and FFN MatMuls with bias (the two
 *   output projections with the residual Add), the FFN-in MatMul also with the erf GELU, plus the
 *   pooler Gemm + Tanh: 13 + 2 GELU groups; 5 residual Add + LayerNormalization (embeddings and two
 *   per layer); 2 attention blocks, each also matched without its last Reshape
 *   (bert_self_attention_heads, the form dynamic exports need), and both forms again with the
 *   three projections inside (bert_self_attention_qkv, _qkv_heads).
 *  bert_tiny_op11: the same with the 5 LayerNorms decomposed.
 *  bert_tiny_dynamic: the full attention blocks are rejected (Shape reads the merged heads, so
 *   the block with its last Reshape is not convex); the blocks without it are legal. Both forms
 *   with the projections are rejected too: Shape reads each projection for its head split.
 *  No BERT fixture has an elementwise region beyond the rules' (its Gather/Unsqueeze/Concat/Reshape
 *  shape arithmetic is data movement, which discovery leaves alone), so discovery lists nothing. */
typedef struct expect {
    const char *rule;
    int legal, rejected;
} expect;

static void check_fixture(const char *name, const expect *want, int n_want, int total) {
    af_model *m = load(af_test_dir(), name);
    CHECK(m != NULL);
    if (!m) return;
    af_fusion_candidates cs = {0};
    find(m->graph, &cs);
    check_well_formed(m->graph, &cs, name);
    for (int i = 0; i < n_want; i++) {
        int legal = count_rule(&cs, want[i].rule, true), rejected = count_rule(&cs, want[i].rule, false);
        if (legal != want[i].legal || rejected != want[i].rejected)
            printf("  %s: rule %s: %d legal, %d rejected; expected %d, %d\n", name, want[i].rule, legal, rejected,
                   want[i].legal, want[i].rejected);
        CHECK(legal == want[i].legal && rejected == want[i].rejected);
    }
    if (cs.n != total) printf("  %s: %d candidates, expected %d\n", name, cs.n, total);
    CHECK_EQ_INT(cs.n, total);
    af_fusion_candidates_free(&cs);
    af_model_free(m);
}

AF_TEST(pattern_fixture_resnet_small) {
    const expect want[] = {{"conv_bn_act", 11, 0}, {"conv_residual", 9, 0}, {"cv_elementwise_chain", 5, 1},
                           {"conv_relu6", 0, 0}, {"squeeze_excite", 0, 0}, {"discovery", 0, 0}};
    check_fixture("resnet_small", want, 6, 26);
    const expect want_bn[] = {{"conv_bn_act", 20, 0}, {"conv_residual", 9, 0}, {"cv_elementwise_chain", 20, 2}};
    check_fixture("resnet_small_bn", want_bn, 3, 51);
    check_fixture("resnet_small_bn_op11", want_bn, 3, 51);
}

AF_TEST(pattern_fixture_mobilenet_v3_small) {
    const expect want[] = {{"conv_bn_act", 41, 0},          {"squeeze_excite", 9, 0},
                           {"conv_residual", 7, 3},         {"matmul_bias_act", 1, 0},
                           {"cv_elementwise_chain", 9, 11}, {"conv_hardswish_hardsigmoid", 0, 0},
                           {"pointwise_depthwise", 11, 0}}; /* 10 expand + depthwise pairs, and the stem's */
    check_fixture("mobilenet_v3_small", want, 7, 92);
    const expect want_bn[] = {{"conv_bn_act", 52, 0},
                              {"squeeze_excite", 9, 0},
                              {"conv_residual", 7, 3},
                              {"pointwise_depthwise", 11, 0}};
    check_fixture("mobilenet_v3_small_bn", want_bn, 4, 138);
    const expect want_v2[] = {{"conv_relu6", 35, 0},
                              {"conv_bn_act", 0, 0},
                              {"conv_residual", 10, 5},
                              {"pointwise_depthwise", 0, 0},
                              {"pointwise_depthwise_relu6", 17, 0},
                              {"cv_elementwise_chain", 0, 4}};
    check_fixture("mobilenet_v2_small", want_v2, 6, 71);

    af_model *m = load(af_test_dir(), "mobilenet_v3_small");
    if (!m) return;
    af_fusion_candidates cs = {0};
    find(m->graph, &cs);
    int hardswish = 0, se_ok = 0;
    for (int i = 0; i < cs.n; i++) {
        const af_fusion_candidate *c = &cs.items[i];
        if (!strcmp(c->rule, "conv_bn_act") && m->graph->nodes[c->nodes[c->n_nodes - 1]].op == AF_OP_HARD_SWISH)
            hardswish++;
        if (!strcmp(c->rule, "squeeze_excite")) /* GAP, two Convs, Relu, HardSigmoid, Mul with the block input */
            se_ok += c->n_nodes == 6 && m->graph->nodes[c->anchor].op == AF_OP_GLOBAL_AVERAGE_POOL &&
                     count_op_in(m->graph, c, AF_OP_CONV) == 2 && count_op_in(m->graph, c, AF_OP_HARD_SIGMOID) == 1 &&
                     m->graph->nodes[c->nodes[5]].op == AF_OP_MUL &&
                     m->graph->nodes[c->anchor].inputs[0] == m->graph->nodes[c->nodes[5]].inputs[1];
    }
    CHECK_EQ_INT(hardswish, 18);
    CHECK_EQ_INT(se_ok, 9);
    af_fusion_candidates_free(&cs);
    af_model_free(m);
}

/* The attention candidate: the three projections' Reshape/Transpose through the final Reshape. */
static void check_attention(const af_graph *g, const af_fusion_candidates *cs, int want) {
    int n = 0;
    for (int i = 0; i < cs->n; i++) {
        const af_fusion_candidate *c = &cs->items[i];
        if (strcmp(c->rule, "bert_self_attention")) continue;
        n++;
        CHECK_EQ_INT(c->n_nodes, 13);
        CHECK(g->nodes[c->anchor].op == AF_OP_SOFTMAX);
        CHECK_EQ_INT(count_op_in(g, c, AF_OP_RESHAPE), 4);
        CHECK_EQ_INT(count_op_in(g, c, AF_OP_TRANSPOSE), 4);
        CHECK_EQ_INT(count_op_in(g, c, AF_OP_MAT_MUL), 2);
        CHECK_EQ_INT(count_op_in(g, c, AF_OP_DIV), 1);
        CHECK_EQ_INT(count_op_in(g, c, AF_OP_ADD), 1);
        const af_node *last = &g->nodes[c->nodes[12]];
        CHECK(last->op == AF_OP_RESHAPE && c->output == last->outputs[0]);
        /* the projections (bias Adds) feed the group from outside */
        for (int k = 0; k < c->n_nodes; k++) {
            const af_node *r = &g->nodes[c->nodes[k]];
            if (r->op != AF_OP_RESHAPE || k == 12) continue;
            int p = g->values[r->inputs[0]].producer;
            CHECK(p >= 0 && g->nodes[p].op == AF_OP_ADD);
        }
    }
    CHECK_EQ_INT(n, want);
}

/* The attention candidate with its projections: the block above plus the three MatMul + bias Add
 * pairs, whose MatMuls read one value (the layer's input). */
static void check_attention_qkv(const af_graph *g, const af_fusion_candidates *cs, int want) {
    int n = 0;
    for (int i = 0; i < cs->n; i++) {
        const af_fusion_candidate *c = &cs->items[i];
        if (strcmp(c->rule, "bert_self_attention_qkv")) continue;
        n++;
        CHECK_EQ_INT(c->n_nodes, 19);
        CHECK(g->nodes[c->anchor].op == AF_OP_SOFTMAX);
        CHECK_EQ_INT(count_op_in(g, c, AF_OP_MAT_MUL), 5);
        CHECK_EQ_INT(count_op_in(g, c, AF_OP_ADD), 4);
        int x = -1, shared = 0;
        for (int k = 0; k < c->n_nodes; k++) {
            const af_node *mm = &g->nodes[c->nodes[k]];
            if (mm->op != AF_OP_MAT_MUL || !af_graph_const_value(g, mm->inputs[1])) continue;
            if (x < 0) x = mm->inputs[0];
            shared += mm->inputs[0] == x;
        }
        CHECK_EQ_INT(shared, 3);
    }
    CHECK_EQ_INT(n, want);
}

/* torchvision's ViT (vit_tiny: 2 layers, nn.MultiheadAttention exported with its packed input
 * projection): each layer's self-attention is one candidate of mha_packed_self_attention, 16 nodes
 * (MatMul, Add, 3 Slices, 3 Reshapes, 3 Transposes, the Div on Q, Q.K^T, Softmax, P.V, the merging
 * Transpose) and the Reshape to [S*B, E]; no BERT form matches. */
AF_TEST(pattern_fixture_vit_tiny) {
    const expect want[] = {{"mha_packed_self_attention", 2, 0}, {"bert_self_attention", 0, 0},
                           {"bert_self_attention_qkv", 0, 0},   {"matmul_bias_act", 6, 0},
                           {"matmul_bias_gelu_erf", 2, 0},      {"residual_layernorm", 1, 4},
                           {"cv_elementwise_chain", 4, 2}};
    check_fixture("vit_tiny", want, 7, 21);
    af_model *m = load(af_test_dir(), "vit_tiny");
    if (!m) return;
    af_fusion_candidates cs = {0};
    find(m->graph, &cs);
    for (int i = 0; i < cs.n; i++)
        if (!strcmp(cs.items[i].rule, "mha_packed_self_attention")) {
            CHECK_EQ_INT(cs.items[i].n_nodes, 17);
            CHECK_EQ_INT(count_op_in(m->graph, &cs.items[i], AF_OP_SLICE), 3);
            CHECK_EQ_INT(count_op_in(m->graph, &cs.items[i], AF_OP_SOFTMAX), 1);
        }
    af_fusion_candidates_free(&cs);
    af_model_free(m);
}

AF_TEST(pattern_fixture_bert_tiny) {
    const expect want[] = {{"bert_self_attention", 2, 0},       {"matmul_bias_act", 13, 0},
                           {"matmul_bias_gelu_erf", 2, 0},      {"residual_layernorm", 5, 0},
                           {"layernorm_decomposed", 0, 0},      {"cv_elementwise_chain", 10, 1},
                           {"discovery", 0, 0},                 {"bert_self_attention_heads", 2, 0},
                           {"bert_self_attention_qkv", 2, 0},   {"bert_self_attention_qkv_heads", 2, 0}};
    check_fixture("bert_tiny", want, 10, 39);
    af_model *m = load(af_test_dir(), "bert_tiny");
    if (!m) return;
    af_fusion_candidates cs = {0};
    find(m->graph, &cs);
    check_attention(m->graph, &cs, 2);
    check_attention_qkv(m->graph, &cs, 2);
    for (int i = 0; i < cs.n; i++) /* GELU: MatMul, bias Add, Div, Erf, Add, Mul, Mul */
        if (!strcmp(cs.items[i].rule, "matmul_bias_gelu_erf")) {
            CHECK_EQ_INT(cs.items[i].n_nodes, 7);
            CHECK_EQ_INT(count_op_in(m->graph, &cs.items[i], AF_OP_ERF), 1);
        }
    af_fusion_candidates_free(&cs);
    af_model_free(m);
}

AF_TEST(pattern_fixture_bert_tiny_op11) {
    const expect want[] = {{"bert_self_attention", 2, 0},       {"matmul_bias_act", 13, 0},
                           {"matmul_bias_gelu_erf", 2, 0},      {"layernorm_decomposed", 5, 0},
                           {"residual_layernorm", 0, 0},        {"cv_elementwise_chain", 15, 10},
                           {"discovery", 0, 0},                 {"bert_self_attention_heads", 2, 0},
                           {"bert_self_attention_qkv", 2, 0},   {"bert_self_attention_qkv_heads", 2, 0}};
    check_fixture("bert_tiny_op11", want, 10, 53);
    af_model *m = load(af_test_dir(), "bert_tiny_op11");
    if (!m) return;
    af_fusion_candidates cs = {0};
    find(m->graph, &cs);
    check_attention(m->graph, &cs, 2);
    for (int i = 0; i < cs.n; i++) { /* (residual Add +) the 9 nodes, the Sub read twice inside */
        const af_fusion_candidate *c = &cs.items[i];
        if (strcmp(c->rule, "layernorm_decomposed")) continue;
        CHECK_EQ_INT(c->n_nodes, 10);
        CHECK_EQ_INT(count_op_in(m->graph, c, AF_OP_REDUCE_MEAN), 2);
        CHECK(m->graph->nodes[c->anchor].op == AF_OP_REDUCE_MEAN);
        CHECK(m->graph->nodes[c->nodes[0]].op == AF_OP_ADD);
    }
    af_fusion_candidates_free(&cs);
    af_model_free(m);
}

AF_TEST(pattern_fixture_bert_tiny_dynamic) {
    const expect want[] = {{"bert_self_attention", 0, 2},     {"matmul_bias_act", 13, 0},
                           {"matmul_bias_gelu_erf", 2, 0},    {"residual_layernorm", 5, 0},
                           {"discovery", 0, 0},               {"bert_self_attention_heads", 2, 0},
                           {"bert_self_attention_qkv", 0, 2}, {"bert_self_attention_qkv_heads", 0, 2}};
    check_fixture("bert_tiny_dynamic", want, 8, 39);
}

/* ---- negative and in-memory cases ------------------------------------------------------------ */

AF_TEST(pattern_rejects_intermediate_used_outside) {
    builder b = build_new(17);
    int y = conv(&b, input(&b, 4, nchw));
    int r = node1(&b, "Relu", y);
    int s = node1(&b, "Sigmoid", y); /* reads the Conv's output too */
    af_graph *g = finish(&b, node2(&b, "Add", r, s));
    af_fusion_candidates cs = {0};
    find(g, &cs);
    check_well_formed(g, &cs, "fan-out");
    const af_fusion_candidate *c = first_of(&cs, "conv_bn_act");
    CHECK(c && c->n_nodes == 2 && !strcmp(c->reason, "intermediate used outside the group") && !c->accepted);
    CHECK_EQ_INT(count_rule(&cs, "conv_bn_act", true), 0);
    af_fusion_candidates_free(&cs);
    af_graph_free(g);
}

AF_TEST(pattern_rejects_cycle) {
    /* Conv -> Add(conv, Relu(conv)): the group {Conv, Add} would be left by the path through Relu and
     * re-entered, so merging it creates a cycle. */
    builder b = build_new(17);
    int y = conv(&b, input(&b, 4, nchw));
    int r = node1(&b, "Relu", y);
    af_graph *g = finish(&b, node2(&b, "Add", y, r));
    af_fusion_candidates cs = {0};
    find(g, &cs);
    check_well_formed(g, &cs, "cycle");
    const af_fusion_candidate *c = first_of(&cs, "conv_residual");
    CHECK(c && c->n_nodes == 2 && !strcmp(c->reason, "cycle"));
    CHECK(!af_fusion_is_convex(g, c->nodes, c->n_nodes));
    af_fusion_candidates_free(&cs);
    af_graph_free(g);
}

AF_TEST(pattern_relu6_bounds_by_value) {
    for (int opset = 6; opset <= 17; opset += 11) { /* attributes before opset 11, inputs after */
        for (int hi = 5; hi <= 6; hi++) {
            builder b = build_new(opset);
            int y = conv(&b, input(&b, 4, nchw));
            af_graph *g = finish(&b, clip(&b, y, 0.0f, (float)hi));
            af_fusion_candidates cs = {0};
            find(g, &cs);
            check_well_formed(g, &cs, "relu6");
            int want = hi == 6 ? 1 : 0;
            if (count_rule(&cs, "conv_relu6", true) != want) printf("  opset %d Clip(0,%d)\n", opset, hi);
            CHECK_EQ_INT(count_rule(&cs, "conv_relu6", true), want);
            CHECK_EQ_INT(cs.n, want);
            af_fusion_candidates_free(&cs);
            af_graph_free(g);
        }
    }
}

AF_TEST(pattern_batchnorm_needs_constant_scale) {
    for (int dynamic = 0; dynamic < 2; dynamic++) {
        builder b = build_new(17);
        static const int64_t c8[1] = {8};
        int x = input(&b, 4, nchw), scale = dynamic ? input(&b, 1, c8) : -1;
        int y = conv(&b, x);
        af_graph *g = finish(&b, node1(&b, "Relu", batchnorm(&b, y, scale)));
        af_fusion_candidates cs = {0};
        find(g, &cs);
        const af_fusion_candidate *c = first_of(&cs, "conv_bn_act");
        if (dynamic) CHECK(c == NULL); /* Conv + Relu is not a match: the BN sits between them */
        else CHECK(c && c->n_nodes == 3 && !c->reason[0]);
        af_fusion_candidates_free(&cs);
        af_graph_free(g);
    }
}

/* Conv + BN + a written-out activation; returns the graph. */
static af_graph *conv_activation(int opset, int form) {
    builder b = build_new(opset);
    int y = batchnorm(&b, conv(&b, input(&b, 4, nchw)), -1), out = -1;
    if (form == 0) { /* SiLU */
        out = node2(&b, "Mul", y, node1(&b, "Sigmoid", y));
    } else if (form == 1) { /* x * HardSigmoid(x) */
        int hs = node1(&b, "HardSigmoid", y);
        attr_f(&b, "alpha", 1.0f / 6.0f);
        out = node2(&b, "Mul", hs, y);
    } else if (form == 2) { /* x * Clip(x + 3, 0, 6) / 6 */
        int c = clip(&b, node2(&b, "Add", scalar(&b, 3.0f), y), 0.0f, 6.0f);
        out = node2(&b, "Div", node2(&b, "Mul", y, c), scalar(&b, 6.0f));
    } else if (form == 3) { /* x * Clip(x + 3, 0, 6) * (1/6) */
        int c = clip(&b, node2(&b, "Add", y, scalar(&b, 3.0f)), 0.0f, 6.0f);
        out = node2(&b, "Mul", node2(&b, "Mul", c, y), scalar(&b, 1.0f / 6.0f));
    } else { /* x * (Clip(x + 3, 0, 6) / 6) */
        int c = clip(&b, node2(&b, "Add", y, scalar(&b, 3.0f)), 0.0f, 6.0f);
        out = node2(&b, "Mul", y, node2(&b, "Div", c, scalar(&b, 6.0f)));
    }
    return finish(&b, out);
}

AF_TEST(pattern_conv_activation_forms) {
    const char *rules[] = {"conv_silu", "conv_hardswish_hardsigmoid", "conv_hardswish_clip", "conv_hardswish_clip_mul",
                           "conv_hardswish_clip_gate"};
    const int sizes[] = {4, 4, 6, 6, 6};
    for (int opset = 10; opset <= 17; opset += 7)
        for (int form = 0; form < 5; form++) {
            af_graph *g = conv_activation(opset, form);
            af_fusion_candidates cs = {0};
            find(g, &cs);
            check_well_formed(g, &cs, rules[form]);
            const af_fusion_candidate *c = first_of(&cs, rules[form]);
            if (!c || c->reason[0] || c->n_nodes != sizes[form]) printf("  opset %d: %s not found\n", opset, rules[form]);
            CHECK(c && !c->reason[0] && c->n_nodes == sizes[form] && g->nodes[c->anchor].op == AF_OP_CONV);
            CHECK(c && c->output == g->outputs[0]);
            for (int other = 0; other < 5; other++) /* each form matches its own rule only */
                if (other != form) CHECK(first_of(&cs, rules[other]) == NULL);
            af_fusion_candidates_free(&cs);
            af_graph_free(g);
        }
}

AF_TEST(pattern_gelu_tanh_forms) {
    for (int form = 0; form < 2; form++) {
        builder b = build_new(17);
        static const int64_t xd[3] = {1, 4, 8}, wd[2] = {8, 8}, bd[1] = {8};
        int mm = node2(&b, "MatMul", input(&b, 3, xd), constant(&b, 2, wd, 0.1f));
        int x = node2(&b, "Add", constant(&b, 1, bd, 0.5f), mm), out;
        if (form == 0) { /* torch: 0.5 * (x * (1 + tanh(beta * (x + kappa * (x * (x * x)))))) */
            int cube = node2(&b, "Mul", x, node2(&b, "Mul", x, x));
            int inner = node2(&b, "Add", x, node2(&b, "Mul", scalar(&b, 0.044715f), cube));
            int t = node1(&b, "Tanh", node2(&b, "Mul", scalar(&b, 0.7978845608f), inner));
            out = node2(&b, "Mul", scalar(&b, 0.5f), node2(&b, "Mul", x, node2(&b, "Add", scalar(&b, 1.0f), t)));
        } else { /* 0.5 * x * (1 + tanh(beta * (x + kappa * pow(x, 3)))) */
            int half = node2(&b, "Mul", scalar(&b, 0.5f), x);
            int inner = node2(&b, "Add", x, node2(&b, "Mul", scalar(&b, 0.044715f), node2(&b, "Pow", x, scalar(&b, 3.0f))));
            int t = node1(&b, "Tanh", node2(&b, "Mul", scalar(&b, 0.7978845608f), inner));
            out = node2(&b, "Mul", half, node2(&b, "Add", scalar(&b, 1.0f), t));
        }
        af_graph *g = finish(&b, out);
        af_fusion_candidates cs = {0};
        find(g, &cs);
        check_well_formed(g, &cs, "gelu tanh");
        const char *rule = form == 0 ? "matmul_bias_gelu_tanh" : "matmul_bias_gelu_tanh_pow";
        const af_fusion_candidate *c = first_of(&cs, rule);
        CHECK(c && !c->reason[0] && c->n_nodes == g->n_nodes && c->output == g->outputs[0]);
        CHECK(first_of(&cs, form == 0 ? "matmul_bias_gelu_tanh_pow" : "matmul_bias_gelu_tanh") == NULL);
        af_fusion_candidates_free(&cs);
        af_graph_free(g);
    }
}

AF_TEST(pattern_silu_chain_shares_input) {
    /* x * Sigmoid(x) on a graph input: no anchor rule, but the elementwise chain reads x twice. */
    builder b = build_new(17);
    int x = input(&b, 4, nchw);
    af_graph *g = finish(&b, node2(&b, "Mul", x, node1(&b, "Sigmoid", x)));
    af_fusion_candidates cs = {0};
    find(g, &cs);
    const af_fusion_candidate *c = first_of(&cs, "cv_elementwise_chain");
    CHECK(c && c->n_nodes == 2 && !c->reason[0] && c->anchor == -1 && c->family == AF_FUSION_ELEMENTWISE);
    CHECK_EQ_INT(cs.n, 1); /* the nlp chain finds the same group: listed once */
    af_fusion_candidates_free(&cs);
    af_graph_free(g);
}

/* ---- the config ------------------------------------------------------------------------------ */

static af_graph *conv_bn_relu_graph(void) {
    builder b = build_new(17);
    return finish(&b, node1(&b, "Relu", batchnorm(&b, conv(&b, input(&b, 4, nchw)), -1)));
}

AF_TEST(pattern_config_exclusions) {
    af_graph *g = conv_bn_relu_graph();
    af_fusion_config cfg;
    af_fusion_candidates cs = {0};
    /* no_fusion_ops: the full group is reported rejected, and Conv + BN is still offered */
    af_fusion_config_default(&cfg);
    cfg.no_fusion_ops[AF_OP_RELU] = true;
    CHECK(find_cfg(g, &cfg, &cs) == AF_OK);
    CHECK_EQ_INT(count_rule(&cs, "conv_bn_act", false), 1);
    CHECK_EQ_INT(count_rule(&cs, "conv_bn_act", true), 1);
    const af_fusion_candidate *c = first_of(&cs, "conv_bn_act");
    CHECK(c && !strcmp(c->reason, "no_fusion_ops: Relu") && c->n_nodes == 3);
    CHECK(c && c[1].n_nodes == 2 && !c[1].reason[0]);
    cs.n = 0;
    /* max_fused_ops */
    af_fusion_config_default(&cfg);
    cfg.max_fused_ops = 2;
    CHECK(find_cfg(g, &cfg, &cs) == AF_OK);
    c = first_of(&cs, "conv_bn_act");
    CHECK(c && !strcmp(c->reason, "max_fused_ops") && c->n_nodes == 3);
    CHECK(c && c[1].n_nodes == 2 && !c[1].reason[0]);
    cs.n = 0;
    /* policy never: one rejected candidate, nothing smaller */
    af_fusion_config_default(&cfg);
    cfg.policy[AF_FUSION_CONV_BN_RELU] = AF_POLICY_NEVER;
    CHECK(find_cfg(g, &cfg, &cs) == AF_OK);
    CHECK_EQ_INT(count_rule(&cs, "conv_bn_act", false), 1);
    CHECK_EQ_INT(count_rule(&cs, "conv_bn_act", true), 0);
    c = first_of(&cs, "conv_bn_act");
    CHECK(c && !strcmp(c->reason, "policy never for conv_bn_relu"));
    cs.n = 0;
    /* fusion_level 0: nothing */
    af_fusion_config_default(&cfg);
    cfg.fusion_level = 0;
    CHECK(find_cfg(g, &cfg, &cs) == AF_OK);
    CHECK_EQ_INT(cs.n, 0);
    af_fusion_candidates_free(&cs);
    af_graph_free(g);
}

AF_TEST(pattern_extra_rules_from_config) {
    char path[] = "/tmp/af_test_rules_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    FILE *f = fdopen(fd, "w");
    fputs("# a user rule: Conv -> Relu -> Sigmoid\n"
          "rule conv_relu_sigmoid conv_bn_relu\n"
          "  node c Conv\n  node r Relu\n  node s Sigmoid\n  anchor c\n"
          "  edge r.0 = c\n  edge s.0 = r\n  where r single\nend\n",
          f);
    fclose(f);
    builder b = build_new(17);
    af_graph *g = finish(&b, node1(&b, "Sigmoid", node1(&b, "Relu", conv(&b, input(&b, 4, nchw)))));
    af_fusion_config cfg;
    af_fusion_config_default(&cfg);
    cfg.rule_files[0] = path;
    cfg.n_rule_files = 1;
    af_rule_set *rs = NULL;
    af_error err = {0};
    CHECK(af_rules_from_config(&cfg, &rs, &err) == AF_OK);
    CHECK_EQ_INT(af_rules_count(rs), 31);
    af_rules_free(rs);
    af_fusion_candidates cs = {0};
    CHECK(af_pattern_find(g, NULL, &cfg, &cs, &err) == AF_OK); /* NULL: built-in + cfg's files */
    const af_fusion_candidate *c = first_of(&cs, "conv_relu_sigmoid");
    CHECK(c && c->n_nodes == 3 && !c->reason[0]);
    af_fusion_candidates_free(&cs);
    cfg.n_rule_files = 0;
    af_graph_free(g);
    remove(path);
}

/* ---- rules files ----------------------------------------------------------------------------- */

AF_TEST(pattern_rules_errors_name_file_and_line) {
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"rule a conv_bn_relu\n  node c Conv\n  node r Relux\nend\n", "x.rules:3: unknown op 'Relux'"},
        {"\nrule a bogus_family\nend\n", "x.rules:2: unknown family 'bogus_family'"},
        {"rule a conv_bn_relu\n node c Conv\n node r Relu\n anchor c\n edge r.0 = q\nend\n", "x.rules:5: unknown node 'q'"},
        {"rule a conv_bn_relu\n node c Conv\n node r Relu\n anchor c\n edge r.0 = c\n", "x.rules:5: rule 'a' is not closed"},
        {"rule a conv_bn_relu\n node c Conv\n node r Relu\n anchor c\nend\n", "x.rules:5: rule 'a': node 'r' is not connected"},
        {"rule a conv_bn_relu\n node c Conv\n node r Relu\n anchor c\n edge r.0 = c\n edge c.0 = r\nend\n",
         "x.rules:7: rule 'a': the pattern has a cycle"},
        {"rule a conv_bn_relu\n node c? Conv\n anchor c\n", "x.rules:3: the anchor 'c' cannot be optional"},
        {"rule a conv_bn_relu\n node c Conv\n node r Relu\n edge r.0 = c\nend\n", "x.rules:5: rule 'a' has no anchor"},
        {"rule a conv_bn_relu\n node c Conv\n where c.1 shiny\n", "x.rules:3: unknown predicate 'shiny'"},
        {"rule a conv_bn_relu\n node c Conv\n where c.attr.group ==\n", "x.rules:3: expected a value"},
        {"rule a conv_bn_relu\n node c Conv\n where c.attr.group == abc\n", "x.rules:3: 'abc' is not a number"},
        {"rule a conv_bn_relu\n node c Conv\n where c.attr.pads == [1, 2\n", "x.rules:3: expected ',' or ']'"},
        {"rule a conv_bn_relu\n node c @fancy\n", "x.rules:2: unknown op class '@fancy'"},
        {"node c Conv\n", "x.rules:1: 'node' outside a rule"},
        {"rule a conv_bn_relu\n node c Conv\n frobnicate\n", "x.rules:3: unknown keyword 'frobnicate'"},
        {"rule conv_bn_act conv_bn_relu\n", "x.rules:1: rule 'conv_bn_act' is already defined in rules/cv.rules:"},
        {"rule a conv_bn_relu\n node c Conv\n anchor c\nend\n", "x.rules:4: rule 'a' needs at least two nodes"},
        {"rule a conv_bn_relu\n node c Conv\n edge c = c\n", "x.rules:3: 'c': name the input"},
        {"rule a conv_bn_relu\n node c Conv\n edge c.0 c\n", "x.rules:3: expected 'edge ID.K = SOURCE'"},
    };
    af_rule_set *rs = NULL;
    CHECK(af_rules_builtin(&rs, NULL) == AF_OK);
    if (!rs) return;
    int before = af_rules_count(rs);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        af_error err = {0};
        af_status st = af_rules_parse(rs, bad[i].text, "x.rules", &err);
        bool ok = st == AF_ERR_INVALID_ARGUMENT && strstr(err.message, bad[i].want) != NULL;
        if (!ok) printf("  case %zu: got '%s', expected '%s'\n", i, err.message, bad[i].want);
        CHECK(ok);
    }
    CHECK_EQ_INT(af_rules_count(rs), before); /* a failed parse adds nothing */
    /* a good rule after a bad one in the same text is not added either */
    CHECK(af_rules_parse(rs, "rule ok1 conv_bn_relu\n node c Conv\n node r Relu\n anchor c\n edge r.0 = c\nend\nbogus\n",
                         "y.rules", NULL) == AF_ERR_INVALID_ARGUMENT);
    CHECK_EQ_INT(af_rules_count(rs), before);
    af_error err = {0};
    CHECK(af_rules_load_file(rs, "/nonexistent/dir/x.rules", &err) == AF_ERR_IO);
    CHECK(strstr(err.message, "/nonexistent/dir/x.rules") != NULL);
    /* from a file: the path and line */
    char path[] = "/tmp/af_test_bad_rules_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) {
        FILE *f = fdopen(fd, "w");
        fputs("# comment\n\nrule r matmul_add\n  node m MatMul\n  node a Add\n  anchor m\n  edge a.0 = m\n"
              "  where a.1 per_cheese\nend\n",
              f);
        fclose(f);
        CHECK(af_rules_load_file(rs, path, &err) == AF_ERR_INVALID_ARGUMENT);
        char want[128];
        snprintf(want, sizeof want, "%s:8: unknown predicate 'per_cheese'", path);
        CHECK(strstr(err.message, want) != NULL);
        remove(path);
    }
    af_rules_free(rs);
}

AF_TEST(pattern_rules_syntax) {
    /* Every construct of the format in one rule, and comments, blank lines, CRLF line ends. */
    const char *text = "# header\r\n\r\n"
                       "rule all_forms conv_residual   # trailing comment\r\n"
                       "  node c Conv|ConvTranspose\n"
                       "  node n? BatchNormalization\n"
                       "  node a Add|@broadcast\n"
                       "  node r? @elementwise\n"
                       "  anchor c\n"
                       "  edge n.in = c\n"
                       "  edge a.* = n\n"
                       "  edge r.0 = a:0\n"
                       "  where c.attr.group(1) == 1\n"
                       "  where c.attr.strides == [1, 1]\n"
                       "  where c.attr.auto_pad(\"NOTSET\") == \"NOTSET\"\n"
                       "  where c.1 const\n"
                       "  where c.2 !scalar\n"
                       "  where c single\n"
                       "  where a.1 same_shape\n"
                       "  where r.min >= -inf\n"
                       "end\n";
    /* on Conv (strides 1) + Add of a same-shaped tensor + Clip */
    builder b = build_new(17);
    int x = input(&b, 4, nchw);
    int y = conv(&b, x);
    static const int64_t s11[2] = {1, 1};
    attr_ints(&b, "strides", 2, s11);
    af_graph *g = finish(&b, clip(&b, node2(&b, "Add", x, y), -1.0f, 1.0f));
    af_fusion_candidates cs = {0};
    find_with_rule(text, "all.rules", g, &cs);
    CHECK_EQ_INT(cs.n, 1);
    CHECK(cs.n == 1 && cs.items[0].n_nodes == 3 && !strcmp(cs.items[0].rule, "all_forms") && !cs.items[0].reason[0]);
    af_fusion_candidates_free(&cs);
    af_graph_free(g);
}

/* `edge N.* = SRC` locates SRC by itself: with the anchor an Add and MatMul reachable only through
 * that edge (the Add reads it on input 1), the rule still matches. The matcher once tried only
 * numbered inputs to find a source, so a `*` edge matched only where another edge led there. */
AF_TEST(pattern_star_edge_locates_its_source) {
    const char *text = "rule star_source matmul_add\n"
                       "  node add Add\n"
                       "  node mm MatMul\n"
                       "  anchor add\n"
                       "  edge add.* = mm\n"
                       "end\n";
    static const int64_t d[2] = {4, 4};
    builder b = build_new(17);
    int x = input(&b, 2, d);
    af_graph *g = finish(&b, node2(&b, "Add", x, node2(&b, "MatMul", x, x)));
    af_fusion_candidates cs = {0};
    find_with_rule(text, "star.rules", g, &cs);
    CHECK_EQ_INT(cs.n, 1);
    CHECK(cs.n == 1 && cs.items[0].n_nodes == 2 && !strcmp(cs.items[0].rule, "star_source"));
    af_fusion_candidates_free(&cs);
    af_graph_free(g);
}

/* ---- region discovery ------------------------------------------------------------------------ */

AF_TEST(pattern_discovery_regions) {
    /* Reshape -> Transpose -> Neg -> {Sigmoid, Abs} -> Add -> {output, Shape}; Shape -> Gather ->
     * Unsqueeze -> Concat. Discovery takes only what the region kernel runs: the elementwise diamond
     * Neg .. Add, which the linear elementwise_chain rules hold only in pieces; never the data
     * movement ops around it. */
    builder b = build_new(17);
    static const int64_t xd[3] = {2, 3, 4};
    int x = input(&b, 3, xd);
    int shape = value(&b, AF_VALUE_CONST);
    af_tensor *st = &b.g->values[shape].t;
    *st = (af_tensor){.dtype = AF_DTYPE_INT64, .rank = 1, .dims = {2}};
    af_tensor_alloc(st, NULL);
    ((int64_t *)st->data)[0] = 6, ((int64_t *)st->data)[1] = 4;
    int r = node2(&b, "Reshape", x, shape);
    int t = node1(&b, "Transpose", r);
    int neg = node1(&b, "Neg", t);
    int sig = node1(&b, "Sigmoid", neg);
    int ab = node1(&b, "Abs", neg);
    int add = node2(&b, "Add", sig, ab);
    int sh = node1(&b, "Shape", add);
    int idx = value(&b, AF_VALUE_CONST);
    af_tensor *it = &b.g->values[idx].t;
    *it = (af_tensor){.dtype = AF_DTYPE_INT64, .rank = 0};
    af_tensor_alloc(it, NULL);
    int gat = node2(&b, "Gather", sh, idx);
    int axes = value(&b, AF_VALUE_CONST);
    af_tensor *at = &b.g->values[axes].t;
    *at = (af_tensor){.dtype = AF_DTYPE_INT64, .rank = 1, .dims = {1}};
    af_tensor_alloc(at, NULL);
    int uns = node2(&b, "Unsqueeze", gat, axes);
    int cat = node2(&b, "Concat", uns, uns);
    attr_i(&b, "axis", 0);
    b.g->values[cat].is_output = true;
    af_graph *g = finish(&b, add);
    af_fusion_candidates cs = {0};
    find(g, &cs);
    check_well_formed(g, &cs, "discovery");
    CHECK_EQ_INT(count_rule(&cs, "discovery", true), 1);
    CHECK_EQ_INT(count_rule(&cs, "discovery", false), 0);
    const af_fusion_candidate *d = first_of(&cs, "discovery");
    CHECK(d && d->family == AF_FUSION_ELEMENTWISE && d->anchor == -1 && d->n_nodes == 4 && d->output == add);
    static const af_op diamond[4] = {AF_OP_NEG, AF_OP_SIGMOID, AF_OP_ABS, AF_OP_ADD};
    for (int k = 0; d && k < 4; k++) CHECK_EQ_INT(count_op_in(g, d, diamond[k]), 1);
    /* fusion_level 2: no discovery; max_fused_ops 3: Neg no longer fits, Sigmoid + Abs + Add does */
    af_fusion_config cfg;
    af_fusion_config_default(&cfg);
    cfg.fusion_level = 2;
    cs.n = 0;
    CHECK(find_cfg(g, &cfg, &cs) == AF_OK);
    CHECK(cs.n >= 1); /* the elementwise_chain rules still match */
    CHECK_EQ_INT(count_rule(&cs, "discovery", true) + count_rule(&cs, "discovery", false), 0);
    cfg.fusion_level = 3;
    cfg.max_fused_ops = 3;
    cs.n = 0;
    CHECK(find_cfg(g, &cfg, &cs) == AF_OK);
    for (int i = 0; i < cs.n; i++) CHECK(cs.items[i].n_nodes <= 3);
    CHECK_EQ_INT(count_rule(&cs, "discovery", true), 1);
    d = first_of(&cs, "discovery");
    CHECK(d && d->n_nodes == 3 && count_op_in(g, d, AF_OP_NEG) == 0 && d->output == add);
    check_well_formed(g, &cs, "discovery max 3");
    af_fusion_candidates_free(&cs);
    af_graph_free(g);
}

AF_TEST(pattern_discovery_refuses_cycles) {
    /* x -> Neg -> {ReduceMean -> graph output, Add(neg, mean)} with the Add's result read by nobody
     * (the loader removes such nodes, so the graph is built here). Neg's value is the only one
     * leaving {Neg, Add}, so only the convexity check sees that the region would hold both ends of
     * the path Neg -> ReduceMean -> Add: a cycle once merged. No discovery region holds both. */
    builder b = build_new(17);
    int x = input(&b, 2, (const int64_t[]){4, 8});
    int neg = node1(&b, "Neg", x);
    int mean = node1(&b, "ReduceMean", neg);
    attr_ints(&b, "axes", 1, (const int64_t[]){1});
    node2(&b, "Add", neg, mean);
    af_graph *g = finish(&b, mean);
    int pair[2] = {g->values[neg].producer, b.last};
    CHECK(!af_fusion_is_convex(g, pair, 2));
    af_fusion_candidates cs = {0};
    find(g, &cs);
    for (int i = 0; i < cs.n; i++) {
        const af_fusion_candidate *c = &cs.items[i];
        if (strcmp(c->rule, "discovery") != 0) continue;
        CHECK(!(count_op_in(g, c, AF_OP_NEG) && count_op_in(g, c, AF_OP_ADD)));
    }
    CHECK_EQ_INT(count_rule(&cs, "discovery", true) + count_rule(&cs, "discovery", false), 0);
    af_fusion_candidates_free(&cs);
    af_graph_free(g);
}

/* ---- bounded work ---------------------------------------------------------------------------- */

AF_TEST(pattern_fanout_is_bounded) {
    /* One Conv output read by 10^5 nodes: Relus that are graph outputs, and at the very end a
     * Sigmoid -> Mul(conv, sigmoid) pair beyond the 64 readers the matcher examines. */
    enum { N = 100000 };
    builder b = build_new(17);
    int y = conv(&b, input(&b, 4, nchw));
    for (int i = 0; i < N; i++) {
        int r = node1(&b, "Relu", y); /* before indexing: adding a value may move the array */
        b.g->values[r].is_output = true;
    }
    int s = node1(&b, "Sigmoid", y);
    af_graph *g = finish(&b, node2(&b, "Mul", y, s));
    af_fusion_candidates cs = {0};
    double t0 = now_ms();
    find(g, &cs);
    double ms = now_ms() - t0;
    printf("  %d readers of one tensor: pattern pass %.1f ms, %d candidates\n", N + 2, ms, cs.n);
    CHECK(ms < 5000);
    for (int i = 0; i < cs.n; i++) /* the Conv's output is read everywhere: no legal Conv group */
        CHECK(cs.items[i].anchor < 0 || cs.items[i].reason[0]);
    const af_fusion_candidate *c = first_of(&cs, "cv_elementwise_chain"); /* found from the Sigmoid */
    CHECK(c && c->n_nodes == 2 && !c->reason[0]);
    af_fusion_candidates_free(&cs);
    af_graph_free(g);
}

/* ---- agreement and timing on the full models ------------------------------------------------- */

AF_TEST(pattern_full_models_timing) {
    const char *fixtures[] = {"resnet_small", "resnet_small_bn", "resnet_small_bn_op11", "mobilenet_v3_small",
                              "mobilenet_v3_small_bn", "bert_tiny", "bert_tiny_op11", "bert_tiny_dynamic"};
    const char *full[] = {"resnet50", "mobilenet_v3_large", "bert_base"};
    for (int set = 0; set < 2; set++) {
        int n = set == 0 ? 8 : 3;
        for (int i = 0; i < n; i++) {
            const char *name = set == 0 ? fixtures[i] : full[i];
            af_model *m = load(set == 0 ? af_test_dir() : "build", name);
            if (!m) {
                CHECK(set == 1); /* the full models are optional (models/make_fixtures.sh --full) */
                printf("  %s: not found, skipped\n", name);
                continue;
            }
            af_fusion_candidates cs = {0};
            double best = 1e30;
            for (int rep = 0; rep < 5; rep++) { /* best of 5: the machine is shared */
                cs.n = 0;
                double t0 = now_ms();
                find(m->graph, &cs);
                double ms = now_ms() - t0;
                best = ms < best ? ms : best;
            }
            int legal = 0;
            for (int k = 0; k < cs.n; k++) legal += !cs.items[k].reason[0];
            check_well_formed(m->graph, &cs, name);
            printf("  %-22s %4d nodes: %3d candidates (%3d undecided), pattern pass %.2f ms\n", name, m->graph->n_nodes,
                   cs.n, legal, best);
            af_fusion_candidates_free(&cs);
            af_model_free(m);
        }
    }
}

/* ---- out of memory --------------------------------------------------------------------------- */

AF_TEST(pattern_out_of_memory_fails_cleanly) {
    af_model *m = load(af_test_dir(), "bert_tiny");
    CHECK(m != NULL);
    if (!m) return;
    af_fusion_config cfg;
    af_fusion_config_default(&cfg);
    af_fusion_candidates ref = {0};
    find(m->graph, &ref);
    int ok = 0, failures = 0;
    for (long n = 0; n < 2000 && !ok; n++) {
        af_fusion_candidates cs = {0};
        af_fusion_candidate keep = {.n_nodes = 1};
        af_fusion_candidates_push(&cs, &keep, NULL); /* what the list held before must survive */
        af_rule_set *rs = NULL;
        af_error err = {0};
        af_alloc_fail_after(n);
        af_status st = af_rules_builtin(&rs, &err);
        if (st == AF_OK) st = af_pattern_find(m->graph, rs, &cfg, &cs, &err);
        af_alloc_fail_after(-1);
        if (st == AF_OK) {
            ok = 1;
            CHECK_EQ_INT(cs.n, ref.n + 1);
        } else {
            failures++;
            if (st != AF_ERR_OUT_OF_MEMORY) printf("  n=%ld: %s\n", n, err.message);
            CHECK(st == AF_ERR_OUT_OF_MEMORY);
            CHECK_EQ_INT(cs.n, 1);
        }
        af_rules_free(rs);
        af_fusion_candidates_free(&cs);
    }
    CHECK(ok);
    CHECK(failures > 5);
    af_fusion_candidates_free(&ref);
    af_model_free(m);
}
