/* Layer 3 on hand-made candidates: every Conv/MatMul/Gemm followed by a chain of single-consumer
 * elementwise nodes becomes one fused step; outputs must equal the unfused plan's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fusion/config.h"
#include "fusion/pattern/pattern.h"
#include "fusion/sched/sched.h"
#include "ir/model.h"
#include "runtime/executor.h"
#include "unit.h"
#include "util/alloc.h"

static int consumers(const af_graph *g, int v, int *only) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] == v) {
                n++;
                *only = i;
            }
    return n;
}

/* Greedy chains: anchor, then while the running value has one consumer that is elementwise. */
static void chains(const af_graph *g, af_fusion_candidates *cs) {
    for (int i = 0; i < g->n_nodes; i++) {
        af_op op = g->nodes[i].op;
        if (op != AF_OP_CONV && op != AF_OP_MAT_MUL && op != AF_OP_GEMM) continue;
        af_fusion_candidate c = {.family = op == AF_OP_CONV ? AF_FUSION_CONV_BN_RELU : AF_FUSION_MATMUL_ADD,
                                 .anchor = i, .n_nodes = 1, .accepted = true};
        snprintf(c.rule, sizeof c.rule, "test_chain");
        c.nodes[0] = i;
        int v = g->nodes[i].outputs[0], next;
        while (c.n_nodes < 8 && !g->values[v].is_output && consumers(g, v, &next) == 1) {
            af_opclass cls = af_op_info(g->nodes[next].op)->cls;
            if (cls != AF_OPCLASS_ELEMENTWISE && cls != AF_OPCLASS_BROADCAST) break;
            c.nodes[c.n_nodes++] = next;
            v = g->nodes[next].outputs[0];
        }
        c.output = v;
        if (c.n_nodes > 1) af_fusion_candidates_push(cs, &c, NULL);
    }
}

static af_status run_plan(const af_graph *g, const af_exec_plan *plan, const char *dir, af_tensor *out0) {
    af_error err = {0};
    af_lifetimes lt;
    af_memory_plan mp;
    af_status st = af_lifetimes_compute(g, plan, &lt, &err);
    if (st != AF_OK) return st;
    if ((st = af_memory_plan_build(g, &lt, &mp, &err)) != AF_OK) {
        af_lifetimes_free(&lt);
        return st;
    }
    uint8_t *arena = mp.arena_bytes ? af_malloc_aligned(mp.arena_bytes) : NULL;
    void *ws = plan->workspace_bytes ? af_malloc_aligned(plan->workspace_bytes) : NULL;
    af_exec e;
    st = af_exec_init(&e, g, NULL, &err);
    e.plan = plan, e.lifetimes = &lt, e.memory = &mp, e.arena = arena, e.workspace = ws;
    af_test_tensors in = {0};
    if (st == AF_OK && (!af_test_read_set(dir, "input", &in) || in.n != g->n_inputs)) {
        st = AF_ERR_INVALID_ARGUMENT;
        snprintf(err.message, sizeof err.message, "%d test inputs for %d graph inputs", in.n, g->n_inputs);
    }
    for (int k = 0; st == AF_OK && k < in.n; k++) e.env[g->inputs[k]] = in.t[k];
    if (st == AF_OK) st = af_exec_run(&e, &err);
    if (st != AF_OK) printf("  run failed: %s\n", err.message);
    if (st == AF_OK) st = af_exec_take(&e, g->outputs[0], out0, &err);
    af_exec_release(&e);
    af_test_tensors_free(&in);
    af_free_aligned(arena);
    af_free_aligned(ws);
    af_memory_plan_free(&mp);
    af_lifetimes_free(&lt);
    return st;
}

