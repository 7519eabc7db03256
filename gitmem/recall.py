"""Recall from a store: the inputs the pure ranking needs, read from the repository and the index.

The ranking itself (`gitmem.search`) is pure. This module gathers what it needs:
the paths in the current diff, the current blob of every file a ``file`` memory
describes, and, when a sentence encoder is installed (`gitmem.embedding`), each
memory's vector, kept in the derived index under the hash of the text it was
computed from, so a vector is computed once per text and deleting the index
only costs time. Vectors missing from the index are computed on the first
search that needs them, not at write time (a write never waits on a model).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, AbstractSet, Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from .model import CHOICE_TYPES, Memory, memory_path, undecodable
from .search import DENSE_DEPTH, Hit, dense_floor, deviation, rank, tokenize

if TYPE_CHECKING:
    from .check import Check
    from .embedding import Encoder
    from .store import Store

_GIT_STATUS_IGNORED = 1 << 14  # libgit2's GIT_STATUS_IGNORED flag


def changed_paths(store: "Store") -> List[str]:
    """Paths changed in the working tree or index (the "current diff"), sorted. A name that is not UTF-8 is left
    out: no memory can name it (its paths are UTF-8), and the index could not even look it up."""
    repo = store.repo
    if repo.is_bare:
        return []
    try:
        status = repo.status(untracked_files="normal")
    except Exception:  # noqa: BLE001 - a broken index must not stop a recall
        return []
    return sorted(p for p, flags in status.items() if not flags & _GIT_STATUS_IGNORED and undecodable(p) is None)


def mode(store: Optional["Store"] = None) -> str:
    """How recall ranks: "hybrid (<encoders>)" when a sentence encoder is installed, else "lexical (<why>)":
    names both encoders when recall fuses e5 with MiniLM, and why MiniLM is missing when it runs on e5 alone.
    With ``store``, how the last recall this process made over it ran: "lexical" too when it went by words
    because more memories waited for vectors than it would embed, e5 alone when MiniLM's did."""
    encoder = _encoder()
    if encoder is not None:
        from .embedding import english_encoder, english_unavailable_reason

        held = _held(store) if store is not None else {}
        if encoder.name in held:
            return f"lexical ({held[encoder.name]:,} memories wait for vectors, embedded in the background)"
        english = english_encoder()
        if english is not None and english.name in held:
            return f"hybrid ({encoder.name}; e5 alone: {held[english.name]:,} memories wait for {english.name}'s vectors)"
        if english is not None:
            return f"hybrid ({encoder.name} + {english.name})"
        why = english_unavailable_reason()
        return f"hybrid ({encoder.name}{'; e5 alone: ' + why if why else ''})"
    from .embedding import unavailable_reason

    return f"lexical ({unavailable_reason()})"


#: The ms of CPU an agent's call (an MCP call, the prompt hook's check and recall, the web UI's search) may spend
#: embedding inline: about a second on this machine's two cores, shared with the agent. That is 15 texts under e5
#: (65 ms each), or 12 new memories read by recall under e5 and MiniLM (16 ms), 7 decisions in every view a
#: prompt hook reads. Past it the call answers with words alone: a pull of 60 memories, under a bound of 64 texts
#: per view, held the prompt hook 6.3 s (three views, about 9 s of CPU) before Claude Code sent the prompt.
AGENT_BUDGET = 1000.0

#: `gitmem search` and `gitmem check`: 4 s of CPU, 2-3 s on two quiet cores, about 50 new memories under e5 and
#: MiniLM, a wait a person sits through after adding a few memories (the search right after is by meaning).
#: Past it they answer by words at once and leave the backlog to :mod:`gitmem.backlog`: a fresh clone of
#: 100,000 memories kept a search busy for an hour, silently. `gitmem embed` embeds it all in the foreground.
PERSON_BUDGET = 4000.0


class Budget:
    """What one call may spend embedding inline, in estimated ms of CPU (``Encoder.cost_ms``), shared by every
    view it reads. Counted in time, not texts: an e5 text costs about four MiniLM ones, so one count of texts
    was too tight for MiniLM or too loose for e5. Settled by the first view with something to embed: when the
    whole backlog fits, each view embeds its part inline; else none does, and the call answers by words (what
    waits is recorded for :func:`waiting`), rather than pay for some views and leave the rest. ``busy`` says
    whether another process embeds the same vectors now (then nothing fits): asked only by a call with something
    to embed, so a search that has every vector (or no encoder) never looks."""

    def __init__(self, ms: float, busy: Callable[[], bool] = lambda: False) -> None:
        self.ms = ms
        self._busy = busy
        self._fits: Optional[bool] = None

    def fits(self, cost: Callable[[], float]) -> bool:
        """Whether ``cost`` (the backlog's, asked once) fits: one answer for the rest of the call."""
        if self._fits is None:
            self._fits = not self._busy() and cost() <= self.ms
        return self._fits


