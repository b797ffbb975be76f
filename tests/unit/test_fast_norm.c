/*
 * The fast Softmax, LogSoftmax, LayerNormalization, InstanceNormalization and BatchNormalization
 * kernels (src/kernels/fast/norm.c) against the reference kernels, for every ISA level the CPU
 * has, 1 and 2 threads, row lengths that hit every vector tail, and the layouts left to the
 * reference.
 *
 * Tolerances (the reference computes in double and rounds once):
 *   Softmax: 4 ULP + 20 * 2^-24 relative. The sum runs in double; exp adds vmath's 1 ULP (or
 *     glibc's), the scaling by 1/sum about 1.5; x - max rounds by up to 2^-24 |x - max|
 *     relative, and inputs span [-10, 10] around their row's max.
 *   LayerNormalization (and InstanceNormalization, whose per-channel scale and B follow as a
 *     second step): 4 ULP + 2e-6 absolute. Statistics in double; (x - mean) / std and its
 *     product with Scale round a few times, and cancellation against B (|t * scale| < 4 here)
 *     can expose those roundings at the scale of |t * scale| instead of the result's.
 *   BatchNormalization: 2 ULP + 2e-6 absolute. y = x * s' + b' with the folded s', b' rounded to
 *     float: about 1.5 * 2^-24 (|x s'| + |b'|), and |x s'| + |b'| < 18 here.
 */
#include "fast_check.h"
#include "ir/model.h"
#include "onnx_build.h"

static const int64_t lengths[] = {1, 7, 15, 16, 17, 31, 33, 1000, 100003};
#define N_LENGTHS (int)(sizeof lengths / sizeof lengths[0])

static const fx_tol softmax_tol = {0, 20 * 0x1p-24, 4};
static const fx_tol layernorm_tol = {2e-6, 0, 4};
static const fx_tol batchnorm_tol = {2e-6, 0, 2};

/* Compares on every ISA; want_kernel says whether a fast kernel must cover the node. */
static void compare_all(fx *f, const fx_pools *pools, fx_tol tol, bool want_kernel, const char *label) {
    af_isa isas[AF_ISA_COUNT];
    int n_isa = fx_isas(isas);
    for (int i = 0; i < n_isa; i++) {
        const char *name = "";
        int64_t bad = fx_compare(f, isas[i], pools, tol, &name);
        bool ok = want_kernel ? bad == 0 && fx_named_for(name, isas[i]) : bad == -1;
        if (!ok) printf("  %s isa=%s: %lld off (kernel %s)\n", label, af_isa_name(isas[i]), (long long)bad, name);
        CHECK(ok);
    }
}

/* ---- Softmax --------------------------------------------------------------------------------- */

static void softmax_node(fx *f, int opset, int rank, const int64_t *dims, int axis, bool has_axis, float offset,
                         uint64_t seed) {
    fx_init(f, AF_OP_SOFTMAX, opset);
    if (has_axis) fx_int(f, "axis", axis);
    af_tensor x = fx_rand(rank, dims, -10 + offset, 10 + offset, seed);
    fx_input(f, x, false);
}

