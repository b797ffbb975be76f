/* Graph IR basics: value lookup, topological sort, cycle detection, dead-code removal, and the
 * sizes constant folding makes static. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autofusion.h"
#include "ir/graph.h"
#include "ir/model.h"
#include "ir/op.h"
#include "onnx_build.h"
#include "unit.h"

static int add_node(af_graph *g, const char *name, const char *op, int in0, int in1, int out) {
    int n = af_graph_add_node(g, name, op, "", NULL);
    int ins[2] = {in0, in1};
    af_node_set_io(&g->nodes[n], in1 >= 0 ? 2 : 1, ins, 1, &out, NULL);
    return n;
}

AF_TEST(graph_values_are_found_by_name) {
    af_graph *g = af_graph_new(NULL);
    char name[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "v%d", i);
        CHECK_EQ_INT(af_graph_add_value(g, name, NULL), i);
    }
    CHECK_EQ_INT(af_graph_find_value(g, "v0"), 0);
    CHECK_EQ_INT(af_graph_find_value(g, "v777"), 777);
    CHECK_EQ_INT(af_graph_find_value(g, "missing"), -1);
    af_graph_free(g);
}

AF_TEST(graph_toposort_orders_nodes_and_finds_cycles) {
    af_graph *g = af_graph_new(NULL);
    int x = af_graph_add_value(g, "x", NULL), a = af_graph_add_value(g, "a", NULL),
        b = af_graph_add_value(g, "b", NULL);
    g->values[x].kind = AF_VALUE_INPUT;
    add_node(g, "second", "Relu", a, -1, b); /* listed before its producer */
    add_node(g, "first", "Relu", x, -1, a);
    CHECK(af_graph_toposort(g, NULL) == AF_OK);
    CHECK(strcmp(g->nodes[0].name, "first") == 0);
    CHECK_EQ_INT(g->values[b].producer, 1);
    /* make it a cycle: first reads b */
    g->nodes[0].inputs[0] = b;
    af_error err = {0};
    CHECK(af_graph_toposort(g, &err) == AF_ERR_INVALID_MODEL);
    CHECK(strstr(err.message, "cycle") != NULL);
    af_graph_free(g);
}

AF_TEST(graph_remove_dead_keeps_only_what_reaches_outputs) {
    af_graph *g = af_graph_new(NULL);
    int x = af_graph_add_value(g, "x", NULL), a = af_graph_add_value(g, "a", NULL),
        dead = af_graph_add_value(g, "dead", NULL);
    g->values[x].kind = AF_VALUE_INPUT;
    add_node(g, "live", "Relu", x, -1, a);
    add_node(g, "unused", "Relu", x, -1, dead);
    int outs[1] = {a};
    g->outputs = malloc(sizeof outs);
    memcpy(g->outputs, outs, sizeof outs);
    g->n_outputs = 1;
    CHECK(af_graph_toposort(g, NULL) == AF_OK);
    af_graph_remove_dead(g);
    CHECK_EQ_INT(g->n_nodes, 1);
    CHECK(strcmp(g->nodes[0].name, "live") == 0);
    af_graph_free(g);
}

/* torch.chunk exports its split points as arithmetic on Shape(x): x[:, :C/2] is a Slice whose
 * `ends` is Div(Slice(Shape(x), 1, 2), 2). Those fold to constants at load; the Slice's output
 * must then have its static size too, or every step after it is planned without sizes and runs
 * on the bounds-checked reference kernels (ShuffleNetV2's convs did: 22.9 ms against 2.7). */
