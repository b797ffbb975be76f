/* The ONNX writer: load -> save -> load keeps the graph (nodes, names, attributes, constants) and the
 * outputs bit for bit, on the fixture models, on backend node tests with subgraphs and every
 * attribute type, and on hand-built graphs; plus its error paths (I/O, size limit, out of memory).
 * Set AF_ROUNDTRIP_KEEP_DIR to keep the folded fixtures it saves (for tests/tools/check_saved_model.py). */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/model.h"
#include "ir/tensor.h"
#include "onnx.pb-c.h"
#include "onnx/tensor_pb.h"
#include "unit.h"
#include "util/alloc.h"

#define NODE_TEST_DIR "/usr/include/onnx/backend/test/data/node"

/* ---- structural comparison ------------------------------------------------------------------ */

/* Reports the first difference under `where`; returns 1 when equal. */
#define DIFF(...) (af_test_fail(__FILE__, __LINE__, __VA_ARGS__), 0)

static int same_str(const char *a, const char *b) { return (!a && !b) || (a && b && strcmp(a, b) == 0); }

static int same_tensor(const char *where, const char *what, const af_tensor *a, const af_tensor *b, int bytes) {
    if (a->dtype != b->dtype || a->rank != b->rank)
        return DIFF("%s: %s is %s rank %d, reloaded %s rank %d", where, what, af_dtype_name(a->dtype), a->rank,
                    af_dtype_name(b->dtype), b->rank);
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d])
            return DIFF("%s: %s dim %d is %lld, reloaded %lld", where, what, d, (long long)a->dims[d],
                        (long long)b->dims[d]);
    if (!bytes) return 1;
    if (a->nbytes != b->nbytes) return DIFF("%s: %s has %zu bytes, reloaded %zu", where, what, a->nbytes, b->nbytes);
    if (a->nbytes && memcmp(a->data, b->data, a->nbytes) != 0) return DIFF("%s: %s bytes differ", where, what);
    return 1;
}

/* Value ia of ga against ib of gb: name, kind, type, shape, constant bytes; symbolic dims where
 * the file declares them (graph inputs and outputs). */
static int same_value(const char *where, const af_graph *ga, int ia, const af_graph *gb, int ib, int declared) {
    if (ia < 0 || ib < 0) return ia == ib ? 1 : DIFF("%s: optional value present in one graph only", where);
    const af_value *a = &ga->values[ia], *b = &gb->values[ib];
    if (strcmp(a->name, b->name) != 0) return DIFF("%s: value '%s' became '%s'", where, a->name, b->name);
    if (a->kind != b->kind || a->has_default != b->has_default || a->is_output != b->is_output)
        return DIFF("%s: value '%s' kind %d/default %d/output %d became %d/%d/%d", where, a->name, a->kind,
                    a->has_default, a->is_output, b->kind, b->has_default, b->is_output);
    int data = a->kind == AF_VALUE_CONST || a->has_default;
    if (!same_tensor(where, a->name, &a->t, &b->t, data)) return 0;
    for (int d = 0; declared && d < a->t.rank; d++)
        if (a->t.dims[d] < 0 && !same_str(a->dim_params[d], b->dim_params[d]))
            return DIFF("%s: value '%s' dim %d is '%s', reloaded '%s'", where, a->name, d,
                        a->dim_params[d] ? a->dim_params[d] : "(none)", b->dim_params[d] ? b->dim_params[d] : "(none)");
    return 1;
}

static int same_graph(const char *where, const af_graph *a, const af_graph *b);