AF_TEST(sched_fused_chains_match_unfused_on_fixtures) {
    const char *names[] = {"resnet_small", "resnet_small_bn", "mobilenet_v3_small", "mobilenet_v3_small_bn",
                           "bert_tiny", "bert_tiny_op11"};
    for (size_t f = 0; f < sizeof names / sizeof names[0]; f++) {
        char dir[1024], path[1100];
        snprintf(dir, sizeof dir, "%s/models/%s", af_test_dir(), names[f]);
        snprintf(path, sizeof path, "%s/model.onnx", dir);
        af_model *m = NULL;
        CHECK(af_model_load(path, NULL, &m, NULL) == AF_OK);
        if (!m) continue;
        const af_graph *g = m->graph;
        af_fusion_candidates cs = {0};
        chains(g, &cs);
        af_sched_options o = {.kernels = {.isa = af_cpu_isa(), .n_threads = 1}, .fusion_level = 1};
        af_exec_plan fused, plain;
        CHECK(af_sched_build(g, &cs, &o, &fused, NULL) == AF_OK);
        CHECK(af_exec_plan_unfused(g, &o.kernels, false, NULL, &plain, NULL) == AF_OK);
        int built = 0;
        for (int k = 0; k < cs.n; k++) {
            if (cs.items[k].accepted) built++;
            else printf("  %s: not built: %s\n", names[f], cs.items[k].reason);
        }
        printf("  %s: %d of %d chains fused, %d steps instead of %d\n", names[f], built, cs.n, fused.n_steps,
               plain.n_steps);
        CHECK(built > 0);
        int covered = 0;
        for (int k = 0; k < cs.n; k++) covered += cs.items[k].accepted ? cs.items[k].n_nodes - 1 : 0;
        CHECK_EQ_INT(fused.n_steps, plain.n_steps - covered);
        af_tensor a = {0}, b = {0};
        CHECK(run_plan(g, &fused, dir, &a) == AF_OK);
        CHECK(run_plan(g, &plain, dir, &b) == AF_OK);
        CHECK(af_tensor_same_shape(&a, &b));
        CHECK(af_test_count_beyond(&a, &b, 1e-3, 1e-4) == 0);
        af_tensor_free_data(&a);
        af_tensor_free_data(&b);
        af_exec_plan_free(&fused);
        af_exec_plan_free(&plain);
        af_fusion_candidates_free(&cs);
        af_model_free(m);
    }
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static void add_node(af_fusion_candidate *c, int n) {
    for (int i = 0; i < c->n_nodes; i++)
        if (c->nodes[i] == n) return;
    c->nodes[c->n_nodes++] = n;
}

/* Adds v's producer and, through Transpose/Reshape, theirs (up to `depth` levels). */
static void add_back(const af_graph *g, af_fusion_candidate *c, int v, int depth) {
    int p = v >= 0 ? g->values[v].producer : -1;
    if (p < 0 || depth == 0) return;
    af_op op = g->nodes[p].op;
    if (op != AF_OP_TRANSPOSE && op != AF_OP_RESHAPE) return;
    add_node(c, p);
    add_back(g, c, g->nodes[p].inputs[0], depth - 1);
}

/* The exported attention block around each Softmax, collected by hand (the pattern layer's job). */
static void attention_blocks(const af_graph *g, af_fusion_candidates *cs) {
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].op != AF_OP_SOFTMAX) continue;
        af_fusion_candidate c = {.family = AF_FUSION_ATTENTION, .anchor = i, .accepted = true};
        snprintf(c.rule, sizeof c.rule, "test_attention");
        add_node(&c, i);
        int v = g->nodes[i].inputs[0];
        for (int hop = 0; hop < 3; hop++) { /* Add mask, Div, MatMul */
            int p = g->values[v].producer;
            if (p < 0) break;
            add_node(&c, p);
            if (g->nodes[p].op == AF_OP_MAT_MUL) {
                add_back(g, &c, g->nodes[p].inputs[0], 2);
                add_back(g, &c, g->nodes[p].inputs[1], 2);
                break;
            }
            int a = g->nodes[p].inputs[0];
            v = g->values[a].producer >= 0 && g->nodes[g->values[a].producer].op != AF_OP_UNKNOWN ? a : g->nodes[p].inputs[1];
            if (g->nodes[p].op == AF_OP_ADD && g->values[g->nodes[p].inputs[1]].producer >= 0 &&
                g->nodes[g->values[g->nodes[p].inputs[1]].producer].op == AF_OP_DIV)
                v = g->nodes[p].inputs[1];
        }
        int out = g->nodes[i].outputs[0], next;
        for (int hop = 0; hop < 3 && consumers(g, out, &next) == 1; hop++) { /* MatMul V, Transpose, Reshape */
            add_node(&c, next);
            if (g->nodes[next].op == AF_OP_MAT_MUL) add_back(g, &c, g->nodes[next].inputs[1], 2);
            out = g->nodes[next].outputs[0];
        }
        c.output = out;
        qsort(c.nodes, (size_t)c.n_nodes, sizeof c.nodes[0], cmp_int);
        af_fusion_candidates_push(cs, &c, NULL);
    }
}

