/*
 * Builds the fused step of an attention_blocks group: reads the group's structure (Reshape and
 * Transpose of the Q, K and V projections, MatMul, scale, mask Add, Softmax, MatMul, Transpose,
 * Reshape, as torch exports BERT's self-attention) and runs the fused attention kernel on the
 * projections directly, so none of the layout copies or the score tensor exist.
 *
 * When the group holds the projections too (MatMul + bias Add of one input X, constant weights:
 * rule bert_self_attention_qkv), the step packs the three weight matrices side by side as one
 * [K, 3 H D] operand and runs a single GEMM X [Wq Wk Wv] + [bq bk bv] into its scratch, which the
 * kernel reads with a row stride of 3 H D: one packing of X, one pass of the thread pool, and Q,
 * K and V never reach memory.
 *
 * nn.MultiheadAttention's export (torchvision's ViT; rule mha_packed_self_attention) comes with
 * its input projection already packed: X [S, B, E] by W [E, 3E] + b, then three Slices of the
 * last axis, each Reshape [S, B*H, D] and Transpose to heads, Q scaled before Q.K^T. The step
 * packs W as it is and the kernel reads Q, K and V at their slices' offsets in the GEMM's
 * [S, B, 3E] rows (batch stride 3E, row stride 3BE), and writes ctx as [S, B, E].
 */
#include <stdio.h>
#include <string.h>

#include "fusion/sched/sched.h"
#include "ir/op_ctx.h"
#include "ir/shape/movement.h"
#include "kernels/epilogue.h"
#include "kernels/fast/attention.h"
#include "kernels/gemm/gemm.h"
#include "util/alloc.h"

typedef struct attention_state {
    af_isa isa;
    int64_t heads, head_dim;
    float scale;
    bool has_mask;
    int n_threads;
    /* The projections' GEMM when the group holds them (NULL: Q, K, V are the step's inputs). */
    af_gemm_packed *qkv_w; /* [K, 3 H D]: Wq, Wk, Wv side by side */
    float *qkv_b;          /* [3 H D] */
    int64_t qkv_k;
    int64_t qkv_off[3];    /* where Q, K and V start in a row of the GEMM's output */
    bool seq_first;        /* X is [S, B, K] (nn.MultiheadAttention), not [B, S, K] */
    /* Window attention (Swin): the relative position bias plus the shifted windows' mask, added
     * to the scores, [windows][H][S][S] (NULL: none); the batch runs `windows` at a time. */
    float *bias;
    int64_t windows;
} attention_state;

static void attention_free(void *p) {
    attention_state *s = p;
    if (!s) return;
    af_gemm_packed_free(s->qkv_w);
    af_free(s->qkv_b);
    af_free(s->bias);
    af_free(s);
}

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Whether t is a Transpose of rank n with permutation want. */
static bool perm_is(const af_node *t, int n, const int64_t *want) {
    const int64_t *p;
    if (!t || t->op != AF_OP_TRANSPOSE || af_node_attr_ints(t, "perm", &p) != n) return false;
    for (int i = 0; i < n; i++)
        if (p[i] != want[i]) return false;
    return true;
}

/* Two dims that static shapes already tell apart (an unknown dim, negative, clashes with none). */
static bool dims_clash(int64_t a, int64_t b) { return a >= 0 && b >= 0 && a != b; }

/* Whether what the run-time checks of attention_run require can still hold: Q, K and V shaped
 * alike, and a float mask of [B,1,1,S] or [B,1,S,S] (B may be 1). */
static bool layouts_agree(const af_graph *g, int qv, int kv, int vv, int mask) {
    const af_tensor *q = &g->values[qv].t;
    for (int i = 0; i < 2; i++) {
        const af_tensor *o = &g->values[i ? vv : kv].t;
        if (o->rank != q->rank) return false;
        for (int d = 0; d < q->rank; d++)
            if (dims_clash(o->dims[d], q->dims[d])) return false;
    }
    if (mask < 0) return true;
    const af_tensor *m = &g->values[mask].t;
    if (m->dtype != AF_DTYPE_FLOAT || m->rank != 4) return false;
    return !dims_clash(m->dims[1], 1) && !dims_clash(m->dims[3], q->dims[1]) &&
           (m->dims[2] == 1 || !dims_clash(m->dims[2], q->dims[1])) &&
           (m->dims[0] == 1 || !dims_clash(m->dims[0], q->dims[0]));
}

static const float *scalar_const(const af_graph *g, int v) {
    const af_value *c = af_graph_const_value(g, v);
    const af_tensor *t = c ? &c->t : NULL;
    return t && t->dtype == AF_DTYPE_FLOAT && af_tensor_numel(t) == 1 ? t->data : NULL;
}

/* The node producing v in the whole graph (inside the group or not), or NULL. */
static const af_node *producer(const af_graph *g, int v) {
    return v >= 0 && g->values[v].producer >= 0 ? &g->nodes[g->values[v].producer] : NULL;
}

/* The value of a one-element int64 constant when it is not negative, else -1. */
static int64_t const_i64(const af_graph *g, int v) {
    int64_t x;
    return af_graph_const_i64(g, v, &x) && x >= 0 ? x : -1;
}

/* Whether piece v of a shape is dimension k of x, as exporters write it for a dynamic batch or
 * sequence: Unsqueeze(Gather(Shape(x), k), axes 0); or a constant 0 (Reshape's "copy the input's
 * dimension"). */
static bool piece_is_dim(const af_graph *g, int v, int x, int64_t k) {
    if (const_i64(g, v) == 0) return true;
    const af_node *u = producer(g, v);
    if (!u || u->op != AF_OP_UNSQUEEZE || u->n_inputs < 1) return false;
    const int64_t *axes;
    int n_axes = af_node_attr_ints(u, "axes", &axes);
    if (!(n_axes == 1 && axes[0] == 0) && !(n_axes < 0 && u->n_inputs > 1 && const_i64(g, u->inputs[1]) == 0))
        return false;
    const af_node *ga = producer(g, u->inputs[0]);
    if (!ga || ga->op != AF_OP_GATHER || ga->n_inputs < 2 || af_node_attr_int(ga, "axis", 0) != 0 ||
        const_i64(g, ga->inputs[1]) != k)
        return false;
    const af_node *sh = producer(g, ga->inputs[0]);
    return sh && sh->op == AF_OP_SHAPE && sh->n_inputs == 1 && sh->inputs[0] == x && sh->n_attrs == 0;
}

