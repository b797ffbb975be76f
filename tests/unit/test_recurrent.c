/* RNN, GRU and LSTM through the loader and a session: hand-checked values (bidirectional with
 * sequence_lens shorter than the sequence, layout = 1, clip), a plain per-element LSTM and GRU
 * written from the spec's equations as the oracle for the rest, shapes with a symbolic dim, and
 * the errors that name the node. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autofusion.h"
#include "onnx_build.h"
#include "unit.h"

enum { MAX_ELEMS = 4096 };

typedef struct rnn_case {
    const char *op;        /* "RNN", "GRU" or "LSTM" */
    const char *direction; /* NULL: the default (forward) */
    int64_t seq, batch, in, hid;
    int layout;
    const int32_t *lens;   /* sequence_lens, or NULL */
    float clip;            /* 0: none */
    int linear_before_reset;
    int n_acts;            /* activations given (0: the defaults) */
    const char *const *acts;
    int n_alpha, n_beta;
    const float *alpha, *beta;
    /* data in the layout's order; NULL for absent optional inputs */
    const float *x, *w, *r, *b, *h0, *c0, *p;
} rnn_case;

static int n_dirs(const rnn_case *c) { return c->direction && !strcmp(c->direction, "bidirectional") ? 2 : 1; }
static int n_gates(const rnn_case *c) { return !strcmp(c->op, "LSTM") ? 4 : !strcmp(c->op, "GRU") ? 3 : 1; }

/* Element offsets in the case's layout: X (t, b, i), Y (t, dir, b, j), the states (dir, b, j). */
static int64_t x_at(const rnn_case *c, int64_t t, int64_t b, int64_t i) {
    return ((c->layout ? b * c->seq + t : t * c->batch + b)) * c->in + i;
}
static int64_t y_at(const rnn_case *c, int64_t t, int dir, int64_t b, int64_t j) {
    int d = n_dirs(c);
    return (c->layout ? (b * c->seq + t) * d + dir : (t * d + dir) * c->batch + b) * c->hid + j;
}
static int64_t s_at(const rnn_case *c, int dir, int64_t b, int64_t j) {
    return (c->layout ? b * n_dirs(c) + dir : dir * c->batch + b) * c->hid + j;
}

/* Builds the node with X a graph input and everything else initializers; NULL with err filled
 * when the loader refuses it. */
static af_model *build(const rnn_case *c, af_error *err) {
    ob_model *m = ob_new(14);
    int64_t d = n_dirs(c), g = n_gates(c), H = c->hid;
    const char *ins[8] = {"", "", "", "", "", "", "", ""};
    int64_t xd[3] = {c->layout ? c->batch : c->seq, c->layout ? c->seq : c->batch, c->in};
    int64_t sd[3] = {c->layout ? c->batch : d, c->layout ? d : c->batch, H};
    ins[0] = ob_input(m, 3, xd);
    ins[1] = ob_const(m, 3, (int64_t[]){d, g * H, c->in}, c->w);
    ins[2] = ob_const(m, 3, (int64_t[]){d, g * H, H}, c->r);
    if (c->b) ins[3] = ob_const(m, 2, (int64_t[]){d, 2 * g * H}, c->b);
    if (c->lens) ins[4] = ob_const_i32(m, 1, (int64_t[]){c->batch}, c->lens);
    if (c->h0) ins[5] = ob_const(m, 3, sd, c->h0);
    if (c->c0) ins[6] = ob_const(m, 3, sd, c->c0);
    if (c->p) ins[7] = ob_const(m, 2, (int64_t[]){d, 3 * H}, c->p);
    int n_in = 8;
    while (n_in > 3 && !*ins[n_in - 1]) n_in--;
    ob_node(m, c->op, n_in, ins);
    const char *outs[3];
    int n_out = g == 4 ? 3 : 2;
    ob_node_outputs(m, n_out, 0, outs);
    ob_attr_i(m, "hidden_size", H);
    if (c->direction) ob_attr_s(m, "direction", c->direction);
    if (c->layout) ob_attr_i(m, "layout", c->layout);
    if (c->clip > 0) ob_attr_f(m, "clip", c->clip);
    if (c->linear_before_reset) ob_attr_i(m, "linear_before_reset", 1);
    if (c->n_acts) ob_attr_strings(m, "activations", c->n_acts, c->acts);
    if (c->n_alpha) ob_attr_floats(m, "activation_alpha", c->n_alpha, c->alpha);
    if (c->n_beta) ob_attr_floats(m, "activation_beta", c->n_beta, c->beta);
    for (int i = 0; i < n_out; i++) ob_output(m, outs[i]);
    af_model *model = ob_load(m, err);
    ob_free(m);
    return model;
}

