"""The proposal check on long proposals: a re-proposal buried among other sentences, and long fresh ones.

bench/recall.py's proposals are one sentence each (about 11 words). An agent's plan is often several:
"First I'll add the endpoint and tests. For the cache I'll use Redis with a 5-minute TTL. Then update
the docs." This builds long proposals from the same labelled data, with a fixed seed:

- **long repeats**: each re-proposal, as one sentence among 2-4 others, at a random place;
- **long fresh**: each fresh proposal among 2-4 others, so that no sentence repeats a rejection.

The other sentences come from one of two sources (both are measured):

- ``template``: neutral engineering steps written for this benchmark (tests, docs, review, rollout),
  none on a topic any labelled memory records (``NEUTRAL``; each is also judged alone: 3 of the 24 are
  false alarms of the e5 check by the option margin, sharing no word with the rejection; they are kept);
- ``fresh``: fresh proposals of the benchmark written from *other* repositories' documents (another
  topic, never a repeat by their label).

The embedded sentence is capitalised and ends with a full stop; a third of the time it opens with a
lead-in ("Next, ", "After that, ", ...) as plans do. Measured as ``gitmem.recall.check`` judges (the
whole memory's and the option's cosines by e5, as ``bench/dense.py --check`` computes them, without a
repository): the flag rate on long repeats (a repeat with the right rejection first), the false-alarm
rate on long fresh proposals, and the same on the original short proposals (nothing may regress).
``--store`` runs the short and long sets through ``gitmem.recall.check`` on a real repository instead
(bench/recall.py's store, the index path), which is slower but is the code an agent runs.

Run: python bench/check_long.py [--distractors 5000] [--seed 13] [--store] [--json] [--misses]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import recall as adr  # noqa: E402

SEED = 13
#: Neutral steps of a plan: none names a technology or a choice any labelled memory is about.
NEUTRAL = (
    "First I'll add the endpoint and its unit tests.",
    "Then I'll update the docs and the changelog.",
    "I'll open a draft pull request early so the team can comment.",
    "After that I'll ask for a review from the owning team.",
    "The change will be split into small commits that are easy to review.",
    "I'll write a short design note in the pull request description.",
    "Before merging I'll run the full test suite locally.",
    "I'll add a regression test for the bug that started this.",
    "Then I'll pair with someone from the team on the tricky parts.",
    "I'll demo it at the next team meeting.",
    "The old code path stays until the new one has run for a week.",
    "I'll rename the confusing variables while I am in that file.",
    "Error messages will say what went wrong and what to do next.",
    "I'll keep the public interface unchanged so callers need no edits.",
    "Finally I'll clean up the dead code left behind.",
    "I'll timebox the spike to two days and report back.",
    "I'll add a few log lines around the new code to help debugging.",
    "I'll update the onboarding page with the new steps.",
    "The ticket will be updated with what was done and what is left.",
    "I'll check the edge cases with empty and very large inputs.",
    "We can release it on Tuesday after the standup.",
    "I'll fix the flaky test I hit along the way in a separate commit.",
    "I'll write down the open questions at the end of the description.",
    "Then I'll go through the review comments and answer each one.",
)
LEADS = ("Next, ", "After that, ", "Then ", "Also, ", "Separately, ", "On top of that, ")


@dataclass
class Long:
    text: str
    sentence: str           # the labelled proposal it carries (as embedded)
    base: "adr.Proposal"    # its label: repeats / fresh, split
    source: str             # template | fresh


def _sentence(text: str, rng: random.Random, lead: bool) -> str:
    """``text`` as a sentence of a plan: a capital (or, a third of the time with ``lead``, a lead-in before
    its own first word, as written) and a full stop."""
    s = text.strip().rstrip(".")
    if lead and rng.random() < 1 / 3:
        return rng.choice(LEADS) + s + "."
    return s[0].upper() + s[1:] + "."


def build(bench: "adr.Bench", seed: int = SEED) -> List[Long]:
    """Each labelled proposal among 2-4 other sentences, once per filler source, from ``seed``."""
    rng = random.Random(seed)
    fresh = [p for p in bench.proposals if p.fresh]
    repo = lambda p: p.doc.split("/")[0] + "/" + p.doc.split("/")[1]  # noqa: E731
    out: List[Long] = []
    for source in ("template", "fresh"):
        for p in bench.proposals:
            k = rng.randint(2, 4)
            if source == "template":
                others = rng.sample(NEUTRAL, k)
            else:
                pool = [f for f in fresh if repo(f) != repo(p)]
                others = [_sentence(f.text, rng, lead=False) for f in rng.sample(pool, k)]
            mine = _sentence(p.text, rng, lead=True)
            at = rng.randint(0, k)
            sentences = others[:at] + [mine] + others[at:]
            out.append(Long(" ".join(sentences), mine, p, source))
    return out


# --- judging ---------------------------------------------------------------------------------


def vectors():
    """bench/dense.py's vector cache (e5 as gitmem keeps it), in this benchmark's own file."""
    import dense

    return dense.Vectors()


class Judge:
    """``gitmem.recall.check`` without a repository: the whole memory's and the option's cosines by e5."""

    def __init__(self, memories, vecs):
        from gitmem.model import CHOICE_TYPES
        import dense

        self.memories = memories
        self.vecs = vecs
        vs = dense.views(vecs, memories, ("memory", "option"))
        self.D, self.O = vs["memory"], vs["option"]
        self.chosen = [i for i, m in enumerate(memories) if m.type in CHOICE_TYPES]
        self.lexical = os.environ.get("GITMEM_ENCODER", "auto").lower() in ("none", "off", "lexical", "0", "false")

    def prepare(self, texts: Sequence[str]) -> None:
        if not self.lexical:
            self.vecs.get(list(texts), query=True)

    def inputs(self, text: str) -> Tuple[Optional[Dict[str, float]], Optional[Dict[str, float]]]:
        if self.lexical or not text.strip():
            return None, None
        q = self.vecs.get([text], query=True)[0]
        sim = {m.id: float(c) for m, c in zip(self.memories, self.D @ q)}
        options = {self.memories[i].id: float(c) for i, c in zip(self.chosen, self.O[self.chosen] @ q)}
        return sim, options

    def __call__(self, text: str):
        from gitmem import check

        if hasattr(check, "judge_long"):  # the prototype: the whole proposal and each sentence
            return check.judge_long(self.memories, text, limit=5, inputs=self.inputs)
        sim, options = self.inputs(text)
        return check.judge(self.memories, text, limit=5, similarity=sim, option_similarity=options)


def store_judge(bench, n_distractors: int):
    """``gitmem.recall.check`` on bench/recall.py's repository (the index path)."""
    from gitmem.recall import check

    store, key_of = adr.build_store(bench, n_distractors, "check-long")
    return (lambda text: check(store, text, limit=5)), key_of


