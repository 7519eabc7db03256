"""Sharing memory: push and pull of 10,000 memories between two clones vs plain git.

Side by side in one run, each into a fresh empty bare remote / fresh clone:
`gitmem push` (outgoing secret scan + `git push` of refs/memory/main) vs
`git push` of the same ref, and `gitmem pull` (fetch + create or merge) vs
`git fetch` of the same ref. Then an incremental round: one new memory.

Run: python bench/remote.py [--size 10000] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import AUTHOR, sample_repo, scratch_dir, seeded_store  # noqa: E402

from gitmem import Store  # noqa: E402
from gitmem.remote import pull, push  # noqa: E402

REF = "refs/memory/main"


def _git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def bare() -> str:
    path = scratch_dir("bare")
    _git("init", "-q", "--bare", path)
    return path


def clone_with(remote: str) -> Store:
    path = sample_repo("clone")
    _git("-C", path, "remote", "add", "origin", remote)
    return Store.open(path)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run(size: int = 10_000, repeat: int = 3) -> dict:
    source = seeded_store(size, "remote")
    _git("-C", source.repo.workdir, "repack", "-adq")
    samples = {k: [] for k in ("gitmem_push", "git_push", "gitmem_pull", "git_fetch",
                               "gitmem_push_one", "git_push_one", "gitmem_pull_one", "git_fetch_one")}
    for round_ in range(repeat):
        ours, plain = bare(), bare()
        if "origin" in source.repo.remotes.names():
            _git("-C", source.repo.workdir, "remote", "remove", "origin")
        _git("-C", source.repo.workdir, "remote", "add", "origin", ours)
        samples["gitmem_push"].append(timed(lambda: push(source, "origin", interactive=False)))
        samples["git_push"].append(timed(lambda: _git("-C", source.repo.workdir, "push", "-q", plain,
                                                      f"{REF}:{REF}")))
        receiver, fetcher = clone_with(ours), clone_with(plain)
        samples["gitmem_pull"].append(timed(lambda: pull(receiver, "origin", interactive=False)))
        samples["git_fetch"].append(timed(lambda: _git("-C", fetcher.repo.workdir, "fetch", "-q", "origin",
                                                       f"{REF}:refs/memory-remotes/origin/main")))
        assert len(receiver.memories()) == size + round_  # each round adds one below
        source.add("fact", "one more", author=AUTHOR, source="bench")  # the incremental round
        samples["gitmem_push_one"].append(timed(lambda: push(source, "origin", interactive=False)))
        samples["git_push_one"].append(timed(lambda: _git("-C", source.repo.workdir, "push", "-q", plain,
                                                          f"{REF}:{REF}")))
        samples["gitmem_pull_one"].append(timed(lambda: pull(receiver, "origin", interactive=False)))
        samples["git_fetch_one"].append(timed(lambda: _git("-C", fetcher.repo.workdir, "fetch", "-q", "origin",
                                                           f"{REF}:refs/memory-remotes/origin/main")))
    ms = {k: statistics.median(v) * 1e3 for k, v in samples.items()}
    return {
        "memories": size, "median_ms": ms,
        "push_ratio": ms["gitmem_push"] / ms["git_push"], "pull_ratio": ms["gitmem_pull"] / ms["git_fetch"],
        "push_one_ratio": ms["gitmem_push_one"] / ms["git_push_one"],
        "pull_one_ratio": ms["gitmem_pull_one"] / ms["git_fetch_one"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    r = run(args.size, args.repeat)
    if args.json:
        print(json.dumps(r, indent=2))
        return
    ms = r["median_ms"]
    print(f"{r['memories']:,} memories: push {ms['gitmem_push']:.0f} ms vs git push {ms['git_push']:.0f} ms "
          f"(x{r['push_ratio']:.2f}); pull {ms['gitmem_pull']:.0f} ms vs git fetch {ms['git_fetch']:.0f} ms "
          f"(x{r['pull_ratio']:.2f})")
    print(f"one more memory: push {ms['gitmem_push_one']:.0f} ms vs {ms['git_push_one']:.0f} ms "
          f"(x{r['push_one_ratio']:.2f}); pull {ms['gitmem_pull_one']:.0f} ms vs {ms['git_fetch_one']:.0f} ms "
          f"(x{r['pull_one_ratio']:.2f})")


if __name__ == "__main__":
    main()
