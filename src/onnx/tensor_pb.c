#include "onnx/tensor_pb.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"
#include "onnx/external_data.h"
#include "util/alloc.h"
#include "util/error.h"

/* raw_data is little endian and is copied as is. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "autofusion reads ONNX raw_data in place and needs a little-endian target"
#endif

/* data, when not NULL, is a bool the loader reads to tell out-of-memory from malformed bytes. */
static void *pb_alloc(void *data, size_t size) {
    void *p = af_malloc(size);
    if (!p && data) *(bool *)data = true;
    return p;
}
static void pb_free(void *data, void *p) {
    (void)data;
    af_free(p);
}
ProtobufCAllocator af_protobuf_allocator = {pb_alloc, pb_free, NULL};

static const char *tname(const Onnx__TensorProto *p) { return p->name && *p->name ? p->name : "(unnamed)"; }

/* How many values the typed field for dtype holds. */
static size_t typed_count(const Onnx__TensorProto *p, af_dtype dt) {
    switch (dt) {
    case AF_DTYPE_FLOAT: return p->n_float_data;
    case AF_DTYPE_DOUBLE: return p->n_double_data;
    case AF_DTYPE_INT64: return p->n_int64_data;
    case AF_DTYPE_UINT32:
    case AF_DTYPE_UINT64: return p->n_uint64_data;
    default: return p->n_int32_data; /* INT32, INT16, INT8, UINT16, UINT8, BOOL, FLOAT16, BFLOAT16 */
    }
}

/* Copies n typed-field values (typed_count checked first) into the tensor, converting to its dtype. */
static void from_typed(const Onnx__TensorProto *p, af_tensor *t, size_t n) {
    if (!n) return;
    switch (t->dtype) {
    case AF_DTYPE_FLOAT: memcpy(t->data, p->float_data, n * 4); break;
    case AF_DTYPE_DOUBLE: memcpy(t->data, p->double_data, n * 8); break;
    case AF_DTYPE_INT64: memcpy(t->data, p->int64_data, n * 8); break;
    case AF_DTYPE_UINT32:
    case AF_DTYPE_UINT64:
        for (size_t i = 0; i < n; i++) af_tensor_set_i64(t, (int64_t)i, (int64_t)p->uint64_data[i]);
        break;
    case AF_DTYPE_FLOAT16:
    case AF_DTYPE_BFLOAT16: /* bit patterns stored in int32_data */
        for (size_t i = 0; i < n; i++) ((uint16_t *)t->data)[i] = (uint16_t)p->int32_data[i];
        break;
    default:
        for (size_t i = 0; i < n; i++) af_tensor_set_i64(t, (int64_t)i, p->int32_data[i]);
        break;
    }
}

