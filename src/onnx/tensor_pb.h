/*
 * Conversion between ONNX TensorProto messages and af_tensor. Protobuf types stay in src/onnx/.
 *
 *   af_tensor t;
 *   if (af_tensor_from_proto(proto, base_dir, NULL, &t, err) != AF_OK) ...  // t.data owned by caller
 */
#ifndef AF_ONNX_TENSOR_PB_H
#define AF_ONNX_TENSOR_PB_H

#include "autofusion.h"
#include "onnx.pb-c.h"

/* The allocator protobuf-c uses, routed through af_malloc so out-of-memory tests cover parsing. */
extern ProtobufCAllocator af_protobuf_allocator;

/* What the loader lets stored tensors take: a rank and per-tensor size cap, and the bytes left of
 * the model's total (max_initializer_bytes), which each decoded tensor uses up. */
typedef struct af_tensor_budget {
    int max_rank;
    uint64_t max_tensor_bytes;
    uint64_t max_total_bytes;
    uint64_t bytes_left;
} af_tensor_budget;

/* Decodes a TensorProto's dims and data (raw, typed fields or external data resolved against
 * base_dir, which NULL forbids). Checks every length and, when budget is not NULL, its limits,
 * before allocating; never reads past the message. budget NULL: rank AF_MAX_RANK, no byte caps. */
af_status af_tensor_from_proto(const Onnx__TensorProto *p, const char *base_dir, af_tensor_budget *budget,
                               af_tensor *out, af_error *err);
/* The same, moving raw_data out of p instead of copying it (p keeps no data afterwards), so a
 * loaded model does not hold its weights twice. The data is then only 16-byte aligned. */
af_status af_tensor_take_proto(Onnx__TensorProto *p, const char *base_dir, af_tensor_budget *budget,
                               af_tensor *out, af_error *err);
/* Fills a TensorProto whose raw_data points at t->data (no copy): valid while t lives.
 * dims_buf must hold AF_MAX_RANK entries. */
void af_tensor_to_proto(const af_tensor *t, const char *name, int64_t *dims_buf, Onnx__TensorProto *p);

#endif
