#include "runtime/profile.h"

#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

typedef struct {
    char key[80];
    double ms;
    int steps;
} profile_row;

static int by_time_desc(const void *a, const void *b) {
    double x = ((const profile_row *)a)->ms, y = ((const profile_row *)b)->ms;
    return (x < y) - (x > y);
}

static void step_key(const af_graph *g, const af_step *s, char *key, size_t n) {
    if (s->output >= 0 && s->rule[0]) snprintf(key, n, "fused:%s", s->rule);
    else if (s->output >= 0) snprintf(key, n, "fused:%s", g->nodes[s->anchor].op_type);
    else snprintf(key, n, "%s", g->nodes[s->anchor].op_type);
}

void af_profile_write(const af_graph *g, const af_exec_plan *plan, const double *step_ms, int runs, FILE *out) {
    double total = 0;
    for (int i = 0; i < plan->n_steps; i++) total += step_ms[i];
    total /= runs;
    fprintf(out, "profile over %d runs: %.3f ms per run in %d steps\n", runs, total, plan->n_steps);
    fprintf(out, "%5s %9s %6s  %s\n", "step", "ms/run", "%", "ops");
    for (int i = 0; i < plan->n_steps; i++) {
        const af_step *s = &plan->steps[i];
        double ms = step_ms[i] / runs;
        fprintf(out, "%5d %9.4f %5.1f%%  ", i, ms, total > 0 ? 100 * ms / total : 0);
        int shown = s->n_nodes < 6 ? s->n_nodes : 6;
        for (int k = 0; k < shown; k++) fprintf(out, "%s%s", k ? "+" : "", g->nodes[s->nodes[k]].op_type);
        if (shown < s->n_nodes) fprintf(out, "+...(%d ops)", s->n_nodes);
        fprintf(out, " '%s'\n", g->nodes[s->anchor].name);
    }
    profile_row *rows = af_calloc((size_t)(plan->n_steps ? plan->n_steps : 1), sizeof *rows);
    if (!rows) return;
    int n_rows = 0;
    for (int i = 0; i < plan->n_steps; i++) {
        char key[80];
        step_key(g, &plan->steps[i], key, sizeof key);
        int r = 0;
        while (r < n_rows && strcmp(rows[r].key, key) != 0) r++;
        if (r == n_rows) snprintf(rows[n_rows++].key, sizeof rows[r].key, "%s", key);
        rows[r].ms += step_ms[i] / runs;
        rows[r].steps++;
    }
    qsort(rows, (size_t)n_rows, sizeof *rows, by_time_desc);
    fprintf(out, "by kind:\n%9s %6s %6s  %s\n", "ms/run", "%", "steps", "kind");
    for (int r = 0; r < n_rows; r++)
        fprintf(out, "%9.4f %5.1f%% %6d  %s\n", rows[r].ms, total > 0 ? 100 * rows[r].ms / total : 0, rows[r].steps,
                rows[r].key);
    af_free(rows);
}
