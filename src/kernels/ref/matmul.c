/* Reference kernels for MatMul (numpy semantics: 1-D promotion, broadcast batch dims) and Gemm, and
 * the compute views of linalg.h. Accumulation is in double for floating types. */
#include <math.h>
#include <string.h>

#include "kernels/ref/linalg.h"
#include "util/alloc.h"

af_linalg_kind af_linalg_kind_of(af_dtype dtype) {
    switch (dtype) {
    case AF_DTYPE_FLOAT:
    case AF_DTYPE_FLOAT16:
    case AF_DTYPE_BFLOAT16: return AF_LINALG_F32;
    case AF_DTYPE_DOUBLE: return AF_LINALG_F64;
    default: return AF_LINALG_I64;
    }
}

const void *af_linalg_view(const af_tensor *t, af_linalg_kind kind, void **owned) {
    static const int64_t empty[1];
    *owned = NULL;
    int64_t n = af_tensor_numel(t);
    if (n <= 0) return empty; /* never read; an empty tensor may have no data pointer */
    af_dtype native = kind == AF_LINALG_F32 ? AF_DTYPE_FLOAT : kind == AF_LINALG_F64 ? AF_DTYPE_DOUBLE : AF_DTYPE_INT64;
    if (t->dtype == native) return t->data;
    size_t es = kind == AF_LINALG_F32 ? sizeof(float) : 8;
    void *p = af_malloc((size_t)n * es);
    if (!p) return NULL;
    for (int64_t i = 0; i < n; i++) {
        if (kind == AF_LINALG_F32)
            ((float *)p)[i] = (float)af_tensor_get_f64(t, i);
        else if (kind == AF_LINALG_F64)
            ((double *)p)[i] = af_tensor_get_f64(t, i);
        else
            ((int64_t *)p)[i] = af_tensor_get_i64(t, i);
    }
    *owned = p;
    return p;
}

/* acc[m][n] = sum_p A(i,p) * B(p,j), with A(i,p) = a[i*sam + p*sak] and B(p,j) = b[p*sbk + j*sbn].
 * Row-major B streams in i-k-j order; a transposed B (sbk == 1) takes contiguous dot products. */
