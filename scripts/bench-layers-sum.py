#!/usr/bin/env python3
"""Summarise a scripts/bench-layers.sh log: sends/s per round, medians,
backend / memory per round and of the medians, and each layer's effect as a
same-round ratio of two configurations.

A log line is "round R LAYERS BACKEND SENDS_PER_S" (memory's LAYERS is -).
An effect A / B is computed round by round (both ran in the same round);
it is called distinguishable from noise only when every round moves the
same way, and the median moves by more than the spread of the backend /
memory ratio of either configuration (max - min over the rounds, divided by
its median), halved: a sign test over 5 rounds is p = 0.0625 two-sided, so
it is the least one can ask of 5 rounds on a machine this noisy.
"""
import statistics
import sys
from collections import defaultdict

LAYERS = ["all", "none", "batch", "gather"]


def main(path):
    v = defaultdict(dict)  # (layers, backend) -> round -> sends/s
    for line in open(path):
        f = line.split()
        if len(f) == 5 and f[0] == "round" and f[4]:
            try:
                v[(f[2], f[3])][int(f[1])] = float(f[4])
            except ValueError:
                pass
    mem = v[("-", "memory")]
    rounds = sorted(mem)
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    print("sends/s per round, median")
    for key in [("-", "memory")] + [(l, b) for b in ("postgres", "redis") for l in LAYERS]:
        xs = [v[key].get(r) for r in rounds]
        print(f"  {key[0]:6} {key[1]:8} " + " ".join(f"{x:8.1f}" if x else "       -" for x in xs)
              + f"   median {med([x for x in xs if x]):8.1f}")
    print("backend / memory: per round; of the medians; spread (max-min)/median of the per-round ratios")
    spread = {}
    for b in ("postgres", "redis"):
        for l in LAYERS:
            rr = [v[(l, b)][r] / mem[r] for r in rounds if r in v[(l, b)]]
            om = med(list(v[(l, b)].values())) / med(list(mem.values()))
            spread[(l, b)] = (max(rr) - min(rr)) / med(rr) if rr else float("nan")
            print(f"  {l:6} {b:8} " + " / ".join(f"{x:.3f}" for x in rr)
                  + f"   of medians {om:.3f}   median of rounds {med(rr):.3f}   spread {spread[(l, b)]:.2f}")
    print("layer effects, A / B per round (same round), median; distinguishable?")
    pairs = [("all", "batch", "gatherer on top of batcher (all / batch)"),
             ("all", "gather", "batcher on top of gatherer (all / gather)"),
             ("batch", "none", "batcher alone (batch / none)"),
             ("gather", "none", "gatherer alone (gather / none)"),
             ("all", "none", "both (all / none)")]
    for b in ("postgres", "redis"):
        for a, c, what in pairs:
            rr = [v[(a, b)][r] / v[(c, b)][r] for r in rounds if r in v[(a, b)] and r in v[(c, b)]]
            if not rr:
                continue
            m = med(rr)
            up = sum(x > 1 for x in rr)
            noise = max(spread[(a, b)], spread[(c, b)]) / 2
            same_way = up in (0, len(rr))
            verdict = "yes" if len(rr) >= 5 and same_way and abs(m - 1) > noise else "no"
            print(f"  {b:8} {what:45} " + " / ".join(f"{x:.3f}" for x in rr)
                  + f"   median {m:.3f}   {up}/{len(rr)} rounds > 1   noise ±{noise:.3f}   {verdict}")


if __name__ == "__main__":
    main(sys.argv[1])
