/*
 * Vector float math for the fast kernels: exp, sigmoid, tanh, erf, log, softplus and expm1 (of
 * x <= 0) on __m512 (AVX-512) and __m256 (AVX2+FMA). Header-only static inline functions, each
 * compiled for its ISA through a target attribute, so only files that call them from matching
 * targets include this header.
 *
 *   __m512 y = af_vsigmoid_avx512(x);   // inside a function with the avx512 target attribute
 *
 * Maximum error against the libm float result (expf, 1/(1+expf(-x)), tanhf, erff), measured by
 * tests/unit/test_epilogue.c over every multiple of 1/64 in [-20, 20], a log-spaced sweep of
 * tiny and huge magnitudes and the special values (+-0, +-inf, NaN, denormals):
 *   exp      <= 1 ULP   (<= 1 against the correctly rounded value; 0 below -104, inf above 88.72)
 *   sigmoid  <= 3 ULP   (<= 2 against the correctly rounded value; the libm formula is 2 off)
 *   tanh     <= 2 ULP   (<= 1 against the correctly rounded value)
 *   erf      <= 2 ULP   (<= 2 against the correctly rounded value)
 *   log      <= 1 ULP   (-inf at +-0, NaN below 0, +inf at +inf; denormals exact in range)
 *   softplus <= 2 ULP   log(1 + e^x) as max(x, 0) + log1p(e^-|x|): never overflows
 *   expm1    <= 2 ULP   e^x - 1 for x <= 0 only (Elu's negative branch); x above 0 counts as 0
 * Results below FLT_MIN are held to an absolute 2^-126 instead (the libm sigmoid formula itself
 * is far off there). NaN in gives NaN out; tanh and erf keep the sign of zero.
 *   gelu_erf  x Phi(x) = x/2 (1 + erf(x / sqrt 2)), against the exact value (erfc in double):
 *             within 2^-23 (1 + |x|) (6.7e-8 seen), relatively within 2^-22 for x >= 0 (1.5e-7
 *             seen) and 2^-18 for x > -5.5 (2.2e-6 seen; the libm formula's 1 + erff cancels
 *             there, millions of ULP off at -5). -0 below -5.54 and x above 5.54, as the formula
 *             gives in float; NaN for NaN and -inf.
 * The polynomials are Chebyshev fits (mpmath chebyfit) of our own:
 *   exp:  e^r = 1 + r + r^2 Q(r), r in [-ln2/2, ln2/2], after x = n ln2 + r (Cody-Waite split)
 *   tanh: |x| < 0.625: x + x^3 P(x^2); else 1 - 2e/(1 + e), e = exp(-2|x|)
 *   erf:  |x| <= 1: x P(x^2); 1 < |x| < 3.92: 1 - exp(L(|x|)), L ~ log erfc; beyond: +-1
 *   log:  x = 2^e (1 + f), 1 + f in [sqrt(1/2), sqrt 2): log x = e ln2 + f - f^2/2 + f^3 G(f) (G
 *         degree 8); softplus's log1p(t), t = e^-|x| in (0, 1], takes f = t (exact) up to
 *         sqrt 2 - 1 and f = (t - 1)/2, e = 1 above it, so it needs no division
 *   expm1: exp's e^r - 1 = r + r^2 Q(r) kept apart from the 1: 2^n (r + r^2 Q) + (2^n - 1), one
 *         fused multiply-add; r = x exactly for |x| < ln2/2, so tiny x keep their relative accuracy
 *   gelu_erf: h = erfc(|x| / sqrt 2) / 2 = 2^G(|x|), G a degree-12 fit of log2 h on [0, 3.92 sqrt 2]
 *             (one polynomial, no branches: GELU needs erf's absolute accuracy only), 2^r a
 *             degree-6 fit on [-1/2, 1/2]; Phi = 1 - h for x >= 0, h below.
 */
#ifndef AF_KERNELS_VMATH_X86_H
#define AF_KERNELS_VMATH_X86_H

#include <float.h>
#include <immintrin.h>
#include <math.h>

#define AF_VM_LOG2E 1.44269504089f
#define AF_VM_LN2_HI 0.693359375f     /* ln 2 rounded to 9 significant bits: n*LN2_HI is exact */
#define AF_VM_LN2_LO -2.12194440e-4f  /* ln 2 - LN2_HI */
#define AF_VM_EXP_LO -104.0f          /* exp rounds to +0 below this */
#define AF_VM_EXP_HI 89.0f            /* and to +inf above 88.72 */

#define AF_VM_EXP_Q4 1.392617612e-03f
#define AF_VM_EXP_Q3 8.363173075e-03f
#define AF_VM_EXP_Q2 4.166655466e-02f
#define AF_VM_EXP_Q1 1.666657703e-01f
#define AF_VM_EXP_Q0 5.000000000e-01f

