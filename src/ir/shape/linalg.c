/* Shape and dtype inference for MatMul (numpy semantics), Gemm and Einsum, and the Einsum equation
 * parser its kernel shares (linalg.h). */
#include "ir/shape/linalg.h"

#include <string.h>

#define EINSUM_ELLIPSIS (-1)

static bool numeric(af_dtype t) { return t != AF_DTYPE_STRING && t != AF_DTYPE_BOOL && af_dtype_size(t) > 0; }

static af_status check_dtype(const af_op_ctx *c, af_dtype t) {
    if (t == AF_DTYPE_UNDEFINED || numeric(t)) return AF_OK;
    if (t == AF_DTYPE_BOOL) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "input dtype bool is not allowed");
    return af_ctx_fail(c, AF_ERR_UNSUPPORTED, "dtype %s is not supported", af_dtype_name(t));
}

/* The operands' common dtype; UNDEFINED only when all are unknown. */
static af_status common_dtype(const af_op_ctx *c, int n, const af_tensor *const *in, af_dtype *out) {
    *out = AF_DTYPE_UNDEFINED;
    for (int i = 0; i < n; i++) {
        if (!in[i] || in[i]->dtype == AF_DTYPE_UNDEFINED) continue;
        af_status st = check_dtype(c, in[i]->dtype);
        if (st != AF_OK) return st;
        if (*out != AF_DTYPE_UNDEFINED && *out != in[i]->dtype)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "inputs have different dtypes %s and %s",
                               af_dtype_name(*out), af_dtype_name(in[i]->dtype));
        *out = in[i]->dtype;
    }
    return AF_OK;
}

/* Two dims that must be equal; -1 (unknown) agrees with anything. */
static bool dims_agree(int64_t a, int64_t b) { return a < 0 || b < 0 || a == b; }

af_status af_infer_MAT_MUL(af_op_ctx *c) {
    const af_tensor *a = af_ctx_input(c, 0), *b = af_ctx_input(c, 1);
    af_tensor *y = af_ctx_output(c, 0);
    if (!a || !b || !y) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs inputs A, B and output Y");
    const af_tensor *ab[2] = {a, b};
    af_dtype dt;
    af_status st = common_dtype(c, 2, ab, &dt);
    if (st != AF_OK) return st;
    *y = (af_tensor){.dtype = dt, .rank = -1};
    if (a->rank < 0 || b->rank < 0) return AF_OK;
    if (a->rank == 0 || b->rank == 0) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "inputs must have rank >= 1");
    int64_t k_a = a->dims[a->rank - 1], k_b = b->dims[b->rank == 1 ? 0 : b->rank - 2];
    if (!dims_agree(k_a, k_b))
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "A has %lld columns but B has %lld rows", (long long)k_a,
                           (long long)k_b);
    /* Batch dims: all but the last two, broadcast like numpy; 1-D operands have none. */
    af_tensor ba = {.rank = a->rank > 2 ? a->rank - 2 : 0}, bb = {.rank = b->rank > 2 ? b->rank - 2 : 0};
    memcpy(ba.dims, a->dims, sizeof(int64_t) * (size_t)ba.rank);
    memcpy(bb.dims, b->dims, sizeof(int64_t) * (size_t)bb.rank);
    const af_tensor *batch[2] = {&ba, &bb};
    af_tensor out = {0};
    st = af_shape_broadcast(c, 2, batch, &out);
    if (st != AF_OK) return st;
    if (a->rank > 1) out.dims[out.rank++] = a->dims[a->rank - 2];
    if (b->rank > 1) out.dims[out.rank++] = b->dims[b->rank - 1];
    y->rank = out.rank;
    memcpy(y->dims, out.dims, sizeof(int64_t) * (size_t)out.rank);
    return AF_OK;
}

af_status af_infer_GEMM(af_op_ctx *c) {
    const af_tensor *a = af_ctx_input(c, 0), *b = af_ctx_input(c, 1), *cc = af_ctx_input(c, 2);
    af_tensor *y = af_ctx_output(c, 0);
    if (!a || !b || !y) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs inputs A, B and output Y");
    const af_tensor *abc[3] = {a, b, cc};
    af_dtype dt;
    af_status st = common_dtype(c, 3, abc, &dt);
    if (st != AF_OK) return st;
    *y = (af_tensor){.dtype = dt, .rank = 2, .dims = {-1, -1}};
    if (a->rank >= 0 && a->rank != 2) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "A has rank %d, needs 2", a->rank);
    if (b->rank >= 0 && b->rank != 2) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "B has rank %d, needs 2", b->rank);
    bool ta = af_node_attr_int(c->node, "transA", 0) != 0, tb = af_node_attr_int(c->node, "transB", 0) != 0;
    int64_t m = -1, ka = -1, kb = -1, n = -1;
    if (a->rank == 2) {
        m = a->dims[ta ? 1 : 0];
        ka = a->dims[ta ? 0 : 1];
    }
    if (b->rank == 2) {
        kb = b->dims[tb ? 1 : 0];
        n = b->dims[tb ? 0 : 1];
    }
    if (!dims_agree(ka, kb))
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "A has %lld columns but B has %lld rows (after transA/transB)",
                           (long long)ka, (long long)kb);
    y->dims[0] = m;
    y->dims[1] = n;
    if (cc && cc->rank >= 0) {
        /* C broadcasts one way: right-aligned, each dim 1 or equal to Y's. */
        if (cc->rank > 2) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "C has rank %d, at most 2", cc->rank);
        for (int d = 0; d < cc->rank; d++) {
            int64_t cd = cc->dims[d], yd = y->dims[2 - cc->rank + d];
            if (cd != 1 && !dims_agree(cd, yd))
                return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "C dim %d is %lld, cannot broadcast to %lld", d,
                                   (long long)cd, (long long)yd);
        }
    }
    return AF_OK;
}

