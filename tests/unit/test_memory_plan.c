/* Memory plan: values alive at the same time never share bytes (except an elementwise output
 * written in place over its input's slot, a Reshape-like view of its input kept in it, or a
 * Concat's inputs inside its output), the arena stays close to the sum-of-live-bytes lower bound
 * on the real-model fixtures, and in-place reuse shrinks the arena without changing any output. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fusion/engine.h"
#include "ir/model.h"
#include "onnx_build.h"
#include "runtime/executor.h"
#include "runtime/memory_plan.h"
#include "runtime/plan.h"
#include "unit.h"
#include "util/alloc.h"

static const char *const fixtures[] = {"resnet_small", "mobilenet_v3_small", "bert_tiny", "resnet_small_bn_op11",
                                       "squeezenet_small", "shufflenet_small"};

/* The first value of v's in-place chain. */
static int chain_root(const af_lifetimes *lt, int v) {
    while (lt->alias[v] >= 0) v = lt->alias[v];
    return v;
}

/* Whether value a lies inside value b's bytes (a Concat's input, or its in-place chain, inside
 * the output's slot), at any depth. */
static bool inside(const af_lifetimes *lt, int a, int b) {
    for (int x = chain_root(lt, a); lt->within && lt->within[x] >= 0; x = chain_root(lt, lt->within[x]))
        if (chain_root(lt, lt->within[x]) == chain_root(lt, b)) return true;
    return false;
}

/* Whether v is a Concat's output held, as its inputs are, by another value (a dense block's
 * earlier Concat inside the last one): a view of its parts, which must then be laid out one after
 * another from v's offset. */
static bool concat_view(const af_graph *g, const af_memory_plan *p, const af_lifetimes *lt, int v) {
    const int pr = g->values[v].producer;
    if (!lt->within || lt->within[v] < 0 || pr < 0 || g->nodes[pr].op != AF_OP_CONCAT) return false;
    const af_node *n = &g->nodes[pr];
    int64_t off = p->offset[v];
    for (int k = 0; k < n->n_inputs; k++) {
        const int u = n->inputs[k];
        if (lt->within[chain_root(lt, u)] != lt->within[v] || p->offset[u] != off) return false;
        off += (int64_t)p->size[u];
    }
    return off == p->offset[v] + (int64_t)p->size[v];
}

/* Checks every pair of planned values whose lifetimes overlap for overlapping byte ranges; values
 * of one in-place chain share their slot by design and must sit at the same offset, a value
 * inside another (see inside) must lie within its bytes, and a Concat's view over its parts
 * (concat_view) may overlap other values held where it is. */
static int count_overlaps(const af_graph *g, const af_memory_plan *p, const af_lifetimes *lt) {
    int bad = 0;
    for (int a = 0; a < g->n_values; a++) {
        if (p->offset[a] < 0) continue;
        int fa = lt->first[a], la = lt->last[a] < fa ? fa : lt->last[a];
        for (int b = a + 1; b < g->n_values; b++) {
            if (p->offset[b] < 0) continue;
            int fb = lt->first[b], lb = lt->last[b] < fb ? fb : lt->last[b];
            if (la < fb || lb < fa) continue;
            if (chain_root(lt, a) == chain_root(lt, b) && p->offset[a] == p->offset[b]) continue;
            const int wa = lt->within ? lt->within[chain_root(lt, a)] : -1;
            const int wb = lt->within ? lt->within[chain_root(lt, b)] : -1;
            if (wa >= 0 && wa == wb && (concat_view(g, p, lt, a) || concat_view(g, p, lt, b))) continue;
            int64_t ao = p->offset[a], bo = p->offset[b];
            if (inside(lt, a, b) || inside(lt, b, a)) {
                const bool a_in = inside(lt, a, b);
                const int64_t io = a_in ? ao : bo, oo = a_in ? bo : ao;
                const size_t isz = p->size[a_in ? a : b], osz = p->size[a_in ? b : a];
                bad += io < oo || io + (int64_t)isz > oo + (int64_t)osz;
                continue;
            }
            if (ao < bo + (int64_t)p->size[b] && bo < ao + (int64_t)p->size[a]) bad++;
        }
    }
    return bad;
}

