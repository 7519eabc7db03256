"""The token counter against Claude's tokenizer: error per kind of text, per tokenizer family.

    python bench/tokens.py [--json]

Reference: ``ctok`` 1.3.0 (https://pypi.org/project/ctok/, MIT), an offline reconstruction of
Claude's tokenizer whose author reports it exact on 2.3 million recorded ``count_tokens``
answers. Its counts for every text of ``bench/data/tokens_corpus.json`` (English prose from
docs/, code from gitmem/, YAML memory records and fixtures, paragraphs in seven non-Latin
scripts, the demo's guide) are frozen in that file, because ctok needs Python 3.12+ and gitmem
supports 3.9+; when ctok is importable, this script recounts and checks them.

Target (issue 18): within +-3% in total and +-8% per kind. Also times both counters on the
whole corpus, side by side.
"""

from __future__ import annotations

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from gitmem.tokens import FAMILIES, count_tokens  # noqa: E402

CORPUS = os.path.join(HERE, "data", "tokens_corpus.json")
TARGET_TOTAL, TARGET_KIND = 3.0, 8.0
CTOK_VERSION = {"v3": "3.0", "v4.7": "4.7"}


def load() -> list:
    with open(CORPUS, encoding="utf-8") as f:
        return json.load(f)["texts"]


def measure(texts: list, family: str) -> dict:
    """Per kind: this counter's total, the reference total, the error in percent; and the worst text."""
    kinds: dict = {}
    worst = (0.0, "")
    for row in texts:
        ours, ref = count_tokens(row["text"], family), row["reference"][family]
        k = kinds.setdefault(row["kind"], {"texts": 0, "ours": 0, "reference": 0})
        k["texts"] += 1
        k["ours"] += ours
        k["reference"] += ref
        err = 100.0 * (ours - ref) / ref
        if abs(err) > abs(worst[0]):
            worst = (err, f"{row['kind']}: {row['name']}")
    for k in kinds.values():
        k["error_pct"] = round(100.0 * (k["ours"] - k["reference"]) / k["reference"], 2)
    ours = sum(k["ours"] for k in kinds.values())
    ref = sum(k["reference"] for k in kinds.values())
    total = round(100.0 * (ours - ref) / ref, 2)
    ok = abs(total) <= TARGET_TOTAL and all(abs(k["error_pct"]) <= TARGET_KIND for k in kinds.values())
    return {"family": family, "kinds": kinds, "total": {"ours": ours, "reference": ref, "error_pct": total},
            "worst_text": {"error_pct": round(worst[0], 2), "text": worst[1]}, "within_target": ok}


def live_reference(texts: list) -> dict:
    """Recount with ctok when it is installed: how many frozen counts it confirms, and its speed."""
    try:
        import ctok
        from ctok.main import _family, _model
    except ImportError:
        return {"ctok": "not installed (needs Python 3.12+): frozen counts used"}
    out = {}
    for family, version in CTOK_VERSION.items():
        frame = _model(_family(version)).message_overhead
        start = time.perf_counter()
        same = sum(ctok.token_count(r["text"], version) - frame == r["reference"][family] for r in texts)
        out[family] = {"confirmed": f"{same}/{len(texts)}", "seconds": round(time.perf_counter() - start, 3)}
    return out


def timing(texts: list) -> dict:
    chars = sum(len(r["text"]) for r in texts)
    count_tokens.cache_clear()
    start = time.perf_counter()
    for r in texts:
        count_tokens(r["text"])
    return {"chars": chars, "seconds": round(time.perf_counter() - start, 4)}


def run() -> dict:
    texts = load()
    return {"reference": "ctok 1.3.0 (frozen in bench/data/tokens_corpus.json)",
            "families": [measure(texts, family) for family in FAMILIES],
            "gitmem_counter": timing(texts), "ctok_live": live_reference(texts)}


def main() -> None:
    result = run()
    if "--json" in sys.argv:
        print(json.dumps(result, indent=2))
        return
    print(f"token counter vs {result['reference']}; target +-{TARGET_TOTAL:g}% total, +-{TARGET_KIND:g}% per kind")
    for fam in result["families"]:
        print(f"\nfamily {fam['family']}")
        print(f"  {'kind':<10} {'texts':>5} {'gitmem':>8} {'ctok':>8} {'error':>8}")
        for name, k in fam["kinds"].items():
            print(f"  {name:<10} {k['texts']:>5} {k['ours']:>8} {k['reference']:>8} {k['error_pct']:>+7.1f}%")
        t = fam["total"]
        print(f"  {'total':<10} {'':>5} {t['ours']:>8} {t['reference']:>8} {t['error_pct']:>+7.1f}%")
        print(f"  worst single text: {fam['worst_text']['error_pct']:+.1f}% ({fam['worst_text']['text']}); "
              f"{'within' if fam['within_target'] else 'OUTSIDE'} target")
    g = result["gitmem_counter"]
    print(f"\ngitmem counter: {g['chars']} characters in {g['seconds']} s; ctok: {result['ctok_live']}")


if __name__ == "__main__":
    main()
