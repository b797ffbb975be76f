/* The hardware cache file (src/fusion/cost/hardware.c, docs/cost_model.md): one entry per CPU
 * model, core count and ISA level, each run updating only its own; old-format and corrupt files
 * read as absent; measured figures settled (ordered, two significant digits) before use. Every
 * test keeps its file under TMPDIR, never the user's cache. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_SET */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fusion/cost/hardware.h"
#include "unit.h"

static void cache_path(char *buf, size_t size, const char *leaf) {
    const char *t = getenv("TMPDIR");
    snprintf(buf, size, "%s/af_test_hw_cache_%ld_%s", t && *t ? t : "/tmp", (long)getpid(), leaf);
}

static void write_file(const char *path, const char *text, size_t len) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fwrite(text, 1, len, f);
    fclose(f);
}

static void read_file(const char *path, char *buf, size_t size) {
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f) return;
    size_t got = fread(buf, 1, size - 1, f);
    buf[got] = '\0';
    fclose(f);
}

static void config_with_cache(af_fusion_config *cfg, const char *path) {
    af_fusion_config_default(cfg);
    cfg->hardware_cache = (char *)path;
}

/* True when v has at most two significant digits (what the probe stores and uses). */
static bool two_digits(double v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.2g", v);
    return strtod(buf, NULL) == v;
}

static bool same_figures(const af_hw_model *a, const af_hw_model *b) {
    return a->peak_gflops_core == b->peak_gflops_core && a->bw_l2_core_gbs == b->bw_l2_core_gbs &&
           a->bw_l3_core_gbs == b->bw_l3_core_gbs && a->bw_dram_core_gbs == b->bw_dram_core_gbs &&
           a->bw_dram_all_gbs == b->bw_dram_all_gbs;
}

/* One entry as the probe writes it. */
static int entry_text(char *buf, size_t size, const char *cpu, int cores, const char *isa, double peak, double bw) {
    int n = snprintf(buf, size, "\ncpu=%s\ncores=%d\nisa=%s\npeak_gflops_core=%g\n", cpu, cores, isa, peak);
    if (bw > 0 && n > 0 && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n,
                      "bw_l2_core_gbs=%g\nbw_l3_core_gbs=%g\nbw_dram_core_gbs=%g\nbw_dram_all_gbs=%g\n", bw, bw, bw, bw);
    return n;
}

AF_TEST(hw_cache_keeps_one_entry_per_cpu_cores_and_isa) {
    char path[512];
    cache_path(path, sizeof path, "entries.txt");
    remove(path);
    af_fusion_config cfg;
    config_with_cache(&cfg, path);
    af_hw_model hw;
    CHECK(af_hw_model_probe(&cfg, &hw, NULL) == AF_OK);
    CHECK(hw.peak_source == AF_HW_MEASURED && hw.bandwidth_source == AF_HW_MEASURED);
    /* settled figures: ordered by cache level, two significant digits */
    CHECK(hw.bw_l2_core_gbs >= hw.bw_l3_core_gbs && hw.bw_l3_core_gbs >= hw.bw_dram_core_gbs);
    CHECK(hw.bw_dram_all_gbs >= hw.bw_dram_core_gbs);
    CHECK(two_digits(hw.peak_gflops_core) && two_digits(hw.bw_l2_core_gbs) && two_digits(hw.bw_l3_core_gbs) &&
          two_digits(hw.bw_dram_core_gbs) && two_digits(hw.bw_dram_all_gbs));

    const char *mine = af_isa_name(hw.isa), *other = af_isa_name((af_isa)((hw.isa + 1) % AF_ISA_COUNT));
    const int n = hw.n_cores_probed;
    /* Other configurations around this one: another core count, another ISA (peak only), another
     * CPU; then this one's entry, which is the one read. */
    char others[2048], file[4096], e[512];
    int used = 0;
    used += entry_text(others + used, sizeof others - (size_t)used, hw.cpu_model, n + 1, mine, 5, 6);
    used += entry_text(others + used, sizeof others - (size_t)used, hw.cpu_model, n, other, 7, 0);
    used += entry_text(others + used, sizeof others - (size_t)used, "Some Other CPU", n, mine, 9, 9);
    entry_text(e, sizeof e, hw.cpu_model, n, mine, 3, 4);
    snprintf(file, sizeof file, "version=2\n%s%s", others, e);
    write_file(path, file, strlen(file));
    af_hw_model cached;
    CHECK(af_hw_model_probe(&cfg, &cached, NULL) == AF_OK);
    CHECK(cached.peak_source == AF_HW_CACHED && cached.bandwidth_source == AF_HW_CACHED);
    CHECK(cached.peak_gflops_core == 3 && cached.bw_l2_core_gbs == 4 && cached.bw_dram_all_gbs == 4);

    /* Without this configuration's entry it is measured and added; the others stay as they were. */
    snprintf(file, sizeof file, "version=2\n%s", others);
    write_file(path, file, strlen(file));
    af_hw_model measured;
    CHECK(af_hw_model_probe(&cfg, &measured, NULL) == AF_OK);
    CHECK(measured.peak_source == AF_HW_MEASURED && measured.bandwidth_source == AF_HW_MEASURED);
    char text[8192];
    read_file(path, text, sizeof text);
    CHECK(strstr(text, "version=2\n") != NULL);
    CHECK(strstr(text, others) != NULL);
    snprintf(e, sizeof e, "\ncpu=%s\ncores=%d\nisa=%s\npeak_gflops_core=", hw.cpu_model, n, mine);
    CHECK(strstr(text, e) != NULL);
    /* and read back as exactly the figures the measuring run used */
    af_hw_model again;
    CHECK(af_hw_model_probe(&cfg, &again, NULL) == AF_OK);
    CHECK(again.peak_source == AF_HW_CACHED && again.bandwidth_source == AF_HW_CACHED && again.bench_ms == 0);
    CHECK(same_figures(&again, &measured));
    CHECK(again.bandwidth_gbs == measured.bandwidth_gbs && again.peak_gflops == measured.peak_gflops);
    remove(path);
}

