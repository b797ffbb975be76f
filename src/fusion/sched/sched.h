/*
 * Layer 3, execution scheduling: turns the accepted fusion candidates into an execution plan in
 * which each group is one step running one kernel. The new plan is built beside any existing one;
 * on failure nothing is left behind, so a running session keeps its old plan untouched.
 *
 *   af_exec_plan plan;
 *   if (af_sched_build(g, &cands, &opts, &plan, err) == AF_OK) ... swap it in ...
 *
 * A candidate the scheduler cannot build a kernel for (an epilogue form the kernels lack) is
 * marked rejected with the reason, and its nodes run unfused.
 */
#ifndef AF_FUSION_SCHED_SCHED_H
#define AF_FUSION_SCHED_SCHED_H

#include "fusion/fusion.h"
#include "runtime/plan.h"

typedef struct af_sched_options {
    af_kernel_choice kernels; /* for every step's kernel */
    int fusion_level;
    bool log;  /* print each rewrite to stderr: "fused Conv 'c1' + Relu 'r1' into step 3" */
    struct af_weight_release *release; /* NULL, or frees packed constants as steps are built
                                          (only for a build no later pass redoes) */
    const char *no_second_chance; /* NULL: a candidate that lost an overlap to a group that is not in
                                     the plan (the scheduler could not build it, or the verify mode
                                     backed it out) is built in its place if it can be. Else nothing
                                     is, and this text is appended to such a candidate's reason. */
} af_sched_options;

af_status af_sched_build(const af_graph *g, af_fusion_candidates *cands, const af_sched_options *opts,
                         af_exec_plan *plan, af_error *err);

/* Compiles the nodes after a Conv/MatMul/Gemm anchor into an epilogue on step s (folding a
 * BatchNormalization right after a Conv into its weights: w_override and b_override are then
 * step-owned tensors). Returns false with `why` filled when some node has no epilogue form. */
bool af_sched_compile_epilogue(const af_graph *g, const af_fusion_candidate *c, af_step *s, af_tensor *w_override,
                               af_tensor *b_override, char *why, size_t why_size);

/* A BatchNormalization's per-channel affine form, y = x * scale + shift, from its statistics; and
 * conv weights [ch][per] with bias b (NULL: zero) that it follows, folded: nw = w * scale, nb =
 * b * scale + shift. Every fold of a BatchNormalization goes through these, so the groups that
 * fold the same one (conv_bn_relu, pointwise_depthwise) give the same bits. */
void af_sched_bn_affine(int64_t ch, const float *gamma, const float *beta, const float *mean, const float *var,
                        float eps, float *scale, float *shift);
void af_sched_fold_affine(int64_t ch, int64_t per, const float *w, const float *b, const float *scale,
                          const float *shift, float *nw, float *nb);

/* The epilogue step of an activation node (Relu, Sigmoid, Tanh, HardSwish, LeakyRelu, HardSigmoid,
 * Clip with constant bounds); false when n has no single-step form. */
bool af_sched_activation_step(const af_graph *g, const af_node *n, af_epi_step *out);

/* Builds the fused region step of an anchor-less elementwise group (see region_step.c). */
bool af_sched_build_region(const af_graph *g, const af_fusion_candidate *c, const af_sched_options *o, af_step *s,
                           char *why, size_t why_size);

/* Builds the fused squeeze-excite step of a squeeze_excite group (see se_step.c). */
bool af_sched_build_se(const af_graph *g, const af_fusion_candidate *c, const af_sched_options *o, af_step *s,
                       char *why, size_t why_size);

/* Builds the fused pointwise + depthwise conv step of a pointwise_depthwise group (see pwdw_step.c). */
bool af_sched_build_pwdw(const af_graph *g, const af_fusion_candidate *c, const af_sched_options *o, af_step *s,
                         char *why, size_t why_size);

/* Builds the fused LayerNorm step of a layernorm group (see layernorm_step.c). */
bool af_sched_build_layernorm(const af_graph *g, const af_fusion_candidate *c, const af_sched_options *o, af_step *s,
                              char *why, size_t why_size);

/* The group member producing value v, or NULL when v comes from outside the group. */
const af_node *af_group_producer(const af_graph *g, const af_fusion_candidate *c, int v);
/* The single group member reading v; NULL when none or several do. */
const af_node *af_group_consumer(const af_graph *g, const af_fusion_candidate *c, int v);
/* The group's Sigmoid when `mul` is SiLU, Mul(v, Sigmoid(v)) in either order, else NULL. */
const af_node *af_group_silu_sigmoid(const af_graph *g, const af_fusion_candidate *c, const af_node *mul);

/* A node standing for a fused group in the executor: reads `inputs`, writes `output`; named after
 * `like`. NULL when out of memory. Free with af_node_clear + af_free (af_step_release does). */
af_node *af_sched_kernel_node(const af_node *like, const char *op_type, const int *inputs, int n_inputs, int output);
/* s->kernel_node for the kernel a builder has made (as af_sched_kernel_node); when out of memory
 * it releases s->kernel, says so in `why` and returns false. */
bool af_sched_attach_kernel_node(af_step *s, const af_node *like, const char *op_type, const int *inputs, int n_inputs,
                                 int output, char *why, size_t why_size);

/* The data of constant value v when it is float32 with exactly `numel` elements; else NULL. */
const float *af_sched_const_floats(const af_graph *g, int v, int64_t numel);

/* Builds the fused attention step of an attention_blocks group (see attention_step.c). */
bool af_sched_build_attention(const af_graph *g, const af_fusion_candidate *c, const af_sched_options *o, af_step *s,
                              char *why, size_t why_size);

#endif
