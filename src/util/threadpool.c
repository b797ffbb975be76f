/* The intra-op thread pool: a generation-counted job that workers join, spin-then-sleep waiting. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "util/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "util/alloc.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* How long an idle worker (and a waiting caller) spins before it sleeps: long enough to span the
 * gap between consecutive kernels of one inference, short enough not to hold a core for nothing. */
#define SPIN_NS 200000

/* job_word packs (generation << 32) | CLOSED | workers-inside. A worker joins a job by a CAS that
 * succeeds only while the job is open and still the current generation, so a late worker can never
 * touch the next job's fields; the caller closes the job once every task is done and waits for the
 * workers inside to leave before it returns (and before the fields are rewritten). */
#define JOB_CLOSED (UINT64_C(1) << 31)
#define JOB_INSIDE_MASK (JOB_CLOSED - 1)

/* The tasks left to a thread: (end << 32) | next, tasks [next, end). A thread claims from the
 * front of its own range and, when that is empty, from the back of another's. A dynamic job puts
 * every task in the caller's range; an affine one gives thread t the t-th contiguous share. */
typedef struct range_word {
    alignas(64) _Atomic uint64_t w;
} range_word;

/* One pool thread's scratch (see af_threadpool_scratch), on a line of its own. */
typedef struct thread_scratch {
    alignas(64) void *data;
    _Atomic size_t bytes; /* read by af_threadpool_scratch_bytes from any thread */
} thread_scratch;

/* When a worker's run of a job began and ended (its tasks, claims included), on a line of its own;
 * written only in a timed job (see af_threadpool_time_into), join 0 where it ran no task. */
typedef struct thread_times {
    alignas(64) _Atomic uint64_t join, done;
} thread_times;

/* The pool and thread index whose tasks the calling OS thread is running in a run of its own
 * (pool NULL otherwise, and while it runs tasks inline): who may use which thread's scratch. */
typedef struct running_as {
    af_threadpool *pool;
    int thread;
} running_as;
static _Thread_local running_as current;

/* Where the calling thread's timed jobs add up their times (NULL: untimed). */
static _Thread_local af_pool_times *times_sink;

struct af_threadpool {
    int n_threads;
    pthread_t *workers; /* n_threads - 1 */
    int n_started;

    _Atomic uint64_t job_word;
    /* The two counters every claim and completion writes, each on a cache line of its own: shared
     * with the job fields, each write sent the line the other cores read fn, ctx and n_tasks from
     * across the chip, per task. */
    alignas(64) _Atomic int tasks_done;
    alignas(64) _Atomic int running; /* 1 while a run is in progress: a second run goes inline */
    _Atomic int shutdown;
    /* The job; written by the caller only while no worker is inside (see job_word). */
    af_task_fn fn;
    void *ctx;
    int n_tasks;
    range_word *ranges; /* n_threads, one cache line each */
    thread_scratch *scratch; /* n_threads */
    thread_times *times;     /* n_threads */
    bool timed;              /* this job records its threads' times */

    pthread_mutex_t mutex;
    pthread_cond_t wake;
    int n_sleeping; /* guarded by mutex */
};

struct worker_arg {
    af_threadpool *pool;
    int thread;
};

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int af_cpu_count(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
}

static uint64_t range_pack(uint32_t next, uint32_t end) { return (uint64_t)end << 32 | next; }

/* Claims up to `grain` tasks of range r, from its front (the owner) or its back (a thief); returns
 * how many, the first in *first. */
static int claim(range_word *r, int grain, bool from_back, int *first) {
    uint64_t w = atomic_load_explicit(&r->w, memory_order_relaxed);
    for (;;) {
        const uint32_t next = (uint32_t)w, end = (uint32_t)(w >> 32);
        if (next >= end) return 0;
        const uint32_t n = end - next < (uint32_t)grain ? end - next : (uint32_t)grain;
        const uint64_t to = from_back ? range_pack(next, end - n) : range_pack(next + n, end);
        if (atomic_compare_exchange_weak_explicit(&r->w, &w, to, memory_order_relaxed, memory_order_relaxed)) {
            *first = (int)(from_back ? end - n : next);
            return (int)n;
        }
    }
}

/* Runs tasks of the current job until none is left: this thread's share first, a few at a time
 * (with one claim per task, kernels of many small tasks, a depthwise conv's 960 planes of 7x7,
 * spent as long on the counters as on the work), then what the other threads have not started.
 * Returns how many it ran. */
