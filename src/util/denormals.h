/*
 * Denormal inputs read as zero (the DAZ bit of MXCSR) on the calling thread, for a kernel's span:
 * x86 cores take a microcode assist on every multiply with a denormal operand. A softmax over
 * scores masked with -100 (Swin's shifted windows) leaves probabilities near exp(-100), denormal,
 * and the product with V that reads them ran 10x slower. In a sum of products a denormal term is
 * below 2^-126 times the other factor, so reading it as zero moves the sum by no more than that;
 * only the GEMM's own loads see it (each thread restores its bits after), not the ops around it,
 * where a Log of a denormal is -92 and not -inf.
 *
 *   const unsigned saved = af_denormals_as_zero_begin();
 *   ... products ...
 *   af_denormals_as_zero_end(saved);
 */
#ifndef AF_UTIL_DENORMALS_H
#define AF_UTIL_DENORMALS_H

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>

static inline unsigned af_denormals_as_zero_begin(void) {
    const unsigned saved = _mm_getcsr();
    _mm_setcsr(saved | 0x0040u); /* DAZ */
    return saved;
}

static inline void af_denormals_as_zero_end(unsigned saved) { _mm_setcsr(saved); }

/* DAZ, and results that would be denormal flushed to zero (FTZ): for a kernel whose tiny results
 * only feed products (see the Softmax kernel). End with af_denormals_as_zero_end. */
static inline unsigned af_denormals_flushed_begin(void) {
    const unsigned saved = _mm_getcsr();
    _mm_setcsr(saved | 0x0040u | 0x8000u); /* DAZ, FTZ */
    return saved;
}
#else
static inline unsigned af_denormals_flushed_begin(void) { return 0; }
static inline unsigned af_denormals_as_zero_begin(void) { return 0; }
static inline void af_denormals_as_zero_end(unsigned saved) { (void)saved; }
#endif

#endif
