"""The proposal check: a re-proposed option is a repeat, another option on the same topic is related."""

from __future__ import annotations

import pytest

from gitmem.check import check_proposal, judge, judge_long, sentences, stance
from gitmem.search import rank
from test_search import NOW, fixture_id, mem, quickstart


def _among_notes(rejection):
    """``rejection`` in a store of 20 unrelated notes, so its words weigh as a real store's rare ones."""
    return [rejection] + [mem(f"Unrelated note {i}", "note", 10 + i) for i in range(20)]

def test_check_proposal_is_empty_without_a_matching_rejection():
    r = mem("Use Redis for the job queue", "rejection", n=1, reason="ops")
    d = mem("Use Redis for the job queue", "decision", n=2)
    assert check_proposal([d], "Move jobs to a Redis queue") == []
    assert [h.memory.id for h in check_proposal([r, d], "Move jobs to a Redis queue")] == [r.id]
    assert check_proposal([r], "Add a dark mode toggle") == []


@pytest.mark.parametrize("proposal", ["move the job queue to Redis", "Let's put background jobs on Redis",
                                      "use redis for queueing jobs"])
def test_a_re_proposed_option_is_a_repeat_with_the_rejection_first(proposal):
    verdict = judge(quickstart(), proposal, now=NOW)
    assert verdict.repeat and verdict.repeats[0].memory.id == fixture_id(2)
    assert verdict.judge.startswith("lexical")


@pytest.mark.parametrize("proposal", ["use RabbitMQ for the job queue", "keep the English fallback for missing translations"])
def test_another_option_on_the_same_topic_is_related_not_a_repeat(proposal):
    verdict = judge(quickstart(), proposal, now=NOW)
    assert not verdict.repeat and verdict.related
    assert verdict.to_dict()["related"][0]["tier"] == "related"


@pytest.mark.parametrize("proposal", ["redis", "Redis?", "use Redis"])
def test_one_word_names_a_topic_so_its_rejections_are_related_not_repeated(proposal):
    verdict = judge(quickstart(), proposal, now=NOW)
    assert not verdict.repeat and [h.memory.id for h in verdict.related] == [fixture_id(2)]


def test_one_word_with_what_to_do_repeats_a_rejection_of_just_that():
    pool = quickstart() + [mem("Drop Redis", "rejection", 9, reason="the queue still needs it")]
    assert [h.memory.id for h in judge(pool, "drop redis", now=NOW).repeats] == [fixture_id(9)]
    assert not judge(pool, "redis", now=NOW).repeat


def test_keeping_what_a_decision_dropped_repeats_the_rejected_keep_though_it_shares_the_decisions_words():
    """By words, a proposal closer to a decision than to the rejection proposes what the team chose, unless it does
    the opposite of the decision with the same things: keeping the proxy the team decided to drop."""
    dropped = mem("Apps reach Elasticsearch through the load balancer; the loopback nginx proxy is no longer configured",
                  "decision", 1, title="Drop the nginx proxy in front of Elasticsearch", reason="the balancer balances")
    kept = mem("Carry the nginx proxy over to the new hosts", "rejection", 2, title="Keep the Elasticsearch proxy",
               reason="the balancer already balances")
    pool = _among_notes(kept) + [dropped]
    verdict = judge(pool, "keep the loopback nginx proxy for elasticsearch", now=NOW)
    assert [h.memory.id for h in verdict.repeats] == [kept.id]
    assert not judge(pool, "drop the loopback nginx proxy for elasticsearch on the other hosts too", now=NOW).repeat


def test_a_name_both_texts_hold_weighs_once_however_its_capitals_split_it():
    """Search splits OpenSearch into open and search as well: counted three times, a shared name alone made
    an upgrade of the cluster a repeat of the rejected move away from it."""
    rejected = mem("Replace our OpenSearch cluster with Algolia's hosted search service", "rejection", 1,
                   title="Move product search to Algolia", reason="cost")
    pool = _among_notes(rejected) + [mem("Product search ranks by sales", "fact", 40)]
    verdict = judge(pool, "Upgrade the OpenSearch cluster to the next major version", now=NOW)
    assert not verdict.repeat and verdict.related