/* Runs the case and compares Y, Y_h (and Y_c) with want_* (NULL: not compared). */
static void run_and_compare(const rnn_case *c, const float *want_y, const float *want_yh, const float *want_yc,
                            double tol) {
    af_error err = {0};
    af_model *m = build(c, &err);
    if (!m) {
        af_test_fail(__FILE__, __LINE__, "%s: %s", c->op, err.message);
        return;
    }
    af_session *s = af_test_session(m, -1, NULL);
    if (!s) {
        af_model_free(m);
        return;
    }
    af_tensor x = {.dtype = AF_DTYPE_FLOAT, .rank = 3, .data = (void *)c->x};
    x.dims[0] = c->layout ? c->batch : c->seq;
    x.dims[1] = c->layout ? c->seq : c->batch;
    x.dims[2] = c->in;
    const char *names[1] = {"in0"};
    CHECK(af_session_run(s, 1, names, &x, &err) == AF_OK);
    const float *want[3] = {want_y, want_yh, want_yc};
    int64_t counts[3] = {c->seq * n_dirs(c) * c->batch * c->hid, n_dirs(c) * c->batch * c->hid,
                         n_dirs(c) * c->batch * c->hid};
    for (int k = 0; k < 3; k++) {
        if (!want[k]) continue;
        const af_tensor *o = af_session_output(s, k);
        CHECK(o && o->dtype == AF_DTYPE_FLOAT);
        if (!o || o->dtype != AF_DTYPE_FLOAT) continue;
        int64_t n = 1;
        for (int dd = 0; dd < o->rank; dd++) n *= o->dims[dd];
        CHECK_EQ_INT(n, counts[k]);
        for (int64_t i = 0; i < n && i < counts[k]; i++) CHECK_NEAR(((const float *)o->data)[i], want[k][i], tol, tol);
    }
    af_session_free(s);
    af_model_free(m);
}

/* h_t = w x_t + r h_{t-1} + wb + rb with the identity (Affine 1, 0) as the activation: every value
 * below is exact. Forward: w 2, r 0.5, b (1, 0); reverse: w 1, r -1, b (0, 0.5). Batch item 1 has 2
 * of the 3 steps; its third X (100) must not be read. */
static const char *const affine2[] = {"Affine", "Affine"};
static const float ones2[] = {1, 1}, zeros2[] = {0, 0};
static const float hand_w[] = {2, 1}, hand_r[] = {0.5f, -1}, hand_b[] = {1, 0, 0, 0.5f};
static const int32_t hand_lens[] = {3, 2};

AF_TEST(recurrent_rnn_bidirectional_lens_hand_checked) {
    static const float x[] = {1, -1, 2, 4, 3, 100};         /* [seq 3, batch 2, 1] */
    static const float h0[] = {0, 1, 2, -1};                /* [dirs, batch, 1] */
    static const float y[] = {3, -0.5f, 0.5f, -6, 6.5f, 8.75f, 1, 5.5f, 10.25f, 0, 1.5f, 0};
    static const float yh[] = {10.25f, 8.75f, 0.5f, -6};
    rnn_case c = {.op = "RNN", .direction = "bidirectional", .seq = 3, .batch = 2, .in = 1, .hid = 1,
                  .lens = hand_lens, .n_acts = 2, .acts = affine2, .n_alpha = 2, .alpha = ones2, .n_beta = 2,
                  .beta = zeros2, .x = x, .w = hand_w, .r = hand_r, .b = hand_b, .h0 = h0};
    run_and_compare(&c, y, yh, NULL, 0);
}

