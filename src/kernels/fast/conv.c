/*
 * Fast float32 2-D Conv in NCHW, and 1-D Conv ([N, C, L]) as a 2-D one of height 1 on views of
 * its tensors (as_2d, geometry_2d). 1x1 convolutions with 256+ output pixels are a GEMM on the input
 * itself (at a stride, on its im2col subsample); other ungrouped, undilated ones an implicit GEMM
 * over phase planes (src/kernels/gemm/conv_implicit.c); grouped or dilated kernels go through
 * im2col into the workspace; depthwise convolutions have their own kernels
 * (src/kernels/fast/conv_depthwise.c), and so, on AVX-512, do grouped ones with groups of 2 to 32
 * channels (the channel-blocked kernel of conv_depthwise_blocked.c). 3x3 stride-1 ones with enough
 * tiles run Winograd (conv_winograd.c), picked per run where the plane is unknown at prepare
 * (wino_by_plane). Weights are packed once, per group, at prepare. A batch at several threads runs
 * whole images as tasks (image_tasks). Epilogue coordinates: m = output channel, n = flattened
 * output pixel, batch = image.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "ir/shape/conv_geom.h"
#include "kernels/fast/conv_depthwise.h"
#include "kernels/fast/vec_internal.h"
#include "kernels/gemm/conv_implicit.h"
#include "kernels/gemm/conv_tap_regions.h"
#include "kernels/gemm/conv_winograd.h"
#include "kernels/gemm/gemm.h"
#include "kernels/kernel.h"
#include "util/alloc.h"
#include "util/error.h"

/* The largest share of (output pixel, tap) pairs reading inside the input at which a conv bound
 * for im2col runs by live-tap rectangles instead (af_conv_tap_regions_live_share). One thread /
 * two, 960 -> 256 channels, 3x3, ms im2col -> rectangles: dilation 12 over 14x14 (share 0.18,
 * DeepLabV3's ASPP at 224x224) 7.0 -> 1.2; dilation 12 over 33x33 (0.57) 33.3 -> 21.0 / 17.2 ->
 * 12.7; dilation 6 over 33x33 (0.77) 34.4 -> 26.4 / 17.6 -> 15.3; but 256 channels, dilation 2
 * over 28x28 (0.91) 5.4 -> 6.4 / 3.1 -> 4.2: each tap's gather and transposed add cost more than
 * the few pairs they skip. */
#define TAP_REGIONS_MAX_SHARE 0.8

typedef struct conv_state {
    af_isa isa;
    int64_t cout, cin, groups, kh, kw; /* W is [cout, cin/groups, kh, kw] */
    bool pointwise;
    af_gemm_packed **packed; /* per group: op(A) = W_g as [cout/groups, cin/groups*kh*kw] */
    const float *bias;       /* [cout] from the graph's constant, or NULL */
    af_depthwise_conv dw;    /* depthwise path when dw.weights is set */
    af_dw_blocked grouped;   /* narrow groups, channel-blocked, when grouped.weights is set */
    af_conv_implicit implicit; /* the implicit GEMM when implicit.w is set (then packed is NULL) */
    af_conv_winograd wino;     /* Winograd F(m x m, 3x3) when wino.u is set (then packed is NULL) */
    af_conv_tap_regions taps;  /* live-tap rectangles when taps.w is set (then packed is NULL) */
    struct wino_by_plane *by_plane; /* a 3x3 conv of unknown plane that Winograd may take */
    bool one_d;                     /* a 1-D conv, [N, C, L], run as [N, C, 1, L] */
    int64_t out_hw;            /* output pixels per channel as planned; -1: unknown */
} conv_state;

/* Winograd for a 3x3 stride-1 conv whose output plane is unknown at prepare (a dynamic-size
 * export): the tile size, and whether Winograd pays at all, depend on the plane
 * (af_conv_winograd_tile), so each size's U is made by the first run whose plane asks for it and
 * kept for the runs after; other planes run the implicit GEMM prepared beside it. Runs of one plan
 * may be concurrent: a U is published by compare-and-swap, and a run that loses the race frees its
 * own. */
typedef struct wino_by_plane {
    _Atomic(af_conv_winograd *) u[2]; /* m = 4, m = 2; NULL until a run needs it */
    atomic_int ran;                   /* what the latest run took: its m, 0 the implicit GEMM, -1 none */
} wino_by_plane;

static const char *by_plane_ran(const af_kernel *k) {
    switch (atomic_load_explicit(&((const conv_state *)k->state)->by_plane->ran, memory_order_relaxed)) {
    case 4: return "f32_conv3x3_winograd_f4x4 (by plane)";
    case 2: return "f32_conv3x3_winograd_f2x2 (by plane)";
    case 0: return "f32_conv_implicit_gemm (by plane)";
    default: return k->name;
    }
}

static void wino_by_plane_free(wino_by_plane *b) {
    if (!b) return;
    for (int i = 0; i < 2; i++) {
        af_conv_winograd *c = atomic_load(&b->u[i]);
        if (c) af_conv_winograd_release(c);
        af_free(c);
    }
    af_free(b);
}

/* The prepared Winograd of tile size m for b, made now if no run has yet; NULL when it cannot be
 * had (out of memory: the caller runs the implicit GEMM). */
static const af_conv_winograd *wino_by_plane_get(const conv_state *s, int m) {
    _Atomic(af_conv_winograd *) *slot = &s->by_plane->u[m == 4 ? 0 : 1];
    af_conv_winograd *c = atomic_load(slot);
    if (c) return c;
    /* The weights back from the implicit GEMM's packed copy (the graph's may be gone). */
    float *w = af_malloc((size_t)(s->cout * s->cin * 9) * sizeof *w);
    if (w) af_gemm_packed_unpack(s->implicit.w, w);
    if (!w || !(c = af_calloc(1, sizeof *c)) || af_conv_winograd_prepare(s->isa, m, w, s->cout, s->cin, c) != AF_OK) {
        af_free(w);
        af_free(c);
        return NULL;
    }
    af_free(w);
    af_conv_winograd *none = NULL;
    if (atomic_compare_exchange_strong(slot, &none, c)) return c;
    af_conv_winograd_release(c); /* another run published its own first */
    af_free(c);
    return none;
}

