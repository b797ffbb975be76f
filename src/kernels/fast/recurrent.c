/*
 * Fast float32 RNN, GRU and LSTM for constant W and R. W^T of every direction is packed once as
 * one GEMM operand, so the input projection of all time steps and directions is a single GEMM on
 * the session's pool: X [seq*batch, input] x W^T -> [seq*batch, dirs*gates*hidden], with Wb + Rb
 * folded into one bias added by its epilogue. Each step then copies its projected rows into a
 * [batch, gates*hidden] block, adds H_{t-1} R^T (a small single-threaded GEMM on packed R^T) and
 * runs the gate math in float. Clip, peepholes, input_forget, sequence_lens and the outputs follow
 * the reference kernel (src/kernels/ref/recurrent.c), which states the semantics.
 *
 * GRU packs R's z and r rows apart from its h rows: without linear_before_reset R_h multiplies
 * r . h, known only once the z and r gates are; with it, Rb_h stays inside the reset product and
 * only Wb_h joins the folded bias.
 */
#include <math.h>
#include <string.h>

#include "ir/shape/recurrent.h"
#include "kernels/gemm/gemm.h"
#include "kernels/kernel.h"
#include "kernels/ref/conv.h"
#include "kernels/vmath.h"
#include "util/alloc.h"
#include "util/error.h"

typedef struct rnn_state {
    af_isa isa;
    int n_gates, n_dirs;
    int64_t input, hidden;
    af_gemm_packed *w;                    /* W^T of all directions: [input, dirs*gates*hidden] */
    af_gemm_packed *r[AF_RNN_MAX_DIRS];   /* R^T per direction; GRU: its z and r columns only */
    af_gemm_packed *r_h[AF_RNN_MAX_DIRS]; /* GRU: R_h^T */
} rnn_state;

static void rnn_free(void *p) {
    rnn_state *s = p;
    af_gemm_packed_free(s->w);
    for (int i = 0; i < AF_RNN_MAX_DIRS; i++) {
        af_gemm_packed_free(s->r[i]);
        af_gemm_packed_free(s->r_h[i]);
    }
    af_free(s);
}

/* Byte offsets of one run's scratch, each 64-aligned. */
typedef struct rnn_scratch {
    size_t proj;  /* [seq*batch, dirs*gates*hid] projected inputs plus folded bias */
    size_t bias;  /* [dirs*gates*hid] Wb + Rb (GRU with linear_before_reset: Wb only for h) */
    size_t rbh;   /* [dirs*hid] GRU with linear_before_reset: Rb_h */
    size_t gates; /* [batch, gates*hid] one step's pre-activations */
    size_t h, cell, tmp; /* [batch, hid] each */
    size_t lens;  /* [batch] int64 */
    size_t gemm;  /* the GEMMs' packing scratch */
    size_t gemm_bytes, total;
} rnn_scratch;

static bool add_region(size_t *at, size_t *total, size_t n, size_t elem) {
    size_t bytes;
    if (!af_mul_size(n ? n : 1, elem, &bytes) || bytes > SIZE_MAX - 64 - *total) return false;
    *at = *total;
    *total += (bytes + 63) & ~(size_t)63;
    return true;
}

/* The step GEMM for one direction: C [batch, n] (+)= A [batch, hid] x packed (hid x n). */
static af_gemm_desc step_desc(const rnn_state *s, int64_t batch, const af_gemm_packed *b, int64_t n) {
    af_gemm_desc d = af_gemm_desc_default();
    d.isa = s->isa;
    d.M = batch;
    d.K = s->hidden;
    d.N = n;
    d.lda = s->hidden;
    d.packed_b = b;
    return d;
}

static af_gemm_desc proj_desc(const rnn_state *s, int64_t rows) {
    af_gemm_desc d = af_gemm_desc_default();
    d.isa = s->isa;
    d.M = rows;
    d.K = s->input;
    d.N = s->n_dirs * s->n_gates * s->hidden;
    d.lda = s->input;
    d.ldc = d.N;
    d.packed_b = s->w;
    return d;
}

