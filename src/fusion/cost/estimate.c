/* Roofline estimates of nodes and fusion groups: flops, bytes moved, latency, peak-memory change,
 * energy, and the weighted score (formulas in docs/cost_model.md). */
#include "fusion/cost/estimate.h"

#include <math.h>
#include <string.h>

#include "ir/tensor.h"
#include "kernels/gemm/conv_winograd.h"
#include "util/alloc.h"
#include "util/error.h"

/* ---- per-graph facts ------------------------------------------------------------------------ */

/* Marks every top-level value captured by subgraph `sub` (at any depth) as read by node `at`.
 * map[k] is the top-level id of sub's parent's value k (NULL: the parent is the top graph). */
static af_status mark_captures(const af_graph *sub, const int *map, int at, int *last_use, int *stamp,
                               int *n_readers, af_error *err) {
    int *own = af_malloc((size_t)(sub->n_values ? sub->n_values : 1) * sizeof *own);
    if (!own) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory estimating fusion costs");
    for (int v = 0; v < sub->n_values; v++) {
        own[v] = -1;
        const af_value *val = &sub->values[v];
        if (val->kind != AF_VALUE_OUTER || val->outer_id < 0) continue;
        int top = map ? map[val->outer_id] : val->outer_id;
        own[v] = top;
        if (top >= 0 && last_use[top] < at) last_use[top] = at;
        if (top >= 0 && stamp[top] != at) {
            stamp[top] = at;
            n_readers[top]++;
        }
    }
    af_status st = AF_OK;
    for (int i = 0; i < sub->n_nodes && st == AF_OK; i++)
        for (int a = 0; a < sub->nodes[i].n_attrs && st == AF_OK; a++)
            if (sub->nodes[i].attrs[a].g)
                st = mark_captures(sub->nodes[i].attrs[a].g, own, at, last_use, stamp, n_readers, err);
    af_free(own);
    return st;
}

af_status af_cost_graph_init(af_cost_graph *cg, const af_graph *g, af_error *err) {
    memset(cg, 0, sizeof *cg);
    cg->g = g;
    size_t nv = (size_t)(g->n_values ? g->n_values : 1);
    cg->last_use = af_malloc(nv * sizeof *cg->last_use);
    cg->n_readers = af_calloc(nv, sizeof *cg->n_readers);
    int *stamp = af_malloc(nv * sizeof *stamp); /* the last node counted as a reader of each value */
    if (!cg->last_use || !cg->n_readers || !stamp) {
        af_free(stamp);
        af_cost_graph_free(cg);
        return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory estimating fusion costs");
    }
    for (int v = 0; v < g->n_values; v++) {
        cg->last_use[v] = g->values[v].is_output ? g->n_nodes : -1;
        stamp[v] = -1;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const af_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++) {
            int v = n->inputs[k];
            if (v < 0 || v >= g->n_values) continue;
            if (cg->last_use[v] < i) cg->last_use[v] = i;
            if (stamp[v] != i) {
                stamp[v] = i;
                cg->n_readers[v]++;
            }
        }
        for (int a = 0; a < n->n_attrs; a++) {
            if (!n->attrs[a].g) continue;
            af_status st = mark_captures(n->attrs[a].g, NULL, i, cg->last_use, stamp, cg->n_readers, err);
            if (st != AF_OK) {
                af_free(stamp);
                af_cost_graph_free(cg);
                return st;
            }
        }
    }
    af_free(stamp);
    return AF_OK;
}

void af_cost_graph_free(af_cost_graph *cg) {
    af_free(cg->last_use);
    af_free(cg->n_readers);
    cg->last_use = NULL;
    cg->n_readers = NULL;
}

static bool reads(const af_node *n, int v) {
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] == v) return true;
    return false;
}