AF_TEST(fast_norm_softmax) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    char label[96];
    for (int s = 0; s < N_LENGTHS; s++) {
        for (int dynamic = 0; dynamic < 2; dynamic++) {
            fx f;
            softmax_node(&f, 13, 2, (int64_t[]){3, lengths[s]}, 0, false, s == 3 ? 1000.0f : 0.0f, (uint64_t)s);
            f.dynamic = dynamic;
            snprintf(label, sizeof label, "softmax13 [3,%lld] dynamic=%d", (long long)lengths[s], dynamic);
            compare_all(&f, &pools, softmax_tol, true, label);
            fx_free(&f);
        }
    }
    fx f;
    /* Rows spread over the threads. */
    softmax_node(&f, 13, 2, (int64_t[]){128, 1000}, 0, false, 0, 1);
    compare_all(&f, &pools, softmax_tol, true, "softmax13 [128,1000]");
    fx_free(&f);
    /* Attention-style masks: -inf entries, and a row of nothing but -inf (NaN, as the reference). */
    softmax_node(&f, 13, 3, (int64_t[]){2, 4, 33}, -1, true, 0, 2);
    float *x = f.in[0].data;
    for (int64_t i = 0; i < 2 * 4 * 33; i++)
        if (i % 3 == 0 || (i >= 33 && i < 66)) x[i] = -INFINITY;
    compare_all(&f, &pools, softmax_tol, true, "softmax13 masked");
    fx_free(&f);
    /* Opset 13, a middle axis followed by dims of 1: still contiguous. */
    softmax_node(&f, 13, 3, (int64_t[]){2, 17, 1}, 1, true, 0, 3);
    compare_all(&f, &pools, softmax_tol, true, "softmax13 axis 1 of [2,17,1]");
    fx_free(&f);
    /* Before opset 13 the input is coerced to 2-D from axis on: contiguous rows. */
    softmax_node(&f, 11, 3, (int64_t[]){2, 3, 4}, 1, true, 0, 4);
    compare_all(&f, &pools, softmax_tol, true, "softmax11 axis 1");
    fx_free(&f);
    softmax_node(&f, 11, 3, (int64_t[]){2, 3, 17}, 0, true, 0, 5);
    compare_all(&f, &pools, softmax_tol, true, "softmax11 axis 0");
    fx_free(&f);
    softmax_node(&f, 11, 2, (int64_t[]){5, 31}, 0, false, 0, 6);
    compare_all(&f, &pools, softmax_tol, true, "softmax11 default axis");
    fx_free(&f);
    /* Opset 13 over a strided axis: columns of each [axis, inner] block in chunks of up to 1024
     * (41 x 37 = 1517 columns: two chunks), inner widths off the vector width, the first axis. */
    static const struct {
        int rank;
        int64_t dims[4];
        int axis;
    } strided[] = {{3, {2, 3, 4}, 1}, {4, {1, 21, 37, 41}, 1}, {3, {2, 5, 3}, 0}, {3, {3, 100, 7}, 1},
                   {4, {2, 3, 17, 1}, 1}, {4, {1, 2, 33, 40}, -3}};
    for (size_t i = 0; i < sizeof strided / sizeof strided[0]; i++)
        for (int dynamic = 0; dynamic < 2; dynamic++) {
            softmax_node(&f, 13, strided[i].rank, strided[i].dims, strided[i].axis, true, 0, 7 + i);
            f.dynamic = dynamic;
            snprintf(label, sizeof label, "softmax13 strided case %zu dynamic=%d", i, dynamic);
            compare_all(&f, &pools, softmax_tol, true, label);
            fx_free(&f);
        }
    /* Masked entries on a strided axis, and a column of nothing but -inf (NaN, as the reference). */
    softmax_node(&f, 13, 3, (int64_t[]){2, 6, 19}, 1, true, 0, 20);
    x = f.in[0].data;
    for (int64_t i = 0; i < 2 * 6 * 19; i++)
        if (i % 5 == 0 || i % 19 == 3) x[i] = -INFINITY;
    compare_all(&f, &pools, softmax_tol, true, "softmax13 strided masked");
    fx_free(&f);
    fx_pools_free(&pools);
}

/* ---- LogSoftmax ------------------------------------------------------------------------------ */

/* LogSoftmax: 4 ULP + 20 * 2^-24 relative, and 1e-6 absolute for results near 0 (x - max is
 * exact there; log of the double sum rounds once more). */
static const fx_tol logsoftmax_tol = {1e-6, 20 * 0x1p-24, 4};