/* Lays out the scratch for seq x batch; false when the sizes overflow. */
static bool plan_scratch(const rnn_state *s, int64_t seq, int64_t batch, int n_threads, rnn_scratch *l) {
    memset(l, 0, sizeof *l);
    size_t hid = (size_t)s->hidden, gh = (size_t)s->n_gates * hid, dirs = (size_t)s->n_dirs, rows;
    size_t b = (size_t)batch, proj_n, gates_n;
    if (!af_mul_size((size_t)seq, b, &rows) || !af_mul_size(rows, dirs * gh, &proj_n) || !af_mul_size(b, gh, &gates_n))
        return false;
    size_t gemm = 0;
    if (rows) {
        af_gemm_desc d = proj_desc(s, (int64_t)rows);
        gemm = af_sgemm_workspace_size(&d, n_threads);
    }
    if (batch) {
        af_gemm_desc d = step_desc(s, batch, s->r[0], s->n_gates == 3 ? 2 * s->hidden : (int64_t)gh);
        size_t step = af_sgemm_workspace_size(&d, 1);
        if (s->n_gates == 3) {
            d = step_desc(s, batch, s->r_h[0], s->hidden);
            size_t step_h = af_sgemm_workspace_size(&d, 1);
            if (step_h > step) step = step_h;
        }
        if (step > gemm) gemm = step;
    }
    l->gemm_bytes = gemm;
    size_t t = 0;
    return add_region(&l->proj, &t, proj_n, sizeof(float)) && add_region(&l->bias, &t, dirs * gh, sizeof(float)) &&
           add_region(&l->rbh, &t, dirs * hid, sizeof(float)) && add_region(&l->gates, &t, gates_n, sizeof(float)) &&
           add_region(&l->h, &t, b * hid, sizeof(float)) && add_region(&l->cell, &t, b * hid, sizeof(float)) &&
           add_region(&l->tmp, &t, b * hid, sizeof(float)) && add_region(&l->lens, &t, b, sizeof(int64_t)) &&
           add_region(&l->gemm, &t, gemm, 1) && (l->total = t, true);
}

/* ---- gate math, in float ---- */

static float act1(const af_rnn_act *a, float x) {
    switch (a->kind) {
    case AF_RNN_ACT_RELU: return x > 0 ? x : 0;
    case AF_RNN_ACT_TANH: return tanhf(x);
    case AF_RNN_ACT_SIGMOID: return x >= 0 ? 1 / (1 + expf(-x)) : expf(x) / (1 + expf(x));
    case AF_RNN_ACT_AFFINE: return a->alpha * x + a->beta;
    case AF_RNN_ACT_LEAKY_RELU: return x >= 0 ? x : a->alpha * x;
    case AF_RNN_ACT_THRESHOLDED_RELU: return x >= a->alpha ? x : 0;
    case AF_RNN_ACT_SCALED_TANH: return a->alpha * tanhf(a->beta * x);
    case AF_RNN_ACT_HARD_SIGMOID: return fminf(fmaxf(a->alpha * x + a->beta, 0), 1);
    case AF_RNN_ACT_ELU: return x >= 0 ? x : a->alpha * expm1f(x);
    case AF_RNN_ACT_SOFTSIGN: return x / (1 + fabsf(x));
    case AF_RNN_ACT_SOFTPLUS: return x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x));
    }
    return x;
}

/* x[0..n) = act(x), sigmoid and tanh through the vector math. */
static void act_row(af_isa isa, const af_rnn_act *a, int64_t n, float *x) {
    if (a->kind == AF_RNN_ACT_SIGMOID || a->kind == AF_RNN_ACT_TANH) {
        af_vmath_f32(isa, a->kind == AF_RNN_ACT_SIGMOID ? AF_VMATH_SIGMOID : AF_VMATH_TANH, n, x, x);
    } else if (a->kind == AF_RNN_ACT_SCALED_TANH) {
        for (int64_t j = 0; j < n; j++) x[j] *= a->beta;
        af_vmath_f32(isa, AF_VMATH_TANH, n, x, x);
        for (int64_t j = 0; j < n; j++) x[j] *= a->alpha;
    } else {
        for (int64_t j = 0; j < n; j++) x[j] = act1(a, x[j]);
    }
}

static void clip_row(float clip, int64_t n, float *x) {
    if (clip <= 0) return;
    for (int64_t j = 0; j < n; j++) x[j] = x[j] < -clip ? -clip : x[j] > clip ? clip : x[j];
}

/* x += p . v, when the peephole p is present. */
static void peephole(const float *p, const float *v, int64_t n, float *x) {
    if (!p) return;
    for (int64_t j = 0; j < n; j++) x[j] += p[j] * v[j];
}

