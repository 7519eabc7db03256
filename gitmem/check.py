"""The proposal check: whether a proposal repeats an option the team rejected, or only shares its topic.

It ranks the rejections with :func:`gitmem.search.rank` (words, and a sentence encoder's cosine when
one is installed), then judges each on the option, not the topic: a repeat shares the rejection's
distinctive words or is its paraphrase, takes the same stance and names no other option; the rest
are related, listed for information. Pure: memories and cosines in, a :class:`Check` out
(:mod:`gitmem.recall` gathers the inputs from a store).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from .model import Memory
from .search import STOP_WORDS, Hit, WordIndex, rank, standardised, tokenize, word_index

#: Below both floors a rejection is not even on the proposal's topic. Dense closeness is measured in
#: standard deviations above the proposal's mean cosine to every memory in the store, since an
#: encoder's raw cosines sit in a narrow band of their own (e5's between 0.75 and 0.9).
RELATED_MATCH = 0.2
RELATED_Z = 2.5
#: A repeat shares this much with the rejection (lexically, or by the dense cosine) ...
REPEAT_MATCH = 0.35
REPEAT_Z = 5.0
#: ... and brings at most this share of distinctive words the rejection does not have.
REPEAT_NOVELTY = 0.9
#: ... or, on the topic by meaning, the rejected option is nearer to the proposal than every decision's
#: option by this cosine margin (the options compared without their reasons, see ``option_similarity``).
OPTION_MARGIN = 0.02
#: A sentence of a longer proposal is judged as a proposal of its own (:func:`sentences`), but calls a
#: rejection a repeat only on stronger evidence than a whole proposal needs. With the encoder: a paraphrase
#: by meaning (PART_Z standard deviations above the mean cosine, REPEAT_Z's) whose rejected option is nearer
#: than every decision's by PART_MARGIN. A short sentence sits near some memory by chance: judged like whole
#: proposals, the sentences of long fresh plans raised false alarms on about half of them, and PART_Z 4
#: still on a few more than whole proposals among 5,000 memories. By words alone: PART_MATCH of the word
#: weight with at most PART_NOVELTY, or PART_COVER of the rejected option's own word weight (title and
#: text: "For the cache I'll use Redis with a 5-minute TTL" names all of "Use Redis for the cache").
#: Picked on the tune half of bench/check_long.py, alone and among 5,000 distractors.
PART_Z = 5.0
PART_MARGIN = 0.03
PART_MATCH = 0.6
PART_NOVELTY = 0.3
PART_COVER = 0.8
#: A proposal that has at least this share of its word weight in a rejection's reason alone (words its option
#: does not use), and more there than in the option, proposes what the reason says was done instead
#: (:func:`answered_by_reason`). One or two stray words of a reason ("reader", "markdown") are not that.
REASON_SHARE = 1 / 3
#: ... or has at least this share of its word weight in the reason alone, and at least as much there as in
#: its other words the option does not use: what it adds to the option's words is the reason's (the
#: alternative, or the case the reason exempts, worded with the option's topic words).
REASON_NOVELTY_SHARE = 1 / 4
#: A proposal that shares at least this share of its word weight with a decision's option (title and text),
#: and more than with the rejected option, proposes what the team chose (:func:`chosen_by_decision`): the
#: word counterpart of the option cosine's "nearer to a decision", and the same third as REASON_SHARE.
DECISION_SHARE = REASON_SHARE
#: A proposal of one word ("redis", "use Redis") names a topic, not an option: it repeats a rejection only when it
#: says what to do with it and that word is this much of the rejected option's own word weight ("drop Redis"
#: against a rejected "Drop Redis"); else the rejections on it are related, listed with their reasons to read.
TOPIC_COVER = PART_COVER
#: At most this many sentences of a proposal are judged one by one (each costs a query embedding).
MAX_PARTS = 8
#: A check's JSON echoes at most this many characters of the proposal: the caller has it, and a 500 KB plan echoed
#: whole went back into the agent's context.
ECHO_CHARS = 200
#: What each answer says decided it (:attr:`Check.judge`).
HYBRID_JUDGE = "hybrid: words, dense cosine and stance"
LEXICAL_JUDGE = "lexical: words and stance"
#: A word no memory uses: a paraphrase as often as a new option, so it weighs like a common word.
UNKNOWN_WEIGHT = 1.0

# Stance words: what a text proposes to do with the thing it names. Opposite stances on the
# same thing ("keep the English fallback" against a rejected "drop the English fallback") are a
# different option on the same topic, not a repeat.
_REMOVE = frozenset("drop drops dropping remove removes removing delete deleting stop stopping abandon "
                    "deprecate deprecating disable disabling avoid avoiding ban forbid eliminate eliminating "
                    "sunset retire retiring rip kill ditch ditching skip skipping omit omitting bypass bypassing "
                    "off away against removal deletion deprecation elimination retirement".split())
_NEGATION = frozenset("not no never without dont don't doesnt doesn't shouldnt shouldn't wont won't "
                      "cannot can't nor".split())
_STANCE_WORDS = _REMOVE | _NEGATION | frozenset(
    "use using adopt add adding introduce enable switch move migrate start keep keeping retain stay "
    "preserve continue maintain leave let lets let's go going make try instead get rid".split())


@dataclass(frozen=True)
class Check:
    """The proposal check's answer. ``repeat`` says the proposal re-proposes a rejected
    option (``hits`` with tier "repeat" first); "related" hits are rejections on the same
    topic that chose against another option. ``judge`` names what decided."""

    proposal: str
    repeat: bool
    hits: Tuple[Hit, ...]
    judge: str

    @property
    def repeats(self) -> List[Hit]:
        return [h for h in self.hits if h.tier == "repeat"]

    @property
    def related(self) -> List[Hit]:
        return [h for h in self.hits if h.tier == "related"]

    def to_dict(self) -> Dict[str, Any]:
        """The CLI's and MCP's shape: the repeated rejections, and the related ones for information. A proposal
        longer than :data:`ECHO_CHARS` is echoed cut, ending in "…", with ``proposal_chars``, its whole length."""
        out = {"proposal": self.proposal, "repeat": self.repeat, "judge": self.judge,
               "rejections": [rejection_summary(h) for h in self.repeats],
               "related": [rejection_summary(h) for h in self.related]}
        if len(self.proposal) > ECHO_CHARS:
            out.update(proposal=self.proposal[:ECHO_CHARS] + "…", proposal_chars=len(self.proposal))
        return out


_CLAUSE_END = re.compile(r"[,;:()\u2013\u2014]| - |\b(?:so|because|since|which|while|unless|until|to avoid|"
                         r"in order to|instead of|rather than)\b")
_ADOPT = frozenset("use using adopt adopting add adding introduce introducing enable enabling switch "
                   "switching move moving migrate migrating start starting keep keeping retain retaining "
                   "stay staying preserve preserving continue maintain".split())


#: Words that may come before the verb that says what to do ("we should just keep ...", "always use ...").
_LEAD = frozenset("we i you should shall must just also then first simply always still please let lets let's do "
                  "does really now rather finally turn".split())
#: After an adopting verb, these turn it into a removal ("move away from", "switch off").
_PARTICLE_OFF = frozenset("away off".split())


def _clause_words(text: str) -> List[str]:
    """The words of ``text``'s main clause, lower-cased: where its leading verb and its negations are."""
    return re.findall(r"[a-z']+", _CLAUSE_END.split(text.lower(), maxsplit=1)[0])


