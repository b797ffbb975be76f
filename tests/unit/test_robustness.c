/* Robustness: every case in tests/robustness/expected.txt (AF_OK controls also build a session),
 * file-system tricks made at test time (symlinks, hard links, FIFOs, directories), truncation at
 * every offset, deep protobuf nesting, random byte mutations, an out-of-memory sweep over loading,
 * each configurable limit, run-time limits (shape-driven ops, loops, activations) and bad inputs to
 * af_session_run. Each must fail with its specific one-line error, never a crash, hang or leak
 * (the SAN build checks memory). docs/security.md describes the classes. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "autofusion.h"
#include "util/alloc.h"
#include "unit.h"

#define NODE_TESTS "/usr/include/onnx/backend/test/data/node"

static const char *const status_names[AF_STATUS_COUNT] = {
    [AF_OK] = "AF_OK",
    [AF_ERR_INVALID_ARGUMENT] = "AF_ERR_INVALID_ARGUMENT",
    [AF_ERR_IO] = "AF_ERR_IO",
    [AF_ERR_PARSE] = "AF_ERR_PARSE",
    [AF_ERR_INVALID_MODEL] = "AF_ERR_INVALID_MODEL",
    [AF_ERR_UNSUPPORTED] = "AF_ERR_UNSUPPORTED",
    [AF_ERR_LIMIT] = "AF_ERR_LIMIT",
    [AF_ERR_OUT_OF_MEMORY] = "AF_ERR_OUT_OF_MEMORY",
    [AF_ERR_RUNTIME] = "AF_ERR_RUNTIME",
};

static int status_from_name(const char *s) {
    for (int i = 0; i < AF_STATUS_COUNT; i++)
        if (strcmp(status_names[i], s) == 0) return i;
    return -1;
}

/* A failed load: the status it reports, no model, and a non-empty single-line message. */
static int check_failure(const char *what, af_status st, const af_model *m, const af_error *err) {
    int ok = 1;
    if (st == AF_OK || m || err->status != st || !err->message[0] || strpbrk(err->message, "\r\n")) {
        af_test_fail(__FILE__, __LINE__, "%s: status %s (err.status %s), model %p, message \"%s\"", what,
                     status_names[st], status_names[err->status], (const void *)m, err->message);
        ok = 0;
    }
    return ok;
}

static uint8_t *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0, r;
    do {
        if (n == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            uint8_t *b = realloc(buf, cap);
            if (!b) break;
            buf = b;
        }
        r = fread(buf + n, 1, cap - n, f);
        n += r;
    } while (r > 0);
    fclose(f);
    *size = n;
    return buf;
}

static int write_all(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int ok = fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok;
}

AF_TEST(robustness_corpus_cases_fail_as_expected) {
    char dir[1024], path[1200];
    snprintf(dir, sizeof dir, "%s/robustness", af_test_dir());
    snprintf(path, sizeof path, "%s/expected.txt", dir);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f) return;
    char line[1024];
    int n_cases = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0] || line[0] == '#') continue;
        char name[256], status_name[64];
        int used = 0;
        if (sscanf(line, "%255s %63s %n", name, status_name, &used) != 2 || status_from_name(status_name) < 0) {
            af_test_fail(__FILE__, __LINE__, "bad line in expected.txt: %s", line);
            continue;
        }
        af_status want = (af_status)status_from_name(status_name);
        const char *substring = line + used;
        n_cases++;
        snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
        af_model *m = NULL;
        af_error err = {0};
        af_status st = af_model_load(path, NULL, &m, &err);
        if (want == AF_OK) {
            if (st != AF_OK) af_test_fail(__FILE__, __LINE__, "%s: control failed to load: %s", name, err.message);
            /* controls (pathological fan-out and depth among them) also fuse and plan */
            af_session *sess = NULL;
            if (st == AF_OK && af_session_create(m, NULL, &sess, &err) != AF_OK)
                af_test_fail(__FILE__, __LINE__, "%s: control failed to build a session: %s", name, err.message);
            af_session_free(sess);
            af_model_free(m);
            continue;
        }
        if (!check_failure(name, st, m, &err)) {
            af_model_free(m);
            continue;
        }
        if (st != want || !strstr(err.message, substring))
            af_test_fail(__FILE__, __LINE__, "%s: got %s \"%s\", expected %s with \"%s\"", name, status_names[st],
                         err.message, status_names[want], substring);
        /* the same bytes from memory fail the same way */
        size_t size = 0;
        uint8_t *buf = read_all(path, &size);
        af_error err2 = {0};
        af_status st2 = af_model_load_buffer(buf, size, dir, NULL, &m, &err2);
        check_failure(name, st2, m, &err2);
        if (st2 != st || strcmp(err.message, err2.message) != 0)
            af_test_fail(__FILE__, __LINE__, "%s: from memory got %s \"%s\"", name, status_names[st2], err2.message);
        af_model_free(m);
        free(buf);
    }
    fclose(f);
    CHECK(n_cases >= 130);
}

