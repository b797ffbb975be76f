/* The AVX-512 attention tile: 64 query lanes per task (4 vectors) x 6-key QK^T blocks, and
 * 6-query x 64-column P V blocks, through the shared body in attention_x86.h. */
#include <immintrin.h>

#include "kernels/vmath_x86.h"

#define AT_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define AT_W 16
#define AT_V __m512
#define AT_M __mmask16
#define AT_ZERO() _mm512_setzero_ps()
#define AT_SET1(x) _mm512_set1_ps(x)
#define AT_LOAD(p) _mm512_loadu_ps(p)
#define AT_STORE(p, v) _mm512_storeu_ps((p), (v))
#define AT_LOADM(p, m) _mm512_maskz_loadu_ps((m), (p))
#define AT_STOREM(p, m, v) _mm512_mask_storeu_ps((p), (m), (v))
#define AT_TAIL(n) ((__mmask16)((1u << (n)) - 1u))
#define AT_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define AT_MUL(a, b) _mm512_mul_ps((a), (b))
#define AT_ADD(a, b) _mm512_add_ps((a), (b))
#define AT_SUB(a, b) _mm512_sub_ps((a), (b))
#define AT_MAX(a, b) _mm512_max_ps((a), (b))
#define AT_DIV(a, b) _mm512_div_ps((a), (b))
#define AT_EXP(v) af_vexp_avx512(v)
#define AT_KR 6
#define AT_NVMAX AF_ATTENTION_NV_AVX512
#define AT_QR 6
#define AT_DVMAX 4
#define AT_TILE_FN af_attention_tile_avx512

#include "kernels/fast/attention_x86.h"
