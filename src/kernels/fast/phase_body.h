/*
 * The implicit-GEMM convolution's phase planes (see src/kernels/gemm/conv_implicit.h), written
 * once over the fv_* vector layer and compiled per ISA like elementwise_body.h, after it (its row
 * copies) and after the ISA's deinterleave (FV_HAS_DEINT: fv_load_window, fv_deint2).
 */

#ifdef FV_HAS_DEINT
/* Both column phases of a stride-2 row at once: y0[j] = xrow[2 j + c0], y1[j] = xrow[2 j + c0 + 1]
 * for j < wq, zero outside the row's w elements. Each 2 FV_W input floats are loaded once and split
 * by parity, where a phase at a time loaded them twice and spent as long again on each short
 * row's bounds and scalar pads. */
FV_INLINE void phase_pair_row(int64_t wq, const float *xrow, int64_t w, int64_t c0, float *y0, float *y1) {
    for (int64_t j = 0; j < wq; j += FV_W) {
        const int64_t c = 2 * j + c0;
        fv_v in[4], out[4];
        in[0] = fv_load_window(xrow, c, w);
        in[1] = fv_load_window(xrow, c + FV_W, w);
        fv_deint2(in, out);
        if (wq - j >= FV_W) {
            fv_store(y0 + j, out[0]);
            fv_store(y1 + j, out[1]);
        } else {
            const fv_m m = fv_tail(wq - j);
            fv_storem(y0 + j, m, out[0]);
            fv_storem(y1 + j, m, out[1]);
        }
    }
}
#endif

/* The nb column phases b of one row phase of a plane: phase b's hq x wq plane at y + b * plane
 * holds x[sy i + r0][sx j + c0 + b] (as strided_plane with c0 + b), zero outside the h x w plane
 * x. Row by row, every phase of a row while it is in L1. */
FV_TARGET static void FV_NAME(f32_phase_planes)(int64_t hq, int64_t wq, int64_t sy, int64_t sx, int64_t nb,
                                                const float *x, int64_t h, int64_t w, int64_t r0, int64_t c0,
                                                float *y, int64_t plane) {
    if (nb == 1) { /* one phase (a 1x1 kernel's): the plain copy, whose rows cost least */
        FV_NAME(f32_strided_plane)(hq, wq, sy, sx, x, h, w, r0, c0, y);
        return;
    }
    if (nb > AF_PHASES_MAX) { /* a kernel wider than its stride's 16 phases: in turn */
        for (int64_t b = 0; b < nb; b += AF_PHASES_MAX)
            FV_NAME(f32_phase_planes)(hq, wq, sy, sx, nb - b < AF_PHASES_MAX ? nb - b : AF_PHASES_MAX, x, h, w, r0,
                                      c0 + b, y + b * plane, plane);
        return;
    }
    int64_t lo[AF_PHASES_MAX], hi[AF_PHASES_MAX];
    for (int64_t b = 0; b < nb; b++) strided_cols(wq, sx, w, c0 + b, &lo[b], &hi[b]);
    for (int64_t i = 0; i < hq; i++) {
        const int64_t row = sy * i + r0;
        float *yi = y + i * wq;
        if (row < 0 || row >= h) {
            for (int64_t b = 0; b < nb; b++) zero_row(wq, yi + b * plane);
            continue;
        }
        const float *xrow = x + row * w;
#ifdef FV_HAS_DEINT
        if (sx == 2 && nb == 2) {
            phase_pair_row(wq, xrow, w, c0, yi, yi + plane);
            continue;
        }
#endif
        for (int64_t b = 0; b < nb; b++) strided_row(wq, sx, xrow, c0 + b, lo[b], hi[b], yi + b * plane);
    }
}
