#!/usr/bin/python3
# Writes the robustness corpus: tests/robustness/<case>.onnx, its side files, and expected.txt
# ("<case> <STATUS> <message substring>", one case a line): each bad input the loader must reject
# with that status and message, and AF_OK controls that must load and build a session.
# rt_*.onnx models load fine and are driven at run time by tests/unit/test_robustness.c (they are
# not in expected.txt). Run with Debian's python3 (onnx 1.12): /usr/bin/python3 tests/robustness/make_corpus.py
# Cases needing symlinks, hard links, FIFOs or directories are made at test time
# (tests/unit/test_robustness.c). The output is deterministic; commit it. docs/security.md lists
# which class of bad input each case belongs to.
import math
import os
import random
import struct
import sys

import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
F = TensorProto.FLOAT
cases = []  # (name, status, substring)


def write(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


def model_bytes(graph, opset=13, **kw):
    m = helper.make_model(graph, opset_imports=kw.pop("opsets", [helper.make_opsetid("", opset)]),
                          producer_name="make_corpus", **kw)
    m.ir_version = 8
    return m.SerializeToString()


def case(name, status, substring, data):
    if isinstance(data, onnx.GraphProto):
        data = model_bytes(data)
    elif isinstance(data, onnx.ModelProto):
        data = data.SerializeToString()
    write(name + ".onnx", data)
    assert "\n" not in substring and substring == substring.strip()
    cases.append((name, status, substring))


def vi(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def floats(name, dims, n=None):
    """A float tensor in float_data; n values instead of the shape's count where given
    (built directly: helper.make_tensor refuses a mismatch)."""
    count = n if n is not None else math.prod(dims)
    return TensorProto(name=name, data_type=F, dims=dims, float_data=[float(i) for i in range(count)])


def transpose_graph(nodes=None, inputs=None, outputs=None, inits=None, name="g"):
    """x[2,3] -> Transpose -> y[3,2]: a tiny graph using an op the runtime has."""
    return helper.make_graph(
        nodes if nodes is not None else [helper.make_node("Transpose", ["x"], ["y"], name="t")],
        name,
        inputs if inputs is not None else [vi("x", [2, 3])],
        outputs if outputs is not None else [vi("y", [3, 2])],
        inits or [])


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, wire, payload):
    return varint(num << 3 | wire) + payload


def msg(num, payload):
    """A length-delimited field (submessage, string or packed list)."""
    return field(num, 2, varint(len(payload)) + payload)


# ---- a valid control model (Transpose and Concat of an input with an initializer) ------------
valid_graph = helper.make_graph(
    [helper.make_node("Transpose", ["x"], ["xt"], name="t"),
     helper.make_node("Concat", ["xt", "w"], ["y"], name="cat", axis=0)],
    "valid", [vi("x", [2, 3])], [vi("y", [5, 2])], [floats("w", [2, 2])])
VALID = model_bytes(valid_graph)
case("valid", "AF_OK", "-", VALID)

# ---- not protobuf at all ----------------------------------------------------------------------
case("text_file", "AF_ERR_PARSE", "protobuf parse failed",
     b'ir_version: 8\ngraph {\n  node { op_type: "Relu" input: "x" output: "y" }\n}\n')
case("random_bytes", "AF_ERR_PARSE", "protobuf parse failed",
     bytes(random.Random(20260101).getrandbits(8) for _ in range(512)))
case("empty_file", "AF_ERR_PARSE", "empty", b"")
case("truncated_1", "AF_ERR_PARSE", "protobuf parse failed", VALID[:1])
case("truncated_half", "AF_ERR_PARSE", "protobuf parse failed", VALID[:len(VALID) // 2])
case("truncated_last_byte", "AF_ERR_PARSE", "protobuf parse failed", VALID[:-1])

# ---- wire-level damage (hand-made bytes appended to, or replacing, a valid model) -------------
# ModelProto.ir_version (field 1, varint) sent as length-delimited
case("wrong_wire_type", "AF_ERR_PARSE", "protobuf parse failed", VALID + field(1, 2, b"\x01x"))
# ModelProto.graph (field 7, message) sent as a varint
case("wrong_wire_type_graph", "AF_ERR_PARSE", "protobuf parse failed", field(7, 0, b"\x05") + VALID)
# a varint of 11 bytes (at most 10 encode 64 bits)
case("overlong_varint", "AF_ERR_PARSE", "protobuf parse failed", VALID + b"\x08" + b"\xff" * 10 + b"\x01")
# a length prefix of 2^64-1: must not wrap a pointer
case("overlong_length", "AF_ERR_PARSE", "protobuf parse failed",
     VALID + b"\x3a" + b"\xff" * 9 + b"\x01" + b"\x00" * 8)
# wire types 6 and 7 do not exist; a deprecated start-group on an unknown field
case("bad_wire_type_7", "AF_ERR_PARSE", "protobuf parse failed", VALID + field(9, 7, b"\x00"))
case("unterminated_group", "AF_ERR_PARSE", "protobuf parse failed", VALID + field(99, 3, b""))
# field number 0 is reserved
case("field_number_0", "AF_ERR_PARSE", "protobuf parse failed", b"\x00\x01" + VALID)
# a packed int64 dims list inside an initializer whose last varint is cut
bad_init = msg(1, b"\x02\x82") + field(2, 0, b"\x01") + msg(8, b"w")
case("truncated_packed_dims", "AF_ERR_PARSE", "protobuf parse failed",
     field(1, 0, b"\x08") + msg(7, msg(5, bad_init)) + msg(8, field(2, 0, b"\x0d")))

# ---- model structure ----------------------------------------------------------------------------
m = onnx.ModelProto(ir_version=8, producer_name="make_corpus")
m.opset_import.add(domain="", version=13)
case("no_graph", "AF_ERR_INVALID_MODEL", "has no graph", m)
case("no_opset", "AF_ERR_INVALID_MODEL", "imports no opset", model_bytes(transpose_graph(), opsets=[]))
case("opset_99", "AF_ERR_UNSUPPORTED", "opset 99 is not supported", model_bytes(transpose_graph(), opset=99))
case("opset_1", "AF_ERR_UNSUPPORTED", "opset 1 is not supported", model_bytes(transpose_graph(), opset=1))
case("only_ml_opset", "AF_ERR_UNSUPPORTED", "imports only domain 'ai.onnx.ml'",
     model_bytes(transpose_graph(), opsets=[helper.make_opsetid("ai.onnx.ml", 3)]))
case("local_function", "AF_ERR_UNSUPPORTED", "model-local functions",
     model_bytes(transpose_graph(), opsets=[helper.make_opsetid("", 13), helper.make_opsetid("local", 1)],
                 functions=[helper.make_function("local", "F", ["a"], ["b"],
                                                 [helper.make_node("Transpose", ["a"], ["b"])],
                                                 [helper.make_opsetid("", 13)])]))
case("undefined_input", "AF_ERR_INVALID_MODEL", "node 't' (Transpose): input 'nope' is not defined",
     transpose_graph([helper.make_node("Transpose", ["nope"], ["y"], name="t")]))
case("undefined_output", "AF_ERR_INVALID_MODEL", "graph output 'nope' is not defined",
     transpose_graph(outputs=[vi("nope", [3, 2])]))
case("produced_twice", "AF_ERR_INVALID_MODEL", "value 'y' is produced twice",
     transpose_graph([helper.make_node("Transpose", ["x"], ["y"], name="t1"),
                      helper.make_node("Transpose", ["x"], ["y"], name="t2")]))
case("output_overwrites_input", "AF_ERR_INVALID_MODEL", "value 'x' is produced twice",
     transpose_graph([helper.make_node("Transpose", ["x"], ["x"], name="t")], outputs=[vi("x", [2, 3])]))
case("output_overwrites_initializer", "AF_ERR_INVALID_MODEL", "value 'w' is produced twice",
     transpose_graph([helper.make_node("Transpose", ["x"], ["w"], name="t")], outputs=[vi("w", [3, 2])],
                     inits=[floats("w", [3, 2])]))
case("cycle", "AF_ERR_INVALID_MODEL", "cycle",
     transpose_graph([helper.make_node("Transpose", ["b"], ["a"], name="ta"),
                      helper.make_node("Transpose", ["a"], ["b"], name="tb"),
                      helper.make_node("Transpose", ["x"], ["y"], name="t")]))
case("self_loop", "AF_ERR_INVALID_MODEL", "cycle",
     transpose_graph([helper.make_node("Concat", ["x", "y"], ["y"], name="c", axis=0)]))
case("duplicate_input", "AF_ERR_INVALID_MODEL", "graph input 'x' is declared twice",
     transpose_graph(inputs=[vi("x", [2, 3]), vi("x", [2, 3])]))
case("duplicate_initializer", "AF_ERR_INVALID_MODEL", "initializer 'w' is defined twice",
     transpose_graph(inits=[floats("w", [2]), floats("w", [2])]))
case("unnamed_input", "AF_ERR_INVALID_MODEL", "graph input 0 has no name",
     transpose_graph(inputs=[vi("", [2, 3])]))
case("unnamed_initializer", "AF_ERR_INVALID_MODEL", "initializer 0 has no name",
     transpose_graph(inits=[floats("", [2])]))
case("no_op_type", "AF_ERR_INVALID_MODEL", "has no op_type",
     transpose_graph([helper.make_node("", ["x"], ["y"], name="t")]))
case("newline_in_name", "AF_ERR_INVALID_MODEL", "input 'no pe' is not defined",
     transpose_graph([helper.make_node("Transpose", ["no\npe"], ["y"], name="bad\nname")]))
case("sequence_input", "AF_ERR_UNSUPPORTED", "only tensor types are supported (not sequence)",
     transpose_graph(inputs=[helper.make_tensor_sequence_value_info("x", F, [2, 3])]))
map_type = onnx.TypeProto()
map_type.map_type.key_type = TensorProto.INT64
map_type.map_type.value_type.CopyFrom(helper.make_tensor_type_proto(F, []))
case("map_output", "AF_ERR_UNSUPPORTED", "only tensor types are supported (not map)",
     transpose_graph(outputs=[helper.make_value_info("y", map_type)]))
case("input_elem_type_99", "AF_ERR_INVALID_MODEL", "unknown element type 99",
     transpose_graph(inputs=[vi("x", [2, 3], 99)]))
case("input_elem_type_string", "AF_ERR_UNSUPPORTED", "unsupported element type string",
     transpose_graph(inputs=[vi("x", [2, 3], TensorProto.STRING)]))
case("input_negative_dim", "AF_ERR_INVALID_MODEL", "negative dim -3",
     transpose_graph(inputs=[vi("x", [2, -3])]))
case("input_rank_9", "AF_ERR_LIMIT", "rank 9",
     transpose_graph(inputs=[vi("x", [1] * 9)], outputs=[vi("y", None)]))

# ---- tensors ------------------------------------------------------------------------------------
def init_case(name, status, substring, tensor):
    """Transpose of an initializer-only input: the tensor is decoded at load."""
    case(name, status, substring, transpose_graph(inputs=[], inits=[tensor], outputs=[vi("y", None)]))


def raw(name, dims, nbytes, dtype=F):
    t = TensorProto(name=name, data_type=dtype, dims=dims)
    t.raw_data = bytes(nbytes)
    return t


init_case("dims_overflow_int64", "AF_ERR_LIMIT", "dims overflow", raw("x", [2 ** 40, 2 ** 40], 0))
init_case("dims_overflow_bytes", "AF_ERR_LIMIT", "dims overflow", raw("x", [2 ** 31, 2 ** 31], 0))
# 4 TiB claimed with no data at all: must fail before allocating anything that size
init_case("huge_without_data", "AF_ERR_LIMIT", "tensor 'x' is 4398046511104 bytes; the limit is 4294967296 (max_tensor_bytes)",
          TensorProto(name="x", data_type=F, dims=[2 ** 20, 2 ** 20]))
init_case("huge_raw_short", "AF_ERR_LIMIT", "(max_tensor_bytes)", raw("x", [2 ** 20, 2 ** 20], 4))
# 1 GiB claimed, under the per-tensor cap: the data check must still fail before allocating it
init_case("large_without_data", "AF_ERR_INVALID_MODEL", "0 values stored, shape needs 268435456",
          TensorProto(name="x", data_type=F, dims=[2 ** 14, 2 ** 14]))
init_case("large_raw_short", "AF_ERR_INVALID_MODEL", "raw_data has 4 bytes, shape needs 1073741824",
          raw("x", [2 ** 14, 2 ** 14], 4))
init_case("negative_dim", "AF_ERR_INVALID_MODEL", "negative dim -2", raw("x", [3, -2], 0))
init_case("raw_data_short", "AF_ERR_INVALID_MODEL", "raw_data has 20 bytes, shape needs 24", raw("x", [2, 3], 20))
init_case("raw_data_long", "AF_ERR_INVALID_MODEL", "raw_data has 28 bytes, shape needs 24", raw("x", [2, 3], 28))
init_case("float_data_short", "AF_ERR_INVALID_MODEL", "5 values stored, shape needs 6", floats("x", [2, 3], 5))
init_case("float_data_long", "AF_ERR_INVALID_MODEL", "7 values stored, shape needs 6", floats("x", [2, 3], 7))
init_case("int64_data_short", "AF_ERR_INVALID_MODEL", "1 values stored, shape needs 6",
          TensorProto(name="x", data_type=TensorProto.INT64, dims=[2, 3], int64_data=[1]))
init_case("data_type_99", "AF_ERR_INVALID_MODEL", "unknown data type 99", raw("x", [2, 3], 24, 99))
init_case("data_type_negative", "AF_ERR_INVALID_MODEL", "unknown data type -1", raw("x", [2, 3], 24, -1))
init_case("no_data_type", "AF_ERR_INVALID_MODEL", "has no data type", TensorProto(name="x", dims=[2, 3]))
init_case("string_tensor", "AF_ERR_UNSUPPORTED", "unsupported data type string",
          helper.make_tensor("x", TensorProto.STRING, [2], [b"a", b"b"]))
init_case("complex_tensor", "AF_ERR_UNSUPPORTED", "unsupported data type complex64", raw("x", [2], 16, 14))
init_case("rank_9", "AF_ERR_LIMIT", "rank 9; at most 8", raw("x", [1] * 9, 4))
seg = raw("x", [2, 3], 24)
seg.segment.begin, seg.segment.end = 0, 6
init_case("segmented_tensor", "AF_ERR_UNSUPPORTED", "segmented", seg)
sparse = helper.make_sparse_tensor(helper.make_tensor("v", F, [1], [1.0]),
                                   helper.make_tensor("i", TensorProto.INT64, [1], [0]), [4])
g = transpose_graph()
g.sparse_initializer.append(sparse)
case("sparse_initializer", "AF_ERR_UNSUPPORTED", "sparse initializers", g)

# ---- Constant nodes ------------------------------------------------------------------------------
case("constant_two_attributes", "AF_ERR_INVALID_MODEL", "must have exactly one attribute",
     transpose_graph([helper.make_node("Constant", [], ["x"], value_float=1.0, value_int=2),
                      helper.make_node("Transpose", ["x"], ["y"], name="t")], inputs=[]))
case("constant_bad_raw", "AF_ERR_INVALID_MODEL", "raw_data has 3 bytes",
     transpose_graph([helper.make_node("Constant", [], ["x"], value=raw("c", [2], 3)),
                      helper.make_node("Transpose", ["x"], ["y"], name="t")], inputs=[]))
case("constant_two_outputs", "AF_ERR_INVALID_MODEL", "must have one output",
     transpose_graph([helper.make_node("Constant", [], ["x", "z"], value_float=1.0),
                      helper.make_node("Transpose", ["x"], ["y"], name="t")], inputs=[]))

# ---- attributes -----------------------------------------------------------------------------------
n = helper.make_node("Transpose", ["x"], ["y"], name="t")
n.attribute.append(onnx.AttributeProto(name="perm", type=onnx.AttributeProto.GRAPH))
case("graph_attribute_without_graph", "AF_ERR_INVALID_MODEL", "attribute 'perm' has no graph", transpose_graph([n]))
n = helper.make_node("Transpose", ["x"], ["y"], name="t")
n.attribute.append(onnx.AttributeProto(name="perm", type=onnx.AttributeProto.TENSOR))
case("tensor_attribute_without_tensor", "AF_ERR_INVALID_MODEL", "attribute 'perm' has no tensor", transpose_graph([n]))
n = helper.make_node("Transpose", ["x"], ["y"], name="t")
n.attribute.append(onnx.AttributeProto(name="perm", ref_attr_name="p", type=onnx.AttributeProto.INTS))
case("attribute_reference", "AF_ERR_UNSUPPORTED", "attribute references", transpose_graph([n]))
n = helper.make_node("Transpose", ["x"], ["y"], name="t")
n.attribute.append(onnx.AttributeProto(name="perm", type=onnx.AttributeProto.SPARSE_TENSOR))
case("sparse_tensor_attribute", "AF_ERR_UNSUPPORTED", "attribute 'perm' has unsupported type", transpose_graph([n]))

# ---- operators ------------------------------------------------------------------------------------
case("unsupported_ops", "AF_ERR_UNSUPPORTED", "unsupported operators: NonMaxSuppression, Foo",
     transpose_graph([helper.make_node("NonMaxSuppression", ["x", "x"], ["a"], name="nms"),
                      helper.make_node("Foo", ["a"], ["b"], name="foo"),
                      helper.make_node("Foo", ["b"], ["c"], name="foo2"),
                      helper.make_node("Transpose", ["c"], ["y"], name="t")]))
case("unknown_domain", "AF_ERR_UNSUPPORTED", "unsupported operator: com.example.Transpose",
     model_bytes(transpose_graph([helper.make_node("Transpose", ["x"], ["y"], name="t", domain="com.example")]),
                 opsets=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)]))


def if_node(name, then_graph, out):
    empty = helper.make_graph([helper.make_node("Constant", [], [out + "_e"], value_float=0.0)],
                              name + "_else", [], [vi(out + "_e", None)])
    return helper.make_node("If", ["cond"], [out], name=name, then_branch=then_graph, else_branch=empty)


inner = helper.make_graph([helper.make_node("Constant", [], ["v20"], value_float=1.0)], "then20", [],
                          [vi("v20", None)])
for k in range(19, -1, -1):  # If inside If, 20 deep
    inner = helper.make_graph([if_node("if%d" % (k + 1), inner, "v%d" % (k + 1))], "then%d" % k, [],
                              [vi("v%d" % (k + 1), None)])
deep = helper.make_graph([if_node("if0", inner, "y")], "deep", [vi("cond", [], TensorProto.BOOL)], [vi("y", None)])
case("subgraph_depth_20", "AF_ERR_LIMIT", "subgraphs nest deeper than 16", deep)
then_g = helper.make_graph([helper.make_node("Transpose", ["nope"], ["z"], name="inner_t")], "then", [],
                           [vi("z", None)])
case("subgraph_undefined_outer", "AF_ERR_INVALID_MODEL", "node 'inner_t' (Transpose): input 'nope' is not defined",
     helper.make_graph([if_node("if", then_g, "y")], "g", [vi("cond", [], TensorProto.BOOL)], [vi("y", None)]))

# a subgraph capturing a value is a dependency of the node that owns it
def capture_graph(then_reads, later_node):
    then_g = helper.make_graph([helper.make_node("Transpose", [then_reads], ["t"], name="inner_t")], "then", [],
                               [vi("t", None)])
    else_g = helper.make_graph([helper.make_node("Transpose", ["x"], ["e"], name="inner_e")], "else", [],
                               [vi("e", None)])
    nodes = [helper.make_node("If", ["cond"], ["a"], name="if", then_branch=then_g, else_branch=else_g)]
    if later_node:
        nodes.append(later_node)
    return helper.make_graph(nodes, "g", [vi("cond", [], TensorProto.BOOL), vi("x", [2, 3])], [vi("a", None)])


case("capture_forward", "AF_OK", "-", capture_graph("b", helper.make_node("Transpose", ["x"], ["b"], name="tb")))
case("capture_cycle", "AF_ERR_INVALID_MODEL", "cycle",
     capture_graph("b", helper.make_node("Transpose", ["a"], ["b"], name="tb")))
case("capture_own_output", "AF_ERR_INVALID_MODEL", "cycle", capture_graph("a", None))

# ---- shape inference ------------------------------------------------------------------------------
case("concat_axis_5", "AF_ERR_INVALID_MODEL", "axis 5 is out of range for rank 2",
     transpose_graph([helper.make_node("Concat", ["x", "x"], ["y"], name="cat", axis=5)], outputs=[vi("y", None)]))
case("softmax_axis_minus_9", "AF_ERR_INVALID_MODEL", "axis -9 is out of range for rank 2",
     transpose_graph([helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=-9)], outputs=[vi("y", None)]))
