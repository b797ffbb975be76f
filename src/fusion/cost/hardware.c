/* The hardware model: CPU facts, available memory, FMA and bandwidth micro-benchmarks, and the
 * key=value cache file that spares re-measuring them in every process. */
#include "fusion/cost/hardware.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/error.h"
#include "util/threadpool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define AF_HW_X86 1
#endif

#define CACHE_VERSION 2 /* 1: one core count per file */

/* Conservative built-in numbers (lite_mode, failed measurements): well below any recent x86 core,
 * so estimates err towards "memory is slow", the side where fusion decisions stay safe. */
static const double default_gflops_core[AF_ISA_COUNT] = {2.0, 16.0, 32.0}; /* scalar, avx2, avx512 */
#define DEFAULT_BW_DRAM_CORE 8.0
#define DEFAULT_BW_DRAM_ALL 16.0
#define DEFAULT_L3_FACTOR 2.0 /* L3 copy bandwidth over DRAM's, one core */
#define DEFAULT_L2_FACTOR 4.0

const char *af_hw_source_name(af_hw_source s) {
    switch (s) {
    case AF_HW_DEFAULT: return "default";
    case AF_HW_CONFIG: return "config";
    case AF_HW_CACHED: return "cached";
    case AF_HW_MEASURED: return "measured";
    }
    return "unknown";
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* ---- CPU facts and memory ------------------------------------------------------------------- */

static void read_cpu_model(char *buf, size_t size) {
    snprintf(buf, size, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *p = strchr(line, ':');
        if (!p) break;
        p++;
        while (*p == ' ' || *p == '\t') p++;
        size_t n = strcspn(p, "\r\n");
        /* '=' and '\n' would break the cache file's lines */
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%.*s", (int)n, p);
        for (char *q = tmp; *q; q++)
            if (*q == '=') *q = '-';
        if (*tmp) snprintf(buf, size, "%s", tmp);
        break;
    }
    fclose(f);
}

static int read_text(const char *path, char *buf, size_t size) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t got = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[got] = '\0';
    return got > 0;
}

/* A cgroup number file: "max" (v2) or a huge v1 value means no limit. */
static int read_limit(const char *path, uint64_t *out) {
    char buf[64];
    if (!read_text(path, buf, sizeof buf)) return 0;
    if (!strncmp(buf, "max", 3)) return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (end == buf || errno) return 0;
    if (v >= (1ull << 60)) return 0; /* v1 reports "unlimited" as ~2^63 rounded to pages */
    *out = v;
    return 1;
}

static uint64_t meminfo_field(const char *root, const char *key) {
    char path[512], line[256];
    snprintf(path, sizeof path, "%s/proc/meminfo", root);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    uint64_t v = 0;
    size_t klen = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) != 0 || line[klen] != ':') continue;
        v = (uint64_t)strtoull(line + klen + 1, NULL, 10) * 1024; /* kB */
        break;
    }
    fclose(f);
    return v;
}

/* Lowers *best to limit - usage of the cgroup directory dir (v2 or v1 file names). */
static void cgroup_dir(const char *dir, bool v2, uint64_t *best) {
    char p1[600], p2[600];
    snprintf(p1, sizeof p1, "%s/%s", dir, v2 ? "memory.max" : "memory.limit_in_bytes");
    snprintf(p2, sizeof p2, "%s/%s", dir, v2 ? "memory.current" : "memory.usage_in_bytes");
    uint64_t limit, usage = 0;
    if (!read_limit(p1, &limit)) return;
    read_limit(p2, &usage);
    uint64_t free_bytes = limit > usage ? limit - usage : 0;
    if (free_bytes < *best) *best = free_bytes;
}

