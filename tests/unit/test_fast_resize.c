/*
 * The fast Resize kernel (src/kernels/fast/resize.c) against the reference kernel, at every ISA
 * level (its rows are summed in vectors) and with 1 and 2 threads: nearest in every rounding mode, linear and cubic under every coordinate mapping, up,
 * down and mixed scales, antialias, exclude_outside, sizes instead of scales, ranks 2 to 5. Each
 * case also asserts which path ran: the separable one, or (a resized leading axis, extrapolated
 * crop points, an integer tensor) the reference.
 *
 * Tolerances: nearest copies, so it is exact. Linear and cubic sum at most 16 x 16 taps in float
 * where the reference sums in double; with inputs in [-1, 1] and weights whose absolute values
 * add up to at most about 1.4 per axis, 2e-6 absolute plus 1e-6 relative bounds the difference.
 */
#include "fast_check.h"
#include "kernels/fast/resize.h"

typedef struct resize_case {
    const char *label;
    int rank;
    int64_t dims[5];
    float scales[5]; /* used when sizes[0] == 0 */
    int64_t sizes[5];
    const char *mode, *coord, *nearest;
    int antialias, exclude_outside;
    float cubic_a; /* 0: the default */
    bool separable; /* the fast path, not the reference, runs */
} resize_case;

static const resize_case cases[] = {
    {"nearest x2 floor", 4, {1, 3, 7, 9}, {1, 1, 2, 2}, {0}, "nearest", "asymmetric", "floor", 0, 0, 0, true},
    {"nearest x3 prefer_floor", 4, {2, 2, 5, 4}, {1, 1, 3, 3}, {0}, "nearest", "half_pixel", "round_prefer_floor",
     0, 0, 0, true},
    {"nearest x1.5 prefer_ceil", 4, {1, 2, 6, 10}, {1, 1, 1.5f, 1.5f}, {0}, "nearest", "align_corners",
     "round_prefer_ceil", 0, 0, 0, true},
    {"nearest down floor", 4, {1, 2, 13, 11}, {1, 1, 0.5f, 0.6f}, {0}, "nearest", "tf_half_pixel_for_nn", "floor",
     0, 0, 0, true},
    {"nearest down ceil", 4, {1, 2, 13, 11}, {1, 1, 0.5f, 0.6f}, {0}, "nearest", "asymmetric", "ceil", 0, 0, 0, true},
    {"linear x8 half_pixel", 4, {1, 21, 9, 11}, {1, 1, 8, 8}, {0}, "linear", "half_pixel", NULL, 0, 0, 0, true},
    {"linear x2 pytorch", 4, {2, 3, 7, 5}, {1, 1, 2, 2}, {0}, "linear", "pytorch_half_pixel", NULL, 0, 0, 0, true},
    {"linear align_corners sizes", 4, {1, 4, 5, 6}, {0}, {1, 4, 17, 23}, "linear", "align_corners", NULL, 0, 0, 0,
     true},
    {"linear asymmetric mixed", 4, {1, 2, 12, 6}, {1, 1, 0.5f, 3}, {0}, "linear", "asymmetric", NULL, 0, 0, 0, true},
    {"linear to one row", 4, {1, 2, 9, 8}, {0}, {1, 2, 1, 5}, "linear", "pytorch_half_pixel", NULL, 0, 0, 0, true},
    {"cubic x2", 4, {1, 3, 6, 7}, {1, 1, 2, 2}, {0}, "cubic", "half_pixel", NULL, 0, 0, 0, true},
    {"cubic down exclude", 4, {1, 2, 16, 15}, {1, 1, 0.7f, 0.5f}, {0}, "cubic", "half_pixel", NULL, 0, 1, -0.5f,
     true},
    {"linear antialias /3", 4, {1, 2, 30, 24}, {1, 1, 1.0f / 3, 0.25f}, {0}, "linear", "half_pixel", NULL, 1, 0, 0,
     true},
    {"cubic antialias /2", 4, {1, 2, 20, 18}, {1, 1, 0.5f, 0.5f}, {0}, "cubic", "half_pixel", NULL, 1, 0, 0, true},
    {"rank 2", 2, {9, 13}, {2.5f, 0.5f}, {0}, "linear", "half_pixel", NULL, 0, 0, 0, true},
    {"rank 3", 3, {4, 5, 6}, {1, 2, 2}, {0}, "cubic", "asymmetric", NULL, 0, 0, 0, true},
    {"rank 5", 5, {1, 2, 3, 4, 5}, {1, 1, 1, 2, 3}, {0}, "linear", "half_pixel", NULL, 0, 0, 0, true},
    {"wide plane", 4, {1, 1, 3, 100}, {1, 1, 2, 2.56f}, {0}, "linear", "half_pixel", NULL, 0, 0, 0, true},
    /* Many small planes; one pixel spread over a plane (DeepLabV3's pooled branch). */
    {"many small planes", 4, {1, 67, 2, 3}, {1, 1, 2.5f, 2}, {0}, "linear", "half_pixel", NULL, 0, 0, 0, true},
    {"from 1x1", 4, {2, 40, 1, 1}, {0}, {2, 40, 14, 14}, "linear", "half_pixel", NULL, 0, 0, 0, true},
    /* The reference runs these. */
    {"channels resized", 4, {1, 3, 4, 4}, {1, 2, 2, 2}, {0}, "linear", "half_pixel", NULL, 0, 0, 0, false},
    /* (x + 0.5) / 1 rounded up reads the next channel: N and C do not map to themselves. */
    {"ceil shifts channels", 4, {1, 3, 4, 4}, {1, 1, 2, 2}, {0}, "nearest", "tf_half_pixel_for_nn", "ceil", 0, 0, 0,
     false},
    {"antialias too wide", 4, {1, 1, 40, 40}, {1, 1, 0.1f, 0.1f}, {0}, "linear", "half_pixel", NULL, 1, 0, 0, false},
};

