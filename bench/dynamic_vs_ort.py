#!/usr/bin/env python3
"""A model with a dynamic sequence length: Kiln tuned once for the range against Kiln
tuned separately per length, and against ONNX Runtime, at lengths neither tuned for.

1. Range: `kiln tune --dim sequence=MIN..MAX --trials B` once (its buckets' tasks
   together, weighted by how often each bucket runs), then one `kiln compile` of the
   dynamic model.
2. Separately: the same model fixed at each of the range model's bucket lengths, each
   tuned with B trials and compiled on its own. A call at a held-out length runs the
   smallest of these that holds it, its inputs padded (the attention mask hides the
   padding: what users of fixed-shape models do).
3. At HELDOUT lengths that are no bucket's, ROUNDS alternating blocks: the range
   model (`kiln bench --dim sequence=N`), the separately tuned model that holds N, and
   ONNX Runtime on the dynamic model at N (same threads). Prints per length the medians
   and ratios, their geometric means, and the tuning times.
4. With --check, every length of the range: the range model (`kiln run`) against ONNX
   Runtime's outputs on the same inputs (relative L2 error at most 1e-4).

Needs ONNX Runtime from PyPI: pip install onnxruntime numpy
Usage: bench/dynamic_vs_ort.py --model M.onnx [--kiln build/cli/kiln] [--dim sequence=1..128] [--fixed batch=1]
                               [--trials B] [--work DIR] [--threads 2] [--heldout 16] [--rounds 3] [--repeat 20]
                               [--skip-tuning] [--check]
"""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort

from models_vs_ort import ort_bench


def run(cmd, log=True):
    if log:
        print("# " + " ".join(cmd), file=sys.stderr)
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def median_ms(out):
    value, unit = re.search(r"median ([0-9.]+) (ms|us)", out).groups()
    return float(value) / (1e3 if unit == "us" else 1.0)


def tune(kiln, model, dims, trials, db):
    start = time.time()
    run([kiln, "tune", "--model", model, "--trials", str(trials), "--db", db, "--no-measure", "--quiet"] +
        sum((["--dim", d] for d in dims), []))
    return time.time() - start


def feed_at(session, n, rng):
    feed = {}
    for i in session.get_inputs():
        shape = [n if not isinstance(d, int) else d for d in i.shape]
        if "mask" in i.name:
            feed[i.name] = np.ones(shape, np.int64)
        elif "type" in i.name:
            feed[i.name] = np.zeros(shape, np.int64)
        else:
            feed[i.name] = rng.integers(0, 1000, shape).astype(np.int64)
    return feed


