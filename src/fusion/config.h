/*
 * The fusion configuration: one JSON file (docs/config.md lists every key with its default).
 * Unknown keys and bad values are errors that name the key.
 *
 *   af_fusion_config cfg;
 *   af_fusion_config_default(&cfg);
 *   if (af_fusion_config_load_file("fusion.json", &cfg, err) != AF_OK) ...;   // or _parse(text)
 *   ... cfg.fusion_level, cfg.policy[AF_FUSION_MATMUL_ADD] ...
 *   af_fusion_config_free(&cfg);
 */
#ifndef AF_FUSION_CONFIG_H
#define AF_FUSION_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "fusion/fusion.h"
#include "ir/op.h"
#include "kernels/kernel.h"

typedef enum af_fusion_policy {
    AF_POLICY_ALWAYS,       /* fuse whenever legal, whatever the cost model says */
    AF_POLICY_MEMORY_AWARE, /* fuse when it does not raise peak memory and the cost model agrees */
    AF_POLICY_AGGRESSIVE,   /* fuse when legal unless the cost model predicts a slowdown */
    AF_POLICY_NEVER,
    AF_POLICY_COUNT
} af_fusion_policy;

typedef enum af_fusion_strategy {
    AF_STRATEGY_AUTO,         /* chosen from the hardware and the graph (docs/fusion.md) */
    AF_STRATEGY_CONSERVATIVE, /* memory-saving fusions only */
    AF_STRATEGY_TEMPORAL,     /* graphs with loops or recurrent structure */
    AF_STRATEGY_AGGRESSIVE,   /* everything profitable */
    AF_STRATEGY_COUNT
} af_fusion_strategy;

#define AF_CONFIG_MAX_RULE_FILES 16

typedef struct af_fusion_config {
    int fusion_level;            /* 0-3; 0 = no fusion. Default 3. */
    double fusion_aggressiveness; /* 0..1: how far beyond break-even the cost model accepts. Default 0.5 */
    int max_fused_ops;           /* nodes per group, 1..AF_FUSION_MAX_NODES. Default 24 */
    bool no_fusion_ops[AF_OP_COUNT]; /* op types never fused ("LayerNormalization", ...) */
    af_fusion_policy policy[AF_FUSION_FAMILY_COUNT]; /* per family; default memory_aware (aggressive for
                                                        elementwise_chain) */
    uint64_t max_mem_usage;      /* bytes; 0 = no limit. "1.5GB", "512MB", or a number of bytes */
    bool enable_dynamic_shape;   /* plan for symbolic dims instead of rejecting them. Default true */
    double shape_elasticity;     /* 0..1: fraction a dim may grow beyond the planned size before a
                                    re-plan. Default 0.25 */
    bool lite_mode;              /* small-footprint mode: skip micro-benchmarks and layout changes. Default false */
    af_fusion_strategy strategy; /* default auto */
    int n_rule_files;
    char *rule_files[AF_CONFIG_MAX_RULE_FILES]; /* extra rule files, owned */
    double weight_latency, weight_memory, weight_energy; /* cost weights; default 1.0, 0.25, 0.1 */
    bool winograd;               /* 3x3 stride-1 convs may run Winograd (fewer products, more rounding
                                    error); false: the direct kernels. Default true */
    bool verify;                 /* run each fused group against its unfused ops once; default false */
    double verify_rtol, verify_atol; /* default 1e-3, 1e-4 */
    char *hardware_cache;        /* file for measured peak GFLOP/s and bandwidth; NULL: default path */
    double peak_gflops, bandwidth_gbs; /* given in config instead of measured (0 = measure) */
} af_fusion_config;

/* Fills cfg with the defaults; frees nothing (call it on a fresh struct). */
void af_fusion_config_default(af_fusion_config *cfg);
/* Parses JSON text over the defaults already in cfg. Errors name the key: "fusion_policy.conv_bn_relu:
 * 'sometimes' is not one of always, memory_aware, aggressive, never". On error cfg is unchanged. */
af_status af_fusion_config_parse(const char *json, af_fusion_config *cfg, af_error *err);
/* As af_fusion_config_parse on a file's text, with relative paths resolved against the file's
 * folder; it also reads each file of "rules" (after the built-in rules, in order) and fails unless
 * all open and parse: "fusion.json: rules[0]: my.rules: cannot open rules file: ...", with the
 * rules loader's status (docs/rules.md). af_fusion_config_parse reads no files. */
af_status af_fusion_config_load_file(const char *path, af_fusion_config *cfg, af_error *err);
void af_fusion_config_free(af_fusion_config *cfg);
/* The kernels a session on isa (clamped to the CPU) and n_threads runs under cfg: every plan the
 * session builds, fused, unfused or the verify mode's reference, takes this one value. */
af_kernel_choice af_fusion_kernel_choice(const af_fusion_config *cfg, af_isa isa, int n_threads);
const char *af_fusion_policy_name(af_fusion_policy p);
const char *af_fusion_strategy_name(af_fusion_strategy s);
/* Parses "1.5GB", "512MB", "64KiB", "1000000" into bytes; AF_ERR_INVALID_ARGUMENT if malformed. */
af_status af_parse_size(const char *text, uint64_t *bytes);

#endif