def recall(store: "Store", query: str = "", *, type: Optional[str] = None, paths: Optional[Sequence[str]] = None,
           limit: int = 10, include_inactive: bool = False, types_first: Sequence[str] = (),
           budget: Optional["Budget"] = None, only_ids: Optional[AbstractSet[str]] = None,
           at: Optional[str] = None) -> List[Hit]:
    """Rank the store's memories for ``query``; ``paths=None`` means the paths of the current diff; ``only_ids``:
    only these may be hits (as ``type``, it never changes how a word weighs); ``at``: the memory tip the index
    ranks at (default the ref's, read now).

    The index answers (:mod:`gitmem.postings`, by words alone or fused with :func:`dense`) without loading
    the memories, with the same hits as ranking them loaded; they are loaded only where it cannot."""
    if paths is None:
        paths = changed_paths(store)
    only_types = (type,) if type is not None else None
    if not include_inactive:
        from . import postings

        tip = at or store.read_from()[1]
        fused = tip is not None and _encoder() is not None and bool(tokenize(query))  # as rank fuses
        near = dense(store, tip, query, only_types, budget, only_ids=only_ids) if fused and tip is not None \
            else None
        if isinstance(near, postings.Dense) and tip is not None:
            hits = postings.hybrid(store, query, limit, near, at=tip, paths=paths, types_first=types_first,
                                   only_types=only_types, only_ids=only_ids)
        elif not fused or near is BACKLOG:  # by words alone
            hits = postings.rank(store, query, limit, paths=paths, types_first=types_first, only_types=only_types,
                                 only_ids=only_ids, at=tip)
        else:
            hits = None  # the index cannot answer: rank the memories loaded
        if hits is not None:
            return hits
    pool = [m for _, m in sorted(store.memories().items())]
    similarity = similarities(store, pool, query, budget=budget)
    return rank(pool, query, limit, paths=paths, types_first=types_first, include_inactive=include_inactive,
                blobs=store.current_blobs(pool), similarity=similarity, only_types=only_types, only_ids=only_ids)


def find(store: "Store", query: str, limit: int, *, filters: Optional[Dict[str, Optional[str]]] = None,
         paths: Optional[Sequence[str]] = (), status: Optional[str] = "active",
         budget: Optional["Budget"] = None) -> List[Hit]:
    """A search under listing filters (``gitmem search``, MCP recall, the web UI's page), ranked as
    :func:`recall` ranks (``paths=None``: the current diff's): word weights always come from every memory of
    ``status`` (None: any), so a filter narrows which memories are hits, never how a word weighs, and
    ``gitmem search --type X`` gives MCP recall's hits of type X, in its order. From the index for active
    memories: the ids a tag, path, author kind or source keeps come from it as a list's do
    (:meth:`gitmem.store.Store.matching_ids`); else over the memories loaded."""
    f = filters or {}
    narrowed = {k: v for k, v in f.items() if v}
    if status == "active":
        others = {k: v for k, v in narrowed.items() if k != "type"}
        tip = store.read_from()[1]  # one tip for the ids and the ranking: a write between them changes neither
        ids = store.matching_ids(type=narrowed.get("type"), at=tip, **others) if others else None
        if not others or ids is not None:  # else the index cannot narrow them: ranked loaded
            return recall(store, query, type=narrowed.get("type"), paths=paths, limit=limit, budget=budget,
                          only_ids=set(ids) if ids is not None else None, at=tip)
    from .store import matcher

    if paths is None:
        paths = changed_paths(store)
    wanted = matcher(type=f.get("type"), tag=f.get("tag"), path=f.get("path"), author_kind=f.get("author_kind"),
                     source=f.get("source"), status=status)
    everything = store.list(status=status)
    kept = [m for m in everything if wanted(m)]  # read once: an author or a source filter read every memory again
    return rank(everything, query, limit=limit, paths=paths, include_inactive=status != "active",
                blobs=store.current_blobs(kept), only_ids={m.id for m in kept},
                similarity=similarities(store, everything, query, budget=budget))


def check(store: "Store", proposal: str, *, paths: Sequence[str] = (), limit: int = 5,
          budget: Optional["Budget"] = None) -> Check:
    """Judge ``proposal`` against the store's rejections: a repeat, related ones, or nothing. A proposal
    of several sentences is judged whole and sentence by sentence (:func:`gitmem.check.judge_sentences`:
    a sentence needs stronger evidence than a whole proposal)."""
    from .check import judged_whole_and_by_sentence  # a search need not build the check's patterns

    return judged_whole_and_by_sentence(
        proposal, lambda text, part: _check(store, text, paths, limit, budget, part), limit)


