#!/usr/bin/env python3
"""A/B of one change on one model: `autofusion bench` as A and as B in alternating processes.

B is either another binary (--b-bin, e.g. a build of the previous commit) or the same binary with
environment variables set (--b-env, e.g. AF_GEMM_ORDER=cols). Both processes of a pair run pinned to
the same CPUs (with fewer threads than CPUs; rotating with the pair like run_bench.py's rounds), and
pairs run in ABBA order: pair 1 runs A then B, pair 2 B then A, and so on. Unpinned, consecutive
processes landed on different CPUs of this project's 2-CPU hosts, which are not equally fast:
MobileNetV3-L at one thread ran 3.78-4.15 ms as the first process of each pair and 5.16-5.30 as
the second, whichever side it was: in a fixed order, or unpinned, such a bias can decide an A/B by
itself (bench/RESULTS.md, session 20).

Prints each side's median of the processes' p50 latencies, and the ratio B / A within each pair as
median [min-max], over all pairs and over the pairs where A and where B ran first. If the two
order halves disagree about which side is faster, the pairs are too few for the host's noise.

    python3 bench/ab.py --model build/models/bert_base/model.onnx --threads 2 --pairs 12 \\
        --b-env AF_GEMM_ORDER=cols
    python3 bench/ab.py --model M --b-bin /tmp/old/autofusion --pairs 8 -- --isa avx2
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def pair_cpus(i, threads):
    """The CPUs both processes of pair i run on: pairs 2j and 2j + 1 (one in each order) share a
    set, which rotates with j; None (no pinning) when the threads take every CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    if threads >= len(cpus):
        return None
    return {cpus[((i // 2) * threads + k) % len(cpus)] for k in range(threads)}


def p50(binary, env, cpus, model, threads, iterations, extra):
    cmd = [binary, "bench", model, "--threads", str(threads), "--iterations", str(iterations), "--json"] + extra
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, preexec_fn=pin)
    if r.returncode != 0:
        sys.exit(f"ab.py: {' '.join(cmd)} failed (exit {r.returncode}):\n{r.stderr.strip()}")
    return json.loads(r.stdout)["p50_ms"]


def summary(ratios):
    if not ratios:
        return "-"
    return f"{statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}]"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--pairs", type=int, default=10)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--a-bin", default="build/autofusion")
    p.add_argument("--b-bin", help="B's binary (default: A's)")
    p.add_argument("--b-env", action="append", default=[], metavar="VAR=VALUE", help="set for B only")
    p.add_argument("extra", nargs="*", help="more `autofusion bench` arguments, after --")
    a = p.parse_args()
    if not a.b_bin and not a.b_env:
        p.error("give --b-bin or --b-env: otherwise A and B are the same")
    env_a = dict(os.environ)
    env_b = dict(os.environ)
    for kv in a.b_env:
        if "=" not in kv:
            p.error(f"--b-env {kv}: expected VAR=VALUE")
        k, v = kv.split("=", 1)
        env_b[k] = v
    b_bin = a.b_bin or a.a_bin
    sides = {"A": (a.a_bin, env_a), "B": (b_bin, env_b)}
    rows = []  # (a_ms, b_ms, a_first)
    for i in range(a.pairs):
        first = "A" if i % 2 == 0 else "B"
        cpus = pair_cpus(i, a.threads)
        ms = {}
        for side in (first, "B" if first == "A" else "A"):
            binary, env = sides[side]
            ms[side] = p50(binary, env, cpus, a.model, a.threads, a.iterations, a.extra)
        rows.append((ms["A"], ms["B"], first == "A"))
        where = f"CPUs {sorted(cpus)}" if cpus else "unpinned"
        print(f"pair {i + 1}: {first} first, {where}  A {ms['A']:.3f} ms  B {ms['B']:.3f} ms  "
              f"B/A {ms['B'] / ms['A']:.3f}", file=sys.stderr)
    ratios = [b / x for x, b, _ in rows]
    print(f"A: {a.a_bin} | B: {b_bin} {' '.join(a.b_env)} | {a.model}, {a.threads} thread(s), "
          f"{a.pairs} pairs x {a.iterations} runs")
    print(f"median p50 ms: A {statistics.median(r[0] for r in rows):.3f}  B {statistics.median(r[1] for r in rows):.3f}")
    print(f"B / A per pair: all {summary(ratios)}; A first {summary([q for q, r in zip(ratios, rows) if r[2]])}; "
          f"B first {summary([q for q, r in zip(ratios, rows) if not r[2]])}")


if __name__ == "__main__":
    main()
