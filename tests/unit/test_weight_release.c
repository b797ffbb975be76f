/* Sessions that own their model (af_session_create_owning) drop each weight as its kernel packs
 * it: the outputs are bit for bit those of a session that keeps the model, the packed weights are
 * gone from the model, and the build's high-water mark is lower by at least half of what it
 * dropped (both copies are never held together; with verify, which runs the unfused ops on the
 * originals, they go after its last round). Constants that some reader uses in place stay. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autofusion.h"
#include "ir/model.h"
#include "onnx_build.h"
#include "unit.h"
#include "util/alloc.h"

/* Bytes of constant data the main graph holds now. */
static size_t const_bytes(const af_model *m) {
    size_t total = 0;
    for (int v = 0; v < m->graph->n_values; v++)
        if (m->graph->values[v].kind == AF_VALUE_CONST && m->graph->values[v].t.data) total += m->graph->values[v].t.nbytes;
    return total;
}

/* Creates the session and reports how far af_ allocations rose above the live bytes at the start. */
static af_session *create_measured(af_model *m, bool owning, const af_session_options *so, long long *rise) {
    af_session *s = NULL;
    af_error err;
    af_alloc_peak_reset();
    const long long start = af_alloc_live_bytes();
    af_status st = owning ? af_session_create_owning(m, so, &s, &err) : af_session_create(m, so, &s, &err);
    *rise = af_alloc_peak_bytes() - start;
    if (st != AF_OK) af_test_fail(__FILE__, __LINE__, "session: %s", err.message);
    return st == AF_OK ? s : NULL;
}

static void same_outputs(const char *what, af_session *a, af_session *b, const af_test_tensors *in) {
    af_error err;
    const char *const *names = (const char *const *)in->names;
    CHECK(af_session_run(a, in->n, names, in->t, &err) == AF_OK);
    CHECK(af_session_run(b, in->n, names, in->t, &err) == AF_OK);
    CHECK_EQ_INT(af_session_n_outputs(a), af_session_n_outputs(b));
    for (int o = 0; o < af_session_n_outputs(a); o++) {
        const af_tensor *x = af_session_output(a, o), *y = af_session_output(b, o);
        if (!x || !y || x->nbytes != y->nbytes || memcmp(x->data, y->data, x->nbytes) != 0)
            af_test_fail(__FILE__, __LINE__, "%s: output %d differs between the owning and the plain session", what, o);
    }
}

/* One fixture at one configuration: plain and owning sessions on two loads of the same file.
 * Returns the constant bytes the owning session's model still holds (-1 when it failed). */
static long long check_fixture(const char *name, int level, const char *config) {
    char dir[1024], path[1100], what[256];
    snprintf(dir, sizeof dir, "%s/models/%s", af_test_dir(), name);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    snprintf(what, sizeof what, "%s level %d%s", name, level, config ? " verify" : "");
    af_model *kept = NULL, *owned = NULL;
    af_error err;
    af_test_tensors in;
    if (!af_test_read_set(dir, "input", &in)) return -1;
    if (af_model_load(path, NULL, &kept, &err) != AF_OK || af_model_load(path, NULL, &owned, &err) != AF_OK) {
        af_test_fail(__FILE__, __LINE__, "%s: %s", what, err.message);
        af_model_free(kept);
        af_model_free(owned);
        af_test_tensors_free(&in);
        return -1;
    }
    af_session_options so = af_session_options_default();
    so.n_threads = 1;
    so.fusion_level = level;
    so.config_path = config;
    const size_t weights = const_bytes(owned);
    long long plain_rise = 0, owning_rise = 0, left = -1;
    af_session *plain = create_measured(kept, false, &so, &plain_rise);
    af_session *own = create_measured(owned, true, &so, &owning_rise);
    if (plain && own) {
        const size_t freed = weights - const_bytes(owned);
        if (!(freed > weights / 2))
            af_test_fail(__FILE__, __LINE__, "%s: only %zu of %zu weight bytes were dropped", what, freed, weights);
        /* Verify runs the unfused ops on the originals, so they stay until its last round. */
        if (!config && !(owning_rise + (long long)freed / 2 <= plain_rise))
            af_test_fail(__FILE__, __LINE__,
                         "%s: the owning build rose %lld bytes, the plain one %lld, after dropping %zu: both copies "
                         "were held together",
                         what, owning_rise, plain_rise, freed);
        same_outputs(what, plain, own, &in);
        left = (long long)const_bytes(owned);
    }
    af_session_free(plain);
    if (own) af_session_free(own);
    else af_model_free(owned);
    af_model_free(kept);
    af_test_tensors_free(&in);
    return left;
}

AF_TEST(weight_release_on_the_fixtures) {
    static const char *const names[] = {"resnet_small", "resnet_small_bn", "mobilenet_v3_small", "bert_tiny",
                                        "bert_tiny_dynamic"};
    char config[64];
    snprintf(config, sizeof config, "/tmp/af_weight_release_%d.json", (int)getpid());
    af_test_write_file(config, "{\"verify\": true}\n");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const long long unfused = check_fixture(names[i], 0, NULL), fused = check_fixture(names[i], 3, NULL);
        /* Fusion must not keep originals the unfused plan drops (squeeze-excite: the kernel's copies) */
        if (unfused >= 0 && fused > unfused)
            af_test_fail(__FILE__, __LINE__, "%s: the fused plan keeps %lld constant bytes, the unfused one %lld",
                         names[i], fused, unfused);
        check_fixture(names[i], 3, config); /* verify rebuilds the plan: the weights go after it */
    }
    unlink(config);
}

