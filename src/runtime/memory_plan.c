#include "runtime/memory_plan.h"

#include <stdlib.h>
#include <string.h>

#include "ir/op_ctx.h"
#include "ir/shape/movement.h"
#include "ir/tensor.h"
#include "runtime/plan.h"
#include "util/alloc.h"
#include "util/error.h"

/* True when node n's kernels (fast, src/kernels/fast/elementwise.c, and reference,
 * src/kernels/ref/unary.c and binary.c) compute output element i from input element i alone,
 * reading it before writing y[i] and never reading it again, so y may overwrite that input. Only
 * one-to-one ops with at most two inputs: the variadic forms (Max/Min/Sum of three or more) reuse
 * their output as an accumulator and are excluded, as is everything with another access pattern. */
static bool elementwise_in_place(const af_node *n) {
    switch (n->op) {
    case AF_OP_RELU:
    case AF_OP_LEAKY_RELU:
    case AF_OP_SIGMOID:
    case AF_OP_HARD_SIGMOID:
    case AF_OP_HARD_SWISH:
    case AF_OP_SOFTPLUS:
    case AF_OP_SOFTSIGN:
    case AF_OP_TANH:
    case AF_OP_ERF:
    case AF_OP_EXP:
    case AF_OP_LOG:
    case AF_OP_SQRT:
    case AF_OP_RECIPROCAL:
    case AF_OP_NEG:
    case AF_OP_ABS:
    case AF_OP_CLIP:
    case AF_OP_ELU:
    case AF_OP_SELU:
    case AF_OP_FLOOR:
    case AF_OP_CEIL:
    case AF_OP_ROUND: return n->n_outputs == 1;
    case AF_OP_ADD:
    case AF_OP_SUB:
    case AF_OP_MUL:
    case AF_OP_DIV: return n->n_outputs == 1 && n->n_inputs == 2;
    default: return false;
    }
}

/* True when node n's output holds its input 0's bytes unchanged under another shape (Reshape,
 * Flatten, Squeeze, Unsqueeze, Identity, and a Dropout without its mask, which at inference is
 * the identity and otherwise fails): over the same slot its kernels copy nothing (they skip the
 * copy when the two pointers are equal). */
static bool shape_view(const af_node *n) {
    switch (n->op) {
    case AF_OP_DROPOUT: return n->n_inputs >= 1 && (n->n_outputs == 1 || (n->n_outputs == 2 && n->outputs[1] < 0));
    case AF_OP_RESHAPE:
    case AF_OP_FLATTEN:
    case AF_OP_SQUEEZE:
    case AF_OP_UNSQUEEZE:
    case AF_OP_IDENTITY: return n->n_outputs == 1 && n->n_inputs >= 1;
    default: return false;
    }
}

/* True when Transpose node n of graph g only moves axes of length 1 (ViT's [1, S, E] <-> [S, 1, E]
 * with a batch of one): the bytes keep their order, and the fast kernel copies nothing over the
 * same slot. */
static bool transpose_view(const af_graph *g, const af_node *n) {
    const int64_t *perm;
    if (n->op != AF_OP_TRANSPOSE || n->n_inputs != 1 || n->n_outputs != 1 || n->inputs[0] < 0) return false;
    const af_tensor *x = &g->values[n->inputs[0]].t;
    const int r = af_node_attr_ints(n, "perm", &perm);
    if (x->rank < 1 || r != x->rank || !af_tensor_shape_known(x)) return false;
    int64_t last = -1;
    for (int k = 0; k < r; k++) {
        if (perm[k] < 0 || perm[k] >= r) return false;
        if (x->dims[perm[k]] == 1) continue;
        if (perm[k] < last) return false;
        last = perm[k];
    }
    return true;
}

/* A float32 intermediate with a fully known shape: what the arena can hold. */
static bool arena_candidate(const af_graph *g, int v) {
    const af_value *val = &g->values[v];
    return val->kind == AF_VALUE_NODE && !val->is_output && val->t.dtype == AF_DTYPE_FLOAT &&
           af_tensor_shape_known(&val->t);
}