AF_TEST(fast_norm_logsoftmax) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    char label[96];
    for (int s = 0; s < N_LENGTHS; s++) {
        fx f;
        fx_init(&f, AF_OP_LOG_SOFTMAX, 13);
        fx_input(&f, fx_rand(2, (int64_t[]){3, lengths[s]}, -10 + (s == 3 ? 1000 : 0), 10 + (s == 3 ? 1000 : 0),
                             (uint64_t)s),
                 false);
        snprintf(label, sizeof label, "logsoftmax13 [3,%lld]", (long long)lengths[s]);
        compare_all(&f, &pools, logsoftmax_tol, true, label);
        fx_free(&f);
    }
    fx f;
    /* Rows over the threads; -inf entries and a row of nothing but -inf (NaN, as the reference). */
    fx_init(&f, AF_OP_LOG_SOFTMAX, 13);
    fx_input(&f, fx_rand(2, (int64_t[]){128, 1000}, -10, 10, 1), false);
    float *x = f.in[0].data;
    for (int64_t i = 0; i < 128 * 1000; i++)
        if (i % 7 == 0 || (i >= 1000 && i < 2000)) x[i] = -INFINITY;
    compare_all(&f, &pools, logsoftmax_tol, true, "logsoftmax13 masked");
    fx_free(&f);
    /* Before opset 13: the coerced 2-D rows. A strided axis from 13: the reference. */
    fx_init(&f, AF_OP_LOG_SOFTMAX, 11);
    fx_int(&f, "axis", 1);
    fx_input(&f, fx_rand(3, (int64_t[]){2, 3, 17}, -10, 10, 2), false);
    compare_all(&f, &pools, logsoftmax_tol, true, "logsoftmax11 axis 1");
    fx_free(&f);
    fx_init(&f, AF_OP_LOG_SOFTMAX, 13);
    fx_int(&f, "axis", 1);
    fx_input(&f, fx_rand(3, (int64_t[]){2, 3, 17}, -10, 10, 3), false);
    compare_all(&f, &pools, logsoftmax_tol, false, "logsoftmax13 strided axis");
    fx_free(&f);
    fx_pools_free(&pools);
}

/* ---- LayerNormalization ---------------------------------------------------------------------- */

/* X [outer..., inner...] normalized from axis; Scale and B of the normalized dims (B optional). */
static void layernorm_node(fx *f, int rank, const int64_t *dims, int axis, bool bias, bool params_const, float offset,
                           uint64_t seed) {
    fx_init(f, AF_OP_LAYER_NORMALIZATION, 17);
    fx_int(f, "axis", axis);
    fx_float(f, "epsilon", 1e-5f);
    int a = axis < 0 ? axis + rank : axis;
    fx_input(f, fx_rand(rank, dims, -1 + offset, 1 + offset, seed), false);
    fx_input(f, fx_rand(rank - a, dims + a, -2, 2, seed + 1), params_const);
    if (bias) fx_input(f, fx_rand(rank - a, dims + a, -1, 1, seed + 2), params_const);
}

AF_TEST(fast_norm_layernorm) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    char label[96];
    for (int s = 0; s < N_LENGTHS; s++) {
        for (int variant = 0; variant < 3; variant++) {
            fx f;
            /* variant 0: constant Scale and B; 1: B absent, dynamic shapes; 2: mean 1000 >> spread */
            layernorm_node(&f, 2, (int64_t[]){3, lengths[s]}, -1, variant != 1, variant == 0,
                           variant == 2 ? 1000.0f : 0.0f, (uint64_t)(s * 3 + variant));
            f.dynamic = variant == 1;
            snprintf(label, sizeof label, "layernorm [3,%lld] variant %d", (long long)lengths[s], variant);
            compare_all(&f, &pools, layernorm_tol, true, label);
            fx_free(&f);
        }
    }
    fx f;
    layernorm_node(&f, 3, (int64_t[]){2, 64, 768}, -1, true, true, 0, 1);
    compare_all(&f, &pools, layernorm_tol, true, "layernorm [2,64,768]");
    fx_free(&f);
    /* Normalized over the trailing two dims. */
    layernorm_node(&f, 3, (int64_t[]){2, 3, 17}, 1, true, true, 0, 2);
    compare_all(&f, &pools, layernorm_tol, true, "layernorm axis 1 of [2,3,17]");
    fx_free(&f);
    /* A broadcast Scale: the reference (at run time when shapes are unknown at prepare). */
    fx_init(&f, AF_OP_LAYER_NORMALIZATION, 17);
    fx_input(&f, fx_rand(2, (int64_t[]){4, 9}, -1, 1, 3), false);
    fx_input(&f, fx_rand(1, (int64_t[]){1}, -2, 2, 4), true);
    compare_all(&f, &pools, layernorm_tol, false, "layernorm broadcast scale static");
    f.dynamic = true;
    compare_all(&f, &pools, FX_EXACT, true, "layernorm broadcast scale dynamic");
    fx_free(&f);
    /* Mean and InvStdDev asked for: the reference. */
    layernorm_node(&f, 2, (int64_t[]){4, 9}, -1, true, true, 0, 5);
    fx_outputs(&f, 3, 7u);
    compare_all(&f, &pools, layernorm_tol, false, "layernorm with Mean output");
    fx_free(&f);
    fx_pools_free(&pools);
}

