/*
 * The gemv entry point (af_gemm_isa_cfg.gemv) of one ISA file, written once. The including file
 * defines TARGET, GEMV_LANES (floats per vector), GEMV_NAME (the function's name) and, where its
 * panels can be three vectors wide, GEMV_THREE_VECTORS (all undefined here after use), and before
 * the include gemv_panels(NP, NV, a, ps, w, kc, v, out) for NP <= AF_GEMV_PANELS panels of NV
 * vectors each (NV <= 3 with GEMV_THREE_VECTORS, else 2).
 */
#define GEMV_CASE(NP, NV)                                                                          \
    case NP: gemv_panels(NP, NV, a, ps, w, kc, v, out); break;
TARGET static void GEMV_NAME(const float *a, int64_t ps, int w, int n_panels, int64_t kc, const float *v,
                             float *out) {
    if (w <= GEMV_LANES) {
        switch (n_panels) {
            GEMV_CASE(1, 1) GEMV_CASE(2, 1) GEMV_CASE(3, 1) GEMV_CASE(4, 1)
            GEMV_CASE(5, 1) GEMV_CASE(6, 1) GEMV_CASE(7, 1) GEMV_CASE(8, 1)
        }
        return;
    }
#ifdef GEMV_THREE_VECTORS
    if (w > 2 * GEMV_LANES) { /* three vectors a panel (the 8x48 tile's): three panels, nine chains */
        for (; n_panels > 0; n_panels -= 3, a += 3 * ps, out += 3 * w) {
            switch (n_panels < 3 ? n_panels : 3) {
                GEMV_CASE(1, 3) GEMV_CASE(2, 3) GEMV_CASE(3, 3)
            }
        }
        return;
    }
#endif
    /* Two vectors a panel: four panels at a time keep eight chains going. */
    for (; n_panels > 0; n_panels -= 4, a += 4 * ps, out += 4 * w) {
        switch (n_panels < 4 ? n_panels : 4) {
            GEMV_CASE(1, 2) GEMV_CASE(2, 2) GEMV_CASE(3, 2) GEMV_CASE(4, 2)
        }
    }
}
#undef GEMV_CASE
#undef GEMV_LANES
#undef GEMV_NAME
#undef GEMV_THREE_VECTORS
