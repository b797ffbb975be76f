#!/usr/bin/python3
"""Checks ONNX files written by af_model_save with ONNX's own tooling (manual / CI use).

    /usr/bin/python3 tests/tools/check_saved_model.py SAVED.onnx [--ref FIXTURE_DIR] [--no-ort]

1. onnx.checker.check_model(path, full_check=True), which includes strict shape inference.
2. ONNX shape inference on a copy without our value_info, compared with the value_info and graph
   output types autofusion wrote (where both sides know a dim). A mismatch means our inference
   disagrees with ONNX's.
3. With --ref, ONNX Runtime (models/ort_run.js, if models/node_modules holds onnxruntime-node) runs
   the saved model on FIXTURE_DIR/test_data_set_0/input_*.pb; its outputs are compared with the
   fixture's output_*.pb (the references ORT computed on the original export).

Exit status 0 when every check that ran passed. Needs Debian's python3 with onnx and numpy.
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def type_str(t):
    if not t.HasField("tensor_type"):
        return "?"
    tt = t.tensor_type
    if not tt.HasField("shape"):
        return "%d[?]" % tt.elem_type
    dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]
    return "%d[%s]" % (tt.elem_type, ",".join(dims))


def conflicts(ours, theirs):
    """Where both types are known: different element type, rank, or a dim both give as a number."""
    if not ours.HasField("tensor_type") or not theirs.HasField("tensor_type"):
        return False
    a, b = ours.tensor_type, theirs.tensor_type
    if a.elem_type and b.elem_type and a.elem_type != b.elem_type:
        return True
    if not a.HasField("shape") or not b.HasField("shape"):
        return False
    if len(a.shape.dim) != len(b.shape.dim):
        return True
    return any(x.HasField("dim_value") and y.HasField("dim_value") and x.dim_value != y.dim_value
               for x, y in zip(a.shape.dim, b.shape.dim))


def check_inference(model):
    """Compares our value_info/outputs with ONNX's shape inference run without them."""
    stripped = onnx.ModelProto()
    stripped.CopyFrom(model)
    del stripped.graph.value_info[:]
    for o in stripped.graph.output:
        o.type.tensor_type.ClearField("shape")
    inferred = shape_inference.infer_shapes(stripped)
    theirs = {v.name: v.type for v in inferred.graph.value_info}
    theirs.update({v.name: v.type for v in inferred.graph.output})
    ours = list(model.graph.value_info) + list(model.graph.output)
    bad, compared = [], 0
    for v in ours:
        if v.name not in theirs:
            continue
        compared += 1
        if conflicts(v.type, theirs[v.name]):
            bad.append("%s: autofusion %s, onnx %s" % (v.name, type_str(v.type), type_str(theirs[v.name])))
    return compared, bad


def ort_available():
    return (os.path.isdir(os.path.join(REPO, "models", "node_modules", "onnxruntime-node"))
            and subprocess.run(["node", "--version"], capture_output=True).returncode == 0)


def check_ort(path, ref_dir, rtol, atol):
    data = os.path.join(ref_dir, "test_data_set_0")
    refs = sorted(glob.glob(os.path.join(data, "output_*.pb")), key=lambda p: int(p.rsplit("_", 1)[1][:-3]))
    with tempfile.TemporaryDirectory() as out:
        r = subprocess.run(["node", os.path.join(REPO, "models", "ort_run.js"), path, out, "--inputs", data,
                            "--quiet"], capture_output=True, text=True)
        if r.returncode != 0:
            return False, "ort_run.js failed: " + (r.stderr or r.stdout).strip()[-800:]
        lines, ok = [], True
        for k, ref_path in enumerate(refs):
            got_path = os.path.join(out, "test_data_set_0", "output_%d.pb" % k)
            if not os.path.exists(got_path):
                return False, "ORT wrote no output_%d.pb" % k
            want = numpy_helper.to_array(onnx.load_tensor(ref_path))
            got = numpy_helper.to_array(onnx.load_tensor(got_path))
            if got.shape != want.shape or got.dtype != want.dtype:
                ok = False
                lines.append("output %d: %s %s, reference %s %s" % (k, got.dtype, got.shape, want.dtype, want.shape))
                continue
            same = got.tobytes() == want.tobytes()
            close = np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
            err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if got.size else 0.0
            ok = ok and close
            lines.append("output %d: %s, max abs diff %.3g" % (k, "bit-identical" if same else
                                                               ("close" if close else "DIFFERS"), err))
        return ok, "; ".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--ref", help="fixture folder holding test_data_set_0 with ORT reference outputs")
    ap.add_argument("--no-ort", action="store_true", help="skip the ONNX Runtime comparison")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--atol", type=float, default=1e-5)
    args = ap.parse_args()

    failed = False
    model = onnx.load(args.model)
    try:
        onnx.checker.check_model(args.model, full_check=True)
        print("checker (full_check): OK")
    except Exception as e:  # the checker raises several exception types
        failed = True
        print("checker (full_check): FAIL: %s" % str(e).strip().splitlines()[0])
    try:
        compared, bad = check_inference(model)
        print("shape inference: %d value types compared, %d conflicts" % (compared, len(bad)))
        for line in bad[:20]:
            print("  " + line)
        failed = failed or bool(bad)
    except Exception as e:
        failed = True
        print("shape inference: FAIL: %s" % str(e).strip().splitlines()[0])
    if args.ref and not args.no_ort:
        if not ort_available():
            print("onnxruntime: skipped (models/node_modules/onnxruntime-node or node missing)")
        else:
            ok, msg = check_ort(args.model, args.ref, args.rtol, args.atol)
            print("onnxruntime: %s: %s" % ("OK" if ok else "FAIL", msg))
            failed = failed or not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
