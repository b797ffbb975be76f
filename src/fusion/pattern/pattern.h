/*
 * Layer 1, pattern recognition: rule templates loaded as data (rules/cv.rules and rules/nlp.rules
 * are built in; users add files through the config's "rules"), a subgraph matcher that finds them
 * in a graph, and region discovery, which groups the elementwise and broadcast nodes the region
 * kernel runs into regions the rules do not offer (a diamond, say). The rule format and the
 * algorithms are in docs/rules.md.
 *
 *   af_rule_set *rs;
 *   af_rules_from_config(&cfg, &rs, err);               // built-in rules + cfg.rule_files
 *   af_rules_load_file(rs, "my.rules", err);             // optional extra rules
 *   af_pattern_find(g, rs, &cfg, &cands, err);          // appends candidates
 *   af_rules_free(rs);
 *
 * Every match is checked for legality (convex: no cycle after merging; closed: intermediates are
 * read only inside the group); illegal matches, and those the config excludes (no_fusion_ops,
 * max_fused_ops, policy never), are still listed, rejected with the reason ("cycle",
 * "intermediate used outside the group", "no_fusion_ops: <Op>", "max_fused_ops", "policy never for
 * <family>").
 * The rest are left undecided (accepted = false, reason "") for the cost layer, which also
 * resolves overlaps between them: overlapping matches of different rules are all listed.
 */
#ifndef AF_FUSION_PATTERN_PATTERN_H
#define AF_FUSION_PATTERN_PATTERN_H

#include "fusion/config.h"
#include "fusion/fusion.h"

typedef struct af_rule_set af_rule_set;

/* A new, empty rule set. */
af_status af_rules_new(af_rule_set **out, af_error *err);
/* A new set holding the built-in rules (compiled into the library; no files are read). */
af_status af_rules_builtin(af_rule_set **out, af_error *err);
/* The built-in rules plus every file of cfg->rule_files, in order (cfg may be NULL). */
af_status af_rules_from_config(const af_fusion_config *cfg, af_rule_set **out, af_error *err);
/* Adds the rules of a text; origin names it in errors: "my.rules:3: unknown op 'Relux'". Errors
 * are AF_ERR_INVALID_ARGUMENT; a rule name already in the set is one. On error rs is unchanged. */
af_status af_rules_parse(af_rule_set *rs, const char *text, const char *origin, af_error *err);
/* As af_rules_parse on a file's contents; AF_ERR_IO when it cannot be read, AF_ERR_LIMIT over 1 MiB. */
af_status af_rules_load_file(af_rule_set *rs, const char *path, af_error *err);
int af_rules_count(const af_rule_set *rs);
/* The name of rule i, or NULL when i is out of range. */
const char *af_rules_name(const af_rule_set *rs, int i);
void af_rules_free(af_rule_set *rs);

/* Appends the candidates found in g to out: the rule matches (fusion_level >= 1), then the regions
 * of discovery (fusion_level >= 3). rs NULL: af_rules_from_config(cfg). cfg NULL: the defaults.
 * Fails only on bad arguments, unreadable rule files or out of memory; out then holds what it held
 * before the call. */
af_status af_pattern_find(const af_graph *g, const af_rule_set *rs, const af_fusion_config *cfg,
                          af_fusion_candidates *out, af_error *err);

#endif
