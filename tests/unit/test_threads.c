/* Concurrency (run under TSan by `make check-tsan`): the thread pool on its own, several sessions
 * over one shared model running at once, and one session called from several threads at once
 * (a call that overlaps another is refused with a clear error, never a corrupted run). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autofusion.h"
#include "util/threadpool.h"
#include "unit.h"

enum { POOL_TASKS = 1000 };

static void count_task(void *ctx, int task, int thread) {
    (void)thread;
    atomic_int *hits = ctx;
    atomic_fetch_add(&hits[task], 1);
}

typedef struct pool_arg {
    af_threadpool *pool;
    atomic_int *hits;
} pool_arg;

static void *pool_caller(void *p) {
    pool_arg *a = p;
    for (int r = 0; r < 20; r++) af_threadpool_run(a->pool, POOL_TASKS, count_task, a->hits);
    return NULL;
}

AF_TEST(threads_pool_runs_every_task_once_even_with_concurrent_callers) {
    af_threadpool *pool = NULL;
    CHECK(af_threadpool_create(4, &pool) == AF_OK);
    if (!pool) return;
    static atomic_int hits[POOL_TASKS];
    for (int i = 0; i < POOL_TASKS; i++) atomic_store(&hits[i], 0);
    af_threadpool_run(pool, POOL_TASKS, count_task, hits);
    for (int i = 0; i < POOL_TASKS; i++) CHECK_EQ_INT(atomic_load(&hits[i]), 1);
    /* several threads calling run on one pool at once: each call still runs every task */
    for (int i = 0; i < POOL_TASKS; i++) atomic_store(&hits[i], 0);
    pthread_t th[3];
    pool_arg arg = {pool, hits};
    for (int t = 0; t < 3; t++) CHECK(pthread_create(&th[t], NULL, pool_caller, &arg) == 0);
    for (int t = 0; t < 3; t++) pthread_join(th[t], NULL);
    for (int i = 0; i < POOL_TASKS; i++) CHECK_EQ_INT(atomic_load(&hits[i]), 60);
    af_threadpool_free(pool);
}

enum { SCRATCH_THREADS = 4, SCRATCH_TASKS = 64 };

/* What the tasks of one run saw of af_threadpool_scratch. */
typedef struct scratch_seen {
    af_threadpool *pool;
    size_t bytes;                               /* asked for by each task */
    _Atomic uintptr_t where[SCRATCH_THREADS];   /* thread t's scratch (the last task's) */
    atomic_int missing, misaligned, moved, clobbered, nested_got;
} scratch_seen;

static void nested_scratch_task(void *ctx, int task, int thread) {
    (void)task;
    scratch_seen *s = ctx;
    if (af_threadpool_scratch(s->pool, thread, 64)) atomic_fetch_add(&s->nested_got, 1);
}

/* Fills the scratch with the task's number, runs a nested (inline) job, then checks that nothing
 * else wrote it meanwhile: a thread sharing it with another would see the other's number. */
static void scratch_task(void *ctx, int task, int thread) {
    scratch_seen *s = ctx;
    unsigned char *p = af_threadpool_scratch(s->pool, thread, s->bytes);
    if (!p) {
        atomic_fetch_add(&s->missing, 1);
        return;
    }
    if ((uintptr_t)p % 64) atomic_fetch_add(&s->misaligned, 1);
    const uintptr_t before = atomic_exchange(&s->where[thread], (uintptr_t)p);
    if (before && before != (uintptr_t)p) atomic_fetch_add(&s->moved, 1);
    memset(p, task, s->bytes);
    af_threadpool_run(s->pool, 3, nested_scratch_task, s);
    for (size_t i = 0; i < s->bytes; i++)
        if (p[i] != (unsigned char)task) {
            atomic_fetch_add(&s->clobbered, 1);
            break;
        }
}

static void scratch_run(scratch_seen *s, size_t bytes) {
    s->bytes = bytes;
    af_threadpool_run(s->pool, SCRATCH_TASKS, scratch_task, s);
}