/* The reported failure: a run with one allowed CPU replaced the file's figures for all of them, so
 * the next run with every CPU measured again (and, on a busy machine, planned differently). */
AF_TEST(hw_cache_a_run_on_fewer_cpus_keeps_the_full_mask_entry) {
    cpu_set_t full;
    CPU_ZERO(&full);
    if (sched_getaffinity(0, sizeof full, &full) != 0 || CPU_COUNT(&full) < 2) {
        printf("  skipped: needs at least 2 CPUs in the affinity mask\n");
        return;
    }
    char path[512];
    cache_path(path, sizeof path, "cores.txt");
    remove(path);
    af_fusion_config cfg;
    config_with_cache(&cfg, path);
    af_hw_model all;
    CHECK(af_hw_model_probe(&cfg, &all, NULL) == AF_OK);
    CHECK(all.n_cores_probed == CPU_COUNT(&full) && all.bandwidth_source == AF_HW_MEASURED);

    cpu_set_t one;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &full)) {
            CPU_SET(c, &one);
            break;
        }
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
    af_hw_model single;
    CHECK(af_hw_model_probe(&cfg, &single, NULL) == AF_OK);
    CHECK(sched_setaffinity(0, sizeof full, &full) == 0);
    CHECK(single.n_cores_probed == 1);
    CHECK(single.peak_source == AF_HW_MEASURED && single.bandwidth_source == AF_HW_MEASURED);

    af_hw_model back;
    CHECK(af_hw_model_probe(&cfg, &back, NULL) == AF_OK);
    CHECK(back.n_cores_probed == all.n_cores_probed);
    CHECK(back.peak_source == AF_HW_CACHED && back.bandwidth_source == AF_HW_CACHED && back.bench_ms == 0);
    CHECK(same_figures(&back, &all));
    CHECK(back.bandwidth_gbs == all.bandwidth_gbs);
    /* and the one-CPU entry is still there for the next such run */
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
    af_hw_model single_again;
    CHECK(af_hw_model_probe(&cfg, &single_again, NULL) == AF_OK);
    CHECK(sched_setaffinity(0, sizeof full, &full) == 0);
    CHECK(single_again.bandwidth_source == AF_HW_CACHED && same_figures(&single_again, &single));
    remove(path);
}

AF_TEST(hw_cache_old_format_reads_as_absent) {
    char path[512];
    cache_path(path, sizeof path, "old.txt");
    remove(path);
    af_fusion_config cfg;
    config_with_cache(&cfg, path);
    cfg.bandwidth_gbs = 10; /* only the peak is measured: enough to see the file read or not */
    af_hw_model hw;
    af_hw_model_default(&hw);
    /* version 1: one core count per file, sections per ISA level; here for this very machine */
    char file[1024];
    snprintf(file, sizeof file,
             "# autofusion hardware model: measured once per ISA level, read by later runs; delete to re-measure\n"
             "version=1\ncpu=%s\ncores=%d\nisa=%s\npeak_gflops_core=0.5\nbw_l2_core_gbs=4\nbw_l3_core_gbs=4\n"
             "bw_dram_core_gbs=4\nbw_dram_all_gbs=4\n",
             hw.cpu_model, hw.n_cores_probed, af_isa_name(hw.isa));
    write_file(path, file, strlen(file));
    af_hw_model m;
    CHECK(af_hw_model_probe(&cfg, &m, NULL) == AF_OK);
    CHECK(m.peak_source == AF_HW_MEASURED && m.peak_gflops_core != 0.5);
    char text[4096];
    read_file(path, text, sizeof text);
    CHECK(strstr(text, "version=2\n") != NULL && strstr(text, "version=1") == NULL);
    af_hw_model again;
    CHECK(af_hw_model_probe(&cfg, &again, NULL) == AF_OK);
    CHECK(again.peak_source == AF_HW_CACHED && again.peak_gflops_core == m.peak_gflops_core);
    remove(path);
}