case("gather_axis_3", "AF_ERR_INVALID_MODEL", "axis 3 is out of range for rank 2",
     transpose_graph([helper.make_node("Gather", ["x", "i"], ["y"], name="ga", axis=3)], outputs=[vi("y", None)],
                     inits=[helper.make_tensor("i", TensorProto.INT64, [1], [0])]))
conv_inputs = [vi("x", [1, 2, 5, 5])]
case("conv_group_0", "AF_ERR_INVALID_MODEL", "group must be at least 1",
     transpose_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", group=0)], inputs=conv_inputs,
                     outputs=[vi("y", None)], inits=[floats("w", [4, 2, 3, 3])]))
case("conv_weight_rank", "AF_ERR_INVALID_MODEL", "X has 4 dims but W has 3",
     transpose_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="conv")], inputs=conv_inputs,
                     outputs=[vi("y", None)], inits=[floats("w", [4, 2, 3])]))
case("reshape_two_minus_1", "AF_ERR_INVALID_MODEL", "more than one -1",
     transpose_graph([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")], outputs=[vi("y", None)],
                     inits=[helper.make_tensor("s", TensorProto.INT64, [2], [-1, -1])]))
case("add_no_broadcast", "AF_ERR_INVALID_MODEL", "cannot broadcast",
     transpose_graph([helper.make_node("Add", ["x", "b"], ["y"], name="add")], outputs=[vi("y", None)],
                     inputs=[vi("x", [2, 3]), vi("b", [4, 5])]))
H = 2 ** 62
case("concat_dim_overflow", "AF_ERR_LIMIT", "element count overflows",
     transpose_graph([helper.make_node("Concat", ["x", "b"], ["y"], name="cat", axis=0)], outputs=[vi("y", None)],
                     inputs=[vi("x", [H, 3]), vi("b", [H, 3])]))
# group * channels overflows int64 unless the group is checked first
case("conv_group_overflow", "AF_ERR_INVALID_MODEL", "groups",
     transpose_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", group=H)], outputs=[vi("y", None)],
                     inputs=[vi("x", [1, 8, 5, 5]), vi("w", [H, 2, 3, 3])]))