AF_TEST(recurrent_rnn_layout1_hand_checked) {
    /* The case above batch first: X [batch, seq, 1], states [batch, dirs, 1], Y [batch, seq, dirs, 1]. */
    static const float x[] = {1, 2, 3, -1, 4, 100};
    static const float h0[] = {0, 2, 1, -1};
    static const float y[] = {3, 0.5f, 6.5f, 1, 10.25f, 1.5f, -0.5f, -6, 8.75f, 5.5f, 0, 0};
    static const float yh[] = {10.25f, 0.5f, 8.75f, -6};
    rnn_case c = {.op = "RNN", .direction = "bidirectional", .seq = 3, .batch = 2, .in = 1, .hid = 1, .layout = 1,
                  .lens = hand_lens, .n_acts = 2, .acts = affine2, .n_alpha = 2, .alpha = ones2, .n_beta = 2,
                  .beta = zeros2, .x = x, .w = hand_w, .r = hand_r, .b = hand_b, .h0 = h0};
    run_and_compare(&c, y, yh, NULL, 0);
}

AF_TEST(recurrent_rnn_clip_hand_checked) {
    /* h_t = clip(x_t + 0.5 h_{t-1}) at 1.5: 0.5, clip(3.25) = 1.5, clip(-3.25) = -1.5. */
    static const float x[] = {0.5f, 3, -4}, w[] = {1}, r[] = {0.5f}, y[] = {0.5f, 1.5f, -1.5f}, yh[] = {-1.5f};
    static const char *const affine[] = {"Affine"};
    rnn_case c = {.op = "RNN", .seq = 3, .batch = 1, .in = 1, .hid = 1, .clip = 1.5f, .n_acts = 1, .acts = affine,
                  .x = x, .w = w, .r = r};
    run_and_compare(&c, y, yh, NULL, 0);
}

static float uniform(uint32_t *state) {
    *state = *state * 1664525u + 1013904223u;
    return (float)(*state >> 8) / (float)(1u << 23) - 1.0f; /* [-1, 1) */
}

static float *fill(float *buf, int64_t n, uint32_t *state, float scale) {
    for (int64_t i = 0; i < n; i++) buf[i] = scale * uniform(state);
    return buf;
}

static double sigmoid(double v) { return 1 / (1 + exp(-v)); }
static double clipped(const rnn_case *c, double v) { return c->clip > 0 ? fmax(-c->clip, fmin(c->clip, v)) : v; }

/* Row `row` of W (or R) of direction dir times x_t of batch item b (or the state h). */
static double w_dot_x(const rnn_case *c, int dir, int64_t row, int64_t t, int64_t b) {
    const float *w = c->w + (dir * n_gates(c) * c->hid + row) * c->in;
    double s = 0;
    for (int64_t i = 0; i < c->in; i++) s += w[i] * c->x[x_at(c, t, b, i)];
    return s;
}
static double r_dot(const rnn_case *c, int dir, int64_t row, const double *h) {
    double s = 0;
    for (int64_t i = 0; i < c->hid; i++) s += c->r[(dir * n_gates(c) * c->hid + row) * c->hid + i] * h[i];
    return s;
}
static double bias(const rnn_case *c, int dir, int64_t row, int which) { /* 0: Wb, 1: Rb */
    return c->b ? c->b[dir * 2 * n_gates(c) * c->hid + which * n_gates(c) * c->hid + row] : 0;
}

/* The spec's LSTM (default activations, clip on every gate input) or GRU equations, one batch item
 * and one time step at a time, writing Y, Y_h and Y_c in the case's layout. */
