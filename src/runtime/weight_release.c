/* Frees each packed constant right after its last reader's kernel is built. */
#include "runtime/weight_release.h"

#include <string.h>

#include "ir/tensor.h"
#include "util/alloc.h"
#include "util/error.h"

af_status af_weight_release_init(af_graph *g, af_weight_release *wr, af_error *err) {
    memset(wr, 0, sizeof *wr);
    wr->g = g;
    wr->readers_left = af_calloc((size_t)(g->n_values ? g->n_values : 1), sizeof *wr->readers_left);
    if (!wr->readers_left) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory planning weight release");
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].kind != AF_VALUE_CONST || !g->values[v].t.data || g->values[v].is_output)
            wr->readers_left[v] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const af_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0 && wr->readers_left[n->inputs[k]] >= 0) wr->readers_left[n->inputs[k]]++;
        for (int a = 0; a < n->n_attrs; a++) /* read by a subgraph: kept */
            for (int q = 0; n->attrs[a].g && q < n->attrs[a].g->n_values; q++)
                if (n->attrs[a].g->values[q].kind == AF_VALUE_OUTER) wr->readers_left[n->attrs[a].g->values[q].outer_id] = -1;
    }
    return AF_OK;
}

/* One read of v is built into a kernel that holds its own copy; the last one frees it. */
static void read_done(af_weight_release *wr, int v) {
    if (v < 0 || wr->readers_left[v] <= 0 || --wr->readers_left[v] > 0) return;
    const long long before = af_alloc_live_bytes();
    af_tensor_free_data(&wr->g->values[v].t); /* the shape stays: kernels still read it */
    wr->g->weights_released = true;
    const long long gone = before - af_alloc_live_bytes();
    wr->freed_bytes += gone > 0 ? (size_t)gone : 0;
}

static bool held(const af_step *s, int v) {
    for (int i = 0; i < s->n_held; i++)
        if (s->held[i] == v) return true;
    return false;
}

void af_weight_release_step(af_weight_release *wr, const af_step *s) {
    if (!wr) return;
    for (int j = 0; j < s->n_nodes; j++) {
        const af_node *n = &wr->g->nodes[s->nodes[j]];
        /* packed_inputs speaks for the anchor's own kernel, not for a synthesized one */
        const unsigned packed = s->nodes[j] == s->anchor && !s->kernel_node ? s->kernel.packed_inputs : 0;
        for (int k = 0; k < n->n_inputs; k++)
            if ((k < 32 && (packed >> k & 1u)) || held(s, n->inputs[k])) read_done(wr, n->inputs[k]);
    }
}

void af_weight_release_free(af_weight_release *wr) {
    af_free(wr->readers_left);
    memset(wr, 0, sizeof *wr);
}