/* A scratch folder holding model/model.onnx (the ext_valid case, reading model/ext_data.bin) and
 * outside.bin next to model/. */
typedef struct scratch {
    char root[256], model_dir[300], model[340], ext[340], outside[300];
} scratch;

static const float ext_values[6] = {0, 1, 2, 3, 4, 5};

static int scratch_make(scratch *s) {
    snprintf(s->root, sizeof s->root, "/tmp/af_robustness_XXXXXX");
    if (!mkdtemp(s->root)) return 0;
    snprintf(s->model_dir, sizeof s->model_dir, "%s/model", s->root);
    snprintf(s->model, sizeof s->model, "%s/model.onnx", s->model_dir);
    snprintf(s->ext, sizeof s->ext, "%s/ext_data.bin", s->model_dir);
    snprintf(s->outside, sizeof s->outside, "%s/outside.bin", s->root);
    char src[1024];
    snprintf(src, sizeof src, "%s/robustness/ext_valid.onnx", af_test_dir());
    size_t size = 0;
    uint8_t *buf = read_all(src, &size);
    int ok = buf && mkdir(s->model_dir, 0755) == 0 && write_all(s->model, buf, size) &&
             write_all(s->outside, ext_values, sizeof ext_values);
    free(buf);
    return ok;
}

static void scratch_remove(scratch *s) {
    unlink(s->ext);
    rmdir(s->ext);
    unlink(s->model);
    rmdir(s->model_dir);
    unlink(s->outside);
    rmdir(s->root);
}

static void expect_load(const char *what, const char *path, af_status want, const char *substring) {
    af_model *m = NULL;
    af_error err = {0};
    af_status st = af_model_load(path, NULL, &m, &err);
    if (want == AF_OK) {
        if (st != AF_OK) af_test_fail(__FILE__, __LINE__, "%s: %s", what, err.message);
        af_model_free(m);
        return;
    }
    if (check_failure(what, st, m, &err) && (st != want || !strstr(err.message, substring)))
        af_test_fail(__FILE__, __LINE__, "%s: got %s \"%s\", expected %s with \"%s\"", what, status_names[st],
                     err.message, status_names[want], substring);
    af_model_free(m);
}

AF_TEST(robustness_external_data_links_fifos_and_folders) {
    scratch s;
    CHECK(scratch_make(&s));
    alarm(60); /* a FIFO that blocks the loader would hang here: fail loudly instead */
    CHECK(write_all(s.ext, ext_values, sizeof ext_values));
    expect_load("external data in the model folder", s.model, AF_OK, NULL);
    unlink(s.ext);
    CHECK(symlink("../outside.bin", s.ext) == 0);
    expect_load("relative symlink out of the folder", s.model, AF_ERR_INVALID_MODEL, "resolves outside");
    unlink(s.ext);
    CHECK(symlink(s.outside, s.ext) == 0);
    expect_load("absolute symlink out of the folder", s.model, AF_ERR_INVALID_MODEL, "resolves outside");
    unlink(s.ext);
    char inside[400];
    snprintf(inside, sizeof inside, "%s/inside.bin", s.model_dir);
    CHECK(write_all(inside, ext_values, sizeof ext_values));
    CHECK(symlink("inside.bin", s.ext) == 0); /* staying inside the folder is fine */
    expect_load("symlink inside the folder", s.model, AF_OK, NULL);
    unlink(s.ext);
    unlink(inside);
    CHECK(symlink("missing.bin", s.ext) == 0);
    expect_load("dangling symlink", s.model, AF_ERR_IO, "ext_data.bin");
    unlink(s.ext);
    CHECK(link(s.outside, s.ext) == 0);
    expect_load("hard link to a file outside", s.model, AF_ERR_INVALID_MODEL, "several hard links");
    unlink(s.ext);
    CHECK(mkfifo(s.ext, 0644) == 0);
    expect_load("FIFO as external data", s.model, AF_ERR_INVALID_MODEL, "not a regular file");
    unlink(s.ext);
    CHECK(mkdir(s.ext, 0755) == 0);
    expect_load("directory as external data", s.model, AF_ERR_INVALID_MODEL, "not a regular file");
    rmdir(s.ext);

    /* the model path itself */
    expect_load("directory as the model", s.model_dir, AF_ERR_IO, "not a regular file");
    char missing[400];
    snprintf(missing, sizeof missing, "%s/missing.onnx", s.model_dir);
    expect_load("missing model", missing, AF_ERR_IO, "cannot open");
    CHECK(mkfifo(s.ext, 0644) == 0);
    expect_load("FIFO as the model", s.ext, AF_ERR_IO, "not a regular file");
    unlink(s.ext);
    alarm(0);

    /* from memory, external data needs a base folder */
    size_t size = 0;
    uint8_t *buf = read_all(s.model, &size);
    af_model *m = NULL;
    af_error err = {0};
    af_status st = af_model_load_buffer(buf, size, NULL, NULL, &m, &err);
    if (check_failure("external data without a base folder", st, m, &err))
        CHECK(st == AF_ERR_INVALID_MODEL && strstr(err.message, "not allowed"));
    /* a size limit below the file's size */
    af_load_options opts = af_load_options_default();
    opts.max_file_bytes = 64;
    st = af_model_load(s.model, &opts, &m, &err);
    if (check_failure("file over max_file_bytes", st, m, &err)) CHECK(st == AF_ERR_LIMIT);
    st = af_model_load_buffer(buf, size, s.model_dir, &opts, &m, &err);
    if (check_failure("buffer over max_file_bytes", st, m, &err)) CHECK(st == AF_ERR_LIMIT);
    free(buf);
    CHECK(af_model_load(NULL, NULL, &m, &err) == AF_ERR_INVALID_ARGUMENT);
    scratch_remove(&s);
}

