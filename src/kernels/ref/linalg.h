/*
 * Compute views shared by the MatMul, Gemm and Einsum reference kernels: each operand is read in
 * one of three compute types so the loops exist once per type, not once per dtype.
 *
 *   void *owned = NULL;
 *   const float *a = af_linalg_view(x, AF_LINALG_F32, &owned);  // NULL: out of memory
 *   ...
 *   af_free(owned);
 */
#ifndef AF_KERNELS_REF_LINALG_H
#define AF_KERNELS_REF_LINALG_H

#include "ir/op_ctx.h"

typedef enum af_linalg_kind {
    AF_LINALG_F32, /* float elements, double accumulation */
    AF_LINALG_F64, /* double elements and accumulation */
    AF_LINALG_I64, /* int64 elements, wrapping uint64 accumulation */
} af_linalg_kind;

/* float32/float16/bfloat16 -> F32, float64 -> F64, integer types -> I64. */
af_linalg_kind af_linalg_kind_of(af_dtype dtype);

/* t's elements as `kind`: t->data itself when it already has that element type (a dummy when t is
 * empty), else a converted copy that is also stored in *owned for the caller to af_free. NULL when
 * out of memory. */
const void *af_linalg_view(const af_tensor *t, af_linalg_kind kind, void **owned);

#endif