case("conv_transpose_group_overflow", "AF_ERR_INVALID_MODEL", "groups",
     transpose_graph([helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="convt", group=H)],
                     outputs=[vi("y", None)], inputs=[vi("x", [1, 4, 5, 5]), vi("w", [4, 4, 3, 3])]))
case("output_declared_wrong", "AF_ERR_INVALID_MODEL", "output 'y' is declared float32[2,3] but computes float32[3,2]",
     transpose_graph(outputs=[vi("y", [2, 3])]))

# ---- external data --------------------------------------------------------------------------------
EXT = struct.pack("<6f", *range(6))
write("ext_data.bin", EXT)


def ext_case(name, status, substring, dims=(2, 3), **kv):
    t = TensorProto(name="x", data_type=F, dims=list(dims), data_location=TensorProto.EXTERNAL)
    for k, v in kv.items():
        t.external_data.add(key=k, value=str(v))
    init_case(name, status, substring, t)


ext_case("ext_valid", "AF_OK", "-", location="ext_data.bin")
ext_case("ext_absolute", "AF_ERR_INVALID_MODEL", "must be a relative path", location="/etc/passwd")
ext_case("ext_dotdot", "AF_ERR_INVALID_MODEL", "must be a relative path", location="../robustness/ext_data.bin")
ext_case("ext_dotdot_inner", "AF_ERR_INVALID_MODEL", "must be a relative path", location="sub/../../x/ext_data.bin")
ext_case("ext_backslash", "AF_ERR_INVALID_MODEL", "must be a relative path", location="..\\ext_data.bin")
ext_case("ext_missing_file", "AF_ERR_IO", "No such file", location="no_such_file.bin")
ext_case("ext_no_location", "AF_ERR_INVALID_MODEL", "no location", offset=0)
ext_case("ext_past_end", "AF_ERR_INVALID_MODEL", "24 bytes at offset 8 pass the end of the 24-byte file",
         location="ext_data.bin", offset=8)