bool af_cost_group_closed(const af_cost_graph *cg, const af_fusion_candidate *c) {
    const af_graph *g = cg->g;
    for (int i = 0; i < c->n_nodes; i++)
        for (int a = 0; a < g->nodes[c->nodes[i]].n_attrs; a++)
            if (g->nodes[c->nodes[i]].attrs[a].g) /* members' own captures: the full check */
                return af_fusion_is_closed(g, c->nodes, c->n_nodes, c->output);
    for (int i = 0; i < c->n_nodes; i++) {
        const af_node *n = &g->nodes[c->nodes[i]];
        for (int o = 0; o < n->n_outputs; o++) {
            int v = n->outputs[o];
            if (v < 0 || v == c->output) continue;
            if (g->values[v].is_output) return false;
            int inside = 0;
            for (int j = 0; j < c->n_nodes; j++) inside += reads(&g->nodes[c->nodes[j]], v);
            if (inside != cg->n_readers[v]) return false;
        }
    }
    return true;
}

/* ---- sizes ---------------------------------------------------------------------------------- */

static double value_numel(const af_graph *g, int v, bool *nominal) {
    if (v < 0 || v >= g->n_values) return 0;
    const af_tensor *t = &g->values[v].t;
    if (t->rank < 0) {
        if (nominal) *nominal = true;
        return AF_COST_NOMINAL_NUMEL;
    }
    double n = 1;
    for (int d = 0; d < t->rank && d < AF_MAX_RANK; d++) {
        if (t->dims[d] < 0) {
            if (nominal) *nominal = true;
            n *= AF_COST_NOMINAL_DIM;
        } else {
            n *= (double)t->dims[d];
        }
    }
    return n;
}

double af_cost_value_bytes(const af_graph *g, int v, bool *nominal) {
    if (v < 0 || v >= g->n_values) return 0;
    size_t es = af_dtype_size(g->values[v].t.dtype);
    return value_numel(g, v, nominal) * (double)(es ? es : 4);
}

static int input(const af_node *n, int k) { return k < n->n_inputs ? n->inputs[k] : -1; }
static int output(const af_node *n, int k) { return k < n->n_outputs ? n->outputs[k] : -1; }

/* Bytes node n reads from its input k: the whole tensor, except where the op reads a part. */
static double input_read_bytes(const af_graph *g, const af_node *n, int k, bool *nominal) {
    int v = input(n, k);
    if (v < 0) return 0;
    double b = af_cost_value_bytes(g, v, nominal);
    switch (n->op) {
    case AF_OP_GATHER: /* the gathered rows and the slice: about the output's size */
    case AF_OP_GATHER_ELEMENTS:
    case AF_OP_GATHER_ND:
    case AF_OP_SLICE:
        if (k == 0) {
            double out = af_cost_value_bytes(g, output(n, 0), nominal);
            return out < b ? out : b;
        }
        return b;
    case AF_OP_SHAPE: /* only the shape */
    case AF_OP_SIZE:
        return 0;
    default:
        return b;
    }
}

/* ---- per-node flops ------------------------------------------------------------------------- */

/* Flops per output element of the elementwise and broadcast ops. */
static double elementwise_flops(const af_node *n) {
    switch (n->op) {
    case AF_OP_IDENTITY:
    case AF_OP_DROPOUT:
    case AF_OP_CAST:
    case AF_OP_CAST_LIKE:
        return 0;
    case AF_OP_ERF:
        return AF_COST_FLOPS_ERF;
    case AF_OP_SIGMOID:
    case AF_OP_TANH:
    case AF_OP_EXP:
    case AF_OP_LOG:
    case AF_OP_ELU:
    case AF_OP_SELU:
    case AF_OP_CELU:
    case AF_OP_SOFTPLUS:
    case AF_OP_SIN:
    case AF_OP_COS:
    case AF_OP_TAN:
    case AF_OP_ASIN:
    case AF_OP_ACOS:
    case AF_OP_ATAN:
    case AF_OP_SINH:
    case AF_OP_COSH:
    case AF_OP_ASINH:
    case AF_OP_ACOSH:
    case AF_OP_ATANH:
    case AF_OP_POW:
        return AF_COST_FLOPS_TRANSCENDENTAL;
    case AF_OP_DIV:
    case AF_OP_RECIPROCAL:
    case AF_OP_SQRT:
    case AF_OP_SOFTSIGN:
    case AF_OP_MOD:
        return AF_COST_FLOPS_DIVIDE;
    case AF_OP_HARD_SIGMOID:
    case AF_OP_HARD_SWISH: /* x * clip(x / 6 + 1/2): one FMA and a multiply, the clamps are free */
    case AF_OP_BATCH_NORMALIZATION:
    case AF_OP_CLIP:
    case AF_OP_SHRINK:
    case AF_OP_PRELU:
    case AF_OP_LEAKY_RELU:
        return 2;
    case AF_OP_SUM:
    case AF_OP_MAX:
    case AF_OP_MIN:
        return n->n_inputs > 1 ? n->n_inputs - 1 : 1;
    case AF_OP_MEAN:
        return n->n_inputs;
    default:
        return 1;
    }
}

