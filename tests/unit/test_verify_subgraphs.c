/* The verify mode (config "verify") on subgraph plans (src/runtime/subplans_verify.c): a Loop
 * body's fused groups are run on the body's first iteration, built from the enclosing graph's
 * unfused run, and backed out of the body's plan when they differ; If branches nested in a body
 * are checked the same way; a graph that cannot be run says why in the report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fusion/config.h"
#include "ir/model.h"
#include "onnx_build.h"
#include "runtime/plan_state.h"
#include "unit.h"
#include "util/alloc.h"
#include "util/limits.h"

enum { ROWS = 4, D = 16 };

/* Exactness: the fused GELU groups below differ from their unfused ops in the last bits. */
static const char *const VERIFY_EXACT = "{\"verify\": true, \"verify_tolerance\": {\"rtol\": 0, \"atol\": 0}}";

static void write_config(char *path, size_t size, const char *tag, const char *json) {
    snprintf(path, size, "/tmp/af_verify_sub_%s_%d.json", tag, (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f) {
        af_test_fail(__FILE__, __LINE__, "cannot write %s", path);
        return;
    }
    fputs(json, f);
    fclose(f);
}

/* The session's fusion report, malloc'd. */
static char *report_of(const af_session *s) { return af_test_capture(s, af_session_fusion_report); }

/* The plan state a session with this config builds, for a look at its subplans. */
static af_plan_state *plan_state(const af_model *m, const char *config) {
    const af_limits lim = af_limits_default();
    af_plan_request rq = {.config_path = config, .fusion_level = -1, .isa = af_cpu_isa(), .n_threads = 1,
                          .limits = &lim};
    af_plan_state *ps = NULL;
    af_error err = {0};
    if (af_plan_state_build(m->graph, &rq, &ps, &err) != AF_OK) af_test_fail(__FILE__, __LINE__, "%s", err.message);
    return ps;
}

static int fused_steps(const af_exec_plan *p) {
    int n = 0;
    for (int i = 0; i < p->n_steps; i++) n += p->steps[i].output >= 0;
    return n;
}

/* ---- loop_refine: the body's group is checked, and passes ------------------------------------ */

/* Runs s on the fixture's inputs; its output must match ONNX Runtime's (rtol 1e-3, atol 1e-4). */
static void check_reference_outputs(af_session *s, const char *what) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/models/loop_refine", af_test_dir());
    af_test_tensors in = {0}, ref = {0};
    if (af_test_read_set(dir, "input", &in) && af_test_read_set(dir, "output", &ref)) {
        af_error err = {0};
        if (af_session_run(s, in.n, (const char *const *)in.names, in.t, &err) != AF_OK) {
            af_test_fail(__FILE__, __LINE__, "%s: %s", what, err.message);
        } else {
            const int64_t bad = af_test_count_beyond(af_session_output(s, 0), &ref.t[0], 1e-3, 1e-4);
            if (bad)
                af_test_fail(__FILE__, __LINE__, "%s: %lld outputs differ from the reference", what, (long long)bad);
        }
    }
    af_test_tensors_free(&in);
    af_test_tensors_free(&ref);
}

AF_TEST(verify_subgraph_loop_refine_body_checked) {
    af_model *m = af_test_fixture("loop_refine");
    if (!m) return;
    char config[128];
    write_config(config, sizeof config, "loop", "{\"verify\": true}");
    af_plan_state *ps = plan_state(m, config);
    if (ps && ps->subs.n == 1) {
        const af_subplan *sp = &ps->subs.items[0];
        CHECK_EQ_INT(sp->fusion.verify_checked, 1); /* MatMul + bias + Relu + residual */
        CHECK_EQ_INT(sp->fusion.verify_backed_out, 0);
        CHECK_EQ_INT(fused_steps(&sp->plan), 1);
        for (int k = 0; k < sp->fusion.candidates.n; k++)
            if (sp->fusion.candidates.items[k].accepted) CHECK(sp->fusion.candidates.items[k].verified);
    } else {
        af_test_fail(__FILE__, __LINE__, "expected one subplan");
    }
    af_plan_state_release(ps);

    af_session *s = af_test_session(m, -1, config);
    if (s) {
        char *text = report_of(s);
        const char *want = "verify (Loop iteration 0, captured values from the enclosing graph's unfused run): 1 "
                           "fused groups checked, 0 backed out";
        if (!text || !strstr(text, want))
            af_test_fail(__FILE__, __LINE__, "report lacks \"%s\":\n%s", want, text ? text : "");
        free(text);
        check_reference_outputs(s, "loop_refine verify");
        af_session_free(s);
    }
    /* An owning session drops weights once packed: the subgraphs' check runs before that. */
    af_model *owned = af_test_fixture("loop_refine");
    af_session_options o = af_session_options_default();
    o.n_threads = 2;
    o.config_path = config;
    af_session *os = NULL;
    af_error err = {0};
    if (owned && af_session_create_owning(owned, &o, &os, &err) != AF_OK) {
        af_test_fail(__FILE__, __LINE__, "owning session: %s", err.message);
        af_model_free(owned);
    }
    if (os) {
        check_reference_outputs(os, "loop_refine verify, owning");
        af_session_free(os);
    }
    unlink(config);
    af_model_free(m);
}

