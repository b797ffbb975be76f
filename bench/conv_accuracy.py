#!/usr/bin/python3
"""Rounding error of single convolutions: autofusion (default, and with config "winograd": false)
and ONNX Runtime against the same convolution computed in float64 with numpy.

    /usr/bin/python3 bench/conv_accuracy.py [--out DIR]      (from the repository root)

Each case is one Conv (weights N(0, 1/fan_in), bias U(-0.1, 0.1), input N(0, 1), seeded), so the
outputs have |y| about 1; the table gives the RMS and the largest |error| over the output. Needs
build/autofusion, Debian's python3-onnx and numpy, and models/node_modules (onnxruntime-node).
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as nh

# name, in channels, out channels, kernel, output side, dilation: ResNet-50's layer shapes, and
# FCN-ResNet50's dilated layer4 conv
CASES = [
    ("3x3 64->64 56x56 (F(4x4))", 64, 64, 3, 56, 1),
    ("3x3 256->256 14x14 (F(2x2))", 256, 256, 3, 14, 1),
    ("3x3 512->512 7x7 (F(2x2), 1 thread)", 512, 512, 3, 7, 1),
    ("3x3 512->512 28x28 dilation 2", 512, 512, 3, 28, 2),
    ("1x1 2048->512 28x28", 2048, 512, 1, 28, 1),
]


def write_pb(path, arr, name):
    with open(path, "wb") as f:
        f.write(nh.from_array(arr, name).SerializeToString())


def read_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return nh.to_array(t).astype(np.float64)


def make_case(d, rng, cin, cout, k, side, dil):
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    w = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32)
    b = rng.uniform(-0.1, 0.1, cout).astype(np.float32)
    x = rng.standard_normal((1, cin, side, side)).astype(np.float32)
    pad = dil * (k // 2)
    node = oh.make_node("Conv", ["x", "W", "B"], ["y"], kernel_shape=[k, k], pads=[pad] * 4,
                        dilations=[dil, dil])
    graph = oh.make_graph([node], "conv", [oh.make_tensor_value_info("x", 1, [1, cin, side, side])],
                          [oh.make_tensor_value_info("y", 1, [1, cout, side, side])],
                          [nh.from_array(w, "W"), nh.from_array(b, "B")])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, os.path.join(d, "model.onnx"))
    write_pb(os.path.join(d, "test_data_set_0", "input_0.pb"), x, "x")
    xp = np.pad(x.astype(np.float64)[0], ((0, 0), (pad, pad), (pad, pad)))
    y = np.zeros((cout, side, side))
    for i in range(k):
        for j in range(k):
            patch = xp[:, i * dil:i * dil + side, j * dil:j * dil + side]
            y += np.einsum("oc,chw->ohw", w[:, :, i, j].astype(np.float64), patch)
    return y + b[:, None, None]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="build/conv_accuracy")
    a = ap.parse_args()
    rng = np.random.default_rng(1)
    config = os.path.join(a.out, "no_winograd.json")
    os.makedirs(a.out, exist_ok=True)
    with open(config, "w") as f:
        f.write('{"winograd": false}\n')
    print("| convolution | ONNX Runtime rms / max | autofusion rms / max | `winograd: false` rms / max |")
    print("|---|---|---|---|")
    for i, (label, cin, cout, k, side, dil) in enumerate(CASES):
        d = os.path.join(a.out, "case%d" % i)
        truth = make_case(d, rng, cin, cout, k, side, dil)
        data = os.path.join(d, "test_data_set_0")
        subprocess.run(["node", "models/ort_run.js", os.path.join(d, "model.onnx"), d, "--inputs", data,
                        "--threads", "1"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cells = [read_pb(os.path.join(data, "output_0.pb"))[0]]
        for extra in ([], ["--config", config]):
            out = os.path.join(d, "af_direct" if extra else "af")
            subprocess.run(["./build/autofusion", "run", os.path.join(d, "model.onnx"), "--inputs", data,
                            "--output-dir", out, "--threads", "1"] + extra, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            cells.append(read_pb(os.path.join(out, "y.pb"))[0])
        row = ["%.2g / %.2g" % (np.sqrt(np.mean((c - truth) ** 2)), np.abs(c - truth).max()) for c in cells]
        print("| %s | %s |" % (label, " | ".join(row)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
