/* Layer 2 (cost): estimates on hand-built candidates, level/policy/strategy gating, overlap
 * resolution, the hardware probe and its cache, and the evaluation time on the full models. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fusion/cost/cost.h"
#include "fusion/pattern/pattern.h"
#include "ir/model.h"
#include "ir/tensor.h"
#include "unit.h"
#include "util/alloc.h"

/* The documented defaults; each test sets the fields it depends on. */
static void config_defaults(af_fusion_config *cfg) {
    af_fusion_config_default(cfg);
    cfg->policy[AF_FUSION_ELEMENTWISE] = AF_POLICY_AGGRESSIVE;
}

/* A fixed machine, so estimates do not depend on the one running the tests. */
static void fixed_hw(af_hw_model *hw) {
    memset(hw, 0, sizeof *hw);
    snprintf(hw->cpu_model, sizeof hw->cpu_model, "test");
    hw->isa = AF_ISA_AVX2;
    hw->winograd = true;
    hw->n_cores = hw->n_cores_probed = 1;
    hw->l1d = 32 << 10;
    hw->l2 = 1 << 20;
    hw->l3 = 8 << 20;
    hw->mem_total = hw->mem_available = (uint64_t)16 << 30;
    hw->peak_gflops_core = hw->peak_gflops = 100;
    hw->bw_l2_core_gbs = 100;
    hw->bw_l3_core_gbs = 50;
    hw->bw_dram_core_gbs = hw->bw_dram_all_gbs = hw->bandwidth_gbs = 20;
    hw->kernel_overhead_us = 1;
    hw->pj_per_flop = AF_HW_PJ_PER_FLOP;
    hw->pj_per_byte_dram = AF_HW_PJ_PER_BYTE_DRAM;
    hw->pj_per_byte_cache = AF_HW_PJ_PER_BYTE_CACHE;
}

static af_model *load_fixture(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s/model.onnx", af_test_dir(), name);
    af_model *m = NULL;
    af_error err = {0};
    if (af_model_load(path, NULL, &m, &err) != AF_OK) {
        af_test_fail(__FILE__, __LINE__, "loading %s: %s", name, err.message);
        return NULL;
    }
    return m;
}

static int only_consumer(const af_graph *g, int v) {
    int found = -1, n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] == v) {
                found = i;
                n++;
            }
    return n == 1 ? found : -1;
}

static af_fusion_candidate make_cand(af_fusion_family fam, const char *rule, int anchor, int n, const int *nodes,
                                     int output) {
    af_fusion_candidate c = {.family = fam, .anchor = anchor, .n_nodes = n, .output = output};
    snprintf(c.rule, sizeof c.rule, "%s", rule);
    memcpy(c.nodes, nodes, (size_t)n * sizeof *nodes);
    return c;
}

/* ---- hand-built graphs ---------------------------------------------------------------------- */

static int add_value(af_graph *g, const char *name, af_value_kind kind, int d0, int d1) {
    int v = af_graph_add_value(g, name, NULL);
    g->values[v].kind = kind;
    g->values[v].t = (af_tensor){.dtype = AF_DTYPE_FLOAT, .rank = 2, .dims = {d0, d1}};
    return v;
}

static int add_node(af_graph *g, const char *name, const char *op, int in0, int in1, int out) {
    int n = af_graph_add_node(g, name, op, "", NULL);
    int ins[2] = {in0, in1};
    af_node_set_io(&g->nodes[n], in1 >= 0 ? 2 : 1, ins, 1, &out, NULL);
    g->values[out].producer = n;
    return n;
}

/* x -> Relu -> a -> Sigmoid -> b -> Tanh -> c (graph output), [256, 1024] floats (1 MiB each). */
static af_graph *chain3(void) {
    af_graph *g = af_graph_new(NULL);
    int x = add_value(g, "x", AF_VALUE_INPUT, 256, 1024);
    int a = add_value(g, "a", AF_VALUE_NODE, 256, 1024);
    int b = add_value(g, "b", AF_VALUE_NODE, 256, 1024);
    int c = add_value(g, "c", AF_VALUE_NODE, 256, 1024);
    add_node(g, "relu", "Relu", x, -1, a);
    add_node(g, "sig", "Sigmoid", a, -1, b);
    add_node(g, "tanh", "Tanh", b, -1, c);
    g->values[c].is_output = true;
    return g;
}

static bool starts(const char *s, const char *prefix);

/* ---- estimates ------------------------------------------------------------------------------ */

AF_TEST(cost_conv_relu_saves_the_relu_input_twice) {
    af_model *m = load_fixture("resnet_small");
    if (!m) return;
    const af_graph *g = m->graph;
    af_hw_model hw;
    fixed_hw(&hw);
    af_cost_graph cg;
    CHECK(af_cost_graph_init(&cg, g, NULL) == AF_OK);
    int checked = 0, negative = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].op != AF_OP_CONV) continue;
        int y = g->nodes[i].outputs[0], r = only_consumer(g, y);
        if (r < 0 || g->nodes[r].op != AF_OP_RELU) continue;
        int nodes[2] = {i, r};
        af_fusion_candidate c = make_cand(AF_FUSION_CONV_BN_RELU, "conv_relu", i, 2, nodes, g->nodes[r].outputs[0]);
        af_group_estimate e;
        af_cost_estimate_group(&cg, &hw, &c, &e);
        double y_bytes = af_cost_value_bytes(g, y, NULL);
        CHECK(y_bytes > 0);
        /* the Conv's write of y and the Relu's read of it */
        CHECK_NEAR(e.bytes_unfused - e.bytes_fused, 2 * y_bytes, 0, 1e-12);
        CHECK(e.flops_fused == e.flops_unfused);
        CHECK(e.time_fused_us < e.time_unfused_us);
        CHECK(e.energy_fused_uj < e.energy_unfused_uj);
        CHECK(e.peak_delta <= 0);
        if (g->values[g->nodes[i].inputs[0]].kind == AF_VALUE_INPUT) {
            /* on the graph input (not in the arena) y's buffer is gone from the peak entirely */
            CHECK_NEAR(e.peak_delta, -y_bytes, 0, 1e-12);
        }
        negative += e.peak_delta < 0;
        CHECK(!e.nominal_dims);
        checked++;
    }
    CHECK(checked >= 4);
    CHECK(negative >= 1);
    af_cost_graph_free(&cg);
    af_model_free(m);
}