uint64_t af_hw_available_memory(const char *root) {
    if (!root) root = "";
    uint64_t best = meminfo_field(root, "MemAvailable");
    if (!best) best = meminfo_field(root, "MemFree");
    if (!best) best = UINT64_MAX;
    char dir[512];
    /* The mount's own files (a container sees its cgroup there), then this process's path in it. */
    snprintf(dir, sizeof dir, "%s/sys/fs/cgroup", root);
    cgroup_dir(dir, true, &best);
    snprintf(dir, sizeof dir, "%s/sys/fs/cgroup/memory", root);
    cgroup_dir(dir, false, &best);
    char path[512], line[512];
    snprintf(path, sizeof path, "%s/proc/self/cgroup", root);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        const char *c1 = strchr(line, ':');
        const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || !strcmp(c2 + 1, "/")) continue;
        if (!strncmp(line, "0::", 3)) {
            snprintf(dir, sizeof dir, "%s/sys/fs/cgroup%s", root, c2 + 1);
            cgroup_dir(dir, true, &best);
        } else if ((size_t)(c2 - c1 - 1) == 6 && !strncmp(c1 + 1, "memory", 6)) {
            snprintf(dir, sizeof dir, "%s/sys/fs/cgroup/memory%s", root, c2 + 1);
            cgroup_dir(dir, false, &best);
        }
    }
    if (f) fclose(f);
    return best == UINT64_MAX ? 0 : best;
}

/* ---- micro-benchmarks ----------------------------------------------------------------------- */

/* Each FMA kernel runs `iters` rounds of 12 independent accumulator chains (enough to cover the
 * FMA latency on two pipes) and returns the flops done. The values converge to c / (1 - m), so
 * they neither overflow nor go denormal. */
#define FMA_CHAINS 12

static double fma_scalar(long iters) {
    float a[FMA_CHAINS];
    for (int j = 0; j < FMA_CHAINS; j++) a[j] = (float)j * 0.01f;
    const float m = 0.999f, c = 1e-4f;
    for (long i = 0; i < iters; i++)
        for (int j = 0; j < FMA_CHAINS; j++) a[j] = a[j] * m + c;
    volatile float sink = 0;
    for (int j = 0; j < FMA_CHAINS; j++) sink += a[j];
    (void)sink;
    return (double)iters * FMA_CHAINS * 2.0;
}

#ifdef AF_HW_X86
#define DEFINE_FMA(name, isa_target, vec, set1, fmadd, add, width)                                     \
    __attribute__((target(isa_target))) static double name(long iters) {                               \
        vec a[FMA_CHAINS];                                                                         \
        for (int j = 0; j < FMA_CHAINS; j++) a[j] = set1((float)j * 0.01f);                        \
        const vec m = set1(0.999f), c = set1(1e-4f);                                               \
        for (long i = 0; i < iters; i++) {                                                         \
            a[0] = fmadd(a[0], m, c); a[1] = fmadd(a[1], m, c); a[2] = fmadd(a[2], m, c);          \
            a[3] = fmadd(a[3], m, c); a[4] = fmadd(a[4], m, c); a[5] = fmadd(a[5], m, c);          \
            a[6] = fmadd(a[6], m, c); a[7] = fmadd(a[7], m, c); a[8] = fmadd(a[8], m, c);          \
            a[9] = fmadd(a[9], m, c); a[10] = fmadd(a[10], m, c); a[11] = fmadd(a[11], m, c);      \
        }                                                                                          \
        vec s = a[0];                                                                              \
        for (int j = 1; j < FMA_CHAINS; j++) s = add(s, a[j]);                                     \
        volatile float sink;                                                                       \
        float out[width];                                                                          \
        memcpy(out, &s, sizeof out);                                                               \
        sink = out[0];                                                                             \
        (void)sink;                                                                                \
        return (double)iters * FMA_CHAINS * width * 2.0;                                           \
    }
DEFINE_FMA(fma_avx2, "avx2,fma", __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, 8)
DEFINE_FMA(fma_avx512, "avx512f,fma", __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, 16)
#endif

typedef double (*fma_fn)(long iters);

static fma_fn fma_for(af_isa isa) {
#ifdef AF_HW_X86
    if (isa == AF_ISA_AVX512) return fma_avx512;
    if (isa == AF_ISA_AVX2) return fma_avx2;
#endif
    (void)isa;
    return fma_scalar;
}

