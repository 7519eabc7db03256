"""The emulator's one request handler, and the two ways to reach it: an ASGI app and an httpx2 transport.

:meth:`Emulator.handle` maps (method, path, headers, body) to a response; :meth:`Emulator.asgi`
serves it over HTTP (``gitmem emulator serve``, via uvicorn) and :meth:`Emulator.transport` hands
it to the SDK in-process (``httpx2.Client(transport=...)`` as ``http_client``). Same handler, same
cache, same clock, whichever path a request takes.

Endpoints: ``POST /v1/messages`` (JSON, or SSE when ``"stream": true``), ``POST
/v1/messages/count_tokens``, ``GET /v1/models``, ``GET /v1/models/{id}``. Admin endpoints under
``/_emulator/`` (not part of the API): ``GET state`` (clock and live cache entries), ``POST clock``
``{"advance": seconds}`` (virtual clock only), ``POST reset`` (empty the cache), ``POST fail``
``{"status": 529, "count": 1, "mid_stream": false}`` (the next N message requests fail with that
status; with ``mid_stream`` a streamed request gets 200, half its events, then ``event: error``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple
from urllib.parse import parse_qs

from ..pricing import DEFAULT_TABLE, ModelPrice, PriceTable
from ..usage import Usage
from ..serving import MAX_REQUEST_BYTES, TOO_LARGE, read_body
from ..tokens import ESTIMATE_ERROR, count_tokens, truncate_to_tokens
from .cache import PromptCache, lookback_positions
from .clock import RealClock, WallClock
from .reply import respond, tool_use_tokens
from .validate import ApiError, invalid, parse_json, parse_request

BACKEND_HEADER = "x-gitmem-backend"
_MESSAGES = "/v1/messages"
_COUNT = "/v1/messages/count_tokens"
#: The most failures one ``/_emulator/fail`` queues (each is a list entry: 10^8 took 800 MB).
MAX_FAILURES = 10_000
_MODELS = "/v1/models"
_ROUTES = {_MESSAGES: "POST", _COUNT: "POST", _MODELS: "GET"}
_FAILURE_MESSAGES = {429: "Number of request tokens has exceeded your rate limit.", 500: "Internal server error",
                     529: "Overloaded"}


@dataclass
class HttpResponse:
    """A response; a streamed one has ``chunks`` (one SSE event each) and an empty ``body``.

    ``chunks`` is a one-shot iterator, produced lazily as the transport or ASGI app sends it, so
    each event is written on its own. :meth:`read` drains it into ``body`` (for tests and tools).
    """

    status: int
    headers: List[Tuple[str, str]]
    body: bytes = b""
    chunks: Optional[Iterator[bytes]] = None

    def iter_chunks(self) -> Iterator[bytes]:
        if self.chunks is None:
            yield self.body
            return
        chunks, self.chunks = self.chunks, None
        for chunk in chunks:
            self.body += chunk
            yield chunk

    def read(self) -> bytes:
        for _ in self.iter_chunks():
            pass
        return self.body

    def json(self) -> Any:
        return json.loads(self.read())


@dataclass
class Emulator:
    """A local Messages API: validation, prompt caching with TTLs, deterministic retrieval replies.

    ``clock`` is a :class:`RealClock` unless given (pass a :class:`VirtualClock` to move time in
    tests and the demo). One emulator holds one cache, split by the caller's key (:func:`workspace_of`): a
    request reads only entries its own key wrote, as the API keeps caches apart between workspaces. With
    ``state_path``, the cache lives in that file and is shared by every emulator (every process)
    that names it; a real clock then is wall time (:class:`WallClock`), a virtual one resumes from
    the saved virtual time.
    """

    clock: Any = field(default_factory=RealClock)
    table: PriceTable = DEFAULT_TABLE
    cache: PromptCache = field(default_factory=PromptCache)
    stream_delay: float = 0.0
    state_path: Optional[str] = None

    def __post_init__(self) -> None:
        if self.state_path is not None and isinstance(self.clock, RealClock):
            self.clock = WallClock()
        self._lock = threading.Lock()
        self._seq = 0
        self._failures: List[Tuple[int, bool]] = []
        if self.state_path is not None:  # a virtual clock resumes now, so advance() counts from there
            with self._persisted():
                pass

    # -- state that outlives the process --------------------------------------------------

    @contextlib.contextmanager
    def _persisted(self):
        """Around a cache change: load ``state_path``, let the change happen, save it back.

        Under an exclusive lock on ``state_path + ".lock"``, so concurrent processes (two ``gitmem
        ask`` at once) take turns. The file holds the clock kind, the virtual time, the id counter
        and the live entries. Entries saved under another clock kind are dropped: a wall time and
        a virtual time cannot be compared. Without ``state_path`` this does nothing.
        """
        if self.state_path is None:
            yield
            return
        os.makedirs(os.path.dirname(os.path.abspath(self.state_path)), exist_ok=True)
        with open(self.state_path + ".lock", "a+") as lock:
            try:
                import fcntl

                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            except ImportError:  # pragma: no cover - no POSIX locks: one process at a time
                pass
            self._load_state()
            yield
            self._save_state()

    def _clock_kind(self) -> str:
        return "virtual" if getattr(self.clock, "virtual", False) else "wall"

    def _load_state(self) -> None:
        assert self.state_path is not None  # only called by _persisted, which has one
        try:
            with open(self.state_path, encoding="utf-8") as handle:
                state = json.load(handle)
        except (OSError, ValueError):
            state = {}
        if not isinstance(state, dict) or state.get("clock") != self._clock_kind():
            state = {}
        if state.get("clock") == "virtual" and isinstance(state.get("now"), (int, float)):
            self.clock.resume(state["now"])
        with self._lock:
            self._seq = max(self._seq, int(state.get("seq", 0) or 0))
        self.cache.load(state.get("entries") or [], self.clock.now())

    def _save_state(self) -> None:
        assert self.state_path is not None  # only called by _persisted, which has one
        now = self.clock.now()
        state = {"version": 1, "clock": self._clock_kind(), "now": now, "seq": self._seq,
                 "entries": self.cache.to_list(now)}
        tmp = f"{self.state_path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(state, handle)
        os.replace(tmp, self.state_path)

    # -- the one handler ------------------------------------------------------------------

    def _next_id(self, prefix: str, salt: bytes) -> str:
        with self._lock:
            self._seq += 1
            seq = self._seq
        return prefix + hashlib.sha256(b"%d|" % seq + salt).hexdigest()[:24]

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: Optional[bytes] = b"",
               query: str = "") -> HttpResponse:
        """Serve one HTTP request. ``headers`` keys must be lower-case; ``body`` is None when the server stopped
        reading it past :data:`gitmem.serving.MAX_REQUEST_BYTES` (:func:`gitmem.serving.read_body`)."""
        if self.state_path is not None:  # ids go on from the saved counter, not from 0 in each process
            with self._persisted():
                pass
        request_id = self._next_id("req_", body or b"")
        try:
            status, payload, stream = self._route(method.upper(), path.rstrip("/") or "/", headers, body, query)
        except ApiError as error:
            status, stream = error.status, None
            payload = _error_payload(error, request_id)
        response_headers = [("request-id", request_id), (BACKEND_HEADER, "emulator")]
        if stream is not None:
            response_headers.append(("content-type", "text/event-stream; charset=utf-8"))
            response_headers.append(("cache-control", "no-cache"))
            fail_at = None if stream is True else stream
            return HttpResponse(status, response_headers, chunks=self._stream(payload, fail_at, request_id))
        response_headers.append(("content-type", "application/json"))
        return HttpResponse(status, response_headers, json.dumps(payload, ensure_ascii=False).encode("utf-8"))

    def _route(self, method: str, path: str, headers: Mapping[str, str], body: Optional[bytes], query: str):
        if body is None or len(body) > MAX_REQUEST_BYTES:
            raise ApiError(413, TOO_LARGE)
        if path.startswith("/_emulator/"):
            return self._admin(method, path[len("/_emulator/"):], body)
        model_path = path.startswith(_MODELS + "/")
        expected = "GET" if model_path else _ROUTES.get(path)
        if expected is None:
            raise ApiError(404, "Not Found")
        if method != expected:
            raise ApiError(405, f"Method Not Allowed: use {expected} {path}")
        workspace = workspace_of(headers)
        if workspace is None:
            raise ApiError(401, "x-api-key header is required")
        if not headers.get("anthropic-version"):
            raise invalid("anthropic-version: header is required")
        if model_path:
            return 200, self._model(path[len(_MODELS) + 1:]), None
        if path == _MODELS:
            return 200, self._models(parse_qs(query)), None
        data = parse_json(body)
        if path == _COUNT:
            return 200, {"input_tokens": parse_request(data, self.table, for_count=True).input_tokens}, None
        with self._lock:
            failure = self._failures.pop(0) if self._failures else None
        streamed = bool(data.get("stream"))
        if failure is not None and not (failure[1] and streamed):
            raise ApiError(failure[0], _FAILURE_MESSAGES.get(failure[0], "Injected failure"))
        message = self._message(data, body, workspace)
        if not streamed:
            return 200, message, None
        # A mid-stream failure: the stream starts (200), then ends with an ``event: error``.
        return 200, message, (ApiError(failure[0], _FAILURE_MESSAGES[failure[0]]) if failure else True)

    # -- POST /v1/messages ----------------------------------------------------------------

    def _message(self, data: Mapping[str, Any], raw: bytes, workspace: str) -> dict:
        parsed = parse_request(data, self.table, workspace=workspace)
        arrived = self.cache.arrive()  # before any wait for a lock: what is cached when the request comes in
        with self._persisted():
            outcome = self.cache.apply(
                parsed.keys,
                [block.tokens for block in parsed.blocks],
                parsed.breakpoints,
                cacheable_minimum(parsed.model),
                self.clock.now(),
                lookback_positions([block.block.get("type") for block in parsed.blocks]),
                arrived,
            )
            message_id = self._next_id("msg_", raw)
        content = respond(data)
        stop_reason, stop_sequence = "end_turn", None
        if content[0]["type"] == "tool_use":  # the scripted agent calls a tool (see reply.py)
            stop_reason, output_tokens = "tool_use", sum(tool_use_tokens(b) for b in content)
        else:
            text = content[0]["text"]
            cuts = [(text.find(s), s) for s in data.get("stop_sequences") or [] if s and s in text]
            if cuts:
                at, stop_sequence = min(cuts)
                text, stop_reason = text[:at], "stop_sequence"
            limited = truncate_to_tokens(text, data["max_tokens"], parsed.model.tokenizer)
            if limited != text:
                stop_reason, stop_sequence = "max_tokens", None
            # ``max_tokens: 0`` (pre-warming): the prompt is processed and cached, nothing is generated.
            content = [{"type": "text", "text": limited}] if data["max_tokens"] > 0 else []
            output_tokens = count_tokens(limited, parsed.model.tokenizer)
        usage = Usage(
            input_tokens=outcome.input_tokens,
            output_tokens=output_tokens,
            cache_creation_input_tokens=outcome.cache_creation_input_tokens,
            cache_read_input_tokens=outcome.cache_read_input_tokens,
            ephemeral_5m_input_tokens=outcome.ephemeral_5m_input_tokens,
            ephemeral_1h_input_tokens=outcome.ephemeral_1h_input_tokens,
        )
        return {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": parsed.model.id,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": stop_sequence,
            "usage": {**usage.to_api(), "service_tier": "standard"},
        }

    def _stream(self, message: Mapping[str, Any], fail: Optional[ApiError], request_id: str) -> Iterator[bytes]:
        """The reply's SSE events, one chunk each, produced as the client reads them.

        ``stream_delay`` seconds pass between events (0 by default). An injected mid-stream
        failure sends half the events, then the streaming docs' ``event: error`` (e.g.
        ``overloaded_error``, what "would normally correspond to an HTTP 529"), and ends.
        """
        events = sse_events(message)
        cut = len(events) // 2 if fail is not None else len(events)
        for number, (name, data) in enumerate(events[:cut]):
            if number and self.stream_delay:
                time.sleep(self.stream_delay)
            yield _encode(name, data)
        if fail is not None:
            yield _encode("error", _error_payload(fail, request_id))

    # -- GET /v1/models -------------------------------------------------------------------

    def _model(self, model_id: str) -> dict:
        row = self.table.find(model_id)
        if row is None or row.retired:
            raise ApiError(404, f"model: {model_id}")
        return _model_info(row)

    def _models(self, params: Mapping[str, List[str]]) -> dict:
        # Newest release first, as the API lists them.
        rows = sorted((row for row in self.table.models if not row.retired),
                      key=_released_at, reverse=True)
        try:
            limit = int(params.get("limit", ["20"])[0])
        except ValueError:
            raise invalid("limit: Input should be a valid integer") from None
        if not 1 <= limit <= 1000:
            raise invalid("limit: Input should be between 1 and 1000")
        ids = [row.id for row in rows]
        after, before = params.get("after_id", [None])[0], params.get("before_id", [None])[0]
        for name, value in (("after_id", after), ("before_id", before)):
            if value is not None and value not in ids:
                raise invalid(f"{name}: no model {value!r}")
        if before is not None:
            end = ids.index(before)
            page = rows[max(0, end - limit):end]
            has_more = end - limit > 0
        else:
            start = ids.index(after) + 1 if after is not None else 0
            page = rows[start:start + limit]
            has_more = start + limit < len(rows)
        return {
            "data": [_model_info(row) for row in page],
            "has_more": has_more,
            "first_id": page[0].id if page else None,
            "last_id": page[-1].id if page else None,
        }

    # -- admin ----------------------------------------------------------------------------

    def state(self) -> dict:
        """The clock and the live cache entries: what a break did to the cache."""
        now = self.clock.now()
        return {
            "clock": "virtual" if getattr(self.clock, "virtual", False) else "real",
            "now": now,
            "entries": [entry.to_dict(now) for entry in self.cache.entries(now)],
        }

    def _admin(self, method: str, action: str, body: bytes):
        if action == "state" and method == "GET":
            with self._persisted():
                pass
            return 200, self.state(), None
        if method != "POST" or action not in ("clock", "reset", "fail"):
            raise ApiError(404, f"no emulator admin endpoint {method} /_emulator/{action}")
        data = parse_json(body or b"{}")
        if action == "reset":
            with self._persisted():
                self.cache.clear()
        elif action == "clock":
            if not getattr(self.clock, "virtual", False):
                raise invalid("the emulator runs on the real clock; start it with --virtual-clock to move time")
            seconds = data.get("advance")
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
                raise invalid("advance: expected a non-negative, finite number of seconds")
            try:
                self.clock.advance(seconds)
            except ValueError as e:  # backwards, NaN or endless: the clock's own rule
                raise invalid(f"advance: {e}") from None
        else:
            status, count = data.get("status", 529), data.get("count", 1)
            mid_stream = data.get("mid_stream", False)
            if status not in _FAILURE_MESSAGES or not isinstance(count, int) or not 0 <= count <= MAX_FAILURES:
                raise invalid(f"fail: status must be one of {sorted(_FAILURE_MESSAGES)} and count a whole number "
                              f"up to {MAX_FAILURES}")
            if not isinstance(mid_stream, bool):
                raise invalid("fail: mid_stream must be true or false")
            with self._lock:
                self._failures = [(status, mid_stream)] * count
        return 200, self.state(), None

    # -- the two ways in ------------------------------------------------------------------

    def transport(self):
        """An ``httpx2`` transport calling :meth:`handle` in-process (no sockets)."""
        from .transport import EmulatorTransport

        return EmulatorTransport(self)

    def asgi(self):
        """An ASGI application serving :meth:`handle`, for uvicorn or any ASGI server."""
        return _AsgiApp(self)


def workspace_of(headers: Mapping[str, str]) -> Optional[str]:
    """Whose prompt cache a request uses: a hash of the key it carries, or None when it carries none.

    The caching docs: "Caches are isolated between organizations", and on the Claude API (since 5 February
    2026) between workspaces within one. The emulator has no organizations and no workspaces: the key (``x-api-key``, else the
    ``Authorization: Bearer`` token) stands in for the workspace, so two keys never read each other's
    entries while one key's requests hit. One key in either header is one workspace: the SDK 2.x sends
    ``api_key`` as a bearer token, gitmem's direct calls send ``x-api-key``, and both read one cache. Only
    the hash goes on (into the cache keys and the state file), never the key.
    """
    key = headers.get("x-api-key") or ""
    if not key:
        authorization = headers.get("authorization") or ""
        key = authorization[7:] if authorization[:7].lower() == "bearer " else authorization
    if not key:
        return None
    return hashlib.sha256(b"gitmem-emulator-workspace\x00" + key.encode("utf-8", "surrogatepass")).hexdigest()


def cacheable_minimum(model: ModelPrice) -> int:
    """The prefix length, in the emulator's estimated tokens, from which the emulator caches.

    The caching docs: "Shorter prompts cannot be cached, even if marked with cache_control". The
    emulator counts with an estimate that overcounts a text by up to ``ESTIMATE_ERROR["over"]``
    percent (bench/tokens.py), so a prefix it estimates at exactly the minimum may be shorter for
    the API. It takes the conservative side: it caches only from the minimum plus that margin
    (Haiku 4.5: 4,301 estimated tokens for 4,096), never a prefix the API would refuse.
    """
    return -(-model.min_cacheable_tokens * (100 + int(ESTIMATE_ERROR["over"])) // 100)


def _released_at(row: ModelPrice) -> datetime:
    """When ``row``'s model was released, as ``GET /v1/models`` gives it in ``created_at``: the date its
    page gives (``row.released``), else the date of a snapshot id (``...-20251001``), else the Unix epoch,
    the value the SDK's ``ModelInfo.created_at`` documents for a release date that is unknown ("May be
    set to an epoch value if the release date is unknown"). An undated id is no reason for the epoch:
    ``claude-opus-4-6`` was released on 2026-02-05."""
    snapshot = row.id.rsplit("-", 1)[-1]
    if row.released:
        day = datetime.strptime(row.released, "%Y-%m-%d")
    elif snapshot.isdigit() and len(snapshot) == 8:
        day = datetime.strptime(snapshot, "%Y%m%d")
    else:
        day = datetime(1970, 1, 1)
    return day.replace(tzinfo=timezone.utc)


def _model_info(row: ModelPrice) -> dict:
    created = _released_at(row)
    return {
        "type": "model",
        "id": row.id,
        "display_name": row.display_name,
        "created_at": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "lifecycle": row.lifecycle,
        "max_input_tokens": row.context_window,
        "max_tokens": row.max_output_tokens,
    }


def _error_payload(error: ApiError, request_id: str) -> dict:
    return {"type": "error", "error": {"type": error.error_type, "message": error.message}, "request_id": request_id}


_DELTA_WORDS = 4  # words per text_delta: small deltas, like a model's stream
#: The ``usage`` fields a ``message_delta`` may carry: those of the SDK's ``MessageDeltaUsage`` (anthropic 2.17.0,
#: ``anthropic/types/message_delta_usage.py``), the cumulative counts. The message's nested ``cache_creation``
#: split and its ``service_tier`` are not among them: they come once, in ``message_start``.
DELTA_USAGE_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens",
                      "output_tokens_details", "server_tool_use")


def sse_events(message: Mapping[str, Any]) -> List[Tuple[str, Any]]:
    """A complete reply as the API's server-sent event sequence, one ``(event, data)`` per event.

    The order the streaming docs give: ``message_start`` (usage with ``output_tokens`` 0 so far),
    per content block ``content_block_start``, ``content_block_delta``..., ``content_block_stop``,
    then ``message_delta`` (stop reason and the final counts, :data:`DELTA_USAGE_FIELDS`) and
    ``message_stop``; ``ping`` events may come anywhere.
    """
    usage = dict(message["usage"])
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**usage, "output_tokens": 0}}
    events: List[Tuple[str, Any]] = [("message_start", {"type": "message_start", "message": start}),
                                     ("ping", {"type": "ping"})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":  # input arrives as input_json_delta, as the API streams it
            opened = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"], ensure_ascii=False)}]
        else:
            opened = {"type": "text", "text": ""}
            words = re.findall(r"\S+\s*|\s+", block["text"])
            deltas = [{"type": "text_delta", "text": "".join(words[at:at + _DELTA_WORDS])}
                      for at in range(0, len(words), _DELTA_WORDS)]
        events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                               "content_block": opened}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
                   for d in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events += [
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"]},
                           "usage": {k: v for k, v in usage.items() if k in DELTA_USAGE_FIELDS}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


def _encode(name: str, data: Any) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode("utf-8")


class _AsgiApp:
    def __init__(self, emulator: Emulator):
        self.emulator = emulator

    async def __call__(self, scope: Dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = await read_body(scope, receive)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        response = self.emulator.handle(scope["method"], scope["path"], headers, body,
                                        scope.get("query_string", b"").decode("latin-1"))
        await send({"type": "http.response.start", "status": response.status,
                    "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers]})
        if response.chunks is None:
            await send({"type": "http.response.body", "body": response.body})
            return
        # One event per write; a stream_delay sleeps in a worker thread, not on the event loop.
        stream = response.iter_chunks()
        while True:
            chunk = await asyncio.to_thread(next, stream, None) if self.emulator.stream_delay else next(stream, None)
            if chunk is None:
                break
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