static double node_flops(const af_graph *g, const af_node *n, bool *nominal) {
    const double out = value_numel(g, output(n, 0), nominal);
    const int x = input(n, 0), w = input(n, 1);
    const af_tensor *xt = x >= 0 ? &g->values[x].t : NULL, *wt = w >= 0 ? &g->values[w].t : NULL;
    switch (n->op) {
    case AF_OP_CONV: { /* per output: C_in/group * kernel MACs = numel(W) / C_out */
        if (!wt || wt->rank < 1 || wt->dims[0] <= 0) return 2 * out;
        double macs = out * value_numel(g, w, nominal) / (double)wt->dims[0];
        return 2 * macs + (input(n, 2) >= 0 ? out : 0);
    }
    case AF_OP_CONV_TRANSPOSE: {
        if (!wt || wt->rank < 1 || wt->dims[0] <= 0) return 2 * out;
        return 2 * value_numel(g, x, nominal) * value_numel(g, w, nominal) / (double)wt->dims[0];
    }
    case AF_OP_MAT_MUL:
    case AF_OP_GEMM: {
        double k = AF_COST_NOMINAL_DIM;
        if (xt && xt->rank >= 1) {
            int kd = xt->rank - 1;
            if (n->op == AF_OP_GEMM && xt->rank == 2 && af_node_attr_int(n, "transA", 0)) kd = 0;
            if (xt->dims[kd] >= 0) k = (double)xt->dims[kd];
            else if (nominal) *nominal = true;
        }
        double bias = n->op == AF_OP_GEMM && input(n, 2) >= 0 ? out : 0;
        return 2 * out * k + bias;
    }
    case AF_OP_EINSUM:
        return 2 * out * AF_COST_NOMINAL_DIM;
    case AF_OP_MAX_POOL:
    case AF_OP_AVERAGE_POOL: {
        const int64_t *ks;
        int nk = af_node_attr_ints(n, "kernel_shape", &ks);
        double per = 1;
        for (int i = 0; i < nk; i++) per *= ks[i] > 0 ? (double)ks[i] : 1;
        return out * per;
    }
    case AF_OP_GLOBAL_AVERAGE_POOL:
    case AF_OP_GLOBAL_MAX_POOL:
    case AF_OP_REDUCE_MEAN:
    case AF_OP_REDUCE_SUM:
    case AF_OP_REDUCE_MAX:
    case AF_OP_REDUCE_MIN:
    case AF_OP_REDUCE_PROD:
    case AF_OP_REDUCE_L1:
    case AF_OP_REDUCE_LOG_SUM:
    case AF_OP_ARG_MAX:
    case AF_OP_ARG_MIN:
    case AF_OP_CUM_SUM:
        return value_numel(g, x, nominal);
    case AF_OP_REDUCE_L2:
    case AF_OP_REDUCE_SUM_SQUARE:
        return 2 * value_numel(g, x, nominal);
    case AF_OP_REDUCE_LOG_SUM_EXP:
        return (AF_COST_FLOPS_TRANSCENDENTAL + 1) * value_numel(g, x, nominal);
    case AF_OP_SOFTMAX:
    case AF_OP_LOG_SOFTMAX:
        return AF_COST_FLOPS_SOFTMAX * out;
    case AF_OP_HARDMAX:
        return 2 * out;
    case AF_OP_LAYER_NORMALIZATION:
    case AF_OP_INSTANCE_NORMALIZATION:
    case AF_OP_MEAN_VARIANCE_NORMALIZATION:
        return AF_COST_FLOPS_NORM * out;
    case AF_OP_LRN:
        return (2.0 * (double)af_node_attr_int(n, "size", 1) + AF_COST_FLOPS_TRANSCENDENTAL) * out;
    case AF_OP_RESIZE: {
        const char *mode = af_node_attr_string(n, "mode", "nearest");
        return strcmp(mode, "nearest") == 0 ? 0 : strcmp(mode, "cubic") == 0 ? 32 * out : 8 * out;
    }
    default:
        break;
    }
    if (n->op >= AF_OP_COUNT) return 0;
    af_opclass cls = af_op_info(n->op)->cls;
    if (cls == AF_OPCLASS_ELEMENTWISE || cls == AF_OPCLASS_BROADCAST) return elementwise_flops(n) * out;
    return 0; /* injective and opaque ops move data only */
}

