#!/usr/bin/env python3
"""Whole models: Kiln's compiled model against ONNX Runtime, side by side.

For each model: `kiln compile` (with --db, the database's schedules; without, the
untuned defaults), then ROUNDS alternating blocks at each thread count: `kiln bench`
(REPEAT timed runs, median) and ONNX Runtime on the same input (same thread count,
REPEAT runs, median). Prints per model and thread count the median of the blocks'
medians and the ratio ONNX Runtime time / Kiln time (above 1: Kiln is faster).

Needs ONNX Runtime from PyPI: pip install onnxruntime numpy
Usage: bench/models_vs_ort.py [--kiln build/cli/kiln] [--models DIR] [--db FILE]
                              [--threads 1,2] [--rounds 3] [--repeat 20] NAME...
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort


def kiln_bench(kiln, model_dir, threads, repeat):
    out = subprocess.run([kiln, "bench", "--model", model_dir, "--threads", str(threads), "--repeat", str(repeat)],
                         check=True, capture_output=True, text=True).stdout
    return float(re.search(r"median ([0-9.]+) ms", out).group(1))


def kiln_compile(kiln, onnx_path, compiled, db, layout=""):
    """`kiln compile` (with the database's schedules when db is given, in `layout` when
    given: tune and compile with the same one); logs its report."""
    cmd = [kiln, "compile", "--model", onnx_path, "-o", compiled] + (["--db", db] if db else []) + \
        (["--layout", layout] if layout else [])
    print("# " + subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip(), file=sys.stderr)


def model_input(models, name, onnx_path):
    """The model's input name and data: its reference input when the folder has one."""
    session_input = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"]).get_inputs()[0]
    shape = [int(d) for d in session_input.shape]
    raw = os.path.join(models, name + ".input.bin")
    data = np.fromfile(raw, dtype=np.float32).reshape(shape) if os.path.exists(raw) else \
        np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    return session_input.name, data


def ort_bench(session, feed, repeat):
    for _ in range(3):
        session.run(None, feed)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        session.run(None, feed)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kiln", default="build/cli/kiln")
    p.add_argument("--models", default="tests/frontend/models")
    p.add_argument("--db", default="")
    p.add_argument("--layout", default="", help="kiln compile's --layout (NCHW|NHWC); empty: its default")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("names", nargs="+")
    a = p.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    print(f"{'model':<12} {'threads':>7} {'kiln ms':>9} {'ort ms':>9} {'ort/kiln':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.names:
            onnx_path = os.path.join(a.models, name + ".onnx")
            compiled = os.path.join(tmp, name + ".kiln")
            kiln_compile(a.kiln, onnx_path, compiled, a.db, a.layout)
            input_name, data = model_input(a.models, name, onnx_path)
            for t in threads:
                options = ort.SessionOptions()
                options.intra_op_num_threads = t
                options.inter_op_num_threads = 1
                session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
                feed = {input_name: data}
                kiln_ms, ort_ms = [], []
                for _ in range(a.rounds):
                    kiln_ms.append(kiln_bench(a.kiln, compiled, t, a.repeat))
                    ort_ms.append(ort_bench(session, feed, a.repeat))
                k, o = statistics.median(kiln_ms), statistics.median(ort_ms)
                print(f"{name:<12} {t:>7} {k:>9.3f} {o:>9.3f} {o / k:>9.3f}", flush=True)


if __name__ == "__main__":
    main()
