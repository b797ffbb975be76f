/* Reference kernel for TopK: a stable merge sort of each slice along the axis, so equal values keep
 * the lower index first as the spec requires; NaN orders above every number. */
#include <string.h>

#include "ir/shape/reduce.h"
#include "util/alloc.h"

/* Sorts idx[0..n) (offsets into x) best first, using tmp as scratch. Bottom-up, stable. */
static void merge_sort(const af_tensor *x, int64_t *idx, int64_t *tmp, int64_t n, int sign) {
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = af_reduce_cmp(x, idx[j], idx[i]) * sign > 0 ? idx[j++] : idx[i++];
            while (i < mid) tmp[k++] = idx[i++];
            while (j < hi) tmp[k++] = idx[j++];
        }
        memcpy(idx, tmp, (size_t)n * sizeof *idx);
    }
}

af_status af_ref_TOP_K(af_op_ctx *c) {
    const af_tensor *x = af_ctx_input(c, 0);
    af_tensor *vals = af_ctx_output(c, 0), *inds = af_ctx_output(c, 1);
    int axis;
    af_status st = af_ctx_axis(c, af_node_attr_int(c->node, "axis", -1), x->rank, &axis);
    if (st != AF_OK) return st;
    int64_t k;
    if (c->opset >= 10) {
        const af_tensor *kt = af_ctx_input(c, 1);
        if (af_tensor_numel(kt) != 1) return af_ctx_fail(c, AF_ERR_RUNTIME, "K must hold one value");
        k = af_tensor_get_i64(kt, 0);
    } else {
        k = af_node_attr_int(c->node, "k", 0);
    }
    int64_t outer, n, inner;
    af_reduce_split(x, axis, axis + 1, &outer, &n, &inner);
    if (k < 0 || k > n)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "k %lld is out of range for dim %d of size %lld", (long long)k, axis,
                           (long long)n);
    if (vals->dtype != x->dtype || inds->dtype != AF_DTYPE_INT64 || af_tensor_numel(vals) != outer * k * inner ||
        af_tensor_numel(inds) != outer * k * inner)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "outputs do not match the input and k");
    int sign = af_node_attr_int(c->node, "largest", 1) ? 1 : -1;
    size_t sz = (size_t)(n ? n : 1) * sizeof(int64_t);
    int64_t *idx = af_malloc(sz), *tmp = af_malloc(sz);
    if (!idx || !tmp) {
        af_free(idx);
        af_free(tmp);
        return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory");
    }
    size_t es = af_dtype_size(x->dtype);
    int64_t *out_i = inds->data;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * n * inner + in;
            for (int64_t j = 0; j < n; j++) idx[j] = base + j * inner;
            merge_sort(x, idx, tmp, n, sign);
            for (int64_t j = 0; j < k; j++) {
                int64_t dst = (o * k + j) * inner + in;
                memcpy((char *)vals->data + (size_t)dst * es, (const char *)x->data + (size_t)idx[j] * es, es);
                out_i[dst] = (idx[j] - base) / inner;
            }
        }
    }
    af_free(idx);
    af_free(tmp);
    return AF_OK;
}
