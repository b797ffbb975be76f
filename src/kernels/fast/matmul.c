/*
 * Fast float32 MatMul and Gemm on the packed GEMM. A constant right operand (weights) is packed
 * once at prepare; leading batch dims of the left operand fold into M when the right operand is a
 * plain matrix. Two runtime operands (attention's QK^T and PV) run as a batched GEMM over their
 * batch dims, with stride 0 for an operand whose batch dims are all 1. Epilogue coordinates: m and
 * n index the output's last two dims, batch the flattened leading dims (0 when folded into M).
 */
#include <string.h>

#include "kernels/gemm/gemm.h"
#include "kernels/kernel.h"
#include "util/alloc.h"
#include "util/error.h"

typedef struct matmul_state {
    af_isa isa;
    bool gemm;               /* the Gemm op: 2-D, transA/transB, alpha, C */
    bool trans_a, trans_b;
    float alpha;
    int64_t K, N;            /* of the packed B */
    af_gemm_packed *packed_b; /* NULL: B is read at run time */
    af_epilogue own;          /* Gemm's C term as a bias (vectors point into graph constants or `c_scaled`) */
    float *c_scaled;          /* beta * C when beta != 1 */
} matmul_state;

static void matmul_free(void *p) {
    matmul_state *s = p;
    af_gemm_packed_free(s->packed_b);
    af_free(s->c_scaled);
    af_free(s);
}

static af_status combined(const matmul_state *s, const af_epilogue *epi, af_epilogue *out) {
    *out = s->own;
    for (int i = 0; epi && i < epi->n_steps; i++) {
        af_status st = af_epilogue_push(out, &epi->steps[i]);
        if (st != AF_OK) return st;
    }
    return AF_OK;
}

static void set_workspace(af_gemm_desc *d, const af_kernel *k, void *ws, af_threadpool *pool) {
    size_t need = af_sgemm_workspace_size(d, af_threadpool_n_threads(pool));
    if (ws && need <= k->workspace_bytes) {
        d->workspace = ws;
        d->workspace_size = need;
    }
}

static bool same_batch_dims(const af_tensor *a, const af_tensor *b) {
    for (int d = 0; d < a->rank - 2; d++)
        if (a->dims[d] != b->dims[d]) return false;
    return true;
}

/* The product of the batch dims (all but the last two). */
static int64_t batch_count(const af_tensor *t) {
    int64_t b = 1;
    for (int d = 0; d < t->rank - 2; d++) b *= t->dims[d];
    return b;
}

static af_status matmul_run(const af_kernel *k, af_op_ctx *c, const af_epilogue *epi, af_threadpool *pool,
                            void *workspace) {
    const matmul_state *s = k->state;
    const af_tensor *a = af_ctx_input(c, 0), *b = af_ctx_input(c, 1);
    af_tensor *y = af_ctx_output(c, 0);
    af_gemm_desc d = af_gemm_desc_default();
    d.isa = s->isa;
    d.alpha = s->alpha;
    af_epilogue e;
    if (combined(s, epi, &e) != AF_OK) return af_ctx_fail(c, AF_ERR_LIMIT, "epilogue too long");
    d.epilogue = e.n_steps ? &e : NULL;
    if (s->gemm) { /* 2-D: op(A) is M x K */
        d.M = s->trans_a ? a->dims[1] : a->dims[0];
        d.K = s->trans_a ? a->dims[0] : a->dims[1];
        d.N = s->N;
        d.A = a->data;
        d.lda = a->dims[1];
        d.trans_a = s->trans_a;
        if (a->rank != 2 || d.K != s->K) return af_ctx_fail(c, AF_ERR_RUNTIME, "A does not match the packed B");
    } else {
        if (a->rank < 2 || y->rank < 2) return af_ctx_fail(c, AF_ERR_RUNTIME, "fast MatMul needs rank >= 2");
        d.K = a->dims[a->rank - 1];
        d.N = y->dims[y->rank - 1];
        if (s->packed_b) { /* [.., M, K] x [K, N]: all of A's rows are one M */
            d.M = af_tensor_numel(a) / (d.K ? d.K : 1);
            if (d.K != s->K || d.N != s->N) return af_ctx_fail(c, AF_ERR_RUNTIME, "A does not match the packed B");
        } else {
            int64_t ba = batch_count(a), bb = batch_count(b), by = batch_count(y);
            d.M = a->dims[a->rank - 2];
            d.batch = by;
            d.stride_a = ba == 1 ? 0 : d.M * d.K;
            d.stride_b = bb == 1 ? 0 : d.K * d.N;
            d.stride_c = d.M * d.N;
            /* Batch dims that broadcast other than all-or-nothing: the reference handles them. */
            if ((ba != 1 && ba != by) || (bb != 1 && bb != by) || b->dims[b->rank - 2] != d.K ||
                (ba != 1 && bb != 1 && !same_batch_dims(a, b)))
                return epi && epi->n_steps ? af_ctx_fail(c, AF_ERR_RUNTIME, "batch dims do not match")
                                           : af_op_info(c->node->op)->run(c);
            d.B = b->data;
            d.ldb = d.N;
        }
        d.A = a->data;
        d.lda = d.K;
    }
    d.packed_b = s->packed_b;
    d.C = y->data;
    d.ldc = d.N;
    set_workspace(&d, k, workspace, pool);
    af_status st = af_sgemm(&d, pool);
    return st == AF_OK ? AF_OK : af_ctx_fail(c, st, "GEMM failed");
}

