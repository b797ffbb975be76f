#!/usr/bin/python3
# Writes tests/fuzz/seeds/*.onnx: small models that load, fuse and run, one per shape a fused-step
# builder (src/fusion/sched/) was written for, and near misses of them. `make fuzz-smoke` seeds both
# harnesses with them besides tests/robustness and the fixtures. Under tests/fuzz/hostile.json the
# hostile rules cut them into groups of every family, so the builders meet shapes they must turn
# down. conv_relu_add_self is also a regression input: before eb7fa4e its Add of the Conv's own
# output became a residual read from a value never stored (UBSan, src/kernels/fast/conv.c:109).
# Each seed's size is 3 mod 4, which fuzz_pipeline reads as fusion level 3. Inputs stay small (at
# most 1 << 16 elements) so fuzz_pipeline runs every one. Names are one letter, so a one-byte
# mutation can rewire an edge.
# Run with Debian's python3 (onnx 1.12): /usr/bin/python3 tests/fuzz/make_seeds.py
# The output is deterministic; commit it.
import math
import os

from onnx import TensorProto, helper

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds")
F = TensorProto.FLOAT


def vi(name, shape):
    return helper.make_tensor_value_info(name, F, shape)


def ramp(name, dims, scale=0.1):
    n = math.prod(dims)
    return helper.make_tensor(name, F, dims, [scale * ((i * 7) % 11 - 5) for i in range(n)])


def i64(name, vals):
    return helper.make_tensor(name, TensorProto.INT64, [len(vals)], vals)


def node(op, ins, out, **attrs):
    return helper.make_node(op, ins, [out], name=out, **attrs)


def write(name, nodes, inputs, inits=(), outputs=("y",), modulus=4):
    g = helper.make_graph(nodes, name, inputs, [vi(o, None) for o in outputs], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="make_seeds")
    m.ir_version = 8
    # fuzz_pipeline fuses at level (input size % 4): pad the producer name to reach level 3, where
    # every family is admitted. modulus 32: also config 7 of 8 ((size / 4) % 8), which is
    # hostile_squeeze_excite.json when AF_FUZZ_CONFIG lists tests/fuzz/hostile*.json in sorted order
    while len(m.SerializeToString()) % modulus != modulus - 1:
        m.producer_name += "_"
    with open(os.path.join(HERE, name + ".onnx"), "wb") as f:
        f.write(m.SerializeToString())


os.makedirs(HERE, exist_ok=True)

# ---- squeeze_excite ---------------------------------------------------------------------------
X = vi("x", [1, 8, 4, 4])
SE_W = [ramp("w", [2, 8, 1, 1]), ramp("b", [2]), ramp("v", [8, 2, 1, 1]), ramp("c", [8])]
# MobileNetV3's SE: GlobalAveragePool, 1x1 Conv, Relu, 1x1 Conv, HardSigmoid, Mul with the input
write("se_hardsigmoid", [node("GlobalAveragePool", ["x"], "p"), node("Conv", ["p", "w", "b"], "e"),
                         node("Relu", ["e"], "r"), node("Conv", ["r", "v", "c"], "f"),
                         node("HardSigmoid", ["f"], "g"), node("Mul", ["g", "x"], "y")], [X], SE_W)
# no activation between the Convs, a Sigmoid gate, the Mul's inputs the other way round
write("se_sigmoid_no_act", [node("GlobalAveragePool", ["x"], "p"), node("Conv", ["p", "w", "b"], "e"),
                            node("Conv", ["e", "v", "c"], "f"), node("Sigmoid", ["f"], "g"),
                            node("Mul", ["x", "g"], "y")], [X], SE_W)