/* GFLOP/s of one core: calibrate to ~2 ms, then the best of three ~2.5 ms runs. */
static double measure_peak(af_isa isa) {
    fma_fn fn = fma_for(isa);
    long iters = 1 << 12;
    double t0, dt, flops;
    for (;;) {
        t0 = now_ms();
        flops = fn(iters);
        dt = now_ms() - t0;
        if (dt >= 2.0 || iters > (1L << 40)) break;
        iters *= 2;
    }
    if (dt > 0) iters = (long)((double)iters * 2.5 / dt) + 1;
    double best = dt > 0 ? flops / dt * 1e-6 : 0;
    for (int r = 0; r < 3; r++) {
        t0 = now_ms();
        flops = fn(iters);
        dt = now_ms() - t0;
        if (dt > 0 && flops / dt * 1e-6 > best) best = flops / dt * 1e-6;
    }
    return best;
}

/* dst = src * s over n floats (n a multiple of 16, buffers 64-byte aligned), with the ISA's widest
 * vectors and ordinary (write-allocating) stores, as the kernels use. */
typedef void (*scale_fn)(float *restrict dst, const float *restrict src, size_t n, float s);

/* The copy loops run uninstrumented under ASan: an instrumented build would measure (and cache,
 * for every build on this machine) its own checks instead of the memory system. */
#if defined(__SANITIZE_ADDRESS__)
#define NO_ASAN __attribute__((no_sanitize_address))
#else
#define NO_ASAN
#endif

NO_ASAN static void scale_scalar(float *restrict dst, const float *restrict src, size_t n, float s) {
    for (size_t i = 0; i < n; i++) dst[i] = src[i] * s;
}

#ifdef AF_HW_X86
NO_ASAN __attribute__((target("avx2"))) static void scale_avx2(float *restrict dst, const float *restrict src, size_t n,
                                                       float s) {
    const __m256 vs = _mm256_set1_ps(s);
    for (size_t i = 0; i < n; i += 16) {
        _mm256_store_ps(dst + i, _mm256_mul_ps(_mm256_load_ps(src + i), vs));
        _mm256_store_ps(dst + i + 8, _mm256_mul_ps(_mm256_load_ps(src + i + 8), vs));
    }
}

NO_ASAN __attribute__((target("avx512f"))) static void scale_avx512(float *restrict dst, const float *restrict src, size_t n,
                                                            float s) {
    const __m512 vs = _mm512_set1_ps(s);
    for (size_t i = 0; i < n; i += 16) _mm512_store_ps(dst + i, _mm512_mul_ps(_mm512_load_ps(src + i), vs));
}
#endif

static scale_fn scale_for(af_isa isa) {
#ifdef AF_HW_X86
    if (isa == AF_ISA_AVX512) return scale_avx512;
    if (isa == AF_ISA_AVX2) return scale_avx2;
#endif
    (void)isa;
    return scale_scalar;
}

typedef struct copy_job {
    scale_fn fn;
    float *dst;
    const float *src;
    size_t n_per_task; /* floats, multiple of 16 */
    int passes;
} copy_job;

static void copy_task(void *ctx, int task, int thread) {
    (void)thread;
    const copy_job *j = ctx;
    size_t off = (size_t)task * j->n_per_task;
    for (int p = 0; p < j->passes; p++) j->fn(j->dst + off, j->src + off, j->n_per_task, p & 1 ? 1.0f : 0.5f);
}

/* GB/s (read + write bytes) copying n floats from src to dst (n a multiple of 16 * threads) on
 * `pool` (NULL: one thread): one warm-up pass, passes calibrated to >= 1 ms, best of `reps`. */
static double time_copy(af_isa isa, float *dst, const float *src, size_t n, af_threadpool *pool, int reps) {
    int n_tasks = af_threadpool_n_threads(pool);
    copy_job job = {scale_for(isa), dst, src, n / (size_t)n_tasks, 1};
    double t0 = now_ms();
    af_threadpool_run(pool, n_tasks, copy_task, &job); /* warm: caches, TLB, and the pool's threads */
    double dt = now_ms() - t0;
    job.passes = dt > 0 && dt < 1.0 ? (int)(1.0 / dt) + 1 : 1;
    double best = 0;
    for (int r = 0; r < reps; r++) {
        t0 = now_ms();
        af_threadpool_run(pool, n_tasks, copy_task, &job);
        dt = now_ms() - t0;
        double gbs = dt > 0 ? 2.0 * (double)n * sizeof(float) * job.passes / dt * 1e-6 : 0;
        if (gbs > best) best = gbs;
    }
    return best;
}