/* A head split whose target shape is computed at run time: Concat(dim 0 of x, dim 1 of x, H, D).
 * Returns whether it is that form, with H and D. */
static bool runtime_head_split(const af_graph *g, const af_node *r, int64_t *heads, int64_t *head_dim) {
    const af_node *cat = r->n_inputs > 1 ? producer(g, r->inputs[1]) : NULL;
    if (!cat || cat->op != AF_OP_CONCAT || cat->n_inputs != 4 || af_node_attr_int(cat, "axis", 0) != 0 ||
        af_node_attr_int(r, "allowzero", 0) != 0)
        return false;
    *heads = const_i64(g, cat->inputs[2]);
    *head_dim = const_i64(g, cat->inputs[3]);
    return *heads > 0 && *head_dim > 0 && piece_is_dim(g, cat->inputs[0], r->inputs[0], 0) &&
           piece_is_dim(g, cat->inputs[1], r->inputs[0], 1);
}

/* Follows Transpose(perm) <- Reshape [B,S,H,D] back to the projection value; -1 if the form differs.
 * The Reshape must only split the last axis of a float [B,S,H*D] projection (as far as static shapes
 * tell): the kernel reads the projection in that layout, whatever the graph's Reshape does. */
static int projection(const af_graph *g, const af_fusion_candidate *c, int v, const int64_t *perm, int64_t *heads,
                      int64_t *head_dim) {
    const af_node *t = af_group_producer(g, c, v);
    if (!perm_is(t, 4, perm)) return -1;
    const af_node *r = af_group_producer(g, c, t->inputs[0]);
    if (!r || r->op != AF_OP_RESHAPE || r->inputs[0] < 0) return -1;
    const af_tensor *rs = &g->values[r->outputs[0]].t, *src = &g->values[r->inputs[0]].t;
    if (src->rank != 3 || src->dtype != AF_DTYPE_FLOAT) return -1; /* from inside: see inner_projection */
    /* With a constant target the Reshape's dims are what inference says (a 0 copies x's dim, so an
     * unknown one there is x's); with a target computed at run time only known dims prove that it
     * keeps x's first two (partial folding may know H and D and not them: then the form must). */
    const bool target_const = r->n_inputs > 1 && r->inputs[1] >= 0 && g->values[r->inputs[1]].kind == AF_VALUE_CONST;
    bool first_two_known = true;
    for (int d = 0; d < 2 && rs->rank == 4; d++) first_two_known &= rs->dims[d] >= 0 && src->dims[d] >= 0;
    if (rs->rank == 4 && rs->dims[2] > 0 && rs->dims[3] > 0 && (target_const || first_two_known)) {
        if (src->dims[2] >= 0 && rs->dims[2] * rs->dims[3] != src->dims[2]) return -1;
        for (int d = 0; d < 2; d++) /* dims unknown until run time (dynamic shapes) pass */
            if (rs->dims[d] >= 0 && src->dims[d] >= 0 && rs->dims[d] != src->dims[d]) return -1;
        *heads = rs->dims[2];
        *head_dim = rs->dims[3];
        return r->inputs[0];
    }
    /* A dynamic batch or sequence: the target shape is computed at run time, and only its form
     * proves the split keeps x's first two dims; H x D must be x's static last dim. */
    if (rs->rank >= 0 && rs->rank != 4) return -1;
    if (!runtime_head_split(g, r, heads, head_dim) || src->dims[2] != *heads * *head_dim) return -1;
    return r->inputs[0];
}

/* A projection made inside the group: v = Add(MatMul(x, W), b), the Add's inputs in either order,
 * W a constant float [K, N] matrix and b a constant of N floats, N = the projection's last dim. */
typedef struct inner_proj {
    int x, w, b; /* value ids */
    const float *wd, *bd;
    int64_t k, n;
} inner_proj;

static bool inner_projection(const af_graph *g, const af_fusion_candidate *c, int v, inner_proj *p) {
    const af_node *add = af_group_producer(g, c, v);
    if (!add || add->op != AF_OP_ADD || add->n_inputs != 2) return false;
    for (int i = 0; i < 2; i++) {
        const af_node *mm = af_group_producer(g, c, add->inputs[i]);
        const af_value *w = mm && mm->op == AF_OP_MAT_MUL && mm->n_inputs == 2 ? af_graph_const_value(g, mm->inputs[1])
                                                                               : NULL;
        const af_value *b = af_graph_const_value(g, add->inputs[1 - i]);
        if (!w || !b || af_group_producer(g, c, mm->inputs[0])) continue;
        const af_tensor *wt = &w->t, *bt = &b->t, *xt = &g->values[mm->inputs[0]].t;
        if (wt->dtype != AF_DTYPE_FLOAT || wt->rank != 2 || !wt->data || bt->dtype != AF_DTYPE_FLOAT || !bt->data ||
            af_tensor_numel(bt) != wt->dims[1] || bt->dims[bt->rank > 0 ? bt->rank - 1 : 0] != wt->dims[1] ||
            xt->dtype != AF_DTYPE_FLOAT || xt->rank != 3 || xt->dims[2] != wt->dims[0] || wt->dims[0] <= 0)
            continue;
        *p = (inner_proj){.x = mm->inputs[0], .w = mm->inputs[1], .b = add->inputs[1 - i], .wd = wt->data,
                          .bd = bt->data, .k = wt->dims[0], .n = wt->dims[1]};
        return true;
    }
    return false;
}

/* Packs [Wq Wk Wv] as one operand for rows_hint rows and concatenates the biases. */
static bool pack_qkv(const inner_proj p[3], af_isa isa, int64_t rows_hint, attention_state *st) {
    const int64_t K = p[0].k, N = p[0].n, N3 = 3 * N;
    float *w = af_malloc((size_t)(K * N3) * sizeof *w);
    st->qkv_b = af_malloc((size_t)N3 * sizeof *st->qkv_b);
    bool ok = w && st->qkv_b;
    for (int i = 0; ok && i < 3; i++) {
        for (int64_t r = 0; r < K; r++) memcpy(w + r * N3 + i * N, p[i].wd + r * N, (size_t)N * sizeof *w);
        memcpy(st->qkv_b + i * N, p[i].bd, (size_t)N * sizeof *w);
    }
    ok = ok && af_gemm_pack_b_for_rows(isa, rows_hint, 1, K, N3, w, N3, false, 0, &st->qkv_w) == AF_OK;
    af_free(w);
    st->qkv_k = K;
    return ok;
}

