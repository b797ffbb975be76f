/* The fused attention kernel (src/kernels/fast/attention.h) against its double-precision twin
 * af_attention_ref and against the unfused chain of reference ops the exporter emits (Transpose,
 * MatMul, Div, Add, Softmax, MatMul, Transpose), for every ISA level the CPU has, 1 and 2 threads.
 * Tolerance: |fast - ref| <= 1e-5 + 1e-4 |ref| per element; 1 and 2 threads agree bit for bit. */
#include <math.h>
#include <string.h>

#include "ir/op.h"
#include "ir/op_ctx.h"
#include "kernels/fast/attention.h"
#include "unit.h"
#include "util/alloc.h"

#define ATOL 1e-5
#define RTOL 1e-4
#define FINFO_MIN (-3.4028234663852886e38f) /* torch.finfo(torch.float32).min */

typedef enum { MASK_NONE, MASK_KEYS, MASK_ROWS } mask_kind;

/* A problem in torch's layout: q, k, v and out [B, S, H*D] contiguous; the mask [B,1,1,S]
 * (MASK_KEYS: 0 or finfo.min per key; item 1 of a batch of 2 masks every key) or [B,1,S,S]
 * (MASK_ROWS: values in [-3, 0], finfo.min above the diagonal). */
typedef struct problem {
    int64_t B, S, H, D;
    mask_kind mk;
    float *q, *k, *v, *mask;
} problem;

static uint64_t rng_state;
static float frand(float lo, float hi) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (float)((rng_state >> 40) & 0xffffff) / (float)0x1000000;
}

static bool problem_init(problem *p, int64_t B, int64_t S, int64_t H, int64_t D, mask_kind mk) {
    *p = (problem){.B = B, .S = S, .H = H, .D = D, .mk = mk};
    const size_t n = (size_t)(B * S * H * D);
    p->q = af_malloc((n ? n : 1) * sizeof(float));
    p->k = af_malloc((n ? n : 1) * sizeof(float));
    p->v = af_malloc((n ? n : 1) * sizeof(float));
    const int64_t mrows = mk == MASK_ROWS ? S : 1;
    p->mask = af_malloc((size_t)(B * mrows * S + 1) * sizeof(float));
    if (!p->q || !p->k || !p->v || !p->mask) return false;
    rng_state = (uint64_t)(B * 1000003 + S * 10007 + H * 101 + D * 7 + mk);
    for (size_t i = 0; i < n; i++) {
        p->q[i] = frand(-2.0f, 2.0f);
        p->k[i] = frand(-2.0f, 2.0f);
        p->v[i] = frand(-1.0f, 1.0f);
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < mrows; i++)
            for (int64_t j = 0; j < S; j++) {
                float m;
                if (mk == MASK_KEYS)
                    m = (b == 1 || (S > 2 && j >= S - S / 3)) ? FINFO_MIN : 0.0f;
                else
                    m = j > i ? FINFO_MIN : frand(-3.0f, 0.0f);
                p->mask[(b * mrows + i) * S + j] = m;
            }
    return true;
}

static void problem_free(problem *p) {
    af_free(p->q);
    af_free(p->k);
    af_free(p->v);
    af_free(p->mask);
}

static af_attention_desc problem_desc(const problem *p, float *out, af_isa isa) {
    af_attention_desc d = af_attention_desc_packed(p->B, p->S, p->S, p->H, p->D);
    d.q = p->q;
    d.k = p->k;
    d.v = p->v;
    d.out = out;
    d.isa = isa;
    if (p->mk != MASK_NONE) {
        d.mask = p->mask;
        d.mask_row_stride = p->mk == MASK_ROWS ? p->S : 0;
        d.mask_batch_stride = p->mk == MASK_ROWS ? p->S * p->S : p->S;
    }
    return d;
}

/* Runs the fast kernel with a workspace of exactly the stated size. */
static af_status run_fast(af_attention_desc *d, af_threadpool *pool) {
    d->workspace_size = af_attention_workspace_size(d, af_threadpool_n_threads(pool));
    d->workspace = d->workspace_size ? af_malloc(d->workspace_size) : NULL;
    if (d->workspace_size && !d->workspace) return AF_ERR_OUT_OF_MEMORY;
    af_status st = af_attention_run(d, pool);
    af_free(d->workspace);
    d->workspace = NULL;
    return st;
}

