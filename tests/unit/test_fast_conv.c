/* Fast Conv (1x1 GEMM, implicit GEMM, im2col GEMM, depthwise) against the reference Conv on the same inputs, at
 * every ISA level and 1/2 threads, over kernel sizes, strides, pads, groups and plane widths that
 * hit the vector tails (widths 1..40 cover full blocks, masked tails and border columns).
 * Tolerance: 1e-5 + 1e-4 |ref| (float sums in a different order than the double reference). */
#include <math.h>

#include "fast_check.h"
#include "kernels/fast/vec_internal.h"
#include "kernels/gemm/conv_tap_regions.h"
#include "kernels/gemm/conv_winograd.h"
#include "util/cpu.h"

typedef struct conv_case {
    int64_t n, cin, cout, h, w, k, stride, pad, group;
    bool bias;
    int64_t dilation, pad_end; /* 0: 1, and pad_end = pad */
} conv_case;

static int64_t run_case(const conv_case *cc, af_isa isa, const fx_pools *pools, const char **name) {
    fx f;
    fx_init(&f, AF_OP_CONV, 17);
    fx_input(&f, fx_rand(4, (int64_t[]){cc->n, cc->cin, cc->h, cc->w}, -1, 1, 11), false);
    fx_input(&f, fx_rand(4, (int64_t[]){cc->cout, cc->cin / cc->group, cc->k, cc->k}, -1, 1, 12), true);
    if (cc->bias) fx_input(&f, fx_rand(1, (int64_t[]){cc->cout}, -1, 1, 13), true);
    fx_ints(&f, "strides", 2, (int64_t[]){cc->stride, cc->stride});
    int64_t pe = cc->pad_end ? cc->pad_end : cc->pad, dil = cc->dilation ? cc->dilation : 1;
    fx_ints(&f, "pads", 4, (int64_t[]){cc->pad, cc->pad, pe, pe});
    fx_ints(&f, "dilations", 2, (int64_t[]){dil, dil});
    fx_int(&f, "group", cc->group);
    fx_outputs(&f, 1, 1);
    int64_t bad = fx_compare(&f, isa, pools, (fx_tol){1e-5, 1e-4, 0}, name);
    fx_free(&f);
    return bad;
}

AF_TEST(fast_conv_matches_reference) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    af_isa isas[AF_ISA_COUNT];
    int n_isa = fx_isas(isas);
    int covered = 0;
    for (int i = 0; i < n_isa; i++) {
        for (int64_t w = 1; w <= 40; w += (w < 20 ? 1 : 7)) {
            const conv_case cases[] = {
                {1, 8, 8, w, w, 3, 1, 1, 8, true, 0, 0},   /* depthwise 3x3 stride 1 */
                {1, 8, 8, w, w, 3, 2, 1, 8, false, 0, 0},  /* depthwise 3x3 stride 2 */
                {1, 6, 6, w, w + 3, 5, 1, 2, 6, true, 0, 0}, /* depthwise 5x5 */
                {2, 6, 6, w, w, 5, 2, 2, 6, true, 0, 0},   /* depthwise 5x5 stride 2, batch 2 */
                {1, 5, 7, w, w, 1, 1, 0, 1, true, 0, 0},   /* pointwise */
                {2, 4, 6, w, w, 3, 1, 1, 1, true, 0, 0},   /* im2col */
                {1, 6, 4, w, w, 3, 2, 0, 2, false, 0, 0},  /* grouped, stride 2, no pad */
                {1, 5, 5, w, w, 3, 1, 2, 5, true, 2, 0}, /* depthwise dilated */
                {1, 5, 5, w, w, 3, 1, 1, 5, false, 1, 2}, /* depthwise, pads 1 and 2 (taller output) */
                {1, 5, 5, w, w, 5, 2, 2, 5, false, 2, 3}, /* depthwise dilated stride 2, uneven pads */
                {1, 4, 4, w, w, 2, 3, 1, 4, true, 0, 0},  /* depthwise: stride 3 > kernel 2 (2 of 3 phases) */
                {1, 4, 4, w, w, 1, 2, 0, 4, false, 0, 0}, /* depthwise 1x1 stride 2 (one phase) */
                {1, 3, 40, w, w, 7, 2, 3, 1, true, 0, 0},  /* implicit: a 7x7 stride-2 stem, 2 panels */
                {1, 5, 33, w, w, 1, 2, 0, 1, false, 0, 0}, /* implicit: 1x1 stride 2, a 1-channel panel */
                {1, 6, 9, w, w + 2, 3, 2, 1, 1, true, 0, 2}, /* implicit: stride 2, uneven pads */
                {1, 4, 5, w, w, 2, 3, 1, 1, true, 0, 0},   /* implicit: stride 3 > kernel 2 */
                /* Grouped, as many channels out as in (the channel-blocked kernel on AVX-512):
                 * groups of 4 (a permutation of lanes), of 8 in a partial block of 16, of 2 on
                 * the any-geometry path, of 16 and of 32 (broadcasts; 32: two blocks a unit). */
                {1, 16, 16, w, w, 3, 1, 1, 4, true, 0, 0},
                {1, 24, 24, w, w + 1, 3, 2, 1, 3, false, 0, 0},
                {1, 12, 12, w, w, 5, 1, 2, 6, true, 2, 0},
                {2, 32, 32, w, w, 3, 1, 1, 2, true, 0, 0},
                {1, 64, 64, w, w, 3, 2, 2, 2, true, 2, 3},
            };
            for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
                const conv_case *cc = &cases[c];
                int64_t span = (cc->k - 1) * (cc->dilation ? cc->dilation : 1) + 1;
                if (cc->h + cc->pad + (cc->pad_end ? cc->pad_end : cc->pad) < span) continue; /* window larger than input */
                const char *name = "";
                int64_t bad = run_case(&cases[c], isas[i], &pools, &name);
                if (bad < 0) continue;
                covered++;
                if (bad) printf("  case %zu width %lld isa %s (%s): %lld off\n", c, (long long)w, af_isa_name(isas[i]),
                                name, (long long)bad);
                CHECK_EQ_INT(bad, 0);
            }
        }
    }
    CHECK(covered > 100);
    fx_pools_free(&pools);
}

