/*
 * Cost estimates of nodes and fusion candidates on a hardware model (docs/cost_model.md has the
 * formulas and constants): flops, bytes moved, a roofline latency per kernel, the change of peak
 * activation memory and an energy estimate, and the config-weighted score.
 *
 *   af_cost_graph cg;
 *   af_cost_graph_init(&cg, g, err);                 // per-value last readers, once per graph
 *   af_group_estimate e;
 *   af_cost_estimate_group(&cg, &hw, &cands.items[i], &e);
 *   double s = af_cost_score(&e, &cfg);              // > 0: profitable
 *   af_cost_graph_free(&cg);
 *
 * Shapes come from the graph's static shapes; a dim that is unknown (symbolic) is taken as
 * AF_COST_NOMINAL_DIM and the estimate says so (nominal_dims).
 */
#ifndef AF_FUSION_COST_ESTIMATE_H
#define AF_FUSION_COST_ESTIMATE_H

#include <stdbool.h>

#include "fusion/config.h"
#include "fusion/cost/hardware.h"
#include "fusion/fusion.h"

#define AF_COST_NOMINAL_DIM 64       /* stands for an unknown dim */
#define AF_COST_NOMINAL_NUMEL 4096   /* stands for a tensor of unknown rank */

/* Compute efficiency: the fraction of the FMA peak each kind of kernel reaches, calibrated on the
 * library's own kernels with bench/cost_model_check.c (docs/cost_model.md has the measurements). */
#define AF_COST_EFF_GEMM 0.85        /* MatMul, Gemm, 1x1 Conv: the packed GEMM */
#define AF_COST_EFF_CONV_KXK 0.90    /* Conv with a kernel > 1x1: the implicit GEMM over phase planes */
#define AF_COST_EFF_WINOGRAD_4 1.70  /* 3x3 stride-1 Conv on Winograd F(4x4, 3x3): the direct flops
                                        over the peak, above 1 since it makes a quarter of the
                                        products (ResNet-50's 56x56 and 28x28 layers: 1.68-1.77) */
#define AF_COST_EFF_WINOGRAD_2 1.30  /* on F(2x2, 3x3), 4/9 of the products (its 14x14 layers: 1.33) */
#define AF_COST_EFF_DEPTHWISE 0.32   /* depthwise Conv: the channel-blocked kernel, ~20-60 GFLOP/s */
#define AF_COST_EFF_VECTOR 0.25      /* elementwise, softmax, normalizations: SIMD without FMA chains */
#define AF_COST_EFF_REDUCE 0.06      /* pooling and reductions: horizontal sums, strided windows */

/* Fixed time of one kernel call inside the kernel (argument checks, packing set-up, the thread
 * pool), on top of the executor's per-step overhead (af_hw_model.kernel_overhead_us). */
#define AF_COST_FIXED_GEMM_US 0.3
#define AF_COST_FIXED_VECTOR_US 0.04

/* Flops per element of the ops that are not multiply-accumulates. */
#define AF_COST_FLOPS_TRANSCENDENTAL 12.0 /* exp, log, tanh, sigmoid...: polynomial + range reduction */
#define AF_COST_FLOPS_ERF 20.0            /* erf: a longer polynomial */
#define AF_COST_FLOPS_DIVIDE 4.0          /* div, sqrt, reciprocal: slow pipes */
#define AF_COST_FLOPS_SOFTMAX 14.0        /* max, subtract, exp, sum, scale */
#define AF_COST_FLOPS_NORM 8.0            /* mean, variance, normalize, scale, shift */

/* Per-value facts of one graph the estimates need; built once, read-only afterwards. */
typedef struct af_cost_graph {
    const af_graph *g;
    int *last_use; /* per value: index of the last node reading it (subgraph captures count at the
                      capturing node); g->n_nodes for graph outputs; -1 when unread */
    int *n_readers; /* per value: distinct nodes reading it, a subgraph capture at its owner */
} af_cost_graph;

af_status af_cost_graph_init(af_cost_graph *cg, const af_graph *g, af_error *err);
/* af_fusion_is_closed for c, in time proportional to the group's size rather than the graph's. */
bool af_cost_group_closed(const af_cost_graph *cg, const af_fusion_candidate *c);
void af_cost_graph_free(af_cost_graph *cg);

/* One node run as its own kernel. */
typedef struct af_node_cost {
    double flops;
    double bytes;      /* inputs read + outputs written */
    double compute_us; /* flops / (peak * efficiency) */
    double memory_us;  /* bytes / bandwidth for that footprint */
    double fixed_us;   /* the kernel's fixed cost (AF_COST_FIXED_*) */
    double time_us;    /* max(compute, memory) + fixed + the executor's per-step overhead */
} af_node_cost;

void af_cost_node(const af_graph *g, const af_hw_model *hw, int node, af_node_cost *out);

typedef struct af_group_estimate {
    double flops_unfused, flops_fused;  /* fused drops a BatchNormalization folded into its Conv */
    double bytes_unfused, bytes_fused;  /* fused: external inputs (activations and constants) + output */
    double time_unfused_us, time_fused_us;
    double peak_delta;                  /* bytes; negative: the group lowers peak activation memory */
    double energy_unfused_uj, energy_fused_uj;
    bool nominal_dims;                  /* some dim was unknown and taken as AF_COST_NOMINAL_DIM */
} af_group_estimate;

/* Estimates candidate c, whose nodes (at most AF_FUSION_MAX_NODES) must be valid indices of cg->g
 * (the caller checks). */
void af_cost_estimate_group(const af_cost_graph *cg, const af_hw_model *hw, const af_fusion_candidate *c,
                            af_group_estimate *out);

/* score = (w_lat*dt/t_u + w_mem*db/b_u + w_en*de/e_u) / (w_lat + w_mem + w_en), the weighted
 * fractions of the group's unfused time, traffic and energy that fusion saves (<= 1; > 0 means
 * profitable, 0 break-even). 0 when every weight is 0. */
double af_cost_score(const af_group_estimate *e, const af_fusion_config *cfg);
/* The whole graph run unfused (every node its own kernel): the scale af_cost_gain measures in. */
typedef struct af_cost_totals {
    double time_us, bytes, energy_uj;
} af_cost_totals;
void af_cost_graph_totals(const af_cost_graph *cg, const af_hw_model *hw, af_cost_totals *out);
/* gain = (w_lat*dt/T + w_mem*db/B + w_en*de/E) / (w_lat + w_mem + w_en) with T, B, E the graph's
 * totals: the weighted share of the whole model's cost a candidate saves. Unlike the score it is
 * comparable across candidates of different sizes, so overlaps are resolved by it. */
double af_cost_gain(const af_group_estimate *e, const af_fusion_config *cfg, const af_cost_totals *t);

/* The score a memory_aware candidate must reach: AF_COST_THRESHOLD_SPAN * (1 - a), a the
 * fusion_aggressiveness clamped to 0..1: a clear 2% margin at 0, 1% at the default 0.5, and
 * break-even at 1 (anything not predicted to be worse). */
#define AF_COST_THRESHOLD_SPAN 0.02
double af_cost_threshold(const af_fusion_config *cfg);

/* The model's memory footprint for the strategy choice: constant bytes (in a subgraph, the
 * enclosing graphs' constants it captures too), and the largest sum of activation bytes live at
 * once when every node is its own step. */
void af_cost_footprint(const af_cost_graph *cg, double *weight_bytes, double *peak_activation_bytes);

/* Bytes of value v's tensor (unknown dims nominal; *nominal set when one was). */
double af_cost_value_bytes(const af_graph *g, int v, bool *nominal);

#endif
