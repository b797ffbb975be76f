/*
 * Fast float32 ConvTranspose in NCHW, 1-D and 2-D, any group, stride, pads, dilation,
 * output_padding, output_shape and auto_pad the shape function accepts.
 *
 * Per image and group: one GEMM  col = W_g^T X_g  (W_g^T is [M/g * kh * kw, C/g], packed once at
 * prepare; X_g is [C/g, H*W] read in place) gives every (output channel, ky, kx) row's
 * contribution at each input pixel; col2im then scatters the rows into the output planes, one task
 * per output channel, so no two threads write the same element and each element's sum runs in the
 * same order whatever the thread count. A 1x1 kernel with stride 1 and no padding needs no
 * scatter: the GEMM writes Y directly.
 *
 * (A per-output-phase decomposition, one GEMM per stride phase, would write Y without the col
 * buffer and the scatter. Measured on one AVX-512 core, the scatter is about 0.14 ms next to the
 * GEMM's 0.47 ms for 64->32 channels, 4x4 kernel, stride 2 at 28x28, and 0.04 ms next to 0.45 ms
 * for 256->128, 2x2 stride 2 at 14x14: a phase decomposition could save at most that, and it
 * degenerates into many small GEMMs for the dilated and padded shapes, so col2im is kept.)
 *
 * Epilogue coordinates, as for Conv: m = output channel, n = flattened output pixel, batch =
 * image. The node's bias (a constant) runs as the program's first step; the program is applied to
 * each output channel right after its scatter, while it is hot.
 */
#include <limits.h>
#include <string.h>

#include "ir/shape/conv_geom.h"
#include "kernels/gemm/gemm.h"
#include "kernels/kernel.h"
#include "util/alloc.h"
#include "util/error.h"

static const char *const ct_names[2][AF_ISA_COUNT] = {
    {"f32_conv_transpose_col2im__scalar", "f32_conv_transpose_col2im__avx2", "f32_conv_transpose_col2im__avx512"},
    {"f32_conv_transpose_1x1__scalar", "f32_conv_transpose_1x1__avx2", "f32_conv_transpose_1x1__avx512"},
};

typedef struct ct_state {
    af_isa isa;
    int n_sp;                          /* 1 or 2 spatial dims; 1-D runs as H = 1 */
    int64_t cin, cout, groups, kh, kw; /* W is [cin, cout/groups, kh, kw] */
    bool direct;                       /* 1x1, stride 1, no padding: GEMM straight into Y */
    af_gemm_packed **packed;           /* per group: op(A) = W_g^T as [cout/groups * kh * kw, cin/groups];
                                          NULL when W is not a constant: read in place each run */
    const float *bias;                 /* [cout] from the graph's constant, or NULL */
    bool runtime_bias;                 /* B is present but not a constant: read it each run */
    af_epilogue_tile_fn apply;
} ct_state;

/* The GEMM of group gi over hw input pixels: m rows of op(A) = W_gi^T, rows x cg as packed, or W
 * read in place (w, [cin, rows] per group), summed in the blocks of K the conv kernels sum in
 * (AF_CONV_FLUSH_K). B, C and the epilogue are the caller's. */
static af_gemm_desc ct_gemm_desc(const ct_state *s, const float *w, int64_t gi, int64_t m, int64_t rows, int64_t hw) {
    const int64_t cg = s->cin / s->groups;
    af_gemm_desc d = af_gemm_desc_default();
    d.isa = s->isa;
    d.M = m;
    d.N = d.ldb = d.ldc = hw;
    d.K = cg;
    d.k_block = AF_CONV_FLUSH_K;
    if (s->packed) {
        d.packed_a = s->packed[gi];
    } else {
        d.A = w ? w + gi * cg * rows : NULL;
        d.lda = rows;
        d.trans_a = true;
    }
    return d;
}

static void ct_free(void *p) {
    ct_state *s = p;
    for (int64_t g = 0; s->packed && g < s->groups; g++) af_gemm_packed_free(s->packed[g]);
    af_free(s->packed);
    af_free(s);
}

/* The 2-D view of this run's geometry (1-D: a leading spatial dim of size 1). */
typedef struct ct_geom {
    int64_t h, w, oh, ow, kh, kw, sy, sx, dy, dx, py, px;
} ct_geom;