/* The projections' GEMM for `rows` rows of X: [rows, K] by [Wq Wk Wv] into [rows, 3 H D]. */
static af_gemm_desc projection_desc(const attention_state *s, int64_t rows) {
    af_gemm_desc d = af_gemm_desc_default();
    d.isa = s->isa;
    d.M = rows;
    d.K = s->qkv_k;
    d.N = 3 * s->heads * s->head_dim;
    d.lda = d.K;
    d.ldc = d.N;
    d.packed_b = s->qkv_w;
    return d;
}

/* Bytes of Q, K and V for `rows` rows, at the front of the step's scratch. */
static size_t qkv_bytes(const attention_state *s, int64_t rows) {
    return round64((size_t)(rows * 3 * s->heads * s->head_dim) * sizeof(float));
}

/* d (sizes set) reads Q, K and V from the projections' [B, S, 3 H D] rows, or [S, B, 3 H D] ones
 * (seq_first: ctx written as [S, B, H D] too). */
static void qkv_layout(const attention_state *s, af_attention_desc *d) {
    const int64_t hd = d->heads * d->head_dim;
    if (s->seq_first) {
        d->q_row_stride = d->k_row_stride = d->v_row_stride = d->batch * 3 * hd;
        d->q_batch_stride = d->k_batch_stride = d->v_batch_stride = 3 * hd;
        d->out_row_stride = d->batch * hd;
        d->out_batch_stride = hd;
        return;
    }
    d->q_row_stride = d->k_row_stride = d->v_row_stride = 3 * hd;
    d->q_batch_stride = d->k_batch_stride = d->v_batch_stride = d->seq_q * 3 * hd;
}

/* Scratch of the projections' step for an input of `rows` rows: Q, K, V, then the GEMM's or the
 * attention kernel's scratch (one after the other, so they share it). */
static size_t qkv_scratch(const attention_state *s, const af_attention_desc *d, int64_t rows, int n_threads) {
    const af_gemm_desc g = projection_desc(s, rows);
    const size_t gemm = af_sgemm_workspace_size(&g, n_threads), attn = af_attention_workspace_size(d, n_threads);
    return qkv_bytes(s, rows) + (gemm > attn ? gemm : attn);
}

/* The GEMM of X [B, S, K] by [Wq Wk Wv] + bias into qkv; ws is the GEMM's scratch. */
static af_status run_projections(const attention_state *s, const af_tensor *x, float *qkv, void *ws, size_t ws_size,
                                 af_threadpool *pool) {
    af_gemm_desc d = projection_desc(s, x->dims[0] * x->dims[1]);
    d.A = x->data;
    d.C = qkv;
    af_epilogue e;
    af_epilogue_init(&e);
    af_status st = af_epilogue_vec(&e, AF_EPI_BIAS_COL, s->qkv_b, NULL);
    if (st != AF_OK) return st;
    d.epilogue = &e;
    if (af_sgemm_workspace_size(&d, af_threadpool_n_threads(pool)) <= ws_size) {
        d.workspace = ws;
        d.workspace_size = ws_size;
    }
    return af_sgemm(&d, pool);
}

static af_status attention_run(const af_kernel *k, af_op_ctx *c, const af_epilogue *epi, af_threadpool *pool,
                               void *workspace) {
    (void)epi;
    const attention_state *s = k->state;
    const int64_t hd = s->heads * s->head_dim;
    const af_tensor *x = s->qkv_w ? af_ctx_input(c, 0) : NULL;
    const af_tensor *mask = s->has_mask ? af_ctx_input(c, s->qkv_w ? 1 : 3) : NULL;
    af_tensor *out = af_ctx_output(c, 0);
    af_attention_desc d;
    if (x) { /* Q, K, V from the step's own GEMM: [B, S, 3 H D] rows in the scratch */
        if (x->rank != 3 || x->dims[2] != s->qkv_k || af_tensor_numel(out) != x->dims[0] * x->dims[1] * hd)
            return af_ctx_fail(c, AF_ERR_RUNTIME, "attention input does not have the planned [B, S, %lld] layout",
                               (long long)s->qkv_k);
        const int64_t batch = x->dims[s->seq_first ? 1 : 0], seq = x->dims[s->seq_first ? 0 : 1];
        d = af_attention_desc_packed(batch, seq, seq, s->heads, s->head_dim);
        qkv_layout(s, &d);
    } else {
        const af_tensor *q = af_ctx_input(c, 0), *kt = af_ctx_input(c, 1), *v = af_ctx_input(c, 2);
        if (q->rank != 3 || q->dims[2] != hd || !af_tensor_same_shape(q, kt) || !af_tensor_same_shape(q, v) ||
            af_tensor_numel(out) != af_tensor_numel(q))
            return af_ctx_fail(c, AF_ERR_RUNTIME, "attention inputs do not have the planned [B, S, %lld] layout",
                               (long long)hd);
        d = af_attention_desc_packed(q->dims[0], q->dims[1], kt->dims[1], s->heads, s->head_dim);
        d.q = q->data;
        d.k = kt->data;
        d.v = v->data;
    }
    d.out = out->data;
    d.scale = s->scale;
    d.isa = s->isa;
    if (mask) { /* [B,1,1,S] or [B,1,S,S]; a batch dim of 1 broadcasts */
        if (mask->dtype != AF_DTYPE_FLOAT || mask->rank != 4 || mask->dims[1] != 1 || mask->dims[3] != d.seq_k ||
            (mask->dims[2] != 1 && mask->dims[2] != d.seq_q) || (mask->dims[0] != 1 && mask->dims[0] != d.batch))
            return af_ctx_fail(c, AF_ERR_RUNTIME, "attention mask shape is not [B,1,1,S] or [B,1,S,S]");
        d.mask = mask->data;
        d.mask_row_stride = mask->dims[2] == 1 ? 0 : d.seq_k;
        d.mask_batch_stride = mask->dims[0] == 1 ? 0 : mask->dims[2] * d.seq_k;
        d.mask_head_stride = 0;
    }
    const int n_threads = af_threadpool_n_threads(pool);
    /* After the isa: the attention kernel's scratch depends on its tile. */
    const size_t need =
        x ? qkv_scratch(s, &d, d.batch * d.seq_q, n_threads) : af_attention_workspace_size(&d, n_threads);
    void *own = NULL; /* a sequence longer than planned (dynamic shapes) pays for its own scratch */
    if (need > k->workspace_bytes && !(own = af_malloc_aligned(need)))
        return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory for attention scratch");
    char *ws = own ? own : workspace;
    size_t ws_size = own ? need : k->workspace_bytes;
    if (x) {
        float *qkv = (float *)ws;
        const size_t head = qkv_bytes(s, d.batch * d.seq_q);
        d.q = qkv + s->qkv_off[0];
        d.k = qkv + s->qkv_off[1];
        d.v = qkv + s->qkv_off[2];
        ws += head;
        ws_size -= head;
        af_status st = run_projections(s, x, qkv, ws, ws_size, pool);
        if (st != AF_OK) {
            af_free_aligned(own);
            return af_ctx_fail(c, st, "attention projections failed");
        }
    }
    d.workspace = ws;
    d.workspace_size = ws_size;
    af_status st = AF_OK;
    if (s->bias) { /* each image's windows with the [windows, H, S, S] bias */
        if (d.batch % s->windows != 0) {
            af_free_aligned(own);
            return af_ctx_fail(c, AF_ERR_RUNTIME, "attention batch %lld is not a whole number of %lld windows",
                               (long long)d.batch, (long long)s->windows);
        }
        af_attention_desc w = d;
        w.batch = s->windows;
        w.mask = s->bias;
        w.mask_row_stride = d.seq_k;
        w.mask_head_stride = d.seq_q * d.seq_k;
        w.mask_batch_stride = s->windows > 1 ? s->heads * d.seq_q * d.seq_k : 0;
        for (int64_t i = 0; i < d.batch / s->windows && st == AF_OK; i++) {
            w.q = d.q + i * s->windows * d.q_batch_stride;
            w.k = d.k + i * s->windows * d.k_batch_stride;
            w.v = d.v + i * s->windows * d.v_batch_stride;
            w.out = d.out + i * s->windows * d.out_batch_stride;
            st = af_attention_run(&w, pool);
        }
    } else {
        st = af_attention_run(&d, pool);
    }
    af_free_aligned(own);
    return st == AF_OK ? AF_OK : af_ctx_fail(c, st, "fused attention failed");
}

