/*
 * An A/B of two configurations of one model inside one process: two sessions, built under
 * different environment variables or fusion levels, run in turn, one inference each, so that both
 * see the same host. On hosts whose speed swings by 1.5x for seconds at a time (bench/RESULTS.md,
 * session 28), processes run one after another (bench/ab.py) land in different states and their
 * ratios scatter by +-40%; runs taken in turn pair up, and the median of the per-pair ratios holds.
 * It cannot compare two builds (bench/ab.py does that), only what a session reads: environment
 * variables (each side's are set while its session is made and while it runs, and cleared
 * otherwise) and the fusion level.
 *
 *   make -f bench/Makefile inproc_ab
 *   ./build/inproc_ab MODEL_DIR [--threads N] [--pairs K] [--warmup W]
 *                     [--a-env VAR=VALUE]... [--b-env VAR=VALUE]... [--a-level L] [--b-level L]
 *                     [--a-threads N] [--b-threads N] [--profile PREFIX]
 *
 * MODEL_DIR holds model.onnx and test_data_set_0/input_*.pb (models/make_fixtures.sh's layout).
 * Prints each side's median and lower quartile, and B / A per pair as its median and quartiles.
 * --profile PREFIX then runs as many more pairs with the sessions' profiling on and writes each
 * side's per-step profile to PREFIX_a.json and PREFIX_b.json (af_session_profile_write_json),
 * taken in turn like the timings (bench/node_times.py's af side reads them).
 * Two sessions with two threads each keep two pools: the idle one's worker spins for up to 0.2 ms
 * after its run (util/threadpool.c), on the core the other session wants, so two-thread figures
 * carry that cost on both sides.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autofusion.h"

#define MAX_ENV 8
#define MAX_INPUTS 16

typedef struct side {
    const char *env[MAX_ENV]; /* "VAR=VALUE" */
    int n_env;
    int level;
    int threads; /* 0: --threads */
    af_session *session;
    double *ms;
} side;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile of n values (sorted in place), by the nearest rank below. */
static double quantile(double *v, int n, double q) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[(int)(q * (n - 1))];
}

static void die(const char *what, const af_error *err) {
    if (err) fprintf(stderr, "inproc_ab: %s: %s\n", what, err->message);
    else fprintf(stderr, "inproc_ab: %s\n", what);
    exit(1);
}

/* Sets or clears (VALUE empty) each of the side's variables. */
static void apply_env(const side *s, int on) {
    for (int i = 0; i < s->n_env; i++) {
        char name[128];
        const char *eq = strchr(s->env[i], '=');
        size_t len = eq ? (size_t)(eq - s->env[i]) : strlen(s->env[i]);
        if (len >= sizeof name) len = sizeof name - 1;
        memcpy(name, s->env[i], len);
        name[len] = 0;
        if (on && eq && eq[1]) setenv(name, eq + 1, 1);
        else unsetenv(name);
    }
}

static int read_inputs(const char *dir, af_tensor *inputs, char **names) {
    char path[4096];
    int n = 0;
    for (; n < MAX_INPUTS; n++) {
        snprintf(path, sizeof path, "%s/test_data_set_0/input_%d.pb", dir, n);
        FILE *f = fopen(path, "rb");
        if (!f) break;
        fclose(f);
        af_error err;
        if (af_tensor_read_pb(path, &inputs[n], &names[n], &err) != AF_OK) die(path, &err);
    }
    return n;
}

/* Runs the pairs, each side once per pair, in turn (the first side alternating), into each side's
 * ms[] and ratio[] (B / A). */
