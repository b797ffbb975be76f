/*
 * The autofusion command line: a thin shell over include/autofusion.h.
 *
 *   autofusion inspect MODEL
 *   autofusion run MODEL [--input NAME=FILE.pb ...] [--output-dir DIR] [--threads N] [--seed S]
 *
 * Exit status 0 on success; otherwise 1 with a one-line error naming the cause on stderr.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "autofusion.h"

#define MAX_INPUTS 64

static int fail(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "autofusion: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n");
    return 1;
}

static void usage(FILE *f) {
    fprintf(f, "usage: autofusion inspect MODEL\n"
               "       autofusion run MODEL [--input NAME=FILE.pb ...] [--output-dir DIR] [--threads N] [--seed S]\n");
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

static int cmd_run(int argc, char **argv) {
    const char *path = argv[0], *out_dir = NULL;
    const char *in_names[MAX_INPUTS], *in_files[MAX_INPUTS];
    int n_given = 0, threads = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--input") && i + 1 < argc) {
            char *eq = strchr(argv[++i], '=');
            if (!eq) return fail("--input wants NAME=FILE.pb, got '%s'%s", argv[i], "");
            if (n_given == MAX_INPUTS) return fail("too many --input options%s%s", "", "");
            *eq = 0;
            in_names[n_given] = argv[i];
            in_files[n_given++] = eq + 1;
        } else if (!strcmp(argv[i], "--output-dir") && i + 1 < argc) {
            out_dir = argv[++i];
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            threads = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            rng_state = strtoull(argv[++i], NULL, 10) * 0x9e3779b97f4a7c15ull + 1;
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
    if (af_session_create(m, &opts, &s, &err) != AF_OK) {
        fail("%s: %s", path, err.message);
        goto done;
    }
    n_in = af_model_n_inputs(m);
    if (n_in > MAX_INPUTS) {
        fail("%s: more than 64 inputs%s", path, "");
        n_in = 0;
        goto done;
    }
    for (int g = 0; g < n_given; g++) {
        int found = 0;
        for (int i = 0; i < n_in; i++) {
            af_value_info v;
            af_model_input_info(m, i, &v);
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
        af_model_input_info(m, i, &v);
        names[i] = v.name;
        const char *file = NULL;
        for (int g = 0; g < n_given; g++)
            if (!strcmp(in_names[g], v.name)) file = in_files[g];
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
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (af_session_run(s, n_in, names, inputs, &err) != AF_OK) {
        fail("%s: %s", path, err.message);
        goto done;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
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
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc >= 3 && !strcmp(argv[1], "inspect")) return cmd_inspect(argv[2]);
    if (argc >= 3 && !strcmp(argv[1], "run")) return cmd_run(argc - 2, argv + 2);
    usage(stderr);
    return 2;
}
