/* Loop bodies get plans of their own: the exported loop_refine fixture (torch.jit.script, an ONNX
 * Loop whose body reads its weight and bias from the enclosing graph) fuses its body's
 * MatMul + bias + Relu + residual into one step under the temporal strategy, and the fused
 * session gives the reference kernels' outputs for several trip counts, including none. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autofusion.h"
#include "fusion/config.h"
#include "fusion/cost/estimate.h"
#include "ir/graph.h"
#include "ir/model.h"
#include "onnx_build.h"
#include "runtime/plan_state.h"
#include "unit.h"
#include "util/limits.h"

AF_TEST(subplans_fuse_loop_body_under_temporal) {
    af_model *m = af_test_fixture("loop_refine");
    if (!m) return;
    const af_limits lim = af_limits_default();
    for (int level = 0; level <= 3; level += 3) {
        af_plan_request rq = {.fusion_level = level, .isa = af_cpu_isa(), .n_threads = 1, .limits = &lim};
        af_plan_state *ps = NULL;
        CHECK(af_plan_state_build(m->graph, &rq, &ps, NULL) == AF_OK);
        if (!ps) continue;
        CHECK_EQ_INT(ps->subs.n, 1);
        if (ps->subs.n == 1) {
            const af_subplan *sp = &ps->subs.items[0];
            CHECK(sp->owner->op == AF_OP_LOOP);
            CHECK_EQ_INT(sp->g->n_nodes, 5); /* MatMul, Add, Relu, Add, Identity */
            /* Level 0: one step per node, fast kernels where they exist; level 3: the four
             * arithmetic nodes are one fused step. */
            CHECK_EQ_INT(sp->plan.n_steps, level ? 2 : 5);
            if (level) {
                CHECK(sp->fusion.strategy == AF_STRATEGY_TEMPORAL);
                int fused = 0;
                for (int i = 0; i < sp->plan.n_steps; i++) fused += sp->plan.steps[i].n_nodes == 4;
                CHECK_EQ_INT(fused, 1);
            }
            CHECK(af_subplans_find(&ps->subs, sp->g) == sp);
            CHECK(af_subplans_find(&ps->subs, m->graph) == NULL);
        }
        af_plan_state_release(ps);
    }
    af_model_free(m);
}

/* Runs x and steps on s; returns the output's first element count checked against want (NULL:
 * copy the output into *keep). */
static void run(af_session *s, const float *x, int64_t steps, float *out, int64_t n) {
    af_tensor in[2] = {{.dtype = AF_DTYPE_FLOAT, .rank = 3, .dims = {2, 8, 64}, .data = (void *)x},
                       {.dtype = AF_DTYPE_INT64, .rank = 0, .data = &steps}};
    const char *names[2] = {"x", "steps"};
    af_error err = {0};
    CHECK(af_session_run(s, 2, names, in, &err) == AF_OK);
    const af_tensor *y = af_session_output(s, 0);
    CHECK(y && af_tensor_numel(y) == n);
    for (int64_t i = 0; y && i < n; i++) out[i] = ((const float *)y->data)[i];
}

AF_TEST(subplans_loop_outputs_match_reference_kernels) {
    af_model *m = af_test_fixture("loop_refine");
    if (!m) return;
    af_session_options fo = af_session_options_default(), ro = af_session_options_default();
    fo.n_threads = 2;
    ro.reference_kernels = 1;
    af_session *fused = NULL, *ref = NULL;
    CHECK(af_session_create(m, &fo, &fused, NULL) == AF_OK);
    CHECK(af_session_create(m, &ro, &ref, NULL) == AF_OK);
    static float x[2 * 8 * 64], a[2 * 8 * 10], b[2 * 8 * 10];
    unsigned seed = 3u;
    for (int i = 0; i < 2 * 8 * 64; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / 8388608.0f - 1.0f;
    }
    static const int64_t trips[] = {0, 1, 5};
    for (int t = 0; fused && ref && t < 3; t++) {
        run(fused, x, trips[t], a, 2 * 8 * 10);
        run(ref, x, trips[t], b, 2 * 8 * 10);
        int bad = 0;
        for (int i = 0; i < 2 * 8 * 10; i++) bad += !(fabsf(a[i] - b[i]) <= 1e-4f + 1e-3f * fabsf(b[i]));
        if (bad) af_test_fail(__FILE__, __LINE__, "%d trips: %d outputs differ", (int)trips[t], bad);
    }
    af_session_free(fused);
    af_session_free(ref);
    af_model_free(m);
}