AF_TEST(sched_fused_attention_matches_unfused_on_bert) {
    const char *names[] = {"bert_tiny", "bert_tiny_op11", "bert_tiny_dynamic"};
    for (size_t f = 0; f < sizeof names / sizeof names[0]; f++) {
        char dir[1024], path[1100];
        snprintf(dir, sizeof dir, "%s/models/%s", af_test_dir(), names[f]);
        snprintf(path, sizeof path, "%s/model.onnx", dir);
        af_model *m = NULL;
        CHECK(af_model_load(path, NULL, &m, NULL) == AF_OK);
        if (!m) continue;
        const af_graph *g = m->graph;
        af_fusion_candidates cs = {0};
        attention_blocks(g, &cs);
        CHECK_EQ_INT(cs.n, 2); /* two layers */
        af_sched_options o = {.kernels = {.isa = af_cpu_isa(), .n_threads = 1}, .fusion_level = 3};
        af_exec_plan fused, plain;
        CHECK(af_sched_build(g, &cs, &o, &fused, NULL) == AF_OK);
        CHECK(af_exec_plan_unfused(g, &o.kernels, false, NULL, &plain, NULL) == AF_OK);
        /* With symbolic batch and sequence the head split is a run-time Reshape whose target is
         * Concat(dims 0 and 1 of Shape(x), H, D): its form proves the layout, so it fuses too. */
        for (int k = 0; k < cs.n; k++) {
            CHECK(cs.items[k].accepted);
            if (!cs.items[k].accepted) printf("  %s: %s\n", names[f], cs.items[k].reason);
        }
        af_tensor a = {0}, b = {0};
        CHECK(run_plan(g, &fused, dir, &a) == AF_OK);
        CHECK(run_plan(g, &plain, dir, &b) == AF_OK);
        CHECK(af_tensor_same_shape(&a, &b));
        CHECK_EQ_INT(af_test_count_beyond(&a, &b, 1e-3, 1e-4), 0);
        printf("  %s: %d attention blocks, %d steps instead of %d\n", names[f], cs.n, fused.n_steps, plain.n_steps);
        af_tensor_free_data(&a);
        af_tensor_free_data(&b);
        af_exec_plan_free(&fused);
        af_exec_plan_free(&plain);
        af_fusion_candidates_free(&cs);
        af_model_free(m);
    }
}

/* The candidates of `rule` on fixture `name`, accepted: `want` of them (`want_long` with at least
 * `long_nodes` nodes), each an attention step of the fused plan, whose model output matches the
 * unfused plan's. */