/* One run's view of the node: the description, inputs as floats, scratch. */
typedef struct rnn_run {
    const rnn_state *s;
    const af_rnn_desc *d;
    af_isa isa;
    const float *x, *p, *h0, *c0;
    const float *bias, *rbh;
    const int64_t *lens;
    float *proj, *gates, *h, *cell, *tmp;
    void *gemm_ws;
    size_t gemm_bytes;
} rnn_run;

static int64_t state_at(const af_rnn_desc *d, int dir, int64_t b) {
    return (d->batch_first ? b * d->n_dirs + dir : dir * d->batch + b) * d->hidden;
}

static int64_t x_row(const af_rnn_desc *d, int64_t t, int64_t b) {
    return d->batch_first ? b * d->seq + t : t * d->batch + b;
}

/* c [batch, n] (row stride ldc) = beta c + a [batch, hid] x packed (hid x n); single-threaded:
 * the step is too small to share. */
static af_status step_gemm(const rnn_run *r, const float *a, const af_gemm_packed *b, int64_t n, float *c,
                           int64_t ldc, float beta) {
    af_gemm_desc g = step_desc(r->s, r->d->batch, b, n);
    g.A = a;
    g.C = c;
    g.ldc = ldc;
    g.beta = beta;
    g.workspace = r->gemm_ws;
    g.workspace_size = r->gemm_bytes;
    return af_sgemm(&g, NULL);
}

static void lstm_cell(const rnn_run *r, const af_rnn_act *act, const float *p, float *g, float *h, float *cell) {
    const af_rnn_desc *d = r->d;
    int64_t hid = d->hidden;
    float *gi = g, *go = g + hid, *gf = g + 2 * hid, *gc = g + 3 * hid, *hc = r->tmp;
    peephole(p, cell, hid, gi);
    clip_row(d->clip, hid, gi);
    act_row(r->isa, &act[0], hid, gi);
    if (d->input_forget) {
        for (int64_t j = 0; j < hid; j++) gf[j] = 1 - gi[j];
    } else {
        peephole(p ? p + 2 * hid : NULL, cell, hid, gf);
        clip_row(d->clip, hid, gf);
        act_row(r->isa, &act[0], hid, gf);
    }
    clip_row(d->clip, hid, gc);
    act_row(r->isa, &act[1], hid, gc);
    for (int64_t j = 0; j < hid; j++) cell[j] = gf[j] * cell[j] + gi[j] * gc[j];
    peephole(p ? p + hid : NULL, cell, hid, go);
    clip_row(d->clip, hid, go);
    act_row(r->isa, &act[0], hid, go);
    memcpy(hc, cell, (size_t)hid * sizeof *hc); /* h reads the cell unclipped */
    act_row(r->isa, &act[2], hid, hc);
    for (int64_t j = 0; j < hid; j++) h[j] = go[j] * hc[j];
}

/* GRU after the step's z and r pre-activations hold the recurrent term: activates z and r of
 * every row, then runs the h gate (whose recurrent term needs r) and the update. */
static af_status gru_step(const rnn_run *r, int dir, const af_rnn_act *act, int64_t step) {
    const af_rnn_desc *d = r->d;
    int64_t hid = d->hidden, batch = d->batch, gh = 3 * hid;
    for (int64_t b = 0; b < batch; b++) {
        clip_row(d->clip, 2 * hid, r->gates + b * gh);
        act_row(r->isa, &act[0], 2 * hid, r->gates + b * gh);
    }
    af_status st;
    const float *rbh = r->rbh + dir * hid;
    if (d->linear_before_reset) { /* hh += r . (R_h h + Rb_h) */
        if ((st = step_gemm(r, r->h, r->s->r_h[dir], hid, r->tmp, hid, 0)) != AF_OK) return st;
        for (int64_t b = 0; b < batch; b++) {
            const float *rg = r->gates + b * gh + hid, *rh = r->tmp + b * hid;
            float *hh = r->gates + b * gh + 2 * hid;
            for (int64_t j = 0; j < hid; j++) hh[j] += rg[j] * (rh[j] + rbh[j]);
        }
    } else { /* hh += R_h (r . h) */
        for (int64_t b = 0; b < batch; b++)
            for (int64_t j = 0; j < hid; j++) r->tmp[b * hid + j] = r->gates[b * gh + hid + j] * r->h[b * hid + j];
        if ((st = step_gemm(r, r->tmp, r->s->r_h[dir], hid, r->gates + 2 * hid, gh, 1)) != AF_OK) return st;
    }
    for (int64_t b = 0; b < batch; b++) {
        if (step >= r->lens[b]) continue;
        const float *z = r->gates + b * gh;
        float *hh = r->gates + b * gh + 2 * hid, *h = r->h + b * hid;
        clip_row(d->clip, hid, hh);
        act_row(r->isa, &act[1], hid, hh);
        for (int64_t j = 0; j < hid; j++) h[j] = (1 - z[j]) * hh[j] + z[j] * h[j];
    }
    return AF_OK;
}

