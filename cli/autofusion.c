/*
 * The autofusion command line: a thin shell over include/autofusion.h.
 *
 *   autofusion inspect MODEL
 *   autofusion run MODEL [--input NAME=FILE.pb ...] [--inputs DIR] [--output-dir DIR] [--threads N] [--seed S]
 *   autofusion bench MODEL [--warmup N] [--iterations N] [--threads N] [--level N] [--json] [--profile] [--input ...]
 *   autofusion fuse MODEL [--config FILE] [--level N] [--threads N]    (the fusion report)
 * run and bench also take --config FILE and --level N.
 *
 * --inputs DIR reads DIR/input_K.pb for graph input K (the ONNX backend-test layout).
 * Exit status 0 on success; otherwise 1 with a one-line error naming the cause on stderr.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "autofusion.h"

#define MAX_INPUTS 64

static int fail(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "autofusion: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n");
    return 1;
}

/* The whole of `text` as a decimal integer in [lo, hi]: no leading space, no trailing text, no
 * overflow (atoi would read "abc" as 0 and "8x" as 8). */
static bool parse_long(const char *text, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end || errno == ERANGE || isspace((unsigned char)text[0]) || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* The same for an unsigned 64-bit value (strtoull alone takes "-1" for 2^64 - 1). */
static bool parse_u64(const char *text, uint64_t *out) {
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)text[0])) return false;
    unsigned long long v = strtoull(text, &end, 10);
    if (*end || errno == ERANGE) return false;
    *out = v;
    return true;
}

