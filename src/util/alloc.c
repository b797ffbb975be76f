#include "util/alloc.h"

#include <malloc.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Failure injection is test-only state; atomics keep it well defined with worker threads. */
static atomic_long fail_after = -1;
static atomic_long n_allocs = 0;

static int should_fail(void) {
    atomic_fetch_add(&n_allocs, 1);
    long left = atomic_load(&fail_after);
    if (left < 0) return 0;
    if (left == 0) return 1;
    atomic_fetch_sub(&fail_after, 1);
    return 0;
}

void af_alloc_fail_after(long n) {
    atomic_store(&fail_after, n);
    atomic_store(&n_allocs, 0);
}

long af_alloc_count(void) { return atomic_load(&n_allocs); }

/* Bytes held by live af_ allocations (the allocator's usable sizes), for reports of what a
 * session's plan keeps. */
static atomic_llong live_bytes = 0, peak_bytes = 0;

static void *counted(void *p) {
    if (!p) return p;
    const long long n = (long long)malloc_usable_size(p), now = atomic_fetch_add(&live_bytes, n) + n;
    long long peak = atomic_load_explicit(&peak_bytes, memory_order_relaxed);
    while (now > peak && !atomic_compare_exchange_weak(&peak_bytes, &peak, now)) {
    }
    return p;
}

long long af_alloc_live_bytes(void) { return atomic_load(&live_bytes); }
long long af_alloc_peak_bytes(void) { return atomic_load(&peak_bytes); }
void af_alloc_peak_reset(void) { atomic_store(&peak_bytes, atomic_load(&live_bytes)); }

void *af_malloc(size_t size) { return should_fail() ? NULL : counted(malloc(size ? size : 1)); }

void *af_calloc(size_t n, size_t size) {
    if (should_fail()) return NULL;
    return counted(calloc(n ? n : 1, size ? size : 1));
}

void *af_realloc(void *p, size_t size) {
    if (should_fail()) return NULL;
    size_t old = p ? malloc_usable_size(p) : 0;
    void *q = realloc(p, size ? size : 1);
    if (q) atomic_fetch_sub(&live_bytes, (long long)old);
    return counted(q);
}

void af_free(void *p) {
    if (p) atomic_fetch_sub(&live_bytes, (long long)malloc_usable_size(p));
    free(p);
}

char *af_strdup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = af_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

void *af_malloc_aligned(size_t size) {
    if (should_fail()) return NULL;
    size_t rounded = (size + 63) & ~(size_t)63;
    if (rounded < size) return NULL;
    return counted(aligned_alloc(64, rounded ? rounded : 64));
}

void af_free_aligned(void *p) { af_free(p); }

int af_mul_size(size_t a, size_t b, size_t *out) {
    if (a && b > SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}

int af_mul_i64(int64_t a, int64_t b, int64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