static int same_attr(const char *where, const af_attr *a, const af_attr *b) {
    if (strcmp(a->name, b->name) != 0 || a->type != b->type)
        return DIFF("%s: attribute '%s' (type %d) became '%s' (type %d)", where, a->name, a->type, b->name, b->type);
    char sub[512];
    snprintf(sub, sizeof sub, "%s.%s", where, a->name);
    switch (a->type) {
    case AF_ATTR_FLOAT: return memcmp(&a->f, &b->f, sizeof a->f) == 0 ? 1 : DIFF("%s: %g became %g", sub, a->f, b->f);
    case AF_ATTR_INT: return a->i == b->i ? 1 : DIFF("%s: %lld became %lld", sub, (long long)a->i, (long long)b->i);
    case AF_ATTR_STRING: return strcmp(a->s, b->s) == 0 ? 1 : DIFF("%s: '%s' became '%s'", sub, a->s, b->s);
    case AF_ATTR_TENSOR: return same_tensor(sub, "tensor", &a->t, &b->t, 1);
    case AF_ATTR_GRAPH: return same_graph(sub, a->g, b->g);
    default: break;
    }
    if (a->n != b->n) return DIFF("%s: %d elements became %d", sub, a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        int ok = a->type == AF_ATTR_FLOATS    ? memcmp(&a->floats[i], &b->floats[i], sizeof(float)) == 0
                 : a->type == AF_ATTR_INTS    ? a->ints[i] == b->ints[i]
                 : a->type == AF_ATTR_STRINGS ? strcmp(a->strings[i], b->strings[i]) == 0
                                              : 0;
        if (!ok) return DIFF("%s: element %d differs", sub, i);
    }
    return 1;
}

static int same_graph(const char *where, const af_graph *a, const af_graph *b) {
    if (!same_str(a->name, b->name)) return DIFF("%s: graph name '%s' became '%s'", where, a->name, b->name);
    if (a->opset != b->opset) return DIFF("%s: opset %d became %d", where, a->opset, b->opset);
    if (a->n_inputs != b->n_inputs || a->n_outputs != b->n_outputs || a->n_nodes != b->n_nodes)
        return DIFF("%s: %d inputs, %d outputs, %d nodes became %d, %d, %d", where, a->n_inputs, a->n_outputs,
                    a->n_nodes, b->n_inputs, b->n_outputs, b->n_nodes);
    for (int i = 0; i < a->n_inputs; i++)
        if (!same_value(where, a, a->inputs[i], b, b->inputs[i], 1)) return 0;
    for (int i = 0; i < a->n_outputs; i++)
        if (!same_value(where, a, a->outputs[i], b, b->outputs[i], 1)) return 0;
    for (int i = 0; i < a->n_nodes; i++) {
        const af_node *na = &a->nodes[i], *nb = &b->nodes[i];
        char w[512];
        snprintf(w, sizeof w, "%s/node %d '%s' (%s)", where, i, na->name, na->op_type);
        if (strcmp(na->name, nb->name) || strcmp(na->op_type, nb->op_type) || strcmp(na->domain, nb->domain))
            return DIFF("%s: became '%s' (%s, domain '%s')", w, nb->name, nb->op_type, nb->domain);
        if (na->n_inputs != nb->n_inputs || na->n_outputs != nb->n_outputs || na->n_attrs != nb->n_attrs)
            return DIFF("%s: %d/%d/%d inputs/outputs/attributes became %d/%d/%d", w, na->n_inputs, na->n_outputs,
                        na->n_attrs, nb->n_inputs, nb->n_outputs, nb->n_attrs);
        for (int k = 0; k < na->n_inputs; k++)
            if (!same_value(w, a, na->inputs[k], b, nb->inputs[k], 0)) return 0;
        for (int k = 0; k < na->n_outputs; k++)
            if (!same_value(w, a, na->outputs[k], b, nb->outputs[k], 0)) return 0;
        for (int k = 0; k < na->n_attrs; k++)
            if (!same_attr(w, &na->attrs[k], &nb->attrs[k])) return 0;
    }
    return 1;
}

static int same_model(const char *where, const af_model *a, const af_model *b) {
    if (a->ir_version != b->ir_version || !same_str(a->producer_name, b->producer_name) ||
        !same_str(a->producer_version, b->producer_version) || a->n_opsets != b->n_opsets)
        return DIFF("%s: model header (ir_version %lld, producer, %d opsets) changed", where, (long long)a->ir_version,
                    a->n_opsets);
    for (int i = 0; i < a->n_opsets; i++)
        if (strcmp(a->opsets[i].domain, b->opsets[i].domain) || a->opsets[i].version != b->opsets[i].version)
            return DIFF("%s: opset import %d changed", where, i);
    return same_graph(where, a->graph, b->graph);
}

