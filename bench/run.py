"""Run every benchmark in bench/ in one process and print one table of side-by-side ratios.

Each benchmark measures gitmem against a baseline in the same run (interleaved
where it matters), so the ratios hold across machines even when the absolute
times do not. The full results (every figure each benchmark returns) and the
machine they ran on go to bench/results.json.

Run: python bench/run.py [--only store,cli] [--quick] [--out bench/results.json]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

Row = Tuple[str, float, str, Optional[float]]  # (figure, value, baseline, target: value <= target)


def _store(r) -> List[Row]:
    (small, _), (large, _) = r["write_ms"].items()
    return [(f"write at {large} / at {small}", r["write_growth_ratio"], "time per write", 1.5),
            (f"load {large} (cached) / cat-file", r["load_ratio_cached_vs_cat_file"], "git cat-file --batch", 3.0),
            (f"load {large} (cold) / cat-file", r["load_ratio_cold_vs_cat_file"], "git cat-file --batch", None)]


def _scale(r) -> List[Row]:
    rows: List[Row] = []
    for x in r["sizes"]:
        n = f"{x['memories']:,}"
        big = x["memories"] >= 100_000
        rows += [(f"first command after a clone / cat-file, {n}", x["cold_ratio_cat_file"], "git cat-file --batch",
                  5.0 if big else None),
                 (f"first command a search / cat-file, {n}", x["cold_search_ratio_cat_file"], "git cat-file --batch",
                  5.0 if big else None),
                 (f"list (first page) / --version, {n}", x["list_ratio_version"], "gitmem --version", 1.3 if big else None),
                 (f"search / --version, {n}", x["search_ratio_version"], "gitmem --version", 1.5 if big else None),
                 (f"search, common words only / --version, {n}", x["search_common_ratio_version"], "gitmem --version",
                  1.5 if big else None),
                 (f"search, common words only / with a rare word, {n}", x["search_common_ratio_rare"],
                  "the same search with a rare word", None),
                 (f"context / --version, {n}", x["context_ratio_version"], "gitmem --version", 1.5 if big else None),
                 (f"status / --version, {n}", x["status_ratio_version"], "gitmem --version", 1.3 if big else None),
                 (f"doctor / cat-file, {n}", x["doctor_ratio_cat_file"], "git cat-file --batch", 2.0 if big else None),
                 (f"warm max RSS (MB), {n}", x["warm_rss_mb"], "megabytes", 300.0 if big else None)]
    n = list(r["write_ms"])[-1]
    rows.append((f"write at {int(n):,} / at 100", r["write_growth_ratio"], "time per write", 1.2))
    return rows


def _context(r) -> List[Row]:
    n = r["large"]["memories"]
    return [(f"context build {n} / {r['small']['memories']} (new process)", r["growth_ratio_cached"], "build time",
             None),
            (f"context build {n} / cat-file (new process)", r["ratio_to_cat_file_cached"], "git cat-file --batch",
             None),
            (f"context build {n} / cat-file (warm)", r["ratio_to_cat_file_warm"], "git cat-file --batch", None)]


def _search(r) -> List[Row]:
    n = r["memories"]
    return [(f"precision@5 at {n} / alone", r["precision_ratio"], "labelled queries, ~200 memories", None),
            (f"proposal recall at {n}", r["at_size"]["proposal_recall"], "labelled proposals (fraction found)", None),
            (f"one query (warm) / load all, {n}", r["query_ratio_to_load"], "loading the memories", None),
            (f"gitmem search / cat-file, {n}", r["cli_ratio_to_cat_file"], "git cat-file --batch", None)]


def _cli(r) -> List[Row]:
    return [("gitmem --version / import click", r["version_ratio_to_click"], "python -c 'import click'", 2.0),
            ("gitmem --help / import click", r["help_ratio_to_click"], "python -c 'import click'", None)]


def _hooks(r) -> List[Row]:
    return [("git commit with hooks / without", r["ratio"], "plain git commit", None),
            ("ms the hooks add to git commit (median)", r["added_ms"], "plain git commit", 100.0),
            ("git commit, foreground hooks / without", r["foreground_ratio"], "plain git commit", None),
            ("git checkout with hooks / without", r["checkout_ratio"], "plain git checkout", 2.0),
            ("git merge with hooks / without", r["merge_ratio"], "plain git merge", 2.0)]


def _remote(r) -> List[Row]:
    n = r["memories"]
    return [(f"push {n} / git push", r["push_ratio"], "git push of the same ref", None),
            (f"pull {n} / git fetch", r["pull_ratio"], "git fetch of the same ref", None),
            ("push one more / git push", r["push_one_ratio"], "git push of the same ref", None),
            ("pull one more / git fetch", r["pull_one_ratio"], "git fetch of the same ref", None)]


def _web(r) -> List[Row]:
    small, large = r["ms"]["audit_first"]
    return [(f"web audit first page, {large} / {small} writes", r["audit_first_page_ratio"], "audit page at fewer writes",
             r["targets"]["audit_first_page_ratio"])]


def _agent_hooks(r) -> List[Row]:
    h, n = r["hooks"], r["memories"]
    return [(f"SessionStart ms at {n} (median)", h["SessionStart"]["median_ms"], "absolute", 300.0),
            ("SessionStart / gitmem --version", h["SessionStart"]["ratio_to_version"], "gitmem --version", None),
            ("UserPromptSubmit / gitmem --version", h["UserPromptSubmit"]["ratio_to_version"], "gitmem --version", None),
            ("PostToolUse Read ms, detached (median)", h["PostToolUse Read"]["median_ms"], "absolute", 100.0),
            ("PostToolUse Edit / gitmem --version, detached", h["PostToolUse Edit"]["ratio_to_version"],
             "gitmem --version", None)]


def _tokens(r) -> List[Row]:
    rows: List[Row] = []
    for fam in r["families"]:
        f = fam["family"]
        rows.append((f"token count error, total ({f}), |%|", abs(fam["total"]["error_pct"]), "ctok (frozen)", 3.0))
        worst = max(fam["kinds"].items(), key=lambda kv: abs(kv[1]["error_pct"]))
        rows.append((f"token count error, worst kind ({f}: {worst[0]}), |%|", abs(worst[1]["error_pct"]),
                     "ctok (frozen)", 8.0))
    return rows


def _recall(r) -> List[Row]:
    rows: List[Row] = []
    runs = [("alone", r["alone"])] + ([(f"among {r['distractors']:,}", r["among"])] if "among" in r else [])
    for label, m in runs:
        h = m["recall"]["heldout"]
        # issue 13: recall@5 >= 0.9 (>= 0.8 at 0-1 words, >= 0.85 among 5,000), flags >= 0.9: not "<=" targets
        rows += [(f"recall@5 held-out, {label}", h["overall"]["recall_at_5"], f"ADR questions, {m['mode']}", None),
                 (f"recall@5 held-out 0-1 shared words, {label}", h["0-1"]["recall_at_5"], "ADR questions", None)]
        c = m["check"]["heldout"]
        rows += [(f"check flags repeats (held-out), {label}", c["flag_rate"], "right rejection first", None),
                 (f"check false alarms (held-out), {label}", c["false_alarm_rate"], "fresh proposals", 0.10)]
    m = r.get("among")
    if m is not None and "query_ratio_to_lexical" in m:  # absent while recall is lexical
        n = f"{m['memories']:,}"
        rows += [(f"warm recall / lexical, {n}", m["query_ratio_to_lexical"], "lexical search alone", 3.0),
                 (f"write with the encoder / without, {n}", m["write_ratio_to_lexical"], "GITMEM_ENCODER=none", 1.2),
                 (f"first search after a fresh clone, {n}, s", m["first_query_ms"] / 1e3, "builds the index", None)]
    return rows


def _router(r) -> List[Row]:
    lat, c = r["latency"], r["cost"]
    return [("ms the router adds (median, HTTP upstream)", lat["added_ms_http"]["median"], "emulator directly", 5.0),
            ("ms the router adds (p99, HTTP upstream)", lat["added_ms_http"]["p99"], "emulator directly", None),
            ("router / emulator directly (median, HTTP upstream)", lat["ratio_http"], "emulator directly", None),
            ("ms the router adds (median, embedded emulator)", lat["added_ms_embedded"]["median"], "emulator directly", None),
            ("auto / hindsight-best, worst mixture", c["worst_auto_vs_hindsight"], "hindsight-best cost", 1.15),
            ("auto / best fixed policy, worst mixture", c["worst_auto_vs_best_fixed"], "best fixed policy", 1.05)]


def _redact(r) -> List[Row]:
    return [("secret pre-filter per blob, flat / old loop", r["blob_ratio_flat_vs_old"], "old per-rule loop", 1.0),
            ("secret pre-filter per blob, combined regex / old", r["blob_ratio_combined_vs_old"], "old per-rule loop",
             None),
            ("secret pre-filter 10 KB, flat / old loop", r["page_ratio_flat_vs_old"], "old per-rule loop", None)]


#: name -> (module in bench/, call with (module, quick), rows from its result)
BENCHMARKS: Dict[str, Tuple[str, Callable[[Any, bool], dict], Callable[[dict], List[Row]]]] = {
    "store": ("store", lambda m, q: m.run((100, 2_000 if q else 10_000)), _store),
    "scale": ("scale", lambda m, q: m.run((1_000, 10_000) if q else m.SIZES, 1 if q else 3), _scale),
    "context": ("context", lambda m, q: m.run((100, 2_000 if q else 10_000)), _context),
    "search": ("search", lambda m, q: m.run(2_000 if q else 10_000), _search),
    "cli": ("cli", lambda m, q: m.run(5 if q else 15), _cli),
    "hooks": ("hooks", lambda m, q: m.run(10 if q else 40), _hooks),
    "remote": ("remote", lambda m, q: m.run(2_000 if q else 10_000, 1 if q else 3), _remote),
    "web": ("web", lambda m, q: m.run((100, 2_000 if q else 10_000)), _web),
    "tokens": ("tokens", lambda m, q: m.run(), _tokens),
    "redact": ("redact", lambda m, q: m.run(5 if q else 30), _redact),
    "agent_hooks": ("agent_hooks", lambda m, q: m.run(3 if q else 15, 2_000 if q else 10_000), _agent_hooks),
    "recall": ("recall", lambda m, q: m.run(1_000 if q else 5_000), _recall),
    "router": ("router", lambda m, q: m.run(50 if q else 300, 10 if q else 30), _router),
}


def machine() -> Dict[str, Any]:
    git = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    return {"nproc": os.cpu_count(), "uname": " ".join(platform.uname()), "python": sys.version.split()[0],
            "git": git}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help=f"comma-separated subset of: {', '.join(BENCHMARKS)}")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run, not the figures)")
    parser.add_argument("--out", default=os.path.join(HERE, "results.json"))
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(BENCHMARKS)
    unknown = set(names) - set(BENCHMARKS)
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    results: Dict[str, Any] = {"machine": machine(), "quick": args.quick, "benchmarks": {}, "table": []}
    for name in names:
        module_name, call, rows = BENCHMARKS[name]
        print(f"running {name} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        result = call(importlib.import_module(module_name), args.quick)
        results["benchmarks"][name] = {"seconds": round(time.perf_counter() - t0, 1), "result": result}
        for figure, value, baseline, target in rows(result):
            results["table"].append({"benchmark": name, "figure": figure, "value": round(value, 3),
                                     "baseline": baseline, "target": target,
                                     "meets_target": None if target is None else value <= target})
    width = max(len(r["figure"]) for r in results["table"])
    print(f"{'benchmark':<9} {'figure':<{width}} {'value':>7}  {'target':>7}  baseline")
    for r in results["table"]:
        target = "" if r["target"] is None else f"<= {r['target']:g}"
        mark = {True: " ok", False: " MISS", None: ""}[r["meets_target"]]
        print(f"{r['benchmark']:<9} {r['figure']:<{width}} {r['value']:>7.2f}  {target:>7}{mark:5} {r['baseline']}")
    m = results["machine"]
    print(f"\n{m['nproc']} CPUs, {m['uname']}, Python {m['python']}, {m['git']}")
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