/* For step i covering node n alone: the input whose slot n's output may reuse, or -1. */
static int in_place_source(const af_graph *g, const af_lifetimes *lt, const af_node *n, int i) {
    const bool view = shape_view(n) || transpose_view(g, n);
    if ((!view && !elementwise_in_place(n)) || n->outputs[0] < 0) return -1;
    const int out = n->outputs[0];
    if (!arena_candidate(g, out)) return -1;
    if (view) {
        const int v = n->inputs[0];
        if (v < 0 || v == out || !arena_candidate(g, v) || lt->first[v] < 0 || lt->first[v] >= i || lt->last[v] != i)
            return -1;
        return af_tensor_numel(&g->values[v].t) == af_tensor_numel(&g->values[out].t) ? v : -1;
    }
    const int n_cand = n->op == AF_OP_CLIP ? 1 : n->n_inputs; /* Clip's bounds are scalars */
    for (int k = 0; k < n_cand && k < 2; k++) {
        const int v = n->inputs[k];
        if (v < 0 || v == out || !arena_candidate(g, v) || lt->first[v] < 0 || lt->first[v] >= i ||
            lt->last[v] != i)
            continue;
        if (af_tensor_same_shape(&g->values[v].t, &g->values[out].t)) return v;
    }
    return -1;
}

/* For fused step s (step i): the residual its output may be written over, or -1. */
static int residual_source(const af_graph *g, const af_lifetimes *lt, const af_step *s, int i) {
    if (s->n_residuals != 1 || !s->kernel.residual_in_place || !s->kernel.residual_in_place(&s->kernel, &s->epi))
        return -1;
    const int out = s->output, v = s->residual_value[0];
    if (v < 0 || v == out || !arena_candidate(g, out) || !arena_candidate(g, v) || lt->first[v] < 0 ||
        lt->first[v] >= i || lt->last[v] != i)
        return -1;
    /* The kernel reads its own inputs all through its run: the residual must not be one of them. */
    const af_node *kn = s->kernel_node ? s->kernel_node : &g->nodes[s->anchor];
    for (int k = 0; k < kn->n_inputs; k++)
        if (kn->inputs[k] == v) return -1;
    return af_tensor_same_shape(&g->values[v].t, &g->values[out].t) ? v : -1;
}

/* The first value of v's in-place chain (v's slot), where every value of the chain has v's
 * size; -1 otherwise. */
static int chain_start(const af_graph *g, const af_lifetimes *lt, int v) {
    const int64_t numel = af_tensor_numel(&g->values[v].t);
    while (lt->alias[v] >= 0) {
        v = lt->alias[v];
        if (!arena_candidate(g, v) || af_tensor_numel(&g->values[v].t) != numel) return -1;
    }
    return v;
}

/* For step i covering Concat node n alone: whether its inputs can live inside its output (see
 * memory_plan.h), and if so marks them in lt->within: each input's slot, the first value of its
 * in-place chain (a conv's output under the unfused Relu written over it). aliased[v]: some value
 * shares v's slot in place. */
