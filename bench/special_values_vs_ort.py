#!/usr/bin/env python3
"""NaN, infinities, signed zeros and extremes through single-operator ONNX models:
Kiln (kiln compile + kiln run) against ONNX Runtime, element by element.

Usage: bench/special_values_vs_ort.py --kiln build/cli/kiln [--ops Relu,Tanh,...] [--work DIR]
Needs: pip install onnx onnxruntime numpy. Prints one line per operator: "same", or
the elements where the two differ (NaN matches NaN; other values must agree within
1e-5 relative, infinities exactly). Exit status 1 when any operator differs.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 88.0, -88.0, 1e-30, 3e38],
                   dtype=np.float32).reshape(3, 4)


def scalar(name, value):
    return helper.make_tensor(name, TensorProto.FLOAT, [], [value])


# name -> (node inputs beyond x, initializers, attributes, output shape)
ELEMENTWISE = ["Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Abs", "Neg", "Erf", "Softplus", "Elu", "Selu",
               "HardSigmoid", "HardSwish", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin", "Cos", "LeakyRelu",
               "Mish", "Softsign"]
REDUCTIONS = ["ReduceMax", "ReduceMin", "ReduceSum", "ReduceMean"]


def model_of(op):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])
    inits, extra, attrs, out_shape = [], [], {}, [3, 4]
    if op == "Clip":
        inits, extra = [scalar("lo", -1.0), scalar("hi", 2.0)], ["lo", "hi"]
    elif op in ("Max", "Min", "Add", "Mul", "Div", "Pow"):
        inits, extra = [helper.make_tensor("y", TensorProto.FLOAT, [4], [0.0, 1.0, np.nan, -np.inf])], ["y"]
    elif op in REDUCTIONS:
        inits, extra = [helper.make_tensor("axes", TensorProto.INT64, [1], [1])], ["axes"]
        attrs, out_shape = {"keepdims": 1}, [3, 1]
    elif op in ("Softmax", "LogSoftmax"):
        attrs = {"axis": -1}
    elif op == "LayerNormalization":
        inits = [helper.make_tensor("g", TensorProto.FLOAT, [4], [1.0] * 4), helper.make_tensor("b", TensorProto.FLOAT, [4], [0.0] * 4)]
        extra = ["g", "b"]
    node = helper.make_node(op, ["x"] + extra, ["out"], **attrs)
    graph = helper.make_graph([node], op, [x], [helper.make_tensor_value_info("out", TensorProto.FLOAT, out_shape)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def differ(kiln_out, ort_out):
    bad = []
    for i, (a, b) in enumerate(zip(kiln_out.ravel(), ort_out.ravel())):
        if np.isnan(a) and np.isnan(b):
            continue
        if np.isinf(b) or np.isinf(a):
            if a != b:
                bad.append((i, a, b))
            continue
        if not abs(a - b) <= 1e-5 * max(1.0, abs(b)):
            bad.append((i, a, b))
    return bad


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--ops", default=",".join(ELEMENTWISE + ["Clip", "Max", "Min", "Div", "Pow", "Softmax",
                                                                "LogSoftmax", "LayerNormalization"] + REDUCTIONS))
    parser.add_argument("--work", default=None)
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="kiln_special_")
    np.save(os.path.join(work, "x.npy"), SPECIAL)
    differing = 0
    for op in args.ops.split(","):
        path = os.path.join(work, op + ".onnx")
        onnx.save(model_of(op), path)
        want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": SPECIAL})[0]
        compiled = os.path.join(work, op + ".kiln")
        out = os.path.join(work, op + ".out.npy")
        steps = [[args.kiln, "compile", "--model", path, "-o", compiled],
                 [args.kiln, "run", "--compiled", compiled, "--input", os.path.join(work, "x.npy"), "--output", out]]
        failed = None
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True)
            if done.returncode != 0:
                failed = (done.stderr or done.stdout).strip().splitlines()[-1:]
                break
        if failed is not None:
            print(f"{op:20s} kiln failed: {failed}")
            differing += 1
            continue
        got = np.load(out).reshape(want.shape)
        bad = differ(got, want)
        if bad:
            differing += 1
            shown = ", ".join(f"x[{i}]={SPECIAL.ravel()[i] if got.size == SPECIAL.size else i}: kiln {a!r} ort {b!r}"
                              for i, a, b in bad[:4])
            print(f"{op:20s} differs at {len(bad)} element(s): {shown}")
        else:
            print(f"{op:20s} same")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
