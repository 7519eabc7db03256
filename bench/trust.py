"""The trust gate's cost: fetching 10,000 memories with and without git's strict object checks,
and the gate's own walk of the fetched history, against a plain `git fetch` of the same ref.

Side by side in one run, each into a fresh clone of one bare remote: `git fetch` (the baseline),
`git -c fetch.fsckObjects=true fetch` (what gitmem adds for `git fsck --strict`), the gate's layout
walk alone (`gitmem.trust.history_problem` on the fetched tip) and the whole `gitmem fetch`
(ls-remote, strict fetch, gate). Then the incremental round: one new memory.

Run: python bench/trust.py [--size 10000] [--repeat 3] [--json]
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
from gitmem.remote import fetch  # noqa: E402
from gitmem.trust import history_problem  # noqa: E402

REF = "refs/memory/main"
TRACKING = "refs/memory-remotes/origin/main"


def _git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run(size: int = 10_000, repeat: int = 3) -> dict:
    source = seeded_store(size, "trust")
    for i in range(20):  # some history on top of the seed, as a team's would have
        source.add("fact", f"later memory {i}", author=AUTHOR, source="bench")
    remote = scratch_dir("bare")
    _git("init", "-q", "--bare", remote)
    _git("-C", source.repo.workdir, "push", "-q", remote, f"{REF}:{REF}")
    keys = ("git_fetch", "fsck_fetch", "gate", "gitmem_fetch", "git_fetch_one", "fsck_fetch_one", "gate_one",
            "gitmem_fetch_one")
    samples = {k: [] for k in keys}
    for round_ in range(repeat):
        clones = {k: sample_repo(k) for k in ("git", "fsck", "gitmem")}
        for path in clones.values():
            _git("-C", path, "remote", "add", "origin", remote)
        spec = f"+{REF}:{TRACKING}"
        fetches = [("git_fetch", lambda: _git("-C", clones["git"], "fetch", "-q", "origin", spec)),
                   ("fsck_fetch", lambda: _git("-C", clones["fsck"], "-c", "fetch.fsckObjects=true", "fetch", "-q",
                                               "origin", spec))]
        for key, fn in (fetches if round_ % 2 == 0 else fetches[::-1]):  # alternate who goes first
            samples[key].append(timed(fn))
        fetched = Store.open(clones["fsck"])
        tip = str(fetched.repo.references[TRACKING].target)
        samples["gate"].append(timed(lambda: history_problem(fetched.repo, tip)))
        mine = Store.open(clones["gitmem"])
        samples["gitmem_fetch"].append(timed(lambda: fetch(mine.repo, "origin", interactive=False)))
        # incremental: one more memory on the remote; local memory holds the previous tip
        for path in clones.values():
            _git("-C", path, "update-ref", REF, TRACKING)
        source.add("fact", "one more", author=AUTHOR, source="bench")
        _git("-C", source.repo.workdir, "push", "-q", remote, f"{REF}:{REF}")
        for key, fn in (fetches if round_ % 2 == 0 else fetches[::-1]):
            samples[f"{key}_one"].append(timed(fn))
        fetched = Store.open(clones["fsck"])
        tip = str(fetched.repo.references[TRACKING].target)
        samples["gate_one"].append(timed(lambda: history_problem(fetched.repo, tip, [fetched.own_tip()])))
        samples["gitmem_fetch_one"].append(timed(lambda: fetch(mine.repo, "origin", interactive=False)))
    ms = {k: statistics.median(v) * 1e3 for k, v in samples.items()}
    return {
        "memories": size, "median_ms": ms,
        "fsck_ratio": ms["fsck_fetch"] / ms["git_fetch"], "gate_ratio": ms["gate"] / ms["git_fetch"],
        "gitmem_ratio": ms["gitmem_fetch"] / ms["git_fetch"],
        "fsck_one_ratio": ms["fsck_fetch_one"] / ms["git_fetch_one"],
        "gate_one_ratio": ms["gate_one"] / ms["git_fetch_one"],
        "gitmem_one_ratio": ms["gitmem_fetch_one"] / ms["git_fetch_one"],
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
    print(f"{r['memories']:,} memories, vs git fetch {ms['git_fetch']:.0f} ms: strict fetch {ms['fsck_fetch']:.0f} ms "
          f"(x{r['fsck_ratio']:.2f}), gate walk {ms['gate']:.0f} ms (x{r['gate_ratio']:.2f}), gitmem fetch "
          f"{ms['gitmem_fetch']:.0f} ms (x{r['gitmem_ratio']:.2f})")
    print(f"one more memory, vs git fetch {ms['git_fetch_one']:.0f} ms: strict fetch {ms['fsck_fetch_one']:.0f} ms "
          f"(x{r['fsck_one_ratio']:.2f}), gate walk {ms['gate_one']:.1f} ms (x{r['gate_one_ratio']:.2f}), "
          f"gitmem fetch {ms['gitmem_fetch_one']:.0f} ms (x{r['gitmem_one_ratio']:.2f})")


if __name__ == "__main__":
    main()
