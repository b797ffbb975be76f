/* Reference kernels for Softmax, LogSoftmax and Hardmax over [outer, n, inner] views of the input:
 * before opset 13 n is the flattened dims from `axis` on (inner = 1), from 13 the single axis. */
#include <math.h>

#include "ir/shape/reduce.h"

typedef enum { SOFTMAX, LOG_SOFTMAX, HARDMAX } softmax_kind;

static af_status softmax_run(af_op_ctx *c, softmax_kind kind) {
    const af_tensor *x = af_ctx_input(c, 0);
    af_tensor *y = af_ctx_output(c, 0);
    if (!af_tensor_same_shape(x, y)) return af_ctx_fail(c, AF_ERR_RUNTIME, "output shape differs from input");
    int axis;
    af_status st = af_reduce_softmax_axis(c, x->rank, &axis);
    if (st != AF_OK) return st;
    int64_t outer, n, inner;
    af_reduce_split(x, axis, c->opset >= 13 ? axis + 1 : x->rank, &outer, &n, &inner);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t in = 0; in < inner; in++) {
            int64_t base = o * n * inner + in;
            if (kind == HARDMAX) {
                /* The first maximum gets the 1; a NaN counts as the maximum. */
                int64_t best = 0;
                for (int64_t j = 1; j < n; j++) {
                    int64_t i = base + j * inner, b = base + best * inner;
                    if (!af_reduce_isnan(x, b) && (af_reduce_isnan(x, i) || af_reduce_cmp(x, i, b) > 0)) best = j;
                }
                for (int64_t j = 0; j < n; j++) af_tensor_set_f64(y, base + j * inner, j == best);
                continue;
            }
            /* Subtracting the max keeps exp() in range; sums run in double. */
            double mx = -INFINITY;
            for (int64_t j = 0; j < n; j++) {
                double v = af_tensor_get_f64(x, base + j * inner);
                if (v > mx || isnan(v)) mx = v;
            }
            double sum = 0;
            for (int64_t j = 0; j < n; j++) sum += exp(af_tensor_get_f64(x, base + j * inner) - mx);
            double log_sum = log(sum);
            for (int64_t j = 0; j < n; j++) {
                double d = af_tensor_get_f64(x, base + j * inner) - mx;
                af_tensor_set_f64(y, base + j * inner, kind == SOFTMAX ? exp(d) / sum : d - log_sum);
            }
        }
    }
    return AF_OK;
}

af_status af_ref_SOFTMAX(af_op_ctx *c) { return softmax_run(c, SOFTMAX); }
af_status af_ref_LOG_SOFTMAX(af_op_ctx *c) { return softmax_run(c, LOG_SOFTMAX); }
af_status af_ref_HARDMAX(af_op_ctx *c) { return softmax_run(c, HARDMAX); }