AF_TEST(cost_node_flops_and_roofline) {
    af_model *m = load_fixture("resnet_small");
    if (!m) return;
    const af_graph *g = m->graph;
    af_hw_model hw;
    fixed_hw(&hw);
    int winograd = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const af_node *n = &g->nodes[i];
        af_node_cost nc;
        af_cost_node(g, &hw, i, &nc);
        CHECK(nc.bytes > 0);
        CHECK_NEAR(nc.time_us, fmax(nc.compute_us, nc.memory_us) + nc.fixed_us + hw.kernel_overhead_us, 1e-12, 1e-12);
        CHECK(nc.fixed_us == (n->op == AF_OP_CONV || n->op == AF_OP_GEMM ? AF_COST_FIXED_GEMM_US : AF_COST_FIXED_VECTOR_US));
        if (n->op == AF_OP_CONV) {
            const af_tensor *w = &g->values[n->inputs[1]].t, *y = &g->values[n->outputs[0]].t;
            double macs = (double)af_tensor_numel(y) * (double)(af_tensor_numel(w) / w->dims[0]);
            double bias = n->n_inputs > 2 && n->inputs[2] >= 0 ? (double)af_tensor_numel(y) : 0;
            CHECK_NEAR(nc.flops, 2 * macs + bias, 0, 1e-12);
            /* Config "winograd": false prices the 3x3 stride-1 convs as the direct kernel. */
            af_hw_model direct = hw;
            direct.winograd = false;
            af_node_cost dc;
            af_cost_node(g, &direct, i, &dc);
            const double ratio = nc.compute_us / dc.compute_us;
            if (w->dims[2] == 3 && ratio < 1) {
                winograd++;
                if (fabs(ratio - AF_COST_EFF_CONV_KXK / AF_COST_EFF_WINOGRAD_4) > 1e-9 &&
                    fabs(ratio - AF_COST_EFF_CONV_KXK / AF_COST_EFF_WINOGRAD_2) > 1e-9)
                    af_test_fail(__FILE__, __LINE__, "conv %d: Winograd priced at %g of the direct kernel", i, ratio);
            } else {
                CHECK_NEAR(ratio, 1, 0, 1e-12);
            }
        } else if (n->op == AF_OP_RELU) {
            CHECK_NEAR(nc.flops, (double)af_tensor_numel(&g->values[n->outputs[0]].t), 0, 1e-12);
            CHECK_NEAR(nc.bytes, 2.0 * 4 * (double)af_tensor_numel(&g->values[n->outputs[0]].t), 0, 1e-12);
        }
    }
    CHECK_EQ_INT(winograd, 2); /* its two 3x3 stride-1 convs, as the runtime runs them (test_winograd_config.c) */
    af_model_free(m);
}

AF_TEST(cost_elementwise_chain_estimates) {
    af_graph *g = chain3();
    af_hw_model hw;
    fixed_hw(&hw);
    af_cost_graph cg;
    CHECK(af_cost_graph_init(&cg, g, NULL) == AF_OK);
    CHECK_EQ_INT(cg.last_use[0], 0);
    CHECK_EQ_INT(cg.last_use[3], 3); /* a graph output: alive to the end */
    int nodes[3] = {0, 1, 2};
    af_fusion_candidate c = make_cand(AF_FUSION_ELEMENTWISE, "chain", -1, 3, nodes, 3);
    af_group_estimate e;
    af_cost_estimate_group(&cg, &hw, &c, &e);
    const double mib = 1 << 20;
    CHECK_NEAR(e.bytes_unfused, 6 * mib, 0, 1e-12);
    CHECK_NEAR(e.bytes_fused, 2 * mib, 0, 1e-12);
    /* relu 1 + sigmoid 12 + tanh 12 flops per element */
    CHECK_NEAR(e.flops_unfused, 25.0 * 256 * 1024, 0, 1e-12);
    /* a and b never exist fused; x and c are not in the arena: peak falls by a + b at the sigmoid */
    CHECK_NEAR(e.peak_delta, -2 * mib, 0, 1e-12);
    af_fusion_config cfg;
    config_defaults(&cfg);
    double s = af_cost_score(&e, &cfg);
    CHECK(s > 0 && s <= 1);
    cfg.weight_latency = cfg.weight_energy = 0;
    CHECK_NEAR(af_cost_score(&e, &cfg), 4.0 / 6.0, 1e-12, 0); /* traffic share saved */
    cfg.weight_memory = 0;
    CHECK(af_cost_score(&e, &cfg) == 0);
    config_defaults(&cfg);
    cfg.fusion_aggressiveness = 0;
    CHECK_NEAR(af_cost_threshold(&cfg), AF_COST_THRESHOLD_SPAN, 1e-15, 0);
    cfg.fusion_aggressiveness = 0.5;
    CHECK_NEAR(af_cost_threshold(&cfg), AF_COST_THRESHOLD_SPAN / 2, 1e-15, 0);
    cfg.fusion_aggressiveness = 1;
    CHECK_NEAR(af_cost_threshold(&cfg), 0, 1e-15, 0);
    cfg.fusion_aggressiveness = 7; /* clamped */
    CHECK_NEAR(af_cost_threshold(&cfg), 0, 1e-15, 0);
    cfg.fusion_aggressiveness = -1;
    CHECK_NEAR(af_cost_threshold(&cfg), AF_COST_THRESHOLD_SPAN, 1e-15, 0);
    af_cost_graph_free(&cg);
    af_graph_free(g);
}

/* A gate: s = Sigmoid(g) of [256, 1] per-row values, then y = x * s over x [256, 1024]. The
 * region kernel evaluates the Sigmoid once per element of y, so fused it costs 1024 Sigmoids a
 * row where unfused it costs one: the estimate must charge that and, under the aggressive policy,
 * reject the group as a slowdown. (EfficientNet-B0's gates, fused so, ran 0.6-0.9 ms against
 * 0.03 for the Sigmoid in the conv's epilogue and a plain broadcast Mul.) */
AF_TEST(cost_region_charges_small_members_per_output_element) {
    af_graph *g = af_graph_new(NULL);
    int x = add_value(g, "x", AF_VALUE_INPUT, 256, 1024);
    int gate = add_value(g, "g", AF_VALUE_INPUT, 256, 1);
    int sg = add_value(g, "s", AF_VALUE_NODE, 256, 1);
    int y = add_value(g, "y", AF_VALUE_NODE, 256, 1024);
    add_node(g, "sig", "Sigmoid", gate, -1, sg);
    add_node(g, "mul", "Mul", x, sg, y);
    g->values[y].is_output = true;
    af_hw_model hw;
    fixed_hw(&hw);
    af_cost_graph cg;
    CHECK(af_cost_graph_init(&cg, g, NULL) == AF_OK);
    int nodes[2] = {0, 1};
    af_fusion_candidate c = make_cand(AF_FUSION_ELEMENTWISE, "chain", -1, 2, nodes, y);
    af_group_estimate e;
    af_cost_estimate_group(&cg, &hw, &c, &e);
    /* unfused: 12 flops for each of 256 gates, 1 per product; fused: the Sigmoid's 12 per element */
    CHECK_NEAR(e.flops_unfused, 12.0 * 256 + 256.0 * 1024, 0, 1e-12);
    CHECK_NEAR(e.flops_fused, 12.0 * 256 * 1024 + 256.0 * 1024, 0, 1e-12);
    CHECK(e.time_fused_us > e.time_unfused_us);
    af_cost_graph_free(&cg);
    af_fusion_config cfg;
    config_defaults(&cfg);
    af_fusion_candidates cs = {0};
    af_fusion_candidates_push(&cs, &c, NULL);
    CHECK(af_cost_evaluate(g, &hw, &cfg, &cs, NULL) == AF_OK);
    CHECK(!cs.items[0].accepted);
    CHECK(starts(cs.items[0].reason, "cost: predicted slowdown"));
    af_fusion_candidates_free(&cs);
    af_graph_free(g);
}

