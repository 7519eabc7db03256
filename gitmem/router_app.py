"""The memory router's server: an ASGI app on loopback between an agent and the Messages API.

``gitmem router serve`` runs :class:`Router` under uvicorn. A client changes only its base URL
(``ANTHROPIC_BASE_URL=http://127.0.0.1:PORT``). For each ``POST /v1/messages`` (and
``count_tokens``) the router attaches the team memory of the repository it serves (:mod:`gitmem.router`
says where and with which breakpoints), forwards the request to the upstream, streams the reply
back as it arrives, records the request in ``.git/gitmem/requests.jsonl`` (:func:`gitmem.bill.record_request`)
and, under the ``keepalive`` and ``auto`` policies, sends keep-alive pings while the client is idle.
Every other path goes through untouched. The client's key goes upstream in its own header and is
never logged or written anywhere; the router keeps the last request's headers in memory only, to
send that line's pings.

Upstream: ``--upstream URL`` if given, else the real API when ``ANTHROPIC_API_KEY`` is set, else the
embedded emulator (:class:`gitmem.emulator.Emulator`, sharing the router's clock). Each response
carries ``gitmem-upstream: <name>``.

A *line* is one cached prefix the router keeps warm: the ``gitmem-session`` header if the client
sends one, else one per repository, branch and model, so the gaps between an agent's sessions in
one repository are one line's idle periods; per API key, as the cache is (the API isolates
workspaces). Pings are per cache entry, not per line: lines whose pings would refresh the same
entries (same key, model and prefix up to the last marker, see :func:`gitmem.router.warm_key`: a
team's agents with one guide and memory) share one ping, and any of their requests counts as
activity for all of them. Admin (not part of the API): ``GET /_router/state``,
``POST /_router/clock {"advance": SECONDS}`` (virtual clock only: moves time, sending every ping
that falls due on the way, and returns them).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import (TYPE_CHECKING, Any, AsyncGenerator, AsyncIterator, Awaitable, Dict, List, Mapping, Optional,
                    Sequence, Tuple, TypeVar)

from .errors import GitmemError
from .serving import LONE_SURROGATE, MAX_REQUEST_BYTES, TOO_LARGE, lone_surrogate, read_body, scope_refusal
from .policy import POLICIES, KeepAlive, Plan, PrefixCosts, choose_plan, hour_ping_after
from .pricing import DEFAULT_TABLE, PriceTable
from .usage import Usage, cost
from .router import (CLIENT_REFUSED, Controls, RouterBlock, SseUsage, attach, controls, forward_headers,
                     response_headers, session_of, warm_key)

if TYPE_CHECKING:
    import socket

    import pygit2

    from .store import Store

__all__ = ["Router", "RunningRouter", "serve_in_thread", "resolve_upstream", "UPSTREAM_HEADER", "ANTHROPIC_URL",
           "DEFAULT_PORT", "default_line", "recorded_gaps"]

UPSTREAM_HEADER = "gitmem-upstream"
ANTHROPIC_URL = "https://api.anthropic.com"
DEFAULT_PORT = 8766
_MESSAGES = "/v1/messages"
_COUNT = "/v1/messages/count_tokens"
T = TypeVar("T")
#: A gap this long or longer between two requests of a line is a break (in the bill).
BREAK_SECONDS = 60.0
#: Gaps of a line kept for ``auto`` (the newest).
HISTORY_LIMIT = 2000


class Unreachable(Exception):
    """The upstream did not answer (refused, reset, timed out before a response)."""


class ClientGone(Exception):
    """The client hung up before the whole reply was relayed."""


#: The ``gitmem-memory`` header of a request the memory would take past the API's size limit.
OVER_LIMIT = "with the memory the request would pass the API's 32 MiB limit: sent as it came"
#: What the request log says of a request whose client hung up before its reply's end.
GONE = "the client disconnected before the reply's end: the upstream request was closed"


@dataclass
class UpstreamResponse:
    status: int
    headers: List[Tuple[str, str]]
    chunks: AsyncGenerator[bytes, None]
    close: Any = None


class EmulatorUpstream:
    """The embedded emulator: its one handler, called off the event loop."""

    name = "emulator"

    def __init__(self, emulator: Any):
        self.emulator = emulator

    async def send(self, method: str, path: str, query: str, headers: Sequence[Tuple[str, str]],
                   body: bytes) -> UpstreamResponse:
        lower = {k.lower(): v for k, v in headers}
        response = await asyncio.to_thread(self.emulator.handle, method, path, lower, body, query)
        delay = bool(self.emulator.stream_delay)

        async def chunks() -> AsyncGenerator[bytes, None]:
            it = response.iter_chunks()
            while True:
                chunk = await asyncio.to_thread(next, it, None) if delay else next(it, None)
                if chunk is None:
                    return
                yield chunk

        return UpstreamResponse(response.status, list(response.headers), chunks())

    async def aclose(self) -> None:
        return None


class HttpUpstream:
    """A Messages API over HTTP: the real API, or any ``--upstream`` URL (e.g. ``gitmem emulator serve``)."""

    def __init__(self, base_url: str, name: Optional[str] = None):
        import httpx2

        self.base_url = base_url.rstrip("/")
        self.name = name or self.base_url
        self.client = httpx2.AsyncClient(timeout=httpx2.Timeout(600.0, connect=10.0))

    async def send(self, method: str, path: str, query: str, headers: Sequence[Tuple[str, str]],
                   body: bytes) -> UpstreamResponse:
        import httpx2

        url = self.base_url + path + (f"?{query}" if query else "")
        request = self.client.build_request(method, url, headers=list(headers), content=body)
        try:
            response = await self.client.send(request, stream=True)
        except httpx2.HTTPError as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from None

        async def chunks() -> AsyncGenerator[bytes, None]:
            try:
                async for chunk in response.aiter_raw():
                    yield chunk
            finally:
                await response.aclose()

        return UpstreamResponse(response.status_code, list(response.headers.multi_items()), chunks(),
                                close=response.aclose)

    async def aclose(self) -> None:
        await self.client.aclose()


def resolve_upstream(upstream: Optional[str], env: Mapping[str, str]) -> Tuple[str, Optional[str]]:
    """(name, URL) of the upstream: ``--upstream``, else the real API with ``ANTHROPIC_API_KEY``, else
    the embedded emulator (URL None)."""
    if upstream:
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(upstream)
            parts.port  # noqa: B018  (raises on a port out of range or not a number)
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise GitmemError(f"--upstream must be an http(s) URL with a host (and a port 1-65535), not {upstream!r}")
        return upstream.rstrip("/"), upstream
    if env.get("ANTHROPIC_API_KEY"):
        return "anthropic-api", ANTHROPIC_URL
    return "emulator", None


@dataclass
class Line:
    """One cached prefix the router keeps: what to ping with and when."""

    key: str
    policy: str
    model: str
    repo: Optional[str]
    branch: Optional[str]
    session: str
    body: Dict[str, Any]
    headers: List[Tuple[str, str]] = field(repr=False, default_factory=list)
    last_request_at: float = 0.0
    last_activity: float = 0.0
    pings: int = 0
    entry_ttl: Optional[str] = None
    prefix_tokens: int = 0
    ping_input: int = 0
    plan: Optional[Plan] = None
    memory_commit: Optional[str] = None
    stopped: bool = False
    #: The caller's workspace (a hash of its key, in memory only): one line per key, as the cache is.
    workspace: Optional[str] = field(repr=False, default=None)
    #: What this line's ping keeps warm (:func:`gitmem.router.warm_key`); lines that share it share pings.
    warm: str = ""

    def to_dict(self, now: float, keepalive: KeepAlive) -> dict:
        due = self.next_ping(keepalive)
        return {"line": self.key, "policy": self.policy, "model": self.model, "session": self.session,
                "cache_entry": self.warm[:12],
                "idle_seconds": now - self.last_request_at, "pings_this_break": self.pings,
                "entry_ttl": self.entry_ttl, "prefix_tokens": self.prefix_tokens,
                "plan": self.plan.to_dict() if self.plan else None,
                "next_ping_in": None if due is None else max(0.0, due - now)}

    def next_ping(self, keepalive: KeepAlive) -> Optional[float]:
        """When this line's next ping falls due, or None: no ping (policy, TTL or bound)."""
        if self.stopped or self.entry_ttl not in ("5m", "1h") or self.prefix_tokens <= 0:
            return None
        if self.policy == "keepalive" and self.entry_ttl == "5m":
            due = self.last_activity + keepalive.ping_after
            return due if due - self.last_request_at <= keepalive.idle_limit else None
        if self.policy == "auto" and self.plan is not None and self.pings < self.plan.pings:
            # the entry keeps the TTL it was written with: ping at that TTL's cadence
            every = keepalive.ping_after if self.entry_ttl == "5m" else hour_ping_after(keepalive.ping_after)
            return self.last_activity + every
        return None