static void rule_steps_match_unfused(const char *name, const char *rule, int want, int long_nodes, int want_long) {
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/models/%s", af_test_dir(), name);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    af_model *m = NULL;
    CHECK(af_model_load(path, NULL, &m, NULL) == AF_OK);
    if (!m) return;
    const af_graph *g = m->graph;
    af_fusion_config cfg;
    af_fusion_config_default(&cfg);
    af_fusion_candidates all = {0}, cs = {0};
    CHECK(af_pattern_find(g, NULL, &cfg, &all, NULL) == AF_OK);
    int n_long = 0;
    for (int i = 0; i < all.n; i++) {
        if (strcmp(all.items[i].rule, rule)) continue;
        af_fusion_candidate c = all.items[i];
        c.accepted = true;
        n_long += c.n_nodes >= long_nodes;
        CHECK(af_fusion_candidates_push(&cs, &c, NULL) == AF_OK);
    }
    CHECK_EQ_INT(cs.n, want);
    CHECK_EQ_INT(n_long, want_long);
    af_sched_options o = {.kernels = {.isa = af_cpu_isa(), .n_threads = 2}, .fusion_level = 3};
    af_exec_plan fused, plain;
    CHECK(af_sched_build(g, &cs, &o, &fused, NULL) == AF_OK);
    CHECK(af_exec_plan_unfused(g, &o.kernels, false, NULL, &plain, NULL) == AF_OK);
    for (int k = 0; k < cs.n; k++) {
        CHECK(cs.items[k].accepted);
        if (!cs.items[k].accepted) printf("  %s: %s\n", name, cs.items[k].reason);
    }
    int attention_steps = 0;
    for (int k = 0; k < fused.n_steps; k++)
        attention_steps += fused.steps[k].kernel.name && strstr(fused.steps[k].kernel.name, "attention") != NULL;
    CHECK_EQ_INT(attention_steps, want);
    af_tensor a = {0}, b = {0};
    CHECK(run_plan(g, &fused, dir, &a) == AF_OK);
    CHECK(run_plan(g, &plain, dir, &b) == AF_OK);
    CHECK(af_tensor_same_shape(&a, &b));
    CHECK_EQ_INT(af_test_count_beyond(&a, &b, 1e-4, 1e-5), 0);
    printf("  %s: %d attention steps, %d steps instead of %d\n", name, attention_steps, fused.n_steps, plain.n_steps);
    af_tensor_free_data(&a);
    af_tensor_free_data(&b);
    af_exec_plan_free(&fused);
    af_exec_plan_free(&plain);
    af_fusion_candidates_free(&cs);
    af_fusion_candidates_free(&all);
    af_model_free(m);
}

/* nn.MultiheadAttention as torchvision's ViT exports it (vit_tiny): the built-in rule's candidates,
 * one per layer (16 nodes, the merging Reshape included: 17), become fused attention steps that
 * run the packed input projection's GEMM and the attention kernel on its [S, B, 3E] rows; the
 * model's output matches the unfused plan's. */
AF_TEST(sched_fused_attention_matches_unfused_on_vit) {
    rule_steps_match_unfused("vit_tiny", "mha_packed_self_attention", 2, 17, 2);
}

/* Swin's window attention as torchvision exports it (swin_tiny: four windows in stage 1, whose
 * second block is shifted and masked; one window in stage 2): the built-in rule's four candidates
 * (the shifted one with its Reshape, mask Add and Reshape: 19 nodes or more) become fused
 * attention steps that run the packed projection's GEMM and the attention kernel per image's
 * windows with the position bias and the mask added up once; the model's output matches the
 * unfused plan's (and ONNX Runtime's, in the conformance suite, which fails without either the
 * bias or the mask). */
AF_TEST(sched_fused_window_attention_matches_unfused_on_swin) {
    rule_steps_match_unfused("swin_tiny", "swin_window_attention", 4, 19, 1);
}

/* A run-time head split proves the layout only in its exported form: with the Concat's first
 * piece taken from dim 1 of the projection instead of dim 0 (a [S,S,H,D] target, which torch
 * never writes but a graph may), the dynamic blocks are refused. */
AF_TEST(sched_dynamic_head_split_needs_batch_then_sequence) {
    af_model *m = af_test_fixture("bert_tiny_dynamic");
    if (!m) return;
    af_graph *g = m->graph;
    int changed = 0;
    for (int i = 0; i < g->n_nodes; i++) { /* every Gather(Shape(x), 0) feeding a 4-piece Concat */
        const af_node *cat = &g->nodes[i];
        if (cat->op != AF_OP_CONCAT || cat->n_inputs != 4) continue;
        int u = g->values[cat->inputs[0]].producer;
        int ga = u >= 0 ? g->values[g->nodes[u].inputs[0]].producer : -1;
        if (ga < 0 || g->nodes[ga].op != AF_OP_GATHER) continue;
        af_value *idx = &g->values[g->nodes[ga].inputs[1]];
        if (idx->kind != AF_VALUE_CONST || idx->t.dtype != AF_DTYPE_INT64 || !idx->t.data) continue;
        ((int64_t *)idx->t.data)[0] = 1;
        changed++;
    }
    CHECK(changed >= 6); /* Q, K and V of both layers */
    af_fusion_candidates cs = {0};
    attention_blocks(g, &cs);
    CHECK_EQ_INT(cs.n, 2);
    af_sched_options o = {.kernels = {.isa = af_cpu_isa(), .n_threads = 1}, .fusion_level = 3};
    af_exec_plan fused;
    CHECK(af_sched_build(g, &cs, &o, &fused, NULL) == AF_OK);
    for (int k = 0; k < cs.n; k++) {
        CHECK(!cs.items[k].accepted);
        CHECK(strstr(cs.items[k].reason, "not the exported self-attention form") != NULL);
    }
    af_exec_plan_free(&fused);
    af_fusion_candidates_free(&cs);
    af_model_free(m);
}