/* Asks for huge pages over the page-aligned inside of [p, p + size): a few dozen page faults on
 * first touch instead of thousands. Advice only; ignored where unsupported. */
static void advise_huge(void *p, size_t size) {
#ifdef MADV_HUGEPAGE
    const uintptr_t page = 4096, lo = ((uintptr_t)p + page - 1) & ~(page - 1), hi = ((uintptr_t)p + size) & ~(page - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p;
    (void)size;
#endif
}

/* Two buffers of `bytes` in total; the source is written so its pages are real (untouched pages
 * all map the one zero page, which would stay in cache). */
static size_t alloc_pair(size_t bytes, int n_tasks, float **src, float **dst) {
    size_t n = bytes / 2 / sizeof(float);
    n -= n % (16 * (size_t)n_tasks);
    *src = *dst = NULL;
    if (n < 16 * (size_t)n_tasks) return 0;
    *src = af_malloc_aligned(n * sizeof(float));
    *dst = af_malloc_aligned(n * sizeof(float));
    if (!*src || !*dst) {
        af_free_aligned(*src);
        af_free_aligned(*dst);
        *src = *dst = NULL;
        return 0;
    }
    advise_huge(*src, n * sizeof(float));
    advise_huge(*dst, n * sizeof(float));
    memset(*src, 0, n * sizeof(float));
    return n;
}

static double measure_copy(af_isa isa, size_t bytes) {
    float *src, *dst;
    size_t n = alloc_pair(bytes, 1, &src, &dst);
    double gbs = n ? time_copy(isa, dst, src, n, NULL, 3) : 0;
    af_free_aligned(src);
    af_free_aligned(dst);
    return gbs;
}

/* ---- the cache file ------------------------------------------------------------------------- */

void af_hw_default_cache_path(char *buf, size_t size) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg) snprintf(buf, size, "%s/autofusion/hardware.txt", xdg);
    else if (home && *home) snprintf(buf, size, "%s/.cache/autofusion/hardware.txt", home);
    else if (size) buf[0] = '\0';
}

typedef struct cache_values {
    double peak_gflops_core, bw_l2_core, bw_l3_core, bw_dram_core, bw_dram_all; /* 0: absent */
} cache_values;

/* One measured configuration: its key (the CPU's name, the CPUs in the affinity mask, the ISA
 * level) and its figures. The file keeps one entry per key, so a run with another core count
 * (taskset, a container's CPU quota) or at another level (AF_ISA) measures and stores its own
 * figures beside the others: when the file held one core count, a 1-CPU run replaced the 2-CPU
 * figures and the next 2-CPU run re-measured them, on whatever load the machine had then, and
 * got a different plan. */
typedef struct cache_entry {
    char cpu[96];
    int cores; /* 0: not given yet */
    int isa;   /* -1: not given yet */
    cache_values v;
} cache_entry;

#define CACHE_MAX_ENTRIES 64 /* a full file drops its oldest entry for a new one */

typedef struct cache_file {
    int n;
    cache_entry e[CACHE_MAX_ENTRIES];
} cache_file;

static bool positive(double v) { return isfinite(v) && v > 0; }

static bool entry_is(const cache_entry *e, const char *cpu, int cores, int isa) {
    return e->cores == cores && e->isa == isa && !strcmp(e->cpu, cpu);
}

/* Checks a parsed entry: key complete, some figure, bandwidths all given or none. */
static bool entry_complete(const cache_entry *e) {
    const cache_values *c = &e->v;
    bool bw_set = c->bw_l2_core || c->bw_l3_core || c->bw_dram_core || c->bw_dram_all;
    bool bw_full = c->bw_l2_core && c->bw_l3_core && c->bw_dram_core && c->bw_dram_all;
    return e->cores > 0 && e->isa >= 0 && (c->peak_gflops_core || bw_set) && bw_set == bw_full;
}

