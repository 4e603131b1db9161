#!/usr/bin/env python3
"""How well do two tuning runs agree on programs both of them measured?

Usage: bench/timing_agreement.py A.db B.db [C.db ...]

For every pair of databases and every workload with at least 10 programs (same trace
hash, same target) measured successfully in both, prints how many such programs
there are, the share of pairs of them that both runs order the same way, and the
median |ln(latency in A / latency in B)|. The pair agreement bounds the pairwise
accuracy any cost model can reach against either run's latencies: a model that knew
the true order exactly would still disagree with the measured order that often.
"""
import itertools
import math
import sqlite3
import sys

QUERY = """
SELECT w.key_hash, r.trace_hash, r.target, r.mean_latency
FROM records r JOIN workloads w ON w.id = r.workload_id
WHERE r.mean_latency IS NOT NULL
"""


def load(path):
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return {(key, trace, target): latency for key, trace, target, latency in conn.execute(QUERY)}


def main(paths):
    if len(paths) < 2:
        sys.exit(__doc__)
    runs = [load(p) for p in paths]
    print(f"{'run A':<16} {'run B':<16} {'workload':<14} {'programs':>8} {'pair agreement':>15} {'median |ln ratio|':>18}")
    for a, b in itertools.combinations(range(len(paths)), 2):
        by_workload = {}
        for key in runs[a].keys() & runs[b].keys():
            by_workload.setdefault(key[0], []).append((runs[a][key], runs[b][key]))
        for workload, timings in sorted(by_workload.items()):
            if len(timings) < 10:
                continue
            agree = pairs = 0
            for (a1, b1), (a2, b2) in itertools.combinations(timings, 2):
                if a1 == a2 or b1 == b2:
                    continue
                pairs += 1
                agree += (a1 < a2) == (b1 < b2)
            ratios = sorted(abs(math.log(x / y)) for x, y in timings)
            print(f"{paths[a].split('/')[-1]:<16} {paths[b].split('/')[-1]:<16} {workload[:12]:<14} "
                  f"{len(timings):>8} {agree / max(pairs, 1):>15.3f} {ratios[len(ratios) // 2]:>18.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