def _check(store: "Store", proposal: str, paths: Sequence[str], limit: int, budget: Optional["Budget"],
           part: bool = False) -> Check:
    """One text judged: from the index where it can answer (the same call, see :func:`_check_from_index`),
    else over every memory."""
    from .check import judge

    answer = _check_from_index(store, proposal, paths, limit, budget, part)
    if answer is not None:
        return answer
    pool = [m for _, m in sorted(store.memories().items())]
    similarity = similarities(store, pool, proposal, budget=budget, fuse=False)
    options = None
    if similarity is not None:
        from .embedding import option_text

        chosen = [m for m in pool if m.type in CHOICE_TYPES]
        options = similarities(store, chosen, proposal, budget=budget, text=option_text, fuse=False)
    return judge(pool, proposal, paths=paths, limit=limit, similarity=similarity, option_similarity=options,
                 part=part)


def _check_from_index(store: "Store", proposal: str, paths: Sequence[str], limit: int,
                      budget: Optional["Budget"], part: bool = False) -> Optional["Check"]:
    """:func:`gitmem.check.judge`'s answer from the index: the rejections ranked by :mod:`gitmem.postings`
    (fused with e5's cosine, as the loaded check fuses them), the cosines standardised over every active
    memory, the options' cosines from their own matrix, the words' weights from the view; None when the
    index cannot answer."""
    from . import postings
    from .check import HYBRID_JUDGE, LEXICAL_JUDGE, UNKNOWN_WEIGHT, content_terms, content_text, rejected_terms, verdict

    tip = store.read_from()[1]
    if tip is None:
        return None
    words, depth = content_text(proposal), max(limit * 2, 10)
    embeds = _encoder() is not None and proposal.strip()  # as similarities() embeds
    near = dense(store, tip, proposal, ("rejection",), budget, fuse=False) if embeds else BACKLOG
    if near is None:
        return None
    if isinstance(near, postings.Dense) and tokenize(words):
        hits = postings.hybrid(store, words, depth, near, at=tip, paths=paths, only_types=("rejection",))
    else:  # by words alone, as rank does without a similarity or without a word to fuse on
        hits = postings.rank(store, words, depth, paths=paths, only_types=("rejection",), at=tip)
    decided = postings.rank(store, words, depth, paths=paths, only_types=("decision",), at=tip)
    if hits is None or decided is None:
        return None
    decisions = [h.memory for h in decided]
    terms = sorted(content_terms(proposal).union(*(rejected_terms(h.memory) for h in hits)))
    weights = postings.word_weights(store, tip, terms)
    if weights is None:
        return None
    if not isinstance(near, postings.Dense):
        return verdict(proposal, hits, limit, near=lambda i: 0.0, option=None, nearest_decision=-1.0,
                       weight=lambda t: weights.get(t, UNKNOWN_WEIGHT), judge_name=LEXICAL_JUDGE, part=part,
                       decisions=decisions)
    from bisect import bisect_left  # here: a search need not load it

    values, ids = near.values, near.ids
    mean, spread = deviation(values) if len(values) >= 2 else (0.0, 0.0)
    z = (lambda i: (values[bisect_left(ids, i)] - mean) / spread) if len(values) >= 2 else (lambda i: 0.0)
    options = _options(store, tip, proposal, budget)
    if options is None:  # the options' vectors are still to embed: the whole memory's cosine stands in
        options = {i: values[n] for n, i in enumerate(ids) if near.types[n] in CHOICE_TYPES}
    kept = _rows(store, tip)  # the rows ``near`` was computed over
    if kept is None:
        return None
    nearest_decision = max((options[i] for i, kind, _ in kept.choices if kind == "decision"), default=-1.0)
    return verdict(proposal, hits, limit, near=z, option=lambda i: options.get(i, -1.0),
                   nearest_decision=nearest_decision, weight=lambda t: weights.get(t, UNKNOWN_WEIGHT),
                   judge_name=HYBRID_JUDGE, part=part, decisions=decisions)


# --- dense similarity -------------------------------------------------------------


#: MiniLM's weight in recall's similarity: e5's z-scored cosine + ENGLISH_WEIGHT x MiniLM's. Picked on the
#: tune half of the ADR benchmark from 0.5-3 (bench/fusion.py; docs/relevance.md, "The dense encoder").
ENGLISH_WEIGHT = 1.5