/* Reads every entry of the cache; false (and cf empty) when the file is absent, of another
 * format version (version 1 held one core count: read as absent, the figures are measured again)
 * or corrupt: a line that is not key=value, an unknown key, a number that is not positive, a
 * figure outside an entry or before its cores= and isa=, an entry without a figure or with only
 * some bandwidths, the same key twice, more entries than are ever written. */
static bool cache_read(const char *path, cache_file *cf) {
    cf->n = 0;
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char line[256];
    bool ok = true, version = false;
    cache_entry *e = NULL; /* the current entry */
    while (ok && fgets(line, sizeof line, f)) {
        size_t len = strcspn(line, "\r\n");
        if (line[len] == '\0' && !feof(f)) ok = false; /* a line longer than any we write */
        line[len] = '\0';
        if (!line[0] || line[0] == '#') continue;
        char *eq = strchr(line, '=');
        if (!eq) {
            ok = false;
            break;
        }
        *eq = '\0';
        const char *key = line, *val = eq + 1;
        char *end;
        double d = strtod(val, &end);
        bool num = end != val && *end == '\0' && positive(d);
        if (!version) { /* the first line says the format */
            ok = !strcmp(key, "version") && num && d == CACHE_VERSION;
            version = ok;
        } else if (!strcmp(key, "cpu")) {
            ok = cf->n < CACHE_MAX_ENTRIES && *val && strlen(val) < sizeof e->cpu;
            if (!ok) break;
            e = &cf->e[cf->n++];
            memset(e, 0, sizeof *e);
            e->isa = -1;
            snprintf(e->cpu, sizeof e->cpu, "%s", val);
        } else if (!e) ok = false;
        else if (!strcmp(key, "cores")) ok = !e->cores && num && d <= 1 << 20 && d == (int)d && (e->cores = (int)d, 1);
        else if (!strcmp(key, "isa")) ok = e->isa < 0 && (e->isa = af_isa_parse(val)) >= 0;
        else if (e->cores <= 0 || e->isa < 0) ok = false; /* a figure before its entry's key */
        else if (!strcmp(key, "peak_gflops_core")) ok = num && !e->v.peak_gflops_core && (e->v.peak_gflops_core = d, 1);
        else if (!strcmp(key, "bw_l2_core_gbs")) ok = num && !e->v.bw_l2_core && (e->v.bw_l2_core = d, 1);
        else if (!strcmp(key, "bw_l3_core_gbs")) ok = num && !e->v.bw_l3_core && (e->v.bw_l3_core = d, 1);
        else if (!strcmp(key, "bw_dram_core_gbs")) ok = num && !e->v.bw_dram_core && (e->v.bw_dram_core = d, 1);
        else if (!strcmp(key, "bw_dram_all_gbs")) ok = num && !e->v.bw_dram_all && (e->v.bw_dram_all = d, 1);
        else ok = false;
    }
    fclose(f);
    for (int i = 0; ok && i < cf->n; i++) {
        ok = entry_complete(&cf->e[i]);
        for (int j = 0; ok && j < i; j++) ok = !entry_is(&cf->e[j], cf->e[i].cpu, cf->e[i].cores, cf->e[i].isa);
    }
    if (!ok || !version) cf->n = 0;
    return ok && version;
}

/* This configuration's entry, or NULL. */
static const cache_entry *cache_find(const cache_file *cf, const af_hw_model *hw, int isa) {
    for (int i = 0; i < cf->n; i++)
        if (entry_is(&cf->e[i], hw->cpu_model, hw->n_cores_probed, isa)) return &cf->e[i];
    return NULL;
}

/* Sets this configuration's entry to v, leaving every other entry as it is. */
static void cache_put(cache_file *cf, const af_hw_model *hw, int isa, const cache_values *v) {
    cache_entry *e = (cache_entry *)cache_find(cf, hw, isa);
    if (!e) {
        if (cf->n == CACHE_MAX_ENTRIES) { /* full: the oldest entry goes */
            memmove(&cf->e[0], &cf->e[1], (CACHE_MAX_ENTRIES - 1) * sizeof cf->e[0]);
            cf->n--;
        }
        e = &cf->e[cf->n++];
        snprintf(e->cpu, sizeof e->cpu, "%s", hw->cpu_model);
        e->cores = hw->n_cores_probed;
        e->isa = isa;
    }
    e->v = *v;
}