def stance(text: str) -> int:
    """What the main clause of ``text`` proposes: +1 to do or keep something, -1 to remove or
    avoid it (each negation in the clause turns it around), 0 when it says neither explicitly.
    The clause's leading verb says which: a stance word further on names the thing, not what to
    do with it ("Grant the delete volume permission", "turn instances off at night")."""
    words = _clause_words(text)
    sign = 0
    for i, w in enumerate(words):
        if w in _REMOVE:
            sign = -1
        elif w in _ADOPT:
            sign = -1 if i + 1 < len(words) and words[i + 1] in _PARTICLE_OFF else 1
        elif w in _NEGATION or w in _LEAD:
            continue
        break
    for w in words:
        if w in _NEGATION:
            sign = -sign
    return sign


def option_stance(m: Memory) -> int:
    """The :func:`stance` of a memory's option: its text's, else its title's."""
    return stance(m.text) or stance(m.title or "")


#: Negations that turn the verb after them around ("do not publish", "we should never retry"); "no" and
#: "without" more often name a thing's absence ("no new services"), which says nothing about the verb.
_NOT = frozenset("not never dont don't doesnt doesn't shouldnt shouldn't wont won't cannot can't".split())


def declined(text: str) -> bool:
    """Whether the main clause of ``text`` negates its leading verb ("Do not publish ledger events",
    "we should never retry"): the stance of a verb :func:`stance` does not know, which it reads as 0 with or
    without the negation. Against a rejected "Publish ledger events through Kafka" a proposal "do not publish
    ledger events through Kafka" agrees with the rejection, it does not repeat it."""
    turned = False
    for w in _clause_words(text):
        if w in _NOT:
            turned = not turned
        elif w not in _NEGATION and w not in _LEAD:
            break
    return turned