static void conv_free(void *p) {
    conv_state *s = p;
    for (int64_t g = 0; s->packed && g < s->groups; g++) af_gemm_packed_free(s->packed[g]);
    af_free(s->packed);
    af_depthwise_conv_release(&s->dw);
    af_dw_blocked_release(&s->grouped);
    af_conv_implicit_release(&s->implicit);
    af_conv_winograd_release(&s->wino);
    af_conv_tap_regions_release(&s->taps);
    wino_by_plane_free(s->by_plane);
    af_free(s);
}

/* The GEMM of group g on the GEMM path, over hw output pixels: Y_g = W_g X_g, with the blocks of
 * K that the direct kernels sum in (AF_CONV_FLUSH_K). B, C and the epilogue are the caller's. */
static af_gemm_desc conv_gemm_desc(const conv_state *s, int64_t g, int64_t hw) {
    af_gemm_desc d = af_gemm_desc_default();
    d.isa = s->isa;
    d.M = s->cout / s->groups;
    d.N = d.ldb = d.ldc = hw;
    d.K = s->cin / s->groups * s->kh * s->kw;
    d.packed_a = s->packed[g];
    d.k_block = AF_CONV_FLUSH_K;
    return d;
}

/* A 1-D conv's tensor [N, C, L] seen as [N, C, 1, L] (the same memory). */
static af_tensor as_2d(const af_tensor *t) {
    af_tensor v = *t;
    v.rank = 4;
    v.dims[3] = t->dims[2];
    v.dims[2] = 1;
    return v;
}

/* The node's geometry as a 2-D one over W's 4-D view: a 1-D conv's attributes become those of its
 * second dim, the first a kernel, stride and dilation of 1 without pads. */
static af_status geometry_2d(const af_op_ctx *c, bool one_d, const af_tensor *w4, af_conv_geom *geo) {
    int64_t kernel[2] = {w4->dims[2], w4->dims[3]};
    if (!one_d) return af_conv_geom_init(c, 2, kernel, geo);
    af_conv_geom g1;
    af_status st = af_conv_geom_init(c, 1, kernel + 1, &g1);
    if (st != AF_OK) return st;
    *geo = g1;
    geo->n_sp = 2;
    geo->kernel[0] = geo->stride[0] = geo->dilation[0] = 1;
    geo->pad_begin[0] = geo->pad_end[0] = 0;
    geo->kernel[1] = g1.kernel[0], geo->stride[1] = g1.stride[0], geo->dilation[1] = g1.dilation[0];
    geo->pad_begin[1] = g1.pad_begin[0], geo->pad_end[1] = g1.pad_end[0];
    return AF_OK;
}

/* The geometry of this run from the actual input (4-D views): pads resolved, output sizes checked. */
static af_status run_geometry(af_op_ctx *c, bool one_d, const af_tensor *x, const af_tensor *w, af_conv_geom *geo,
                              int64_t *oh, int64_t *ow) {
    int64_t out[2] = {-1, -1};
    af_status st = geometry_2d(c, one_d, w, geo);
    if (st == AF_OK) st = af_conv_geom_forward(c, geo, x->dims + 2, out);
    *oh = out[0];
    *ow = out[1];
    return st;
}

/* Unfolds one group of one image: rows (ci, ky, kx), columns the output pixels. */
typedef struct im2col_args {
    const af_vec_kernels *vk;
    const float *x; /* the group's first input channel */
    float *col;
    int64_t h, w, oh, ow, kh, kw;
    const af_conv_geom *geo;
} im2col_args;

/* Row (ci, ky, kx) of the im2col matrix: the input plane sampled at the tap's offset and the
 * strides, zero where the tap falls in the padding. */
static void im2col_row(void *ctx, int row, int thread) {
    (void)thread;
    const im2col_args *a = ctx;
    int64_t ci = row / (a->kh * a->kw), ky = row / a->kw % a->kh, kx = row % a->kw;
    const af_conv_geom *g = a->geo;
    a->vk->strided_plane(a->oh, a->ow, g->stride[0], g->stride[1], a->x + ci * a->h * a->w, a->h, a->w,
                         ky * g->dilation[0] - g->pad_begin[0], kx * g->dilation[1] - g->pad_begin[1],
                         a->col + (int64_t)row * a->oh * a->ow);
}

/* epi with the kernel's own bias first, row and residual vectors offset to group g of image n. */
static af_status group_epilogue(const conv_state *s, const af_epilogue *epi, int64_t n, int64_t g, int64_t mg,
                                int64_t hw, af_epilogue *out) {
    af_epilogue_init(out);
    if (s->bias) {
        af_status st = af_epilogue_vec(out, AF_EPI_BIAS_ROW, s->bias + g * mg, NULL);
        if (st != AF_OK) return st;
    }
    for (int i = 0; epi && i < epi->n_steps; i++) {
        af_epi_step step = epi->steps[i];
        if (step.op == AF_EPI_BIAS_ROW || step.op == AF_EPI_SCALE_SHIFT_ROW) {
            step.p += step.batch_stride * n + g * mg;
            if (step.q) step.q += step.batch_stride * n + g * mg;
            step.batch_stride = 0;
        } else if (step.op == AF_EPI_ADD) {
            step.p += step.batch_stride * n + g * mg * step.ld;
            step.batch_stride = 0;
        } else if (step.op == AF_EPI_BIAS_COL || step.op == AF_EPI_SCALE_SHIFT_COL) {
            step.p += step.batch_stride * n;
            if (step.q) step.q += step.batch_stride * n;
            step.batch_stride = 0;
        }
        af_status st = af_epilogue_push(out, &step);
        if (st != AF_OK) return st;
    }
    (void)hw;
    return AF_OK;
}