#define AF_VM_TANH_SMALL 0.625f
#define AF_VM_TANH_P5 2.292744816e-03f
#define AF_VM_TANH_P4 -8.343945516e-03f
#define AF_VM_TANH_P3 2.176891865e-02f
#define AF_VM_TANH_P2 -5.395925958e-02f
#define AF_VM_TANH_P1 1.333330356e-01f
#define AF_VM_TANH_P0 -3.333333317e-01f

#define AF_VM_ERF_ONE 3.92f /* erf(x) rounds to 1 from here on */
#define AF_VM_ERF_P6 7.875875063e-05f
#define AF_VM_ERF_P5 -8.016864287e-04f
#define AF_VM_ERF_P4 5.189087423e-03f
#define AF_VM_ERF_P3 -2.685421201e-02f
#define AF_VM_ERF_P2 1.128359472e-01f
#define AF_VM_ERF_P1 -3.761262667e-01f
#define AF_VM_ERF_P0 1.128379166e+00f
#define AF_VM_ERF_L9 -6.364581958e-08f
#define AF_VM_ERF_L8 3.055584715e-06f
#define AF_VM_ERF_L7 -5.977114018e-05f
#define AF_VM_ERF_L6 6.721610164e-04f
#define AF_VM_ERF_L5 -5.018544990e-03f
#define AF_VM_ERF_L4 2.699728968e-02f
#define AF_VM_ERF_L3 -1.109089453e-01f
#define AF_VM_ERF_L2 -6.310834048e-01f
#define AF_VM_ERF_L1 -1.130609237e+00f
#define AF_VM_ERF_L0 4.019574234e-04f

/* 3.92 sqrt 2: from here on erff(x / sqrt 2) is +-1 in float, and 1 - h rounds to 1 */
#define AF_VM_GELU_MAX 5.54371716f
#define AF_VM_GELU_G0 -1.000000000e+00f
#define AF_VM_GELU_G1 -1.151103933e+00f
#define AF_VM_GELU_G2 -4.592262061e-01f
#define AF_VM_GELU_G3 -5.241049974e-02f
#define AF_VM_GELU_G4 6.870549320e-03f
#define AF_VM_GELU_G5 9.973785442e-05f
#define AF_VM_GELU_G6 -3.554328091e-04f
#define AF_VM_GELU_G7 1.117476630e-04f
#define AF_VM_GELU_G8 -2.127423468e-05f
#define AF_VM_GELU_G9 2.735673888e-06f
#define AF_VM_GELU_G10 -2.331649025e-07f
#define AF_VM_GELU_G11 1.193888854e-08f
#define AF_VM_GELU_G12 -2.783294103e-10f
#define AF_VM_EXP2_E1 6.931472067e-01f
#define AF_VM_EXP2_E2 2.402265121e-01f
#define AF_VM_EXP2_E3 5.550327214e-02f
#define AF_VM_EXP2_E4 9.618025603e-03f
#define AF_VM_EXP2_E5 1.340043217e-03f
#define AF_VM_EXP2_E6 1.546973198e-04f

#define AF_VM_SQRT2 1.41421356f
#define AF_VM_LOG_G8 6.971611828e-02f
#define AF_VM_LOG_G7 -1.147973388e-01f
#define AF_VM_LOG_G6 1.168541983e-01f
#define AF_VM_LOG_G5 -1.242568716e-01f
#define AF_VM_LOG_G4 1.424905807e-01f
#define AF_VM_LOG_G3 -1.666780263e-01f
#define AF_VM_LOG_G2 2.000071555e-01f
#define AF_VM_LOG_G1 -2.499999702e-01f
#define AF_VM_LOG_G0 3.333333135e-01f
#define AF_VM_EXPM1_LO -25.0f /* e^x - 1 rounds to -1 below this */

/* ---- AVX-512 ---------------------------------------------------------------------------------- */
#define AF_VM_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma"), always_inline))
#define AF_VM_Z(c) _mm512_set1_ps(c)