ext_case("ext_offset_past_end", "AF_ERR_INVALID_MODEL", "pass the end", location="ext_data.bin",
         offset=2 ** 62)
ext_case("ext_length_mismatch", "AF_ERR_INVALID_MODEL", "length 20, tensor needs 24 bytes",
         location="ext_data.bin", length=20)
ext_case("ext_bad_offset", "AF_ERR_INVALID_MODEL", "bad external data offset '12abc'", location="ext_data.bin",
         offset="12abc")
ext_case("ext_negative_length", "AF_ERR_INVALID_MODEL", "bad external data length '-4'", location="ext_data.bin",
         length=-4)
ext_case("ext_huge_dims", "AF_ERR_LIMIT", "(max_tensor_bytes)", dims=(2 ** 20, 2 ** 20), location="ext_data.bin")
ext_case("ext_large_dims", "AF_ERR_INVALID_MODEL", "pass the end", dims=(2 ** 14, 2 ** 14), location="ext_data.bin")
ext_case("ext_dot_slash", "AF_OK", "-", location="./ext_data.bin")
ext_case("ext_empty_location", "AF_ERR_INVALID_MODEL", "no location", location="")
ext_case("ext_dev_null", "AF_ERR_INVALID_MODEL", "must be a relative path", location="/dev/zero")
ext_case("ext_folder", "AF_ERR_INVALID_MODEL", "not a regular file", location=".")
ext_case("ext_huge_offset", "AF_ERR_INVALID_MODEL", "bad external data offset", location="ext_data.bin",
         offset="99999999999999999999999")