static bool gemm_like(const af_node *n) {
    return n->op == AF_OP_CONV || n->op == AF_OP_CONV_TRANSPOSE || n->op == AF_OP_MAT_MUL || n->op == AF_OP_GEMM ||
           n->op == AF_OP_EINSUM;
}

/* The 2-D stride and dilation of a conv's attributes (absent: 1), or false past 2-D. */
static bool conv_steps(const af_node *n, const char *name, int64_t out[2]) {
    const int64_t *v;
    int k = af_node_attr_ints(n, name, &v);
    if (k > 2) return false;
    out[0] = k > 0 ? v[0] : 1;
    out[1] = k > 1 ? v[1] : out[0];
    return true;
}

/* The Winograd tile the fast runtime picks for a Conv (af_conv_winograd_tile), 0 for none. */
static int winograd_tile(const af_graph *g, const af_node *n, const af_tensor *wt, int n_threads) {
    if (n->op != AF_OP_CONV || wt->rank != 4 || n->n_outputs < 1 || n->outputs[0] < 0) return 0;
    const af_tensor *y = &g->values[n->outputs[0]].t;
    af_conv_geom geo = {.n_sp = 2};
    if (y->rank != 4 || !conv_steps(n, "strides", geo.stride) || !conv_steps(n, "dilations", geo.dilation)) return 0;
    return af_conv_winograd_tile(&geo, wt->dims[2], wt->dims[3], af_node_attr_int(n, "group", 1), wt->dims[1],
                                 wt->dims[0], y->dims[2], y->dims[3], n_threads);
}

static double efficiency(const af_graph *g, const af_node *n, const af_hw_model *hw) {
    switch (n->op) {
    case AF_OP_CONV:
    case AF_OP_CONV_TRANSPOSE: {
        int w = input(n, 1);
        const af_tensor *wt = w >= 0 ? &g->values[w].t : NULL;
        if (!wt || wt->rank < 3) return AF_COST_EFF_CONV_KXK;
        if (n->op == AF_OP_CONV && af_node_attr_int(n, "group", 1) > 1 && wt->dims[1] == 1) return AF_COST_EFF_DEPTHWISE;
        const int wino = hw->winograd ? winograd_tile(g, n, wt, hw->n_cores) : 0;
        if (wino) return wino == 4 ? AF_COST_EFF_WINOGRAD_4 : AF_COST_EFF_WINOGRAD_2;
        int64_t k = 1;
        for (int d = 2; d < wt->rank; d++) k *= wt->dims[d];
        return k == 1 ? AF_COST_EFF_GEMM : AF_COST_EFF_CONV_KXK;
    }
    case AF_OP_MAT_MUL:
    case AF_OP_GEMM:
    case AF_OP_EINSUM:
        return AF_COST_EFF_GEMM;
    case AF_OP_SOFTMAX:
    case AF_OP_LOG_SOFTMAX:
    case AF_OP_LAYER_NORMALIZATION:
    case AF_OP_INSTANCE_NORMALIZATION:
    case AF_OP_MEAN_VARIANCE_NORMALIZATION:
        return AF_COST_EFF_VECTOR;
    case AF_OP_MAX_POOL:
    case AF_OP_AVERAGE_POOL:
        return AF_COST_EFF_REDUCE;
    default:
        if (n->op < AF_OP_COUNT && af_op_info(n->op)->cls == AF_OPCLASS_REDUCTION) return AF_COST_EFF_REDUCE;
        return AF_COST_EFF_VECTOR;
    }
}

