/*
 * The Winograd F(4x4, 3x3) transforms of src/kernels/gemm/conv_winograd.c, written once over the
 * fv_* vector layer and compiled per ISA by vec_scalar.c, vec_avx2.c and vec_avx512.c. Each runs
 * along a row of n tiles, one tile per vector lane, so every load and store is contiguous: the
 * driver hands the input in column-phase rows and takes the output as 16 rows of pixels.
 *
 * With the interpolation points 0, 1, -1, 2, -2 and infinity (Lavin and Gray):
 *   input   V = B^T d B,  B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0;
 *                                0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
 *   output  Y = A^T M A,  A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
 * Both are applied as two 1-D passes (columns, then rows) with the factored forms below. Each
 * lane is one tile's formula, so results do not depend on where a row of tiles is split.
 */

/* y[b * y_ld + u] = x[4 u + b] for u < n, b < 4: a padded input row split into the column phases
 * the input transform reads. */
FV_TARGET static void FV_NAME(f32_deinterleave4)(int64_t n, const float *x, float *y, int64_t y_ld) {
    int64_t u = 0;
#ifdef FV_HAS_DEINT4
    for (; u + FV_W <= n; u += FV_W) {
        fv_v o[4];
        fv_deint4(x + 4 * u, o);
        for (int b = 0; b < 4; b++) fv_store(y + b * y_ld + u, o[b]);
    }
#endif
    for (; u < n; u++)
        for (int b = 0; b < 4; b++) y[b * y_ld + u] = x[4 * u + b];
}

/* x[4 u + b] = y[b * y_ld + u] for u < n, b < 4: the output transform's pixel rows of one tile
 * row interleaved into an output row. */
FV_TARGET static void FV_NAME(f32_interleave4)(int64_t n, const float *y, int64_t y_ld, float *x) {
    int64_t u = 0;
#ifdef FV_HAS_INT4
    for (; u < n; u += FV_W) {
        const int64_t k = n - u < FV_W ? n - u : FV_W;
        fv_v in[4];
        for (int b = 0; b < 4; b++) in[b] = k == FV_W ? fv_load(y + b * y_ld + u) : fv_loadm(y + b * y_ld + u, fv_tail(k));
        fv_int4(in, x + 4 * u, k);
    }
#endif
    for (; u < n; u++)
        for (int b = 0; b < 4; b++) x[4 * u + b] = y[b * y_ld + u];
}

/* s = B^T d along one dimension. */
FV_INLINE void wino_bt6(const fv_v d[6], fv_v s[6]) {
    const fv_v t1 = fv_fma(fv_set1(-4.0f), d[2], d[4]); /* d4 - 4 d2 */
    const fv_v t2 = fv_fma(fv_set1(-4.0f), d[1], d[3]); /* d3 - 4 d1 */
    const fv_v t3 = fv_sub(d[4], d[2]);
    const fv_v t4 = fv_mul(fv_set1(2.0f), fv_sub(d[3], d[1]));
    s[0] = fv_fma(fv_set1(4.0f), d[0], fv_fma(fv_set1(-5.0f), d[2], d[4]));
    s[1] = fv_add(t1, t2);
    s[2] = fv_sub(t1, t2);
    s[3] = fv_add(t3, t4);
    s[4] = fv_sub(t3, t4);
    s[5] = fv_fma(fv_set1(4.0f), d[1], fv_fma(fv_set1(-5.0f), d[3], d[5]));
}

/* o = A^T m along one dimension. */
FV_INLINE void wino_at6(const fv_v m[6], fv_v o[4]) {
    const fv_v a = fv_add(m[1], m[2]), b = fv_sub(m[1], m[2]);
    const fv_v c = fv_add(m[3], m[4]), d = fv_sub(m[3], m[4]);
    o[0] = fv_add(fv_add(m[0], a), c);
    o[1] = fv_fma(fv_set1(2.0f), d, b);
    o[2] = fv_fma(fv_set1(4.0f), c, a);
    o[3] = fv_add(fv_fma(fv_set1(8.0f), d, b), m[5]);
}

/* Input transform of n tiles of one channel. Tile t's input element (i, j), i, j < 6, is
 * rows[i][(j % 4) * phase_ld + t + j / 4]; its transformed element xi = 6 i' + j' goes to
 * v[xi * v_ld + t]. */
FV_TARGET static void FV_NAME(f32_wino_input)(int64_t n, const float *const rows[6], int64_t phase_ld, float *v,
                                              int64_t v_ld) {
    for (int64_t t = 0; t < n; t += FV_W) {
        const int64_t k = n - t < FV_W ? n - t : FV_W;
        const fv_m m = fv_tail(k);
        fv_v s[6][6]; /* s[i'][j] = (B^T d)[i'][j] */
        for (int j = 0; j < 6; j++) {
            fv_v d[6], c[6];
            for (int i = 0; i < 6; i++) {
                const float *p = rows[i] + (j % 4) * phase_ld + t + j / 4;
                d[i] = k == FV_W ? fv_load(p) : fv_loadm(p, m);
            }
            wino_bt6(d, c);
            for (int i = 0; i < 6; i++) s[i][j] = c[i];
        }
        for (int i = 0; i < 6; i++) {
            fv_v o[6];
            wino_bt6(s[i], o);
            for (int j = 0; j < 6; j++) {
                float *q = v + (6 * i + j) * v_ld + t;
                if (k == FV_W) fv_store(q, o[j]);
                else fv_storem(q, m, o[j]);
            }
        }
    }
}

/* Output transform of n tiles of one channel: tile t's element xi of the product is
 * mp[xi * m_ld + t]; its output pixel (a, b), a, b < 4, goes to y[(4 a + b) * y_ld + t]. */
FV_TARGET static void FV_NAME(f32_wino_output)(int64_t n, const float *mp, int64_t m_ld, float *y, int64_t y_ld) {
    for (int64_t t = 0; t < n; t += FV_W) {
        const int64_t k = n - t < FV_W ? n - t : FV_W;
        const fv_m m = fv_tail(k);
        fv_v r[4][6]; /* r[a][j] = (A^T M)[a][j] */
        for (int j = 0; j < 6; j++) {
            fv_v col[6], o[4];
            for (int i = 0; i < 6; i++) {
                const float *p = mp + (6 * i + j) * m_ld + t;
                col[i] = k == FV_W ? fv_load(p) : fv_loadm(p, m);
            }
            wino_at6(col, o);
            for (int a = 0; a < 4; a++) r[a][j] = o[a];
        }
        for (int a = 0; a < 4; a++) {
            fv_v o[4];
            wino_at6(r[a], o);
            for (int b = 0; b < 4; b++) {
                float *q = y + (4 * a + b) * y_ld + t;
                if (k == FV_W) fv_store(q, o[b]);
                else fv_storem(q, m, o[b]);
            }
        }
    }
}
