/* The subgraph matcher: finds each rule's pattern around every node that can be its anchor
 * (backtracking over the rule's search order, pruned by op, then edges, then conditions, with
 * bounded work), checks legality and the config, and drives the whole pattern pass. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusion/pattern/pattern.h"
#include "fusion/pattern/rules_internal.h"
#include "ir/tensor.h"
#include "util/alloc.h"
#include "util/error.h"

#define MAX_READERS_EXAMINED 64 /* readers of one value tried for one pattern node */
#define MAX_STEPS 4096          /* candidate nodes tried per rule per anchor */
#define MAX_VALUE_ELEMENTS 4096 /* "N.K == v" compares constants up to this size */

enum { UNPLACED = -1, ABSENT = -2 };
enum { V_PENDING = -2, V_WILD = -3, V_NONE = -4 }; /* ref_value results besides value ids */

typedef struct matcher {
    const af_graph *g;
    const af_readers *rd;
    af_legal_scratch *ls;
    const af_fusion_config *cfg;
    const af_rule *r;
    int map[AF_PAT_MAX_NODES];            /* graph node, UNPLACED or ABSENT */
    unsigned char perm[AF_PAT_MAX_NODES]; /* 1: the two inputs of a commutative node are swapped */
    long steps;
    bool stop;
    bool have_good, have_bad;
    af_fusion_candidate good, bad;
} matcher;

/* ---- values and edges ------------------------------------------------------------------------ */

static bool commutative(const af_node *n) {
    if (n->n_inputs != 2) return false;
    switch (n->op) {
    case AF_OP_ADD: case AF_OP_MUL: case AF_OP_MAX: case AF_OP_MIN: case AF_OP_SUM: case AF_OP_MEAN:
    case AF_OP_AND: case AF_OP_OR: case AF_OP_XOR: case AF_OP_EQUAL:
        return true;
    default:
        return false;
    }
}

static bool op_matches(const af_pnode *pn, af_op op) {
    if (op >= AF_OP_COUNT) return false;
    for (int i = 0; i < pn->n_ops; i++)
        if (pn->ops[i] == (int)op) return true;
    return (pn->classes >> af_op_info(op)->cls) & 1u;
}

/* The value input k of present pattern node pn reads, or V_NONE. */
static int node_input(const matcher *m, int pn, int k) {
    const af_node *n = &m->g->nodes[m->map[pn]];
    int slot = m->perm[pn] && k < 2 ? 1 - k : k;
    return slot < n->n_inputs && n->inputs[slot] >= 0 ? n->inputs[slot] : V_NONE;
}

/* Follows a reference through absent optional nodes (each passes on its primary input) to one on
 * a present or unplaced node; false when it ends nowhere (the value is then unconstrained). */
static bool follow(const matcher *m, af_pref ref, af_pref *out) {
    for (int depth = 0; depth <= AF_PAT_MAX_NODES; depth++) {
        if (m->map[ref.node] != ABSENT) {
            *out = ref;
            return true;
        }
        int p = m->r->nodes[ref.node].primary;
        if (p < 0) return false;
        const af_pedge *e = &m->r->edges[p];
        if (ref.kind == AF_PREF_INPUT && e->input != ref.index) return false;
        ref = e->src;
    }
    return false;
}

static int ref_value(const matcher *m, af_pref ref) {
    af_pref f;
    if (!follow(m, ref, &f)) return V_WILD;
    if (m->map[f.node] == UNPLACED) return V_PENDING;
    if (f.kind == AF_PREF_INPUT) return node_input(m, f.node, f.index);
    const af_node *n = &m->g->nodes[m->map[f.node]];
    return f.index < n->n_outputs && n->outputs[f.index] >= 0 ? n->outputs[f.index] : V_NONE;
}