AF_VM_TARGET_AVX512 static inline __m512 af_vexp_avx512(__m512 x) {
    /* max/min return their second operand when one is NaN, so NaN flows through. */
    x = _mm512_min_ps(AF_VM_Z(AF_VM_EXP_HI), _mm512_max_ps(AF_VM_Z(AF_VM_EXP_LO), x));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, AF_VM_Z(AF_VM_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, AF_VM_Z(AF_VM_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, AF_VM_Z(AF_VM_LN2_LO), r);
    __m512 q = _mm512_fmadd_ps(AF_VM_Z(AF_VM_EXP_Q4), r, AF_VM_Z(AF_VM_EXP_Q3));
    q = _mm512_fmadd_ps(q, r, AF_VM_Z(AF_VM_EXP_Q2));
    q = _mm512_fmadd_ps(q, r, AF_VM_Z(AF_VM_EXP_Q1));
    q = _mm512_fmadd_ps(q, r, AF_VM_Z(AF_VM_EXP_Q0));
    __m512 p = _mm512_fmadd_ps(q, _mm512_mul_ps(r, r), r);
    p = _mm512_add_ps(p, AF_VM_Z(1.0f));
    return _mm512_scalef_ps(p, n); /* p * 2^n, denormals and overflow rounded correctly */
}

AF_VM_TARGET_AVX512 static inline __m512 af_vsigmoid_avx512(__m512 x) {
    /* e = exp(-|x|) never overflows; sigmoid = 1/(1+e) for x >= 0, e/(1+e) below (one division:
     * for x < 0 this rounds once where e * (1/(1+e)) would round twice). */
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    __m512 e = af_vexp_avx512(_mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(x), sign)));
    __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    __m512 num = _mm512_mask_mov_ps(AF_VM_Z(1.0f), neg, e);
    return _mm512_div_ps(num, _mm512_add_ps(AF_VM_Z(1.0f), e));
}

AF_VM_TARGET_AVX512 static inline __m512 af_vtanh_avx512(__m512 x) {
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    __m512 ax = _mm512_castsi512_ps(_mm512_andnot_si512(sign, _mm512_castps_si512(x)));
    __m512 x2 = _mm512_mul_ps(x, x);
    __m512 p = _mm512_fmadd_ps(AF_VM_Z(AF_VM_TANH_P5), x2, AF_VM_Z(AF_VM_TANH_P4));
    p = _mm512_fmadd_ps(p, x2, AF_VM_Z(AF_VM_TANH_P3));
    p = _mm512_fmadd_ps(p, x2, AF_VM_Z(AF_VM_TANH_P2));
    p = _mm512_fmadd_ps(p, x2, AF_VM_Z(AF_VM_TANH_P1));
    p = _mm512_fmadd_ps(p, x2, AF_VM_Z(AF_VM_TANH_P0));
    const __m512i xsign = _mm512_and_si512(sign, _mm512_castps_si512(x));
    /* x + x^3 P loses the sign of -0; the result's sign is always x's, so put it back. */
    __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(x, x2), p, x);
    small = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(small), xsign));
    __m512 e = af_vexp_avx512(_mm512_mul_ps(ax, AF_VM_Z(-2.0f)));
    __m512 big = _mm512_sub_ps(AF_VM_Z(1.0f), _mm512_div_ps(_mm512_add_ps(e, e), _mm512_add_ps(AF_VM_Z(1.0f), e)));
    big = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(big), xsign));
    __mmask16 is_small = _mm512_cmp_ps_mask(ax, AF_VM_Z(AF_VM_TANH_SMALL), _CMP_LT_OQ);
    return _mm512_mask_mov_ps(big, is_small, small);
}

AF_VM_TARGET_AVX512 static inline __m512 af_verf_avx512(__m512 x) {
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    __m512 ax = _mm512_castsi512_ps(_mm512_andnot_si512(sign, _mm512_castps_si512(x)));
    __m512 x2 = _mm512_mul_ps(x, x);
    __m512 p = _mm512_fmadd_ps(AF_VM_Z(AF_VM_ERF_P6), x2, AF_VM_Z(AF_VM_ERF_P5));
    p = _mm512_fmadd_ps(p, x2, AF_VM_Z(AF_VM_ERF_P4));
    p = _mm512_fmadd_ps(p, x2, AF_VM_Z(AF_VM_ERF_P3));
    p = _mm512_fmadd_ps(p, x2, AF_VM_Z(AF_VM_ERF_P2));
    p = _mm512_fmadd_ps(p, x2, AF_VM_Z(AF_VM_ERF_P1));
    p = _mm512_fmadd_ps(p, x2, AF_VM_Z(AF_VM_ERF_P0));
    __m512 small = _mm512_mul_ps(x, p);
    __m512 t = _mm512_min_ps(AF_VM_Z(AF_VM_ERF_ONE), ax);
    __m512 l = _mm512_fmadd_ps(AF_VM_Z(AF_VM_ERF_L9), t, AF_VM_Z(AF_VM_ERF_L8));
    l = _mm512_fmadd_ps(l, t, AF_VM_Z(AF_VM_ERF_L7));
    l = _mm512_fmadd_ps(l, t, AF_VM_Z(AF_VM_ERF_L6));
    l = _mm512_fmadd_ps(l, t, AF_VM_Z(AF_VM_ERF_L5));
    l = _mm512_fmadd_ps(l, t, AF_VM_Z(AF_VM_ERF_L4));
    l = _mm512_fmadd_ps(l, t, AF_VM_Z(AF_VM_ERF_L3));
    l = _mm512_fmadd_ps(l, t, AF_VM_Z(AF_VM_ERF_L2));
    l = _mm512_fmadd_ps(l, t, AF_VM_Z(AF_VM_ERF_L1));
    l = _mm512_fmadd_ps(l, t, AF_VM_Z(AF_VM_ERF_L0));
    __m512 big = _mm512_sub_ps(AF_VM_Z(1.0f), af_vexp_avx512(l));
    big = _mm512_mask_mov_ps(big, _mm512_cmp_ps_mask(ax, AF_VM_Z(AF_VM_ERF_ONE), _CMP_GE_OQ), AF_VM_Z(1.0f));
    const __m512i xsign = _mm512_and_si512(sign, _mm512_castps_si512(x));
    big = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(big), xsign));
    __mmask16 is_small = _mm512_cmp_ps_mask(ax, AF_VM_Z(1.0f), _CMP_LE_OQ);
    return _mm512_mask_mov_ps(big, is_small, small);
}