# SiLU and HardSwish written out, x * Sigmoid(x) and x * HardSigmoid(x): a gate with no Conv before
# it, which a squeeze_excite rule may still match; regression inputs for eb7fa4e (the builder read
# through the missing Conv, se_step.c:55), which they show only under hostile_squeeze_excite.json
S = vi("x", [1, 4, 3, 3])
write("silu", [node("Sigmoid", ["x"], "g"), node("Mul", ["g", "x"], "y")], [S], modulus=32)
write("hardswish_mul", [node("HardSigmoid", ["x"], "g"), node("Mul", ["x", "g"], "y")], [S], modulus=32)
# an SE whose block input feeds a second branch
write("se_then_add", [node("GlobalAveragePool", ["x"], "p"), node("Conv", ["p", "w", "b"], "e"),
                      node("Relu", ["e"], "r"), node("Conv", ["r", "v", "c"], "f"),
                      node("Sigmoid", ["f"], "g"), node("Mul", ["g", "x"], "m"),
                      node("Add", ["m", "x"], "y")], [X], SE_W)

# ---- conv_bn_relu and conv_residual -----------------------------------------------------------
C = vi("x", [1, 4, 5, 5])
CW = [ramp("w", [4, 4, 3, 3], 0.05), ramp("b", [4])]
PADS = {"pads": [1, 1, 1, 1]}
# Conv, Sigmoid, Mul with the Conv (SiLU)
write("conv_silu", [node("Conv", ["x", "w", "b"], "c", **PADS), node("Sigmoid", ["c"], "s"),
                    node("Mul", ["c", "s"], "y")], [C], CW)
# Conv, HardSigmoid, Mul with the Conv (HardSwish written out)
write("conv_hardswish_mul", [node("Conv", ["x", "w", "b"], "c", **PADS), node("HardSigmoid", ["c"], "h"),
                             node("Mul", ["c", "h"], "y")], [C], CW)
# Conv, Relu, Add of the block input (a residual)
write("conv_relu_add", [node("Conv", ["x", "w", "b"], "c", **PADS), node("Relu", ["c"], "r"),
                        node("Add", ["r", "x"], "y")], [C], CW)
# Conv, Relu, Add of the Conv itself
write("conv_relu_add_self", [node("Conv", ["x", "w", "b"], "c", **PADS), node("Relu", ["c"], "r"),
                             node("Add", ["r", "c"], "y")], [C], CW)
# Conv, BatchNormalization, Clip (ReLU6)
write("conv_bn_clip", [node("Conv", ["x", "w", "b"], "c", **PADS),
                       node("BatchNormalization", ["c", "s", "b", "m", "v"], "n"),
                       node("Clip", ["n", "l", "h"], "y")], [C],
      CW + [ramp("s", [4]), ramp("m", [4]), helper.make_tensor("v", F, [4], [1.0] * 4),
            helper.make_tensor("l", F, [], [0.0]), helper.make_tensor("h", F, [], [6.0])])

# Conv, Relu, Add of the block input, with a dilation (5 over a 6x6 plane) that leaves most taps
# on padding: the live-tap rectangles (src/kernels/gemm/conv_tap_regions.c), a residual after them
D = vi("x", [1, 4, 6, 6])
write("conv_dilated_relu_add", [node("Conv", ["x", "w", "b"], "c", pads=[5, 5, 5, 5], dilations=[5, 5]),
                                node("Relu", ["c"], "r"), node("Add", ["r", "x"], "y")], [D], CW)

# ---- pointwise_depthwise ----------------------------------------------------------------------
# A stem (3x3 over 3 channels) + SiLU read only by a depthwise conv + SiLU, EfficientNet's first
# layers: the fused kernel with a dense first conv (src/kernels/fast/pointwise_depthwise.c), where
# its expanded tensor (32 x 128 x 128, 2 MB) is past the CPU's gate
P = vi("x", [1, 3, 128, 128])
write("stem_depthwise_silu", [node("Conv", ["x", "w", "b"], "c", pads=[1, 1, 1, 1]), node("Sigmoid", ["c"], "s"),
                              node("Mul", ["c", "s"], "e"),
                              node("Conv", ["e", "v", "d"], "f", pads=[1, 1, 1, 1], group=32),
                              node("Sigmoid", ["f"], "g"), node("Mul", ["f", "g"], "y")], [P],
      [ramp("w", [32, 3, 3, 3]), ramp("b", [32]), ramp("v", [32, 1, 3, 3]), ramp("d", [32])])

