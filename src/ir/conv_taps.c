/* Drops the kernel taps of a Conv that read only padding at every output (see graph.h,
 * af_graph_prune_conv_taps). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/graph.h"
#include "ir/op.h"
#include "ir/shape/conv_geom.h"
#include "ir/tensor.h"
#include "util/alloc.h"

/* Along one axis: the first and last taps t of a kernel k long that read an input row inside
 * [0, in) for some output o in [0, out). *lo > *hi: none does. */
static void live_taps(int64_t k, int64_t in, int64_t out, int64_t s, int64_t d, int64_t pb, int64_t *lo, int64_t *hi) {
    *lo = k;
    *hi = -1;
    for (int64_t t = 0; t < k; t++) {
        int64_t o0, o1;
        af_conv_tap_outputs(in, out, s, d, pb, t, &o0, &o1);
        if (o1 == o0) continue;
        if (t < *lo) *lo = t;
        *hi = t;
    }
}

/* The int attribute list `name` of n with count entries, else NULL (absent: *present false). */
static const int64_t *ints_of(const af_node *n, const char *name, int count, bool *present) {
    const int64_t *v;
    const int got = af_node_attr_ints(n, name, &v);
    *present = got >= 0;
    return got == count ? v : NULL;
}

/* A new constant holding w's taps [ky0, ky0 + kh) x [kx0, kx0 + kw) of every (m, c), named after
 * w; its id, or -1 (out of memory, or a weight it drops is not finite: 0 x inf is NaN). */
static int sliced_weights(af_graph *g, int w, int64_t ky0, int64_t kh, int64_t kx0, int64_t kw) {
    const af_tensor *t = &g->values[w].t; /* read before af_graph_add_value, which may move values */
    const float *src = t->data;
    const int64_t M = t->dims[0], C = t->dims[1], mc = M * C, KH = t->dims[2], KW = t->dims[3];
    for (int64_t i = 0; i < mc; i++)
        for (int64_t y = 0; y < KH; y++)
            for (int64_t x = 0; x < KW; x++) {
                const bool kept = y >= ky0 && y < ky0 + kh && x >= kx0 && x < kx0 + kw;
                if (!kept && !isfinite(src[(i * KH + y) * KW + x])) return -1;
            }
    float *dst = af_malloc((size_t)(mc * kh * kw) * sizeof *dst);
    if (!dst) return -1;
    for (int64_t i = 0; i < mc; i++)
        for (int64_t y = 0; y < kh; y++)
            memcpy(dst + (i * kh + y) * kw, src + (i * KH + ky0 + y) * KW + kx0, (size_t)kw * sizeof *dst);
    char name[512];
    int v = -1;
    for (int k = 0; k < 100 && v < 0; k++) {
        snprintf(name, sizeof name, "%s/live_taps%d", g->values[w].name, k);
        if (af_graph_find_value(g, name) < 0) v = af_graph_add_value(g, name, NULL);
    }
    if (v < 0) {
        af_free(dst);
        return -1;
    }
    af_value *nv = &g->values[v];
    nv->kind = AF_VALUE_CONST;
    nv->producer = -1;
    nv->t = (af_tensor){.dtype = AF_DTYPE_FLOAT, .rank = 4, .dims = {M, C, kh, kw}, .data = dst,
                        .nbytes = (size_t)(mc * kh * kw) * sizeof *dst};
    return v;
}

int af_graph_prune_conv_taps(af_graph *g) {
    int pruned = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        af_node *n = &g->nodes[i];
        if (n->op != AF_OP_CONV || n->n_inputs < 2 || n->inputs[0] < 0 || n->inputs[1] < 0 || n->n_outputs < 1 ||
            n->outputs[0] < 0 || strcmp(af_node_attr_string(n, "auto_pad", "NOTSET"), "NOTSET") != 0)
            continue;
        const af_value *wv = &g->values[n->inputs[1]];
        const af_tensor *x = &g->values[n->inputs[0]].t, *y = &g->values[n->outputs[0]].t, *w = &wv->t;
        if (wv->kind != AF_VALUE_CONST || w->dtype != AF_DTYPE_FLOAT || !w->data || w->rank != 4 || x->rank != 4 ||
            y->rank != 4 || !af_tensor_shape_known(x) || !af_tensor_shape_known(y) || !af_tensor_shape_known(w))
            continue;
        bool has_pads, has_strides, has_dil, has_kernel;
        const int64_t *pads = ints_of(n, "pads", 4, &has_pads), *strides = ints_of(n, "strides", 2, &has_strides);
        const int64_t *dil = ints_of(n, "dilations", 2, &has_dil);
        ints_of(n, "kernel_shape", 2, &has_kernel);
        if (!pads || (has_strides && !strides) || (has_dil && !dil)) continue; /* no pads: no tap reads only them */
        int64_t lo[2], hi[2], new_pads[4];
        bool smaller = false, ok = true;
        for (int a = 0; a < 2 && ok; a++) {
            const int64_t k = w->dims[2 + a], d = dil ? dil[a] : 1, s = strides ? strides[a] : 1;
            if (d < 1 || s < 1) ok = false;
            if (!ok) break;
            live_taps(k, x->dims[2 + a], y->dims[2 + a], s, d, pads[a], &lo[a], &hi[a]);
            new_pads[a] = pads[a] - lo[a] * d;
            new_pads[2 + a] = pads[2 + a] - (k - 1 - hi[a]) * d;
            ok = lo[a] <= hi[a] && new_pads[a] >= 0 && new_pads[2 + a] >= 0;
            smaller |= hi[a] - lo[a] + 1 < k;
        }
        if (!ok || !smaller) continue;
        const int64_t kernel[2] = {hi[0] - lo[0] + 1, hi[1] - lo[1] + 1};
        if (has_kernel && !af_node_set_ints(n, "kernel_shape", 2, kernel)) continue;
        const int v = sliced_weights(g, n->inputs[1], lo[0], kernel[0], lo[1], kernel[1]);
        n = &g->nodes[i]; /* adding a value never moves nodes, but stay safe */
        if (v < 0 || !af_node_set_ints(n, "pads", 4, new_pads)) {
            if (has_kernel) { /* put the kernel back: the node keeps its weights */
                const int64_t full[2] = {g->values[n->inputs[1]].t.dims[2], g->values[n->inputs[1]].t.dims[3]};
                af_node_set_ints(n, "kernel_shape", 2, full);
            }
            continue;
        }
        n->inputs[1] = v;
        pruned++;
    }
    return pruned;
}