/* ---- helpers -------------------------------------------------------------------------------- */

/* A fresh temporary file name in /tmp (the file exists, empty); the caller unlinks it. */
static void temp_path(char *buf, size_t n) {
    snprintf(buf, n, "/tmp/af_roundtrip_XXXXXX");
    int fd = mkstemp(buf);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
}

static int read_whole(const char *path, uint8_t **out, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc(len > 0 ? (size_t)len : 1);
    *size = *out ? fread(*out, 1, (size_t)len, f) : 0;
    fclose(f);
    return *out && *size == (size_t)len;
}

static int same_file_bytes(const char *p1, const char *p2) {
    uint8_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    int ok = read_whole(p1, &a, &na) && read_whole(p2, &b, &nb) && na == nb && memcmp(a, b, na) == 0;
    free(a);
    free(b);
    return ok;
}

static int n_runs_compared;

/* Runs both models on dir/test_data_set_0 and checks the outputs are identical bytes. */
static void check_same_outputs(const char *where, const char *dir, const af_model *a, const af_model *b) {
    char first[4200];
    snprintf(first, sizeof first, "%s/test_data_set_0/input_0.pb", dir);
    if (access(first, R_OK) != 0) {
        printf("  %s: no test data, outputs not compared\n", where);
        return;
    }
    af_test_tensors in;
    if (!af_test_read_set(dir, "input", &in)) return;
    const char *const *names = (const char *const *)in.names;
    af_error err = {0};
    af_session *sa = NULL, *sb = NULL;
    af_session_options opts = af_session_options_default();
    opts.n_threads = 1;
    int ok = af_session_create(a, &opts, &sa, &err) == AF_OK && af_session_run(sa, in.n, names, in.t, &err) == AF_OK;
    if (!ok) af_test_fail(__FILE__, __LINE__, "%s: original model: %s", where, err.message);
    if (ok && (af_session_create(b, &opts, &sb, &err) != AF_OK || af_session_run(sb, in.n, names, in.t, &err) != AF_OK)) {
        af_test_fail(__FILE__, __LINE__, "%s: saved model: %s", where, err.message);
        ok = 0;
    }
    if (ok) {
        CHECK_EQ_INT(af_session_n_outputs(sb), af_session_n_outputs(sa));
        for (int k = 0; k < af_session_n_outputs(sa) && k < af_session_n_outputs(sb); k++) {
            const af_tensor *ta = af_session_output(sa, k), *tb = af_session_output(sb, k);
            char w[512];
            snprintf(w, sizeof w, "%s output %d", where, k);
            CHECK(strcmp(af_session_output_name(sa, k), af_session_output_name(sb, k)) == 0);
            same_tensor(w, af_session_output_name(sa, k), ta, tb, 1);
        }
        n_runs_compared++;
    }
    af_session_free(sa);
    af_session_free(sb);
    af_test_tensors_free(&in);
}

/* load -> save -> load -> save on one model; returns 0 when skipped as unsupported. */
static int roundtrip_file(const char *label, const char *dir, int fold, const char *keep_as) {
    char path[4096], where[512];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    snprintf(where, sizeof where, "%s (fold %d)", label, fold);
    af_load_options lo = af_load_options_default();
    lo.fold_constants = fold;
    af_error err = {0};
    af_model *a = NULL, *b = NULL;
    af_status st = af_model_load(path, &lo, &a, &err);
    if (st == AF_ERR_UNSUPPORTED) {
        printf("  skipped %s: %s\n", where, err.message);
        return 0;
    }
    if (st != AF_OK) {
        af_test_fail(__FILE__, __LINE__, "%s: load: %s", where, err.message);
        return 0;
    }
    char saved[64], again[64];
    temp_path(saved, sizeof saved);
    temp_path(again, sizeof again);
    st = af_model_save(a, saved, &err);
    if (st != AF_OK) af_test_fail(__FILE__, __LINE__, "%s: save: %s", where, err.message);
    if (st == AF_OK && (st = af_model_load(saved, &lo, &b, &err)) != AF_OK)
        af_test_fail(__FILE__, __LINE__, "%s: reload: %s", where, err.message);
    if (st == AF_OK) {
        same_model(where, a, b);
        check_same_outputs(where, dir, a, b);
        /* The written form is a fixed point: saving the reloaded model gives the same bytes. */
        CHECK(af_model_save(b, again, &err) == AF_OK);
        if (!same_file_bytes(saved, again)) af_test_fail(__FILE__, __LINE__, "%s: second save differs", where);
        if (keep_as) {
            CHECK(af_model_save(a, keep_as, &err) == AF_OK);
            printf("  kept %s as %s\n", where, keep_as);
        }
    }
    af_model_free(a);
    af_model_free(b);
    unlink(saved);
    unlink(again);
    return st == AF_OK;
}

