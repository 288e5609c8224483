"""Sum a py-spy raw (collapsed) profile: the functions holding the most samples.

    python benchmarks/top_frames.py harvest.txt [--top 30] [--match oai_pipeline]

Prints inclusive samples (a function and what it calls) and self samples, as a share of all.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--match", default="", help="only frames whose text contains this")
    args = parser.parse_args()
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in args.profile.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        samples = int(count)
        total += samples
        frames = stack.split(";")
        for frame in set(frames):
            if args.match in frame:
                inclusive[frame] += samples
        if args.match in frames[-1]:
            own[frames[-1]] += samples
    for title, counter in (("inclusive", inclusive), ("self", own)):
        print(f"--- {title} (of {total} samples)")
        for frame, samples in counter.most_common(args.top):
            print(f"{100 * samples / total:5.1f}%  {frame}")


if __name__ == "__main__":
    main()
