#include "autofusion.h"

static const struct {
    const char *name;
    size_t size;
} dtype_info[AF_DTYPE_MAX] = {
    [AF_DTYPE_UNDEFINED] = {"undefined", 0}, [AF_DTYPE_FLOAT] = {"float32", 4},
    [AF_DTYPE_UINT8] = {"uint8", 1},         [AF_DTYPE_INT8] = {"int8", 1},
    [AF_DTYPE_UINT16] = {"uint16", 2},       [AF_DTYPE_INT16] = {"int16", 2},
    [AF_DTYPE_INT32] = {"int32", 4},         [AF_DTYPE_INT64] = {"int64", 8},
    [AF_DTYPE_STRING] = {"string", 0},       [AF_DTYPE_BOOL] = {"bool", 1},
    [AF_DTYPE_FLOAT16] = {"float16", 2},     [AF_DTYPE_DOUBLE] = {"float64", 8},
    [AF_DTYPE_UINT32] = {"uint32", 4},       [AF_DTYPE_UINT64] = {"uint64", 8},
    [14] = {"complex64", 0},                 [15] = {"complex128", 0},
    [AF_DTYPE_BFLOAT16] = {"bfloat16", 2},
};

const char *af_dtype_name(af_dtype dtype) {
    return (unsigned)dtype < AF_DTYPE_MAX && dtype_info[dtype].name ? dtype_info[dtype].name : "unknown";
}

size_t af_dtype_size(af_dtype dtype) {
    return (unsigned)dtype < AF_DTYPE_MAX ? dtype_info[dtype].size : 0;
}