/* ---- InstanceNormalization ------------------------------------------------------------------- */

/* X [N, C, ...] with Scale and B of C; each (n, c) plane normalized over itself. */
static void instnorm_node(fx *f, int rank, const int64_t *dims, bool params_const, float offset, uint64_t seed) {
    fx_init(f, AF_OP_INSTANCE_NORMALIZATION, 17);
    fx_float(f, "epsilon", 1e-4f);
    const int64_t C = dims[1];
    fx_input(f, fx_rand(rank, dims, -3 + offset, 3 + offset, seed), false);
    fx_input(f, fx_rand(1, &C, -2, 2, seed + 1), params_const);
    fx_input(f, fx_rand(1, &C, -1, 1, seed + 2), params_const);
}

AF_TEST(fast_norm_instancenorm) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    static const struct {
        int rank;
        int64_t dims[5];
        float offset; /* a mean far from 0 against the spread */
    } shapes[] = {{3, {2, 3, 1}, 0},       {3, {2, 4, 17}, 0},  {4, {1, 3, 7, 9}, 0},     {4, {2, 5, 16, 16}, 50},
                  {4, {1, 64, 33, 31}, 0}, {5, {1, 2, 3, 5, 7}, 0}, {4, {1, 8, 128, 128}, 0}};
    char label[96];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int v = 0; v < 4; v++) { /* dynamic shapes, parameters known only at run time */
            fx f;
            instnorm_node(&f, shapes[s].rank, shapes[s].dims, v < 2, shapes[s].offset, s);
            f.dynamic = v % 2;
            snprintf(label, sizeof label, "instancenorm shape %zu variant %d", s, v);
            compare_all(&f, &pools, layernorm_tol, true, label);
            fx_free(&f);
        }
    fx_pools_free(&pools);
}

/* ---- BatchNormalization ---------------------------------------------------------------------- */

static void batchnorm_node(fx *f, int opset, int rank, const int64_t *dims, bool params_const, uint64_t seed) {
    fx_init(f, AF_OP_BATCH_NORMALIZATION, opset);
    fx_float(f, "epsilon", 1e-3f);
    const int64_t C = dims[1];
    fx_input(f, fx_rand(rank, dims, -5, 5, seed), false);
    fx_input(f, fx_rand(1, &C, -2, 2, seed + 1), params_const);
    fx_input(f, fx_rand(1, &C, -1, 1, seed + 2), params_const);
    fx_input(f, fx_rand(1, &C, -1, 1, seed + 3), params_const);
    fx_input(f, fx_rand(1, &C, 0.5f, 2, seed + 4), params_const);
}