AF_TEST(memory_plan_is_valid_and_near_the_live_bound_on_fixtures) {
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/models/%s/model.onnx", af_test_dir(), fixtures[i]);
        af_model *m = NULL;
        af_error err = {0};
        af_status st = af_model_load(path, NULL, &m, &err);
        if (st == AF_ERR_UNSUPPORTED) {
            printf("  skipped %s: %s\n", fixtures[i], err.message);
            continue;
        }
        CHECK(st == AF_OK);
        if (st != AF_OK) continue;
        const af_graph *g = m->graph;
        af_lifetimes lt;
        CHECK(af_lifetimes_compute(g, NULL, &lt, &err) == AF_OK);
        af_memory_plan plan;
        CHECK(af_memory_plan_build(g, &lt, &plan, &err) == AF_OK);
        CHECK_EQ_INT(count_overlaps(g, &plan, &lt), 0);
        CHECK(plan.arena_bytes >= plan.live_bound);
        /* The greedy placement must stay within 10% of the bound (issue #3's target). */
        CHECK(plan.arena_bytes <= plan.live_bound + plan.live_bound / 10);
        CHECK(plan.live_bound <= plan.live_bound_unshared);
        printf("  %s: arena %zu bytes, live bound %zu (%.1f%%), %d values in place (%zu bytes), unshared bound %zu\n",
               fixtures[i], plan.arena_bytes, plan.live_bound,
               plan.live_bound ? 100.0 * (double)plan.arena_bytes / (double)plan.live_bound : 0, plan.n_inplace,
               plan.inplace_bytes, plan.live_bound_unshared);
        af_memory_plan_free(&plan);
        af_lifetimes_free(&lt);
        af_model_free(m);
    }
}

/* Runs g's unfused plan with memory plan mp; output 0 into *out. */
static af_status run_with_plan(const af_graph *g, const af_exec_plan *plan, const af_lifetimes *lt,
                               const af_memory_plan *mp, const char *dir, af_tensor *out) {
    af_error err = {0};
    uint8_t *arena = mp->arena_bytes ? af_malloc_aligned(mp->arena_bytes) : NULL;
    void *ws = plan->workspace_bytes ? af_malloc_aligned(plan->workspace_bytes) : NULL;
    if (arena) memset(arena, 0xA5, mp->arena_bytes); /* stale bytes must never leak into a result */
    af_exec e;
    af_status st = af_exec_init(&e, g, NULL, &err);
    if (st != AF_OK) return st;
    e.plan = plan, e.lifetimes = lt, e.memory = mp, e.arena = arena, e.workspace = ws;
    af_test_tensors in = {0};
    if (!af_test_read_set(dir, "input", &in) || in.n != g->n_inputs) {
        st = AF_ERR_INVALID_ARGUMENT;
        snprintf(err.message, sizeof err.message, "%d test inputs for %d graph inputs", in.n, g->n_inputs);
    }
    for (int k = 0; st == AF_OK && k < in.n; k++) e.env[g->inputs[k]] = in.t[k];
    if (st == AF_OK) st = af_exec_run(&e, &err);
    if (st != AF_OK) printf("  run failed: %s\n", err.message);
    if (st == AF_OK) st = af_exec_take(&e, g->outputs[0], out, &err);
    af_exec_release(&e);
    af_test_tensors_free(&in);
    af_free_aligned(arena);
    af_free_aligned(ws);
    return st;
}

/* Fixture `name` loaded (its directory written to dir), or NULL. */
static af_model *load_fixture(const char *name, char *dir, size_t dir_size) {
    char path[1100];
    snprintf(dir, dir_size, "%s/models/%s", af_test_dir(), name);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    af_model *m = NULL;
    af_error err = {0};
    CHECK(af_model_load(path, NULL, &m, &err) == AF_OK);
    return m;
}

/* g's output 0 from plan on memory plan a and on memory plan b: the same bits. */
static void check_same_output(const af_graph *g, const af_exec_plan *plan, const af_lifetimes *lt,
                              const af_memory_plan *a, const af_memory_plan *b, const char *dir) {
    af_tensor x = {0}, y = {0};
    CHECK(run_with_plan(g, plan, lt, a, dir, &x) == AF_OK);
    CHECK(run_with_plan(g, plan, lt, b, dir, &y) == AF_OK);
    CHECK(x.nbytes == y.nbytes && x.nbytes > 0);
    if (x.nbytes == y.nbytes && x.data && y.data) CHECK(memcmp(x.data, y.data, x.nbytes) == 0);
    af_tensor_free_data(&x);
    af_tensor_free_data(&y);
}

