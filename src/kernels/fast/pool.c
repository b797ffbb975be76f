/*
 * Fast float32 pooling in NCHW: MaxPool (without its Indices output) and AveragePool over 2-D
 * windows with any kernel, strides, pads, auto_pad, ceil_mode and count_include_pad (dilation 1),
 * and GlobalMaxPool / GlobalAveragePool over any spatial rank. Global pools split their planes
 * (n, c) over the thread pool; window pools split bands of output rows, each over every plane, so
 * a thread reads the rows the convolution before it wrote on the same core (by planes, ResNet-50's
 * MaxPool read half its input from the other core's cache and took as long on two threads as on
 * one). The window loops are in pool_body.h. On AVX-512 a window pool of static shape runs on the
 * channel-blocked depthwise kernel instead (conv_depthwise_blocked.h: 16 planes to a vector), a
 * MaxPool as its window max and an AveragePool whose windows all divide by kh * kw as a
 * convolution with weights 1 / (kh kw); Inception-v3's pools 5.2 -> 3.8 ms a run, GoogLeNet's
 * 3.5 -> 2.0 (the plane loops lose a vector's lanes on every row of a 17- or 14-wide plane).
 */
#include <string.h>

#include "ir/shape/conv_geom.h"
#include "kernels/fast/conv_depthwise_blocked.h"
#include "kernels/fast/vec_internal.h"
#include "kernels/kernel.h"
#include "util/alloc.h"
#include "util/error.h"

#define POOL_PARALLEL_MIN 65536 /* window taps (or input elements) below which one thread runs */

static const char *const pool_names[4][AF_ISA_COUNT] = {
    {"f32_maxpool2d__scalar", "f32_maxpool2d__avx2", "f32_maxpool2d__avx512"},
    {"f32_avgpool2d__scalar", "f32_avgpool2d__avx2", "f32_avgpool2d__avx512"},
    {"f32_global_maxpool__scalar", "f32_global_maxpool__avx2", "f32_global_maxpool__avx512"},
    {"f32_global_avgpool__scalar", "f32_global_avgpool__avx2", "f32_global_avgpool__avx512"},
};

typedef struct pool_state {
    const af_vec_kernels *vk;
    bool global, max;
    /* On AVX-512, for the channel count it was prepared for, the channel-blocked depthwise kernel
     * runs window pools 16 planes a vector (a plane of 17x17 is two vectors a row, the second of
     * one lane): a MaxPool as its max, an AveragePool whose every window divides by kh * kw
     * (count_include_pad, or no pads, and no ceil_mode window past the padded input) as a
     * depthwise convolution with weights 1 / (kh kw). */
    af_dw_blocked blocked;
    int64_t channels; /* the input's C it was prepared for */
} pool_state;

static void pool_free(void *state) {
    pool_state *s = state;
    if (s) af_dw_blocked_release(&s->blocked);
    af_free(s);
}

typedef struct pool_job {
    const pool_state *s;
    const af_pool2d *g; /* window pools */
    const float *x;
    float *y;
    int64_t planes, in_plane, out_plane;
    int n_tasks;
    bool by_planes; /* window pools: tasks split the planes, not the rows */
} pool_job;

/* Planes [p0, p1), output rows [oy0, oy1) of each (window pools). */
static void pool_planes(const pool_job *j, int64_t p0, int64_t p1, int64_t oy0, int64_t oy1) {
    for (int64_t p = p0; p < p1; p++) {
        const float *xp = j->x + p * j->in_plane;
        if (j->s->global) j->s->vk->global_pool(j->s->max, j->in_plane, xp, j->y + p);
        else j->s->vk->pool2d_plane(j->g, xp, j->y + p * j->out_plane, oy0, oy1);
    }
}

static void pool_task(void *ctx, int task, int thread) {
    (void)thread;
    const pool_job *j = ctx;
    if (j->s->global) {
        pool_planes(j, j->planes * task / j->n_tasks, j->planes * (task + 1) / j->n_tasks, 0, 0);
        return;
    }
    const int64_t oh = j->g->oh;
    if (j->by_planes) {
        pool_planes(j, j->planes * task / j->n_tasks, j->planes * (task + 1) / j->n_tasks, 0, oh);
        return;
    }
    pool_planes(j, 0, j->planes, oh * task / j->n_tasks, oh * (task + 1) / j->n_tasks);
}

static bool f32_ready(const af_tensor *t) {
    int64_t n = t ? af_tensor_numel(t) : -1;
    return t && t->dtype == AF_DTYPE_FLOAT && n >= 0 && (n == 0 || (t->data && t->nbytes >= (size_t)n * 4));
}

