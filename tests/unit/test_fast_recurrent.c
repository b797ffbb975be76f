/* The fast float32 RNN, GRU and LSTM (f32_rnn, f32_gru, f32_lstm) against the reference kernel on
 * random inputs: every output, each direction, both layouts, sequence_lens with zero and short
 * lengths, initial states, clip, peepholes, input_forget, linear_before_reset, the activations
 * that take alpha and beta, at every ISA level, on 1 and 2 threads (which must agree bit for bit).
 *
 * Tolerance: the reference runs in double and rounds once; the fast kernel sums in float (GEMM
 * FMAs in another order, vector sigmoid/tanh within 3 ulp) and feeds each step's rounded state
 * into the next, so errors of a few float ulps compound over the steps. rtol 1e-5 plus atol 1e-6
 * for values near 0 (where a relative bound means nothing) covers that with margin while still
 * catching any wrong gate, bias or mask, which is off by orders of magnitude more. */
#include "fast_check.h"
#include "ir/shape/recurrent.h"

static const fx_tol rnn_tol = {1e-6, 1e-5, 0};

typedef struct rnn_case {
    af_op op;
    const char *direction;
    int layout;
    int64_t seq, batch, in, hid;
    bool bias, bias_const, lens, init_h, init_c, peep;
    float clip;
    int input_forget, linear_before_reset;
    int n_acts;                 /* 0: the defaults */
    const char *const *acts;
    int n_alpha, n_beta;
    const float *alpha, *beta;
    unsigned outputs;           /* bit k: output k present */
    bool dynamic;               /* shapes unknown at prepare: the kernel allocates its scratch */
    uint64_t seed;
} rnn_case;

static int dirs_of(const rnn_case *c) { return c->direction && !strcmp(c->direction, "bidirectional") ? 2 : 1; }
static int gates_of(const rnn_case *c) { return c->op == AF_OP_LSTM ? 4 : c->op == AF_OP_GRU ? 3 : 1; }

/* Lengths cycling through the full sequence, 0, 1 and a short one. */
static af_tensor lens_tensor(const rnn_case *c) {
    af_tensor t = {.dtype = AF_DTYPE_INT32, .rank = 1, .dims = {c->batch}};
    if (af_tensor_alloc(&t, NULL) != AF_OK) return t;
    const int64_t pattern[] = {c->seq, 0, 1, c->seq > 2 ? c->seq - 2 : 1};
    for (int64_t b = 0; b < c->batch; b++) ((int32_t *)t.data)[b] = (int32_t)pattern[b % 4];
    return t;
}

static void rnn_node(fx *f, const rnn_case *c) {
    int dirs = dirs_of(c), g = gates_of(c);
    fx_init(f, c->op, 14);
    fx_int(f, "hidden_size", c->hid);
    if (c->direction) fx_str(f, "direction", c->direction);
    if (c->layout) fx_int(f, "layout", 1);
    if (c->clip > 0) fx_float(f, "clip", c->clip);
    if (c->input_forget) fx_int(f, "input_forget", 1);
    if (c->linear_before_reset) fx_int(f, "linear_before_reset", 1);
    if (c->n_acts) {
        af_attr *a = fx_attr(f, "activations", AF_ATTR_STRINGS);
        a->n = c->n_acts;
        a->strings = (char **)c->acts;
    }
    if (c->n_alpha) {
        af_attr *a = fx_attr(f, "activation_alpha", AF_ATTR_FLOATS);
        a->n = c->n_alpha;
        a->floats = (float *)c->alpha;
    }
    if (c->n_beta) {
        af_attr *a = fx_attr(f, "activation_beta", AF_ATTR_FLOATS);
        a->n = c->n_beta;
        a->floats = (float *)c->beta;
    }
    int64_t x_dims[3] = {c->seq, c->batch, c->in}, s_dims[3] = {dirs, c->batch, c->hid};
    if (c->layout) {
        x_dims[0] = c->batch, x_dims[1] = c->seq;
        s_dims[0] = c->batch, s_dims[1] = dirs;
    }
    uint64_t seed = c->seed * 16;
    fx_input(f, fx_rand(3, x_dims, -1, 1, seed + 1), false);
    fx_input(f, fx_rand(3, (int64_t[]){dirs, g * c->hid, c->in}, -0.5f, 0.5f, seed + 2), true);
    fx_input(f, fx_rand(3, (int64_t[]){dirs, g * c->hid, c->hid}, -0.5f, 0.5f, seed + 3), true);
    int last = c->peep ? 7 : c->init_c ? 6 : c->init_h ? 5 : c->lens ? 4 : c->bias ? 3 : 2;
    if (last >= 3) {
        if (c->bias) fx_input(f, fx_rand(2, (int64_t[]){dirs, 2 * g * c->hid}, -0.5f, 0.5f, seed + 4), c->bias_const);
        else fx_no_input(f);
    }
    if (last >= 4) {
        if (c->lens) fx_input(f, lens_tensor(c), false);
        else fx_no_input(f);
    }
    if (last >= 5) {
        if (c->init_h) fx_input(f, fx_rand(3, s_dims, -1, 1, seed + 5), false);
        else fx_no_input(f);
    }
    if (last >= 6) {
        if (c->init_c) fx_input(f, fx_rand(3, s_dims, -1, 1, seed + 6), false);
        else fx_no_input(f);
    }
    if (last >= 7) fx_input(f, fx_rand(2, (int64_t[]){dirs, 3 * c->hid}, -0.5f, 0.5f, seed + 7), true);
    fx_outputs(f, c->op == AF_OP_LSTM ? 3 : 2, c->outputs ? c->outputs : 7u);
    f->dynamic = c->dynamic;
}

