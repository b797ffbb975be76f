/* libFuzzer harness for load -> session create (fusion at the default level, memory plan) and, when
 * every input has a small static shape, one run on zero-filled inputs. Every stage must succeed or
 * fail with a well-formed error; ASan/UBSan/LeakSanitizer catch the rest.
 * AF_FUZZ_CONFIG=FILE creates every session with that fusion config, and so with the rules files
 * it names: tests/fuzz/hostile.json gives every family "always" and rules that put any op in any
 * family, so the fused-step builders meet shapes they were not written for.
 * AF_FUZZ_CONFIG=FILE:FILE:... picks one config per input, by (size / 4) % count (size % 4 picks the
 * level). tests/fuzz/hostile_FAMILY.json give one family "always" and every other "never": with all
 * families on, the hostile candidates of every family cover the same nodes, and the one the cost
 * layer keeps (the built-in elementwise_chain, mostly) is the only one the scheduler builds, so the
 * squeeze_excite builder never met a gate without its Conv (eb7fa4e) under hostile.json alone. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_common.h"

#define MAX_INPUTS 16
#define MAX_RUN_ELEMS (1 << 16) /* per input: keeps one execution fast */

static void run_once(af_session *s, const af_model *m) {
    int n = af_model_n_inputs(m);
    if (n > MAX_INPUTS) return;
    af_tensor in[MAX_INPUTS];
    const char *names[MAX_INPUTS];
    int made = 0;
    for (int i = 0; i < n; i++) {
        af_value_info vi;
        if (af_model_input_info(m, i, &vi) != AF_OK) abort();
        size_t es = af_dtype_size(vi.dtype);
        if (vi.rank < 0 || es == 0) goto out;
        int64_t count = 1;
        af_tensor *t = &in[made];
        memset(t, 0, sizeof *t);
        t->dtype = vi.dtype;
        t->rank = vi.rank;
        for (int d = 0; d < vi.rank; d++) {
            t->dims[d] = vi.dims[d] < 0 ? 1 : vi.dims[d];
            if (t->dims[d] > MAX_RUN_ELEMS || (count *= t->dims[d] ? t->dims[d] : 1) > MAX_RUN_ELEMS) goto out;
        }
        t->nbytes = (size_t)count * es;
        t->data = calloc(1, t->nbytes ? t->nbytes : 1);
        if (!t->data) goto out;
        names[made++] = vi.name;
    }
    af_error err = {0};
    af_status st = af_session_run(s, made, names, in, &err);
    fuzz_check_error("af_session_run", st, &err);
    if (st == AF_OK)
        for (int i = 0; i < af_session_n_outputs(s); i++) {
            const af_tensor *o = af_session_output(s, i);
            if (o && o->nbytes) {
                volatile uint8_t sink = ((const uint8_t *)o->data)[o->nbytes - 1]; /* ASan checks the size */
                (void)sink;
            }
        }
out:
    for (int i = 0; i < made; i++) free(in[i].data);
}

/* The pick-th (mod their count) of AF_FUZZ_CONFIG's ':'-separated paths, copied to buf; NULL if none. */
static const char *pick_config(size_t pick, char *buf, size_t n) {
    const char *list = getenv("AF_FUZZ_CONFIG");
    if (!list || !*list) return NULL;
    size_t count = 1;
    for (const char *p = list; *p; p++) count += *p == ':';
    const char *start = list;
    for (size_t i = pick % count; i > 0; i--) start = strchr(start, ':') + 1;
    size_t len = strcspn(start, ":");
    if (len == 0 || len >= n) return NULL;
    memcpy(buf, start, len);
    buf[len] = 0;
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    af_load_options lo = af_load_options_default();
    lo.limits = fuzz_limits();
    af_model *m = NULL;
    af_error err = {0};
    af_status st = af_model_load_buffer(data, size, fuzz_base_dir(), &lo, &m, &err);
    fuzz_check_error("af_model_load_buffer", st, &err);
    if (st != AF_OK) return 0;
    af_session_options so = af_session_options_default();
    so.n_threads = 1;
    so.fusion_level = (int)(size % 4); /* levels 0 to 3, chosen by the input itself */
    char config[1024];
    so.config_path = pick_config(size / 4, config, sizeof config);
    af_session *s = NULL;
    st = af_session_create(m, &so, &s, &err);
    fuzz_check_error("af_session_create", st, &err);
    if (st == AF_OK) {
        if (!s) abort();
        run_once(s, m);
    } else if (s) {
        abort();
    }
    af_session_free(s);
    af_model_free(m);
    return 0;
}
