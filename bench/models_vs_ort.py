#!/usr/bin/env python3
"""Whole models: Kiln's compiled model against ONNX Runtime, side by side.

For each model: `kiln compile` (with --db, the database's schedules; without, the
untuned defaults), then ROUNDS alternating blocks at each thread count: `kiln bench`
(REPEAT timed runs, median) and ONNX Runtime on the same input (same thread count,
REPEAT runs, median). Prints per model and thread count the median of the blocks'
medians and the ratio ONNX Runtime time / Kiln time (above 1: Kiln is faster).
With --against-db (and --against-layout, --against-no-winograd, --against-kiln), a second
compiled model of the same ONNX file runs in every block too, so two databases, layouts
or builds of kiln compare in one time window (columns "other ms" and "ort/other");
--against-kiln compiles and times the second model with another kiln program (a build
of another commit, with its own database). With --dbs A,B,C (the same job tuned with
different seeds), one compiled model per database runs in every block, in an order that
rotates from block to block, and the report gives each one's ratio and their min /
median / max: the spread a user who tunes once draws from. --no-winograd compiles with kiln's
--no-winograd (tune and compile with the same choice).

Needs ONNX Runtime from PyPI: pip install onnxruntime numpy
Usage: bench/models_vs_ort.py [--kiln build/cli/kiln] [--models DIR] [--db FILE] [--layout L] [--no-winograd]
                              [--against-db FILE [--against-layout L] [--against-no-winograd]
                               [--against-kiln PROGRAM]] [--dbs A,B,C]
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
    out = subprocess.run([kiln, "bench", "--compiled", model_dir, "--threads", str(threads), "--repeat", str(repeat)],
                         check=True, capture_output=True, text=True).stdout
    value, unit = re.search(r"median ([0-9.]+) (ms|us)", out).groups()
    return float(value) / (1e3 if unit == "us" else 1.0)


def kiln_compile(kiln, onnx_path, compiled, db, layout="", no_winograd=False):
    """`kiln compile` (with the database's schedules when db is given, in `layout` when
    given, with direct convolutions only when asked: tune and compile with the same
    choices); logs its report."""
    cmd = [kiln, "compile", "--model", onnx_path, "-o", compiled] + (["--db", db] if db else []) + \
        (["--layout", layout] if layout else []) + (["--no-winograd"] if no_winograd else [])
    print("# " + subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip(), file=sys.stderr)


def model_feed(models, name, onnx_path):
    """ONNX Runtime's feed: the model's reference input when the folder has one, else
    seeded data per input (floats from a normal distribution; integer inputs, token
    ids and masks, 0 or 1, valid for any vocabulary)."""
    feed = {}
    rng = np.random.default_rng(0)
    for i in ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"]).get_inputs():
        shape = [int(d) for d in i.shape]
        raw = os.path.join(models, name + ".input.bin")
        if "int64" in i.type or "int32" in i.type:
            feed[i.name] = rng.integers(0, 2, shape).astype(np.int64 if "int64" in i.type else np.int32)
        elif os.path.exists(raw) and not feed:
            feed[i.name] = np.fromfile(raw, dtype=np.float32).reshape(shape)
        else:
            feed[i.name] = rng.standard_normal(shape, dtype=np.float32)
    return feed


def ort_session(onnx_path, threads):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])


def ort_bench(session, feed, repeat):
    for _ in range(3):
        session.run(None, feed)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        session.run(None, feed)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def seeds_side_by_side(a, dbs, threads):
    """One compiled model per database, all of them and ONNX Runtime timed in every
    block, the order of the Kiln models rotating from block to block."""
    print(f"{'model':<12} {'threads':>7} {'db':<40} {'kiln ms':>9} {'ort ms':>9} {'ort/kiln':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.names:
            onnx_path = os.path.join(a.models, name + ".onnx")
            compiled = []
            for i, db in enumerate(dbs):
                compiled.append(os.path.join(tmp, f"{name}.{i}.kiln"))
                kiln_compile(a.kiln, onnx_path, compiled[-1], db, a.layout, a.no_winograd)
            feed = model_feed(a.models, name, onnx_path)
            for t in threads:
                session = ort_session(onnx_path, t)
                kiln_ms, ort_ms = [[] for _ in dbs], []
                for r in range(a.rounds):
                    for k in range(len(dbs)):
                        i = (r + k) % len(dbs)
                        kiln_ms[i].append(kiln_bench(a.kiln, compiled[i], t, a.repeat))
                    ort_ms.append(ort_bench(session, feed, a.repeat))
                o = statistics.median(ort_ms)
                ratios = []
                for db, ms in zip(dbs, kiln_ms):
                    k = statistics.median(ms)
                    ratios.append(o / k)
                    print(f"{name:<12} {t:>7} {os.path.basename(db):<40} {k:>9.3f} {o:>9.3f} {o / k:>9.3f}", flush=True)
                print(f"{name:<12} {t:>7} {'ort/kiln over ' + str(len(dbs)) + ' databases:':<40} min {min(ratios):.3f}"
                      f"  median {statistics.median(ratios):.3f}  max {max(ratios):.3f}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kiln", default="build/cli/kiln")
    p.add_argument("--models", default="tests/frontend/models")
    p.add_argument("--db", default="")
    p.add_argument("--layout", default="", help="kiln compile's --layout (NCHW|NHWC); empty: its default")
    p.add_argument("--no-winograd", action="store_true", help="kiln compile's --no-winograd")
    p.add_argument("--against-db", default="", help="a second database, timed in the same blocks")
    p.add_argument("--against-layout", default="", help="kiln compile's --layout for --against-db")
    p.add_argument("--against-no-winograd", action="store_true", help="kiln compile's --no-winograd for --against-db")
    p.add_argument("--against-kiln", default="", help="the kiln program for --against-db (default: --kiln)")
    p.add_argument("--dbs", default="", help="comma-separated databases (one job, several seeds), timed in the same "
                   "blocks; prints each one's ratio and their min / median / max (replaces --db, --against-*)")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("names", nargs="+")
    a = p.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    if a.dbs:
        seeds_side_by_side(a, [d for d in a.dbs.split(",") if d], threads)
        return
    other = bool(a.against_db)
    other_kiln = a.against_kiln or a.kiln
    print(f"{'model':<12} {'threads':>7} {'kiln ms':>9} {'ort ms':>9} {'ort/kiln':>9}" +
          (f" {'other ms':>9} {'ort/other':>9}" if other else ""))
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.names:
            onnx_path = os.path.join(a.models, name + ".onnx")
            compiled = os.path.join(tmp, name + ".kiln")
            kiln_compile(a.kiln, onnx_path, compiled, a.db, a.layout, a.no_winograd)
            compiled_other = os.path.join(tmp, name + ".other.kiln")
            if other:
                kiln_compile(other_kiln, onnx_path, compiled_other, a.against_db, a.against_layout,
                             a.against_no_winograd)
            feed = model_feed(a.models, name, onnx_path)
            for t in threads:
                session = ort_session(onnx_path, t)
                kiln_ms, ort_ms, other_ms = [], [], []
                for _ in range(a.rounds):
                    kiln_ms.append(kiln_bench(a.kiln, compiled, t, a.repeat))
                    if other:
                        other_ms.append(kiln_bench(other_kiln, compiled_other, t, a.repeat))
                    ort_ms.append(ort_bench(session, feed, a.repeat))
                k, o = statistics.median(kiln_ms), statistics.median(ort_ms)
                line = f"{name:<12} {t:>7} {k:>9.3f} {o:>9.3f} {o / k:>9.3f}"
                if other:
                    k2 = statistics.median(other_ms)
                    line += f" {k2:>9.3f} {o / k2:>9.3f}"
                print(line, flush=True)


if __name__ == "__main__":
    main()