#: Where a proposal turns an option down beside the one it proposes: "..., not Redis", "instead of Redis",
#: "rather than Redis", "away from Redis", "no more Redis"; the words up to the next clause are the option.
_TURNED_DOWN = re.compile(r"(?:,\s*(?:and\s+|but\s+)?(?:not|never|no)\b|\b(?:instead\s+of|rather\s+than|away\s+from|"
                          r"no\s+more|no\s+longer|out\s+of)\b)(?P<option>[^,;:()\u2013\u2014]*)", re.IGNORECASE)


#: Where a text moves away from an option (to the ``target``): "move the queue from Redis to Postgres", "replace pytest
#: with unittest". Only after a verb of change: "power the chip from its LDO to avoid noise" leaves nothing.
_LEFT = re.compile(r"\b(?:(?:switch|mov|migrat|port|convert|chang|transition)(?:e|es|ed|ing|s)?\b[^,;:()\u2013\u2014]*?"
                   r"\bfrom|replac(?:e|es|ed|ing))\s+(?P<option>[^,;:()\u2013\u2014]+?)"
                   r"(?=\s+(?:to|onto|into|with)\b(?P<target>[^,;:()\u2013\u2014]*))", re.IGNORECASE)


def turned_down(text: str) -> set:
    """The search terms of the options ``text`` turns down beside what it proposes ("Keep sessions in
    Postgres, not Redis": redis) or moves away from ("Move the queue from Redis to Postgres": redis): a
    proposal that turns down a rejection's named option agrees with it."""
    return {t for pattern in (_TURNED_DOWN, _LEFT) for found in pattern.finditer(text)
            for t in content_terms(found.group("option"))}


def without_turned_down(text: str) -> str:
    """``text`` without the options it turns down or moves away from (:func:`turned_down`): what it proposes."""
    return _LEFT.sub(lambda found: found.group(0)[:found.start("option") - found.start()], _TURNED_DOWN.sub("", text))


def _adopts_only(text: str) -> bool:
    """Whether ``text`` says nothing of removing, avoiding or turning anything down: a rejected option so
    worded proposed to do something, so removing it agrees with the rejection. One that removes anything
    itself ("..., with no central Puppetmaster", "... instead of sleeping") may be what a removal repeats."""
    return not (_REMOVE | _NEGATION).intersection(re.findall(r"[a-z']+", text.lower())) \
        and not _TURNED_DOWN.search(text) and not _LEFT.search(text)