/* ---- a body whose fused groups differ in the last bits -------------------------------------- */

/* gelu(h W + b) as exporters write it (Div, Erf, Add, Mul, Mul), its scalars in subgraph g: the
 * fused GELU epilogue and the region kernel differ from the unfused Erf in the last bits, so at
 * tolerance 0 they fail. W and B are the top-level graph's, captured. */
static const char *gelu_layer(ob_model *g, const char *h, const char *W, const char *B) {
    const char *sqrt2 = ob_scalar(g, 1.4142135f), *one = ob_scalar(g, 1.0f), *half = ob_scalar(g, 0.5f);
    const char *u = ob_node2(g, "Add", ob_node2(g, "MatMul", h, W), B);
    const char *e = ob_node1(g, "Erf", ob_node2(g, "Div", u, sqrt2));
    const char *p = ob_node2(g, "Mul", u, ob_node2(g, "Add", e, one));
    return ob_node2(g, "Mul", p, half);
}

/* y = Loop, 3 iterations, of h -> gelu(h W + b); nested: the body runs that through an If on its
 * condition (then: the layer, else: h unchanged). dims: x's shape (a negative dim: symbolic). */
static af_model *gelu_loop_model(bool nested, const int64_t dims[2]) {
    static float w[D * D], bias[D];
    for (int i = 0; i < D * D; i++) w[i] = 0.25f * (float)((i * 7) % 11 - 5) / 5.0f;
    for (int i = 0; i < D; i++) bias[i] = 0.1f * (float)(i % 5 - 2);
    ob_model *b = ob_new(13), *body = ob_new(13), *then_g = ob_new(13), *else_g = ob_new(13);
    const char *x = ob_input(b, 2, dims);
    const char *W = ob_const(b, 2, (int64_t[]){D, D}, w);
    const char *B = ob_const(b, 1, (int64_t[]){D}, bias);
    const int64_t three = 3;
    const char *M = ob_const_i64(b, 0, NULL, &three);

    ob_prefix(body, "b_");
    ob_input_of(body, OB_INT64, 0, NULL); /* iteration number, unused */
    const char *cond = ob_input_of(body, OB_BOOL, 0, NULL);
    const char *h = ob_input(body, 2, dims);
    const char *cond_out = ob_node1(body, "Identity", cond);
    const char *h_out;
    if (nested) {
        ob_prefix(then_g, "t_");
        ob_output(then_g, gelu_layer(then_g, h, W, B));
        ob_prefix(else_g, "e_");
        ob_output(else_g, ob_node1(else_g, "Identity", h));
        h_out = ob_node1(body, "If", cond);
        ob_attr_graph(body, "then_branch", then_g);
        ob_attr_graph(body, "else_branch", else_g);
    } else {
        h_out = gelu_layer(body, h, W, B);
    }
    ob_output_of(body, cond_out, OB_BOOL);
    ob_output(body, h_out);

    const char *y = ob_node(b, "Loop", 3, (const char *[]){M, "", x});
    ob_attr_graph(b, "body", body);
    ob_output(b, y);
    af_error err = {0};
    af_model *m = ob_load(b, &err);
    if (!m) af_test_fail(__FILE__, __LINE__, "gelu loop model: %s", err.message);
    ob_free(b);
    ob_free(body);
    ob_free(then_g);
    ob_free(else_g);
    return m;
}

/* Runs x (the builder names the first input "in0") through s; copies output 0 into out. */
static bool run_x(af_session *s, const float *x, float *out) {
    af_tensor in = {.dtype = AF_DTYPE_FLOAT, .rank = 2, .dims = {ROWS, D}, .data = (void *)x,
                    .nbytes = sizeof(float) * ROWS * D};
    const char *names[1] = {"in0"};
    af_error err = {0};
    if (!s || af_session_run(s, 1, names, &in, &err) != AF_OK) {
        af_test_fail(__FILE__, __LINE__, "run: %s", err.message);
        return false;
    }
    const af_tensor *y = af_session_output(s, 0);
    if (!y || af_tensor_numel(y) != ROWS * D) return false;
    memcpy(out, y->data, sizeof(float) * ROWS * D);
    return true;
}

