/*
 * The recurrent ops RNN, GRU and LSTM described once: attributes read and checked, the sizes their
 * inputs imply, shared by the shape functions and the reference kernels.
 *
 *   af_rnn_desc d;
 *   if (af_rnn_desc_init(ctx, &d) != AF_OK) return ...;  // fails naming the node and the cause
 *   for (int dir = 0; dir < d.n_dirs; dir++) ... d.act[dir][0] ... d.hidden ...
 */
#ifndef AF_IR_SHAPE_RECURRENT_H
#define AF_IR_SHAPE_RECURRENT_H

#include <stdbool.h>

#include "ir/op_ctx.h"

enum {
    AF_RNN_MAX_DIRS = 2, /* bidirectional */
    AF_RNN_MAX_ACTS = 3, /* activations per direction: LSTM's f, g and h */
};

/* Inputs and outputs by position, as the spec numbers them (initial_c, P and Y_c: LSTM only). */
enum {
    AF_RNN_IN_X, AF_RNN_IN_W, AF_RNN_IN_R, AF_RNN_IN_B, AF_RNN_IN_SEQ_LENS, AF_RNN_IN_INITIAL_H,
    AF_RNN_IN_INITIAL_C, AF_RNN_IN_P,
};
enum { AF_RNN_OUT_Y, AF_RNN_OUT_Y_H, AF_RNN_OUT_Y_C };

/* The activation functions the spec lists, with the ONNX op of the same name's defaults. */
typedef enum af_rnn_act_kind {
    AF_RNN_ACT_RELU,
    AF_RNN_ACT_TANH,
    AF_RNN_ACT_SIGMOID,
    AF_RNN_ACT_AFFINE,           /* alpha * x + beta (1, 0) */
    AF_RNN_ACT_LEAKY_RELU,       /* alpha 0.01 */
    AF_RNN_ACT_THRESHOLDED_RELU, /* alpha 1 */
    AF_RNN_ACT_SCALED_TANH,      /* alpha * tanh(beta * x) (1, 1) */
    AF_RNN_ACT_HARD_SIGMOID,     /* alpha 0.2, beta 0.5 */
    AF_RNN_ACT_ELU,              /* alpha 1 */
    AF_RNN_ACT_SOFTSIGN,
    AF_RNN_ACT_SOFTPLUS,
} af_rnn_act_kind;

typedef struct af_rnn_act {
    af_rnn_act_kind kind;
    float alpha, beta;
} af_rnn_act;

typedef struct af_rnn_desc {
    int n_gates;     /* gate blocks in W and R: 1 (RNN), 3 (GRU: z r h), 4 (LSTM: i o f c) */
    int n_acts;      /* activations per direction: 1 (RNN f), 2 (GRU f g), 3 (LSTM f g h) */
    int n_dirs;      /* 2 when bidirectional, else 1 */
    bool reverse;    /* direction = reverse: the one direction runs from the last valid step */
    bool batch_first; /* layout = 1: X [batch, seq, input], Y [batch, seq, dirs, hidden] and the
                         states [batch, dirs, hidden]; else X [seq, batch, input], Y [seq, dirs,
                         batch, hidden], states [dirs, batch, hidden] */
    int64_t seq, batch, input, hidden; /* -1 where still unknown */
    float clip;      /* > 0: gate pre-activations are clamped to [-clip, clip]; 0: no clip */
    bool input_forget;        /* LSTM: the forget gate is 1 - the input gate */
    bool linear_before_reset; /* GRU: R_h applies to H before the reset gate multiplies it */
    af_rnn_act act[AF_RNN_MAX_DIRS][AF_RNN_MAX_ACTS]; /* [dir][f, g, h] */
} af_rnn_desc;

/* Reads the node's attributes (direction, hidden_size, layout, clip, activations with their alpha
 * and beta, input_forget, linear_before_reset) and checks the inputs' dtypes, ranks and dims
 * against them and each other; fails via c naming the cause. Unknown dims are left -1. */
af_status af_rnn_desc_init(const af_op_ctx *c, af_rnn_desc *d);

/* The family's shape functions; kernels re-run them on the actual inputs to validate. */
af_status af_infer_RNN(af_op_ctx *ctx);
af_status af_infer_GRU(af_op_ctx *ctx);
af_status af_infer_LSTM(af_op_ctx *ctx);

#endif
