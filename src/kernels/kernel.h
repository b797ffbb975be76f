/*
 * Fast kernels: what an execution-plan step runs. A kernel is prepared once at session creation
 * from its anchor node (weights are packed then, with the graph's constants) and run for every
 * inference on the node's inputs and outputs, like the reference kernel, plus an optional fused
 * epilogue program applied to each output tile while it is hot.
 *
 *   af_kernel k;
 *   af_kernel_request req = {.graph = g, .node = n, .choice = {.isa = af_cpu_isa(), .n_threads = 1}};
 *   if (af_kernel_select(&req, &k, err) != AF_OK) ...;   // k.run == NULL: no fast kernel applies
 *   k.run(&k, ctx, epilogue, pool, workspace);             // workspace: k.workspace_bytes, 64-aligned
 *   af_kernel_release(&k);
 *
 * Epilogue coordinates: kernels document how their output maps to the epilogue's (m, n, batch):
 * for NCHW Conv m is the output channel, n the flattened spatial index, batch the image; for
 * MatMul/Gemm m and n are the output's last two dims and batch the flattened leading dims; for
 * elementwise ops the output is one row (m = 0) of all elements.
 */
#ifndef AF_KERNELS_KERNEL_H
#define AF_KERNELS_KERNEL_H

#include <stdbool.h>
#include <stddef.h>

#include "ir/op_ctx.h"
#include "kernels/epilogue.h"
#include "util/cpu.h"
#include "util/threadpool.h"

struct af_kernel;

/* Runs the prepared kernel. ctx is set up as for the reference kernel (outputs allocated with
 * their inferred shapes); epi may be NULL. workspace holds k->workspace_bytes bytes. */
typedef af_status (*af_kernel_run_fn)(const struct af_kernel *k, af_op_ctx *ctx, const af_epilogue *epi,
                                      af_threadpool *pool, void *workspace);

typedef struct af_kernel {
    const char *name;        /* e.g. "conv1x1_gemm__avx512"; static string, for reports */
    void *state;             /* prepared data (packed weights, parameters), owned */
    size_t workspace_bytes;  /* scratch one run needs, for the largest shape it accepts */
    bool takes_epilogue;     /* run applies a fused epilogue (else fusion must not attach one) */
    /* NULL: never. Else true when a run with an epilogue of epi's ops (its vectors may be unset)
     * reads each element of the epilogue's residual before it writes the output element at the
     * same position, and never after: the memory planner may then put the output over the
     * residual. */
    bool (*residual_in_place)(const struct af_kernel *k, const af_epilogue *epi);
    unsigned packed_inputs;  /* bit i: the kernel holds its own copy of constant input i and never
                                reads that input's data while running (only its shape) */
    size_t weight_bytes;     /* bytes of weights it holds (packed or copied), for memory reports */
    af_kernel_run_fn run;    /* NULL: no fast kernel; the reference kernel runs */
    /* NULL: every run is `name`. Else the name of what the latest run took, for reports (a kernel
     * that picks its algorithm from run-time shapes). */
    const char *(*ran)(const struct af_kernel *k);
    void (*free_state)(void *state);
} af_kernel;

/* How a session chooses its kernels. One value, made from the session's ISA and threads and its
 * config (af_fusion_kernel_choice), goes whole to every plan builder (fused, unfused, the verify
 * mode's reference) and into every kernel request, so a setting added here reaches them all. */
typedef struct af_kernel_choice {
    af_isa isa;       /* the level to use (already clamped to the CPU) */
    int n_threads;    /* the session's thread count, for blocking decisions */
    bool no_winograd; /* 3x3 convs on the direct kernels only (config "winograd": false) */
} af_kernel_choice;

typedef struct af_kernel_request {
    const af_graph *graph;
    const af_node *node;  /* the anchor; its constant inputs may be packed */
    af_kernel_choice choice;
    /* Replacement constants for the node's inputs (e.g. Conv weights with a BatchNormalization
     * folded in): entry i, when not NULL, stands for input i, even past node->n_inputs. */
    int n_overrides;
    const af_tensor *const *overrides;
} af_kernel_request;

/* Input i of the request's node as the kernel should see it: an override, else the graph's value
 * (its static shape, and data when constant); NULL when absent. */
const af_tensor *af_kernel_input(const af_kernel_request *req, int i);

/* Fills *k with the fast kernel for req's node, or leaves k->run NULL when none applies (unknown
 * shapes, dtypes other than float32, attributes a fast path does not cover). An error means the
 * node cannot be prepared at all (out of memory). */
af_status af_kernel_select(const af_kernel_request *req, af_kernel *k, af_error *err);
void af_kernel_release(af_kernel *k);

/* Per-family preparation, tried in turn by af_kernel_select; each leaves k->run NULL when its
 * family does not cover the node. */
af_status af_fast_elementwise_prepare(const af_kernel_request *req, af_kernel *k, af_error *err);
af_status af_fast_conv_prepare(const af_kernel_request *req, af_kernel *k, af_error *err);
af_status af_fast_matmul_prepare(const af_kernel_request *req, af_kernel *k, af_error *err);
af_status af_fast_pool_prepare(const af_kernel_request *req, af_kernel *k, af_error *err);
af_status af_fast_norm_prepare(const af_kernel_request *req, af_kernel *k, af_error *err);
af_status af_fast_conv_transpose_prepare(const af_kernel_request *req, af_kernel *k, af_error *err);
af_status af_fast_reduce_prepare(const af_kernel_request *req, af_kernel *k, af_error *err);
af_status af_fast_recurrent_prepare(const af_kernel_request *req, af_kernel *k, af_error *err);
af_status af_fast_resize_prepare(const af_kernel_request *req, af_kernel *k, af_error *err);
af_status af_fast_pad_prepare(const af_kernel_request *req, af_kernel *k, af_error *err);
af_status af_fast_expand_prepare(const af_kernel_request *req, af_kernel *k, af_error *err);
af_status af_fast_transpose_prepare(const af_kernel_request *req, af_kernel *k, af_error *err);
af_status af_fast_mask_prepare(const af_kernel_request *req, af_kernel *k, af_error *err);
af_status af_fast_select_axis_prepare(const af_kernel_request *req, af_kernel *k, af_error *err);
af_status af_fast_einsum_prepare(const af_kernel_request *req, af_kernel *k, af_error *err);

#endif
