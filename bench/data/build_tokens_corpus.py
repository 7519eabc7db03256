"""Freeze the tokenizer benchmark's corpus and its reference counts (run by hand, Python 3.12+).

    python3.12 -m pip install ctok==1.3.0
    PYTHONPATH=. python3.12 bench/data/build_tokens_corpus.py

Writes ``bench/data/tokens_corpus.json``: each text with its kind and the reference count of
``ctok`` (https://pypi.org/project/ctok/, MIT, an offline reconstruction of Claude's tokenizer
that its author reports exact on 2.3 million recorded ``count_tokens`` answers) for the two
tokenizer families: ``v3`` (Claude 3 through Opus 4.6, Haiku 4.5 included) and ``v4.7`` (Opus
4.7 and later). Counts are content only: ctok's one-message frame is subtracted. The texts are
frozen with the counts so ``bench/tokens.py`` and the tests run on any Python without ctok.
"""

from __future__ import annotations

import glob
import json
import os
import re
import sys

import ctok

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def content(text: str, version: str) -> int:
    from ctok.main import _family, _model

    return ctok.token_count(text, version) - _model(_family(version)).message_overhead


def prose() -> list:
    paragraphs = []
    for path in sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))):
        for block in open(path, encoding="utf-8").read().split("\n\n"):
            block = block.strip()
            if len(block) > 250 and not re.match(r"[|`#\-0-9>]", block) and "```" not in block:
                paragraphs.append(block)
    return [("prose", f"docs paragraphs {i}", "\n\n".join(paragraphs[i::5])) for i in range(5)]


def code() -> list:
    out = []
    for name in ("merge", "search", "refs", "redact", "policy", "bill"):
        text = open(os.path.join(ROOT, "gitmem", f"{name}.py"), encoding="utf-8").read()
        out.append(("code", f"gitmem/{name}.py", text[:8000]))
    return out


def yaml_texts() -> list:
    from gitmem.demo import DECISIONS
    from gitmem.model import Author, Memory, dump_yaml

    out = []
    for i, (words, text, extra) in enumerate(DECISIONS):
        memory = Memory(id=f"0m{i:014d}", type="fact" if words[0] == "fact" else "rejection", text=text,
                        author=Author("Payments Team", "payments@example.com"), source="demo",
                        created="2026-01-0%dT09:00:00Z" % (i % 9 + 1), tags=(extra[1],),
                        reason="rounding errors" if words[0] != "fact" else None)
        out.append(dump_yaml(memory).decode())
    joined = ["".join(out[:5]), "".join(out[5:])]
    fixtures = [open(os.path.join(ROOT, "tests", "fixtures", "relevance", f), encoding="utf-8").read()[:6000]
                for f in ("corpus.yaml", "queries.yaml")]
    return [("yaml", f"memory records {i}", t) for i, t in enumerate(joined)] + \
           [("yaml", f"relevance fixture {i}", t) for i, t in enumerate(fixtures)]


def non_latin() -> list:
    text = open(os.path.join(ROOT, "bench", "data", "non_latin.txt"), encoding="utf-8").read()
    parts = re.split(r"^# (\w+)\n", text, flags=re.M)[1:]
    return [("non_latin", lang, body.strip()) for lang, body in zip(parts[::2], parts[1::2])]


def guide() -> list:
    from gitmem.demo import sample_guide

    return [("guide", "the demo's AGENTS.md", sample_guide())]


def main() -> None:
    rows = []
    for kind, name, text in prose() + code() + yaml_texts() + non_latin() + guide():
        rows.append({"kind": kind, "name": name, "text": text,
                     "reference": {"v3": content(text, "3.0"), "v4.7": content(text, "4.7")}})
    out = {"reference": f"ctok {getattr(ctok, '__version__', '1.3.0')} (content tokens, frame subtracted)",
           "texts": rows}
    with open(os.path.join(ROOT, "bench", "data", "tokens_corpus.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    for row in rows:
        print(row["kind"], row["name"], len(row["text"]), row["reference"])


if __name__ == "__main__":
    main()
