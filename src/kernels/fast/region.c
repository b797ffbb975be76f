/* The fused elementwise region kernel (see region.h). */
#include "kernels/fast/region.h"

#include <stdatomic.h>
#include <string.h>

#include "ir/op.h"
#include "ir/op_ctx.h"
#include "kernels/fast/mask.h"
#include "kernels/fast/vec_internal.h"
#include "kernels/ref/movement.h"
#include "util/alloc.h"
#include "util/error.h"

#define TILE 2048   /* elements per tile: a few tiles of scratch stay in L1/L2 */
#define MAX_ES 8    /* the widest element type the runtime holds */

typedef struct region_state {
    af_region_program p;
    af_epilogue_tile_fn apply;
    const af_vec_kernels *vk;
    int n_threads;
    size_t per_thread; /* scratch bytes of one thread */
} region_state;

typedef enum { IN_DIRECT, IN_SCALAR, IN_GATHER } in_mode;

typedef struct in_view {
    in_mode mode;
    const af_tensor *t;
    size_t es;
    int64_t stride[AF_MAX_RANK]; /* IN_GATHER: elements per step of each output dim; 0 broadcast */
} in_view;

typedef struct region_run {
    const region_state *st;
    const af_op_ctx *ctx;
    in_view in[AF_REGION_MAX_INPUTS];
    int rank;
    int64_t dims[AF_MAX_RANK];
    int64_t n;
    af_threadpool *pool;
    uint8_t *ws; /* each thread's scratch where the pool has none for it */
    atomic_int failed;
    af_error err;
} region_run;

static void free_state(void *p) {
    region_state *st = p;
    if (!st) return;
    af_free(st->p.instrs);
    af_free(st);
}

/* How input t reaches the output's index space; false when it does not broadcast to it. */
static bool classify(const af_tensor *t, const int64_t *dims, int rank, int64_t n, in_view *v) {
    *v = (in_view){.t = t, .es = af_dtype_size(t->dtype)};
    if (t->rank > rank || v->es == 0 || v->es > MAX_ES) return false;
    int64_t step = 1;
    bool same = true;
    for (int d = rank - 1; d >= 0; d--) {
        int td = d - (rank - t->rank);
        int64_t extent = td >= 0 ? t->dims[td] : 1;
        if (extent != dims[d] && extent != 1) return false;
        if (extent != dims[d]) same = false;
        v->stride[d] = extent == 1 ? 0 : step;
        step *= extent;
    }
    if (same || af_tensor_numel(t) == n) v->mode = IN_DIRECT;
    else if (af_tensor_numel(t) == 1) v->mode = IN_SCALAR;
    else v->mode = IN_GATHER;
    return true;
}

/* The source offset (elements) of output index e under v's strides. */
static int64_t source_offset(const region_run *r, const in_view *v, int64_t e) {
    int64_t off = 0;
    for (int d = r->rank - 1; d >= 0; d--) {
        off += e % r->dims[d] * v->stride[d];
        e /= r->dims[d];
    }
    return off;
}

/* Copies elements [start, start + count) of v's broadcast into dst, a run at a time: where the
 * trailing output dims all broadcast v (a per-channel scale over H x W), each run of their size
 * is one value filled; where v's last dim is the output's, each row is one memcpy. ConvNeXt's
 * layer-scale Mul gathered element by element took 4 ns an element. */
static void gather(const region_run *r, const in_view *v, int64_t start, int64_t count, uint8_t *dst) {
    const uint8_t *src = v->t->data;
    const int last = r->rank - 1;
    int64_t fill_run = 1; /* the trailing dims that broadcast v */
    for (int d = last; d >= 0 && v->stride[d] == 0; d--) fill_run *= r->dims[d];
    const int64_t copy_run = fill_run == 1 && last >= 0 && v->stride[last] == 1 ? r->dims[last] : 1;
    const int64_t run = fill_run > 1 ? fill_run : copy_run;
    for (int64_t e = start, done = 0; done < count;) {
        const int64_t n = run - e % run < count - done ? run - e % run : count - done;
        const int64_t off = source_offset(r, v, e);
        if (fill_run > 1) af_movement_fill(dst + (size_t)done * v->es, src + (size_t)off * v->es, v->es, n);
        else memcpy(dst + (size_t)done * v->es, src + (size_t)off * v->es, (size_t)n * v->es);
        e += n;
        done += n;
    }
}

/* The instruction on the vector kernels (the ones the unfused ops run, so the bits are theirs);
 * false when it is not one they take. */