AF_TEST(memory_plan_reuses_elementwise_inputs_in_place) {
    const char *names[] = {"resnet_small", "mobilenet_v3_small", "bert_tiny"};
    for (size_t f = 0; f < sizeof names / sizeof names[0]; f++) {
        char dir[1024];
        af_model *m = load_fixture(names[f], dir, sizeof dir);
        if (!m) continue;
        af_error err = {0};
        const af_graph *g = m->graph;
        af_exec_plan plan;
        const af_kernel_choice kernels = {.isa = af_cpu_isa(), .n_threads = 1};
        CHECK(af_exec_plan_unfused(g, &kernels, false, NULL, &plan, &err) == AF_OK);
        af_lifetimes lt;
        CHECK(af_lifetimes_compute(g, &plan, &lt, &err) == AF_OK);
        af_memory_plan shared, apart;
        CHECK(af_memory_plan_build(g, &lt, &shared, &err) == AF_OK);
        /* The same lifetimes with every in-place candidate dropped. */
        int *alias = lt.alias;
        lt.alias = NULL;
        CHECK(af_memory_plan_build(g, &lt, &apart, &err) == AF_OK);
        lt.alias = alias;
        CHECK(shared.n_inplace > 0);
        CHECK_EQ_INT(apart.n_inplace, 0);
        CHECK(shared.arena_bytes <= apart.arena_bytes);
        CHECK(shared.live_bound < shared.live_bound_unshared);
        CHECK_EQ_INT(count_overlaps(g, &shared, &lt), 0);
        /* Each in-place value shares its source's offset, and its source is read last by the
         * value's producer. BERT's unfused Reshapes keep their input's bytes in its slot. */
        int views = 0;
        for (int v = 0; v < g->n_values; v++) {
            int src = lt.alias[v];
            if (src < 0 || shared.offset[v] < 0) continue;
            CHECK_EQ_INT(shared.offset[v], shared.offset[src]);
            CHECK_EQ_INT(lt.last[src], lt.first[v]);
            const af_op op = g->values[v].producer >= 0 ? g->nodes[g->values[v].producer].op : AF_OP_COUNT;
            views += op == AF_OP_RESHAPE || op == AF_OP_FLATTEN || op == AF_OP_SQUEEZE || op == AF_OP_UNSQUEEZE;
        }
        if (!strcmp(names[f], "bert_tiny")) CHECK(views > 0);
        printf("  %s: %d values in place, arena %zu -> %zu bytes, bound %zu -> %zu\n", names[f], shared.n_inplace,
               apart.arena_bytes, shared.arena_bytes, apart.live_bound, shared.live_bound);
        check_same_output(g, &plan, &lt, &shared, &apart, dir);
        af_memory_plan_free(&shared);
        af_memory_plan_free(&apart);
        af_lifetimes_free(&lt);
        af_exec_plan_free(&plan);
        af_model_free(m);
    }
}

/* A fused step's output over the residual its epilogue adds: on the default fused plans of the
 * CNN fixtures (conv + residual Add steps), with a microkernel that applies the residual in
 * registers (AVX2, AVX-512), some steps write over their residual, and the outputs are the same
 * bits as with every such step given its own slot. */
AF_TEST(memory_plan_writes_fused_outputs_over_their_residual) {
    const char *names[] = {"resnet_small", "mobilenet_v3_small"};
    for (size_t f = 0; f < sizeof names / sizeof names[0]; f++) {
        char dir[1024];
        af_model *m = load_fixture(names[f], dir, sizeof dir);
        if (!m) continue;
        af_error err = {0};
        const af_graph *g = m->graph;
        af_fusion_config cfg;
        af_fusion_config_default(&cfg);
        af_fusion_result res;
        af_exec_plan plan;
        CHECK(af_fusion_plan(g, &cfg, af_cpu_isa(), 1, NULL, &plan, &res, &err) == AF_OK);
        af_lifetimes lt;
        CHECK(af_lifetimes_compute(g, &plan, &lt, &err) == AF_OK);
        /* The same lifetimes with the fused steps' residual aliases dropped. */
        int *apart_alias = af_malloc((size_t)g->n_values * sizeof *apart_alias);
        memcpy(apart_alias, lt.alias, (size_t)g->n_values * sizeof *apart_alias);
        int over = 0;
        for (int i = 0; i < plan.n_steps; i++) {
            const af_step *s = &plan.steps[i];
            if (s->output < 0 || lt.alias[s->output] < 0) continue;
            CHECK_EQ_INT(s->n_residuals, 1);
            CHECK_EQ_INT(lt.alias[s->output], s->residual_value[0]);
            CHECK_EQ_INT(lt.last[s->residual_value[0]], i);
            apart_alias[s->output] = -1;
            over++;
        }
        if (af_cpu_isa() != AF_ISA_SCALAR) CHECK(over > 0);
        af_memory_plan shared, apart;
        CHECK(af_memory_plan_build(g, &lt, &shared, &err) == AF_OK);
        int *alias = lt.alias;
        lt.alias = apart_alias;
        CHECK(af_memory_plan_build(g, &lt, &apart, &err) == AF_OK);
        lt.alias = alias;
        CHECK_EQ_INT(count_overlaps(g, &shared, &lt), 0);
        CHECK_EQ_INT(shared.n_inplace, apart.n_inplace + over);
        printf("  %s: %d fused outputs over their residual, arena %zu -> %zu bytes\n", names[f], over,
               apart.arena_bytes, shared.arena_bytes);
        check_same_output(g, &plan, &lt, &shared, &apart, dir);
        af_memory_plan_free(&shared);
        af_memory_plan_free(&apart);
        af_free(apart_alias);
        af_lifetimes_free(&lt);
        af_exec_plan_free(&plan);
        af_fusion_result_free(&res);
        af_model_free(m);
    }
}