def similarities(store: "Store", memories: Sequence[Memory], query: str, budget: Optional["Budget"] = None,
                 text: Optional[Callable[[Memory], str]] = None, fuse: bool = True) -> Optional[Dict[str, float]]:
    """Similarity of ``query`` to every active memory, by id; None when recall is lexical (no encoder,
    or more memories still to embed than ``budget`` allows). ``text`` picks what of a memory is
    embedded (default: :func:`gitmem.embedding.document_text`).

    With ``fuse`` and MiniLM installed, and a question mostly in Latin script, it is e5's z-scored cosine
    plus :data:`ENGLISH_WEIGHT` times MiniLM's (z-scored over the memories mostly in Latin script; the
    others get 0, neutral, since MiniLM reads English only), as bench/fusion.py measured it. Otherwise,
    and for the proposal check (``fuse=False``: fused, it judged worse), e5's cosine."""
    encoder = _encoder()
    if encoder is None or not query.strip():
        return None
    pool = [m for m in memories if m.status == "active"]
    matrix = _matrix(store, encoder, pool, budget, text)
    if matrix is None:  # the backlog is larger than this caller may wait for
        return None
    cosines = matrix @ _query_vector(encoder, query)
    if fuse:
        from .embedding import english_encoder, mostly_latin

        english = english_encoder()
        if english is not None and mostly_latin(query):
            latin = _latin_rows(pool, text)  # MiniLM reads these: the memories mostly in Latin script
            matrix = _matrix(store, english, [pool[i] for i in latin], budget, text)
            if matrix is not None:  # else MiniLM's backlog is too large to wait for: e5 alone
                cosines = _with_english(cosines, latin, matrix @ _query_vector(english, query))
    return {m.id: float(c) for m, c in zip(pool, cosines)}


def _with_english(cosines: Any, latin: Any, english: Any) -> Any:
    """e5's z-scored ``cosines`` plus :data:`ENGLISH_WEIGHT` times MiniLM's (``english``, for the rows at
    positions ``latin``), z-scored over those rows, 0 for the rest (MiniLM never embedded them). Recall
    over loaded memories and from the index both fuse here, so they fuse to the same bits."""
    import numpy as np

    part = np.zeros(len(cosines), dtype=np.float32)
    if len(latin):
        part[latin] = _z(english)
    return _z(cosines) + ENGLISH_WEIGHT * part


def _z(x: Any) -> Any:
    """Standard scores over the pool: puts two encoders' cosines, each in a narrow band of its own, on
    one scale (a lone or uniform pool scores 0)."""
    return (x - x.mean()) / (x.std() or 1.0) if len(x) else x


_LATIN: Dict[Any, Tuple[Tuple[Memory, ...], Any]] = {}  # view -> (pool, rows mostly in Latin script)


def _latin_rows(pool: Sequence[Memory], text: Optional[Callable[[Memory], str]]) -> Any:
    """Indexes of the memories whose embedded text is mostly Latin script, kept per pool so a warm
    search does not rescan 10,000 texts."""
    import numpy as np

    from .embedding import document_text, mostly_latin

    key = tuple(pool)  # see _matrix
    cached = _LATIN.get(text)
    if cached is None or cached[0] != key:
        view = text or document_text
        cached = (key, np.array([i for i, m in enumerate(pool) if mostly_latin(view(m))], dtype=np.int64))
        _LATIN[text] = cached
    return cached[1]


# One pool per encoder and view (what of a memory is embedded) at a time: a long-lived server stays flat
# in memory however many writes it makes, and neither the check's two views nor the two encoders evict
# each other. Kept with the pool itself, not its ids: once a pool is freed, an edited memory may be made at
# its old version's address, and a key of ids served it the old text's vector.
_MATRICES: Dict[Any, Tuple[Tuple[Memory, ...], Any]] = {}  # (encoder, view) -> (pool, matrix)
_VECTORS: Dict[Any, Dict[Tuple[Optional[str], str], Any]] = {}  # (encoder, view) -> (index file, text hash) -> vector
_QUERY: Dict[str, Tuple[str, Any]] = {}  # encoder -> its last query and vector: asked twice by a check and the prompt hook
# (index file, view name) -> how many memories had no vector when the last call for that view went without it,
# as _rows_matrix keeps it for the index's rows (read by _held)
_HELD: Dict[Tuple[Optional[str], str], int] = {}


#: A question's first characters that are embedded (about two of e5's 512-token windows): the encoder
#: embeds a longer text window by window, so a pasted 500 KB "question" held an MCP server for minutes.
#: Its words still all count in the word ranking.
QUERY_CHARS = 4096


def _query_vector(encoder: "Encoder", query: str) -> Any:
    last = _QUERY.get(encoder.name)
    if last is None or last[0] != query:
        last = _QUERY[encoder.name] = (query, encoder.embed_queries([query[:QUERY_CHARS]])[0])
    return last[1]


