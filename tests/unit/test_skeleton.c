/* The loader's skeleton (src/onnx/skeleton.c): protobuf-c parses it to the same message as the whole
 * file minus the main graph's initializer payloads, and each ref points at exactly the bytes
 * protobuf-c finds there. Layouts it does not handle are refused, so the loader parses the file. */
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"
#include "onnx/skeleton.h"
#include "unit.h"

static uint8_t *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = n > 0 ? malloc((size_t)n) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = buf ? (size_t)n : 0;
    return buf;
}

static uint8_t *packed(const Onnx__ModelProto *m, size_t *size) {
    *size = onnx__model_proto__get_packed_size(m);
    uint8_t *buf = malloc(*size ? *size : 1);
    if (buf) onnx__model_proto__pack(m, buf);
    return buf;
}

static void check_model(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s/model.onnx", af_test_dir(), name);
    size_t size = 0;
    uint8_t *file = read_all(path, &size);
    Onnx__ModelProto *whole = file ? onnx__model_proto__unpack(NULL, size, file) : NULL;
    af_skeleton sk;
    if (!whole || !af_skeleton_build(file, size, &sk)) {
        af_test_fail(__FILE__, __LINE__, "%s: %s", name, whole ? "no skeleton" : "cannot read or parse");
        if (whole) onnx__model_proto__free_unpacked(whole, NULL);
        free(file);
        return;
    }
    CHECK(sk.size < size);
    Onnx__ModelProto *skel = onnx__model_proto__unpack(NULL, sk.size, sk.bytes);
    CHECK(skel != NULL);
    const Onnx__GraphProto *g = whole->graph;
    CHECK_EQ_INT(sk.n_refs, g->n_initializer);
    size_t n = sk.n_refs < g->n_initializer ? sk.n_refs : g->n_initializer, with_raw = 0;
    ProtobufCBinaryData *saved = calloc(n ? n : 1, sizeof *saved);
    for (size_t i = 0; i < n && saved; i++) {
        Onnx__TensorProto *t = g->initializer[i];
        const af_raw_ref *r = &sk.refs[i];
        CHECK_EQ_INT(r->present, t->has_raw_data);
        if (r->present && t->has_raw_data) {
            with_raw++;
            CHECK_EQ_INT(r->length, t->raw_data.len);
            CHECK(r->offset + r->length <= size);
            if (r->length == t->raw_data.len && r->offset + r->length <= size)
                CHECK(memcmp(file + r->offset, t->raw_data.data, r->length) == 0);
        }
        /* Without its payload the whole file's message must serialize as the skeleton's does. */
        saved[i] = t->raw_data;
        t->has_raw_data = 0;
        t->raw_data = (ProtobufCBinaryData){0};
    }
    CHECK(with_raw > 0);
    size_t na = 0, nb = 0;
    uint8_t *a = packed(whole, &na), *b = skel ? packed(skel, &nb) : NULL;
    CHECK(a && b && na == nb && memcmp(a, b, na) == 0);
    for (size_t i = 0; i < n && saved; i++) { /* handed back so free_unpacked frees them */
        g->initializer[i]->raw_data = saved[i];
        g->initializer[i]->has_raw_data = sk.refs[i].present;
    }
    free(a);
    free(b);
    free(saved);
    if (skel) onnx__model_proto__free_unpacked(skel, NULL);
    onnx__model_proto__free_unpacked(whole, NULL);
    af_skeleton_free(&sk);
    free(file);
}

AF_TEST(skeleton_parses_as_the_file_without_payloads) {
    static const char *const names[] = {"resnet_small", "resnet_small_bn_op11", "mobilenet_v3_small", "bert_tiny",
                                        "bert_tiny_dynamic"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) check_model(names[i]);
}

AF_TEST(skeleton_refuses_what_it_does_not_handle) {
    af_skeleton sk;
    /* ModelProto{graph{initializer{raw_data "a", raw_data "b"}}}: the last raw_data would win */
    static const uint8_t two_raw[] = {0x3a, 0x08, 0x2a, 0x06, 0x4a, 0x01, 'a', 0x4a, 0x01, 'b'};
    CHECK(!af_skeleton_build(two_raw, sizeof two_raw, &sk));
    /* two graph fields: protobuf merges them */
    static const uint8_t two_graphs[] = {0x3a, 0x00, 0x3a, 0x00};
    CHECK(!af_skeleton_build(two_graphs, sizeof two_graphs, &sk));
    /* a length past the end, and a group wire type */
    static const uint8_t past_end[] = {0x3a, 0x05, 0x2a};
    CHECK(!af_skeleton_build(past_end, sizeof past_end, &sk));
    static const uint8_t group[] = {0x0b};
    CHECK(!af_skeleton_build(group, sizeof group, &sk));
    /* the one-raw_data case: its payload is left out and found by its ref */
    static const uint8_t one_raw[] = {0x08, 0x07, 0x3a, 0x07, 0x2a, 0x05, 0x08, 0x01, 0x4a, 0x01, 'z'};
    CHECK(af_skeleton_build(one_raw, sizeof one_raw, &sk));
    static const uint8_t want[] = {0x08, 0x07, 0x3a, 0x04, 0x2a, 0x02, 0x08, 0x01};
    CHECK(sk.size == sizeof want && memcmp(sk.bytes, want, sizeof want) == 0);
    CHECK(sk.n_refs == 1 && sk.refs[0].present && sk.refs[0].length == 1 && one_raw[sk.refs[0].offset] == 'z');
    af_skeleton_free(&sk);
}