/* Microseconds: flops at peak * eff GFLOP/s (1 GFLOP/s = 1e3 flops/us), bytes at GB/s likewise. */
static double compute_us(const af_hw_model *hw, double flops, double eff) {
    double rate = hw->peak_gflops * eff * 1e3;
    return rate > 0 ? flops / rate : 0;
}

static double memory_us(const af_hw_model *hw, double bytes) { return af_hw_memory_us(hw, bytes); }

static double node_bytes(const af_graph *g, const af_node *n, bool *nominal) {
    double b = 0;
    for (int k = 0; k < n->n_inputs; k++) b += input_read_bytes(g, n, k, nominal);
    for (int k = 0; k < n->n_outputs; k++) b += af_cost_value_bytes(g, n->outputs[k], nominal);
    return b;
}

static void node_cost(const af_graph *g, const af_hw_model *hw, int i, af_node_cost *out, bool *nominal) {
    const af_node *n = &g->nodes[i];
    out->flops = node_flops(g, n, nominal);
    out->bytes = node_bytes(g, n, nominal);
    out->compute_us = compute_us(hw, out->flops, efficiency(g, n, hw));
    out->memory_us = memory_us(hw, out->bytes);
    out->fixed_us = gemm_like(n) ? AF_COST_FIXED_GEMM_US : AF_COST_FIXED_VECTOR_US;
    out->time_us = fmax(out->compute_us, out->memory_us) + out->fixed_us + hw->kernel_overhead_us;
}

void af_cost_node(const af_graph *g, const af_hw_model *hw, int node, af_node_cost *out) {
    node_cost(g, hw, node, out, NULL);
}

/* ---- groups --------------------------------------------------------------------------------- */

static bool member(const af_fusion_candidate *c, int node) {
    for (int i = 0; i < c->n_nodes; i++)
        if (c->nodes[i] == node) return true;
    return false;
}

/* A BatchNormalization reading the anchor Conv's output directly is folded into the Conv's
 * weights by the scheduler: it costs nothing per run once fused. */
static bool folded_bn(const af_graph *g, const af_fusion_candidate *c, int node) {
    const af_node *n = &g->nodes[node];
    if (n->op != AF_OP_BATCH_NORMALIZATION || c->anchor < 0 || g->nodes[c->anchor].op != AF_OP_CONV) return false;
    int x = input(n, 0);
    return x >= 0 && x == output(&g->nodes[c->anchor], 0);
}

/* Values the peak-memory comparison follows, with unfused and fused lifetimes [birth, death]. */
typedef struct live_range {
    int v;
    double bytes;
    int birth_u, death_u, birth_f, death_f; /* fused: death_f < birth_f means the value never exists */
} live_range;

#define MAX_RANGES 256

/* The values one candidate's scan has seen (at most MAX_RANGES), with where it keeps each: a
 * member with thousands of inputs (a Sum over a fan-out) must not make the scan quadratic. */
#define SET_SLOTS (4 * MAX_RANGES)
typedef struct value_set {
    int key[SET_SLOTS], at[SET_SLOTS];
} value_set;

static void set_init(value_set *s) { memset(s->key, 0xff, sizeof s->key); }

static unsigned set_home(int v) { return ((unsigned)v * 2654435761u) & (SET_SLOTS - 1); }

