/* Shared helpers of the fusion layers: candidate lists and the legality checks every layer uses. */
#include "fusion/fusion.h"

#include <stdio.h>
#include <string.h>

#include "ir/op.h"
#include "ir/tensor.h"
#include "kernels/fast/region.h"
#include "util/alloc.h"
#include "util/error.h"

static const char *const family_names[] = {
#define AF_FAMILY_NAME(e, name) name,
    AF_FUSION_FAMILIES(AF_FAMILY_NAME)
#undef AF_FAMILY_NAME
};
_Static_assert(sizeof family_names / sizeof family_names[0] == AF_FUSION_FAMILY_COUNT, "one name per family");

const char *af_fusion_family_name(af_fusion_family f) {
    return (unsigned)f < AF_FUSION_FAMILY_COUNT ? family_names[f] : "unknown";
}

int af_fusion_family_parse(const char *name) {
    for (int i = 0; i < AF_FUSION_FAMILY_COUNT; i++)
        if (!strcmp(family_names[i], name)) return i;
    return -1;
}

af_status af_fusion_candidates_push(af_fusion_candidates *cs, const af_fusion_candidate *c, af_error *err) {
    if (cs->n == cs->cap) {
        int cap = cs->cap ? cs->cap * 2 : 32;
        af_fusion_candidate *items = af_realloc(cs->items, (size_t)cap * sizeof *items);
        if (!items) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory listing fusion candidates");
        cs->items = items;
        cs->cap = cap;
    }
    cs->items[cs->n++] = *c;
    return AF_OK;
}

void af_fusion_candidates_free(af_fusion_candidates *cs) {
    af_free(cs->items);
    memset(cs, 0, sizeof *cs);
}

static bool region_fail(char *why, size_t why_size, const char *fmt, const char *name, const char *op_type) {
    if (why) snprintf(why, why_size, fmt, name, op_type);
    return false;
}

bool af_fusion_region_node(const af_graph *g, const af_node *n, char *why, size_t why_size) {
    const af_op_info_t *info = n->op < AF_OP_COUNT ? af_op_info(n->op) : NULL;
    if (n->op == AF_OP_UNKNOWN || !info || (info->cls != AF_OPCLASS_ELEMENTWISE && info->cls != AF_OPCLASS_BROADCAST) ||
        n->op == AF_OP_BATCH_NORMALIZATION || !info->run)
        return region_fail(why, why_size, "node '%s' (%s) is not elementwise", n->name, n->op_type);
    if (n->n_inputs > AF_REGION_MAX_ARGS || n->n_outputs < 1 || n->outputs[0] < 0)
        return region_fail(why, why_size, "node '%s' (%s) has more inputs or outputs than a region takes", n->name,
                           n->op_type);
    for (int k = 1; k < n->n_outputs; k++)
        if (n->outputs[k] >= 0)
            return region_fail(why, why_size, "node '%s' (%s) has a second output", n->name, n->op_type);
    size_t es = af_dtype_size(g->values[n->outputs[0]].t.dtype);
    if (es == 0 || es > 8)
        return region_fail(why, why_size, "node '%s' (%s) has an output type a region does not hold", n->name,
                           n->op_type);
    return true;
}

static bool in_set(const int *nodes, int n, int x) {
    for (int i = 0; i < n; i++)
        if (nodes[i] == x) return true;
    return false;
}

bool af_fusion_is_closed(const af_graph *g, const int *nodes, int n_nodes, int output) {
    for (int i = 0; i < n_nodes; i++) {
        const af_node *n = &g->nodes[nodes[i]];
        for (int o = 0; o < n->n_outputs; o++) {
            int v = n->outputs[o];
            if (v < 0 || v == output) continue;
            if (g->values[v].is_output) return false;
            for (int j = 0; j < g->n_nodes; j++) {
                if (in_set(nodes, n_nodes, j)) continue;
                const af_node *m = &g->nodes[j];
                for (int k = 0; k < m->n_inputs; k++)
                    if (m->inputs[k] == v) return false;
                for (int a = 0; a < m->n_attrs; a++) /* captured by a subgraph */
                    for (int s = 0; m->attrs[a].g && s < m->attrs[a].g->n_values; s++)
                        if (m->attrs[a].g->values[s].kind == AF_VALUE_OUTER && m->attrs[a].g->values[s].outer_id == v)
                            return false;
            }
        }
    }
    return true;
}

bool af_fusion_is_convex(const af_graph *g, const int *nodes, int n_nodes) {
    /* Nodes are topologically sorted, so a path from the set back into it can only pass through
     * outside nodes between the set's first and last index. Walk forward from the set's outputs
     * through outside nodes in that window; reaching a set node again means a cycle after merging. */
    int lo = g->n_nodes, hi = -1;
    for (int i = 0; i < n_nodes; i++) {
        if (nodes[i] < lo) lo = nodes[i];
        if (nodes[i] > hi) hi = nodes[i];
    }
    if (hi - lo + 1 == n_nodes) return true; /* contiguous in order: nothing in between */
    bool *reached = af_calloc((size_t)(hi - lo + 1), sizeof *reached);
    if (!reached) return false; /* out of memory: refuse rather than risk a cycle */
    bool convex = true;
    for (int j = lo; j <= hi && convex; j++) {
        bool member = in_set(nodes, n_nodes, j);
        const af_node *m = &g->nodes[j];
        /* j is reached if it reads a value produced by a set node or by a reached outside node */
        bool r = false;
        for (int k = 0; k < m->n_inputs && !r; k++) {
            int v = m->inputs[k];
            int p = v >= 0 ? g->values[v].producer : -1;
            if (p < lo || p > hi || p == j) continue;
            if (in_set(nodes, n_nodes, p) ? !member : reached[p - lo]) r = true;
            if (!in_set(nodes, n_nodes, p) && reached[p - lo] && member) convex = false;
        }
        reached[j - lo] = !member && r;
    }
    af_free(reached);
    return convex;
}