/* The second chance: a candidate that lost an overlap to a group that is out of the plan is built
 * in its place, and its reason says why that group is out (the scheduler could not build it, or
 * the verify mode's numeric check backed it out); with no_second_chance it stays out. */
AF_TEST(sched_second_chance_says_why_the_group_it_replaces_is_out) {
    af_model *m = af_test_fixture("resnet_small");
    if (!m) return;
    const af_graph *g = m->graph;
    af_fusion_candidates chain = {0};
    chains(g, &chain);
    CHECK(chain.n > 0);
    for (int variant = 0; chain.n > 0 && variant < 3; variant++) {
        /* The winner covers the chain's nodes but has no kernel (no anchor, a family that needs one). */
        af_fusion_candidate winner = chain.items[0], loser = chain.items[0];
        snprintf(winner.rule, sizeof winner.rule, "test_winner");
        winner.anchor = -1;
        if (variant > 0) { /* the verify mode backed it out */
            winner.accepted = false;
            snprintf(winner.reason, sizeof winner.reason, "numeric check: max error 6e-08 beyond rtol 0 / atol 0");
        }
        loser.accepted = false;
        loser.score = 0.5;
        snprintf(loser.reason, sizeof loser.reason, "overlaps group test_winner at node '%s'",
                 g->nodes[loser.nodes[0]].name);
        af_fusion_candidates cs = {0};
        CHECK(af_fusion_candidates_push(&cs, &winner, NULL) == AF_OK);
        CHECK(af_fusion_candidates_push(&cs, &loser, NULL) == AF_OK);
        af_sched_options o = {.kernels = {.isa = af_cpu_isa(), .n_threads = 1}, .fusion_level = 3,
                              .no_second_chance = variant == 2 ? "not tried in its place: test" : NULL};
        af_exec_plan plan;
        CHECK(af_sched_build(g, &cs, &o, &plan, NULL) == AF_OK);
        int fused_steps = 0;
        for (int i = 0; i < plan.n_steps; i++) fused_steps += plan.steps[i].family >= 0;
        const af_fusion_candidate *w = &cs.items[0], *l = &cs.items[1];
        CHECK(!w->accepted);
        if (variant == 0) {
            CHECK(!strncmp(w->reason, "scheduler: ", 11));
            CHECK(l->accepted && !strcmp(l->reason, "accepted: in place of a group the scheduler could not build"));
            CHECK_EQ_INT(fused_steps, 1);
        } else if (variant == 1) {
            CHECK(l->accepted && !strcmp(l->reason, "accepted: in place of a group the numeric check backed out"));
            CHECK_EQ_INT(fused_steps, 1);
        } else {
            char want[200];
            snprintf(want, sizeof want, "overlaps group test_winner at node '%s'; not tried in its place: test",
                     g->nodes[loser.nodes[0]].name);
            CHECK(!l->accepted && !strcmp(l->reason, want));
            CHECK_EQ_INT(fused_steps, 0);
        }
        if (!l->accepted || variant == 2) printf("  variant %d: %s\n", variant, l->reason);
        af_exec_plan_free(&plan);
        af_fusion_candidates_free(&cs);
    }
    af_fusion_candidates_free(&chain);
    af_model_free(m);
}