/* Counts elements outside the tolerance (and non-finite ones); reports the first. */
static int64_t count_off(const float *got, const float *want, int64_t n, const char *what) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        const double g = got[i], w = want[i];
        if (isfinite(g) && fabs(g - w) <= ATOL + RTOL * fabs(w)) continue;
        if (!bad) printf("  %s: element %lld is %.9g, expected %.9g\n", what, (long long)i, g, w);
        bad++;
    }
    return bad;
}

/* ---- the unfused chain of reference ops ------------------------------------------------------ */

typedef struct op_node {
    af_attr attr;
    int64_t perm[4];
    af_node node;
    af_error err;
} op_node;

/* Infers out's shape, allocates it and runs op's reference kernel; perm: Transpose's attribute. */
static af_status ref_op(af_op op, const int64_t *perm, int n_in, const af_tensor *const *in, af_tensor *out) {
    op_node f;
    memset(&f, 0, sizeof f);
    f.node = (af_node){.name = "n", .op_type = (char *)af_op_info(op)->name, .domain = "", .op = op};
    if (perm) {
        memcpy(f.perm, perm, sizeof f.perm);
        f.attr = (af_attr){.name = "perm", .type = AF_ATTR_INTS, .n = 4, .ints = f.perm};
        f.node.attrs = &f.attr;
        f.node.n_attrs = 1;
    }
    af_tensor *outs[1] = {out};
    af_op_ctx c = {.node = &f.node, .opset = 17, .n_inputs = n_in, .inputs = in, .n_outputs = 1, .outputs = outs,
                   .err = &f.err};
    *out = (af_tensor){0};
    af_status st = af_op_info(op)->infer(&c);
    if (st == AF_OK) st = af_tensor_alloc(out, &f.err);
    if (st == AF_OK) st = af_op_info(op)->run(&c);
    if (st != AF_OK) printf("  %s: %s\n", af_op_info(op)->name, f.err.message);
    return st;
}

static af_tensor view(float *data, int rank, const int64_t *dims) {
    af_tensor t = {.dtype = AF_DTYPE_FLOAT, .rank = rank, .data = data};
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= t.dims[i] = dims[i];
    t.nbytes = (size_t)n * sizeof(float);
    return t;
}

/* out [B, S, H*D] = the exporter's graph: Reshape (a view here) -> Transpose -> MatMul -> Div by
 * sqrt(D) -> Add mask -> Softmax(-1) -> MatMul -> Transpose (-> Reshape, a view). */
static af_status unfused(const problem *p, float *out) {
    static const int64_t p0213[4] = {0, 2, 1, 3}, p0231[4] = {0, 2, 3, 1};
    const int64_t bshd[4] = {p->B, p->S, p->H, p->D};
    const int64_t mdims[4] = {p->B, 1, p->mk == MASK_ROWS ? p->S : 1, p->S};
    float c = sqrtf((float)p->D);
    af_tensor q = view(p->q, 4, bshd), k = view(p->k, 4, bshd), v = view(p->v, 4, bshd);
    af_tensor m = view(p->mask, 4, mdims), cs = view(&c, 0, NULL);
    af_tensor t[9];
    memset(t, 0, sizeof t);
    af_status st = ref_op(AF_OP_TRANSPOSE, p0213, 1, (const af_tensor *[]){&q}, &t[0]);
    if (st == AF_OK) st = ref_op(AF_OP_TRANSPOSE, p0231, 1, (const af_tensor *[]){&k}, &t[1]);
    if (st == AF_OK) st = ref_op(AF_OP_TRANSPOSE, p0213, 1, (const af_tensor *[]){&v}, &t[2]);
    if (st == AF_OK) st = ref_op(AF_OP_MAT_MUL, NULL, 2, (const af_tensor *[]){&t[0], &t[1]}, &t[3]);
    if (st == AF_OK) st = ref_op(AF_OP_DIV, NULL, 2, (const af_tensor *[]){&t[3], &cs}, &t[4]);
    const af_tensor *scores = &t[4];
    if (st == AF_OK && p->mk != MASK_NONE) {
        st = ref_op(AF_OP_ADD, NULL, 2, (const af_tensor *[]){&t[4], &m}, &t[5]);
        scores = &t[5];
    }
    if (st == AF_OK) st = ref_op(AF_OP_SOFTMAX, NULL, 1, (const af_tensor *[]){scores}, &t[6]);
    if (st == AF_OK) st = ref_op(AF_OP_MAT_MUL, NULL, 2, (const af_tensor *[]){&t[6], &t[2]}, &t[7]);
    if (st == AF_OK) st = ref_op(AF_OP_TRANSPOSE, p0213, 1, (const af_tensor *[]){&t[7]}, &t[8]);
    if (st == AF_OK) memcpy(out, t[8].data, t[8].nbytes);
    for (int i = 0; i < 9; i++) af_tensor_free_data(&t[i]);
    return st;
}

