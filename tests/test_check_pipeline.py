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

from corpora import in_both_modes, meets_measured_rates, meets_measured_recall, not_answered_by_reason


# Measured; raise them when the check improves.
MEASURED = {
    "auto": {"repeats_flagged": 30,  # of 33, the right rejection first
             # 9 before accents and identifiers, 15 before the reason's share of its new words counted, 12 before qualifiers
             "fresh_false_alarms": 7,  # of 38 (8 before where a rejected move goes counted)
             "chosen_not_answered": 4,  # of 21 proposals of the alternative a reason names (6 before)
             "unrelated_false_alarms": 1,  # of 10
             "recall_at_5": 26,  # of 26
             "recall_at_1": 25},  # of 26
    "none": {"repeats_flagged": 28,
             "fresh_false_alarms": 5,  # (6 before identifiers; 16 before; 13 before qualifiers and the decisions' words)
             "chosen_not_answered": 2,  # (8 before; 6 before the decisions' words)
             "unrelated_false_alarms": 0,
             "recall_at_5": 24,  # (23 before accents and identifiers)
             "recall_at_1": 21},  # (20 before)
}

pipeline = in_both_modes("check_pipeline", "pipeline", MEASURED)


def test_the_check_meets_its_measured_rates_on_a_held_out_corpus(pipeline):
    meets_measured_rates(pipeline)


def test_proposals_of_the_alternative_a_rejection_s_reason_names_are_seldom_repeats(pipeline):
    store, _, queries, measured = pipeline
    chosen = [q["proposal"] for q in queries["fresh"] if q["kind"] == "chosen"]
    assert len(not_answered_by_reason(store, chosen)) <= measured["chosen_not_answered"]


def test_recall_finds_the_labelled_memories(pipeline):
    meets_measured_recall(pipeline)