/* 1: holds, 0: violated, -1: not decidable yet. */
static int edge_state(const matcher *m, const af_pedge *e) {
    int at = m->map[e->node];
    if (at == UNPLACED) return -1;
    if (at == ABSENT) return 1; /* an absent node's edges only define its pass-through */
    int v = ref_value(m, e->src);
    if (v == V_PENDING) return -1;
    if (v == V_WILD) return 1;
    if (v == V_NONE) return 0;
    if (e->input >= 0) return node_input(m, e->node, e->input) == v;
    const af_node *n = &m->g->nodes[at];
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] == v) return 1;
    return 0;
}

static bool edges_ok(const matcher *m) {
    for (int k = 0; k < m->r->n_edges; k++)
        if (edge_state(m, &m->r->edges[k]) == 0) return false;
    return true;
}

/* ---- conditions ------------------------------------------------------------------------------ */

static bool cmp_num(double a, af_cmp op, double b) {
    bool eq = a == b || fabs(a - b) <= 1e-6 + 1e-5 * fabs(b);
    switch (op) {
    case AF_CMP_EQ: return eq;
    case AF_CMP_NE: return !eq;
    case AF_CMP_LT: return a < b && !eq;
    case AF_CMP_LE: return a < b || eq;
    case AF_CMP_GT: return a > b && !eq;
    case AF_CMP_GE: return a > b || eq;
    }
    return false;
}

static bool cmp_literal(const af_literal *a, af_cmp op, const af_literal *b) {
    af_literal x = *a;
    if (x.kind == AF_LIT_LIST && x.n == 1 && b->kind == AF_LIT_NUM) {
        x.kind = AF_LIT_NUM;
        x.num = x.list[0];
    }
    if (x.kind == AF_LIT_NUM && b->kind == AF_LIT_NUM) return cmp_num(x.num, op, b->num);
    bool eq;
    if (x.kind == AF_LIT_LIST && b->kind == AF_LIT_LIST) {
        eq = x.n == b->n;
        for (int i = 0; i < x.n && eq; i++) eq = cmp_num(x.list[i], AF_CMP_EQ, b->list[i]);
    } else if (x.kind == AF_LIT_STR && b->kind == AF_LIT_STR) {
        eq = !strcmp(x.str, b->str);
    } else {
        return false;
    }
    return op == AF_CMP_EQ ? eq : op == AF_CMP_NE ? !eq : false;
}

static bool attr_literal(const af_attr *a, af_literal *out) {
    memset(out, 0, sizeof *out);
    switch (a->type) {
    case AF_ATTR_INT: out->kind = AF_LIT_NUM, out->num = (double)a->i; return true;
    case AF_ATTR_FLOAT: out->kind = AF_LIT_NUM, out->num = a->f; return true;
    case AF_ATTR_STRING:
        if (!a->s || strlen(a->s) >= sizeof out->str) return false;
        out->kind = AF_LIT_STR;
        strcpy(out->str, a->s);
        return true;
    case AF_ATTR_INTS:
    case AF_ATTR_FLOATS:
        if (a->n > AF_PAT_MAX_LIST) return false;
        out->kind = AF_LIT_LIST;
        out->n = a->n;
        for (int i = 0; i < a->n; i++) out->list[i] = a->type == AF_ATTR_INTS ? (double)a->ints[i] : a->floats[i];
        return true;
    default: return false;
    }
}

static const af_value *const_value(const af_graph *g, int v) {
    const af_value *val = af_graph_const_value(g, v);
    return val && val->t.data ? val : NULL;
}

/* Clip's bound: the attribute (opset < 11), else the constant input; absent means unbounded. */
static bool clip_bound(const af_graph *g, const af_node *n, bool upper, double *out) {
    if (n->op != AF_OP_CLIP) return false;
    const af_attr *a = af_node_attr(n, upper ? "max" : "min");
    if (a) {
        *out = a->type == AF_ATTR_FLOAT ? a->f : a->type == AF_ATTR_INT ? (double)a->i : NAN;
        return !isnan(*out);
    }
    int k = upper ? 2 : 1;
    if (k >= n->n_inputs || n->inputs[k] < 0) {
        *out = upper ? INFINITY : -INFINITY;
        return true;
    }
    const af_value *c = const_value(g, n->inputs[k]);
    if (!c || af_tensor_numel(&c->t) != 1) return false;
    *out = af_tensor_get_f64(&c->t, 0);
    return true;
}

