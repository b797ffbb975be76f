/* The AVX-512 attention tile: 64 query lanes per task (4 vectors) x 6-key QK^T blocks, and
 * 6-query x 64-column P V blocks, through the shared body in attention_x86.h. */
#include <immintrin.h>

#include "kernels/transpose_avx512.h"
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

/* Q^T of a tile, qt[e * T + l] = q[l * qrs + e], through 16 x 16 register transposes, lanes from
 * `rows` to nvr * 16 zero: element by element it was about a tenth of BERT-base's attention. */
AT_TARGET static void at_q_transpose(const float *q, int64_t qrs, int64_t rows, int64_t D, float *qt, int64_t T,
                                     int nvr) {
    for (int64_t l0 = 0; l0 < (int64_t)nvr * 16; l0 += 16)
        for (int64_t e0 = 0; e0 < D; e0 += 16) {
            const int64_t ne = D - e0 < 16 ? D - e0 : 16;
            const __mmask16 em = (__mmask16)(ne == 16 ? 0xffffu : (1u << ne) - 1u);
            __m512 r[16], o[16];
#pragma GCC unroll 16
            for (int l = 0; l < 16; l++)
                r[l] = l0 + l < rows ? _mm512_maskz_loadu_ps(em, q + (l0 + l) * qrs + e0) : _mm512_setzero_ps();
            af_transpose16x16(r, o);
            for (int64_t e = 0; e < ne; e++) _mm512_storeu_ps(qt + (e0 + e) * T + l0, o[e]);
        }
}
#define AT_Q_TRANSPOSE at_q_transpose

#include "kernels/fast/attention_x86.h"
