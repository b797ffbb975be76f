/* Reference kernel for Einsum: one loop over every label of the equation, the innermost run as a
 * tight strided loop (a contiguous summed label when there is one, so matmul-like forms stream). */
#include <string.h>

#include "ir/shape/linalg.h"
#include "kernels/ref/linalg.h"
#include "util/alloc.h"

#define MAX_IN AF_LINALG_EINSUM_MAX_INPUTS

/* The loop nest: n labels in loop order (outermost first) with their sizes and strides. */
typedef struct nest {
    int n, n_in;
    int64_t size[AF_LINALG_EINSUM_MAX_LABELS];
    int64_t ostride[AF_LINALG_EINSUM_MAX_LABELS];
    int64_t istride[AF_LINALG_EINSUM_MAX_LABELS][MAX_IN];
} nest;

/* out[o] += prod_i in_i[off_i] over the whole index space; out is zeroed first by the caller. */
#define AF_EINSUM_LOOP(NAME, T, ACC)                                                                \
    static void NAME(const nest *L, const T *const *in, ACC *out) {                                 \
        int64_t idx[AF_LINALG_EINSUM_MAX_LABELS] = {0}, off[MAX_IN] = {0}, o = 0;                  \
        int last = L->n - 1;                                                                        \
        int64_t len = L->n ? L->size[last] : 1, os = L->n ? L->ostride[last] : 0;                   \
        const int64_t *is = L->n ? L->istride[last] : off;                                          \
        for (int l = 0; l < L->n; l++)                                                              \
            if (L->size[l] == 0) return;                                                            \
        for (;;) {                                                                                  \
            if (L->n_in == 2) {                                                                     \
                const T *a = in[0] + off[0], *b = in[1] + off[1];                                   \
                int64_t sa = is[0], sb = is[1];                                                     \
                if (os == 0) {                                                                      \
                    ACC s = 0;                                                                      \
                    for (int64_t j = 0; j < len; j++) s += (ACC)a[j * sa] * (ACC)b[j * sb];         \
                    out[o] += s;                                                                    \
                } else {                                                                            \
                    for (int64_t j = 0; j < len; j++) out[o + j * os] += (ACC)a[j * sa] * (ACC)b[j * sb]; \
                }                                                                                   \
            } else {                                                                                \
                for (int64_t j = 0; j < len; j++) {                                                 \
                    ACC p = 1;                                                                      \
                    for (int i = 0; i < L->n_in; i++) p *= (ACC)in[i][off[i] + j * is[i]];          \
                    out[o + j * os] += p;                                                           \
                }                                                                                   \
            }                                                                                       \
            int l = last - 1;                                                                       \
            for (; l >= 0; l--) {                                                                   \
                o += L->ostride[l];                                                                 \
                for (int i = 0; i < L->n_in; i++) off[i] += L->istride[l][i];                      \
                if (++idx[l] < L->size[l]) break;                                                   \
                o -= L->ostride[l] * idx[l];                                                        \
                for (int i = 0; i < L->n_in; i++) off[i] -= L->istride[l][i] * idx[l];             \
                idx[l] = 0;                                                                         \
            }                                                                                       \
            if (l < 0) return;                                                                      \
        }                                                                                           \
    }

AF_EINSUM_LOOP(loop_f64, double, double)
AF_EINSUM_LOOP(loop_i64, int64_t, uint64_t)

/* Orders the labels: output labels first (in output order), then the summed ones, the innermost
 * being the summed label with the smallest total input stride. */
