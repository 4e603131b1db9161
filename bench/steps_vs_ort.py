#!/usr/bin/env python3
"""Where a model's time goes: Kiln's steps against ONNX Runtime's nodes, side by side.

Compiles the model (`kiln compile`, with --db the database's schedules), then ROUNDS
alternating blocks: `kiln bench --profile` (each step timed inside the inferences) and
ONNX Runtime with its profiler on (each node's kernel time inside the inferences), at
the same thread count. Steps and nodes are grouped by the spatial height of their first
input (rank-4 inputs, in NCHW or ONNX Runtime's blocked NCHWc layout alike), everything
else under "other"; each group's time is the sum of its steps' (nodes') medians, and the
table gives the median of the rounds and the ratio ONNX Runtime / Kiln (above 1: Kiln is
faster there). With --steps it also lists every Kiln step and every ONNX Runtime node.

Needs ONNX Runtime from PyPI: pip install onnxruntime numpy
Usage: bench/steps_vs_ort.py [--kiln build/cli/kiln] [--models DIR] [--db FILE] [--layout NCHW|NHWC] [--no-winograd]
                             [--threads 2] [--rounds 3] [--repeat 20] [--steps] NAME
"""
import argparse
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import onnxruntime as ort

from models_vs_ort import kiln_compile, model_input

STEP_LINE = re.compile(r"^\s*(\d+)\s+([0-9.]+)\s+\S+\s+\S+\s+[0-9.]+%\s+(\S+)\s+(\S+)\s*$")


def group_of(shape, nhwc=False):
    if len(shape) < 4:
        return "other"
    return str(shape[1] if nhwc else shape[2])


def kiln_steps(kiln, model_dir, threads, repeat, nhwc=False):
    out = subprocess.run([kiln, "bench", "--compiled", model_dir, "--threads", str(threads), "--repeat", str(repeat),
                          "--profile"], check=True, capture_output=True, text=True).stdout
    steps = []
    winograd_group = None
    for line in out.splitlines():
        m = STEP_LINE.match(line)
        if m:
            shape = [int(d) for d in m.group(4).split("x")]
            # With --layout NHWC every image step reads NHWC but the transpose of the model's input.
            channels_last = nhwc and m.group(3) != "transpose"
            group = group_of(shape, channels_last)
            # A Winograd convolution's products and output transform read [16, tiles, C]:
            # they belong to the image of the input transform before them.
            if m.group(3).startswith("winograd_input_transform"):
                winograd_group = group
            elif winograd_group and (m.group(3) == "batch_matmul" or m.group(3).startswith("winograd_output")):
                group = winograd_group
            steps.append((f"{m.group(3)} {m.group(4)}", group, float(m.group(2))))
    if not steps:
        sys.exit("no per-step lines in `kiln bench --profile`'s output:\n" + out)
    return steps


def ort_nodes(onnx_path, feed, threads, repeat, prefix):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.enable_profiling = True
    options.profile_file_prefix = prefix
    session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
    for _ in range(3 + repeat):
        session.run(None, feed)
    with open(session.end_profiling()) as f:
        events = json.load(f)
    durations = collections.defaultdict(list)
    info = {}
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        name = e["name"][:-len("_kernel_time")]
        durations[name].append(e["dur"] / 1e3)
        if name not in info:
            shapes = e["args"].get("input_type_shape", [])
            shape = list(shapes[0].values())[0] if shapes else []
            info[name] = (f"{e['args'].get('op_name', '?')} {'x'.join(str(d) for d in shape)}", group_of(shape))
    # The first 3 runs of every node are warm-up.
    return [(info[n][0], info[n][1], statistics.median(d[3:] or d)) for n, d in durations.items()]


def by_group(entries):
    sums = collections.OrderedDict()
    for _, group, ms in entries:
        sums[group] = sums.get(group, 0.0) + ms
    return sums


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kiln", default="build/cli/kiln")
    p.add_argument("--models", default="tests/frontend/models")
    p.add_argument("--db", default="")
    p.add_argument("--layout", default="", help="kiln compile's --layout (NCHW|NHWC); empty: its default")
    p.add_argument("--no-winograd", action="store_true", help="kiln compile's --no-winograd")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--steps", action="store_true", help="also list every step and node (medians of the rounds)")
    p.add_argument("name")
    a = p.parse_args()
    onnx_path = os.path.join(a.models, a.name + ".onnx")
    with tempfile.TemporaryDirectory() as tmp:
        compiled = os.path.join(tmp, a.name + ".kiln")
        kiln_compile(a.kiln, onnx_path, compiled, a.db, a.layout, a.no_winograd)
        input_name, data = model_input(a.models, a.name, onnx_path)
        feed = {input_name: data}
        kiln_rounds, ort_rounds = [], []
        for r in range(a.rounds):
            kiln_rounds.append(kiln_steps(a.kiln, compiled, a.threads, a.repeat, a.layout == "NHWC"))
            ort_rounds.append(ort_nodes(onnx_path, feed, a.threads, a.repeat, os.path.join(tmp, f"ort{r}")))

    def median_groups(rounds):
        sums = [by_group(r) for r in rounds]
        return collections.OrderedDict((g, statistics.median(s.get(g, 0.0) for s in sums)) for g in sums[0])

    kiln_groups, ort_groups = median_groups(kiln_rounds), median_groups(ort_rounds)
    groups = list(kiln_groups) + [g for g in ort_groups if g not in kiln_groups]
    print(f"{a.name}, {a.threads} threads, {a.rounds} rounds of {a.repeat} runs; groups by the first input's height")
    print(f"{'group':>6} {'kiln steps':>10} {'kiln ms':>9} {'ort nodes':>9} {'ort ms':>9} {'ort/kiln':>9}")
    for g in groups:
        k, o = kiln_groups.get(g, 0.0), ort_groups.get(g, 0.0)
        nk = sum(1 for e in kiln_rounds[0] if e[1] == g)
        no = sum(1 for e in ort_rounds[0] if e[1] == g)
        print(f"{g:>6} {nk:>10} {k:>9.3f} {no:>9} {o:>9.3f} {o / k if k else float('inf'):>9.3f}")
    k, o = sum(kiln_groups.values()), sum(ort_groups.values())
    print(f"{'all':>6} {len(kiln_rounds[0]):>10} {k:>9.3f} {len(ort_rounds[0]):>9} {o:>9.3f} {o / k:>9.3f}")
    if a.steps:
        for title, rounds in (("kiln steps", kiln_rounds), ("onnx runtime nodes", ort_rounds)):
            print(f"\n{title} (median of the rounds, ms):")
            for i, (label, group, _) in enumerate(rounds[0]):
                ms = statistics.median(r[i][2] for r in rounds if i < len(r))
                print(f"{i:>4} {ms:>8.3f} {group:>6}  {label}")


if __name__ == "__main__":
    main()