def check_every_length(a, session, compiled, name, low, high):
    rng = np.random.default_rng(1)
    io = os.path.join(a.work, "check")
    os.makedirs(io, exist_ok=True)
    worst, failed = 0.0, []
    for n in range(low, high + 1):
        feed = feed_at(session, n, rng)
        if "attention_mask" in feed and n > 1:
            feed["attention_mask"][:, n - max(1, n // 4):] = 0  # padded tokens of its own
        cmd = [a.kiln, "run", "--compiled", compiled]
        for key, value in feed.items():
            np.save(os.path.join(io, key + ".npy"), value)
            cmd += ["--input", f"{key}={os.path.join(io, key + '.npy')}"]
        for out, value in zip(session.get_outputs(), session.run(None, feed)):
            np.save(os.path.join(io, "want." + out.name + ".npy"), value)
            cmd += ["--compare", f"{out.name}={os.path.join(io, 'want.' + out.name + '.npy')}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        errors = [float(e) for e in re.findall(r"relative L2 error ([0-9.e+-]+)", r.stdout)]
        worst = max([worst] + errors)
        if r.returncode != 0 or not errors:
            failed.append(n)
    print(f"check: {high - low + 1} lengths {low}..{high} against ONNX Runtime, worst relative L2 error {worst:.3g}, "
          f"failed: {failed if failed else 'none'}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--kiln", default="build/cli/kiln")
    p.add_argument("--dim", default="sequence=1..128")
    p.add_argument("--fixed", action="append", default=[], help="other --dim NAME=VALUE the model needs")
    p.add_argument("--trials", type=int, default=1000)
    p.add_argument("--work", default="dynamic_bench")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--heldout", type=int, default=16)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--repeat", type=int, default=100)
    p.add_argument("--skip-tuning", action="store_true", help="reuse the databases in --work")
    p.add_argument("--check", action="store_true", help="then check every length against ONNX Runtime's outputs")
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    name, span = a.dim.split("=")
    low, high = (int(v) for v in span.split(".."))
    fixed = sum((["--dim", f] for f in a.fixed), [])
    times_file = os.path.join(a.work, "tuning_seconds.json")
    times = json.load(open(times_file)) if a.skip_tuning and os.path.exists(times_file) else {}

    # 1. Once for the range.
    range_db, range_model = os.path.join(a.work, "range.db"), os.path.join(a.work, "range.kiln")
    if not a.skip_tuning:
        times["range"] = tune(a.kiln, a.model, a.fixed + [a.dim], a.trials, range_db)
    run([a.kiln, "compile", "--model", a.model, "--dim", a.dim, "--db", range_db, "-o", range_model] + fixed)
    buckets = [b["values"][0] for b in json.load(open(os.path.join(range_model, "dynamic.json")))["buckets"]]
    print(f"# buckets: {buckets}", file=sys.stderr)

    # 2. Separately at each bucket's length.
    separate = {}
    for length in buckets:
        db, compiled = os.path.join(a.work, f"len{length}.db"), os.path.join(a.work, f"len{length}.kiln")
        if not a.skip_tuning:
            times[f"len{length}"] = tune(a.kiln, a.model, a.fixed + [f"{name}={length}"], a.trials, db)
        run([a.kiln, "compile", "--model", a.model, "--dim", f"{name}={length}", "--db", db, "-o", compiled] + fixed)
        separate[length] = compiled
    json.dump(times, open(times_file, "w"), indent=1)

    # 3. Held-out lengths: spread over the range, none a bucket.
    heldout = []
    for v in np.linspace(low, high, a.heldout + 2)[1:-1]:
        n = int(round(v))
        while (n in buckets or n in heldout) and n < high:
            n += 1
        if n not in buckets and n not in heldout:
            heldout.append(n)
    options = ort.SessionOptions()
    options.intra_op_num_threads = a.threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(a.model, options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    rows = []
    for n in heldout:
        holder = min(b for b in buckets if b >= n)
        feed = feed_at(session, n, rng)
        kr, ks, ko = [], [], []
        for _ in range(a.rounds):
            kr.append(median_ms(run([a.kiln, "bench", "--compiled", range_model, "--dim", f"{name}={n}", "--threads",
                                     str(a.threads), "--repeat", str(a.repeat)], log=False)))
            ks.append(median_ms(run([a.kiln, "bench", "--compiled", separate[holder], "--threads", str(a.threads),
                                     "--repeat", str(a.repeat)], log=False)))
            ko.append(ort_bench(session, feed, a.repeat))
        rows.append((n, holder, statistics.median(kr), statistics.median(ks), statistics.median(ko)))
        r = rows[-1]
        print(f"{n:5d} {holder:6d} {r[2]:10.3f} {r[3]:10.3f} {r[4]:10.3f} {r[3] / r[2]:10.3f} {r[4] / r[2]:9.3f}",
              flush=True)

    print(f"\n{name} held out, bucket, range-tuned ms, separately tuned ms, ORT ms, separate/range, ORT/range")
    for n, holder, kr, ks, ko in rows:
        print(f"{n:5d} {holder:6d} {kr:10.3f} {ks:10.3f} {ko:10.3f} {ks / kr:10.3f} {ko / kr:9.3f}")
    geo = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))
    print(f"geomean separate/range {geo([r[3] / r[2] for r in rows]):.3f}, ORT/range {geo([r[4] / r[2] for r in rows]):.3f}"
          f", worst ORT/range {min(r[4] / r[2] for r in rows):.3f} at {min(rows, key=lambda r: r[4] / r[2])[0]}")
    if a.check:
        check_every_length(a, session, range_model, name, low, high)
    separate_total = sum(v for k, v in times.items() if k.startswith("len"))
    if "range" in times:
        print(f"tuning: range {times['range']:.0f} s for {a.trials} trials; separately {separate_total:.0f} s for "
              f"{len(buckets)} x {a.trials} trials ({times['range'] / max(separate_total, 1e-9):.3f} of it)")


if __name__ == "__main__":
    main()
