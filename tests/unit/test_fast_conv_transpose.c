/* Fast ConvTranspose (GEMM + col2im, and the 1x1 direct GEMM) against the reference ConvTranspose
 * on the same inputs, at every ISA level and 1/2 threads, over plane widths that hit the GEMM's
 * tile tails, odd channel counts, strides, pads, dilations, groups, output_padding, auto_pad,
 * output_shape, 1-D inputs, constant and run-time weights and bias; and the fused epilogue
 * (bias + activation) applied per output channel. Tolerance: 1e-5 + 1e-4 |ref| (float sums in a
 * different order than the double reference). */
#include "fast_check.h"

typedef struct ct_case {
    int64_t n, cin, cout, h, w, kh, kw, sy, sx, dy, dx, pt, pl, pb, pr, opy, opx, group;
    bool bias, const_w;
    const char *auto_pad; /* NULL: explicit pads */
    bool one_d;           /* rank 3: only w, kw, sx, dx, pl, pr, opx count */
    int64_t out_h, out_w; /* output_shape when > 0 */
} ct_case;

static void setup(fx *f, const ct_case *cc) {
    fx_init(f, AF_OP_CONV_TRANSPOSE, 17);
    const int64_t mg = cc->cout / cc->group;
    if (cc->one_d) {
        fx_input(f, fx_rand(3, (int64_t[]){cc->n, cc->cin, cc->w}, -1, 1, 21), false);
        fx_input(f, fx_rand(3, (int64_t[]){cc->cin, mg, cc->kw}, -1, 1, 22), cc->const_w);
    } else {
        fx_input(f, fx_rand(4, (int64_t[]){cc->n, cc->cin, cc->h, cc->w}, -1, 1, 21), false);
        fx_input(f, fx_rand(4, (int64_t[]){cc->cin, mg, cc->kh, cc->kw}, -1, 1, 22), cc->const_w);
    }
    if (cc->bias) fx_input(f, fx_rand(1, (int64_t[]){cc->cout}, -1, 1, 23), cc->const_w);
    if (cc->one_d) {
        fx_ints(f, "strides", 1, (int64_t[]){cc->sx});
        fx_ints(f, "dilations", 1, (int64_t[]){cc->dx});
        if (!cc->auto_pad) fx_ints(f, "pads", 2, (int64_t[]){cc->pl, cc->pr});
        fx_ints(f, "output_padding", 1, (int64_t[]){cc->opx});
        if (cc->out_w > 0) fx_ints(f, "output_shape", 1, (int64_t[]){cc->out_w});
    } else {
        fx_ints(f, "strides", 2, (int64_t[]){cc->sy, cc->sx});
        fx_ints(f, "dilations", 2, (int64_t[]){cc->dy, cc->dx});
        if (!cc->auto_pad) fx_ints(f, "pads", 4, (int64_t[]){cc->pt, cc->pl, cc->pb, cc->pr});
        fx_ints(f, "output_padding", 2, (int64_t[]){cc->opy, cc->opx});
        if (cc->out_h > 0) fx_ints(f, "output_shape", 2, (int64_t[]){cc->out_h, cc->out_w});
    }
    if (cc->auto_pad) fx_str(f, "auto_pad", cc->auto_pad);
    fx_int(f, "group", cc->group);
    fx_outputs(f, 1, 1);
}

static int64_t run_case(const ct_case *cc, af_isa isa, const fx_pools *pools, const char **name) {
    fx f;
    setup(&f, cc);
    int64_t bad = fx_compare(&f, isa, pools, (fx_tol){1e-5, 1e-4, 0}, name);
    fx_free(&f);
    return bad;
}

