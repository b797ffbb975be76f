#!/usr/bin/python3
"""Where the time goes, block by block: autofusion's per-step profile beside ONNX Runtime's
per-node profile of the same model, summed over groups of nodes named alike.

    ./build/autofusion bench MODEL --threads N --iterations K --profile --json > af.json
    node models/ort_run.js MODEL --bench --threads N --iterations K --profile /tmp/ort --quiet
    python3 bench/node_times.py af.json /tmp/ort_<date>.json [--depth D]

A node's group is the first D components of its name (default 2: '/features/features.4' in a
torchvision MobileNet, '/layer1/layer1.0' in a ResNet; BERT wants 4). An autofusion step counts
under its anchor node's group (a fused group's other nodes share the prefix in these models);
ORT's nodes are named after their outputs after its own fusions, so the prefix still holds. Nodes
without a path (ORT's layout reorders) form the group '(unnamed)'. ORT's times are the median
over its profiled runs of each node's kernel time, after dropping the warm-up runs (the first
fifth); autofusion's are its profile's mean per run. Both are taken with a clock around each
kernel, so a step's share of waiting for threads is in both.
"""
import argparse
import collections
import json
import re
import statistics


def group_of(name, depth):
    if not name.startswith("/"):
        return "(unnamed)"
    name = re.sub(r"_output_\d+.*$", "", name)  # ORT's fused nodes: named after an output
    parts = name.split("/")[1:]
    return "/" + "/".join(parts[:depth])


def ort_times(path, depth):
    runs = collections.defaultdict(list)
    for e in json.load(open(path)):
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            runs[e["name"][: -len("_kernel_time")]].append(e["dur"] / 1000.0)
    groups = collections.OrderedDict()
    for name, ms in runs.items():
        kept = ms[len(ms) // 5:] or ms
        g = group_of(name, depth)
        groups[g] = groups.get(g, 0.0) + statistics.median(kept)
    return groups


def af_times(path, depth):
    groups = collections.OrderedDict()
    d = json.load(open(path))
    for s in d.get("profile", d)["steps"]:  # bench --json, or a bare profile (bench/inproc_ab.c)
        g = group_of(s["node"] or "", depth)
        groups[g] = groups.get(g, 0.0) + s["ms"]
    return groups


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("af_json", help="autofusion bench --profile --json output, or an inproc_ab --profile file")
    ap.add_argument("ort_trace", help="the trace ort_run.js --profile wrote")
    ap.add_argument("--depth", type=int, default=2, help="name components per group (default 2)")
    a = ap.parse_args()
    af, ort = af_times(a.af_json, a.depth), ort_times(a.ort_trace, a.depth)
    order = list(af) + [g for g in ort if g not in af]
    print("| group | autofusion ms | ONNX Runtime ms | autofusion / ORT |")
    print("|---|---|---|---|")
    for g in order:
        x, y = af.get(g, 0.0), ort.get(g, 0.0)
        print("| %s | %.3f | %.3f | %s |" % (g, x, y, "%.2f" % (x / y) if y > 0 else "-"))
    tx, ty = sum(af.values()), sum(ort.values())
    print("| total | %.3f | %.3f | %.2f |" % (tx, ty, tx / ty if ty > 0 else float("nan")))


if __name__ == "__main__":
    main()