static void concat_within(const af_graph *g, af_lifetimes *lt, const bool *aliased, const af_node *n, int i) {
    if (n->op != AF_OP_CONCAT || n->n_outputs != 1 || n->outputs[0] < 0 || n->n_inputs < 1) return;
    const int out = n->outputs[0];
    const af_tensor *y = &g->values[out].t;
    if (!arena_candidate(g, out) || lt->alias[out] >= 0 || aliased[out] || y->rank < 1) return;
    int64_t axis = af_node_attr_int(n, "axis", 0);
    if (axis < 0) axis += y->rank;
    if (axis < 0 || axis >= y->rank) return;
    for (int d = 0; d < axis; d++)
        if (y->dims[d] != 1) return;
    int64_t off = 0;
    for (int k = 0; k < n->n_inputs; k++) {
        const int v = n->inputs[k];
        if (v < 0 || v == out || !arena_candidate(g, v) || lt->first[v] < 0 || lt->first[v] >= i ||
            lt->last[v] != i || aliased[v] || off % 64 != 0)
            return;
        const int r = chain_start(g, lt, v);
        if (r < 0 || r == out || lt->within[r] >= 0 || lt->first[r] < 0) return;
        for (int j = 0; j < k; j++)
            if (n->inputs[j] == v) return;
        off += af_tensor_numel(&g->values[v].t) * 4; /* float32 (arena_candidate) */
    }
    if (off != af_tensor_numel(y) * 4) return;
    off = 0;
    for (int k = 0; k < n->n_inputs; k++) {
        const int v = n->inputs[k], r = chain_start(g, lt, v);
        lt->within[r] = out;
        lt->within_offset[r] = off;
        off += af_tensor_numel(&g->values[v].t) * 4;
    }
}

/* Whether step i's output v may lie inside its input x: both in the arena, x written before, and
 * nothing written in place over either (aliased[u]: some value shares u's slot in place). */
static bool may_lie_within(const af_graph *g, const af_lifetimes *lt, const bool *aliased, int x, int v, int i) {
    return x != v && arena_candidate(g, x) && arena_candidate(g, v) && !aliased[x] && !aliased[v] &&
           lt->alias[v] < 0 && lt->within[v] < 0 && lt->first[x] >= 0 && lt->first[x] < i;
}

/* Marks v inside x (lt->within) as the run of x at index `start` of `axis`, when every axis of x
 * before it has size 1 (the run is contiguous) and the run starts on a 64-byte boundary. */
static void run_within(const af_graph *g, af_lifetimes *lt, int x, int v, int axis, int64_t start) {
    const af_tensor *xt = &g->values[x].t;
    int64_t inner = 1;
    for (int d = 0; d < axis; d++)
        if (xt->dims[d] != 1) return;
    for (int d = axis + 1; d < xt->rank; d++) inner *= xt->dims[d];
    const int64_t off = start * inner * 4; /* float32 (arena_candidate) */
    if (off % 64 != 0) return;
    lt->within[v] = x;
    lt->within_offset[v] = off;
}

/* For step i covering Slice node n alone: whether its output is one run of its input's bytes (every
 * axis before the sliced one of size 1, step 1, every axis after it whole), starting on a 64-byte
 * boundary, and if so marks it in lt->within: the channel split of ShuffleNet's blocks. Nothing
 * may be written in place over either. */
static void slice_within(const af_graph *g, af_lifetimes *lt, const bool *aliased, const af_node *n, int i) {
    if (n->op != AF_OP_SLICE || n->n_outputs != 1 || n->outputs[0] < 0 || n->n_inputs < 3 || n->inputs[0] < 0 ||
        n->n_inputs > 5)
        return;
    const int x = n->inputs[0], v = n->outputs[0];
    const af_tensor *xt = &g->values[x].t, *vt = &g->values[v].t;
    if (!may_lie_within(g, lt, aliased, x, v, i) || xt->rank != vt->rank || xt->rank < 1) return;
    const af_tensor *ins[5]; /* data, starts, ends, axes, steps */
    for (int k = 0; k < n->n_inputs; k++) {
        const int u = n->inputs[k];
        ins[k] = u >= 0 ? &g->values[u].t : NULL;
        if (k > 0 && u >= 0 && !af_graph_const_value(g, u)) return;
    }
    af_op_ctx c = {.node = n, .graph = g, .opset = g->opset, .n_inputs = n->n_inputs, .inputs = ins};
    af_movement_slice p;
    if (!af_movement_slice_known(&c) || af_movement_slice_params(&c, xt, &p) != AF_OK) return;
    int axis = -1;
    for (int d = 0; d < xt->rank; d++) {
        if (p.len[d] != vt->dims[d]) return;
        if (p.len[d] == xt->dims[d] && p.start[d] == 0 && (p.step[d] == 1 || xt->dims[d] <= 1)) continue;
        if (axis >= 0 || p.step[d] != 1) return; /* a second sliced axis, or a stride */
        axis = d;
    }
    if (axis < 0) return; /* the whole input: a copy the executor may need apart */
    run_within(g, lt, x, v, axis, p.start[axis]);
}