/* Gemm's C as an epilogue step: a bias along N, along M, a scalar, or a full M x N constant. */
static af_status gemm_bias(matmul_state *s, const af_tensor *cv, float beta, int64_t M, int64_t N, bool *ok) {
    *ok = true;
    if (!cv || beta == 0.0f) return AF_OK;
    int64_t numel = af_tensor_numel(cv);
    const float *p = cv->data;
    if (beta != 1.0f) {
        s->c_scaled = af_malloc((size_t)(numel ? numel : 1) * sizeof(float));
        if (!s->c_scaled) return AF_ERR_OUT_OF_MEMORY;
        for (int64_t i = 0; i < numel; i++) s->c_scaled[i] = beta * p[i];
        p = s->c_scaled;
    }
    int64_t rows = cv->rank == 2 ? cv->dims[0] : 1, cols = cv->rank >= 1 ? cv->dims[cv->rank - 1] : 1;
    if (cv->rank > 2) *ok = false;
    else if (numel == 1) af_epilogue_unary(&s->own, AF_EPI_ADD_SCALAR, p[0], 0);
    else if (rows == 1 && cols == N) af_epilogue_vec(&s->own, AF_EPI_BIAS_COL, p, NULL);
    else if (rows == M && cols == 1 && cv->rank == 2) af_epilogue_vec(&s->own, AF_EPI_BIAS_ROW, p, NULL);
    else if (rows == M && cols == N && M > 0) af_epilogue_residual(&s->own, p, N);
    else *ok = false;
    return AF_OK;
}

af_status af_fast_matmul_prepare(const af_kernel_request *req, af_kernel *k, af_error *err) {
    const af_node *n = req->node;
    const af_tensor *a = af_kernel_input(req, 0), *b = af_kernel_input(req, 1), *cv = af_kernel_input(req, 2);
    const af_tensor *y = n->n_outputs > 0 && n->outputs[0] >= 0 ? &req->graph->values[n->outputs[0]].t : NULL;
    if (!a || !b || !y || a->dtype != AF_DTYPE_FLOAT || b->dtype != AF_DTYPE_FLOAT || a->rank < 2 || b->rank < 2 ||
        y->rank < 2)
        return AF_OK;
    bool gemm = n->op == AF_OP_GEMM;
    bool trans_b = gemm && af_node_attr_int(n, "transB", 0);
    if (gemm && (a->rank != 2 || b->rank != 2 || (cv && (!cv->data || cv->dtype != AF_DTYPE_FLOAT)))) return AF_OK;
    if (b->data && b->rank != 2) return AF_OK;        /* constant batched weights: the reference */
    if (!b->data && (gemm || b->rank < 2)) return AF_OK; /* Gemm with a runtime B: rare, reference */
    if (!b->data) { /* both at run time: batched; needs known ranks with matching batch layout */
        if (a->rank != b->rank || a->rank != y->rank) return AF_OK;
    }
    matmul_state *s = af_calloc(1, sizeof *s);
    if (!s) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory preparing '%s'", n->name);
    s->isa = req->choice.isa;
    s->gemm = gemm;
    s->trans_a = gemm && af_node_attr_int(n, "transA", 0);
    s->trans_b = trans_b;
    s->alpha = gemm ? af_node_attr_float(n, "alpha", 1.0f) : 1.0f;
    af_epilogue_init(&s->own);
    af_status st = AF_OK;
    if (b->data) {
        s->K = trans_b ? b->dims[1] : b->dims[0];
        s->N = trans_b ? b->dims[0] : b->dims[1];
        /* The rows of op(A) it will meet, where the shapes say (0: not known). */
        int64_t rows = 0;
        if (gemm) rows = s->trans_a ? a->dims[1] : a->dims[0];
        else if (s->N > 0 && af_tensor_numel(y) > 0) rows = af_tensor_numel(y) / s->N;
        st = af_gemm_pack_b_for_rows(req->choice.isa, rows > 0 ? rows : 0, 1, s->K, s->N, b->data, b->dims[1],
                                     trans_b, 0, &s->packed_b);
        if (st != AF_OK) goto fail;
    }
    if (gemm) {
        int64_t M = s->trans_a ? a->dims[1] : a->dims[0];
        bool ok;
        st = gemm_bias(s, cv, af_node_attr_float(n, "beta", 1.0f), M, s->N, &ok);
        if (st != AF_OK) goto fail;
        if (!ok) goto skip;
    }
    /* Scratch for the largest GEMM this node runs with its static shapes; dynamic shapes may
     * outgrow it, and the GEMM then allocates its own (correct, slower). */
    af_gemm_desc d = af_gemm_desc_default();
    d.isa = req->choice.isa;
    d.K = a->dims[a->rank - 1] > 0 ? a->dims[a->rank - 1] : 1;
    d.N = y->dims[y->rank - 1] > 0 ? y->dims[y->rank - 1] : 1;
    d.M = af_tensor_numel(y) > 0 ? af_tensor_numel(y) / d.N : 1;
    d.packed_b = s->packed_b;
    k->workspace_bytes = af_sgemm_workspace_size(&d, req->choice.n_threads > 0 ? req->choice.n_threads : 1);
    k->name = s->packed_b ? "f32_gemm_packed_b" : "f32_gemm_batched";
    k->state = s;
    k->free_state = matmul_free;
    k->run = matmul_run;
    k->takes_epilogue = true;
    if (s->packed_b) k->packed_inputs = 1u << 1;
    if (s->packed_b) k->weight_bytes = af_gemm_packed_bytes(s->packed_b);
    return AF_OK;
skip:
    matmul_free(s);
    return AF_OK;
fail:
    matmul_free(s);
    if (st == AF_ERR_OUT_OF_MEMORY) return af_errorf(err, st, "out of memory preparing '%s'", n->name);
    return AF_OK;
}