static int run_tasks(af_threadpool *pool, int thread) {
    const running_as outer = current; /* the caller's, when it runs a task of another pool */
    current = (running_as){pool, thread};
    const int n = pool->n_tasks, T = pool->n_threads;
    const af_task_fn fn = pool->fn;
    void *const ctx = pool->ctx;
    int grain = n / (8 * T), ran = 0;
    if (grain < 1) grain = 1;
    for (int k = 0; k < T; k++) {
        const int owner = (thread + k) % T;
        int first, got;
        while ((got = claim(&pool->ranges[owner], grain, k > 0, &first)) > 0) {
            for (int task = first; task < first + got; task++) fn(ctx, task, thread);
            ran += got;
            atomic_fetch_add_explicit(&pool->tasks_done, got, memory_order_release);
        }
    }
    current = outer;
    return ran;
}

/* Waits until the generation differs from `seen` (or shutdown); returns the new job word. */
static uint64_t wait_for_job(af_threadpool *pool, uint32_t seen) {
    uint64_t start = 0;
    for (unsigned spins = 0;; spins++) {
        uint64_t w = atomic_load_explicit(&pool->job_word, memory_order_acquire);
        if ((uint32_t)(w >> 32) != seen || atomic_load_explicit(&pool->shutdown, memory_order_relaxed)) return w;
        if ((spins & 255) == 0) {
            uint64_t t = now_ns();
            if (!start) start = t;
            else if (t - start > SPIN_NS) break;
        }
        cpu_relax();
    }
    pthread_mutex_lock(&pool->mutex);
    pool->n_sleeping++;
    uint64_t w;
    for (;;) {
        w = atomic_load_explicit(&pool->job_word, memory_order_acquire);
        if ((uint32_t)(w >> 32) != seen || atomic_load_explicit(&pool->shutdown, memory_order_relaxed)) break;
        pthread_cond_wait(&pool->wake, &pool->mutex);
    }
    pool->n_sleeping--;
    pthread_mutex_unlock(&pool->mutex);
    return w;
}

static void *worker_main(void *p) {
    struct worker_arg arg = *(struct worker_arg *)p;
    af_free(p);
    af_threadpool *pool = arg.pool;
    /* Generation 0, the one at creation: read here instead, a worker that started after the
     * first job was posted took that job for one already seen and slept through it. */
    uint32_t seen = 0;
    for (;;) {
        uint64_t w = wait_for_job(pool, seen);
        if (atomic_load_explicit(&pool->shutdown, memory_order_relaxed)) return NULL;
        seen = (uint32_t)(w >> 32);
        /* Join the job unless it is already closed or replaced. */
        while (!(w & JOB_CLOSED) && (uint32_t)(w >> 32) == seen) {
            if (atomic_compare_exchange_weak_explicit(&pool->job_word, &w, w + 1, memory_order_acq_rel,
                                                      memory_order_acquire)) {
                /* timed is the job's: read while inside it, before it can be rewritten. */
                const bool timed = pool->timed;
                const uint64_t join = timed ? now_ns() : 0;
                if (run_tasks(pool, arg.thread) > 0 && timed) {
                    atomic_store_explicit(&pool->times[arg.thread].join, join, memory_order_relaxed);
                    atomic_store_explicit(&pool->times[arg.thread].done, now_ns(), memory_order_relaxed);
                }
                atomic_fetch_sub_explicit(&pool->job_word, 1, memory_order_release);
                break;
            }
        }
    }
}

