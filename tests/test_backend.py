"""The official SDK against the emulator, in-process and over real HTTP, and backend selection."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from conftest import GUIDE
from gitmem.emulator import Emulator, VirtualClock
from gitmem.errors import BackendError
from gitmem.backend import ANTHROPIC_API, EMULATOR, open_backend
from gitmem.tokens import count_request_tokens

BODY = {
    "model": "claude-haiku-4-5",
    "max_tokens": 200,
    "system": [
        {"type": "text", "text": GUIDE, "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": '<memory id="0mabcdefghjk1234" type="decision">Refunds go through the ledger.</memory>'},
    ],
    "messages": [{"role": "user", "content": "How do refunds work?"}],
}


@pytest.fixture
def backend():
    return open_backend("emulator", clock=VirtualClock())


def test_the_sdk_talks_to_the_emulator_in_process(backend):
    first = backend.send(BODY)
    assert first.backend == EMULATOR and backend.name == EMULATOR
    assert first.request_id.startswith("req_")
    assert "[0mabcdefghjk1234]" in first.text
    assert first.usage.cache_creation_input_tokens > 4096
    assert first.usage.total_input_tokens == count_request_tokens(BODY)
    second = backend.send(BODY)
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    backend.emulator.clock.advance(330)
    assert backend.send(BODY).usage.cache_read_input_tokens == 0


def test_count_tokens_and_models_through_the_sdk(backend):
    assert backend.count_tokens(BODY) == count_request_tokens(BODY)
    ids = [model.id for model in backend.client.models.list(limit=3)]  # the SDK follows has_more/last_id
    assert "claude-haiku-4-5-20251001" in ids and len(ids) == len(set(ids)) > 3
    assert backend.client.models.retrieve("claude-sonnet-4-5").id == "claude-sonnet-4-5-20250929"


def test_streaming_through_the_sdk_gives_the_same_message(backend):
    with backend.client.messages.stream(**BODY) as stream:
        streamed = stream.get_final_message()
    assert streamed.content[0].text == backend.send(BODY).text
    assert streamed.usage.cache_creation_input_tokens > 0  # the first request wrote the guide


def test_api_errors_become_backend_errors_with_the_api_type(backend):
    with pytest.raises(BackendError, match=r"^404 not_found_error: model: claude-nope \(request-id req_"):
        backend.send({**BODY, "model": "claude-nope"})
    too_many = {**BODY, "messages": [{"role": "user", "content": [
        {"type": "text", "text": f"part {i}", "cache_control": {"type": "ephemeral"}} for i in range(4)]}]}
    with pytest.raises(BackendError, match="A maximum of 4 blocks with `cache_control` may be provided. Found 5.") as info:
        backend.send(too_many)
    assert info.value.status == 400 and info.value.error_type == "invalid_request_error"


def test_overloaded_is_reported_after_the_sdk_gives_up(backend):
    backend.client = backend.client.with_options(max_retries=0)
    backend.emulator.handle("POST", "/_emulator/fail", {}, b'{"status": 529, "count": 1}')
    with pytest.raises(BackendError, match="529 overloaded_error"):
        backend.send(BODY)


def test_auto_uses_the_emulator_without_credentials_and_the_api_with_a_key(monkeypatch):
    assert open_backend("auto").name == EMULATOR
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    assert open_backend("auto").name == ANTHROPIC_API


def test_the_real_api_needs_a_key():
    with pytest.raises(BackendError, match="ANTHROPIC_API_KEY"):
        open_backend("anthropic")
    with pytest.raises(BackendError, match="unknown backend"):
        open_backend("openai")


@pytest.fixture
def http_emulator():
    """`Emulator.asgi()` served by uvicorn on a free loopback port, in a thread."""
    import uvicorn

    emulator = Emulator(clock=VirtualClock())
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(emulator.asgi(), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "uvicorn did not start"
    yield emulator, f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(10)
    sock.close()


def test_the_sdk_talks_to_the_emulator_over_http_via_anthropic_base_url(http_emulator, monkeypatch):
    import httpx2

    emulator, url = http_emulator
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    backend = open_backend("auto")
    first = backend.send(BODY)
    assert first.backend == EMULATOR  # told by the response, not guessed from the URL
    assert backend.send(BODY).usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert backend.count_tokens(BODY) == count_request_tokens(BODY)
    assert "claude-haiku-4-5-20251001" in [m.id for m in backend.client.models.list()]
    moved = httpx2.post(f"{url}/_emulator/clock", json={"advance": 301}).json()
    assert moved["now"] == emulator.clock.now() == 301
    assert backend.send(BODY).usage.cache_read_input_tokens == 0


def test_body_fields_the_sdk_has_no_argument_for_still_reach_the_api(backend):
    # temperature is not a create() argument in every SDK version: it travels in extra_body.
    with pytest.raises(BackendError, match="temperature"):
        backend.send({**BODY, "temperature": 3})
    assert backend.send({**BODY, "temperature": 0.5, "stream": True}).backend == EMULATOR
