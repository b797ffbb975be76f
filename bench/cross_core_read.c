/*
 * How fast one core reads data another core has just written, against reading its own writes:
 * the cost a kernel pays when it reads the part of a tensor the other thread produced in the step
 * before (docs/ARCHITECTURE.md, the thread pool's affine runs).
 *
 *   make -f bench/Makefile xcore && build/cross_core_read [--kb 400] [--reps 200] [--cpus 0,1]
 *
 * A writer thread pinned to the first CPU fills the buffer, then a reader pinned to the second
 * reads all of it (an XOR over whole cache lines); they alternate --reps times and the reader's
 * time is averaged. Then one thread on the first CPU writes and reads the buffer itself. Prints
 * both as microseconds and GB/s.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct shared {
    uint64_t *buf;
    size_t words;
    int reps, reader_cpu;
    atomic_int turn; /* 2 r: the writer's r-th turn; 2 r + 1: the reader's */
    double read_ns;
    volatile uint64_t sink;
} shared;

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void fill(uint64_t *buf, size_t words, uint64_t v) {
    for (size_t i = 0; i < words; i++) buf[i] = v + i;
}

/* 64-byte vectors, compiled for the widest loads the CPU has (narrower loads left the reading
 * core's own L2 at a quarter of its bandwidth, so the two reads looked alike). */
typedef uint64_t line_t __attribute__((vector_size(64)));

__attribute__((target_clones("avx512f", "avx2", "default"))) static uint64_t read_all(const uint64_t *buf,
                                                                                      size_t words) {
    const line_t *p = (const line_t *)buf;
    line_t a = {0}, b = {0};
    const size_t lines = words / 8;
    for (size_t i = 0; i + 2 <= lines; i += 2) {
        a ^= p[i];
        b ^= p[i + 1];
    }
    a ^= b;
    uint64_t r = 0;
    for (int k = 0; k < 8; k++) r ^= a[k];
    return r;
}

static void *reader(void *arg) {
    shared *s = arg;
    if (pin(s->reader_cpu) != 0) {
        fprintf(stderr, "cross_core_read: cannot run on CPU %d\n", s->reader_cpu);
        exit(1);
    }
    for (int r = 0; r < s->reps; r++) {
        while (atomic_load(&s->turn) != 2 * r + 1) {
        }
        const double t = now_ns();
        s->sink = read_all(s->buf, s->words);
        s->read_ns += now_ns() - t;
        atomic_store(&s->turn, 2 * r + 2);
    }
    return NULL;
}

static void report(const char *what, double ns, size_t bytes) {
    printf("%-28s %8.1f us  %7.1f GB/s\n", what, ns / 1e3, (double)bytes / ns);
}

int main(int argc, char **argv) {
    long kb = 400;
    int reps = 200, cpu_w = 0, cpu_r = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--kb") && i + 1 < argc) kb = atol(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cpus") && i + 1 < argc && sscanf(argv[++i], "%d,%d", &cpu_w, &cpu_r) == 2) {
        } else {
            fprintf(stderr, "usage: cross_core_read [--kb N] [--reps N] [--cpus WRITER,READER]\n");
            return 2;
        }
    }
    if (kb < 1 || reps < 1) {
        fprintf(stderr, "cross_core_read: --kb and --reps must be positive\n");
        return 2;
    }
    shared s = {.words = (size_t)kb * 1024 / sizeof(uint64_t), .reps = reps, .reader_cpu = cpu_r};
    s.buf = aligned_alloc(64, s.words * sizeof(uint64_t));
    if (!s.buf) return 1;
    if (pin(cpu_w) != 0) {
        fprintf(stderr, "cross_core_read: cannot run on CPU %d\n", cpu_w);
        return 1;
    }
    pthread_t th;
    if (pthread_create(&th, NULL, reader, &s) != 0) return 1;
    for (int r = 0; r < reps; r++) {
        while (atomic_load(&s.turn) != 2 * r) {
        }
        fill(s.buf, s.words, (uint64_t)r);
        atomic_store(&s.turn, 2 * r + 1);
    }
    pthread_join(th, NULL);
    const size_t bytes = s.words * sizeof(uint64_t);
    printf("%ld KB, %d reps, written on CPU %d\n", kb, reps, cpu_w);
    char what[64];
    snprintf(what, sizeof what, "read on CPU %d (the other)", cpu_r);
    report(what, s.read_ns / reps, bytes);
    double own = 0;
    for (int r = 0; r < reps; r++) {
        fill(s.buf, s.words, (uint64_t)r);
        const double t = now_ns();
        s.sink = read_all(s.buf, s.words);
        own += now_ns() - t;
    }
    snprintf(what, sizeof what, "read on CPU %d (the writer)", cpu_w);
    report(what, own / reps, bytes);
    free(s.buf);
    return 0;
}