/* A model's unfused plan with its lifetimes and memory plan, and a run of it on that plan's arena:
 * the tests below. */
typedef struct planned {
    af_exec_plan plan;
    af_lifetimes lt;
    af_memory_plan mp;
} planned;

static bool plan_unfused(const af_graph *g, planned *p) {
    af_error err = {0};
    const af_kernel_choice kernels = {.isa = af_cpu_isa(), .n_threads = 1};
    memset(p, 0, sizeof *p);
    return af_exec_plan_unfused(g, &kernels, false, NULL, &p->plan, &err) == AF_OK &&
           af_lifetimes_compute(g, &p->plan, &p->lt, &err) == AF_OK &&
           af_memory_plan_build(g, &p->lt, &p->mp, &err) == AF_OK;
}

static void planned_free(planned *p) {
    af_memory_plan_free(&p->mp);
    af_lifetimes_free(&p->lt);
    af_exec_plan_free(&p->plan);
}

/* Output 0 of g for its one input x (the caller's bytes), computed on p's arena, into *y. */
static bool run_on_arena(const af_graph *g, const planned *p, af_tensor x, af_tensor *y) {
    af_error err = {0};
    af_exec e;
    size_t scratch = 64; /* the fast kernels' (convolutions') workspace, as a session plans it */
    for (int i = 0; i < p->plan.n_steps; i++)
        if (p->plan.steps[i].kernel.workspace_bytes > scratch) scratch = p->plan.steps[i].kernel.workspace_bytes;
    uint8_t *arena = af_malloc_aligned(p->mp.arena_bytes), *workspace = af_malloc_aligned(scratch);
    bool ok = arena && workspace && af_exec_init(&e, g, NULL, &err) == AF_OK;
    if (!ok) {
        af_free_aligned(arena);
        af_free_aligned(workspace);
        return false;
    }
    e.plan = &p->plan, e.lifetimes = &p->lt, e.memory = &p->mp, e.arena = arena, e.workspace = workspace;
    e.env[g->inputs[0]] = x;
    ok = af_exec_run(&e, &err) == AF_OK && af_exec_take(&e, g->outputs[0], y, &err) == AF_OK;
    e.env[g->inputs[0]].data = NULL; /* the caller's */
    af_exec_release(&e);
    af_free_aligned(arena);
    af_free_aligned(workspace);
    return ok;
}

/* The memory plan of p's lifetimes with nothing inside another value (every Concat, Slice and
 * Gather copying), into *apart. */
static bool plan_apart(const af_graph *g, planned *p, af_memory_plan *apart) {
    int *w = p->lt.within;
    p->lt.within = NULL;
    const bool ok = af_memory_plan_build(g, &p->lt, apart, NULL) == AF_OK;
    p->lt.within = w;
    return ok;
}

/* A Concat's inputs inside its output: on SqueezeNet's fire modules (two convs concatenated by
 * channels, each through a Relu written over the conv's output in place), each expand conv's
 * output sits at its part of the Concat's output, the arena is no larger, and the outputs are
 * the same bits as with every input in a slot of its own (the Concat copying). */