# ---- headers and opsets ---------------------------------------------------------------------------
case("opset_negative", "AF_ERR_UNSUPPORTED", "opset -5 is not supported", model_bytes(transpose_graph(), opset=-5))
case("opset_huge", "AF_ERR_UNSUPPORTED", "opset 9223372036854775807 is not supported",
     model_bytes(transpose_graph(), opset=2 ** 63 - 1))
case("opset_6", "AF_ERR_UNSUPPORTED", "opset 6 is not supported", model_bytes(transpose_graph(), opset=6))
# ONNX magic-less garbage that happens to start like a protobuf: a valid tag then a length past the end
case("header_length_past_end", "AF_ERR_PARSE", "protobuf parse failed", b"\x08\x08\x3a\xff\x7f" + VALID[:20])
case("gzip_file", "AF_ERR_PARSE", "protobuf parse failed", b"\x1f\x8b\x08\x00" + bytes(60))
case("zip_file", "AF_ERR_PARSE", "protobuf parse failed", b"PK\x03\x04" + bytes(60))

# ---- out-of-range axes, zero strides and groups, bad attribute values ------------------------------
def one_node(name, status, substring, node, inputs=None, inits=None):
    case(name, status, substring, transpose_graph([node], inputs=inputs, outputs=[vi("y", None)], inits=inits))