/* Loads the first `size` bytes from an exactly sized copy, so ASan sees any read past them. */
static void expect_truncated_fails(const uint8_t *data, size_t size, const char *dir) {
    uint8_t *copy = malloc(size ? size : 1);
    memcpy(copy, data, size);
    af_model *m = NULL;
    af_error err = {0};
    af_status st = af_model_load_buffer(copy, size, dir, NULL, &m, &err);
    char what[64];
    snprintf(what, sizeof what, "truncated at %zu", size);
    check_failure(what, st, m, &err);
    af_model_free(m);
    free(copy);
}

AF_TEST(robustness_truncation_at_every_offset_fails_cleanly) {
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/models/resnet_small", af_test_dir());
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    size_t size = 0;
    uint8_t *data = read_all(path, &size);
    CHECK(data && size > 4096);
    if (!data || size <= 4096) {
        free(data);
        return;
    }
    for (size_t off = 0; off <= 4096; off++) expect_truncated_fails(data, off, dir);
    for (int k = 0; k < 200; k++) expect_truncated_fails(data, (size_t)((double)(size - 1) * k / 199), dir);
    free(data);
    /* the small corpus controls at literally every offset */
    static const char *const small[] = {"valid", "ext_valid", "capture_forward"};
    snprintf(dir, sizeof dir, "%s/robustness", af_test_dir());
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        snprintf(path, sizeof path, "%s/%s.onnx", dir, small[i]);
        data = read_all(path, &size);
        CHECK(data && size > 16);
        for (size_t off = 0; data && off < size; off++) expect_truncated_fails(data, off, dir);
        free(data);
    }
}

/* Writes wire-format bytes backwards, so nested messages get their lengths without a second pass. */
typedef struct rev_buf {
    uint8_t *p;
    size_t cap, pos; /* content is p[pos, cap) */
} rev_buf;

static void rev_bytes(rev_buf *b, const void *data, size_t n) {
    b->pos -= n;
    memcpy(b->p + b->pos, data, n);
}

static void rev_varint(rev_buf *b, uint64_t v) {
    uint8_t tmp[10];
    size_t n = 0;
    do {
        tmp[n] = (uint8_t)(v & 0x7f) | (v > 0x7f ? 0x80 : 0);
        v >>= 7;
        n++;
    } while (v);
    rev_bytes(b, tmp, n);
}

/* Wraps everything written so far as length-delimited field `num`. */
static void rev_wrap(rev_buf *b, unsigned num) {
    rev_varint(b, b->cap - b->pos);
    rev_varint(b, (uint64_t)num << 3 | 2);
}

AF_TEST(robustness_deep_protobuf_nesting_is_refused) {
    /* Graph { node { op_type "If" attribute { name "then_branch" type GRAPH g { ... } } } },
     * 100000 levels: a recursive parser without a depth limit overflows the stack. */
    enum { LEVELS = 100000 };
    rev_buf b = {.cap = (size_t)LEVELS * 40 + 64};
    b.p = malloc(b.cap);
    b.pos = b.cap;
    CHECK(b.p != NULL);
    if (!b.p) return;
    for (int k = 0; k < LEVELS; k++) {
        if (k) rev_wrap(&b, 6);                     /* AttributeProto.g */
        rev_bytes(&b, "\xa0\x01\x05", 3);          /* AttributeProto.type = GRAPH */
        rev_bytes(&b, "\x0a\x0bthen_branch", 13);  /* AttributeProto.name */
        rev_wrap(&b, 5);                            /* NodeProto.attribute */
        rev_bytes(&b, "\x22\x02If", 4);            /* NodeProto.op_type */
        rev_wrap(&b, 1);                            /* GraphProto.node */
    }
    rev_wrap(&b, 7);                          /* ModelProto.graph */
    rev_bytes(&b, "\x42\x02\x10\x0d", 4);    /* ModelProto.opset_import { version 13 } */
    rev_bytes(&b, "\x08\x08", 2);            /* ModelProto.ir_version 8 */
    af_model *m = NULL;
    af_error err = {0};
    af_status st = af_model_load_buffer(b.p + b.pos, b.cap - b.pos, NULL, NULL, &m, &err);
    if (check_failure("deep nesting", st, m, &err)) CHECK(st == AF_ERR_LIMIT);
    free(b.p);
}