/* y = X W + W and z = X V: W is also read in place by the Add, so it stays; V goes. */
AF_TEST(weight_release_keeps_a_constant_read_in_place) {
    enum { N = 64 };
    static float w[N * N], v[N * N], x[N * N];
    for (int i = 0; i < N * N; i++) {
        w[i] = (float)((i * 7) % 13) * 0.01f - 0.06f;
        v[i] = (float)((i * 5) % 11) * 0.02f - 0.1f;
        x[i] = (float)((i * 3) % 17) * 0.03f - 0.25f;
    }
    for (int level = 0; level <= 3; level += 3) {
        ob_model *b = ob_new(13);
        const int64_t dims[2] = {N, N};
        const char *xin = ob_input(b, 2, dims);
        const char *wc = ob_const(b, 2, dims, w), *vc = ob_const(b, 2, dims, v);
        ob_output(b, ob_node2(b, "Add", ob_node2(b, "MatMul", xin, wc), wc));
        ob_output(b, ob_node2(b, "MatMul", xin, vc));
        char xname[32], wname[32], vname[32]; /* the builder owns its names */
        snprintf(xname, sizeof xname, "%s", xin);
        snprintf(wname, sizeof wname, "%s", wc);
        snprintf(vname, sizeof vname, "%s", vc);
        uint8_t *buf = NULL;
        size_t size = 0;
        CHECK(ob_pack(b, &buf, &size) == 0);
        ob_free(b);
        af_model *m = NULL;
        af_session *s = NULL;
        af_error err;
        CHECK(af_model_load_buffer(buf, size, NULL, NULL, &m, &err) == AF_OK);
        free(buf);
        af_session_options so = af_session_options_default();
        so.n_threads = 1;
        so.fusion_level = level;
        if (!m || af_session_create_owning(m, &so, &s, &err) != AF_OK) {
            af_test_fail(__FILE__, __LINE__, "level %d: %s", level, err.message);
            af_model_free(m);
            continue;
        }
        const af_value *wv = &m->graph->values[af_graph_find_value(m->graph, wname)];
        const af_value *vv = &m->graph->values[af_graph_find_value(m->graph, vname)];
        CHECK(wv->t.data != NULL);
        CHECK(vv->t.data == NULL);
        af_tensor t = {.dtype = AF_DTYPE_FLOAT, .rank = 2, .dims = {N, N}, .data = x, .nbytes = sizeof x};
        const char *in_name = xname;
        CHECK(af_session_run(s, 1, &in_name, &t, &err) == AF_OK);
        const af_tensor *y = af_session_output(s, 0), *z = af_session_output(s, 1);
        int bad = 0;
        for (int i = 0; y && z && i < N; i++)
            for (int j = 0; j < N; j++) {
                double xw = 0, xv = 0;
                for (int k = 0; k < N; k++) xw += (double)x[i * N + k] * w[k * N + j], xv += (double)x[i * N + k] * v[k * N + j];
                double ye = xw + w[i * N + j], yg = ((const float *)y->data)[i * N + j];
                double zg = ((const float *)z->data)[i * N + j];
                bad += !(yg - ye <= 1e-4 + 1e-4 * (ye < 0 ? -ye : ye) && ye - yg <= 1e-4 + 1e-4 * (ye < 0 ? -ye : ye));
                bad += !(zg - xv <= 1e-4 + 1e-4 * (xv < 0 ? -xv : xv) && xv - zg <= 1e-4 + 1e-4 * (xv < 0 ? -xv : xv));
            }
        CHECK(y && z);
        CHECK_EQ_INT(bad, 0);
        af_session_free(s);
    }
}

/* An owning session that fails after packing (here: its activations exceed max_mem_usage) leaves
 * the caller a model without those weights: sessions and saves refuse it instead of running on
 * missing data. A plain session's failure leaves the model whole. */
AF_TEST(weight_release_failed_owning_session_marks_the_model) {
    char path[1024], config[64], saved[64];
    snprintf(path, sizeof path, "%s/models/resnet_small/model.onnx", af_test_dir());
    snprintf(config, sizeof config, "/tmp/af_weight_release_limit_%d.json", (int)getpid());
    snprintf(saved, sizeof saved, "/tmp/af_weight_release_saved_%d.onnx", (int)getpid());
    af_test_write_file(config, "{\"resource_constraints\": {\"max_mem_usage\": \"1KB\"}}\n");
    for (int owning = 0; owning <= 1; owning++) {
        af_model *m = NULL;
        af_session *s = NULL;
        af_error err;
        if (af_model_load(path, NULL, &m, &err) != AF_OK) {
            af_test_fail(__FILE__, __LINE__, "%s", err.message);
            continue;
        }
        af_session_options so = af_session_options_default();
        so.n_threads = 1;
        so.config_path = config;
        af_status st = owning ? af_session_create_owning(m, &so, &s, &err) : af_session_create(m, &so, &s, &err);
        CHECK_EQ_INT(st, AF_ERR_LIMIT);
        CHECK(st != AF_ERR_LIMIT || strstr(err.message, "max_mem_usage") != NULL);
        so.config_path = NULL;
        st = af_session_create(m, &so, &s, &err);
        if (owning) {
            CHECK_EQ_INT(st, AF_ERR_INVALID_ARGUMENT);
            CHECK(st != AF_ERR_INVALID_ARGUMENT || strstr(err.message, "released") != NULL);
            CHECK_EQ_INT(af_model_save(m, saved, &err), AF_ERR_INVALID_ARGUMENT);
        } else {
            CHECK_EQ_INT(st, AF_OK);
            af_session_free(s);
        }
        af_model_free(m);
    }
    unlink(config);
    unlink(saved);
}