/* For step i covering Gather node n alone: whether its output is one run of its input's bytes (one
 * constant index along an axis with every axis before it of size 1: Swin's q, k, v = qkv[0],
 * qkv[1], qkv[2]), starting on a 64-byte boundary, and if so marks it in lt->within, as
 * slice_within does. */
static void gather_within(const af_graph *g, af_lifetimes *lt, const bool *aliased, const af_node *n, int i) {
    if (n->op != AF_OP_GATHER || n->n_outputs != 1 || n->outputs[0] < 0 || n->n_inputs != 2 || n->inputs[0] < 0)
        return;
    const int x = n->inputs[0], v = n->outputs[0];
    const af_tensor *xt = &g->values[x].t;
    if (!may_lie_within(g, lt, aliased, x, v, i) || xt->rank < 1) return;
    const af_value *iv = af_graph_const_value(g, n->inputs[1]);
    int64_t idx;
    if (!iv || iv->t.rank > 1 || !af_graph_const_i64(g, n->inputs[1], &idx)) return;
    int64_t axis = af_node_attr_int(n, "axis", 0);
    if (axis < 0) axis += xt->rank;
    if (axis < 0 || axis >= xt->rank || xt->dims[axis] <= 0) return;
    if (idx < 0) idx += xt->dims[axis];
    if (idx < 0 || idx >= xt->dims[axis]) return;
    if (af_tensor_numel(&g->values[v].t) * xt->dims[axis] != af_tensor_numel(xt)) return;
    run_within(g, lt, x, v, (int)axis, idx);
}

/* For a step covering Concat node n alone, whose inputs could not live inside its output (they
 * are read later): whether they are a run of consecutive inputs of a later Concat that holds them
 * (concat_within), and if so marks n's output inside that Concat's output, over them. DenseNet's
 * layer k concatenates the block input and the first k - 1 layers' outputs, and the block's last
 * Concat all of them: every layer's Concat is then a view of the block's buffer and copies
 * nothing. Nothing may be written in place over n's output. */
static void concat_run_within(const af_graph *g, af_lifetimes *lt, const bool *aliased, const af_node *n) {
    if (n->op != AF_OP_CONCAT || n->n_outputs != 1 || n->outputs[0] < 0 || n->n_inputs < 1 || n->inputs[0] < 0)
        return;
    const int out = n->outputs[0], r0 = chain_start(g, lt, n->inputs[0]);
    if (r0 < 0 || lt->within[r0] < 0 || lt->within[r0] == out) return; /* not held, or held by n */
    const int y = lt->within[r0], p = g->values[y].producer;
    /* y is written after n's step, by the Concat that holds the parts: any step will do for the
     * check, which then sees to the rest (both in the arena, nothing in place over either). */
    if (!may_lie_within(g, lt, aliased, y, out, INT32_MAX) || p < 0 || g->nodes[p].op != AF_OP_CONCAT) return;
    const af_node *big = &g->nodes[p];
    const af_tensor *ot = &g->values[out].t, *yt = &g->values[y].t;
    int64_t axis = af_node_attr_int(n, "axis", 0), big_axis = af_node_attr_int(big, "axis", 0);
    if (axis < 0) axis += ot->rank;
    if (big_axis < 0) big_axis += yt->rank;
    if (ot->rank != yt->rank || axis != big_axis) return;
    int k0 = 0;
    while (k0 < big->n_inputs && big->inputs[k0] != n->inputs[0]) k0++;
    if (n->n_inputs > big->n_inputs - k0) return;
    for (int k = 0; k < n->n_inputs; k++)
        if (big->inputs[k0 + k] != n->inputs[k]) return;
    /* The parts are whole runs of y (concat_within saw to that), so n's output is their run. */
    lt->within[out] = y;
    lt->within_offset[out] = lt->within_offset[r0];
}