/* The epilogue programs a fused conv step carries, checked against the reference conv followed
 * by the same steps: ReLU6 and HardSwish alone (in registers where a kernel fuses them), a
 * residual + ReLU (in registers for the GEMMs' microkernels), and that followed by a GELU, which
 * no microkernel runs (the whole program then runs after the store). */
typedef enum epi_case { EPI_CLIP, EPI_HARD_SWISH, EPI_RESIDUAL_RELU, EPI_RESIDUAL_RELU_GELU, EPI_CASES } epi_case;

static float epi_ref(epi_case ec, float x, float res) {
    switch (ec) {
    case EPI_CLIP: return x < 0 ? 0 : x > 6 ? 6 : x;
    case EPI_HARD_SWISH: {
        float g = x / 6.0f + 0.5f;
        return x * (g < 0 ? 0 : g > 1 ? 1 : g);
    }
    case EPI_RESIDUAL_RELU: return x + res > 0 ? x + res : 0;
    default: {
        double r = x + res > 0 ? x + res : 0;
        return (float)(0.5 * r * (1.0 + erf(r / sqrt(2.0))));
    }
    }
}

/* Runs k with epilogue e whose step r adds a residual that is the output itself: the output
 * buffer is filled with res first (as the memory planner leaves it when the output takes the
 * residual's slot). */
static af_status run_over_residual(fx *f, const af_kernel *k, af_epilogue e, int r, const float *res,
                                   af_threadpool *pool, af_tensor *out) {
    af_status st = fx_alloc_outputs(f, out);
    if (st != AF_OK) return st;
    memcpy(out[0].data, res, out[0].nbytes);
    e.steps[r].p = out[0].data;
    return fx_run_on(f, k, &e, pool, out);
}

/* In-place residuals: which kernels take them (af_kernel.residual_in_place, for the residual +
 * ReLU case), counted over the checks, and every one that says so computes the same as apart. */
typedef struct in_place_count {
    int yes, no;
} in_place_count;

/* One conv case at one ISA: the kernel must be want_kernel; every epilogue case on one and two
 * threads, within tol; where the kernel takes its residual in place, also run so. */
static void check_epilogues(const conv_case *cc, af_isa isa, const fx_pools *pools, const char *want_kernel,
                            fx_tol tol, in_place_count *ipc) {
    fx f;
    fx_init(&f, AF_OP_CONV, 17);
    fx_input(&f, fx_rand(4, (int64_t[]){cc->n, cc->cin, cc->h, cc->w}, -1, 1, 11), false);
    fx_input(&f, fx_rand(4, (int64_t[]){cc->cout, cc->cin / cc->group, cc->k, cc->k}, -1, 1, 12), true);
    fx_input(&f, fx_rand(1, (int64_t[]){cc->cout}, -1, 1, 13), true);
    int64_t pe = cc->pad_end ? cc->pad_end : cc->pad, dil = cc->dilation ? cc->dilation : 1;
    fx_ints(&f, "pads", 4, (int64_t[]){cc->pad, cc->pad, pe, pe});
    fx_ints(&f, "strides", 2, (int64_t[]){cc->stride, cc->stride});
    fx_ints(&f, "dilations", 2, (int64_t[]){dil, dil});
    fx_int(&f, "group", cc->group);
    fx_outputs(&f, 1, 1);
    af_kernel k;
    CHECK(fx_prepare(&f, isa, &k));
    if (strcmp(k.name, want_kernel) != 0) printf("  kernel %s, expected %s\n", k.name, want_kernel);
    CHECK(strcmp(k.name, want_kernel) == 0);
    af_tensor conv[FX_MAX_OUT], got[FX_MAX_OUT];
    CHECK(fx_run_reference(&f, conv) == AF_OK);
    const int64_t numel = af_tensor_numel(&conv[0]);
    const int64_t per_image = numel / cc->n, hw = per_image / cc->cout;
    float *res = af_malloc((size_t)numel * sizeof(float)), *want = af_malloc((size_t)numel * sizeof(float));
    for (int64_t j = 0; j < numel; j++) res[j] = (float)((j * 37) % 101) / 50.0f - 1.0f;
    af_tensor ref = conv[0];
    ref.data = want;
    af_threadpool *pl[2] = {pools->one, pools->two};
    for (int ec = 0; ec < EPI_CASES; ec++) {
        af_epilogue e;
        af_epilogue_init(&e);
        if (ec == EPI_CLIP) CHECK(af_epilogue_unary(&e, AF_EPI_CLIP, 0, 6) == AF_OK);
        if (ec == EPI_HARD_SWISH) CHECK(af_epilogue_unary(&e, AF_EPI_HARD_SWISH, 0, 0) == AF_OK);
        if (ec >= EPI_RESIDUAL_RELU) {
            CHECK(af_epilogue_residual(&e, res, hw) == AF_OK);
            e.steps[0].batch_stride = per_image;
            CHECK(af_epilogue_unary(&e, AF_EPI_RELU, 0, 0) == AF_OK);
        }
        if (ec == EPI_RESIDUAL_RELU_GELU) CHECK(af_epilogue_unary(&e, AF_EPI_GELU_ERF, 0, 0) == AF_OK);
        const float *c = conv[0].data;
        for (int64_t j = 0; j < numel; j++) want[j] = epi_ref((epi_case)ec, c[j], res[j]);
        const bool in_place = ec >= EPI_RESIDUAL_RELU && k.residual_in_place && k.residual_in_place(&k, &e);
        if (ec == EPI_RESIDUAL_RELU) in_place ? ipc->yes++ : ipc->no++;
        for (int p = 0; p < 2; p++) {
            for (int over = 0; over <= in_place; over++) {
                CHECK((over ? run_over_residual(&f, &k, e, 0, res, pl[p], got) : fx_run(&f, &k, &e, pl[p], got)) ==
                      AF_OK);
                int64_t bad = fx_count_off(&got[0], &ref, tol, k.name);
                if (bad)
                    printf("  epilogue case %d%s, %d thread(s), isa %s: %lld off\n", ec,
                           over ? " (output over its residual)" : "", p + 1, af_isa_name(isa), (long long)bad);
                CHECK_EQ_INT(bad, 0);
                fx_free_outputs(&f, got);
            }
        }
    }
    af_free(res);
    af_free(want);
    fx_free_outputs(&f, conv);
    af_kernel_release(&k);
    fx_free(&f);
}