AF_TEST(cost_symbolic_dims_are_nominal) {
    af_graph *g = chain3();
    g->values[2].t.dims[0] = -1;
    af_hw_model hw;
    fixed_hw(&hw);
    af_fusion_config cfg;
    config_defaults(&cfg);
    int nodes[2] = {1, 2};
    af_fusion_candidates cs = {0};
    af_fusion_candidate c = make_cand(AF_FUSION_ELEMENTWISE, "chain", -1, 2, nodes, 3);
    CHECK(af_fusion_candidates_push(&cs, &c, NULL) == AF_OK);
    CHECK(af_cost_evaluate(g, &hw, &cfg, &cs, NULL) == AF_OK);
    CHECK(cs.items[0].accepted);
    CHECK(strstr(cs.items[0].reason, "symbolic dims taken as 64") != NULL);
    cs.items[0].accepted = false;
    cs.items[0].reason[0] = '\0';
    cfg.enable_dynamic_shape = false;
    CHECK(af_cost_evaluate(g, &hw, &cfg, &cs, NULL) == AF_OK);
    CHECK(!cs.items[0].accepted);
    CHECK(strstr(cs.items[0].reason, "enable_dynamic_shape") != NULL);
    af_fusion_candidates_free(&cs);
    af_graph_free(g);
}

/* ---- gating --------------------------------------------------------------------------------- */

/* Evaluates one candidate {sig, tanh} (or the given family/rule) of chain3 under cfg. */
static af_fusion_candidate eval_one(const af_fusion_config *cfg, const af_hw_model *hw, af_fusion_family fam,
                                    const char *rule) {
    af_graph *g = chain3();
    int nodes[2] = {1, 2};
    af_fusion_candidates cs = {0};
    af_fusion_candidate c = make_cand(fam, rule, -1, 2, nodes, 3);
    af_fusion_candidates_push(&cs, &c, NULL);
    af_status st = af_cost_evaluate(g, hw, cfg, &cs, NULL);
    CHECK(st == AF_OK);
    af_fusion_candidate out = cs.items[0];
    af_fusion_candidates_free(&cs);
    af_graph_free(g);
    return out;
}

static bool starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

AF_TEST(cost_fusion_level_gating) {
    af_hw_model hw;
    fixed_hw(&hw);
    af_fusion_config cfg;
    config_defaults(&cfg);
    for (int f = 0; f < AF_FUSION_FAMILY_COUNT; f++) cfg.policy[f] = AF_POLICY_ALWAYS;
    /* family -> the lowest level that admits it */
    const int need[AF_FUSION_FAMILY_COUNT] = {
        [AF_FUSION_CONV_BN_RELU] = 1, [AF_FUSION_CONV_RESIDUAL] = 1, [AF_FUSION_MATMUL_ADD] = 1,
        [AF_FUSION_LAYERNORM] = 2,    [AF_FUSION_SQUEEZE_EXCITE] = 2, [AF_FUSION_POINTWISE_DEPTHWISE] = 2,
        [AF_FUSION_ELEMENTWISE] = 2,  [AF_FUSION_ATTENTION] = 3,
    };
    for (int level = 0; level <= 3; level++) {
        cfg.fusion_level = level;
        for (int f = 0; f < AF_FUSION_FAMILY_COUNT; f++) {
            af_fusion_candidate c = eval_one(&cfg, &hw, (af_fusion_family)f, "rule");
            bool want = level >= need[f];
            CHECK(c.accepted == want);
            if (level == 0) CHECK(!strcmp(c.reason, "fusion_level 0"));
            else if (!want) CHECK(starts(c.reason, "fusion_level") && strstr(c.reason, af_fusion_family_name(f)));
            else CHECK(starts(c.reason, "accepted"));
        }
        af_fusion_candidate d = eval_one(&cfg, &hw, AF_FUSION_ELEMENTWISE, "discovery");
        CHECK(d.accepted == (level == 3));
        if (level == 1 || level == 2) CHECK(strstr(d.reason, "discovery") != NULL);
    }
}

AF_TEST(cost_policies) {
    af_hw_model hw;
    fixed_hw(&hw);
    af_fusion_config cfg;
    config_defaults(&cfg);
    const af_fusion_family fam = AF_FUSION_LAYERNORM;
    cfg.policy[fam] = AF_POLICY_NEVER;
    af_fusion_candidate c = eval_one(&cfg, &hw, fam, "r");
    CHECK(!c.accepted && !strcmp(c.reason, "policy never for layernorm"));
    CHECK(c.score > 0); /* estimates are filled in whatever the decision */

    cfg.policy[fam] = AF_POLICY_MEMORY_AWARE; /* profitable, lowers peak: accepted */
    c = eval_one(&cfg, &hw, fam, "r");
    CHECK(c.accepted && starts(c.reason, "accepted: saves "));
    CHECK(strstr(c.reason, "KiB traffic") != NULL);
    CHECK(c.bytes_saved == 2.0 * (1 << 20));
    CHECK(c.peak_delta < 0);
    CHECK(c.est_time_fused_us < c.est_time_unfused_us && c.energy_saved_uj > 0);

    /* zero weights: score 0, below the default threshold (1%: 0.02 * (1 - 0.5)) */
    cfg.weight_latency = cfg.weight_memory = cfg.weight_energy = 0;
    c = eval_one(&cfg, &hw, fam, "r");
    CHECK(!c.accepted && starts(c.reason, "cost: score"));
    cfg.fusion_aggressiveness = 1; /* threshold 0: break-even is enough */
    c = eval_one(&cfg, &hw, fam, "r");
    CHECK(c.accepted);
    cfg.fusion_aggressiveness = 0.5;
    cfg.policy[fam] = AF_POLICY_ALWAYS; /* whatever the cost model says */
    c = eval_one(&cfg, &hw, fam, "r");
    CHECK(c.accepted && starts(c.reason, "accepted (policy always)"));
    cfg.policy[fam] = AF_POLICY_AGGRESSIVE; /* not a slowdown: accepted */
    c = eval_one(&cfg, &hw, fam, "r");
    CHECK(c.accepted);
}

/* x -> Relu -> a (4 MiB) -> ReduceMean -> b (4 KiB); x -> Tanh -> c; Add(b, c) -> d (output).
 * Fusing {ReduceMean, Add} keeps a alive across the Tanh: peak activation memory goes up. */