/* The index stored for v, or -1. */
static int set_find(const value_set *s, int v) {
    for (unsigned h = set_home(v);; h = (h + 1) & (SET_SLOTS - 1)) {
        if (s->key[h] == v) return s->at[h];
        if (s->key[h] < 0) return -1;
    }
}

/* Callers add at most MAX_RANGES values, so a free slot always exists. */
static void set_put(value_set *s, int v, int at) {
    unsigned h = set_home(v);
    while (s->key[h] >= 0) h = (h + 1) & (SET_SLOTS - 1);
    s->key[h] = v;
    s->at[h] = at;
}

/* Peak of the followed values over node positions lo..hi; fused or unfused lifetimes. */
static double window_peak(const live_range *r, int n, int lo, int hi, bool fused, const af_fusion_candidate *c) {
    double peak = 0;
    bool sparse = hi - lo > 1024; /* a very spread group: look at its own positions only */
    for (int q = lo; q <= hi; q++) {
        if (sparse && !member(c, q)) continue;
        double live = 0;
        for (int i = 0; i < n; i++) {
            int b = fused ? r[i].birth_f : r[i].birth_u, d = fused ? r[i].death_f : r[i].death_u;
            if (b <= q && q <= d) live += r[i].bytes;
        }
        if (live > peak) peak = live;
    }
    return peak;
}

/* Arena values only: graph inputs, constants and graph outputs live outside the arena. */
static bool in_arena(const af_graph *g, int v) {
    return v >= 0 && g->values[v].kind == AF_VALUE_NODE && !g->values[v].is_output;
}

/* Fused minus unfused peak of the group's window [first node, last node]: the group's
 * intermediates vanish, its output appears only at the last node (where the fused step runs), and
 * external activations it reads stay alive until then. */
static double peak_delta(const af_cost_graph *cg, const af_fusion_candidate *c, int lo, int hi, bool *nominal) {
    const af_graph *g = cg->g;
    live_range r[MAX_RANGES];
    value_set seen;
    set_init(&seen);
    int n = 0;
    for (int i = 0; i < c->n_nodes && n < MAX_RANGES; i++) {
        const af_node *nd = &g->nodes[c->nodes[i]];
        for (int k = 0; k < nd->n_inputs && n < MAX_RANGES; k++) {
            int v = nd->inputs[k];
            if (!in_arena(g, v) || set_find(&seen, v) >= 0 || member(c, g->values[v].producer)) continue;
            set_put(&seen, v, n);
            int p = g->values[v].producer, d = cg->last_use[v];
            r[n++] = (live_range){v, af_cost_value_bytes(g, v, nominal), p, d, p, d > hi ? d : hi};
        }
        for (int k = 0; k < nd->n_outputs && n < MAX_RANGES; k++) {
            int v = nd->outputs[k];
            if (!in_arena(g, v)) continue;
            int p = c->nodes[i], d = cg->last_use[v] > p ? cg->last_use[v] : p;
            double b = af_cost_value_bytes(g, v, nominal);
            if (v == c->output) r[n++] = (live_range){v, b, p, d, hi, d > hi ? d : hi};
            else r[n++] = (live_range){v, b, p, d, 1, 0}; /* an intermediate: never exists fused */
        }
    }
    return window_peak(r, n, lo, hi, true, c) - window_peak(r, n, lo, hi, false, c);
}

