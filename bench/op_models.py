#!/usr/bin/python3
"""Single-op models at realistic sizes, timed on autofusion against ONNX Runtime with all
optimizations: a net for kernels that fall far behind (an op left to the reference kernel, a
pathological path). Builds each model with onnx.helper into DIR/<name>/ with random inputs in
test_data_set_0 and ONNX Runtime's outputs beside them (models/ort_run.js), so
`./build/test_conformance --dir DIR --rtol 1e-3 --atol 1e-4` checks them too; then, per model, runs
autofusion (and --old-bin, a build of an earlier commit) and ONNX Runtime in turn for --rounds
rounds of --iterations runs each and prints the medians and the ratio. ONNX Runtime's figure is
its node script's wall time per run (it includes copying the outputs out to JavaScript), so
ratios well under 1 on small ops say little; ratios over 1 are the finding.

    /usr/bin/python3 bench/op_models.py --dir /tmp/ops [--old-bin OLD] [--only softmax_axis1,instnorm]
"""
import argparse
import json
import os
import statistics
import subprocess

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
F, I64 = TensorProto.FLOAT, TensorProto.INT64
N = helper.make_node


def models(rng):
    """name -> (nodes, inputs [(name, shape, type)], outputs [(name, type)], initializers, opset)."""
    def w(*shape, scale=0.05):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def i64(*v):
        return np.array(v, np.int64)

    m = {}
    m["softmax_last"] = ([N("Softmax", ["x"], ["y"], axis=-1)], [("x", [12, 128, 128], F)], [("y", F)], [], 17)
    m["softmax_axis1"] = ([N("Softmax", ["x"], ["y"], axis=1)], [("x", [1, 1000, 64], F)], [("y", F)], [], 17)
    m["logsoftmax"] = ([N("LogSoftmax", ["x"], ["y"], axis=-1)], [("x", [128, 1000], F)], [("y", F)], [], 17)
    m["layernorm"] = ([N("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)], [("x", [128, 768], F)], [("y", F)],
                      [("g", w(768, scale=1)), ("b", w(768, scale=1))], 17)
    m["instnorm"] = ([N("InstanceNormalization", ["x", "g", "b"], ["y"])], [("x", [1, 64, 128, 128], F)], [("y", F)],
                     [("g", w(64, scale=1)), ("b", w(64, scale=1))], 17)
    m["batchnorm"] = ([N("BatchNormalization", ["x", "g", "b", "m", "v"], ["y"])], [("x", [1, 64, 112, 112], F)],
                      [("y", F)], [("g", w(64, scale=1)), ("b", w(64, scale=1)), ("m", w(64, scale=1)),
                                   ("v", rng.uniform(0.5, 2, 64).astype(np.float32))], 17)
    m["lrn"] = ([N("LRN", ["x"], ["y"], size=5)], [("x", [1, 64, 56, 56], F)], [("y", F)], [], 17)
    m["transpose_0213"] = ([N("Transpose", ["x"], ["y"], perm=[0, 2, 1, 3])], [("x", [1, 128, 12, 64], F)],
                           [("y", F)], [], 17)
    m["transpose_nhwc"] = ([N("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])], [("x", [1, 64, 112, 112], F)],
                           [("y", F)], [], 17)
    m["concat_c"] = ([N("Concat", ["a", "b"], ["y"], axis=1)], [("a", [1, 128, 56, 56], F), ("b", [1, 128, 56, 56], F)],
                     [("y", F)], [], 17)
    m["concat_last"] = ([N("Concat", ["a", "b"], ["y"], axis=-1)], [("a", [128, 12, 64], F), ("b", [128, 12, 64], F)],
                        [("y", F)], [], 17)
    m["split3"] = ([N("Split", ["x"], ["a", "b", "c"], axis=1)], [("x", [1, 192, 56, 56], F)],
                   [("a", F), ("b", F), ("c", F)], [], 13)
    m["slice_c"] = ([N("Slice", ["x", "s", "e", "ax"], ["y"])], [("x", [1, 256, 56, 56], F)], [("y", F)],
                    [("s", i64(64)), ("e", i64(192)), ("ax", i64(1))], 17)
    m["resize_nearest2x"] = ([N("Resize", ["x", "", "s"], ["y"], mode="nearest")], [("x", [1, 64, 56, 56], F)],
                             [("y", F)], [("s", np.array([1, 1, 2, 2], np.float32))], 17)
    m["resize_linear2x"] = ([N("Resize", ["x", "", "s"], ["y"], mode="linear")], [("x", [1, 64, 56, 56], F)],
                            [("y", F)], [("s", np.array([1, 1, 2, 2], np.float32))], 17)
    m["resize_bilinear_ac"] = ([N("Resize", ["x", "", "", "sz"], ["y"], mode="linear",
                                  coordinate_transformation_mode="align_corners")],
                               [("x", [1, 21, 64, 64], F)], [("y", F)], [("sz", i64(1, 21, 512, 512))], 17)
    m["add_bcast_c"] = ([N("Add", ["x", "b"], ["y"])], [("x", [1, 256, 56, 56], F)], [("y", F)],
                        [("b", w(256, 1, 1, scale=1))], 17)
    m["mul_same"] = ([N("Mul", ["a", "b"], ["y"])], [("a", [1, 256, 56, 56], F), ("b", [1, 256, 56, 56], F)],
                     [("y", F)], [], 17)
    m["sum3"] = ([N("Sum", ["a", "b", "c"], ["y"])], [("a", [1, 64, 56, 56], F), ("b", [1, 64, 56, 56], F),
                                                      ("c", [1, 64, 56, 56], F)], [("y", F)], [], 17)
    for op in ("Sigmoid", "Tanh", "HardSwish", "Elu", "Softplus", "Floor"):
        m[op.lower()] = ([N(op, ["x"], ["y"])], [("x", [1, 256, 56, 56], F)], [("y", F)], [], 17)
    m["erf"] = ([N("Erf", ["x"], ["y"])], [("x", [128, 3072], F)], [("y", F)], [], 17)
    m["clip6"] = ([N("Clip", ["x", "lo", "hi"], ["y"])], [("x", [1, 256, 56, 56], F)], [("y", F)],
                  [("lo", np.array(0, np.float32)), ("hi", np.array(6, np.float32))], 17)
    m["prelu"] = ([N("PRelu", ["x", "s"], ["y"])], [("x", [1, 64, 112, 112], F)], [("y", F)], [("s", w(64, 1, 1))], 17)
    m["pow2"] = ([N("Pow", ["x", "p"], ["y"])], [("x", [128, 768], F)], [("y", F)], [("p", np.array(2, np.float32))], 17)
    m["log_abs"] = ([N("Abs", ["x"], ["t"]), N("Log", ["t"], ["y"])], [("x", [1, 256, 56, 56], F)], [("y", F)], [], 17)
    m["sqrt_div"] = ([N("Abs", ["x"], ["a"]), N("Sqrt", ["a"], ["s"]), N("Div", ["x", "s"], ["y"])],
                     [("x", [1, 256, 56, 56], F)], [("y", F)], [], 17)
    m["gelu_chain"] = ([N("Mul", ["x", "c"], ["t1"]), N("Erf", ["t1"], ["t2"]), N("Add", ["t2", "one"], ["t3"]),
                        N("Mul", ["x", "t3"], ["t4"]), N("Mul", ["t4", "h"], ["y"])], [("x", [128, 3072], F)],
                       [("y", F)], [("c", np.array(0.7071, np.float32)), ("one", np.array(1, np.float32)),
                                    ("h", np.array(0.5, np.float32))], 17)
    m["where_mask"] = ([N("Greater", ["x", "z"], ["m"]), N("Where", ["m", "x", "z"], ["y"])],
                       [("x", [1, 256, 56, 56], F)], [("y", F)], [("z", np.array(0, np.float32))], 17)
    m["reducemean_hw"] = ([N("ReduceMean", ["x"], ["y"], axes=[2, 3], keepdims=1)], [("x", [1, 256, 56, 56], F)],
                          [("y", F)], [], 13)
    m["reducemax_c"] = ([N("ReduceMax", ["x"], ["y"], axes=[1], keepdims=1)], [("x", [1, 256, 56, 56], F)],
                        [("y", F)], [], 13)
    m["reducesum_c"] = ([N("ReduceSum", ["x", "a"], ["y"], keepdims=1)], [("x", [1, 256, 56, 56], F)], [("y", F)],
                        [("a", i64(1))], 17)
    m["argmax_c"] = ([N("ArgMax", ["x"], ["y"], axis=1, keepdims=1)], [("x", [1, 21, 128, 128], F)], [("y", I64)],
                     [], 17)
    m["topk"] = ([N("TopK", ["x", "k"], ["v", "i"], axis=-1)], [("x", [16, 1000], F)], [("v", F), ("i", I64)],
                 [("k", i64(5))], 17)
    m["cumsum"] = ([N("CumSum", ["x", "a"], ["y"])], [("x", [64, 1024], F)], [("y", F)],
                   [("a", np.array(1, np.int64))], 17)
    m["cast_f2i"] = ([N("Cast", ["x"], ["y"], to=I64)], [("x", [1, 256, 56, 56], F)], [("y", I64)], [], 17)
    m["expand"] = ([N("Expand", ["x", "s"], ["y"])], [("x", [1, 64, 1, 1], F)], [("y", F)],
                   [("s", i64(1, 64, 56, 56))], 17)
    m["tile"] = ([N("Tile", ["x", "r"], ["y"])], [("x", [1, 64, 28, 28], F)], [("y", F)], [("r", i64(1, 1, 2, 2))], 17)
    m["pad_const"] = ([N("Pad", ["x", "p"], ["y"])], [("x", [1, 64, 112, 112], F)], [("y", F)],
                      [("p", i64(0, 0, 1, 1, 0, 0, 1, 1))], 17)
    m["pad_reflect"] = ([N("Pad", ["x", "p"], ["y"], mode="reflect")], [("x", [1, 64, 112, 112], F)], [("y", F)],
                        [("p", i64(0, 0, 3, 3, 0, 0, 3, 3))], 17)
    m["depth_to_space"] = ([N("DepthToSpace", ["x"], ["y"], blocksize=2, mode="CRD")], [("x", [1, 256, 28, 28], F)],
                           [("y", F)], [], 17)
    m["gather_embed"] = ([N("Gather", ["w", "i"], ["y"], axis=0)], [("i", [1, 128], I64)], [("y", F)],
                         [("w", w(30522, 768, scale=1))], 17)
    m["maxpool_3x3_s2"] = ([N("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
                           [("x", [1, 64, 112, 112], F)], [("y", F)], [], 17)
    m["avgpool_3x3_cip0"] = ([N("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
                             [("x", [1, 768, 17, 17], F)], [("y", F)], [], 17)
    m["avgpool_2x2_s2"] = ([N("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
                           [("x", [1, 256, 56, 56], F)], [("y", F)], [], 17)
    m["globalmaxpool"] = ([N("GlobalMaxPool", ["x"], ["y"])], [("x", [1, 512, 28, 28], F)], [("y", F)], [], 17)
    m["matmul_768"] = ([N("MatMul", ["x", "w"], ["y"])], [("x", [128, 768], F)], [("y", F)], [("w", w(768, 768))], 17)
    m["matmul_batched"] = ([N("MatMul", ["a", "b"], ["y"])], [("a", [12, 128, 64], F), ("b", [12, 64, 128], F)],
                           [("y", F)], [], 17)
    m["einsum_qk"] = ([N("Einsum", ["a", "b"], ["y"], equation="bhqd,bhkd->bhqk")],
                      [("a", [1, 12, 128, 64], F), ("b", [1, 12, 128, 64], F)], [("y", F)], [], 17)
    m["gemm_fc"] = ([N("Gemm", ["x", "w", "b"], ["y"], transB=1)], [("x", [1, 2048], F)], [("y", F)],
                    [("w", w(1000, 2048)), ("b", np.zeros(1000, np.float32))], 17)
    m["conv1d"] = ([N("Conv", ["x", "w"], ["y"], pads=[1, 1], kernel_shape=[3])], [("x", [1, 256, 1000], F)],
                   [("y", F)], [("w", w(256, 256, 3, scale=0.02))], 17)
    m["conv_dilated"] = ([N("Conv", ["x", "w"], ["y"], dilations=[2, 2], pads=[2, 2, 2, 2], kernel_shape=[3, 3])],
                         [("x", [1, 256, 28, 28], F)], [("y", F)], [("w", w(256, 256, 3, 3, scale=0.02))], 17)
    m["conv_grouped"] = ([N("Conv", ["x", "w"], ["y"], group=32, pads=[1, 1, 1, 1], kernel_shape=[3, 3])],
                         [("x", [1, 256, 28, 28], F)], [("y", F)], [("w", w(256, 8, 3, 3))], 17)
    m["depthwise5x5"] = ([N("Conv", ["x", "w"], ["y"], group=96, kernel_shape=[5, 5], pads=[2, 2, 2, 2])],
                         [("x", [1, 96, 56, 56], F)], [("y", F)], [("w", w(96, 1, 5, 5, scale=0.1))], 17)
    m["convtranspose"] = ([N("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], kernel_shape=[4, 4],
                             pads=[1, 1, 1, 1])], [("x", [1, 64, 28, 28], F)], [("y", F)], [("w", w(64, 32, 4, 4))], 17)
    return m


def build(d, name, spec, rng):
    nodes, inputs, outputs, inits, opset = spec
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, t, s) for n, s, t in inputs],
                          [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
                          [numpy_helper.from_array(a, n) for n, a in inits])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    out = os.path.join(d, name)
    os.makedirs(os.path.join(out, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(out, "model.onnx"))
    for k, (n, s, t) in enumerate(inputs):
        x = rng.integers(0, 1000, s).astype(np.int64) if t == I64 else rng.standard_normal(s).astype(np.float32)
        with open(os.path.join(out, "test_data_set_0", "input_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(x, n).SerializeToString())
    subprocess.run(["node", os.path.join(ROOT, "models", "ort_run.js"), os.path.join(out, "model.onnx"), out],
                   check=True, capture_output=True, cwd=ROOT)


def median_ms(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        return float("nan")
    return json.loads(r.stdout.strip().splitlines()[-1])["median_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True, help="where the models go")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "autofusion"))
    ap.add_argument("--old-bin", help="an earlier build, timed beside --bin")
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-build", action="store_true", help="time the models already in --dir")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    specs = models(rng)
    names = a.only.split(",") if a.only else list(specs)
    if not a.no_build:
        for n in names:
            build(a.dir, n, specs[n], rng)
    print("| model | autofusion ms |%s ONNX Runtime ms | autofusion / ORT |" % (" old ms |" if a.old_bin else ""))
    print("|---|---|%s---|---|" % ("---|" if a.old_bin else ""))
    for n in names:
        path = os.path.join(a.dir, n)
        model = os.path.join(path, "model.onnx")
        inputs = []
        for f in sorted(os.listdir(os.path.join(path, "test_data_set_0"))):
            if f.startswith("input_"):
                t = onnx.TensorProto()
                with open(os.path.join(path, "test_data_set_0", f), "rb") as fh:
                    t.ParseFromString(fh.read())
                inputs += ["--input", "%s=%s" % (t.name, os.path.join(path, "test_data_set_0", f))]
        common = ["--threads", str(a.threads), "--iterations", str(a.iterations), "--json"]
        af, old, ort = [], [], []
        for _ in range(a.rounds):
            af.append(median_ms([a.bin, "bench", model] + inputs + common))
            if a.old_bin:
                old.append(median_ms([a.old_bin, "bench", model] + inputs + common))
            ort.append(median_ms(["node", os.path.join(ROOT, "models", "ort_run.js"), model, "--bench", "--inputs", path,
                                  "--opt", "all", "--threads", str(a.threads), "--iterations", str(a.iterations),
                                  "--quiet"]))
        m_af, m_ort = statistics.median(af), statistics.median(ort)
        old_col = " %.3f |" % statistics.median(old) if a.old_bin else ""
        print("| %s | %.3f |%s %.3f | %.2f |" % (n, m_af, old_col, m_ort, m_af / m_ort if m_ort else float("nan")))


if __name__ == "__main__":
    main()