AF_TEST(cost_memory_aware_rejects_a_peak_increase) {
    af_graph *g = af_graph_new(NULL);
    int x = add_value(g, "x", AF_VALUE_INPUT, 1024, 1024);
    int a = add_value(g, "a", AF_VALUE_NODE, 1024, 1024);
    int b = add_value(g, "b", AF_VALUE_NODE, 1024, 1);
    int c = add_value(g, "c", AF_VALUE_NODE, 1024, 1024);
    int d = add_value(g, "d", AF_VALUE_NODE, 1024, 1024);
    add_node(g, "relu", "Relu", x, -1, a);
    add_node(g, "mean", "ReduceMean", a, -1, b);
    add_node(g, "tanh", "Tanh", x, -1, c);
    add_node(g, "add", "Add", b, c, d);
    g->values[d].is_output = true;
    af_hw_model hw;
    fixed_hw(&hw);
    hw.l3 = 64 << 20; /* every kernel at L3 speed: fusing costs no time */
    af_fusion_config cfg;
    config_defaults(&cfg);
    int nodes[2] = {1, 3};
    af_fusion_candidates cs = {0};
    af_fusion_candidate cand = make_cand(AF_FUSION_LAYERNORM, "r", 1, 2, nodes, d);
    af_fusion_candidates_push(&cs, &cand, NULL);
    CHECK(af_cost_evaluate(g, &hw, &cfg, &cs, NULL) == AF_OK);
    /* unfused peak b + c at the Tanh; fused a + c there: a - b more */
    CHECK_NEAR(cs.items[0].peak_delta, 4.0 * (1 << 20) - 4096, 0, 1e-12);
    CHECK(!cs.items[0].accepted && starts(cs.items[0].reason, "memory: raises peak"));
    cs.items[0].reason[0] = '\0';
    cfg.policy[AF_FUSION_LAYERNORM] = AF_POLICY_AGGRESSIVE; /* does not look at peak memory */
    cfg.strategy = AF_STRATEGY_AGGRESSIVE;
    CHECK(af_cost_evaluate(g, &hw, &cfg, &cs, NULL) == AF_OK);
    CHECK(cs.items[0].accepted);
    cs.items[0].accepted = false;
    cs.items[0].reason[0] = '\0';
    cfg.strategy = AF_STRATEGY_CONSERVATIVE;
    CHECK(af_cost_evaluate(g, &hw, &cfg, &cs, NULL) == AF_OK);
    CHECK(!cs.items[0].accepted && starts(cs.items[0].reason, "strategy conservative: raises peak"));
    af_fusion_candidates_free(&cs);
    af_graph_free(g);
}

/* a -> Add(a, b0) -> s1 -> Add(s1, b1) -> s2 -> Add(s2, b2) -> s3: each node fits in the L2, the
 * fused group's bytes together (a, b0, b1, b2, s3: 5 MiB) do not, and the L2 is 5x faster than
 * DRAM. The fused kernel moves 5 of the chain's 9 MiB with the same flops, so it must not be
 * estimated slower at any cache size: the cache level is picked by each member's own bytes, as
 * unfused. (Priced as one 5 MiB footprint, this group used to be "a predicted slowdown", and
 * MobileNetV3-L's large squeeze-excite blocks were left unfused on one core, taking 1.4-1.6x the
 * fused block's time.) */
AF_TEST(cost_fewer_bytes_never_predict_a_slowdown) {
    af_graph *g = af_graph_new(NULL);
    int a = add_value(g, "a", AF_VALUE_INPUT, 256, 1024);
    int bs[3], s[4] = {a};
    char name[16];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "b%d", i);
        bs[i] = add_value(g, name, AF_VALUE_INPUT, 256, 1024);
        snprintf(name, sizeof name, "s%d", i + 1);
        s[i + 1] = add_value(g, name, AF_VALUE_NODE, 256, 1024);
        add_node(g, name, "Add", s[i], bs[i], s[i + 1]);
    }
    g->values[s[3]].is_output = true;
    const size_t l2s[4] = {(size_t)1 << 20, (size_t)3 << 20 | 1, (size_t)5 << 20, (size_t)16 << 20};
    for (int k = 0; k < 4; k++) {
        af_hw_model hw;
        fixed_hw(&hw);
        hw.l2 = l2s[k];
        hw.l3 = 4 << 20;
        hw.kernel_overhead_us = 0;
        af_fusion_config cfg;
        config_defaults(&cfg);
        cfg.strategy = AF_STRATEGY_AGGRESSIVE;
        int nodes[3] = {0, 1, 2};
        af_fusion_candidates cs = {0};
        af_fusion_candidate c = make_cand(AF_FUSION_ELEMENTWISE, "adds", -1, 3, nodes, s[3]);
        af_fusion_candidates_push(&cs, &c, NULL);
        CHECK(af_cost_evaluate(g, &hw, &cfg, &cs, NULL) == AF_OK);
        CHECK(cs.items[0].est_time_fused_us < cs.items[0].est_time_unfused_us);
        CHECK(cs.items[0].bytes_saved == 4.0 * (1 << 20));
        CHECK(cs.items[0].accepted);
        af_fusion_candidates_free(&cs);
    }
    af_graph_free(g);
}

AF_TEST(cost_strategies) {
    af_hw_model hw;
    fixed_hw(&hw);
    af_fusion_config cfg;
    config_defaults(&cfg);
    af_graph *g = chain3();
    /* A one-node "group" saves no traffic: aggressive takes it (no slowdown), conservative not. */
    int one[1] = {1};
    af_fusion_candidate c = make_cand(AF_FUSION_ELEMENTWISE, "single", -1, 1, one, 2);
    for (int s = AF_STRATEGY_CONSERVATIVE; s < AF_STRATEGY_COUNT; s++) {
        cfg.strategy = (af_fusion_strategy)s;
        af_fusion_candidates cs = {0};
        af_fusion_candidates_push(&cs, &c, NULL);
        CHECK(af_cost_evaluate(g, &hw, &cfg, &cs, NULL) == AF_OK);
        CHECK(cs.items[0].bytes_saved == 0);
        if (s == AF_STRATEGY_CONSERVATIVE) CHECK(!strcmp(cs.items[0].reason, "strategy conservative: saves no memory traffic"));
        else CHECK(cs.items[0].accepted); /* temporal on a loop-free graph behaves like aggressive */
        af_fusion_candidates_free(&cs);
    }
    af_graph_free(g);

    /* Temporal takes repeated candidates down to the break-even threshold. Four identical
     * Relu -> Sigmoid pairs in series, scored 0 (zero weights): memory_aware rejects them at the
     * default threshold unless the strategy is temporal; a one-off candidate stays rejected. */
    g = af_graph_new(NULL);
    int prev = add_value(g, "x", AF_VALUE_INPUT, 64, 64);
    af_fusion_candidates cs = {0};
    for (int i = 0; i < 4; i++) {
        char n1[16], n2[16];
        snprintf(n1, sizeof n1, "r%d", i);
        snprintf(n2, sizeof n2, "s%d", i);
        int a = add_value(g, n1, AF_VALUE_NODE, 64, 64), b = add_value(g, n2, AF_VALUE_NODE, 64, 64);
        int nodes[2] = {add_node(g, n1, "Relu", prev, -1, a), add_node(g, n2, "Sigmoid", a, -1, b)};
        af_fusion_candidate rc = make_cand(AF_FUSION_LAYERNORM, "pair", -1, 2, nodes, b);
        af_fusion_candidates_push(&cs, &rc, NULL);
        prev = b;
    }
    int t = add_value(g, "t", AF_VALUE_NODE, 64, 64), u = add_value(g, "u", AF_VALUE_NODE, 64, 64);
    int lone[2] = {add_node(g, "t", "Tanh", prev, -1, t), add_node(g, "u", "Exp", t, -1, u)};
    g->values[u].is_output = true;
    af_fusion_candidate lc = make_cand(AF_FUSION_LAYERNORM, "pair", -1, 2, lone, u);
    af_fusion_candidates_push(&cs, &lc, NULL);
    cfg.weight_latency = cfg.weight_memory = cfg.weight_energy = 0;
    for (int s = AF_STRATEGY_CONSERVATIVE; s < AF_STRATEGY_COUNT; s++) {
        for (int i = 0; i < cs.n; i++) {
            cs.items[i].accepted = false;
            cs.items[i].reason[0] = '\0';
        }
        cfg.strategy = (af_fusion_strategy)s;
        CHECK(af_cost_evaluate(g, &hw, &cfg, &cs, NULL) == AF_OK);
        for (int i = 0; i < 4; i++) CHECK(cs.items[i].accepted == (s == AF_STRATEGY_TEMPORAL));
        CHECK(!cs.items[4].accepted);
    }
    af_fusion_candidates_free(&cs);
    af_graph_free(g);
}