/* t broadcasts against out along one axis only (all other dims 1), or has one element. Along
 * axis 1 (per channel), t may also have out's batch, axis 0 (a squeeze-excite gate, one per
 * channel of each image; a symbolic batch matches a symbolic one, as in same_shape). */
static bool broadcasts_along(const af_tensor *t, const af_tensor *out, bool last) {
    if (t->rank < 0 || out->rank < 1 || t->rank > out->rank) return false;
    if (af_tensor_numel(t) == 1) return true;
    int axis = last ? out->rank - 1 : 1;
    if (axis >= out->rank || out->dims[axis] < 0) return false;
    int off = out->rank - t->rank;
    for (int d = 0; d < out->rank; d++) {
        int64_t td = d < off ? 1 : t->dims[d - off];
        const bool batch = !last && d == 0 && off == 0 && td == out->dims[0];
        if (d == axis ? td != out->dims[axis] : td != 1 && !batch) return false;
    }
    return true;
}

static bool same_shape(const af_tensor *a, const af_tensor *b) {
    if (a->rank < 0 || a->rank != b->rank) return false;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d]) return false; /* unknown dims (-1) count as equal to each other */
    return true;
}

static bool cond_holds(const matcher *m, const af_pcond *c) {
    const af_graph *g = m->g;
    const af_node *n = &g->nodes[m->map[c->node]];
    const af_tensor *out = n->n_outputs > 0 && n->outputs[0] >= 0 ? &g->values[n->outputs[0]].t : NULL;
    int v = V_NONE;
    if (c->kind <= AF_COND_VALUE) v = node_input(m, c->node, c->input);
    const af_value *k = v >= 0 ? const_value(g, v) : NULL;
    bool r = false;
    switch (c->kind) {
    case AF_COND_CONST: r = k != NULL; break;
    case AF_COND_SCALAR: r = k && af_tensor_numel(&k->t) == 1; break;
    case AF_COND_PER_CHANNEL:
    case AF_COND_PER_LAST: r = v >= 0 && out && broadcasts_along(&g->values[v].t, out, c->kind == AF_COND_PER_LAST); break;
    case AF_COND_SAME_SHAPE: r = v >= 0 && out && same_shape(&g->values[v].t, out); break;
    case AF_COND_VALUE: {
        int64_t ne = k ? af_tensor_numel(&k->t) : -1;
        r = ne >= 1 && ne <= MAX_VALUE_ELEMENTS;
        for (int64_t i = 0; r && i < ne; i++) r = cmp_num(af_tensor_get_f64(&k->t, i), c->cmp, c->value.num);
        break;
    }
    case AF_COND_SINGLE:
        r = out && !g->values[n->outputs[0]].is_output && af_readers_count(m->rd, n->outputs[0]) == 1;
        break;
    case AF_COND_ATTR: {
        const af_attr *a = af_node_attr(n, c->attr);
        af_literal lit;
        if (a) r = attr_literal(a, &lit) && cmp_literal(&lit, c->cmp, &c->value);
        else r = c->def.kind != AF_LIT_NONE && cmp_literal(&c->def, c->cmp, &c->value);
        break;
    }
    case AF_COND_CLIP_MIN:
    case AF_COND_CLIP_MAX: {
        double b;
        r = clip_bound(g, n, c->kind == AF_COND_CLIP_MAX, &b) && cmp_num(b, c->cmp, c->value.num);
        break;
    }
    }
    return c->negate ? !r : r;
}

static bool conds_ok(const matcher *m, int pn) {
    for (int i = 0; i < m->r->n_conds; i++)
        if (m->r->conds[i].node == pn && !cond_holds(m, &m->r->conds[i])) return false;
    return true;
}

/* ---- search ---------------------------------------------------------------------------------- */

/* Where pattern node y can be: one producer (*list NULL, *one set), the producers of a placed
 * node's inputs for a `*` edge from y (*list = producers, room for AF_FUSION_MAX_NODE_INPUTS), or
 * the readers of a value. Returns the number of candidates. Prefers a producer, then the shortest
 * list. */
