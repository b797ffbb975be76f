/*
 * Shared by the fast-kernel tests (test_fast_*.c): a one-node graph whose fast kernel is prepared
 * through af_kernel_select for a given ISA and run next to the op's reference kernel on the same
 * inputs, then compared element by element.
 *
 *   fx f;
 *   fx_init(&f, AF_OP_ADD, 17);
 *   fx_input(&f, fx_rand(1, (int64_t[]){100}, -2, 2, 7), false);
 *   fx_input(&f, fx_rand(0, NULL, -2, 2, 8), true);       // a constant scalar
 *   int64_t bad = fx_compare(&f, AF_ISA_AVX2, pools, FX_EXACT, &name);  // -1: not covered
 *   fx_free(&f);
 *
 * Tolerance: |fast - ref| <= atol + rtol |ref| + ulps * ulp(ref); NaN matches NaN; FX_EXACT asks for
 * the same value with the same sign of zero; outputs of other dtypes match exactly. Every output
 * the node asks for is compared. Besides, the fast kernel's outputs with a 1-thread and a 2-thread
 * pool must agree bit for bit.
 */
#ifndef AF_TESTS_UNIT_FAST_CHECK_H
#define AF_TESTS_UNIT_FAST_CHECK_H

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ir/op.h"
#include "ir/op_ctx.h"
#include "kernels/kernel.h"
#include "unit.h"
#include "util/alloc.h"
#include "util/cpu.h"
#include "util/threadpool.h"

#define FX_MAX_IN 8 /* LSTM: X W R B sequence_lens initial_h initial_c P */
#define FX_MAX_OUT 3
#define FX_MAX_ATTRS 8

typedef struct fx_tol {
    double atol, rtol, ulps;
} fx_tol;

#define FX_EXACT ((fx_tol){0, 0, 0})

typedef struct fx {
    af_graph g;
    af_value values[FX_MAX_IN + FX_MAX_OUT];
    af_node node;
    int in_ids[FX_MAX_IN], out_ids[FX_MAX_OUT];
    af_attr attrs[FX_MAX_ATTRS];
    int64_t ints[FX_MAX_ATTRS][8];
    af_tensor in[FX_MAX_IN]; /* actual inputs, owned; dtype 0 for an omitted one */
    bool constant[FX_MAX_IN];
    bool dynamic; /* the graph declares every input and output with unknown rank */
    af_error err;
} fx;

/* The two pools every comparison runs the fast kernel on. */
typedef struct fx_pools {
    af_threadpool *one, *two;
} fx_pools;

static inline bool fx_pools_init(fx_pools *p) {
    p->one = p->two = NULL;
    return af_threadpool_create(1, &p->one) == AF_OK && af_threadpool_create(2, &p->two) == AF_OK;
}

static inline void fx_pools_free(fx_pools *p) {
    af_threadpool_free(p->one);
    af_threadpool_free(p->two);
}

static inline void fx_init(fx *f, af_op op, int opset) {
    memset(f, 0, sizeof *f);
    f->g.values = f->values;
    f->g.opset = opset;
    f->g.name = "fx";
    f->node = (af_node){.name = "node", .op_type = (char *)af_op_info(op)->name, .domain = "", .op = op,
                        .inputs = f->in_ids, .outputs = f->out_ids, .attrs = f->attrs, .n_outputs = 1};
    f->out_ids[0] = FX_MAX_IN;
}

static inline af_attr *fx_attr(fx *f, const char *name, af_attr_type type) {
    af_attr *a = &f->attrs[f->node.n_attrs++];
    *a = (af_attr){.name = (char *)name, .type = type};
    return a;
}
static inline void fx_int(fx *f, const char *name, int64_t v) { fx_attr(f, name, AF_ATTR_INT)->i = v; }
static inline void fx_float(fx *f, const char *name, float v) { fx_attr(f, name, AF_ATTR_FLOAT)->f = v; }
static inline void fx_str(fx *f, const char *name, const char *s) { fx_attr(f, name, AF_ATTR_STRING)->s = (char *)s; }
static inline void fx_ints(fx *f, const char *name, int n, const int64_t *v) {
    int64_t *store = f->ints[f->node.n_attrs];
    memcpy(store, v, (size_t)n * sizeof *v);
    af_attr *a = fx_attr(f, name, AF_ATTR_INTS);
    a->n = n;
    a->ints = store;
}