/* Runs direction dir over every batch item; Y rows are written as each step ends. */
static af_status run_dir(const rnn_run *r, int dir, af_op_ctx *c) {
    const af_rnn_desc *d = r->d;
    int64_t seq = d->seq, batch = d->batch, hid = d->hidden, gh = d->n_gates * hid;
    int64_t proj_ld = d->n_dirs * gh;
    bool reverse = d->n_dirs == 2 ? dir == 1 : d->reverse;
    const af_rnn_act *act = d->act[dir];
    const float *p = r->p ? r->p + dir * 3 * hid : NULL;
    bool lstm = d->n_gates == 4, gru = d->n_gates == 3;
    for (int64_t b = 0; b < batch; b++) {
        int64_t at = state_at(d, dir, b);
        for (int64_t j = 0; j < hid; j++) {
            r->h[b * hid + j] = r->h0 ? r->h0[at + j] : 0;
            if (lstm) r->cell[b * hid + j] = r->c0 ? r->c0[at + j] : 0;
        }
    }
    af_tensor *y = af_ctx_output(c, AF_RNN_OUT_Y);
    for (int64_t s = 0; s < seq; s++) {
        int64_t n_active = 0;
        for (int64_t b = 0; b < batch; b++) {
            float *g = r->gates + b * gh;
            /* A finished row's gates are 0 so that its unused values stay finite. */
            if (s >= r->lens[b]) {
                memset(g, 0, (size_t)gh * sizeof *g);
                continue;
            }
            n_active++;
            int64_t t = reverse ? r->lens[b] - 1 - s : s;
            memcpy(g, r->proj + x_row(d, t, b) * proj_ld + dir * gh, (size_t)gh * sizeof *g);
        }
        if (!n_active) break; /* lengths only shrink the active set: nothing later runs */
        af_status st = step_gemm(r, r->h, r->s->r[dir], gru ? 2 * hid : gh, r->gates, gh, 1);
        if (st == AF_OK && gru) st = gru_step(r, dir, act, s);
        if (st != AF_OK) return af_ctx_fail(c, st, "GEMM failed");
        for (int64_t b = 0; b < batch; b++) {
            if (s >= r->lens[b]) continue;
            float *g = r->gates + b * gh, *h = r->h + b * hid;
            if (lstm) {
                lstm_cell(r, act, p, g, h, r->cell + b * hid);
            } else if (!gru) {
                clip_row(d->clip, hid, g);
                act_row(r->isa, &act[0], hid, g);
                memcpy(h, g, (size_t)hid * sizeof *h);
            }
            if (y) {
                int64_t t = reverse ? r->lens[b] - 1 - s : s;
                int64_t row = d->batch_first ? (b * seq + t) * d->n_dirs + dir : (t * d->n_dirs + dir) * batch + b;
                memcpy((float *)y->data + row * hid, h, (size_t)hid * sizeof *h);
            }
        }
    }
    for (int i = AF_RNN_OUT_Y_H; i < c->n_outputs; i++) {
        af_tensor *o = af_ctx_output(c, i);
        if (!o) continue;
        const float *state = i == AF_RNN_OUT_Y_H ? r->h : r->cell;
        for (int64_t b = 0; b < batch; b++) {
            float *dst = (float *)o->data + state_at(d, dir, b);
            if (r->lens[b] > 0) memcpy(dst, state + b * hid, (size_t)hid * sizeof *dst);
            else memset(dst, 0, (size_t)hid * sizeof *dst);
        }
    }
    return AF_OK;
}