AF_TEST(memory_plan_places_concat_inputs_inside_the_output) {
    char dir[1024];
    af_model *m = load_fixture("squeezenet_small", dir, sizeof dir);
    if (!m) return;
    const af_graph *g = m->graph;
    planned p;
    af_memory_plan apart;
    CHECK(plan_unfused(g, &p) && plan_apart(g, &p, &apart));
    const af_lifetimes *lt = &p.lt;
    const af_memory_plan *within = &p.mp;
    int inside_count = 0, concats = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const af_node *n = &g->nodes[i];
        if (n->op != AF_OP_CONCAT) continue;
        concats++;
        int64_t off = 0;
        for (int k = 0; k < n->n_inputs; k++) {
            const int v = n->inputs[k];
            CHECK_EQ_INT(lt->within[chain_root(lt, v)], n->outputs[0]);
            CHECK_EQ_INT(within->offset[v], within->offset[n->outputs[0]] + off);
            off += af_tensor_numel(&g->values[v].t) * 4;
            inside_count++;
        }
    }
    CHECK_EQ_INT(concats, 8);
    CHECK_EQ_INT(inside_count, 16);
    CHECK_EQ_INT(count_overlaps(g, within, lt), 0);
    CHECK(within->arena_bytes <= apart.arena_bytes);
    printf("  squeezenet_small: %d Concat inputs inside their outputs, arena %zu -> %zu bytes\n", inside_count,
           apart.arena_bytes, within->arena_bytes);
    check_same_output(g, &p.plan, lt, within, &apart, dir);
    af_memory_plan_free(&apart);
    planned_free(&p);
    af_model_free(m);
}

/* A Slice's output inside its input: ShuffleNetV2's channel splits (torch.chunk into two halves of
 * the channels, whose input is often itself a Reshape kept in its source's slot) read their
 * halves where the input has them on the unfused plan, and the outputs are the same bits as with
 * every Slice copying. */
AF_TEST(memory_plan_places_slices_inside_their_input) {
    char dir[1024];
    af_model *m = load_fixture("shufflenet_small", dir, sizeof dir);
    if (!m) return;
    const af_graph *g = m->graph;
    planned p;
    af_memory_plan apart;
    CHECK(plan_unfused(g, &p) && plan_apart(g, &p, &apart));
    const af_lifetimes *lt = &p.lt;
    const af_memory_plan *within = &p.mp;
    int slices = 0, inside_input = 0, of_views = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const af_node *n = &g->nodes[i];
        if (n->op != AF_OP_SLICE) continue;
        slices++;
        const int x = n->inputs[0], v = n->outputs[0];
        if (lt->within[v] != x) continue;
        inside_input++;
        CHECK_EQ_INT(within->offset[v], within->offset[x] + lt->within_offset[v]);
        CHECK(lt->within_offset[v] == 0 || lt->within_offset[v] * 2 == (int64_t)af_tensor_numel(&g->values[x].t) * 4);
        of_views += lt->alias[x] >= 0; /* x kept in its source's slot (a Reshape) */
    }
    CHECK_EQ_INT(slices, 26);
    CHECK_EQ_INT(inside_input, 26);
    CHECK(of_views > 0);
    CHECK_EQ_INT(count_overlaps(g, within, lt), 0);
    printf("  shufflenet_small: %d of %d Slices inside their input (%d of them of a view), arena %zu -> %zu bytes\n",
           inside_input, slices, of_views, apart.arena_bytes, within->arena_bytes);
    check_same_output(g, &p.plan, lt, within, &apart, dir);
    af_memory_plan_free(&apart);
    planned_free(&p);
    af_model_free(m);
}

/* The model b describes, loaded (b freed), or NULL. */
static af_model *load_built(ob_model *b) {
    af_error err = {0};
    af_model *m = ob_load(b, &err);
    ob_free(b);
    CHECK(m != NULL);
    return m;
}

/* A Dropout without its mask (inference: the identity) keeps its input's slot, as Reshape does: in
 * Relu -> Dropout (mask named, read by nothing) -> Relu -> Exp the Dropout's output shares the
 * first Relu's offset, and the model's output is exp(relu(x)) on the arena's bytes. */
AF_TEST(memory_plan_keeps_a_maskless_dropout_in_its_input) {
    ob_model *b = ob_new(13);
    const char *x = ob_input(b, 2, (int64_t[]){4, 40});
    const char *r = ob_node1(b, "Relu", x);
    ob_node1(b, "Dropout", r);
    const char *outs[2];
    ob_node_outputs(b, 2, 0, outs);
    ob_output(b, ob_node1(b, "Exp", ob_node1(b, "Relu", outs[0])));
    af_model *m = load_built(b);
    if (!m) return;
    const af_graph *g = m->graph;
    planned p;
    CHECK(plan_unfused(g, &p));
    int dropouts = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const af_node *n = &g->nodes[i];
        if (n->op != AF_OP_DROPOUT) continue;
        dropouts++;
        CHECK_EQ_INT(p.lt.alias[n->outputs[0]], n->inputs[0]);
        CHECK(p.mp.offset[n->outputs[0]] >= 0);
        CHECK_EQ_INT(p.mp.offset[n->outputs[0]], p.mp.offset[n->inputs[0]]);
    }
    CHECK_EQ_INT(dropouts, 1);
    float xd[160];
    for (int i = 0; i < 160; i++) xd[i] = (float)((i * 7) % 23) / 8.0f - 1.5f;
    af_tensor y = {0};
    CHECK(run_on_arena(g, &p, (af_tensor){.dtype = AF_DTYPE_FLOAT, .rank = 2, .dims = {4, 40}, .data = xd,
                                          .nbytes = sizeof xd},
                       &y));
    int off = 0;
    for (int i = 0; y.data && i < 160; i++) {
        const float want = expf(xd[i] > 0 ? xd[i] : 0);
        off += fabsf(((float *)y.data)[i] - want) > 1e-6f * want;
    }
    CHECK(y.data != NULL);
    CHECK_EQ_INT(off, 0);
    af_tensor_free_data(&y);
    planned_free(&p);
    af_model_free(m);
}