/* GELU, erf form (see the top of this file). */
AF_VM_TARGET_AVX512 static inline __m512 af_vgelu_erf_avx512(__m512 x) {
    const __m512 a = _mm512_abs_ps(x);
    __m512 g = _mm512_fmadd_ps(AF_VM_Z(AF_VM_GELU_G12), a, AF_VM_Z(AF_VM_GELU_G11));
    g = _mm512_fmadd_ps(g, a, AF_VM_Z(AF_VM_GELU_G10));
    g = _mm512_fmadd_ps(g, a, AF_VM_Z(AF_VM_GELU_G9));
    g = _mm512_fmadd_ps(g, a, AF_VM_Z(AF_VM_GELU_G8));
    g = _mm512_fmadd_ps(g, a, AF_VM_Z(AF_VM_GELU_G7));
    g = _mm512_fmadd_ps(g, a, AF_VM_Z(AF_VM_GELU_G6));
    g = _mm512_fmadd_ps(g, a, AF_VM_Z(AF_VM_GELU_G5));
    g = _mm512_fmadd_ps(g, a, AF_VM_Z(AF_VM_GELU_G4));
    g = _mm512_fmadd_ps(g, a, AF_VM_Z(AF_VM_GELU_G3));
    g = _mm512_fmadd_ps(g, a, AF_VM_Z(AF_VM_GELU_G2));
    g = _mm512_fmadd_ps(g, a, AF_VM_Z(AF_VM_GELU_G1));
    g = _mm512_fmadd_ps(g, a, AF_VM_Z(AF_VM_GELU_G0));
    const __m512 n = _mm512_roundscale_ps(g, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 r = _mm512_sub_ps(g, n);
    __m512 e = _mm512_fmadd_ps(AF_VM_Z(AF_VM_EXP2_E6), r, AF_VM_Z(AF_VM_EXP2_E5));
    e = _mm512_fmadd_ps(e, r, AF_VM_Z(AF_VM_EXP2_E4));
    e = _mm512_fmadd_ps(e, r, AF_VM_Z(AF_VM_EXP2_E3));
    e = _mm512_fmadd_ps(e, r, AF_VM_Z(AF_VM_EXP2_E2));
    e = _mm512_fmadd_ps(e, r, AF_VM_Z(AF_VM_EXP2_E1));
    e = _mm512_fmadd_ps(e, r, AF_VM_Z(1.0f));
    /* Past the fit (and for NaN) h is 0: -inf then gives -inf * 0 = NaN, as the formula does. */
    const __mmask16 inside = _mm512_cmp_ps_mask(a, AF_VM_Z(AF_VM_GELU_MAX), _CMP_LT_OQ);
    const __m512 h = _mm512_maskz_scalef_ps(inside, e, n);
    const __mmask16 pos = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ);
    return _mm512_mul_ps(x, _mm512_mask_sub_ps(h, pos, AF_VM_Z(1.0f), h));
}

/* e ln2 + log(1 + f) for f in [sqrt(1/2) - 1, sqrt 2 - 1] (see the top of this file). */
AF_VM_TARGET_AVX512 static inline __m512 af_vlog_reduced_avx512(__m512 f, __m512 e) {
    const __m512 z = _mm512_mul_ps(f, f);
    __m512 g = _mm512_fmadd_ps(AF_VM_Z(AF_VM_LOG_G8), f, AF_VM_Z(AF_VM_LOG_G7));
    g = _mm512_fmadd_ps(g, f, AF_VM_Z(AF_VM_LOG_G6));
    g = _mm512_fmadd_ps(g, f, AF_VM_Z(AF_VM_LOG_G5));
    g = _mm512_fmadd_ps(g, f, AF_VM_Z(AF_VM_LOG_G4));
    g = _mm512_fmadd_ps(g, f, AF_VM_Z(AF_VM_LOG_G3));
    g = _mm512_fmadd_ps(g, f, AF_VM_Z(AF_VM_LOG_G2));
    g = _mm512_fmadd_ps(g, f, AF_VM_Z(AF_VM_LOG_G1));
    g = _mm512_fmadd_ps(g, f, AF_VM_Z(AF_VM_LOG_G0));
    __m512 y = _mm512_fmadd_ps(g, _mm512_mul_ps(z, f), _mm512_mul_ps(e, AF_VM_Z(AF_VM_LN2_LO)));
    y = _mm512_fnmadd_ps(z, AF_VM_Z(0.5f), y);
    return _mm512_fmadd_ps(e, AF_VM_Z(AF_VM_LN2_HI), _mm512_add_ps(f, y));
}