/* Creates the folders above path (mkdir -p of its dirname); failures surface when writing. */
static void make_parents(const char *path) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        mkdir(dir, 0755);
        *p = '/';
    }
}

/* Writes the file beside its final name and renames it, so a reader never sees half of it. */
static void cache_write(const char *path, const cache_file *cf) {
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    make_parents(path);
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    fprintf(f, "# autofusion hardware model: one entry per CPU, core count and ISA level, measured once and read "
               "by later runs; delete to re-measure\nversion=%d\n", CACHE_VERSION);
    for (int i = 0; i < cf->n; i++) {
        const cache_entry *e = &cf->e[i];
        const cache_values *cv = &e->v;
        fprintf(f, "\ncpu=%s\ncores=%d\nisa=%s\n", e->cpu, e->cores, af_isa_name((af_isa)e->isa));
        if (cv->peak_gflops_core) fprintf(f, "peak_gflops_core=%.6g\n", cv->peak_gflops_core);
        if (cv->bw_dram_all) {
            fprintf(f, "bw_l2_core_gbs=%.6g\nbw_l3_core_gbs=%.6g\n", cv->bw_l2_core, cv->bw_l3_core);
            fprintf(f, "bw_dram_core_gbs=%.6g\nbw_dram_all_gbs=%.6g\n", cv->bw_dram_core, cv->bw_dram_all);
        }
    }
    bool ok = !ferror(f);
    if (fclose(f) != 0) ok = false;
    if (!ok || rename(tmp, path) != 0) remove(tmp);
}

/* ---- the model ------------------------------------------------------------------------------ */

static void finish(af_hw_model *hw) {
    hw->peak_gflops = hw->peak_gflops_core * hw->n_cores;
    double scaled = hw->bw_dram_core_gbs * hw->n_cores;
    hw->bandwidth_gbs = scaled < hw->bw_dram_all_gbs ? scaled : hw->bw_dram_all_gbs;
}

static void default_bandwidths(af_hw_model *hw, double dram_all, double dram_core) {
    hw->bw_dram_all_gbs = dram_all;
    hw->bw_dram_core_gbs = dram_core < dram_all ? dram_core : dram_all;
    hw->bw_l3_core_gbs = DEFAULT_L3_FACTOR * hw->bw_dram_core_gbs;
    hw->bw_l2_core_gbs = DEFAULT_L2_FACTOR * hw->bw_dram_core_gbs;
}

void af_hw_model_default(af_hw_model *hw) {
    memset(hw, 0, sizeof *hw);
    const af_cpu_info *ci = af_cpu_info_get();
    read_cpu_model(hw->cpu_model, sizeof hw->cpu_model);
    hw->isa = ci->isa;
    hw->winograd = true;
    hw->n_cores = hw->n_cores_probed = af_cpu_count();
    hw->l1d = ci->l1d;
    hw->l2 = ci->l2;
    hw->l3 = ci->l3;
    hw->mem_total = meminfo_field("", "MemTotal");
    hw->mem_available = af_hw_available_memory("");
    hw->peak_gflops_core = default_gflops_core[(unsigned)hw->isa < AF_ISA_COUNT ? hw->isa : 0];
    default_bandwidths(hw, DEFAULT_BW_DRAM_ALL, DEFAULT_BW_DRAM_CORE);
    hw->kernel_overhead_us = AF_HW_KERNEL_OVERHEAD_US;
    hw->pj_per_flop = AF_HW_PJ_PER_FLOP;
    hw->pj_per_byte_dram = AF_HW_PJ_PER_BYTE_DRAM;
    hw->pj_per_byte_cache = AF_HW_PJ_PER_BYTE_CACHE;
    hw->peak_source = hw->bandwidth_source = AF_HW_DEFAULT;
    finish(hw);
}