AF_TEST(threads_pool_scratch_is_each_threads_own_and_stays_put) {
    CHECK(af_threadpool_scratch(NULL, 0, 64) == NULL);
    af_threadpool *pool = NULL;
    CHECK(af_threadpool_create(SCRATCH_THREADS, &pool) == AF_OK);
    if (!pool) return;
    CHECK(af_threadpool_scratch(pool, 0, 64) == NULL); /* outside any task */
    static scratch_seen s;
    memset(&s, 0, sizeof s);
    s.pool = pool;
    /* The same buffer per thread from run to run while the size holds, a bigger one when a run
     * asks for more (ASan sees the whole of it written). */
    scratch_run(&s, 1000);
    uintptr_t first[SCRATCH_THREADS];
    for (int t = 0; t < SCRATCH_THREADS; t++) first[t] = atomic_load(&s.where[t]);
    scratch_run(&s, 1000);
    scratch_run(&s, 512);
    CHECK_EQ_INT(atomic_load(&s.moved), 0);
    for (int t = 0; t < SCRATCH_THREADS; t++) CHECK(!first[t] || atomic_load(&s.where[t]) == first[t]);
    /* Which threads run tasks differs from run to run (a worker may find them all taken): those of
     * the big run are the ones whose scratch must have grown to it. */
    for (int t = 0; t < SCRATCH_THREADS; t++) atomic_store(&s.where[t], 0);
    scratch_run(&s, 100000);
    CHECK_EQ_INT(atomic_load(&s.missing), 0);
    CHECK_EQ_INT(atomic_load(&s.misaligned), 0);
    CHECK_EQ_INT(atomic_load(&s.clobbered), 0);
    CHECK_EQ_INT(atomic_load(&s.nested_got), 0); /* nested runs go inline, on the caller's scratch */
    size_t used = 0;
    for (int t = 0; t < SCRATCH_THREADS; t++) used += atomic_load(&s.where[t]) ? 100000 : 0;
    CHECK(used >= 100000 && af_threadpool_scratch_bytes(pool) >= used);
    af_threadpool_free(pool);
    /* A one-thread pool runs inline, as thread 0 of its own run. */
    CHECK(af_threadpool_create(1, &pool) == AF_OK);
    if (!pool) return;
    memset(&s, 0, sizeof s);
    s.pool = pool;
    scratch_run(&s, 4096);
    CHECK_EQ_INT(atomic_load(&s.missing), 0);
    CHECK_EQ_INT(atomic_load(&s.nested_got), 0);
    CHECK(af_threadpool_scratch_bytes(pool) == 4096);
    af_threadpool_free(pool);
}

/* A timed job's tasks, each spinning for TIMED_TASK_NS and adding what it measured of itself when a
 * worker (thread > 0) ran it. */
enum { TIMED_TASKS = 8 };
#define TIMED_TASK_NS UINT64_C(5000000)
#define TIMED_SLACK_NS UINT64_C(10000000) /* claims, and a host that stalls a thread between tasks */

typedef struct timed_job {
    _Atomic uint64_t worker_ns, worker_max_ns;
} timed_job;

static uint64_t mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void spin_task(void *ctx, int task, int thread) {
    (void)task;
    timed_job *j = ctx;
    const uint64_t t0 = mono_ns();
    uint64_t t = t0;
    while (t - t0 < TIMED_TASK_NS) t = mono_ns();
    if (thread == 0) return;
    atomic_fetch_add(&j->worker_ns, t - t0);
    uint64_t max = atomic_load(&j->worker_max_ns);
    while (t - t0 > max && !atomic_compare_exchange_weak(&j->worker_max_ns, &max, t - t0)) {
    }
}

/* The perf analyzer's idle column stands on these: the workers' time in a job's tasks, and the
 * caller's wait for the tasks still running when its own are done. The workers' time holds
 * every task they ran and little else (not the caller's tasks, say, which would add half the
 * job); the caller waits at most about one worker task. Untimed jobs add nothing. */
AF_TEST(threads_pool_times_its_jobs_for_the_profile) {
    af_threadpool *pool = NULL;
    CHECK(af_threadpool_create(2, &pool) == AF_OK);
    if (!pool) return;
    timed_job j = {0, 0};
    af_pool_times t = {0, 0};
    af_threadpool_time_into(&t);
    af_threadpool_run(pool, TIMED_TASKS, spin_task, &j);
    af_threadpool_time_into(NULL);
    const uint64_t worker = atomic_load(&j.worker_ns), worker_max = atomic_load(&j.worker_max_ns);
    CHECK(t.workers_busy_ns >= worker);
    CHECK(t.workers_busy_ns <= worker + TIMED_SLACK_NS);
    CHECK(t.caller_wait_ns <= worker_max + TIMED_SLACK_NS);
    const af_pool_times timed = t;
    af_threadpool_run(pool, TIMED_TASKS, spin_task, &j);
    CHECK(t.workers_busy_ns == timed.workers_busy_ns && t.caller_wait_ns == timed.caller_wait_ns);
    af_threadpool_free(pool);
}

typedef struct run_arg {
    af_session *sess;
    const af_tensor *in;
    const char *name;
    int iterations;
    const float *want;
    size_t n_out;
    int ok, busy, other, mismatch;
} run_arg;