/* The builder's refusal: why, and false. */
static bool refuse(char *why, size_t why_size, const char *reason) {
    snprintf(why, why_size, "%s", reason);
    return false;
}

/* nn.MultiheadAttention's form (see the top of this file), read from the group. */
typedef struct mha_form {
    inner_proj p;         /* X [S, B, E] by W [E, 3E] + b */
    int64_t heads, head_dim;
    int64_t off[3];       /* where Q, K and V start in a row of X W + b */
    float scale;          /* Q's Div or Mul */
} mha_form;

/* One of Q, K and V: Transpose(perm) <- Reshape [S, B*H, D] <- a step-1 Slice of the last axis of
 * the static [S, B, 3E] projection, E = H D wide. Sets the projection's value, the slice's start,
 * H and D. */
static bool mha_head(const af_graph *g, const af_fusion_candidate *c, int v, const int64_t *perm, int *proj,
                     int64_t *off, int64_t *heads, int64_t *head_dim) {
    const af_node *t = af_group_producer(g, c, v);
    if (!perm_is(t, 3, perm)) return false;
    const af_node *r = af_group_producer(g, c, t->inputs[0]);
    const af_node *sl = r && r->op == AF_OP_RESHAPE ? af_group_producer(g, c, r->inputs[0]) : NULL;
    if (!sl || sl->op != AF_OP_SLICE || sl->n_inputs < 3 || sl->n_inputs > 5 || sl->inputs[0] < 0) return false;
    /* S and 3E static; the batch B may be symbolic (a dynamic-batch export), as may then B H. */
    const af_tensor *xt = &g->values[sl->inputs[0]].t, *rt = &g->values[r->outputs[0]].t;
    if (xt->rank != 3 || rt->rank != 3 || xt->dims[0] < 1 || xt->dims[2] < 1 || rt->dims[0] < 1 || rt->dims[2] < 1 ||
        (xt->dims[1] >= 0) != (rt->dims[1] >= 0))
        return false;
    const af_tensor *ins[5] = {NULL};
    for (int k = 0; k < sl->n_inputs; k++) ins[k] = sl->inputs[k] >= 0 ? &g->values[sl->inputs[k]].t : NULL;
    af_op_ctx ctx = {.node = sl, .graph = g, .opset = g->opset, .n_inputs = sl->n_inputs, .inputs = ins};
    af_movement_slice sp;
    if (!af_movement_slice_known(&ctx) || af_movement_slice_params(&ctx, xt, &sp) != AF_OK) return false;
    for (int d = 0; d < 2; d++)
        if (sp.start[d] != 0 || sp.len[d] != xt->dims[d] || (sp.step[d] != 1 && xt->dims[d] > 1)) return false;
    const int64_t S = xt->dims[0], B = xt->dims[1], E = sp.len[2], D = rt->dims[2];
    if (sp.step[2] != 1 || E <= 0 || rt->dims[0] != S || E % D != 0) return false;
    /* [S, B, E] -> [S, B H, D] splits each row's E into H rows of D: with S and D fixed, the
     * element count makes the middle dim B E / D whatever B is. */
    if (B >= 0 && (B == 0 || rt->dims[1] != B * (E / D))) return false;
    *proj = sl->inputs[0];
    *off = sp.start[2];
    *heads = E / D;
    *head_dim = D;
    return true;
}