@pytest.mark.parametrize("proposal", ["use tailwind for css", "add a dark mode toggle to settings"])
def test_a_proposal_on_another_topic_matches_nothing(proposal):
    verdict = judge(quickstart(), proposal, now=NOW)
    assert not verdict.repeat and not verdict.hits


def test_word_weights_come_from_the_whole_store_not_from_rejections_alone():
    pool = quickstart() + [mem(f"Postgres note {i}", "note", 10 + i) for i in range(20)]
    # "postgres" is common in the store, so it weighs little; it would weigh the most among rejections alone.
    hits = rank(pool, "postgres", only_types=("rejection",), now=NOW)
    assert hits == []
    idx_all = rank(pool, "redis", now=NOW)
    assert idx_all[0].memory.id == fixture_id(2)


def test_stance_reads_the_main_clause_and_turns_on_negation():
    assert stance("Keep the English fallback") == 1
    assert stance("Drop the English fallback so pages load faster") == -1
    assert stance("Do not use an ORM") == -1
    assert stance("Add deleted_at to all tables and filter it so deleted rows vanish") == 1
    assert stance("Redis for the queue") == 0


def test_stance_is_the_leading_verb_s_not_a_word_naming_the_thing():
    assert stance("Grant the list and delete volume permissions through the existing roles") == 0
    assert stance("Deploy the scheduler stack to turn instances off at night") == 0
    assert stance("We should just keep the English fallback") == 1
    assert stance("Move away from Redis for the queue") == -1
    assert stance("Keep only the decision makers and add no RACI roles") == -1  # a negation anywhere still turns it


def _cosines(pool, base, **near):
    """A sentence encoder's cosines: ``base`` give or take 0.02 for every memory, ``near`` by fixture
    number (``m2=0.9``)."""
    out = {m.id: base + (0.02 if i % 2 else -0.02) for i, m in enumerate(pool)}
    out.update({fixture_id(int(k[1:])): v for k, v in near.items()})
    return out


def test_a_proposal_nearest_to_the_rejected_option_by_meaning_is_a_repeat():
    pool = quickstart() + [mem(f"Unrelated note {i}", "note", 10 + i) for i in range(20)]
    proposal = "put the background workers on an in-memory broker"  # no word of "Use Redis for the job queue"
    similarity = _cosines(pool, 0.80, m1=0.89, m2=0.89)  # on the topic; with their reasons, as near the decision
    assert not judge(pool, proposal, similarity=similarity, now=NOW).repeat
    # The options alone (no reasons): the rejected one is clearly the nearest.
    options = _cosines([m for m in pool if m.type in ("rejection", "decision")], 0.80, m1=0.85, m2=0.88)
    verdict = judge(pool, proposal, similarity=similarity, option_similarity=options, now=NOW)
    assert verdict.repeat and verdict.repeats[0].memory.id == fixture_id(2)


def test_a_proposal_nearer_to_the_chosen_option_than_to_the_rejected_one_is_related():
    pool = quickstart()
    proposal = "use redis as the job queue's lock store"  # words of the rejection, as many of the decision's
    assert judge(pool, proposal, now=NOW).repeat  # words alone
    similarity = _cosines(pool, 0.80, m1=0.88, m2=0.88)
    options = _cosines([m for m in pool if m.type in ("rejection", "decision")], 0.80, m1=0.9, m2=0.87)
    verdict = judge(pool, proposal, similarity=similarity, option_similarity=options, now=NOW)
    assert not verdict.repeat and verdict.related[0].memory.id == fixture_id(2)


def test_a_paraphrase_by_meaning_that_names_the_option_otherwise_is_a_repeat():
    # "British" and "UK" look like two different named options to the names rule; only a cosine far
    # above the store's (REPEAT_Z) may overrule it.
    pool = [mem("Continue writing dates the UK way by default.", "rejection", 1, title="Keep the dd/mm/yyyy date format")]
    pool += [mem(f"Unrelated note {i}", "note", 10 + i) for i in range(80)]
    proposal = "print dates the British way, day first"
    on_topic = judge(pool, proposal, similarity=_cosines(pool, 0.80, m1=0.86), now=NOW)
    assert not on_topic.repeat and on_topic.related[0].memory.id == fixture_id(1)
    paraphrase = judge(pool, proposal, similarity=_cosines(pool, 0.80, m1=0.95), now=NOW)
    assert paraphrase.repeat and paraphrase.repeats[0].memory.id == fixture_id(1)