/* Elu, Selu, Floor, Ceil and Round read element i before writing it, in their fast and reference
 * kernels alike: each written in place over the Relu before it (Relu -> OP -> Exp), and the output
 * is exp(OP(relu(x))) computed on the arena's bytes. */
AF_TEST(memory_plan_writes_rounding_and_elu_ops_in_place) {
    static const char *const ops[] = {"Elu", "Selu", "Floor", "Ceil", "Round"};
    float xd[160];
    for (int i = 0; i < 160; i++) xd[i] = (float)((i * 7) % 23) / 4.0f - 1.5f;
    for (int o = 0; o < 5; o++) {
        ob_model *b = ob_new(13);
        const char *r = ob_node1(b, "Relu", ob_input(b, 2, (int64_t[]){4, 40}));
        const char *v = ob_node1(b, ops[o], r);
        ob_output(b, ob_node1(b, "Exp", v));
        af_model *m = load_built(b);
        if (!m) return;
        const af_graph *g = m->graph;
        planned p;
        CHECK(plan_unfused(g, &p));
        int in_place = 0;
        for (int i = 0; i < g->n_nodes; i++) {
            const af_node *n = &g->nodes[i];
            if (strcmp(n->op_type, ops[o])) continue;
            in_place += p.lt.alias[n->outputs[0]] == n->inputs[0] &&
                        p.mp.offset[n->outputs[0]] == p.mp.offset[n->inputs[0]] && p.mp.offset[n->inputs[0]] >= 0;
        }
        CHECK_EQ_INT(in_place, 1);
        af_tensor y = {0};
        CHECK(run_on_arena(g, &p, (af_tensor){.dtype = AF_DTYPE_FLOAT, .rank = 2, .dims = {4, 40}, .data = xd,
                                              .nbytes = sizeof xd},
                           &y));
        int off = 0;
        for (int i = 0; y.data && i < 160; i++) {
            const double t = xd[i] > 0 ? xd[i] : 0; /* Elu and Selu are x and 1.0507 x at t >= 0 */
            const double u = o == 0 ? t : o == 1 ? 1.05070102214813232421875 * t : o == 2 ? floor(t) : o == 3 ? ceil(t)
                                                                                              : nearbyint(t);
            off += fabs(((float *)y.data)[i] - exp(u)) > 1e-5 * exp(u);
        }
        CHECK(y.data != NULL);
        CHECK_EQ_INT(off, 0);
        af_tensor_free_data(&y);
        planned_free(&p);
        af_model_free(m);
    }
}

/* A Gather of one constant index along the outermost axis (Swin's q, k, v = qkv[0], qkv[1],
 * qkv[2]) reads its run where the input has it: Relu -> Gather(1), Gather(-1) -> Transpose ->
 * Sub; both Gathers lie inside the Relu's output at their runs, and the output is r[1]^T - r[2]^T
 * computed on the arena's bytes. */