/* With steal, p's raw bytes move into the tensor instead of being copied (p loses them). */
static af_status from_proto(Onnx__TensorProto *p, bool steal, const char *base_dir, af_tensor_budget *b,
                            af_tensor *out, af_error *err) {
    memset(out, 0, sizeof *out);
    af_dtype dt = (af_dtype)p->data_type;
    if (!p->has_data_type || dt == AF_DTYPE_UNDEFINED)
        return af_errorf(err, AF_ERR_INVALID_MODEL, "tensor '%s' has no data type", tname(p));
    if (p->data_type < 0 || p->data_type >= AF_DTYPE_MAX)
        return af_errorf(err, AF_ERR_INVALID_MODEL, "tensor '%s' has unknown data type %d", tname(p),
                         (int)p->data_type);
    if (af_dtype_size(dt) == 0)
        return af_errorf(err, AF_ERR_UNSUPPORTED, "tensor '%s' has unsupported data type %s (%d)", tname(p),
                         af_dtype_name(dt), (int)p->data_type);
    int max_rank = b ? b->max_rank : AF_MAX_RANK;
    if (p->n_dims > (size_t)max_rank)
        return af_errorf(err, AF_ERR_LIMIT, "tensor '%s' has rank %zu; at most %d is supported (max_rank)",
                         tname(p), p->n_dims, max_rank);
    if (p->segment) return af_errorf(err, AF_ERR_UNSUPPORTED, "tensor '%s' is segmented", tname(p));
    out->dtype = dt;
    out->rank = (int)p->n_dims;
    for (size_t d = 0; d < p->n_dims; d++) {
        if (p->dims[d] < 0)
            return af_errorf(err, AF_ERR_INVALID_MODEL, "tensor '%s' has negative dim %lld", tname(p),
                             (long long)p->dims[d]);
        out->dims[d] = p->dims[d];
    }
    int64_t numel = af_tensor_numel(out);
    size_t bytes;
    if (numel < 0 || !af_mul_size((size_t)numel, af_dtype_size(dt), &bytes))
        return af_errorf(err, AF_ERR_LIMIT, "tensor '%s': dims overflow", tname(p));
    if (b && bytes > b->max_tensor_bytes)
        return af_errorf(err, AF_ERR_LIMIT, "tensor '%s' is %zu bytes; the limit is %llu (max_tensor_bytes)",
                         tname(p), bytes, (unsigned long long)b->max_tensor_bytes);
    if (b && bytes > b->bytes_left)
        return af_errorf(err, AF_ERR_LIMIT,
                         "tensor '%s' (%zu bytes) takes stored tensors past %llu bytes in all (max_initializer_bytes)",
                         tname(p), bytes, (unsigned long long)b->max_total_bytes);
    if (b) b->bytes_left -= bytes;

    /* Every source is checked against the shape before allocating: the dims are untrusted and may
     * claim terabytes that the file does not hold. */
    bool external = p->has_data_location && p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    const char *location = NULL;
    int64_t offset = 0, length = -1;
    af_status st = AF_OK;
    if (external) {
        for (size_t i = 0; i < p->n_external_data; i++) {
            const Onnx__StringStringEntryProto *kv = p->external_data[i];
            if (!kv->key || !kv->value) continue;
            char *end = NULL;
            if (strcmp(kv->key, "location") == 0) {
                location = kv->value;
            } else if (strcmp(kv->key, "offset") == 0 || strcmp(kv->key, "length") == 0) {
                errno = 0;
                long long v = strtoll(kv->value, &end, 10);
                if (errno || end == kv->value || *end || v < 0)
                    return af_errorf(err, AF_ERR_INVALID_MODEL, "tensor '%s': bad external data %s '%s'",
                                     tname(p), kv->key, kv->value);
                if (kv->key[0] == 'o') offset = v;
                else length = v;
            }
        }
        st = af_external_data_read(base_dir, location, offset, length, NULL, bytes, err);
        if (st != AF_OK) return af_error_prefix(err, st, "tensor '%s'", tname(p));
    } else if (p->has_raw_data) {
        if (p->raw_data.len != bytes)
            return af_errorf(err, AF_ERR_INVALID_MODEL, "tensor '%s': raw_data has %zu bytes, shape needs %zu",
                             tname(p), p->raw_data.len, bytes);
    } else if (typed_count(p, dt) != (size_t)numel) {
        return af_errorf(err, AF_ERR_INVALID_MODEL, "tensor '%s': %zu values stored, shape needs %zu", tname(p),
                         typed_count(p, dt), (size_t)numel);
    }
    if (steal && !external && p->has_raw_data && bytes > 0) {
        out->data = p->raw_data.data;
        out->nbytes = bytes;
        p->raw_data.data = NULL;
        p->raw_data.len = 0;
        p->has_raw_data = 0;
        return AF_OK;
    }
    st = af_tensor_alloc(out, err);
    if (st != AF_OK) return af_error_prefix(err, st, "tensor '%s'", tname(p));
    if (external) {
        st = af_external_data_read(base_dir, location, offset, length, out->data, bytes, err);
        if (st != AF_OK) af_error_prefix(err, st, "tensor '%s'", tname(p));
    } else if (p->has_raw_data) {
        if (bytes) memcpy(out->data, p->raw_data.data, bytes);
    } else {
        from_typed(p, out, (size_t)numel);
    }
    if (st != AF_OK) af_tensor_free_data(out);
    return st;
}