/* Bytes of one group's unfolded input (im2col) at hw output pixels, 64-byte rounded; 0 for a
 * pointwise conv, which reads its input in place. */
static size_t unfold_bytes(const conv_state *s, int64_t hw) {
    if (s->pointwise) return 0;
    const int64_t kdim = s->cin / s->groups * s->kh * s->kw;
    return ((size_t)(kdim * hw) * sizeof(float) + 63) & ~(size_t)63;
}

/* Grouped convolutions with groups to spare for every thread run whole groups as tasks: a group's
 * unfolding and GEMM on one thread, in that thread's slice of the workspace. Split inside each
 * group instead, RegNetY-400MF's 8-channel groups (55 at a 7x7 plane) spent their time handing
 * two tiny jobs per group to the pool: at two threads it ran slower than at one. The GEMM of a
 * group is the same either way, so are its bits. */
typedef struct group_tasks {
    const conv_state *s;
    const af_conv_geom *geo;
    const af_epilogue *epi;
    const float *x;
    float *y;
    int64_t n, h, wd, oh, ow;
    char *workspace;
    size_t per_thread; /* a thread's slice: the unfolded input, then GEMM scratch */
    _Atomic int failed;           /* an af_status of a task that failed, else AF_OK */
} group_tasks;

/* Group g of image n on the GEMM path, on the calling thread alone, in a slice of per_thread
 * bytes: the group's unfolded input first (im2col; a pointwise conv reads its input in place),
 * then the GEMM's packing scratch. Whole-group tasks and whole-image tasks run it. */
static af_status gemm_group_in_slice(const conv_state *s, const af_conv_geom *geo, const af_epilogue *epi,
                                     const float *x, float *y, int64_t n, int64_t g, int64_t h, int64_t wd, int64_t oh,
                                     int64_t ow, char *slice, size_t per_thread) {
    const int64_t hw = oh * ow, mg = s->cout / s->groups, cg = s->cin / s->groups;
    const size_t col_bytes = unfold_bytes(s, hw);
    af_gemm_desc d = conv_gemm_desc(s, g, hw);
    const float *xg = x + (n * s->cin + g * cg) * h * wd;
    if (s->pointwise) {
        d.B = xg;
    } else {
        im2col_args a = {af_vec_kernels_for(s->isa), xg, (float *)slice, h, wd, oh, ow, s->kh, s->kw, geo};
        for (int64_t row = 0; row < cg * s->kh * s->kw; row++) im2col_row(&a, (int)row, 0);
        d.B = (float *)slice;
    }
    d.C = y + (n * s->cout + g * mg) * hw;
    af_epilogue e;
    af_status st = group_epilogue(s, epi, n, g, mg, hw, &e);
    d.epilogue = &e;
    d.workspace = slice + col_bytes;
    d.workspace_size = per_thread - col_bytes;
    return st == AF_OK ? af_sgemm(&d, NULL) : st;
}

static void group_task(void *ctx, int g, int thread) {
    group_tasks *t = ctx;
    af_status st = gemm_group_in_slice(t->s, t->geo, t->epi, t->x, t->y, t->n, g, t->h, t->wd, t->oh, t->ow,
                                       t->workspace + (size_t)thread * t->per_thread, t->per_thread);
    if (st != AF_OK) atomic_store(&t->failed, (int)st);
}

/* Bytes of workspace per thread for whole-group tasks (see group_tasks) at hw output pixels. */
static size_t group_task_bytes(const conv_state *s, int64_t hw) {
    af_gemm_desc d = conv_gemm_desc(s, 0, hw > 0 ? hw : 1);
    return unfold_bytes(s, hw) + ((af_sgemm_workspace_size(&d, 1) + 63) & ~(size_t)63);
}

/* Whether a grouped conv runs whole groups as tasks on n_threads threads. */
static bool groups_as_tasks(const conv_state *s, int n_threads) { return n_threads > 1 && s->groups >= 2 * n_threads; }

/* The run's status from a kernel sized at prepare (Winograd, implicit GEMM, channel-blocked):
 * AF_ERR_LIMIT too many tasks, any other failure an input larger than planned. */
static af_status planned_kernel_status(af_op_ctx *c, af_status st) {
    if (st == AF_ERR_LIMIT) return af_ctx_fail(c, st, "convolution too large to split into tasks");
    if (st != AF_OK) return af_ctx_fail(c, st, "input is larger than the session planned for");
    return AF_OK;
}

static af_status conv_gemm_run(af_op_ctx *c, const conv_state *s, const af_conv_geom *gp, const af_epilogue *epi,
                               af_threadpool *pool, const float *xd, float *yd, int64_t n0, int64_t n_img, int64_t h,
                               int64_t wd, int64_t oh, int64_t ow, void *workspace, size_t workspace_bytes);

/* The workspace for a run that needs `need` bytes: the planned one where it is large enough, else
 * (a plane whose size was unknown at prepare, in a dynamic-size export) one of its own, made for
 * this run and returned in *own for the caller to free; NULL when that allocation fails. */
static void *run_workspace(void *planned, size_t planned_bytes, size_t need, void **own, size_t *bytes) {
    *own = NULL;
    *bytes = planned_bytes;
    if (need <= planned_bytes) return planned;
    if (!(*own = af_malloc_aligned(need))) return NULL;
    *bytes = need;
    return *own;
}

/* Images as tasks: with at least as many images as threads, each thread runs whole images on its
 * own (Winograd, the implicit GEMM or the GEMM path, one thread each, in its slice of the
 * workspace) instead of every image being split over the threads: no wait for the slowest thread
 * after each image, and each core keeps its own image's planes in its caches. Each image's bits
 * are the same either way (no kernel's summation order depends on its thread count). */