/* Whether Q.K^T (qk) and P.V (pv) read nn.MultiheadAttention's form; its parts in *f. */
static bool mha_packed(const af_graph *g, const af_fusion_candidate *c, const af_node *qk, const af_node *pv,
                       mha_form *f) {
    static const int64_t to_heads[3] = {1, 0, 2}, to_keys[3] = {1, 2, 0};
    const af_node *sc = af_group_producer(g, c, qk->inputs[0]);
    if (!sc || (sc->op != AF_OP_DIV && sc->op != AF_OP_MUL) || sc->n_inputs != 2 || !scalar_const(g, sc->inputs[1]))
        return false;
    const float k = *scalar_const(g, sc->inputs[1]);
    f->scale = sc->op == AF_OP_DIV ? 1.0f / k : k;
    int proj[3];
    int64_t h[3], d[3];
    if (!mha_head(g, c, sc->inputs[0], to_heads, &proj[0], &f->off[0], &h[0], &d[0]) ||
        !mha_head(g, c, qk->inputs[1], to_keys, &proj[1], &f->off[1], &h[1], &d[1]) ||
        !mha_head(g, c, pv->inputs[1], to_heads, &proj[2], &f->off[2], &h[2], &d[2]))
        return false;
    for (int i = 1; i < 3; i++)
        if (proj[i] != proj[0] || h[i] != h[0] || d[i] != d[0]) return false;
    if (!inner_projection(g, c, proj[0], &f->p) || f->p.n != 3 * h[0] * d[0]) return false;
    for (int i = 0; i < 3; i++)
        if (f->off[i] + h[0] * d[0] > f->p.n) return false;
    f->heads = h[0];
    f->head_dim = d[0];
    return true;
}

/* Fills step s with the packed projection's GEMM and the attention kernel: st holds the packed
 * W of projection p, kn is the step's node; the kernel runs `batch` sequences of `seq` at a time,
 * its scratch planned for `rows` rows of X; extra_bytes are st's other constants. */
static void packed_step(af_step *s, attention_state *st, af_node *kn, const inner_proj *p, int64_t batch, int64_t seq,
                        int64_t rows, const af_sched_options *o, size_t extra_bytes) {
    s->kernel_node = kn;
    af_attention_desc d = af_attention_desc_packed(batch, seq, seq, st->heads, st->head_dim);
    d.isa = o->kernels.isa;
    qkv_layout(st, &d);
    const int n_threads = o->kernels.n_threads > 0 ? o->kernels.n_threads : 1;
    s->kernel = (af_kernel){.name = af_attention_qkv_name(&d),
                            .state = st,
                            .run = attention_run,
                            .free_state = attention_free,
                            .workspace_bytes = qkv_scratch(st, &d, rows, n_threads),
                            .weight_bytes = af_gemm_packed_bytes(st->qkv_w) + (size_t)p->n * sizeof(float) + extra_bytes};
    af_step_hold(s, p->w);
    af_step_hold(s, p->b);
}

/* The fused step of nn.MultiheadAttention's form (mha_packed): the packed projection's GEMM into
 * the scratch, then the attention kernel over its [S, B, 3E] rows. */
static bool build_mha(const af_graph *g, const af_fusion_candidate *c, const af_sched_options *o, af_step *s,
                      const af_node *sm, const af_node *pv, const mha_form *f, char *why, size_t why_size) {
    static const int64_t to_tokens[3] = {1, 0, 2};
    const af_node *t = af_group_consumer(g, c, pv->outputs[0]);
    const af_node *r = perm_is(t, 3, to_tokens) ? af_group_consumer(g, c, t->outputs[0]) : NULL;
    const bool ends = perm_is(t, 3, to_tokens) && (r ? r->op == AF_OP_RESHAPE && r->outputs[0] == c->output
                                                   : t->outputs[0] == c->output);
    const af_tensor *xt = &g->values[f->p.x].t, *yt = &g->values[c->output].t;
    /* B may be symbolic: the kernel takes it from its input per run; plans (the packed projection's
     * row hint, the scratch) are for one image, a larger batch pays for its own scratch. */
    const int64_t S = xt->dims[0], B = xt->dims[1] >= 0 ? xt->dims[1] : 1, E = f->heads * f->head_dim;
    const bool merged = af_tensor_shape_known(xt) ? af_tensor_numel(yt) == S * B * E
                                                  : xt->dims[0] > 0 && yt->rank >= 1 && yt->dims[yt->rank - 1] == E;
    if (!ends || xt->rank != 3 || !merged) {
        snprintf(why, why_size, "the group does not end at the heads merged to [S, B, E]");
        return false;
    }
    /* MatMul, Add, three Slices, Reshapes and Transposes, the scale, Q.K^T, Softmax, P.V, the
     * merging Transpose and Reshape: nothing else. */
    if (c->n_nodes != 16 + (r != NULL))
        return refuse(why, why_size, "the group holds nodes besides the self-attention block");
    attention_state *st = af_calloc(1, sizeof *st);
    if (!st) return refuse(why, why_size, "out of memory");
    *st = (attention_state){.isa = o->kernels.isa, .heads = f->heads, .head_dim = f->head_dim, .scale = f->scale,
                            .n_threads = o->kernels.n_threads, .qkv_k = f->p.k,
                            .qkv_off = {f->off[0], f->off[1], f->off[2]}, .seq_first = true};
    st->qkv_b = af_malloc((size_t)f->p.n * sizeof *st->qkv_b);
    if (st->qkv_b) memcpy(st->qkv_b, f->p.bd, (size_t)f->p.n * sizeof *st->qkv_b);
    const int ins[1] = {f->p.x};
    af_node *kn = NULL;
    if (!st->qkv_b ||
        af_gemm_pack_b_for_rows(o->kernels.isa, S * B, 1, f->p.k, f->p.n, f->p.wd, f->p.n, false, 0, &st->qkv_w) !=
            AF_OK ||
        !(kn = af_sched_kernel_node(sm, "Softmax", ins, 1, c->output))) {
        attention_free(st);
        snprintf(why, why_size, "out of memory packing the projection");
        return false;
    }
    packed_step(s, st, kn, &f->p, B, S, B * S, o, 0);
    return true;
}

/* The group's node producing v when it is op `op` (any op: AF_OP_COUNT); else NULL. */
static const af_node *made_by(const af_graph *g, const af_fusion_candidate *c, int v, af_op op) {
    const af_node *n = af_group_producer(g, c, v);
    return n && (op == AF_OP_COUNT || n->op == op) ? n : NULL;
}