/* ---- models from files ---------------------------------------------------------------------- */

AF_TEST(roundtrip_fixture_models) {
    char root[4096];
    snprintf(root, sizeof root, "%s/models", af_test_dir());
    DIR *d = opendir(root);
    CHECK(d != NULL);
    if (!d) return;
    const char *keep_dir = getenv("AF_ROUNDTRIP_KEEP_DIR");
    int done = 0;
    n_runs_compared = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char dir[4096], model[4200], keep[4200];
        snprintf(dir, sizeof dir, "%s/%s", root, e->d_name);
        snprintf(model, sizeof model, "%s/model.onnx", dir);
        if (access(model, R_OK) != 0) continue;
        if (keep_dir) snprintf(keep, sizeof keep, "%s/%s.onnx", keep_dir, e->d_name);
        for (int fold = 0; fold <= 1; fold++)
            done += roundtrip_file(e->d_name, dir, fold, keep_dir && fold ? keep : NULL);
    }
    closedir(d);
    printf("  %d fixture round trips, %d with outputs compared\n", done, n_runs_compared);
    CHECK(done > 0);
}

AF_TEST(roundtrip_backend_node_tests) {
    static const char *const names[] = {
        "test_if",                                      /* GRAPH attributes, constants in branches */
        "test_loop11",                                  /* Loop body reading an outer value */
        "test_range_float_type_positive_delta_expanded", /* Loop inside a function body expansion */
        "test_scan_sum",                                /* IR version 3 */
        "test_constantofshape_float_ones",              /* TENSOR attribute */
        "test_constantofshape_int_zeros",
        "test_constantofshape_int_shape_zero",
        "test_convtranspose_output_shape",              /* INTS */
        "test_convtranspose_autopad_same",              /* STRING */
        "test_convtranspose_pads",
        "test_resize_upsample_scales_cubic_A_n0p5_exclude_outside", /* FLOAT */
        "test_resize_downsample_scales_linear",
        "test_resize_tf_crop_and_resize",
        "test_split_variable_parts_2d",
        "test_split_equal_parts_default_axis",
        "test_split_zero_size_splits",
        "test_dropout_default_mask",                    /* optional outputs */
        "test_clip_default_inbounds",                   /* omitted optional inputs */
        "test_convtranspose_with_kernel",               /* IR version 3 */
    };
    struct stat sb;
    if (stat(NODE_TEST_DIR, &sb) != 0) {
        printf("  skipped: %s is missing\n", NODE_TEST_DIR);
        return;
    }
    int done = 0;
    n_runs_compared = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", NODE_TEST_DIR, names[i]);
        if (stat(dir, &sb) != 0) {
            printf("  skipped %s: not in this ONNX version\n", names[i]);
            continue;
        }
        for (int fold = 0; fold <= 1; fold++) done += roundtrip_file(names[i], dir, fold, NULL);
    }
    printf("  %d backend round trips, %d with outputs compared\n", done, n_runs_compared);
}

/* ---- a hand-built graph with every attribute type ------------------------------------------- */

