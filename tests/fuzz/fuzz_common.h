/*
 * Shared by the libFuzzer harnesses: the limits they load under (small enough that no input can
 * make the fuzzer run out of memory legitimately) and the checks every failure must pass. Any
 * violation aborts, which libFuzzer reports as a crash with the input that caused it.
 */
#ifndef AF_TESTS_FUZZ_COMMON_H
#define AF_TESTS_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autofusion.h"

static af_limits fuzz_limits(void) {
    af_limits lim = af_limits_default();
    lim.max_file_bytes = 8 << 20;
    lim.max_tensor_bytes = 64 << 20;
    lim.max_initializer_bytes = 128 << 20;
    lim.max_activation_bytes = 256 << 20;
    lim.max_fold_bytes = 4 << 20;
    lim.max_nodes = 20000;
    lim.max_loop_iterations = 1000;
    return lim;
}

/* External data resolves against AF_FUZZ_BASE_DIR when set (the smoke run points it at
 * tests/robustness, which holds ext_data.bin); otherwise external data is refused. */
static const char *fuzz_base_dir(void) {
    const char *d = getenv("AF_FUZZ_BASE_DIR");
    return d && *d ? d : NULL;
}

/* A failed call: a real error status that matches err, a non-empty one-line message. */
static void fuzz_check_error(const char *what, af_status st, const af_error *err) {
    if (st == AF_OK) return;
    if (st <= AF_OK || st >= AF_STATUS_COUNT || err->status != st || !err->message[0] ||
        strpbrk(err->message, "\r\n") || !memchr(err->message, 0, sizeof err->message)) {
        fprintf(stderr, "%s: bad error report: status %d, err.status %d, message \"%.511s\"\n", what, (int)st,
                (int)err->status, err->message);
        abort();
    }
}

#endif