AF_VM_TARGET_AVX512 static inline __m512 af_vlog_avx512(__m512 x) {
    /* getmant / getexp split denormals too: x = m 2^e, m in [1, 2), then m halves above sqrt 2. */
    __m512 m = _mm512_getmant_ps(x, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_zero);
    __m512 e = _mm512_getexp_ps(x);
    const __mmask16 big = _mm512_cmp_ps_mask(m, AF_VM_Z(AF_VM_SQRT2), _CMP_GT_OQ);
    m = _mm512_mask_mul_ps(m, big, m, AF_VM_Z(0.5f));
    e = _mm512_mask_add_ps(e, big, e, AF_VM_Z(1.0f));
    __m512 r = af_vlog_reduced_avx512(_mm512_sub_ps(m, AF_VM_Z(1.0f)), e);
    r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, AF_VM_Z(INFINITY), _CMP_EQ_OQ), AF_VM_Z(INFINITY));
    r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_EQ_OQ), AF_VM_Z(-INFINITY));
    r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), AF_VM_Z(NAN));
    return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x); /* NaN passes */
}

/* log(1 + e^x) = max(x, 0) + log1p(t), t = e^-|x| in [0, 1]. */
AF_VM_TARGET_AVX512 static inline __m512 af_vsoftplus_avx512(__m512 x) {
    const __m512 t = af_vexp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(x)));
    /* 1 + t above sqrt 2: (1 + t) / 2 = 1 + (t - 1) / 2 with e = 1, one rounding (FMA). */
    const __mmask16 big = _mm512_cmp_ps_mask(t, AF_VM_Z(AF_VM_SQRT2 - 1.0f), _CMP_GT_OQ);
    const __m512 f = _mm512_mask_fmadd_ps(t, big, AF_VM_Z(0.5f), AF_VM_Z(-0.5f));
    const __m512 e = _mm512_maskz_mov_ps(big, AF_VM_Z(1.0f));
    return _mm512_add_ps(_mm512_max_ps(_mm512_setzero_ps(), x), af_vlog_reduced_avx512(f, e));
}

