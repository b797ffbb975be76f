/*
 * The vector attention tile, written once for both x86 ISAs: attention_avx512.c and
 * attention_avx2.c define the AT_* vector macros and block sizes below, then include this file,
 * which defines the QK^T and P V register-block kernels and the tile function AT_TILE_FN.
 *
 * Needed: AT_TARGET (function attribute), AT_W (lanes), AT_V (vector type), AT_M (lane-mask
 * type), AT_ZERO(), AT_SET1(x), AT_LOAD(p), AT_STORE(p, v), AT_LOADM(p, m), AT_STOREM(p, m, v),
 * AT_TAIL(n) (mask of the first n lanes), AT_FMA(a, b, c) (a*b + c), AT_MUL, AT_ADD, AT_SUB,
 * AT_MAX, AT_DIV, AT_EXP(v); AT_KR keys x AT_NVMAX (2 or 4) query vectors per QK^T block, AT_QR
 * queries x AT_DVMAX (2 or 4) vectors of head_dim per P V block; AT_TILE_FN, the entry point.
 * Optional: AT_Q_TRANSPOSE(q, q_row_stride, rows, D, qt, T, nvr), the tile's Q^T in vector code
 * (else a scalar loop).
 * Every sum runs over one index in increasing order, whatever the block sizes, so results do not
 * depend on the tiling.
 */
#include <stdint.h>

#include "kernels/fast/attention_internal.h"

#define AT_INLINE AT_TARGET static inline __attribute__((always_inline))

static inline int64_t at_min(int64_t a, int64_t b) { return a < b ? a : b; }

/* Scores of keys [0, KR_) (rows of k, krs apart) against NV_ vectors of query lanes:
 * st[r * T + lane] = scale * sum_e qt[e * T + lane] * k[r * krs + e]  (+ mrow[r] when mrow). */
AT_INLINE void at_qk(const int KR_, const int NV_, int64_t D, const float *restrict qt, int64_t T,
                     const float *restrict k, int64_t krs, float scale, const float *restrict mrow,
                     float *restrict st) {
    AT_V acc[AT_KR][AT_NVMAX];
#pragma GCC unroll 8
    for (int r = 0; r < KR_; r++)
#pragma GCC unroll 4
        for (int v = 0; v < NV_; v++) acc[r][v] = AT_ZERO();
    for (int64_t e = 0; e < D; e++) {
        AT_V qv[AT_NVMAX];
#pragma GCC unroll 4
        for (int v = 0; v < NV_; v++) qv[v] = AT_LOAD(qt + e * T + v * AT_W);
#pragma GCC unroll 8
        for (int r = 0; r < KR_; r++) {
            const AT_V kb = AT_SET1(k[r * krs + e]);
#pragma GCC unroll 4
            for (int v = 0; v < NV_; v++) acc[r][v] = AT_FMA(kb, qv[v], acc[r][v]);
        }
    }
    /* The exported graph's order: the product is scaled, then the mask added. */
    const AT_V sc = AT_SET1(scale);
#pragma GCC unroll 8
    for (int r = 0; r < KR_; r++) {
        const AT_V m = mrow ? AT_SET1(mrow[r]) : AT_ZERO();
#pragma GCC unroll 4
        for (int v = 0; v < NV_; v++) {
            AT_V x = AT_MUL(acc[r][v], sc);
            if (mrow) x = AT_ADD(x, m);
            AT_STORE(st + r * T + v * AT_W, x);
        }
    }
}

/* ctx of queries [0, QR_) over DV_ vectors of head_dim (only the first TAIL_ ? tail lanes when
 * TAIL_): o[r * ors + c] = inv[r] * sum_j pt[j * T + r] * v[j * vrs + c]. */
