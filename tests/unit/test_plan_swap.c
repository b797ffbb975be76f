/* Swapping a session's plan (af_session_replan): levels change and outputs do not, a failed replan
 * leaves the old plan running, and a replan under a run in flight neither blocks nor breaks it
 * (named threads_* so `make check-tsan` runs them under ThreadSanitizer). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "autofusion.h"
#include "util/alloc.h"
#include "unit.h"

/* The ResNet fixture, its one input, and its level-0 output as the reference. */
typedef struct fixture {
    af_model *model;
    af_tensor in;
    float *in_buf;
    const char *name;
    float *want;
    size_t n_out;
} fixture;

static bool fixture_load(fixture *f) {
    memset(f, 0, sizeof *f);
    char path[1024];
    snprintf(path, sizeof path, "%s/models/resnet_small/model.onnx", af_test_dir());
    af_error err;
    if (af_model_load(path, NULL, &f->model, &err) != AF_OK) {
        af_test_fail(__FILE__, __LINE__, "%s: %s", path, err.message);
        return false;
    }
    af_value_info vi;
    af_model_input_info(f->model, 0, &vi);
    f->in.dtype = AF_DTYPE_FLOAT;
    f->in.rank = vi.rank;
    size_t n = 1;
    for (int d = 0; d < vi.rank; d++) n *= (size_t)(f->in.dims[d] = vi.dims[d] < 0 ? 1 : vi.dims[d]);
    f->in_buf = malloc(n * sizeof *f->in_buf);
    for (size_t k = 0; k < n; k++) f->in_buf[k] = (float)(k % 17) * 0.05f - 0.4f;
    f->in.data = f->in_buf;
    f->in.nbytes = n * sizeof *f->in_buf;
    f->name = vi.name;
    return true;
}

static void fixture_free(fixture *f) {
    free(f->want);
    free(f->in_buf);
    af_model_free(f->model);
}

static af_session *make_session(const fixture *f, int level) {
    af_session_options so = af_session_options_default();
    so.n_threads = 2;
    so.fusion_level = level;
    af_session *s = NULL;
    af_error err;
    if (af_session_create(f->model, &so, &s, &err) != AF_OK) af_test_fail(__FILE__, __LINE__, "%s", err.message);
    return s;
}

/* Max relative error of the session's output against the reference; 1e30 when it did not run. */
static double run_error(af_session *s, const fixture *f) {
    af_error err;
    if (af_session_run(s, 1, &f->name, &f->in, &err) != AF_OK) return 1e30;
    const af_tensor *o = af_session_output(s, 0);
    if (!o || o->nbytes != f->n_out * sizeof(float)) return 1e30;
    const float *got = o->data;
    double worst = 0;
    for (size_t i = 0; i < f->n_out; i++) {
        double d = got[i] - f->want[i], ref = f->want[i] < 0 ? -f->want[i] : f->want[i];
        double rel = (d < 0 ? -d : d) / (ref > 1e-3 ? ref : 1e-3);
        if (!(rel <= worst)) worst = rel; /* NaN counts as worst */
    }
    return worst;
}

/* Runs a level-0 session once and keeps its output as f->want. */
static bool fixture_reference(fixture *f) {
    af_session *s = make_session(f, 0);
    af_error err;
    bool ok = s && af_session_run(s, 1, &f->name, &f->in, &err) == AF_OK;
    const af_tensor *o = ok ? af_session_output(s, 0) : NULL;
    if (o) {
        f->n_out = o->nbytes / sizeof(float);
        f->want = malloc(o->nbytes);
        memcpy(f->want, o->data, o->nbytes);
    }
    af_session_free(s);
    CHECK(o != NULL);
    return o != NULL;
}

static bool setup(fixture *f) {
    if (!fixture_load(f)) return false;
    if (fixture_reference(f)) return true;
    fixture_free(f);
    return false;
}

#define TOL 1e-4

