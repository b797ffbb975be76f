#include "util/limits.h"

af_limits af_limits_default(void) {
    return (af_limits){
        .max_file_bytes = (uint64_t)2 << 30, /* protobuf's own 2 GiB message limit */
        .max_nodes = 1000000,
        .max_rank = AF_MAX_RANK,
        .max_graph_depth = 16,
        .max_tensor_bytes = (uint64_t)4 << 30,
        .max_initializer_bytes = (uint64_t)8 << 30,
        .max_fold_bytes = (uint64_t)64 << 20,
        .max_activation_bytes = (uint64_t)16 << 30,
        .max_attr_elems = 1000000,
        .max_string_bytes = 65536,
        .max_loop_iterations = 100000000,
    };
}

void af_limits_override(const af_limits *base, const af_limits *over, af_limits *out) {
    af_limits r = *base;
    if (over) {
#define AF_TAKE(f) if (over->f) r.f = over->f
        AF_TAKE(max_file_bytes);
        AF_TAKE(max_nodes);
        AF_TAKE(max_rank);
        AF_TAKE(max_graph_depth);
        AF_TAKE(max_tensor_bytes);
        AF_TAKE(max_initializer_bytes);
        AF_TAKE(max_fold_bytes);
        AF_TAKE(max_activation_bytes);
        AF_TAKE(max_attr_elems);
        AF_TAKE(max_string_bytes);
        AF_TAKE(max_loop_iterations);
#undef AF_TAKE
    }
    if (r.max_rank < 1 || r.max_rank > AF_MAX_RANK) r.max_rank = AF_MAX_RANK;
    if (r.max_graph_depth < 1) r.max_graph_depth = 1;
    if (r.max_graph_depth > AF_LIMIT_MAX_GRAPH_DEPTH) r.max_graph_depth = AF_LIMIT_MAX_GRAPH_DEPTH;
    af_limits d = af_limits_default(); /* negative counts mean "the default" too */
    if (r.max_nodes < 0) r.max_nodes = d.max_nodes;
    if (r.max_attr_elems < 0) r.max_attr_elems = d.max_attr_elems;
    if (r.max_loop_iterations < 0) r.max_loop_iterations = d.max_loop_iterations;
    *out = r;
}

void af_limits_resolve(const af_limits *in, af_limits *out) {
    af_limits d = af_limits_default();
    af_limits_override(&d, in, out);
}