static bool vector_op(const region_state *st, const af_region_instr *in, const void *const *ptr, const bool *scalar,
                      float *y, int64_t t) {
    if (in->vec.kind == AF_REGION_VEC_UNARY && !scalar[0]) {
        st->vk->ew_unary((af_ew_unary_op)in->vec.op, in->vec.a, in->vec.b, t, ptr[0], y);
        return true;
    }
    if (in->vec.kind == AF_REGION_VEC_BINARY && !(scalar[0] && scalar[1])) {
        st->vk->ew_binary((af_ew_binary_op)in->vec.op, t, ptr[0], scalar[0] ? 0 : 1, ptr[1], scalar[1] ? 0 : 1, y);
        return true;
    }
    if (in->vec.kind == AF_REGION_VEC_FOLD && in->n_args >= 2 && !(scalar[0] && scalar[1])) {
        const af_ew_binary_op op = (af_ew_binary_op)in->vec.op;
        for (int a = 0; a < in->n_args; a++)
            if (!ptr[a]) return false;
        st->vk->ew_binary(op, t, ptr[0], scalar[0] ? 0 : 1, ptr[1], scalar[1] ? 0 : 1, y);
        for (int a = 2; a < in->n_args; a++) st->vk->ew_binary(op, t, y, 1, ptr[a], scalar[a] ? 0 : 1, y);
        const float count = (float)in->n_args;
        if (in->vec.mean) st->vk->ew_binary(AF_EW_DIV, t, y, 1, &count, 0, y);
        return true;
    }
    return false;
}

static af_status run_instr(region_run *r, int i, int64_t start, int64_t t, uint8_t *scratch, af_error *err) {
    const region_state *st = r->st;
    const af_region_instr *in = &st->p.instrs[i];
    const bool last = i == st->p.n_instrs - 1;
    uint8_t *slots = scratch, *gathered = scratch + (size_t)st->p.n_instrs * TILE * MAX_ES;
    size_t es_out = af_dtype_size(in->dtype);
    uint8_t *dst = last ? (uint8_t *)r->ctx->outputs[0]->data + (size_t)start * es_out
                        : slots + (size_t)i * TILE * MAX_ES;
    const void *ptr[AF_REGION_MAX_ARGS] = {0};
    bool scalar[AF_REGION_MAX_ARGS] = {0};
    af_tensor view[AF_REGION_MAX_ARGS];
    const af_tensor *ins[AF_REGION_MAX_ARGS] = {0};
    bool any_tile = false;
    for (int a = 0; a < in->n_args; a++) {
        const af_region_arg *arg = &in->args[a];
        if (arg->kind == AF_REGION_NONE) continue;
        af_dtype dt;
        if (arg->kind == AF_REGION_SLOT) {
            dt = st->p.instrs[arg->index].dtype;
            ptr[a] = slots + (size_t)arg->index * TILE * MAX_ES;
        } else {
            const in_view *v = &r->in[arg->index];
            dt = v->t->dtype;
            if (v->mode == IN_SCALAR) {
                ptr[a] = v->t->data;
                scalar[a] = true;
            } else if (v->mode == IN_DIRECT) {
                ptr[a] = (const uint8_t *)v->t->data + (size_t)start * v->es;
            } else {
                uint8_t *g = gathered + (size_t)a * TILE * MAX_ES;
                gather(r, v, start, t, g);
                ptr[a] = g;
            }
        }
        /* A one-to-one op needs its operand as a whole tile; so does a broadcast op with no tile. */
        bool need_tile = (a == 0 && af_op_info(in->node->op)->cls == AF_OPCLASS_ELEMENTWISE) ||
                         (a == in->n_args - 1 && !any_tile);
        if (scalar[a] && need_tile) {
            uint8_t *g = gathered + (size_t)a * TILE * MAX_ES;
            af_movement_fill(g, ptr[a], af_dtype_size(dt), t);
            ptr[a] = g;
            scalar[a] = false;
        }
        any_tile |= !scalar[a];
        view[a] = (af_tensor){.dtype = dt, .rank = scalar[a] ? 0 : 1, .dims = {scalar[a] ? 0 : t},
                              .data = (void *)ptr[a], .nbytes = (size_t)(scalar[a] ? 1 : t) * af_dtype_size(dt)};
        ins[a] = &view[a];
    }
    if (in->has_epi) {
        memmove(dst, ptr[0], (size_t)t * sizeof(float));
        af_epilogue e = {.n_steps = 1, .steps = {in->epi}};
        st->apply(&e, (float *)dst, t, 1, (int)t, 0, 0, 0);
        return AF_OK;
    }
    if (vector_op(st, in, ptr, scalar, (float *)dst, t)) return AF_OK;
    af_tensor out = {.dtype = in->dtype, .rank = 1, .dims = {t}, .data = dst, .nbytes = (size_t)t * es_out};
    if (af_mask_try(in->node->op, ins, in->n_args, &out, NULL)) return AF_OK;
    af_tensor *outs[1] = {&out};
    af_op_ctx c = {.node = in->node, .graph = r->ctx->graph, .opset = r->ctx->opset, .n_inputs = in->n_args,
                   .inputs = ins, .n_outputs = 1, .outputs = outs, .err = err};
    return af_op_info(in->node->op)->run(&c);
}