/* check_epilogues over cases at every ISA; want_kernel names the kernel each ISA must pick; the
 * tolerance of a case comes from tol_for (NULL: 1e-5 + 1e-4 |ref|); in_place says whether an
 * ISA's kernel must take the residual in place, on every case or on none. */
static void check_cases(const conv_case *cases, size_t n, const char *(*want_kernel)(af_isa),
                        fx_tol (*tol_for)(const conv_case *), bool (*in_place)(af_isa)) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    af_isa isas[AF_ISA_COUNT];
    int n_isa = fx_isas(isas);
    for (int i = 0; i < n_isa; i++) {
        in_place_count ipc = {0, 0};
        for (size_t c = 0; c < n; c++)
            check_epilogues(&cases[c], isas[i], &pools, want_kernel(isas[i]),
                            tol_for ? tol_for(&cases[c]) : (fx_tol){1e-5, 1e-4, 0}, &ipc);
        const bool want = in_place(isas[i]);
        if (want ? ipc.no : ipc.yes)
            printf("  isa %s: residual in place on %d cases, apart on %d\n", af_isa_name(isas[i]), ipc.yes, ipc.no);
        CHECK_EQ_INT(want ? ipc.no : ipc.yes, 0);
    }
    fx_pools_free(&pools);
}

/* The GEMM microkernels and the implicit GEMM's tile apply a residual in registers on AVX-512 and
 * AVX2; the rest (and the scalar tiles) add it after the store. */
static bool in_place_avx(af_isa isa) { return isa != AF_ISA_SCALAR; }
static bool in_place_avx2(af_isa isa) { return isa == AF_ISA_AVX2; }
static bool in_place_never(af_isa isa) {
    (void)isa;
    return false;
}

static const char *implicit_kernel(af_isa isa) {
    (void)isa;
    return "f32_conv_implicit_gemm";
}

static const char *depthwise_kernel(af_isa isa) {
    return isa == AF_ISA_AVX512 ? "f32_dwconv_blocked__avx512" : isa == AF_ISA_AVX2 ? "f32_dwconv__avx2"
                                                                                     : "f32_dwconv__scalar";
}

/* The implicit GEMM on shapes that fill several tasks, row blocks and weight panels (cout not a
 * multiple of any ISA's panel, widths not a multiple of its tile). */
AF_TEST(fast_conv_implicit_gemm_applies_its_epilogue) {
    const conv_case cases[] = {
        {1, 64, 40, 44, 44, 3, 2, 1, 1, true, 0, 0},  /* several row blocks at 2 threads (stride 2:
                                                          3x3 stride 1 runs Winograd) */
        {2, 16, 5, 30, 37, 5, 1, 2, 1, true, 0, 3},   /* 5x5, uneven pads, batch 2 */
        {1, 24, 70, 15, 15, 3, 2, 1, 1, true, 0, 0},  /* stride 2, three panels */
        {1, 40, 36, 13, 13, 1, 1, 0, 1, true, 0, 0},  /* pointwise on a small plane */
        {1, 600, 40, 14, 15, 1, 1, 0, 1, true, 0, 0}, /* pointwise, two blocks of 8 and 7 tiles */
        {1, 480, 112, 14, 14, 1, 1, 0, 1, true, 0, 0}, /* pointwise, four blocks of 3 + 4 + 3 + 4 tiles
                                                          at 2 threads (MobileNetV3-L's) */
        {1, 3, 16, 45, 37, 3, 2, 1, 1, true, 0, 0},   /* a MobileNet stem: 3 channels, 3x3 stride 2 */
        {2, 5, 13, 19, 21, 5, 1, 2, 1, true, 0, 1},   /* 5x5, a partial channel vector, batch 2 */
        {1, 7, 1, 15, 15, 1, 1, 0, 1, true, 0, 0},    /* pointwise to one channel */
        /* 16 output channels or fewer, or 64 from at most 4 (AVX-512: channels as rows, tiles of
         * up to 48 pixels, a row's vectors split evenly): */
        {1, 3, 16, 50, 118, 3, 2, 1, 1, true, 0, 0},  /* a stem: rows of 59 pixels, 32 + 27 */
        {1, 3, 64, 37, 230, 7, 2, 3, 1, true, 0, 0},  /* ResNet's stem: rows of 115, 32 + 48 + 35 */
        {1, 4, 20, 21, 100, 3, 2, 1, 1, true, 0, 0},  /* 4 channels to a partial panel: 32 + 18 */
        {1, 16, 16, 15, 15, 1, 1, 0, 1, true, 0, 0},  /* pointwise: dense runs of 192 + 33 pixels */
        {2, 8, 12, 13, 19, 1, 1, 0, 1, true, 0, 0},   /* pointwise, a partial panel, batch 2 */
        {1, 6, 9, 33, 101, 3, 1, 1, 1, true, 0, 0},   /* 3x3 stride 1 (too few channels for Winograd) */
        /* Phase planes made by row blocks at 2 threads (tiles split by rows): a 1x1 stride 2,
         * whose blocks are runs of the flattened plane, ending mid-row; one with pads. */
        {1, 64, 40, 30, 29, 1, 2, 0, 1, true, 0, 0},
        {1, 24, 20, 21, 25, 1, 2, 1, 1, true, 0, 0},
    };
    check_cases(cases, sizeof cases / sizeof cases[0], implicit_kernel, NULL, in_place_avx);
}