void af_cost_estimate_group(const af_cost_graph *cg, const af_hw_model *hw, const af_fusion_candidate *c,
                            af_group_estimate *out) {
    const af_graph *g = cg->g;
    memset(out, 0, sizeof *out);
    bool nominal = false;
    double compute_fused = 0, energy_u = 0;
    int lo = g->n_nodes, hi = -1;
    for (int i = 0; i < c->n_nodes; i++) {
        int id = c->nodes[i];
        if (id < lo) lo = id;
        if (id > hi) hi = id;
        af_node_cost nc;
        node_cost(g, hw, id, &nc, &nominal);
        out->flops_unfused += nc.flops;
        out->bytes_unfused += nc.bytes;
        out->time_unfused_us += nc.time_us;
        energy_u += nc.flops * hw->pj_per_flop + nc.bytes * af_hw_pj_per_byte_for(hw, nc.bytes);
        if (folded_bn(g, c, id)) continue;
        /* The region kernel evaluates every member over the region's output, so a member smaller
         * than it (a per-channel gate before its broadcast Mul) is computed once per output
         * element: EfficientNet-B0's Sigmoid + Mul gate regions ran 0.6-0.9 ms where the gate's
         * Sigmoid and the plain broadcast Mul took 0.03. */
        double repeat = 1;
        if (c->family == AF_FUSION_ELEMENTWISE) { /* sizes that are guesses (symbolic dims) say nothing */
            bool guessed = false;
            const double own = value_numel(g, output(&g->nodes[id], 0), &guessed);
            const double whole = value_numel(g, c->output, &guessed);
            if (!guessed && own > 0 && whole > own) repeat = whole / own;
        }
        out->flops_fused += nc.flops * repeat;
        compute_fused += nc.compute_us * repeat;
    }
    /* Fused traffic: each external input once (the most any member reads of it), and the output.
     * Each byte is charged to the member that moves it (an input to its heaviest reader, the output
     * to its producer), and the memory time is summed per member: the footprint that picks the
     * cache level is a member's own, as unfused, not the group's. Priced as one footprint, a group
     * of separate streams spilled into slower levels, so that moving fewer bytes could cost more:
     * on one core MobileNetV3-L's 960-channel squeeze-excite blocks (two 0.9 MB weights, each
     * under the modelled L2) were estimated 18.0 us unfused and 19.2 fused, and ran unfused at
     * 136-163 us a block against 96-100 fused (pinned profiles, alternating). */
    value_set ext;
    set_init(&ext);
    double ext_bytes[MAX_RANGES], member_bytes[AF_FUSION_MAX_NODES] = {0};
    int ext_owner[MAX_RANGES], n_ext = 0;
    for (int i = 0; i < c->n_nodes; i++) {
        const af_node *n = &g->nodes[c->nodes[i]];
        for (int k = 0; k < n->n_inputs; k++) {
            int v = n->inputs[k];
            if (v < 0 || (g->values[v].kind == AF_VALUE_NODE && member(c, g->values[v].producer))) continue;
            double b = input_read_bytes(g, n, k, &nominal);
            int j = set_find(&ext, v);
            if (j < 0) {
                if (n_ext == MAX_RANGES) {
                    member_bytes[i] += b;
                    continue;
                }
                set_put(&ext, v, n_ext);
                ext_owner[n_ext] = i;
                ext_bytes[n_ext++] = b;
            } else if (b > ext_bytes[j]) {
                ext_bytes[j] = b;
                ext_owner[j] = i;
            }
        }
        if (c->nodes[i] == g->values[c->output].producer) member_bytes[i] += af_cost_value_bytes(g, c->output, &nominal);
    }
    for (int j = 0; j < n_ext; j++) member_bytes[ext_owner[j]] += ext_bytes[j];
    double memory_fused = 0, energy_f = out->flops_fused * hw->pj_per_flop;
    for (int i = 0; i < c->n_nodes; i++) {
        out->bytes_fused += member_bytes[i];
        memory_fused += memory_us(hw, member_bytes[i]);
        /* Intermediates stay in registers or L1, whose energy (~1 pJ/byte) is left out. */
        energy_f += member_bytes[i] * af_hw_pj_per_byte_for(hw, member_bytes[i]);
    }
    /* one kernel: the anchor's fixed cost (or an elementwise kernel's) and one step */
    const double fixed = c->anchor >= 0 && gemm_like(&g->nodes[c->anchor]) ? AF_COST_FIXED_GEMM_US : AF_COST_FIXED_VECTOR_US;
    out->time_fused_us = fmax(compute_fused, memory_fused) + fixed + hw->kernel_overhead_us;
    out->energy_unfused_uj = energy_u * 1e-6;
    out->energy_fused_uj = energy_f * 1e-6;
    out->peak_delta = hi >= lo ? peak_delta(cg, c, lo, hi, &nominal) : 0;
    out->nominal_dims = nominal;
}