one_node("transpose_perm_out_of_range", "AF_ERR_INVALID_MODEL", "perm",
         helper.make_node("Transpose", ["x"], ["y"], name="t", perm=[0, 7]))
one_node("transpose_perm_repeated", "AF_ERR_INVALID_MODEL", "perm",
         helper.make_node("Transpose", ["x"], ["y"], name="t", perm=[1, 1]))
one_node("reduce_axis_out_of_range", "AF_ERR_INVALID_MODEL", "out of range",
         helper.make_node("ReduceSum", ["x", "ax"], ["y"], name="rs"),
         inits=[helper.make_tensor("ax", TensorProto.INT64, [1], [4])])
one_node("split_axis_out_of_range", "AF_ERR_INVALID_MODEL", "out of range",
         helper.make_node("Split", ["x"], ["y"], name="sp", axis=-3))
one_node("flatten_axis_out_of_range", "AF_ERR_INVALID_MODEL", "out of range",
         helper.make_node("Flatten", ["x"], ["y"], name="fl", axis=3))
conv_w = [floats("w", [4, 2, 3, 3])]
one_node("conv_strides_0", "AF_ERR_INVALID_MODEL", "stride",
         helper.make_node("Conv", ["x", "w"], ["y"], name="conv", strides=[0, 1]), conv_inputs, conv_w)
one_node("conv_dilations_0", "AF_ERR_INVALID_MODEL", "dilation",
         helper.make_node("Conv", ["x", "w"], ["y"], name="conv", dilations=[1, 0]), conv_inputs, conv_w)
one_node("conv_negative_pads", "AF_ERR_INVALID_MODEL", "pad",
         helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[-1, 0, 0, 0]), conv_inputs, conv_w)