def test_a_common_acronym_both_texts_mention_is_their_topic_not_a_shared_option():
    # "API" passed for a product name both texts name, so REST looked like no other option than the rejected GraphQL
    pool = _among_notes(mem("Adopt GraphQL for the public API", "rejection", 1, reason="its resolvers cost too much to run"))
    verdict = judge(pool, "Add rate limiting to the public REST API", now=NOW)
    assert not verdict.repeat and verdict.related[0].memory.id == fixture_id(1)
    assert judge(pool, "Expose the public API through GraphQL", now=NOW).repeat


def test_a_name_with_a_version_is_the_name_and_another_version_another_option():
    # "UUIDs" and "UUIDv4" were two names, each unknown to the other text: the repeat was missed
    pool = _among_notes(mem("Use UUIDv4 as invoice numbers", "rejection", 1, reason="tax law needs gapless numbers"))
    verdict = judge(pool, "Use random UUIDs for invoice numbers", now=NOW)
    assert verdict.repeat and verdict.repeats[0].memory.id == fixture_id(1)
    assert not judge(pool, "Use UUIDv7 for invoice numbers", now=NOW).repeat


def test_the_first_word_of_a_rejection_after_its_title_is_no_name():
    # Joined to the title, "Keep" would follow a lower-case word and pass for a product name, which
    # the proposal's "API" never mentions: the two would look like different named options.
    pool = [mem("Keep the configuration as a mutable store components write state to at runtime", "rejection", 1,
                title="Mutable configuration store"), mem("Unrelated note", "note", 2)]
    verdict = judge(pool, "let components write runtime state into the configuration through its API", now=NOW)
    assert verdict.repeat and verdict.repeats[0].memory.id == fixture_id(1)


def test_a_rejection_whose_text_takes_no_stance_takes_its_title_s():
    pool = [mem("Carry the nginx vhost in front of Elasticsearch over to the new hosts", "rejection", 1,
                title="Keep the nginx proxy for Elasticsearch"), mem("Unrelated note", "note", 2)]
    assert judge(pool, "carry the nginx proxy for elasticsearch over to the new hosts", now=NOW).repeat
    verdict = judge(pool, "drop the nginx proxy for elasticsearch on the new hosts", now=NOW)
    assert not verdict.repeat and verdict.related[0].memory.id == fixture_id(1)


@pytest.mark.parametrize("text", ["Publish ledger events through Kafka", "Hard-delete closed accounts after 90 days"])
def test_a_negated_verb_the_stance_words_do_not_know_is_against_the_rejection_not_a_repeat(text):
    # "publish" and "hard-delete" take no stance, and a negation of no stance stayed none: a proposal agreeing
    # with the rejection was called a repeat of it (exit 1), by words and by meaning alike
    pool = _among_notes(mem(text, "rejection", 1, reason="one consumer today; the outbox table is enough"))
    paraphrase = _cosines(pool, 0.80, m1=0.95)
    assert judge(pool, text.lower(), now=NOW).repeat
    assert judge(pool, text.lower(), similarity=paraphrase, now=NOW).repeat
    for proposal in (f"do not {text.lower()}", f"we should never {text.lower()}", f"Don't {text.lower()}"):
        for similarity in (None, paraphrase):
            verdict = judge(pool, proposal, similarity=similarity, now=NOW)
            assert not verdict.repeat and verdict.related[0].memory.id == fixture_id(1)


def test_a_rejected_negation_is_repeated_by_a_negation_and_answered_by_the_verb():
    pool = [mem("Do not version the API in the URL", "rejection", 1, reason="partners pin a version by header"),
            mem("Unrelated note", "note", 2)]
    assert judge(pool, "don't version the API in the URL", now=NOW).repeat
    assert not judge(pool, "version the API in the URL", now=NOW).repeat


