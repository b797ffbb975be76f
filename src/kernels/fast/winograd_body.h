/*
 * The Winograd F(m x m, 3x3) transforms (m = 4 or 2) of src/kernels/gemm/conv_winograd.c, written
 * once over the fv_* vector layer and compiled per ISA by vec_scalar.c, vec_avx2.c and
 * vec_avx512.c. Each runs along a row of n tiles, one tile per vector lane: the input transform
 * reads a tile row's input rows and splits them by column phase in registers (AVX-512 and AVX2;
 * a small buffer in the scalar build), and the output transform leaves m x m rows of pixels for
 * the driver.
 *
 * F(4x4, 3x3), interpolation points 0, 1, -1, 2, -2 and infinity (Lavin and Gray):
 *   input   V = B^T d B,  B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0;
 *                                0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
 *   output  Y = A^T M A,  A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
 * F(2x2, 3x3), points 0, 1, -1 and infinity:
 *   input   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
 *   output  A^T = [1 1 1 0; 0 1 -1 -1]
 * Both are applied as two 1-D passes with the factored forms below. Each lane is one tile's
 * formula, so results do not depend on where a row of tiles is split.
 */

/* A vector at p, or its lanes in mask (full: a constant at every call, so the test folds away). */
FV_INLINE fv_v wino_load(const float *p, bool full, fv_m mask) { return full ? fv_load(p) : fv_loadm(p, mask); }
FV_INLINE void wino_store(float *p, bool full, fv_m mask, fv_v v) {
    if (full) fv_store(p, v);
    else fv_storem(p, mask, v);
}

/* x[m u + b] = y[b * y_ld + u] for u < n, b < m: the output transform's pixel rows of one tile
 * row interleaved into an output row. */
FV_INLINE void interleave_m(const int m, int64_t n, const float *y, int64_t y_ld, float *x) {
    int64_t u = 0;
#ifdef FV_HAS_DEINT
    for (; u < n; u += FV_W) {
        const int64_t k = n - u < FV_W ? n - u : FV_W;
        fv_v in[4];
#pragma GCC unroll 4
        for (int b = 0; b < m; b++) in[b] = wino_load(y + b * y_ld + u, k == FV_W, fv_tail(k));
        if (m == 4) fv_int4(in, x + 4 * u, k);
        else fv_int2(in, x + 2 * u, k);
    }
#endif
    for (; u < n; u++)
        for (int b = 0; b < m; b++) x[m * u + b] = y[b * y_ld + u];
}

/* s = B^T d along one dimension, F(4x4, 3x3). */
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

/* o = A^T m along one dimension, F(4x4, 3x3). */
FV_INLINE void wino_at6(const fv_v m[6], fv_v o[4]) {
    const fv_v a = fv_add(m[1], m[2]), b = fv_sub(m[1], m[2]);
    const fv_v c = fv_add(m[3], m[4]), d = fv_sub(m[3], m[4]);
    o[0] = fv_add(fv_add(m[0], a), c);
    o[1] = fv_fma(fv_set1(2.0f), d, b);
    o[2] = fv_fma(fv_set1(4.0f), c, a);
    o[3] = fv_add(fv_fma(fv_set1(8.0f), d, b), m[5]);
}

/* s = B^T d and o = A^T m along one dimension, F(2x2, 3x3). */
FV_INLINE void wino_bt4(const fv_v d[4], fv_v s[4]) {
    s[0] = fv_sub(d[0], d[2]);
    s[1] = fv_add(d[1], d[2]);
    s[2] = fv_sub(d[2], d[1]);
    s[3] = fv_sub(d[1], d[3]);
}

FV_INLINE void wino_at4(const fv_v m[4], fv_v o[2]) {
    o[0] = fv_add(fv_add(m[0], m[1]), m[2]);
    o[1] = fv_sub(fv_sub(m[1], m[2]), m[3]);
}

/* Tile t's taps along one input row, for the vector of tiles t0 .. t0 + FV_W - 1: tap[j] lane
 * t - t0 = xpad[m t + j], j < m + 2, where xpad is the row x of w floats after lead zeros, and
 * zeros past its end. Taps j < m are the row split by column mod m; taps m and m + 1 are taps 0
 * and 1 of the next tile. */
FV_INLINE void wino_row_taps(const int m, const float *x, int64_t lead, int64_t w, int64_t t0, fv_v tap[6]) {
#ifdef FV_HAS_DEINT
    fv_v in[4], next[4];
#pragma GCC unroll 4
    for (int q = 0; q < m; q++) in[q] = fv_load_window(x, m * t0 + FV_W * q - lead, w);
    if (m == 4) fv_deint4(in, tap);
    else fv_deint2(in, tap);
#pragma GCC unroll 4
    for (int q = 0; q < m; q++) in[q] = fv_load_window(x, m * (t0 + 1) + FV_W * q - lead, w);
    if (m == 4) fv_deint4(in, next);
    else fv_deint2(in, next);
    tap[m] = next[0];
    tap[m + 1] = next[1];
#else
    float buf[6][FV_W];
    for (int j = 0; j < m + 2; j++)
        for (int l = 0; l < FV_W; l++) {
            const int64_t c = m * (t0 + l) + j - lead;
            buf[j][l] = c >= 0 && c < w ? x[c] : 0.0f;
        }
    for (int j = 0; j < m + 2; j++) tap[j] = fv_load(buf[j]);
#endif
}

