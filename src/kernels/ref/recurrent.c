/* Reference kernels of RNN, GRU and LSTM, in double. Time steps run in order; at each step every
 * batch item still inside its sequence gets its gates as W x_t + R h_{t-1} + Wb + Rb (a GEMV over
 * the gate rows, walking W and R row by row), then its cell update. A reverse direction starts at
 * a batch item's last valid step; Y is 0 past each item's length, and Y_h / Y_c hold the state
 * after its last valid step (0 for an empty sequence, as ONNX Runtime gives). */
#include <math.h>
#include <string.h>

#include "ir/shape/recurrent.h"
#include "kernels/ref/conv.h"
#include "util/alloc.h"

static double act(const af_rnn_act *a, double x) {
    switch (a->kind) {
    case AF_RNN_ACT_RELU: return x > 0 ? x : 0;
    case AF_RNN_ACT_TANH: return tanh(x);
    case AF_RNN_ACT_SIGMOID: return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));
    case AF_RNN_ACT_AFFINE: return a->alpha * x + a->beta;
    case AF_RNN_ACT_LEAKY_RELU: return x >= 0 ? x : a->alpha * x;
    case AF_RNN_ACT_THRESHOLDED_RELU: return x >= a->alpha ? x : 0;
    case AF_RNN_ACT_SCALED_TANH: return a->alpha * tanh(a->beta * x);
    case AF_RNN_ACT_HARD_SIGMOID: return fmin(fmax(a->alpha * x + a->beta, 0), 1);
    case AF_RNN_ACT_ELU: return x >= 0 ? x : a->alpha * (exp(x) - 1);
    case AF_RNN_ACT_SOFTSIGN: return x / (1 + fabs(x));
    case AF_RNN_ACT_SOFTPLUS: return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
    }
    return x;
}

/* An activation's input, clamped to [-clip, clip] when the node clips. */
static double clamp(const af_rnn_desc *d, double x) {
    if (d->clip <= 0) return x;
    return x < -d->clip ? -d->clip : x > d->clip ? d->clip : x;
}

/* out[k] += m[k, :] . v for the rows k of an m [rows, cols]. */
static void gemv_acc(const double *m, const double *v, int64_t rows, int64_t cols, double *out) {
    for (int64_t k = 0; k < rows; k++) {
        const double *row = m + k * cols;
        double s = 0;
        for (int64_t j = 0; j < cols; j++) s += row[j] * v[j];
        out[k] += s;
    }
}

/* The inputs as doubles (NULL for absent optional ones) and the sizes. */
typedef struct rnn_args {
    const af_rnn_desc *d;
    int64_t seq, batch, in, hid;
    double *x, *w, *r, *b, *p, *h0, *c0;
    int64_t *lens;    /* valid steps of each batch item */
    double *gates;    /* n_gates x hid pre-activations of one batch item */
    double *tmp;      /* GRU: 2 x hid scratch */
} rnn_args;

/* One direction's weights: W [gates*hid, in], R [gates*hid, hid], Wb and Rb [gates*hid] each (or
 * NULL), LSTM peepholes P [3*hid] (i, o, f; or NULL), activations. */
typedef struct rnn_dir {
    const double *w, *r, *wb, *rb, *p;
    const af_rnn_act *act;
} rnn_dir;

/* gates = Wb + Rb for `rows` gate rows from row `first`. */
static void bias_init(const rnn_dir *dw, int64_t first, int64_t rows, double *gates) {
    for (int64_t k = 0; k < rows; k++)
        gates[k] = dw->wb ? dw->wb[first + k] + dw->rb[first + k] : 0;
}

static void step_rnn(const rnn_args *a, const rnn_dir *dw, const double *x, double *h) {
    int64_t hid = a->hid;
    double *g = a->gates;
    bias_init(dw, 0, hid, g);
    gemv_acc(dw->w, x, hid, a->in, g);
    gemv_acc(dw->r, h, hid, hid, g);
    for (int64_t j = 0; j < hid; j++) h[j] = act(&dw->act[0], clamp(a->d, g[j]));
}

/* Gates z, r, h: z = f(Wz x + Rz h + b), r likewise, h~ = g(Wh x + Rh (r . h) + b) or, with
 * linear_before_reset, g(Wh x + Wbh + r . (Rh h + Rbh)); h = (1 - z) h~ + z h. */