def test_a_negated_verb_repeats_a_rejected_skip_of_it():
    # "skip" removes: "don't sign debug builds" proposes the rejected skip, it does not answer it
    pool = [mem("Skip image signing in debug builds", "rejection", 1, reason="debug images reached field units"),
            mem("Unrelated note", "note", 2)]
    assert judge(pool, "don't sign images in debug builds, skip it", now=NOW).repeat
    assert not judge(pool, "never skip image signing in debug builds", now=NOW).repeat


PLAN = "First I'll add the endpoint and tests. For the cache I'll use Redis with a 5-minute TTL. Then update the docs."


def test_a_long_proposal_is_split_into_its_sentences_without_their_connectives():
    assert sentences(PLAN) == ["First I'll add the endpoint and tests.", "For the cache I'll use Redis with a 5-minute TTL.",
                               "Then update the docs."]
    assert sentences("use redis for the cache") == []  # one sentence: judged whole, as before
    assert sentences("Next, use Redis e.g. for sessions. After that drop the v1.2 API; then bump it") == \
        ["use Redis e.g. for sessions.", "drop the v1.2 API", "then bump it"]
    assert sentences("- add tests\n- use kafka\n1. ship it") == ["add tests", "use kafka", "ship it"]


def test_a_sentence_of_only_punctuation_ends_a_sentence_and_names_nothing():
    """An ellipsis or a stray "?!" between sentences (a piece with no word before its full stop) was an IndexError."""
    assert sentences("... use Redis for the cache") == []
    assert sentences("Use Redis for the cache.\n...\nthen write the tests ?! ok") == \
        ["Use Redis for the cache.", "then write the tests ?!", "ok"]
    pool = _store_with_a_cache_rejection()
    assert judge_long(pool, "Hmm. ... Use Redis for the cache", inputs=_lexical, now=NOW).repeat


def _lexical(text):
    return None, None


def _store_with_a_cache_rejection():
    """The quickstart, a rejected Redis cache, and notes where a plan's other words are as rare as "redis"."""
    notes = ["The billing endpoint returns cents", "Integration tests run nightly", "The docs site builds on merge",
             "Session TTL is one hour", "Deploys take a minute"] + [f"Unrelated note {i}" for i in range(20)]
    return quickstart() + [mem("Use Redis for the cache", "rejection", 5, reason="ops will not run another stateful service")] \
        + [mem(text, "note", 10 + i) for i, text in enumerate(notes)]


def test_a_repeat_buried_in_a_long_proposal_is_a_repeat():
    pool = _store_with_a_cache_rejection()
    assert not judge(pool, PLAN, now=NOW).repeat  # whole, its own words drown the rejected option
    verdict = judge_long(pool, PLAN, inputs=_lexical, now=NOW)
    assert verdict.repeat and verdict.repeats[0].memory.id == fixture_id(5) and verdict.proposal == PLAN


def test_a_long_fresh_proposal_is_no_repeat_though_one_sentence_is_on_a_rejected_topic():
    pool = _store_with_a_cache_rejection()
    plan = "First I'll add the endpoint and tests. Use RabbitMQ for the job queue. Then update the docs."
    verdict = judge_long(pool, plan, inputs=_lexical, now=NOW)
    assert not verdict.repeat and fixture_id(2) in [h.memory.id for h in verdict.related]


def test_a_sentence_needs_stronger_evidence_by_meaning_than_a_whole_proposal():
    pool = quickstart() + [mem(f"Unrelated note {i}", "note", 10 + i) for i in range(40)]
    sentence = "put the background workers on an in-memory broker"  # no word of "Use Redis for the job queue"
    plan = f"I'll add a regression test first. Then {sentence}. Finally I'll update the runbook."
    chosen = [m for m in pool if m.type in ("rejection", "decision")]

    def inputs(m2, option):  # on the topic (z about 3) or a paraphrase (z about 9); the option this near
        similarity, options = _cosines(pool, 0.80, m2=m2), _cosines(chosen, 0.80, m1=0.85, m2=option)
        return lambda text: (similarity, options) if sentence in text and text != plan else (_cosines(pool, 0.80), None)

    weak = inputs(0.86, 0.88)
    assert judge(pool, sentence, similarity=weak(sentence)[0], option_similarity=weak(sentence)[1], now=NOW).repeat
    assert not judge_long(pool, plan, inputs=weak, now=NOW).repeat  # enough alone, not for a sentence of a plan
    verdict = judge_long(pool, plan, inputs=inputs(0.98, 0.89), now=NOW)
    assert verdict.repeat and verdict.repeats[0].memory.id == fixture_id(2)