def _matrix(store: "Store", encoder: "Encoder", pool: Sequence[Memory], budget: Optional["Budget"] = None,
            text: Optional[Callable[[Memory], str]] = None) -> Any:
    """The pool's vectors as one (n, dim) matrix: from this process, the index, else the encoder.
    After a write only the new memory's vector is looked up (or computed). Vectors are kept under
    the hash of the text embedded, so every view of a memory has its own."""

    import numpy as np

    from .embedding import document_text

    view = (encoder.name, text)
    where = store.warm.index.path
    _HELD.pop((where, _view_name(encoder, text)), None)
    text = text or document_text
    key = tuple(pool)  # compared element by element, each found the same by identity first: as quick as ids
    cached = _MATRICES.get(view)
    if cached is not None and cached[0] == key:
        return cached[1]
    hashes = [vector_key(encoder, text(m)) for m in pool]
    kept = _VECTORS.get(view, {})
    known = {h: kept[where, h] for h in hashes if (where, h) in kept}
    missing = list(dict.fromkeys(h for h in hashes if h not in known))
    if missing:
        known.update((h, np.frombuffer(v, dtype=np.float32)) for h, v in
                     store.warm.index.vectors(encoder.name, missing).items())
    todo = [i for i, h in enumerate(hashes) if h not in known]
    if todo and budget is not None and not budget.fits(lambda: len(todo) * _memory_ms()):
        _HELD[where, _view_name(encoder, view[1])] = len(todo)
        return None
    if todo:
        _embed(store, encoder, [pool[i] for i in todo], [hashes[i] for i in todo], known, text)
    matrix = np.stack([known[h] for h in hashes]) if pool else np.zeros((0, encoder.dim), dtype=np.float32)
    _MATRICES[view] = (key, matrix)
    _VECTORS[view] = {(where, h): known[h] for h in hashes}
    return matrix


def _embed(store: "Store", encoder: "Encoder", memories: Sequence[Memory], hashes: Sequence[str],
           known: Dict[str, Any], text: Callable[[Memory], str]) -> None:
    """Compute missing vectors in batches, saving each batch, with a progress line on a terminal for more than
    a person's command embeds unasked (:data:`PERSON_BUDGET`: `gitmem embed`)."""
    import time

    loud = len(memories) * encoder.cost_ms > PERSON_BUDGET and sys.stderr.isatty()
    started = time.monotonic()
    batch = 64
    for start in range(0, len(memories), batch):
        chunk = memories[start:start + batch]
        vectors = encoder.embed_documents([text(m) for m in chunk])
        fresh = {}
        for h, v in zip(hashes[start:start + batch], vectors):
            known[h] = v
            fresh[h] = v.tobytes()
        store.warm.index.put_vectors(encoder.name, fresh)
        if loud:
            done = min(start + batch, len(memories))
            sys.stderr.write(f"\rgitmem: embedding memory for semantic recall {done:,}/{len(memories):,}")
            sys.stderr.flush()
    if loud:
        sys.stderr.write(f"\rgitmem: embedded {len(memories):,} memories in {time.monotonic() - started:.1f} s "
                         f"(kept in .git/gitmem/index.sqlite)\n")


# --- the dense half from the index -----------------------------------------------------

#: :func:`dense`'s answer when more memories are still to embed than the caller may wait for: recall is
#: then by words alone, as :func:`similarities` answers None.
BACKLOG: Any = object()


class _Rows(NamedTuple):
    """The active memories of one tree, in id order, and each encoder's matrix over them (MiniLM's over
    those mostly in Latin script, with their positions)."""

    tree: str
    rows: List[Tuple[str, str, str]]  # (id, type, blob)
    ids: List[str]
    types: List[str]
    blobs: List[str]
    choices: List[Tuple[str, str, str]]  # the rows of decisions and rejections
    matrices: Dict[str, Any]


#: Per index file, the last tree's rows: a long-lived server multiplies one matrix per question.
_DENSE: Dict[Optional[str], _Rows] = {}


def dense(store: "Store", tip: str, query: str, only_types: Optional[Sequence[str]] = None,
          budget: Optional["Budget"] = None, fuse: bool = True, only_ids: Optional[AbstractSet[str]] = None) -> Any:
    """The dense half of recall at commit ``tip`` from the index (:class:`gitmem.postings.Dense`): the
    question's similarity to every active memory, computed as :func:`similarities` computes it (``fuse``
    as there) over the same memories in the same order, and the neighbours :func:`gitmem.search.rank`
    would fuse (of ``only_types`` and ``only_ids``). Each memory's vector is found by its blob (``vector_keys``),
    so no memory is read unless it has none yet. :data:`BACKLOG` when more are still to embed than ``budget``
    allows; None when the index cannot answer."""

    from . import postings

    encoder = _encoder()
    cached = _rows(store, tip)
    if encoder is None or cached is None:
        return None
    mine = _rows_matrix(store, encoder, cached, budget)
    if mine is None:
        return BACKLOG
    if len(mine[0]) != len(cached.rows):  # a memory whose blob does not parse: the loaded path says what is wrong
        return None
    cosines = mine[1] @ _query_vector(encoder, query)
    from .embedding import english_encoder, mostly_latin

    english = english_encoder() if fuse else None
    if english is not None and mostly_latin(query):
        english_rows = _rows_matrix(store, english, cached, budget, latin_only=True)
        if english_rows is not None:
            cosines = _with_english(cosines, english_rows[0], english_rows[1] @ _query_vector(english, query))
    values = cosines.tolist()
    return postings.Dense(cached.ids, cached.types, cached.blobs, values,
                          _nearest(cosines, values, cached.types, only_types, cached.ids, only_ids))