/* Sums of 68600 float products of magnitude up to 1 (|y| ~ 90) round by up to ~6e-5 against the
 * float64 reference, chunked or not (measured on this case: at most 6e-5 with chunks, one value
 * past 6e-5 without, on the three ISAs); after a residual that nearly cancels y, the default
 * tolerance (1e-5 + 1e-4 |ref|) counts that rounding against a value near 0. */
static fx_tol long_k_tol(const conv_case *cc) {
    (void)cc;
    return (fx_tol){1e-4, 1e-4, 0};
}

/* A K so long that a weight panel would not stay in L2 runs in chunks of channels whose sums meet
 * in the output, the epilogue after the last (never the residual in place): 7x7 over 1400
 * channels, K = 68600, panels of 8.8 MB (AVX-512, 18 chunks), 4.4 MB (AVX2, 9), 1.1 MB (plain C,
 * 3), at stride 2 on a 9x11 plane, 20 output channels (a partial panel). */
AF_TEST(fast_conv_implicit_gemm_chunks_a_long_k) {
    const conv_case cases[] = {{1, 1400, 20, 9, 11, 7, 2, 3, 1, true, 0, 0}};
    check_cases(cases, 1, implicit_kernel, long_k_tol, in_place_never);
}

/* Depthwise convolutions with their epilogues, on planes large enough for several row chunks per
 * channel group and channel counts that leave a partial group of 16. */
AF_TEST(fast_conv_depthwise_applies_its_epilogue) {
    const conv_case cases[] = {
        {1, 40, 40, 60, 60, 3, 1, 1, 40, true, 0, 0},   /* 3 groups, row chunks */
        {2, 24, 24, 57, 57, 5, 2, 2, 24, true, 0, 0},   /* stride 2, batch 2 */
        {1, 17, 17, 7, 7, 5, 1, 2, 17, true, 0, 0},     /* 7x7 planes, one channel past a group */
        {1, 20, 20, 15, 15, 3, 1, 2, 20, true, 2, 1},   /* dilated, uneven pads */
        {1, 3, 3, 40, 37, 33, 2, 16, 3, true, 0, 0},    /* 33x33: past the phase path's 32 a side */
    };
    check_cases(cases, sizeof cases / sizeof cases[0], depthwise_kernel, NULL, in_place_never);
}

static const char *grouped_kernel(af_isa isa) {
    return isa == AF_ISA_AVX512 ? "f32_conv_grouped_blocked__avx512" : "f32_conv_im2col_gemm";
}

/* Grouped convolutions with their epilogues at ResNeXt's and RegNet's group widths (4, 8, 16, 32),
 * on planes with several row chunks, stride 2, and a channel count that leaves a partial block. */
AF_TEST(fast_conv_grouped_applies_its_epilogue) {
    const conv_case cases[] = {
        {1, 32, 32, 40, 40, 3, 1, 1, 8, true, 0, 0},   /* groups of 4, row chunks */
        {2, 40, 40, 29, 29, 3, 2, 1, 5, true, 0, 0},   /* groups of 8, a partial block, batch 2 */
        {1, 64, 64, 14, 14, 3, 1, 1, 4, true, 0, 0},   /* groups of 16 */
        {1, 24, 24, 12, 12, 3, 1, 2, 12, true, 2, 1},  /* groups of 2, dilated, uneven pads */
    };
    /* The residual in place: never on the blocked kernel; on AVX2 the im2col GEMM's. */
    check_cases(cases, sizeof cases / sizeof cases[0], grouped_kernel, NULL, in_place_avx2);
    /* Groups of 32, stride 2: on AVX2, K = 288 spans two of its GEMM's K blocks, so neither. */
    const conv_case wide[] = {{1, 64, 64, 15, 15, 3, 2, 1, 2, true, 0, 0}};
    check_cases(wide, 1, grouped_kernel, NULL, in_place_never);
}

static const char *gemm_1x1_kernel(af_isa isa) {
    (void)isa;
    return "f32_conv1x1_gemm";
}

static const char *im2col_kernel(af_isa isa) {
    (void)isa;
    return "f32_conv_im2col_gemm";
}

/* The GEMM paths with their epilogues: 1x1 convs on 256+ pixels (widths whose last tile has 12
 * columns, fewer than its rows: the AVX-512 column kernel) and grouped ones through im2col. */