af_status af_lifetimes_compute(const af_graph *g, const af_exec_plan *plan, af_lifetimes *lt, af_error *err) {
    memset(lt, 0, sizeof *lt);
    int n_steps = plan ? plan->n_steps : g->n_nodes;
    lt->n_values = g->n_values;
    lt->n_steps = n_steps;
    lt->first = af_malloc((size_t)(g->n_values ? g->n_values : 1) * sizeof *lt->first);
    lt->last = af_malloc((size_t)(g->n_values ? g->n_values : 1) * sizeof *lt->last);
    lt->alias = af_malloc((size_t)(g->n_values ? g->n_values : 1) * sizeof *lt->alias);
    lt->within = af_malloc((size_t)(g->n_values ? g->n_values : 1) * sizeof *lt->within);
    lt->within_offset = af_calloc((size_t)(g->n_values ? g->n_values : 1), sizeof *lt->within_offset);
    bool *aliased = af_calloc((size_t)(g->n_values ? g->n_values : 1), sizeof *aliased);
    int *buf = af_malloc(4096 * sizeof *buf);
    if (!lt->first || !lt->last || !lt->alias || !lt->within || !lt->within_offset || !aliased || !buf) {
        af_free(buf);
        af_free(aliased);
        af_lifetimes_free(lt);
        return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory planning activations");
    }
    for (int v = 0; v < g->n_values; v++) lt->first[v] = lt->last[v] = lt->alias[v] = lt->within[v] = -1;
    for (int i = 0; i < n_steps; i++) {
        af_step one = {.anchor = i, .n_nodes = 1, .nodes = &i, .output = -1};
        const af_step *s = plan ? &plan->steps[i] : &one;
        int n = af_step_writes(g, s, buf, 4096);
        for (int k = 0; k < n; k++) lt->first[buf[k]] = i;
        n = af_step_reads(g, s, buf, 4096);
        for (int k = 0; k < n; k++) lt->last[buf[k]] = i;
    }
    for (int i = 0; i < g->n_outputs; i++) lt->last[g->outputs[i]] = n_steps;
    /* In-place candidates: unfused one-node steps (plan NULL: every node runs alone), and fused
     * steps over their residual. */
    for (int i = 0; i < n_steps; i++) {
        const af_step *s = plan ? &plan->steps[i] : NULL;
        if (s && s->output >= 0) {
            int src = residual_source(g, lt, s, i);
            if (src >= 0) lt->alias[s->output] = src;
            continue;
        }
        if (s && (s->n_nodes != 1 || s->kernel_node)) continue;
        const af_node *n = &g->nodes[s ? s->anchor : i];
        int src = in_place_source(g, lt, n, i);
        if (src >= 0) lt->alias[n->outputs[0]] = src;
    }
    for (int v = 0; v < g->n_values; v++)
        if (lt->alias[v] >= 0) aliased[lt->alias[v]] = true;
    for (int i = 0; i < n_steps; i++) {
        const af_step *s = plan ? &plan->steps[i] : NULL;
        if (s && (s->output >= 0 || s->n_nodes != 1 || s->kernel_node)) continue;
        concat_within(g, lt, aliased, &g->nodes[s ? s->anchor : i], i);
        slice_within(g, lt, aliased, &g->nodes[s ? s->anchor : i], i);
        gather_within(g, lt, aliased, &g->nodes[s ? s->anchor : i], i);
    }
    for (int i = 0; i < n_steps; i++) { /* after every Concat's own inputs are placed */
        const af_step *s = plan ? &plan->steps[i] : NULL;
        if (s && (s->output >= 0 || s->n_nodes != 1 || s->kernel_node)) continue;
        concat_run_within(g, lt, aliased, &g->nodes[s ? s->anchor : i]);
    }
    af_free(aliased);
    af_free(buf);
    return AF_OK;
}