AT_INLINE void at_pv(const int QR_, const int DV_, const int TAIL_, int64_t Sk, const float *restrict pt, int64_t T,
                     const float *restrict v, int64_t vrs, AT_M tail, const float *restrict inv, float *restrict o,
                     int64_t ors) {
    AT_V acc[AT_QR][AT_DVMAX];
#pragma GCC unroll 8
    for (int r = 0; r < QR_; r++)
#pragma GCC unroll 4
        for (int c = 0; c < DV_; c++) acc[r][c] = AT_ZERO();
    for (int64_t j = 0; j < Sk; j++) {
        AT_V vv[AT_DVMAX];
        const float *vj = v + j * vrs;
#pragma GCC unroll 4
        for (int c = 0; c < DV_; c++) vv[c] = TAIL_ ? AT_LOADM(vj + c * AT_W, tail) : AT_LOAD(vj + c * AT_W);
        const float *pj = pt + j * T;
#pragma GCC unroll 8
        for (int r = 0; r < QR_; r++) {
            const AT_V pb = AT_SET1(pj[r]);
#pragma GCC unroll 4
            for (int c = 0; c < DV_; c++) acc[r][c] = AT_FMA(pb, vv[c], acc[r][c]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < QR_; r++) {
        const AT_V iv = AT_SET1(inv[r]);
#pragma GCC unroll 4
        for (int c = 0; c < DV_; c++) {
            const AT_V x = AT_MUL(acc[r][c], iv);
            if (TAIL_)
                AT_STOREM(o + r * ors + c * AT_W, tail, x);
            else
                AT_STORE(o + r * ors + c * AT_W, x);
        }
    }
}

/* ---- the variants, by block size ------------------------------------------------------------ */

typedef void (*at_qk_fn)(int64_t, const float *, int64_t, const float *, int64_t, float, const float *, float *);
typedef void (*at_pv_fn)(int64_t, const float *, int64_t, const float *, int64_t, AT_M, const float *, float *,
                         int64_t);

#define AT_QK_DEF(R, NV)                                                                            \
    AT_TARGET static void at_qk_##R##_##NV(int64_t D, const float *qt, int64_t T, const float *k, int64_t krs, \
                                           float scale, const float *mrow, float *st) {             \
        at_qk(R, NV, D, qt, T, k, krs, scale, mrow, st);                                            \
    }
#define AT_PV_DEF(R, DV, TAIL, NAME)                                                                \
    AT_TARGET static void NAME(int64_t Sk, const float *pt, int64_t T, const float *v, int64_t vrs, AT_M tail, \
                               const float *inv, float *o, int64_t ors) {                           \
        at_pv(R, DV, TAIL, Sk, pt, T, v, vrs, tail, inv, o, ors);                                   \
    }
#define AT_PV_DEFS(R)                                                                               \
    AT_PV_DEF(R, 1, 0, at_pv_##R##_1) AT_PV_DEF(R, 2, 0, at_pv_##R##_2) AT_PV_DEF(R, 1, 1, at_pv_##R##_tail)

#if AT_NVMAX == 4
#define AT_QK_DEFS(R) AT_QK_DEF(R, 1) AT_QK_DEF(R, 2) AT_QK_DEF(R, 3) AT_QK_DEF(R, 4)
#define AT_QK_ROW(R) {NULL, at_qk_##R##_1, at_qk_##R##_2, at_qk_##R##_3, at_qk_##R##_4}
#elif AT_NVMAX == 2
#define AT_QK_DEFS(R) AT_QK_DEF(R, 1) AT_QK_DEF(R, 2)
#define AT_QK_ROW(R) {NULL, at_qk_##R##_1, at_qk_##R##_2}
#else
#error "AT_NVMAX must be 2 or 4"
#endif

#if AT_DVMAX == 4
#define AT_PV_MORE(R) AT_PV_DEF(R, 3, 0, at_pv_##R##_3) AT_PV_DEF(R, 4, 0, at_pv_##R##_4)
#define AT_PV_ROW(R) {NULL, at_pv_##R##_1, at_pv_##R##_2, at_pv_##R##_3, at_pv_##R##_4}
#elif AT_DVMAX == 2
#define AT_PV_MORE(R)
#define AT_PV_ROW(R) {NULL, at_pv_##R##_1, at_pv_##R##_2}
#else
#error "AT_DVMAX must be 2 or 4"
#endif

#if AT_KR != 6 || AT_QR != 6
#error "the variant tables below are written for 6-row blocks"
#endif

AT_QK_DEFS(1) AT_QK_DEFS(2) AT_QK_DEFS(3) AT_QK_DEFS(4) AT_QK_DEFS(5) AT_QK_DEFS(6)
AT_PV_DEFS(1) AT_PV_DEFS(2) AT_PV_DEFS(3) AT_PV_DEFS(4) AT_PV_DEFS(5) AT_PV_DEFS(6)
AT_PV_MORE(1) AT_PV_MORE(2) AT_PV_MORE(3) AT_PV_MORE(4) AT_PV_MORE(5) AT_PV_MORE(6)

static const at_qk_fn at_qk_fns[AT_KR + 1][AT_NVMAX + 1] = {
    {NULL}, AT_QK_ROW(1), AT_QK_ROW(2), AT_QK_ROW(3), AT_QK_ROW(4), AT_QK_ROW(5), AT_QK_ROW(6),
};
static const at_pv_fn at_pv_fns[AT_QR + 1][AT_DVMAX + 1] = {
    {NULL}, AT_PV_ROW(1), AT_PV_ROW(2), AT_PV_ROW(3), AT_PV_ROW(4), AT_PV_ROW(5), AT_PV_ROW(6),
};
static const at_pv_fn at_pv_tail_fns[AT_QR + 1] = {
    NULL, at_pv_1_tail, at_pv_2_tail, at_pv_3_tail, at_pv_4_tail, at_pv_5_tail, at_pv_6_tail,
};

/* ---- the tile ------------------------------------------------------------------------------- */

AT_TARGET void AT_TILE_FN(const af_attention_desc *d, const af_attention_plan *p, int64_t b, int64_t h, int64_t i0,
                          int64_t rows, float *ws) {
    const int64_t T = p->tile, D = d->head_dim, Sk = d->seq_k;
    const int nvr = (int)((rows + AT_W - 1) / AT_W); /* query vectors holding real rows */
    float *qt = ws, *st = ws + p->qt_floats, *inv = st + p->s_floats;

    /* Q^T of the tile; lanes past the last row are zero (their scores are computed, never used). */
    const float *q = d->q + b * d->q_batch_stride + h * d->q_head_stride + i0 * d->q_row_stride;
#ifdef AT_Q_TRANSPOSE
    AT_Q_TRANSPOSE(q, d->q_row_stride, rows, D, qt, T, nvr);
#else
    for (int64_t l = 0; l < rows; l++) {
        const float *ql = q + l * d->q_row_stride;
        for (int64_t e = 0; e < D; e++) qt[e * T + l] = ql[e];
    }
    for (int64_t l = rows; l < (int64_t)nvr * AT_W; l++)
        for (int64_t e = 0; e < D; e++) qt[e * T + l] = 0.0f;
#endif

    /* scores = scale * Q K^T + mask, transposed: st[j * T + l]. A mask shared by every query row
     * is added in the block's store; a per-row one afterwards, one query lane at a time. */
    const float *k = d->k + b * d->k_batch_stride + h * d->k_head_stride;
    const float *mask = d->mask ? d->mask + b * d->mask_batch_stride + h * d->mask_head_stride : NULL;
    const int per_row = mask && d->mask_row_stride != 0;
    for (int64_t j0 = 0; j0 < Sk; j0 += AT_KR) {
        const int kr = (int)at_min(AT_KR, Sk - j0);
        at_qk_fns[kr][nvr](D, qt, T, k + j0 * d->k_row_stride, d->k_row_stride, d->scale,
                           mask && !per_row ? mask + j0 : NULL, st + j0 * T);
    }
    if (per_row)
        for (int64_t l = 0; l < rows; l++) {
            const float *ml = mask + (i0 + l) * d->mask_row_stride;
            for (int64_t j = 0; j < Sk; j++) st[j * T + l] += ml[j];
        }

    /* Softmax along keys, each lane its own row: subtract the max, exp, sum; 1/sum is applied to
     * ctx instead of P. The max ignores NaN, but a NaN score then makes its row's sum NaN. */
    for (int v = 0; v < nvr; v++) {
        float *s = st + v * AT_W;
        AT_V mx = AT_LOAD(s);
        for (int64_t j = 1; j < Sk; j++) mx = AT_MAX(mx, AT_LOAD(s + j * T));
        AT_V sum = AT_ZERO();
        for (int64_t j = 0; j < Sk; j++) {
            const AT_V e = AT_EXP(AT_SUB(AT_LOAD(s + j * T), mx));
            AT_STORE(s + j * T, e);
            sum = AT_ADD(sum, e);
        }
        AT_STORE(inv + v * AT_W, AT_DIV(AT_SET1(1.0f), sum));
    }

    /* ctx = (P V) / sum, written straight into the output rows. */
    const float *vb = d->v + b * d->v_batch_stride + h * d->v_head_stride;
    float *ob = d->out + b * d->out_batch_stride + h * d->out_head_stride + i0 * d->out_row_stride;
    const int64_t dfull = D - D % AT_W, ors = d->out_row_stride;
    const AT_M tail = AT_TAIL((int)(D - dfull));
    for (int64_t g0 = 0; g0 < rows; g0 += AT_QR) {
        const int qr = (int)at_min(AT_QR, rows - g0);
        for (int64_t c0 = 0; c0 < dfull; c0 += AT_DVMAX * AT_W) {
            const int dv = (int)at_min(AT_DVMAX, (dfull - c0) / AT_W);
            at_pv_fns[qr][dv](Sk, st + g0, T, vb + c0, d->v_row_stride, tail, inv + g0, ob + g0 * ors + c0, ors);
        }
        if (dfull < D)
            at_pv_tail_fns[qr](Sk, st + g0, T, vb + dfull, d->v_row_stride, tail, inv + g0, ob + g0 * ors + dfull,
                               ors);
    }
}
