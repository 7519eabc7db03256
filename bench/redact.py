"""The secret scan's keyword pre-filter: the flat pass gitmem uses vs the old per-rule loop and vs one
combined regex, on memory-sized blobs (what `gitmem push` and every write scan) and on 10 KB of code.

All three variants run interleaved in one process on the same texts, so the ratios compare like with
like. With ``--detect-secrets`` (and detect-secrets installed, which gitmem does not depend on) it also
runs detect-secrets' default plugins and gitmem's table over the same labelled samples (the rule
table's and tests/test_redact.py's): misses, false positives, import and scan time.

Run: python bench/redact.py [--json] [--detect-secrets]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from typing import Callable, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from gitmem import redact as R  # noqa: E402

BLOB = ("schema: 1\nid: 01m8vsbp6bkwvyz8\ntype: decision\nstatus: active\n"
        "text: Use pygit2 for git access because one subprocess per write is slow on Windows\n"
        "reason: the hook must stay under 100 ms\ntags:\n- storage\npaths:\n- gitmem/store.py\n"
        "author:\n  name: Ada\n  email: ada@example.com\n  kind: human\nsource: cli\n"
        "created: 2026-01-01T00:00:00Z\n")


def _old(lowered: str) -> List[int]:
    """The pre-filter before issue 14: one ``any(k in text)`` per rule."""
    return [i for i, rule in enumerate(R.RULES) if any(k in lowered for k in rule.keywords)]


_COMBINED = re.compile("|".join(re.escape(k) for k in sorted(R._KEYWORDS, key=len, reverse=True)))


def _combined(lowered: str) -> List[int]:
    """One alternation of every keyword (non-overlapping matches, so only nearly exact)."""
    return sorted({i for k in set(_COMBINED.findall(lowered)) for i in R._RULES_FOR[k]})


VARIANTS: Dict[str, Callable[[str], List[int]]] = {"old": _old, "flat": R._candidate_rules, "combined": _combined}


def _time(texts: List[str], rounds: int) -> Dict[str, float]:
    total = {name: 0.0 for name in VARIANTS}
    for _ in range(rounds):
        for name, fn in VARIANTS.items():  # interleaved: load on the machine hits all three alike
            t0 = time.perf_counter()
            for text in texts:
                fn(text)
            total[name] += time.perf_counter() - t0
    return {name: seconds / rounds / len(texts) * 1e6 for name, seconds in total.items()}  # µs per text


def run(rounds: int = 30) -> dict:
    with open(os.path.join(HERE, "..", "gitmem", "store.py"), encoding="utf-8") as f:
        code = f.read()
    blobs = [BLOB.replace("01m8vsbp6bkwvyz8", f"01m8vsbp6bkw{i:04d}").lower() for i in range(1000)]
    pages = [code[i * 10_000:(i + 1) * 10_000].lower() for i in range(2)]
    for text in blobs[:10] + pages:
        assert _old(text) == R._candidate_rules(text)
    small = _time(blobs, rounds)
    large = _time(pages, rounds * 10)
    return {
        "us_per_blob": small, "us_per_10kb": large,
        "blob_ratio_flat_vs_old": small["flat"] / small["old"],
        "blob_ratio_combined_vs_old": small["combined"] / small["old"],
        "page_ratio_flat_vs_old": large["flat"] / large["old"],
        "page_ratio_combined_vs_old": large["combined"] / large["old"],
    }


def compare_detect_secrets() -> dict:
    """detect-secrets' default plugins vs this table over the same labelled samples."""
    import tempfile

    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    t0 = time.perf_counter()
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings
    imported = time.perf_counter() - t0
    import test_redact as T

    trues = list(T.FAMILIES) + [(r.id, s) for r in R.RULES for s in r.true_samples]
    falses = [s for r in R.RULES for s in r.false_samples] + list(T.ORDINARY)

    def ds(text: str) -> bool:
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(text + "\n")
        try:
            with default_settings():
                found = SecretsCollection()
                found.scan_file(f.name)
            return any(True for _ in found)
        finally:
            os.unlink(f.name)

    t0 = time.perf_counter()
    ds_missed = [name for name, s in trues if not ds(s)]
    ds_flagged = sum(ds(s) for s in falses)
    ds_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    gm_missed = [name for name, s in trues if not R.scan(s)]
    gm_flagged = sum(bool(R.scan(s)) for s in falses)
    gm_seconds = time.perf_counter() - t0
    return {"true_samples": len(trues), "false_samples": len(falses),
            "detect_secrets": {"missed": ds_missed, "false_positives": ds_flagged, "import_ms": imported * 1e3,
                               "scan_ms": ds_seconds * 1e3},
            "gitmem": {"missed": gm_missed, "false_positives": gm_flagged, "scan_ms": gm_seconds * 1e3}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--detect-secrets", action="store_true", help="also compare with detect-secrets")
    args = parser.parse_args()
    result = run(args.rounds)
    if args.detect_secrets:
        result["detect_secrets"] = compare_detect_secrets()
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for label, key in (("memory blob", "us_per_blob"), ("10 KB of code", "us_per_10kb")):
        us = result[key]
        print(f"{label}: old loop {us['old']:.1f} µs, flat pass {us['flat']:.1f} µs "
              f"(x{us['flat'] / us['old']:.2f}), combined regex {us['combined']:.1f} µs (x{us['combined'] / us['old']:.2f})")
    if args.detect_secrets:
        d = result["detect_secrets"]
        for name in ("detect_secrets", "gitmem"):
            r = d[name]
            print(f"{name}: missed {len(r['missed'])} of {d['true_samples']}, flagged {r['false_positives']} of "
                  f"{d['false_samples']} false samples, scan {r['scan_ms']:.0f} ms"
                  + (f", import {r['import_ms']:.0f} ms" if "import_ms" in r else ""))


if __name__ == "__main__":
    main()
