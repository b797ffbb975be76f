/*
 * Helpers over af_tensor (the one tensor type inside and outside the library).
 *
 *   int64_t n = af_tensor_numel(&t);           // -1 when a dim is unknown
 *   if (af_tensor_alloc(&t, err) != AF_OK) ... // allocates t.nbytes from dtype and dims
 *   af_tensor_free_data(&t);
 */
#ifndef AF_IR_TENSOR_H
#define AF_IR_TENSOR_H

#include <stdbool.h>

#include "autofusion.h"

/* Element count; -1 if the rank or a dim is unknown (negative), or on overflow. */
int64_t af_tensor_numel(const af_tensor *t);
/* Same for a dims array. */
int64_t af_dims_numel(int rank, const int64_t *dims);
bool af_tensor_shape_known(const af_tensor *t);
bool af_tensor_same_shape(const af_tensor *a, const af_tensor *b);
/* Computes t->nbytes from dtype and dims and allocates zeroed, 64-byte aligned data. */
af_status af_tensor_alloc(af_tensor *t, af_error *err);
/* Deep copy; dst->data is newly allocated. */
af_status af_tensor_copy(af_tensor *dst, const af_tensor *src, af_error *err);
/* Reads element i of a numeric tensor as double / int64 (any dtype the runtime holds). */
double af_tensor_get_f64(const af_tensor *t, int64_t i);
int64_t af_tensor_get_i64(const af_tensor *t, int64_t i);
/* Writes element i converting from double / int64 with C conversion rules (float16 rounded). */
void af_tensor_set_f64(af_tensor *t, int64_t i, double v);
void af_tensor_set_i64(af_tensor *t, int64_t i, int64_t v);
/* Formats "float32[1,3,224,224]" into buf. */
const char *af_tensor_shape_str(const af_tensor *t, char *buf, size_t size);

float af_f16_to_f32(uint16_t h);
uint16_t af_f32_to_f16(float f);
float af_bf16_to_f32(uint16_t h);
uint16_t af_f32_to_bf16(float f);

#endif