/* ---- the sweeps -------------------------------------------------------------------------------- */

/* Checks every ISA level with 1 and 2 threads against ref; 1 and 2 threads must agree exactly.
 * Returns false on any failure (printed). */
static bool check_levels(const problem *p, const float *ref, af_threadpool *pool2, const char *what) {
    const int64_t n = p->B * p->S * p->H * p->D;
    float *o1 = af_malloc((size_t)(n + 1) * sizeof(float)), *o2 = af_malloc((size_t)(n + 1) * sizeof(float));
    bool ok = o1 && o2;
    for (int isa = 0; ok && isa <= (int)af_cpu_info_get()->isa_max; isa++) {
        af_attention_desc d1 = problem_desc(p, o1, (af_isa)isa), d2 = problem_desc(p, o2, (af_isa)isa);
        ok = run_fast(&d1, NULL) == AF_OK && run_fast(&d2, pool2) == AF_OK;
        if (ok && count_off(o1, ref, n, what)) ok = false;
        if (ok && memcmp(o1, o2, (size_t)n * sizeof(float))) {
            printf("  %s: 1 and 2 threads differ\n", what);
            ok = false;
        }
        if (!ok)
            printf("  failed: %s isa %s B=%lld S=%lld H=%lld D=%lld mask %d\n", what, af_isa_name((af_isa)isa),
                   (long long)p->B, (long long)p->S, (long long)p->H, (long long)p->D, (int)p->mk);
    }
    af_free(o1);
    af_free(o2);
    return ok;
}

AF_TEST(attention_fast_matches_ref) {
    static const int64_t seqs[] = {1, 7, 16, 32, 128, 129}, heads[] = {1, 2, 12}, dims[] = {8, 32, 64};
    af_threadpool *pool = NULL;
    CHECK(af_threadpool_create(2, &pool) == AF_OK);
    int cases = 0, failed = 0;
    for (int si = 0; si < 6; si++)
        for (int hi = 0; hi < 3; hi++)
            for (int di = 0; di < 3; di++)
                for (int mk = MASK_NONE; mk <= MASK_ROWS; mk++) {
                    /* Batch 2 on every other case keeps both sizes in every dimension. */
                    const int64_t B = 1 + (si + hi + di + mk) % 2;
                    problem p;
                    float *ref = NULL;
                    bool ok = problem_init(&p, B, seqs[si], heads[hi], dims[di], (mask_kind)mk);
                    const int64_t n = B * seqs[si] * heads[hi] * dims[di];
                    ok = ok && (ref = af_malloc((size_t)n * sizeof(float)));
                    af_attention_desc d = problem_desc(&p, ref, AF_ISA_SCALAR);
                    ok = ok && af_attention_ref(&d) == AF_OK;
                    ok = ok && check_levels(&p, ref, pool, "fast vs ref");
                    cases++;
                    failed += !ok;
                    af_free(ref);
                    problem_free(&p);
                }
    CHECK_EQ_INT(failed, 0);
    CHECK_EQ_INT(cases, 162);
    af_threadpool_free(pool);
}