AF_TEST(cost_choose_strategy) {
    af_hw_model hw;
    fixed_hw(&hw);
    af_fusion_config cfg;
    config_defaults(&cfg);
    af_graph *g = chain3(); /* 2 MiB of activations live at most */
    CHECK(af_cost_choose_strategy(g, &hw, &cfg) == AF_STRATEGY_AGGRESSIVE);
    cfg.strategy = AF_STRATEGY_TEMPORAL; /* not auto: as given */
    CHECK(af_cost_choose_strategy(g, &hw, &cfg) == AF_STRATEGY_TEMPORAL);
    cfg.strategy = AF_STRATEGY_AUTO;
    cfg.max_mem_usage = 2 << 20; /* tight limit */
    CHECK(af_cost_choose_strategy(g, &hw, &cfg) == AF_STRATEGY_CONSERVATIVE);
    cfg.max_mem_usage = 64 << 20;
    CHECK(af_cost_choose_strategy(g, &hw, &cfg) == AF_STRATEGY_AGGRESSIVE);
    hw.mem_available = 3 << 20; /* footprint above half of what is available */
    CHECK(af_cost_choose_strategy(g, &hw, &cfg) == AF_STRATEGY_CONSERVATIVE);
    hw.mem_available = (uint64_t)16 << 30;
    af_cost_graph cg;
    CHECK(af_cost_graph_init(&cg, g, NULL) == AF_OK);
    double w, act;
    af_cost_footprint(&cg, &w, &act);
    CHECK(w == 0);
    CHECK_NEAR(act, 2.0 * (1 << 20), 0, 1e-12); /* x + a at the Relu, a + b, then b + c: two at a time */
    af_cost_graph_free(&cg);
    /* a Loop anywhere: temporal */
    int lv = add_value(g, "loop_out", AF_VALUE_NODE, 1, 1);
    add_node(g, "loop", "Loop", 3, -1, lv);
    CHECK(g->nodes[g->n_nodes - 1].op == AF_OP_LOOP);
    CHECK(af_cost_choose_strategy(g, &hw, &cfg) == AF_STRATEGY_TEMPORAL);
    af_graph_free(g);
    /* a recurrent layer: temporal too */
    static const char *const recurrent[] = {"LSTM", "GRU", "RNN"};
    for (int r = 0; r < 3; r++) {
        g = chain3();
        CHECK(af_cost_choose_strategy(g, &hw, &cfg) == AF_STRATEGY_AGGRESSIVE);
        int rv = add_value(g, "rnn_out", AF_VALUE_NODE, 1, 1);
        add_node(g, "rnn", recurrent[r], 3, -1, rv);
        CHECK(!strcmp(af_op_info(g->nodes[g->n_nodes - 1].op)->name, recurrent[r]));
        CHECK(af_cost_choose_strategy(g, &hw, &cfg) == AF_STRATEGY_TEMPORAL);
        af_graph_free(g);
    }
}

AF_TEST(cost_legality_and_decided_candidates) {
    af_hw_model hw;
    fixed_hw(&hw);
    af_fusion_config cfg;
    config_defaults(&cfg);
    af_graph *g = chain3();
    af_fusion_candidates cs = {0};
    int all[3] = {0, 1, 2}, bad[2] = {1, 7}, skip[2] = {0, 2}, leak[2] = {0, 1};
    af_fusion_candidate c0 = make_cand(AF_FUSION_ELEMENTWISE, "r", -1, 3, all, 3);
    c0.accepted = false;
    snprintf(c0.reason, sizeof c0.reason, "pattern: rejected for its own reasons");
    af_fusion_candidates_push(&cs, &c0, NULL);
    af_fusion_candidate c1 = make_cand(AF_FUSION_ELEMENTWISE, "r", -1, 2, bad, 3);
    af_fusion_candidates_push(&cs, &c1, NULL);
    af_fusion_candidate c2 = make_cand(AF_FUSION_ELEMENTWISE, "r", -1, 2, skip, 3); /* relu, tanh: not convex */
    af_fusion_candidates_push(&cs, &c2, NULL);
    af_fusion_candidate c3 = make_cand(AF_FUSION_ELEMENTWISE, "r", -1, 2, leak, 1); /* b escapes... output a */
    af_fusion_candidates_push(&cs, &c3, NULL);
    af_fusion_candidate c4 = make_cand(AF_FUSION_ELEMENTWISE, "r", -1, 3, all, 3);
    af_fusion_candidates_push(&cs, &c4, NULL);
    cfg.max_fused_ops = 2;
    CHECK(af_cost_evaluate(g, &hw, &cfg, &cs, NULL) == AF_OK);
    CHECK(!cs.items[0].accepted && !strcmp(cs.items[0].reason, "pattern: rejected for its own reasons"));
    CHECK(cs.items[0].score > 0); /* estimated anyway */
    CHECK(!cs.items[1].accepted && starts(cs.items[1].reason, "invalid candidate"));
    CHECK(!cs.items[2].accepted && starts(cs.items[2].reason, "cycle"));
    CHECK(!cs.items[3].accepted && starts(cs.items[3].reason, "not closed"));
    CHECK(!cs.items[4].accepted && starts(cs.items[4].reason, "max_fused_ops"));
    cs.items[4].reason[0] = '\0';
    cfg.max_fused_ops = 16;
    cfg.no_fusion_ops[AF_OP_SIGMOID] = true;
    CHECK(af_cost_evaluate(g, &hw, &cfg, &cs, NULL) == AF_OK);
    CHECK(!cs.items[4].accepted && !strcmp(cs.items[4].reason, "no_fusion_ops: Sigmoid 'sig'"));
    af_fusion_candidates_free(&cs);
    af_graph_free(g);
}