AF_TEST(memory_plan_places_a_gathered_run_inside_its_input) {
    ob_model *b = ob_new(13);
    const char *x = ob_input(b, 3, (int64_t[]){3, 4, 16});
    const char *r = ob_node1(b, "Relu", x);
    const char *g1 = ob_node(b, "Gather", 2, (const char *[]){r, ob_const_i64(b, 0, NULL, (int64_t[]){1})});
    const char *g2 = ob_node(b, "Gather", 2, (const char *[]){r, ob_const_i64(b, 0, NULL, (int64_t[]){-1})});
    /* Read through Transposes: an elementwise op would write over a Gather's output in place,
     * which keeps it out of its input. */
    const char *t1 = ob_node1(b, "Transpose", g1);
    ob_attr_ints(b, "perm", 2, (int64_t[]){1, 0});
    const char *t2 = ob_node1(b, "Transpose", g2);
    ob_attr_ints(b, "perm", 2, (int64_t[]){1, 0});
    ob_output(b, ob_node(b, "Sub", 2, (const char *[]){t1, t2}));
    af_model *m = load_built(b);
    if (!m) return;
    const af_graph *g = m->graph;
    planned p;
    CHECK(plan_unfused(g, &p));
    int gathers = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const af_node *n = &g->nodes[i];
        if (n->op != AF_OP_GATHER) continue;
        int64_t k = -9;
        CHECK(af_graph_const_i64(g, n->inputs[1], &k));
        if (k < 0) k += 3;
        gathers++;
        CHECK_EQ_INT(p.lt.within[n->outputs[0]], n->inputs[0]);
        CHECK_EQ_INT(p.mp.offset[n->outputs[0]], p.mp.offset[n->inputs[0]] + k * 64 * 4);
    }
    CHECK_EQ_INT(gathers, 2);
    CHECK_EQ_INT(count_overlaps(g, &p.mp, &p.lt), 0);
    float xd[192];
    for (int i = 0; i < 192; i++) xd[i] = (float)((i * 7) % 23) / 8.0f - 1.5f;
    af_tensor y = {0};
    CHECK(run_on_arena(g, &p, (af_tensor){.dtype = AF_DTYPE_FLOAT, .rank = 3, .dims = {3, 4, 16}, .data = xd,
                                          .nbytes = sizeof xd},
                       &y));
    int off = 0;
    for (int i = 0; y.data && i < 64; i++) { /* y[c][r] = relu(x[1][r][c]) - relu(x[2][r][c]) */
        const int src = (i % 4) * 16 + i / 4;
        const float a = xd[64 + src] > 0 ? xd[64 + src] : 0, c = xd[128 + src] > 0 ? xd[128 + src] : 0;
        off += ((float *)y.data)[i] != a - c;
    }
    CHECK(y.data != NULL && y.rank == 2 && y.dims[0] == 16);
    CHECK_EQ_INT(off, 0);
    af_tensor_free_data(&y);
    planned_free(&p);
    af_model_free(m);
}

/* A Transpose that only moves axes of length 1 (ViT's batch-first [1, S, E] <-> [S, 1, E]) keeps
 * its input's slot; one that moves a longer axis does not. Relu -> Transpose(1, 0, 2) -> Exp over
 * [1, 4, 40] shares the Relu's offset, and the output is exp(relu(x)) in [4, 1, 40]; with the
 * input [2, 4, 20] the same Transpose moves data and gets a slot of its own. */
AF_TEST(memory_plan_keeps_a_transpose_of_unit_axes_in_its_input) {
    for (int moves = 0; moves < 2; moves++) {
        const int64_t dims[3] = {moves ? 2 : 1, 4, moves ? 20 : 40};
        ob_model *b = ob_new(13);
        const char *t = ob_node1(b, "Transpose", ob_node1(b, "Relu", ob_input(b, 3, dims)));
        ob_attr_ints(b, "perm", 3, (int64_t[]){1, 0, 2});
        ob_output(b, ob_node1(b, "Exp", t));
        af_model *m = load_built(b);
        if (!m) return;
        const af_graph *g = m->graph;
        planned p;
        CHECK(plan_unfused(g, &p));
        for (int i = 0; i < g->n_nodes; i++) {
            const af_node *n = &g->nodes[i];
            if (n->op != AF_OP_TRANSPOSE) continue;
            CHECK_EQ_INT(p.lt.alias[n->outputs[0]], moves ? -1 : n->inputs[0]);
            if (moves) CHECK(p.mp.offset[n->outputs[0]] != p.mp.offset[n->inputs[0]]);
            else CHECK_EQ_INT(p.mp.offset[n->outputs[0]], p.mp.offset[n->inputs[0]]);
        }
        float xd[160];
        for (int i = 0; i < 160; i++) xd[i] = (float)((i * 7) % 23) / 8.0f - 1.5f;
        af_tensor y = {0};
        CHECK(run_on_arena(g, &p, (af_tensor){.dtype = AF_DTYPE_FLOAT, .rank = 3, .dims = {dims[0], dims[1], dims[2]},
                                              .data = xd, .nbytes = sizeof xd},
                           &y));
        int off = 0;
        for (int i = 0; y.data && i < 160; i++) { /* y[a][b][c] = f(x[b][a][c]) */
            const int64_t a = i / (dims[0] * dims[2]), bb = i / dims[2] % dims[0], c = i % dims[2];
            const float v = xd[(bb * dims[1] + a) * dims[2] + c];
            const float want = expf(v > 0 ? v : 0);
            off += fabsf(((float *)y.data)[i] - want) > 1e-6f * want;
        }
        CHECK(y.data != NULL);
        CHECK_EQ_INT(off, 0);
        af_tensor_free_data(&y);
        planned_free(&p);
        af_model_free(m);
    }
}