static void usage(FILE *f) {
    fprintf(f, "usage: autofusion inspect MODEL\n"
               "       autofusion run MODEL [--input NAME=FILE.pb ...] [--inputs DIR] [--output-dir DIR] [--threads N] [--seed S]\n"
               "       autofusion bench MODEL [--warmup N] [--iterations N] [--threads N] [--level N] [--json]\n"
               "                        [--profile] [--input NAME=FILE.pb ...] [--reference] [--isa avx512|avx2|scalar]\n"
               "       autofusion fuse MODEL [--config FILE] [--level N] [--threads N]\n"
               "  run, bench and fuse take --config FILE (docs/config.md) and --level N (0-3; default: the config's)\n");
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted samples: the smallest sample with at least p% at or below it. */
static double percentile(const double *sorted, int n, double p) {
    int rank = (int)ceil(p / 100.0 * n);
    return sorted[rank < 1 ? 0 : rank > n ? n - 1 : rank - 1];
}

static void format_shape(const af_value_info *v, char *buf, size_t n) {
    size_t used = (size_t)snprintf(buf, n, "%s[", af_dtype_name(v->dtype));
    if (v->rank < 0) used += (size_t)snprintf(buf + used, n - used, "?");
    for (int d = 0; d < v->rank && used < n; d++) {
        if (v->dim_params[d]) used += (size_t)snprintf(buf + used, n - used, "%s%s", d ? "," : "", v->dim_params[d]);
        else if (v->dims[d] < 0) used += (size_t)snprintf(buf + used, n - used, "%s?", d ? "," : "");
        else used += (size_t)snprintf(buf + used, n - used, "%s%lld", d ? "," : "", (long long)v->dims[d]);
    }
    if (used < n) snprintf(buf + used, n - used, "]");
}

static int cmd_inspect(const char *path) {
    af_error err = {0};
    af_model *m = NULL;
    if (af_model_load(path, NULL, &m, &err) != AF_OK) return fail("%s: %s", path, err.message);
    af_model_stats st;
    af_model_get_stats(m, &st);
    char shape[256];
    printf("model: %s\nopset: %d\nnodes: %d\nparameters: %lld\nflops: %.4g (%.3f GFLOP)\n", path, af_model_opset(m),
           st.n_nodes, (long long)st.n_params, st.flops, st.flops / 1e9);
    printf("inputs:\n");
    for (int i = 0; i < af_model_n_inputs(m); i++) {
        af_value_info v;
        af_model_input_info(m, i, &v);
        format_shape(&v, shape, sizeof shape);
        printf("  %s: %s\n", v.name, shape);
    }
    printf("outputs:\n");
    for (int i = 0; i < af_model_n_outputs(m); i++) {
        af_value_info v;
        af_model_output_info(m, i, &v);
        format_shape(&v, shape, sizeof shape);
        printf("  %s: %s\n", v.name, shape);
    }
    printf("operators (after constant folding):\n");
    for (int i = 0; i < st.n_op_types; i++) printf("  %-24s %d\n", st.op_types[i], st.op_counts[i]);
    af_model_free(m);
    return 0;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double rng_uniform(void) { /* xorshift64*: reproducible random inputs */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

/* A random tensor for graph input v; symbolic dims become 1. Integer inputs get small values so
 * that token ids and indices stay in range of typical embedding tables. */
static int random_input(const af_value_info *v, af_tensor *t) {
    memset(t, 0, sizeof *t);
    t->dtype = v->dtype;
    t->rank = v->rank < 0 ? 0 : v->rank;
    size_t n = 1;
    for (int d = 0; d < t->rank; d++) {
        t->dims[d] = v->dims[d] < 0 ? 1 : v->dims[d];
        n *= (size_t)t->dims[d];
    }
    size_t es = af_dtype_size(t->dtype);
    if (!es) return 0;
    t->nbytes = n * es;
    t->data = calloc(n ? n : 1, es);
    if (!t->data) return 0;
    for (size_t i = 0; i < n; i++) {
        double r = rng_uniform();
        switch (t->dtype) {
        case AF_DTYPE_FLOAT: ((float *)t->data)[i] = (float)(2 * r - 1); break;
        case AF_DTYPE_DOUBLE: ((double *)t->data)[i] = 2 * r - 1; break;
        case AF_DTYPE_INT64: ((int64_t *)t->data)[i] = (int64_t)(r * 2); break;
        case AF_DTYPE_INT32: ((int32_t *)t->data)[i] = (int32_t)(r * 2); break;
        case AF_DTYPE_BOOL: ((uint8_t *)t->data)[i] = 1; break;
        default: break; /* zeros */
        }
    }
    return 1;
}

/* Profiled runs, as many as the timed ones and after them, so the clock reads never touch the
 * latency figures; the profile goes to stdout, or into json as "profile". */
static int profile_runs(af_session *s, int n_in, const char **names, const af_tensor *inputs, int iterations,
                        const char *path, cJSON *json) {
    af_error err = {0};
    if (af_session_set_profiling(s, 1, &err) != AF_OK) return fail("%s: %s", path, err.message);
    for (int i = 0; i < iterations; i++)
        if (af_session_run(s, n_in, names, inputs, &err) != AF_OK) return fail("%s: %s", path, err.message);
    if (!json) {
        af_session_profile_write(s, stdout);
        return 0;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return fail("out of memory%s%s", "", "");
    af_session_profile_write_json(s, f);
    fclose(f);
    cJSON *p = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!p || !cJSON_AddItemToObject(json, "profile", p)) {
        cJSON_Delete(p);
        return fail("out of memory%s%s", "", "");
    }
    return 0;
}

/* Times `iterations` runs after `warmup`, and prints latency percentiles, throughput and memory. */
static int bench_session(af_session *s, int n_in, const char **names, const af_tensor *inputs, int warmup,
                         int iterations, int json, int profile, const char *path, double create_ms) {
    af_error err = {0};
    for (int i = 0; i < warmup; i++)
        if (af_session_run(s, n_in, names, inputs, &err) != AF_OK) return fail("%s: %s", path, err.message);
    double *t = malloc((size_t)iterations * sizeof *t);
    if (!t) return fail("out of memory%s%s", "", "");
    double total = 0;
    for (int i = 0; i < iterations; i++) {
        double t0 = now_ms();
        if (af_session_run(s, n_in, names, inputs, &err) != AF_OK) {
            free(t);
            return fail("%s: %s", path, err.message);
        }
        t[i] = now_ms() - t0;
        total += t[i];
    }
    qsort(t, (size_t)iterations, sizeof *t, cmp_double);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double p50 = percentile(t, iterations, 50), p90 = percentile(t, iterations, 90), p99 = percentile(t, iterations, 99);
    double mean = total / iterations;
    const af_plan_memory pm = af_session_plan_memory(s);
    const int n_threads = af_session_n_threads(s);
    cJSON *o = NULL;
    if (json) {
        /* One object a bench, the profile inside it: built with cJSON so a path or a node name
         * with quotes in it still makes valid JSON. */
        o = cJSON_CreateObject();
        const struct {
            const char *key;
            double v;
        } nums[] = {{"threads", n_threads}, {"level", af_session_fusion_level(s)}, {"steps", af_session_n_steps(s)},
                    {"fusion_ms", af_session_fusion_ms(s)}, {"traffic_bytes", (double)af_session_traffic_bytes(s)},
                    {"warmup", warmup}, {"iterations", iterations}, {"session_create_ms", create_ms},
                    {"median_ms", p50}, {"p50_ms", p50}, {"p90_ms", p90}, {"p99_ms", p99}, {"mean_ms", mean},
                    {"min_ms", t[0]}, {"max_ms", t[iterations - 1]}, {"throughput_per_s", 1000.0 / mean},
                    {"arena_bytes", (double)af_session_arena_bytes(s)}, {"workspace_bytes", (double)pm.workspace_bytes},
                    {"thread_scratch_bytes", (double)pm.thread_scratch_bytes}, {"peak_rss_kb", (double)ru.ru_maxrss}};
        bool ok = o && cJSON_AddStringToObject(o, "model", path) && cJSON_AddStringToObject(o, "runtime", "autofusion") &&
                  cJSON_AddStringToObject(o, "isa", af_session_isa(s));
        for (size_t k = 0; ok && k < sizeof nums / sizeof nums[0]; k++)
            ok = cJSON_AddNumberToObject(o, nums[k].key, nums[k].v) != NULL;
        if (!ok) {
            cJSON_Delete(o);
            free(t);
            return fail("out of memory%s%s", "", "");
        }
    } else {
        printf("model %s\nisa %s, threads %d, fusion level %d, %d warmup + %d timed runs\n"
               "latency ms: p50 %.3f  p90 %.3f  p99 %.3f  mean %.3f  min %.3f  max %.3f\n"
               "throughput: %.2f inferences/s\nsession create: %.1f ms\n"
               "memory: activation arena %.2f MiB, kernel scratch %.2f MiB (plan) + %.2f MiB (threads), "
               "peak RSS %.1f MiB\n"
               "(percentiles: nearest rank over the timed runs)\n",
               path, af_session_isa(s), n_threads, af_session_fusion_level(s), warmup, iterations, p50, p90, p99, mean,
               t[0], t[iterations - 1], 1000.0 / mean, create_ms, (double)af_session_arena_bytes(s) / 1048576.0,
               (double)pm.workspace_bytes / 1048576.0, (double)pm.thread_scratch_bytes / 1048576.0,
               (double)ru.ru_maxrss / 1024.0);
    }
    free(t);
    int rc = profile ? profile_runs(s, n_in, names, inputs, iterations, path, o) : 0;
    if (o) {
        char *text = rc == 0 ? cJSON_PrintUnformatted(o) : NULL;
        if (text) printf("%s\n", text);
        else if (rc == 0) rc = fail("out of memory%s%s", "", "");
        cJSON_free(text);
        cJSON_Delete(o);
    }
    return rc;
}

enum { CMD_RUN, CMD_BENCH, CMD_FUSE };

static int cmd_run(int argc, char **argv, int cmd) {
    const int bench = cmd == CMD_BENCH;
    const char *path = argv[0], *out_dir = NULL, *isa = NULL, *in_dir = NULL, *config = NULL;
    const char *in_names[MAX_INPUTS], *in_files[MAX_INPUTS];
    int n_given = 0, threads = 0, warmup = 5, iterations = 20, level = -1, json = 0, reference = 0, profile = 0;
    long num;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--input") && i + 1 < argc) {
            char *eq = strchr(argv[++i], '=');
            if (!eq) return fail("--input wants NAME=FILE.pb, got '%s'%s", argv[i], "");
            if (n_given == MAX_INPUTS) return fail("too many --input options%s%s", "", "");
            *eq = 0;
            in_names[n_given] = argv[i];
            in_files[n_given++] = eq + 1;
        } else if (!strcmp(argv[i], "--inputs") && i + 1 < argc) {
            in_dir = argv[++i];
        } else if (!strcmp(argv[i], "--output-dir") && i + 1 < argc) {
            out_dir = argv[++i];
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            if (!parse_long(argv[++i], 0, INT_MAX, &num))
                return fail("--threads takes a whole number >= 0 (0: every core), not '%s'%s", argv[i], "");
            threads = (int)num;
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            uint64_t seed;
            if (!parse_u64(argv[++i], &seed))
                return fail("--seed takes a whole number from 0 to 2^64 - 1, not '%s'%s", argv[i], "");
            rng_state = seed * 0x9e3779b97f4a7c15ull + 1;
        } else if (!strcmp(argv[i], "--isa") && i + 1 < argc) {
            isa = argv[++i];
        } else if (!strcmp(argv[i], "--reference")) {
            reference = 1;
        } else if (bench && !strcmp(argv[i], "--warmup") && i + 1 < argc) {
            if (!parse_long(argv[++i], 0, INT_MAX, &num))
                return fail("--warmup takes a whole number >= 0, not '%s'%s", argv[i], "");
            warmup = (int)num;
        } else if (bench && !strcmp(argv[i], "--iterations") && i + 1 < argc) {
            if (!parse_long(argv[++i], 1, INT_MAX, &num))
                return fail("--iterations takes a whole number >= 1, not '%s'%s", argv[i], "");
            iterations = (int)num;
        } else if (!strcmp(argv[i], "--level") && i + 1 < argc) {
            if (!parse_long(argv[++i], 0, 3, &num)) return fail("--level takes 0 to 3, not '%s'%s", argv[i], "");
            level = (int)num;
        } else if (!strcmp(argv[i], "--config") && i + 1 < argc) {
            config = argv[++i];
        } else if (bench && !strcmp(argv[i], "--json")) {
            json = 1;
        } else if (bench && !strcmp(argv[i], "--profile")) {
            profile = 1;
        } else {
            usage(stderr);
            return fail("unknown option '%s'%s", argv[i], "");
        }
    }
    af_error err = {0};
    af_model *m = NULL;
    af_session *s = NULL;
    int rc = 1, n_in = af_model_n_inputs(0);
    af_tensor inputs[MAX_INPUTS];
    const char *names[MAX_INPUTS];
    if (af_model_load(path, NULL, &m, &err) != AF_OK) return fail("%s: %s", path, err.message);
    af_session_options opts = af_session_options_default();
    opts.n_threads = threads;
    opts.fusion_level = level;
    opts.reference_kernels = reference;
    opts.isa = isa;
    opts.config_path = config;
    double t_create = now_ms();
    /* The session owns the model from here: weights it packs are not kept twice. */
    if (af_session_create_owning(m, &opts, &s, &err) != AF_OK) {
        fail("%s: %s", path, err.message);
        goto done;
    }
    const af_model *model = m;
    m = NULL;
    n_in = af_model_n_inputs(model);
    if (n_in > MAX_INPUTS) {
        fail("%s: more than 64 inputs%s", path, "");
        n_in = 0;
        goto done;
    }
    for (int g = 0; g < n_given; g++) {
        int found = 0;
        for (int i = 0; i < n_in; i++) {
            af_value_info v;
            af_model_input_info(model, i, &v);
            found |= strcmp(v.name, in_names[g]) == 0;
        }
        if (!found) {
            fail("--input %s: the model has no input of that name%s", in_names[g], "");
            n_in = 0;
            goto done;
        }
    }
    for (int i = 0; i < n_in; i++) {
        af_value_info v;
        af_model_input_info(model, i, &v);
        names[i] = v.name;
        const char *file = NULL;
        char dir_file[4096];
        for (int g = 0; g < n_given; g++)
            if (!strcmp(in_names[g], v.name)) file = in_files[g];
        if (!file && in_dir) { /* the backend-test layout: input_K.pb in graph input order */
            snprintf(dir_file, sizeof dir_file, "%s/input_%d.pb", in_dir, i);
            file = dir_file;
        }
        af_status st = file ? af_tensor_read_pb(file, &inputs[i], NULL, &err) : AF_OK;
        if (!file && !random_input(&v, &inputs[i])) {
            n_in = i;
            fail("input '%s': cannot make a random %s tensor", v.name, af_dtype_name(v.dtype));
            goto done;
        }
        if (st != AF_OK) {
            n_in = i;
            fail("input '%s': %s", v.name, err.message);
            goto done;
        }
    }
    t_create = now_ms() - t_create;
    if (cmd == CMD_FUSE) {
        af_session_fusion_report(s, stdout);
        printf("activation traffic between kernels: %.2f MiB per run\n",
               (double)af_session_traffic_bytes(s) / 1048576.0);
        af_plan_memory pm = af_session_plan_memory(s);
        printf("plan memory: kernel weights %.2f MiB (the model's constants: %.2f MiB); engine metadata %.1f KiB, "
               "%.2f%% of the model's constants\n",
               (double)pm.kernel_weight_bytes / 1048576.0, (double)pm.model_constant_bytes / 1048576.0,
               (double)pm.metadata_bytes / 1024.0,
               pm.model_constant_bytes ? 100.0 * (double)pm.metadata_bytes / (double)pm.model_constant_bytes : 0.0);
        printf("session created in %.1f ms\n", t_create);
        rc = 0;
        goto done;
    }
    if (bench) {
        rc = bench_session(s, n_in, names, inputs, warmup, iterations, json, profile, path, t_create);
        goto done;
    }
    double ms = now_ms();
    if (af_session_run(s, n_in, names, inputs, &err) != AF_OK) {
        fail("%s: %s", path, err.message);
        goto done;
    }
    ms = now_ms() - ms;
    if (out_dir && mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
        fail("cannot create '%s': %s", out_dir, strerror(errno));
        goto done;
    }
    printf("ran %s in %.3f ms (arena %zu bytes)\n", path, ms, af_session_arena_bytes(s));
    for (int k = 0; k < af_session_n_outputs(s); k++) {
        const af_tensor *t = af_session_output(s, k);
        const char *name = af_session_output_name(s, k);
        char dims[160] = "";
        for (int d = 0; d < t->rank; d++)
            snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%lld", d ? "," : "", (long long)t->dims[d]);
        double sum = 0, mx = -INFINITY;
        int64_t n = 1;
        for (int d = 0; d < t->rank; d++) n *= t->dims[d];
        if (t->dtype == AF_DTYPE_FLOAT)
            for (int64_t i = 0; i < n; i++) {
                float x = ((const float *)t->data)[i];
                sum += x;
                if (x > mx) mx = x;
            }
        printf("  %s: %s[%s]", name, af_dtype_name(t->dtype), dims);
        if (t->dtype == AF_DTYPE_FLOAT && n) printf(" sum %.6g max %.6g", sum, mx);
        printf("\n");
        if (out_dir) {
            char file[4096];
            snprintf(file, sizeof file, "%s/%s.pb", out_dir, name);
            for (char *p = file + strlen(out_dir) + 1; *p; p++)
                if (*p == '/' || *p == ':') *p = '_'; /* value names may hold path characters */
            if (af_tensor_write_pb(file, t, name, &err) != AF_OK) {
                fail("%s%s", err.message, "");
                goto done;
            }
        }
    }
    rc = 0;
done:
    for (int i = 0; i < n_in; i++) free(inputs[i].data);
    af_session_free(s);
    af_model_free(m);
    return rc;
}

int main(int argc, char **argv) {
    /* "autofusion --help" and "autofusion run --help": the usage, not a model named --help. */
    for (int i = 1; i < argc && i <= 2; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    if (argc >= 3 && !strcmp(argv[1], "inspect")) return cmd_inspect(argv[2]);
    if (argc >= 3 && !strcmp(argv[1], "run")) return cmd_run(argc - 2, argv + 2, CMD_RUN);
    if (argc >= 3 && !strcmp(argv[1], "bench")) return cmd_run(argc - 2, argv + 2, CMD_BENCH);
    if (argc >= 3 && !strcmp(argv[1], "fuse")) return cmd_run(argc - 2, argv + 2, CMD_FUSE);
    usage(stderr);
    return 2;
}
