/*
 * The Reduce* vector loops, included once per ISA by reduce_<isa>.c after it defines the rv_*
 * vector layer (RV_W lanes, RV_INLINE, RV_NAME) on its own types. See reduce_internal.h.
 */

/* Scalar combine with NaN winning, the rule the vector lanes follow. */
static inline float rv_comb1(af_red_kind kind, float a, float b) {
    switch (kind) {
    case AF_RED_PROD: return a * b;
    case AF_RED_MAX: return isnan(b) ? b : b > a ? b : a;
    case AF_RED_MIN: return isnan(b) ? b : b < a ? b : a;
    default: return a + b;
    }
}

/* acc combined with element x's term. */
RV_INLINE rv_v rv_step(af_red_kind kind, rv_v acc, rv_v x, rv_v shift) {
    switch (kind) {
    case AF_RED_SUM: return rv_add(acc, x);
    case AF_RED_ABS_SUM: return rv_add(acc, rv_abs(x));
    case AF_RED_SQ_SUM: return rv_fma(x, x, acc);
    case AF_RED_PROD: return rv_mul(acc, x);
    case AF_RED_MAX: return rv_maxnan(acc, x);
    case AF_RED_MIN: return rv_minnan(acc, x);
    default: return rv_add(acc, rv_exp(rv_sub(x, shift)));
    }
}

/* Two partial accumulators combined. */
RV_INLINE rv_v rv_comb(af_red_kind kind, rv_v a, rv_v b) {
    switch (kind) {
    case AF_RED_PROD: return rv_mul(a, b);
    case AF_RED_MAX: return rv_maxnan(a, b);
    case AF_RED_MIN: return rv_minnan(a, b);
    default: return rv_add(a, b);
    }
}

RV_INLINE float rv_row_impl(af_red_kind kind, int64_t n, const float *x, float shift) {
    const rv_v id = rv_set1(af_red_identity(kind)), sh = rv_set1(shift);
    rv_v a0 = id, a1 = id, a2 = id, a3 = id;
    int64_t i = 0;
    for (; i + 4 * RV_W <= n; i += 4 * RV_W) {
        a0 = rv_step(kind, a0, rv_load(x + i), sh);
        a1 = rv_step(kind, a1, rv_load(x + i + RV_W), sh);
        a2 = rv_step(kind, a2, rv_load(x + i + 2 * RV_W), sh);
        a3 = rv_step(kind, a3, rv_load(x + i + 3 * RV_W), sh);
    }
    for (; i + RV_W <= n; i += RV_W) a0 = rv_step(kind, a0, rv_load(x + i), sh);
    if (i < n) {
        const rv_m m = rv_tail(n - i);
        a1 = rv_blend(m, rv_step(kind, a1, rv_loadm(x + i, m), sh), a1);
    }
    a0 = rv_comb(kind, rv_comb(kind, a0, a1), rv_comb(kind, a2, a3));
    float lanes[RV_W];
    rv_store(lanes, a0);
    float r = lanes[0];
    for (int l = 1; l < RV_W; l++) r = rv_comb1(kind, r, lanes[l]);
    return r;
}

RV_INLINE void rv_accum_impl(af_red_kind kind, int64_t n, const float *x, float *acc, const float *shift) {
    const bool exp_sum = kind == AF_RED_EXP_SUM;
    int64_t i = 0;
    for (; i + RV_W <= n; i += RV_W) {
        const rv_v sh = exp_sum ? rv_load(shift + i) : rv_zero();
        rv_store(acc + i, rv_step(kind, rv_load(acc + i), rv_load(x + i), sh));
    }
    if (i < n) {
        const rv_m m = rv_tail(n - i);
        const rv_v sh = exp_sum ? rv_loadm(shift + i, m) : rv_zero();
        rv_storem(acc + i, m, rv_step(kind, rv_loadm(acc + i, m), rv_loadm(x + i, m), sh));
    }
}

#define RV_EACH_KIND(CALL)                                                                         \
    switch (kind) {                                                                                \
    case AF_RED_SUM: CALL(AF_RED_SUM);                                                             \
    case AF_RED_ABS_SUM: CALL(AF_RED_ABS_SUM);                                                     \
    case AF_RED_SQ_SUM: CALL(AF_RED_SQ_SUM);                                                       \
    case AF_RED_PROD: CALL(AF_RED_PROD);                                                           \
    case AF_RED_MAX: CALL(AF_RED_MAX);                                                             \
    case AF_RED_MIN: CALL(AF_RED_MIN);                                                             \
    default: CALL(AF_RED_EXP_SUM);                                                                 \
    }

RV_TARGET static float RV_NAME(f32_reduce_row)(af_red_kind kind, int64_t n, const float *x, float shift) {
#define RV_ROW(K) return rv_row_impl(K, n, x, shift)
    RV_EACH_KIND(RV_ROW)
#undef RV_ROW
}

RV_TARGET static void RV_NAME(f32_reduce_accum)(af_red_kind kind, int64_t n, const float *x, float *acc,
                                                const float *shift) {
#define RV_ACC(K)                                                                                  \
    rv_accum_impl(K, n, x, acc, shift);                                                            \
    return
    RV_EACH_KIND(RV_ACC)
#undef RV_ACC
}