/* The window of this run from the actual input: pads resolved, interior columns found. */
static af_status window_of(af_op_ctx *c, const af_tensor *x, const af_tensor *y, af_pool2d *g, af_conv_geom *geo_out) {
    af_conv_geom geo;
    int64_t out[2];
    af_status st = af_conv_geom_init(c, 2, NULL, &geo);
    if (st == AF_OK) st = af_conv_geom_forward(c, &geo, x->dims + 2, out);
    if (st == AF_OK && geo_out) *geo_out = geo;
    if (st != AF_OK) return st;
    if (y->rank != 4 || y->dims[0] != x->dims[0] || y->dims[1] != x->dims[1] || y->dims[2] != out[0] ||
        y->dims[3] != out[1])
        return af_ctx_fail(c, AF_ERR_RUNTIME, "output shape does not match the pooling window");
    *g = (af_pool2d){.max = c->node->op == AF_OP_MAX_POOL,
                     .include_pad = af_node_attr_int(c->node, "count_include_pad", 0) != 0,
                     .h = x->dims[2], .w = x->dims[3], .oh = out[0], .ow = out[1],
                     .kh = geo.kernel[0], .kw = geo.kernel[1], .sh = geo.stride[0], .sw = geo.stride[1],
                     .ph = geo.pad_begin[0], .pw = geo.pad_begin[1],
                     .eh = x->dims[2] + geo.pad_begin[0] + geo.pad_end[0],
                     .ew = x->dims[3] + geo.pad_begin[1] + geo.pad_end[1]};
    if (g->kh < 1 || g->kw < 1 || g->sh < 1 || g->sw < 1 || g->ph < 0 || g->pw < 0 || geo.dilation[0] != 1 ||
        geo.dilation[1] != 1)
        return AF_ERR_UNSUPPORTED;
    /* Interior: ox * sw - pw >= 0 and ox * sw - pw + kw <= w. Gathers index in int32. */
    int64_t lo = (g->pw + g->sw - 1) / g->sw, hi = g->w - g->kw + g->pw >= 0 ? (g->w - g->kw + g->pw) / g->sw + 1 : 0;
    if (lo > g->ow) lo = g->ow;
    if (hi > g->ow) hi = g->ow;
    if (hi < lo || g->sw > (1 << 26)) hi = lo;
    g->ox_lo = lo;
    g->ox_hi = hi;
    return AF_OK;
}

/* Whether every output of an AveragePool window g divides by kh * kw: counting the pads, or
 * without any, and no window reaching past the padded input (ceil_mode's last one may). */
static bool uniform_divisor(const af_pool2d *g) {
    if (g->max) return false;
    if (!g->include_pad && (g->ph || g->pw || g->eh != g->h || g->ew != g->w)) return false;
    return (g->oh - 1) * g->sh + g->kh <= g->eh && (g->ow - 1) * g->sw + g->kw <= g->ew;
}

static af_status pool_run(const af_kernel *k, af_op_ctx *c, const af_epilogue *epi, af_threadpool *pool,
                          void *workspace) {
    const pool_state *s = k->state;
    const af_tensor *x = af_ctx_input(c, 0);
    af_tensor *y = af_ctx_output(c, 0);
    if (epi && epi->n_steps) return af_ctx_fail(c, AF_ERR_RUNTIME, "pool kernels take no epilogue");
    if (!f32_ready(x) || !f32_ready(y)) return af_ctx_fail(c, AF_ERR_RUNTIME, "X and Y must be float32 with data");
    if (x->rank != 4 && !(s->global && x->rank >= 3)) return af_op_info(c->node->op)->run(c);
    pool_job j = {.s = s, .x = x->data, .y = y->data, .planes = x->dims[0] * x->dims[1]};
    int64_t work;
    af_pool2d g;
    if (s->global) {
        j.in_plane = j.planes > 0 ? af_tensor_numel(x) / j.planes : 0;
        if (af_tensor_numel(y) != j.planes) return af_ctx_fail(c, AF_ERR_RUNTIME, "Y must hold one value per plane");
        work = af_tensor_numel(x);
    } else {
        af_conv_geom geo;
        af_status st = window_of(c, x, y, &g, &geo);
        if (st == AF_ERR_UNSUPPORTED) return af_op_info(c->node->op)->run(c);
        if (st != AF_OK) return st;
        if (s->channels && x->dims[1] == s->channels && (g.max || uniform_divisor(&g)) &&
            af_dw_blocked_run(&s->blocked, &geo, x->data, y->data, x->dims[0], g.h, g.w, g.oh, g.ow, NULL, NULL, pool,
                              workspace, k->workspace_bytes) == AF_OK)
            return AF_OK;
        j.g = &g;
        j.in_plane = g.h * g.w;
        j.out_plane = g.oh * g.ow;
        work = af_tensor_numel(y) * g.kh * g.kw;
    }
    const int threads = af_threadpool_n_threads(pool);
    const int64_t units = s->global ? j.planes : g.oh; /* what the tasks split */
    if (work <= POOL_PARALLEL_MIN || threads <= 1 || units <= 1) {
        pool_planes(&j, 0, j.planes, 0, s->global ? 0 : g.oh);
        return AF_OK;
    }
    j.n_tasks = units < 4 * (int64_t)threads ? (int)units : 4 * threads;
    /* Window pools split the planes where there are enough of them, else bands of rows (thread t
     * the t-th, as the convolutions before it). Bands of a small plane end mid cache line, which
     * both threads then write: four 3x3 pools over 832x14x14 (GoogLeNet's) ran 0.64 ms on one
     * thread, 1.09 on two by rows and 0.35 by planes; ResNet-50's pool over 64x112x112 at two
     * threads 0.18 -> 0.10 ms. */
    if (!s->global && j.planes >= 4 * threads) {
        j.by_planes = true;
        j.n_tasks = 4 * threads;
    }
    if (s->global) af_threadpool_run(pool, j.n_tasks, pool_task, &j);
    else af_threadpool_run_affine(pool, j.n_tasks, pool_task, &j);
    return AF_OK;
}