af_status af_threadpool_create(int n_threads, af_threadpool **out) {
    *out = NULL;
    if (n_threads < 0) return AF_ERR_INVALID_ARGUMENT;
    if (n_threads == 0) n_threads = af_cpu_count();
    if (n_threads > AF_THREADPOOL_MAX_THREADS) n_threads = AF_THREADPOOL_MAX_THREADS;
    af_threadpool *pool = af_malloc_aligned(sizeof *pool); /* 64-aligned, for the counters' lines */
    if (!pool) return AF_ERR_OUT_OF_MEMORY;
    memset(pool, 0, sizeof *pool);
    pool->n_threads = n_threads;
    pool->ranges = af_malloc_aligned((size_t)n_threads * sizeof *pool->ranges);
    pool->scratch = af_malloc_aligned((size_t)n_threads * sizeof *pool->scratch);
    pool->times = af_malloc_aligned((size_t)n_threads * sizeof *pool->times);
    if (!pool->ranges || !pool->scratch || !pool->times) {
        af_free_aligned(pool->ranges);
        af_free_aligned(pool->scratch);
        af_free_aligned(pool->times);
        af_free_aligned(pool);
        return AF_ERR_OUT_OF_MEMORY;
    }
    memset(pool->times, 0, (size_t)n_threads * sizeof *pool->times);
    memset(pool->scratch, 0, (size_t)n_threads * sizeof *pool->scratch);
    for (int t = 0; t < n_threads; t++) atomic_init(&pool->ranges[t].w, 0);
    atomic_init(&pool->job_word, 0);
    atomic_init(&pool->tasks_done, 0);
    atomic_init(&pool->running, 0);
    atomic_init(&pool->shutdown, 0);
    if (pthread_mutex_init(&pool->mutex, NULL) != 0) {
        af_free_aligned(pool->ranges);
        af_free_aligned(pool->scratch);
        af_free_aligned(pool->times);
        af_free_aligned(pool);
        return AF_ERR_RUNTIME;
    }
    if (pthread_cond_init(&pool->wake, NULL) != 0) {
        pthread_mutex_destroy(&pool->mutex);
        af_free_aligned(pool->ranges);
        af_free_aligned(pool->scratch);
        af_free_aligned(pool->times);
        af_free_aligned(pool);
        return AF_ERR_RUNTIME;
    }
    af_status st = AF_OK;
    if (n_threads > 1) {
        pool->workers = af_calloc((size_t)n_threads - 1, sizeof *pool->workers);
        if (!pool->workers) st = AF_ERR_OUT_OF_MEMORY;
    }
    for (int i = 1; st == AF_OK && i < n_threads; i++) {
        struct worker_arg *arg = af_malloc(sizeof *arg);
        if (!arg) {
            st = AF_ERR_OUT_OF_MEMORY;
            break;
        }
        *arg = (struct worker_arg){pool, i};
        if (pthread_create(&pool->workers[i - 1], NULL, worker_main, arg) != 0) {
            af_free(arg);
            st = AF_ERR_RUNTIME;
            break;
        }
        pool->n_started++;
    }
    if (st != AF_OK) {
        af_threadpool_free(pool);
        return st;
    }
    *out = pool;
    return AF_OK;
}

void af_threadpool_free(af_threadpool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->mutex);
    atomic_store(&pool->shutdown, 1);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mutex);
    for (int i = 0; i < pool->n_started; i++) pthread_join(pool->workers[i], NULL);
    af_free(pool->workers);
    pthread_cond_destroy(&pool->wake);
    pthread_mutex_destroy(&pool->mutex);
    af_free_aligned(pool->ranges);
    for (int t = 0; t < pool->n_threads; t++) af_free_aligned(pool->scratch[t].data);
    af_free_aligned(pool->scratch);
    af_free_aligned(pool->times);
    af_free_aligned(pool);
}

int af_threadpool_n_threads(const af_threadpool *pool) { return pool ? pool->n_threads : 1; }

/* Runs every task on the caller as thread 0; `owner`: the pool whose run this is (it holds
 * `running`), NULL for a run that borrows no pool thread's scratch (nested, concurrent, no pool). */
static void run_inline(af_threadpool *owner, int n_tasks, af_task_fn fn, void *ctx) {
    const running_as outer = current;
    current = (running_as){owner, 0};
    for (int i = 0; i < n_tasks; i++) fn(ctx, i, 0);
    current = outer;
}

/* The caller's waits below are short by design (the last tasks finishing): spin, then yield. */
static void wait_tasks_done(af_threadpool *pool) {
    unsigned spins = 0;
    while (atomic_load_explicit(&pool->tasks_done, memory_order_acquire) < pool->n_tasks) {
        if (++spins > 4096) sched_yield();
        else cpu_relax();
    }
}

static void wait_workers_left(af_threadpool *pool) {
    unsigned spins = 0;
    while (atomic_load_explicit(&pool->job_word, memory_order_acquire) & JOB_INSIDE_MASK) {
        if (++spins > 4096) sched_yield();
        else cpu_relax();
    }
}

static uint64_t span(uint64_t from, uint64_t to) { return to > from ? to - from : 0; }

/* Adds the job's times to the sink: the caller's wait after its last task, and each worker's run
 * of its tasks, clipped to the job (from its posting to its last task's end). */