#define AF_LINALG_MM(NAME, T, ACC)                                                                  \
    static void NAME(const T *a, int64_t sam, int64_t sak, const T *b, int64_t sbk, int64_t sbn,    \
                     ACC *acc, int64_t m, int64_t k, int64_t n) {                                   \
        if (sbn == 1 || sbk != 1) {                                                                 \
            for (int64_t i = 0; i < m; i++) {                                                       \
                ACC *row = acc + i * n;                                                             \
                for (int64_t j = 0; j < n; j++) row[j] = 0;                                         \
                for (int64_t p = 0; p < k; p++) {                                                   \
                    ACC av = (ACC)a[i * sam + p * sak];                                             \
                    const T *brow = b + p * sbk;                                                    \
                    for (int64_t j = 0; j < n; j++) row[j] += av * (ACC)brow[j * sbn];              \
                }                                                                                   \
            }                                                                                       \
        } else {                                                                                    \
            for (int64_t i = 0; i < m; i++) {                                                       \
                for (int64_t j = 0; j < n; j++) {                                                   \
                    ACC s = 0;                                                                      \
                    for (int64_t p = 0; p < k; p++) s += (ACC)a[i * sam + p * sak] * (ACC)b[p + j * sbn]; \
                    acc[i * n + j] = s;                                                             \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
    }

AF_LINALG_MM(mm_f32, float, double)
AF_LINALG_MM(mm_f64, double, double)
AF_LINALG_MM(mm_i64, int64_t, uint64_t)

/* One product of the views a, b (element offsets given) into the matching accumulator. */
static void mm(af_linalg_kind kind, const void *a, int64_t a_off, int64_t sam, int64_t sak, const void *b,
               int64_t b_off, int64_t sbk, int64_t sbn, double *accd, uint64_t *acci, int64_t m, int64_t k,
               int64_t n) {
    switch (kind) {
    case AF_LINALG_F32:
        mm_f32((const float *)a + a_off, sam, sak, (const float *)b + b_off, sbk, sbn, accd, m, k, n);
        break;
    case AF_LINALG_F64:
        mm_f64((const double *)a + a_off, sam, sak, (const double *)b + b_off, sbk, sbn, accd, m, k, n);
        break;
    case AF_LINALG_I64:
        mm_i64((const int64_t *)a + a_off, sam, sak, (const int64_t *)b + b_off, sbk, sbn, acci, m, k, n);
        break;
    }
}

/* Operand views and accumulators of one MatMul/Gemm run; released by mm_free. */
typedef struct mm_state {
    af_linalg_kind kind;
    const void *a, *b;
    void *own_a, *own_b;
    double *accd;
    uint64_t *acci;
} mm_state;

static void mm_free(mm_state *s) {
    af_free(s->own_a);
    af_free(s->own_b);
    af_free(s->accd);
    af_free(s->acci);
}

static af_status mm_init(af_op_ctx *c, mm_state *s, const af_tensor *a, const af_tensor *b, int64_t acc_n) {
    memset(s, 0, sizeof *s);
    s->kind = af_linalg_kind_of(a->dtype);
    s->a = af_linalg_view(a, s->kind, &s->own_a);
    s->b = af_linalg_view(b, s->kind, &s->own_b);
    size_t n = (size_t)(acc_n > 0 ? acc_n : 1);
    if (s->kind == AF_LINALG_I64)
        s->acci = af_malloc(n * sizeof *s->acci);
    else
        s->accd = af_malloc(n * sizeof *s->accd);
    if (!s->a || !s->b || (!s->acci && !s->accd)) {
        mm_free(s);
        return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory");
    }
    return AF_OK;
}

af_status af_ref_MAT_MUL(af_op_ctx *c) {
    const af_tensor *a = af_ctx_input(c, 0), *b = af_ctx_input(c, 1);
    af_tensor *y = af_ctx_output(c, 0);
    if (a->rank < 1 || b->rank < 1 || a->dtype != b->dtype || y->dtype != a->dtype)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "inputs must have rank >= 1 and one dtype");
    /* A as [batch..., m, k] and B as [batch..., k, n]; a 1-D A is [1, k], a 1-D B is [k, 1]. */
    int64_t m = a->rank > 1 ? a->dims[a->rank - 2] : 1, k = a->dims[a->rank - 1];
    int64_t kb = b->rank > 1 ? b->dims[b->rank - 2] : b->dims[0], n = b->rank > 1 ? b->dims[b->rank - 1] : 1;
    if (k != kb)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "A has %lld columns but B has %lld rows", (long long)k, (long long)kb);
    int ra = a->rank > 2 ? a->rank - 2 : 0, rb = b->rank > 2 ? b->rank - 2 : 0, nb = ra > rb ? ra : rb;
    int64_t bdim[AF_MAX_RANK], sa[AF_MAX_RANK], sb[AF_MAX_RANK], n_batch = 1;
    int64_t stride_a = m * k, stride_b = k * n;
    for (int q = nb - 1; q >= 0; q--) {
        int qa = q - (nb - ra), qb = q - (nb - rb);
        int64_t da = qa >= 0 ? a->dims[qa] : 1, db = qb >= 0 ? b->dims[qb] : 1;
        if (da != db && da != 1 && db != 1)
            return af_ctx_fail(c, AF_ERR_RUNTIME, "batch dims %lld and %lld do not broadcast", (long long)da,
                               (long long)db);
        bdim[q] = da == 1 ? db : da;
        sa[q] = da == 1 ? 0 : stride_a;
        sb[q] = db == 1 ? 0 : stride_b;
        stride_a *= da;
        stride_b *= db;
        n_batch *= bdim[q];
    }
    if (af_tensor_numel(y) != n_batch * m * n)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "output has %lld elements, expected %lld",
                           (long long)af_tensor_numel(y), (long long)(n_batch * m * n));
    mm_state s;
    af_status st = mm_init(c, &s, a, b, m * n);
    if (st != AF_OK) return st;
    int64_t idx[AF_MAX_RANK] = {0}, a_off = 0, b_off = 0;
    for (int64_t bi = 0; bi < n_batch; bi++) {
        mm(s.kind, s.a, a_off, k, 1, s.b, b_off, n, 1, s.accd, s.acci, m, k, n);
        int64_t y_off = bi * m * n;
        if (s.kind == AF_LINALG_I64) {
            for (int64_t q = 0; q < m * n; q++) af_tensor_set_i64(y, y_off + q, (int64_t)s.acci[q]);
        } else if (y->dtype == AF_DTYPE_FLOAT) {
            float *yd = (float *)y->data + y_off;
            for (int64_t q = 0; q < m * n; q++) yd[q] = (float)s.accd[q];
        } else {
            for (int64_t q = 0; q < m * n; q++) af_tensor_set_f64(y, y_off + q, s.accd[q]);
        }
        for (int q = nb - 1; q >= 0; q--) {
            a_off += sa[q];
            b_off += sb[q];
            if (++idx[q] < bdim[q]) break;
            a_off -= sa[q] * idx[q];
            b_off -= sb[q] * idx[q];
            idx[q] = 0;
        }
    }
    mm_free(&s);
    return AF_OK;
}

