#include "ir/tensor.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/alloc.h"
#include "util/error.h"

int64_t af_dims_numel(int rank, const int64_t *dims) {
    if (rank < 0) return -1;
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0 || !af_mul_i64(n, dims[i], &n)) return -1;
    }
    return n;
}

int64_t af_tensor_numel(const af_tensor *t) { return af_dims_numel(t->rank, t->dims); }

bool af_tensor_shape_known(const af_tensor *t) { return af_tensor_numel(t) >= 0; }

bool af_tensor_same_shape(const af_tensor *a, const af_tensor *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

af_status af_tensor_alloc(af_tensor *t, af_error *err) {
    int64_t n = af_tensor_numel(t);
    size_t esize = af_dtype_size(t->dtype);
    if (n < 0) return af_errorf(err, AF_ERR_RUNTIME, "tensor shape is unknown or overflows");
    if (esize == 0)
        return af_errorf(err, AF_ERR_UNSUPPORTED, "dtype %s is not supported", af_dtype_name(t->dtype));
    size_t bytes;
    if ((uint64_t)n > SIZE_MAX || !af_mul_size((size_t)n, esize, &bytes))
        return af_errorf(err, AF_ERR_LIMIT, "tensor of %lld elements overflows", (long long)n);
    t->data = af_malloc_aligned(bytes);
    if (!t->data) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes", bytes);
    memset(t->data, 0, bytes);
    t->nbytes = bytes;
    return AF_OK;
}

af_status af_tensor_copy(af_tensor *dst, const af_tensor *src, af_error *err) {
    *dst = *src;
    dst->data = NULL;
    af_status st = af_tensor_alloc(dst, err);
    if (st != AF_OK) return st;
    if (src->nbytes) memcpy(dst->data, src->data, src->nbytes);
    return AF_OK;
}

void af_tensor_free_data(af_tensor *t) {
    if (!t) return;
    af_free_aligned(t->data);
    t->data = NULL;
    t->nbytes = 0;
}

float af_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { /* subnormal: renormalize */
            exp = 127 - 15 + 1;
            while (!(mant & 0x400)) {
                mant <<= 1;
                exp--;
            }
            bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t af_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t)((x >> 23) & 0xff);
    uint32_t mant = x & 0x7fffff;
    if (exp == 255) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
    int32_t e = exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00);
    if (e <= 0) { /* subnormal or zero, round to nearest even */
        if (e < -10) return (uint16_t)sign;
        mant |= 0x800000;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = 1u << (shift - 1), rest = mant & ((1u << shift) - 1);
        uint32_t r = mant >> shift;
        if (rest > half || (rest == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((uint32_t)e << 10) | (mant >> 13), rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (r & 1))) r++; /* may carry into the exponent: correct */
    return (uint16_t)(sign | r);
}

float af_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t af_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

double af_tensor_get_f64(const af_tensor *t, int64_t i) {
    const void *d = t->data;
    switch (t->dtype) {
    case AF_DTYPE_FLOAT: return ((const float *)d)[i];
    case AF_DTYPE_DOUBLE: return ((const double *)d)[i];
    case AF_DTYPE_FLOAT16: return af_f16_to_f32(((const uint16_t *)d)[i]);
    case AF_DTYPE_BFLOAT16: return af_bf16_to_f32(((const uint16_t *)d)[i]);
    case AF_DTYPE_INT8: return ((const int8_t *)d)[i];
    case AF_DTYPE_UINT8: return ((const uint8_t *)d)[i];
    case AF_DTYPE_BOOL: return ((const uint8_t *)d)[i] != 0;
    case AF_DTYPE_INT16: return ((const int16_t *)d)[i];
    case AF_DTYPE_UINT16: return ((const uint16_t *)d)[i];
    case AF_DTYPE_INT32: return ((const int32_t *)d)[i];
    case AF_DTYPE_UINT32: return ((const uint32_t *)d)[i];
    case AF_DTYPE_INT64: return (double)((const int64_t *)d)[i];
    case AF_DTYPE_UINT64: return (double)((const uint64_t *)d)[i];
    default: return 0;
    }
}