/* Measures the four bandwidths into cv; false when a buffer could not be allocated. */
static bool measure_bandwidths(const af_hw_model *hw, cache_values *cv) {
    size_t l3_total = hw->l3 * (size_t)hw->n_cores_probed;
    size_t dram_bytes = 2 * l3_total;
    if (dram_bytes < ((size_t)32 << 20)) dram_bytes = (size_t)32 << 20;
    if (dram_bytes > ((size_t)128 << 20)) dram_bytes = (size_t)128 << 20;
    if (hw->mem_available && dram_bytes > hw->mem_available / 8) dram_bytes = (size_t)(hw->mem_available / 8);
    cv->bw_l2_core = measure_copy(hw->isa, hw->l2 / 2);
    /* L3-resident: well above one core's L2, well inside the shared L3 */
    size_t l3_bytes = l3_total / 4;
    cv->bw_l3_core = l3_bytes >= 4 * hw->l2 ? measure_copy(hw->isa, l3_bytes) : 0;
    af_threadpool *pool = NULL;
    if (hw->n_cores_probed > 1 && af_threadpool_create(hw->n_cores_probed, &pool) != AF_OK) pool = NULL;
    float *src, *dst;
    size_t n = alloc_pair(dram_bytes, af_threadpool_n_threads(pool), &src, &dst);
    if (n) {
        cv->bw_dram_core = time_copy(hw->isa, dst, src, n, NULL, 2);
        cv->bw_dram_all = pool ? time_copy(hw->isa, dst, src, n, pool, 2) : cv->bw_dram_core;
    }
    af_free_aligned(src);
    af_free_aligned(dst);
    af_threadpool_free(pool);
    if (!cv->bw_l3_core) cv->bw_l3_core = sqrt(cv->bw_l2_core * cv->bw_dram_core);
    return positive(cv->bw_l2_core) && positive(cv->bw_l3_core) && positive(cv->bw_dram_core) &&
           positive(cv->bw_dram_all);
}

/* A measured figure to two significant digits, the value the decimal text of the cache holds. */
static double round_figure(double v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.2g", v);
    return strtod(buf, NULL);
}

/* Settles freshly measured bandwidths before they are used or stored (docs/cost_model.md). Noise
 * on a busy machine only slows a copy down, so a figure below one it cannot be below is raised to
 * it: L2 >= L3 >= DRAM per core, DRAM for all cores >= one core's, one core's >= all cores' share.
 * Then every figure is rounded to two significant digits, so jitter of a few percent between two
 * measurements gives the same figures, and the run that measured plans with the very numbers the
 * later runs read back from the file. */
static void settle_bandwidths(cache_values *cv, int cores) {
    if (cores > 0 && cv->bw_dram_core < cv->bw_dram_all / cores) cv->bw_dram_core = cv->bw_dram_all / cores;
    if (cv->bw_dram_all < cv->bw_dram_core) cv->bw_dram_all = cv->bw_dram_core;
    if (cv->bw_l3_core < cv->bw_dram_core) cv->bw_l3_core = cv->bw_dram_core;
    if (cv->bw_l2_core < cv->bw_l3_core) cv->bw_l2_core = cv->bw_l3_core;
    cv->bw_dram_all = round_figure(cv->bw_dram_all);
    cv->bw_dram_core = round_figure(cv->bw_dram_core);
    cv->bw_l3_core = round_figure(cv->bw_l3_core);
    cv->bw_l2_core = round_figure(cv->bw_l2_core);
}

static void use_bandwidths(af_hw_model *hw, const cache_values *cv, af_hw_source source) {
    hw->bw_l2_core_gbs = cv->bw_l2_core;
    hw->bw_l3_core_gbs = cv->bw_l3_core;
    hw->bw_dram_core_gbs = cv->bw_dram_core;
    hw->bw_dram_all_gbs = cv->bw_dram_all;
    hw->bandwidth_source = source;
}