one_node("conv_group_not_dividing", "AF_ERR_INVALID_MODEL", "group",
         helper.make_node("Conv", ["x", "w"], ["y"], name="conv", group=3), conv_inputs, conv_w)
one_node("maxpool_strides_0", "AF_ERR_INVALID_MODEL", "stride",
         helper.make_node("MaxPool", ["x"], ["y"], name="mp", kernel_shape=[2, 2], strides=[0, 0]), conv_inputs)
one_node("maxpool_kernel_0", "AF_ERR_INVALID_MODEL", "kernel",
         helper.make_node("MaxPool", ["x"], ["y"], name="mp", kernel_shape=[0, 2]), conv_inputs)
one_node("slice_step_0", "AF_ERR_INVALID_MODEL", "step",
         helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"], name="sl"),
         inits=[helper.make_tensor(n_, TensorProto.INT64, [1], [v_]) for n_, v_ in
                (("st", 0), ("en", 2), ("ax", 0), ("sp", 0))])
one_node("depth_to_space_blocksize_0", "AF_ERR_INVALID_MODEL", "blocksize",
         helper.make_node("DepthToSpace", ["x"], ["y"], name="d2s", blocksize=0), conv_inputs)

# ---- wrong attribute types -------------------------------------------------------------------------
one_node("attr_group_float", "AF_ERR_INVALID_MODEL", "attribute 'group' must be int, not float",
         helper.make_node("Conv", ["x", "w"], ["y"], name="conv", group=1.5), conv_inputs, conv_w)
one_node("attr_perm_string", "AF_ERR_INVALID_MODEL", "attribute 'perm' must be ints, not string",
         helper.make_node("Transpose", ["x"], ["y"], name="t", perm="1,0"))
one_node("attr_axis_ints", "AF_ERR_INVALID_MODEL", "attribute 'axis' must be int, not ints",
         helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=[1]))
one_node("attr_strides_int", "AF_ERR_INVALID_MODEL", "attribute 'strides' must be ints, not int",
         helper.make_node("Conv", ["x", "w"], ["y"], name="conv", strides=2), conv_inputs, conv_w)
one_node("attr_epsilon_string", "AF_ERR_INVALID_MODEL", "attribute 'epsilon' must be float, not string",
         helper.make_node("LayerNormalization", ["x", "sc"], ["y"], name="ln", epsilon="small"),
         inits=[floats("sc", [3])])
n = helper.make_node("If", ["cond"], ["y"], name="if", else_branch=transpose_graph(name="e"))
n.attribute.append(helper.make_attribute("then_branch", 3))
case("attr_then_branch_int", "AF_ERR_INVALID_MODEL", "attribute 'then_branch' must be graph, not int",
     helper.make_graph([n], "g", [vi("cond", [], TensorProto.BOOL)], [vi("y", None)]))

# ---- huge shapes made by shape-driven operators (static: refused at load) --------------------------
def i64(name, vals):
    return helper.make_tensor(name, TensorProto.INT64, [len(vals)], vals)


BIG = [2 ** 20, 2 ** 20]  # 2^40 floats: 4 TiB
one_node("constant_of_shape_huge", "AF_ERR_LIMIT", "(max_tensor_bytes)",
         helper.make_node("ConstantOfShape", ["s"], ["y"], name="cos"), inputs=[], inits=[i64("s", BIG)])
one_node("expand_huge", "AF_ERR_LIMIT", "(max_tensor_bytes)",
         helper.make_node("Expand", ["x", "s"], ["y"], name="ex"), inputs=[vi("x", [1, 1])], inits=[i64("s", BIG)])
one_node("tile_huge", "AF_ERR_LIMIT", "(max_tensor_bytes)",
         helper.make_node("Tile", ["x", "r"], ["y"], name="ti"), inits=[i64("r", [2 ** 19, 2 ** 20])])
one_node("resize_huge", "AF_ERR_LIMIT", "(max_tensor_bytes)",
         helper.make_node("Resize", ["x", "", "", "sz"], ["y"], name="rz"), inputs=[vi("x", [1, 1, 2, 2])],
         inits=[i64("sz", [1, 1, 2 ** 20, 2 ** 20])])
one_node("reshape_huge", "AF_ERR_LIMIT", "(max_tensor_bytes)",
         helper.make_node("Reshape", ["x", "s"], ["y"], name="rs"), inputs=[vi("x", [2 ** 21, 2 ** 20])],
         inits=[i64("s", [-1])])
one_node("input_huge_dims", "AF_ERR_LIMIT", "value 'x'",
         helper.make_node("Transpose", ["x"], ["y"], name="t"), inputs=[vi("x", [2 ** 31, 2 ** 31])])
one_node("range_huge", "AF_ERR_LIMIT", "(max_tensor_bytes)",
         helper.make_node("Range", ["a", "b", "c"], ["y"], name="rg"), inputs=[],
         inits=[helper.make_tensor("a", F, [], [0.0]), helper.make_tensor("b", F, [], [1e12]),
                helper.make_tensor("c", F, [], [1.0])])