AF_TEST(graph_folded_slice_bounds_make_sizes_static) {
    ob_model *b = ob_new(13);
    const char *x = ob_input(b, 4, (int64_t[]){1, 8, 3, 5});
    const char *one = ob_const_i64(b, 1, (int64_t[]){1}, (int64_t[]){1});
    const char *two = ob_const_i64(b, 1, (int64_t[]){1}, (int64_t[]){2});
    const char *zero = ob_const_i64(b, 1, (int64_t[]){1}, (int64_t[]){0});
    const char *channels = ob_node(b, "Slice", 3, (const char *[]){ob_node1(b, "Shape", x), one, two});
    const char *half = ob_node2(b, "Div", channels, two);
    const char *first = ob_node(b, "Slice", 4, (const char *[]){x, zero, half, one});
    float w[4 * 4];
    for (int i = 0; i < 16; i++) w[i] = (float)(i % 5) - 2.0f;
    const char *y = ob_node2(b, "Conv", first, ob_const(b, 4, (int64_t[]){4, 4, 1, 1}, w));
    ob_output(b, y);
    af_error err = {0};
    af_model *m = ob_load(b, &err);
    CHECK(m != NULL);
    if (!m) {
        ob_free(b);
        return;
    }
    af_value_info info;
    CHECK(af_model_output_info(m, 0, &info) == AF_OK);
    CHECK_EQ_INT(info.rank, 4);
    const int64_t want[4] = {1, 4, 3, 5};
    for (int d = 0; d < 4 && info.rank == 4; d++) CHECK_EQ_INT(info.dims[d], want[d]);

    /* The conv gets a fast kernel (it needs its input's channels), and computes the right thing. */
    af_session *s = NULL;
    af_session_options o = af_session_options_default();
    CHECK(af_session_create(m, &o, &s, &err) == AF_OK);
    float xd[8 * 15];
    for (int i = 0; i < 8 * 15; i++) xd[i] = (float)((i * 7) % 11) - 5.0f;
    af_tensor in = {.dtype = AF_DTYPE_FLOAT, .rank = 4, .dims = {1, 8, 3, 5}, .data = xd};
    const char *names[1] = {x};
    char *report = NULL;
    size_t len = 0;
    if (s && af_session_set_profiling(s, 1, &err) == AF_OK && af_session_run(s, 1, names, &in, &err) == AF_OK) {
        const af_tensor *out = af_session_output(s, 0);
        const float *yd = out->data;
        CHECK_EQ_INT(out->nbytes, 4 * 15 * sizeof(float));
        for (int co = 0; co < 4 && out->nbytes == 4 * 15 * sizeof(float); co++)
            for (int p = 0; p < 15; p++) {
                float e = 0;
                for (int ci = 0; ci < 4; ci++) e += w[co * 4 + ci] * xd[ci * 15 + p];
                CHECK(fabsf(yd[co * 15 + p] - e) <= 1e-5f);
            }
        FILE *f = open_memstream(&report, &len);
        if (f) {
            af_session_profile_write(s, f);
            fclose(f);
        }
        /* The conv's step line, "Conv 'n4' [kernel]", names a fast kernel. */
        const char *line = report ? strstr(report, "Conv '") : NULL;
        const char *eol = line ? strchr(line, '\n') : NULL;
        const char *ref = line ? strstr(line, "[reference]") : NULL;
        CHECK(line && eol && (!ref || ref > eol));
    } else {
        CHECK(!"the session ran");
    }
    free(report);
    af_session_free(s);
    af_model_free(m);
    ob_free(b);
}

/* Dropout's mask, named by exporters but read by nothing, is omitted at load (the fast kernels
 * take Dropout, MaxPool, LayerNormalization and BatchNormalization only without their optional
 * outputs); a mask the graph outputs is kept. */
AF_TEST(graph_unread_optional_outputs_are_omitted) {
    for (int keep = 0; keep < 2; keep++) {
        ob_model *b = ob_new(13);
        const char *x = ob_input(b, 2, (int64_t[]){4, 8});
        ob_node1(b, "Dropout", x);
        const char *outs[2];
        ob_node_outputs(b, 2, 0, outs);
        ob_output(b, ob_node1(b, "Relu", outs[0]));
        if (keep) ob_output_of(b, outs[1], OB_BOOL);
        af_error err = {0};
        af_model *m = ob_load(b, &err);
        CHECK(m != NULL);
        if (m) {
            const af_node *d = NULL;
            for (int i = 0; i < m->graph->n_nodes; i++)
                if (m->graph->nodes[i].op == AF_OP_DROPOUT) d = &m->graph->nodes[i];
            CHECK(d && d->n_outputs == 2);
            if (d && d->n_outputs == 2) CHECK(keep ? d->outputs[1] >= 0 : d->outputs[1] == -1);
            af_model_free(m);
        }
        ob_free(b);
    }
}

/* x [1,3,9,8] -> Pad (mode, value, pads) -> consumer ("AveragePool", "Conv" or "MaxPool", 3x3);
 * `twice`: a Relu reads the Pad's output too. Returns the packed model. */
static bool pad_model(const char *consumer, float value, const int64_t pads[8], bool twice, uint8_t **buf,
                      size_t *size) {
    ob_model *b = ob_new(13);
    const char *x = ob_input(b, 4, (int64_t[]){1, 3, 9, 8});
    const char *p = ob_node(b, "Pad", 3,
                            (const char *[]){x, ob_const_i64(b, 1, (int64_t[]){8}, pads), ob_scalar(b, value)});
    const char *y;
    if (!strcmp(consumer, "Conv")) {
        float w[3 * 3 * 9];
        for (int i = 0; i < 81; i++) w[i] = (float)(i % 7) * 0.25f - 0.75f;
        y = ob_node2(b, "Conv", p, ob_const(b, 4, (int64_t[]){3, 3, 3, 3}, w));
        ob_attr_ints(b, "pads", 4, (int64_t[]){1, 0, 0, 1}); /* its own pads add to the Pad's */
    } else {
        y = ob_node1(b, consumer, p);
    }
    ob_attr_ints(b, "kernel_shape", 2, (int64_t[]){3, 3});
    ob_output(b, y);
    if (twice) ob_output(b, ob_node1(b, "Relu", p));
    const bool ok = ob_pack(b, buf, size) == 0;
    ob_free(b);
    return ok;
}