/* Appends input t (taking its data); constant inputs are graph constants the kernel may fold. */
static inline void fx_input(fx *f, af_tensor t, bool constant) {
    int i = f->node.n_inputs++;
    f->in[i] = t;
    f->constant[i] = constant;
    f->in_ids[i] = i;
}

/* Appends an omitted optional input. */
static inline void fx_no_input(fx *f) { f->in_ids[f->node.n_inputs++] = -1; }

/* Declares n outputs, output k present when bit k of mask is set. */
static inline void fx_outputs(fx *f, int n, unsigned mask) {
    f->node.n_outputs = n;
    for (int k = 0; k < n; k++) f->out_ids[k] = mask >> k & 1u ? FX_MAX_IN + k : -1;
}

static inline void fx_free(fx *f) {
    for (int i = 0; i < FX_MAX_IN; i++) af_tensor_free_data(&f->in[i]);
}

/* A deterministic float tensor: uniform in [lo, hi) from seed. */
static inline af_tensor fx_rand(int rank, const int64_t *dims, float lo, float hi, uint64_t seed) {
    af_tensor t = {.dtype = AF_DTYPE_FLOAT, .rank = rank};
    if (rank) memcpy(t.dims, dims, (size_t)rank * sizeof *dims);
    if (af_tensor_alloc(&t, NULL) != AF_OK) return t;
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    float *p = t.data;
    for (int64_t i = 0; i < af_tensor_numel(&t); i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = lo + (hi - lo) * (float)((s >> 40) & 0xffffff) / (float)0x1000000;
    }
    return t;
}

static inline af_tensor fx_scalar(af_dtype dtype, double v) {
    af_tensor t = {.dtype = dtype, .rank = 0};
    if (af_tensor_alloc(&t, NULL) == AF_OK) af_tensor_set_f64(&t, 0, v);
    return t;
}

static inline af_tensor fx_vec(int n, const float *v) {
    af_tensor t = {.dtype = AF_DTYPE_FLOAT, .rank = 1, .dims = {n}};
    if (af_tensor_alloc(&t, NULL) == AF_OK) memcpy(t.data, v, (size_t)n * sizeof *v);
    return t;
}

static inline double fx_ulp(double r) {
    float a = fabsf((float)r);
    return isinf(a) ? 0 : (double)nextafterf(a, INFINITY) - (double)a;
}

/* Elements of got outside tol against want; prints the first with what. */
static inline int64_t fx_count_off(const af_tensor *got, const af_tensor *want, fx_tol tol, const char *what) {
    const float *g = got->data, *w = want->data;
    const bool exact = tol.atol == 0 && tol.rtol == 0 && tol.ulps == 0;
    int64_t n = af_tensor_numel(want), bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = g[i], b = w[i];
        bool ok = (isnan(a) && isnan(b)) || (a == b && (!exact || signbit(a) == signbit(b))) ||
                  (!exact && fabs(a - b) <= tol.atol + tol.rtol * fabs(b) + tol.ulps * fx_ulp(b));
        if (ok) continue;
        if (!bad) printf("  %s: element %lld is %.9g, expected %.9g\n", what, (long long)i, a, b);
        bad++;
    }
    return bad;
}

static inline af_op_ctx fx_ctx(fx *f, const af_tensor **ins, af_tensor **outs) {
    for (int i = 0; i < f->node.n_inputs; i++) ins[i] = f->in_ids[i] >= 0 ? &f->in[i] : NULL;
    return (af_op_ctx){.node = &f->node, .graph = &f->g, .opset = f->g.opset, .n_inputs = f->node.n_inputs,
                       .inputs = ins, .n_outputs = f->node.n_outputs, .outputs = outs, .err = &f->err};
}

