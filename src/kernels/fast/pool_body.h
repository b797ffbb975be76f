/*
 * The pooling loops, written once over the fv_* vector layer (see elementwise_body.h for what the
 * including file defines). A 2-D window plane is computed output row by output row. Where the
 * padded row fits the row buffer, the window's rows are first reduced into it (a max, or a sum),
 * with the pad value around them, and every output column, the borders' included, runs W per
 * vector along it (strided loads: contiguous for stride 1, an even-lane permute for stride 2, a
 * gather otherwise); an average's border column whose count differs is redone alone with clipped
 * taps. Otherwise the interior columns run per vector over the kh rows and the borders one at a
 * time. MaxPool skips NaN taps in the vector path; averages sum in float over the window (at most
 * kh * kw terms) and multiply by the reciprocal of the count.
 */

/* The taps t in [0, k) with 0 <= base + t < limit: [*lo, *hi), empty when *lo >= *hi. */
static inline void pl_range(int64_t base, int64_t limit, int64_t k, int64_t *lo, int64_t *hi) {
    *lo = base >= 0 ? 0 : -base;
    *hi = limit - base < k ? limit - base : k;
}

/* The divisor of an average's output column ox (see pl_column). */
static inline int64_t pl_count(const af_pool2d *g, int64_t rows, int64_t cnt_hp, int64_t ox) {
    int64_t lo, hi;
    if (g->include_pad) {
        pl_range(ox * g->sw, g->ew, g->kw, &lo, &hi);
        return cnt_hp * (hi > lo ? hi - lo : 0);
    }
    pl_range(ox * g->sw - g->pw, g->w, g->kw, &lo, &hi);
    return rows * (hi > lo ? hi - lo : 0);
}

/* Output column ox of an output row whose valid input rows are y0 .. y0 + rows - 1; cnt_hp is the
 * row count inside the padded extent (count_include_pad). Taps as the reference takes them: the
 * first one, then each larger one. Compiled for the ISA of its callers: built for the baseline
 * (legacy SSE) and called from AVX-512 code with the upper register halves dirty, every call
 * stalled on Intel (an AveragePool without count_include_pad, 768x17x17: 6.3 ms, ONNX Runtime's
 * 0.76). */
FV_TARGET static float pl_column(const af_pool2d *g, const float *x, int64_t y0, int64_t rows, int64_t cnt_hp, int64_t ox) {
    const int64_t bx = ox * g->sw - g->pw;
    int64_t lo, hi;
    pl_range(bx, g->w, g->kw, &lo, &hi);
    if (g->max) {
        float best = -INFINITY;
        bool any = false;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t t = lo; t < hi; t++) {
                const float v = x[(y0 + r) * g->w + bx + t];
                if (!any || v > best) best = v;
                any = true;
            }
        return best;
    }
    float sum = 0.0f;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t t = lo; t < hi; t++) sum += x[(y0 + r) * g->w + bx + t];
    const int64_t cnt = pl_count(g, rows, cnt_hp, ox);
    return cnt > 0 ? sum / (float)cnt : NAN;
}

#define PL_ROW_MAX 2048 /* widest padded input row whose window goes through a row buffer */
#define PL_BUF_FLOATS 4096 /* the row buffers of one chunk (16 KiB of stack) */

/* Output columns [ox0, ox1) of one output row, whose taps all lie inside the rows x0 (interior
 * columns, or any over a zero-extended row): MAX_ picks max or sum, SC_ the stride class (1, 2,
 * or 3 for a gather); both are constants at every call, so each pair compiles to its own loop. */
FV_INLINE void pl_interior(const af_pool2d *g, const float *x0, int64_t rows, float cnt, float *yrow, const int MAX_,
                           const int SC_, int64_t ox0, int64_t ox1) {
    const int64_t sw = g->sw, kw = g->kw, w = g->w;
    for (int64_t ox = ox0; ox < ox1; ox += FV_W) {
        const int64_t nl = ox1 - ox < FV_W ? ox1 - ox : FV_W;
        fv_v acc = MAX_ ? fv_set1(-INFINITY) : fv_zero();
        for (int64_t r = 0; r < rows; r++) {
            const float *p = x0 + r * w + ox * sw - g->pw;
            for (int64_t t = 0; t < kw; t++) {
                const fv_v v = SC_ == 1   ? fv_load_s1(p + t, nl)
                               : SC_ == 2 ? fv_load_s2(p + t, nl)
                                          : fv_load_sg(p + t, sw, nl);
                acc = MAX_ ? fv_max(v, acc) : fv_add(acc, v);
            }
        }
        /* An empty window: 0 / 0 = NaN, as the reference. */
        if (!MAX_) acc = cnt > 0 ? fv_mul(acc, fv_set1(1.0f / cnt)) : fv_div(acc, fv_set1(cnt));
        if (nl == FV_W) fv_store(yrow + ox, acc);
        else fv_storem(yrow + ox, fv_tail(nl), acc);
    }
}