/* Fails allocation n, n+1, ... of loading path for n = 0, 1, 2, ... until the load succeeds;
 * every failing load must report out-of-memory (LeakSanitizer checks nothing leaks). */
static int oom_sweep(const char *path) {
    af_model *m = NULL;
    af_error err = {0};
    if (af_model_load(path, NULL, &m, &err) != AF_OK) {
        printf("  not swept (does not load yet): %s: %s\n", path, err.message);
        return 0;
    }
    af_model_free(m);
    long n;
    af_status st = AF_ERR_OUT_OF_MEMORY;
    for (n = 0; n < 100000; n++) {
        af_alloc_fail_after(n);
        m = NULL;
        st = af_model_load(path, NULL, &m, &err);
        af_alloc_fail_after(-1);
        if (st == AF_OK) break;
        char what[1200];
        snprintf(what, sizeof what, "%s with allocation %ld failing", path, n);
        if (check_failure(what, st, m, &err) && st != AF_ERR_OUT_OF_MEMORY)
            af_test_fail(__FILE__, __LINE__, "%s: %s \"%s\"", what, status_names[st], err.message);
    }
    CHECK(st == AF_OK);
    printf("  %s: %ld allocation points fail cleanly\n", path, n);
    af_model_free(m);
    return 1;
}

AF_TEST(robustness_out_of_memory_at_every_allocation_fails_cleanly) {
    static const char *const node_tests[] = {"test_conv_with_strides_padding", "test_if", "test_loop11"};
    char path[1024];
    int swept = 0;
    for (size_t i = 0; i < sizeof node_tests / sizeof node_tests[0]; i++) {
        snprintf(path, sizeof path, "%s/%s/model.onnx", NODE_TESTS, node_tests[i]);
        swept += oom_sweep(path);
    }
    static const char *const corpus[] = {"valid", "ext_valid"};
    for (size_t i = 0; i < sizeof corpus / sizeof corpus[0]; i++) {
        snprintf(path, sizeof path, "%s/robustness/%s.onnx", af_test_dir(), corpus[i]);
        swept += oom_sweep(path);
    }
    CHECK(swept >= 3);
}

/* xorshift64: the same mutations on every run */
static uint32_t mutation_rand(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 11);
}

AF_TEST(robustness_random_mutations_load_or_fail_cleanly) {
    /* Bit flips, byte changes, deletions and insertions in valid models: each load either succeeds or
     * fails with a one-line message; ASan and LeakSanitizer check the rest. */
    static const char *const models[] = {NODE_TESTS "/test_if/model.onnx", NODE_TESTS "/test_loop11/model.onnx",
                                         NODE_TESTS "/test_conv_with_strides_padding/model.onnx"};
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int n_ok = 0, n_failed = 0;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        size_t size = 0;
        uint8_t *src = read_all(models[i], &size);
        if (!src || !size) {
            printf("  skipped %s (not readable)\n", models[i]);
            free(src);
            continue;
        }
        for (int it = 0; it < 2000; it++) {
            uint8_t *b = malloc(size + 8);
            memcpy(b, src, size);
            size_t len = size;
            for (int k = 1 + (int)(mutation_rand(&seed) % 4); k > 0 && len > 1; k--) {
                size_t pos = mutation_rand(&seed) % len;
                switch (mutation_rand(&seed) % 5) {
                case 0: b[pos] ^= (uint8_t)(1u << (mutation_rand(&seed) % 8)); break;
                case 1: b[pos] = (uint8_t)mutation_rand(&seed); break;
                case 2: b[pos] = (uint8_t)(b[pos] + 1); break;
                case 3:
                    memmove(b + pos, b + pos + 1, len - pos - 1);
                    len--;
                    break;
                default:
                    if (len < size + 8) {
                        memmove(b + pos + 1, b + pos, len - pos);
                        b[pos] = (uint8_t)mutation_rand(&seed);
                        len++;
                    }
                }
            }
            uint8_t *exact = malloc(len); /* exactly sized, so ASan sees reads past the end */
            memcpy(exact, b, len);
            free(b);
            af_model *m = NULL;
            af_error err = {0};
            af_status st = af_model_load_buffer(exact, len, NULL, NULL, &m, &err);
            if (st == AF_OK) {
                n_ok++;
                af_model_free(m);
            } else {
                n_failed++;
                char what[1100];
                snprintf(what, sizeof what, "%s mutation %d", models[i], it);
                check_failure(what, st, m, &err);
            }
            free(exact);
        }
        free(src);
    }
    printf("  %d mutated models loaded, %d failed cleanly\n", n_ok, n_failed);
    CHECK(n_failed > 0);
}

