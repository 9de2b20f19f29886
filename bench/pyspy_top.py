"""Summarise py-spy's raw (collapsed-stack) output: the functions with the most samples, inclusive and
self, as percentages of all samples.

    .venv/bin/python bench/pyspy_top.py var/bench/interactive_latency/pyspy-*.txt [--top 40] [--match TEXT]
"""

from __future__ import annotations

import argparse
import collections


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--match", default="", help="only frames containing this text (inclusive list)")
    args = ap.parse_args(argv)
    total, incl, own = 0, collections.Counter(), collections.Counter()
    for path in args.files:
        for line in open(path):
            stack, _, n = line.rstrip().rpartition(" ")
            if not n.isdigit():
                continue
            frames = stack.split(";")
            total += int(n)
            own[frames[-1]] += int(n)
            for f in set(frames):
                incl[f] += int(n)
    print(f"{total} samples")
    print("inclusive:")
    for f, n in incl.most_common():
        if args.match in f:
            print(f"  {100 * n / total:5.1f}%  {f}")
            args.top -= 1
            if args.top <= 0:
                break
    print("self:")
    for f, n in own.most_common(25):
        print(f"  {100 * n / total:5.1f}%  {f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
