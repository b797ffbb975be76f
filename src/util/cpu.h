/*
 * CPU facts the fast kernels are chosen by: the instruction-set level (CPUID plus XGETBV, so a CPU
 * whose OS does not save the wide registers counts as the lower level), the vendor, and the cache
 * sizes (sysfs) that size the GEMM blocking. Detected once, on first use, thread-safely.
 *
 *   af_isa isa = af_cpu_isa();                 // the level kernels should use by default
 *   const af_cpu_info *ci = af_cpu_info_get(); // ci->l2 bytes, ci->isa_max, ...
 *   printf("%s\n", af_isa_name(isa));          // "avx512"
 *
 * The environment variable AF_ISA=avx512|avx2|scalar lowers the default level (it never raises it
 * above what the CPU and OS support); an unknown value is ignored.
 */
#ifndef AF_UTIL_CPU_H
#define AF_UTIL_CPU_H

#include <stddef.h>

/* Ordered: a higher level implies every lower one is usable. */
typedef enum af_isa {
    AF_ISA_SCALAR = 0, /* portable C */
    AF_ISA_AVX2 = 1,   /* AVX2 + FMA3, OS saves YMM */
    AF_ISA_AVX512 = 2, /* AVX-512 F+BW+VL+DQ (+FMA3), OS saves ZMM and opmask registers */
    AF_ISA_COUNT
} af_isa;

/* Who made the CPU (CPUID leaf 0), where a kernel's best choice was measured to differ between
 * them (af_pwdw_min_expanded_bytes, af_conv_winograd_tile, af_gemm_narrow_rows, gemm.c's
 * choose_order). */
typedef enum af_cpu_vendor { AF_CPU_VENDOR_OTHER = 0, AF_CPU_VENDOR_INTEL, AF_CPU_VENDOR_AMD } af_cpu_vendor;

typedef struct af_cpu_info {
    af_cpu_vendor vendor;
    int family;     /* CPUID's display family (AMD: 25 Zen 4, 26 Zen 5); 0 when unknown */
    af_isa isa_max; /* what the CPU and OS support */
    af_isa isa;     /* the default: isa_max lowered by AF_ISA */
    size_t l1d;     /* bytes of L1 data cache per core */
    size_t l2;      /* bytes of L2 per core */
    size_t l3;      /* bytes of L3 per core (the shared L3 divided by the CPUs sharing it) */
} af_cpu_info;

/* Never NULL; the same object for the life of the process. */
const af_cpu_info *af_cpu_info_get(void);
/* The default level (af_cpu_info_get()->isa). */
af_isa af_cpu_isa(void);
/* `want` lowered to what the CPU supports: the level a caller asking for `want` may run. */
af_isa af_cpu_isa_clamp(af_isa want);
/* "scalar", "avx2", "avx512"; "unknown" for anything else. */
const char *af_isa_name(af_isa isa);
/* Parses an af_isa_name() string; returns -1 when it is not one. */
int af_isa_parse(const char *name);

#endif