# ---- pathological graphs for the pattern matcher and scheduler: must load and fuse quickly ------
FAN = 3000
fan_nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv")]
fan_nodes += [helper.make_node("Relu", ["c"], ["r%d" % i], name="relu%d" % i) for i in range(FAN)]
fan_nodes.append(helper.make_node("Sum", ["r%d" % i for i in range(FAN)], ["y"], name="sum"))
case("fan_out_3000", "AF_OK", "-", helper.make_graph(fan_nodes, "fan", conv_inputs, [vi("y", None)], conv_w))
DEPTH = 3000
chain = [helper.make_node("Conv", ["x", "w"], ["v0"], name="conv")]
for i in range(DEPTH):
    op = ("Relu", "Add", "Mul", "Sigmoid")[i % 4]
    ins = ["v%d" % i] if op in ("Relu", "Sigmoid") else ["v%d" % i, "v%d" % i]
    chain.append(helper.make_node(op, ins, ["v%d" % (i + 1)], name="n%d" % i))
chain.append(helper.make_node("Identity", ["v%d" % DEPTH], ["y"], name="out"))
case("chain_3000", "AF_OK", "-", helper.make_graph(chain, "chain", conv_inputs, [vi("y", None)], conv_w))
# every node reads every earlier value: quadratic edges (about 31000)
DENSE = 250
dense = [helper.make_node("Relu", ["x"], ["d0"], name="d0")]
for i in range(1, DENSE):
    dense.append(helper.make_node("Sum", ["d%d" % j for j in range(i)], ["d%d" % i], name="d%d" % i))
dense.append(helper.make_node("Identity", ["d%d" % (DENSE - 1)], ["y"], name="out"))
case("dense_dag_250", "AF_OK", "-", helper.make_graph(dense, "dense", [vi("x", [2, 3])], [vi("y", None)]))
# names and lists over the default caps
case("name_70000_bytes", "AF_ERR_LIMIT", "(max_string_bytes)",
     transpose_graph([helper.make_node("Transpose", ["x"], ["y"], name="n" * 70000)]))

# ---- run-time cases (load fine; tests/unit/test_robustness.c runs them with bad or huge data) ------
def rt(name, graph):
    write(name + ".onnx", model_bytes(graph))


rt("rt_constant_of_shape", helper.make_graph([helper.make_node("ConstantOfShape", ["s"], ["y"], name="cos")],
                                             "g", [vi("s", [2], TensorProto.INT64)], [vi("y", None)]))
rt("rt_expand", helper.make_graph([helper.make_node("Expand", ["x", "s"], ["y"], name="ex")], "g",
                                  [vi("x", [1, 1]), vi("s", [2], TensorProto.INT64)], [vi("y", None)]))
rt("rt_tile", helper.make_graph([helper.make_node("Tile", ["x", "r"], ["y"], name="ti")], "g",
                                [vi("x", [2, 3]), vi("r", [2], TensorProto.INT64)], [vi("y", None)]))
rt("rt_resize", helper.make_graph([helper.make_node("Resize", ["x", "", "", "sz"], ["y"], name="rz")], "g",
                                  [vi("x", [1, 1, 2, 2]), vi("sz", [4], TensorProto.INT64)], [vi("y", None)]))
rt("rt_reshape", helper.make_graph([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")], "g",
                                   [vi("x", [2, 3]), vi("s", [2], TensorProto.INT64)], [vi("y", None)]))
# ConstantOfShape of a constant [64,64] shape feeding a Relu: folded unless max_fold_bytes < 16 KiB
rt("rt_fold", helper.make_graph([helper.make_node("ConstantOfShape", ["s"], ["c"], name="cos"),
                                 helper.make_node("Relu", ["c"], ["y"], name="relu")], "g", [], [vi("y", None)],
                                [i64("s", [64, 64])]))
# Loop with no trip count and a condition that never turns false
body = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"], name="keep"),
                          helper.make_node("Add", ["v_in", "one"], ["v_out"], name="inc")], "body",
                         [vi("i", [], TensorProto.INT64), vi("c_in", [], TensorProto.BOOL), vi("v_in", [1])],
                         [vi("c_out", [], TensorProto.BOOL), vi("v_out", [1])], [floats("one", [1])])
rt("rt_loop_forever", helper.make_graph([helper.make_node("Loop", ["", "cond", "v"], ["y"], name="loop", body=body)],
                                        "g", [vi("cond", [], TensorProto.BOOL), vi("v", [1])], [vi("y", [1])]))

with open(os.path.join(HERE, "expected.txt"), "w") as f:
    f.write("# Written by make_corpus.py: <case> <af_status name> <substring of the error message>.\n")
    f.write("# AF_OK cases are controls that must load and build a session; tests/unit/test_robustness.c checks every line.\n")
    for name, status, sub in cases:
        f.write("%s %s %s\n" % (name, status, sub))
print("wrote %d cases to %s" % (len(cases), HERE), file=sys.stderr)