/* DenseNet's dense block: layer k concatenates the block input and the outputs of layers 1..k-1,
 * and the block's last Concat all of them. The last Concat holds every part (its inputs are read
 * last there); each earlier Concat, whose inputs are a leading run of the last one's, becomes a
 * view of that run and copies nothing. r0 = Relu(x), f_k = Conv1x1(Concat(r0, f_1..f_k-1)), y =
 * Conv1x1(Concat(r0, f_1..f_3)); the output is the same bits as with every Concat copying. */
AF_TEST(memory_plan_places_dense_block_concats_inside_the_last) {
    static float w[4][16 * 56];
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 16 * 56; i++) w[k][i] = (float)((i * 13 + k * 5) % 17) / 32.0f - 0.25f;
    ob_model *b = ob_new(13);
    const char *parts[4] = {ob_node1(b, "Relu", ob_input(b, 4, (int64_t[]){1, 8, 6, 6}))};
    const char *cat[3];
    int64_t ch = 8;
    for (int k = 0; k < 3; k++) {
        cat[k] = k == 0 ? parts[0] : ob_node(b, "Concat", k + 1, parts);
        if (k > 0) ob_attr_i(b, "axis", 1);
        parts[k + 1] = ob_node(b, "Conv", 2, (const char *[]){cat[k], ob_const(b, 4, (int64_t[]){16, ch, 1, 1}, w[k])});
        ch += 16;
    }
    const char *last = ob_node(b, "Concat", 4, parts);
    ob_attr_i(b, "axis", 1);
    ob_output(b, ob_node(b, "Conv", 2, (const char *[]){last, ob_const(b, 4, (int64_t[]){4, 56, 1, 1}, w[3])}));
    af_model *m = load_built(b);
    if (!m) return;
    const af_graph *g = m->graph;
    planned p, apart;
    CHECK(plan_unfused(g, &p) && plan_unfused(g, &apart));
    af_memory_plan_free(&apart.mp);
    CHECK(plan_apart(g, &apart, &apart.mp));
    int views = 0, holder = -1;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == AF_OP_CONCAT && g->nodes[i].n_inputs == 4) holder = g->nodes[i].outputs[0];
    CHECK(holder >= 0);
    for (int i = 0; holder >= 0 && i < g->n_nodes; i++) {
        const af_node *n = &g->nodes[i];
        if (n->op != AF_OP_CONCAT || n->outputs[0] == holder) continue;
        views++;
        CHECK_EQ_INT(p.lt.within[n->outputs[0]], holder);
        CHECK_EQ_INT(p.mp.offset[n->outputs[0]], p.mp.offset[holder]); /* the run starts at r0 */
        CHECK(concat_view(g, &p.mp, &p.lt, n->outputs[0]));
    }
    CHECK_EQ_INT(views, 2);
    CHECK_EQ_INT(count_overlaps(g, &p.mp, &p.lt), 0);
    CHECK(p.mp.arena_bytes < apart.mp.arena_bytes);
    float xd[288];
    for (int i = 0; i < 288; i++) xd[i] = (float)((i * 7) % 23) / 8.0f - 1.5f;
    const af_tensor x = {.dtype = AF_DTYPE_FLOAT, .rank = 4, .dims = {1, 8, 6, 6}, .data = xd, .nbytes = sizeof xd};
    af_tensor y = {0}, y_apart = {0};
    int *within = apart.lt.within;
    apart.lt.within = NULL; /* every Concat copying, as apart.mp was planned */
    CHECK(run_on_arena(g, &p, x, &y) && run_on_arena(g, &apart, x, &y_apart));
    apart.lt.within = within;
    CHECK(y.data && y_apart.data && y.nbytes == y_apart.nbytes && y.nbytes == 4 * 36 * 4);
    if (y.data && y_apart.data && y.nbytes == y_apart.nbytes) CHECK(memcmp(y.data, y_apart.data, y.nbytes) == 0);
    printf("  dense block: %d Concats inside the last, arena %zu -> %zu bytes\n", views, apart.mp.arena_bytes,
           p.mp.arena_bytes);
    af_tensor_free_data(&y);
    af_tensor_free_data(&y_apart);
    planned_free(&apart);
    planned_free(&p);
    af_model_free(m);
}