/* Folds B into the projection's bias (and GRU's Rb_h when linear_before_reset keeps it apart). */
static void fold_bias(const af_rnn_desc *d, const float *bv, float *bias, float *rbh) {
    int64_t hid = d->hidden, gh = d->n_gates * hid;
    bool keep_rbh = d->n_gates == 3 && d->linear_before_reset;
    for (int dir = 0; dir < d->n_dirs; dir++) {
        const float *wb = bv + dir * 2 * gh, *rb = wb + gh;
        for (int64_t k = 0; k < gh; k++) bias[dir * gh + k] = wb[k] + (keep_rbh && k >= 2 * hid ? 0 : rb[k]);
        for (int64_t j = 0; j < hid; j++) rbh[dir * hid + j] = keep_rbh ? rb[2 * hid + j] : 0;
    }
}

static af_status read_lens(af_op_ctx *c, const af_rnn_desc *d, int64_t *lens) {
    const af_tensor *sl = af_ctx_input(c, AF_RNN_IN_SEQ_LENS);
    for (int64_t b = 0; b < d->batch; b++) {
        int64_t n = sl ? af_tensor_get_i64(sl, b) : d->seq;
        if (n < 0 || n > d->seq)
            return af_ctx_fail(c, AF_ERR_RUNTIME, "sequence_lens[%lld] is %lld; the sequence has %lld steps",
                               (long long)b, (long long)n, (long long)d->seq);
        lens[b] = n;
    }
    return AF_OK;
}

static const float *input_f32(af_op_ctx *c, int i) {
    const af_tensor *t = af_ctx_input(c, i);
    return t ? t->data : NULL;
}

static af_status rnn_kernel_run(const af_kernel *k, af_op_ctx *c, const af_epilogue *epi, af_threadpool *pool,
                                void *workspace) {
    (void)epi;
    const rnn_state *s = k->state;
    af_status st = af_convref_recheck(c, af_op_info(c->node->op)->infer);
    af_rnn_desc d;
    if (st == AF_OK) st = af_rnn_desc_init(c, &d);
    if (st != AF_OK) return st;
    if (d.input != s->input || d.hidden != s->hidden || d.n_dirs != s->n_dirs)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "the inputs do not match the packed weights");
    rnn_scratch l;
    if (!plan_scratch(s, d.seq, d.batch, af_threadpool_n_threads(pool), &l))
        return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory");
    void *own = NULL;
    if (!workspace || l.total > k->workspace_bytes) {
        if (!(own = af_malloc_aligned(l.total))) return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory");
        workspace = own;
    }
    char *ws = workspace;
    float *bias = (float *)(ws + l.bias), *rbh = (float *)(ws + l.rbh);
    rnn_run r = {.s = s, .d = &d, .isa = s->isa, .x = input_f32(c, AF_RNN_IN_X),
                 .h0 = input_f32(c, AF_RNN_IN_INITIAL_H),
                 .c0 = d.n_gates == 4 ? input_f32(c, AF_RNN_IN_INITIAL_C) : NULL,
                 .p = d.n_gates == 4 ? input_f32(c, AF_RNN_IN_P) : NULL,
                 .bias = bias, .rbh = rbh, .lens = (int64_t *)(ws + l.lens),
                 .proj = (float *)(ws + l.proj), .gates = (float *)(ws + l.gates), .h = (float *)(ws + l.h),
                 .cell = (float *)(ws + l.cell), .tmp = (float *)(ws + l.tmp), .gemm_ws = ws + l.gemm,
                 .gemm_bytes = l.gemm_bytes};
    const float *bv = input_f32(c, AF_RNN_IN_B);
    af_tensor *y = af_ctx_output(c, AF_RNN_OUT_Y);
    if ((st = read_lens(c, &d, (int64_t *)(ws + l.lens))) != AF_OK) goto done;
    if (bv) fold_bias(&d, bv, bias, rbh);
    else memset(rbh, 0, (size_t)(d.n_dirs * d.hidden) * sizeof *rbh);
    if (y && y->nbytes) memset(y->data, 0, y->nbytes);
    if (d.seq * d.batch > 0) {
        af_gemm_desc g = proj_desc(s, d.seq * d.batch);
        af_epilogue e;
        af_epilogue_init(&e);
        if (bv && af_epilogue_vec(&e, AF_EPI_BIAS_COL, bias, NULL) == AF_OK) g.epilogue = &e;
        g.A = r.x;
        g.C = r.proj;
        g.workspace = r.gemm_ws;
        g.workspace_size = r.gemm_bytes;
        if ((st = af_sgemm(&g, pool)) != AF_OK) {
            st = af_ctx_fail(c, st, "GEMM failed");
            goto done;
        }
    }
    for (int dir = 0; dir < d.n_dirs && st == AF_OK; dir++) st = run_dir(&r, dir, c);
