/*
 * All allocation goes through these wrappers so tests can inject out-of-memory at the Nth call.
 *
 *   float *p = af_malloc(n * sizeof *p);   // NULL on failure, like malloc
 *   af_free(p);
 *   af_alloc_fail_after(10);              // tests: the 11th allocation from now fails
 *
 * af_mul_size/af_add_size compute sizes without overflow; they return 0 on overflow.
 */
#ifndef AF_UTIL_ALLOC_H
#define AF_UTIL_ALLOC_H

#include <stddef.h>
#include <stdint.h>

void *af_malloc(size_t size);
void *af_calloc(size_t n, size_t size);
void *af_realloc(void *p, size_t size);
void af_free(void *p);
char *af_strdup(const char *s);
/* Allocates `size` bytes aligned to 64 bytes; release with af_free_aligned. */
void *af_malloc_aligned(size_t size);
void af_free_aligned(void *p);

/* Test hook: after `n` more successful allocations every allocation fails; -1 disables. */
void af_alloc_fail_after(long n);
/* Allocations made since the counter was last reset; used to size out-of-memory sweeps. */
long af_alloc_count(void);
/* Bytes held by all live allocations made through these wrappers, process-wide (their usable
 * sizes); the difference across a step is what that step kept. */
long long af_alloc_live_bytes(void);
/* The most af_alloc_live_bytes reached since af_alloc_peak_reset (which starts it at the live
 * bytes now): the high-water mark of a step, for tests of what a build holds at once. */
long long af_alloc_peak_bytes(void);
void af_alloc_peak_reset(void);

/* Overflow-checked arithmetic: return 1 and set *out, or 0 when the result does not fit. */
int af_mul_size(size_t a, size_t b, size_t *out);
int af_mul_i64(int64_t a, int64_t b, int64_t *out);

#endif
