#!/usr/bin/env python3
"""Times each database's best program of every workload side by side.

For every workload the databases share, each database's best successful record (its
own ranking: confirmed latency first, then mean) is timed with `kiln measure`, in
ROUNDS rounds of one measurement per database, the order shuffled per round; prints
the median and min over rounds. On a host whose speed drifts, latencies taken minutes
apart (in different tuning runs) do not compare; these do.

Usage: bench/best_side_by_side.py [--kiln build/cli/kiln] [--rounds 6] [--threads 2] A.db B.db [...]
"""
import argparse
import os
import random
import re
import sqlite3
import statistics
import subprocess
import tempfile

BEST = """
SELECT w.op_summary, w.shapes, w.canonical_json,
       (SELECT r.trace_json FROM records r WHERE r.workload_id = w.id AND r.mean_latency IS NOT NULL
        ORDER BY (r.confirmed_latency IS NULL), coalesce(r.confirmed_latency, r.mean_latency), r.id LIMIT 1)
FROM workloads w
"""


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kiln", default="build/cli/kiln")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("dbs", nargs="+")
    a = p.parse_args()
    workloads = {}
    for db in a.dbs:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            for op, shapes, workload, trace in conn.execute(BEST):
                if trace:
                    entry = workloads.setdefault(workload, {"name": f"{op} {shapes}", "traces": {}})
                    entry["traces"][db] = trace
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        workload_file, trace_file = os.path.join(tmp, "workload.json"), os.path.join(tmp, "trace.json")
        for workload, entry in workloads.items():
            if len(entry["traces"]) < 2:
                continue
            with open(workload_file, "w") as f:
                f.write(workload)
            times = {db: [] for db in entry["traces"]}
            for _ in range(a.rounds):
                order = list(entry["traces"])
                rng.shuffle(order)
                for db in order:
                    with open(trace_file, "w") as f:
                        f.write(entry["traces"][db])
                    out = subprocess.run([a.kiln, "measure", "--workload", workload_file, "--trace", trace_file,
                                          "--repeat", "3", "--min-repeat-ms", "20", "--threads", str(a.threads)],
                                         check=True, capture_output=True, text=True).stdout
                    times[db].append(float(re.search(r"latency: median ([0-9.e+-]+) ms", out).group(1)))
            print(entry["name"])
            for db, ts in times.items():
                print(f"  {db:32s} median {statistics.median(ts):.4f} ms  min {min(ts):.4f} ms  "
                      f"rounds {' '.join(f'{t:.3f}' for t in ts)}")


if __name__ == "__main__":
    main()