static int locate(const matcher *m, int y, const int **list, int *one, int *producers) {
    const af_rule *r = m->r;
    int best = -1;
    *list = NULL;
    for (int k = 0; k < r->n_edges; k++) {
        const af_pedge *e = &r->edges[k];
        af_pref f;
        bool to_y = follow(m, e->src, &f) && f.node == y;
        if (to_y && e->node != y && m->map[e->node] >= 0 && e->input < 0 && f.kind == AF_PREF_OUTPUT) {
            /* y produces one of the values a placed node reads, any input (`*`): each producer */
            const af_node *c = &m->g->nodes[m->map[e->node]];
            int n = 0;
            for (int i = 0; i < c->n_inputs && i < AF_FUSION_MAX_NODE_INPUTS; i++) {
                const int v = c->inputs[i], p = v >= 0 ? m->g->values[v].producer : -1;
                if (p < 0 || m->g->values[v].kind != AF_VALUE_NODE) continue;
                bool seen = false;
                for (int j = 0; j < n && !seen; j++) seen = producers[j] == p;
                if (!seen) producers[n++] = p;
            }
            if (best < 0 || n < best) {
                best = n;
                *list = producers;
            }
        } else if (to_y && e->node != y && m->map[e->node] >= 0 && e->input >= 0) {
            int v = node_input(m, e->node, e->input);
            if (v < 0) continue;
            if (f.kind == AF_PREF_OUTPUT) { /* y produces what a placed node reads */
                int p = m->g->values[v].producer;
                if (m->g->values[v].kind != AF_VALUE_NODE || p < 0) return 0;
                *list = NULL;
                *one = p;
                return 1;
            }
            int n = af_readers_count(m->rd, v); /* y reads the same value as a placed node */
            if (best < 0 || n < best) {
                best = n;
                *list = m->rd->readers + m->rd->start[v];
            }
        } else if (e->node == y) { /* y reads a value already known */
            int v = ref_value(m, e->src);
            if (v < 0) continue;
            int n = af_readers_count(m->rd, v);
            if (best < 0 || n < best) {
                best = n;
                *list = m->rd->readers + m->rd->start[v];
            }
        }
    }
    if (best < 0) return 0;
    return best < MAX_READERS_EXAMINED ? best : MAX_READERS_EXAMINED;
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static bool same_nodes(const af_fusion_candidate *a, const int *nodes, int n) {
    return a->n_nodes == n && !memcmp(a->nodes, nodes, (size_t)n * sizeof *nodes);
}

/* The config's verdict on a legal group, or NULL when it leaves it to the cost layer. */
static const char *config_reason(const af_graph *g, const af_fusion_config *cfg, af_fusion_family family,
                                 const int *nodes, int n, char *buf, size_t size) {
    if (cfg->policy[family] == AF_POLICY_NEVER) {
        snprintf(buf, size, "%s %s", AF_PAT_REASON_NEVER, af_fusion_family_name(family));
        return buf;
    }
    for (int i = 0; i < n; i++) {
        const af_node *nd = &g->nodes[nodes[i]];
        if (nd->op < AF_OP_COUNT && cfg->no_fusion_ops[nd->op]) {
            snprintf(buf, size, "no_fusion_ops: %s", nd->op_type);
            return buf;
        }
    }
    if (cfg->max_fused_ops >= 1 && n > cfg->max_fused_ops) return "max_fused_ops";
    return NULL;
}

/* Builds the candidate the current assignment describes and judges it: false when it has fewer than
 * two nodes; otherwise c->reason is "" (legal, left to the cost layer) or why it cannot be fused. */
static bool judge(matcher *m, af_fusion_candidate *c) {
    const af_rule *r = m->r;
    memset(c, 0, sizeof *c);
    for (int i = 0; i < r->n_nodes; i++)
        if (m->map[i] >= 0) c->nodes[c->n_nodes++] = m->map[i];
    if (c->n_nodes < 2) return false;
    qsort(c->nodes, (size_t)c->n_nodes, sizeof *c->nodes, cmp_int);
    const af_node *last = &m->g->nodes[c->nodes[c->n_nodes - 1]];
    c->family = r->family;
    snprintf(c->rule, sizeof c->rule, "%s", r->name);
    c->anchor = r->family == AF_FUSION_ELEMENTWISE ? -1 : m->map[r->anchor];
    c->output = last->n_outputs > 0 ? last->outputs[0] : -1;
    char buf[sizeof c->reason];
    const char *why = c->output < 0 ? AF_PAT_REASON_CLOSED
                                    : af_pattern_legality(m->g, m->rd, m->ls, c->nodes, c->n_nodes, c->output);
    if (!why) why = config_reason(m->g, m->cfg, r->family, c->nodes, c->n_nodes, buf, sizeof buf);
    if (why) snprintf(c->reason, sizeof c->reason, "%s", why);
    return true;
}

#define MAX_SHRINK_NODES 12 /* optional nodes considered for dropping: 2^12 subsets at most */

/* The match was rejected: look for the largest consistent sub-match (some present optional nodes
 * made absent, every edge still holding) that is legal and allowed. */
static void shrink(matcher *m) {
    const af_rule *r = m->r;
    int opt[MAX_SHRINK_NODES], n_opt = 0;
    for (int k = r->n_nodes - 1; k >= 1 && n_opt < MAX_SHRINK_NODES; k--) { /* the last-placed first */
        int y = r->order[k];
        if (r->nodes[y].optional && m->map[y] >= 0) opt[n_opt++] = y;
    }
    int saved[AF_PAT_MAX_NODES];
    memcpy(saved, m->map, sizeof saved);
    for (int drop = 1; drop <= n_opt && !m->have_good; drop++) {
        for (unsigned mask = 1; mask < 1u << n_opt && !m->have_good; mask++) {
            if (__builtin_popcount(mask) != drop) continue;
            for (int j = 0; j < n_opt; j++)
                if (mask >> j & 1u) m->map[opt[j]] = ABSENT;
            af_fusion_candidate c;
            if (edges_ok(m) && judge(m, &c) && !c.reason[0]) {
                m->good = c;
                m->have_good = true;
            }
            memcpy(m->map, saved, sizeof saved);
        }
    }
}

/* The first complete assignment is the greediest one (optional nodes are tried present first). */
static void on_match(matcher *m) {
    m->stop = true;
    af_fusion_candidate c;
    if (!judge(m, &c)) return;
    if (!c.reason[0]) {
        m->good = c;
        m->have_good = true;
        return;
    }
    m->bad = c;
    m->have_bad = true;
    if (strncmp(c.reason, AF_PAT_REASON_NEVER, strlen(AF_PAT_REASON_NEVER))) /* an excluded family needs no search */
        shrink(m);
}

static void place(matcher *m, int k, int y, int cand);

static void search(matcher *m, int k) {
    if (m->stop) return;
    const af_rule *r = m->r;
    if (k == r->n_nodes) {
        on_match(m);
        return;
    }
    int y = r->order[k];
    const af_pnode *pn = &r->nodes[y];
    const int *list;
    int one = -1;
    int producers[AF_FUSION_MAX_NODE_INPUTS]; /* locate's list for a `*` edge, at this depth */
    int n = locate(m, y, &list, &one, producers);
    for (int i = 0; i < n && !m->stop; i++) {
        int cand = list ? list[i] : one;
        if (++m->steps > MAX_STEPS) {
            m->stop = true;
            return;
        }
        if (!op_matches(pn, m->g->nodes[cand].op) || m->g->nodes[cand].n_inputs > AF_FUSION_MAX_NODE_INPUTS) continue;
        bool used = false;
        for (int j = 0; j < r->n_nodes && !used; j++) used = m->map[j] == cand;
        if (!used) place(m, k, y, cand);
    }
    if (pn->optional && !m->stop) {
        m->map[y] = ABSENT;
        if (edges_ok(m)) search(m, k + 1);
        m->map[y] = UNPLACED;
    }
}

/* Tries graph node cand as pattern node y (both input orders of a commutative op), then goes on. */
static void place(matcher *m, int k, int y, int cand) {
    int perms = commutative(&m->g->nodes[cand]) ? 2 : 1;
    for (int p = 0; p < perms && !m->stop; p++) {
        m->map[y] = cand;
        m->perm[y] = (unsigned char)p;
        if (conds_ok(m, y) && edges_ok(m)) search(m, k + 1);
    }
    m->map[y] = UNPLACED;
    m->perm[y] = 0;
}

/* ---- the pass -------------------------------------------------------------------------------- */

static uint64_t set_hash(const af_fusion_candidate *c) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)c->family;
    for (int i = 0; i < c->n_nodes; i++) h = (h ^ (uint64_t)(unsigned)c->nodes[i]) * 1099511628211ull;
    return h ^ (uint64_t)c->n_nodes;
}

