"""Write cost as memory grows: time per write at 100, 1,000, 10,000 and 100,000 memories.

Each store is seeded in one commit (bench/common.seeded_store); writes are then
interleaved across the sizes so machine noise hits all alike. With the 32x32
fan-out a write rewrites one bucket, two small trees and the root, so the cost
should barely grow.

Run: python bench/scale.py [--sizes 100,1000,10000,100000] [--writes 60] [--json]
Target (issue 3): write at 10,000 / write at 100 <= 1.5; shown here up to 100,000.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from store import write_times  # noqa: E402  (bench/store.py)

SIZES = (100, 1_000, 10_000, 100_000)


def run(sizes=SIZES, writes: int = 60) -> dict:
    times = write_times(sizes, writes)
    base = times[0]
    return {
        "write_ms": {str(n): t * 1e3 for n, t in zip(sizes, times)},
        "growth_ratio": {str(n): t / base for n, t in zip(sizes, times)},
        "targets": {"growth_ratio_10000": 1.5},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--writes", type=int, default=60)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(tuple(int(x) for x in args.sizes.split(",")), args.writes)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for n, ms in result["write_ms"].items():
        print(f"write at {int(n):>7,} memories: {ms:7.2f} ms  (x{result['growth_ratio'][n]:.2f} of the smallest)")


if __name__ == "__main__":
    main()