def _rows(store: "Store", tip: str) -> Optional[_Rows]:
    """The active memories at ``tip`` and the matrices kept over them (per index file, the last tree's)."""
    from . import postings

    root = store.snapshot(tip).tree_id
    if root is None:
        return None
    where = store.warm.index.path
    cached = _DENSE.get(where)
    if cached is None or cached.tree != root:
        rows = postings.active(store, tip)
        if rows is None:
            return None
        ids, types, blobs = ([r[k] for r in rows] for k in range(3))
        cached = _DENSE[where] = _Rows(root, rows, ids, types, blobs, [r for r in rows if r[1] in CHOICE_TYPES],
                                       {} if cached is None else cached.matrices)
    return cached


def _options(store: "Store", tip: str, proposal: str, budget: Optional["Budget"]) -> Optional[Dict[str, float]]:
    """The proposal's cosine to each active decision's and rejection's option (title and text, no reason),
    as :func:`check` computes it over the loaded memories; None when more are still to embed than
    ``budget`` allows (or the index cannot answer)."""
    from .embedding import option_text

    encoder = _encoder()
    cached = _rows(store, tip)
    if encoder is None or cached is None:
        return None
    mine = _rows_matrix(store, encoder, cached, budget, text=option_text)
    if mine is None or len(mine[0]) != len(cached.choices):
        return None
    return dict(zip((i for i, _, _ in cached.choices), (mine[1] @ _query_vector(encoder, proposal)).tolist()))


def _nearest(cosines: Any, values: List[float], types: Sequence[str], only_types: Optional[Sequence[str]],
             ids: Sequence[str], only_ids: Optional[AbstractSet[str]]) -> List[int]:
    """The positions :func:`gitmem.search.rank` fuses as dense neighbours, nearest first: the DENSE_DEPTH
    largest similarities (ties: the later position first) that are not 0, of a type and an id kept, and stand
    :func:`gitmem.search.dense_floor` deviations above the mean (standardised to the same bits as
    rank's). numpy picks the few largest; only those are ordered in Python."""
    import numpy as np

    n = len(values)
    if n < 2:
        return []
    mean, spread = deviation(values)
    floor = dense_floor(n)
    out: List[int] = []
    done = 0  # how many of the largest were looked at
    k = min(n, 4 * DENSE_DEPTH)
    while True:
        threshold = np.partition(cosines, n - k)[n - k]
        ahead = sorted((i for i in np.flatnonzero(cosines >= threshold).tolist()), key=lambda i: (values[i], i),
                       reverse=True)
        for i in ahead[done:]:
            if (values[i] - mean) / spread < floor:
                return out  # every later one is nearer the mean still
            if values[i] and (only_types is None or types[i] in only_types) and (only_ids is None or ids[i] in only_ids):
                out.append(i)
                if len(out) == DENSE_DEPTH:
                    return out
        done = len(ahead)
        if done >= n:
            return out
        k = min(n, 4 * k)


class _Lookup(NamedTuple):
    """Where each vector of one view's rows is (:func:`_lookup`)."""

    kept: Any  # the view's matrix kept for the last tree, or None
    keys: Dict[str, Tuple[str, bool]]  # blob -> (its vector's key, mostly Latin script)
    read: Dict[str, Memory]  # blob -> the memory, for those parsed
    positions: List[int]  # the rows of the view (with ``latin_only``, those mostly in Latin script)
    wanted: List[str]  # their blobs
    was: Dict[str, int]  # blob -> its row in the kept matrix
    looked: Dict[str, bytes]  # key -> the vector the index keeps
    todo: List[str]  # the blobs with no vector yet: to embed