static void region_task(void *p, int task, int thread) {
    region_run *r = p;
    if (atomic_load(&r->failed)) return;
    int64_t start = (int64_t)task * TILE, t = r->n - start < TILE ? r->n - start : TILE;
    uint8_t *scratch =
        af_threadpool_scratch_or(r->pool, thread, r->st->per_thread, r->ws + (size_t)thread * r->st->per_thread);
    af_error err = {0};
    for (int i = 0; i < r->st->p.n_instrs; i++) {
        if (run_instr(r, i, start, t, scratch, &err) == AF_OK) continue;
        if (atomic_exchange(&r->failed, 1) == 0) r->err = err;
        return;
    }
}

static af_status region_run_fn(const af_kernel *k, af_op_ctx *ctx, const af_epilogue *epi, af_threadpool *pool,
                               void *workspace) {
    (void)epi;
    const region_state *st = k->state;
    const af_tensor *out = ctx->outputs[0];
    region_run run = {
        .st = st, .ctx = ctx, .rank = out->rank, .n = af_tensor_numel(out), .pool = pool, .ws = workspace};
    region_run *r = &run; /* on the stack: no allocation while inferring */
    memcpy(r->dims, out->dims, sizeof r->dims);
    af_status s = AF_OK;
    if (ctx->n_inputs != st->p.n_inputs || ctx->n_inputs > (int)(sizeof r->in / sizeof r->in[0])) {
        s = af_ctx_fail(ctx, AF_ERR_RUNTIME, "fused region: %d inputs, the program has %d", ctx->n_inputs,
                        st->p.n_inputs);
        goto done;
    }
    for (int i = 0; i < ctx->n_inputs; i++)
        if (!ctx->inputs[i] || !classify(ctx->inputs[i], r->dims, r->rank, r->n, &r->in[i])) {
            s = af_ctx_fail(ctx, AF_ERR_RUNTIME, "fused region: input %d does not broadcast to the output", i);
            goto done;
        }
    if (r->n > 0) {
        int n_tasks = (int)((r->n + TILE - 1) / TILE);
        /* Scratch exists for st->n_threads threads; a larger pool would index past it. */
        af_threadpool *use = af_threadpool_n_threads(pool) <= st->n_threads ? pool : NULL;
        af_threadpool_run(use, n_tasks, region_task, r);
    }
    if (atomic_load(&r->failed)) {
        if (ctx->err) *ctx->err = r->err;
        s = r->err.status != AF_OK ? r->err.status : AF_ERR_RUNTIME;
    }
done:
    return s;
}

af_status af_region_kernel_make(const af_region_program *p, af_isa isa, int n_threads, af_kernel *k, af_error *err) {
    memset(k, 0, sizeof *k);
    if (!p || p->n_instrs < 1 || p->n_inputs < 0 || p->n_inputs > AF_REGION_MAX_INPUTS)
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "fused region: bad program");
    for (int i = 0; i < p->n_instrs; i++) {
        const af_region_instr *in = &p->instrs[i];
        size_t es = af_dtype_size(in->dtype);
        if (!in->node || in->n_args < 0 || in->n_args > AF_REGION_MAX_ARGS || es == 0 || es > MAX_ES)
            return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "fused region: bad instruction %d", i);
        for (int a = 0; a < in->n_args; a++) {
            const af_region_arg *g = &in->args[a];
            if ((g->kind == AF_REGION_SLOT && (g->index < 0 || g->index >= i)) ||
                (g->kind == AF_REGION_INPUT && (g->index < 0 || g->index >= p->n_inputs)))
                return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "fused region: instruction %d argument %d", i, a);
        }
    }
    region_state *st = af_calloc(1, sizeof *st);
    af_region_instr *copy = af_malloc((size_t)p->n_instrs * sizeof *copy);
    if (!st || !copy) {
        af_free(st);
        af_free(copy);
        return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory preparing a fused region");
    }
    memcpy(copy, p->instrs, (size_t)p->n_instrs * sizeof *copy);
    st->p = *p;
    st->p.instrs = copy;
    st->apply = af_epilogue_tile_fn_for(isa);
    st->vk = af_vec_kernels_for(isa);
    st->n_threads = n_threads > 0 ? n_threads : 1;
    st->per_thread = (size_t)(p->n_instrs + AF_REGION_MAX_ARGS) * TILE * MAX_ES;
    *k = (af_kernel){.name = "fused_elementwise_region", .state = st, .run = region_run_fn, .free_state = free_state,
                     .workspace_bytes = (size_t)st->n_threads * st->per_thread};
    return AF_OK;
}