static void oracle(const rnn_case *c, float *y, float *yh, float *yc) {
    int64_t H = c->hid;
    bool lstm = n_gates(c) == 4;
    memset(y, 0, (size_t)(c->seq * n_dirs(c) * c->batch * H) * sizeof *y);
    for (int dir = 0; dir < n_dirs(c); dir++) {
        bool rev = dir == 1 || (c->direction && !strcmp(c->direction, "reverse"));
        for (int64_t b = 0; b < c->batch; b++) {
            double h[64], cs[64], hn[64];
            for (int64_t j = 0; j < H; j++) {
                h[j] = c->h0 ? c->h0[s_at(c, dir, b, j)] : 0;
                cs[j] = c->c0 ? c->c0[s_at(c, dir, b, j)] : 0;
            }
            int64_t len = c->lens ? c->lens[b] : c->seq;
            for (int64_t s = 0; s < len; s++) {
                int64_t t = rev ? len - 1 - s : s;
                for (int64_t j = 0; j < H; j++) {
                    if (lstm) { /* rows: i j, o H+j, f 2H+j, c 3H+j */
                        double pre[4];
                        for (int q = 0; q < 4; q++)
                            pre[q] = w_dot_x(c, dir, q * H + j, t, b) + r_dot(c, dir, q * H + j, h) +
                                     bias(c, dir, q * H + j, 0) + bias(c, dir, q * H + j, 1);
                        const float *p = c->p ? c->p + dir * 3 * H : NULL;
                        double ig = sigmoid(clipped(c, pre[0] + (p ? p[j] * cs[j] : 0)));
                        double fg = sigmoid(clipped(c, pre[2] + (p ? p[2 * H + j] * cs[j] : 0)));
                        double cn = fg * cs[j] + ig * tanh(clipped(c, pre[3]));
                        double og = sigmoid(clipped(c, pre[1] + (p ? p[H + j] * cn : 0)));
                        hn[j] = og * tanh(cn);
                        cs[j] = cn; /* C of unit j is read only by unit j */
                    } else { /* rows: z j, r H+j, h 2H+j */
                        double z = sigmoid(clipped(c, w_dot_x(c, dir, j, t, b) + r_dot(c, dir, j, h) +
                                                          bias(c, dir, j, 0) + bias(c, dir, j, 1)));
                        double rh = 0, hh;
                        if (c->linear_before_reset) {
                            double rr = r_dot(c, dir, 2 * H + j, h) + bias(c, dir, 2 * H + j, 1);
                            double rg = sigmoid(clipped(c, w_dot_x(c, dir, H + j, t, b) + r_dot(c, dir, H + j, h) +
                                                                bias(c, dir, H + j, 0) + bias(c, dir, H + j, 1)));
                            hh = w_dot_x(c, dir, 2 * H + j, t, b) + bias(c, dir, 2 * H + j, 0) + rg * rr;
                        } else {
                            for (int64_t i = 0; i < H; i++) {
                                double rg = sigmoid(clipped(c, w_dot_x(c, dir, H + i, t, b) + r_dot(c, dir, H + i, h) +
                                                                    bias(c, dir, H + i, 0) + bias(c, dir, H + i, 1)));
                                rh += c->r[(dir * 3 * H + 2 * H + j) * H + i] * rg * h[i];
                            }
                            hh = w_dot_x(c, dir, 2 * H + j, t, b) + rh + bias(c, dir, 2 * H + j, 0) +
                                 bias(c, dir, 2 * H + j, 1);
                        }
                        hn[j] = (1 - z) * tanh(clipped(c, hh)) + z * h[j];
                    }
                }
                for (int64_t j = 0; j < H; j++) {
                    h[j] = hn[j];
                    y[y_at(c, t, dir, b, j)] = (float)h[j];
                }
            }
            for (int64_t j = 0; j < H; j++) {
                yh[s_at(c, dir, b, j)] = len > 0 ? (float)h[j] : 0;
                if (yc) yc[s_at(c, dir, b, j)] = len > 0 ? (float)cs[j] : 0;
            }
        }
    }
}

/* Random weights and inputs for c (its shape fields set), checked against the oracle. */
static void random_vs_oracle(rnn_case *c, uint32_t seed, float weight_scale, bool states, bool peep) {
    static float x[MAX_ELEMS], w[MAX_ELEMS], r[MAX_ELEMS], b[MAX_ELEMS], h0[MAX_ELEMS], c0[MAX_ELEMS], p[MAX_ELEMS];
    static float y[MAX_ELEMS], yh[MAX_ELEMS], yc[MAX_ELEMS];
    int64_t d = n_dirs(c), g = n_gates(c), H = c->hid;
    bool lstm = g == 4;
    c->x = fill(x, c->seq * c->batch * c->in, &seed, 1);
    c->w = fill(w, d * g * H * c->in, &seed, weight_scale);
    c->r = fill(r, d * g * H * H, &seed, weight_scale);
    c->b = fill(b, d * 2 * g * H, &seed, 0.5f);
    c->h0 = states ? fill(h0, d * c->batch * H, &seed, 1) : NULL;
    c->c0 = states && lstm ? fill(c0, d * c->batch * H, &seed, 1) : NULL;
    c->p = peep ? fill(p, d * 3 * H, &seed, 1) : NULL;
    oracle(c, y, yh, lstm ? yc : NULL);
    run_and_compare(c, y, yh, lstm ? yc : NULL, 1e-5);
}