/* The reference twin and the fast kernels against the exported op chain. */
AF_TEST(attention_matches_unfused_ops) {
    static const int64_t shapes[][5] = {
        /* B, S, H, D, mask */
        {1, 1, 1, 8, MASK_KEYS},  {2, 7, 2, 8, MASK_KEYS},  {1, 16, 1, 32, MASK_NONE}, {2, 32, 2, 32, MASK_ROWS},
        {1, 128, 12, 64, MASK_KEYS}, {2, 129, 2, 64, MASK_KEYS}, {1, 129, 12, 32, MASK_ROWS}, {2, 16, 12, 8, MASK_NONE},
    };
    af_threadpool *pool = NULL;
    CHECK(af_threadpool_create(2, &pool) == AF_OK);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        problem p;
        const int64_t B = shapes[s][0], S = shapes[s][1], H = shapes[s][2], D = shapes[s][3], n = B * S * H * D;
        float *want = af_malloc((size_t)n * sizeof(float)), *ref = af_malloc((size_t)n * sizeof(float));
        CHECK(problem_init(&p, B, S, H, D, (mask_kind)shapes[s][4]) && want && ref);
        CHECK(unfused(&p, want) == AF_OK);
        af_attention_desc d = problem_desc(&p, ref, AF_ISA_SCALAR);
        CHECK(af_attention_ref(&d) == AF_OK);
        CHECK_EQ_INT(count_off(ref, want, n, "ref vs unfused"), 0);
        CHECK(check_levels(&p, want, pool, "fast vs unfused"));
        af_free(want);
        af_free(ref);
        problem_free(&p);
    }
    af_threadpool_free(pool);
}

/* torch masks with finfo.min, not -inf: a row with every key masked is uniform (the mean of V),
 * never NaN; -inf in every key gives NaN, as ONNX Softmax does. */
AF_TEST(attention_fully_masked_rows) {
    problem p;
    const int64_t S = 19, H = 2, D = 40, n = S * H * D;
    CHECK(problem_init(&p, 1, S, H, D, MASK_KEYS));
    float *out = af_malloc((size_t)n * sizeof(float));
    CHECK(out != NULL);
    for (int64_t j = 0; j < S; j++) p.mask[j] = FINFO_MIN;
    for (int isa = -1; isa <= (int)af_cpu_info_get()->isa_max; isa++) {
        af_attention_desc d = problem_desc(&p, out, isa < 0 ? AF_ISA_SCALAR : (af_isa)isa);
        CHECK((isa < 0 ? af_attention_ref(&d) : run_fast(&d, NULL)) == AF_OK);
        int64_t bad = 0;
        for (int64_t i = 0; i < S; i++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t e = 0; e < D; e++) {
                    double mean = 0;
                    for (int64_t j = 0; j < S; j++) mean += p.v[(j * H + h) * D + e];
                    mean /= (double)S;
                    const double got = out[(i * H + h) * D + e];
                    bad += !(fabs(got - mean) <= ATOL + RTOL * fabs(mean));
                }
        CHECK_EQ_INT(bad, 0);
    }
    for (int64_t j = 0; j < S; j++) p.mask[j] = -INFINITY;
    for (int isa = -1; isa <= (int)af_cpu_info_get()->isa_max; isa++) {
        af_attention_desc d = problem_desc(&p, out, isa < 0 ? AF_ISA_SCALAR : (af_isa)isa);
        CHECK((isa < 0 ? af_attention_ref(&d) : run_fast(&d, NULL)) == AF_OK);
        CHECK(isnan(out[0]) && isnan(out[n - 1]));
    }
    af_free(out);
    problem_free(&p);
}

/* Strided operands: q, k, v interleaved in one [B, S, 3*H*D] buffer (a fused QKV projection), ctx
 * into rows wider than H*D (the padding must stay untouched); the [B, H, S, D] layout; distinct
 * S_q and S_k; a [B, H, 1, S] mask; one K/V head shared by all heads (head stride 0); and ctx
 * written over q in place. */