# --- measuring -----------------------------------------------------------------------------------


def score(rows: Sequence[Tuple[Any, Any]], key_of: Dict[str, str]) -> Dict[str, Any]:
    """rows: (label proposal, Check). Flag rate (right rejection first) on repeats, false alarms on fresh."""
    out: Dict[str, Any] = {}
    for split in adr.SPLITS + ("all",):
        mine = [(p, v) for p, v in rows if split == "all" or p.split == split]
        rep = [(p, v) for p, v in mine if p.repeats]
        fresh = [(p, v) for p, v in mine if p.fresh]
        out[split] = {"repeats": len(rep), "fresh": len(fresh),
                      "flag_rate": adr._rate(v.repeat and key_of[v.repeats[0].memory.id] == p.repeats for p, v in rep),
                      "flagged_any": adr._rate(v.repeat for _, v in rep),
                      "false_alarm_rate": adr._rate(v.repeat for _, v in fresh)}
    return out


def measure(judge: Callable[[str], Any], key_of: Dict[str, str], bench, longs: Sequence[Long]) -> Dict[str, Any]:
    short = [(p, judge(p.text)) for p in bench.proposals]
    out: Dict[str, Any] = {"short": score(short, key_of)}
    misses: List[Dict[str, Any]] = []
    for source in ("template", "fresh"):
        mine = [(x, judge(x.text)) for x in longs if x.source == source]
        out[f"long {source}"] = score([(x.base, v) for x, v in mine], key_of)
        for x, v in mine:
            wrong = (x.base.repeats and not (v.repeat and key_of[v.repeats[0].memory.id] == x.base.repeats)) or \
                    (x.base.fresh and v.repeat)
            if wrong:
                misses.append({"source": source, "split": x.base.split, "label": x.base.repeats or x.base.fresh,
                               "text": x.text, "got": [key_of[h.memory.id] for h in v.repeats]})
    out["misses"] = misses
    out["short misses"] = [{"split": p.split, "label": p.repeats or p.fresh, "text": p.text,
                            "got": [key_of[h.memory.id] for h in v.repeats]}
                           for p, v in short if (p.repeats and not (v.repeat and key_of[v.repeats[0].memory.id] == p.repeats))
                           or (p.fresh and v.repeat)]
    return out