static const int32_t lens_3[] = {4, 2, 0};

AF_TEST(recurrent_lstm_bidirectional_lens_vs_oracle) {
    for (int layout = 0; layout < 2; layout++) {
        rnn_case c = {.op = "LSTM", .direction = "bidirectional", .seq = 4, .batch = 3, .in = 5, .hid = 3,
                      .layout = layout, .lens = lens_3};
        random_vs_oracle(&c, 11u + (uint32_t)layout, 1, true, true);
    }
    rnn_case rev = {.op = "LSTM", .direction = "reverse", .seq = 4, .batch = 3, .in = 2, .hid = 4, .lens = lens_3};
    random_vs_oracle(&rev, 12u, 1, true, false);
}

AF_TEST(recurrent_lstm_clip_vs_oracle) {
    /* Weights of 3 push the gate inputs well past 0.4; the cell state is not clipped. */
    rnn_case c = {.op = "LSTM", .direction = "bidirectional", .seq = 5, .batch = 2, .in = 3, .hid = 4, .clip = 0.4f};
    random_vs_oracle(&c, 21u, 3, true, true);
}

AF_TEST(recurrent_gru_bidirectional_lens_vs_oracle) {
    for (int lbr = 0; lbr < 2; lbr++) {
        for (int layout = 0; layout < 2; layout++) {
            rnn_case c = {.op = "GRU", .direction = "bidirectional", .seq = 4, .batch = 3, .in = 3, .hid = 5,
                          .layout = layout, .lens = lens_3, .linear_before_reset = lbr};
            random_vs_oracle(&c, 31u + (uint32_t)(2 * lbr + layout), 1, true, false);
        }
    }
}

AF_TEST(recurrent_shapes_keep_a_symbolic_sequence) {
    ob_model *m = ob_new(14);
    const char *ins[3] = {ob_input(m, 3, (int64_t[]){-1, 2, 3}), ob_input(m, 3, (int64_t[]){2, 16, 3}),
                          ob_input(m, 3, (int64_t[]){2, 16, 4})};
    ob_node(m, "LSTM", 3, ins);
    const char *outs[3];
    ob_node_outputs(m, 3, 1u << 1, outs); /* Y and Y_c; Y_h omitted */
    ob_attr_s(m, "direction", "bidirectional");
    ob_output(m, outs[0]);
    ob_output(m, outs[2]);
    af_error err = {0};
    af_model *model = ob_load(m, &err);
    ob_free(m);
    CHECK(model != NULL);
    if (!model) return;
    af_value_info y, yc;
    CHECK(af_model_output_info(model, 0, &y) == AF_OK && af_model_output_info(model, 1, &yc) == AF_OK);
    CHECK_EQ_INT(y.rank, 4);
    CHECK(y.dims[0] == -1 && y.dims[1] == 2 && y.dims[2] == 2 && y.dims[3] == 4); /* hidden_size from R */
    CHECK_EQ_INT(yc.rank, 3);
    CHECK(yc.dims[0] == 2 && yc.dims[1] == 2 && yc.dims[2] == 4);
    af_model_free(model);
}

/* Loading c must fail with status st and a message holding the node's name and `cause`. */
static void expect_load_error(const rnn_case *c, af_status st, const char *cause) {
    af_error err = {0};
    af_model *m = build(c, &err);
    CHECK(m == NULL);
    af_model_free(m);
    CHECK_EQ_INT(err.status, st);
    char node[64];
    snprintf(node, sizeof node, "node 'n0' (%s)", c->op);
    if (!strstr(err.message, node) || !strstr(err.message, cause))
        af_test_fail(__FILE__, __LINE__, "message '%s' lacks \"%s\" or \"%s\"", err.message, node, cause);
}