def test_a_proposal_whose_words_beyond_the_option_s_are_the_reason_s_is_related_not_a_repeat():
    # The alternative the reason names, worded mostly in the rejected option's words: what it adds is the reason's.
    pool = quickstart() + [mem("Cache product pages with their prices and stock at the CDN for an hour", "rejection", 5,
                               reason="Customers saw stale prices and sold-out items for up to an hour. Pages are "
                                      "cached for 60 seconds and the browser loads price and stock from the API.")]
    alternative = judge(pool, "Cache product pages at the CDN for 60 seconds and load price and stock from the API "
                              "in the browser", now=NOW)
    assert not alternative.repeat and alternative.related[0].memory.id == fixture_id(5)
    again = judge(pool, "Cache the product pages with prices and stock on the CDN for a full hour", now=NOW)
    assert again.repeat and again.repeats[0].memory.id == fixture_id(5)


@pytest.mark.parametrize("proposal", ["use redis for the job queue only for the nightly exports",
                                      "use redis for the job queue when postgres is down",
                                      "offer redis as an optional job queue backend"])
def test_a_version_of_the_option_narrowed_by_a_qualifier_it_lacks_is_related_not_a_repeat(proposal):
    # "Use Redis for the job queue" was turned down as stated; only in some case, or as an option, is another proposal.
    verdict = judge(quickstart(), proposal, now=NOW)
    assert not verdict.repeat and verdict.related[0].memory.id == fixture_id(2)
    assert judge(quickstart(), "use redis for the job queue", now=NOW).repeat


def test_a_qualifier_the_rejected_option_has_too_is_part_of_the_option():
    pool = quickstart() + [mem("Retransmit every reading when the gateway sends no ACK", "rejection", 5)]
    verdict = judge(pool, "resend each reading whenever the gateway's ACK is missing", now=NOW)
    assert verdict.repeat and verdict.repeats[0].memory.id == fixture_id(5)


def test_a_condition_the_rejected_option_already_states_narrows_nothing():
    # "when rendering" is the rejected "at render time": any "when" made the proposal a narrower version, and
    # the repeat was missed
    pool = _among_notes(mem("Translate invoices with machine translation at render time", "rejection", 1,
                            reason="legal wording must be reviewed"))
    verdict = judge(pool, "Machine-translate the invoice text when rendering", now=NOW)
    assert verdict.repeat and verdict.repeats[0].memory.id == fixture_id(1)
    narrowed = judge(pool, "Machine-translate the invoice text when a customer asks for a copy in their language", now=NOW)
    assert not narrowed.repeat and narrowed.related[0].memory.id == fixture_id(1)


def test_by_words_a_proposal_sharing_more_with_a_decision_than_with_the_rejected_option_is_related():
    pool = quickstart() + [
        mem("Capture the full basket amount at checkout", "rejection", 5, reason="orders change after picking"),
        mem("Authorise at checkout and capture the picked amount at dispatch", "decision", 6)]
    chosen = judge(pool, "capture the picked amount at dispatch and release the rest of the hold", now=NOW)
    assert not chosen.repeat and chosen.related[0].memory.id == fixture_id(5)
    again = judge(pool, "capture the whole basket amount at checkout right away", now=NOW)
    assert again.repeat and again.repeats[0].memory.id == fixture_id(5)


@pytest.mark.parametrize("proposal", ["Keep sessions in Postgres, not Redis", "Cache sessions in Postgres instead of Redis",
                                      "Move the session cache out of Redis", "cache sessions in process rather than in Redis"])