done:
    af_free_aligned(own);
    return st;
}

af_status af_fast_recurrent_prepare(const af_kernel_request *req, af_kernel *k, af_error *err) {
    const af_node *n = req->node;
    const af_tensor *ins[8] = {0};
    if (n->n_inputs > 8) return AF_OK;
    for (int i = 0; i < n->n_inputs; i++) ins[i] = af_kernel_input(req, i);
    const af_tensor *x = ins[AF_RNN_IN_X], *w = ins[AF_RNN_IN_W], *r = ins[AF_RNN_IN_R];
    /* Runtime weights would need packing per run: the reference handles them. */
    if (!x || !w || !r || x->dtype != AF_DTYPE_FLOAT || w->dtype != AF_DTYPE_FLOAT || r->dtype != AF_DTYPE_FLOAT ||
        !w->data || !r->data || w->rank != 3 || r->rank != 3)
        return AF_OK;
    af_error quiet;
    af_op_ctx c = {.node = n, .graph = req->graph, .opset = req->graph->opset, .n_inputs = n->n_inputs,
                   .inputs = ins, .n_outputs = n->n_outputs, .outputs = (af_tensor *const[3]){0}, .err = &quiet};
    af_rnn_desc d;
    if (n->n_outputs > 3 || af_rnn_desc_init(&c, &d) != AF_OK) return AF_OK; /* the reference reports it */
    int64_t hid = r->dims[2], gh = d.n_gates * hid, in = w->dims[2];
    if (hid <= 0 || in <= 0 || w->dims[0] != d.n_dirs || r->dims[0] != d.n_dirs || w->dims[1] != gh ||
        r->dims[1] != gh)
        return AF_OK;
    rnn_state *s = af_calloc(1, sizeof *s);
    if (!s) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory preparing '%s'", n->name);
    *s = (rnn_state){.isa = req->choice.isa, .n_gates = d.n_gates, .n_dirs = d.n_dirs, .input = in, .hidden = hid};
    /* W [dirs*gh, in] is W^T stored transposed: one operand for every direction. */
    af_status st = af_gemm_pack_b(req->choice.isa, 1, in, d.n_dirs * gh, w->data, in, true, 0, &s->w);
    int64_t rec_n = d.n_gates == 3 ? 2 * hid : gh;
    for (int dir = 0; dir < d.n_dirs && st == AF_OK; dir++) {
        const float *rd = (const float *)r->data + dir * gh * hid;
        st = af_gemm_pack_b(req->choice.isa, 1, hid, rec_n, rd, hid, true, 0, &s->r[dir]);
        if (st == AF_OK && d.n_gates == 3)
            st = af_gemm_pack_b(req->choice.isa, 1, hid, hid, rd + 2 * hid * hid, hid, true, 0, &s->r_h[dir]);
    }
    if (st != AF_OK) {
        rnn_free(s);
        if (st == AF_ERR_OUT_OF_MEMORY) return af_errorf(err, st, "out of memory preparing '%s'", n->name);
        return AF_OK;
    }
    /* Scratch for the static shapes; unknown or larger ones allocate their own at run. */
    rnn_scratch l;
    const int n_threads = req->choice.n_threads > 0 ? req->choice.n_threads : 1;
    if (d.seq >= 0 && d.batch >= 0 && plan_scratch(s, d.seq, d.batch, n_threads, &l))
        k->workspace_bytes = l.total;
    k->name = d.n_gates == 4 ? "f32_lstm" : d.n_gates == 3 ? "f32_gru" : "f32_rnn";
    k->state = s;
    k->free_state = rnn_free;
    k->run = rnn_kernel_run;
    k->packed_inputs = 1u << AF_RNN_IN_W | 1u << AF_RNN_IN_R;
    k->weight_bytes = af_gemm_packed_bytes(s->w);
    for (int dir = 0; dir < d.n_dirs; dir++)
        k->weight_bytes += af_gemm_packed_bytes(s->r[dir]) + af_gemm_packed_bytes(s->r_h[dir]);
    return AF_OK;
}
