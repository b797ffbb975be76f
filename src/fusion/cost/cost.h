/*
 * Layer 2, cost evaluation: scores every undecided fusion candidate on a hardware model and accepts
 * or rejects it under the config's fusion_level, per-family policy and strategy, then resolves
 * overlaps between accepted groups. docs/cost_model.md has the formulas, constants and rules.
 *
 *   af_hw_model hw;
 *   af_hw_model_probe(&cfg, &hw, err);
 *   af_cost_evaluate(g, &hw, &cfg, &cands, err);     // sets est_*, score, accepted, reason
 *   for (int i = 0; i < cands.n; i++) puts(cands.items[i].reason);
 *                                                    // "accepted: saves 3.1 us, 392.0 KiB traffic"
 * Candidates already decided (accepted, or with a reason from the pattern layer) keep their
 * decision and reason; their estimates are still filled in. Accepted candidates never share a node
 * when this returns.
 */
#ifndef AF_FUSION_COST_COST_H
#define AF_FUSION_COST_COST_H

#include "fusion/config.h"
#include "fusion/cost/estimate.h"
#include "fusion/cost/hardware.h"
#include "fusion/fusion.h"

/* Strategy auto: conservative when weights + peak activations exceed this fraction of the
 * available memory, or of max_mem_usage when one is set. */
#define AF_COST_AUTO_MEM_FRACTION 0.5
#define AF_COST_AUTO_LIMIT_FRACTION 0.8
/* Strategy temporal: a candidate is "recurrent" when at least this many candidates share its rule,
 * op sequence and output shape (unrolled layers, loop-like repeats). */
#define AF_COST_REPEAT_MIN 4

/* Fails only on bad arguments or out of memory (candidates are then left as they were). */
af_status af_cost_evaluate(const af_graph *g, const af_hw_model *hw, const af_fusion_config *cfg,
                           af_fusion_candidates *cands, af_error *err);

/* cfg->strategy unless it is auto; for auto, in order: conservative when the model's footprint is
 * tight (see AF_COST_AUTO_*_FRACTION), temporal when the graph has Loop or Scan nodes, else
 * aggressive. Never returns AF_STRATEGY_AUTO. */
af_fusion_strategy af_cost_choose_strategy(const af_graph *g, const af_hw_model *hw, const af_fusion_config *cfg);

#endif
