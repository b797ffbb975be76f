/*
 * The elementwise loops, written once over the fv_* vector layer: vec_scalar.c, vec_avx2.c and
 * vec_avx512.c define FV_TARGET, FV_INLINE, FV_NAME, FV_W, the types fv_v / fv_m and the fv_*
 * functions, then include this file. Full vectors, then one masked tail vector; each op is one
 * formula per lane, so results do not depend on where a chunk starts.
 */
#include <string.h>

/* y[0..n) = EXPR of v = x[i..i+W) */
#define EW_UNARY_LOOP(EXPR)                                                                        \
    do {                                                                                           \
        int64_t i_ = 0;                                                                            \
        for (; i_ + FV_W <= n; i_ += FV_W) {                                                       \
            const fv_v v = fv_load(x + i_);                                                        \
            fv_store(y + i_, (EXPR));                                                              \
        }                                                                                          \
        if (i_ < n) {                                                                              \
            const fv_m m_ = fv_tail(n - i_);                                                       \
            const fv_v v = fv_loadm(x + i_, m_);                                                   \
            fv_storem(y + i_, m_, (EXPR));                                                         \
        }                                                                                          \
    } while (0)

FV_INLINE fv_v ew_clamp01(fv_v v) { return fv_max(fv_zero(), fv_min(fv_set1(1.0f), v)); }

FV_TARGET static void FV_NAME(f32_ew_unary)(af_ew_unary_op op, float a, float b, int64_t n, const float *x,
                                            float *y) {
    const fv_v va = fv_set1(a), vb = fv_set1(b), zero = fv_zero();
    switch (op) {
    case AF_EW_RELU: EW_UNARY_LOOP(fv_max(zero, v)); break;
    case AF_EW_LEAKY_RELU: EW_UNARY_LOOP(fv_select_neg(v, fv_mul(v, va))); break;
    case AF_EW_SIGMOID: EW_UNARY_LOOP(fv_sigmoid(v)); break;
    case AF_EW_HARD_SIGMOID: EW_UNARY_LOOP(ew_clamp01(fv_fma(va, v, vb))); break;
    case AF_EW_HARD_SWISH:
        /* The epilogue's formula, so fused and standalone HardSwish agree. */
        EW_UNARY_LOOP(fv_mul(v, ew_clamp01(fv_fma(v, fv_set1(1.0f / 6.0f), fv_set1(0.5f)))));
        break;
    case AF_EW_TANH: EW_UNARY_LOOP(fv_tanh(v)); break;
    case AF_EW_ERF: EW_UNARY_LOOP(fv_erf(v)); break;
    case AF_EW_EXP: EW_UNARY_LOOP(fv_exp(v)); break;
    case AF_EW_LOG: EW_UNARY_LOOP(fv_log(v)); break;
    case AF_EW_ELU: EW_UNARY_LOOP(fv_select_neg(v, fv_mul(va, fv_expm1_neg(v)))); break;
    case AF_EW_SOFTPLUS: EW_UNARY_LOOP(fv_softplus(v)); break;
    case AF_EW_FLOOR: EW_UNARY_LOOP(fv_floor(v)); break;
    case AF_EW_CEIL: EW_UNARY_LOOP(fv_ceil(v)); break;
    case AF_EW_ROUND: EW_UNARY_LOOP(fv_round(v)); break;
    case AF_EW_CLIP: EW_UNARY_LOOP(fv_min(vb, fv_max(va, v))); break;
    case AF_EW_NEG: EW_UNARY_LOOP(fv_neg(v)); break;
    case AF_EW_ABS: EW_UNARY_LOOP(fv_abs(v)); break;
    case AF_EW_SQRT: EW_UNARY_LOOP(fv_sqrt(v)); break;
    case AF_EW_RECIPROCAL: EW_UNARY_LOOP(fv_div(fv_set1(1.0f), v)); break;
    case AF_EW_SQUARE: EW_UNARY_LOOP(fv_mul(v, v)); break;
    case AF_EW_POW_HALF:
        /* sqrt(x) + 0 turns -0 into +0; pow(-inf, 0.5) is +inf where sqrt gives NaN. */
        EW_UNARY_LOOP(fv_select_eq(v, fv_set1(-INFINITY), fv_set1(INFINITY), fv_add(fv_sqrt(v), zero)));
        break;
    case AF_EW_COPY:
        if (n > 0 && x != y) memcpy(y, x, (size_t)n * sizeof *y);
        break;
    default: break;
    }
}

/* y[j] = x[j * S] for j < n (S >= 1; 1 and 2 are constants at their calls). */
FV_INLINE void strided_run(const int64_t S, int64_t n, const float *x, float *y) {
    for (int64_t j = 0; j < n; j += FV_W) {
        const int64_t k = n - j < FV_W ? n - j : FV_W;
        const float *p = x + j * S;
        const fv_v v = S == 1 ? fv_load_s1(p, k) : S == 2 ? fv_load_s2(p, k) : fv_load_sg(p, S, k);
        if (k == FV_W) fv_store(y + j, v);
        else fv_storem(y + j, fv_tail(k), v);
    }
}

/* y[0..wq) = 0. */
FV_INLINE void zero_row(int64_t wq, float *y) {
    int64_t j = 0;
    for (; j + FV_W <= wq; j += FV_W) fv_store(y + j, fv_set1(0.0f));
    if (j < wq) fv_storem(y + j, fv_tail(wq - j), fv_set1(0.0f));
}