/* Swin's window attention (see the rule swin_window_attention), read from the group. */
typedef struct window_form {
    inner_proj p;                /* X [B nW, S, C] by W [C, 3C] + b */
    int64_t heads, head_dim, seq, windows;
    float scale;
    const float *rel;            /* [H, S, S] */
    const float *mask;           /* [nW, S, S] for shifted windows, else NULL */
    int n_nodes;                 /* the form's nodes */
} window_form;

/* Gather `index` along axis 0 of the heads Transpose's output; its source in *heads_out. */
static bool take(const af_graph *g, const af_fusion_candidate *c, int v, int64_t index, int *heads_out) {
    const af_node *n = made_by(g, c, v, AF_OP_GATHER);
    if (!n || n->n_inputs != 2 || af_node_attr_int(n, "axis", 0) != 0 || const_i64(g, n->inputs[1]) != index) return false;
    const af_value *iv = af_graph_const_value(g, n->inputs[1]);
    if (!iv || iv->t.rank != 0) return false; /* a scalar index drops the axis */
    *heads_out = n->inputs[0];
    return true;
}

/* Softmax sm's input back to Q.K^T, then Q, K and V to the packed projection (torchvision's
 * shifted_window_attention): qkv = X W + b, Reshape [B nW, S, 3, H, D], Transpose (2, 0, 3, 1, 4),
 * q, k, v = Gather 0, 1, 2; Q.K^T of Q scaled and K transposed (0, 1, 3, 2); + the relative
 * position bias [1, H, S, S]; for shifted windows Reshape [B, nW, H, S, S], + the mask
 * [1, nW, 1, S, S], Reshape back; Softmax; optionally Dropout; .V; Transpose (0, 2, 1, 3) and
 * optionally the Reshape to [B nW, S, C]. */
static bool window_attention(const af_graph *g, const af_fusion_candidate *c, const af_node *sm, window_form *f) {
    static const int64_t split_heads[5] = {2, 0, 3, 1, 4}, keys_t[4] = {0, 1, 3, 2}, merge_perm[4] = {0, 2, 1, 3};
    memset(f, 0, sizeof *f);
    int v = sm->inputs[0], n = 1;
    const af_node *by_head = made_by(g, c, v, AF_OP_RESHAPE), *win_mask = NULL, *by_window = NULL;
    int mask_in = -1; /* the mask's input slot of win_mask */
    if (by_head) {
        win_mask = made_by(g, c, by_head->inputs[0], AF_OP_ADD);
        if (!win_mask || win_mask->n_inputs != 2) return false;
        mask_in = af_group_producer(g, c, win_mask->inputs[0]) ? 1 : 0;
        by_window = made_by(g, c, win_mask->inputs[1 - mask_in], AF_OP_RESHAPE);
        if (!by_window || af_group_producer(g, c, win_mask->inputs[mask_in])) return false;
        v = by_window->inputs[0];
        n += 3;
    }
    const af_node *rel = made_by(g, c, v, AF_OP_ADD);
    if (!rel || rel->n_inputs != 2) return false;
    const int rs = af_group_producer(g, c, rel->inputs[0]) ? 0 : 1; /* the scores' side */
    const af_node *qk = made_by(g, c, rel->inputs[rs], AF_OP_MAT_MUL);
    const af_node *qs = qk ? made_by(g, c, qk->inputs[0], AF_OP_COUNT) : NULL;
    const af_node *kt = qk ? made_by(g, c, qk->inputs[1], AF_OP_TRANSPOSE) : NULL;
    if (!qk || !qs || (qs->op != AF_OP_MUL && qs->op != AF_OP_DIV) || !scalar_const(g, qs->inputs[1]) ||
        !perm_is(kt, 4, keys_t))
        return false;
    const float k = *scalar_const(g, qs->inputs[1]);
    f->scale = qs->op == AF_OP_DIV ? 1.0f / k : k;
    /* P.V, through an optional Dropout (the identity at inference, its mask unread). */
    const af_node *pv = af_group_consumer(g, c, sm->outputs[0]), *drop = NULL;
    if (pv && pv->op == AF_OP_DROPOUT) {
        drop = pv;
        for (int i = 1; i < drop->n_outputs; i++)
            if (drop->outputs[i] >= 0) return false;
        pv = af_group_consumer(g, c, drop->outputs[0]);
    }
    if (!pv || pv->op != AF_OP_MAT_MUL || pv->inputs[0] != (drop ? drop->outputs[0] : sm->outputs[0])) return false;
    int hq = -1, hk = -1, hv = -1;
    if (!take(g, c, qs->inputs[0], 0, &hq) || !take(g, c, kt->inputs[0], 1, &hk) || !take(g, c, pv->inputs[1], 2, &hv) ||
        hk != hq || hv != hq)
        return false;
    const af_node *heads = made_by(g, c, hq, AF_OP_TRANSPOSE);
    const af_node *split = heads && perm_is(heads, 5, split_heads) ? made_by(g, c, heads->inputs[0], AF_OP_RESHAPE)
                                                                      : NULL;
    if (!split || !inner_projection(g, c, split->inputs[0], &f->p)) return false;
    /* Static shapes: X [B nW, S, C], the split [B nW, S, 3, H, D] with H D = C, W [C, 3C]. */
    const af_tensor *xt = &g->values[f->p.x].t, *st = &g->values[split->outputs[0]].t;
    if (!af_tensor_shape_known(xt) || !af_tensor_shape_known(st) || st->rank != 5 || st->dims[0] != xt->dims[0] ||
        st->dims[1] != xt->dims[1] || st->dims[2] != 3 || st->dims[3] * st->dims[4] != f->p.k || f->p.n != 3 * f->p.k ||
        st->dims[3] < 1 || st->dims[4] < 1 || xt->dims[1] < 1)
        return false;
    f->heads = st->dims[3];
    f->head_dim = st->dims[4];
    f->seq = xt->dims[1];
    const int64_t H = f->heads, S = f->seq, bw = xt->dims[0];
    /* The bias [1, H, S, S] (or [H, S, S]) on the scores [B nW, H, S, S]. */
    const af_tensor *scores = &g->values[qk->outputs[0]].t, *rt = &g->values[rel->inputs[1 - rs]].t;
    const int64_t want_scores[4] = {bw, H, S, S};
    if (scores->rank != 4 || memcmp(scores->dims, want_scores, sizeof want_scores) != 0 || rt->rank < 3 ||
        rt->dims[rt->rank - 3] != H || !(f->rel = af_sched_const_floats(g, rel->inputs[1 - rs], H * S * S)))
        return false;
    f->windows = 1;
    if (by_head) { /* [B, nW, H, S, S] + the mask [1, nW, 1, S, S] (or [nW, 1, S, S]), back to [B nW, H, S, S] */
        const af_tensor *wt = &g->values[by_window->outputs[0]].t, *mt = &g->values[win_mask->inputs[mask_in]].t;
        const af_tensor *ht = &g->values[by_head->outputs[0]].t;
        if (wt->rank != 5 || !af_tensor_shape_known(wt) || wt->dims[2] != H || wt->dims[3] != S || wt->dims[4] != S ||
            wt->dims[1] < 1 || wt->dims[0] * wt->dims[1] != bw || ht->rank != 4 ||
            memcmp(ht->dims, want_scores, sizeof want_scores) != 0 || mt->rank < 4 || mt->rank > 5 ||
            mt->dims[mt->rank - 4] != wt->dims[1] || mt->dims[mt->rank - 3] != 1 || (mt->rank == 5 && mt->dims[0] != 1))
            return false;
        f->windows = wt->dims[1];
        if (!(f->mask = af_sched_const_floats(g, win_mask->inputs[mask_in], f->windows * S * S))) return false;
    }
    /* ctx [B nW, H, S, D] -> Transpose (0, 2, 1, 3) [-> Reshape [B nW, S, C]]: the group's output. */
    const af_node *t = af_group_consumer(g, c, pv->outputs[0]);
    const af_node *r = perm_is(t, 4, merge_perm) ? af_group_consumer(g, c, t->outputs[0]) : NULL;
    if (!perm_is(t, 4, merge_perm) ||
        !(r ? r->op == AF_OP_RESHAPE && r->outputs[0] == c->output : t->outputs[0] == c->output))
        return false;
    const af_tensor *yt = &g->values[c->output].t;
    if (!af_tensor_shape_known(yt) || af_tensor_numel(yt) != bw * S * f->p.k) return false;
    /* X W, + b, split, heads, 3 Gathers, scale, K^T, Q.K^T, + bias, Softmax, P.V, merge. */
    f->n_nodes = 14 + n - 1 + (drop != NULL) + (r != NULL);
    return true;
}