AF_TEST(threads_plan_swap_levels_change_steps_keep_outputs) {
    fixture f;
    if (!setup(&f)) return;
    af_session *s = make_session(&f, 0);
    if (!s) goto out;
    int steps0 = af_session_n_steps(s);
    CHECK_EQ_INT(af_session_fusion_level(s), 0);
    CHECK(run_error(s, &f) == 0);
    af_error err;
    CHECK_EQ_INT(af_session_replan(s, NULL, 3, &err), AF_OK);
    CHECK_EQ_INT(af_session_fusion_level(s), 3);
    int steps3 = af_session_n_steps(s);
    CHECK(steps3 < steps0);
    CHECK(af_session_fusion_ms(s) > 0);
    double e3 = run_error(s, &f);
    CHECK(e3 <= TOL);
    CHECK_EQ_INT(af_session_replan(s, NULL, 0, &err), AF_OK);
    CHECK_EQ_INT(af_session_fusion_level(s), 0);
    CHECK_EQ_INT(af_session_n_steps(s), steps0);
    CHECK(run_error(s, &f) == 0);
    /* -1: the config's level, the defaults here (3) */
    CHECK_EQ_INT(af_session_replan(s, NULL, -1, &err), AF_OK);
    CHECK_EQ_INT(af_session_fusion_level(s), 3);
    CHECK_EQ_INT(af_session_n_steps(s), steps3);
    CHECK(run_error(s, &f) <= TOL);
    printf("  %d steps unfused, %d fused; fused max rel error %.2g\n", steps0, steps3, e3);
    af_session_free(s);
out:
    fixture_free(&f);
}

/* Reads back what af_session_profile_write printed. */
static void profile_text(af_session *s, char *buf, size_t n) {
    FILE *tmp = tmpfile();
    buf[0] = '\0';
    if (!tmp) return;
    af_session_profile_write(s, tmp);
    rewind(tmp);
    size_t got = fread(buf, 1, n - 1, tmp);
    buf[got] = '\0';
    fclose(tmp);
}

AF_TEST(threads_plan_swap_starts_a_fresh_profile) {
    fixture f;
    if (!setup(&f)) return;
    af_session *s = make_session(&f, 3);
    if (!s) goto out;
    af_error err;
    char text[8192];
    CHECK_EQ_INT(af_session_set_profiling(s, 1, &err), AF_OK);
    CHECK(run_error(s, &f) <= TOL);
    profile_text(s, text, sizeof text);
    CHECK(strstr(text, "no profile") == NULL);
    /* the new plan's steps are others: its totals start empty */
    CHECK_EQ_INT(af_session_replan(s, NULL, 0, &err), AF_OK);
    profile_text(s, text, sizeof text);
    CHECK(strstr(text, "no profile") != NULL);
    CHECK(run_error(s, &f) == 0);
    profile_text(s, text, sizeof text);
    CHECK(strstr(text, "no profile") == NULL);
    af_session_free(s);
out:
    fixture_free(&f);
}

