#!/usr/bin/env python3
"""Side-by-side latency and memory: autofusion against ONNX Runtime 1.30, interleaved in one run.

Each round runs every configuration once, as its own process, in a rotated order, on the same
inputs (the model's test_data_set_0), thread count and CPUs; the figure for a configuration is the median
over rounds of each process's median latency. Ratios are autofusion / ONNX Runtime: below 1 is
faster. A second table takes the headline ratios within each round instead (autofusion at each
level / ORT all, and level 0 / each fused level), as their median and range over the rounds: on a
shared host whose speed drifts, the range shows how much one run's ratio can be trusted.
Standard library only.

Where the thread count is below the CPUs this process may use, every process of a round is pinned
to the same CPUs, a different set each round: the host's CPUs are not equally fast (on the 2-CPU
machine, one ran MobileNetV3-L at one thread in 5.2 ms while the other took 3.8), and unpinned
runs compared configurations on whichever CPU the scheduler picked.

  python3 bench/run_bench.py [--models resnet50,mobilenet_v3_large,bert_base] [--threads 1,2]
                             [--rounds 5] [--iterations 20] [--warmup 5] [--levels 0]
                             [--write bench/RESULTS.md]
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_json(cmd, cpus=None):
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, preexec_fn=pin)
    if out.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def configs(levels):
    cs = [(f"autofusion level {lv}", "af", lv) for lv in levels]
    return cs + [("ORT disabled", "ort", "disabled"), ("ORT all", "ort", "all")]


def command(kind, arg, model_dir, threads, a):
    model = os.path.join(model_dir, "model.onnx")
    inputs = os.path.join(model_dir, "test_data_set_0")
    common = ["--warmup", str(a.warmup), "--iterations", str(a.iterations), "--threads", str(threads)]
    if kind == "af":
        return ["build/autofusion", "bench", model, "--inputs", inputs, "--level", str(arg), "--json"] + common
    return ["node", "models/ort_run.js", model, "--bench", "--inputs", inputs, "--opt", arg] + common


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def round_cpus(r, threads):
    """The CPUs every process of round r runs on: `threads` of ours, rotating with r; None (no
    pinning) when the threads take them all."""
    cpus = sorted(os.sched_getaffinity(0))
    if threads >= len(cpus):
        return None
    return {cpus[(r * threads + i) % len(cpus)] for i in range(threads)}


def paired(samples, num, den):
    """num / den within each round (the two processes ran minutes apart at most, on the same CPUs),
    as "median [min-max]" over the rounds: the host's state drifts between rounds, and the spread
    of these ratios says how far one table's ratio can be trusted."""
    rs = sorted(n / d for n, d in zip(samples[num], samples[den]))
    return f"{statistics.median(rs):.2f} [{rs[0]:.2f}-{rs[-1]:.2f}]"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="resnet50,mobilenet_v3_large,bert_base")
    p.add_argument("--models-dir", default="build/models")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--levels", default="0")
    p.add_argument("--write", help="append the table to this markdown file")
    a = p.parse_args()
    levels = [int(x) for x in a.levels.split(",")]
    cs = configs(levels)
    lines = []
    header = "| model | threads | " + " | ".join(f"{c[0]} ms" for c in cs) + " | " + \
        " | ".join(f"{c[0]} / {o[0]}" for c in cs if c[1] == "af" for o in cs if o[1] == "ort") + \
        " | peak RSS MiB (af / ORT all) |"
    lines.append(header)
    lines.append("|" + "---|" * (header.count("|") - 1))
    # Per-round ratios: each autofusion level against ORT all, and level 0 against each other level
    # (the speedup of fusion over the same runtime unfused).
    af_names = [c[0] for c in cs if c[1] == "af"]
    pairs = [(n, "ORT all") for n in af_names] + [(af_names[0], n) for n in af_names[1:]]
    paired_lines = ["| model | threads | " + " | ".join(f"{n} / {d}" for n, d in pairs) + " |"]
    paired_lines.append("|" + "---|" * (len(pairs) + 2))
    # Each configuration's fastest process: on a host whose speed swings for seconds at a time
    # (bench/RESULTS.md, session 28) a round's processes can land in different states, and the
    # fastest of several rounds is each configuration in the host's fast state.
    fastest_lines = ["| model | threads | " + " | ".join(f"{c[0]} ms" for c in cs) + " | " +
                     " | ".join(f"{n} / {d}" for n, d in pairs) + " |"]
    fastest_lines.append("|" + "---|" * (len(cs) + len(pairs) + 2))
    for model in a.models.split(","):
        model_dir = os.path.join(a.models_dir, model)
        if not os.path.exists(os.path.join(model_dir, "model.onnx")):
            sys.exit(f"{model_dir}/model.onnx is missing: run `sh models/make_fixtures.sh --full` first")
        for threads in [int(t) for t in a.threads.split(",")]:
            samples = {c[0]: [] for c in cs}
            rss = {c[0]: [] for c in cs}
            for r in range(a.rounds):
                order = cs[r % len(cs):] + cs[:r % len(cs)]
                cpus = round_cpus(r, threads)
                for name, kind, arg in order:
                    res = run_json(command(kind, arg, model_dir, threads, a), cpus)
                    samples[name].append(res["median_ms"])
                    rss[name].append(res.get("peak_rss_kb", 0) / 1024.0)
            med = {k: statistics.median(v) for k, v in samples.items()}
            ratios = [med[c[0]] / med[o[0]] for c in cs if c[1] == "af" for o in cs if o[1] == "ort"]
            af0 = cs[0][0]
            row = f"| {model} | {threads} | " + " | ".join(f"{med[c[0]]:.2f}" for c in cs) + " | " + \
                " | ".join(f"{x:.2f}" for x in ratios) + \
                f" | {statistics.median(rss[af0]):.0f} / {statistics.median(rss['ORT all']):.0f} |"
            lines.append(row)
            print(row, flush=True)
            paired_lines.append(f"| {model} | {threads} | " + " | ".join(paired(samples, n, d) for n, d in pairs) + " |")
            low = {k: min(v) for k, v in samples.items()}
            fastest_lines.append(f"| {model} | {threads} | " + " | ".join(f"{low[c[0]]:.2f}" for c in cs) + " | " +
                                 " | ".join(f"{low[n] / low[d]:.2f}" for n, d in pairs) + " |")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cmd = "python3 bench/run_bench.py " + " ".join(sys.argv[1:])
    text = (f"\n### {stamp}: `{cmd}`\n\nMachine: {cpu_name()}, {os.cpu_count()} CPUs; {a.rounds} interleaved "
            f"rounds x {a.iterations} timed runs (+{a.warmup} warm-up) per configuration, each round's "
            f"processes on the same CPUs; medians of per-process medians.\n\n" + "\n".join(lines) + "\n\n"
            f"The same ratios taken within each round, median [min-max] over the {a.rounds} rounds:\n\n" +
            "\n".join(paired_lines) + "\n\n"
            f"Each configuration's fastest process (lowest per-process median over the {a.rounds} rounds) and "
            f"their ratios:\n\n" + "\n".join(fastest_lines) + "\n")
    print(text)
    if a.write:
        with open(os.path.join(ROOT, a.write), "a") as f:
            f.write(text)


if __name__ == "__main__":
    main()