/* The fused step of Swin's window attention (window_attention): the packed projection's GEMM
 * into the scratch, then the attention kernel over each image's windows, with the bias and mask
 * added up once here. */
static bool build_window(const af_graph *g, const af_fusion_candidate *c, const af_sched_options *o, af_step *s,
                         const af_node *sm, const window_form *f, char *why, size_t why_size) {
    if (c->n_nodes != f->n_nodes) return refuse(why, why_size, "the group holds nodes besides the window attention");
    const int64_t H = f->heads, S = f->seq, C = f->p.k, bw = g->values[f->p.x].t.dims[0];
    attention_state *st = af_calloc(1, sizeof *st);
    if (!st) return refuse(why, why_size, "out of memory");
    *st = (attention_state){.isa = o->kernels.isa, .heads = H, .head_dim = f->head_dim, .scale = f->scale,
                            .n_threads = o->kernels.n_threads, .qkv_k = C, .qkv_off = {0, C, 2 * C},
                            .windows = f->windows};
    st->qkv_b = af_malloc((size_t)f->p.n * sizeof *st->qkv_b);
    st->bias = af_malloc((size_t)(f->windows * H * S * S) * sizeof *st->bias);
    const int ins[1] = {f->p.x};
    af_node *kn = NULL;
    if (!st->qkv_b || !st->bias ||
        af_gemm_pack_b_for_rows(o->kernels.isa, bw * S, 1, C, f->p.n, f->p.wd, f->p.n, false, 0, &st->qkv_w) !=
            AF_OK ||
        !(kn = af_sched_kernel_node(sm, "Softmax", ins, 1, c->output))) {
        attention_free(st);
        return refuse(why, why_size, "out of memory packing the projection");
    }
    memcpy(st->qkv_b, f->p.bd, (size_t)f->p.n * sizeof *st->qkv_b);
    /* The graph adds the bias, then the mask: scores + (bias + mask) differs from that by a
     * rounding of the sum, and only where the mask is not zero (-100 in torchvision's). */
    for (int64_t w = 0; w < f->windows; w++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t ij = 0; ij < S * S; ij++)
                st->bias[(w * H + h) * S * S + ij] = f->rel[h * S * S + ij] + (f->mask ? f->mask[w * S * S + ij] : 0.0f);
    packed_step(s, st, kn, &f->p, f->windows, S, bw * S, o, (size_t)(f->windows * H * S * S) * sizeof(float));
    return true;
}