AF_TEST(fast_conv_gemm_applies_its_epilogue) {
    const conv_case gemm_1x1[] = {
        {1, 24, 40, 15, 20, 1, 1, 0, 1, true, 0, 0},  /* 300 pixels: 9 tiles of 32 and one of 12 */
        {2, 16, 30, 17, 17, 1, 1, 0, 1, true, 0, 0},  /* 289 pixels, batch 2, a partial row tile */
        {1, 64, 70, 28, 28, 1, 1, 0, 1, true, 0, 0},  /* ResNet-50's 28x28, several tasks */
    };
    check_cases(gemm_1x1, sizeof gemm_1x1 / sizeof gemm_1x1[0], gemm_1x1_kernel, NULL, in_place_avx);
    const conv_case im2col[] = {
        {1, 12, 18, 20, 20, 3, 1, 1, 2, true, 0, 0},  /* 2 groups */
        {1, 12, 12, 22, 23, 3, 1, 1, 4, true, 2, 0}, /* 4 groups, dilated */
        /* Groups to spare for both threads: whole groups as tasks (widths the channel-blocked
         * kernel does not take: 12, 6 and 8 to 16). */
        {1, 48, 48, 14, 14, 3, 1, 1, 4, true, 0, 0},
        {2, 60, 60, 9, 9, 3, 2, 1, 10, true, 0, 0},   /* stride 2, batch 2 */
        {1, 48, 96, 14, 14, 3, 1, 1, 6, true, 0, 0},
    };
    check_cases(im2col, sizeof im2col / sizeof im2col[0], im2col_kernel, NULL, in_place_avx);
    const conv_case grouped_1x1[] = {{1, 32, 16, 12, 12, 1, 1, 0, 4, true, 0, 0}}; /* no unfolding */
    check_cases(grouped_1x1, 1, gemm_1x1_kernel, NULL, in_place_avx);
    /* K past one block (KC_MAX, 768): the first block's partial sums are stored before the
     * residual is added, so the output cannot be written over it. */
    const conv_case long_k[] = {{1, 800, 20, 16, 16, 1, 1, 0, 1, true, 0, 0}};
    check_cases(long_k, 1, gemm_1x1_kernel, NULL, in_place_never);
}

static const char *tap_regions_kernel(af_isa isa) {
    (void)isa;
    return "f32_conv_tap_regions";
}

/* Convolutions whose taps mostly read padding (a dilation about the plane's size) run a GEMM per
 * tap over the output rectangle it reaches (conv_tap_regions.c): large rectangles split over the
 * threads, small ones a tap per task. The epilogue runs after every output element is written,
 * so never over its residual. */
AF_TEST(fast_conv_tap_regions_apply_their_epilogue) {
    const conv_case cases[] = {
        {1, 20, 40, 14, 14, 3, 1, 12, 1, true, 12, 0}, /* DeepLabV3's ASPP: centre tap everywhere, borders */
        {2, 9, 17, 11, 13, 3, 2, 7, 1, true, 6, 3},    /* batch 2, stride 2, uneven pads */
        {1, 6, 35, 9, 9, 5, 1, 8, 1, true, 3, 5},      /* 5x5, rectangles of every size */
        {1, 4, 18, 4, 4, 3, 1, 10, 1, true, 5, 0},     /* output rows and columns no tap reaches */
        {1, 5, 20, 8, 8, 15, 1, 14, 1, true, 2, 0},    /* 49 small taps: two batches of them */
    };
    check_cases(cases, sizeof cases / sizeof cases[0], tap_regions_kernel, NULL, in_place_never);
}

/* The share of (pixel, tap) pairs reading inside the input, and what it picks. */
AF_TEST(fast_conv_tap_regions_live_share) {
    af_conv_geom g = {.n_sp = 2, .stride = {1, 1}, .dilation = {12, 12}, .pad_begin = {12, 12}, .pad_end = {12, 12}};
    /* Per axis of 14: the centre tap at all 14 outputs, each side tap at 2: (2 + 14 + 2) / 42. */
    const double axis = 18.0 / 42.0;
    CHECK(fabs(af_conv_tap_regions_live_share(&g, 3, 3, 14, 14, 14, 14) - axis * axis) < 1e-12);
    g.dilation[0] = g.dilation[1] = 1, g.pad_begin[0] = g.pad_begin[1] = g.pad_end[0] = g.pad_end[1] = 1;
    /* 3x3 pad 1 over 1x1: the centre tap only. */
    CHECK(fabs(af_conv_tap_regions_live_share(&g, 3, 3, 1, 1, 1, 1) - 1.0 / 9.0) < 1e-12);
    /* No padding: every pair reads inside. */
    g.pad_begin[0] = g.pad_begin[1] = g.pad_end[0] = g.pad_end[1] = 0;
    CHECK(fabs(af_conv_tap_regions_live_share(&g, 3, 3, 8, 8, 6, 6) - 1.0) < 1e-12);
    CHECK(af_conv_tap_regions_live_share(&g, 3, 3, 8, 8, 0, 6) < 0);
}

static const char *winograd_kernel(af_isa isa) {
    (void)isa;
    return "f32_conv3x3_winograd_f4x4";
}

static const char *winograd_2x2_kernel(af_isa isa) {
    (void)isa;
    return "f32_conv3x3_winograd_f2x2";
}

/* Winograd's error scales with sum |x w| over a window rather than with |sum x w|: the input
 * transform adds and subtracts up to 5x the tile's inputs, and the product is taken on those
 * combinations. With inputs and weights in [-1, 1] that sum is at most 9 cin; the tolerance is
 * WINO_ULPS float epsilons of it: on these cases F(4x4) stays within 3 on every ISA, with
 * some elements past 2, and F(2x2) within 0.5, so the bound is twice the worst measured. */