int64_t af_tensor_get_i64(const af_tensor *t, int64_t i) {
    const void *d = t->data;
    switch (t->dtype) {
    case AF_DTYPE_INT8: return ((const int8_t *)d)[i];
    case AF_DTYPE_UINT8: return ((const uint8_t *)d)[i];
    case AF_DTYPE_BOOL: return ((const uint8_t *)d)[i] != 0;
    case AF_DTYPE_INT16: return ((const int16_t *)d)[i];
    case AF_DTYPE_UINT16: return ((const uint16_t *)d)[i];
    case AF_DTYPE_INT32: return ((const int32_t *)d)[i];
    case AF_DTYPE_UINT32: return ((const uint32_t *)d)[i];
    case AF_DTYPE_INT64: return ((const int64_t *)d)[i];
    case AF_DTYPE_UINT64: return (int64_t)((const uint64_t *)d)[i];
    default: {
        double v = af_tensor_get_f64(t, i);
        if (isnan(v)) return 0;
        if (v >= 9.2e18) return INT64_MAX;
        if (v <= -9.2e18) return INT64_MIN;
        return (int64_t)v;
    }
    }
}

void af_tensor_set_f64(af_tensor *t, int64_t i, double v) {
    void *d = t->data;
    switch (t->dtype) {
    case AF_DTYPE_FLOAT: ((float *)d)[i] = (float)v; break;
    case AF_DTYPE_DOUBLE: ((double *)d)[i] = v; break;
    case AF_DTYPE_FLOAT16: ((uint16_t *)d)[i] = af_f32_to_f16((float)v); break;
    case AF_DTYPE_BFLOAT16: ((uint16_t *)d)[i] = af_f32_to_bf16((float)v); break;
    case AF_DTYPE_BOOL: ((uint8_t *)d)[i] = v != 0; break;
    default: af_tensor_set_i64(t, i, isnan(v) ? 0 : v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : (int64_t)v);
    }
}

void af_tensor_set_i64(af_tensor *t, int64_t i, int64_t v) {
    void *d = t->data;
    switch (t->dtype) {
    case AF_DTYPE_INT8: ((int8_t *)d)[i] = (int8_t)v; break;
    case AF_DTYPE_UINT8: ((uint8_t *)d)[i] = (uint8_t)v; break;
    case AF_DTYPE_BOOL: ((uint8_t *)d)[i] = v != 0; break;
    case AF_DTYPE_INT16: ((int16_t *)d)[i] = (int16_t)v; break;
    case AF_DTYPE_UINT16: ((uint16_t *)d)[i] = (uint16_t)v; break;
    case AF_DTYPE_INT32: ((int32_t *)d)[i] = (int32_t)v; break;
    case AF_DTYPE_UINT32: ((uint32_t *)d)[i] = (uint32_t)v; break;
    case AF_DTYPE_INT64: ((int64_t *)d)[i] = v; break;
    case AF_DTYPE_UINT64: ((uint64_t *)d)[i] = (uint64_t)v; break;
    default: af_tensor_set_f64(t, i, (double)v);
    }
}

const char *af_tensor_shape_str(const af_tensor *t, char *buf, size_t size) {
    size_t used = (size_t)snprintf(buf, size, "%s[", af_dtype_name(t->dtype));
    if (t->rank < 0) {
        snprintf(buf + (used < size ? used : size), used < size ? size - used : 0, "?]");
        return buf;
    }
    for (int i = 0; i < t->rank && used < size; i++) {
        if (t->dims[i] < 0)
            used += (size_t)snprintf(buf + used, size - used, "%s?", i ? "," : "");
        else
            used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? "," : "", (long long)t->dims[i]);
    }
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}
