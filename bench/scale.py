"""Scale: what each command costs as memory grows, measured as whole processes side by side.

For each size the store is built twice: seeded in one commit (bench/common.seeded_store, "bulk"), and
written one commit per memory as a team's is (bench/common.written_store, "history": `git log` holds a
commit per memory); with ``--stores long``, also as bulk with texts as long as real decisions ("long": the
dumper wraps most of them over lines). Each is packed as a clone would be, and every figure is a median of whole-process
runs, printed as a ratio to its baseline measured in the same run:

- the first command after a clone (`gitmem status`, no derived index yet) against
  `git cat-file --batch` of the same blobs, and a `search` as the first command (it builds the
  search postings of every memory as well: at most 3 runs);
- warm `list --limit 20` (the first page), `search`, `context`, `status` and `doctor` against
  `gitmem --version` (the cost of starting at all), and doctor also against cat-file: doctor
  after one new memory since the last sound check (incremental), and `doctor --full` once;
- `search` of words every memory holds (COMMON_WORDS) against the search above, which has a rare word,
  and `gitmem --version`, interleaved, and an MCP `recall` of those words;
- a write, at this size against the smallest (bench/store.write_times, in a process of its own);
- max RSS of the warm commands;
- the warm `list`, `search`, `context` and `status` again as the installed `gitmem` script runs them, on the
  command server (gitmem/cmdserver.py), interleaved with `gitmem --version`. The figures above run
  `python -m gitmem`, always in its own process: the two sets are the same commands with and without it.

Semantic recall embeds every memory once (a backlog of minutes at 100,000 on a 2-core machine), so
the search and context figures here run with GITMEM_ENCODER=none: they measure the index and the
ranking, not the encoder; bench/recall.py measures the hybrid search at its own sizes.

Run: python bench/scale.py [--sizes 1000,10000,100000] [--runs 3] [--stores bulk,history,long] [--json]
(writing 100,000 memories one commit each takes several minutes before anything is measured)
Targets (issue 20, at 100,000, warm): search and context <= 1.5x gitmem --version, list (first page)
and status <= 1.3x, doctor <= 2x cat-file, cold <= 5x cat-file, RSS <= 300 MB, write 100k/100 <= 1.2.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from typing import Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from common import SCRIPT, cat_file_batch, seeded_store, written_store  # noqa: E402

SIZES = (1_000, 10_000, 100_000)
ENV = {**os.environ, "GITMEM_ENCODER": "none", "PYTHONPATH": os.path.join(HERE, "..")}
COMMANDS = {
    "list": ["list", "--limit", "20"],
    "search": ["search", "queue retries for service 42"],
    "context": ["context", "--query", "how do retries work for service 42"],
    "status": ["status"],
    "doctor": ["doctor", "--offline"],
}
#: Words every benchmark memory holds ("the service K uses queue Q for retries"): a query with no rare word
#: to start from, as a real store's name, "use" or "test" are.
COMMON_WORDS = "retries service"


def _timed(argv: List[str], cwd: str) -> Tuple[float, int]:
    """Seconds and max RSS (KiB) of one whole process."""
    t0 = time.perf_counter()
    out = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], cwd=cwd, env=ENV, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - t0
    if out.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} failed ({out.returncode}): {out.stderr.strip()[-300:]}")
    return elapsed, int(out.stderr.strip().splitlines()[-1])


def _median(argv: List[str], cwd: str, runs: int) -> Tuple[float, int]:
    samples = [_timed(argv, cwd) for _ in range(runs)]
    return statistics.median(s[0] for s in samples), max(s[1] for s in samples)


def _gitmem(*args: str) -> List[str]:
    return [sys.executable, "-m", "gitmem", *args]


STORES = {"bulk": seeded_store, "history": written_store, "long": lambda n, name: seeded_store(n, name, long=True)}


def measure(n: int, runs: int, kind: str = "bulk") -> Dict[str, object]:
    store = STORES[kind](n, "scale")
    root = store.repo.workdir
    subprocess.run(["git", "-C", root, "repack", "-adq"], check=True)
    blobs = [b for _, b in store.snapshot().entries()]
    cat = statistics.median(cat_file_batch(root, blobs) for _ in range(max(runs, 3)))
    index_dir = os.path.join(root, ".git", "gitmem")
    colds = []
    for _ in range(runs):  # each from no derived index, as after a clone
        shutil.rmtree(index_dir, ignore_errors=True)
        colds.append(_timed(_gitmem("status"), root))
    cold, cold_rss = statistics.median(c[0] for c in colds), max(c[1] for c in colds)
    os.sync()  # the index each cold run wrote is on disk before anything warm is timed
    version, _ = _median(_gitmem("--version"), root, max(runs, 5))
    click, _ = _median([sys.executable, "-c", "import click"], root, max(runs, 5))
    out: Dict[str, object] = {
        "memories": n, "store": kind, "cat_file_s": cat, "version_s": version, "import_click_s": click,
        "cold_s": cold, "cold_ratio_cat_file": cold / cat, "cold_rss_mb": cold_rss / 1024,
        "version_ratio_click": version / click,
    }
    rss = 0
    for name, args in COMMANDS.items():
        argv = _gitmem(*args)
        _timed(argv, root)  # warm: the index exists, the page cache holds the pack
        if name == "doctor":  # incremental: one new memory since the last sound check, each run
            samples = []
            for k in range(runs):
                store.add("fact", f"written before doctor run {k}", source="bench")
                samples.append(_timed(argv, root))
            t, peak = statistics.median(x[0] for x in samples), max(x[1] for x in samples)
        else:
            t, peak = _median(argv, root, runs)
        rss = max(rss, peak)
        out[f"{name}_s"] = t
        out[f"{name}_ratio_version"] = t / version
    out.update(common_words(root, max(runs, 5)))
    out.update(served(root, max(runs, 5)))
    out["mcp_recall_ms"], out["mcp_recall_after_remember_ms"], out["mcp_recall_common_ms"] = mcp_recall(root, max(runs, 5))
    out["doctor_ratio_cat_file"] = float(out["doctor_s"]) / cat  # type: ignore[arg-type]
    full, _ = _median(_gitmem("doctor", "--offline", "--full"), root, 1)
    out["doctor_full_s"], out["doctor_full_ratio_cat_file"] = full, full / cat
    out["warm_rss_mb"] = rss / 1024
    # Last, as it deletes the index the warm figures use, and its writes (the index, twice its size at 100,000)
    # are flushed before the next store is measured: a search as the first command, the load of the status above,
    # then the postings of every memory.
    cold_searches = []
    for _ in range(min(runs, 3)):
        shutil.rmtree(index_dir, ignore_errors=True)
        cold_searches.append(_timed(_gitmem(*COMMANDS["search"]), root))
    os.sync()
    cold_search = statistics.median(c[0] for c in cold_searches)
    out.update(cold_search_s=cold_search, cold_search_ratio_cat_file=cold_search / cat,
               cold_search_rss_mb=max(c[1] for c in cold_searches) / 1024)
    return out


def _interleaved(argvs: Dict[str, List[str]], root: str, runs: int) -> Dict[str, float]:
    """Median seconds of each command, warmed once, then timed a round of all at a time, so noise hits all alike."""
    for argv in argvs.values():
        _timed(argv, root)
    samples: Dict[str, List[float]] = {k: [] for k in argvs}
    for _ in range(runs):
        for k, argv in argvs.items():
            samples[k].append(_timed(argv, root)[0])
    return {k: statistics.median(v) for k, v in samples.items()}


def common_words(root: str, runs: int) -> Dict[str, float]:
    """Seconds of `search` for COMMON_WORDS, of the search of COMMANDS (a rare word) and of `gitmem --version`,
    a round of the three at a time (medians), with the ratios: the cost of a query whose words are all common
    should follow what it returns, not how many memories hold them."""
    t = _interleaved({"common": _gitmem("search", COMMON_WORDS), "rare": _gitmem(*COMMANDS["search"]),
                      "version": _gitmem("--version")}, root, runs)
    return {"search_common_s": t["common"], "search_rare_s": t["rare"], "search_version_s": t["version"],
            "search_common_ratio_version": t["common"] / t["version"], "search_common_ratio_rare": t["common"] / t["rare"]}


SERVED = ("list", "search", "context", "status")


def served(root: str, runs: int) -> Dict[str, float]:
    """Seconds of the warm SERVED commands run by SCRIPT on a command server started for them, and of
    ``gitmem --version`` (in its own process, as the script runs it), a round of all at a time (medians)."""
    if not os.path.exists(SCRIPT):
        return {}
    argvs = {name: [SCRIPT, *COMMANDS[name]] for name in SERVED}
    argvs["version"] = [SCRIPT, "--version"]
    subprocess.run([SCRIPT, "status"], cwd=root, env=ENV, capture_output=True, check=True)  # starts the server
    for _ in range(100):
        answer = subprocess.run([SCRIPT, "server", "status", "--json"], cwd=root, env=ENV, capture_output=True, text=True)
        if json.loads(answer.stdout)["running"]:
            break
        time.sleep(0.1)
    else:
        raise SystemExit("the command server did not start")
    t = _interleaved(argvs, root, runs)
    subprocess.run([SCRIPT, "server", "stop"], cwd=root, env=ENV, capture_output=True, check=True)
    out = {"served_version_s": t["version"]}
    for name in SERVED:
        out[f"served_{name}_s"], out[f"served_{name}_ratio_version"] = t[name], t[name] / t["version"]
    return out


def mcp_recall(root: str, runs: int) -> Tuple[float, float, float]:
    """Milliseconds of an MCP ``recall`` round trip through the official SDK's stdio client to a
    running ``gitmem mcp`` (median): warm, right after a ``remember`` (each a new memory), and warm for
    COMMON_WORDS."""
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "gitmem", "mcp"], cwd=root, env=ENV)

    async def main() -> Tuple[float, float, float]:
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    ask = {"query": "queue retries for service 42", "limit": 10}
                    await session.call_tool("recall", ask)  # warm: the view is in step
                    warm, after, common = [], [], []
                    for k in range(runs):
                        t0 = time.perf_counter()
                        await session.call_tool("recall", ask)
                        warm.append(time.perf_counter() - t0)
                        await session.call_tool("remember", {"type": "fact", "text": f"retries note {k} for service 42"})
                        t0 = time.perf_counter()
                        await session.call_tool("recall", ask)
                        after.append(time.perf_counter() - t0)
                    await session.call_tool("recall", {"query": COMMON_WORDS, "limit": 10})
                    for _ in range(runs):
                        t0 = time.perf_counter()
                        await session.call_tool("recall", {"query": COMMON_WORDS, "limit": 10})
                        common.append(time.perf_counter() - t0)
                    return statistics.median(warm) * 1e3, statistics.median(after) * 1e3, statistics.median(common) * 1e3

    return anyio.run(main)


def _write_times(sizes: Tuple[int, int], writes: int) -> List[float]:
    """bench/store.write_times in a process of its own: this one holds what it built to measure (a history of
    100,000 commits, say), whose memory and collections would land on the writes, not the store's cost."""
    code = f"import json, store; print(json.dumps(store.write_times({tuple(sizes)!r}, {writes})))"
    out = subprocess.run([sys.executable, "-c", code], cwd=HERE, env=ENV, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(sizes=SIZES, runs: int = 3, stores: Tuple[str, ...] = ("bulk", "history")) -> dict:
    rows = [measure(n, runs, kind) for kind in stores for n in sizes]
    writes = _write_times((100, sizes[-1]), 100)
    return {"sizes": rows, "write_ms": {"100": writes[0] * 1e3, str(sizes[-1]): writes[1] * 1e3},
            "write_growth_ratio": writes[1] / writes[0],
            "backend": "none (no model involved)", "encoder": "none (GITMEM_ENCODER=none)"}


def show(result: dict) -> None:
    print("whole processes, medians; ratios are to a baseline measured in the same run (no model involved)")
    print(f"{'store':>8} {'memories':>9} {'cold/cat':>9} {'list/ver':>9} {'search/ver':>11} {'context/ver':>12} "
          f"{'status/ver':>11} {'doctor/cat':>11} {'ver/click':>10} {'warm RSS':>9}")
    for r in result["sizes"]:
        print(f"{r['store']:>8} {r['memories']:>9,} {r['cold_ratio_cat_file']:>9.2f} {r['list_ratio_version']:>9.2f} "
              f"{r['search_ratio_version']:>11.2f} {r['context_ratio_version']:>12.2f} {r['status_ratio_version']:>11.2f} "
              f"{r['doctor_ratio_cat_file']:>11.2f} {r['version_ratio_click']:>10.2f} {r['warm_rss_mb']:>7.0f}MB")
        print(f"{'':>18} seconds: cold {r['cold_s']:.2f} (cat-file {r['cat_file_s']:.2f}), version {r['version_s']:.3f}, "
              f"list {r['list_s']:.3f}, search {r['search_s']:.3f}, context {r['context_s']:.3f}, "
              f"status {r['status_s']:.3f}, doctor {r['doctor_s']:.3f} (--full {r['doctor_full_s']:.2f}, "
              f"{r['doctor_full_ratio_cat_file']:.1f}x cat-file)")
        print(f"{'':>18} first command a search: {r['cold_search_s']:.2f} s ({r['cold_search_ratio_cat_file']:.1f}x "
              f"cat-file, {r['cold_search_rss_mb']:.0f} MB; the load of the status above, then every memory's postings)")
        print(f"{'':>18} MCP recall {r['mcp_recall_ms']:.1f} ms warm, {r['mcp_recall_after_remember_ms']:.1f} ms "
              f"right after a remember, {r['mcp_recall_common_ms']:.1f} ms of common words only (targets at 100,000: "
              "30 and 60 ms)")
        if "served_version_s" in r:
            print(f"{'':>18} on the command server, interleaved with --version ({r['served_version_s']:.3f} s): "
                  + ", ".join(f"{name} {r[f'served_{name}_s']:.3f} s (x{r[f'served_{name}_ratio_version']:.2f})"
                              for name in SERVED))
        print(f"{'':>18} search {COMMON_WORDS!r} (common words only) {r['search_common_s']:.3f} s vs "
              f"{COMMANDS['search'][1]!r} {r['search_rare_s']:.3f} s (x{r['search_common_ratio_rare']:.2f}) vs "
              f"--version {r['search_version_s']:.3f} s (x{r['search_common_ratio_version']:.2f}), interleaved")
    n = list(result["write_ms"])[-1]
    print(f"write: {result['write_ms']['100']:.2f} ms at 100, {result['write_ms'][n]:.2f} ms at {int(n):,} "
          f"(ratio {result['write_growth_ratio']:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--stores", default="bulk,history",
                        help="bulk (one seeding commit), history (one commit per memory), long (bulk, texts as long as "
                        "real decisions), or several, comma-separated")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    stores = tuple(args.stores.split(","))
    if not set(stores) <= set(STORES):
        parser.error(f"--stores takes {', '.join(STORES)}")
    result = run(tuple(int(x) for x in args.sizes.split(",")), args.runs, stores)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        show(result)


if __name__ == "__main__":
    main()
