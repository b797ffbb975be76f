/*
 * The fused elementwise region kernel (src/kernels/fast/region.c) on y = x * s + b, with s and b
 * broadcast to x's shape in each way the kernel gathers them: per channel over whole planes (one
 * value filled per run, runs crossing its 2048-element tiles), along the last axis (one row copied
 * per run), along middle axes only (element by element), as a scalar and in full. Every output is
 * checked against the same arithmetic written out with explicit broadcast indexing, with 1 and 2
 * threads, on each ISA's vector kernels (as the scheduler builds the ops) and on the reference ops.
 * (ConvNeXt's layer scale, x * gamma[C,1,1] + residual, is the first case.)
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "autofusion.h"
#include "ir/op.h"
#include "kernels/fast/region.h"
#include "kernels/fast/vec_internal.h"
#include "onnx_build.h"
#include "unit.h"
#include "util/alloc.h"
#include "util/threadpool.h"

/* A float tensor of dims (rank 4, leading ones allowed) holding a deterministic pattern. */
static af_tensor pattern(const int64_t dims[4], float scale, int seed) {
    af_tensor t = {.dtype = AF_DTYPE_FLOAT, .rank = 4};
    memcpy(t.dims, dims, 4 * sizeof *dims);
    if (af_tensor_alloc(&t, NULL) != AF_OK) return t;
    float *p = t.data;
    for (int64_t i = 0; i < af_tensor_numel(&t); i++) p[i] = scale * (float)((i * 7 + seed * 13) % 23 - 11);
    return t;
}

/* Element of t at output index (i0..i3), t broadcast along its dims of 1. */
static float at(const af_tensor *t, const int64_t i[4]) {
    int64_t off = 0;
    for (int d = 0; d < 4; d++) off = off * t->dims[d] + (t->dims[d] == 1 ? 0 : i[d]);
    return ((const float *)t->data)[off];
}

/* Runs the region for x, s, b on pool, its ops on isa's vector kernels (vec) or on the reference
 * ops; returns the elements that differ from x * s + b. */
static int64_t check(af_threadpool *pool, af_isa isa, bool vec, const int64_t xd[4], const int64_t sd[4],
                     const int64_t bd[4]) {
    af_node mul = {.name = "mul", .op = AF_OP_MUL, .n_inputs = 2, .n_outputs = 1};
    af_node add = {.name = "add", .op = AF_OP_ADD, .n_inputs = 2, .n_outputs = 1};
    af_region_instr ins[2] = {
        {.node = &mul, .dtype = AF_DTYPE_FLOAT, .n_args = 2,
         .args = {{AF_REGION_INPUT, 0}, {AF_REGION_INPUT, 1}}},
        {.node = &add, .dtype = AF_DTYPE_FLOAT, .n_args = 2, .args = {{AF_REGION_SLOT, 0}, {AF_REGION_INPUT, 2}}},
    };
    if (vec) {
        ins[0].vec = (af_region_vec){.kind = AF_REGION_VEC_BINARY, .op = AF_EW_MUL};
        ins[1].vec = (af_region_vec){.kind = AF_REGION_VEC_BINARY, .op = AF_EW_ADD};
    }
    af_region_program p = {.n_instrs = 2, .instrs = ins, .n_inputs = 3};
    af_kernel k;
    af_error err = {0};
    if (af_region_kernel_make(&p, isa, 2, &k, &err) != AF_OK) return -1;
    af_tensor x = pattern(xd, 0.5f, 1), s = pattern(sd, 0.25f, 2), b = pattern(bd, 1.0f, 3);
    af_tensor y = {.dtype = AF_DTYPE_FLOAT, .rank = 4};
    memcpy(y.dims, xd, 4 * sizeof *xd);
    int64_t bad = -1;
    void *ws = af_malloc_aligned(k.workspace_bytes);
    if (af_tensor_alloc(&y, NULL) == AF_OK && ws) {
        const af_tensor *inputs[3] = {&x, &s, &b};
        af_tensor *outputs[1] = {&y};
        af_node node = {.name = "region", .op = AF_OP_ADD, .n_inputs = 3, .n_outputs = 1};
        af_op_ctx c = {.node = &node, .n_inputs = 3, .inputs = inputs, .n_outputs = 1, .outputs = outputs, .err = &err};
        if (k.run(&k, &c, NULL, pool, ws) == AF_OK) {
            bad = 0;
            const float *yp = y.data;
            int64_t e = 0, i[4];
            for (i[0] = 0; i[0] < xd[0]; i[0]++)
                for (i[1] = 0; i[1] < xd[1]; i[1]++)
                    for (i[2] = 0; i[2] < xd[2]; i[2]++)
                        for (i[3] = 0; i[3] < xd[3]; i[3]++, e++)
                            bad += yp[e] != at(&x, i) * at(&s, i) + at(&b, i);
        }
    }
    af_free_aligned(ws);
    af_tensor_free_data(&x), af_tensor_free_data(&s), af_tensor_free_data(&b), af_tensor_free_data(&y);
    af_kernel_release(&k);
    return bad;
}