AF_TEST(cost_out_of_memory_leaves_candidates_untouched) {
    af_hw_model hw;
    fixed_hw(&hw);
    af_fusion_config cfg;
    config_defaults(&cfg);
    af_graph *g = chain3();
    int xy[2] = {0, 1}, xyz[3] = {0, 1, 2};
    af_fusion_candidates cs = {0};
    af_fusion_candidate a = make_cand(AF_FUSION_ELEMENTWISE, "a", -1, 2, xy, 2);
    af_fusion_candidate b = make_cand(AF_FUSION_ELEMENTWISE, "b", -1, 3, xyz, 3);
    af_fusion_candidates_push(&cs, &a, NULL);
    af_fusion_candidates_push(&cs, &b, NULL);
    af_fusion_candidate before[2];
    memcpy(before, cs.items, sizeof before);
    int ok_at = -1;
    for (int k = 0; k < 64 && ok_at < 0; k++) {
        af_error err = {0};
        af_alloc_fail_after(k);
        af_status st = af_cost_evaluate(g, &hw, &cfg, &cs, &err);
        af_alloc_fail_after(-1);
        if (st == AF_OK) {
            ok_at = k;
            break;
        }
        CHECK(st == AF_ERR_OUT_OF_MEMORY);
        CHECK(strstr(err.message, "out of memory") != NULL);
        CHECK(memcmp(before, cs.items, sizeof before) == 0);
    }
    CHECK(ok_at > 0);
    CHECK(cs.items[1].accepted && !cs.items[0].accepted);
    af_fusion_candidates_free(&cs);
    af_graph_free(g);
}

/* ---- overlaps ------------------------------------------------------------------------------- */

AF_TEST(cost_overlaps_keep_the_best) {
    af_hw_model hw;
    fixed_hw(&hw);
    af_fusion_config cfg;
    config_defaults(&cfg);
    for (int f = 0; f < AF_FUSION_FAMILY_COUNT; f++) cfg.policy[f] = AF_POLICY_ALWAYS;
    af_graph *g = chain3();
    int xy[2] = {0, 1}, yz[2] = {1, 2}, xyz[3] = {0, 1, 2};
    af_fusion_candidate cx = make_cand(AF_FUSION_ELEMENTWISE, "first_two", -1, 2, xy, 2);
    af_fusion_candidate cy = make_cand(AF_FUSION_ELEMENTWISE, "last_two", -1, 2, yz, 3);
    af_fusion_candidate cz = make_cand(AF_FUSION_ELEMENTWISE, "all_three", -1, 3, xyz, 3);
    af_fusion_candidates cs = {0};
    af_fusion_candidates_push(&cs, &cx, NULL);
    af_fusion_candidates_push(&cs, &cy, NULL);
    af_fusion_candidates_push(&cs, &cz, NULL);
    CHECK(af_cost_evaluate(g, &hw, &cfg, &cs, NULL) == AF_OK);
    /* The three-node group removes two intermediates and saves the most in total, though the
     * Relu+Sigmoid pair saves a larger share of its own (smaller) cost: overlaps go by total gain. */
    CHECK(cs.items[0].score > cs.items[2].score);
    CHECK(cs.items[2].bytes_saved > cs.items[0].bytes_saved);
    CHECK(cs.items[2].accepted);
    CHECK(!cs.items[0].accepted && !strcmp(cs.items[0].reason, "overlaps group all_three at node 'relu'"));
    CHECK(!cs.items[1].accepted && !strcmp(cs.items[1].reason, "overlaps group all_three at node 'sig'"));

    /* scores tied (all weights 0): the larger group still wins, wherever it is in the list */
    cfg.weight_latency = cfg.weight_memory = cfg.weight_energy = 0;
    af_fusion_candidates ts = {0};
    af_fusion_candidates_push(&ts, &cx, NULL);
    af_fusion_candidates_push(&ts, &cz, NULL);
    af_fusion_candidates_push(&ts, &cy, NULL);
    CHECK(af_cost_evaluate(g, &hw, &cfg, &ts, NULL) == AF_OK);
    CHECK(ts.items[0].score == ts.items[1].score);
    CHECK(!ts.items[0].accepted && ts.items[1].accepted && !ts.items[2].accepted);
    CHECK(starts(ts.items[2].reason, "overlaps group all_three"));

    /* disjoint candidates both stay */
    af_fusion_candidate c0 = make_cand(AF_FUSION_ELEMENTWISE, "a", -1, 1, xy, 1);
    af_fusion_candidate c1 = make_cand(AF_FUSION_ELEMENTWISE, "b", -1, 2, yz, 3);
    af_fusion_candidates ds = {0};
    af_fusion_candidates_push(&ds, &c0, NULL);
    af_fusion_candidates_push(&ds, &c1, NULL);
    CHECK(af_cost_evaluate(g, &hw, &cfg, &ds, NULL) == AF_OK);
    CHECK(ds.items[0].accepted && ds.items[1].accepted);
    af_fusion_candidates_free(&cs);
    af_fusion_candidates_free(&ts);
    af_fusion_candidates_free(&ds);
    af_graph_free(g);
}

/* ---- hardware ------------------------------------------------------------------------------- */

