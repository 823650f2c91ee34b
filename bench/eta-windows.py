#!/usr/bin/env python3
"""bench/eta-windows.py TOOL_LOG...: how well a copy ETA from the rate over
the last W seconds of progress would have predicted the time each copy then
took, for several W (5 s, 60 s, ..., the whole copy), from recast's progress
lines (`--progress-interval 1s`, as bench/run.sh runs it: runs/<load>/<tool>/tool.log).

Per window it prints the mean of |ln(estimate / actual)| over the lines from
30 s on with 20 s or more left (0 is exact; e^x is the factor) and the 99th
percentile of |ln| of the change between two consecutive lines' estimates
(how much the ETA jumps). docs/benchmarks.md, Session 22.
"""
import math
import re
import sys

LINE = re.compile(r'recast: (\S+) \[copy\] copy [\d.]+% \((\d+)/~(\d+) rows')


def seconds(text):
    return sum(float(v) * {'h': 3600, 'm': 60, 's': 1}[u] for v, u in re.findall(r'([\d.]+)(h|m|s)', text))


def main(path):
    rows, est = [], None
    for line in open(path, encoding='utf-8', errors='replace'):
        m = LINE.search(line)
        if m:
            rows.append((seconds(m.group(1)), int(m.group(2))))
            est = int(m.group(3))
    if len(rows) < 60:
        print(f'{path}: {len(rows)} copy lines, too few')
        return
    end = rows[-1][0]
    print(f'{path}: copy {end:.0f} s')
    for name, window in [('5s', 5), ('60s', 60), ('120s', 120), ('300s', 300), ('whole copy', 1e12)]:
        errs, jumps, prev = [], [], None
        for i, (t, r) in enumerate(rows):
            if t < 30 or t > end - 20:
                continue
            j = i
            while j > 0 and t - rows[j - 1][0] <= window:
                j -= 1
            t0, r0 = rows[j]
            if t == t0 or r == r0:
                continue
            pred = (est - r) / ((r - r0) / (t - t0))
            if pred <= 0:
                continue
            errs.append(abs(math.log(pred / (end - t))))
            if prev:
                jumps.append(abs(math.log(pred / prev)))
            prev = pred
        jumps.sort()
        if errs and jumps:
            print(f'  {name:>10}: mean |ln(estimate/actual)| {sum(errs) / len(errs):.2f}, '
                  f'jump p99 {jumps[len(jumps) * 99 // 100]:.2f} ({len(errs)} lines)')


if __name__ == '__main__':
    for p in sys.argv[1:]:
        main(p)