af_status af_hw_model_probe(const af_fusion_config *cfg, af_hw_model *hw, af_error *err) {
    if (!hw) return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "af_hw_model_probe: NULL model");
    af_hw_model_default(hw);
    if (cfg) hw->winograd = cfg->winograd;
    const bool lite = cfg && cfg->lite_mode;
    const double cfg_peak = cfg && positive(cfg->peak_gflops) ? cfg->peak_gflops : 0;
    const double cfg_bw = cfg && positive(cfg->bandwidth_gbs) ? cfg->bandwidth_gbs : 0;
    /* Config numbers are for the whole machine, as the estimates use them. */
    if (cfg_peak) {
        hw->peak_gflops_core = cfg_peak / hw->n_cores;
        hw->peak_source = AF_HW_CONFIG;
    }
    if (cfg_bw) {
        default_bandwidths(hw, cfg_bw, cfg_bw);
        hw->bandwidth_source = AF_HW_CONFIG;
    }
    bool need_peak = !cfg_peak && !lite, need_bw = !cfg_bw && !lite;
    if (need_peak || need_bw) {
        char path[1024];
        if (cfg && cfg->hardware_cache) snprintf(path, sizeof path, "%s", cfg->hardware_cache);
        else af_hw_default_cache_path(path, sizeof path);
        const int level = (unsigned)hw->isa < AF_ISA_COUNT ? (int)hw->isa : 0;
        cache_file cf;
        cache_values cv;
        memset(&cv, 0, sizeof cv);
        if (path[0] && cache_read(path, &cf)) { /* a missing, old or corrupt file reads as no entries */
            const cache_entry *e = cache_find(&cf, hw, level);
            if (e) cv = e->v;
        }
        if (need_peak && cv.peak_gflops_core) {
            hw->peak_gflops_core = cv.peak_gflops_core;
            hw->peak_source = AF_HW_CACHED;
            need_peak = false;
        }
        if (need_bw && cv.bw_dram_all) {
            use_bandwidths(hw, &cv, AF_HW_CACHED);
            need_bw = false;
        }
        if (need_peak || need_bw) {
            double t0 = now_ms();
            if (need_peak) {
                double p = round_figure(measure_peak(hw->isa));
                if (positive(p)) {
                    hw->peak_gflops_core = cv.peak_gflops_core = p;
                    hw->peak_source = AF_HW_MEASURED;
                }
            }
            if (need_bw) {
                cache_values m = cv;
                if (measure_bandwidths(hw, &m)) {
                    settle_bandwidths(&m, hw->n_cores_probed);
                    cv = m;
                    use_bandwidths(hw, &cv, AF_HW_MEASURED);
                }
            }
            hw->bench_ms = now_ms() - t0;
            if (path[0] && (cv.peak_gflops_core || cv.bw_dram_all)) {
                /* Read again just before writing: another process may have stored its own entry
                 * meanwhile. Only this configuration's entry changes. */
                cache_read(path, &cf);
                cache_put(&cf, hw, level, &cv);
                cache_write(path, &cf);
            }
        }
    }
    finish(hw);
    return AF_OK;
}

void af_hw_model_scale_threads(af_hw_model *hw, int n_threads) {
    hw->n_cores = n_threads > 0 ? n_threads : 1;
    finish(hw);
}

double af_hw_memory_us(const af_hw_model *hw, double footprint) {
    const double n = hw->n_cores, l2 = (double)hw->l2 * n, l3 = (double)hw->l3 * hw->n_cores_probed;
    double l2_bw = hw->bw_l2_core_gbs * n, l3_bw = fmax(hw->bw_l3_core_gbs * n, hw->bandwidth_gbs);
    double dram_bw = hw->bandwidth_gbs;
    if (!(footprint > 0) || !(l2_bw > 0) || !(l3_bw > 0) || !(dram_bw > 0)) return 0;
    double in_l2 = fmin(footprint, l2), in_l3 = fmax(0, fmin(footprint, fmax(l3, l2)) - l2);
    double rest = fmax(0, footprint - in_l2 - in_l3);
    return (in_l2 / l2_bw + in_l3 / l3_bw + rest / dram_bw) * 1e-3; /* GB/s = 1e3 bytes/us */
}

double af_hw_bandwidth_for(const af_hw_model *hw, double footprint) {
    double us = af_hw_memory_us(hw, footprint);
    return us > 0 ? footprint / us * 1e-3 : hw->bandwidth_gbs;
}

double af_hw_pj_per_byte_for(const af_hw_model *hw, double footprint) {
    return footprint <= (double)hw->l3 * hw->n_cores_probed ? hw->pj_per_byte_cache : hw->pj_per_byte_dram;
}
