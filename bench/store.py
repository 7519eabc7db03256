"""Store benchmarks: write cost as memory grows, and loading everything vs `git cat-file --batch`.

Run: python bench/store.py [--sizes 100,10000] [--json]
Targets (issue 3): write at 10,000 / write at 100 <= 1.5; load 10,000 / cat-file <= 3.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import cat_file_batch, median_time, seeded_store, sizes_main  # noqa: E402

from gitmem import store as store_module  # noqa: E402
from gitmem import warm as warm_module  # noqa: E402
from gitmem.repo import common_dir  # noqa: E402


def write_times(sizes, writes: int = 100):
    """Median time per add at each size, interleaved so machine noise hits all sizes alike.

    What the benchmark built before (a 100,000-memory store with its history, in bench/scale.py) is frozen
    out of the garbage collector first: a collection scanning it would land on a write of either size by
    chance, and measure the benchmark's leftovers, not the store (a command or a server has none of them).
    For the same reason the seeds are flushed to disk before the first write is timed."""
    import gc

    stores = [seeded_store(n, "write") for n in sizes]
    os.sync()  # the seeds' objects on disk first: else a write's fsync waits for their writeback, not its own
    gc.collect()
    gc.freeze()
    try:
        samples = [[] for _ in sizes]
        for i in range(writes):
            for s, out in zip(stores, samples):
                out.append(median_time(lambda: s.add("fact", f"bench write {i}", source="bench"), 1))
    finally:
        gc.unfreeze()
    return [statistics.median(x) for x in samples]


def load_times(n: int):
    s = seeded_store(n, "load")
    subprocess.run(["git", "-C", s.repo.workdir, "repack", "-adq"], check=True)  # packed, as in a real clone
    blob_ids = [b for _, b in s.snapshot().entries()]
    cat = min(cat_file_batch(s.repo.workdir, blob_ids) for _ in range(5))

    def cold():
        warm_module.forget_warm()
        index = os.path.join(common_dir(s.repo), "gitmem", "index.sqlite")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(index + suffix):
                os.unlink(index + suffix)
        fresh = store_module.Store.open(s.repo.workdir)
        assert len(fresh.memories()) == n

    def warm_disk():  # a new process: nothing in memory, the on-disk index is there
        warm_module.forget_warm()
        assert len(store_module.Store.open(s.repo.workdir).memories()) == n

    cold_t = median_time(cold, 3)
    warm_t = median_time(warm_disk, 5)
    return cat, cold_t, warm_t


def run(sizes=(100, 10_000)) -> dict:
    small, large = sizes
    w_small, w_large = write_times((small, large))
    cat, cold, warm = load_times(large)
    return {
        "write_ms": {str(small): w_small * 1e3, str(large): w_large * 1e3},
        "write_growth_ratio": w_large / w_small,
        "load_ms": {"cat_file_batch": cat * 1e3, "gitmem_cold": cold * 1e3, "gitmem_cached": warm * 1e3},
        "load_ratio_cached_vs_cat_file": warm / cat,
        "load_ratio_cold_vs_cat_file": cold / cat,
        "targets": {"write_growth_ratio": 1.5, "load_ratio_cached_vs_cat_file": 3.0},
    }


def show(sizes: tuple, result: dict) -> None:
    (small, ws), (large, wl) = result["write_ms"].items()
    print(f"write at {small:>6}: {ws:7.2f} ms   at {large}: {wl:7.2f} ms   ratio {result['write_growth_ratio']:.2f}"
          f" (target <= 1.5)")
    lm = result["load_ms"]
    print(f"load {large}: cat-file --batch {lm['cat_file_batch']:.1f} ms, gitmem cached {lm['gitmem_cached']:.1f} ms"
          f" (ratio {result['load_ratio_cached_vs_cat_file']:.2f}, target <= 3),"
          f" cold {lm['gitmem_cold']:.1f} ms (ratio {result['load_ratio_cold_vs_cat_file']:.2f})")


if __name__ == "__main__":
    sizes_main(__doc__, run, show)