AF_TEST(region_broadcasts_match_explicit_indexing) {
    static const struct {
        int64_t x[4], s[4], b[4];
    } cases[] = {
        {{1, 96, 56, 56}, {1, 96, 1, 1}, {1, 96, 56, 56}}, /* ConvNeXt's layer scale + residual */
        {{2, 5, 37, 41}, {1, 5, 1, 1}, {2, 1, 1, 1}},      /* runs across tiles, per image */
        {{1, 3, 50, 70}, {1, 1, 1, 70}, {1, 3, 50, 1}},    /* a row copied per run; one value per row */
        {{2, 4, 6, 9}, {2, 1, 6, 1}, {1, 4, 1, 9}},        /* middle axes: element by element */
        {{1, 1, 1, 5000}, {1, 1, 1, 1}, {1, 1, 1, 5000}},  /* a scalar */
        {{3, 1, 700, 3}, {3, 1, 1, 1}, {1, 1, 700, 3}},    /* short planes, several per tile */
    };
    af_threadpool *pools[2] = {NULL, NULL};
    CHECK(af_threadpool_create(1, &pools[0]) == AF_OK && af_threadpool_create(2, &pools[1]) == AF_OK);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (int t = 0; t < 2; t++)
            for (int isa = -1; isa <= (int)af_cpu_info_get()->isa_max; isa++) { /* -1: the reference ops */
                const int64_t bad =
                    check(pools[t], isa < 0 ? AF_ISA_SCALAR : (af_isa)isa, isa >= 0, cases[c].x, cases[c].s, cases[c].b);
                if (bad)
                    printf("  case %zu, %d thread(s), %s: %lld off\n", c, t + 1, isa < 0 ? "reference" : af_isa_name(isa),
                           (long long)bad);
                CHECK_EQ_INT(bad, 0);
            }
    af_threadpool_free(pools[0]);
    af_threadpool_free(pools[1]);
}

/* Runs model m fused into one region (fusion level 3, elementwise_chain "always": on a slow ISA the
 * cost layer may price the chain apart) and unfused on inputs x [1, 8, 33, 31] and r [1, 8, 1, 1],
 * and checks that the fused plan is one step giving the unfused bits. */
static void check_one_region_as_unfused(af_model *m) {
    char cfg[64];
    snprintf(cfg, sizeof cfg, "/tmp/af_region_chain_%d.json", (int)getpid());
    af_test_write_file(cfg, "{\"fusion_policy\": {\"elementwise_chain\": \"always\"}}");
    af_session *fused = m ? af_test_session(m, 3, cfg) : NULL, *plain = m ? af_test_session(m, 0, NULL) : NULL;
    remove(cfg);
    CHECK(fused && plain);
    if (fused && plain) {
        CHECK_EQ_INT(af_session_n_steps(fused), 1);
        float xd[8 * 33 * 31], rd[8];
        for (int i = 0; i < 8 * 33 * 31; i++) xd[i] = (float)((i * 7919) % 10007 - 5003) / 1251.0f;
        for (int i = 0; i < 8; i++) rd[i] = (float)i - 3.5f;
        const af_tensor in[2] = {{.dtype = AF_DTYPE_FLOAT, .rank = 4, .dims = {1, 8, 33, 31}, .data = xd},
                                 {.dtype = AF_DTYPE_FLOAT, .rank = 4, .dims = {1, 8, 1, 1}, .data = rd}};
        const char *names[2] = {"in0", "in1"};
        af_error err = {0};
        CHECK(af_session_run(fused, 2, names, in, &err) == AF_OK);
        CHECK(af_session_run(plain, 2, names, in, &err) == AF_OK);
        const af_tensor *a = af_session_output(fused, 0), *p = af_session_output(plain, 0);
        CHECK(a && p && af_tensor_numel(a) == 8 * 33 * 31 && af_tensor_numel(p) == 8 * 33 * 31);
        if (a && p && af_tensor_numel(a) == af_tensor_numel(p))
            CHECK(memcmp(a->data, p->data, (size_t)af_tensor_numel(a) * sizeof(float)) == 0);
    }
    af_session_free(fused);
    af_session_free(plain);
}