def _lookup(store: "Store", encoder: "Encoder", rows: List[Tuple[str, str, str]], kept: Any, latin_only: bool,
            text: Optional[Callable[[Memory], str]]) -> _Lookup:
    """Find each row's vector in the matrix ``kept`` for the last tree, else in the index; what is left is to embed."""
    from .embedding import document_text, mostly_latin

    view = text or document_text
    name = _view_name(encoder, text)
    index = store.warm.index
    blobs = [b for _, _, b in rows]
    before = kept[4] if kept is not None else {}
    keys = {b: before[b] for b in blobs if b in before}  # after a write, only the new blobs are looked up
    keys.update(index.vector_keys(name, [b for b in blobs if b not in keys]))
    read: Dict[str, Memory] = {}
    unkeyed = [r for r in rows if r[2] not in keys]
    if unkeyed:  # a blob seen for the first time: its text names its vector, and says if MiniLM reads it
        read.update(_parsed(store, unkeyed))
        fresh = {b: (vector_key(encoder, view(read[b])), mostly_latin(view(read[b]))) for _, _, b in unkeyed if b in read}
        index.put_vector_keys(name, fresh)
        keys.update(fresh)
    positions = [i for i, b in enumerate(blobs) if b in keys and (not latin_only or keys[b][1])]
    wanted = [blobs[i] for i in positions]
    was = {} if kept is None else {b: i for i, b in enumerate(kept[3])}
    stored = [b for b in wanted if b not in was]
    looked = index.vectors(encoder.name, list(dict.fromkeys(keys[b][0] for b in stored)))
    return _Lookup(kept, keys, read, positions, wanted, was, looked, [b for b in stored if keys[b][0] not in looked])


def _parsed(store: "Store", rows: Sequence[Tuple[str, str, str]]) -> Dict[str, Memory]:
    """The memories of these index rows, by blob (a blob that does not parse is left out)."""
    parsed = store.warm.parse(store.repository, [(memory_path(kind, i), b) for i, kind, b in rows], store.read_ref())
    return {b: m for b, m in parsed.items() if isinstance(m, Memory)}


def _view_lookup(store: "Store", encoder: "Encoder", cached: _Rows, latin_only: bool,
                 text: Optional[Callable[[Memory], str]]) -> Optional[_Lookup]:
    """Where each of one view's rows (:func:`_rows_matrix`) has its vector, and which have none yet; None when
    the matrix kept for the view stands for these very rows (none is missing)."""
    kept = cached.matrices.get(_view_name(encoder, text))
    rows = _view_rows(cached, text)
    return None if kept is not None and kept[0] is rows else _lookup(store, encoder, rows, kept, latin_only, text)


def _view_rows(cached: _Rows, text: Optional[Callable[[Memory], str]]) -> List[Tuple[str, str, str]]:
    """The rows a view embeds: every active memory's, or the choices' with a text of their own (the option)."""
    return cached.rows if text is None else cached.choices


def _views() -> List[Tuple["Encoder", bool, Optional[Callable[[Memory], str]]]]:
    """Every view an agent's path reads, as (encoder, Latin script only, text): the memory under e5 and under
    MiniLM (those mostly in Latin script), and a decision's or rejection's option under e5."""
    from .embedding import english_encoder, option_text

    encoder, english = _encoder(), english_encoder()
    views: List[Tuple["Encoder", bool, Optional[Callable[[Memory], str]]]] = []
    if encoder is not None:
        views += [(encoder, False, None), (encoder, False, option_text)]
    return views + ([(english, True, None)] if english is not None else [])


def _backlog_ms(store: "Store", cached: _Rows, known: Optional[Tuple[str, int]] = None) -> float:
    """The estimated CPU to embed every vector the views of ``cached`` lack: what a :class:`Budget` weighs.
    ``known``: (view name, how many it lacks) of a view the caller has just looked up, not looked up again."""
    total = 0.0
    for kind, latin, text in _views():
        if known is not None and _view_name(kind, text) == known[0]:
            total += known[1] * kind.cost_ms
        elif (found := _view_lookup(store, kind, cached, latin, text)) is not None:
            total += len(found.todo) * kind.cost_ms
    return total


def _memory_ms() -> float:
    """The estimated CPU to embed one memory in every view: what a memory missing from a loaded pool (counted one
    view at a time) costs a :class:`Budget`, so a call that pays for one view can pay for the others."""
    return sum(kind.cost_ms for kind, _, _ in _views())