def judge(memories: Iterable[Memory], proposal: str, *, paths: Sequence[str] = (), limit: int = 5,
          similarity: Optional[Mapping[str, float]] = None, now: Optional[datetime] = None,
          judge_name: Optional[str] = None, option_similarity: Optional[Mapping[str, float]] = None,
          part: bool = False) -> Check:
    """Earlier rejections on ``proposal``'s topic, each judged a repeat of the rejected option
    or a related one (same topic, another option).

    A repeat shares the rejection's distinctive words (or is its close paraphrase by the
    dense cosine), takes the same stance (both adopt, or both remove) and brings few
    distinctive words of its own: a named alternative ("RabbitMQ" against a rejected
    "Redis") makes it a different option. ``option_similarity`` maps rejection and decision
    ids to the proposal's cosine to the option alone (title and text, no reason): a proposal
    nearer to what a decision chose than to what a rejection turned down proposes the chosen
    option, and one clearly nearest to a rejected option repeats it. Without it the full
    ``similarity`` stands in. ``part``: ``proposal`` is one sentence of a longer one, held to
    :data:`PART_Z` (see :func:`judge_sentences`). A version narrowed by a qualifier the option lacks
    (:func:`qualifies`) is related; so, by words, is one sharing more with a decision (:func:`chosen_by_decision`).
    """
    pool = [m for m in memories if m.status == "active"]
    z = standardised(similarity)
    options = option_similarity if option_similarity is not None else similarity
    nearest_decision = max((options.get(m.id, -1.0) for m in pool if m.type == "decision"), default=-1.0) \
        if options is not None else -1.0
    # Words about what to do ("use", "drop") say nothing about which option: rank on the rest.
    hits = rank(pool, content_text(proposal), limit=max(limit * 2, 10), paths=paths, similarity=similarity,
                only_types=("rejection",), now=now)
    index = word_index(pool)
    decided = [h.memory for h in rank(pool, content_text(proposal), limit=max(limit * 2, 10), paths=paths,
                                      only_types=("decision",), now=now)]
    return verdict(proposal, hits, limit, near=lambda i: z.get(i, 0.0), decisions=decided,
                   option=(lambda i: options.get(i, -1.0)) if options is not None else None,
                   nearest_decision=nearest_decision, weight=lambda t: _weight(index, t),
                   judge_name=judge_name or (HYBRID_JUDGE if similarity is not None else LEXICAL_JUDGE), part=part)


def verdict(proposal: str, hits: Sequence[Hit], limit: int, *, near: Callable[[str], float],
            option: Optional[Callable[[str], float]], nearest_decision: float, weight: Callable[[str], float],
            judge_name: str, part: bool = False, decisions: Sequence[Memory] = ()) -> Check:
    """:func:`judge`'s call on each ranked rejection (``hits``), from what it needs of the store: a memory's
    cosine in deviations above the mean (``near``), its option's cosine (``option``), the nearest decision's,
    a word's weight in the whole store, and the decisions ranked first by the proposal's words
    (``decisions``, for :func:`chosen_by_decision`). The index answers the same (:func:`gitmem.recall.check`)."""
    mine = content_terms(proposal)
    mine_mass = sum(weight(t) for t in mine) or 1.0
    side = stance(proposal)
    negated = declined(proposal)
    proposed_names = names(proposal) - _COMMON_ACRONYMS  # the options it names: "API" names none
    refused = turned_down(proposal)
    removal = side < 0 and not _NEGATION.intersection(_clause_words(proposal))  # its verb removes, unturned
    kept = content_terms(without_turned_down(proposal))  # the proposal's words but the options it turns down
    out: List[Hit] = []
    for h in hits:
        m = h.memory
        z = near(m.id)
        if h.match < RELATED_MATCH and z < RELATED_Z:
            continue
        theirs = rejected_terms(m)
        novelty = sum(weight(t) for t in mine - theirs) / mine_mass
        cosine = option(m.id) if option is not None else -1.0
        # Close in words, with few distinctive words of its own; or a paraphrase by meaning (new
        # words are what a paraphrase is made of, so novelty does not count there); or on the topic
        # by meaning and nearer to the rejected option than to anything the team chose.
        repeat = ((h.match >= REPEAT_MATCH and novelty <= REPEAT_NOVELTY) or z >= REPEAT_Z
                  or (z >= RELATED_Z and cosine >= nearest_decision + OPTION_MARGIN))
        named = names(f"{m.title or ''}. {m.text}")  # a full stop: the text's first word is no name
        distinct = named - _COMMON_ACRONYMS
        if distinct and proposed_names and not shares_a_name(distinct, theirs, proposed_names, mine) \
                and z < REPEAT_Z:
            # each names an option the other never mentions: RabbitMQ against a rejected Redis, REST against a
            # rejected GraphQL (for "the public API" both name); unless the two are paraphrases by meaning ("the
            # British way" against "the UK way")
            repeat = False
        if named & refused and not named & kept:
            repeat = False  # turns down the option the team rejected: "Keep sessions in Postgres, not Redis"
        if keeps_what_it_left(m, proposal):
            repeat = False  # keeps what the rejected option moved away from: "Keep React" against "Move from React to Svelte"
        if option is not None and nearest_decision > cosine:
            repeat = False  # nearer to what the team chose than to what it rejected
        if option is None and chosen_by_decision(mine, theirs, decisions, weight, side):
            repeat = False  # by words, nearer to what a decision chose than to the rejected option (lexical judge)
        if qualifies(proposal, m):
            repeat = False  # narrows the option by a condition it does not have: only for X, when Y, optional
        if answered_by_reason(m, mine, theirs, weight):
            repeat = False  # proposes what the reason says was done instead: buffer in RAM against a rejected write-each
        if len(mine) < 2 and not (side and covered(m, mine, weight) >= TOPIC_COVER):
            repeat = False  # one word names the topic: "redis" against a rejected "Use Redis for the job queue"
        theirs_side = option_stance(m)
        if side * theirs_side < 0:
            repeat = False  # both take a stance (the text's, else the title's), opposite ones: keep X against a rejected drop X
        elif not theirs_side and removal and _adopts_only(f"{m.title or ''} {m.text}"):
            repeat = False  # removes what the rejection proposed to do: stop caching sessions in Redis against caching them
        elif not side and not theirs_side and negated != declined(m.text):
            repeat = False  # neither verb is a stance word and one is negated: "do not publish X" against "Publish X"
        if part and repeat:  # one sentence of a longer proposal: stronger evidence
            repeat = z >= PART_Z and cosine >= nearest_decision + PART_MARGIN if option is not None \
                else (h.match >= PART_MATCH and novelty <= PART_NOVELTY) or covered(m, mine, weight) >= PART_COVER
        tier = "repeat" if repeat else "related"
        out.append(Hit(m, h.score, h.match, h.stale, h.similarity, tier))
    out.sort(key=lambda h: (h.tier != "repeat", -h.score))
    out = out[:limit]
    return Check(proposal, any(h.tier == "repeat" for h in out), tuple(out), judge_name)