static af_status run_geometry(af_op_ctx *c, const ct_state *s, const af_tensor *x, const af_tensor *w, ct_geom *o) {
    af_conv_geom geo;
    int64_t out[2] = {0, 0};
    af_status st = af_conv_geom_init(c, s->n_sp, w->dims + 2, &geo);
    if (st == AF_OK) st = af_conv_geom_transpose(c, &geo, x->dims + 2, out);
    if (st != AF_OK) return st;
    if (s->n_sp == 2) {
        *o = (ct_geom){x->dims[2], x->dims[3], out[0], out[1], geo.kernel[0], geo.kernel[1], geo.stride[0],
                       geo.stride[1], geo.dilation[0], geo.dilation[1], geo.pad_begin[0], geo.pad_begin[1]};
    } else {
        *o = (ct_geom){1, x->dims[2], 1, out[0], 1, geo.kernel[0], 1, geo.stride[0], 1, geo.dilation[0], 0,
                       geo.pad_begin[0]};
    }
    return AF_OK;
}

/* The t in [0, count) with 0 <= t * s + base < limit (s >= 1): [*lo, *hi), empty when lo >= hi. */
static void valid_range(int64_t base, int64_t s, int64_t limit, int64_t count, int64_t *lo, int64_t *hi) {
    int64_t a = base >= 0 ? 0 : (-base + s - 1) / s;
    int64_t b = limit - base <= 0 ? 0 : (limit - base + s - 1) / s;
    *lo = a;
    *hi = b < count ? b : count;
}

typedef struct ct_job {
    const ct_state *s;
    const ct_geom *g;
    const float *col;       /* [mg * kh * kw, h * w] of this group (NULL: direct, Y already written) */
    float *y;               /* the group's first output channel of this image */
    int64_t m0;             /* that channel's index in the output */
    int64_t image;
    const af_epilogue *epi; /* with the bias first; NULL or empty: none */
} ct_job;

/* Scatters output channel `task` of the group, then applies the epilogue to it. */
static void ct_channel(void *ctx, int task, int thread) {
    (void)thread;
    const ct_job *j = ctx;
    const ct_geom *g = j->g;
    const int64_t ohw = g->oh * g->ow, hw = g->h * g->w;
    float *yc = j->y + (int64_t)task * ohw;
    if (j->col) {
        memset(yc, 0, (size_t)ohw * sizeof *yc);
        for (int64_t ky = 0; ky < g->kh; ky++) {
            const int64_t by = ky * g->dy - g->py;
            int64_t iy0, iy1;
            valid_range(by, g->sy, g->oh, g->h, &iy0, &iy1);
            for (int64_t kx = 0; kx < g->kw; kx++) {
                const int64_t bx = kx * g->dx - g->px;
                int64_t ix0, ix1;
                valid_range(bx, g->sx, g->ow, g->w, &ix0, &ix1);
                if (ix0 >= ix1) continue;
                const float *src = j->col + (((int64_t)task * g->kh + ky) * g->kw + kx) * hw;
                for (int64_t iy = iy0; iy < iy1; iy++) {
                    const float *sr = src + iy * g->w;
                    float *dr = yc + (iy * g->sy + by) * g->ow + bx;
                    if (g->sx == 1) {
                        for (int64_t ix = ix0; ix < ix1; ix++) dr[ix] += sr[ix];
                    } else {
                        const int64_t sx = g->sx;
                        for (int64_t ix = ix0; ix < ix1; ix++) dr[ix * sx] += sr[ix];
                    }
                }
            }
        }
    }
    if (j->epi && j->epi->n_steps) {
        for (int64_t n0 = 0; n0 < ohw; n0 += INT_MAX / 2) {
            int64_t cols = ohw - n0 < INT_MAX / 2 ? ohw - n0 : INT_MAX / 2;
            j->s->apply(j->epi, yc + n0, ohw, 1, (int)cols, j->m0 + task, n0, j->image);
        }
    }
}

