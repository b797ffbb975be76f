/*
 * A loaded model: the graph plus what the file said about itself, kept so the writer can
 * round-trip it. Created by the loader (src/onnx/load.c), freed with af_model_free.
 */
#ifndef AF_IR_MODEL_H
#define AF_IR_MODEL_H

#include "ir/graph.h"

typedef struct af_opset_id {
    char *domain;
    int64_t version;
} af_opset_id;

struct af_model {
    af_graph *graph;
    int64_t ir_version;
    char *producer_name;
    char *producer_version;
    int n_opsets;
    af_opset_id *opsets;
    af_limits limits; /* the limits it was loaded with; sessions start from these */
};

#endif