af_status af_ref_GEMM(af_op_ctx *c) {
    const af_tensor *a = af_ctx_input(c, 0), *b = af_ctx_input(c, 1), *cc = af_ctx_input(c, 2);
    af_tensor *y = af_ctx_output(c, 0);
    if (a->rank != 2 || b->rank != 2 || a->dtype != b->dtype || y->dtype != a->dtype ||
        (cc && (cc->rank > 2 || cc->dtype != a->dtype)))
        return af_ctx_fail(c, AF_ERR_RUNTIME, "A and B must be 2-D, C at most 2-D, all of one dtype");
    bool ta = af_node_attr_int(c->node, "transA", 0) != 0, tb = af_node_attr_int(c->node, "transB", 0) != 0;
    double alpha = af_node_attr_float(c->node, "alpha", 1.0f), beta = af_node_attr_float(c->node, "beta", 1.0f);
    int64_t m = a->dims[ta ? 1 : 0], k = a->dims[ta ? 0 : 1], kb = b->dims[tb ? 1 : 0], n = b->dims[tb ? 0 : 1];
    if (k != kb)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "A has %lld columns but B has %lld rows", (long long)k, (long long)kb);
    if (y->rank != 2 || y->dims[0] != m || y->dims[1] != n)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "output shape does not match [%lld,%lld]", (long long)m, (long long)n);
    /* C(i,j) = c[i*c_si + j*c_sj], with stride 0 along broadcast dims. */
    int64_t c_si = 0, c_sj = 0;
    if (cc) {
        int64_t cm = cc->rank == 2 ? cc->dims[0] : 1, cn = cc->rank >= 1 ? cc->dims[cc->rank - 1] : 1;
        if ((cm != 1 && cm != m) || (cn != 1 && cn != n))
            return af_ctx_fail(c, AF_ERR_RUNTIME, "C cannot broadcast to [%lld,%lld]", (long long)m, (long long)n);
        c_si = cm == 1 ? 0 : cn;
        c_sj = cn == 1 ? 0 : 1;
    }
    mm_state s;
    af_status st = mm_init(c, &s, a, b, m * n);
    if (st != AF_OK) return st;
    mm(s.kind, s.a, 0, ta ? 1 : k, ta ? m : 1, s.b, 0, tb ? 1 : n, tb ? k : 1, s.accd, s.acci, m, k, n);
    /* Integers stay exact when alpha and beta are whole numbers (the usual 1 and 1). */
    bool int_exact = s.kind == AF_LINALG_I64 && alpha == floor(alpha) && beta == floor(beta) && fabs(alpha) < 9e18 &&
                     fabs(beta) < 9e18;
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            int64_t q = i * n + j, ci = i * c_si + j * c_sj;
            if (int_exact) {
                uint64_t v = (uint64_t)(int64_t)alpha * s.acci[q];
                if (cc) v += (uint64_t)(int64_t)beta * (uint64_t)af_tensor_get_i64(cc, ci);
                af_tensor_set_i64(y, q, (int64_t)v);
                continue;
            }
            double v = s.kind == AF_LINALG_I64 ? (double)(int64_t)s.acci[q] : s.accd[q];
            v *= alpha;
            if (cc) v += beta * af_tensor_get_f64(cc, ci);
            af_tensor_set_f64(y, q, v);
        }
    }
    mm_free(&s);
    return AF_OK;
}