bool af_sched_build_attention(const af_graph *g, const af_fusion_candidate *c, const af_sched_options *o, af_step *s,
                              char *why, size_t why_size) {
    static const int64_t to_heads[4] = {0, 2, 1, 3}, to_heads_t[4] = {0, 2, 3, 1};
    const af_node *sm = c->anchor >= 0 ? &g->nodes[c->anchor] : NULL;
    int64_t axis = sm ? af_node_attr_int(sm, "axis", g->opset >= 13 ? -1 : 1) : 0;
    if (!sm || sm->op != AF_OP_SOFTMAX || !(axis == -1 || axis == 3)) {
        snprintf(why, why_size, "the anchor is not a Softmax over the last axis");
        return false;
    }
    window_form wf;
    if (window_attention(g, c, sm, &wf)) return build_window(g, c, o, s, sm, &wf, why, why_size);
    /* Softmax <- [Add mask] <- Div/Mul scale <- MatMul(q, kT), in either order of mask and scale. */
    float scale = 1.0f;
    int mask = -1, v = sm->inputs[0], n_scale = 0;
    const af_node *qk = NULL;
    for (int hops = 0; hops < 3 && !qk; hops++) {
        const af_node *n = af_group_producer(g, c, v);
        if (!n) break;
        if (n->op == AF_OP_MAT_MUL) {
            qk = n;
        } else if ((n->op == AF_OP_DIV || n->op == AF_OP_MUL) && scalar_const(g, n->inputs[1])) {
            n_scale++;
            float k = *scalar_const(g, n->inputs[1]);
            scale *= n->op == AF_OP_DIV ? 1.0f / k : k;
            v = n->inputs[0];
        } else if (n->op == AF_OP_ADD && mask < 0) {
            int a = n->inputs[0], b = n->inputs[1];
            bool a_in = af_group_producer(g, c, a) != NULL, b_in = af_group_producer(g, c, b) != NULL;
            if (a_in == b_in) break;
            mask = a_in ? b : a;
            v = a_in ? a : b;
        } else {
            break;
        }
    }
    int64_t hq = 0, dq = 0, hk = 0, dk = 0, hv = 0, dv = 0;
    int qv = qk ? projection(g, c, qk->inputs[0], to_heads, &hq, &dq) : -1;
    int kv = qk ? projection(g, c, qk->inputs[1], to_heads_t, &hk, &dk) : -1;
    const af_node *pv = af_group_consumer(g, c, sm->outputs[0]);
    int vv = pv && pv->op == AF_OP_MAT_MUL && pv->inputs[0] == sm->outputs[0]
                 ? projection(g, c, pv->inputs[1], to_heads, &hv, &dv)
                 : -1;
    mha_form mf;
    if (qk && qv < 0 && n_scale == 0 && mask < 0 && pv && pv->op == AF_OP_MAT_MUL && pv->inputs[0] == sm->outputs[0] &&
        mha_packed(g, c, qk, pv, &mf))
        return build_mha(g, c, o, s, sm, pv, &mf, why, why_size);
    /* The block ends at the merging Transpose or at the Reshape after it: either way the output
     * holds [B,S,H,D] in the [B,S,H*D] layout the kernel writes. */
    const af_node *t = pv ? af_group_consumer(g, c, pv->outputs[0]) : NULL;
    const af_node *r = perm_is(t, 4, to_heads) ? af_group_consumer(g, c, t->outputs[0]) : NULL;
    const bool ends = perm_is(t, 4, to_heads) && (r ? r->op == AF_OP_RESHAPE && r->outputs[0] == c->output
                                                   : t->outputs[0] == c->output);
    if (qv < 0 || kv < 0 || vv < 0 || !ends ||
        hq != hk || hq != hv || dq != dk || dq != dv || hq <= 0 || dq <= 0) {
        snprintf(why, why_size, "the group is not the exported self-attention form");
        return false;
    }
    if (!layouts_agree(g, qv, kv, vv, mask)) {
        snprintf(why, why_size, "Q, K and V differ in shape, or the mask is not [B,1,1,S] or [B,1,S,S]");
        return false;
    }
    /* Projections: all three outside the group, or all three inside it on one X. */
    const int n_inner = (af_group_producer(g, c, qv) != NULL) + (af_group_producer(g, c, kv) != NULL) +
                        (af_group_producer(g, c, vv) != NULL);
    inner_proj p[3];
    if (n_inner > 0 && (n_inner < 3 || !inner_projection(g, c, qv, &p[0]) || !inner_projection(g, c, kv, &p[1]) ||
                        !inner_projection(g, c, vv, &p[2]) || p[1].x != p[0].x || p[2].x != p[0].x ||
                        p[0].n != hq * dq || p[1].n != p[0].n || p[2].n != p[0].n || p[1].k != p[0].k ||
                        p[2].k != p[0].k)) {
        snprintf(why, why_size, "the Q, K and V projections are not MatMul + bias Add of one input, constant weights");
        return false;
    }
    /* Every node of the group is one of those read above: a rule of this family that holds
     * anything else would have it skipped. */
    if (c->n_nodes != 6 + 1 + n_scale + (mask >= 0) + 3 + (r != NULL) + (n_inner ? 6 : 0))
        return refuse(why, why_size, "the group holds nodes besides the self-attention block");
    attention_state *st = af_calloc(1, sizeof *st);
    if (!st) return refuse(why, why_size, "out of memory");
    *st = (attention_state){.isa = o->kernels.isa, .heads = hq, .head_dim = dq, .scale = scale, .has_mask = mask >= 0,
                            .n_threads = o->kernels.n_threads, .qkv_off = {0, hq * dq, 2 * hq * dq}};
    const af_tensor *qt = &g->values[qv].t;
    const int64_t batch = qt->dims[0] > 0 ? qt->dims[0] : 1, seq = qt->dims[1] > 0 ? qt->dims[1] : 1;
    if (n_inner && !pack_qkv(p, o->kernels.isa, qt->dims[0] > 0 && qt->dims[1] > 0 ? batch * seq : 0, st)) {
        attention_free(st);
        snprintf(why, why_size, "out of memory packing the Q, K and V weights");
        return false;
    }
    /* The kernel's own node: the values it reads, standing in for the group. */
    int ins[4] = {qv, kv, vv, mask};
    if (n_inner) ins[0] = p[0].x, ins[1] = mask;
    const int n_ins = n_inner ? 1 + (mask >= 0) : 3 + (mask >= 0);
    af_node *kn = af_sched_kernel_node(sm, "Softmax", ins, n_ins, c->output);
    if (!kn) {
        attention_free(st);
        snprintf(why, why_size, "out of memory");
        return false;
    }
    s->kernel_node = kn;
    af_attention_desc d = af_attention_desc_packed(batch, seq, seq, hq, dq);
    d.isa = o->kernels.isa;
    const int n_threads = o->kernels.n_threads > 0 ? o->kernels.n_threads : 1;
    if (n_inner) qkv_layout(st, &d); /* the attention kernel's scratch reads the projections' rows */
    s->kernel = (af_kernel){.name = n_inner ? af_attention_qkv_name(&d) : af_attention_name(&d),
                            .state = st,
                            .run = attention_run,
                            .free_state = attention_free,
                            .workspace_bytes = n_inner ? qkv_scratch(st, &d, batch * seq, n_threads)
                                                       : af_attention_workspace_size(&d, n_threads)};
    if (n_inner) { /* the weights are packed and the biases copied: nothing reads them in place */
        s->kernel.weight_bytes = af_gemm_packed_bytes(st->qkv_w) + (size_t)(3 * hq * dq) * sizeof(float);
        for (int i = 0; i < 3; i++) af_step_hold(s, p[i].w), af_step_hold(s, p[i].b);
    }
    return true;
}