static void resize_node(fx *f, const resize_case *rc, int opset) {
    fx_init(f, AF_OP_RESIZE, opset);
    fx_str(f, "mode", rc->mode);
    fx_str(f, "coordinate_transformation_mode", rc->coord);
    if (rc->nearest) fx_str(f, "nearest_mode", rc->nearest);
    if (rc->antialias) fx_int(f, "antialias", 1);
    if (rc->exclude_outside) fx_int(f, "exclude_outside", 1);
    if (rc->cubic_a != 0) fx_float(f, "cubic_coeff_a", rc->cubic_a);
    fx_input(f, fx_rand(rc->rank, rc->dims, -1, 1, (uint64_t)rc->dims[rc->rank - 1] * 31 + (uint64_t)rc->rank), false);
    fx_no_input(f); /* roi */
    if (rc->sizes[0] == 0) {
        fx_input(f, fx_vec(rc->rank, rc->scales), true);
    } else {
        fx_no_input(f); /* scales */
        af_tensor s = {.dtype = AF_DTYPE_INT64, .rank = 1, .dims = {rc->rank}};
        if (af_tensor_alloc(&s, NULL) == AF_OK) memcpy(s.data, rc->sizes, (size_t)rc->rank * sizeof(int64_t));
        fx_input(f, s, true);
    }
}

/* Whether the fast kernel takes its separable path on f's inputs (outputs inferred). */
static bool takes_separable(fx *f) {
    af_tensor out[FX_MAX_OUT];
    bool sep = false;
    if (fx_alloc_outputs(f, out) == AF_OK) {
        const af_tensor *ins[FX_MAX_IN];
        af_tensor *outs[FX_MAX_OUT] = {&out[0]};
        af_op_ctx c = fx_ctx(f, ins, outs);
        sep = af_fast_resize_separable(&c);
    }
    fx_free_outputs(f, out);
    return sep;
}

AF_TEST(fast_resize_matches_the_reference) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    af_isa isas[AF_ISA_COUNT];
    const int n_isa = fx_isas(isas);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const resize_case *rc = &cases[i];
        fx f;
        resize_node(&f, rc, 18);
        const bool nearest = !strcmp(rc->mode, "nearest");
        const fx_tol tol = nearest ? FX_EXACT : (fx_tol){2e-6, 1e-6, 0};
        const char *name = NULL;
        const bool sep = takes_separable(&f);
        if (sep != rc->separable) printf("  %s: separable %d, expected %d\n", rc->label, sep, rc->separable);
        CHECK(sep == rc->separable);
        for (int k = 0; k < n_isa; k++) {
            const int64_t bad = fx_compare(&f, isas[k], &pools, tol, &name);
            if (bad) printf("  %s, isa %s: %lld off\n", rc->label, af_isa_name(isas[k]), (long long)bad);
            CHECK_EQ_INT(bad, 0);
            CHECK(name && !strcmp(name, "f32_resize"));
        }
        fx_free(&f);
    }
    fx_pools_free(&pools);
}

/* tf_crop_and_resize's points outside the crop take the extrapolation value: the reference. */
AF_TEST(fast_resize_crop_runs_the_reference) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    fx f;
    fx_init(&f, AF_OP_RESIZE, 13);
    fx_str(&f, "mode", "linear");
    fx_str(&f, "coordinate_transformation_mode", "tf_crop_and_resize");
    fx_float(&f, "extrapolation_value", 7.5f);
    fx_input(&f, fx_rand(4, (int64_t[]){1, 2, 6, 6}, -1, 1, 5), false);
    fx_input(&f, fx_vec(8, (float[]){0, 0, -0.2f, 0.1f, 1, 1, 1.3f, 0.9f}), true);
    fx_input(&f, fx_vec(4, (float[]){1, 1, 2, 2}), true);
    CHECK(!takes_separable(&f));
    CHECK_EQ_INT(fx_compare(&f, af_cpu_info_get()->isa_max, &pools, FX_EXACT, NULL), 0);
    fx_free(&f);
    fx_pools_free(&pools);
}

/* Integer tensors are not covered at all: no fast kernel is prepared. */
AF_TEST(fast_resize_leaves_integers_to_the_reference) {
    fx f;
    fx_init(&f, AF_OP_RESIZE, 13);
    af_tensor x = {.dtype = AF_DTYPE_INT32, .rank = 4, .dims = {1, 1, 2, 2}};
    if (af_tensor_alloc(&x, NULL) == AF_OK) memset(x.data, 0, x.nbytes);
    fx_input(&f, x, false);
    fx_no_input(&f);
    fx_input(&f, fx_vec(4, (float[]){1, 1, 2, 2}), true);
    af_kernel k;
    CHECK(!fx_prepare(&f, af_cpu_info_get()->isa_max, &k));
    fx_free(&f);
}