AF_TEST(fast_norm_batchnorm) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    static const int64_t shapes[][4] = {{2, 5, 1, 1}, {2, 5, 7, 1}, {1, 3, 4, 4}, {2, 4, 17, 1}, {2, 5, 7, 7},
                                        {1, 2, 31, 33}, {1, 64, 56, 56}};
    char label[96];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (int dynamic = 0; dynamic < 2; dynamic++) {
            fx f;
            batchnorm_node(&f, 15, 4, shapes[s], true, s);
            f.dynamic = dynamic;
            snprintf(label, sizeof label, "batchnorm shape %zu dynamic=%d", s, dynamic);
            compare_all(&f, &pools, batchnorm_tol, true, label);
            fx_free(&f);
        }
    }
    fx f;
    /* [N, C] (the channel along the row, every tail) and [N, C, L]. */
    for (int s = 0; s < 7; s++) {
        batchnorm_node(&f, 15, 2, (int64_t[]){3, lengths[s]}, true, (uint64_t)s);
        compare_all(&f, &pools, batchnorm_tol, true, "batchnorm [3,C]");
        fx_free(&f);
    }
    batchnorm_node(&f, 15, 3, (int64_t[]){2, 4, 33}, true, 9);
    compare_all(&f, &pools, batchnorm_tol, true, "batchnorm [2,4,33]");
    fx_free(&f);
    batchnorm_node(&f, 7, 4, (int64_t[]){2, 3, 5, 5}, true, 10);
    compare_all(&f, &pools, batchnorm_tol, true, "batchnorm opset 7");
    fx_free(&f);
    /* Left to the reference: parameters known only at run time, training, per-element statistics. */
    batchnorm_node(&f, 15, 4, (int64_t[]){2, 3, 5, 5}, false, 11);
    compare_all(&f, &pools, batchnorm_tol, false, "batchnorm runtime parameters");
    fx_free(&f);
    batchnorm_node(&f, 15, 4, (int64_t[]){2, 3, 5, 5}, true, 12);
    fx_int(&f, "training_mode", 1);
    compare_all(&f, &pools, batchnorm_tol, false, "batchnorm training");
    fx_free(&f);
    batchnorm_node(&f, 7, 4, (int64_t[]){2, 3, 5, 5}, true, 13);
    fx_int(&f, "spatial", 0);
    {
        /* spatial = 0 keeps statistics per (C, H, W): parameters of 3 * 5 * 5 elements. */
        const int64_t n = 75;
        for (int i = 1; i <= 4; i++) {
            af_tensor_free_data(&f.in[i]);
            f.in[i] = fx_rand(1, &n, i == 4 ? 0.5f : -1, 2, (uint64_t)(20 + i));
        }
    }
    compare_all(&f, &pools, batchnorm_tol, false, "batchnorm spatial=0");
    fx_free(&f);
    fx_pools_free(&pools);
}

/* A BatchNormalization run on an input with another channel count fails instead of reading the
 * folded parameters out of bounds. */
AF_TEST(fast_norm_batchnorm_checks_channels) {
    fx f;
    batchnorm_node(&f, 15, 4, (int64_t[]){1, 4, 3, 3}, true, 1);
    af_kernel k;
    CHECK(fx_prepare(&f, af_cpu_isa(), &k));
    af_tensor x = fx_rand(4, (int64_t[]){1, 8, 3, 3}, -1, 1, 2), y = fx_rand(4, (int64_t[]){1, 8, 3, 3}, 0, 1, 3);
    const af_tensor *ins[5] = {&x, &f.in[1], &f.in[2], &f.in[3], &f.in[4]};
    af_tensor *outs[1] = {&y};
    af_op_ctx c = {.node = &f.node, .graph = &f.g, .opset = 15, .n_inputs = 5, .inputs = ins, .n_outputs = 1,
                   .outputs = outs, .err = &f.err};
    CHECK(k.run(&k, &c, NULL, NULL, NULL) == AF_ERR_RUNTIME);
    af_kernel_release(&k);
    af_tensor_free_data(&x);
    af_tensor_free_data(&y);
    fx_free(&f);
}