void af_lifetimes_free(af_lifetimes *lt) {
    af_free(lt->first);
    af_free(lt->last);
    af_free(lt->alias);
    af_free(lt->within);
    af_free(lt->within_offset);
    memset(lt, 0, sizeof *lt);
}

typedef struct {
    int value;
    int first, last;
    size_t size;
} interval;

static int by_size_desc(const void *a, const void *b) {
    const interval *x = a, *y = b;
    if (x->size != y->size) return x->size < y->size ? 1 : -1;
    return x->first - y->first;
}

/* The slot value v shares (its in-place chain's first value). */
static int slot_of(const int *slot, int v) {
    while (slot[v] != v) v = slot[v];
    return v;
}

/* Whether value v lies inside another planned value's bytes (see af_lifetimes.within). */
static bool lies_within(const af_lifetimes *lt, const af_memory_plan *plan, int v) {
    return lt->within && lt->within[v] >= 0 && plan->size[v] && plan->size[lt->within[v]];
}

/* The slot holding value v: its own, or that of the value whose bytes hold it, outermost. */
static int holder_of(const af_lifetimes *lt, const af_memory_plan *plan, const int *slot, int v) {
    for (v = slot_of(slot, v); lies_within(lt, plan, v); v = slot_of(slot, lt->within[v])) {
    }
    return v;
}

/* Value v's offset once every slot is placed: its own, its slot's first value's, or that of the
 * value whose bytes hold it plus its offset there, resolved in that order. */
static int64_t resolve_offset(const af_lifetimes *lt, af_memory_plan *plan, const int *slot, int v) {
    if (plan->offset[v] >= 0) return plan->offset[v];
    if (lies_within(lt, plan, v))
        plan->offset[v] = resolve_offset(lt, plan, slot, lt->within[v]) + lt->within_offset[v];
    else if (slot[v] != v)
        plan->offset[v] = resolve_offset(lt, plan, slot, slot_of(slot, v));
    return plan->offset[v];
}

af_status af_memory_plan_build(const af_graph *g, const af_lifetimes *lt, af_memory_plan *plan, af_error *err) {
    return af_memory_plan_build_hinted(g, lt, NULL, plan, err);
}

