#!/usr/bin/env python3
"""Kiln's hand-scheduled GPU programs against PyTorch on the same GPU, in one run.

For each case of a bundle (kiln_bench_gpu_programs wrote it): kiln-cuda-measure runs
the CUDA artifact on seeded inputs and saves inputs and outputs; PyTorch computes the
same operator on those inputs (cuBLAS / cuDNN, TF32 off: an fp32 comparison), the
outputs are compared, and both are timed with CUDA events (median of repeats, L2
flushed before each repeat). Prints a markdown table; --markdown also writes it.

usage: gpu_vs_torch.py --bundle DIR --measure KILN_CUDA_MEASURE --work DIR [--markdown FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import timeit

import numpy as np
import torch
import torch.nn.functional as F


def reference(case, inputs):
    kind = case["reference"]
    if kind == "matmul":
        return torch.matmul(inputs[0], inputs[1])
    if kind == "conv2d":
        attrs = case["workload"]["ops"][0]["attrs"]
        pads = attrs["pads"]
        return F.conv2d(inputs[0], inputs[1], stride=attrs["strides"], padding=(pads[0], pads[1]),
                        dilation=attrs["dilations"], groups=attrs["groups"])
    if kind == "softmax":
        return torch.softmax(inputs[0], dim=-1)
    if kind == "layer_norm":
        attrs = case["workload"]["ops"][0]["attrs"]
        return F.layer_norm(inputs[0], (inputs[0].shape[-1],), inputs[1], inputs[2], eps=attrs["epsilon"])
    raise ValueError("unknown reference " + kind)


def time_torch(fn, repeats, flush):
    if flush.device.type != "cuda":  # a dry run of this script on a host without a GPU
        return statistics.median(timeit.repeat(fn, number=1, repeat=repeats))
    fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    # Runs per repeat: enough for about 10 ms, as kiln-cuda-measure does.
    start.record()
    fn()
    stop.record()
    torch.cuda.synchronize()
    number = max(1, int(10.0 / max(start.elapsed_time(stop), 1e-3)))
    seconds = []
    for i in range(repeats):
        flush.fill_(i)
        start.record()
        for _ in range(number):
            fn()
        stop.record()
        torch.cuda.synchronize()
        seconds.append(start.elapsed_time(stop) / 1e3 / number)
    return statistics.median(seconds)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bundle", required=True)
    p.add_argument("--measure", required=True, help="the kiln-cuda-measure binary")
    p.add_argument("--work", required=True, help="where inputs and outputs are saved")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--markdown")
    p.add_argument("--device", default="cuda", help="cpu: a dry run of this script where there is no GPU")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    device = torch.device(args.device)
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 << 20) if device.type == "cuda" else 0
    flush = torch.empty(max(1, 2 * l2 // 4), dtype=torch.float32, device=device)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "none (dry run on the CPU)"
    cases = json.load(open(os.path.join(args.bundle, "cases.json")))
    rows, failures = [], 0
    sampled = {}  # workload: [programs checked, (fastest name, seconds), PyTorch seconds]
    for case in cases:
        artifact_path = os.path.join(args.bundle, case["artifact"])
        artifact = json.load(open(artifact_path))
        save = os.path.join(args.work, case["name"])
        run = subprocess.run([args.measure, artifact_path, "--save", save, "--repeats", str(args.repeats)],
                             capture_output=True, text=True)
        if run.returncode != 0:
            print(f"{case['name']}: kiln-cuda-measure failed ({run.returncode}): {run.stderr.strip()}")
            rows.append((case["name"], None, None, None, "measure failed: " + run.stderr.strip()[:200]))
            failures += 1
            continue
        kiln = json.loads(run.stdout)
        inputs = [torch.from_numpy(np.load(os.path.join(save, b["name"] + ".npy"))).to(device)
                  for b in artifact["buffers"] if b["role"] == "input"]
        outputs = [np.load(os.path.join(save, b["name"] + ".npy")) for b in artifact["buffers"] if b["role"] == "output"]
        want = reference(case, inputs)
        got = torch.from_numpy(outputs[0]).to(device).reshape(want.shape)
        rel = (torch.linalg.vector_norm((got - want).double()) / torch.linalg.vector_norm(want.double())).item()
        ok = rel < 1e-4
        failures += not ok
        torch_seconds = time_torch(lambda: reference(case, inputs), args.repeats, flush)
        rows.append((case["name"], kiln["median_seconds"], torch_seconds, case["flops"],
                     f"{'ok' if ok else 'WRONG'} (rel. L2 error {rel:.1e})"))
        if ok and "sampled_from" in case:
            group = sampled.setdefault(case["sampled_from"], [0, None, None])
            group[0] += 1
            if group[1] is None or kiln["median_seconds"] < group[1][1]:
                group[1] = (case["name"], kiln["median_seconds"])
            group[2] = min(torch_seconds, group[2] or torch_seconds)
    lines = [f"GPU: {gpu}, PyTorch {torch.__version__} (CUDA {torch.version.cuda}), "
             "fp32, TF32 off; median of {} repeats, L2 flushed before each".format(args.repeats), "",
             "| program | Kiln ms | PyTorch ms | PyTorch / Kiln | Kiln TFLOP/s | output |",
             "|---|---:|---:|---:|---:|---|"]
    for name, k, t, flops, check in rows:
        if k is None:
            lines.append(f"| {name} | — | — | — | — | {check} |")
            continue
        tflops = f"{flops / k / 1e12:.2f}" if flops else "—"
        lines.append(f"| {name} | {k * 1e3:.3f} | {t * 1e3:.3f} | {t / k:.2f} | {tflops} | {check} |")
    if sampled:
        lines += ["", "Programs of the GPU search space, sampled at random (a tuner's first rounds), best of each "
                  "workload's:", "", "| workload | sampled (correct) | best | Kiln ms | PyTorch ms | PyTorch / Kiln |",
                  "|---|---:|---|---:|---:|---:|"]
        for workload, (count, (name, k), t) in sampled.items():
            lines.append(f"| {workload} | {count} | {name} | {k * 1e3:.3f} | {t * 1e3:.3f} | {t / k:.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        open(args.markdown, "w").write(text)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