static af_status ct_run(const af_kernel *k, af_op_ctx *c, const af_epilogue *epi, af_threadpool *pool,
                        void *workspace) {
    const ct_state *s = k->state;
    const af_tensor *x = af_ctx_input(c, 0), *w = af_ctx_input(c, 1);
    af_tensor *y = af_ctx_output(c, 0);
    if (!x || !w || !y || x->rank != s->n_sp + 2 || x->dims[1] != s->cin || x->dtype != AF_DTYPE_FLOAT ||
        y->dtype != AF_DTYPE_FLOAT)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "input must be float32 [N, %lld, ...] of rank %d", (long long)s->cin,
                           s->n_sp + 2);
    if (!s->packed && (w->rank != x->rank || w->dtype != AF_DTYPE_FLOAT || w->dims[0] != s->cin ||
                       w->dims[1] * s->groups != s->cout || (s->n_sp == 2 && w->dims[2] != s->kh) ||
                       w->dims[w->rank - 1] != s->kw || (!w->data && af_tensor_numel(w) > 0)))
        return af_ctx_fail(c, AF_ERR_RUNTIME, "W does not match the shape the kernel was prepared for");
    ct_geom g;
    af_status st = run_geometry(c, s, x, w, &g);
    if (st != AF_OK) return st;
    const int64_t n_img = x->dims[0];
    bool shape_ok = y->rank == x->rank && y->dims[0] == n_img && y->dims[1] == s->cout &&
                    y->dims[y->rank - 1] == g.ow && (s->n_sp == 1 || y->dims[2] == g.oh);
    if (!shape_ok) return af_ctx_fail(c, AF_ERR_RUNTIME, "output shape does not match the transposed convolution");
    const int64_t hw = g.h * g.w, ohw = g.oh * g.ow;
    if (af_tensor_numel(y) == 0) return AF_OK;
    if ((!x->data && af_tensor_numel(x) > 0) || !y->data)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "X and Y must have data");
    const int64_t mg = s->cout / s->groups, cg = s->cin / s->groups, rows = mg * g.kh * g.kw;
    const bool direct = s->direct && g.kh == 1 && g.kw == 1 && g.sy == 1 && g.sx == 1 && g.py == 0 && g.px == 0 &&
                        g.oh == g.h && g.ow == g.w;
    size_t col_bytes = direct ? 0 : (((size_t)(rows * hw) * sizeof(float) + 63) & ~(size_t)63);
    if (!direct && (!workspace || col_bytes > k->workspace_bytes)) {
        if (epi && epi->n_steps) return af_ctx_fail(c, AF_ERR_RUNTIME, "input is larger than the session planned for");
        return af_op_info(c->node->op)->run(c); /* larger than planned: the reference runs */
    }
    float *col = direct ? NULL : (float *)workspace;

    af_epilogue e;
    af_epilogue_init(&e);
    const float *bias = s->bias;
    if (s->runtime_bias) {
        const af_tensor *b = af_ctx_input(c, 2);
        if (!b || b->dtype != AF_DTYPE_FLOAT || af_tensor_numel(b) != s->cout || !b->data)
            return af_ctx_fail(c, AF_ERR_RUNTIME, "B must be float32 with %lld elements", (long long)s->cout);
        bias = b->data;
    }
    if (bias && (st = af_epilogue_vec(&e, AF_EPI_BIAS_ROW, bias, NULL)) != AF_OK)
        return af_ctx_fail(c, st, "epilogue too long");
    for (int i = 0; epi && i < epi->n_steps; i++)
        if ((st = af_epilogue_push(&e, &epi->steps[i])) != AF_OK) return af_ctx_fail(c, st, "epilogue too long");

    const float *xd = x->data;
    float *yd = y->data;
    for (int64_t n = 0; n < n_img; n++) {
        for (int64_t gi = 0; gi < s->groups; gi++) {
            float *yg = yd + (n * s->cout + gi * mg) * ohw;
            af_gemm_desc d = ct_gemm_desc(s, w->data, gi, direct ? mg : rows, rows, hw);
            d.B = xd + (n * s->cin + gi * cg) * hw;
            d.C = direct ? yg : col;
            size_t need = af_sgemm_workspace_size(&d, af_threadpool_n_threads(pool));
            if (workspace && col_bytes + need <= k->workspace_bytes) {
                d.workspace = (char *)workspace + col_bytes;
                d.workspace_size = need;
            }
            const float *jcol = direct ? NULL : col;
            if (hw > 0) {
                if ((st = af_sgemm(&d, pool)) != AF_OK) return af_ctx_fail(c, st, "GEMM failed");
            } else { /* an empty input plane: only the bias reaches the output */
                memset(yg, 0, (size_t)(mg * ohw) * sizeof *yg);
                jcol = NULL;
            }
            ct_job j = {.s = s, .g = &g, .col = jcol, .y = yg, .m0 = gi * mg, .image = n, .epi = &e};
            if (j.col || e.n_steps) af_threadpool_run(pool, (int)mg, ct_channel, &j);
        }
    }
    return AF_OK;
}