def run(n_distractors: int, seed: int, on_store: bool) -> Dict[str, Any]:
    bench = adr.load()
    longs = build(bench, seed)
    result: Dict[str, Any] = {"seed": seed, "long": {s: {"repeats": sum(1 for x in longs if x.source == s and x.base.repeats),
                                                         "fresh": sum(1 for x in longs if x.source == s and x.base.fresh)}
                                                     for s in ("template", "fresh")}}
    labels = [("alone", 0)] + ([(f"among {n_distractors}", n_distractors)] if n_distractors else [])
    for label, n in labels:
        if on_store:
            judge, key_of = store_judge(bench, n)
        else:
            memories, key_of = adr.seed_memories(bench, n)
            judge = Judge(memories, vectors())
            texts = [p.text for p in bench.proposals] + [x.text for x in longs]
            from gitmem import check as _check
            if hasattr(_check, "sentences"):
                texts += [s for t in texts for s in _check.sentences(t)]
            judge.prepare(texts)
            if label == "alone":  # the neutral sentences, each alone: none may be a repeat
                result["neutral alone flagged"] = [s for s in NEUTRAL if judge(s).repeat]
        result[label] = measure(judge, key_of, bench, longs)
    return result


def show(r: Dict[str, Any], misses: bool) -> None:
    print(f"seed {r['seed']}; long sets: " + "; ".join(f"{s}: {v['repeats']} repeats, {v['fresh']} fresh"
                                                       for s, v in r["long"].items()))
    if "neutral alone flagged" in r:
        print(f"neutral sentences flagged alone: {r['neutral alone flagged'] or 'none'}")
    for label in [k for k in r if k.startswith(("alone", "among"))]:
        print(f"\n{label}")
        print(f"  {'set':<14} {'split':<8} {'flagged':>8} {'any':>6} {'false alarms':>13}")
        for name in ("short", "long template", "long fresh"):
            for split in adr.SPLITS + ("all",):
                f = r[label][name][split]
                print(f"  {name:<14} {split:<8} {adr._f(f['flag_rate']):>8} {adr._f(f['flagged_any']):>6} "
                      f"{adr._f(f['false_alarm_rate']):>13}   ({f['repeats']} repeats, {f['fresh']} fresh)")
        if misses:
            for x in r[label]["short misses"] + r[label]["misses"]:
                print(json.dumps(x))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distractors", type=int, default=0)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--store", action="store_true", help="gitmem.recall.check on a real repository")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--misses", action="store_true")
    args = parser.parse_args()
    r = run(args.distractors, args.seed, args.store)
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        show(r, args.misses)


if __name__ == "__main__":
    main()