/* ---- configurable limits ----------------------------------------------------------------------- */

static void corpus_path(char *path, size_t size, const char *name) {
    snprintf(path, size, "%s/robustness/%s.onnx", af_test_dir(), name);
}

/* Loads corpus case `name` under `lim` and checks the status and message fragment. */
static void expect_limited(const char *name, const af_limits *lim, af_status want, const char *substring) {
    char path[1024], what[1200];
    corpus_path(path, sizeof path, name);
    af_load_options opts = af_load_options_default();
    opts.limits = *lim;
    af_model *m = NULL;
    af_error err = {0};
    af_status st = af_model_load(path, &opts, &m, &err);
    snprintf(what, sizeof what, "%s under a limit", name);
    if (want == AF_OK) {
        if (st != AF_OK) af_test_fail(__FILE__, __LINE__, "%s: %s", what, err.message);
    } else if (check_failure(what, st, m, &err) && (st != want || !strstr(err.message, substring))) {
        af_test_fail(__FILE__, __LINE__, "%s: got %s \"%s\", expected %s with \"%s\"", what, status_names[st],
                     err.message, status_names[want], substring);
    }
    af_model_free(m);
}

AF_TEST(robustness_limits_have_documented_defaults) {
    af_limits d = af_limits_default();
    CHECK(d.max_file_bytes == (uint64_t)2 << 30);
    CHECK_EQ_INT(d.max_nodes, 1000000);
    CHECK_EQ_INT(d.max_rank, AF_MAX_RANK);
    CHECK_EQ_INT(d.max_graph_depth, 16);
    CHECK(d.max_tensor_bytes == (uint64_t)4 << 30);
    CHECK(d.max_initializer_bytes == (uint64_t)8 << 30);
    CHECK(d.max_fold_bytes == (uint64_t)64 << 20);
    CHECK(d.max_activation_bytes == (uint64_t)16 << 30);
    CHECK_EQ_INT(d.max_attr_elems, 1000000);
    CHECK_EQ_INT(d.max_string_bytes, 65536);
    CHECK_EQ_INT(d.max_loop_iterations, 100000000);
    af_load_options o = af_load_options_default();
    CHECK(o.limits.max_tensor_bytes == d.max_tensor_bytes && o.max_file_bytes == d.max_file_bytes);
}

AF_TEST(robustness_each_load_limit_is_configurable) {
    af_limits lim = {0};
    expect_limited("chain_3000", &lim, AF_OK, NULL);
    lim = (af_limits){.max_nodes = 1000};
    expect_limited("chain_3000", &lim, AF_ERR_LIMIT, "more than 1000 nodes (max_nodes)");
    lim = (af_limits){.max_file_bytes = 1000};
    expect_limited("chain_3000", &lim, AF_ERR_LIMIT, "the limit is 1000 (max_file_bytes)");
    lim = (af_limits){.max_rank = 1};
    expect_limited("valid", &lim, AF_ERR_LIMIT, "at most 1 is supported (max_rank)");
    lim = (af_limits){.max_tensor_bytes = 8};
    expect_limited("valid", &lim, AF_ERR_LIMIT, "tensor 'w' is 16 bytes; the limit is 8 (max_tensor_bytes)");
    lim = (af_limits){.max_initializer_bytes = 20};
    expect_limited("large_without_data", &lim, AF_ERR_LIMIT, "(max_initializer_bytes)");
    lim = (af_limits){.max_initializer_bytes = 16};
    expect_limited("valid", &lim, AF_OK, NULL); /* exactly at the cap */
    lim = (af_limits){.max_initializer_bytes = 15};
    expect_limited("valid", &lim, AF_ERR_LIMIT, "past 15 bytes in all (max_initializer_bytes)");
    lim = (af_limits){.max_graph_depth = 32};
    expect_limited("subgraph_depth_20", &lim, AF_OK, NULL);
    lim = (af_limits){.max_graph_depth = 4};
    expect_limited("subgraph_depth_20", &lim, AF_ERR_LIMIT, "deeper than 4 (max_graph_depth)");
    lim = (af_limits){.max_string_bytes = 4};
    expect_limited("dense_dag_250", &lim, AF_ERR_LIMIT, "(max_string_bytes)");
    lim = (af_limits){.max_string_bytes = 100000};
    expect_limited("name_70000_bytes", &lim, AF_OK, NULL);
    lim = (af_limits){.max_attr_elems = 3}; /* strides has 2: past the limit, to the shape check */
    expect_limited("conv_strides_0", &lim, AF_ERR_INVALID_MODEL, "strides[0] = 0 is out of range");
    lim = (af_limits){.max_attr_elems = 1};
    expect_limited("conv_strides_0", &lim, AF_ERR_LIMIT, "attribute 'strides' has 2 elements; the limit is 1");
    lim = (af_limits){.max_tensor_bytes = 1024};
    expect_limited("fan_out_3000", &lim, AF_OK, NULL);
    lim = (af_limits){.max_tensor_bytes = 64};
    expect_limited("fan_out_3000", &lim, AF_ERR_LIMIT, "(max_tensor_bytes)");
    /* the old max_file_bytes field still works, and the stricter of the two wins */
    char path[1024];
    corpus_path(path, sizeof path, "chain_3000");
    af_load_options opts = af_load_options_default();
    opts.max_file_bytes = 500;
    af_model *m = NULL;
    af_error err = {0};
    CHECK(af_model_load(path, &opts, &m, &err) == AF_ERR_LIMIT && strstr(err.message, "limit is 500"));
}

