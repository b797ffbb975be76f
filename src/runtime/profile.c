#include "runtime/profile.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

typedef struct {
    char key[80];
    double ms, idle_ms;
    double flops; /* of its contractions, per run */
    int steps;
} profile_row;

static int by_time_desc(const void *a, const void *b) {
    double x = ((const profile_row *)a)->ms, y = ((const profile_row *)b)->ms;
    return (x < y) - (x > y);
}

/* The node a step is named by: its anchor, or for an anchor-less group (an elementwise region,
 * anchor -1) the last of its nodes, which makes the group's output. */
static const af_node *step_node(const af_graph *g, const af_step *s) {
    return &g->nodes[s->anchor >= 0 ? s->anchor : s->nodes[s->n_nodes - 1]];
}

static void step_key(const af_graph *g, const af_step *s, char *key, size_t n) {
    if (s->output >= 0 && s->rule[0]) snprintf(key, n, "fused:%s", s->rule);
    else if (s->output >= 0) snprintf(key, n, "fused:%s", step_node(g, s)->op_type);
    else snprintf(key, n, "%s", step_node(g, s)->op_type);
}

static const char *kernel_name(const af_step *s) {
    if (!s->kernel.run || !s->kernel.name) return "reference";
    return s->kernel.ran ? s->kernel.ran(&s->kernel) : s->kernel.name;
}

static void write_rate(FILE *out, double flops, double ms) {
    if (flops > 0 && ms > 0) fprintf(out, " %8.1f", flops / (ms * 1e6));
    else fprintf(out, " %8s", "-");
}

/* The share of n_threads threads' time over ms of wall time that idle_ms was, as a column. */
static void write_idle(FILE *out, double idle_ms, double ms, int n_threads) {
    if (n_threads > 1 && ms > 0) fprintf(out, " %5.1f%%", 100 * idle_ms / (ms * n_threads));
    else fprintf(out, " %6s", "-");
}

static void kernel_key(const af_graph *g, const af_step *s, char *key, size_t n) {
    (void)g;
    snprintf(key, n, "%s", kernel_name(s));
}

/* One line per distinct key (a kind of step, or a kernel), largest total first. */
static void write_groups(const af_graph *g, const af_exec_plan *plan, const af_profile_totals *t, double total,
                         const char *what,
                         void (*key_of)(const af_graph *, const af_step *, char *, size_t), FILE *out) {
    profile_row *rows = af_calloc((size_t)(plan->n_steps ? plan->n_steps : 1), sizeof *rows);
    if (!rows) return;
    int n_rows = 0;
    for (int i = 0; i < plan->n_steps; i++) {
        char key[80];
        key_of(g, &plan->steps[i], key, sizeof key);
        int r = 0;
        while (r < n_rows && strcmp(rows[r].key, key) != 0) r++;
        if (r == n_rows) snprintf(rows[n_rows++].key, sizeof rows[r].key, "%s", key);
        rows[r].ms += t->ms[i] / t->runs;
        rows[r].idle_ms += t->idle_ms[i] / t->runs;
        rows[r].flops += t->flops[i] / t->runs;
        rows[r].steps++;
    }
    qsort(rows, (size_t)n_rows, sizeof *rows, by_time_desc);
    fprintf(out, "by %s:\n%9s %6s %8s %6s %6s  %s\n", what, "ms/run", "%", "GFLOP/s", "idle", "steps", what);
    for (int r = 0; r < n_rows; r++) {
        fprintf(out, "%9.4f %5.1f%%", rows[r].ms, total > 0 ? 100 * rows[r].ms / total : 0);
        write_rate(out, rows[r].flops, rows[r].ms);
        write_idle(out, rows[r].idle_ms, rows[r].ms, t->n_threads);
        fprintf(out, " %6d  %s\n", rows[r].steps, rows[r].key);
    }
    af_free(rows);
}