AF_TEST(hw_cache_corrupt_files_are_measured_again_and_rewritten) {
    char path[512];
    cache_path(path, sizeof path, "corrupt.txt");
    af_fusion_config cfg;
    config_with_cache(&cfg, path);
    cfg.bandwidth_gbs = 10; /* only the peak is measured */
    af_hw_model hw;
    af_hw_model_default(&hw);
    const char *isa = af_isa_name(hw.isa);
    const int n = hw.n_cores_probed;
    char key[256];
    snprintf(key, sizeof key, "cpu=%s\ncores=%d\nisa=%s\n", hw.cpu_model, n, isa);
    /* Each would give this configuration a peak of 3 if it were read. */
    char cases[16][1024];
    int n_cases = 0;
    snprintf(cases[n_cases++], 1024, "version=2\npeak_gflops_core=3\n");                   /* outside an entry */
    snprintf(cases[n_cases++], 1024, "version=2\ncpu=%s\npeak_gflops_core=3\ncores=%d\nisa=%s\n", hw.cpu_model, n,
             isa);                                                                        /* before the key */
    snprintf(cases[n_cases++], 1024, "version=2\n%speak_gflops_core=3\nbw_l2_core_gbs=4\n", key); /* some bandwidths */
    snprintf(cases[n_cases++], 1024, "version=2\n%speak_gflops_core=3\n%speak_gflops_core=3\n", key, key); /* twice */
    snprintf(cases[n_cases++], 1024, "version=2\ncpu=%s\ncores=%d\nisa=sse9\npeak_gflops_core=3\n", hw.cpu_model, n);
    snprintf(cases[n_cases++], 1024, "version=2\ncpu=%s\ncores=1e300\nisa=%s\npeak_gflops_core=3\n", hw.cpu_model, isa);
    snprintf(cases[n_cases++], 1024, "version=2\ncpu=%s\ncores=-2\nisa=%s\npeak_gflops_core=3\n", hw.cpu_model, isa);
    snprintf(cases[n_cases++], 1024, "version=2\n%speak_gflops_core=nan\n", key);
    snprintf(cases[n_cases++], 1024, "version=2\n%speak_gflops_core=3\nspeed=fast\n", key); /* unknown key */
    snprintf(cases[n_cases++], 1024, "version=2\n%s", key);                                 /* no figure */
    snprintf(cases[n_cases++], 1024, "version=2\n%speak_gflops_core=", key);                /* cut short */
    snprintf(cases[n_cases++], 1024, "%speak_gflops_core=3\n", key);                        /* no version */
    snprintf(cases[n_cases++], 1024, "version=3\n%speak_gflops_core=3\n", key);             /* a later version */
    snprintf(cases[n_cases++], 1024, "version=2\n%speak_gflops_core=3%0500d\n", key, 0);   /* a line too long */
    for (int i = 0; i <= n_cases; i++) {
        if (i < n_cases) {
            write_file(path, cases[i], strlen(cases[i]));
        } else { /* binary bytes, a NUL among them */
            static const char bin[] = "version=2\n\x01\x02\x00\xff=\x7f\ncpu=\x00\n";
            write_file(path, bin, sizeof bin - 1);
        }
        af_hw_model m;
        CHECK(af_hw_model_probe(&cfg, &m, NULL) == AF_OK);
        if (m.peak_source != AF_HW_MEASURED || m.peak_gflops_core == 3)
            af_test_fail(__FILE__, __LINE__, "case %d: the corrupt file was used", i);
        CHECK(m.peak_gflops > 0);
        af_hw_model again; /* rewritten: the next probe reads it */
        CHECK(af_hw_model_probe(&cfg, &again, NULL) == AF_OK);
        if (again.peak_source != AF_HW_CACHED || again.peak_gflops_core != m.peak_gflops_core)
            af_test_fail(__FILE__, __LINE__, "case %d: not rewritten", i);
    }
    remove(path);
}