@dataclass
class _Attachment:
    blocks: List[RouterBlock]
    context: Any
    #: Why the guide asked for (``guide``) was left out: said in the ``gitmem-memory`` header.
    guide_problem: Optional[str] = None


class Router:
    """The router's state and its ASGI entry point (``await router(scope, receive, send)``).

    ``repo``: the repository served when a request names none (default: the working directory).
    ``clock``: a :class:`gitmem.emulator.VirtualClock` to run TTLs and pings in virtual time, else
    wall time. ``guide``: also attach the repository guide (``gitmem guide set``), as ``gitmem
    context`` does; off by default, since agents read their own guide files. A guide it cannot read is
    left out, never the memory, and the ``gitmem-memory`` header says why.
    """

    def __init__(self, *, policy: str = "5m", repo: Optional[str] = None, upstream: Optional[str] = None,
                 clock: Any = None, guide: bool = False, keepalive: KeepAlive = KeepAlive(),
                 table: PriceTable = DEFAULT_TABLE, env: Optional[Mapping[str, str]] = None,
                 emulator: Any = None, tick_seconds: float = 1.0):
        from .emulator import Emulator, WallClock

        if policy not in POLICIES:
            raise GitmemError(f"unknown policy {policy!r} (valid: {', '.join(POLICIES)})")
        self.policy = policy
        self.repo = os.path.abspath(repo) if repo else None
        self.clock = clock or WallClock()
        self.virtual = bool(getattr(self.clock, "virtual", False))
        self.guide = guide
        self.keepalive = keepalive
        self.table = table
        self.tick_seconds = tick_seconds
        self.run_id = uuid.uuid4().hex[:12]
        name, url = resolve_upstream(upstream, os.environ if env is None else env)
        self.upstream_name = name
        self.emulator = None
        if url is None:
            self.emulator = emulator or Emulator(clock=self.clock)
            self.upstream: Any = EmulatorUpstream(self.emulator)
        else:
            self.upstream = HttpUpstream(url, name)
        self.lines: Dict[Tuple[str, Optional[str]], Line] = {}  # by (line, workspace)
        self._attachments: Dict[Tuple, _Attachment] = {}
        self._history: Dict[str, Dict[str, List[float]]] = {}
        self._ticker: Optional[asyncio.Task] = None
        self._stores: Dict[str, Optional[Store]] = {}
        self._repos: Dict[str, pygit2.Repository] = {}
        self.pings_sent = 0

    # -- ASGI ---------------------------------------------------------------------------------

    async def __call__(self, scope: Dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    if not self.virtual:
                        self._ticker = asyncio.create_task(self._tick_forever())
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    if self._ticker is not None:
                        self._ticker.cancel()
                    await self.upstream.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope.get("headers", [])]
        problem = scope_refusal(scope)
        if problem:  # as the web UI: a page rebinding its name to 127.0.0.1 must not read the team's memory
            await _send_json(send, 403, _error(403, "permission_error", problem))
            return
        raw = await read_body(scope, receive)
        if raw is None:  # the API's limit, kept here: a client cannot make the router hold (or forward) more
            await _send_json(send, 413, _error(413, "request_too_large", TOO_LARGE), [(UPSTREAM_HEADER, self.upstream_name)])
            return
        path = scope["path"]
        if path.startswith("/_router/"):
            status, payload = await self._admin(scope["method"], path[len("/_router/"):], raw)
            await _send_json(send, status, payload, [(UPSTREAM_HEADER, self.upstream_name)])
            return
        await self._proxy(scope["method"], path, scope.get("query_string", b"").decode("latin-1"), headers, raw, send,
                          receive)

    # -- the proxy ----------------------------------------------------------------------------

    async def _proxy(self, method: str, path: str, query: str, headers: List[Tuple[str, str]], raw: bytes,
                     send: Any, receive: Any) -> None:
        lower = {k.lower(): v for k, v in headers}
        extra = [(UPSTREAM_HEADER, self.upstream_name)]
        try:
            ctl = controls(lower)
        except ValueError as exc:  # a gitmem-memory typo: neither attach nor drop the memory on a guess
            await _send_json(send, 400, _error(400, "invalid_request_error", str(exc)), extra)
            return
        started = time.perf_counter()
        is_message = method == "POST" and path.rstrip("/") in (_MESSAGES, _COUNT)
        data: Optional[Dict[str, Any]] = None
        prepared: Dict[str, Any] = {}
        if is_message:
            try:
                parsed = json.loads(raw.decode("utf-8") or "null")
            except (UnicodeDecodeError, ValueError):
                parsed = None  # the upstream answers with the API's own error
            if isinstance(parsed, dict) and not isinstance(parsed.get("system", ""), (str, list)):
                parsed = None  # a system that is neither text nor blocks: as sent, for the API's 400
            if lone_surrogate(parsed):  # no UTF-8 can carry it on: the client's error, said as the API says one
                await _send_json(send, 400, _error(400, "invalid_request_error", LONE_SURROGATE), extra)
                return
            if isinstance(parsed, dict):
                data = parsed
                policy = ctl.policy or self.policy
                if policy not in POLICIES:
                    await _send_json(send, 400, _error(400, "invalid_request_error",
                                                       f"gitmem-policy: unknown policy {policy!r} "
                                                       f"(valid: {', '.join(POLICIES)})"), extra)
                    return
                prepared = self._prepare(data, ctl, policy, lower, count=path.rstrip("/") == _COUNT)
                forwarded = json.dumps(prepared["body"], ensure_ascii=False).encode("utf-8")
                if len(forwarded) > MAX_REQUEST_BYTES:  # the API would refuse what it takes as the client sent it
                    data = json.loads(raw)  # ``_prepare`` attached to the parsed body in place
                    prepared = self._prepare(data, replace(ctl, memory=False), policy, lower,
                                             count=path.rstrip("/") == _COUNT)
                    prepared["memory_header"] = f"none: {OVER_LIMIT}"
                else:
                    raw = forwarded
                prepared["headers"] = forward_headers(headers)  # in memory only, for this line's pings
                extra += [("gitmem-memory", _header_value(prepared["memory_header"])), ("gitmem-policy", policy)]
        hangup = _Hangup(receive)
        try:
            await self._forward(method, path, query, headers, raw, send, hangup, data, prepared, extra, started)
        finally:
            hangup.close()

    async def _forward(self, method: str, path: str, query: str, headers: List[Tuple[str, str]], raw: bytes, send: Any,
                       hangup: _Hangup, data: Optional[Dict[str, Any]], prepared: Dict[str, Any],
                       extra: List[Tuple[str, str]], started: float) -> None:
        """Send the request upstream and relay its reply, recording a message request's usage."""
        try:
            response = await hangup.first(self.upstream.send(method, path, query, forward_headers(headers), raw))
        except (Unreachable, ClientGone) as exc:
            gone = isinstance(exc, ClientGone)
            message = GONE if gone else f"gitmem router: the upstream {self.upstream_name} is unreachable ({exc})"
            if data is not None and path.rstrip("/") == _MESSAGES:
                self._record(prepared, data, status=499 if gone else 502, usage=None, model=data.get("model"),
                             request_id=None, stream=bool(data.get("stream")), error=message,
                             latency=time.perf_counter() - started)
            if not gone:
                await _send_json(send, 502, _error(502, "api_error", message), extra)
            return
        out = response_headers(response.headers) + extra
        await send({"type": "http.response.start", "status": response.status,
                    "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in out]})
        content_type = next((v for k, v in response.headers if k.lower() == "content-type"), "")
        streamed = "event-stream" in content_type
        sse = SseUsage() if streamed else None
        body = b""
        gone = False
        try:
            async for chunk in _relay(response, hangup):
                if sse is not None:
                    sse.feed(chunk)
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                else:
                    body += chunk
        except ClientGone:
            gone = True
        except Exception as exc:  # the upstream dropped the stream: end ours with the API's error event
            if sse is None:
                raise
            broke = _error(502, "api_error", f"gitmem router: the upstream stream broke ({type(exc).__name__})")
            await send({"type": "http.response.body", "more_body": True,
                        "body": f"event: error\ndata: {json.dumps(broke)}\n\n".encode("utf-8")})
        if data is not None and path.rstrip("/") == _MESSAGES:
            # Recorded before the response ends, so a client that has its reply finds it in the log.
            self._record_reply(prepared, data, response, body, sse, streamed, started, gone)
        if not gone:
            await send({"type": "http.response.body", "body": body, "more_body": False})

    def _record_reply(self, prepared: Mapping[str, Any], data: Mapping[str, Any], response: UpstreamResponse,
                      body: bytes, sse: Optional[SseUsage], streamed: bool, started: float, gone: bool) -> None:
        request_id = next((v for k, v in response.headers if k.lower() == "request-id"), None)
        usage: Any = None
        model: Optional[str] = data.get("model")
        error: Optional[str] = None
        if gone:  # the output generated before the upstream saw its connection close is in no event
            error = GONE + " (usage: what had arrived)"
        if sse is not None:
            usage, model = sse.usage or None, sse.model or model
            error = sse.error.get("message") if sse.error else error
        else:
            try:
                reply = json.loads(body)
            except ValueError:
                reply = {}
            if response.status == 200 and isinstance(reply, Mapping):
                usage, model = reply.get("usage"), reply.get("model") or model
            elif isinstance(reply, Mapping) and isinstance(reply.get("error"), Mapping):
                error = reply["error"].get("message")
        self._record(prepared, data, status=response.status, usage=usage, model=model, request_id=request_id,
                     stream=streamed, error=error, latency=time.perf_counter() - started)

    # -- memory -------------------------------------------------------------------------------

    def _store(self, ctl: Controls) -> Store:
        """The store for this request. The repository handle is kept per path (opening one costs
        about a millisecond); the branch is read from HEAD on every request, so a checkout is seen."""
        from .repo import current_branch, open_repository
        from .store import Store

        path = os.path.abspath(ctl.repo or self.repo or os.getcwd())
        repo = self._repos.get(path)
        if repo is None:
            repo = self._repos[path] = open_repository(path)
        if ctl.branch:  # a misspelt gitmem-branch header must not attach main's memory (as --branch)
            from .branches import require_known

            return Store(repo, require_known(repo, ctl.branch))
        return Store(repo, current_branch(repo)[0])

    def _attachment(self, store: Store, model: str) -> _Attachment:
        from .context import PREAMBLE, assemble
        from .context_inputs import anchor_of, gather, guide_stamp

        key = (store.repo.path, store.branch, store.tip(), anchor_of(store), guide_stamp(store) if self.guide else None)
        hit = self._attachments.get(key)
        if hit is not None:
            return hit
        # A guide it cannot read (deleted, not UTF-8) is left out, never the memory: an agent such as Claude
        # Code never shows the header saying why, and would work without the team's memory unawares.
        inputs = gather(store, with_guide=self.guide, guide_optional=True)
        try:
            ctx = assemble(inputs, ttl="5m", model=model, table=self.table)
        except GitmemError:  # a model the price table does not know: the text does not depend on it
            ctx = assemble(inputs, ttl="5m", table=self.table)
        names = [p.name for p in ctx.parts if p.name != "question"]
        blocks = []
        for name, block in zip(names, ctx.body["system"]):
            text = block["text"] if (self.guide or name != "guide") else PREAMBLE
            blocks.append(RouterBlock(name, text, "5m"))
        if not any(b.name != "guide" for b in blocks) and not inputs.guide_text:
            blocks = []  # no memory yet and no guide: nothing worth attaching
        if len(self._attachments) > 64:
            self._attachments.clear()
        made = self._attachments[key] = _Attachment(blocks, ctx, inputs.guide_problem)
        return made

    def _prepare(self, data: Dict[str, Any], ctl: Controls, policy: str, lower: Mapping[str, str],
                 count: bool) -> Dict[str, Any]:
        """The body to forward and what to record: memory attached and breakpoints placed."""
        from .emulator.app import workspace_of  # the API's cache isolation, as the emulator keys it

        model = str(data.get("model") or "")
        info: Dict[str, Any] = {"policy": policy, "session": session_of(lower, data), "store": None,
                                "memory_commit": None, "anchor_commit": None, "attached": None, "ttl": None,
                                "body": data, "memory_header": "off", "context": None, "client": ctl.client,
                                "client_request_id": ctl.client_request_id}
        try:
            store = self._store(ctl)
        except GitmemError as exc:
            store = None
            info["memory_header"] = "none: " + str(exc).splitlines()[0][:120]
        info["store"] = store
        line_key = ctl.line or (default_line(store, model) if store else f"-:{model}")
        info["line"] = line_key
        info["workspace"] = workspace_of(lower)
        if not ctl.memory or store is None:
            return info
        if policy == "auto":
            plan = self._plan(store, line_key, self.lines.get((line_key, info["workspace"])))
            info["plan"] = plan.to_dict()
            ttl = plan.ttl
        else:
            ttl = {"none": "none", "1h": "1h"}.get(policy, "5m")
        try:
            attachment = self._attachment(store, model)
        except GitmemError as exc:  # damaged memory: sent on without it, saying why
            info["memory_header"] = "none: " + str(exc).splitlines()[0][:120]
            return info
        attached = attach(data, attachment.blocks, "none" if count else ttl, copy_body=False)
        if attached.note in CLIENT_REFUSED:  # the API's 400 is the client's to see, as with memory off
            info.update(attached=attached.to_dict(), memory_header=f"none: {attached.note}")
            return info
        info.update(body=attached.body, attached=attached.to_dict(), ttl=ttl, context=attachment.context,
                    memory_commit=attachment.context.memory_commit, anchor_commit=attachment.context.anchor_commit)
        commit = attachment.context.memory_commit
        info["memory_header"] = "none: no memory on this branch" if not attachment.blocks else \
            f"attached {commit}" if commit else "attached the guide alone: no memory on this branch"
        if attachment.guide_problem:
            info["memory_header"] += f"; {attachment.guide_problem}: sent without it"
        return info

    def _plan(self, store: Store, line_key: str, line: Optional[Line]) -> Plan:
        """``auto``'s plan for one line, from that line's breaks only: the breaks of the other lines in the
        repository (parallel agents) are not this entry's idle periods, and counting them would leave the
        cold start as many times sooner as there are agents."""
        gaps = self._gaps(store, line_key)
        if line is None or line.prefix_tokens <= 0:
            return choose_plan(gaps[-HISTORY_LIMIT:], PrefixCosts.of(10_000, 0), self.keepalive.ping_after)
        model = line.model if self.table.find(line.model) else "claude-haiku-4-5"
        costs = PrefixCosts.of(line.prefix_tokens, line.ping_input, model, self.table)
        return choose_plan(gaps[-HISTORY_LIMIT:], costs, self.keepalive.ping_after)

    def _gaps(self, store: Store, line_key: str) -> List[float]:
        """The recorded gaps between this line's requests (wall-clock runs, and this run), in the log every
        worktree of the repository shares."""
        folder = store.common_dir
        if folder not in self._history:
            self._history[folder] = _read_gaps(os.path.join(folder, "gitmem", "requests.jsonl"), self.run_id)
        return self._history[folder].setdefault(line_key, [])

    # -- recording ----------------------------------------------------------------------------

    def _record(self, info: Mapping[str, Any], data: Mapping[str, Any], *, status: int, usage: Any,
                model: Optional[str], request_id: Optional[str], stream: bool, error: Optional[str],
                latency: float, kind: str = "request") -> Optional[dict]:
        from .bill import record_request
        from .context_inputs import note_sent

        now = self.clock.now()
        store = info.get("store")
        model = model if isinstance(model, str) else None  # the client's: the API refuses any other type
        line_key = info.get("line") or "-"
        line = self.lines.get((line_key, info.get("workspace")))
        last = max((other.last_request_at for other in self.lines.values() if other.key == line_key), default=None)
        gap = None if last is None or kind == "ping" else now - last  # the line's, whichever key sent it
        usage_obj = Usage.from_api(usage) if isinstance(usage, Mapping) else None
        price = None
        if usage_obj is not None and model:
            try:
                price = cost(usage_obj, model, self.table).to_dict()
            except GitmemError:
                price = None  # a model the price table does not know: usage recorded, cost left out
        entry = {"command": "router", "kind": kind, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "at": now, "clock": "virtual" if self.virtual else "wall", "run": self.run_id,
                 "session": info.get("session"), "line": line_key, "policy": info.get("policy"),
                 "ttl": info.get("ttl"), "upstream": self.upstream_name, "backend": self.upstream_name,
                 "status": status, "stream": stream, "model": model, "memory_commit": info.get("memory_commit"),
                 "anchor_commit": info.get("anchor_commit"), "memory": info.get("attached"),
                 "request_id": request_id, "usage": usage_obj.to_api() if usage_obj else None, "cost": price,
                 "gap_before": gap, "latency_ms": round(latency * 1000, 3)}
        if info.get("plan"):
            entry["plan"] = info["plan"]
        for key in ("client", "client_request_id"):  # `gitmem ask` or `messages` records it too: the bill links both
            if info.get(key):
                entry[key] = info[key]
        if error:
            from .redact import redact

            entry["error"] = redact(error)[0][:300]  # redacted whole: cut first, a token's head would pass the rules
        if store is not None:
            try:
                record_request(store, entry)
            except OSError:
                pass  # a read-only repository: serve anyway
        if status != 200 or usage_obj is None:
            return entry
        if kind == "ping":
            return entry
        # a client request: the line's state for pings and the gap record for ``auto``
        if store is not None and gap is not None and info.get("policy") is not None:
            self._gaps(store, line_key).append(gap)
        if store is not None and info.get("context") is not None and not data.get("max_tokens") == 0:
            try:
                note_sent(store, info["context"])
            except (GitmemError, OSError):
                pass
        prefix = usage_obj.cache_read_input_tokens + usage_obj.cache_creation_input_tokens
        if line is None:
            line = Line(key=line_key, policy=str(info.get("policy")), model=str(model), repo=None, branch=None,
                        session=str(info.get("session")), body={}, workspace=info.get("workspace"))
            self.lines[line_key, line.workspace] = line
        line.policy, line.model, line.session = str(info.get("policy")), str(model), str(info.get("session"))
        line.body = dict(info.get("body") or data)
        line.headers = list(info.get("headers") or [])
        line.last_request_at = now
        line.pings, line.stopped = 0, False
        line.warm = warm_key(line.body, line.workspace)
        for other in self._sharing(line):  # this request refreshed their entries too
            other.last_activity = now
        line.memory_commit = info.get("memory_commit")
        if usage_obj.ephemeral_1h_input_tokens:
            line.entry_ttl = "1h"
        elif usage_obj.ephemeral_5m_input_tokens or usage_obj.cache_creation_input_tokens:
            line.entry_ttl = "5m"
        elif usage_obj.cache_read_input_tokens:
            line.entry_ttl = line.entry_ttl or "5m"
        else:
            line.entry_ttl = None
        if prefix:
            line.prefix_tokens = prefix
        line.ping_input = usage_obj.input_tokens
        if line.policy == "auto" and store is not None:
            line.plan = self._plan(store, line_key, line)
        self._stores[line_key] = store
        return entry

    # -- pings --------------------------------------------------------------------------------

    def _sharing(self, line: Line) -> List[Line]:
        """``line`` and every line whose ping keeps the same entries warm."""
        return [other for other in self.lines.values() if other is line or (line.warm and other.warm == line.warm)]

    def _due(self) -> List[Tuple[float, Line]]:
        """The pings due, one per cache entry kept warm: of lines that share one, the line due first sends it."""
        first: Dict[str, Tuple[float, Line]] = {}
        for line in self.lines.values():
            due = line.next_ping(self.keepalive)
            group = line.warm or str(id(line))
            if due is not None and (group not in first or (due, line.key) < (first[group][0], first[group][1].key)):
                first[group] = (due, line)
        return sorted(first.values(), key=lambda item: (item[0], item[1].key))

    async def _ping(self, line: Line) -> dict:
        from .backend import keepalive_body

        body = keepalive_body(line.body)
        raw = json.dumps(body, ensure_ascii=False).encode("utf-8")
        started = time.perf_counter()
        headers = [(k, v) for k, v in line.headers]
        if not any(k.lower() == "content-type" for k, _ in headers):
            headers.append(("content-type", "application/json"))
        info = {"policy": line.policy, "session": line.session, "line": line.key, "store": self._stores.get(line.key),
                "memory_commit": line.memory_commit, "ttl": line.entry_ttl, "attached": None,
                "plan": line.plan.to_dict() if line.plan else None}
        status, usage, request_id, error, model = 502, None, None, None, line.model
        try:
            response = await self.upstream.send("POST", _MESSAGES, "", headers, raw)
            payload = b"".join([chunk async for chunk in response.chunks])
            status = response.status
            request_id = next((v for k, v in response.headers if k.lower() == "request-id"), None)
            reply = json.loads(payload or b"{}")
            if status == 200:
                usage, model = reply.get("usage"), reply.get("model") or model
            else:
                error = str((reply.get("error") or {}).get("message"))
        except (Unreachable, ValueError) as exc:
            error = f"ping failed: {exc}"
        for pinged in self._sharing(line):  # one ping, counted by every line it kept warm
            pinged.last_activity = self.clock.now()
            pinged.pings += 1
            if status != 200:
                pinged.stopped = True  # one failed ping ends this break's pinging
        self.pings_sent += 1
        entry = self._record(info, body, status=status, usage=usage, model=model, request_id=request_id,
                             stream=False, error=error, latency=time.perf_counter() - started, kind="ping")
        return entry or {}

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(self.tick_seconds)
            now = self.clock.now()
            for due, line in self._due():
                if due <= now:
                    try:
                        await self._ping(line)
                    except Exception:  # a ping must never take the router down
                        line.stopped = True

    async def advance(self, seconds: float) -> List[dict]:
        """Virtual clock: move time ``seconds`` forward, sending each ping as it falls due."""
        if not self.virtual:
            raise GitmemError("the router runs on the real clock: only a --virtual-clock router can be advanced")
        from .emulator.clock import check_advance

        try:
            check_advance(seconds)  # before the pings due on the way are sent, not when the clock moves
        except ValueError as e:
            raise GitmemError(f"advance: {e}") from None
        target = self.clock.now() + float(seconds)
        sent = []
        while True:
            due = [(at, line) for at, line in self._due() if at < target]
            if not due:
                break
            at, line = due[0]
            await self._move_to(at)
            sent.append(await self._ping(line))
        await self._move_to(target)
        return sent

    async def _move_to(self, at: float) -> None:
        delta = at - self.clock.now()
        if delta <= 0:
            return
        self.clock.advance(delta)  # type: ignore[union-attr]  # virtual only (see advance)
        if isinstance(self.upstream, HttpUpstream):  # an emulator over HTTP on its own virtual clock
            body = json.dumps({"advance": delta}).encode("utf-8")
            try:
                response = await self.upstream.send("POST", "/_emulator/clock", "", [("content-type", "application/json")],
                                                    body)
                async for _ in response.chunks:
                    pass
            except Unreachable:
                pass

    async def _admin(self, method: str, what: str, raw: bytes) -> Tuple[int, dict]:
        now = self.clock.now()
        if what == "state" and method == "GET":
            return 200, {"upstream": self.upstream_name, "policy": self.policy, "clock": "virtual" if self.virtual
                         else "wall", "now": now, "repo": self.repo, "pings_sent": self.pings_sent,
                         "lines": [line.to_dict(now, self.keepalive) for line in self.lines.values()]}
        if what == "clock" and method == "POST":
            try:
                seconds = float(json.loads(raw or b"{}").get("advance", 0))
            except (ValueError, TypeError, AttributeError):
                return 400, _error(400, "invalid_request_error", "advance: a number of seconds is required")
            try:
                pings = await self.advance(seconds)
            except GitmemError as exc:
                return 400, _error(400, "invalid_request_error", str(exc))
            return 200, {"now": self.clock.now(), "pings": pings}
        return 404, _error(404, "not_found_error", f"no router admin endpoint {method} /_router/{what}")


def default_line(store: Store, model: str) -> str:
    """The line of a request that names none (no ``gitmem-session``): one per repository, branch and model."""
    return f"{store.repo.path}@{store.branch}:{model}"


def recorded_gaps(store: Store, line: str) -> List[float]:
    """The gaps between the router's wall-clock requests of ``line`` recorded in this repository (for
    ``auto``): in the log every worktree shares, where :func:`gitmem.bill.record_request` writes."""
    from .bill import requests_path

    return _read_gaps(requests_path(store), "").get(line, [])


def _read_gaps(path: str, run_id: str) -> Dict[str, List[float]]:
    """Gaps between consecutive client requests of each line, by line, from a request log (wall-clock
    entries, and virtual-clock ones of the run ``run_id``)."""
    last: Dict[str, float] = {}
    gaps: Dict[str, List[float]] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:  # a line torn inside a character: skipped
            for text in handle:
                try:
                    entry = json.loads(text)
                except ValueError:
                    continue
                if not isinstance(entry, dict) or entry.get("command") != "router" or entry.get("kind") != "request":
                    continue
                if entry.get("clock") != "wall" and entry.get("run") != run_id:
                    continue
                key = f"{entry.get('clock')}|{entry.get('run') if entry.get('clock') != 'wall' else ''}|{entry.get('line')}"
                at = entry.get("at")
                if not isinstance(at, (int, float)):
                    continue
                if key in last and at >= last[key]:
                    gaps.setdefault(str(entry.get("line")), []).append(at - last[key])
                last[key] = at
    except OSError:
        return {}
    return {key: found[-HISTORY_LIMIT:] for key, found in gaps.items()}


class _Hangup:
    """The client's side of a request once its body is read: the next ASGI message is ``http.disconnect``.

    Waited for beside the upstream, so that a client that hangs up (Claude Code interrupted with Esc, an SDK
    that timed out and retries) ends the upstream request too: read on, the API would generate (and bill) the
    rest of a reply nobody reads."""

    def __init__(self, receive: Any):
        self._gone = asyncio.ensure_future(receive())

    async def first(self, pending: Awaitable[T]) -> T:
        """``pending``'s result, or :class:`ClientGone` (``pending`` cancelled) if the client hangs up first."""
        step = asyncio.ensure_future(pending)
        await asyncio.wait((step, self._gone), return_when=asyncio.FIRST_COMPLETED)
        if not step.done():
            step.cancel()
            await asyncio.wait((step,))
            raise ClientGone()
        return step.result()

    def close(self) -> None:
        self._gone.cancel()


async def _relay(response: UpstreamResponse, hangup: _Hangup) -> AsyncIterator[bytes]:
    """The upstream's reply, chunk by chunk, until the client hangs up: then its response is closed (the API
    stops generating) and :class:`ClientGone` raised."""
    try:
        while True:
            try:
                chunk = await hangup.first(response.chunks.__anext__())
            except StopAsyncIteration:
                return
            yield chunk
    finally:
        await response.chunks.aclose()
        if response.close is not None:  # a stream never started has no ``finally`` of its own to run
            await response.close()


def _header_value(text: str) -> str:
    """``text`` as a response header can carry it: ASCII on one line, anything else escaped. It may name a
    guide or a repository by a path in any script, and a value HTTP cannot encode would fail the reply."""
    return text.encode("unicode_escape").decode("ascii")


def _error(status: int, error_type: str, message: str) -> dict:
    """An error the router itself answers, in the API's shape, with a request id of its own as the API's have
    (a client logs and quotes it)."""
    return {"type": "error", "error": {"type": error_type, "message": message},
            "request_id": f"req_router_{uuid.uuid4().hex[:24]}"}


async def _send_json(send: Any, status: int, payload: Any, headers: Sequence[Tuple[str, str]] = ()) -> None:
    body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    request_id = payload.get("request_id") if isinstance(payload, dict) else None
    headers = [*headers, *([("request-id", request_id)] if request_id else [])]
    out = [(b"content-type", b"application/json")] + [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": body})


# --- running it --------------------------------------------------------------------------------


@dataclass
class RunningRouter:
    """A router served by uvicorn in a background thread (tests, the demo, the benchmark)."""

    router: Router
    url: str
    server: Any
    thread: Any
    sock: Any

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


def serve_in_thread(router: Router, port: int = 0) -> RunningRouter:
    """Serve ``router`` on 127.0.0.1 (``port`` 0: a free one) until :meth:`RunningRouter.stop`."""
    import socket
    import threading

    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    server = uvicorn.Server(uvicorn.Config(router, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    if not server.started:
        raise GitmemError("the router did not start")
    return RunningRouter(router, f"http://127.0.0.1:{sock.getsockname()[1]}", server, thread, sock)


def serve(router: Router, sock: "socket.socket", log_level: str = "warning") -> None:
    """Serve on a socket bound to loopback (:func:`gitmem.serving.listen`) until interrupted: the
    router has no authentication of its own."""
    from .serving import run

    run(router, sock, log_level=log_level, lifespan="on")