/* The rows [0, rows) of x0 reduced into one at vin[0, w): a max (NaN taps skipped, as in
 * pl_interior) or a sum. */
FV_INLINE void pl_reduce_rows(const af_pool2d *g, const float *x0, int64_t rows, float *vin, bool max) {
    const int64_t w = g->w;
    int64_t j = 0;
    for (; j + FV_W <= w; j += FV_W) {
        fv_v acc = max ? fv_set1(-INFINITY) : fv_zero();
        for (int64_t r = 0; r < rows; r++) {
            const fv_v v = fv_load(x0 + r * w + j);
            acc = max ? fv_max(v, acc) : r ? fv_add(acc, v) : v;
        }
        fv_store(vin + j, acc);
    }
    if (j < w) {
        const fv_m m = fv_tail(w - j);
        fv_v acc = max ? fv_set1(-INFINITY) : fv_zero();
        for (int64_t r = 0; r < rows; r++) {
            const fv_v v = fv_loadm(x0 + r * w + j, m);
            acc = max ? fv_max(v, acc) : r ? fv_add(acc, v) : v;
        }
        fv_storem(vin + j, m, acc);
    }
}

/* Output row oy's window rows: the valid ones y0 .. y0 + *rows - 1, and (count_include_pad) the
 * count inside the padded extent. */
FV_INLINE void pl_rows_of(const af_pool2d *g, int64_t oy, int64_t *y0, int64_t *rows, int64_t *cnt_hp) {
    const int64_t by = oy * g->sh - g->ph;
    int64_t rlo, rhi;
    pl_range(by, g->h, g->kh, &rlo, &rhi);
    *rows = rhi > rlo ? rhi - rlo : 0;
    *y0 = by + rlo;
    *cnt_hp = *rows;
    if (g->include_pad) {
        int64_t a, b;
        pl_range(oy * g->sh, g->eh, g->kh, &a, &b);
        *cnt_hp = b > a ? b - a : 0;
    }
}

/* One output row along a reduced row vin (its window's rows already one): every column, the
 * borders' included (a max ignores the -inf pad; a sum's count is redone where it differs). */
FV_INLINE void pl_row_along(const af_pool2d *g, const float *x, const float *vin, int64_t y0, int64_t rows,
                            int64_t cnt_hp, float *yrow) {
    const int sc = g->sw == 1 ? 1 : g->sw == 2 ? 2 : 3;
    const int64_t icnt = (g->include_pad ? cnt_hp : rows) * g->kw;
    const float cnt = (float)icnt;
    if (g->max) {
        if (sc == 1) pl_interior(g, vin, 1, cnt, yrow, 1, 1, 0, g->ow);
        else if (sc == 2) pl_interior(g, vin, 1, cnt, yrow, 1, 2, 0, g->ow);
        else pl_interior(g, vin, 1, cnt, yrow, 1, 3, 0, g->ow);
        return;
    }
    if (sc == 1) pl_interior(g, vin, 1, cnt, yrow, 0, 1, 0, g->ow);
    else if (sc == 2) pl_interior(g, vin, 1, cnt, yrow, 0, 2, 0, g->ow);
    else pl_interior(g, vin, 1, cnt, yrow, 0, 3, 0, g->ow);
    for (int64_t ox = 0; ox < g->ox_lo; ox++)
        if (pl_count(g, rows, cnt_hp, ox) != icnt) yrow[ox] = pl_column(g, x, y0, rows, cnt_hp, ox);
    for (int64_t ox = g->ox_hi; ox < g->ow; ox++)
        if (pl_count(g, rows, cnt_hp, ox) != icnt) yrow[ox] = pl_column(g, x, y0, rows, cnt_hp, ox);
}

/* Output rows [oy0, oy1) of one plane without a row buffer: interior columns per vector over the
 * window's rows, the borders one at a time. */