/* Outputs of a session at `level` with `config` on fixed inputs (not the seeded ones verify used). */
static bool outputs(const af_model *m, int level, const char *config, float *out) {
    static float x[ROWS * D];
    unsigned seed = 7u;
    for (int i = 0; i < ROWS * D; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / 4194304.0f - 2.0f;
    }
    af_session *s = af_test_session(m, level, config);
    bool ok = run_x(s, x, out);
    af_session_free(s);
    return ok;
}

/* Every candidate the numeric check backed out says so; every group left was verified. */
static int count_backed_out(const af_fusion_candidates *cs) {
    int n = 0;
    for (int k = 0; k < cs->n; k++) {
        const af_fusion_candidate *c = &cs->items[k];
        n += !c->accepted && !strncmp(c->reason, "numeric check: max error ", 25);
        if (c->accepted && !c->verified) af_test_fail(__FILE__, __LINE__, "group %s was not verified", c->rule);
    }
    return n;
}

/* The fault the check must catch: at tolerance 0 the body's GELU groups differ from their
 * unfused ops, and without the subgraph check they would ship in the body's plan. */
AF_TEST(verify_subgraph_backs_out_body_groups_that_differ) {
    af_model *m = gelu_loop_model(false, (int64_t[]){ROWS, D});
    if (!m) return;
    char config[128], plain[128];
    write_config(config, sizeof config, "tol0", VERIFY_EXACT);
    write_config(plain, sizeof plain, "plain", "{\"verify\": false}");
    af_plan_state *ps = plan_state(m, plain);
    CHECK(ps && ps->subs.n == 1 && fused_steps(&ps->subs.items[0].plan) > 0); /* unchecked, the body fuses */
    af_plan_state_release(ps);

    ps = plan_state(m, config);
    if (ps && ps->subs.n == 1) {
        const af_subplan *sp = &ps->subs.items[0];
        printf("  body: %d groups checked, %d backed out, %d fused steps left\n", sp->fusion.verify_checked,
               sp->fusion.verify_backed_out, fused_steps(&sp->plan));
        CHECK(sp->fusion.verify_backed_out > 0);
        CHECK_EQ_INT(count_backed_out(&sp->fusion.candidates), sp->fusion.verify_backed_out);
        CHECK_EQ_INT(fused_steps(&sp->plan), sp->fusion.verify_checked - sp->fusion.verify_backed_out);
        /* as at the top level, a candidate the backed-out groups had beaten gets their place, checked */
        for (int k = 0; k < sp->fusion.candidates.n; k++)
            if (sp->fusion.candidates.items[k].accepted)
                CHECK(!strcmp(sp->fusion.candidates.items[k].reason,
                              "accepted: in place of a group the numeric check backed out"));
        CHECK_EQ_INT(sp->lifetimes.n_steps, sp->plan.n_steps); /* recomputed for the rebuilt plan */
    } else {
        af_test_fail(__FILE__, __LINE__, "expected one subplan");
    }
    af_plan_state_release(ps);

    af_session *s = af_test_session(m, -1, config);
    char *text = s ? report_of(s) : NULL;
    if (!text || !strstr(text, "numeric check: max error") || !strstr(text, "fused groups checked, ") ||
        strstr(text, "checked, 0 backed out"))
        af_test_fail(__FILE__, __LINE__, "the report does not show the body's groups backed out:\n%s",
                     text ? text : "");
    free(text);
    af_session_free(s);

    /* With the differing groups out (the MatMul + bias group left is exact), the outputs are the
     * unfused ones bit for bit. */
    static float verified[ROWS * D], unfused[ROWS * D], unchecked[ROWS * D];
    if (outputs(m, -1, config, verified) && outputs(m, 0, NULL, unfused) && outputs(m, -1, plain, unchecked)) {
        CHECK(memcmp(verified, unfused, sizeof verified) == 0);
        CHECK(memcmp(unchecked, unfused, sizeof unchecked) != 0); /* the fault is real */
    }
    unlink(config);
    unlink(plain);
    af_model_free(m);
}