AF_TEST(fast_conv_transpose_matches_reference) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    af_isa isas[AF_ISA_COUNT];
    int n_isa = fx_isas(isas);
    int covered = 0;
    for (int i = 0; i < n_isa; i++) {
        for (int64_t w = 1; w <= 37; w += (w < 10 ? 1 : 9)) {
            /* n cin cout h w kh kw sy sx dy dx pt pl pb pr opy opx group bias const_w auto_pad 1d out_h out_w */
            const ct_case cases[] = {
                {1, 3, 5, w, w, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, true, true, NULL, false, 0, 0},
                {2, 4, 6, w, w + 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, true, true, NULL, false, 0, 0},
                {1, 5, 3, w, w, 4, 4, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 1, false, true, NULL, false, 0, 0},
                {1, 6, 9, w, w, 3, 2, 3, 2, 2, 1, 0, 1, 2, 0, 2, 1, 3, true, true, NULL, false, 0, 0},
                {1, 4, 4, w, w, 3, 3, 1, 1, 2, 2, 2, 1, 0, 2, 0, 0, 2, false, true, NULL, false, 0, 0},
                {1, 7, 5, w, w, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, true, true, NULL, false, 0, 0},   /* 1x1 direct */
                {2, 6, 4, w, w, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 2, true, false, NULL, false, 0, 0},  /* runtime W, B */
                {1, 3, 3, w, w, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 0, 3, false, true, NULL, false, 0, 0},  /* depthwise-like */
                {1, 2, 3, w, w, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0, 1, true, false, "SAME_UPPER", false, 0, 0},
                {1, 2, 3, w, w, 2, 3, 2, 3, 1, 1, 0, 0, 0, 0, 0, 0, 1, true, true, "SAME_LOWER", false, 0, 0},
                {1, 3, 2, w, w, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0, 1, false, true, "VALID", false, 0, 0},
                {1, 3, 2, w, w, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, 0, 0, 1, true, true, NULL, false, 2 * w + 1, 2 * w + 2},
                {2, 5, 4, 1, w, 1, 5, 1, 3, 1, 2, 0, 2, 0, 1, 0, 2, 1, true, true, NULL, true, 0, 0},    /* 1-D */
            };
            for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
                const ct_case *cc = &cases[c];
                /* Pads larger than the full output are invalid models; skip those widths. */
                int64_t full_w = cc->sx * (cc->w - 1) + cc->opx + (cc->kw - 1) * cc->dx + 1;
                int64_t full_h = cc->sy * (cc->h - 1) + cc->opy + (cc->kh - 1) * cc->dy + 1;
                if (!cc->auto_pad && (full_w - cc->pl - cc->pr < 1 || (!cc->one_d && full_h - cc->pt - cc->pb < 1)))
                    continue;
                const char *name = "";
                int64_t bad = run_case(cc, isas[i], &pools, &name);
                CHECK(bad >= 0); /* every case has a fast kernel */
                if (bad < 0) continue;
                covered++;
                CHECK(fx_named_for(name, isas[i]));
                if (bad)
                    printf("  case %zu width %lld isa %s (%s): %lld off\n", c, (long long)w, af_isa_name(isas[i]), name,
                           (long long)bad);
                CHECK_EQ_INT(bad, 0);
            }
        }
    }
    CHECK(covered > 100);
    fx_pools_free(&pools);
}

/* The epilogue: bias first, then the program (here scale + relu), per output channel. */
AF_TEST(fast_conv_transpose_applies_its_epilogue) {
    fx_pools pools;
    CHECK(fx_pools_init(&pools));
    af_isa isas[AF_ISA_COUNT];
    int n_isa = fx_isas(isas);
    const ct_case cases[] = {
        {2, 4, 6, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0, 2, true, true, NULL, false, 0, 0},
        {1, 5, 3, 6, 6, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, true, true, NULL, false, 0, 0},
    };
    for (int i = 0; i < n_isa; i++) {
        for (size_t cs = 0; cs < sizeof cases / sizeof cases[0]; cs++) {
            fx f;
            setup(&f, &cases[cs]);
            af_kernel k;
            CHECK(fx_prepare(&f, isas[i], &k));
            CHECK(k.takes_epilogue);
            af_tensor ref[FX_MAX_OUT], got[FX_MAX_OUT];
            CHECK(fx_run_reference(&f, ref) == AF_OK);
            af_epilogue e;
            af_epilogue_init(&e);
            CHECK(af_epilogue_unary(&e, AF_EPI_MUL_SCALAR, 1.5f, 0) == AF_OK);
            CHECK(af_epilogue_unary(&e, AF_EPI_RELU, 0, 0) == AF_OK);
            CHECK(fx_run(&f, &k, &e, pools.two, got) == AF_OK);
            float *r = ref[0].data;
            for (int64_t j = 0; j < af_tensor_numel(&ref[0]); j++) r[j] = r[j] * 1.5f > 0 ? r[j] * 1.5f : 0;
            CHECK_EQ_INT(fx_count_off(&got[0], &ref[0], (fx_tol){1e-5, 1e-4, 0}, k.name), 0);
            fx_free_outputs(&f, ref);
            fx_free_outputs(&f, got);
            af_kernel_release(&k);
            fx_free(&f);
        }
    }
    fx_pools_free(&pools);
}
