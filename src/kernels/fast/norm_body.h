/*
 * The Softmax, LayerNormalization and per-channel scale/shift (BatchNormalization) loops, written
 * once over the fv_* vector layer (see elementwise_body.h for what the including file defines).
 *
 * Numerics: every sum (softmax's sum of exponentials, LayerNorm's mean and squared deviations)
 * accumulates in double lanes, so its rounding error is ~n * 2^-53 relative, far below float
 * resolution for any row length; only the float steps around it round (exp within vmath's 1 ULP,
 * x - max, the final product), which keeps results within a few ULP of the double reference.
 * LayerNorm is two-pass (mean, then the squared deviations from it), which stays accurate when the
 * mean is large against the spread, where E[x^2] - mean^2 would cancel.
 */

/* Softmax of one contiguous row: max, then y = exp(x - max) with the sum, then y *= 1 / sum.
 * NaN or +inf anywhere makes the sum NaN, hence the whole row NaN, as in the reference. */
FV_TARGET static void FV_NAME(f32_softmax_row)(int64_t n, const float *x, float *y) {
    if (n <= 0) return;
    const fv_v ninf = fv_set1(-INFINITY);
    fv_v vmax = ninf;
    int64_t i = 0;
    for (; i + FV_W <= n; i += FV_W) vmax = fv_max(vmax, fv_load(x + i));
    if (i < n) vmax = fv_max(vmax, fv_loadmf(x + i, fv_tail(n - i), ninf));
    const fv_v mx = fv_set1(fv_hmax(vmax));
    fv_dacc acc = fv_dacc_zero();
    for (i = 0; i + FV_W <= n; i += FV_W) {
        const fv_v e = fv_exp(fv_sub(fv_load(x + i), mx));
        fv_store(y + i, e);
        fv_dacc_add(&acc, e);
    }
    if (i < n) {
        const fv_m m = fv_tail(n - i);
        const fv_v e = fv_zerom(m, fv_exp(fv_sub(fv_loadm(x + i, m), mx)));
        fv_storem(y + i, m, e);
        fv_dacc_add(&acc, e);
    }
    const fv_v inv = fv_set1((float)(1.0 / fv_dacc_sum(acc)));
    for (i = 0; i + FV_W <= n; i += FV_W) fv_store(y + i, fv_mul(fv_load(y + i), inv));
    if (i < n) {
        const fv_m m = fv_tail(n - i);
        fv_storem(y + i, m, fv_mul(fv_loadm(y + i, m), inv));
    }
}

/* The sum of x[0, full) (full a multiple of FV_W), or with dev of the squared deviations from
 * mean, in double lanes. Four accumulators, so consecutive vectors' adds do not wait on each
 * other: BERT-base's 128 x 768 LayerNorm, hot, took 20-24 us with one chain, 16.7 with four. */
FV_INLINE double FV_NAME(f32_row_dsum)(int64_t full, const float *x, bool dev, double mean) {
    fv_dacc acc[4] = {fv_dacc_zero(), fv_dacc_zero(), fv_dacc_zero(), fv_dacc_zero()};
    int64_t i = 0;
    for (; i + 4 * FV_W <= full; i += 4 * FV_W)
#pragma GCC unroll 4 /* unrolled, acc stays in registers */
        for (int a = 0; a < 4; a++) {
            if (dev) fv_dacc_add_sq(&acc[a], fv_load(x + i + a * FV_W), mean);
            else fv_dacc_add(&acc[a], fv_load(x + i + a * FV_W));
        }
    for (; i < full; i += FV_W) {
        if (dev) fv_dacc_add_sq(&acc[0], fv_load(x + i), mean);
        else fv_dacc_add(&acc[0], fv_load(x + i));
    }
    return (fv_dacc_sum(acc[0]) + fv_dacc_sum(acc[1])) + (fv_dacc_sum(acc[2]) + fv_dacc_sum(acc[3]));
}

/* One LayerNormalization row of n elements (scale NULL: ones, bias NULL: zeros); the statistics'
 * last n % W elements add in scalar double after the vector lanes. */
FV_TARGET static void FV_NAME(f32_layernorm_row)(int64_t n, const float *x, float *y, const float *scale,
                                                 const float *bias, float eps) {
    if (n <= 0) return;
    const int64_t full = n - n % FV_W;
    int64_t i;
    double sum = FV_NAME(f32_row_dsum)(full, x, false, 0.0);
    for (i = full; i < n; i++) sum += x[i];
    const double mean = sum / (double)n;
    double sq = FV_NAME(f32_row_dsum)(full, x, true, mean);
    for (i = full; i < n; i++) sq += ((double)x[i] - mean) * ((double)x[i] - mean);
    const double inv = 1.0 / sqrt(sq / (double)n + (double)eps);
    /* x - mean as (x - hi) - lo with mean = hi + lo in floats: x - hi is exact for x near the mean,
     * so a mean large against the spread costs no accuracy. */
    const float hi = (float)mean;
    const fv_v vh = fv_set1(hi), vl = fv_set1((float)(mean - (double)hi)), vi = fv_set1((float)inv);
    const fv_v zero = fv_zero(), one = fv_set1(1.0f);
    for (i = 0; i + FV_W <= n; i += FV_W) {
        const fv_v t = fv_mul(fv_sub(fv_sub(fv_load(x + i), vh), vl), vi);
        fv_store(y + i, fv_fma(t, scale ? fv_load(scale + i) : one, bias ? fv_load(bias + i) : zero));
    }
    if (i < n) {
        const fv_m m = fv_tail(n - i);
        const fv_v t = fv_mul(fv_sub(fv_sub(fv_loadm(x + i, m), vh), vl), vi);
        fv_storem(y + i, m, fv_fma(t, scale ? fv_loadm(scale + i, m) : one, bias ? fv_loadm(bias + i, m) : zero));
    }
}

/* y = x * scale[c] + shift[c] (one fused multiply-add on vector ISAs) over [outer, C, inner]. */
FV_TARGET static void FV_NAME(f32_scale_shift)(int64_t outer, int64_t C, int64_t inner, const float *x, float *y,
                                               const float *scale, const float *shift) {
    for (int64_t o = 0; o < outer; o++) {
        if (inner == 1) { /* [N, C]: the channel runs along the row */
            const float *xr = x + o * C;
            float *yr = y + o * C;
            int64_t c = 0;
            for (; c + FV_W <= C; c += FV_W)
                fv_store(yr + c, fv_fma(fv_load(xr + c), fv_load(scale + c), fv_load(shift + c)));
            if (c < C) {
                const fv_m m = fv_tail(C - c);
                fv_storem(yr + c, m, fv_fma(fv_loadm(xr + c, m), fv_loadm(scale + c, m), fv_loadm(shift + c, m)));
            }
            continue;
        }
        for (int64_t c = 0; c < C; c++) {
            const float *xp = x + (o * C + c) * inner;
            float *yp = y + (o * C + c) * inner;
            const fv_v s = fv_set1(scale[c]), t = fv_set1(shift[c]);
            int64_t i = 0;
            for (; i + FV_W <= inner; i += FV_W) fv_store(yp + i, fv_fma(fv_load(xp + i), s, t));
            if (i < inner) {
                const fv_m m = fv_tail(inner - i);
                fv_storem(yp + i, m, fv_fma(fv_loadm(xp + i, m), s, t));
            }
        }
    }
}
