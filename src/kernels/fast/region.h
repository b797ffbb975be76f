/*
 * The fused elementwise region kernel: runs a group of elementwise and broadcast ops (no anchor)
 * as one pass over its output. The output is cut into tiles of a few thousand elements; each
 * tile evaluates the whole program with every intermediate held in a per-thread scratch tile, so
 * the intermediates never reach memory.
 *
 * Every op is evaluated in the output's index space: an elementwise op commutes with broadcasting,
 * so an intermediate that is smaller than the output (before a broadcast Add, say) may be computed
 * once per output element instead. Each input of the region is, at run time, either the output's
 * size (read in place), one element (a scalar), or broadcast along some dims (gathered per tile).
 *
 *   af_region_program p = {.n_instrs = 2, .instrs = ins, .n_inputs = 2};
 *   af_region_kernel_make(&p, isa, n_threads, &k, err);   // k.run over the kernel node's inputs
 */
#ifndef AF_KERNELS_FAST_REGION_H
#define AF_KERNELS_FAST_REGION_H

#include "kernels/kernel.h"

#define AF_REGION_MAX_ARGS 8                        /* inputs of one instruction */
#define AF_REGION_MAX_INPUTS (AF_REGION_MAX_ARGS * 4) /* values one region reads from outside */

typedef enum af_region_arg_kind {
    AF_REGION_NONE,   /* an omitted optional input */
    AF_REGION_INPUT,  /* input `index` of the kernel's node */
    AF_REGION_SLOT,   /* the result of instruction `index` (an earlier one) */
} af_region_arg_kind;

typedef struct af_region_arg {
    af_region_arg_kind kind;
    int index;
} af_region_arg;

/* A float32 op of the vector layer's (src/kernels/fast/vec_internal.h): ew_unary with a, b;
 * ew_binary of two operands, either of which may be a scalar; or ew_binary folded over every
 * operand left to right (the variadic Sum, Max, Min; Mean then divides by their count), as the
 * unfused kernel folds them, the first two not both scalars. */
typedef enum af_region_vec_kind {
    AF_REGION_VEC_NONE,
    AF_REGION_VEC_UNARY,
    AF_REGION_VEC_BINARY,
    AF_REGION_VEC_FOLD,
} af_region_vec_kind;
typedef struct af_region_vec {
    af_region_vec_kind kind;
    int op; /* af_ew_unary_op or af_ew_binary_op */
    float a, b;
    bool mean; /* AF_REGION_VEC_FOLD: divide by the operand count */
} af_region_vec;

typedef struct af_region_instr {
    const af_node *node;   /* the graph node: its op and attributes (the graph outlives the kernel) */
    af_dtype dtype;        /* its output's element type */
    int n_args;
    af_region_arg args[AF_REGION_MAX_ARGS];
    bool has_epi;          /* float32 unary op with a vectorized epilogue form: */
    af_epi_step epi;       /*   run as copy + this step */
    af_region_vec vec;     /* else a float32 op the vector kernels run (kind NONE: the reference) */
} af_region_instr;

typedef struct af_region_program {
    int n_instrs;          /* the last instruction writes the kernel's output */
    af_region_instr *instrs;
    int n_inputs;          /* inputs of the kernel's node */
} af_region_program;

/* A kernel running p (copied). AF_ERR_INVALID_ARGUMENT when p is malformed (an argument naming a
 * later slot or a missing input), AF_ERR_OUT_OF_MEMORY. */
af_status af_region_kernel_make(const af_region_program *p, af_isa isa, int n_threads, af_kernel *k, af_error *err);

#endif
