#!/usr/bin/env python3
"""Sum PostgreSQL's statement log per statement and phase.

Usage: scripts/pglog-sum.py LOGFILE [DATABASE]

With log_min_duration_statement=0 PostgreSQL logs every parse, bind and
execute with its duration. This prints, per (phase, statement's first 90
characters), the calls, the total and the mean, the costliest first:
where a benchmark's database time goes (BENCHMARKS.md, sections 14-15).
Lines of other databases are skipped when DATABASE is given.
"""
import collections
import re
import sys

pat = re.compile(r'duration: ([0-9.]+) ms\s+(parse|bind|execute|statement)[^:]*:\s*(.*)')
tot = collections.defaultdict(lambda: [0, 0.0])
db = sys.argv[2] if len(sys.argv) > 2 else None
with open(sys.argv[1], errors='replace') as f:
    for line in f:
        if db and ('@' + db + ' ') not in line:
            continue
        m = pat.search(line)
        if not m:
            continue
        d, phase, stmt = m.groups()
        key = (phase, re.sub(r'\s+', ' ', stmt)[:90])
        tot[key][0] += 1
        tot[key][1] += float(d)
for (phase, stmt), (n, ms) in sorted(tot.items(), key=lambda kv: -kv[1][1])[:25]:
    print(f"{n:8d} {ms:9.1f}ms {1000 * ms / max(n, 1):7.1f}us {phase:8s} {stmt}")
print("total ms", round(sum(v[1] for v in tot.values()), 1))