# ---- matmul_add --------------------------------------------------------------------------------
M = vi("x", [3, 8])
MW = [ramp("w", [8, 5]), ramp("b", [5])]
write("matmul_bias_relu", [node("MatMul", ["x", "w"], "m"), node("Add", ["m", "b"], "a"),
                           node("Relu", ["a"], "y")], [M], MW)
write("matmul_relu_add_self", [node("MatMul", ["x", "w"], "m"), node("Relu", ["m"], "r"),
                               node("Add", ["r", "m"], "y")], [M], MW)
# GELU as BERT exports it: x * 0.5 * (1 + Erf(x / sqrt 2)) after MatMul and bias
write("matmul_gelu", [node("MatMul", ["x", "w"], "m"), node("Add", ["m", "b"], "a"),
                      node("Div", ["a", "d"], "q"), node("Erf", ["q"], "e"), node("Add", ["e", "o"], "f"),
                      node("Mul", ["a", "f"], "g"), node("Mul", ["g", "h"], "y")], [M],
      MW + [helper.make_tensor(n, F, [], [v]) for n, v in (("d", 1.4142135), ("o", 1.0), ("h", 0.5))])

# ---- layernorm ---------------------------------------------------------------------------------
L = vi("x", [2, 8])
LN_W = [helper.make_tensor("e", F, [], [1e-5]), ramp("g", [8]), ramp("b", [8])]
AX = {"axes": [-1]}
write("layernorm_decomposed", [node("ReduceMean", ["x"], "m", **AX), node("Sub", ["x", "m"], "d"),
                               node("Mul", ["d", "d"], "q"), node("ReduceMean", ["q"], "v", **AX),
                               node("Add", ["v", "e"], "a"), node("Sqrt", ["a"], "s"),
                               node("Div", ["d", "s"], "n"),
                               node("Mul", ["n", "g"], "k"), node("Add", ["k", "b"], "y")], [L], LN_W)
# half of one: x - ReduceMean(x)
write("mean_sub", [node("ReduceMean", ["x"], "m", **AX), node("Sub", ["x", "m"], "y")], [L])

# ---- attention_blocks --------------------------------------------------------------------------
# BERT's exported self-attention on [1, 4, 8] projections, 2 heads of 4, with a [1, 1, 1, 4] mask
A_IN = [vi("q", [1, 4, 8]), vi("k", [1, 4, 8]), vi("v", [1, 4, 8]), vi("z", [1, 1, 1, 4])]
att = []
for p in "qkv":
    att.append(node("Reshape", [p, "s"], p + "r"))
    att.append(node("Transpose", [p + "r"], p + "t", perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3]))
att += [node("MatMul", ["qt", "kt"], "a"), node("Div", ["a", "d"], "b"), node("Add", ["b", "z"], "c"),
        node("Softmax", ["c"], "p", axis=-1), node("MatMul", ["p", "vt"], "o"),
        node("Transpose", ["o"], "t", perm=[0, 2, 1, 3]), node("Reshape", ["t", "m"], "y")]
write("attention", att, A_IN,
      [i64("s", [1, 4, 2, 4]), i64("m", [1, 4, 8]), helper.make_tensor("d", F, [], [2.0])])
# scores without the head layout around them
write("matmul_softmax", [node("MatMul", ["q", "k"], "a"), node("Softmax", ["a"], "y", axis=-1)],
      [vi("q", [1, 2, 4, 4]), vi("k", [1, 2, 4, 4])])

# ---- elementwise_chain -------------------------------------------------------------------------
E = vi("x", [2, 3, 4])
write("elementwise", [node("Add", ["x", "c"], "a"), node("Mul", ["a", "c"], "m"), node("Tanh", ["m"], "t"),
                      node("LeakyRelu", ["t"], "l", alpha=0.1), node("Clip", ["l", "", "h"], "y")], [E],
      [ramp("c", [4]), helper.make_tensor("h", F, [], [0.5])])