FV_INLINE void pl_rows_direct(const af_pool2d *g, const float *x, float *y, int64_t oy0, int64_t oy1) {
    const int sc = g->sw == 1 ? 1 : g->sw == 2 ? 2 : 3;
    for (int64_t oy = oy0; oy < oy1; oy++) {
        int64_t y0, rows, cnt_hp;
        pl_rows_of(g, oy, &y0, &rows, &cnt_hp);
        float *yrow = y + oy * g->ow;
        const float *x0 = rows > 0 ? x + y0 * g->w : x;
        const float cnt = (float)((g->include_pad ? cnt_hp : rows) * g->kw);
        for (int64_t ox = 0; ox < g->ox_lo; ox++) yrow[ox] = pl_column(g, x, y0, rows, cnt_hp, ox);
        for (int64_t ox = g->ox_hi; ox < g->ow; ox++) yrow[ox] = pl_column(g, x, y0, rows, cnt_hp, ox);
        if (g->max) {
            if (sc == 1) pl_interior(g, x0, rows, cnt, yrow, 1, 1, g->ox_lo, g->ox_hi);
            else if (sc == 2) pl_interior(g, x0, rows, cnt, yrow, 1, 2, g->ox_lo, g->ox_hi);
            else pl_interior(g, x0, rows, cnt, yrow, 1, 3, g->ox_lo, g->ox_hi);
        } else {
            if (sc == 1) pl_interior(g, x0, rows, cnt, yrow, 0, 1, g->ox_lo, g->ox_hi);
            else if (sc == 2) pl_interior(g, x0, rows, cnt, yrow, 0, 2, g->ox_lo, g->ox_hi);
            else pl_interior(g, x0, rows, cnt, yrow, 0, 3, g->ox_lo, g->ox_hi);
        }
    }
}

FV_TARGET static void FV_NAME(f32_pool2d_plane)(const af_pool2d *g, const float *x, float *y, int64_t oy0,
                                                 int64_t oy1) {
    /* Row buffers: each holds a window's rows reduced to one at vin = buffer + pw, the pad value
     * (-inf for a max, 0 for a sum) left of it and past it up to the last window's end. */
    const int64_t span = (g->ow - 1) * g->sw + g->kw, end = g->pw + g->w > span ? g->pw + g->w : span;
    if (end > PL_ROW_MAX || oy1 <= oy0) {
        pl_rows_direct(g, x, y, oy0, oy1);
        return;
    }
    /* The window's rows reduced into one, then every column's window along it: each input vector
     * is loaded once per output row instead of once per tap, the strided loads run on one row, and
     * no column runs alone (ResNet-50's 3x3 stride-2 pool over 112x112x64 0.36 -> 0.15 ms;
     * GoogLeNet's and Inception-v3's 3x3 pools with a pad of 1 on planes 35 to 7 wide spent most
     * of their time in their border columns). A chunk of rows is reduced before any is read
     * along: the reads at a tap's offset straddle the reduction's vector stores, which a load
     * cannot take from the store buffer, and read back at once each waited for the stores to
     * reach L1. With pl_interior's average a product by 1 / count instead of a division (whose
     * latency each row waited on): a 3x3 average over 768x19x19 0.35 -> 0.27 ms. */
    float buf[PL_BUF_FLOATS];
    const int64_t stride = (end + FV_W - 1) / FV_W * FV_W, chunk = PL_BUF_FLOATS / stride;
    const float pad = g->max ? -INFINITY : 0.0f;
    for (int64_t r = 0; r < chunk && r < oy1 - oy0; r++) {
        float *row = buf + r * stride;
        for (int64_t j = 0; j < g->pw; j++) row[j] = pad;
        for (int64_t j = g->pw + g->w; j < end; j++) row[j] = pad;
    }
    for (int64_t c0 = oy0; c0 < oy1; c0 += chunk) {
        const int64_t c1 = c0 + chunk < oy1 ? c0 + chunk : oy1;
        for (int64_t oy = c0; oy < c1; oy++) {
            int64_t y0, rows, cnt_hp;
            pl_rows_of(g, oy, &y0, &rows, &cnt_hp);
            if (rows > 0) pl_reduce_rows(g, x + y0 * g->w, rows, buf + (oy - c0) * stride + g->pw, g->max);
        }
        for (int64_t oy = c0; oy < c1; oy++) {
            int64_t y0, rows, cnt_hp;
            pl_rows_of(g, oy, &y0, &rows, &cnt_hp);
            if (rows > 0) pl_row_along(g, x, buf + (oy - c0) * stride + g->pw, y0, rows, cnt_hp, y + oy * g->ow);
            else pl_rows_direct(g, x, y, oy, oy + 1); /* a window wholly in the pad */
        }
    }
}

/* The max or the mean of one plane of n contiguous elements; the mean's sum runs in double. */
FV_TARGET static void FV_NAME(f32_global_pool)(bool max, int64_t n, const float *x, float *y) {
    int64_t i = 0;
    if (max) {
        const fv_v ninf = fv_set1(-INFINITY);
        fv_v acc = ninf;
        for (; i + FV_W <= n; i += FV_W) acc = fv_max(fv_load(x + i), acc);
        if (i < n) acc = fv_max(fv_loadmf(x + i, fv_tail(n - i), ninf), acc);
        *y = fv_hmax(acc);
        return;
    }
    fv_dacc acc = fv_dacc_zero();
    for (; i + FV_W <= n; i += FV_W) fv_dacc_add(&acc, fv_load(x + i));
    if (i < n) fv_dacc_add(&acc, fv_loadm(x + i, fv_tail(n - i)));
    *y = n > 0 ? (float)(fv_dacc_sum(acc) / (double)n) : NAN;
}
