/*
 * The execution plan a session runs: an ordered list of steps. Unfused, every node is one step
 * (its fast kernel, or the reference kernel); a fused step covers a group of nodes, runs one
 * kernel for all of them, and writes only the group's output: the intermediates never exist.
 * Built by the fusion scheduler (src/fusion/sched/) or by af_exec_plan_unfused; immutable once
 * built, so a new plan can be built beside a running one and swapped in.
 *
 *   af_exec_plan plan;
 *   af_kernel_choice kc = {.isa = isa, .n_threads = n_threads};
 *   af_exec_plan_unfused(g, &kc, false, NULL, &plan, err);
 *   ... af_exec_run(&e, err) with e.plan = &plan ...
 *   af_exec_plan_free(&plan);
 */
#ifndef AF_RUNTIME_PLAN_H
#define AF_RUNTIME_PLAN_H

#include "ir/graph.h"
#include "kernels/kernel.h"

typedef struct af_step {
    int anchor;           /* the node whose inputs the kernel reads (the only node when unfused) */
    int n_nodes;
    int *nodes;           /* every node the step covers, in topological order; owned */
    int output;           /* value the step writes (a fused group's output); -1 unfused */
    af_kernel kernel;     /* run NULL: the anchor's reference kernel (unfused steps only) */
    af_node *kernel_node; /* a node synthesized for the kernel (e.g. LayerNorm from its parts), owned, or NULL */
    int n_kernel_inputs;  /* with kernel_node: its inputs are these value ids */
    int n_held;
    int held[16];         /* constants the step copied when it was built (folded BatchNorm
                             statistics, the squeeze-excite weights) and never reads in place */
    af_epilogue epi;      /* fused epilogue; AF_EPI_ADD steps get their tensor per run: */
    int n_residuals;
    int residual_step[AF_EPI_MAX_STEPS];  /* index into epi.steps */
    int residual_value[AF_EPI_MAX_STEPS]; /* value id whose data that step adds; a step whose
                                             batch_stride is -1 (a MatMul output whose rows are
                                             symbolic) takes rows x columns of the actual output */
    int n_owned;
    void *owned[8];       /* buffers the step's kernel points into (folded weights, vectors) */
    int family;           /* af_fusion_family of a fused step, -1 unfused */
    char rule[64];        /* the rule that made the group ("" unfused) */
} af_step;

typedef struct af_exec_plan {
    int n_steps;
    af_step *steps;
    size_t workspace_bytes; /* the largest kernel scratch */
    int fusion_level;
    double prepare_ms;      /* time spent preparing kernels (packing weights, freeing the raw ones
                               packed), unfused or fused alike */
} af_exec_plan;

struct af_weight_release;
/* One step per node, with the fast kernels `kernels` chooses where one applies (none if
 * reference_only). release, when not NULL, frees each packed constant once its last reader is
 * built (runtime/weight_release.h). */
af_status af_exec_plan_unfused(const af_graph *g, const af_kernel_choice *kernels, bool reference_only,
                               struct af_weight_release *release, af_exec_plan *plan, af_error *err);
void af_exec_plan_free(af_exec_plan *plan);
/* Records that step s copied constant v at build time (s->held); a full list drops it, which only
 * keeps v's data. */
void af_step_hold(af_step *s, int v);
void af_step_release(af_step *s);
/* Values a step reads from outside itself (inputs of its nodes not produced inside it), written
 * to out (at most cap); returns the count. */
int af_step_reads(const af_graph *g, const af_step *s, int *out, int cap);
/* The values a step writes: its output when fused, else its node's outputs; returns the count. */
int af_step_writes(const af_graph *g, const af_step *s, int *out, int cap);

#endif