AF_TEST(robustness_constant_folding_respects_its_byte_cap) {
    /* ConstantOfShape of a constant [64,64] shape and a Relu of it: 16 KiB each, folded by default,
     * kept under a 1 KiB cap */
    char path[1024];
    snprintf(path, sizeof path, "%s/robustness/rt_fold.onnx", af_test_dir());
    af_model *m = NULL;
    af_error err = {0};
    af_load_options opts = af_load_options_default();
    CHECK(af_model_load(path, &opts, &m, &err) == AF_OK);
    af_model_stats st;
    if (m) {
        af_model_get_stats(m, &st);
        CHECK_EQ_INT(st.n_nodes, 0); /* both fold away */
    }
    af_model_free(m);
    opts.limits.max_fold_bytes = 1024;
    m = NULL;
    CHECK(af_model_load(path, &opts, &m, &err) == AF_OK);
    if (m) {
        af_model_get_stats(m, &st);
        CHECK_EQ_INT(st.n_nodes, 2);
    }
    af_model_free(m);
}

/* ---- run time: limits and bad inputs --------------------------------------------------------- */

static af_session *open_session(const char *name, const af_limits *lim, af_model **model) {
    char path[1024];
    corpus_path(path, sizeof path, name);
    af_error err = {0};
    *model = NULL;
    if (af_model_load(path, NULL, model, &err) != AF_OK) {
        af_test_fail(__FILE__, __LINE__, "%s: %s", name, err.message);
        return NULL;
    }
    af_session_options so = af_session_options_default();
    so.n_threads = 1;
    if (lim) so.limits = *lim;
    af_session *s = NULL;
    if (af_session_create(*model, &so, &s, &err) != AF_OK) af_test_fail(__FILE__, __LINE__, "%s: %s", name, err.message);
    return s;
}

static void expect_run(const char *what, af_session *s, int n, const char *const *names, const af_tensor *in,
                       af_status want, const char *substring) {
    af_error err = {0};
    af_status st = af_session_run(s, n, names, in, &err);
    if (want == AF_OK) {
        if (st != AF_OK) af_test_fail(__FILE__, __LINE__, "%s: %s", what, err.message);
        return;
    }
    if (st != want || err.status != want || !strstr(err.message, substring) || strpbrk(err.message, "\r\n"))
        af_test_fail(__FILE__, __LINE__, "%s: got %s \"%s\", expected %s with \"%s\"", what, status_names[st],
                     err.message, status_names[want], substring);
}

/* A shape-driven op given a huge shape at run time: refused before allocating it. */
static void expect_shape_op(const char *name, const char *shape_input, int n_shape, const int64_t *shape,
                            const char *data_input, int data_rank, const int64_t *data_dims) {
    af_model *m;
    af_session *s = open_session(name, NULL, &m);
    if (!s) {
        af_model_free(m);
        return;
    }
    float data[16] = {0};
    int64_t shp[8];
    memcpy(shp, shape, (size_t)n_shape * sizeof *shp);
    af_tensor in[2] = {{.dtype = AF_DTYPE_INT64, .rank = 1, .dims = {n_shape}, .data = shp}};
    const char *names[2] = {shape_input, data_input};
    int n = 1;
    if (data_input) {
        in[1] = (af_tensor){.dtype = AF_DTYPE_FLOAT, .rank = data_rank, .data = data};
        memcpy(in[1].dims, data_dims, (size_t)data_rank * sizeof(int64_t));
        n = 2;
    }
    expect_run(name, s, n, names, in, AF_ERR_LIMIT, "(max_tensor_bytes)");
    /* and the same session still runs a sane shape afterwards */
    af_session_free(s);
    af_model_free(m);
}

