#!/usr/bin/env python3
"""Models Kiln compiled for a GPU against PyTorch eager on the same GPU, in one run.

For each compiled model of a bundle (scripts/gpu-check prepare wrote them with
`kiln compile --target 'cuda -arch=…'`, beside each model's reference input and output
as raw float32): the model runs through the C API (kiln.Model over libkiln_model, on
the GPU through the driver), its output is compared with the reference, and it is
timed end to end (input copied to the GPU, every step, output copied back: what a
caller of the C API waits for), median of repeats. PyTorch eager runs the same
architecture (torchvision's resnet18, an encoder of nn.TransformerEncoderLayer for
bert_tiny; random weights: timing only), from a host array to a host array, on the same
GPU, TF32 off. Prints a markdown table; --markdown also writes it.

usage: gpu_models_vs_torch.py --bundle DIR [--repeats N] [--markdown FILE]
(KILN_LIBRARY_PATH names the folder with libkiln_model.so.1 and libkiln_runtime.so.1)
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import kiln  # noqa: E402


def torch_peer(name, device):
    """The same architecture in PyTorch (random weights), or None."""
    import torch
    if name == "resnet18":
        try:
            import torchvision
        except ImportError:
            return None
        return torchvision.models.resnet18(weights=None).eval().to(device)
    if name in ("bert_tiny", "bert_tiny_opset17"):
        layer = torch.nn.TransformerEncoderLayer(128, 2, 512, dropout=0.0, activation="gelu", batch_first=True)
        return torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval().to(device)
    return None


def median_seconds(fn, repeats):
    fn()  # warm-up: module loads, allocations, clocks
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bundle", required=True, help="folder of NAME.kiln compiled models with NAME.input.bin/.ref.bin")
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--markdown")
    args = p.parse_args()
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = "cuda" if torch.cuda.is_available() else "cpu"
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "no GPU"
    rows, failed = [], False
    for entry in sorted(os.listdir(args.bundle)):
        if not entry.endswith(".kiln"):
            continue
        name = entry[: -len(".kiln")]
        folder = os.path.join(args.bundle, entry)
        try:
            model = kiln.Model(folder)
        except kiln.KilnError as e:
            rows.append(f"| {name} | — | — | — | — | cannot load: {e} |")
            failed = True
            continue
        info = model.inputs[0]
        x = np.fromfile(os.path.join(args.bundle, name + ".input.bin"), dtype=np.float32).reshape(info.shape)
        want = np.fromfile(os.path.join(args.bundle, name + ".ref.bin"), dtype=np.float32)
        got = model.run(x)[0].reshape(-1)
        error = float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))
        ok = error <= 1e-4
        failed |= not ok
        steps = len(json.load(open(os.path.join(folder, "model.json")))["steps"])
        kiln_s = median_seconds(lambda: model.run(x), args.repeats)
        peer = torch_peer(name, device)
        torch_cell, ratio_cell = "—", "—"
        if peer is not None:
            with torch.no_grad():
                def eager():
                    out = peer(torch.from_numpy(x).to(device))
                    return out.cpu()
                torch_s = median_seconds(eager, args.repeats)
            torch_cell = f"{torch_s * 1e3:.3f}"
            ratio_cell = f"{torch_s / kiln_s:.2f}"
        rows.append(f"| {name} | {steps} | {error:.1e} {'ok' if ok else 'WRONG'} | {kiln_s * 1e3:.3f} | {torch_cell} | "
                    f"{ratio_cell} |")
    table = [f"GPU: {gpu}; untuned unless the bundle's models were compiled with a database; "
             f"end to end from host input to host output, median of {args.repeats}", "",
             "| model | steps | rel. L2 vs reference | Kiln ms | PyTorch eager ms | PyTorch / Kiln |",
             "|---|---:|---|---:|---:|---:|"] + rows
    text = "\n".join(table) + "\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write("\n" + text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
