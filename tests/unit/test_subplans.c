/* Loop bodies get plans of their own: the exported loop_refine fixture (torch.jit.script, an ONNX
 * Loop whose body reads its weight and bias from the enclosing graph) fuses its body's
 * MatMul + bias + Relu + residual into one step under the temporal strategy, and the fused
 * session gives the reference kernels' outputs for several trip counts, including none. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "autofusion.h"
#include "fusion/config.h"
#include "ir/graph.h"
#include "ir/model.h"
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