static void step_gru(const rnn_args *a, const rnn_dir *dw, const double *x, double *h) {
    int64_t hid = a->hid, in = a->in;
    const af_rnn_desc *d = a->d;
    double *g = a->gates, *xh = a->tmp, *rh = a->tmp + hid;
    bias_init(dw, 0, 2 * hid, g);
    gemv_acc(dw->w, x, 2 * hid, in, g);
    gemv_acc(dw->r, h, 2 * hid, hid, g);
    for (int64_t j = 0; j < 2 * hid; j++) g[j] = act(&dw->act[0], clamp(d, g[j]));
    const double *z = g, *r = g + hid;
    for (int64_t j = 0; j < hid; j++) xh[j] = dw->wb ? dw->wb[2 * hid + j] : 0;
    gemv_acc(dw->w + 2 * hid * in, x, hid, in, xh);
    const double *rbh = dw->rb ? dw->rb + 2 * hid : NULL;
    double *hh = g + 2 * hid;
    if (d->linear_before_reset) {
        for (int64_t j = 0; j < hid; j++) rh[j] = rbh ? rbh[j] : 0;
        gemv_acc(dw->r + 2 * hid * hid, h, hid, hid, rh);
        for (int64_t j = 0; j < hid; j++) hh[j] = xh[j] + r[j] * rh[j];
    } else {
        for (int64_t j = 0; j < hid; j++) rh[j] = r[j] * h[j];
        for (int64_t j = 0; j < hid; j++) hh[j] = xh[j] + (rbh ? rbh[j] : 0);
        gemv_acc(dw->r + 2 * hid * hid, rh, hid, hid, hh);
    }
    for (int64_t j = 0; j < hid; j++) h[j] = (1 - z[j]) * act(&dw->act[1], clamp(d, hh[j])) + z[j] * h[j];
}

/* Gates i, o, f, c: i = f(Wi x + Ri h + Pi . C + b), f likewise (1 - i with input_forget),
 * c~ = g(Wc x + Rc h + b), C = f . C + i . c~, o = f(Wo x + Ro h + Po . C + b), h = o . h(C). */
static void step_lstm(const rnn_args *a, const rnn_dir *dw, const double *x, double *h, double *cell) {
    int64_t hid = a->hid;
    const af_rnn_desc *d = a->d;
    double *g = a->gates;
    bias_init(dw, 0, 4 * hid, g);
    gemv_acc(dw->w, x, 4 * hid, a->in, g);
    gemv_acc(dw->r, h, 4 * hid, hid, g);
    const double *pi = dw->p, *po = dw->p ? dw->p + hid : NULL, *pf = dw->p ? dw->p + 2 * hid : NULL;
    for (int64_t j = 0; j < hid; j++) {
        double c_prev = cell[j];
        double i = act(&dw->act[0], clamp(d, g[j] + (pi ? pi[j] * c_prev : 0)));
        double f = d->input_forget ? 1 - i : act(&dw->act[0], clamp(d, g[2 * hid + j] + (pf ? pf[j] * c_prev : 0)));
        double c_new = f * c_prev + i * act(&dw->act[1], clamp(d, g[3 * hid + j]));
        double o = act(&dw->act[0], clamp(d, g[hid + j] + (po ? po[j] * c_new : 0)));
        cell[j] = c_new;
        h[j] = o * act(&dw->act[2], c_new);
    }
}

/* Offset of state row (dir, batch item) in initial_h, initial_c, Y_h and Y_c. */
static int64_t state_at(const af_rnn_desc *d, int64_t batch, int dir, int64_t b, int64_t hid) {
    return (d->batch_first ? b * d->n_dirs + dir : dir * batch + b) * hid;
}