af_status af_tensor_from_proto(const Onnx__TensorProto *p, const char *base_dir, af_tensor_budget *budget,
                               af_tensor *out, af_error *err) {
    return from_proto((Onnx__TensorProto *)p, false, base_dir, budget, out, err);
}

af_status af_tensor_take_proto(Onnx__TensorProto *p, const char *base_dir, af_tensor_budget *budget,
                               af_tensor *out, af_error *err) {
    return from_proto(p, true, base_dir, budget, out, err);
}

void af_tensor_to_proto(const af_tensor *t, const char *name, int64_t *dims_buf, Onnx__TensorProto *p) {
    onnx__tensor_proto__init(p);
    for (int d = 0; d < t->rank; d++) dims_buf[d] = t->dims[d];
    p->n_dims = (size_t)t->rank;
    p->dims = dims_buf;
    p->has_data_type = 1;
    p->data_type = (int32_t)t->dtype;
    p->name = (char *)(name ? name : "");
    p->has_raw_data = 1;
    p->raw_data.len = t->nbytes;
    p->raw_data.data = t->data;
}

/* Reads a whole small file; the caller frees *out. */
static af_status read_file(const char *path, uint8_t **out, size_t *size, af_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return af_errorf(err, AF_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 65536;
            uint8_t *b = af_realloc(buf, cap);
            if (!b) {
                af_free(buf);
                fclose(f);
                return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory reading '%s'", path);
            }
            buf = b;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        af_free(buf);
        return af_errorf(err, AF_ERR_IO, "error reading '%s'", path);
    }
    *out = buf;
    *size = n;
    return AF_OK;
}

af_status af_tensor_read_pb(const char *path, af_tensor *out, char **name_out, af_error *err) {
    memset(out, 0, sizeof *out);
    if (name_out) *name_out = NULL;
    uint8_t *buf = NULL;
    size_t size = 0;
    af_status st = read_file(path, &buf, &size, err);
    if (st != AF_OK) return st;
    Onnx__TensorProto *p = onnx__tensor_proto__unpack(&af_protobuf_allocator, size, buf);
    af_free(buf);
    if (!p) return af_errorf(err, AF_ERR_PARSE, "'%s' is not a valid TensorProto", path);
    st = af_tensor_from_proto(p, NULL, NULL, out, err);
    if (st == AF_OK && name_out && p->name && *p->name) {
        *name_out = af_strdup(p->name);
        if (!*name_out) {
            af_tensor_free_data(out);
            st = af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory");
        }
    }
    onnx__tensor_proto__free_unpacked(p, &af_protobuf_allocator);
    if (st != AF_OK) af_error_prefix(err, st, "%s", path);
    return st;
}

af_status af_tensor_write_pb(const char *path, const af_tensor *t, const char *name, af_error *err) {
    if (!t || t->rank < 0 || t->rank > AF_MAX_RANK)
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "tensor to write has no valid shape");
    Onnx__TensorProto p;
    int64_t dims[AF_MAX_RANK];
    af_tensor_to_proto(t, name, dims, &p);
    size_t n = onnx__tensor_proto__get_packed_size(&p);
    uint8_t *buf = af_malloc(n);
    if (!buf) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory writing '%s'", path);
    onnx__tensor_proto__pack(&p, buf);
    FILE *f = fopen(path, "wb");
    af_status st = AF_OK;
    if (!f) {
        st = af_errorf(err, AF_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    } else {
        if (fwrite(buf, 1, n, f) != n) st = af_errorf(err, AF_ERR_IO, "error writing '%s'", path);
        if (fclose(f) != 0 && st == AF_OK) st = af_errorf(err, AF_ERR_IO, "error writing '%s'", path);
    }
    af_free(buf);
    return st;
}