/* Depth 2: an If inside the Loop body; its then branch is checked on the body's run. */
AF_TEST(verify_subgraph_nested_if_branch) {
    af_model *m = gelu_loop_model(true, (int64_t[]){ROWS, D});
    if (!m) return;
    char config[128];
    write_config(config, sizeof config, "nested", VERIFY_EXACT);
    af_plan_state *ps = plan_state(m, config);
    int branches = 0;
    for (int i = 0; ps && i < ps->subs.n; i++) {
        const af_subplan *sp = &ps->subs.items[i];
        if (sp->owner->op != AF_OP_IF || sp->g->n_nodes < 2) {
            if (strcmp(sp->fusion.verify_note, "verify: no fused groups to check"))
                af_test_fail(__FILE__, __LINE__, "subgraph of '%s': %s", sp->owner->name, sp->fusion.verify_note);
            continue;
        }
        branches++;
        CHECK(sp->fusion.verify_backed_out > 0);
        CHECK_EQ_INT(count_backed_out(&sp->fusion.candidates), sp->fusion.verify_backed_out);
        CHECK(!strncmp(sp->fusion.verify_note, "verify (If branch, ", 19));
    }
    CHECK(ps && ps->subs.n == 3);
    CHECK_EQ_INT(branches, 1);
    af_plan_state_release(ps);
    static float verified[ROWS * D], unfused[ROWS * D];
    if (outputs(m, -1, config, verified) && outputs(m, 0, NULL, unfused))
        CHECK(memcmp(verified, unfused, sizeof verified) == 0);
    unlink(config);
    af_model_free(m);
}

/* Seeded inputs need static shapes: with a symbolic dim nothing runs, and the body's note says why;
 * its groups stay, unverified, as at the top level. */
AF_TEST(verify_subgraph_skipped_says_why) {
    af_model *m = gelu_loop_model(false, (int64_t[]){-1, D});
    if (!m) return;
    char config[128];
    write_config(config, sizeof config, "skip", "{\"verify\": true}");
    af_plan_state *ps = plan_state(m, config);
    if (ps && ps->subs.n == 1) {
        const af_subplan *sp = &ps->subs.items[0];
        const char *want = "verify skipped: the enclosing graph did not run: input 'in0' has no static shape of a "
                           "known type";
        if (fused_steps(&sp->plan) == 0) af_test_fail(__FILE__, __LINE__, "the dynamic body did not fuse");
        else if (strcmp(sp->fusion.verify_note, want))
            af_test_fail(__FILE__, __LINE__, "note \"%s\", expected \"%s\"", sp->fusion.verify_note, want);
        CHECK_EQ_INT(sp->fusion.verify_checked, 0);
    } else {
        af_test_fail(__FILE__, __LINE__, "expected one subplan");
    }
    af_plan_state_release(ps);
    unlink(config);
    af_model_free(m);
}

/* Out of memory anywhere in the subgraphs' check (the reference runs, the rebuilt plans, their
 * lifetimes) fails the build with AF_ERR_OUT_OF_MEMORY, or is absorbed; nothing leaks (valgrind,
 * or LeakSanitizer under the SAN build). */
AF_TEST(verify_subgraph_out_of_memory_fails_cleanly) {
    char config[128];
    write_config(config, sizeof config, "oom", VERIFY_EXACT);
    for (int nested = 0; nested < 2; nested++) {
        af_model *m = gelu_loop_model(nested, (int64_t[]){ROWS, D});
        if (!m) continue;
        const af_limits lim = af_limits_default();
        af_plan_request rq = {.config_path = config, .fusion_level = -1, .isa = af_cpu_isa(), .n_threads = 1,
                              .limits = &lim};
        af_plan_state *ps = NULL;
        af_alloc_fail_after(-1);
        CHECK(af_plan_state_build(m->graph, &rq, &ps, NULL) == AF_OK);
        af_plan_state_release(ps);
        const long total = af_alloc_count();
        long absorbed = 0;
        for (long n = 0; n < total; n++) {
            af_error err = {0};
            af_alloc_fail_after(n);
            af_status st = af_plan_state_build(m->graph, &rq, &ps, &err);
            af_alloc_fail_after(-1);
            if (st == AF_OK) {
                absorbed++;
                af_plan_state_release(ps);
            } else if (st != AF_ERR_OUT_OF_MEMORY || !err.message[0]) {
                af_test_fail(__FILE__, __LINE__, "allocation %ld failing: %s \"%s\"", n, af_status_name(st),
                             err.message);
            }
        }
        printf("  %s: %ld allocation points, %ld absorbed\n", nested ? "nested" : "loop", total, absorbed);
        af_model_free(m);
    }
    unlink(config);
}