typedef struct image_tasks {
    const conv_state *s;
    const af_conv_winograd *wino; /* Winograd's, else the implicit GEMM's or the GEMM path's */
    const af_conv_geom *geo;
    const af_epilogue *epi;
    const float *x;
    float *y;
    int64_t h, wd, oh, ow;
    char *workspace;
    size_t per_thread;
    _Atomic int failed; /* an af_status of a task that failed, else AF_OK */
} image_tasks;

/* Workspace bytes one image takes on one thread, 64-byte rounded; 0 when the sizes overflow. */
static size_t image_task_bytes(const conv_state *s, const af_conv_winograd *wino, const af_conv_geom *geo, int64_t oh,
                               int64_t ow) {
    size_t b;
    if (wino) b = af_conv_winograd_workspace(wino, oh, ow, 1);
    else if (s->implicit.w) b = af_conv_implicit_workspace(&s->implicit, geo, oh, ow);
    else b = group_task_bytes(s, oh * ow);
    return (b + 63) & ~(size_t)63;
}

static void image_task(void *ctx, int n, int thread) {
    image_tasks *t = ctx;
    const conv_state *s = t->s;
    const int64_t hw_in = t->h * t->wd, hw = t->oh * t->ow;
    char *slice = t->workspace + (size_t)thread * t->per_thread;
    af_status st = AF_OK;
    if (t->wino || s->implicit.w) {
        af_epilogue e;
        st = group_epilogue(s, t->epi, n, 0, s->cout, hw, &e);
        const float *xn = t->x + n * s->cin * hw_in;
        float *yn = t->y + n * s->cout * hw;
        if (st == AF_OK)
            st = t->wino ? af_conv_winograd_run(t->wino, t->geo, xn, yn, t->h, t->wd, t->oh, t->ow, &e, NULL, slice,
                                                t->per_thread)
                         : af_conv_implicit_run(&s->implicit, t->geo, xn, yn, t->h, t->wd, t->oh, t->ow, &e, NULL,
                                                slice, t->per_thread);
    } else {
        for (int64_t g = 0; g < s->groups && st == AF_OK; g++)
            st = gemm_group_in_slice(s, t->geo, t->epi, t->x, t->y, n, g, t->h, t->wd, t->oh, t->ow, slice,
                                     t->per_thread);
    }
    if (st != AF_OK) atomic_store(&t->failed, (int)st);
}

/* The live-tap rectangles, one image at a time. */
static af_status tap_regions_run(af_op_ctx *c, const conv_state *s, const af_conv_geom *geo, const af_epilogue *epi,
                                 af_threadpool *pool, const float *xd, float *yd, int64_t n_img, int64_t h, int64_t wd,
                                 int64_t oh, int64_t ow, void *planned, size_t planned_bytes) {
    const size_t need = af_conv_tap_regions_workspace(&s->taps, geo, h, wd, oh, ow, af_threadpool_n_threads(pool));
    if (need == 0) return af_ctx_fail(c, AF_ERR_RUNTIME, "geometry differs from the prepared one");
    void *own = NULL;
    size_t bytes;
    void *ws = run_workspace(planned, planned_bytes, need, &own, &bytes);
    if (!ws) return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory for the convolution's workspace");
    af_status st = AF_OK;
    for (int64_t n = 0; n < n_img && st == AF_OK; n++) {
        af_epilogue e;
        if ((st = group_epilogue(s, epi, n, 0, s->cout, oh * ow, &e)) != AF_OK) break;
        st = af_conv_tap_regions_run(&s->taps, geo, xd + n * s->cin * h * wd, yd + n * s->cout * oh * ow, h, wd, oh,
                                     ow, &e, pool, ws, bytes);
    }
    af_free_aligned(own);
    return st == AF_OK ? AF_OK : af_ctx_fail(c, st, "convolution by tap rectangles failed");
}