static void tmp_path(char *buf, size_t size, const char *leaf) {
    const char *t = getenv("TMPDIR");
    snprintf(buf, size, "%s/af_test_cost_%ld_%s", t && *t ? t : "/tmp", (long)getpid(), leaf);
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

AF_TEST(cost_hw_probe_and_cache) {
    char path[512];
    tmp_path(path, sizeof path, "hw.txt");
    remove(path);
    af_fusion_config cfg;
    config_defaults(&cfg);
    cfg.hardware_cache = path;
    af_hw_model hw;
    CHECK(af_hw_model_probe(&cfg, &hw, NULL) == AF_OK);
    CHECK(hw.n_cores >= 1 && hw.n_cores == hw.n_cores_probed);
    CHECK(hw.peak_source == AF_HW_MEASURED && hw.bandwidth_source == AF_HW_MEASURED);
    CHECK(hw.peak_gflops > 0 && hw.bandwidth_gbs > 0 && hw.bw_l2_core_gbs > 0 && hw.bw_l3_core_gbs > 0);
    CHECK(hw.bench_ms > 0);
    CHECK(hw.l2 > 0 && hw.mem_available > 0);
    CHECK(exists(path));
    printf("  %s, %s, %d cores: %.1f GFLOP/s per core, L2 %.1f, L3 %.1f, DRAM %.1f GB/s per core, %.1f GB/s "
           "all; %.0f ms measuring\n",
           hw.cpu_model, af_isa_name(hw.isa), hw.n_cores, hw.peak_gflops_core, hw.bw_l2_core_gbs, hw.bw_l3_core_gbs,
           hw.bw_dram_core_gbs, hw.bw_dram_all_gbs, hw.bench_ms);

    af_hw_model again;
    CHECK(af_hw_model_probe(&cfg, &again, NULL) == AF_OK);
    CHECK(again.peak_source == AF_HW_CACHED && again.bandwidth_source == AF_HW_CACHED);
    CHECK(again.bench_ms == 0);
    CHECK_NEAR(again.peak_gflops, hw.peak_gflops, 0, 1e-5);
    CHECK_NEAR(again.bandwidth_gbs, hw.bandwidth_gbs, 0, 1e-5);
    CHECK_NEAR(again.bw_l2_core_gbs, hw.bw_l2_core_gbs, 0, 1e-5);

    /* corrupt files are ignored and rewritten */
    const char *corrupt[] = {"garbage\n", "version=1\ncpu=x\n\x01\x02", "", "peak_gflops_core=-3\n"};
    for (size_t i = 0; i < sizeof corrupt / sizeof corrupt[0]; i++) {
        FILE *f = fopen(path, "w");
        CHECK(f != NULL);
        if (!f) break;
        fputs(corrupt[i], f);
        fclose(f);
        af_hw_model m;
        CHECK(af_hw_model_probe(&cfg, &m, NULL) == AF_OK);
        CHECK(m.peak_source == AF_HW_MEASURED && m.bandwidth_source == AF_HW_MEASURED);
        CHECK(m.peak_gflops > 0 && m.bandwidth_gbs > 0);
        CHECK(af_hw_model_probe(&cfg, &m, NULL) == AF_OK);
        CHECK(m.peak_source == AF_HW_CACHED && m.bandwidth_source == AF_HW_CACHED);
    }
    /* entries per CPU, core count and ISA level, old and corrupt files: test_hw_cache.c */
    remove(path);

    af_hw_model scaled = hw;
    af_hw_model_scale_threads(&scaled, 1);
    CHECK_NEAR(scaled.peak_gflops, hw.peak_gflops_core, 0, 1e-12);
    CHECK(scaled.bandwidth_gbs <= hw.bw_dram_core_gbs * 1.0000001);
    CHECK(af_hw_model_probe(&cfg, NULL, NULL) == AF_ERR_INVALID_ARGUMENT);
}

AF_TEST(cost_hw_config_and_lite_mode) {
    char path[512];
    tmp_path(path, sizeof path, "unused.txt");
    remove(path);
    af_fusion_config cfg;
    config_defaults(&cfg);
    cfg.hardware_cache = path;
    cfg.peak_gflops = 123.5;
    cfg.bandwidth_gbs = 45.25;
    af_hw_model hw;
    CHECK(af_hw_model_probe(&cfg, &hw, NULL) == AF_OK);
    CHECK(hw.peak_source == AF_HW_CONFIG && hw.bandwidth_source == AF_HW_CONFIG);
    CHECK_NEAR(hw.peak_gflops, 123.5, 0, 1e-12);
    CHECK_NEAR(hw.bandwidth_gbs, 45.25, 0, 1e-12);
    CHECK(hw.bench_ms == 0);
    CHECK(!exists(path)); /* nothing measured, nothing cached */

    config_defaults(&cfg);
    cfg.hardware_cache = path;
    cfg.lite_mode = true;
    CHECK(af_hw_model_probe(&cfg, &hw, NULL) == AF_OK);
    CHECK(hw.peak_source == AF_HW_DEFAULT && hw.bandwidth_source == AF_HW_DEFAULT);
    CHECK(hw.bench_ms == 0);
    CHECK(!exists(path));
    CHECK(hw.peak_gflops > 0 && hw.bandwidth_gbs > 0 && hw.n_cores >= 1);
    cfg.bandwidth_gbs = 7; /* config numbers beat lite_mode's defaults */
    CHECK(af_hw_model_probe(&cfg, &hw, NULL) == AF_OK);
    CHECK(hw.bandwidth_source == AF_HW_CONFIG && hw.bandwidth_gbs == 7 && hw.peak_source == AF_HW_DEFAULT);
    CHECK(!exists(path));

    /* the default cache path, and no cache at all when neither variable is set */
    char *home = getenv("HOME") ? af_strdup(getenv("HOME")) : NULL;
    char *xdg = getenv("XDG_CACHE_HOME") ? af_strdup(getenv("XDG_CACHE_HOME")) : NULL;
    char buf[512];
    setenv("XDG_CACHE_HOME", "/some/cache", 1);
    af_hw_default_cache_path(buf, sizeof buf);
    CHECK(!strcmp(buf, "/some/cache/autofusion/hardware.txt"));
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/u", 1);
    af_hw_default_cache_path(buf, sizeof buf);
    CHECK(!strcmp(buf, "/home/u/.cache/autofusion/hardware.txt"));
    unsetenv("HOME");
    af_hw_default_cache_path(buf, sizeof buf);
    CHECK(buf[0] == '\0');
    config_defaults(&cfg);
    cfg.peak_gflops = 50; /* measure only the bandwidths, with nowhere to cache them */
    CHECK(af_hw_model_probe(&cfg, &hw, NULL) == AF_OK);
    CHECK(hw.bandwidth_source == AF_HW_MEASURED && hw.bandwidth_gbs > 0 && hw.peak_source == AF_HW_CONFIG);
    if (home) setenv("HOME", home, 1);
    if (xdg) setenv("XDG_CACHE_HOME", xdg, 1);
    af_free(home);
    af_free(xdg);
}

static void make_dirs(const char *root, const char *rel) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    for (char *q = p + strlen(root) + 1; *q; q++) {
        if (*q != '/') continue;
        *q = '\0';
        mkdir(p, 0755);
        *q = '/';
    }
    mkdir(p, 0755);
}

AF_TEST(cost_hw_available_memory_from_proc_and_cgroups) {
    char root[512], p[700];
    tmp_path(root, sizeof root, "root");
    mkdir(root, 0755);
    make_dirs(root, "proc/self");
    make_dirs(root, "sys/fs/cgroup/memory/job");
    snprintf(p, sizeof p, "%s/proc/meminfo", root);
    af_test_write_file(p, "MemTotal:       16000000 kB\nMemFree:  100 kB\nMemAvailable:    8000000 kB\n");
    CHECK(af_hw_available_memory(root) == (uint64_t)8000000 * 1024);
    /* cgroup v2 at the mount: limit - usage wins when smaller */
    snprintf(p, sizeof p, "%s/sys/fs/cgroup/memory.max", root);
    af_test_write_file(p, "1000000000\n");
    snprintf(p, sizeof p, "%s/sys/fs/cgroup/memory.current", root);
    af_test_write_file(p, "400000000\n");
    CHECK(af_hw_available_memory(root) == 600000000u);
    snprintf(p, sizeof p, "%s/sys/fs/cgroup/memory.max", root);
    af_test_write_file(p, "max\n"); /* unlimited */
    CHECK(af_hw_available_memory(root) == (uint64_t)8000000 * 1024);
    /* cgroup v1, found through /proc/self/cgroup; a v1 "unlimited" is ignored */
    snprintf(p, sizeof p, "%s/proc/self/cgroup", root);
    af_test_write_file(p, "4:memory:/job\n0::/\n");
    snprintf(p, sizeof p, "%s/sys/fs/cgroup/memory/memory.limit_in_bytes", root);
    af_test_write_file(p, "9223372036854771712\n");
    snprintf(p, sizeof p, "%s/sys/fs/cgroup/memory/job/memory.limit_in_bytes", root);
    af_test_write_file(p, "300000000\n");
    snprintf(p, sizeof p, "%s/sys/fs/cgroup/memory/job/memory.usage_in_bytes", root);
    af_test_write_file(p, "100000000\n");
    CHECK(af_hw_available_memory(root) == 200000000u);
    /* nothing readable: 0 */
    char empty[600];
    snprintf(empty, sizeof empty, "%s/nothing", root);
    CHECK(af_hw_available_memory(empty) == 0);
    CHECK(af_hw_available_memory("") > 0);
    /* clean up the fake tree */
    const char *files[] = {"proc/meminfo", "proc/self/cgroup", "sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory.current",
                           "sys/fs/cgroup/memory/memory.limit_in_bytes", "sys/fs/cgroup/memory/job/memory.limit_in_bytes",
                           "sys/fs/cgroup/memory/job/memory.usage_in_bytes"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", root, files[i]);
        remove(p);
    }
    const char *dirs[] = {"sys/fs/cgroup/memory/job", "sys/fs/cgroup/memory", "sys/fs/cgroup", "sys/fs", "sys",
                          "proc/self", "proc", ""};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", root, dirs[i]);
        rmdir(p);
    }
}