static int add_value(af_graph *g, const char *name, af_value_kind kind, af_dtype dt, int rank, const int64_t *dims) {
    int id = af_graph_add_value(g, name, NULL);
    af_value *v = &g->values[id];
    v->kind = kind;
    v->t.dtype = dt;
    v->t.rank = rank;
    for (int d = 0; d < rank; d++) v->t.dims[d] = dims[d];
    if (kind == AF_VALUE_CONST) af_tensor_alloc(&v->t, NULL);
    return id;
}

static af_attr *add_attr(af_node *n, const char *name, af_attr_type type) {
    af_attr *a = &n->attrs[n->n_attrs++];
    a->name = af_strdup(name);
    a->type = type;
    return a;
}

static int *int_list(int n, const int *v) {
    int *p = af_malloc((size_t)n * sizeof *p);
    memcpy(p, v, (size_t)n * sizeof *p);
    return p;
}

/*   x[N,3] -relu(every attribute type; subgraph reads c)-> r -Add(dflt)-> y -Clip(,cmax)-> z
 *   z -Dropout-> (w, omitted mask); outputs y, w. */
static af_model *build_model(int64_t ir_version) {
    af_model *m = af_calloc(1, sizeof *m);
    m->ir_version = ir_version;
    m->producer_name = af_strdup("roundtrip-test");
    m->producer_version = af_strdup("1.0");
    m->n_opsets = 2;
    m->opsets = af_calloc(2, sizeof *m->opsets);
    m->opsets[0] = (af_opset_id){af_strdup(""), 13};
    m->opsets[1] = (af_opset_id){af_strdup("com.example.unused"), 1};
    af_graph *g = m->graph = af_graph_new(NULL);
    g->opset = 13;
    g->name = af_strdup("handmade");
    const int64_t d_n3[2] = {-1, 3}, d3[1] = {3};
    int x = add_value(g, "x", AF_VALUE_INPUT, AF_DTYPE_FLOAT, 2, d_n3);
    g->values[x].dim_params[0] = af_strdup("N");
    int dflt = add_value(g, "dflt", AF_VALUE_CONST, AF_DTYPE_FLOAT, 1, d3);
    g->values[dflt].kind = AF_VALUE_INPUT;
    g->values[dflt].has_default = true;
    for (int i = 0; i < 3; i++) ((float *)g->values[dflt].t.data)[i] = 0.25f * (float)(i + 1);
    int c = add_value(g, "c", AF_VALUE_CONST, AF_DTYPE_INT64, 1, d3);
    for (int i = 0; i < 3; i++) ((int64_t *)g->values[c].t.data)[i] = -7 + i;
    int cmax = add_value(g, "cmax", AF_VALUE_CONST, AF_DTYPE_FLOAT, 0, NULL);
    *(float *)g->values[cmax].t.data = 0.5f;
    int r = add_value(g, "r", AF_VALUE_NODE, AF_DTYPE_FLOAT, 2, d_n3);
    int y = add_value(g, "y", AF_VALUE_NODE, AF_DTYPE_FLOAT, 2, d_n3);
    int z = add_value(g, "z", AF_VALUE_NODE, AF_DTYPE_FLOAT, 2, d_n3);
    int w = add_value(g, "w", AF_VALUE_NODE, AF_DTYPE_FLOAT, 2, d_n3);
    g->values[y].is_output = g->values[w].is_output = true;
    g->n_inputs = 2;
    g->inputs = int_list(2, (int[]){x, dflt});
    g->n_outputs = 2;
    g->outputs = int_list(2, (int[]){y, w});

    int n = af_graph_add_node(g, "relu", "Relu", "", NULL);
    af_node_set_io(&g->nodes[n], 1, &x, 1, &r, NULL);
    af_node *relu = &g->nodes[n];
    relu->attrs = af_calloc(9, sizeof(af_attr));
    add_attr(relu, "a_float", AF_ATTR_FLOAT)->f = -0.0f;
    add_attr(relu, "a_int", AF_ATTR_INT)->i = INT64_MIN;
    add_attr(relu, "a_string", AF_ATTR_STRING)->s = af_strdup("hello, world");
    af_attr *a = add_attr(relu, "a_tensor", AF_ATTR_TENSOR);
    a->t = (af_tensor){.dtype = AF_DTYPE_FLOAT16, .rank = 2, .dims = {1, 2}};
    af_tensor_alloc(&a->t, NULL);
    ((uint16_t *)a->t.data)[0] = 0x3c00;
    ((uint16_t *)a->t.data)[1] = 0xfc00;
    a = add_attr(relu, "a_empty_tensor", AF_ATTR_TENSOR);
    a->t = (af_tensor){.dtype = AF_DTYPE_INT32, .rank = 2, .dims = {0, 4}};
    af_tensor_alloc(&a->t, NULL);
    a = add_attr(relu, "a_floats", AF_ATTR_FLOATS);
    a->n = 3;
    a->floats = af_malloc(3 * sizeof(float));
    memcpy(a->floats, (float[]){1.5f, -2.0f, 1e-30f}, 3 * sizeof(float));
    a = add_attr(relu, "a_ints", AF_ATTR_INTS);
    a->n = 0;
    a->ints = af_malloc(sizeof(int64_t));
    a = add_attr(relu, "a_strings", AF_ATTR_STRINGS);
    a->n = 3;
    a->strings = af_calloc(3, sizeof(char *));
    a->strings[0] = af_strdup("a"), a->strings[1] = af_strdup(""), a->strings[2] = af_strdup("bc");
    a = add_attr(relu, "a_graph", AF_ATTR_GRAPH);
    af_graph *sub = a->g = af_graph_new(g);
    sub->name = af_strdup("sub");
    int sc = add_value(sub, "c", AF_VALUE_OUTER, AF_DTYPE_INT64, 1, d3);
    sub->values[sc].outer_id = c;
    int so = add_value(sub, "sub_out", AF_VALUE_NODE, AF_DTYPE_INT64, 1, d3);
    sub->values[so].is_output = true;
    sub->n_outputs = 1;
    sub->outputs = int_list(1, &so);
    n = af_graph_add_node(sub, "ident", "Identity", "", NULL);
    af_node_set_io(&sub->nodes[n], 1, &sc, 1, &so, NULL);

    n = af_graph_add_node(g, "add", "Add", "", NULL);
    af_node_set_io(&g->nodes[n], 2, (int[]){r, dflt}, 1, &y, NULL);
    n = af_graph_add_node(g, "clip", "Clip", "", NULL);
    af_node_set_io(&g->nodes[n], 3, (int[]){y, -1, cmax}, 1, &z, NULL);
    n = af_graph_add_node(g, "drop", "Dropout", "", NULL);
    af_node_set_io(&g->nodes[n], 1, &z, 2, (int[]){w, -1}, NULL);
    for (int i = 0; i < g->n_nodes; i++)
        for (int o = 0; o < g->nodes[i].n_outputs; o++)
            if (g->nodes[i].outputs[o] >= 0) g->values[g->nodes[i].outputs[o]].producer = i;
    return m;
}