af_status af_fast_conv_transpose_prepare(const af_kernel_request *req, af_kernel *k, af_error *err) {
    const af_node *n = req->node;
    if (n->op != AF_OP_CONV_TRANSPOSE) return AF_OK;
    const af_tensor *x = af_kernel_input(req, 0), *w = af_kernel_input(req, 1), *b = af_kernel_input(req, 2);
    const af_tensor *y = n->n_outputs > 0 && n->outputs[0] >= 0 ? &req->graph->values[n->outputs[0]].t : NULL;
    if (!x || !w || !y || x->dtype != AF_DTYPE_FLOAT || w->dtype != AF_DTYPE_FLOAT || (x->rank != 4 && x->rank != 3) ||
        w->rank != x->rank || af_tensor_numel(w) <= 0 || (b && b->dtype != AF_DTYPE_FLOAT))
        return AF_OK;
    const int n_sp = x->rank - 2;
    const int64_t groups = af_node_attr_int(n, "group", 1), cin = x->dims[1];
    if (cin <= 0 || groups < 1 || cin % groups || w->dims[0] != cin) return AF_OK;
    const int64_t mg = w->dims[1], cout = mg * groups, cg = cin / groups;
    const int64_t kh = n_sp == 2 ? w->dims[2] : 1, kw = w->dims[x->rank - 1];
    if (b && b->rank >= 0 && af_tensor_numel(b) != cout) return AF_OK;
    const af_tensor *ins[3] = {x, w, b};
    af_op_ctx c = {.node = n, .graph = req->graph, .opset = req->graph->opset, .n_inputs = n->n_inputs, .inputs = ins,
                   .err = err};
    af_conv_geom geo;
    if (af_conv_geom_init(&c, n_sp, w->dims + 2, &geo) != AF_OK) return AF_OK; /* the reference reports it */
    /* Scratch is sized from the declared input and output; unknown sizes: the reference runs. */
    int64_t hw = 1, ohw = 1;
    for (int d = 2; d < x->rank; d++) {
        if (x->dims[d] < 0 || y->rank != x->rank || y->dims[d] < 0) return AF_OK;
        hw *= x->dims[d];
        ohw *= y->dims[d];
    }
    (void)ohw;
    bool direct = kh == 1 && kw == 1;
    for (int i = 0; i < n_sp; i++)
        direct = direct && geo.stride[i] == 1 && geo.pad_begin[i] == 0 && geo.pad_end[i] == 0 && geo.out_pad[i] == 0;
    direct = direct && geo.auto_pad == AF_CONV_PAD_NOTSET && geo.n_out_shape == 0;

    ct_state *s = af_calloc(1, sizeof *s);
    if (!s) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory preparing ConvTranspose '%s'", n->name);
    *s = (ct_state){.isa = af_cpu_isa_clamp(req->choice.isa), .n_sp = n_sp, .cin = cin, .cout = cout, .groups = groups,
                    .kh = kh, .kw = kw, .direct = direct, .bias = b ? b->data : NULL,
                    .runtime_bias = b && !b->data,
                    .apply = af_epilogue_tile_fn_for(req->choice.isa)};
    const int64_t rows = mg * kh * kw;
    af_status st = AF_OK;
    const bool pack = w->data != NULL;
    if (pack && !(s->packed = af_calloc((size_t)groups, sizeof *s->packed))) st = AF_ERR_OUT_OF_MEMORY;
    /* W_g is stored [cg, rows]: op(A) = W_g^T is rows x cg, lda = rows. */
    for (int64_t gi = 0; pack && gi < groups && st == AF_OK; gi++)
        st = af_gemm_pack_a(s->isa, 1, rows, cg, (const float *)w->data + gi * cg * rows, rows, true, 0,
                            &s->packed[gi]);
    if (st != AF_OK) {
        ct_free(s);
        if (st == AF_ERR_OUT_OF_MEMORY)
            return af_errorf(err, st, "out of memory preparing ConvTranspose '%s'", n->name);
        return AF_OK; /* shapes the packer refuses: the reference runs */
    }
    size_t col = direct ? 0 : (((size_t)(rows * hw) * sizeof(float) + 63) & ~(size_t)63);
    /* Only the sizes matter here (W may have no data). */
    af_gemm_desc d = ct_gemm_desc(s, w->data, 0, direct ? mg : rows, rows, hw > 0 ? hw : 1);
    k->workspace_bytes = col + af_sgemm_workspace_size(&d, req->choice.n_threads > 0 ? req->choice.n_threads : 1);
    k->name = ct_names[direct][s->isa];
    k->state = s;
    k->free_state = ct_free;
    k->run = ct_run;
    k->takes_epilogue = true;
    k->packed_inputs = pack ? 1u << 1 : 0; /* W is packed (when constant); the bias is read in place */
    for (int64_t gi = 0; s->packed && gi < s->groups; gi++) k->weight_bytes += af_gemm_packed_bytes(s->packed[gi]);
    return AF_OK;
}
