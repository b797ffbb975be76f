/* Malformed models: every case in tests/malformed/expected.txt, file-system tricks made at test time
 * (symlinks, hard links, FIFOs, directories), truncation of a real model at many offsets, deep
 * protobuf nesting, random byte mutations and an out-of-memory sweep. Each must fail with a clear
 * one-line error, never a crash, hang or leak (the SAN build checks memory). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
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

AF_TEST(malformed_corpus_cases_fail_as_expected) {
    char dir[1024], path[1200];
    snprintf(dir, sizeof dir, "%s/malformed", af_test_dir());
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
    CHECK(n_cases >= 80);
}

/* A scratch folder holding model/model.onnx (the ext_valid case, reading model/ext_data.bin) and
 * outside.bin next to model/. */
typedef struct scratch {
    char root[256], model_dir[300], model[340], ext[340], outside[300];
} scratch;

static const float ext_values[6] = {0, 1, 2, 3, 4, 5};

static int scratch_make(scratch *s) {
    snprintf(s->root, sizeof s->root, "/tmp/af_malformed_XXXXXX");
    if (!mkdtemp(s->root)) return 0;
    snprintf(s->model_dir, sizeof s->model_dir, "%s/model", s->root);
    snprintf(s->model, sizeof s->model, "%s/model.onnx", s->model_dir);
    snprintf(s->ext, sizeof s->ext, "%s/ext_data.bin", s->model_dir);
    snprintf(s->outside, sizeof s->outside, "%s/outside.bin", s->root);
    char src[1024];
    snprintf(src, sizeof src, "%s/malformed/ext_valid.onnx", af_test_dir());
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

AF_TEST(malformed_external_data_links_fifos_and_folders) {
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

AF_TEST(malformed_truncation_at_every_offset_fails_cleanly) {
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

AF_TEST(malformed_deep_protobuf_nesting_is_refused) {
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

AF_TEST(malformed_out_of_memory_at_every_allocation_fails_cleanly) {
    static const char *const node_tests[] = {"test_conv_with_strides_padding", "test_if", "test_loop11"};
    char path[1024];
    int swept = 0;
    for (size_t i = 0; i < sizeof node_tests / sizeof node_tests[0]; i++) {
        snprintf(path, sizeof path, "%s/%s/model.onnx", NODE_TESTS, node_tests[i]);
        swept += oom_sweep(path);
    }
    static const char *const corpus[] = {"valid", "ext_valid"};
    for (size_t i = 0; i < sizeof corpus / sizeof corpus[0]; i++) {
        snprintf(path, sizeof path, "%s/malformed/%s.onnx", af_test_dir(), corpus[i]);
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

AF_TEST(malformed_random_mutations_load_or_fail_cleanly) {
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
