/*
 * A model's bytes without the raw_data payloads of its main graph's initializers, for protobuf-c to
 * parse while the payloads stay where they are (in the mapped file). protobuf-c copies every bytes
 * field it parses, so parsing the file whole holds the weights twice; with the skeleton the loader
 * copies one initializer at a time out of the file instead.
 *
 *   af_skeleton sk;
 *   if (af_skeleton_build(file, size, &sk)) {
 *       ... parse sk.bytes; initializer i's payload is file[sk.refs[i].offset ...] when present ...
 *       af_skeleton_free(&sk);
 *   }                                        // false: parse the file itself
 */
#ifndef AF_ONNX_SKELETON_H
#define AF_ONNX_SKELETON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where one initializer's raw_data payload lies in the file. */
typedef struct af_raw_ref {
    bool present; /* the TensorProto had raw_data (its only one: a repeated field makes the build fail) */
    size_t offset, length;
} af_raw_ref;

typedef struct af_skeleton {
    uint8_t *bytes; /* the ModelProto with those raw_data fields left out, lengths re-encoded */
    size_t size;
    af_raw_ref *refs; /* one per main-graph initializer, in the order protobuf-c lists them */
    size_t n_refs;
} af_skeleton;

/* False, with nothing allocated, when out of memory or when the bytes are not laid out as this
 * handles (malformed, a graph field given twice, a tensor with two raw_data fields): the caller
 * then parses the whole buffer, which reports whatever is wrong with it. */
bool af_skeleton_build(const uint8_t *file, size_t size, af_skeleton *out);
void af_skeleton_free(af_skeleton *sk);

#endif