/* Parses one term into label ids with EINSUM_ELLIPSIS for "..."; returns an error text or NULL. */
static const char *parse_term(const char *s, size_t len, int *ids, int *n, bool *ell) {
    *n = 0;
    *ell = false;
    for (size_t i = 0; i < len; i++) {
        int id;
        if (s[i] >= 'A' && s[i] <= 'Z') {
            id = s[i] - 'A';
        } else if (s[i] >= 'a' && s[i] <= 'z') {
            id = 26 + s[i] - 'a';
        } else if (s[i] == '.') {
            if (*ell) return "has two ellipses";
            if (i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.') return "has a '.' outside an ellipsis";
            *ell = true;
            i += 2;
            id = EINSUM_ELLIPSIS;
        } else {
            return "has a character that is not a letter";
        }
        if (*n == AF_MAX_RANK + 1) return "has more labels than the highest supported rank";
        ids[(*n)++] = id;
    }
    return NULL;
}

/* Folds one more occurrence of a label into its size; a size of 1 broadcasts against any other. */
static bool merge_size(int64_t *cur, int64_t s) {
    if (*cur == -2)
        *cur = s;
    else if (s == -1)
        *cur = *cur == 1 ? -1 : *cur;
    else if (s == 1)
        return true;
    else if (*cur == -1 || *cur == 1)
        *cur = s;
    else if (*cur != s)
        return false;
    return true;
}

af_status af_linalg_einsum_parse(const af_op_ctx *c, af_linalg_einsum *e) {
    memset(e, 0, sizeof *e);
    const char *eq = af_node_attr_string(c->node, "equation", NULL);
    if (!eq) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs attribute equation");
    char buf[512];
    size_t len = 0;
    for (const char *p = eq; *p; p++) {
        if (*p == ' ' || *p == '\t') continue;
        if (len + 1 >= sizeof buf) return af_ctx_fail(c, AF_ERR_LIMIT, "equation is too long");
        buf[len++] = *p;
    }
    buf[len] = 0;
    const char *arrow = strstr(buf, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - buf) : len;
    if (c->n_inputs < 1) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs at least one input");
    if (c->n_inputs > AF_LINALG_EINSUM_MAX_INPUTS)
        return af_ctx_fail(c, AF_ERR_UNSUPPORTED, "%d inputs, at most %d are supported", c->n_inputs,
                           AF_LINALG_EINSUM_MAX_INPUTS);
    e->n_inputs = c->n_inputs;

    int ids[AF_LINALG_EINSUM_MAX_INPUTS][AF_MAX_RANK + 1], n_ids[AF_LINALG_EINSUM_MAX_INPUTS];
    bool ell[AF_LINALG_EINSUM_MAX_INPUTS];
    int seen[AF_LINALG_EINSUM_LETTERS] = {0};
    size_t start = 0;
    int t = 0;
    for (size_t i = 0; i <= lhs_len; i++) {
        if (i < lhs_len && buf[i] != ',') continue;
        if (t == e->n_inputs)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "equation '%s' has more terms than the %d inputs", eq,
                               e->n_inputs);
        const char *why = parse_term(buf + start, i - start, ids[t], &n_ids[t], &ell[t]);
        if (why) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "term %d of equation '%s' %s", t, eq, why);
        for (int k = 0; k < n_ids[t]; k++)
            if (ids[t][k] != EINSUM_ELLIPSIS) seen[ids[t][k]]++;
        t++;
        start = i + 1;
    }
    if (t != e->n_inputs)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "equation '%s' has %d terms for %d inputs", eq, t, e->n_inputs);
    int out_ids[AF_MAX_RANK + 1], n_out = 0;
    bool out_ell = false;
    if (arrow) {
        const char *why = parse_term(arrow + 2, len - lhs_len - 2, out_ids, &n_out, &out_ell);
        if (why) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "output of equation '%s' %s", eq, why);
        bool used[AF_LINALG_EINSUM_LETTERS] = {false};
        for (int k = 0; k < n_out; k++) {
            int id = out_ids[k];
            if (id == EINSUM_ELLIPSIS) continue;
            if (!seen[id] || used[id])
                return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "output label '%c' of equation '%s' is %s",
                                   id < 26 ? 'A' + id : 'a' + id - 26, eq, used[id] ? "repeated" : "in no input");
            used[id] = true;
        }
    }

    for (int i = 0; i < e->n_inputs; i++) {
        const af_tensor *x = af_ctx_input(c, i);
        if (!x) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "input %d is missing", i);
        if (x->rank < 0) return AF_OK; /* known stays false */
    }
    /* The ellipsis covers the dims the letters leave over; all ellipses broadcast together. */
    int n_ell = 0, ell_dims[AF_LINALG_EINSUM_MAX_INPUTS];
    for (int i = 0; i < e->n_inputs; i++) {
        int rank = af_ctx_input(c, i)->rank, letters = n_ids[i] - ell[i];
        if (ell[i] ? letters > rank : letters != rank)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "term %d of equation '%s' has %d labels for rank %d", i,
                               eq, letters, rank);
        ell_dims[i] = rank - letters;
        if (ell_dims[i] > n_ell) n_ell = ell_dims[i];
    }
    e->n_labels = AF_LINALG_EINSUM_LETTERS + n_ell;
    for (int l = 0; l < AF_LINALG_EINSUM_MAX_LABELS; l++) e->size[l] = -2;
    for (int i = 0; i < e->n_inputs; i++) {
        const af_tensor *x = af_ctx_input(c, i);
        e->rank[i] = x->rank;
        int d = 0;
        for (int k = 0; k < n_ids[i]; k++) {
            if (ids[i][k] != EINSUM_ELLIPSIS) {
                e->label[i][d++] = ids[i][k];
                continue;
            }
            for (int q = 0; q < ell_dims[i]; q++) e->label[i][d++] = AF_LINALG_EINSUM_LETTERS + n_ell - ell_dims[i] + q;
        }
        for (d = 0; d < x->rank; d++) {
            int l = e->label[i][d];
            if (merge_size(&e->size[l], x->dims[d])) continue;
            if (l < AF_LINALG_EINSUM_LETTERS)
                return af_ctx_fail(c, AF_ERR_INVALID_MODEL,
                                   "equation '%s': label '%c' is %lld in input %d (dim %d) but %lld elsewhere", eq,
                                   l < 26 ? 'A' + l : 'a' + l - 26, (long long)x->dims[d], i, d, (long long)e->size[l]);
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL,
                               "equation '%s': ellipsis dim %lld in input %d (dim %d) does not broadcast with %lld", eq,
                               (long long)x->dims[d], i, d, (long long)e->size[l]);
        }
    }

    /* Output: as written, or implicitly the ellipsis dims then the letters seen once. */
    if (!arrow) {
        out_ell = n_ell > 0;
        if (out_ell) out_ids[n_out++] = EINSUM_ELLIPSIS;
        for (int l = 0; l < AF_LINALG_EINSUM_LETTERS; l++) {
            if (seen[l] != 1) continue;
            if (n_out == AF_MAX_RANK + 1) return af_ctx_fail(c, AF_ERR_LIMIT, "output rank exceeds %d", AF_MAX_RANK);
            out_ids[n_out++] = l;
        }
    }
    if (n_out - out_ell + (out_ell ? n_ell : 0) > AF_MAX_RANK)
        return af_ctx_fail(c, AF_ERR_LIMIT, "output rank exceeds %d", AF_MAX_RANK);
    for (int k = 0; k < n_out; k++) {
        if (out_ids[k] != EINSUM_ELLIPSIS) {
            e->out_label[e->out_rank++] = out_ids[k];
            continue;
        }
        for (int q = 0; q < n_ell; q++) e->out_label[e->out_rank++] = AF_LINALG_EINSUM_LETTERS + q;
    }
    e->known = true;
    return AF_OK;
}

af_status af_infer_EINSUM(af_op_ctx *c) {
    af_tensor *y = af_ctx_output(c, 0);
    if (!y) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs output Output");
    af_dtype dt;
    af_status st = common_dtype(c, c->n_inputs, c->inputs, &dt);
    if (st != AF_OK) return st;
    af_linalg_einsum e;
    st = af_linalg_einsum_parse(c, &e);
    if (st != AF_OK) return st;
    *y = (af_tensor){.dtype = dt, .rank = -1};
    if (!e.known) return AF_OK;
    y->rank = e.out_rank;
    for (int d = 0; d < e.out_rank; d++) y->dims[d] = e.size[e.out_label[d]];
    return AF_OK;
}