static Onnx__ModelProto *unpack_file(const char *path) {
    uint8_t *buf = NULL;
    size_t size = 0;
    Onnx__ModelProto *mp = read_whole(path, &buf, &size) ? onnx__model_proto__unpack(NULL, size, buf) : NULL;
    free(buf);
    return mp;
}

static const Onnx__NodeProto *find_node(const Onnx__GraphProto *g, const char *name) {
    for (size_t i = 0; i < g->n_node; i++)
        if (g->node[i]->name && strcmp(g->node[i]->name, name) == 0) return g->node[i];
    return NULL;
}

/* What the file holds, checked with protobuf-c directly. */
static void check_handmade_proto(const Onnx__ModelProto *mp, int ir3) {
    CHECK(mp->has_ir_version && mp->ir_version == (ir3 ? 3 : 8));
    CHECK(strcmp(mp->producer_name, "roundtrip-test") == 0 && strcmp(mp->producer_version, "1.0") == 0);
    CHECK_EQ_INT(mp->n_opset_import, 2);
    CHECK(strcmp(mp->opset_import[1]->domain, "com.example.unused") == 0 && mp->opset_import[1]->version == 1);
    const Onnx__GraphProto *g = mp->graph;
    CHECK(strcmp(g->name, "handmade") == 0);
    CHECK_EQ_INT(g->n_input, 2);
    const Onnx__TensorShapeProto *xs = g->input[0]->type->tensor_type->shape;
    CHECK(g->input[0]->type->tensor_type->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    CHECK(xs->n_dim == 2 && xs->dim[0]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
          strcmp(xs->dim[0]->dim_param, "N") == 0 && xs->dim[1]->dim_value == 3);
    /* y's batch dim is unknown and unnamed: neither field set */
    CHECK(g->n_output == 2 && strcmp(g->output[0]->name, "y") == 0);
    CHECK(g->output[0]->type->tensor_type->shape->dim[0]->value_case ==
          ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE__NOT_SET);
    /* dflt is an input with an initializer; c and cmax are initializers, or Constant nodes in IR 3 */
    CHECK_EQ_INT(g->n_initializer, ir3 ? 1 : 3);
    CHECK(strcmp(g->initializer[0]->name, "dflt") == 0 && g->initializer[0]->has_raw_data &&
          g->initializer[0]->raw_data.len == 12);
    CHECK_EQ_INT(g->n_node, ir3 ? 6 : 4);
    if (ir3) CHECK(strcmp(g->node[0]->op_type, "Constant") == 0 && strcmp(g->node[0]->output[0], "c") == 0);
    CHECK_EQ_INT(g->n_value_info, 2); /* r and z */
    const Onnx__NodeProto *relu = find_node(g, "relu");
    CHECK(relu && relu->n_attribute == 9);
    if (!relu || relu->n_attribute != 9) return;
    Onnx__AttributeProto *const *at = relu->attribute;
    CHECK(at[0]->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT && at[0]->has_f);
    CHECK(at[1]->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT && at[1]->i == INT64_MIN);
    CHECK(at[2]->s.len == 12 && memcmp(at[2]->s.data, "hello, world", 12) == 0);
    CHECK(at[3]->t && at[3]->t->data_type == AF_DTYPE_FLOAT16 && at[3]->t->raw_data.len == 4 && at[3]->t->n_dims == 2);
    CHECK(at[4]->t && at[4]->t->n_dims == 2 && at[4]->t->dims[0] == 0 && at[4]->t->raw_data.len == 0);
    CHECK(at[5]->n_floats == 3 && at[5]->floats[2] == 1e-30f);
    CHECK(at[6]->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS && at[6]->n_ints == 0);
    CHECK(at[7]->n_strings == 3 && at[7]->strings[1].len == 0 && at[7]->strings[2].len == 2);
    const Onnx__GraphProto *sub = at[8]->g;
    CHECK(sub && sub->n_input == 0 && sub->n_initializer == 0 && sub->n_node == 1);
    if (sub && sub->n_node == 1) CHECK(strcmp(sub->node[0]->input[0], "c") == 0); /* captured, not declared */
    const Onnx__NodeProto *clip = find_node(g, "clip"), *drop = find_node(g, "drop");
    CHECK(clip && clip->n_input == 3 && strcmp(clip->input[1], "") == 0 && strcmp(clip->input[2], "cmax") == 0);
    CHECK(drop && drop->n_output == 2 && strcmp(drop->output[1], "") == 0);
}

AF_TEST(roundtrip_handmade_graph_with_every_attribute_type) {
    for (int ir3 = 0; ir3 <= 1; ir3++) {
        af_model *m = build_model(ir3 ? 3 : 8);
        char path[64];
        temp_path(path, sizeof path);
        af_error err = {0};
        CHECK(af_model_save(m, path, &err) == AF_OK);
        Onnx__ModelProto *mp = unpack_file(path);
        CHECK(mp != NULL);
        if (mp) check_handmade_proto(mp, ir3);
        onnx__model_proto__free_unpacked(mp, NULL);
        af_load_options lo = af_load_options_default();
        lo.fold_constants = 0;
        af_model *back = NULL;
        af_status st = af_model_load(path, &lo, &back, &err);
        if (st != AF_OK) af_test_fail(__FILE__, __LINE__, "reload (ir %d): %s", ir3 ? 3 : 8, err.message);
        else same_model(ir3 ? "handmade ir3" : "handmade", m, back);
        af_model_free(back);
        af_model_free(m);
        unlink(path);
    }
}

/* ---- error paths ---------------------------------------------------------------------------- */

AF_TEST(roundtrip_save_reports_io_errors) {
    af_model *m = build_model(8);
    af_error err = {0};
    const char *bad = "/nonexistent/dir/x.onnx";
    CHECK(af_model_save(m, bad, &err) == AF_ERR_IO);
    CHECK(strstr(err.message, bad) != NULL);
    struct stat sb;
    if (stat("/dev/full", &sb) == 0) { /* every write fails with ENOSPC; the device must survive */
        memset(&err, 0, sizeof err);
        CHECK(af_model_save(m, "/dev/full", &err) == AF_ERR_IO);
        CHECK(strstr(err.message, "/dev/full") != NULL);
        CHECK(stat("/dev/full", &sb) == 0);
    }
    CHECK(af_model_save(NULL, "/tmp/x.onnx", &err) == AF_ERR_INVALID_ARGUMENT);
    CHECK(af_model_save(m, NULL, &err) == AF_ERR_INVALID_ARGUMENT);
    af_model_free(m);
}

AF_TEST(roundtrip_save_refuses_models_over_2gib) {
    af_model *m = build_model(8);
    af_graph *g = m->graph;
    /* The size check runs before any byte is read, so a small buffer can stand for 3 GiB. */
    int big = add_value(g, "big", AF_VALUE_CONST, AF_DTYPE_UINT8, 0, NULL);
    af_value *v = &g->values[big];
    void *small = v->t.data;
    v->t.rank = 1;
    v->t.dims[0] = (int64_t)3 << 30;
    v->t.nbytes = (size_t)3 << 30;
    g->outputs = af_realloc(g->outputs, 3 * sizeof(int));
    g->outputs[g->n_outputs++] = big;
    v->is_output = true;
    char path[64];
    temp_path(path, sizeof path);
    unlink(path);
    af_error err = {0};
    CHECK(af_model_save(m, path, &err) == AF_ERR_LIMIT);
    CHECK(strstr(err.message, "2 GiB") != NULL);
    CHECK(access(path, F_OK) != 0); /* nothing was created */
    v->t.data = small;
    v->t.nbytes = 1;
    af_model_free(m);
}

/* Every failing allocation during a save gives AF_ERR_OUT_OF_MEMORY and leaks nothing (the sanitizer
 * build checks the leaks). */
static void sweep_save_oom(const char *label, const af_model *m) {
    char path[64];
    temp_path(path, sizeof path);
    af_alloc_fail_after(-1);
    af_error err = {0};
    CHECK(af_model_save(m, path, &err) == AF_OK);
    long needed = af_alloc_count();
    CHECK(needed > 10);
    int bad = 0;
    for (long k = 0; k < needed; k++) {
        af_alloc_fail_after(k);
        af_status st = af_model_save(m, path, &err);
        af_alloc_fail_after(-1);
        if (st != AF_ERR_OUT_OF_MEMORY && bad++ == 0)
            af_test_fail(__FILE__, __LINE__, "%s: failing allocation %ld gave %s", label, k, af_status_name(st));
    }
    unlink(path);
}

AF_TEST(roundtrip_save_out_of_memory_fails_cleanly) {
    af_model *m = build_model(8);
    sweep_save_oom("handmade", m);
    af_model_free(m);
    m = build_model(3);
    sweep_save_oom("handmade ir3", m);
    af_model_free(m);
    /* nested subgraphs reading outer values */
    af_model *loop = NULL;
    if (af_model_load(NODE_TEST_DIR "/test_loop11/model.onnx", NULL, &loop, NULL) == AF_OK) sweep_save_oom("loop11", loop);
    af_model_free(loop);
}
