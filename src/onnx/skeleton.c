/* The skeleton of a model file: its ModelProto without the main graph's initializer payloads. */
#include "onnx/skeleton.h"

#include <string.h>

#include "onnx/pb_wire.h"
#include "util/alloc.h"

/* Field numbers in onnx.proto: ModelProto.graph, GraphProto.initializer, TensorProto.raw_data. */
enum { MODEL_GRAPH = 7, GRAPH_INITIALIZER = 5, TENSOR_RAW_DATA = 9 };
enum { LEVEL_MODEL, LEVEL_GRAPH, LEVEL_TENSOR };

typedef struct builder {
    const uint8_t *file;
    uint8_t *out; /* NULL while measuring */
    size_t used;
    af_raw_ref *refs;
    size_t n_refs, cap_refs;
} builder;

static size_t varint_size(uint64_t v) {
    size_t k = 1;
    while (v >= 0x80) v >>= 7, k++;
    return k;
}

static void write_varint(builder *b, uint64_t v) {
    while (v >= 0x80) {
        b->out[b->used++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b->out[b->used++] = (uint8_t)v;
}

static bool add_ref(builder *b, af_raw_ref r) {
    if (b->n_refs == b->cap_refs) {
        size_t cap = b->cap_refs ? 2 * b->cap_refs : 64;
        af_raw_ref *grown = af_realloc(b->refs, cap * sizeof *grown);
        if (!grown) return false;
        b->refs = grown;
        b->cap_refs = cap;
    }
    b->refs[b->n_refs++] = r;
    return true;
}

/* Adds the stripped message p[0..n) to *size and, when b->out is set, writes it there. */
static bool strip(builder *b, int level, const uint8_t *p, size_t n, size_t *size) {
    size_t i = 0;
    int n_graphs = 0;
    af_raw_ref raw = {0};
    while (i < n) {
        af_pb_field f;
        if (!af_pb_next_field(p, n, &i, &f)) return false;
        int child = -1;
        if (f.wire == 2 && level == LEVEL_MODEL && f.number == MODEL_GRAPH) child = LEVEL_GRAPH;
        if (f.wire == 2 && level == LEVEL_GRAPH && f.number == GRAPH_INITIALIZER) child = LEVEL_TENSOR;
        if (child == LEVEL_GRAPH && ++n_graphs > 1) return false; /* protobuf would merge them */
        if (child >= 0) {
            /* The child's stripped size first: its length prefix comes before it. */
            uint8_t *out = b->out;
            size_t inner = 0;
            b->out = NULL;
            bool ok = strip(b, child, p + f.value, f.end - f.value, &inner);
            b->out = out;
            if (!ok) return false;
            *size += (f.tag_end - f.start) + varint_size(inner) + inner;
            if (out) {
                memcpy(out + b->used, p + f.start, f.tag_end - f.start);
                b->used += f.tag_end - f.start;
                write_varint(b, inner);
                if (!strip(b, child, p + f.value, f.end - f.value, &(size_t){0})) return false;
            }
        } else if (level == LEVEL_TENSOR && f.wire == 2 && f.number == TENSOR_RAW_DATA) {
            if (raw.present) return false; /* the last one would win; keep this simple case only */
            raw = (af_raw_ref){.present = true, .offset = (size_t)(p - b->file) + f.value, .length = f.end - f.value};
        } else {
            *size += f.end - f.start;
            if (b->out) {
                memcpy(b->out + b->used, p + f.start, f.end - f.start);
                b->used += f.end - f.start;
            }
        }
    }
    return level != LEVEL_TENSOR || !b->out || add_ref(b, raw);
}

bool af_skeleton_build(const uint8_t *file, size_t size, af_skeleton *out) {
    memset(out, 0, sizeof *out);
    builder b = {.file = file};
    size_t need = 0;
    if (!strip(&b, LEVEL_MODEL, file, size, &need)) return false;
    /* need <= size: fields are only dropped and length prefixes only shrink */
    if (!(b.out = af_malloc(need ? need : 1))) return false;
    if (!strip(&b, LEVEL_MODEL, file, size, &(size_t){0}) || b.used != need) {
        af_free(b.out);
        af_free(b.refs);
        return false;
    }
    *out = (af_skeleton){.bytes = b.out, .size = need, .refs = b.refs, .n_refs = b.n_refs};
    return true;
}

void af_skeleton_free(af_skeleton *sk) {
    af_free(sk->bytes);
    af_free(sk->refs);
    memset(sk, 0, sizeof *sk);
}
