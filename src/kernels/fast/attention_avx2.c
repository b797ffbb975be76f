/* The AVX2+FMA attention tile: 16 query lanes per task (2 vectors) x 6-key QK^T blocks, and
 * 6-query x 16-column P V blocks (16 ymm registers), through the shared body in attention_x86.h. */
#include <immintrin.h>

#include "kernels/vmath_x86.h"

#define AT_TARGET __attribute__((target("avx2,fma")))
#define AT_W 8
#define AT_V __m256
#define AT_M __m256i
#define AT_ZERO() _mm256_setzero_ps()
#define AT_SET1(x) _mm256_set1_ps(x)
#define AT_LOAD(p) _mm256_loadu_ps(p)
#define AT_STORE(p, v) _mm256_storeu_ps((p), (v))
#define AT_LOADM(p, m) _mm256_maskload_ps((p), (m))
#define AT_STOREM(p, m, v) _mm256_maskstore_ps((p), (m), (v))
#define AT_TAIL(n) at_tail_avx2(n)
#define AT_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define AT_MUL(a, b) _mm256_mul_ps((a), (b))
#define AT_ADD(a, b) _mm256_add_ps((a), (b))
#define AT_SUB(a, b) _mm256_sub_ps((a), (b))
#define AT_MAX(a, b) _mm256_max_ps((a), (b))
#define AT_DIV(a, b) _mm256_div_ps((a), (b))
#define AT_EXP(v) af_vexp_avx2(v)
#define AT_KR 6
#define AT_NVMAX AF_ATTENTION_NV_AVX2
#define AT_QR 6
#define AT_DVMAX 2
#define AT_TILE_FN af_attention_tile_avx2

/* The first n (0..8) lanes set: 8 ints read from lane_bits + 8 - n. */
static const int lane_bits[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
AT_TARGET static inline __m256i at_tail_avx2(int n) {
    return _mm256_loadu_si256((const __m256i *)(lane_bits + 8 - n));
}

#include "kernels/fast/attention_x86.h"
