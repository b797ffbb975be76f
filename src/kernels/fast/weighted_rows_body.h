/*
 * The weighted sum of a few rows, y[i] = w[0] rows[0][i] + ... + w[n_rows - 1] rows[n_rows - 1][i]
 * for i < n, summed in that order (a product, then multiply-adds): Resize's vertical taps over
 * rows already resampled along the width. Included by each vec_<isa>.c after its fv_* layer.
 */
FV_TARGET static void FV_NAME(f32_weighted_rows)(int n_rows, const float *const *rows, const float *w, int64_t n,
                                                 float *y) {
    int64_t i = 0;
    for (; i + FV_W <= n; i += FV_W) {
        fv_v acc = fv_mul(fv_set1(w[0]), fv_load(rows[0] + i));
        for (int j = 1; j < n_rows; j++) acc = fv_fma(fv_set1(w[j]), fv_load(rows[j] + i), acc);
        fv_store(y + i, acc);
    }
    if (i < n) {
        const fv_m m = fv_tail(n - i);
        fv_v acc = fv_mul(fv_set1(w[0]), fv_loadm(rows[0] + i, m));
        for (int j = 1; j < n_rows; j++) acc = fv_fma(fv_set1(w[j]), fv_loadm(rows[j] + i, m), acc);
        fv_storem(y + i, m, acc);
    }
}