AF_TEST(attention_strided_layouts) {
    const int64_t B = 2, Sq = 23, Sk = 37, H = 3, D = 24, HD = H * D, pad = 5;
    float *qkv = af_malloc((size_t)(B * Sk * 3 * HD) * sizeof(float));
    float *mask = af_malloc((size_t)(B * H * Sk) * sizeof(float));
    float *out = af_malloc((size_t)(B * Sq * (HD + pad)) * sizeof(float));
    float *ref = af_malloc((size_t)(B * Sq * (HD + pad)) * sizeof(float));
    float *qcopy = af_malloc((size_t)(B * Sk * 3 * HD) * sizeof(float));
    CHECK(qkv && mask && out && ref && qcopy);
    if (!qkv || !mask || !out || !ref || !qcopy) goto done;
    rng_state = 12345;
    for (int64_t i = 0; i < B * Sk * 3 * HD; i++) qkv[i] = frand(-2.0f, 2.0f);
    for (int64_t i = 0; i < B * H * Sk; i++) mask[i] = frand(0.0f, 1.0f) < 0.3f ? FINFO_MIN : frand(-1.0f, 1.0f);

    for (int variant = 0; variant < 3; variant++) {
        af_attention_desc d = af_attention_desc_packed(B, Sq, Sk, H, D);
        d.q = qkv;
        d.k = qkv + HD;
        d.v = qkv + 2 * HD;
        d.q_row_stride = d.k_row_stride = d.v_row_stride = 3 * HD;
        d.q_batch_stride = d.k_batch_stride = d.v_batch_stride = Sk * 3 * HD;
        d.out_row_stride = HD + pad;
        d.out_batch_stride = Sq * (HD + pad);
        d.mask = mask;
        d.mask_batch_stride = H * Sk;
        d.mask_head_stride = Sk;
        if (variant == 1) { /* [B, H, S, D]: heads outermost */
            d.q_head_stride = d.k_head_stride = d.v_head_stride = Sk * D;
            d.q_row_stride = d.k_row_stride = d.v_row_stride = D;
            d.q_batch_stride = d.k_batch_stride = d.v_batch_stride = H * Sk * D;
        } else if (variant == 2) { /* multi-query: one K/V head */
            d.k_head_stride = d.v_head_stride = 0;
            d.mask_head_stride = 0;
        }
        d.scale = 0.3f;
        for (int64_t i = 0; i < B * Sq * (HD + pad); i++) ref[i] = out[i] = 7.0f;
        d.out = ref;
        CHECK(af_attention_ref(&d) == AF_OK);
        for (int isa = 0; isa <= (int)af_cpu_info_get()->isa_max; isa++) {
            d.isa = (af_isa)isa;
            d.out = out;
            CHECK(run_fast(&d, NULL) == AF_OK);
            CHECK_EQ_INT(count_off(out, ref, B * Sq * (HD + pad), "strided"), 0); /* padding: 7 in both */
        }
    }

    /* In place: ctx over q, with q's strides. */
    for (int isa = 0; isa <= (int)af_cpu_info_get()->isa_max; isa++) {
        memcpy(qcopy, qkv, (size_t)(B * Sk * 3 * HD) * sizeof(float));
        af_attention_desc d = af_attention_desc_packed(B, Sq, Sk, H, D);
        d.q = qcopy;
        d.k = qcopy + HD;
        d.v = qcopy + 2 * HD;
        d.q_row_stride = d.k_row_stride = d.v_row_stride = d.out_row_stride = 3 * HD;
        d.q_batch_stride = d.k_batch_stride = d.v_batch_stride = d.out_batch_stride = Sk * 3 * HD;
        d.out = ref;
        d.out_row_stride = HD;
        d.out_batch_stride = Sq * HD;
        CHECK(af_attention_ref(&d) == AF_OK);
        d.out = qcopy;
        d.out_row_stride = 3 * HD;
        d.out_batch_stride = Sk * 3 * HD;
        d.isa = (af_isa)isa;
        CHECK(run_fast(&d, NULL) == AF_OK);
        int64_t bad = 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < Sq; i++)
                bad += count_off(qcopy + (b * Sk + i) * 3 * HD, ref + (b * Sq + i) * HD, HD, "in place");
        CHECK_EQ_INT(bad, 0);
    }
done:
    af_free(qkv);
    af_free(mask);
    af_free(out);
    af_free(ref);
    af_free(qcopy);
}