static af_status conv_run(const af_kernel *k, af_op_ctx *c, const af_epilogue *epi, af_threadpool *pool,
                          void *workspace) {
    const conv_state *s = k->state;
    const af_tensor *x = af_ctx_input(c, 0), *w = af_ctx_input(c, 1);
    af_tensor *y = af_ctx_output(c, 0);
    af_tensor x4, w4, y4; /* a 1-D conv's tensors as [N, C, 1, L] */
    if (s->one_d) {
        if (x->rank != 3 || w->rank != 3 || y->rank != 3)
            return af_ctx_fail(c, AF_ERR_RUNTIME, "input must be [N, %lld, L]", (long long)s->cin);
        x4 = as_2d(x), w4 = as_2d(w), y4 = as_2d(y);
        x = &x4, w = &w4, y = &y4;
    }
    if (x->rank != 4 || x->dims[1] != s->cin)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "input must be [N, %lld, H, W]", (long long)s->cin);
    af_conv_geom geo;
    int64_t oh, ow;
    af_status st = run_geometry(c, s->one_d, x, w, &geo, &oh, &ow);
    if (st != AF_OK) return st;
    const int64_t n_img = x->dims[0], h = x->dims[2], wd = x->dims[3], hw_in = h * wd, hw = oh * ow;
    if (y->rank != 4 || y->dims[0] != n_img || y->dims[1] != s->cout || y->dims[2] != oh || y->dims[3] != ow)
        return af_ctx_fail(c, AF_ERR_RUNTIME, "output shape does not match the convolution");
    const float *xd = x->data;
    float *yd = y->data;
    const int n_threads = af_threadpool_n_threads(pool);
    void *own = NULL, *ws;
    size_t ws_bytes;
    if (s->dw.weights || s->grouped.weights) {
        const size_t need = s->dw.weights ? af_depthwise_conv_scratch_bytes(&s->dw, &geo, oh, ow, n_threads)
                                          : af_dw_blocked_scratch_bytes(&s->grouped, &geo, ow, n_threads);
        if (!(ws = run_workspace(workspace, k->workspace_bytes, need, &own, &ws_bytes)))
            return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory for the convolution's workspace");
        st = s->dw.weights ? af_depthwise_conv_run(&s->dw, &geo, xd, yd, n_img, h, wd, oh, ow, s->bias, epi, pool, ws,
                                                   ws_bytes)
                           : planned_kernel_status(c, af_dw_blocked_run(&s->grouped, &geo, xd, yd, n_img, h, wd, oh,
                                                                        ow, s->bias, epi, pool, ws, ws_bytes));
        af_free_aligned(own);
        return st;
    }

    if (s->taps.w) return tap_regions_run(c, s, &geo, epi, pool, xd, yd, n_img, h, wd, oh, ow, workspace,
                                          k->workspace_bytes);

    const af_conv_winograd *wino = s->wino.u ? &s->wino : NULL;
    if (s->by_plane) {
        const int m = af_conv_winograd_tile(&geo, s->kh, s->kw, s->groups, s->cin, s->cout, oh, ow, n_threads);
        if (m) wino = wino_by_plane_get(s, m);
        atomic_store_explicit(&s->by_plane->ran, wino ? m : 0, memory_order_relaxed);
    }
    if (s->implicit.w && !wino && !af_conv_implicit_fit(&s->implicit, &geo, oh, ow))
        return af_ctx_fail(c, AF_ERR_RUNTIME, "geometry differs from the prepared one");
    /* Whole rounds of images as tasks (image_tasks); the rest, fewer than the threads, split. */
    const int64_t n0 = n_threads > 1 && n_img <= INT32_MAX ? n_img - n_img % n_threads : 0;
    if (n0 > 0) {
        const size_t per_thread = image_task_bytes(s, wino, &geo, oh, ow);
        if (per_thread == 0 || per_thread > SIZE_MAX / (size_t)n_threads)
            return af_ctx_fail(c, AF_ERR_LIMIT, "convolution plane too large for its workspace");
        if (!(ws = run_workspace(workspace, k->workspace_bytes, per_thread * (size_t)n_threads, &own, &ws_bytes)))
            return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory for the convolution's workspace");
        image_tasks t = {.s = s, .wino = wino, .geo = &geo, .epi = epi, .x = xd, .y = yd, .h = h, .wd = wd, .oh = oh,
                         .ow = ow, .workspace = ws, .per_thread = per_thread};
        atomic_init(&t.failed, AF_OK);
        af_threadpool_run(pool, (int)n0, image_task, &t);
        af_free_aligned(own);
        if ((st = (af_status)atomic_load(&t.failed)) != AF_OK) return planned_kernel_status(c, st);
        if (n0 == n_img) return AF_OK;
    }
    if (wino || s->implicit.w) { /* one image at a time, both kernels alike */
        /* A plane whose size was unknown at prepare (the implicit GEMM prepared without a
         * workspace, or Winograd by plane) brings its own. */
        const size_t need = wino ? (s->by_plane ? af_conv_winograd_workspace(wino, oh, ow, n_threads) : 0)
                                 : af_conv_implicit_workspace(&s->implicit, &geo, oh, ow);
        if (wino && s->by_plane && need == 0)
            return af_ctx_fail(c, AF_ERR_LIMIT, "convolution plane too large for its workspace");
        if (!(ws = run_workspace(workspace, k->workspace_bytes, need, &own, &ws_bytes)))
            return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory for the convolution's workspace");
        for (int64_t n = n0; n < n_img && st == AF_OK; n++) {
            af_epilogue e;
            if ((st = group_epilogue(s, epi, n, 0, s->cout, hw, &e)) != AF_OK) {
                af_free_aligned(own);
                return af_ctx_fail(c, st, "epilogue too long");
            }
            const float *xn = xd + n * s->cin * hw_in;
            float *yn = yd + n * s->cout * hw;
            st = wino ? af_conv_winograd_run(wino, &geo, xn, yn, h, wd, oh, ow, &e, pool, ws, ws_bytes)
                      : af_conv_implicit_run(&s->implicit, &geo, xn, yn, h, wd, oh, ow, &e, pool, ws, ws_bytes);
        }
        af_free_aligned(own);
        return st == AF_OK ? AF_OK : planned_kernel_status(c, st);
    }
    /* Whole groups as tasks where the workspace planned holds a slice per thread; otherwise (a
     * larger plane than planned, say) the path below, which can do without. */
    const size_t per_thread = groups_as_tasks(s, n_threads) ? group_task_bytes(s, hw) : 0;
    if (per_thread && workspace && per_thread * (size_t)n_threads <= k->workspace_bytes) {
        for (int64_t n = n0; n < n_img; n++) {
            group_tasks t = {.s = s, .geo = &geo, .epi = epi, .x = xd, .y = yd, .n = n, .h = h, .wd = wd, .oh = oh,
                             .ow = ow, .workspace = workspace, .per_thread = per_thread};
            atomic_init(&t.failed, AF_OK);
            af_threadpool_run(pool, (int)s->groups, group_task, &t);
            if ((st = (af_status)atomic_load(&t.failed)) != AF_OK) return af_ctx_fail(c, st, "grouped convolution failed");
        }
        return AF_OK;
    }
    const size_t col_bytes = unfold_bytes(s, hw);
    if (!(ws = run_workspace(workspace, k->workspace_bytes, col_bytes, &own, &ws_bytes)))
        return af_ctx_fail(c, AF_ERR_OUT_OF_MEMORY, "out of memory for the convolution's workspace");
    st = conv_gemm_run(c, s, &geo, epi, pool, xd, yd, n0, n_img, h, wd, oh, ow, ws, ws_bytes);
    af_free_aligned(own);
    return st;
}