# --- long proposals: each sentence judged too ------------------------------------------------------

#: Where a sentence or a list item ends: a full stop, "!" or "?" before a space, a semicolon, a line break
#: (and the bullet or number that opens the next line).
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]*\s+|;\s+|\s*\n\s*(?:[-*+\u2022]\s+|\d+[.)]\s+)?")
_BULLET = re.compile(r"^(?:[-*+\u2022]|\d+[.)])\s+")
#: Words whose full stop ends no sentence ("e.g. Redis").
_ABBREVIATION = frozenset("e.g eg i.e ie etc vs cf approx incl esp resp mr mrs ms dr st no fig".split())
#: A connective that opens a step of a plan ("Next, ...", "After that ..."): it is no part of the step's
#: main clause, whose leading verb says its stance.
_CONNECTIVE = re.compile(r"^(?:(?:and|but|so|then|also|first(?:ly)?|second(?:ly)?|third(?:ly)?|next|finally|lastly|"
                         r"afterwards|later|meanwhile|additionally|separately|besides|plus|otherwise|after that|"
                         r"on top of that|in addition|as well|for now)\s*,\s*|(?:after that|on top of that|in addition|"
                         r"additionally|separately|afterwards|next|lastly|meanwhile)\s+)", re.IGNORECASE)


