/*
 * A small intra-op thread pool: one call runs n_tasks independent tasks on the pool's threads and
 * returns when all have run. The calling thread is one of the pool's threads (thread index 0), so a
 * pool of 1 thread starts no worker. Idle workers spin briefly (back-to-back kernels stay cheap),
 * then sleep on a condition variable so they do not burn a core.
 *
 *   af_threadpool *pool;
 *   if (af_threadpool_create(0, &pool) != AF_OK) ...;   // 0: one thread per CPU we may run on
 *   af_threadpool_run(pool, n_tiles, tile_fn, &args);   // tile_fn(&args, tile, thread)
 *   af_threadpool_free(pool);
 *
 * Which thread runs which task is not fixed; callers keep results deterministic by making each
 * task's output depend on the task index only (the `thread` argument is for scratch buffers).
 * A NULL pool runs every task inline on the caller, in order.
 */
#ifndef AF_UTIL_THREADPOOL_H
#define AF_UTIL_THREADPOOL_H

#include <stdint.h>

#include "autofusion.h"

typedef struct af_threadpool af_threadpool;

/* Runs task number `task` (0 <= task < n_tasks) on pool thread `thread` (0 <= thread < n_threads). */
typedef void (*af_task_fn)(void *ctx, int task, int thread);

/* n_threads counts the caller; 0 means the number of CPUs in the process's affinity mask. At most
 * AF_THREADPOOL_MAX_THREADS. Fails with AF_ERR_OUT_OF_MEMORY or AF_ERR_RUNTIME (thread creation). */
#define AF_THREADPOOL_MAX_THREADS 256
af_status af_threadpool_create(int n_threads, af_threadpool **out);
/* Stops and joins the workers. Accepts NULL. Must not race with af_threadpool_run. */
void af_threadpool_free(af_threadpool *pool);
/* Threads that may run tasks, the caller included; 1 for NULL. */
int af_threadpool_n_threads(const af_threadpool *pool);
/* Runs fn(ctx, task, thread) for every task in [0, n_tasks) and returns when all have finished;
 * everything the tasks wrote is visible to the caller afterwards. If the pool is already running
 * (a task calls run again, or another thread does), this call runs its tasks inline instead, so
 * it never deadlocks; `thread` is then 0 and af_threadpool_scratch NULL, so other scratch
 * indexed by `thread` must belong to the call (as the GEMM workspace does), not to the pool. */
void af_threadpool_run(af_threadpool *pool, int n_tasks, af_task_fn fn, void *ctx);
/* The same, but thread t first runs the t-th of n_threads contiguous shares of the tasks, the
 * others taking what it has not started once theirs are done. A kernel whose tasks run in the
 * order of its output's regions (bands of rows, say) and cost about the same uses it so that each
 * thread reads what it wrote itself in the kernel before: reading data another core has just
 * written measured 2-3x slower than reading one's own on the 2-core machine, and MobileNetV3-L
 * ran about 10% faster on 2 threads. Shares are fixed, so tasks of unequal cost are better off
 * on af_threadpool_run. */
void af_threadpool_run_affine(af_threadpool *pool, int n_tasks, af_task_fn fn, void *ctx);

/* Scratch of at least `bytes` bytes, 64-aligned, private to pool thread `thread` while it runs the
 * pool's tasks: the same memory in every run (grown when a run asks for more, freed with the
 * pool), so a thread finds its scratch in its own cache. Kernels that sliced a shared workspace
 * per thread, each at its own offsets, had a thread write lines the other core last wrote in the
 * kernel before; on the pool's scratch MobileNetV3-L at two threads went 2.97 -> 2.86 ms
 * (alternating processes, 10 rounds; ResNet-50 unchanged). NULL where `thread` is not the
 * pool's (tasks run inline: a nested or concurrent run, a NULL pool) or memory runs out: the
 * caller then slices scratch of its own. Call it from a task, with the task's `thread`. */
void *af_threadpool_scratch(af_threadpool *pool, int thread, size_t bytes);
/* The same, or `own` (the caller's slice for this thread) where the pool has none. */
static inline void *af_threadpool_scratch_or(af_threadpool *pool, int thread, size_t bytes, void *own) {
    void *p = af_threadpool_scratch(pool, thread, bytes);
    return p ? p : own;
}
/* For the perf analyzer: while a sink is set (NULL stops it), every job the calling thread runs on
 * a pool of several threads adds the time the caller waited for the other threads after its own
 * last task, and the time the workers spent running the job's tasks. Over a step of wall time W on
 * T threads, W (T - 1) + caller_wait_ns - workers_busy_ns is the threads' idle time: what the
 * step's split left unused, serial work in the step included. Untimed jobs read no clock; jobs
 * run inline add nothing. */
typedef struct af_pool_times {
    uint64_t caller_wait_ns, workers_busy_ns;
} af_pool_times;
void af_threadpool_time_into(af_pool_times *sink);

/* The scratch the pool holds, all threads together, for memory reports. */
size_t af_threadpool_scratch_bytes(const af_threadpool *pool);

/* The number of CPUs in the calling process's affinity mask (at least 1). */
int af_cpu_count(void);

#endif