#define WINO_ULPS 6.0
static fx_tol winograd_tol(const conv_case *cc) {
    return (fx_tol){WINO_ULPS * 1.1920929e-7 * 9.0 * (double)cc->cin, 1e-4, 0};
}

/* The Winograd F(4x4, 3x3) and F(2x2, 3x3) convolutions against the reference, with every epilogue case: planes
 * whose sides are not multiples of 4 (partial tiles), blocks of tile rows at 1 and 2 threads,
 * output channels past a whole panel, valid and uneven pads, batch 2. */
AF_TEST(fast_conv_winograd_matches_reference) {
    const conv_case cases[] = {
        {1, 16, 24, 23, 29, 3, 1, 1, 1, true, 0, 0},  /* partial tiles on both sides */
        {2, 32, 40, 30, 30, 3, 1, 1, 1, true, 0, 0},  /* batch 2, a partial panel of channels */
        {1, 20, 16, 26, 34, 3, 1, 0, 1, true, 0, 0},  /* no padding */
        {1, 17, 33, 27, 27, 3, 1, 2, 1, true, 0, 1},  /* pads 2 and 1 */
        {1, 64, 64, 56, 56, 3, 1, 1, 1, true, 0, 0},  /* ResNet-50's first stage */
        {1, 16, 16, 9, 133, 3, 1, 1, 1, true, 0, 2},  /* rows of 3 vectors of tiles, the last partial */
    };
    check_cases(cases, sizeof cases / sizeof cases[0], winograd_kernel, winograd_tol, in_place_never);
}

/* Planes with too few 4x4 tiles for F(4x4) but 32+ tiles of 2x2 run F(2x2, 3x3). */
AF_TEST(fast_conv_winograd_2x2_matches_reference) {
    const conv_case cases[] = {
        {1, 32, 48, 14, 14, 3, 1, 1, 1, true, 0, 0},  /* ResNet-50's 14x14 planes, 1.5 panels */
        {2, 16, 20, 11, 13, 3, 1, 1, 1, true, 0, 0},  /* odd sides: partial tiles, batch 2 */
        {1, 24, 17, 15, 15, 3, 1, 0, 1, true, 0, 0},  /* no padding: 13x13 */
        {1, 16, 16, 3, 71, 3, 1, 1, 1, true, 0, 0},   /* rows of 3 vectors of tiles, the last partial */
    };
    check_cases(cases, sizeof cases / sizeof cases[0], winograd_2x2_kernel, winograd_tol, in_place_never);
}

/* A Winograd conv prepared for cc's plane runs a side x side one too, at 1 and 2 threads. */
static void check_smaller_plane(const conv_case *cc, int64_t side, const char *kernel) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    fx f;
    fx_init(&f, AF_OP_CONV, 17);
    fx_input(&f, fx_rand(4, (int64_t[]){1, cc->cin, cc->h, cc->w}, -1, 1, 11), false);
    fx_input(&f, fx_rand(4, (int64_t[]){cc->cout, cc->cin, 3, 3}, -1, 1, 12), true);
    fx_input(&f, fx_rand(1, (int64_t[]){cc->cout}, -1, 1, 13), true);
    fx_ints(&f, "pads", 4, (int64_t[]){1, 1, 1, 1});
    fx_outputs(&f, 1, 1);
    af_kernel k;
    CHECK(fx_prepare(&f, af_cpu_isa(), &k));
    CHECK(strcmp(k.name, kernel) == 0);
    af_tensor_free_data(&f.in[0]);
    f.in[0] = fx_rand(4, (int64_t[]){1, cc->cin, side, side}, -1, 1, 14);
    af_tensor want[FX_MAX_OUT], got[FX_MAX_OUT];
    CHECK(fx_run_reference(&f, want) == AF_OK);
    af_threadpool *pl[2] = {pools.one, pools.two};
    for (int p = 0; p < 2; p++) {
        CHECK(fx_run_fast(&f, &k, pl[p], got) == AF_OK);
        CHECK(got[0].dims[2] == side && got[0].dims[3] == side);
        CHECK_EQ_INT(fx_count_off(&got[0], &want[0], winograd_tol(cc), k.name), 0);
        fx_free_outputs(&f, got);
    }
    fx_free_outputs(&f, want);
    af_kernel_release(&k);
    fx_free(&f);
    fx_pools_free(&pools);
}

/* A Winograd conv prepared for one plane runs a smaller one too (dynamic shapes): 20x20 has 25
 * tiles of 4x4, under the 32 the kernel choice asks for, yet the prepared F(4x4) kernel must run
 * it, not fail. F(2x2) on a 7x7 plane (16 tiles, partial ones on both sides) is what ResNet-50's
 * last stage runs; at 2 threads each takes every tile and a share of the output channels' panels
 * (three panels, the last partial, over two threads). */
AF_TEST(fast_conv_winograd_runs_a_smaller_plane) {
    const conv_case f4 = {1, 32, 40, 30, 30, 3, 1, 1, 1, true, 0, 0};
    check_smaller_plane(&f4, 20, "f32_conv3x3_winograd_f4x4");
    const conv_case f2 = {1, 32, 40, 14, 14, 3, 1, 1, 1, true, 0, 0};
    check_smaller_plane(&f2, 7, "f32_conv3x3_winograd_f2x2");
    const conv_case f2_panels = {1, 24, 72, 14, 14, 3, 1, 1, 1, true, 0, 0};
    check_smaller_plane(&f2_panels, 7, "f32_conv3x3_winograd_f2x2");
}

