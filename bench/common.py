"""Shared benchmark helpers: sample repositories, seeded stores, timing."""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List

from gitmem import Author, Store
from gitmem.model import Memory, dump_yaml, memory_path, new_id, utc_now

AUTHOR = Author("bench", "bench@example.com", "agent")

#: The script ``pip install`` puts beside the interpreter: what a user runs, and what hands read commands and
#: Claude Code's hooks to the command server (gitmem/cmdserver.py); ``python -m gitmem`` never does.
SCRIPT = os.path.join(os.path.dirname(sys.executable), "gitmem")

# Processes a benchmark starts run as a user's would: from compiled bytecode. Where the environment
# says not to write it (PYTHONDONTWRITEBYTECODE), each start recompiled every changed module
# (30-40 ms per command on the sandbox this was measured on).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(os.path.dirname(__file__), "..", "gitmem")],
               check=True)
TYPES = ("decision", "fact", "convention", "note")


def scratch_dir(name: str) -> str:
    """A new temporary folder, removed when the benchmark's process ends: a 100,000-memory store is 440 MB, and a
    day of runs left enough of them behind to fill the disk."""
    path = tempfile.mkdtemp(prefix=f"gitmem-bench-{name}-")
    atexit.register(shutil.rmtree, path, True)
    return path


def sample_repo(name: str) -> str:
    path = scratch_dir(name)
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", "-b", "main", path], check=True, env=env)
    subprocess.run(["git", "-C", path, "config", "user.name", "bench"], check=True)
    subprocess.run(["git", "-C", path, "config", "user.email", "bench@example.com"], check=True)
    return path


#: What :func:`_sample` adds to a memory's text in a store of ``long`` texts: lengths as the ADR benchmark's
#: decisions and rejections have (median 146 characters with the reason), which the dumper wraps over lines.
_LONGER = ("",
           ", since the worker restarts on every deploy and a message it held is delivered again",
           ", because the broker we ran before lost messages during deploys and the on-call engineer could not "
           "replay them without a manual export of the dead-letter table",
           ", and the retry delay doubles from one second up to five minutes; a job that still fails after ten "
           "tries goes to the dead-letter queue, where the on-call engineer looks at it the next morning and "
           "either replays it or closes the ticket with the reason")


def _sample(i: int, long: bool = False) -> Dict[str, object]:
    """The ``i``-th benchmark memory's type, text, tags and paths (``long``: its text as long as real ones)."""
    text = f"Memory {i}: the service {i % 97} uses queue {i % 13} for retries" + (_LONGER[i % 4] if long else "")
    return {"type": TYPES[i % len(TYPES)], "text": text, "tags": (f"t{i % 7}",), "paths": (f"src/mod{i % 50}.py",)}


def seeded_store(n: int, name: str = "seed", long: bool = False) -> Store:
    """A store holding ``n`` memories, seeded in one commit (seeding is not what is measured; ``long``: texts
    as long as real decisions, see :func:`_sample`)."""
    store = Store.open(sample_repo(f"{name}-{n}"))
    updates: Dict[str, bytes] = {}
    base_ms = 1_760_000_000_000
    for i in range(n):
        m = Memory(id=new_id(base_ms + i), author=AUTHOR, source="bench", created=utc_now(),
                   **_sample(i, long))  # type: ignore[arg-type]
        updates[memory_path(m)] = dump_yaml(m)
    if updates:
        commit = store.commit_tree(updates, "seed", AUTHOR, base=None)
        store.move_ref(None, commit, "bench seed")
    return store


def written_store(n: int, name: str = "written") -> Store:
    """The memories of :func:`seeded_store`, each written by its own commit as a team's are (``git log``
    holds ``n`` commits): the history a real store has after months of single writes."""
    store = Store.open(sample_repo(f"{name}-{n}"))
    for i in range(n):
        fields = _sample(i)
        store.add(str(fields.pop("type")), str(fields.pop("text")), author=AUTHOR, source="bench",
                  **fields)  # type: ignore[arg-type]
    return store


def median_time(fn: Callable[[], object], repeat: int) -> float:
    samples: List[float] = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def cat_file_batch(repo_path: str, blob_ids: List[str]) -> float:
    """Seconds for `git cat-file --batch` to print every blob (process start included)."""
    t0 = time.perf_counter()
    subprocess.run(["git", "-C", repo_path, "cat-file", "--batch"], input="\n".join(blob_ids).encode() + b"\n",
                   stdout=subprocess.PIPE, check=True)
    return time.perf_counter() - t0


def sizes_main(doc: str, run: Callable[[tuple], dict], show: Callable[[tuple, dict], None],
               default: str = "100,10000") -> None:
    """The command line of a benchmark measured at several sizes: --sizes, --json."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--sizes", default=default)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = tuple(int(x) for x in args.sizes.split(","))
    result = run(sizes)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        show(sizes, result)