/* Prepares s->blocked for a window pool of static x -> y (an AveragePool only where its windows
 * all divide by kh * kw, uniform_divisor); false where that does not hold or memory is short (the
 * plane loops run). */
static bool prepare_blocked(const af_kernel_request *req, const af_tensor *x, const af_tensor *y, pool_state *s,
                            af_conv_geom *geo) {
    if (x->rank != 4 || y->rank != 4 || !af_tensor_shape_known(x) || !af_tensor_shape_known(y) || x->dims[1] < 1)
        return false;
    const af_tensor *ins[1] = {x};
    af_op_ctx c = {.node = req->node, .graph = req->graph, .opset = req->graph->opset, .n_inputs = 1, .inputs = ins};
    af_pool2d g;
    if (window_of(&c, x, y, &g, geo) != AF_OK || (!g.max && !uniform_divisor(&g)) || g.kh * g.kw > 1024) return false;
    const int64_t taps = g.kh * g.kw, channels = x->dims[1];
    if (g.max) {
        af_dw_blocked_prepare_max(channels, g.kh, g.kw, &s->blocked);
    } else {
        float *w = af_malloc((size_t)(channels * taps) * sizeof *w);
        if (!w) return false;
        for (int64_t i = 0; i < channels * taps; i++) w[i] = 1.0f / (float)taps;
        const af_status st = af_dw_blocked_prepare(w, channels, g.kh, g.kw, &s->blocked);
        af_free(w);
        if (st != AF_OK) return false;
    }
    s->channels = channels;
    return true;
}

af_status af_fast_pool_prepare(const af_kernel_request *req, af_kernel *k, af_error *err) {
    const af_node *n = req->node;
    const af_tensor *x = af_kernel_input(req, 0);
    const af_tensor *y = n->n_outputs > 0 && n->outputs[0] >= 0 ? &req->graph->values[n->outputs[0]].t : NULL;
    if (!x || !y || x->dtype != AF_DTYPE_FLOAT || y->dtype != AF_DTYPE_FLOAT) return AF_OK;
    const bool global = n->op == AF_OP_GLOBAL_MAX_POOL || n->op == AF_OP_GLOBAL_AVERAGE_POOL;
    const bool max = n->op == AF_OP_MAX_POOL || n->op == AF_OP_GLOBAL_MAX_POOL;
    if (global) {
        if (x->rank >= 0 && x->rank < 3) return AF_OK;
    } else {
        if (x->rank != 4 || (n->n_outputs > 1 && n->outputs[1] >= 0)) return AF_OK; /* Indices: the reference */
        const af_tensor *ins[1] = {x};
        af_op_ctx c = {.node = n, .graph = req->graph, .opset = req->graph->opset, .n_inputs = 1, .inputs = ins};
        af_conv_geom geo;
        if (af_conv_geom_init(&c, 2, NULL, &geo) != AF_OK) return AF_OK; /* the reference reports it */
        if (geo.dilation[0] != 1 || geo.dilation[1] != 1) return AF_OK;
    }
    pool_state *s = af_malloc(sizeof *s);
    if (!s) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory preparing '%s'", n->name);
    *s = (pool_state){.vk = af_vec_kernels_for(req->choice.isa), .global = global, .max = max};
    k->name = pool_names[(global ? 2 : 0) + (max ? 0 : 1)][s->vk->isa];
    k->state = s;
    k->free_state = pool_free;
    af_conv_geom geo;
    if (!global && s->vk->isa == AF_ISA_AVX512 && prepare_blocked(req, x, y, s, &geo)) {
        k->workspace_bytes = af_dw_blocked_scratch_bytes(&s->blocked, &geo, y->dims[3],
                                                         req->choice.n_threads > 0 ? req->choice.n_threads : 1);
        k->weight_bytes = af_dw_blocked_weight_bytes(&s->blocked);
        k->name = max ? "f32_maxpool2d_blocked__avx512" : "f32_avgpool2d_blocked__avx512";
    }
    k->run = pool_run;
    return AF_OK;
}