AF_TEST(robustness_shape_driven_ops_respect_the_tensor_cap_at_run_time) {
    const int64_t big2[2] = {1 << 20, 1 << 20}, d11[2] = {1, 1}, d23[2] = {2, 3}, d1122[4] = {1, 1, 2, 2};
    const int64_t big4[4] = {1, 1, 1 << 20, 1 << 20}, bigr[2] = {1 << 20, 1 << 19};
    expect_shape_op("rt_constant_of_shape", "s", 2, big2, NULL, 0, NULL);
    expect_shape_op("rt_expand", "s", 2, big2, "x", 2, d11);
    expect_shape_op("rt_tile", "r", 2, bigr, "x", 2, d23);
    expect_shape_op("rt_resize", "sz", 4, big4, "x", 4, d1122);
    /* Reshape cannot grow its input: a huge target shape is a bad input, not an allocation */
    af_model *m;
    af_session *s = open_session("rt_reshape", NULL, &m);
    if (s) {
        float x[6] = {0};
        int64_t shp[2] = {1 << 20, 1 << 20};
        af_tensor in[2] = {{.dtype = AF_DTYPE_FLOAT, .rank = 2, .dims = {2, 3}, .data = x},
                           {.dtype = AF_DTYPE_INT64, .rank = 1, .dims = {2}, .data = shp}};
        const char *names[2] = {"x", "s"};
        expect_run("reshape to a huge shape", s, 2, names, in, AF_ERR_RUNTIME, "rs");
        shp[0] = 3, shp[1] = 2;
        expect_run("reshape to 3x2", s, 2, names, in, AF_OK, NULL);
    }
    af_session_free(s);
    af_model_free(m);
    /* a lower cap from the session options applies to ordinary shapes too */
    af_limits lim = {.max_tensor_bytes = 1000};
    s = open_session("rt_constant_of_shape", &lim, &m);
    if (s) {
        int64_t shp[2] = {10, 10};
        af_tensor in = {.dtype = AF_DTYPE_INT64, .rank = 1, .dims = {2}, .data = shp};
        const char *names[1] = {"s"};
        expect_run("10x10 floats under 1000 bytes", s, 1, names, &in, AF_OK, NULL);
        shp[1] = 100;
        expect_run("10x100 floats over 1000 bytes", s, 1, names, &in, AF_ERR_LIMIT,
                   "over the limit of 1000 bytes (max_tensor_bytes)");
    }
    af_session_free(s);
    af_model_free(m);
}

AF_TEST(robustness_loop_trip_count_is_bounded) {
    af_limits lim = {.max_loop_iterations = 1000};
    af_model *m;
    af_session *s = open_session("rt_loop_forever", &lim, &m);
    if (s) {
        bool cond = true;
        float v = 0;
        af_tensor in[2] = {{.dtype = AF_DTYPE_BOOL, .rank = 0, .data = &cond},
                           {.dtype = AF_DTYPE_FLOAT, .rank = 1, .dims = {1}, .data = &v}};
        const char *names[2] = {"cond", "v"};
        expect_run("endless loop", s, 2, names, in, AF_ERR_LIMIT, "more than 1000 iterations (max_loop_iterations)");
        cond = false; /* a loop that ends at once still runs */
        expect_run("loop that stops", s, 2, names, in, AF_OK, NULL);
    }
    af_session_free(s);
    af_model_free(m);
}

AF_TEST(robustness_activation_bytes_are_capped_at_plan_time) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/resnet_small/model.onnx", af_test_dir());
    af_model *m = NULL;
    af_error err = {0};
    CHECK(af_model_load(path, NULL, &m, &err) == AF_OK);
    if (!m) return;
    af_session_options so = af_session_options_default();
    so.n_threads = 1;
    so.limits.max_activation_bytes = 4096;
    af_session *s = NULL;
    af_status st = af_session_create(m, &so, &s, &err);
    CHECK(st == AF_ERR_LIMIT && s == NULL && strstr(err.message, "the limit is 4096 (max_activation_bytes)"));
    /* limits given at load carry over to sessions */
    af_model_free(m);
    af_load_options lo = af_load_options_default();
    lo.limits.max_activation_bytes = 4096;
    CHECK(af_model_load(path, &lo, &m, &err) == AF_OK);
    so.limits.max_activation_bytes = 0;
    st = m ? af_session_create(m, &so, &s, &err) : AF_ERR_INVALID_ARGUMENT;
    CHECK(st == AF_ERR_LIMIT && strstr(err.message, "(max_activation_bytes)"));
    so.limits.max_activation_bytes = (uint64_t)1 << 40; /* and a session may raise them */
    st = m ? af_session_create(m, &so, &s, &err) : AF_ERR_INVALID_ARGUMENT;
    CHECK(st == AF_OK);
    af_session_free(s);
    af_model_free(m);
}