/* ---- constants captured from the enclosing graph -------------------------------------------- */

enum { CAP_ROWS = 4, CAP_D = 16 };

/* y = Loop, 3 iterations, of h -> gelu(h W + b) in the erf form exporters write (Div, Erf, Add,
 * Mul, Mul), with W, b and every GELU scalar the top-level graph's, as exporters hoist them out of
 * loop bodies: sqrt(2) and 0.5 initializers, 1 a Constant node. nested: the layer sits in an If
 * inside the body, so its captures go through two graphs. */
static af_model *captured_gelu_loop(bool nested) {
    static float w[CAP_D * CAP_D], bias[CAP_D];
    for (int i = 0; i < CAP_D * CAP_D; i++) w[i] = 0.25f * (float)((i * 7) % 11 - 5) / 5.0f;
    for (int i = 0; i < CAP_D; i++) bias[i] = 0.1f * (float)(i % 5 - 2);
    ob_model *b = ob_new(13), *body = ob_new(13), *then_g = ob_new(13), *else_g = ob_new(13);
    const char *x = ob_input(b, 2, (int64_t[]){CAP_ROWS, CAP_D});
    const char *W = ob_const(b, 2, (int64_t[]){CAP_D, CAP_D}, w);
    const char *B = ob_const(b, 1, (int64_t[]){CAP_D}, bias);
    const char *sqrt2 = ob_scalar(b, 1.4142135f), *half = ob_scalar(b, 0.5f);
    const char *one = ob_node(b, "Constant", 0, NULL);
    ob_attr_f(b, "value_float", 1.0f);
    const int64_t three = 3;
    const char *M = ob_const_i64(b, 0, NULL, &three);

    ob_prefix(body, "b_");
    ob_input_of(body, OB_INT64, 0, NULL); /* iteration number, unused */
    const char *cond = ob_input_of(body, OB_BOOL, 0, NULL);
    const char *h = ob_input(body, 2, (int64_t[]){CAP_ROWS, CAP_D});
    const char *cond_out = ob_node1(body, "Identity", cond);
    ob_model *layer = body;
    if (nested) {
        ob_prefix(then_g, "t_");
        ob_prefix(else_g, "e_");
        layer = then_g;
    }
    const char *u = ob_node2(layer, "Add", ob_node2(layer, "MatMul", h, W), B);
    const char *e = ob_node1(layer, "Erf", ob_node2(layer, "Div", u, sqrt2));
    const char *g = ob_node2(layer, "Mul", ob_node2(layer, "Mul", u, ob_node2(layer, "Add", e, one)), half);
    const char *h_out = g;
    if (nested) {
        ob_output(then_g, g);
        ob_output(else_g, ob_node1(else_g, "Identity", h));
        h_out = ob_node1(body, "If", cond);
        ob_attr_graph(body, "then_branch", then_g);
        ob_attr_graph(body, "else_branch", else_g);
    }
    ob_output_of(body, cond_out, OB_BOOL);
    ob_output(body, h_out);

    const char *y = ob_node(b, "Loop", 3, (const char *[]){M, "", x});
    ob_attr_graph(b, "body", body);
    ob_output(b, y);
    af_error err = {0};
    af_model *m = ob_load(b, &err);
    if (!m) af_test_fail(__FILE__, __LINE__, "captured gelu loop model: %s", err.message);
    ob_free(b);
    ob_free(body);
    ob_free(then_g);
    ob_free(else_g);
    return m;
}

/* Output 0 of m at fusion level `level` on fixed inputs, into out. */
static bool captured_outputs(const af_model *m, int level, float *out) {
    static float x[CAP_ROWS * CAP_D];
    unsigned seed = 11u;
    for (int i = 0; i < CAP_ROWS * CAP_D; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / 4194304.0f - 2.0f;
    }
    af_session *s = af_test_session(m, level, NULL);
    af_tensor in = {.dtype = AF_DTYPE_FLOAT, .rank = 2, .dims = {CAP_ROWS, CAP_D}, .data = x,
                    .nbytes = sizeof x};
    const char *names[1] = {"in0"};
    af_error err = {0};
    bool ok = false;
    if (s && af_session_run(s, 1, names, &in, &err) == AF_OK) {
        const af_tensor *y = af_session_output(s, 0);
        ok = y && af_tensor_numel(y) == CAP_ROWS * CAP_D;
        if (ok) memcpy(out, y->data, sizeof(float) * CAP_ROWS * CAP_D);
    } else if (s) {
        af_test_fail(__FILE__, __LINE__, "level %d: %s", level, err.message);
    }
    af_session_free(s);
    return ok;
}