def _rows_matrix(store: "Store", encoder: "Encoder", cached: _Rows, budget: Optional[Budget],
                 latin_only: bool = False, text: Optional[Callable[[Memory], str]] = None,
                 found: Optional[_Lookup] = None) -> Optional[Tuple[Any, Any]]:
    """(positions, matrix): the vectors of one view's rows (:func:`_view_rows`; of those mostly in Latin script,
    with ``latin_only``), in their order, stacked as :func:`_matrix` stacks a loaded pool's; kept in
    ``cached.matrices`` per view, and reused by blob when the rows change. None when more are still to embed
    than ``budget`` allows. ``found``: the view's :func:`_view_lookup`, when the caller has made it."""
    import numpy as np

    from .embedding import document_text

    view = text or document_text
    name = _view_name(encoder, text)
    rows, matrices = _view_rows(cached, text), cached.matrices
    kept = matrices.get(name)  # (the rows, positions, matrix, blobs of the matrix's rows, keys)
    if kept is not None and kept[0] is rows:
        return kept[1], kept[2]
    # (the rows, how many had no vector, the index's version, and the index it was read from: a version counts
    # one connection's commits, so after the index was reopened it says nothing): it stands while no other
    # process wrote to the index (a prompt hook asks twice, the check then recall, and looks once); once the
    # background one did, the next call looks again. Used once, a server's call after one that found it went by
    # words unasked.
    index = store.warm.index
    version = index.version()
    behind = matrices.pop(f"{name} backlog", None)
    if behind is not None and behind[0] is rows and behind[2] is not None and behind[2] == version and behind[3] is index \
            and budget is not None and not budget.fits(lambda: _backlog_ms(store, cached)):
        matrices[f"{name} backlog"] = behind
        return None
    _, keys, read, positions, wanted, was, looked, todo = found or _lookup(store, encoder, rows, kept, latin_only, text)
    if todo and budget is not None and not budget.fits(lambda: _backlog_ms(store, cached, (name, len(todo)))):
        matrices[f"{name} backlog"] = (rows, len(todo), version, index)
        return None
    embedded: Dict[str, Any] = {}
    todo_set = set(todo)
    if todo:
        read.update(_parsed(store, [r for r in rows if r[2] in todo_set and r[2] not in read]))
        texts = {keys[b][0]: read[b] for b in todo}
        _embed(store, encoder, list(texts.values()), list(texts), embedded, view)
    kept_at: Tuple[List[int], List[int]] = ([], [])  # (row here, row in the kept matrix)
    bytes_at: Tuple[List[int], List[bytes]] = ([], [])
    for j, b in enumerate(wanted):
        if b in was:
            kept_at[0].append(j)
            kept_at[1].append(was[b])
        elif (v := looked.get(keys[b][0])) is not None:
            bytes_at[0].append(j)
            bytes_at[1].append(v)
    matrix = np.empty((len(wanted), encoder.dim), dtype=np.float32)
    if kept_at[0]:
        matrix[kept_at[0]] = kept[2][kept_at[1]]  # type: ignore[index]
    if bytes_at[0]:
        matrix[bytes_at[0]] = np.frombuffer(b"".join(bytes_at[1]), dtype=np.float32).reshape(-1, encoder.dim)
    for j, b in enumerate(wanted if todo_set else ()):
        if b in todo_set:
            matrix[j] = embedded[keys[b][0]]
    at = np.array(positions, dtype=np.int64)
    matrices[name] = (rows, at, matrix, wanted, keys)
    return at, matrix


def _view_name(encoder: "Encoder", text: Optional[Callable[[Memory], str]]) -> str:
    """What the vector keys of one view of the memories (its text, default the whole memory's) are kept under."""
    return encoder.name if text is None else f"{encoder.name} {text.__name__}"


def waiting(store: "Store") -> Optional[int]:
    """How many memories wait to be embedded (in the view with most) when an answer this process gave with a
    ``budget`` went without some vectors for that reason (more than it allowed), else None: what
    :func:`gitmem.backlog.start` is for, and what the answer says of itself (:func:`mode`)."""
    behind = _held(store).values()
    return max(behind) if behind else None


def _held(store: "Store") -> Dict[str, int]:
    """By view name (:func:`_view_name`): how many memories had no vector when the last call in that view,
    from the index or over loaded memories, went without it."""
    where = store.warm.index.path
    cached = _DENSE.get(where)
    held = {key[:-len(" backlog")]: kept[1] for key, kept in cached.matrices.items()
            if key.endswith(" backlog")} if cached else {}
    for (path, name), n in _HELD.items():
        if path == where:
            held[name] = max(n, held.get(name, 0))
    return held


def embed_backlog(store: "Store") -> Optional[int]:
    """Embed every active memory at the tip that has no vector yet, in each view an agent's path reads (the
    memory for recall, e5's and MiniLM's, and a decision's or rejection's option for the check): how many
    vectors that took, or None with no encoder or nothing the index can answer. The whole backlog, which
    those paths will not wait for (:data:`AGENT_BUDGET`; :mod:`gitmem.backlog` runs this for them)."""
    encoder = _encoder()
    tip = store.read_from()[1]
    cached = _rows(store, tip) if encoder is not None and tip is not None else None
    if encoder is None or cached is None:
        return None
    done = 0
    for kind, latin, text in _views():
        found = _view_lookup(store, kind, cached, latin, text)
        if found is not None and found.todo:
            done += len(found.todo)
            _rows_matrix(store, kind, cached, None, latin, text, found)
    return done


def vector_key(encoder: "Encoder", text: str) -> str:
    """The hash a vector is kept by in the derived index: the encoder's name and the text embedded."""
    import hashlib

    return hashlib.sha1(f"{encoder.name}\0{text}".encode("utf-8")).hexdigest()


def _encoder() -> Optional["Encoder"]:
    from .embedding import default_encoder

    return default_encoder()