/* Input transform of one vector of tiles (mask: its lanes, all of them when full) of one
 * channel, F(m x m, 3x3) with A = m + 2 inputs a side, read from the input rows themselves:
 * tile t's input element (i, j), i, j < A, is xpad_i[m t + j] (wino_row_taps; rows[i] NULL: a
 * row of padding); its transformed element xi = A i' + j' goes to v[xi * v_ld + t]. Every loop
 * is unrolled and `full` is a constant, so the A x A values stay in registers (left to -O2, the
 * loops kept them on the stack, 4x slower). Reading the rows directly replaced a copy of every
 * input row split by column phase (one call a row): ResNet-50's input transforms, one thread,
 * hot, best of 3: 56x56 F(4x4) 83 -> 76 us, 28x28 78 -> 72, 14x14 F(2x2) 59 -> 55, 7x7 61 -> 57. */
FV_INLINE void wino_input_vec(const int m, const bool full, fv_m mask, const float *const rows[6], int64_t lead,
                              int64_t w, int64_t t0, float *v, int64_t v_ld) {
    const int A = m + 2;
    fv_v s[6][6]; /* s[i][j'] = (d B)[i][j'] */
#pragma GCC unroll 6
    for (int i = 0; i < A; i++) {
        if (rows[i]) {
            fv_v tap[6];
            wino_row_taps(m, rows[i], lead, w, t0, tap);
            if (m == 4) wino_bt6(tap, s[i]);
            else wino_bt4(tap, s[i]);
        } else {
#pragma GCC unroll 6
            for (int j = 0; j < A; j++) s[i][j] = fv_zero();
        }
    }
#pragma GCC unroll 6
    for (int j = 0; j < A; j++) {
        fv_v col[6], o[6];
#pragma GCC unroll 6
        for (int i = 0; i < A; i++) col[i] = s[i][j];
        if (m == 4) wino_bt6(col, o);
        else wino_bt4(col, o);
#pragma GCC unroll 6
        for (int i = 0; i < A; i++) wino_store(v + (A * i + j) * v_ld + t0, full, mask, o[i]);
    }
}

/* Input transform of n tiles of one channel: wino_input_vec over whole vectors, then the tail. */
FV_INLINE void wino_input_m(const int m, int64_t n, const float *const rows[6], int64_t lead, int64_t w, float *v,
                            int64_t v_ld) {
    int64_t t = 0;
    for (; t + FV_W <= n; t += FV_W) wino_input_vec(m, true, fv_tail(FV_W), rows, lead, w, t, v, v_ld);
    if (t < n) wino_input_vec(m, false, fv_tail(n - t), rows, lead, w, t, v, v_ld);
}

/* Output transform of one vector of tiles (mask: its lanes) of one channel: tile t's element
 * xi of the product is mp[xi * m_ld + t]; its output pixel (a, b), a, b < m, goes to
 * y[(m a + b) * y_ld + t]. Unrolled as wino_input_vec. */
FV_INLINE void wino_output_vec(const int m, const bool full, fv_m mask, const float *mp, int64_t m_ld, int64_t t,
                               float *y, int64_t y_ld) {
    const int A = m + 2;
    fv_v r[4][6]; /* r[a][j] = (A^T M)[a][j] */
#pragma GCC unroll 6
    for (int j = 0; j < A; j++) {
        fv_v col[6], o[4];
#pragma GCC unroll 6
        for (int i = 0; i < A; i++) col[i] = wino_load(mp + (A * i + j) * m_ld + t, full, mask);
        if (m == 4) wino_at6(col, o);
        else wino_at4(col, o);
#pragma GCC unroll 4
        for (int a = 0; a < m; a++) r[a][j] = o[a];
    }
#pragma GCC unroll 4
    for (int a = 0; a < m; a++) {
        fv_v o[4];
        if (m == 4) wino_at6(r[a], o);
        else wino_at4(r[a], o);
#pragma GCC unroll 4
        for (int b = 0; b < m; b++) wino_store(y + (m * a + b) * y_ld + t, full, mask, o[b]);
    }
}

FV_INLINE void wino_output_m(const int m, int64_t n, const float *mp, int64_t m_ld, float *y, int64_t y_ld) {
    int64_t t = 0;
    for (; t + FV_W <= n; t += FV_W) wino_output_vec(m, true, fv_tail(FV_W), mp, m_ld, t, y, y_ld);
    if (t < n) wino_output_vec(m, false, fv_tail(n - t), mp, m_ld, t, y, y_ld);
}

/* The exported forms: m a constant in each call, so the loops over a tile unroll. */
FV_TARGET static void FV_NAME(f32_wino_input)(int m, int64_t n, const float *const rows[6], int64_t lead, int64_t w,
                                              float *v, int64_t v_ld) {
    if (m == 4) wino_input_m(4, n, rows, lead, w, v, v_ld);
    else wino_input_m(2, n, rows, lead, w, v, v_ld);
}

FV_TARGET static void FV_NAME(f32_interleave)(int m, int64_t n, const float *y, int64_t y_ld, float *x) {
    if (m == 4) interleave_m(4, n, y, y_ld, x);
    else interleave_m(2, n, y, y_ld, x);
}

FV_TARGET static void FV_NAME(f32_wino_output)(int m, int64_t n, const float *mp, int64_t m_ld, float *y,
                                               int64_t y_ld) {
    if (m == 4) wino_output_m(4, n, mp, m_ld, y, y_ld);
    else wino_output_m(2, n, mp, m_ld, y, y_ld);
}
