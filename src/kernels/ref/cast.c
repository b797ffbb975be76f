/* Reference kernels of Cast and CastLike between every numeric dtype and bool. Each value travels
 * exactly (as double, int64 or uint64) and rounds once into the target. */
#include <string.h>

#include "kernels/ref/elementwise.h"

/* Float -> integer truncates toward zero (saturating where C would be undefined, NaN -> 0) and
 * wraps to the target width; anything -> bool is `!= 0` (so NaN is true); integers -> floats round
 * to nearest even. */
static af_status cast_tensor(af_op_ctx *c) {
    const af_tensor *x;
    af_tensor *y;
    af_status st = af_ew_check_unary(c, &x, &y);
    if (st != AF_OK) return st;
    int64_t n = af_tensor_numel(x);
    if (x->dtype == y->dtype) {
        if (n && x->data != y->data) memcpy(y->data, x->data, (size_t)n * af_dtype_size(x->dtype));
        return AF_OK;
    }
    af_ew_class cx = af_ew_class_of(x->dtype), cy = af_ew_class_of(y->dtype);
    if (cx == AF_EW_NONE || cy == AF_EW_NONE)
        return af_ctx_fail(c, AF_ERR_UNSUPPORTED, "cast from %s to %s is not supported",
                           af_dtype_name(x->dtype), af_dtype_name(y->dtype));
    for (int64_t k = 0; k < n; k++) {
        switch (cx) {
        case AF_EW_FLOAT: af_ew_store_f64(y, k, af_tensor_get_f64(x, k)); break;
        case AF_EW_SINT: {
            int64_t v = af_tensor_get_i64(x, k);
            if (y->dtype == AF_DTYPE_FLOAT) /* direct, so it rounds once */
                ((float *)y->data)[k] = (float)v;
            else if (cy == AF_EW_FLOAT)
                af_ew_store_f64(y, k, (double)v);
            else
                af_tensor_set_i64(y, k, v);
            break;
        }
        case AF_EW_UINT: {
            uint64_t v = af_ew_get_u64(x, k);
            if (y->dtype == AF_DTYPE_FLOAT)
                ((float *)y->data)[k] = (float)v;
            else if (cy == AF_EW_FLOAT)
                af_ew_store_f64(y, k, (double)v);
            else
                af_ew_set_u64(y, k, v);
            break;
        }
        case AF_EW_NONE: break;
        }
    }
    return AF_OK;
}

af_status af_ref_CAST(af_op_ctx *c) { return cast_tensor(c); }

/* The target dtype is input 1's; the shape function already gave it to the output. */
af_status af_ref_CAST_LIKE(af_op_ctx *c) { return cast_tensor(c); }