/* The columns j < wq whose sx j + c0 lies inside a row of w elements: [*lo, *hi). */
FV_INLINE void strided_cols(int64_t wq, int64_t sx, int64_t w, int64_t c0, int64_t *lo, int64_t *hi) {
    *lo = c0 >= 0 ? 0 : (-c0 + sx - 1) / sx;
    *hi = c0 > w - 1 ? 0 : (w - 1 - c0) / sx + 1;
    if (*hi > wq) *hi = wq;
    if (*lo > *hi) *lo = *hi;
}

/* y[j] = xrow[sx j + c0] for j < wq, zero outside the row's w elements (columns [lo, hi) inside,
 * from strided_cols), reading only those. */
FV_INLINE void strided_row(int64_t wq, int64_t sx, const float *xrow, int64_t c0, int64_t lo, int64_t hi, float *y) {
    for (int64_t j = 0; j < lo; j++) y[j] = 0.0f;
    if (hi > lo) { /* (a row wholly in the padding forms no pointer outside x) */
        const float *src = xrow + c0 + lo * sx;
        if (sx == 1) strided_run(1, hi - lo, src, y + lo);
        else if (sx == 2) strided_run(2, hi - lo, src, y + lo);
        else strided_run(sx, hi - lo, src, y + lo);
    }
    for (int64_t j = hi; j < wq; j++) y[j] = 0.0f;
}

/* y[i][j] (hq x wq, dense) = x[sy i + r0][sx j + c0] of the h x w plane x, zero outside it,
 * reading only the elements it copies: a zero-padded, strided sampling of a plane. One call a
 * plane: per-row calls and memsets were most of the time on ResNet-50's strided layers' short
 * rows. */
FV_TARGET static void FV_NAME(f32_strided_plane)(int64_t hq, int64_t wq, int64_t sy, int64_t sx, const float *x,
                                                 int64_t h, int64_t w, int64_t r0, int64_t c0, float *y) {
    int64_t lo, hi;
    strided_cols(wq, sx, w, c0, &lo, &hi);
    for (int64_t i = 0; i < hq; i++, y += wq) {
        const int64_t row = sy * i + r0;
        if (row < 0 || row >= h) zero_row(wq, y);
        else strided_row(wq, sx, x + row * w, c0, lo, hi, y);
    }
}

/* y[0..n) = EXPR of p = a[i * sa..], q = b[i * sb..]; a stride-0 operand is one broadcast value. */
#define EW_BINARY_LOOP(EXPR)                                                                       \
    do {                                                                                           \
        int64_t i_ = 0;                                                                            \
        if (sa && sb) {                                                                            \
            for (; i_ + FV_W <= n; i_ += FV_W) {                                                   \
                const fv_v p = fv_load(a + i_), q = fv_load(b + i_);                               \
                fv_store(y + i_, (EXPR));                                                          \
            }                                                                                      \
            if (i_ < n) {                                                                          \
                const fv_m m_ = fv_tail(n - i_);                                                   \
                const fv_v p = fv_loadm(a + i_, m_), q = fv_loadm(b + i_, m_);                     \
                fv_storem(y + i_, m_, (EXPR));                                                     \
            }                                                                                      \
        } else if (sa) {                                                                           \
            const fv_v q = fv_set1(*b);                                                            \
            for (; i_ + FV_W <= n; i_ += FV_W) {                                                   \
                const fv_v p = fv_load(a + i_);                                                    \
                fv_store(y + i_, (EXPR));                                                          \
            }                                                                                      \
            if (i_ < n) {                                                                          \
                const fv_m m_ = fv_tail(n - i_);                                                   \
                const fv_v p = fv_loadm(a + i_, m_);                                               \
                fv_storem(y + i_, m_, (EXPR));                                                     \
            }                                                                                      \
        } else if (sb) {                                                                           \
            const fv_v p = fv_set1(*a);                                                            \
            for (; i_ + FV_W <= n; i_ += FV_W) {                                                   \
                const fv_v q = fv_load(b + i_);                                                    \
                fv_store(y + i_, (EXPR));                                                          \
            }                                                                                      \
            if (i_ < n) {                                                                          \
                const fv_m m_ = fv_tail(n - i_);                                                   \
                const fv_v q = fv_loadm(b + i_, m_);                                               \
                fv_storem(y + i_, m_, (EXPR));                                                     \
            }                                                                                      \
        } else {                                                                                   \
            const fv_v p = fv_set1(*a), q = fv_set1(*b);                                           \
            const fv_v r_ = (EXPR);                                                                \
            for (; i_ + FV_W <= n; i_ += FV_W) fv_store(y + i_, r_);                               \
            if (i_ < n) fv_storem(y + i_, fv_tail(n - i_), r_);                                    \
        }                                                                                          \
    } while (0)

FV_TARGET static void FV_NAME(f32_ew_binary)(af_ew_binary_op op, int64_t n, const float *a, int sa, const float *b,
                                             int sb, float *y) {
    switch (op) {
    case AF_EW_ADD: EW_BINARY_LOOP(fv_add(p, q)); break;
    case AF_EW_SUB: EW_BINARY_LOOP(fv_sub(p, q)); break;
    case AF_EW_MUL: EW_BINARY_LOOP(fv_mul(p, q)); break;
    case AF_EW_DIV: EW_BINARY_LOOP(fv_div(p, q)); break;
    case AF_EW_MAX: EW_BINARY_LOOP(fv_nan_either(p, q, fv_max(p, q))); break;
    case AF_EW_MIN: EW_BINARY_LOOP(fv_nan_either(p, q, fv_min(p, q))); break;
    case AF_EW_PRELU: EW_BINARY_LOOP(fv_select_neg(p, fv_mul(p, q))); break;
    default: break;
    }
}

#undef EW_UNARY_LOOP
#undef EW_BINARY_LOOP
