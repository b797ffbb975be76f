/*
 * The hardware model the cost layer estimates against: cores, ISA, caches, available memory,
 * measured peak compute and memory bandwidth, and energy constants. Measured once (about 60 ms of
 * micro-benchmarks) and cached on disk, or taken from the config.
 *
 *   af_hw_model hw;
 *   af_hw_model_probe(&cfg, &hw, err);           // cfg may be NULL: measure, default cache path
 *   af_hw_model_scale_threads(&hw, 1);           // estimates for a single-threaded session
 *   printf("%.0f GFLOP/s, %.1f GB/s\n", hw.peak_gflops, hw.bandwidth_gbs);
 *
 * Sources, per number (peak compute; bandwidths): cfg->peak_gflops / cfg->bandwidth_gbs when
 * non-zero (taken as is, nothing is measured for it); else cfg->lite_mode: conservative built-in
 * defaults, nothing measured and no cache file touched; else this configuration's entry in the
 * cache file (one entry per CPU model name, core count and ISA level); else measured, settled
 * (ordered by cache level, rounded to two significant digits) and stored as that entry, the file's
 * other entries kept. A cache file of an older format, or one that does not parse, reads as empty
 * and is rewritten with the new entry.
 */
#ifndef AF_FUSION_COST_HARDWARE_H
#define AF_FUSION_COST_HARDWARE_H

#include <stddef.h>
#include <stdint.h>

#include "fusion/config.h"
#include "util/cpu.h"

typedef enum af_hw_source {
    AF_HW_DEFAULT,  /* built-in conservative constant (lite_mode, or a measurement failed) */
    AF_HW_CONFIG,   /* given in the fusion config */
    AF_HW_CACHED,   /* read from the hardware cache file */
    AF_HW_MEASURED, /* measured by this probe */
} af_hw_source;

/*
 * Energy constants: estimates, not measurements. Orders of magnitude from published tables
 * (M. Horowitz, "Computing's energy problem", ISSCC 2014, 45 nm: fp32 multiply ~3.7 pJ, fp32 add
 * ~0.9 pJ, a 64-bit read from a small SRAM cache ~10 pJ and from a ~1 MB one ~100 pJ, a 64-bit DRAM
 * read ~1.3-2.6 nJ). Newer processes lower the arithmetic more than the DRAM figure; only the ratio
 * (DRAM traffic costs ~10x cache traffic and ~100x a flop) matters to the decisions.
 */
#define AF_HW_PJ_PER_FLOP 2.3         /* half of an fp32 FMA (3.7 + 0.9 pJ), order of magnitude */
#define AF_HW_PJ_PER_BYTE_DRAM 150.0  /* ~1.2 nJ per 64-bit DRAM access, order of magnitude */
#define AF_HW_PJ_PER_BYTE_CACHE 10.0  /* L2-sized SRAM, ~80 pJ per 64 bits, order of magnitude */

/* The executor's fixed cost per plan step (shape inference, output placement, dispatch), measured
 * as (session run - sum of the kernels alone) / steps on the small fixtures with
 * bench/cost_model_check.c: 0.1-0.8 us (docs/cost_model.md). */
#define AF_HW_KERNEL_OVERHEAD_US 0.5

typedef struct af_hw_model {
    char cpu_model[96];       /* /proc/cpuinfo "model name", or "unknown" */
    af_isa isa;               /* the level the fast kernels use (af_cpu_isa()) */
    bool winograd;            /* the runtime may run 3x3 convs on Winograd (config "winograd") */
    int n_cores;              /* threads the estimates assume: the affinity mask's CPUs, or as scaled */
    int n_cores_probed;       /* CPUs in the affinity mask when probed */
    size_t l1d, l2, l3;       /* bytes per core (l3: this core's share of the shared L3) */
    uint64_t mem_total;       /* physical memory (MemTotal), bytes */
    uint64_t mem_available;   /* MemAvailable, lowered to the cgroup's limit minus its usage, bytes */
    double peak_gflops_core;  /* fp32 FMA throughput of one core at `isa`, GFLOP/s */
    double peak_gflops;       /* peak_gflops_core * n_cores */
    double bw_l2_core_gbs;    /* one core copying an L2-resident buffer, GB/s (read + write bytes) */
    double bw_l3_core_gbs;    /* one core copying an L3-resident buffer */
    double bw_dram_core_gbs;  /* one core streaming a buffer larger than the L3 */
    double bw_dram_all_gbs;   /* every probed core streaming together: the socket's DRAM bandwidth */
    double bandwidth_gbs;     /* DRAM bandwidth for n_cores: min(bw_dram_all, bw_dram_core * n_cores) */
    double kernel_overhead_us;
    double pj_per_flop, pj_per_byte_dram, pj_per_byte_cache;
    af_hw_source peak_source, bandwidth_source;
    double bench_ms;          /* time this probe spent in micro-benchmarks (0: none ran) */
} af_hw_model;

/* Fills *hw. Never fails for lack of a cache or a benchmark (defaults fill the gaps); returns
 * AF_ERR_INVALID_ARGUMENT only for a NULL hw. cfg may be NULL (measure, default cache path). */
af_status af_hw_model_probe(const af_fusion_config *cfg, af_hw_model *hw, af_error *err);
/* The built-in conservative model (what lite_mode uses): CPU facts probed, numbers not measured. */
void af_hw_model_default(af_hw_model *hw);
/* Re-targets the model at n_threads threads (>= 1): peak and DRAM bandwidth scale with it. */
void af_hw_model_scale_threads(af_hw_model *hw, int n_threads);
/* Microseconds to move `footprint` bytes (read + written) in one kernel: the first L2-sized part
 * (the cores' L2 together) at L2 speed, the part that fits in the L3 at L3 speed, the rest at DRAM
 * speed. Continuous in the footprint, so a slightly larger working set costs slightly more. */
double af_hw_memory_us(const af_hw_model *hw, double footprint);
/* The effective bandwidth in GB/s of that: footprint / af_hw_memory_us. */
double af_hw_bandwidth_for(const af_hw_model *hw, double footprint);
/* Energy per byte moved for a kernel touching `footprint` bytes: cache or DRAM constant. */
double af_hw_pj_per_byte_for(const af_hw_model *hw, double footprint);

/* The cache file used when cfg->hardware_cache is NULL: $XDG_CACHE_HOME/autofusion/hardware.txt,
 * else $HOME/.cache/autofusion/hardware.txt. Writes "" when neither variable is set. */
void af_hw_default_cache_path(char *buf, size_t size);

/* Bytes of memory the process may still use, read below `root` ("" for the real system; tests
 * point it at a fake tree): min(/proc/meminfo MemAvailable, cgroup v2 memory.max - memory.current,
 * cgroup v1 memory.limit_in_bytes - memory.usage_in_bytes). 0 when nothing can be read. */
uint64_t af_hw_available_memory(const char *root);

const char *af_hw_source_name(af_hw_source s);

#endif