/* Infers the outputs' shapes on the actual inputs and allocates them into out[]. */
static inline af_status fx_alloc_outputs(fx *f, af_tensor *out) {
    const af_tensor *ins[FX_MAX_IN];
    af_tensor *outs[FX_MAX_OUT];
    for (int k = 0; k < f->node.n_outputs; k++) {
        out[k] = (af_tensor){0};
        outs[k] = f->out_ids[k] >= 0 ? &out[k] : NULL;
    }
    af_op_ctx c = fx_ctx(f, ins, outs);
    af_status st = af_op_info(f->node.op)->infer(&c);
    for (int k = 0; st == AF_OK && k < f->node.n_outputs; k++)
        if (outs[k]) st = af_tensor_alloc(outs[k], &f->err);
    return st;
}

static inline void fx_free_outputs(fx *f, af_tensor *out) {
    for (int k = 0; k < f->node.n_outputs; k++) af_tensor_free_data(&out[k]);
}

/* Fills the graph's values from the actual inputs and the inferred outputs (shapes only, or
 * rank -1 when f->dynamic; data for constants), as a loaded model would declare them. */
static inline void fx_declare(fx *f, const af_tensor *out) {
    f->g.n_values = FX_MAX_IN + FX_MAX_OUT;
    for (int i = 0; i < FX_MAX_IN + FX_MAX_OUT; i++) {
        af_value *v = &f->values[i];
        memset(v, 0, sizeof *v);
        v->name = (char *)"v";
        v->producer = -1;
        const af_tensor *t = i < FX_MAX_IN ? &f->in[i] : &out[i - FX_MAX_IN];
        af_shape_copy(&v->t, t);
        bool constant = i < FX_MAX_IN && f->constant[i];
        if (f->dynamic && !constant) v->t.rank = -1;
        v->kind = i >= FX_MAX_IN ? AF_VALUE_NODE : constant ? AF_VALUE_CONST : AF_VALUE_INPUT;
        if (constant) v->t.data = t->data, v->t.nbytes = t->nbytes;
        if (i >= FX_MAX_IN) v->producer = 0;
    }
}

/* Prepares the node's fast kernel for isa; false (k->run NULL) when none covers it. */
static inline bool fx_prepare(fx *f, af_isa isa, af_kernel *k) {
    af_tensor out[FX_MAX_OUT];
    if (fx_alloc_outputs(f, out) != AF_OK) {
        printf("  infer failed: %s\n", f->err.message);
        fx_free_outputs(f, out);
        return false;
    }
    fx_declare(f, out);
    fx_free_outputs(f, out);
    af_kernel_request req = {.graph = &f->g, .node = &f->node, .choice = {.isa = isa, .n_threads = 2}};
    if (af_kernel_select(&req, k, &f->err) != AF_OK || !k->run) {
        af_kernel_release(k);
        return false;
    }
    return true;
}

/* Runs kernel k with epilogue epi (may be NULL), or the node's reference kernel when k is NULL,
 * on outputs out already allocated (fx_alloc_outputs). */
static inline af_status fx_run_on(fx *f, const af_kernel *k, const af_epilogue *epi, af_threadpool *pool,
                                  af_tensor *out) {
    const af_tensor *ins[FX_MAX_IN];
    af_tensor *outs[FX_MAX_OUT];
    for (int j = 0; j < f->node.n_outputs; j++) outs[j] = f->out_ids[j] >= 0 ? &out[j] : NULL;
    af_op_ctx c = fx_ctx(f, ins, outs);
    if (!k) return af_op_info(f->node.op)->run(&c);
    void *ws = k->workspace_bytes ? af_malloc_aligned(k->workspace_bytes) : NULL;
    const af_status st = k->run(k, &c, epi, pool, ws);
    af_free_aligned(ws);
    return st;
}

/* Allocates out (the node's outputs) and runs on them as fx_run_on. */
static inline af_status fx_run(fx *f, const af_kernel *k, const af_epilogue *epi, af_threadpool *pool,
                               af_tensor *out) {
    const af_status st = fx_alloc_outputs(f, out);
    return st != AF_OK ? st : fx_run_on(f, k, epi, pool, out);
}

