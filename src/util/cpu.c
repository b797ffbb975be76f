/* CPU feature detection (CPUID + XGETBV) and cache sizes from sysfs, computed once per process. */
#include "util/cpu.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define AF_CPU_X86 1
#endif

static af_cpu_info info;
static pthread_once_t info_once = PTHREAD_ONCE_INIT;

#ifdef AF_CPU_X86
__attribute__((target("xsave"))) static unsigned long long read_xcr0(void) { return _xgetbv(0); }

static af_isa detect_isa(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return AF_ISA_SCALAR;
    const int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1;
    if (!osxsave || !avx || !fma) return AF_ISA_SCALAR;
    const unsigned long long xcr0 = read_xcr0();
    if ((xcr0 & 0x6) != 0x6) return AF_ISA_SCALAR; /* XMM and YMM state */
    if (__get_cpuid_max(0, NULL) < 7) return AF_ISA_SCALAR;
    __cpuid_count(7, 0, a, b, c, d);
    const int avx2 = (b >> 5) & 1;
    if (!avx2) return AF_ISA_SCALAR;
    const int f = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
    /* Opmask, upper ZMM0-15 and ZMM16-31 state must all be enabled by the OS. */
    if (f && dq && bw && vl && (xcr0 & 0xe0) == 0xe0) return AF_ISA_AVX512;
    return AF_ISA_AVX2;
}

static af_cpu_vendor detect_vendor(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return AF_CPU_VENDOR_OTHER;
    char id[13];
    memcpy(id, &b, 4), memcpy(id + 4, &d, 4), memcpy(id + 8, &c, 4);
    id[12] = '\0';
    if (!strcmp(id, "GenuineIntel")) return AF_CPU_VENDOR_INTEL;
    if (!strcmp(id, "AuthenticAMD")) return AF_CPU_VENDOR_AMD;
    return AF_CPU_VENDOR_OTHER;
}

/* The display family of CPUID leaf 1: the base family, plus the extended one where the base is 15
 * (AMD's Zen 4 is 25, Zen 5 26). */
static int detect_family(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    const int base = (int)((a >> 8) & 0xf);
    return base == 0xf ? base + (int)((a >> 20) & 0xff) : base;
}
#else
static af_isa detect_isa(void) { return AF_ISA_SCALAR; }
static af_cpu_vendor detect_vendor(void) { return AF_CPU_VENDOR_OTHER; }
static int detect_family(void) { return 0; }
#endif

/* Reads a small sysfs file into buf; returns 0 when it cannot. */
static int read_small(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t got = fread(buf, 1, n - 1, f);
    fclose(f);
    buf[got] = '\0';
    return got > 0;
}

/* "32K", "1024K", "32M" -> bytes; 0 when unparsable. */
static size_t parse_size(const char *s) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s) return 0;
    if (*end == 'K') v <<= 10;
    else if (*end == 'M') v <<= 20;
    else if (*end == 'G') v <<= 30;
    return (size_t)v;
}

/* Number of CPUs in a sysfs list like "0-3,8,10-11"; at least 1. */
static int count_cpu_list(const char *s) {
    int n = 0;
    while (*s) {
        char *end;
        long lo = strtol(s, &end, 10);
        if (end == s) break;
        long hi = lo;
        s = end;
        if (*s == '-') {
            hi = strtol(s + 1, &end, 10);
            s = end;
        }
        if (hi >= lo) n += (int)(hi - lo + 1);
        if (*s == ',') s++;
        else break;
    }
    return n > 0 ? n : 1;
}

static void detect_caches(af_cpu_info *ci) {
    for (int idx = 0; idx < 8; idx++) {
        char path[128], buf[256];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", idx);
        if (!read_small(path, buf, sizeof buf)) break;
        const int level = atoi(buf);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", idx);
        if (!read_small(path, buf, sizeof buf) || strncmp(buf, "Instruction", 11) == 0) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", idx);
        if (!read_small(path, buf, sizeof buf)) continue;
        size_t size = parse_size(buf);
        if (!size) continue;
        if (level == 1) {
            ci->l1d = size;
        } else if (level == 2) {
            ci->l2 = size;
        } else if (level == 3) {
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/shared_cpu_list", idx);
            int sharing = read_small(path, buf, sizeof buf) ? count_cpu_list(buf) : 1;
            ci->l3 = size / (size_t)sharing;
        }
    }
}

static void detect(void) {
    /* Conservative defaults for a system without sysfs cache information. */
    info.l1d = 32 << 10;
    info.l2 = 1 << 20;
    info.l3 = 2 << 20;
    detect_caches(&info);
    info.vendor = detect_vendor();
    info.family = detect_family();
    info.isa_max = detect_isa();
    info.isa = info.isa_max;
    const char *env = getenv("AF_ISA");
    if (env && *env) {
        int want = af_isa_parse(env);
        if (want >= 0 && (af_isa)want < info.isa) info.isa = (af_isa)want;
    }
}

const af_cpu_info *af_cpu_info_get(void) {
    pthread_once(&info_once, detect);
    return &info;
}

af_isa af_cpu_isa(void) { return af_cpu_info_get()->isa; }

af_isa af_cpu_isa_clamp(af_isa want) {
    const af_isa max = af_cpu_info_get()->isa_max;
    if ((int)want < 0) return AF_ISA_SCALAR;
    return want > max ? max : want;
}

static const char *const isa_names[AF_ISA_COUNT] = {"scalar", "avx2", "avx512"};

const char *af_isa_name(af_isa isa) {
    return (int)isa >= 0 && isa < AF_ISA_COUNT ? isa_names[isa] : "unknown";
}

int af_isa_parse(const char *name) {
    for (int i = 0; i < AF_ISA_COUNT; i++)
        if (name && strcmp(name, isa_names[i]) == 0) return i;
    return -1;
}