/* Softmax rows masked with -100 (Swin's shifted windows): exp(-100) and its neighbours are
 * denormal. Where the probabilities only feed a product (Softmax -> Dropout -> MatMul) the kernel
 * flushes them to zero, which spares an assist per value and moves the product by under 2^-126 of
 * V; where anything else may read them (here a Log, which makes -92 of one and -inf of zero) they
 * are kept. Runs the fast kernel of each graph's Softmax on the same scores at every ISA. */
static int64_t softmax_denormals(const af_model *m, af_isa isa, int64_t *zeros) {
    const af_graph *g = m->graph;
    const af_node *sm = NULL;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == AF_OP_SOFTMAX) sm = &g->nodes[i];
    af_kernel k = {0};
    af_error err = {0};
    const af_kernel_request req = {.graph = g, .node = sm, .choice = {.isa = isa, .n_threads = 1}};
    if (!sm || af_kernel_select(&req, &k, &err) != AF_OK || !k.run) return -1;
    static float xs[2 * 49 * 49], ys[2 * 49 * 49];
    for (int i = 0; i < 2 * 49 * 49; i++) /* every other column masked */
        xs[i] = (float)((i * 29) % 31) / 10.0f - ((i % 49) % 2 ? 100.0f : 0.0f);
    af_tensor x = {.dtype = AF_DTYPE_FLOAT, .rank = 3, .dims = {2, 49, 49}, .data = xs, .nbytes = sizeof xs};
    af_tensor y = {.dtype = AF_DTYPE_FLOAT, .rank = 3, .dims = {2, 49, 49}, .data = ys, .nbytes = sizeof ys};
    const af_tensor *ins[1] = {&x};
    af_tensor *outs[1] = {&y};
    af_op_ctx c = {.node = sm, .graph = g, .opset = g->opset, .n_inputs = 1, .inputs = ins, .n_outputs = 1,
                   .outputs = outs, .err = &err};
    const af_status st = k.run(&k, &c, NULL, NULL, NULL);
    af_kernel_release(&k);
    if (st != AF_OK) return -1;
    int64_t denormal = 0;
    *zeros = 0;
    for (int i = 0; i < 2 * 49 * 49; i++) {
        denormal += ys[i] != 0.0f && fabsf(ys[i]) < 0x1p-126f;
        *zeros += ys[i] == 0.0f;
    }
    return denormal;
}

AF_TEST(fast_norm_softmax_flushes_denormals_only_before_products) {
    static float v[49 * 8];
    for (int i = 0; i < 49 * 8; i++) v[i] = (float)(i % 13) / 6.0f - 1.0f;
    af_model *models[2] = {NULL, NULL};
    for (int product = 0; product < 2; product++) {
        ob_model *b = ob_new(13);
        const char *p = ob_node1(b, "Softmax", ob_input(b, 3, (int64_t[]){2, 49, 49}));
        ob_attr_i(b, "axis", -1);
        if (product) ob_output(b, ob_node2(b, "MatMul", ob_node1(b, "Dropout", p), ob_const(b, 2, (int64_t[]){49, 8}, v)));
        else ob_output(b, ob_node1(b, "Log", p));
        af_error err = {0};
        models[product] = ob_load(b, &err);
        ob_free(b);
        CHECK(models[product] != NULL);
    }
    af_isa isas[AF_ISA_COUNT];
    const int n_isa = fx_isas(isas);
    for (int i = 0; models[0] && models[1] && i < n_isa; i++) {
        int64_t zeros_log = 0, zeros_product = 0;
        const int64_t kept = softmax_denormals(models[0], isas[i], &zeros_log);
        const int64_t flushed = softmax_denormals(models[1], isas[i], &zeros_product);
        if (kept <= 0 || flushed != 0 || zeros_product != zeros_log + kept)
            af_test_fail(__FILE__, __LINE__, "%s: before a Log %lld denormals, %lld zeros; before a MatMul %lld, %lld",
                         af_isa_name(isas[i]), (long long)kept, (long long)zeros_log, (long long)flushed,
                         (long long)zeros_product);
    }
    af_model_free(models[0]);
    af_model_free(models[1]);
}