static bool is_subset(const af_fusion_candidate *a, const af_fusion_candidate *b) {
    int j = 0;
    for (int i = 0; i < a->n_nodes; i++) {
        while (j < b->n_nodes && b->nodes[j] < a->nodes[i]) j++;
        if (j == b->n_nodes || b->nodes[j] != a->nodes[i]) return false;
    }
    return true;
}

/* Within one rule's candidates [lo, hi): drops a match contained in a larger one (the same block
 * seen from a later anchor), keeping an undecided match unless the larger one is undecided too. */
static void drop_contained(const af_graph *g, af_fusion_candidates *cs, int lo, int hi, bool *drop, int *count,
                           int *start, int *list) {
    if (hi - lo < 2) return;
    for (int i = 0; i <= g->n_nodes; i++) count[i] = 0;
    for (int c = lo; c < hi; c++)
        for (int k = 0; k < cs->items[c].n_nodes; k++) count[cs->items[c].nodes[k] + 1]++;
    start[0] = 0;
    for (int i = 0; i < g->n_nodes; i++) start[i + 1] = start[i] + count[i + 1];
    for (int i = 0; i <= g->n_nodes; i++) count[i] = start[i];
    for (int c = lo; c < hi; c++)
        for (int k = 0; k < cs->items[c].n_nodes; k++) list[count[cs->items[c].nodes[k]]++] = c;
    for (int c = lo; c < hi; c++) {
        const af_fusion_candidate *x = &cs->items[c];
        int best = x->nodes[0];
        for (int k = 1; k < x->n_nodes; k++)
            if (start[x->nodes[k] + 1] - start[x->nodes[k]] < start[best + 1] - start[best]) best = x->nodes[k];
        for (int j = start[best]; j < start[best + 1] && !drop[c - lo]; j++) {
            const af_fusion_candidate *y = &cs->items[list[j]];
            if (list[j] == c || drop[list[j] - lo] || y->n_nodes <= x->n_nodes) continue;
            if ((y->reason[0] && !x->reason[0]) || !is_subset(x, y)) continue;
            drop[c - lo] = true;
        }
    }
}