static void build_nest(const af_linalg_einsum *e, const af_tensor *const *x, const af_tensor *y, nest *L) {
    memset(L, 0, sizeof *L);
    L->n_in = e->n_inputs;
    int64_t istride[AF_LINALG_EINSUM_MAX_LABELS][MAX_IN] = {{0}}, ostride[AF_LINALG_EINSUM_MAX_LABELS] = {0};
    bool in_out[AF_LINALG_EINSUM_MAX_LABELS] = {false};
    for (int i = 0; i < e->n_inputs; i++) {
        int64_t s = 1;
        for (int d = x[i]->rank - 1; d >= 0; d--) {
            int l = e->label[i][d];
            /* A size-1 dim against a larger label size broadcasts: stride 0. A repeated label adds
             * the strides of its dims, which walks the diagonal. */
            if (!(x[i]->dims[d] == 1 && e->size[l] != 1)) istride[l][i] += s;
            s *= x[i]->dims[d];
        }
    }
    int64_t s = 1;
    for (int d = y->rank - 1; d >= 0; d--) {
        ostride[e->out_label[d]] = s;
        in_out[e->out_label[d]] = true;
        s *= y->dims[d];
    }
    int order[AF_LINALG_EINSUM_MAX_LABELS], n = 0, inner = -1;
    int64_t inner_cost = 0;
    for (int d = 0; d < e->out_rank; d++) order[n++] = e->out_label[d];
    for (int l = 0; l < e->n_labels; l++) {
        if (e->size[l] == -2 || in_out[l]) continue;
        int64_t cost = 0;
        for (int i = 0; i < e->n_inputs; i++) cost += istride[l][i];
        if (inner < 0 || cost < inner_cost) {
            inner = l;
            inner_cost = cost;
        }
    }
    for (int l = 0; l < e->n_labels; l++)
        if (e->size[l] != -2 && !in_out[l] && l != inner) order[n++] = l;
    if (inner >= 0) order[n++] = inner;
    L->n = n;
    for (int k = 0; k < n; k++) {
        int l = order[k];
        L->size[k] = e->size[l];
        L->ostride[k] = ostride[l];
        memcpy(L->istride[k], istride[l], sizeof istride[l]);
    }
}

af_status af_ref_EINSUM(af_op_ctx *c) {
    af_tensor *y = af_ctx_output(c, 0);
    af_linalg_einsum e;
    af_status st = af_linalg_einsum_parse(c, &e);
    if (st != AF_OK) return st;
    if (!e.known || y->rank != e.out_rank) return af_ctx_fail(c, AF_ERR_RUNTIME, "output rank does not match");
    for (int d = 0; d < e.out_rank; d++)
        if (y->dims[d] != e.size[e.out_label[d]])
            return af_ctx_fail(c, AF_ERR_RUNTIME, "output dim %d is %lld, expected %lld", d, (long long)y->dims[d],
                               (long long)e.size[e.out_label[d]]);
    for (int i = 0; i < e.n_inputs; i++)
        if (c->inputs[i]->dtype != y->dtype) return af_ctx_fail(c, AF_ERR_RUNTIME, "inputs have different dtypes");
    nest L;
    build_nest(&e, c->inputs, y, &L);
    af_linalg_kind kind = af_linalg_kind_of(y->dtype) == AF_LINALG_I64 ? AF_LINALG_I64 : AF_LINALG_F64;
    const void *in[MAX_IN];
    void *owned[MAX_IN] = {NULL};
    int64_t n_out = af_tensor_numel(y);
    void *acc = af_calloc((size_t)(n_out > 0 ? n_out : 1), 8);
    st = acc ? AF_OK : AF_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < e.n_inputs && st == AF_OK; i++) {
        in[i] = af_linalg_view(c->inputs[i], kind, &owned[i]);
        if (!in[i]) st = AF_ERR_OUT_OF_MEMORY;
    }
    if (st == AF_OK) {
        if (kind == AF_LINALG_I64) {
            loop_i64(&L, (const int64_t *const *)in, acc);
            for (int64_t q = 0; q < n_out; q++) af_tensor_set_i64(y, q, (int64_t)((uint64_t *)acc)[q]);
        } else {
            loop_f64(&L, (const double *const *)in, acc);
            for (int64_t q = 0; q < n_out; q++) af_tensor_set_f64(y, q, ((double *)acc)[q]);
        }
    }
    for (int i = 0; i < e.n_inputs; i++) af_free(owned[i]);
    af_free(acc);
    if (st != AF_OK) return af_ctx_fail(c, st, "out of memory");
    return AF_OK;
}