def test_a_proposal_turning_down_the_rejected_option_agrees_with_the_rejection(proposal):
    # It names Redis only to turn it down, as the team did: it was called a repeat of the rejected Redis cache,
    # by words and by meaning alike
    pool = _among_notes(mem("Cache sessions in Redis", "rejection", 1, reason="one more service to run"))
    for similarity in (None, _cosines(pool, 0.80, m1=0.95)):
        verdict = judge(pool, proposal, similarity=similarity, now=NOW)
        assert not verdict.repeat and verdict.related[0].memory.id == fixture_id(1)
    # The option it proposes is still judged: Redis kept, another turned down, is the rejected option again
    for proposal in ("Cache sessions in Redis instead of Memcached", "cache sessions in Redis, not in process memory"):
        assert judge(pool, proposal, now=NOW).repeat


@pytest.mark.parametrize("rejected, opposite, again", [
    ("Move the frontend from React to Svelte", "Keep React for the frontend", "Rewrite the frontend in Svelte"),
    ("Switch the ORM from Django ORM to SQLAlchemy", "Keep the Django ORM", "Switch the ORM to SQLAlchemy"),
    ("Replace pytest with unittest", "Keep pytest", "Move the tests to unittest"),  # no capital: where it moves to
    ("Use Redis for the job queue", "Move the job queue from Redis to Postgres", "Move the job queue from Postgres to Redis")])
def test_keeping_what_the_rejected_option_moves_away_from_is_the_opposite_option(rejected, opposite, again):
    # "Keep React" took the rejected move's stance (both adopt something) and shared its words: it was a repeat
    pool = _among_notes(mem(rejected, "rejection", 1, reason="no gain for the cost"))
    for similarity in (None, _cosines(pool, 0.80, m1=0.95)):
        verdict = judge(pool, opposite, similarity=similarity, now=NOW)
        assert not verdict.repeat and verdict.related[0].memory.id == fixture_id(1)
    # Naming where the rejected option moves to is the rejected option again
    assert judge(pool, again, now=NOW).repeat


@pytest.mark.parametrize("proposal", ["Stop caching sessions in Redis", "Remove the Redis session cache",
                                      "drop redis from the session path"])
def test_removing_what_a_rejection_without_a_stance_word_proposed_agrees_with_it(proposal):
    # "Cache sessions in Redis" takes no stance word, yet it proposed to do something: removing that is
    # what the team chose, not the rejected option again (it was called a repeat)
    pool = _among_notes(mem("Cache sessions in Redis", "rejection", 1, reason="one more service to run"))
    for similarity in (None, _cosines(pool, 0.80, m1=0.95)):
        verdict = judge(pool, proposal, similarity=similarity, now=NOW)
        assert not verdict.repeat and verdict.related[0].memory.id == fixture_id(1)
    assert judge(pool, "cache the sessions with redis", now=NOW).repeat


def test_a_rejected_removal_said_as_a_noun_is_repeated_by_the_verb():
    pool = _among_notes(mem("Removal of the v1 export endpoint", "rejection", 1, reason="two partners still call it"))
    assert judge(pool, "remove the v1 export endpoint", now=NOW).repeat
    assert not judge(pool, "keep the v1 export endpoint", now=NOW).repeat


def test_removing_what_the_rejected_option_turned_down_too_repeats_it():
    pool = _among_notes(mem("Read the moisture ADC in a tight loop in main() and average the samples continuously instead of "
                "sleeping between measurements", "rejection", 1, title="Busy-poll the moisture ADC in main()",
                reason="a prototype drained its cell in nine days"))
    verdict = judge(pool, "skip sleeping between measurements and keep reading the moisture ADC in a tight loop in main",
                    now=NOW)
    assert verdict.repeat and verdict.repeats[0].memory.id == fixture_id(1)


@pytest.mark.parametrize("rejected, proposal", [
    ("Ship the Puppet code to each instance and run it locally, with no central Puppetmaster",
     "stop using a central Puppetmaster and ship the Puppet code to each instance"),
    ("Lint with ESLint and the StandardJS config", "switch the lint config to StandardJS with no semicolons")])
def test_a_removal_the_rejected_option_makes_itself_or_a_negation_further_on_is_no_agreement(rejected, proposal):
    pool = _among_notes(mem(rejected, "rejection", 1, reason="not now"))
    verdict = judge(pool, proposal, now=NOW)
    assert verdict.repeat and verdict.repeats[0].memory.id == fixture_id(1)