/* Removes candidates from `from` on: dropped ones, and repeats of an earlier (family, node set). */
static af_status compact(af_fusion_candidates *cs, int from, bool *drop, af_error *err) {
    int n = cs->n - from, cap = 1;
    while (cap < 2 * n) cap *= 2;
    int *table = af_malloc((size_t)cap * sizeof *table);
    if (!table) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory listing fusion candidates");
    for (int i = 0; i < cap; i++) table[i] = -1;
    int w = from;
    for (int i = from; i < cs->n; i++) {
        if (drop[i - from]) continue;
        af_fusion_candidate *c = &cs->items[i];
        uint64_t h = set_hash(c);
        size_t slot = (size_t)(h & (uint64_t)(cap - 1));
        bool dup = false;
        for (; table[slot] >= 0; slot = (slot + 1) & (size_t)(cap - 1)) {
            const af_fusion_candidate *o = &cs->items[table[slot]];
            if (o->family == c->family && same_nodes(o, c->nodes, c->n_nodes)) {
                dup = true;
                break;
            }
        }
        if (dup) continue;
        if (w != i) cs->items[w] = *c;
        table[slot] = w++;
    }
    cs->n = w;
    af_free(table);
    return AF_OK;
}

static af_status match_rule(matcher *m, af_fusion_candidates *out, af_error *err) {
    const af_rule *r = m->r;
    const af_pnode *an = &r->nodes[r->anchor];
    for (int i = 0; i < m->g->n_nodes; i++) {
        if (!op_matches(an, m->g->nodes[i].op)) continue;
        for (int j = 0; j < r->n_nodes; j++) m->map[j] = UNPLACED, m->perm[j] = 0;
        m->steps = 0;
        m->stop = m->have_good = m->have_bad = false;
        place(m, 0, r->anchor, i);
        af_status st = AF_OK;
        if (m->have_bad) st = af_fusion_candidates_push(out, &m->bad, err);
        if (st == AF_OK && m->have_good) st = af_fusion_candidates_push(out, &m->good, err);
        if (st != AF_OK) return st;
    }
    return AF_OK;
}