/* ---- the full models ------------------------------------------------------------------------ */

/* Anchor + single-consumer elementwise chains, every prefix as its own candidate (so they overlap),
 * plus anchor-less elementwise pairs: roughly what the pattern layer produces, and more. */
static void greedy_candidates(const af_graph *g, af_fusion_candidates *cs) {
    for (int i = 0; i < g->n_nodes; i++) {
        af_op op = g->nodes[i].op;
        bool anchor = op == AF_OP_CONV || op == AF_OP_MAT_MUL || op == AF_OP_GEMM;
        af_opclass cls = op < AF_OP_COUNT ? af_op_info(op)->cls : AF_OPCLASS_OPAQUE;
        bool elementwise = cls == AF_OPCLASS_ELEMENTWISE || cls == AF_OPCLASS_BROADCAST;
        if (!anchor && !elementwise) continue;
        af_fusion_candidate c = {.family = op == AF_OP_CONV ? AF_FUSION_CONV_BN_RELU
                                           : anchor       ? AF_FUSION_MATMUL_ADD
                                                          : AF_FUSION_ELEMENTWISE,
                                 .anchor = anchor ? i : -1, .n_nodes = 1};
        snprintf(c.rule, sizeof c.rule, anchor ? "chain" : "ew_chain");
        c.nodes[0] = i;
        int v = g->nodes[i].outputs[0];
        for (;;) {
            int next = g->values[v].is_output ? -1 : only_consumer(g, v);
            if (next < 0 || c.n_nodes == 8) break;
            af_opclass nc = af_op_info(g->nodes[next].op)->cls;
            if (nc != AF_OPCLASS_ELEMENTWISE && nc != AF_OPCLASS_BROADCAST) break;
            c.nodes[c.n_nodes++] = next;
            v = c.output = g->nodes[next].outputs[0];
            af_fusion_candidates_push(cs, &c, NULL);
            if (!anchor) break;
        }
    }
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static void check_no_overlap(const af_graph *g, const af_fusion_candidates *cs) {
    int *owner = af_malloc((size_t)g->n_nodes * sizeof *owner);
    for (int i = 0; i < g->n_nodes; i++) owner[i] = -1;
    int clashes = 0;
    for (int k = 0; k < cs->n; k++) {
        if (!cs->items[k].accepted) continue;
        for (int i = 0; i < cs->items[k].n_nodes; i++) {
            if (owner[cs->items[k].nodes[i]] >= 0) clashes++;
            owner[cs->items[k].nodes[i]] = k;
        }
    }
    CHECK_EQ_INT(clashes, 0);
    af_free(owner);
}

AF_TEST(cost_evaluate_time_on_full_models) {
    const char *models[] = {"bert_base", "resnet50", "bert_tiny", "mobilenet_v3_small"};
    af_hw_model hw;
    fixed_hw(&hw);
    af_fusion_config cfg;
    config_defaults(&cfg);
    cfg.fusion_level = 3;
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
        char path[1024];
        if (k < 2) snprintf(path, sizeof path, "%s/../build/models/%s/model.onnx", af_test_dir(), models[k]);
        else snprintf(path, sizeof path, "%s/models/%s/model.onnx", af_test_dir(), models[k]);
        if (!exists(path)) {
            printf("  %s: not found (sh models/make_fixtures.sh --full), skipped\n", models[k]);
            continue;
        }
        af_model *m = NULL;
        af_error err = {0};
        if (af_model_load(path, NULL, &m, &err) != AF_OK) {
            af_test_fail(__FILE__, __LINE__, "loading %s: %s", path, err.message);
            continue;
        }
        for (int source = 0; source < 2; source++) {
            /* 0: the hand-made greedy lists (overlapping on purpose); 1: the pattern layer's */
            af_fusion_candidates cs = {0};
            if (source == 0) {
                greedy_candidates(m->graph, &cs);
            } else {
                af_rule_set *rs = NULL;
                af_fusion_config pcfg;
                config_defaults(&pcfg);
                af_status pst = af_rules_builtin(&rs, &err);
                if (pst == AF_OK) pst = af_pattern_find(m->graph, rs, &pcfg, &cs, &err);
                af_rules_free(rs);
                if (pst != AF_OK) {
                    printf("  %s: pattern layer failed (%s), skipped\n", models[k], err.message);
                    af_fusion_candidates_free(&cs);
                    continue;
                }
            }
            int pre_rejected = 0;
            for (int i = 0; i < cs.n; i++) pre_rejected += !cs.items[i].accepted && cs.items[i].reason[0];
            double t0 = now_ms();
            CHECK(af_cost_evaluate(m->graph, &hw, &cfg, &cs, &err) == AF_OK);
            double dt = now_ms() - t0;
            int acc = 0, undecided = 0;
            double saved = 0;
            for (int i = 0; i < cs.n; i++) {
                acc += cs.items[i].accepted;
                undecided += !cs.items[i].accepted && !cs.items[i].reason[0];
                if (cs.items[i].accepted) saved += cs.items[i].est_time_unfused_us - cs.items[i].est_time_fused_us;
            }
            CHECK_EQ_INT(undecided, 0);
            CHECK(acc > 0 || cs.n == pre_rejected);
            check_no_overlap(m->graph, &cs);
            printf("  %s, %s candidates: %d nodes, %d candidates (%d rejected before), %d accepted (est. %.0f us "
                   "saved), strategy %d, evaluated in %.2f ms\n",
                   models[k], source ? "pattern" : "greedy", m->graph->n_nodes, cs.n, pre_rejected, acc, saved,
                   (int)af_cost_choose_strategy(m->graph, &hw, &cfg), dt);
            af_fusion_candidates_free(&cs);
        }
        af_model_free(m);
    }
}