AF_TEST(robustness_bad_run_inputs_give_clear_errors) {
    af_model *m;
    af_session *s = open_session("valid", NULL, &m); /* x: float32[2,3] */
    if (!s) {
        af_model_free(m);
        return;
    }
    float x[6] = {0};
    double xd[6] = {0};
    const char *names[2] = {"x", "x"};
    af_tensor good = {.dtype = AF_DTYPE_FLOAT, .rank = 2, .dims = {2, 3}, .data = x};
    af_tensor t = good;
    expect_run("good input", s, 1, names, &good, AF_OK, NULL);
    CHECK(af_session_output(s, 0) != NULL);
    t.dtype = AF_DTYPE_DOUBLE, t.data = xd;
    expect_run("wrong dtype", s, 1, names, &t, AF_ERR_INVALID_ARGUMENT, "input 'x' is float64[2,3], the model expects float32[2,3]");
    t = good, t.rank = 3, t.dims[2] = 1;
    expect_run("wrong rank", s, 1, names, &t, AF_ERR_INVALID_ARGUMENT, "the model expects float32[2,3]");
    t = good, t.dims[1] = 4;
    expect_run("wrong dims", s, 1, names, &t, AF_ERR_INVALID_ARGUMENT, "input 'x' is float32[2,4]");
    t = good, t.rank = 9;
    expect_run("rank over the limit", s, 1, names, &t, AF_ERR_INVALID_ARGUMENT, "invalid rank 9");
    t = good, t.rank = -1;
    expect_run("negative rank", s, 1, names, &t, AF_ERR_INVALID_ARGUMENT, "invalid rank -1");
    t = good, t.dims[0] = -2;
    expect_run("negative dim", s, 1, names, &t, AF_ERR_INVALID_ARGUMENT, "invalid dims");
    t = good, t.dtype = AF_DTYPE_STRING;
    expect_run("string dtype", s, 1, names, &t, AF_ERR_INVALID_ARGUMENT, "unsupported dtype");
    t = good, t.dtype = (af_dtype)99;
    expect_run("unknown dtype", s, 1, names, &t, AF_ERR_INVALID_ARGUMENT, "unsupported dtype");
    t = good, t.data = NULL;
    expect_run("NULL buffer", s, 1, names, &t, AF_ERR_INVALID_ARGUMENT, "input 'x' has no data");
    t = good, t.nbytes = 8;
    expect_run("short buffer", s, 1, names, &t, AF_ERR_INVALID_ARGUMENT, "holds 8 bytes, its shape needs 24");
    expect_run("missing input", s, 0, NULL, NULL, AF_ERR_INVALID_ARGUMENT, "graph input 'x' was not given");
    const char *other[1] = {"nope"};
    expect_run("unknown name", s, 1, other, &good, AF_ERR_INVALID_ARGUMENT, "'nope' is not an input");
    const char *null_name[1] = {NULL};
    expect_run("NULL name", s, 1, null_name, &good, AF_ERR_INVALID_ARGUMENT, "'(null)' is not an input");
    const char *not_input[1] = {"w"}; /* an initializer, not an input */
    expect_run("initializer as input", s, 1, not_input, &good, AF_ERR_INVALID_ARGUMENT, "'w' is not an input");
    af_tensor two[2] = {good, good};
    expect_run("input given twice", s, 2, names, two, AF_ERR_INVALID_ARGUMENT, "input 'x' is given twice");
    expect_run("NULL names", s, 1, NULL, &good, AF_ERR_INVALID_ARGUMENT, "NULL argument");
    expect_run("NULL tensors", s, 1, names, NULL, AF_ERR_INVALID_ARGUMENT, "NULL argument");
    expect_run("negative count", s, -1, names, &good, AF_ERR_INVALID_ARGUMENT, "NULL argument");
    expect_run("NULL session", NULL, 1, names, &good, AF_ERR_INVALID_ARGUMENT, "NULL argument");
    /* after every refusal the session still runs */
    expect_run("good input again", s, 1, names, &good, AF_OK, NULL);
    CHECK(af_session_run(s, 1, names, &good, NULL) == AF_OK); /* err may be NULL */
    CHECK(af_session_run(s, 0, NULL, NULL, NULL) == AF_ERR_INVALID_ARGUMENT);
    af_session_free(s);
    af_model_free(m);
}