/* The im2col (or in-place pointwise) GEMM path of conv_run for images n0 .. n_img - 1, on a
 * workspace holding the unfolded input (col_bytes) and, where it has room, the GEMM's packing
 * buffers. */
static af_status conv_gemm_run(af_op_ctx *c, const conv_state *s, const af_conv_geom *gp, const af_epilogue *epi,
                               af_threadpool *pool, const float *xd, float *yd, int64_t n0, int64_t n_img, int64_t h,
                               int64_t wd, int64_t oh, int64_t ow, void *workspace, size_t workspace_bytes) {
    const af_conv_geom geo = *gp;
    const int64_t mg = s->cout / s->groups, cg = s->cin / s->groups, kdim = cg * s->kh * s->kw;
    const int64_t hw_in = h * wd, hw = oh * ow;
    const size_t col_bytes = unfold_bytes(s, hw);
    float *col = (float *)workspace;
    af_status st;
    for (int64_t n = n0; n < n_img; n++) {
        for (int64_t g = 0; g < s->groups; g++) {
            af_gemm_desc d = conv_gemm_desc(s, g, hw);
            const float *xg = xd + (n * s->cin + g * cg) * hw_in;
            if (s->pointwise) {
                d.B = xg;
            } else {
                im2col_args a = {af_vec_kernels_for(s->isa), xg, col, h, wd, oh, ow, s->kh, s->kw, &geo};
                af_threadpool_run(pool, (int)kdim, im2col_row, &a);
                d.B = col;
            }
            d.C = yd + (n * s->cout + g * mg) * hw;
            af_epilogue e;
            if ((st = group_epilogue(s, epi, n, g, mg, hw, &e)) != AF_OK) return af_ctx_fail(c, st, "epilogue too long");
            d.epilogue = &e;
            size_t need = af_sgemm_workspace_size(&d, af_threadpool_n_threads(pool));
            if (workspace && col_bytes + need <= workspace_bytes) {
                d.workspace = (char *)workspace + col_bytes;
                d.workspace_size = need;
            }
            if ((st = af_sgemm(&d, pool)) != AF_OK) return af_ctx_fail(c, st, "GEMM failed");
        }
    }
    return AF_OK;
}

/* af_kernel.residual_in_place: the kernel's own bias and epi's ops, as conv_run passes them, on
 * the algorithm prepared. Winograd applies its epilogue to output rows already written, and the
 * depthwise kernels are not looked at: neither. */
static bool conv_residual_in_place(const af_kernel *k, const af_epilogue *epi) {
    const conv_state *s = k->state;
    af_epilogue e;
    af_epilogue_init(&e);
    if (s->bias && af_epilogue_vec(&e, AF_EPI_BIAS_ROW, s->bias, NULL) != AF_OK) return false;
    for (int i = 0; epi && i < epi->n_steps; i++) { /* copied: a residual's vector is set per run */
        if (e.n_steps == AF_EPI_MAX_STEPS) return false;
        e.steps[e.n_steps++] = epi->steps[i];
    }
    if (s->by_plane) return false; /* the plane may take Winograd */
    if (s->implicit.w) return af_conv_implicit_residual_in_place(&s->implicit, &e);
    if (!s->packed || s->out_hw < 1) return false;
    af_gemm_desc d = conv_gemm_desc(s, 0, s->out_hw);
    d.epilogue = &e;
    return af_sgemm_residual_in_place(&d);
}

/* Whether a grouped convolution runs on the channel-blocked kernel: AVX-512, groups of 2 to 32
 * channels (as many out as in) that it takes, and a non-empty output (its scratch depends on the
 * width: where that is unknown at prepare, each run makes its own). On one thread it ran
 * ResNeXt50's grouped 3x3 convs at 60-160 GFLOP/s, where im2col + a GEMM per group ran 32-54. */
static bool grouped_blocked(const af_kernel_request *req, int64_t groups, int64_t cin, int64_t cout,
                            const af_tensor *y) {
    return af_cpu_isa_clamp(req->choice.isa) == AF_ISA_AVX512 && groups > 1 && groups < cin && cin == cout &&
           af_dw_blocked_groups_fit(cout, cin / groups) && y->rank == 4 && y->dims[2] != 0 && y->dims[3] != 0;
}