/* e^x - 1 for x <= 0 (x above 0 counts as 0; NaN passes). */
AF_VM_TARGET_AVX512 static inline __m512 af_vexpm1_neg_avx512(__m512 x) {
    x = _mm512_max_ps(AF_VM_Z(AF_VM_EXPM1_LO), _mm512_min_ps(_mm512_setzero_ps(), x));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, AF_VM_Z(AF_VM_LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, AF_VM_Z(AF_VM_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, AF_VM_Z(AF_VM_LN2_LO), r);
    __m512 q = _mm512_fmadd_ps(AF_VM_Z(AF_VM_EXP_Q4), r, AF_VM_Z(AF_VM_EXP_Q3));
    q = _mm512_fmadd_ps(q, r, AF_VM_Z(AF_VM_EXP_Q2));
    q = _mm512_fmadd_ps(q, r, AF_VM_Z(AF_VM_EXP_Q1));
    q = _mm512_fmadd_ps(q, r, AF_VM_Z(AF_VM_EXP_Q0));
    const __m512 p = _mm512_fmadd_ps(q, _mm512_mul_ps(r, r), r); /* e^r - 1 */
    const __m512 s = _mm512_scalef_ps(AF_VM_Z(1.0f), n);         /* 2^n, n in [-36, 0] */
    return _mm512_fmadd_ps(s, p, _mm512_sub_ps(s, AF_VM_Z(1.0f)));
}

/* ---- AVX2 + FMA ------------------------------------------------------------------------------- */
#define AF_VM_TARGET_AVX2 __attribute__((target("avx2,fma"), always_inline))
#define AF_VM_Y(c) _mm256_set1_ps(c)

AF_VM_TARGET_AVX2 static inline __m256 af_vexp_avx2(__m256 x) {
    x = _mm256_min_ps(AF_VM_Y(AF_VM_EXP_HI), _mm256_max_ps(AF_VM_Y(AF_VM_EXP_LO), x));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, AF_VM_Y(AF_VM_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, AF_VM_Y(AF_VM_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, AF_VM_Y(AF_VM_LN2_LO), r);
    __m256 q = _mm256_fmadd_ps(AF_VM_Y(AF_VM_EXP_Q4), r, AF_VM_Y(AF_VM_EXP_Q3));
    q = _mm256_fmadd_ps(q, r, AF_VM_Y(AF_VM_EXP_Q2));
    q = _mm256_fmadd_ps(q, r, AF_VM_Y(AF_VM_EXP_Q1));
    q = _mm256_fmadd_ps(q, r, AF_VM_Y(AF_VM_EXP_Q0));
    __m256 p = _mm256_fmadd_ps(q, _mm256_mul_ps(r, r), r);
    p = _mm256_add_ps(p, AF_VM_Y(1.0f));
    /* 2^n as two normal factors (n in [-150, 128]): the first product is exact, the second
     * rounds once, into the denormals or to infinity where the true result lies. */
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i n1 = _mm256_srai_epi32(ni, 1);
    __m256i n2 = _mm256_sub_epi32(ni, n1);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

AF_VM_TARGET_AVX2 static inline __m256 af_vsigmoid_avx2(__m256 x) {
    __m256 e = af_vexp_avx2(_mm256_or_ps(x, AF_VM_Y(-0.0f)));
    __m256 num = _mm256_blendv_ps(AF_VM_Y(1.0f), e, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
    return _mm256_div_ps(num, _mm256_add_ps(AF_VM_Y(1.0f), e));
}

AF_VM_TARGET_AVX2 static inline __m256 af_vtanh_avx2(__m256 x) {
    const __m256 sign = AF_VM_Y(-0.0f);
    __m256 ax = _mm256_andnot_ps(sign, x);
    __m256 x2 = _mm256_mul_ps(x, x);
    __m256 p = _mm256_fmadd_ps(AF_VM_Y(AF_VM_TANH_P5), x2, AF_VM_Y(AF_VM_TANH_P4));
    p = _mm256_fmadd_ps(p, x2, AF_VM_Y(AF_VM_TANH_P3));
    p = _mm256_fmadd_ps(p, x2, AF_VM_Y(AF_VM_TANH_P2));
    p = _mm256_fmadd_ps(p, x2, AF_VM_Y(AF_VM_TANH_P1));
    p = _mm256_fmadd_ps(p, x2, AF_VM_Y(AF_VM_TANH_P0));
    const __m256 xsign = _mm256_and_ps(sign, x);
    __m256 small = _mm256_or_ps(_mm256_fmadd_ps(_mm256_mul_ps(x, x2), p, x), xsign);
    __m256 e = af_vexp_avx2(_mm256_mul_ps(ax, AF_VM_Y(-2.0f)));
    __m256 big = _mm256_sub_ps(AF_VM_Y(1.0f), _mm256_div_ps(_mm256_add_ps(e, e), _mm256_add_ps(AF_VM_Y(1.0f), e)));
    big = _mm256_or_ps(big, xsign);
    return _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, AF_VM_Y(AF_VM_TANH_SMALL), _CMP_LT_OQ));
}

AF_VM_TARGET_AVX2 static inline __m256 af_verf_avx2(__m256 x) {
    const __m256 sign = AF_VM_Y(-0.0f);
    __m256 ax = _mm256_andnot_ps(sign, x);
    __m256 x2 = _mm256_mul_ps(x, x);
    __m256 p = _mm256_fmadd_ps(AF_VM_Y(AF_VM_ERF_P6), x2, AF_VM_Y(AF_VM_ERF_P5));
    p = _mm256_fmadd_ps(p, x2, AF_VM_Y(AF_VM_ERF_P4));
    p = _mm256_fmadd_ps(p, x2, AF_VM_Y(AF_VM_ERF_P3));
    p = _mm256_fmadd_ps(p, x2, AF_VM_Y(AF_VM_ERF_P2));
    p = _mm256_fmadd_ps(p, x2, AF_VM_Y(AF_VM_ERF_P1));
    p = _mm256_fmadd_ps(p, x2, AF_VM_Y(AF_VM_ERF_P0));
    __m256 small = _mm256_mul_ps(x, p);
    __m256 t = _mm256_min_ps(AF_VM_Y(AF_VM_ERF_ONE), ax);
    __m256 l = _mm256_fmadd_ps(AF_VM_Y(AF_VM_ERF_L9), t, AF_VM_Y(AF_VM_ERF_L8));
    l = _mm256_fmadd_ps(l, t, AF_VM_Y(AF_VM_ERF_L7));
    l = _mm256_fmadd_ps(l, t, AF_VM_Y(AF_VM_ERF_L6));
    l = _mm256_fmadd_ps(l, t, AF_VM_Y(AF_VM_ERF_L5));
    l = _mm256_fmadd_ps(l, t, AF_VM_Y(AF_VM_ERF_L4));
    l = _mm256_fmadd_ps(l, t, AF_VM_Y(AF_VM_ERF_L3));
    l = _mm256_fmadd_ps(l, t, AF_VM_Y(AF_VM_ERF_L2));
    l = _mm256_fmadd_ps(l, t, AF_VM_Y(AF_VM_ERF_L1));
    l = _mm256_fmadd_ps(l, t, AF_VM_Y(AF_VM_ERF_L0));
    __m256 big = _mm256_sub_ps(AF_VM_Y(1.0f), af_vexp_avx2(l));
    big = _mm256_blendv_ps(big, AF_VM_Y(1.0f), _mm256_cmp_ps(ax, AF_VM_Y(AF_VM_ERF_ONE), _CMP_GE_OQ));
    big = _mm256_or_ps(big, _mm256_and_ps(sign, x));
    return _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, AF_VM_Y(1.0f), _CMP_LE_OQ));
}

