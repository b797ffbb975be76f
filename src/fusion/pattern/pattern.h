/*
 * Layer 1, pattern recognition: rule templates loaded as data (rules/cv.rules and rules/nlp.rules
 * are built in; users add files through the config's "rules"), matched against a graph to produce
 * fusion candidates. The format is in docs/rules.md.
 *
 *   af_rule_set *rs;
 *   af_rules_builtin(&rs, err);
 *   af_rules_load_file(rs, "my.rules", err);             // optional extra rules
 *   af_pattern_find(g, rs, &cfg, &cands, err);          // appends candidates
 *   af_rules_free(rs);
 *
 * Every match is checked for legality (convex: no cycle after merging; closed: intermediates are
 * read only inside the group); illegal matches, and those the config excludes (no_fusion_ops,
 * max_fused_ops, policy never), are still listed, rejected with the reason. The rest are left
 * undecided for the cost layer, which also resolves overlaps between them.
 */
#ifndef AF_FUSION_PATTERN_PATTERN_H
#define AF_FUSION_PATTERN_PATTERN_H

#include "fusion/config.h"
#include "fusion/fusion.h"

typedef struct af_rule_set af_rule_set;

af_status af_rules_builtin(af_rule_set **out, af_error *err);
/* Parses rules text (origin names it in errors: "rules/cv.rules:3: unknown family 'x'"). */
af_status af_rules_parse(af_rule_set *rs, const char *text, const char *origin, af_error *err);
af_status af_rules_load_file(af_rule_set *rs, const char *path, af_error *err);
int af_rules_count(const af_rule_set *rs);
void af_rules_free(af_rule_set *rs);

af_status af_pattern_find(const af_graph *g, const af_rule_set *rs, const af_fusion_config *cfg,
                          af_fusion_candidates *out, af_error *err);

#endif