af_status af_fast_conv_prepare(const af_kernel_request *req, af_kernel *k, af_error *err) {
    const af_node *n = req->node;
    const af_tensor *x = af_kernel_input(req, 0), *w = af_kernel_input(req, 1), *b = af_kernel_input(req, 2);
    const af_tensor *y = n->n_outputs > 0 && n->outputs[0] >= 0 ? &req->graph->values[n->outputs[0]].t : NULL;
    if (!x || !w || !y || x->dtype != AF_DTYPE_FLOAT || w->dtype != AF_DTYPE_FLOAT || x->rank != w->rank ||
        (x->rank != 4 && x->rank != 3) || !w->data || af_tensor_numel(w) <= 0 ||
        (b && (!b->data || b->dtype != AF_DTYPE_FLOAT)))
        return AF_OK;
    if (x->dims[1] < 0) return AF_OK;
    const af_tensor *ins[3] = {x, w, b};
    af_tensor *outs[1] = {NULL};
    af_op_ctx c = {.node = n, .graph = req->graph, .opset = req->graph->opset, .n_inputs = n->n_inputs,
                   .inputs = ins, .n_outputs = 0, .outputs = outs, .err = err};
    /* A 1-D conv (audio, sequence models) runs as a 2-D one of height 1 on views of its tensors. */
    const bool one_d = x->rank == 3;
    af_tensor x4, w4, y4;
    if (one_d) {
        x4 = as_2d(x), w4 = as_2d(w), y4 = y->rank == 3 ? as_2d(y) : *y;
        x = &x4, w = &w4, y = &y4;
    }
    af_conv_geom geo;
    if (geometry_2d(&c, one_d, w, &geo) != AF_OK) return AF_OK; /* the reference reports it */
    int64_t groups = af_node_attr_int(n, "group", 1);
    int64_t cout = w->dims[0], cin = x->dims[1];
    if (groups < 1 || cin % groups || cout % groups || w->dims[1] != cin / groups) return AF_OK;
    if (b && af_tensor_numel(b) != cout) return AF_OK;

    conv_state *s = af_calloc(1, sizeof *s);
    if (!s) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory preparing Conv '%s'", n->name);
    *s = (conv_state){.isa = req->choice.isa, .cout = cout, .cin = cin, .groups = groups, .kh = w->dims[2],
                      .kw = w->dims[3], .bias = b ? b->data : NULL, .one_d = one_d,
                      .out_hw = y->rank == 4 && y->dims[2] >= 0 && y->dims[3] >= 0 ? y->dims[2] * y->dims[3] : -1};
    af_status st = AF_OK;
    bool depthwise = groups == cin && groups == cout;
    if (depthwise) {
        st = af_depthwise_conv_prepare(req->choice.isa, w->data, cout, s->kh, s->kw, &s->dw);
        if (st != AF_OK) goto fail;
        k->name = af_depthwise_conv_name(&s->dw);
        if (y->rank == 4 && y->dims[2] > 0 && y->dims[3] > 0) /* unknown sizes run the bounds-checked path */
            k->workspace_bytes = af_depthwise_conv_scratch_bytes(&s->dw, &geo, y->dims[2], y->dims[3],
                                                                 req->choice.n_threads > 0 ? req->choice.n_threads : 1);
    } else if (grouped_blocked(req, groups, cin, cout, y)) {
        st = af_dw_blocked_prepare_grouped(w->data, cout, cin / groups, s->kh, s->kw, &s->grouped);
        if (st != AF_OK) goto fail;
        k->name = "f32_conv_grouped_blocked__avx512";
        if (y->dims[3] > 0) /* an unknown width: scratch per run */
            k->workspace_bytes = af_dw_blocked_scratch_bytes(&s->grouped, &geo, y->dims[3],
                                                              req->choice.n_threads > 0 ? req->choice.n_threads : 1);
    } else {
        s->pointwise = s->kh == 1 && s->kw == 1 && geo.stride[0] == 1 && geo.stride[1] == 1 &&
                       geo.pad_begin[0] == 0 && geo.pad_begin[1] == 0 && geo.pad_end[0] == 0 && geo.pad_end[1] == 0 &&
                       geo.auto_pad != AF_CONV_PAD_SAME_UPPER && geo.auto_pad != AF_CONV_PAD_SAME_LOWER;
        int64_t oh = y->rank == 4 ? y->dims[2] : -1, ow = y->rank == 4 ? y->dims[3] : -1;
        /* 1x1 convolutions stay a GEMM (on the input itself, or at a stride on its im2col
         * subsample) where the output has enough pixels for whole 32-wide tiles: on ResNet-50's
         * 56x56 and 28x28 1x1 layers it beat the implicit kernel by 5-20% (whose tiles store
         * transposed, and K = cin is short there); on the 14x14 and 7x7 ones the implicit kernel
         * won by 5-13%. Where the implicit kernel's tile has channels as rows
         * (af_conv_implicit_channel_rows: 16 output channels or fewer, say) it beats the GEMM's
         * 14-row one. */
        const bool gemm_1x1 =
            s->kh == 1 && s->kw == 1 && oh * ow >= 256 && !af_conv_implicit_channel_rows(req->choice.isa, cin, cout);
        const int n_threads = req->choice.n_threads > 0 ? req->choice.n_threads : 1;
        const bool winograd_allowed = !req->choice.no_winograd && !getenv("AF_NO_WINOGRAD");
        const int wino_m = !winograd_allowed || oh < 1 || ow < 1
                               ? 0
                               : af_conv_winograd_tile(&geo, s->kh, s->kw, groups, cin, cout, oh, ow, n_threads);
        if (wino_m) {
            /* U takes (m + 2)^2 / 9 of the weights' memory: where it cannot be had (out of
             * memory included), the implicit GEMM below packs them at their own size. */
            st = af_conv_winograd_prepare(req->choice.isa, wino_m, w->data, cout, cin, &s->wino);
            size_t ws = st == AF_OK ? af_conv_winograd_workspace(&s->wino, oh, ow, n_threads) : 0;
            if (ws > 0) {
                k->workspace_bytes = ws;
                k->name = wino_m == 4 ? "f32_conv3x3_winograd_f4x4" : "f32_conv3x3_winograd_f2x2";
                k->weight_bytes += af_gemm_packed_bytes(s->wino.u);
                goto done;
            }
            af_conv_winograd_release(&s->wino);
            st = AF_OK;
        }
        /* Output planes of unknown size (a dynamic-size export): the implicit GEMM, whose packed
         * weights do not depend on them, with its workspace made per run (see conv_run); a 1x1
         * stride-1 conv stays the GEMM below, as it does on planes of 256 pixels or more (those
         * exports are mostly of large images: FCN-ResNet50 at 256x192, where its 1x1 convs made
         * the implicit kernel's steps 830 ms of a 1025 ms run against ONNX Runtime's 655). */
        const bool sized = oh > 0 && ow > 0, unsized = oh < 0 || ow < 0;
        const bool undilated = geo.dilation[0] == 1 && geo.dilation[1] == 1; /* the fit, short of a plane */
        if (groups == 1 && ((sized && !gemm_1x1) || (unsized && !s->pointwise && undilated))) {
            st = af_conv_implicit_prepare(req->choice.isa, w->data, cout, cin, s->kh, s->kw, &s->implicit);
            if (st != AF_OK) goto fail;
            if (unsized || af_conv_implicit_fit(&s->implicit, &geo, oh, ow)) {
                if (sized) k->workspace_bytes = af_conv_implicit_workspace(&s->implicit, &geo, oh, ow);
                k->name = "f32_conv_implicit_gemm";
                k->weight_bytes += af_gemm_packed_bytes(s->implicit.w);
                /* A plane that would take Winograd were it known (64x64, say) may at run time
                 * (wino_by_plane). */
                if (unsized && winograd_allowed &&
                    af_conv_winograd_tile(&geo, s->kh, s->kw, groups, cin, cout, 64, 64, n_threads)) {
                    if (!(s->by_plane = af_calloc(1, sizeof *s->by_plane))) {
                        st = AF_ERR_OUT_OF_MEMORY;
                        goto fail;
                    }
                    for (int i = 0; i < 2; i++) atomic_init(&s->by_plane->u[i], NULL);
                    atomic_init(&s->by_plane->ran, -1);
                    k->name = "f32_conv3x3_winograd_by_plane";
                    k->ran = by_plane_ran;
                }
                goto done;
            }
            af_conv_implicit_release(&s->implicit);
        }
        /* Where most (output pixel, tap) pairs read padding (a large dilation over a small
         * plane), a GEMM per tap over the pixels it reaches instead of im2col's over all pairs. */
        af_conv_geom resolved = geo;
        int64_t out_sizes[2];
        af_op_ctx quiet = c;
        quiet.err = NULL;
        if (groups == 1 && !s->pointwise && sized && x->rank == 4 && x->dims[2] > 0 && x->dims[3] > 0 &&
            af_conv_geom_forward(&quiet, &resolved, x->dims + 2, out_sizes) == AF_OK) {
            const double share =
                af_conv_tap_regions_live_share(&resolved, s->kh, s->kw, x->dims[2], x->dims[3], oh, ow);
            if (share >= 0 && share <= TAP_REGIONS_MAX_SHARE) {
                st = af_conv_tap_regions_prepare(req->choice.isa, w->data, cout, cin, s->kh, s->kw, &s->taps);
                if (st != AF_OK) goto fail;
                k->workspace_bytes = af_conv_tap_regions_workspace(&s->taps, &resolved, x->dims[2], x->dims[3], oh,
                                                                   ow, n_threads);
                k->name = "f32_conv_tap_regions";
                goto done;
            }
        }
        int64_t mg = cout / groups, kdim = cin / groups * s->kh * s->kw;
        s->packed = af_calloc((size_t)groups, sizeof *s->packed);
        if (!s->packed) {
            st = AF_ERR_OUT_OF_MEMORY;
            goto fail;
        }
        for (int64_t g = 0; g < groups && st == AF_OK; g++)
            st = af_gemm_pack_a(req->choice.isa, 1, mg, kdim, (const float *)w->data + g * mg * kdim, kdim, false, 0,
                                &s->packed[g]);
        if (st != AF_OK) goto fail;
        /* Scratch: the unfolded input of one group plus the GEMM's packing buffers. Unknown
         * spatial sizes: none planned, each run unfolds into its own (conv_run). */
        int64_t hw = y->rank == 4 && y->dims[2] >= 0 && y->dims[3] >= 0 ? y->dims[2] * y->dims[3] : -1;
        const size_t col = hw >= 0 ? unfold_bytes(s, hw) : 0;
        af_gemm_desc d = conv_gemm_desc(s, 0, hw > 0 ? hw : 1);
        k->workspace_bytes = col + af_sgemm_workspace_size(&d, req->choice.n_threads > 0 ? req->choice.n_threads : 1);
        if (groups_as_tasks(s, req->choice.n_threads)) {
            const size_t tasks = group_task_bytes(s, hw > 0 ? hw : 1) * (size_t)req->choice.n_threads;
            if (tasks > k->workspace_bytes) k->workspace_bytes = tasks;
        }
        k->name = s->pointwise ? "f32_conv1x1_gemm" : "f32_conv_im2col_gemm";
    }
done:
    /* A batch of two images or more, or of unknown size, may run whole images as tasks
     * (image_tasks): a slice per thread, where the plane is known. */
    if ((s->wino.u || s->implicit.w || s->packed) && req->choice.n_threads > 1 && y->rank == 4 &&
        y->dims[0] != 1 && y->dims[2] > 0 && y->dims[3] > 0) {
        const size_t per = image_task_bytes(s, s->wino.u ? &s->wino : NULL, &geo, y->dims[2], y->dims[3]);
        const size_t n_threads = (size_t)req->choice.n_threads;
        if (per > 0 && per <= SIZE_MAX / n_threads && per * n_threads > k->workspace_bytes)
            k->workspace_bytes = per * n_threads;
    }
    k->state = s;
    k->free_state = conv_free;
    k->run = conv_run;
    k->takes_epilogue = true;
    k->residual_in_place = conv_residual_in_place;
    k->packed_inputs = 1u << 1; /* W is packed (or copied, for depthwise); the bias is read in place */
    if (s->dw.weights) k->weight_bytes = (size_t)(cout * s->kh * s->kw) * sizeof(float);
    if (s->grouped.weights) k->weight_bytes = af_dw_blocked_weight_bytes(&s->grouped);
    for (int64_t g = 0; s->packed && g < groups; g++) k->weight_bytes += af_gemm_packed_bytes(s->packed[g]);
    for (int64_t t = 0; s->taps.w && t < s->kh * s->kw; t++) k->weight_bytes += af_gemm_packed_bytes(s->taps.w[t]);
    return AF_OK;
fail:
    conv_free(s);
    if (st == AF_ERR_OUT_OF_MEMORY) return af_errorf(err, st, "out of memory preparing Conv '%s'", n->name);
    return AF_OK; /* shapes the packer refuses: the reference runs */
}