/* Writes text to a new temporary file; its path goes to path. */
static bool write_config(const char *text, char *path, size_t n) {
    snprintf(path, n, "/tmp/af_plan_swap_XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) return false;
    size_t len = strlen(text);
    bool ok = write(fd, text, len) == (ssize_t)len;
    close(fd);
    return ok;
}

/* A replan that must fail with `want` and a message holding `cause`; the old plan stays. */
static void check_failed_replan(af_session *s, const fixture *f, const char *config, int level, af_status want,
                                const char *cause) {
    char path[64] = "";
    if (config && !write_config(config, path, sizeof path)) {
        af_test_fail(__FILE__, __LINE__, "cannot write a config file");
        return;
    }
    int level_before = af_session_fusion_level(s), steps_before = af_session_n_steps(s);
    size_t arena_before = af_session_arena_bytes(s);
    af_error err = {0};
    af_status st = af_session_replan(s, config ? path : NULL, level, &err);
    if (st != want || !strstr(err.message, cause))
        af_test_fail(__FILE__, __LINE__, "replan with %s: status %d '%s', want %d and '%s'", config ? config : "(none)",
                     (int)st, err.message, (int)want, cause);
    CHECK_EQ_INT(af_session_fusion_level(s), level_before);
    CHECK_EQ_INT(af_session_n_steps(s), steps_before);
    CHECK_EQ_INT(af_session_arena_bytes(s), arena_before);
    CHECK(run_error(s, f) <= TOL);
    if (config) unlink(path);
}

AF_TEST(threads_plan_swap_failed_replan_keeps_the_old_plan) {
    fixture f;
    if (!setup(&f)) return;
    af_session *s = make_session(&f, 3);
    if (!s) goto out;
    double before = run_error(s, &f);
    CHECK(before <= TOL);
    check_failed_replan(s, &f, "{\"fusion_levle\": 0}", 0, AF_ERR_INVALID_ARGUMENT, "fusion_levle: unknown key");
    check_failed_replan(s, &f, "{\"resource_constraints\": {\"max_mem_usage\": \"1KB\"}}", 0, AF_ERR_LIMIT,
                        "resource_constraints.max_mem_usage is 1000");
    check_failed_replan(s, &f, NULL, 4, AF_ERR_INVALID_ARGUMENT, "fusion_level must be");
    CHECK(run_error(s, &f) == before);
    af_error err;
    CHECK_EQ_INT(af_session_replan(NULL, NULL, 0, &err), AF_ERR_INVALID_ARGUMENT);
    af_session_free(s);
out:
    fixture_free(&f);
}

AF_TEST(threads_plan_swap_refused_on_an_owning_session) {
    fixture f;
    if (!setup(&f)) return;
    af_session_options so = af_session_options_default();
    so.n_threads = 2;
    so.fusion_level = 3;
    af_session *s = NULL;
    af_error err;
    CHECK_EQ_INT(af_session_create_owning(f.model, &so, &s, &err), AF_OK);
    if (s) {
        f.model = NULL; /* the session's now */
        CHECK_EQ_INT(af_session_replan(s, NULL, 0, &err), AF_ERR_INVALID_ARGUMENT);
        CHECK(strstr(err.message, "af_session_create_owning") != NULL);
        CHECK(strstr(err.message, "af_session_create to replan") != NULL);
        CHECK_EQ_INT(af_session_fusion_level(s), 3);
        CHECK(run_error(s, &f) <= TOL);
    }
    af_session_free(s);
    fixture_free(&f);
}

/* ---- replans under runs in flight -------------------------------------------------------------- */

typedef struct swap_test {
    af_session *sess;
    const fixture *f;
    atomic_int stop;
    atomic_long started, finished; /* runs, counted just before each call and just after it returns */
    long runs, bad_runs;           /* the runner's */
    long replans, bad_replans, overlaps, bad_reads; /* the replanner's and the reader's */
    int steps[4];                  /* n_steps at levels 0 and 3 */
} swap_test;

static void *swap_runner(void *p) {
    swap_test *t = p;
    while (!atomic_load(&t->stop)) {
        atomic_fetch_add(&t->started, 1);
        double e = run_error(t->sess, t->f);
        atomic_fetch_add(&t->finished, 1);
        t->runs++;
        if (!(e <= TOL)) t->bad_runs++;
    }
    return NULL;
}

/* Replans 0 <-> 3 at least MIN_REPLANS times, and on until one replan has begun and returned
 * inside one run (the run it saw start had not yet finished), at most MAX_REPLANS. */
enum { MIN_REPLANS = 100, MAX_REPLANS = 2000 };

static void *swap_replanner(void *p) {
    swap_test *t = p;
    for (int i = 0; i < MAX_REPLANS && (i < MIN_REPLANS || !t->overlaps); i++) {
        int level = i % 2 ? 0 : 3;
        af_error err;
        long s0 = atomic_load(&t->started);
        af_status st = af_session_replan(t->sess, NULL, level, &err);
        long f1 = atomic_load(&t->finished);
        if (f1 < s0) t->overlaps++; /* run s0 began before the call and was still going after it */
        t->replans++;
        /* only this thread replans, so the current plan is the one just published */
        if (st != AF_OK || af_session_fusion_level(t->sess) != level || af_session_n_steps(t->sess) != t->steps[level])
            t->bad_replans++;
    }
    atomic_store(&t->stop, 1);
    return NULL;
}

/* Reads the plan through every accessor while plans are swapped and freed under it. */
static void *swap_reader(void *p) {
    swap_test *t = p;
    FILE *sink = fopen("/dev/null", "w");
    while (!atomic_load(&t->stop)) {
        int steps = af_session_n_steps(t->sess), level = af_session_fusion_level(t->sess);
        if (steps != t->steps[0] && steps != t->steps[3]) t->bad_reads++;
        if (level != 0 && level != 3) t->bad_reads++;
        if (af_session_arena_bytes(t->sess) == 0 || af_session_traffic_bytes(t->sess) == 0) t->bad_reads++;
        (void)af_session_fusion_ms(t->sess);
        if (sink) af_session_fusion_report(t->sess, sink);
        nanosleep(&(struct timespec){.tv_nsec = 200000}, NULL);
    }
    if (sink) fclose(sink);
    return NULL;
}

AF_TEST(threads_plan_swap_replans_under_runs_in_flight) {
    fixture f;
    if (!setup(&f)) return;
    swap_test t = {.f = &f};
    t.sess = make_session(&f, 3);
    af_error err;
    if (!t.sess) goto out;
    t.steps[3] = af_session_n_steps(t.sess);
    CHECK_EQ_INT(af_session_replan(t.sess, NULL, 0, &err), AF_OK);
    t.steps[0] = af_session_n_steps(t.sess);
    atomic_init(&t.stop, 0);
    atomic_init(&t.started, 0);
    atomic_init(&t.finished, 0);
    pthread_t runner, replanner, reader;
    CHECK(pthread_create(&runner, NULL, swap_runner, &t) == 0);
    CHECK(pthread_create(&reader, NULL, swap_reader, &t) == 0);
    CHECK(pthread_create(&replanner, NULL, swap_replanner, &t) == 0);
    pthread_join(replanner, NULL);
    pthread_join(reader, NULL);
    pthread_join(runner, NULL);
    printf("  %ld runs, %ld replans, %ld replans inside one run\n", t.runs, t.replans, t.overlaps);
    CHECK(t.runs >= 1);
    CHECK_EQ_INT(t.bad_runs, 0);
    CHECK(t.replans >= MIN_REPLANS);
    CHECK_EQ_INT(t.bad_replans, 0);
    CHECK_EQ_INT(t.bad_reads, 0);
    CHECK(t.overlaps >= 1);
    /* the session is intact afterwards, on the last plan published (level 0 or 3) */
    CHECK(run_error(t.sess, &f) <= TOL);
    af_session_free(t.sess);
out:
    fixture_free(&f);
}

/* ---- out of memory ------------------------------------------------------------------------------ */

/* Fails each allocation of a replan from level `from` to `to` in turn: every attempt either fails
 * with AF_ERR_OUT_OF_MEMORY, the old plan still current and running correctly, or succeeds
 * (an optional allocation, such as a fusion the scheduler then skips). LeakSanitizer (check-san)
 * proves the failed builds free what they made. */
static void oom_sweep(af_session *s, const fixture *f, int from, int to) {
    af_error err;
    int steps = af_session_n_steps(s);
    af_alloc_fail_after(-1); /* also restarts the count */
    af_status st = af_session_replan(s, NULL, to, &err);
    long total = af_alloc_count(), failed = 0;
    if (st != AF_OK || af_session_replan(s, NULL, from, &err) != AF_OK) {
        af_test_fail(__FILE__, __LINE__, "replan: %s", err.message);
        return;
    }
    for (long n = 0; n < total; n++) {
        af_alloc_fail_after(n);
        st = af_session_replan(s, NULL, to, &err);
        af_alloc_fail_after(-1);
        if (st == AF_OK) {
            CHECK_EQ_INT(af_session_replan(s, NULL, from, &err), AF_OK);
        } else {
            failed++;
            if (st != AF_ERR_OUT_OF_MEMORY || !strstr(err.message, "the current plan stays"))
                af_test_fail(__FILE__, __LINE__, "allocation %ld failing: status %d '%s'", n, (int)st, err.message);
        }
        CHECK_EQ_INT(af_session_fusion_level(s), from);
        CHECK_EQ_INT(af_session_n_steps(s), steps);
        CHECK(run_error(s, f) <= TOL);
    }
    CHECK(failed > 0);
    printf("  level %d -> %d: %ld allocations, %ld failed the replan\n", from, to, total, failed);
}

AF_TEST(threads_plan_swap_out_of_memory_keeps_the_old_plan) {
    fixture f;
    if (!setup(&f)) return;
    af_session *s = make_session(&f, 0);
    if (s) {
        oom_sweep(s, &f, 0, 3);
        CHECK_EQ_INT(af_session_replan(s, NULL, 3, NULL), AF_OK);
        oom_sweep(s, &f, 3, 0);
    }
    af_session_free(s);
    fixture_free(&f);
}
