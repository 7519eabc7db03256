"""Backend selection at the network edge: the real Anthropic API or the local emulator, one SDK path.

Every request goes through the official ``anthropic`` SDK (``client.messages.create(**body)``),
whichever backend serves it. The in-process emulator is reached through the SDK's ``http_client``
argument: anthropic 2.x uses the ``httpx2`` package, so ``http_client=httpx2.Client(transport=...)``
(see ``anthropic/_client.py``); ``base_url`` must not end in ``/v1`` because the SDK appends
``/v1/messages`` itself. The SDK sends the key as ``Authorization: Bearer <key>`` (2.x) or
``X-Api-Key`` (older versions); the emulator accepts either.

Every :class:`Reply` names the backend that produced it, from the response itself: the emulator
marks its responses with an ``x-gitmem-backend: emulator`` header, so a ``ANTHROPIC_BASE_URL``
pointing at ``gitmem emulator serve`` is reported as the emulator, and anything else as the API.
"""

from __future__ import annotations

import copy
import inspect
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, cast

from .errors import BackendError
from .text import plural
from .usage import Usage

__all__ = [
    "Backend", "Reply", "Step", "open_backend", "place_cache_control", "keepalive_body", "schedule",
    "run_schedule", "EMULATOR", "ANTHROPIC_API", "EMULATOR_BASE_URL",
]

EMULATOR = "emulator"
ANTHROPIC_API = "anthropic-api"
# A placeholder host: in-process requests never leave the process.
EMULATOR_BASE_URL = "http://gitmem-emulator.invalid"
_EMULATOR_KEY = "gitmem-emulator"


@dataclass(frozen=True)
class Reply:
    """One Messages API reply: the JSON message, its usage, and who answered."""

    message: Dict[str, Any]
    usage: Usage
    backend: str
    request_id: Optional[str] = None
    client_request_id: Optional[str] = None

    @property
    def text(self) -> str:
        return "".join(block.get("text", "") for block in self.message.get("content", []) if block.get("type") == "text")

    @property
    def model(self) -> str:
        return self.message.get("model", "")

    def to_dict(self) -> dict:
        return {
            "backend": self.backend,
            "request_id": self.request_id,
            "model": self.model,
            "text": self.text,
            "stop_reason": self.message.get("stop_reason"),
            "usage": self.usage.to_dict(),
            "message": self.message,
        }


@dataclass
class Backend:
    """An SDK client plus the backend's name; ``emulator`` is set when it runs in-process. ``command``: the
    gitmem command that records each reply itself (see :func:`open_backend`)."""

    client: Any
    name: str
    emulator: Any = None
    base_url: Optional[str] = field(default=None)
    command: Optional[str] = None

    def send(self, body: Mapping[str, Any]) -> Reply:
        """Send a raw Messages API body, non-streaming (``stream`` is ignored).

        SDK and API errors become :class:`BackendError`.
        """
        if self.client is None:
            return self._send_direct(body)
        create = self.client.messages.with_raw_response.create
        known = set(inspect.signature(create).parameters) - {"extra_headers", "extra_query", "extra_body", "timeout"}
        params = {k: v for k, v in body.items() if k in known and k != "stream"}
        # Fields this SDK version has no argument for (e.g. temperature) still reach the API.
        extra = {k: v for k, v in body.items() if k not in known}
        ours = os.urandom(16).hex() if self.command else None
        headers = {"extra_headers": {"gitmem-client": self.command, "gitmem-request-id": ours}} if ours else {}
        raw = self._call(lambda: create(**params, **headers, **({"extra_body": extra} if extra else {})))
        message = raw.parse()
        data = message.model_dump(mode="json", exclude_none=False)
        backend = EMULATOR if raw.headers.get("x-gitmem-backend") == EMULATOR else ANTHROPIC_API
        return Reply(message=data, usage=Usage.from_api(message.usage), backend=backend,
                     request_id=raw.headers.get("request-id"), client_request_id=ours)

    def _send_direct(self, body: Mapping[str, Any]) -> Reply:
        """The in-process emulator without the SDK: the same handler, JSON in and out.

        For one-shot commands (``gitmem ask``): importing the SDK costs about 0.8 s, more than
        the whole request. The emulator's replies are the same either way (tests send both).
        """
        import json

        payload = json.dumps({k: v for k, v in body.items() if k != "stream"}).encode("utf-8")
        response = self.emulator.handle("POST", "/v1/messages", {"x-api-key": _EMULATOR_KEY,
                                        "anthropic-version": "2023-06-01", "content-type": "application/json"},
                                        payload)
        data = response.json()
        request_id = dict(response.headers).get("request-id")
        if response.status != 200:
            error = data.get("error") or {}
            err = BackendError(f"{response.status} {error.get('type', 'api_error')}: {error.get('message', '')}"
                               + (f" (request-id {request_id})" if request_id else ""))
            err.status, err.error_type, err.request_id = response.status, error.get("type"), request_id
            raise err
        return Reply(message=data, usage=Usage.from_api(data.get("usage")), backend=EMULATOR, request_id=request_id)

    @property
    def virtual_time(self) -> bool:
        """True when :meth:`wait` moves a virtual clock instead of sleeping."""
        return self.emulator is not None and getattr(self.emulator.clock, "virtual", False)

    def wait(self, seconds: float, on_tick: Optional[Callable[[float], None]] = None) -> None:
        """Let ``seconds`` pass: advance the in-process emulator's virtual clock, or really sleep.

        ``on_tick(remaining)`` is called about once a second while sleeping (for a countdown).
        """
        if seconds <= 0:
            return
        if self.virtual_time:
            self.emulator.clock.advance(seconds)
            return
        end = time.monotonic() + seconds
        while True:
            remaining = end - time.monotonic()
            if remaining <= 0:
                return
            if on_tick is not None:
                on_tick(remaining)
            time.sleep(min(1.0, remaining))

    def count_tokens(self, body: Mapping[str, Any]) -> int:
        """``POST /v1/messages/count_tokens`` for the body's model, tools, system and messages."""
        fields = {k: v for k, v in body.items() if k in ("model", "messages", "system", "tools", "tool_choice", "thinking")}
        if self.client is None:
            import json

            response = self.emulator.handle("POST", "/v1/messages/count_tokens",
                                            {"x-api-key": _EMULATOR_KEY, "anthropic-version": "2023-06-01"},
                                            json.dumps(fields).encode("utf-8"))
            if response.status != 200:
                raise BackendError(f"{response.status}: {response.json().get('error', {}).get('message', '')}")
            return int(response.json()["input_tokens"])
        return self._call(lambda: self.client.messages.count_tokens(**fields)).input_tokens

    def _call(self, request: Any) -> Any:
        import anthropic

        try:
            return request()
        except anthropic.APIStatusError as exc:
            raise _status_error(exc) from None
        except anthropic.APIConnectionError as exc:
            where = self.base_url or "the Anthropic API"
            raise BackendError(f"cannot reach {where}: {exc}") from None
        except (TypeError, ValueError) as exc:  # the SDK's own argument checks
            raise BackendError(f"the request was not sent: {str(exc).splitlines()[0]}") from None