/* The case on every ISA level: the reference against the fast kernel on both pools, every output
 * present compared (fx_compare), and the fast kernel must be the op's own (not declined). */
static void check_case(const rnn_case *c, const char *label) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    const char *want = c->op == AF_OP_LSTM ? "f32_lstm" : c->op == AF_OP_GRU ? "f32_gru" : "f32_rnn";
    af_isa isas[AF_ISA_COUNT];
    int n = fx_isas(isas);
    for (int i = 0; i < n; i++) {
        fx f;
        rnn_node(&f, c);
        const char *name = NULL;
        int64_t bad = fx_compare(&f, isas[i], &pools, rnn_tol, &name);
        if (bad >= 0 && (!name || strcmp(name, want))) {
            printf("  kernel '%s', expected '%s'\n", name ? name : "(none)", want);
            bad = -1;
        }
        if (bad) printf("  %s (isa %s): %lld off\n", label, af_isa_name(isas[i]), (long long)bad);
        CHECK(bad == 0);
        fx_free(&f);
    }
    fx_pools_free(&pools);
}

/* Every op, direction and layout, with all optional inputs and with none. */
AF_TEST(fast_recurrent_directions_and_layouts) {
    const af_op ops[] = {AF_OP_RNN, AF_OP_GRU, AF_OP_LSTM};
    const char *dirs[] = {NULL, "reverse", "bidirectional"};
    for (int o = 0; o < 3; o++)
        for (int d = 0; d < 3; d++)
            for (int layout = 0; layout < 2; layout++)
                for (int full = 0; full < 2; full++) {
                    rnn_case c = {.op = ops[o], .direction = dirs[d], .layout = layout, .seq = 5, .batch = 5,
                                  .in = 7, .hid = 19, .bias = full, .bias_const = true, .lens = full,
                                  .init_h = full, .init_c = full && ops[o] == AF_OP_LSTM,
                                  .peep = full && ops[o] == AF_OP_LSTM,
                                  .seed = (uint64_t)(o * 12 + d * 4 + layout * 2 + full + 1)};
                    char label[96];
                    snprintf(label, sizeof label, "%s %s layout %d %s", af_op_info(ops[o])->name,
                             dirs[d] ? dirs[d] : "forward", layout, full ? "all inputs" : "X W R only");
                    check_case(&c, label);
                }
}

/* Clip, input_forget, GRU's linear_before_reset, a runtime B, omitted outputs. */
AF_TEST(fast_recurrent_attributes) {
    for (int lbr = 0; lbr < 2; lbr++) {
        rnn_case c = {.op = AF_OP_GRU, .direction = "bidirectional", .seq = 6, .batch = 4, .in = 5, .hid = 17,
                      .bias = true, .bias_const = true, .lens = true, .init_h = true, .linear_before_reset = lbr,
                      .seed = 40u + (uint64_t)lbr};
        check_case(&c, lbr ? "GRU linear_before_reset" : "GRU");
        c.clip = 0.3f;
        c.layout = 1;
        check_case(&c, "GRU clip, layout 1");
    }
    rnn_case lstm = {.op = AF_OP_LSTM, .direction = "reverse", .seq = 7, .batch = 3, .in = 9, .hid = 21,
                     .bias = true, .bias_const = false, .lens = true, .init_h = true, .init_c = true, .peep = true,
                     .clip = 0.5f, .seed = 50};
    check_case(&lstm, "LSTM clip, runtime B");
    lstm.input_forget = 1;
    check_case(&lstm, "LSTM input_forget");
    lstm.outputs = 1u << 2; /* Y_c only */
    check_case(&lstm, "LSTM Y_c only");
    lstm.outputs = 1u << 0;
    lstm.direction = "bidirectional";
    check_case(&lstm, "LSTM Y only");
    rnn_case rnn = {.op = AF_OP_RNN, .seq = 4, .batch = 2, .in = 3, .hid = 33, .bias = true, .bias_const = true,
                    .clip = 0.8f, .outputs = 1u << 1, .seed = 60};
    check_case(&rnn, "RNN clip, Y_h only");
    rnn_case dyn = {.op = AF_OP_LSTM, .direction = "bidirectional", .layout = 1, .seq = 5, .batch = 3, .in = 4,
                    .hid = 13, .bias = true, .bias_const = true, .lens = true, .init_h = true, .dynamic = true,
                    .seed = 61};
    check_case(&dyn, "LSTM with unknown shapes");
}

