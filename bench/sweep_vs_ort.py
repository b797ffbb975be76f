#!/usr/bin/env python3
"""Latency of the sweep's exported models (models/sweep.sh: build/sweep/<name>/model.onnx with
test_data_set_0) on autofusion at its default level and on ONNX Runtime with all optimizations,
and optionally on a second autofusion binary (--old-bin, a build of an earlier commit), side by
side.

Per model and thread count, the processes run in rounds of A-order then B-order (old, new, ORT;
then ORT, new, old), so a slow phase of the host weighs on all of them; one thread runs pinned to
the last CPU (see bench/README.md on this host's CPUs of different speeds). Each process reports
its median over --iterations runs; the table gives the median over the rounds and the ratios of
those medians.

    python3 bench/sweep_vs_ort.py --threads 1,2 --old-bin /tmp/old/build/autofusion
    python3 bench/sweep_vs_ort.py --models efficientnet_b0,swin_t --rounds 3
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run_json(cmd, cpus):
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    r = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=pin, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"sweep_vs_ort.py: {' '.join(cmd)} failed (exit {r.returncode}):\n{r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def af_ms(binary, model, threads, iterations, cpus):
    cmd = [binary, "bench", model, "--threads", str(threads), "--iterations", str(iterations), "--warmup", "2", "--json"]
    return run_json(cmd, cpus)["p50_ms"]


def ort_ms(model, inputs, threads, iterations, cpus):
    cmd = ["node", "models/ort_run.js", model, "--bench", "--inputs", inputs, "--threads", str(threads),
           "--iterations", str(iterations), "--opt", "all", "--quiet"]
    return run_json(cmd, cpus)["median_ms"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models-dir", default="build/sweep")
    p.add_argument("--models", help="comma-separated names (default: every folder with model.onnx)")
    p.add_argument("--threads", default="1")
    p.add_argument("--rounds", type=int, default=2, help="rounds per model and thread count, each in both orders")
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--bin", default="build/autofusion")
    p.add_argument("--old-bin", help="a second autofusion binary to compare (e.g. an earlier commit's)")
    a = p.parse_args()
    root = os.path.join(ROOT, a.models_dir)
    names = a.models.split(",") if a.models else sorted(
        n for n in os.listdir(root) if os.path.isfile(os.path.join(root, n, "model.onnx")))
    cpus = sorted(os.sched_getaffinity(0))
    if a.old_bin:
        head = ["model", "threads", "old ms", "new ms", "ORT all ms", "new / old", "new / ORT", "old / ORT"]
    else:
        head = ["model", "threads", "autofusion ms", "ORT all ms", "autofusion / ORT"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for t in [int(x) for x in a.threads.split(",")]:
        pin = {cpus[-1]} if t < len(cpus) else None
        for n in names:
            model = os.path.join(a.models_dir, n, "model.onnx")
            inputs = os.path.join(a.models_dir, n, "test_data_set_0")
            times = {"old": [], "new": [], "ort": []}
            for r in range(a.rounds):
                order = ["old", "new", "ort"] if r % 2 == 0 else ["ort", "new", "old"]
                for side in order:
                    if side == "old" and a.old_bin:
                        times["old"].append(af_ms(a.old_bin, model, t, a.iterations, pin))
                    elif side == "new":
                        times["new"].append(af_ms(a.bin, model, t, a.iterations, pin))
                    elif side == "ort":
                        times["ort"].append(ort_ms(model, inputs, t, a.iterations, pin))
            med = {k: statistics.median(v) for k, v in times.items() if v}
            cells = ([f"{med['old']:.2f}"] if a.old_bin else []) + [f"{med['new']:.2f}", f"{med['ort']:.2f}"]
            ratios = ([f"{med['new'] / med['old']:.2f}"] if a.old_bin else []) + [f"{med['new'] / med['ort']:.2f}"]
            if a.old_bin:
                ratios.append(f"{med['old'] / med['ort']:.2f}")
            print(f"| {n} | {t} | " + " | ".join(cells + ratios) + " |", flush=True)


if __name__ == "__main__":
    main()