/* The tile choice: F(4x4) from 32 tiles of 4x4, F(2x2) from 32 tiles of 2x2 or (not on Intel) 16
 * with a panel of 32 output channels per thread, else none (ResNet-50's 56x56, 28x28, 14x14 and
 * 7x7 planes, 64 channels). */
AF_TEST(fast_conv_winograd_tile_choice) {
    af_conv_geom g = {.n_sp = 2, .stride = {1, 1}, .dilation = {1, 1}};
    static const struct {
        int64_t side;
        int threads, want;
    } cases[] = {{56, 2, 4}, {28, 1, 4}, {28, 2, 4}, {14, 1, 2}, {14, 2, 2}, {7, 1, -1}, {7, 2, -1}, {7, 4, 0}, {5, 1, 0}};
    const int few_tiles = af_cpu_info_get()->vendor == AF_CPU_VENDOR_INTEL ? 0 : 2; /* the -1 above */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int got = af_conv_winograd_tile(&g, 3, 3, 1, 64, 64, cases[i].side, cases[i].side, cases[i].threads);
        const int want = cases[i].want < 0 ? few_tiles : cases[i].want;
        if (got != want)
            printf("  %lldx%lld on %d thread(s): tile %d, expected %d\n", (long long)cases[i].side,
                   (long long)cases[i].side, cases[i].threads, got, want);
        CHECK_EQ_INT(got, want);
    }
    g.stride[0] = g.stride[1] = 2;
    CHECK_EQ_INT(af_conv_winograd_tile(&g, 3, 3, 1, 64, 64, 56, 56, 1), 0);
}

/* The implicit GEMM's phase planes, all column phases of a row phase at once (stride 2 splits
 * each row's floats by parity), against strided_plane one phase at a time, at every ISA: pads
 * on either side, odd and even widths, planes wider and taller than the input reaches, and more
 * phases than one pass over the rows makes. */
AF_TEST(fast_conv_phase_planes_match_strided_plane) {
    enum { H = 9, W = 37 };
    float x[H * W];
    for (int i = 0; i < H * W; i++) x[i] = (float)(i + 1);
    for (int isa = 0; isa <= (int)af_cpu_isa(); isa++) {
        const af_vec_kernels *vk = af_vec_kernels_for((af_isa)isa);
        for (int64_t sx = 1; sx <= 18; sx += sx < 3 ? 1 : 15) /* 18: more phases than one pass takes */
            for (int64_t nb = sx < 3 ? 1 : sx - 1; nb <= sx; nb++)
                for (int64_t w = 1; w <= W; w += 3)
                    for (int64_t c0 = -3; c0 <= 2; c0++)
                        for (int64_t wq = 1; wq <= 24; wq += 5) {
                            const int64_t hq = 6, sy = 2, r0 = -1, plane = hq * wq;
                            float got[18 * 6 * 24], want[18 * 6 * 24];
                            for (int i = 0; i < 18 * 6 * 24; i++) got[i] = want[i] = -7.0f;
                            vk->phase_planes(hq, wq, sy, sx, nb, x, H, w, r0, c0, got, plane);
                            for (int64_t b = 0; b < nb; b++)
                                vk->strided_plane(hq, wq, sy, sx, x, H, w, r0, c0 + b, want + b * plane);
                            int bad = 0;
                            for (int i = 0; i < 18 * 6 * 24; i++) bad += got[i] != want[i];
                            if (bad)
                                printf("  isa %d sx %lld nb %lld w %lld c0 %lld wq %lld: %d differ\n", isa,
                                       (long long)sx, (long long)nb, (long long)w, (long long)c0, (long long)wq, bad);
                            CHECK_EQ_INT(bad, 0);
                        }
    }
}

/* Long sums (K = 4608, 4096 and 2048): the tile kernels add their accumulators into a running
 * total every AF_CONV_FLUSH_K k steps, and the GEMM path sums K in blocks as long, so the RMS
 * error against the double reference stays near ONNX Runtime's (2.1e-7 of |y| about 1,
 * bench/conv_accuracy.py): 2.3-3.1e-7 on every ISA and case here. With the flush moved past K
 * (one run of FMAs, as before it existed) the tile kernels' cases were 1.13-1.18e-6; without the
 * GEMM path's k_block (blocks of up to 768) its cases were 4.7-4.8e-7. Winograd's products flush
 * every 32 channels: F(2x2) over 512 channels 2.3-2.4e-7 here, 4.9e-7 in blocks of 256. */