static inline af_status fx_run_fast(fx *f, const af_kernel *k, af_threadpool *pool, af_tensor *out) {
    return fx_run(f, k, NULL, pool, out);
}

static inline af_status fx_run_reference(fx *f, af_tensor *out) { return fx_run(f, NULL, NULL, NULL, out); }

/* Runs the reference and the fast kernel for isa (on both pools) and compares output 0. Returns
 * -1 when no fast kernel covers the node, else the elements out of tolerance (plus one when the
 * thread counts disagree or a run fails). *name (may be NULL) gets the kernel's name. */
static inline int64_t fx_compare(fx *f, af_isa isa, const fx_pools *pools, fx_tol tol, const char **name) {
    af_kernel k;
    if (!fx_prepare(f, isa, &k)) return -1;
    if (name) *name = k.name;
    af_tensor ref[FX_MAX_OUT], one[FX_MAX_OUT], two[FX_MAX_OUT];
    int64_t bad = 0;
    af_status st = fx_run_reference(f, ref);
    af_status s1 = fx_run_fast(f, &k, pools->one, one), s2 = fx_run_fast(f, &k, pools->two, two);
    if (st != AF_OK || s1 != AF_OK || s2 != AF_OK) {
        printf("  %s: a run failed (ref %d, fast %d/%d): %s\n", k.name, st, s1, s2, f->err.message);
        bad = 1;
    } else {
        for (int o = 0; o < f->node.n_outputs; o++) { /* every output the node asks for */
            if (f->out_ids[o] < 0) continue;
            char what[96];
            snprintf(what, sizeof what, "%s output %d", k.name, o);
            if (ref[o].dtype != AF_DTYPE_FLOAT) { /* indices, masks: exact */
                const bool same = one[o].dtype == ref[o].dtype && one[o].nbytes == ref[o].nbytes &&
                                  (!ref[o].nbytes || !memcmp(one[o].data, ref[o].data, ref[o].nbytes));
                if (!same) printf("  %s: differs from the reference\n", what);
                bad += !same;
            } else {
                bad += fx_count_off(&one[o], &ref[o], tol, what);
            }
            if (ref[o].nbytes && memcmp(one[o].data, two[o].data, ref[o].nbytes)) {
                printf("  %s: 1 and 2 threads differ\n", what);
                bad++;
            }
        }
    }
    fx_free_outputs(f, ref);
    fx_free_outputs(f, one);
    fx_free_outputs(f, two);
    af_kernel_release(&k);
    return bad;
}

/* The ISA levels this CPU runs, lowest first: n of them in out[]. */
static inline int fx_isas(af_isa *out) {
    int n = 0;
    for (int i = AF_ISA_SCALAR; i <= (int)af_cpu_info_get()->isa_max; i++) out[n++] = (af_isa)i;
    return n;
}

/* fx_compare on every ISA the CPU has, exactly, asking that the fast kernel named want ran
 * (kernels with one name for all ISAs); prints the label of what differs. */
static inline void fx_check_exact_all(fx *f, const fx_pools *pools, const char *want, const char *label) {
    af_isa isas[AF_ISA_COUNT];
    const int n_isa = fx_isas(isas);
    for (int i = 0; i < n_isa; i++) {
        const char *name = "";
        const int64_t bad = fx_compare(f, isas[i], pools, FX_EXACT, &name);
        if (bad != 0 || strcmp(name, want) != 0)
            printf("  %s isa=%s: %lld off (kernel %s)\n", label, af_isa_name(isas[i]), (long long)bad, name);
        CHECK(bad == 0 && strcmp(name, want) == 0);
    }
}

/* True when the kernel name ends in isa's suffix ("__avx2"). */
static inline bool fx_named_for(const char *name, af_isa isa) {
    char want[32];
    snprintf(want, sizeof want, "__%s", af_isa_name(isa));
    size_t n = strlen(name), w = strlen(want);
    return n >= w && !strcmp(name + n - w, want);
}

#endif
