/* Protobuf wire-format primitives shared by the loader's own passes over the bytes (the nesting
 * walk in load.c, the skeleton builder): they read what protobuf-c reads, and refuse the same. */
#ifndef AF_ONNX_PB_WIRE_H
#define AF_ONNX_PB_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reads a varint at p[*i] (at most 10 bytes, bits past 64 dropped), advancing *i; false when the
 * bytes end inside it or it runs longer. */
static inline bool af_pb_varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 70 && *i < n; shift += 7) {
        uint8_t b = p[(*i)++];
        if (shift < 64) *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

/* One field: its number and wire type, the tag at [start, tag_end), and for a length-delimited
 * field its value at [value, end). */
typedef struct af_pb_field {
    uint64_t number;
    int wire;
    size_t start, tag_end, value, end;
} af_pb_field;

/* Reads the field at p[*i] and steps over it; false when it is truncated or of a wire type other
 * than 0, 1, 2 and 5 (groups: protobuf-c refuses them too). */
static inline bool af_pb_next_field(const uint8_t *p, size_t n, size_t *i, af_pb_field *f) {
    uint64_t tag, v;
    f->start = *i;
    f->value = f->end = 0;
    if (!af_pb_varint(p, n, i, &tag)) return false;
    f->tag_end = *i;
    f->number = tag >> 3;
    f->wire = (int)(tag & 7);
    switch (f->wire) {
    case 0:
        if (!af_pb_varint(p, n, i, &v)) return false;
        break;
    case 1:
    case 5: {
        size_t w = f->wire == 1 ? 8 : 4;
        if (n - *i < w) return false;
        *i += w;
        break;
    }
    case 2:
        if (!af_pb_varint(p, n, i, &v) || v > n - *i) return false;
        f->value = *i;
        *i += (size_t)v;
        break;
    default:
        return false;
    }
    f->end = *i;
    return true;
}

#endif