/* The activations other than sigmoid and tanh, with alpha and beta. */
AF_TEST(fast_recurrent_activations) {
    static const char *const lstm_acts[] = {"HardSigmoid", "ScaledTanh", "Softsign",
                                            "Sigmoid", "Elu", "Softplus"};
    static const float lstm_alpha[] = {0.3f, 0.9f, 0.7f}, lstm_beta[] = {0.4f, 1.2f};
    rnn_case lstm = {.op = AF_OP_LSTM, .direction = "bidirectional", .seq = 4, .batch = 3, .in = 6, .hid = 18,
                     .bias = true, .bias_const = true, .lens = true, .init_h = true, .init_c = true, .n_acts = 6,
                     .acts = lstm_acts, .n_alpha = 3, .alpha = lstm_alpha, .n_beta = 2, .beta = lstm_beta,
                     .seed = 70};
    check_case(&lstm, "LSTM activations");
    static const char *const gru_acts[] = {"Sigmoid", "LeakyRelu"};
    static const float gru_alpha[] = {0.1f};
    rnn_case gru = {.op = AF_OP_GRU, .seq = 5, .batch = 2, .in = 4, .hid = 10, .bias = true, .bias_const = true,
                    .n_acts = 2, .acts = gru_acts, .n_alpha = 1, .alpha = gru_alpha, .seed = 71};
    check_case(&gru, "GRU LeakyRelu");
    static const char *const rnn_acts[][1] = {{"Relu"}, {"Affine"}, {"ThresholdedRelu"}};
    for (int i = 0; i < 3; i++) {
        static const float rnn_alpha[] = {0.5f}, rnn_beta[] = {0.1f};
        rnn_case rnn = {.op = AF_OP_RNN, .seq = 4, .batch = 3, .in = 5, .hid = 12, .bias = true, .bias_const = true,
                        .n_acts = 1, .acts = rnn_acts[i], .n_alpha = i ? 1 : 0, .alpha = rnn_alpha,
                        .n_beta = i == 1, .beta = rnn_beta, .seed = 72u + (uint64_t)i};
        check_case(&rnn, rnn_acts[i][0]);
    }
}

/* Runtime weights and other dtypes stay with the reference. */
AF_TEST(fast_recurrent_declines) {
    fx f;
    rnn_case c = {.op = AF_OP_LSTM, .seq = 3, .batch = 2, .in = 4, .hid = 5, .seed = 80};
    rnn_node(&f, &c);
    f.constant[AF_RNN_IN_R] = false;
    af_kernel k;
    CHECK(!fx_prepare(&f, af_cpu_isa(), &k));
    fx_free(&f);
}

/* A sequence_lens value past the sequence fails as the reference does. */
AF_TEST(fast_recurrent_checks_lengths) {
    fx f;
    rnn_case c = {.op = AF_OP_GRU, .seq = 3, .batch = 2, .in = 4, .hid = 5, .lens = true, .seed = 81};
    rnn_node(&f, &c);
    af_kernel k;
    CHECK(fx_prepare(&f, af_cpu_isa(), &k));
    ((int32_t *)f.in[AF_RNN_IN_SEQ_LENS].data)[1] = 4;
    af_tensor out[FX_MAX_OUT];
    CHECK(fx_run_fast(&f, &k, NULL, out) == AF_ERR_RUNTIME);
    CHECK(strstr(f.err.message, "sequence_lens[1] is 4") != NULL);
    fx_free_outputs(&f, out);
    af_kernel_release(&k);
    fx_free(&f);
}

/* Static shapes declare the scratch as workspace; unknown ones leave it to the run (the dynamic
 * case above checks that run's results). */
AF_TEST(fast_recurrent_workspace) {
    for (int dynamic = 0; dynamic < 2; dynamic++) {
        fx f;
        rnn_case c = {.op = AF_OP_GRU, .seq = 3, .batch = 2, .in = 4, .hid = 5, .dynamic = dynamic, .seed = 82};
        rnn_node(&f, &c);
        af_kernel k;
        CHECK(fx_prepare(&f, af_cpu_isa(), &k));
        CHECK(dynamic ? k.workspace_bytes == 0 : k.workspace_bytes > 0);
        af_kernel_release(&k);
        fx_free(&f);
    }
}