/* Runs one direction over every batch item; h and cell hold [batch, hid] states. */
static void run_dir(const rnn_args *a, int dir, af_op_ctx *c, double *h, double *cell) {
    const af_rnn_desc *d = a->d;
    int64_t seq = a->seq, batch = a->batch, in = a->in, hid = a->hid, gh = d->n_gates * hid;
    bool reverse = d->n_dirs == 2 ? dir == 1 : d->reverse;
    rnn_dir dw = {.w = a->w + dir * gh * in, .r = a->r + dir * gh * hid, .act = d->act[dir]};
    if (a->b) {
        dw.wb = a->b + dir * 2 * gh;
        dw.rb = dw.wb + gh;
    }
    if (a->p) dw.p = a->p + dir * 3 * hid;
    for (int64_t b = 0; b < batch; b++) {
        int64_t at = state_at(d, batch, dir, b, hid);
        for (int64_t j = 0; j < hid; j++) {
            h[b * hid + j] = a->h0 ? a->h0[at + j] : 0;
            if (cell) cell[b * hid + j] = a->c0 ? a->c0[at + j] : 0;
        }
    }
    af_tensor *y = af_ctx_output(c, AF_RNN_OUT_Y);
    for (int64_t s = 0; s < seq; s++) {
        for (int64_t b = 0; b < batch; b++) {
            if (s >= a->lens[b]) continue;
            int64_t t = reverse ? a->lens[b] - 1 - s : s;
            const double *x = a->x + (d->batch_first ? b * seq + t : t * batch + b) * in;
            double *hb = h + b * hid;
            if (d->n_gates == 4) step_lstm(a, &dw, x, hb, cell + b * hid);
            else if (d->n_gates == 3) step_gru(a, &dw, x, hb);
            else step_rnn(a, &dw, x, hb);
            int64_t row = d->batch_first ? (b * seq + t) * d->n_dirs + dir : (t * d->n_dirs + dir) * batch + b;
            if (y) af_convref_store(y, row * hid, hb, hid);
        }
    }
    for (int i = AF_RNN_OUT_Y_H; i < c->n_outputs; i++) {
        af_tensor *o = af_ctx_output(c, i);
        if (!o) continue;
        const double *state = i == AF_RNN_OUT_Y_H ? h : cell;
        size_t es = af_dtype_size(o->dtype);
        for (int64_t b = 0; b < batch; b++) {
            int64_t at = state_at(d, batch, dir, b, hid);
            if (a->lens[b] > 0) af_convref_store(o, at, state + b * hid, hid);
            else memset((char *)o->data + (size_t)at * es, 0, (size_t)hid * es);
        }
    }
}

/* Valid steps per batch item: sequence_lens, each in [0, seq], or seq for all. */
static af_status read_lens(af_op_ctx *c, rnn_args *a) {
    const af_tensor *sl = af_ctx_input(c, AF_RNN_IN_SEQ_LENS);
    for (int64_t b = 0; b < a->batch; b++) {
        int64_t n = sl ? af_tensor_get_i64(sl, b) : a->seq;
        if (n < 0 || n > a->seq)
            return af_ctx_fail(c, AF_ERR_RUNTIME, "sequence_lens[%lld] is %lld; the sequence has %lld steps",
                               (long long)b, (long long)n, (long long)a->seq);
        a->lens[b] = n;
    }
    return AF_OK;
}

static af_status run(af_op_ctx *c, af_op_fn infer) {
    af_status st = af_convref_recheck(c, infer);
    af_rnn_desc d;
    if (st == AF_OK) st = af_rnn_desc_init(c, &d);
    if (st != AF_OK) return st;
    rnn_args a = {.d = &d, .seq = d.seq, .batch = d.batch, .in = d.input, .hid = d.hidden};
    bool lstm = d.n_gates == 4;
    double **loads[] = {&a.x, &a.w, &a.r, &a.b, NULL, &a.h0, &a.c0, &a.p};
    size_t sz;
    double *h = NULL, *cell = NULL;
    af_tensor *y = af_ctx_output(c, AF_RNN_OUT_Y);
    if (!af_mul_size((size_t)(a.batch > 0 ? a.batch : 1), sizeof *a.lens, &sz) || !(a.lens = af_malloc(sz))) goto oom;
    if ((st = read_lens(c, &a)) != AF_OK) goto done;
    for (int i = 0; i < (lstm ? 8 : 6); i++) {
        const af_tensor *t = af_ctx_input(c, i);
        if (loads[i] && t && !(*loads[i] = af_convref_load(t))) goto oom;
    }
    a.gates = af_convref_alloc(d.n_gates * a.hid);
    a.tmp = af_convref_alloc(2 * a.hid);
    h = af_convref_alloc(a.batch * a.hid);
    cell = lstm ? af_convref_alloc(a.batch * a.hid) : NULL;
    if (!a.gates || !a.tmp || !h || (lstm && !cell)) goto oom;
    if (y && y->nbytes) memset(y->data, 0, y->nbytes);
    for (int dir = 0; dir < d.n_dirs; dir++) run_dir(&a, dir, c, h, cell);
    goto done;
oom:
    st = af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory");
done:
    for (size_t i = 0; i < sizeof loads / sizeof loads[0]; i++)
        if (loads[i]) af_free(*loads[i]);
    af_free(a.lens);
    af_free(a.gates);
    af_free(a.tmp);
    af_free(h);
    af_free(cell);
    return st;
}

af_status af_ref_RNN(af_op_ctx *c) { return run(c, af_infer_RNN); }
af_status af_ref_GRU(af_op_ctx *c) { return run(c, af_infer_GRU); }
af_status af_ref_LSTM(af_op_ctx *c) { return run(c, af_infer_LSTM); }