static void run_pairs(side *sides, int pairs, int n_in, const char *const *names, const af_tensor *inputs,
                      double *ratio) {
    af_error err;
    for (int p = 0; p < pairs; p++) {
        for (int k = 0; k < 2; k++) {
            const int s = (p & 1) ^ k;
            apply_env(&sides[s], 1);
            const double t0 = now_ms();
            if (af_session_run(sides[s].session, n_in, names, inputs, &err) != AF_OK) die("run", &err);
            sides[s].ms[p] = now_ms() - t0;
            apply_env(&sides[s], 0);
        }
        ratio[p] = sides[1].ms[p] / sides[0].ms[p];
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: inproc_ab MODEL_DIR [--threads N] [--pairs K] [--warmup W] [--a-env VAR=VALUE]... "
                        "[--b-env VAR=VALUE]... [--a-level L] [--b-level L] [--a-threads N] [--b-threads N] "
                        "[--profile PREFIX]\n");
        return 2;
    }
    const char *dir = argv[1];
    int threads = 1, pairs = 200, warmup = 5;
    const char *profile = NULL;
    side sides[2] = {{.level = -1}, {.level = -1}};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "inproc_ab: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--pairs")) pairs = atoi(v);
        else if (!strcmp(a, "--warmup")) warmup = atoi(v);
        else if (!strcmp(a, "--a-level")) sides[0].level = atoi(v);
        else if (!strcmp(a, "--b-level")) sides[1].level = atoi(v);
        else if (!strcmp(a, "--a-threads")) sides[0].threads = atoi(v);
        else if (!strcmp(a, "--b-threads")) sides[1].threads = atoi(v);
        else if (!strcmp(a, "--profile")) profile = v;
        else if ((!strcmp(a, "--a-env") || !strcmp(a, "--b-env")) && sides[a[2] == 'b'].n_env < MAX_ENV)
            sides[a[2] == 'b'].env[sides[a[2] == 'b'].n_env++] = v;
        else {
            fprintf(stderr, "inproc_ab: unknown option %s (or more than %d --a-env/--b-env)\n", a, MAX_ENV);
            return 2;
        }
        i++;
    }
    if (pairs < 4 || threads < 1) die("--pairs must be at least 4 and --threads at least 1", NULL);

    char path[4096];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    af_error err;
    af_model *model;
    if (af_model_load(path, NULL, &model, &err) != AF_OK) die(path, &err);
    af_tensor inputs[MAX_INPUTS];
    char *names[MAX_INPUTS];
    const int n_in = read_inputs(dir, inputs, names);
    if (n_in == 0) die("no test_data_set_0/input_0.pb beside the model", NULL);

    /* Each session is built with its own variables set and the other side's cleared. */
    for (int s = 0; s < 2; s++) {
        apply_env(&sides[1 - s], 0);
        apply_env(&sides[s], 1);
        af_session_options o = af_session_options_default();
        o.n_threads = sides[s].threads > 0 ? sides[s].threads : threads;
        o.fusion_level = sides[s].level;
        if (af_session_create(model, &o, &sides[s].session, &err) != AF_OK) die("session", &err);
        apply_env(&sides[s], 0);
        sides[s].ms = calloc((size_t)pairs, sizeof(double));
        if (!sides[s].ms) die("out of memory", NULL);
    }
    const char *const *in_names = (const char *const *)names;
    for (int w = 0; w < warmup; w++)
        for (int s = 0; s < 2; s++) {
            apply_env(&sides[s], 1);
            if (af_session_run(sides[s].session, n_in, in_names, inputs, &err) != AF_OK) die("run", &err);
            apply_env(&sides[s], 0);
        }
    /* Pairs alternate which side runs first, so neither always follows the other. */
    double *ratio = calloc((size_t)pairs, sizeof(double));
    if (!ratio) die("out of memory", NULL);
    run_pairs(sides, pairs, n_in, in_names, inputs, ratio);
    const double r25 = quantile(ratio, pairs, 0.25), r50 = quantile(ratio, pairs, 0.5),
                 r75 = quantile(ratio, pairs, 0.75);
    for (int s = 0; s < 2; s++) {
        printf("%c:", "AB"[s]);
        for (int i = 0; i < sides[s].n_env; i++) printf(" %s", sides[s].env[i]);
        if (sides[s].level >= 0) printf(" level %d", sides[s].level);
        if (sides[s].threads > 0) printf(" %d thread%s", sides[s].threads, sides[s].threads == 1 ? "" : "s");
        const double q25 = quantile(sides[s].ms, pairs, 0.25), q50 = quantile(sides[s].ms, pairs, 0.5);
        printf("  median %.3f ms, lower quartile %.3f ms\n", q50, q25);
    }
    if (sides[0].threads > 0 || sides[1].threads > 0)
        printf("B / A per pair (%d pairs): median %.3f [quartiles %.3f-%.3f]\n", pairs, r50, r25, r75);
    else
        printf("B / A per pair (%d pairs, %d thread%s): median %.3f [quartiles %.3f-%.3f]\n", pairs, threads,
               threads == 1 ? "" : "s", r50, r25, r75);
    if (profile) {
        for (int s = 0; s < 2; s++)
            if (af_session_set_profiling(sides[s].session, 1, &err) != AF_OK) die("profiling", &err);
        run_pairs(sides, pairs, n_in, in_names, inputs, ratio);
        for (int s = 0; s < 2; s++) {
            snprintf(path, sizeof path, "%s_%c.json", profile, "ab"[s]);
            FILE *f = fopen(path, "w");
            if (!f) {
                perror(path);
                return 1;
            }
            af_session_profile_write_json(sides[s].session, f);
            fputc('\n', f);
            fclose(f);
        }
    }
    for (int s = 0; s < 2; s++) {
        af_session_free(sides[s].session);
        free(sides[s].ms);
    }
    for (int i = 0; i < n_in; i++) {
        af_tensor_free_data(&inputs[i]);
        free(names[i]);
    }
    free(ratio);
    af_model_free(model);
    return 0;
}
