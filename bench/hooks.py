"""Hook overhead: median `git commit` with and without gitmem's hooks, side by side.

Repositories built the same way; commits alternate between them so machine
noise hits all alike. The hooked ones have memory and an active checkpoint and
get a memory between commits every few rounds, so post-commit does real work
(linking, advancing the checkpoint). post-commit runs detached by default (the
measured target); the foreground mode, where git waits for it, is shown too.

Then `git checkout` (switching between existing branches) and `git merge` (a merge commit
bringing in a branch without memory) in a repository with 200 memories on main, with and
without the hooks, alternating: those hooks decide in shell whether there is work before
starting Python.

Run: python bench/hooks.py [--commits 40] [--json]
Targets: the hooks add at most 100 ms to `git commit` at the median (issue 4); `git checkout`
and `git merge` with hooks / without at most 2x (issue 20).
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

from common import AUTHOR, sample_repo  # noqa: E402

import pygit2  # noqa: E402

from gitmem import Store  # noqa: E402
from gitmem.checkpoint import checkpoint  # noqa: E402
from gitmem.hooks import install  # noqa: E402


def timed_commit(path: str, i: int, mode: str = "") -> float:
    with open(os.path.join(path, f"f{i}.txt"), "w") as f:
        f.write(f"{i}\n")
    subprocess.run(["git", "-C", path, "add", f"f{i}.txt"], check=True)
    env = {**os.environ, "GITMEM_HOOK_MODE": mode}
    t0 = time.perf_counter()
    subprocess.run(["git", "-C", path, "commit", "-q", "-m", f"commit {i}"], check=True,
                   stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


def hooked_repo() -> str:
    path = sample_repo("hooked")
    timed_commit(path, -1)
    install(pygit2.Repository(path))
    store = Store.open(path)
    for i in range(200):
        store.add("fact", f"seed fact {i}", author=AUTHOR, source="bench")
    checkpoint(store, "bench running / next: more commits", author=AUTHOR, source="bench")
    return path


def wait_for_checkpoint(path: str, timeout: float = 60.0) -> bool:
    """The background hook has caught up when the checkpoint stands at HEAD."""
    from gitmem.checkpoint import latest_checkpoint

    head = subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = latest_checkpoint(Store.open(path))
        if found and found[1].commit == head:
            return True
        time.sleep(0.05)
    return False


def run(commits: int) -> dict:
    plain, background, foreground = sample_repo("plain"), hooked_repo(), hooked_repo()
    timed_commit(plain, -1)
    samples = {"without": [], "with": [], "foreground": []}
    for i in range(commits):
        if i % 4 == 0:
            for path in (background, foreground):
                Store.open(path).add("note", f"written before commit {i}", author=AUTHOR, source="bench")
        samples["without"].append(timed_commit(plain, i))
        samples["with"].append(timed_commit(background, i))
        wait_for_checkpoint(background)  # let the detached work finish so it does not slow the next sample
        samples["foreground"].append(timed_commit(foreground, i, "foreground"))
    med = {k: statistics.median(v) for k, v in samples.items()}
    return {"commits": commits, "median_ms_without": round(med["without"] * 1000, 1),
            "median_ms_with": round(med["with"] * 1000, 1), "added_ms": round((med["with"] - med["without"]) * 1000, 1),
            "ratio": round(med["with"] / med["without"], 2), "target_added_ms": 100,
            "median_ms_foreground": round(med["foreground"] * 1000, 1),
            "foreground_ratio": round(med["foreground"] / med["without"], 2),
            "background_caught_up": wait_for_checkpoint(background),
            **checkout_and_merge(max(5, commits // 2))}


def _git(path: str, *args: str, hooks: bool = True) -> float:
    env = {**os.environ, **({} if hooks else {"GITMEM_HOOKS": "0"})}
    t0 = time.perf_counter()
    subprocess.run(["git", "-C", path, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=env)
    return time.perf_counter() - t0


def checkout_and_merge(rounds: int) -> dict:
    """Median `git checkout` and `git merge` with vs without the hooks, measured alternately."""
    repos = {}
    for name in ("without", "with"):
        path = sample_repo(f"co-{name}")
        timed_commit(path, -1)
        _git(path, "branch", "side")
        if name == "with":
            install(pygit2.Repository(path))
            store = Store.open(path)
            for i in range(200):
                store.add("fact", f"seed fact {i}", author=AUTHOR, source="bench")
        repos[name] = path
    samples: dict = {"checkout_without": [], "checkout_with": [], "merge_without": [], "merge_with": []}
    for i in range(rounds):
        for name, path in repos.items():
            samples[f"checkout_{name}"].append(_git(path, "checkout", "-q", "side"))
            samples[f"checkout_{name}"].append(_git(path, "checkout", "-q", "main"))
            # a topic branch without memory, and main moved on: `git merge` writes a merge commit
            _git(path, "checkout", "-q", "-b", f"topic{i}", hooks=False)
            with open(os.path.join(path, f"t{i}.txt"), "w") as f:
                f.write(f"{i}\n")
            _git(path, "add", f"t{i}.txt", hooks=False)
            _git(path, "commit", "-q", "-m", f"topic {i}", hooks=False)
            _git(path, "checkout", "-q", "main", hooks=False)
            with open(os.path.join(path, f"m{i}.txt"), "w") as f:
                f.write(f"{i}\n")
            _git(path, "add", f"m{i}.txt", hooks=False)
            _git(path, "commit", "-q", "-m", f"main {i}", hooks=False)
            samples[f"merge_{name}"].append(_git(path, "merge", "-q", "--no-edit", f"topic{i}"))
    med = {k: statistics.median(v) * 1000 for k, v in samples.items()}
    return {"rounds": rounds, **{f"median_ms_{k}": round(v, 1) for k, v in med.items()},
            "checkout_ratio": round(med["checkout_with"] / med["checkout_without"], 2),
            "merge_ratio": round(med["merge_with"] / med["merge_without"], 2), "target_ratio": 2.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=40)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    r = run(args.commits)
    if args.json:
        print(json.dumps(r, indent=2))
        return
    print(f"git commit, median of {r['commits']}: {r['median_ms_without']} ms without hooks, "
          f"{r['median_ms_with']} ms with gitmem hooks")
    verdict = "ok" if r["added_ms"] <= r["target_added_ms"] else "OVER TARGET"
    print(f"hooks add {r['added_ms']} ms (ratio {r['ratio']}x; target <= {r['target_added_ms']} ms): {verdict}")
    print(f"with gitmem.hookMode=foreground (git waits for the link): {r['median_ms_foreground']} ms "
          f"(ratio {r['foreground_ratio']}x); background work caught up: {r['background_caught_up']}")
    for what in ("checkout", "merge"):
        ratio = r[f"{what}_ratio"]
        print(f"git {what}, median of {r['rounds']}: {r[f'median_ms_{what}_without']} ms without hooks, "
              f"{r[f'median_ms_{what}_with']} ms with: ratio {ratio}x (target <= {r['target_ratio']}x): "
              f"{'ok' if ratio <= r['target_ratio'] else 'OVER TARGET'}")


if __name__ == "__main__":
    main()