AF_TEST(attention_arguments) {
    problem p;
    CHECK(problem_init(&p, 1, 9, 2, 16, MASK_NONE));
    float out[9 * 2 * 16];
    af_attention_desc d = problem_desc(&p, out, af_cpu_isa());
    const size_t need = af_attention_workspace_size(&d, 2);
    CHECK(need > af_attention_workspace_size(&d, 1));
    /* A plan sizes the scratch before any tensor exists: the size needs no pointers (it was 0
     * without them, and every fused attention step allocated its own scratch per run). */
    af_attention_desc sized = d;
    sized.q = sized.k = sized.v = NULL;
    sized.out = NULL;
    CHECK_EQ_INT((long long)af_attention_workspace_size(&sized, 2), (long long)need);
    char *ws = af_malloc(need + 1);
    CHECK(ws != NULL);
    af_threadpool *pool = NULL;
    CHECK(af_threadpool_create(2, &pool) == AF_OK);
    d.workspace = ws + 1; /* any alignment */
    d.workspace_size = need;
    CHECK(af_attention_run(&d, pool) == AF_OK);
    d.workspace_size = need - 1;
    CHECK(af_attention_run(&d, pool) == AF_ERR_INVALID_ARGUMENT);
    d.workspace = NULL;
    d.workspace_size = need;
    CHECK(af_attention_run(&d, pool) == AF_ERR_INVALID_ARGUMENT);
    d.workspace = ws;
    d.k = NULL;
    CHECK(af_attention_run(&d, pool) == AF_ERR_INVALID_ARGUMENT);
    CHECK(af_attention_ref(&d) == AF_ERR_INVALID_ARGUMENT);
    d.k = p.k;
    d.v_row_stride = -1;
    CHECK(af_attention_run(&d, pool) == AF_ERR_INVALID_ARGUMENT);
    d.v_row_stride = 32;
    d.heads = -1;
    CHECK(af_attention_run(&d, pool) == AF_ERR_INVALID_ARGUMENT);
    CHECK(af_attention_run(NULL, pool) == AF_ERR_INVALID_ARGUMENT);
    /* Nothing to compute: OK without a workspace. */
    d.heads = 0;
    d.workspace = NULL;
    CHECK(af_attention_run(&d, pool) == AF_OK);
    CHECK_EQ_INT(af_attention_workspace_size(&d, 2), 0);
    /* No keys: ctx is zero (MatMul over an empty axis). */
    d.heads = 2;
    d.seq_k = 0;
    for (int i = 0; i < 9 * 2 * 16; i++) out[i] = 1.0f;
    CHECK(af_attention_run(&d, pool) == AF_OK);
    CHECK(out[0] == 0.0f && out[9 * 2 * 16 - 1] == 0.0f);
    CHECK(strstr(af_attention_name(&d), "f32_attention__") != NULL);
    /* The reference allocates; it reports running out. */
    d.seq_k = 9;
    af_alloc_fail_after(0);
    CHECK(af_attention_ref(&d) == AF_ERR_OUT_OF_MEMORY);
    af_alloc_fail_after(-1);
    af_threadpool_free(pool);
    af_free(ws);
    problem_free(&p);
}

/* Scores in the hundreds and thousands (a sharp softmax), where exp would overflow without the
 * row max subtracted. Q and K are multiples of 1/8 and the scale a power of 2, so every score is
 * exact in float and the comparison measures the softmax, not the conditioning of a dot product. */
AF_TEST(attention_large_scores) {
    problem p;
    const int64_t S = 33, H = 2, D = 32, n = S * H * D;
    CHECK(problem_init(&p, 1, S, H, D, MASK_KEYS));
    float *out = af_malloc((size_t)n * sizeof(float)), *ref = af_malloc((size_t)n * sizeof(float));
    CHECK(out && ref);
    for (int64_t i = 0; i < n; i++) {
        p.q[i] = roundf(p.q[i] * 8.0f) / 8.0f;
        p.k[i] = roundf(p.k[i] * 8.0f) / 8.0f;
    }
    af_attention_desc d = problem_desc(&p, ref, AF_ISA_SCALAR);
    d.scale = 16.0f;
    CHECK(af_attention_ref(&d) == AF_OK);
    for (int isa = 0; isa <= (int)af_cpu_info_get()->isa_max; isa++) {
        d.isa = (af_isa)isa;
        d.out = out;
        CHECK(run_fast(&d, NULL) == AF_OK);
        CHECK_EQ_INT(count_off(out, ref, n, "large scores"), 0);
    }
    af_free(out);
    af_free(ref);
    problem_free(&p);
}