/* A chain of every op the region runs on the vector kernels, fused into one region, gives the bits
 * of the same ops unfused (the elementwise kernels), and runs as one step. */
AF_TEST(region_chain_matches_unfused_bits) {
    ob_model *b = ob_new(17);
    const char *x = ob_input(b, 4, (int64_t[]){1, 8, 33, 31});
    const char *r = ob_input(b, 4, (int64_t[]){1, 8, 1, 1});
    const char *t = ob_node2(b, "Mul", x, ob_scalar(b, 0.7071f));
    t = ob_node2(b, "Add", ob_node1(b, "Erf", t), ob_scalar(b, 2.0f));
    t = ob_node2(b, "Div", ob_node1(b, "Sqrt", ob_node1(b, "Abs", x)), t);
    t = ob_node2(b, "Sub", ob_node2(b, "Pow", t, ob_scalar(b, 2.0f)), ob_node1(b, "Exp", ob_node1(b, "Neg", x)));
    t = ob_node2(b, "Max", ob_node2(b, "Min", t, r), ob_node1(b, "Reciprocal", ob_node2(b, "Add", r, ob_scalar(b, 3.0f))));
    ob_output(b, ob_node2(b, "PRelu", t, r));
    af_model *m = ob_load(b, NULL);
    ob_free(b);
    CHECK(m != NULL);
    check_one_region_as_unfused(m);
    af_model_free(m);
}

/* The same for Log, Softplus, Elu, Floor, Ceil, Round and the variadic Sum, Mean, Max and Min (of
 * three inputs, a scalar and a broadcast one among them). */
AF_TEST(region_rounding_log_and_variadic_ops_match_unfused_bits) {
    ob_model *b = ob_new(17);
    const char *x = ob_input(b, 4, (int64_t[]){1, 8, 33, 31});
    const char *r = ob_input(b, 4, (int64_t[]){1, 8, 1, 1});
    const char *lg = ob_node1(b, "Log", ob_node1(b, "Abs", x)); /* -inf at 0 */
    const char *sp = ob_node1(b, "Softplus", ob_node2(b, "Mul", x, ob_scalar(b, 9.0f)));
    const char *elu = ob_node1(b, "Elu", x);
    ob_attr_f(b, "alpha", 0.3f);
    const char *rd = ob_node1(b, "Round", ob_node2(b, "Mul", x, ob_scalar(b, 2.0f))); /* ties */
    const char *fl = ob_node1(b, "Floor", x), *ce = ob_node1(b, "Ceil", x);
    const char *sum = ob_node(b, "Sum", 3, (const char *[]){lg, sp, r});
    const char *mean = ob_node(b, "Mean", 3, (const char *[]){elu, ob_scalar(b, 0.25f), rd});
    const char *mx = ob_node(b, "Max", 3, (const char *[]){sum, fl, mean});
    ob_output(b, ob_node(b, "Min", 3, (const char *[]){mx, ce, ob_node2(b, "Add", r, ob_scalar(b, 1.0f))}));
    af_model *m = ob_load(b, NULL);
    ob_free(b);
    CHECK(m != NULL);
    check_one_region_as_unfused(m);
    af_model_free(m);
}