def sentences(text: str) -> List[str]:
    """The sentences (and list items, and clauses after a semicolon) of ``text`` that name something, each
    without the connective that opens it; [] when ``text`` is one sentence. At most :data:`MAX_PARTS`."""
    out: List[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        piece = text[start:m.start()]
        words = piece.rstrip(".!?\"')]").split()  # none in an ellipsis alone ("... use Redis")
        last = words[-1].lower() if words else ""
        if piece.rstrip().endswith(".") and (last in _ABBREVIATION or len(last) == 1):
            continue  # "e.g. Redis", "option B. ...": no sentence ends here
        out.append(piece)
        start = m.end()
    out.append(text[start:])
    parts = [_CONNECTIVE.sub("", _BULLET.sub("", p.strip())) for p in out]
    parts = [p for p in parts if content_terms(p)]
    return parts[:MAX_PARTS] if len(parts) > 1 else []


def judge_sentences(proposal: str, whole: Check, parts: Sequence[Check], limit: int = 5) -> Check:
    """One answer for a long ``proposal`` from the judge's answer on the ``whole`` of it and on each of its
    :func:`sentences` (judged with ``part``): a repeat when the whole is one or any sentence is. A
    rejection is named once, a repeat where either calls it one; the whole's repeats first, then the
    sentences' (the closest by cosine, else by words, first), then the related ones."""
    repeats: Dict[str, Hit] = {h.memory.id: h for h in whole.repeats}
    found = sorted((h for c in parts for h in c.repeats if h.memory.id not in repeats),
                   key=lambda h: (-(h.similarity if h.similarity is not None else -1.0), -h.match))
    for h in found:
        repeats.setdefault(h.memory.id, h)
    related: Dict[str, Hit] = {}
    for h in list(whole.related) + [h for c in parts for h in c.related]:
        if h.memory.id not in repeats:
            related.setdefault(h.memory.id, h)
    hits = (list(repeats.values()) + list(related.values()))[:limit]
    return Check(proposal, any(h.tier == "repeat" for h in hits), tuple(hits), whole.judge)


def judged_whole_and_by_sentence(proposal: str, one: Callable[[str, bool], Check], limit: int = 5) -> Check:
    """``one(text, part)`` on each of ``proposal``'s :func:`sentences` (``part``), then on the whole of it,
    as one answer (:func:`judge_sentences`). The whole is judged last: a query vector an encoder keeps is
    then the proposal's, which a recall of the same prompt asks for next."""
    parts = [one(p, True) for p in sentences(proposal)]
    whole = one(proposal, False)
    return judge_sentences(proposal, whole, parts, limit) if parts else whole


def judge_long(memories: Sequence[Memory], proposal: str, *, limit: int = 5,
               inputs: Callable[[str], Tuple[Optional[Mapping[str, float]], Optional[Mapping[str, float]]]],
               paths: Sequence[str] = (), now: Optional[datetime] = None) -> Check:
    """:func:`judge` on ``proposal`` and, when it has several :func:`sentences`, on each of them
    (:func:`judge_sentences`). ``inputs`` gives a text's ``similarity`` and ``option_similarity``."""
    def one(text: str, part: bool) -> Check:
        similarity, options = inputs(text)
        return judge(memories, text, paths=paths, limit=limit, similarity=similarity, now=now,
                     option_similarity=options, part=part)

    return judged_whole_and_by_sentence(proposal, one, limit)


_NAME = re.compile(r"(?<![\w.])(?:[A-Z][a-z0-9]*[A-Z0-9][\w+#.-]*|[A-Z]{2,}[\w+#-]*|[a-z]+[0-9A-Z][\w.-]*)")
_CAPITALISED = re.compile(r"(?<=[a-z0-9,;:)] )[A-Z][a-z]+\b")


def keeps_what_it_left(m: Memory, proposal: str) -> bool:
    """Whether ``proposal`` only adopts (:func:`_adopts_only`) and names an option the rejected option (title and
    text) turns down or moves away from, and nothing the rejected option proposes instead: "Keep the Django ORM"
    against a rejected "Switch the ORM from Django ORM to SQLAlchemy" is the opposite option. Only for a rejected
    option that says what it proposes instead, so the two can be told apart: where it moves to ("Replace pytest
    with unittest"), else the names beside what it turns down ("Cache sessions in Postgres, not Redis")."""
    option = f"{m.title or ''}. {m.text}"
    left = turned_down(option)
    moved_to = {t for found in _LEFT.finditer(option) for t in content_terms(found.group("target"))}
    instead = (moved_to or names(without_turned_down(option))) - left
    return bool(left and instead and _adopts_only(proposal) and left & content_terms(proposal)
                and not instead & content_terms(proposal))


def covered(m: Memory, mine: set, weight: Callable[[str], float]) -> float:
    """The share of the word weight of a rejection's option (title and text) that ``mine`` names."""
    option = content_terms(f"{m.title or ''} {m.text}")
    total = sum(weight(t) for t in option)
    return sum(weight(t) for t in option & mine) / total if total else 0.0


def chosen_by_decision(mine: set, theirs: set, decisions: Sequence[Memory], weight: Callable[[str], float],
                       side: int) -> bool:
    """Whether a proposal shares at least :data:`DECISION_SHARE` of its word weight with one of ``decisions``'
    options (title and text) and more than with the rejected option (``theirs``): it proposes what the team
    chose ("Capture the picked amount when the order leaves the warehouse" against a rejected capture at
    checkout, next to the decision to authorise at checkout and capture at dispatch). The option cosine says
    the same by meaning; this says it by words, and is all the lexical judge has. A decision of the opposite
    stance to the proposal's (``side``) names the same things to do the other thing with them: "keep the nginx
    proxy" shares its words with the decision to drop it, and chooses what the team turned down."""
    mass = sum(weight(t) for t in mine) or 1.0
    option = sum(weight(t) for t in mine & theirs)
    for d in decisions:
        if side * option_stance(d) < 0:
            continue
        shared = sum(weight(t) for t in mine & content_terms(f"{d.title or ''} {d.text}"))
        if shared >= DECISION_SHARE * mass and shared > option:
            return True
    return False


#: Words that narrow what a text proposes, in kinds: a condition, a restriction, an option left open.
_CONDITION = frozenset("when whenever if unless".split())
_QUALIFIERS = (_CONDITION, frozenset("only solely except".split()), frozenset("optional optionally".split()))
#: A condition: the words after "when", "if", ... up to the end of its clause.
_CONDITION_CLAUSE = re.compile(r"\b(?:%s)\b(?P<condition>[^,;:()\u2013\u2014]*)" % "|".join(sorted(_CONDITION)), re.IGNORECASE)


def qualifies(proposal: str, m: Memory) -> bool:
    """Whether ``proposal`` narrows what it proposes by a kind of qualifier the rejected option (title and text)
    has none of: "Run a full reindex only when the index mapping changes" against a rejected nightly rebuild,
    "Offer a magic link as an optional alternative to the password" against replacing passwords with magic
    links. The rejection turned down the option as stated; a version of it only in some case, or only as
    an option, is another proposal (the reason may not apply to it). A qualifier the option has too is part
    of the option: "resend when the ack is missing" against "retransmits when no ACK arrives"; so is a condition
    saying only what the option says: "translate when rendering" against a rejected "translate at render time"."""
    option = f"{m.title or ''} {m.text}"
    mine = set(re.findall(r"[a-z]+", proposal.lower()))
    theirs = set(re.findall(r"[a-z]+", option.lower()))
    stated = content_terms(option)
    narrower = any(content_terms(_CLAUSE_END.split(found.group("condition"), maxsplit=1)[0]) - stated
                   for found in _CONDITION_CLAUSE.finditer(proposal))
    return any(kind & mine and not kind & theirs and (kind is not _CONDITION or narrower) for kind in _QUALIFIERS)


def answered_by_reason(m: Memory, mine: set, theirs: set, weight: Callable[[str], float]) -> bool:
    """Whether a proposal shares at least as much word weight with the rejection's reason alone (its words
    the option does not use) as with the rejected option: a reason says why, and often what the team does
    instead ("readings are buffered in RAM and flushed every 12"), so a proposal that shares a good part of
    its words with the reason, and more than with the option, is that alternative,
    not the option; so is one whose words beyond the option's come mostly from the reason. A paraphrase of
    the option shares its words, seldom the reason's."""
    reason = content_terms(m.reason or "") - theirs
    because = sum(weight(t) for t in mine & reason)
    mass = sum(weight(t) for t in mine) or 1.0
    if because >= REASON_SHARE * mass and because > sum(weight(t) for t in mine & theirs):
        return True
    # What it says beyond the option's words is mostly the reason's: "Cache product pages at the CDN for 60
    # seconds and load price and stock from the API" against a rejected hour-long page cache whose reason
    # says pages are cached 60 seconds and the browser loads price and stock from the API.
    return because >= REASON_NOVELTY_SHARE * mass and because >= sum(weight(t) for t in mine - theirs - reason)


#: An acronym's plural: the s of "APIs".
_ACRONYM_PLURAL = re.compile(r"(?<=[A-Z]{2})s$")


def names(text: str) -> set:
    """The named things ``text`` proposes: product and technology names (Redis, RabbitMQ, JWT,
    gRPC, k8s), told from ordinary words by their capitals or digits, as search terms. A name is the
    word it spells, not the words its capitals would split it into: RabbitMQ is no queue, OpenSearch no search.
    An acronym's plural is the acronym: "APIs" names an API, as "UUIDs" a UUID."""
    found = _NAME.findall(text) + _CAPITALISED.findall(text)
    return {t for word in found for t in tokenize(_ACRONYM_PLURAL.sub("", word).lower()) if t not in STOP_WORDS}


#: Acronyms so common in technical writing that they name what a text is about, not an option for it: "the public
#: API" of a REST proposal and of a rejected GraphQL, the "HTTP API" of a rejected "REST API" re-proposed. As search
#: terms. Not formats and languages (JSON, SQL, HTML), often the option itself ("Rust instead of JavaScript" is no
#: repeat of a rejected JSON payload), nor an SDK, mostly a product's ("the Nordic SDK", "the nRF Connect SDK"), nor
#: the CLI, a part a rejection names as an option does ("ship the CLI and the site generator as one package" is not
#: what "add Rails-style generators" proposes: with CLI here, that false alarm joined the ADR benchmark's hybrid check).
_COMMON_ACRONYMS = frozenset(t for w in "API URL URI HTTP UI UX ID DB OS CPU RAM CI PR".split()
                             for t in tokenize(w.lower()))
#: A version ending a name: the v4 of UUIDv4, the 3 of Python3.
_VERSION = re.compile(r"(?<=[a-z]{2})v?\d+(?:\.\d+)*$")


def same_name(a: str, b: str) -> bool:
    """Whether names (search terms) ``a`` and ``b`` name one thing: the same name, or one is the other with a
    version (UUIDv4 is a UUID, Python3 Python). Two versions of it are two options: UUIDv4 and UUIDv7."""
    return a == b or a == _VERSION.sub("", b) or b == _VERSION.sub("", a)


def shares_a_name(named: set, theirs: set, proposed: set, mine: set) -> bool:
    """Whether either text mentions a name of the other: a rejection's (``named``) among the proposal's words
    (``mine``) or names (:func:`same_name`), or the proposal's (``proposed``) among the rejection's words (``theirs``)."""
    return bool(named & mine or proposed & theirs or any(same_name(a, b) for a in named for b in proposed))


def content_text(text: str) -> str:
    """``text`` without the words that say what to do with the things it names, in lower case: a name or an
    identifier is one word to the check (OpenSearch is opensearch, not open and search besides), as it is in
    :func:`names`, so a name both texts hold weighs once."""
    return " ".join(w for w in re.split(r"\s+", text.lower()) if w.strip(".,;:!?") not in _STANCE_WORDS)


def content_terms(text: str) -> set:
    return set(tokenize(content_text(text)))


def rejected_terms(m: Memory) -> set:
    """The words a rejection's option is told by (title, text and tags): what a proposal's are compared with."""
    return content_terms(f"{m.title or ''} {m.text} {' '.join(m.tags)}")


def _weight(index: "WordIndex", term: str) -> float:
    """A word's idf in the store; a word no memory uses weighs as much as the rarest one."""
    return index.idf(term) if term in index.postings else UNKNOWN_WEIGHT


def check_proposal(memories: Iterable[Memory], proposal: str, *, paths: Sequence[str] = (), limit: int = 5,
                   now: Optional[datetime] = None) -> List[Hit]:
    """Rejections that ``proposal`` repeats, best first (the lexical judge, on each sentence of a longer
    one too; see :func:`judge_long`)."""
    return judge_long(list(memories), proposal, limit=limit, inputs=lambda text: (None, None), paths=paths,
                      now=now).repeats


def rejection_summary(h: Hit) -> Dict[str, Any]:
    """What an agent needs to know about a matching rejection (the MCP and CLI shape)."""
    m = h.memory
    out = {"id": m.id, "proposal": m.text, "reason": m.reason, "author": m.author.name,
           "kind": m.author.kind, "source": m.source, "when": m.created, "match": round(h.match, 2)}
    if h.tier:
        out["tier"] = h.tier
    if h.similarity is not None:
        out["similarity"] = round(h.similarity, 2)
    return out