static void add_job_times(af_threadpool *pool, uint64_t posted, uint64_t caller_done, uint64_t end) {
    times_sink->caller_wait_ns += span(caller_done, end);
    for (int t = 1; t < pool->n_threads; t++) {
        const uint64_t join = atomic_load_explicit(&pool->times[t].join, memory_order_relaxed);
        const uint64_t done = atomic_load_explicit(&pool->times[t].done, memory_order_relaxed);
        if (join) times_sink->workers_busy_ns += span(join > posted ? join : posted, done < end ? done : end);
    }
}

static void run_job(af_threadpool *pool, int n_tasks, af_task_fn fn, void *ctx, bool affine) {
    if (n_tasks <= 0) return;
    int expected = 0;
    if (!pool || !atomic_compare_exchange_strong(&pool->running, &expected, 1)) {
        run_inline(NULL, n_tasks, fn, ctx);
        return;
    }
    if (pool->n_started == 0 || n_tasks == 1) {
        run_inline(pool, n_tasks, fn, ctx);
        atomic_store_explicit(&pool->running, 0, memory_order_release);
        return;
    }
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n_tasks = n_tasks;
    /* Shares (affine), or every task in the caller's range for all to take from (dynamic). */
    for (int t = 0; t < pool->n_threads; t++) {
        const uint32_t lo = affine ? (uint32_t)((int64_t)n_tasks * t / pool->n_threads) : t ? (uint32_t)n_tasks : 0;
        const uint32_t hi = affine ? (uint32_t)((int64_t)n_tasks * (t + 1) / pool->n_threads) : (uint32_t)n_tasks;
        atomic_store_explicit(&pool->ranges[t].w, range_pack(lo, hi), memory_order_relaxed);
    }
    atomic_store_explicit(&pool->tasks_done, 0, memory_order_relaxed);
    pool->timed = times_sink != NULL;
    if (pool->timed)
        for (int t = 1; t < pool->n_threads; t++) atomic_store_explicit(&pool->times[t].join, 0, memory_order_relaxed);
    const uint64_t posted = pool->timed ? now_ns() : 0;
    uint64_t w = atomic_load_explicit(&pool->job_word, memory_order_relaxed);
    uint64_t gen = (w >> 32) + 1;
    atomic_store_explicit(&pool->job_word, gen << 32, memory_order_release);
    pthread_mutex_lock(&pool->mutex);
    if (pool->n_sleeping) pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mutex);

    run_tasks(pool, 0);
    const uint64_t caller_done = pool->timed ? now_ns() : 0;
    wait_tasks_done(pool);
    const uint64_t end = pool->timed ? now_ns() : 0;
    atomic_fetch_or_explicit(&pool->job_word, JOB_CLOSED, memory_order_acq_rel);
    wait_workers_left(pool); /* after it, every worker's times of this job are visible */
    if (pool->timed) add_job_times(pool, posted, caller_done, end);
    atomic_store_explicit(&pool->running, 0, memory_order_release);
}

void af_threadpool_run(af_threadpool *pool, int n_tasks, af_task_fn fn, void *ctx) {
    run_job(pool, n_tasks, fn, ctx, false);
}

void af_threadpool_run_affine(af_threadpool *pool, int n_tasks, af_task_fn fn, void *ctx) {
    run_job(pool, n_tasks, fn, ctx, true);
}

void *af_threadpool_scratch(af_threadpool *pool, int thread, size_t bytes) {
    if (!pool || current.pool != pool || current.thread != thread) return NULL;
    thread_scratch *s = &pool->scratch[thread];
    if (atomic_load_explicit(&s->bytes, memory_order_relaxed) < bytes) {
        af_free_aligned(s->data);
        atomic_store_explicit(&s->bytes, 0, memory_order_relaxed);
        if (!(s->data = af_malloc_aligned(bytes))) return NULL;
        atomic_store_explicit(&s->bytes, bytes, memory_order_relaxed);
    }
    return s->data;
}

void af_threadpool_time_into(af_pool_times *sink) { times_sink = sink; }

size_t af_threadpool_scratch_bytes(const af_threadpool *pool) {
    size_t n = 0;
    for (int t = 0; pool && t < pool->n_threads; t++)
        n += atomic_load_explicit(&pool->scratch[t].bytes, memory_order_relaxed);
    return n;
}