static void *runner(void *p) {
    run_arg *a = p;
    for (int i = 0; i < a->iterations; i++) {
        af_error err;
        af_status st = af_session_run(a->sess, 1, &a->name, a->in, &err);
        if (st == AF_OK) {
            a->ok++;
            if (a->want) {
                const af_tensor *o = af_session_output(a->sess, 0);
                if (!o || o->nbytes != a->n_out * sizeof(float) || memcmp(o->data, a->want, o->nbytes) != 0)
                    a->mismatch++;
            }
        } else if (st == AF_ERR_INVALID_ARGUMENT && strstr(err.message, "already running")) {
            a->busy++;
        } else {
            a->other++;
        }
    }
    return NULL;
}

/* The BERT-free ResNet fixture: one float input. */
static af_model *load_fixture(af_tensor *in, float **buf, const char **name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/resnet_small/model.onnx", af_test_dir());
    af_model *m = NULL;
    af_error err;
    if (af_model_load(path, NULL, &m, &err) != AF_OK) {
        af_test_fail(__FILE__, __LINE__, "%s: %s", path, err.message);
        return NULL;
    }
    af_value_info vi;
    af_model_input_info(m, 0, &vi);
    memset(in, 0, sizeof *in);
    in->dtype = AF_DTYPE_FLOAT;
    in->rank = vi.rank;
    size_t n = 1;
    for (int d = 0; d < vi.rank; d++) n *= (size_t)(in->dims[d] = vi.dims[d] < 0 ? 1 : vi.dims[d]);
    *buf = malloc(n * sizeof **buf);
    for (size_t k = 0; k < n; k++) (*buf)[k] = (float)(k % 17) * 0.05f;
    in->data = *buf;
    in->nbytes = n * sizeof **buf;
    *name = vi.name;
    return m;
}

AF_TEST(threads_sessions_sharing_one_model_run_concurrently) {
    af_tensor in;
    float *buf = NULL;
    const char *name;
    af_model *m = load_fixture(&in, &buf, &name);
    if (!m) return;
    enum { N = 3 };
    af_session *s[N] = {0};
    af_error err;
    af_session_options so = af_session_options_default();
    so.n_threads = 2;
    for (int i = 0; i < N; i++) CHECK(af_session_create(m, &so, &s[i], &err) == AF_OK);
    float *want = NULL;
    size_t n_out = 0;
    /* The kernels' per-thread scratch comes from the session's pool once a run asks for it. */
    CHECK(s[0] && af_session_plan_memory(s[0]).thread_scratch_bytes == 0);
    CHECK(s[0] && af_session_plan_memory(s[0]).workspace_bytes > 0);
    if (s[0] && af_session_run(s[0], 1, &name, &in, &err) == AF_OK) {
        CHECK(af_session_plan_memory(s[0]).thread_scratch_bytes > 0);
        const af_tensor *o = af_session_output(s[0], 0);
        n_out = o->nbytes / sizeof(float);
        want = malloc(o->nbytes);
        memcpy(want, o->data, o->nbytes);
    }
    CHECK(want != NULL);
    pthread_t th[N];
    run_arg a[N];
    for (int i = 0; i < N; i++) {
        a[i] = (run_arg){.sess = s[i], .in = &in, .name = name, .iterations = 3, .want = want, .n_out = n_out};
        CHECK(s[i] && pthread_create(&th[i], NULL, runner, &a[i]) == 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(a[i].ok, 3);
        CHECK_EQ_INT(a[i].mismatch, 0);
    }
    for (int i = 0; i < N; i++) af_session_free(s[i]);
    free(want);
    free(buf);
    af_model_free(m);
}

AF_TEST(threads_one_session_called_from_several_threads_refuses_overlaps) {
    af_tensor in;
    float *buf = NULL;
    const char *name;
    af_model *m = load_fixture(&in, &buf, &name);
    if (!m) return;
    af_session *s = NULL;
    af_error err;
    af_session_options so = af_session_options_default();
    so.n_threads = 2;
    CHECK(af_session_create(m, &so, &s, &err) == AF_OK);
    enum { N = 4 };
    pthread_t th[N];
    run_arg a[N];
    for (int i = 0; i < N; i++) {
        a[i] = (run_arg){.sess = s, .in = &in, .name = name, .iterations = 4};
        CHECK(s && pthread_create(&th[i], NULL, runner, &a[i]) == 0);
    }
    int ok = 0, busy = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ok += a[i].ok;
        busy += a[i].busy;
        CHECK_EQ_INT(a[i].other, 0);
    }
    CHECK(ok >= 1 && ok + busy == N * 4);
    printf("  %d runs, %d refused as overlapping\n", ok, busy);
    /* the session is intact afterwards */
    CHECK(af_session_run(s, 1, &name, &in, &err) == AF_OK && af_session_output(s, 0) != NULL);
    af_session_free(s);
    free(buf);
    af_model_free(m);
}
