/* Layer 1 on the real fixtures: group counts checked against counts read independently off the
 * graphs (one attention block per Softmax, one residual group per skip Add, one GELU group per Erf),
 * rules-file errors, and the fan-out bound. */
#include <stdbool.h>
#include <string.h>

#include "fusion/pattern/pattern.h"
#include "ir/model.h"
#include "unit.h"

static int count_op(const af_graph *g, af_op op) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += g->nodes[i].op == op;
    return n;
}

/* Distinct nodes of op `op` covered by a legal candidate of `family`. */
static int covered(const af_graph *g, const af_fusion_candidates *cs, af_fusion_family family, af_op op) {
    int n = 0;
    for (int j = 0; j < g->n_nodes; j++) {
        if (g->nodes[j].op != op) continue;
        bool in = false;
        for (int i = 0; i < cs->n && !in; i++)
            for (int k = 0; k < cs->items[i].n_nodes && !in; k++)
                in = cs->items[i].family == family && !cs->items[i].reason[0] && cs->items[i].nodes[k] == j;
        n += in;
    }
    return n;
}

/* Candidates of `family` that are legal and contain a node of op `op`. */
static int count_groups(const af_graph *g, const af_fusion_candidates *cs, af_fusion_family family, af_op op) {
    int n = 0;
    for (int i = 0; i < cs->n; i++) {
        const af_fusion_candidate *c = &cs->items[i];
        if (c->family != family || c->reason[0]) continue;
        for (int k = 0; k < c->n_nodes; k++)
            if (g->nodes[c->nodes[k]].op == op) {
                n++;
                break;
            }
    }
    return n;
}

static af_model *load(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s/model.onnx", af_test_dir(), name);
    af_model *m = NULL;
    af_model_load(path, NULL, &m, NULL);
    return m;
}

static void find(const af_graph *g, af_fusion_candidates *cs) {
    af_rule_set *rs = NULL;
    af_fusion_config cfg;
    af_fusion_config_default(&cfg);
    CHECK(af_rules_builtin(&rs, NULL) == AF_OK);
    CHECK(af_pattern_find(g, rs, &cfg, cs, NULL) == AF_OK);
    af_rules_free(rs);
    af_fusion_config_free(&cfg);
}

AF_TEST(pattern_counts_on_bert_fixtures) {
    const char *names[] = {"bert_tiny", "bert_tiny_op11"};
    for (int f = 0; f < 2; f++) {
        af_model *m = load(names[f]);
        CHECK(m != NULL);
        if (!m) continue;
        af_fusion_candidates cs = {0};
        find(m->graph, &cs);
        CHECK_EQ_INT(count_groups(m->graph, &cs, AF_FUSION_ATTENTION, AF_OP_SOFTMAX), count_op(m->graph, AF_OP_SOFTMAX));
        CHECK_EQ_INT(count_groups(m->graph, &cs, AF_FUSION_MATMUL_ADD, AF_OP_ERF), count_op(m->graph, AF_OP_ERF));
        af_fusion_candidates_free(&cs);
        af_model_free(m);
    }
}

AF_TEST(pattern_counts_on_resnet_fixtures) {
    af_model *m = load("resnet_small");
    CHECK(m != NULL);
    if (!m) return;
    af_fusion_candidates cs = {0};
    find(m->graph, &cs);
    /* every residual Add of the bottleneck blocks joins a Conv group (downsampling blocks offer
     * two, one per branch; the cost layer keeps one) */
    CHECK_EQ_INT(covered(m->graph, &cs, AF_FUSION_CONV_RESIDUAL, AF_OP_ADD), count_op(m->graph, AF_OP_ADD));
    /* every Relu follows a Conv or a residual Add, so each is in some Conv group */
    int relus = count_op(m->graph, AF_OP_RELU), covered_relus = 0;
    for (int j = 0; j < m->graph->n_nodes; j++) {
        if (m->graph->nodes[j].op != AF_OP_RELU) continue;
        bool in = false;
        for (int i = 0; i < cs.n && !in; i++)
            for (int k = 0; k < cs.items[i].n_nodes && !in; k++) in = !cs.items[i].reason[0] && cs.items[i].nodes[k] == j;
        covered_relus += in;
    }
    CHECK_EQ_INT(covered_relus, relus);
    af_fusion_candidates_free(&cs);
    af_model_free(m);
}

AF_TEST(pattern_rules_errors_name_file_and_line) {
    af_rule_set *rs = NULL;
    CHECK(af_rules_builtin(&rs, NULL) == AF_OK);
    int before = af_rules_count(rs);
    af_error err = {0};
    CHECK(af_rules_parse(rs, "conv_bn_relu ok anchor=Conv tail=Relu\nbogus_family x anchor=Conv\n", "my.rules", &err) ==
          AF_ERR_INVALID_ARGUMENT);
    CHECK(strstr(err.message, "my.rules:2") != NULL && strstr(err.message, "bogus_family") != NULL);
    CHECK(af_rules_parse(rs, "matmul_add r anchor=MatMul tail=NoSuchOp\n", "x.rules", &err) == AF_ERR_INVALID_ARGUMENT);
    CHECK(strstr(err.message, "x.rules:1") != NULL && strstr(err.message, "NoSuchOp") != NULL);
    CHECK(af_rules_parse(rs, "matmul_add r tail=Add\n", "y.rules", &err) == AF_ERR_INVALID_ARGUMENT);
    CHECK(af_rules_load_file(rs, "/nonexistent.rules", &err) == AF_ERR_IO);
    CHECK(af_rules_count(rs) >= before);
    af_rules_free(rs);
}

AF_TEST(pattern_fanout_is_bounded) {
    /* One Conv output read by 100000 Relus: matching must stay cheap and find no closed group. */
    af_graph *g = af_graph_new(NULL);
    g->opset = 17;
    int x = af_graph_add_value(g, "x", NULL), w = af_graph_add_value(g, "w", NULL), y = af_graph_add_value(g, "y", NULL);
    g->values[x].kind = AF_VALUE_INPUT;
    g->values[w].kind = AF_VALUE_CONST;
    int c = af_graph_add_node(g, "conv", "Conv", "", NULL);
    int ins[2] = {x, w};
    af_node_set_io(&g->nodes[c], 2, ins, 1, &y, NULL);
    for (int i = 0; i < 100000; i++) {
        char name[32];
        snprintf(name, sizeof name, "r%d", i);
        int o = af_graph_add_value(g, name, NULL);
        int n = af_graph_add_node(g, name, "Relu", "", NULL);
        af_node_set_io(&g->nodes[n], 1, &y, 1, &o, NULL);
        g->values[o].is_output = true;
    }
    CHECK(af_graph_toposort(g, NULL) == AF_OK);
    af_fusion_candidates cs = {0};
    find(g, &cs);
    CHECK_EQ_INT(cs.n, 0);
    af_fusion_candidates_free(&cs);
    af_graph_free(g);
}