/* GELU, erf form (see the top of this file). */
AF_VM_TARGET_AVX2 static inline __m256 af_vgelu_erf_avx2(__m256 x) {
    const __m256 a = _mm256_andnot_ps(AF_VM_Y(-0.0f), x);
    __m256 g = _mm256_fmadd_ps(AF_VM_Y(AF_VM_GELU_G12), a, AF_VM_Y(AF_VM_GELU_G11));
    g = _mm256_fmadd_ps(g, a, AF_VM_Y(AF_VM_GELU_G10));
    g = _mm256_fmadd_ps(g, a, AF_VM_Y(AF_VM_GELU_G9));
    g = _mm256_fmadd_ps(g, a, AF_VM_Y(AF_VM_GELU_G8));
    g = _mm256_fmadd_ps(g, a, AF_VM_Y(AF_VM_GELU_G7));
    g = _mm256_fmadd_ps(g, a, AF_VM_Y(AF_VM_GELU_G6));
    g = _mm256_fmadd_ps(g, a, AF_VM_Y(AF_VM_GELU_G5));
    g = _mm256_fmadd_ps(g, a, AF_VM_Y(AF_VM_GELU_G4));
    g = _mm256_fmadd_ps(g, a, AF_VM_Y(AF_VM_GELU_G3));
    g = _mm256_fmadd_ps(g, a, AF_VM_Y(AF_VM_GELU_G2));
    g = _mm256_fmadd_ps(g, a, AF_VM_Y(AF_VM_GELU_G1));
    g = _mm256_fmadd_ps(g, a, AF_VM_Y(AF_VM_GELU_G0));
    const __m256 n = _mm256_round_ps(g, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 r = _mm256_sub_ps(g, n);
    __m256 e = _mm256_fmadd_ps(AF_VM_Y(AF_VM_EXP2_E6), r, AF_VM_Y(AF_VM_EXP2_E5));
    e = _mm256_fmadd_ps(e, r, AF_VM_Y(AF_VM_EXP2_E4));
    e = _mm256_fmadd_ps(e, r, AF_VM_Y(AF_VM_EXP2_E3));
    e = _mm256_fmadd_ps(e, r, AF_VM_Y(AF_VM_EXP2_E2));
    e = _mm256_fmadd_ps(e, r, AF_VM_Y(AF_VM_EXP2_E1));
    e = _mm256_fmadd_ps(e, r, AF_VM_Y(1.0f));
    /* Inside the fit n is in [-26, -1], so 2^n is a normal float made in its exponent field;
     * past it (and for NaN) h is 0, as in the AVX-512 version. */
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256 scale = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(ni, _mm256_set1_epi32(127)), 23));
    const __m256 inside = _mm256_cmp_ps(a, AF_VM_Y(AF_VM_GELU_MAX), _CMP_LT_OQ);
    const __m256 h = _mm256_and_ps(inside, _mm256_mul_ps(e, scale));
    const __m256 pos = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ);
    return _mm256_mul_ps(x, _mm256_blendv_ps(h, _mm256_sub_ps(AF_VM_Y(1.0f), h), pos));
}

/* e ln2 + log(1 + f) for f in [sqrt(1/2) - 1, sqrt 2 - 1] (see the top of this file). */
AF_VM_TARGET_AVX2 static inline __m256 af_vlog_reduced_avx2(__m256 f, __m256 e) {
    const __m256 z = _mm256_mul_ps(f, f);
    __m256 g = _mm256_fmadd_ps(AF_VM_Y(AF_VM_LOG_G8), f, AF_VM_Y(AF_VM_LOG_G7));
    g = _mm256_fmadd_ps(g, f, AF_VM_Y(AF_VM_LOG_G6));
    g = _mm256_fmadd_ps(g, f, AF_VM_Y(AF_VM_LOG_G5));
    g = _mm256_fmadd_ps(g, f, AF_VM_Y(AF_VM_LOG_G4));
    g = _mm256_fmadd_ps(g, f, AF_VM_Y(AF_VM_LOG_G3));
    g = _mm256_fmadd_ps(g, f, AF_VM_Y(AF_VM_LOG_G2));
    g = _mm256_fmadd_ps(g, f, AF_VM_Y(AF_VM_LOG_G1));
    g = _mm256_fmadd_ps(g, f, AF_VM_Y(AF_VM_LOG_G0));
    __m256 y = _mm256_fmadd_ps(g, _mm256_mul_ps(z, f), _mm256_mul_ps(e, AF_VM_Y(AF_VM_LN2_LO)));
    y = _mm256_fnmadd_ps(z, AF_VM_Y(0.5f), y);
    return _mm256_fmadd_ps(e, AF_VM_Y(AF_VM_LN2_HI), _mm256_add_ps(f, y));
}