/* ---- score ---------------------------------------------------------------------------------- */

static double saved_fraction(double unfused, double fused) {
    return unfused > 0 ? (unfused - fused) / unfused : 0;
}

double af_cost_score(const af_group_estimate *e, const af_fusion_config *cfg) {
    double wl = fmax(cfg->weight_latency, 0), wm = fmax(cfg->weight_memory, 0), we = fmax(cfg->weight_energy, 0);
    double sum = wl + wm + we;
    if (!(sum > 0)) return 0;
    return (wl * saved_fraction(e->time_unfused_us, e->time_fused_us) +
            wm * saved_fraction(e->bytes_unfused, e->bytes_fused) +
            we * saved_fraction(e->energy_unfused_uj, e->energy_fused_uj)) /
           sum;
}

void af_cost_graph_totals(const af_cost_graph *cg, const af_hw_model *hw, af_cost_totals *out) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < cg->g->n_nodes; i++) {
        af_node_cost nc;
        node_cost(cg->g, hw, i, &nc, NULL);
        out->time_us += nc.time_us;
        out->bytes += nc.bytes;
        out->energy_uj += (nc.flops * hw->pj_per_flop + nc.bytes * af_hw_pj_per_byte_for(hw, nc.bytes)) * 1e-6;
    }
}

double af_cost_gain(const af_group_estimate *e, const af_fusion_config *cfg, const af_cost_totals *t) {
    double wl = fmax(cfg->weight_latency, 0), wm = fmax(cfg->weight_memory, 0), we = fmax(cfg->weight_energy, 0);
    double sum = wl + wm + we;
    if (!(sum > 0)) return 0;
    double g = 0;
    if (t->time_us > 0) g += wl * (e->time_unfused_us - e->time_fused_us) / t->time_us;
    if (t->bytes > 0) g += wm * (e->bytes_unfused - e->bytes_fused) / t->bytes;
    if (t->energy_uj > 0) g += we * (e->energy_unfused_uj - e->energy_fused_uj) / t->energy_uj;
    return g / sum;
}

double af_cost_threshold(const af_fusion_config *cfg) {
    double a = cfg->fusion_aggressiveness;
    if (!(a >= 0)) a = 0;
    if (a > 1) a = 1;
    return AF_COST_THRESHOLD_SPAN * (1 - a);
}

/* ---- footprint ------------------------------------------------------------------------------ */

void af_cost_footprint(const af_cost_graph *cg, double *weight_bytes, double *peak_activation_bytes) {
    const af_graph *g = cg->g;
    double weights = 0, peak = 0;
    double *delta = af_calloc((size_t)g->n_nodes + 2, sizeof *delta);
    for (int v = 0; v < g->n_values; v++) {
        const af_value *val = &g->values[v];
        double b = af_cost_value_bytes(g, v, NULL);
        /* A subgraph's capture of an enclosing graph's constant is a weight there too: resident
         * while the body runs, whichever graph holds it. */
        if (af_graph_const_value(g, v) || (val->kind == AF_VALUE_INPUT && val->has_default)) {
            weights += b;
            continue;
        }
        if (!delta || (val->kind != AF_VALUE_NODE && val->kind != AF_VALUE_INPUT)) continue;
        int birth = val->kind == AF_VALUE_NODE ? val->producer : 0;
        if (birth < 0) birth = 0;
        int death = cg->last_use[v] > birth ? cg->last_use[v] : birth;
        if (death > g->n_nodes) death = g->n_nodes;
        delta[birth] += b;
        delta[death + 1] -= b;
    }
    if (delta) {
        double live = 0;
        for (int i = 0; i <= g->n_nodes; i++) {
            live += delta[i];
            if (live > peak) peak = live;
        }
    } else {
        peak = 0; /* out of memory: no liveness, so no claim */
    }
    af_free(delta);
    if (weight_bytes) *weight_bytes = weights;
    if (peak_activation_bytes) *peak_activation_bytes = peak;
}