AF_TEST(fast_conv_long_sums_stay_accurate) {
    const struct {
        int64_t cin, cout, side, k, stride, pad;
        const char *kernel; /* the path the case is for; NULL: the ISA's choice */
    } cases[] = {
        {512, 32, 15, 3, 2, 0, NULL}, /* implicit GEMM, pixel rows: 7x7 out */
        {512, 8, 7, 3, 1, 1, NULL},   /* implicit GEMM, channel rows (AVX-512): too few channels for Winograd */
        {4096, 32, 7, 1, 1, 0, NULL}, /* 1x1 on a 7x7 plane: the implicit kernel, one tap */
        {2048, 32, 16, 1, 1, 0, "f32_conv1x1_gemm"},     /* 1x1 on 256 pixels: the GEMM */
        {2048, 32, 32, 1, 2, 0, "f32_conv_im2col_gemm"}, /* 1x1 at stride 2: the GEMM on its subsample */
        {512, 32, 14, 3, 1, 1, "f32_conv3x3_winograd_f2x2"}, /* products over 512 channels */
    };
    af_isa isas[AF_ISA_COUNT];
    const int n_isa = fx_isas(isas);
    for (int i = 0; i < n_isa; i++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            const int64_t K = cases[c].cin * cases[c].k * cases[c].k;
            const float a = (float)sqrt(3.0 / (double)K); /* weights of variance 1 / K: |y| about 1 */
            fx f;
            fx_init(&f, AF_OP_CONV, 17);
            fx_input(&f, fx_rand(4, (int64_t[]){1, cases[c].cin, cases[c].side, cases[c].side}, -1, 1, 21), false);
            fx_input(&f, fx_rand(4, (int64_t[]){cases[c].cout, cases[c].cin, cases[c].k, cases[c].k}, -a, a, 22), true);
            fx_ints(&f, "strides", 2, (int64_t[]){cases[c].stride, cases[c].stride});
            fx_ints(&f, "pads", 4, (int64_t[]){cases[c].pad, cases[c].pad, cases[c].pad, cases[c].pad});
            fx_outputs(&f, 1, 1);
            af_kernel k;
            af_tensor ref[FX_MAX_OUT] = {{0}}, got[FX_MAX_OUT] = {{0}};
            if (fx_prepare(&f, isas[i], &k)) {
                if (cases[c].kernel && strcmp(k.name, cases[c].kernel) != 0)
                    af_test_fail(__FILE__, __LINE__, "case %zu on %s runs %s, not %s", c, af_isa_name(isas[i]), k.name,
                                 cases[c].kernel);
                if (fx_run_reference(&f, ref) == AF_OK && fx_run_fast(&f, &k, NULL, got) == AF_OK) {
                    const float *r = ref[0].data, *g = got[0].data;
                    double err = 0, mag = 0;
                    const int64_t n = af_tensor_numel(&ref[0]);
                    for (int64_t e = 0; e < n; e++) {
                        err += ((double)g[e] - r[e]) * ((double)g[e] - r[e]);
                        mag += (double)r[e] * r[e];
                    }
                    const double rel = sqrt(err / mag);
                    if (!(rel < 4e-7))
                        af_test_fail(__FILE__, __LINE__, "%s %s, K = %lld: RMS error %.3g of |y|, want < 4e-7", k.name,
                                     af_isa_name(isas[i]), (long long)K, rel);
                } else {
                    af_test_fail(__FILE__, __LINE__, "a run failed: %s", f.err.message);
                }
                fx_free_outputs(&f, ref);
                fx_free_outputs(&f, got);
                af_kernel_release(&k);
            } else {
                af_test_fail(__FILE__, __LINE__, "case %zu: no fast kernel", c);
            }
            fx_free(&f);
        }
}

/* 1-D convolutions ([N, C, L], as audio and sequence models export them) run the 2-D kernels on
 * views of height 1; against the reference at every ISA, one and two threads: pointwise, the
 * implicit GEMM (strides, uneven pads, auto_pad SAME_UPPER), im2col (dilated), depthwise and
 * grouped, lengths that hit the vector tails. (A symbolic length: test_dynamic_fusion.c.) */
AF_TEST(fast_conv_1d_matches_reference) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    af_isa isas[AF_ISA_COUNT];
    const int n_isa = fx_isas(isas);
    static const struct {
        int64_t n, cin, cout, len, k, stride, pad, pad_end, dilation, group;
        bool same_upper;
    } cases[] = {
        {1, 16, 24, 300, 1, 1, 0, 0, 1, 1, false}, /* pointwise: the 1x1 GEMM */
        {2, 8, 20, 37, 3, 1, 1, 1, 1, 1, false},   /* implicit GEMM */
        {1, 8, 33, 101, 5, 2, 2, 1, 1, 1, false},  /* stride 2, uneven pads */
        {1, 6, 16, 50, 3, 1, 2, 2, 2, 1, false},   /* dilated: im2col */
        {2, 12, 12, 45, 7, 1, 3, 3, 1, 12, false}, /* depthwise */
        {1, 16, 16, 29, 3, 2, 1, 1, 1, 4, false},  /* grouped */
        {1, 5, 9, 23, 4, 3, 0, 0, 1, 1, true},     /* auto_pad SAME_UPPER, stride 3 */
    };
    int covered = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int i = 0; i < n_isa; i++) {
            fx f;
            fx_init(&f, AF_OP_CONV, 17);
            fx_input(&f, fx_rand(3, (int64_t[]){cases[c].n, cases[c].cin, cases[c].len}, -1, 1, 21 + c), false);
            fx_input(&f, fx_rand(3, (int64_t[]){cases[c].cout, cases[c].cin / cases[c].group, cases[c].k}, -1, 1, 31 + c),
                     true);
            fx_input(&f, fx_rand(1, (int64_t[]){cases[c].cout}, -1, 1, 41 + c), true);
            fx_ints(&f, "strides", 1, (int64_t[]){cases[c].stride});
            fx_ints(&f, "dilations", 1, (int64_t[]){cases[c].dilation});
            if (cases[c].same_upper) fx_str(&f, "auto_pad", "SAME_UPPER");
            else fx_ints(&f, "pads", 2, (int64_t[]){cases[c].pad, cases[c].pad_end});
            fx_int(&f, "group", cases[c].group);
            fx_outputs(&f, 1, 1);
            const char *name = "";
            const int64_t bad = fx_compare(&f, isas[i], &pools, (fx_tol){1e-5, 1e-4, 0}, &name);
            if (bad != 0) printf("  1-D case %zu isa %s (%s): %lld off\n", c, af_isa_name(isas[i]), name, (long long)bad);
            CHECK_EQ_INT(bad, 0); /* -1: no fast kernel took it */
            covered += bad == 0;
            fx_free(&f);
        }
    CHECK(covered == (int)(sizeof cases / sizeof cases[0]) * n_isa);
    fx_pools_free(&pools);
}