AF_VM_TARGET_AVX2 static inline __m256 af_vlog_avx2(__m256 x) {
    /* Denormals are scaled by 2^23 first; then x = m 2^e from the bits, m in [1, 2), halved above
     * sqrt 2. Negative inputs make garbage here that the special cases below replace. */
    const __m256 tiny = _mm256_cmp_ps(x, AF_VM_Y(FLT_MIN), _CMP_LT_OQ);
    const __m256 xs = _mm256_blendv_ps(x, _mm256_mul_ps(x, AF_VM_Y(8388608.0f)), tiny);
    const __m256i bits = _mm256_castps_si256(xs);
    __m256 e = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(127)));
    e = _mm256_sub_ps(e, _mm256_and_ps(tiny, AF_VM_Y(23.0f)));
    __m256 m = _mm256_castsi256_ps(
        _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x3f800000)));
    const __m256 big = _mm256_cmp_ps(m, AF_VM_Y(AF_VM_SQRT2), _CMP_GT_OQ);
    m = _mm256_blendv_ps(m, _mm256_mul_ps(m, AF_VM_Y(0.5f)), big);
    e = _mm256_add_ps(e, _mm256_and_ps(big, AF_VM_Y(1.0f)));
    __m256 r = af_vlog_reduced_avx2(_mm256_sub_ps(m, AF_VM_Y(1.0f)), e);
    r = _mm256_blendv_ps(r, AF_VM_Y(INFINITY), _mm256_cmp_ps(x, AF_VM_Y(INFINITY), _CMP_EQ_OQ));
    r = _mm256_blendv_ps(r, AF_VM_Y(-INFINITY), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ));
    r = _mm256_blendv_ps(r, AF_VM_Y(NAN), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
    return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); /* NaN passes */
}

/* log(1 + e^x) = max(x, 0) + log1p(t), t = e^-|x| in [0, 1]. */
AF_VM_TARGET_AVX2 static inline __m256 af_vsoftplus_avx2(__m256 x) {
    const __m256 t = af_vexp_avx2(_mm256_or_ps(x, AF_VM_Y(-0.0f)));
    const __m256 big = _mm256_cmp_ps(t, AF_VM_Y(AF_VM_SQRT2 - 1.0f), _CMP_GT_OQ);
    const __m256 f = _mm256_blendv_ps(t, _mm256_fmadd_ps(t, AF_VM_Y(0.5f), AF_VM_Y(-0.5f)), big);
    const __m256 e = _mm256_and_ps(big, AF_VM_Y(1.0f));
    return _mm256_add_ps(_mm256_max_ps(_mm256_setzero_ps(), x), af_vlog_reduced_avx2(f, e));
}

/* e^x - 1 for x <= 0 (x above 0 counts as 0; NaN passes). */
AF_VM_TARGET_AVX2 static inline __m256 af_vexpm1_neg_avx2(__m256 x) {
    x = _mm256_max_ps(AF_VM_Y(AF_VM_EXPM1_LO), _mm256_min_ps(_mm256_setzero_ps(), x));
    const __m256 n =
        _mm256_round_ps(_mm256_mul_ps(x, AF_VM_Y(AF_VM_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, AF_VM_Y(AF_VM_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, AF_VM_Y(AF_VM_LN2_LO), r);
    __m256 q = _mm256_fmadd_ps(AF_VM_Y(AF_VM_EXP_Q4), r, AF_VM_Y(AF_VM_EXP_Q3));
    q = _mm256_fmadd_ps(q, r, AF_VM_Y(AF_VM_EXP_Q2));
    q = _mm256_fmadd_ps(q, r, AF_VM_Y(AF_VM_EXP_Q1));
    q = _mm256_fmadd_ps(q, r, AF_VM_Y(AF_VM_EXP_Q0));
    const __m256 p = _mm256_fmadd_ps(q, _mm256_mul_ps(r, r), r); /* e^r - 1 */
    /* 2^n (n in [-36, 0], a normal float) made in its exponent field. */
    const __m256 s = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
    return _mm256_fmadd_ps(s, p, _mm256_sub_ps(s, AF_VM_Y(1.0f)));
}

#endif