/* A captured constant is a constant in the body (af_graph_const_value): the GELU scalars and the
 * bias taken from the enclosing graph pass the rule's constant checks and compile into the
 * MatMul's epilogue, so the whole layer is one fused step, as it would be at the top level. */
AF_TEST(subplans_captured_constants_fuse_gelu_epilogue) {
    for (int nested = 0; nested < 2; nested++) {
        af_model *m = captured_gelu_loop(nested);
        if (!m) continue;
        const af_limits lim = af_limits_default();
        af_plan_request rq = {.fusion_level = 3, .isa = af_cpu_isa(), .n_threads = 1, .limits = &lim};
        af_plan_state *ps = NULL;
        CHECK(af_plan_state_build(m->graph, &rq, &ps, NULL) == AF_OK);
        int layers = 0;
        for (int i = 0; ps && i < ps->subs.n; i++) {
            const af_subplan *sp = &ps->subs.items[i];
            bool has_layer = false;
            for (int k = 0; k < sp->g->n_nodes; k++) has_layer |= sp->g->nodes[k].op == AF_OP_MAT_MUL;
            if (!has_layer) continue; /* the body around the If, the else branch */
            layers++;
            int whole = 0;
            for (int k = 0; k < sp->plan.n_steps; k++)
                whole += sp->plan.steps[k].n_nodes == 7 && sp->plan.steps[k].output >= 0 &&
                         !strcmp(sp->plan.steps[k].rule, "matmul_bias_gelu_erf");
            for (int k = 0; k < sp->fusion.candidates.n; k++) {
                const af_fusion_candidate *c = &sp->fusion.candidates.items[k];
                if (!strcmp(c->rule, "matmul_bias_gelu_erf") && !c->accepted)
                    af_test_fail(__FILE__, __LINE__, "%s: GELU group rejected: %s", nested ? "nested" : "body",
                                 c->reason);
            }
            if (whole != 1)
                af_test_fail(__FILE__, __LINE__, "%s: %d steps, none MatMul + bias + GELU", nested ? "nested" : "body",
                             sp->plan.n_steps);
        }
        CHECK_EQ_INT(ps ? ps->subs.n : 0, nested ? 3 : 1);
        CHECK_EQ_INT(layers, 1);
        af_plan_state_release(ps);

        static float fused[CAP_ROWS * CAP_D], unfused[CAP_ROWS * CAP_D];
        if (captured_outputs(m, 3, fused) && captured_outputs(m, 0, unfused)) {
            int bad = 0; /* relative 1e-5; values under 1e-3 compared as if 1e-3 */
            for (int i = 0; i < CAP_ROWS * CAP_D; i++)
                bad += !(fabsf(fused[i] - unfused[i]) <= 1e-5f * fmaxf(fabsf(unfused[i]), 1e-3f));
            if (bad) af_test_fail(__FILE__, __LINE__, "%s: %d outputs differ from level 0", nested ? "nested" : "body", bad);
        } else {
            af_test_fail(__FILE__, __LINE__, "%s: the sessions did not run", nested ? "nested" : "body");
        }
        af_model_free(m);
    }
}

/* The strategy choice's footprint of a body counts the constants it captures as weights, as the
 * enclosing graph does: W, b and the three GELU scalars, (16 x 16 + 16 + 3) floats. */
AF_TEST(subplans_captured_constants_are_body_weights) {
    af_model *m = captured_gelu_loop(false);
    if (!m) return;
    const af_graph *body = NULL;
    for (int i = 0; i < m->graph->n_nodes; i++)
        if (m->graph->nodes[i].op == AF_OP_LOOP) body = af_node_attr(&m->graph->nodes[i], "body")->g;
    af_cost_graph cg;
    if (body && af_cost_graph_init(&cg, body, NULL) == AF_OK) {
        double weights = -1, acts = -1;
        af_cost_footprint(&cg, &weights, &acts);
        CHECK_NEAR(weights, (CAP_D * CAP_D + CAP_D + 3) * 4.0, 0, 0);
        CHECK(acts > 0);
        af_cost_graph_free(&cg);
    } else {
        af_test_fail(__FILE__, __LINE__, "no Loop body to cost");
    }
    af_model_free(m);
}