af_status af_memory_plan_build_hinted(const af_graph *g, const af_lifetimes *lt, const size_t *hint,
                                      af_memory_plan *plan, af_error *err) {
    memset(plan, 0, sizeof *plan);
    plan->n_values = g->n_values;
    const size_t nv = (size_t)(g->n_values ? g->n_values : 1);
    plan->offset = af_malloc(nv * sizeof *plan->offset);
    plan->size = af_calloc(nv, sizeof *plan->size);
    interval *iv = af_malloc(nv * sizeof *iv);
    int *slot = af_malloc(nv * sizeof *slot);
    int *slot_last = af_malloc(nv * sizeof *slot_last);
    int *slot_first = af_malloc(nv * sizeof *slot_first);
    int64_t *step_live = af_calloc((size_t)lt->n_steps + 1, sizeof *step_live);
    int64_t *step_unshared = af_calloc((size_t)lt->n_steps + 1, sizeof *step_unshared);
    if (!plan->offset || !plan->size || !iv || !slot || !slot_last || !slot_first || !step_live || !step_unshared) {
        af_free(iv);
        af_free(slot);
        af_free(slot_last);
        af_free(slot_first);
        af_free(step_live);
        af_free(step_unshared);
        af_memory_plan_free(plan);
        return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory planning activations");
    }
    for (int v = 0; v < g->n_values; v++) {
        plan->offset[v] = -1;
        slot[v] = v;
        const af_value *val = &g->values[v];
        if (val->kind != AF_VALUE_NODE || val->is_output || lt->first[v] < 0) continue;
        int64_t numel = af_tensor_numel(&val->t);
        size_t es = af_dtype_size(val->t.dtype);
        size_t bytes;
        if (numel < 0 || es == 0) { /* dynamic: allocated while running, unless hinted */
            if (!hint || !hint[v] || hint[v] > SIZE_MAX - 64) continue;
            bytes = hint[v];
        } else if (!af_mul_size((size_t)numel, es, &bytes) || bytes > SIZE_MAX - 64) {
            continue;
        }
        bytes = (bytes + 63) & ~(size_t)63;
        plan->size[v] = bytes;
        int first = lt->first[v], last = lt->last[v] < first ? first : lt->last[v];
        slot_first[v] = first;
        slot_last[v] = last;
        for (int st = first; st <= last; st++) step_unshared[st] += (int64_t)bytes;
    }
    /* In place: a value joins its source's slot when both are planned with the same size. */
    for (int v = 0; lt->alias && v < g->n_values; v++) {
        int src = lt->alias[v];
        if (src < 0 || !plan->size[v] || plan->size[src] != plan->size[v]) continue;
        if (af_tensor_numel(&g->values[v].t) < 0 || af_tensor_numel(&g->values[src].t) < 0) continue;
        slot[v] = src;
        plan->n_inplace++;
        plan->inplace_bytes += plan->size[v];
    }
    for (int v = 0; v < g->n_values; v++) {
        if (!plan->size[v] || (slot[v] == v && !lies_within(lt, plan, v))) continue;
        int r = holder_of(lt, plan, slot, v);
        if (slot_last[v] > slot_last[r]) slot_last[r] = slot_last[v];
        if (slot_first[v] < slot_first[r]) slot_first[r] = slot_first[v];
    }
    int n = 0;
    for (int v = 0; v < g->n_values; v++) {
        if (!plan->size[v] || slot[v] != v || lies_within(lt, plan, v)) continue;
        iv[n++] = (interval){v, slot_first[v], slot_last[v], plan->size[v]};
        for (int st = slot_first[v]; st <= slot_last[v]; st++) step_live[st] += (int64_t)plan->size[v];
    }
    for (int st = 0; st <= lt->n_steps; st++) {
        if ((size_t)step_live[st] > plan->live_bound) plan->live_bound = (size_t)step_live[st];
        if ((size_t)step_unshared[st] > plan->live_bound_unshared) plan->live_bound_unshared = (size_t)step_unshared[st];
    }
    /* Greedy by decreasing size: each slot takes the lowest offset that clears every placed slot
     * overlapping it in time. */
    qsort(iv, (size_t)n, sizeof *iv, by_size_desc);
    for (int i = 0; i < n; i++) {
        size_t off = 0;
        for (bool moved = true; moved;) {
            moved = false;
            for (int j = 0; j < i; j++) {
                if (iv[j].last < iv[i].first || iv[i].last < iv[j].first) continue;
                size_t jo = (size_t)plan->offset[iv[j].value];
                if (off < jo + iv[j].size && jo < off + iv[i].size) {
                    off = jo + iv[j].size;
                    moved = true;
                }
            }
        }
        plan->offset[iv[i].value] = (int64_t)off;
        if (off + iv[i].size > plan->arena_bytes) plan->arena_bytes = off + iv[i].size;
    }
    for (int v = 0; v < g->n_values; v++)
        if (plan->size[v]) resolve_offset(lt, plan, slot, v);
    af_free(iv);
    af_free(slot);
    af_free(slot_last);
    af_free(slot_first);
    af_free(step_live);
    af_free(step_unshared);
    return AF_OK;
}

void af_memory_plan_free(af_memory_plan *plan) {
    af_free(plan->offset);
    af_free(plan->size);
    memset(plan, 0, sizeof *plan);
}