def _status_error(exc: Any) -> BackendError:
    body = exc.body if isinstance(exc.body, Mapping) else {}
    error = body["error"] if isinstance(body.get("error"), Mapping) else {}
    error_type = error.get("type", "api_error")
    message = error.get("message") or str(exc)
    request_id = exc.response.headers.get("request-id") if exc.response is not None else None
    err = BackendError(f"{exc.status_code} {error_type}: {message}" + (f" (request-id {request_id})" if request_id else ""))
    err.status = exc.status_code
    err.error_type = error_type
    err.request_id = request_id
    return err


def open_backend(backend: str = "auto", clock: Any = None, emulator: Any = None,
                 state_path: Optional[str] = None, sdk: bool = True, command: Optional[str] = None) -> Backend:
    """The client to send with.

    - ``"anthropic"``: the real API (``ANTHROPIC_API_KEY`` or ``ANTHROPIC_AUTH_TOKEN``;
      ``ANTHROPIC_BASE_URL`` honoured, e.g. a proxy or ``gitmem emulator serve``).
    - ``"emulator"``: the in-process emulator (``clock`` or an existing ``emulator`` optional;
      ``ANTHROPIC_BASE_URL`` is ignored). ``state_path`` keeps its prompt cache in that file, so
      one process's cache writes are read by the next (``gitmem ask`` passes
      ``.git/gitmem/emulator-cache.json``). ``sdk=False`` calls the emulator's handler directly
      instead of through the SDK, which saves the SDK's import time in one-shot commands.
    - ``"auto"``: the API when ``ANTHROPIC_API_KEY`` is set or ``ANTHROPIC_BASE_URL`` points
      somewhere, else the in-process emulator.

    ``command`` (``ask``, ``messages``): the gitmem command that records each request in requests.jsonl. Over
    HTTP each request then carries ``gitmem-client: COMMAND`` and a fresh ``gitmem-request-id`` (the reply's
    ``client_request_id``), so a gitmem router at the base URL, which records what it forwards too, records
    the same id and the bill counts the request once.
    """
    if backend not in ("auto", "emulator", "anthropic"):
        raise BackendError(f"unknown backend {backend!r} (valid: auto, emulator, anthropic)")
    base_url = os.environ.get("ANTHROPIC_BASE_URL") or None
    has_key = bool(os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN"))
    if backend == "auto":
        backend = "anthropic" if has_key or base_url else "emulator"
    if backend == "emulator":
        from .emulator import Emulator, RealClock

        emulator = emulator or Emulator(clock=clock or RealClock(), state_path=state_path)
        if not sdk:
            return Backend(client=None, name=EMULATOR, emulator=emulator)
        import anthropic
        import httpx2

        client = anthropic.Anthropic(api_key=_EMULATOR_KEY, base_url=EMULATOR_BASE_URL,
                                     http_client=httpx2.Client(transport=emulator.transport()))
        return Backend(client=client, name=EMULATOR, emulator=emulator)
    if not has_key and not base_url:
        raise BackendError("backend 'anthropic' needs ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) in the environment")
    import anthropic

    # A base URL without a key is a local server (the emulator, a proxy): any key will do there. gitmem's
    # bodies carry their memory already: a `gitmem router` at the base URL must not attach it again.
    client = anthropic.Anthropic(api_key=None if has_key else _EMULATOR_KEY, base_url=base_url,
                                 default_headers={"gitmem-memory": "off"})
    return Backend(client=client, name=ANTHROPIC_API, base_url=base_url, command=command)


def place_cache_control(body: Mapping[str, Any], boundary: Optional[int] = None, ttl: Optional[str] = None) -> dict:
    """A copy of ``body`` with its ``cache_control`` markers set as asked.

    ``ttl`` ``"none"`` removes every marker. ``boundary`` N (1-based, counted over the prefix
    blocks tools -> system -> messages, see :func:`gitmem.tokens.prompt_blocks`) puts one marker
    after the N-th block, replacing the body's own markers; without ``boundary``, a ``ttl`` of
    ``"5m"``/``"1h"`` is applied to the markers the body already has. String ``system`` and message
    contents become one text block, so they can carry a marker.
    """
    from .tokens import prompt_blocks

    if ttl not in (None, "none", "5m", "1h"):
        raise BackendError(f"invalid ttl {ttl!r} (valid: none, 5m, 1h)")
    out = copy.deepcopy(dict(body))
    if isinstance(out.get("system"), str):
        out["system"] = [{"type": "text", "text": out["system"]}]
    for message in out.get("messages") or []:
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            message["content"] = [{"type": "text", "text": message["content"]}]
    blocks = [b.block for b in prompt_blocks(out)]  # the same dicts as in ``out``, in prefix order
    marker = {"type": "ephemeral", **({"ttl": "1h"} if ttl == "1h" else {})}
    if ttl == "none" or boundary is not None:
        out.pop("cache_control", None)
        for block in blocks:
            if isinstance(block, dict):
                block.pop("cache_control", None)
    if boundary is not None and ttl != "none":
        if not 1 <= boundary <= len(blocks):
            raise BackendError(f"--boundary {boundary} is outside the body's {plural(len(blocks), 'prefix block')}")
        cast(Dict[str, Any], blocks[boundary - 1])["cache_control"] = marker  # the dicts of ``out``
    elif ttl in ("5m", "1h"):
        for block in blocks:
            if isinstance(block, dict) and block.get("cache_control") is not None:
                block["cache_control"] = dict(marker)
    return out


def keepalive_body(body: Mapping[str, Any]) -> dict:
    """A request with the same prefix that generates nothing: it hits (so refreshes) ``body``'s entries.

    ``max_tokens: 0`` (the documented pre-warming request: no output tokens, ``stop_reason``
    ``"max_tokens"``), not streamed. With extended thinking (``thinking.type: "enabled"``) or a
    ``tool_choice`` that forces a tool, 0 is refused (the caching page's "Limitations") and dropping
    either would miss the message cache, so such a body keeps the older 1-token ping; with extended
    thinking the smallest valid ``max_tokens`` is ``budget_tokens + 1`` ("budget_tokens must be set to
    a value less than max_tokens"), so that is what it sends.
    """
    ping = {k: v for k, v in copy.deepcopy(dict(body)).items() if k != "stream"}
    thinking, choice = ping.get("thinking"), ping.get("tool_choice")
    if isinstance(thinking, Mapping) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        return {**ping, "max_tokens": budget + 1 if isinstance(budget, int) and not isinstance(budget, bool) else 1}
    forced = isinstance(choice, Mapping) and choice.get("type") in ("any", "tool")
    return {**ping, "max_tokens": 1 if forced else 0}


@dataclass(frozen=True)
class Step:
    """One request of a schedule: sent ``at`` seconds after the first."""

    at: float
    label: str
    body: Mapping[str, Any]


def schedule(body: Mapping[str, Any], ping_at: Sequence[float] = (), repeat_at: Sequence[float] = ()) -> List[Step]:
    """The body at 0 s, keep-alive pings at ``ping_at``, the body again at ``repeat_at``, by time."""
    steps = [Step(0.0, "request", body)]
    steps += [Step(float(t), "ping", keepalive_body(body)) for t in ping_at]
    steps += [Step(float(t), "repeat", body) for t in repeat_at]
    if not all(0 <= step.at < float("inf") for step in steps):  # NaN compares false: it would stop the clock
        raise BackendError("schedule times must be a finite number of seconds >= 0")
    return sorted(steps, key=lambda step: (step.at, step.label != "request"))


def run_schedule(backend: Backend, steps: Sequence[Step],
                 on_tick: Optional[Callable[[float], None]] = None) -> List[Tuple[Step, Reply]]:
    """Send each step at its time (virtual time on the in-process emulator, else real waiting)."""
    done: List[Tuple[Step, Reply]] = []
    now = 0.0
    for step in steps:
        backend.wait(step.at - now, on_tick)
        now = max(now, step.at)
        done.append((step, backend.send(step.body)))
    return done