void af_profile_write(const af_graph *g, const af_exec_plan *plan, af_profile_totals t, FILE *out) {
    const int runs = t.runs, n_threads = t.n_threads;
    double total = 0, idle = 0, flops = 0;
    for (int i = 0; i < plan->n_steps; i++) total += t.ms[i], idle += t.idle_ms[i], flops += t.flops[i];
    total /= runs;
    idle /= runs;
    flops /= runs;
    fprintf(out, "profile over %d runs: %.3f ms per run in %d steps\n", runs, total, plan->n_steps);
    if (flops > 0)
        fprintf(out, "contractions: %.4g GFLOP per run (direct form), %.1f GFLOP/s over the whole run\n", flops / 1e9,
                total > 0 ? flops / (total * 1e6) : 0);
    if (n_threads > 1)
        fprintf(out, "threads: %d, idle %.1f%% of their time (waiting in a step for the other threads' tasks, or for its serial work)\n",
                n_threads, total > 0 ? 100 * idle / (total * n_threads) : 0);
    fprintf(out, "%5s %9s %6s %8s %6s  %s\n", "step", "ms/run", "%", "GFLOP/s", "idle", "ops");
    for (int i = 0; i < plan->n_steps; i++) {
        const af_step *s = &plan->steps[i];
        double ms = t.ms[i] / runs;
        fprintf(out, "%5d %9.4f %5.1f%%", i, ms, total > 0 ? 100 * ms / total : 0);
        write_rate(out, t.flops[i] / runs, ms);
        write_idle(out, t.idle_ms[i] / runs, ms, n_threads);
        fprintf(out, "  ");
        int shown = s->n_nodes < 6 ? s->n_nodes : 6;
        for (int k = 0; k < shown; k++) fprintf(out, "%s%s", k ? "+" : "", g->nodes[s->nodes[k]].op_type);
        if (shown < s->n_nodes) fprintf(out, "+...(%d ops)", s->n_nodes);
        fprintf(out, " '%s' [%s]\n", step_node(g, s)->name, kernel_name(s));
    }
    write_groups(g, plan, &t, total, "kind", step_key, out);
    write_groups(g, plan, &t, total, "kernel", kernel_key, out);
}

/* A number, or null where it does not apply (no contractions; one thread). */
static bool add_number_or_null(cJSON *o, const char *key, bool applies, double v) {
    return applies ? cJSON_AddNumberToObject(o, key, v) != NULL : cJSON_AddNullToObject(o, key) != NULL;
}

static cJSON *step_json(const af_graph *g, const af_step *s, int i, double ms, double idle_ms, double flops,
                        double total, int n_threads) {
    cJSON *o = cJSON_CreateObject(), *ops = cJSON_CreateArray();
    char kind[80];
    step_key(g, s, kind, sizeof kind);
    bool ok = o && ops && cJSON_AddNumberToObject(o, "step", i) && cJSON_AddNumberToObject(o, "ms", ms) &&
              cJSON_AddNumberToObject(o, "share", total > 0 ? ms / total : 0) &&
              add_number_or_null(o, "gflops", flops > 0 && ms > 0, flops / (ms * 1e6)) &&
              add_number_or_null(o, "idle_share", n_threads > 1 && ms > 0, idle_ms / (ms * n_threads));
    for (int k = 0; ok && k < s->n_nodes; k++) {
        cJSON *op = cJSON_CreateString(g->nodes[s->nodes[k]].op_type);
        ok = op && cJSON_AddItemToArray(ops, op);
    }
    if (ok && cJSON_AddItemToObject(o, "ops", ops)) ops = NULL;
    else ok = false;
    ok = ok && cJSON_AddStringToObject(o, "node", step_node(g, s)->name) &&
         cJSON_AddStringToObject(o, "kernel", kernel_name(s)) && cJSON_AddStringToObject(o, "kind", kind);
    cJSON_Delete(ops);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

void af_profile_write_json(const af_graph *g, const af_exec_plan *plan, af_profile_totals t, FILE *out) {
    const int runs = t.runs, n_threads = t.n_threads;
    double total = 0, idle = 0;
    for (int i = 0; i < plan->n_steps; i++) total += t.ms[i], idle += t.idle_ms[i];
    total /= runs;
    idle /= runs;
    cJSON *root = cJSON_CreateObject(), *steps = cJSON_CreateArray();
    bool ok = root && steps && cJSON_AddNumberToObject(root, "runs", runs) &&
              cJSON_AddNumberToObject(root, "ms_per_run", total) && cJSON_AddNumberToObject(root, "threads", n_threads) &&
              add_number_or_null(root, "idle_share", n_threads > 1 && total > 0, idle / (total * n_threads));
    for (int i = 0; ok && i < plan->n_steps; i++) {
        cJSON *s = step_json(g, &plan->steps[i], i, t.ms[i] / runs, t.idle_ms[i] / runs, t.flops[i] / runs, total,
                             n_threads);
        ok = s && cJSON_AddItemToArray(steps, s);
        if (!ok) cJSON_Delete(s);
    }
    if (ok && cJSON_AddItemToObject(root, "steps", steps)) steps = NULL;
    else ok = false;
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    fputs(text ? text : "null", out); /* null: out of memory, rather than half an object */
    cJSON_free(text);
    cJSON_Delete(steps);
    cJSON_Delete(root);
}