AF_TEST(recurrent_errors_name_the_node_and_cause) {
    static float w[MAX_ELEMS], r[MAX_ELEMS], x[MAX_ELEMS];
    static const char *const swish[] = {"Sigmoid", "Swish", "Tanh"}, *const one[] = {"Tanh"};
    rnn_case base = {.op = "LSTM", .seq = 2, .batch = 1, .in = 2, .hid = 3, .x = x, .w = w, .r = r};
    rnn_case c = base;
    c.direction = "sideways";
    expect_load_error(&c, AF_ERR_INVALID_MODEL, "direction 'sideways'");
    c = base;
    c.n_acts = 3;
    c.acts = swish;
    expect_load_error(&c, AF_ERR_UNSUPPORTED, "activation 'Swish'");
    c = base;
    c.n_acts = 1;
    c.acts = one;
    expect_load_error(&c, AF_ERR_INVALID_MODEL, "activations has 1 names; 3 per direction");
    /* hidden_size 3 but W and R built for 2: W's rows must be 4 x 3. */
    ob_model *m = ob_new(14);
    const char *ins[3] = {ob_input(m, 3, (int64_t[]){2, 1, 2}), ob_const(m, 3, (int64_t[]){1, 8, 2}, w),
                          ob_const(m, 3, (int64_t[]){1, 8, 2}, r)};
    ob_node(m, "LSTM", 3, ins);
    ob_attr_i(m, "hidden_size", 3);
    af_error err = {0};
    af_model *bad = ob_load(m, &err);
    CHECK(bad == NULL && err.status == AF_ERR_INVALID_MODEL);
    CHECK(strstr(err.message, "node 'n0' (LSTM)") && strstr(err.message, "W is float32[1,8,2]: dim 1 must be 12"));
    af_model_free(bad);
    ob_free(m);
    /* A bidirectional node with one direction of weights. */
    m = ob_new(14);
    const char *gins[3] = {ob_input(m, 3, (int64_t[]){2, 1, 2}), ob_const(m, 3, (int64_t[]){1, 9, 2}, w),
                           ob_const(m, 3, (int64_t[]){1, 9, 3}, r)};
    ob_node(m, "GRU", 3, gins);
    ob_attr_s(m, "direction", "bidirectional");
    bad = ob_load(m, &err);
    CHECK(bad == NULL && err.status == AF_ERR_INVALID_MODEL);
    CHECK(strstr(err.message, "node 'n0' (GRU)") && strstr(err.message, "dim 0 must be 2"));
    af_model_free(bad);
    ob_free(m);
    /* X of rank 2. */
    m = ob_new(14);
    const char *rins[3] = {ob_input(m, 2, (int64_t[]){2, 2}), ob_const(m, 3, (int64_t[]){1, 3, 2}, w),
                           ob_const(m, 3, (int64_t[]){1, 3, 3}, r)};
    ob_node(m, "RNN", 3, rins);
    bad = ob_load(m, &err);
    CHECK(bad == NULL && err.status == AF_ERR_INVALID_MODEL);
    CHECK(strstr(err.message, "node 'n0' (RNN)") && strstr(err.message, "X has 2 dims; RNN needs 3"));
    af_model_free(bad);
    ob_free(m);
}

AF_TEST(recurrent_sequence_lens_out_of_range_fails_the_run) {
    static const float x[] = {1, 2, 3, 4}, w[] = {1}, r[] = {1};
    static const int32_t lens[] = {1, 3}; /* the sequence has 2 steps */
    rnn_case c = {.op = "RNN", .seq = 2, .batch = 2, .in = 1, .hid = 1, .lens = lens, .x = x, .w = w, .r = r};
    af_error err = {0};
    af_model *m = build(&c, &err);
    CHECK(m != NULL);
    af_session *s = m ? af_test_session(m, -1, NULL) : NULL;
    if (s) {
        af_tensor t = {.dtype = AF_DTYPE_FLOAT, .rank = 3, .dims = {2, 2, 1}, .data = (void *)x};
        const char *names[1] = {"in0"};
        CHECK(af_session_run(s, 1, names, &t, &err) == AF_ERR_RUNTIME);
        CHECK(strstr(err.message, "node 'n0' (RNN)") && strstr(err.message, "sequence_lens[1] is 3"));
    }
    af_session_free(s);
    af_model_free(m);
}