af_status af_pattern_find(const af_graph *g, const af_rule_set *rs, const af_fusion_config *cfg,
                          af_fusion_candidates *out, af_error *err) {
    if (!g || !out) return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "af_pattern_find: NULL argument");
    af_fusion_config defaults;
    if (!cfg) {
        af_fusion_config_default(&defaults);
        cfg = &defaults;
    }
    const int first = out->n;
    af_rule_set *own = NULL;
    af_readers rd = {0};
    af_legal_scratch ls = {0};
    bool *flags = NULL;
    int *count = NULL, *start = NULL, *list = NULL;
    af_status st = AF_OK;
    if (cfg->fusion_level <= 0 || g->n_nodes == 0) return AF_OK;
    if (!rs) {
        if ((st = af_rules_from_config(cfg, &own, err)) != AF_OK) return st;
        rs = own;
    }
    if ((st = af_readers_build(g, &rd, err)) != AF_OK) goto done;
    if ((st = af_legal_scratch_init(&ls, g, err)) != AF_OK) goto done;
    matcher m = {.g = g, .rd = &rd, .ls = &ls, .cfg = cfg};
    int *rule_end = af_malloc((size_t)(rs->n + 1) * sizeof *rule_end);
    if (!rule_end) {
        st = af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory matching fusion rules");
        goto done;
    }
    rule_end[0] = first;
    for (int i = 0; i < rs->n && st == AF_OK; i++) {
        m.r = &rs->rules[i];
        st = match_rule(&m, out, err);
        rule_end[i + 1] = out->n;
    }
    if (st == AF_OK) {
        size_t n_new = (size_t)(out->n - first), members = 0;
        for (int i = first; i < out->n; i++) members += (size_t)out->items[i].n_nodes;
        flags = af_calloc(n_new ? n_new : 1, sizeof *flags);
        count = af_malloc((size_t)(g->n_nodes + 1) * sizeof *count);
        start = af_malloc((size_t)(g->n_nodes + 1) * sizeof *start);
        list = af_malloc((members ? members : 1) * sizeof *list);
        if (!flags || !count || !start || !list) {
            st = af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory listing fusion candidates");
        } else {
            for (int i = 0; i < rs->n; i++)
                drop_contained(g, out, rule_end[i], rule_end[i + 1], flags + (rule_end[i] - first), count, start, list);
            st = compact(out, first, flags, err);
        }
    }
    af_free(rule_end);
    if (st == AF_OK && cfg->fusion_level >= 3) {
        /* Discovery takes the nodes no undecided rule match of a family other than elementwise_chain
         * holds (discover.c). */
        st = af_pattern_discover(g, &rd, &ls, cfg, first, out, err);
    }
done:
    if (st != AF_OK) out->n = first;
    af_free(flags);
    af_free(count);
    af_free(start);
    af_free(list);
    af_legal_scratch_free(&ls);
    af_readers_free(&rd);
    af_rules_free(own);
    return st;
}
