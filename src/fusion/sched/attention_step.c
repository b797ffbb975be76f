/*
 * Builds the fused step of an attention_blocks group: reads the group's structure (Reshape and
 * Transpose of the Q, K and V projections, MatMul, scale, mask Add, Softmax, MatMul, Transpose,
 * Reshape, as torch exports BERT's self-attention) and runs the fused attention kernel on the
 * projections directly, so none of the layout copies or the score tensor exist.
 */
#include <stdio.h>
#include <string.h>

#include "fusion/sched/sched.h"
#include "kernels/fast/attention.h"
#include "util/alloc.h"

typedef struct attention_state {
    af_isa isa;
    int64_t heads, head_dim;
    float scale;
    bool has_mask;
    int n_threads;
} attention_state;

static bool perm_is(const af_node *t, const int64_t *want) {
    const int64_t *p;
    if (!t || t->op != AF_OP_TRANSPOSE || af_node_attr_ints(t, "perm", &p) != 4) return false;
    for (int i = 0; i < 4; i++)
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
    if (!perm_is(t, perm)) return -1;
    const af_node *r = af_group_producer(g, c, t->inputs[0]);
    if (!r || r->op != AF_OP_RESHAPE || r->inputs[0] < 0) return -1;
    const af_tensor *rs = &g->values[r->outputs[0]].t, *src = &g->values[r->inputs[0]].t;
    if (src->rank != 3 || src->dtype != AF_DTYPE_FLOAT || af_group_producer(g, c, r->inputs[0])) return -1;
    if (rs->rank == 4 && rs->dims[2] > 0 && rs->dims[3] > 0) {
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

static af_status attention_run(const af_kernel *k, af_op_ctx *c, const af_epilogue *epi, af_threadpool *pool,
                               void *workspace) {
    (void)epi;
    const attention_state *s = k->state;
    const af_tensor *q = af_ctx_input(c, 0), *kt = af_ctx_input(c, 1), *v = af_ctx_input(c, 2);
    const af_tensor *mask = s->has_mask ? af_ctx_input(c, 3) : NULL;
    af_tensor *out = af_ctx_output(c, 0);
    int64_t hd = s->heads * s->head_dim;
    if (q->rank != 3 || q->dims[2] != hd || !af_tensor_same_shape(q, kt) || !af_tensor_same_shape(q, v) ||
        af_tensor_numel(out) != af_tensor_numel(q))
        return af_ctx_fail(c, AF_ERR_RUNTIME, "attention inputs do not have the planned [B, S, %lld] layout",
                           (long long)hd);
    af_attention_desc d = af_attention_desc_packed(q->dims[0], q->dims[1], kt->dims[1], s->heads, s->head_dim);
    d.q = q->data;
    d.k = kt->data;
    d.v = v->data;
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
    size_t need = af_attention_workspace_size(&d, af_threadpool_n_threads(pool));
    void *own = NULL; /* a sequence longer than planned (dynamic shapes) pays for its own scratch */
    if (need > k->workspace_bytes && !(own = af_malloc_aligned(need)))
        return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory for attention scratch");
    d.workspace = own ? own : workspace;
    d.workspace_size = own ? need : k->workspace_bytes;
    af_status st = af_attention_run(&d, pool);
    af_free_aligned(own);
    return st == AF_OK ? AF_OK : af_ctx_fail(c, st, "fused attention failed");
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
    /* Softmax <- [Add mask] <- Div/Mul scale <- MatMul(q, kT), in either order of mask and scale. */
    float scale = 1.0f;
    int mask = -1, v = sm->inputs[0];
    const af_node *qk = NULL;
    for (int hops = 0; hops < 3 && !qk; hops++) {
        const af_node *n = af_group_producer(g, c, v);
        if (!n) break;
        if (n->op == AF_OP_MAT_MUL) {
            qk = n;
        } else if ((n->op == AF_OP_DIV || n->op == AF_OP_MUL) && scalar_const(g, n->inputs[1])) {
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
    /* The block ends at the merging Transpose or at the Reshape after it: either way the output
     * holds [B,S,H,D] in the [B,S,H*D] layout the kernel writes. */
    const af_node *t = pv ? af_group_consumer(g, c, pv->outputs[0]) : NULL;
    const af_node *r = perm_is(t, to_heads) ? af_group_consumer(g, c, t->outputs[0]) : NULL;
    const bool ends = perm_is(t, to_heads) && (r ? r->op == AF_OP_RESHAPE && r->outputs[0] == c->output
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
    attention_state *st = af_calloc(1, sizeof *st);
    /* The kernel's own node: the four values it reads, standing in for the group. */
    int ins[4] = {qv, kv, vv, mask};
    af_node *kn = st ? af_sched_kernel_node(sm, "Softmax", ins, mask >= 0 ? 4 : 3, c->output) : NULL;
    if (!kn) {
        af_free(st);
        snprintf(why, why_size, "out of memory");
        return false;
    }
    *st = (attention_state){.isa = o->isa, .heads = hq, .head_dim = dq, .scale = scale, .has_mask = mask >= 0,
                            .n_threads = o->n_threads};
    s->kernel_node = kn;
    const af_tensor *qt = &g->values[qv].t;
    af_attention_desc d = af_attention_desc_packed(qt->dims[0] > 0 ? qt->dims[0] : 1, qt->dims[1] > 0 ? qt->dims[1] : 1,
                                                   qt->dims[1] > 0 ? qt->dims[1] : 1, hq, dq);
    d.isa = o->isa;
    s->kernel = (af_kernel){.name = af_attention_name(&d), .state = st, .run = attention_run, .free_state = af_free,
                            .workspace_bytes = af_attention_workspace_size(&d, o->n_threads > 0 ? o->n_threads : 1)};
    return true;
}