/* Output 0 of the model in buf on the reference kernels, loaded with or without the load-time
 * rewrites; the Pad nodes left in *pads. */
static float *pad_model_run(const uint8_t *buf, size_t size, bool rewrite, int *pads) {
    af_load_options lo = af_load_options_default();
    lo.fold_constants = rewrite;
    af_model *m = NULL;
    af_error err = {0};
    float *out = NULL;
    if (af_model_load_buffer(buf, size, NULL, &lo, &m, &err) != AF_OK) return NULL;
    *pads = 0;
    for (int i = 0; i < m->graph->n_nodes; i++) *pads += m->graph->nodes[i].op == AF_OP_PAD;
    af_session_options o = af_session_options_default();
    o.reference_kernels = 1;
    af_session *s = NULL;
    float xd[3 * 9 * 8];
    for (int i = 0; i < 3 * 9 * 8; i++) xd[i] = (float)((i * 13) % 17) - 8.0f;
    af_tensor x = {.dtype = AF_DTYPE_FLOAT, .rank = 4, .dims = {1, 3, 9, 8}, .data = xd, .nbytes = sizeof xd};
    const char *names[1] = {"in0"};
    if (af_session_create(m, &o, &s, &err) == AF_OK && af_session_run(s, 1, names, &x, &err) == AF_OK) {
        const af_tensor *y = af_session_output(s, 0);
        if ((out = malloc(y->nbytes + sizeof(float)))) {
            memcpy(out + 1, y->data, y->nbytes);
            out[0] = (float)(y->nbytes / sizeof(float)); /* the element count first */
        }
    }
    af_session_free(s);
    af_model_free(m);
    return out;
}

/* A zero Pad of the spatial axes moves into the AveragePool or Conv that alone reads it, with the
 * same outputs; a nonzero constant, a MaxPool (which pads with -inf), a Pad with another reader
 * or one of the channel axis stay. */
AF_TEST(graph_zero_pads_merge_into_their_conv_or_pool) {
    static const struct {
        const char *consumer;
        float value;
        int64_t pads[8];
        bool twice, merges;
    } cases[] = {
        {"AveragePool", 0, {0, 0, 1, 1, 0, 0, 1, 1}, false, true},
        {"AveragePool", 0, {0, 0, 2, 0, 0, 0, 1, 3}, false, true},
        {"Conv", 0, {0, 0, 1, 2, 0, 0, 2, 1}, false, true},
        {"AveragePool", 1, {0, 0, 1, 1, 0, 0, 1, 1}, false, false},
        {"MaxPool", 0, {0, 0, 1, 1, 0, 0, 1, 1}, false, false},
        {"AveragePool", 0, {0, 0, 1, 1, 0, 0, 1, 1}, true, false},
        {"AveragePool", 0, {0, 1, 1, 1, 0, 0, 1, 1}, false, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint8_t *buf = NULL;
        size_t size = 0;
        CHECK(pad_model(cases[i].consumer, cases[i].value, cases[i].pads, cases[i].twice, &buf, &size));
        int pads_kept = -1, pads_plain = -1;
        float *merged = buf ? pad_model_run(buf, size, true, &pads_kept) : NULL;
        float *plain = buf ? pad_model_run(buf, size, false, &pads_plain) : NULL;
        CHECK(merged && plain);
        CHECK_EQ_INT(pads_plain, 1);
        CHECK_EQ_INT(pads_kept, cases[i].merges ? 0 : 1);
        if (merged && plain) {
            CHECK(merged[0] == plain[0] && merged[0] > 0);
            int64_t off = 0;
            for (int64_t k = 1; merged[0] == plain[0] && k <= (int64_t)merged[0]; k++)
                off += !(fabsf(merged[k] - plain[k]) <= 1e-5f + 1e-6f * fabsf(plain[k]));
            if (off) printf("  case %zu: %lld outputs differ\n", i, (long long)off);
            CHECK_EQ_INT(off, 0);
        }
        free(merged), free(plain), free(buf);
    }
}
