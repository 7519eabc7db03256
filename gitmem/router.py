"""The memory router's logic, as pure functions: where the memory goes and where the breakpoints go.

The router (``gitmem router serve``, :mod:`gitmem.router_app`) sits between an agent and the
Messages API. For each request it inserts the team memory, built by the context builder
(:func:`gitmem.context_inputs.build`, so the same deterministic, escaped text), and then forwards it.
Everything here takes plain data and returns plain data; the server does the I/O.

**Where the memory goes.** The prefix the API caches is ``tools``, then ``system``, then
``messages``. The router's blocks go at the end of ``system``: after the client's system prompt and
tools, before the conversation. In order: ``guide`` (gitmem's preamble saying memory is quoted data,
plus the repository guide when the router is asked to include it), ``memory`` (the memory as of the
branch's cache anchor) and ``tail`` (memory written since the anchor, e.g. during this session). So a
fact added mid-session changes only the tail: the client's prefix and the memory block are still
read from the cache.

**Breakpoints.** The API allows 4 ``cache_control`` markers and refuses a 1-hour marker after a
5-minute one. A top-level ``cache_control`` (automatic caching) is a breakpoint on the last cacheable
block, one with that block's own marker if it has the same TTL and a 400 if another (:func:`markers`).
A request whose own markers the API already refuses, out of TTL order or so in conflict, is the API's
to refuse: the router attaches nothing to it and forwards it as it came, so the client gets the API's
400 as with memory off (raising its markers would make it pass, billed at the 1-hour rate the client
did not ask for). Else the router wants a marker where the context builder puts one (guide and memory,
and the tail), with the policy's TTL. :func:`attach` keeps within the limit:

1. free slots = 4 - the client's breakpoints, counted with the router's blocks in place (a top-level
   marker lands in ``messages``, or, when no block there can be cached, on the router's last block,
   which is then left to it); the router keeps as many of its wanted markers as fit, memory first,
   then guide, then tail;
2. no free slot, and a client marker after the router's blocks (in ``messages``): the router adds
   none. That marker's prefix contains the memory, so memory is cached with the conversation;
3. no free slot and every client marker before the router's blocks: the client's last marker moves
   onto the memory block. Its prefix is a prefix of the memory block's, so it is still read from
   the cache as long as the memory does not change;
4. then TTL order: wherever a 1-hour marker follows a 5-minute one (which only the router's markers
   beside the client's can cause), the earlier markers are raised to 1 hour. A TTL is never lowered and
   no marker changes place except in rule 3, so every prefix the client caches is still cached.

A client's text is never changed; only ``cache_control`` values are.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

__all__ = [
    "MAX_BREAKPOINTS", "HEADER_PREFIX", "MEMORY_ON", "MEMORY_OFF", "RouterBlock", "Attached", "Controls", "controls", "attach",
    "markers", "session_of", "forward_headers", "response_headers", "SseUsage", "ttl_order_ok", "CONTROL_HEADERS",
    "CLIENT_TTL_ORDER", "CLIENT_TTL_CONFLICT", "CLIENT_REFUSED", "warm_key",
]

MAX_BREAKPOINTS = 4
HEADER_PREFIX = "gitmem-"
#: Request headers the router reads and never forwards.
CONTROL_HEADERS = {
    "gitmem-memory": "off: send the request without memory (and without router breakpoints); on: attach it",
    "gitmem-policy": "none|5m|1h|keepalive|auto for this request",
    "gitmem-repo": "the repository whose memory to attach (a path)",
    "gitmem-branch": "the code branch whose memory to attach",
    "gitmem-session": "a name for the cache line this request belongs to (pings are per cache entry, not per line)",
    "gitmem-client": "the gitmem command that sent the request and records it itself (ask, messages)",
    "gitmem-request-id": "that command's id for the request, recorded on both lines so the bill counts it once",
}
#: Hop-by-hop and length headers: recomputed, never copied (request or response).
_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "accept-encoding",
        "content-encoding", "upgrade", "proxy-connection", "te", "trailer", "date", "server"}
_PRIORITY = ("memory", "guide", "tail")
#: :attr:`Attached.note` for a request whose own markers the API refuses: nothing attached or changed.
CLIENT_TTL_ORDER = "the request's own cache_control puts a 1h TTL after a 5m one, which the API refuses: sent as it came"
#: :attr:`Attached.note` for a request whose top-level ``cache_control`` lands on a block marked with another TTL.
CLIENT_TTL_CONFLICT = ("the request's top-level cache_control lands on a block marked with another TTL, which the API "
                       "refuses: sent as it came")
#: The notes of a request :func:`attach` sends as it came, its 400 being the client's to see.
CLIENT_REFUSED = (CLIENT_TTL_ORDER, CLIENT_TTL_CONFLICT)


@dataclass(frozen=True)
class RouterBlock:
    """One block the router inserts: ``name`` (guide, memory, tail), its text, the TTL the context
    builder marks it with (None: not marked)."""

    name: str
    text: str
    mark: Optional[str] = None


@dataclass(frozen=True)
class Controls:
    """What a request's ``gitmem-*`` headers ask for."""

    memory: bool = True
    policy: Optional[str] = None
    repo: Optional[str] = None
    branch: Optional[str] = None
    line: Optional[str] = None
    client: Optional[str] = None
    client_request_id: Optional[str] = None


@dataclass
class Attached:
    """The body to forward and what :func:`attach` did to it."""

    body: Dict[str, Any]
    client_markers: int
    router_markers: List[str]
    moved: bool = False
    raised: int = 0
    note: str = ""
    blocks: List[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"client_markers": self.client_markers, "router_markers": self.router_markers,
                "moved": self.moved, "raised": self.raised, "note": self.note, "blocks": self.blocks}


#: The spellings ``gitmem-memory`` accepts (case-insensitive); absent or empty is on.
MEMORY_ON = ("on", "1", "true", "yes")
MEMORY_OFF = ("off", "0", "false", "no", "none")


def controls(headers: Mapping[str, str]) -> Controls:
    """Read the ``gitmem-*`` request headers (keys lower-case).

    Raises ValueError, naming the header and its spellings, for a ``gitmem-memory`` that is neither on
    nor off: read as on, a typo such as ``of`` would send the memory the client meant to keep out."""
    memory = headers.get("gitmem-memory", "").strip().lower()
    if memory and memory not in MEMORY_ON + MEMORY_OFF:
        raise ValueError(f"gitmem-memory: {headers['gitmem-memory']!r} is neither on "
                         f"({'|'.join(MEMORY_ON)}) nor off ({'|'.join(MEMORY_OFF)})")
    return Controls(memory=memory not in MEMORY_OFF, policy=headers.get("gitmem-policy") or None,
                    repo=headers.get("gitmem-repo") or None, branch=headers.get("gitmem-branch") or None,
                    line=headers.get("gitmem-session") or None, client=headers.get("gitmem-client") or None,
                    client_request_id=headers.get("gitmem-request-id") or None)


def forward_headers(headers: Iterable[Tuple[str, str]]) -> List[Tuple[str, str]]:
    """The client's headers to send upstream: all but ``gitmem-*`` and hop-by-hop ones, unchanged
    (``anthropic-version``, ``anthropic-beta`` and the key go through as they came)."""
    return [(k, v) for k, v in headers if k.lower() not in _HOP and not k.lower().startswith(HEADER_PREFIX)]


def response_headers(headers: Iterable[Tuple[str, str]]) -> List[Tuple[str, str]]:
    """Upstream response headers to pass back to the client (lengths and encodings are recomputed)."""
    return [(k, v) for k, v in headers if k.lower() not in _HOP]


_SESSION = re.compile(r"session_([0-9A-Za-z-]{8,})")


def session_of(headers: Mapping[str, str], body: Mapping[str, Any]) -> str:
    """The client's session: ``x-claude-code-session-id``, else the session in ``metadata.user_id``
    (Claude Code sends ``..._session_<uuid>``), else ``gitmem-session``, else ``default``."""
    if headers.get("x-claude-code-session-id"):
        return headers["x-claude-code-session-id"]
    metadata = body.get("metadata") if isinstance(body, Mapping) else None
    user = metadata.get("user_id") if isinstance(metadata, Mapping) else None
    if isinstance(user, str):
        try:  # newer clients send a JSON object as the user id
            parsed = json.loads(user)
            if isinstance(parsed, Mapping) and parsed.get("session_id"):
                return str(parsed["session_id"])
        except ValueError:
            pass
        found = _SESSION.search(user)
        if found:
            return found.group(1)
    return headers.get("gitmem-session") or "default"


def warm_key(body: Mapping[str, Any], workspace: Optional[str]) -> str:
    """What a ping with ``body`` keeps warm, as a hash: the cache entries at its markers, i.e. the caller's
    workspace (the cache is per workspace: ``workspace`` stands for it, e.g. a hash of the key), the request's
    fields other than the conversation and the prefix up to and including its last breakpoint (:func:`markers`,
    so a top-level marker's, which walks back over a trailing empty prefill or thinking block). Two bodies with
    the same key refresh the same entries, so one ping serves both (agents sharing a repository's guide and
    memory, their own turns unmarked); what follows the last breakpoint is never cached, so it does not count."""
    items = _prefix(body)
    found = _found([block for _, block in items], body.get("cache_control"))
    end = max(found) + 1 if found else 0
    rest = {k: v for k, v in body.items() if k not in ("tools", "system", "messages", "max_tokens", "stream", "metadata")}
    text = json.dumps([workspace, rest, items[:end]], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# --- breakpoints ---------------------------------------------------------------------------------


def _prefix(body: Mapping[str, Any]) -> List[Tuple[Optional[str], Any]]:
    """Every block of the prefix in the API's order (tools, system, messages), with its message's role (None for
    tools and system): the dicts themselves, and a string ``system`` or message content as the one text block the
    API reads it as (a new dict, so never one to mark). The parts of a tool_result's ``content`` list come just
    before it: each may carry a breakpoint, which ends the prefix after that part (the emulator's
    ``_prefix_units``)."""
    out: List[Tuple[Optional[str], Any]] = [(None, tool) for tool in body.get("tools") or []]
    contents = [(None, body.get("system"))] + [(m.get("role"), m.get("content")) for m in body.get("messages") or []
                                               if isinstance(m, Mapping)]
    for role, content in contents:
        if isinstance(content, str):
            out.append((role, {"type": "text", "text": content}))
        elif isinstance(content, list):
            for block in content:
                parts = block.get("content") if isinstance(block, Mapping) and block.get("type") == "tool_result" else None
                if isinstance(parts, list):
                    out += [(role, part) for part in parts]
                out.append((role, block))
    return out


def _prefix_blocks(body: Mapping[str, Any]) -> List[Any]:
    """The blocks of :func:`_prefix`, without their roles."""
    return [block for _, block in _prefix(body)]


def _ttl(control: Mapping[str, Any]) -> str:
    return str(control.get("ttl", "5m"))


def _automatic(blocks: Sequence[Any], top: Any) -> Optional[Tuple[int, str]]:
    """Where a top-level ``cache_control`` (automatic caching) puts its breakpoint, and its TTL; None without one.

    The caching docs (https://platform.claude.com/docs/en/build-with-claude/prompt-caching, "Automatic caching"):
    the system "applies the cache breakpoint to the last cacheable block", and if that block "is not eligible ... the
    system silently walks backwards to find the nearest eligible block. If none is found, caching is skipped".
    Ineligible, as the page lists what cannot be cached: thinking blocks and empty text blocks (an empty prefill).
    The emulator's ``_breakpoints`` walks back over the same blocks."""
    if not isinstance(top, Mapping):
        return None
    for i in range(len(blocks) - 1, -1, -1):
        block = blocks[i]
        if isinstance(block, Mapping) and block.get("type") not in ("thinking", "redacted_thinking") \
                and block.get("text") != "":
            return i, _ttl(top)
    return None


def _found(blocks: Sequence[Any], top: Any) -> Dict[int, str]:
    """The TTL of every breakpoint by prefix position (:func:`markers`), in ``blocks`` already walked."""
    found = {i: _ttl(block["cache_control"]) for i, block in enumerate(blocks)
             if isinstance(block, Mapping) and isinstance(block.get("cache_control"), Mapping)}
    automatic = _automatic(blocks, top)
    if automatic:
        found.setdefault(*automatic)
    return found


def markers(body: Mapping[str, Any]) -> List[Tuple[int, str]]:
    """(position, ttl) of every breakpoint in prefix order, as the API counts them toward its 4.

    A top-level ``cache_control`` is one where :func:`_automatic` puts it, unless that block has its own marker:
    the docs' edge cases, "If the last block already has an explicit cache_control with the same TTL, automatic
    caching is a no-op" (one breakpoint, not two), and with a different TTL "the API returns a 400 error"
    (:func:`_refusal`; here the block's own TTL is listed). No marker can follow it: what it walks back over
    cannot be marked."""
    return sorted(_found(_prefix_blocks(body), body.get("cache_control")).items())


def _order_ok(found: Mapping[int, str]) -> bool:
    seen_5m = False
    for _, ttl in sorted(found.items()):
        if ttl == "1h" and seen_5m:
            return False
        seen_5m = seen_5m or ttl != "1h"
    return True


def ttl_order_ok(body: Mapping[str, Any]) -> bool:
    """True when no 1-hour marker follows a 5-minute one (the API's rule)."""
    return _order_ok(_found(_prefix_blocks(body), body.get("cache_control")))


def _refusal(blocks: Sequence[Any], top: Any, found: Mapping[int, str]) -> str:
    """Why the API refuses these breakpoints (one of :data:`CLIENT_REFUSED`), or "": the top-level
    ``cache_control`` lands on a block marked with another TTL, or a 1-hour marker follows a 5-minute one."""
    automatic = _automatic(blocks, top)
    own = blocks[automatic[0]].get("cache_control") if automatic else None
    if automatic and isinstance(own, Mapping) and _ttl(own) != automatic[1]:
        return CLIENT_TTL_CONFLICT
    return "" if _order_ok(found) else CLIENT_TTL_ORDER


def _control(ttl: str) -> dict:
    return {"type": "ephemeral", **({"ttl": "1h"} if ttl == "1h" else {})}


def attach(body: Mapping[str, Any], blocks: Sequence[RouterBlock], ttl: str = "5m", copy_body: bool = True) -> Attached:
    """A copy of ``body`` with ``blocks`` at the end of ``system`` and the breakpoints placed by the
    rules in the module docstring. ``ttl`` is the policy's: ``none`` adds no router marker (and
    leaves the client's alone), ``5m`` or ``1h`` marks the router's blocks that the context builder
    marks (the builder marks the tail 5m even under ``1h``). ``copy_body=False`` changes ``body``
    in place (the server's own freshly parsed copy: saves a deep copy per request). A body whose own
    markers the API refuses (:data:`CLIENT_REFUSED`) comes back as it was, with that note. The request's
    blocks are walked once; the breakpoints are then kept up to date as markers are added or moved."""
    out: Dict[str, Any] = copy.deepcopy(dict(body)) if copy_body else body  # type: ignore[assignment]
    had_system, given = "system" in out, out.get("system")
    system = given
    if isinstance(system, str):
        system = [{"type": "text", "text": system}] if system else []
    elif not isinstance(system, list):
        system = []
    n_tools = len(out.get("tools") or [])
    insert_at = n_tools + len(system)  # prefix position of the first router block
    new: List[Dict[str, Any]] = [{"type": "text", "text": b.text} for b in blocks if b.text]
    names = [b.name for b in blocks if b.text]
    wanted = {b.name: (b.mark if ttl != "1h" or b.mark is None else ("5m" if b.name == "tail" else "1h"))
              for b in blocks if b.text and b.mark and ttl != "none"}
    # Counted with the router's blocks in place, unmarked: a top-level marker lands on the last of them when the
    # conversation has no cacheable block. That block is then the client's breakpoint, with the client's TTL.
    out["system"] = system + new
    prefix = _prefix_blocks(out)
    found = _found(prefix, out.get("cache_control"))
    refused = _refusal(prefix, out.get("cache_control"), found)
    if refused:
        if had_system:
            out["system"] = given
        else:
            out.pop("system")
        return Attached(body=out, client_markers=len(found), router_markers=[], note=refused)
    for pos in found:
        if insert_at <= pos < insert_at + len(new):
            wanted.pop(names[pos - insert_at], None)
    result = Attached(body=out, client_markers=len(found), router_markers=[], blocks=names)
    free = MAX_BREAKPOINTS - len(found)
    keep = [name for name in _PRIORITY if name in wanted][:max(0, free)]
    if wanted and free <= 0:
        if any(pos >= insert_at for pos in found):
            result.note = "no free breakpoint: a client breakpoint after the memory caches it with the conversation"
        else:
            last = max(found)
            moved = prefix[last].pop("cache_control")
            del found[last]
            target = next(name for name in _PRIORITY if name in wanted)
            moved_ttl = _ttl(moved) if isinstance(moved, Mapping) else "5m"
            wanted[target] = "1h" if "1h" in (moved_ttl, wanted[target]) else "5m"
            keep = [target]
            result.moved = True
            result.note = f"no free breakpoint: the client's last one (block {last}) moved onto the {target} block"
    for at, (block, name) in enumerate(zip(new, names), start=insert_at):
        if name in keep:
            block["cache_control"] = _control(wanted[name])
            found[at] = wanted[name]
            result.router_markers.append(f"{name}:{wanted[name]}")
    if not out["system"]:
        out.pop("system")
    result.raised = _raise_for_order(prefix, found)
    return result


def _raise_for_order(blocks: Sequence[Any], found: Mapping[int, str]) -> int:
    """Raise 5-minute markers that come before a 1-hour one to 1 hour; returns how many. Each is a block's own
    marker: a top-level one is the last breakpoint (:func:`markers`), never followed by a 1-hour one."""
    order = sorted(found.items())
    last_1h = max((i for i, (_, ttl) in enumerate(order) if ttl == "1h"), default=-1)
    if last_1h < 0:
        return 0
    raised = 0
    for pos, ttl in order[:last_1h]:
        if ttl == "1h":
            continue
        blocks[pos]["cache_control"] = _control("1h")
        raised += 1
    return raised


# --- usage from a stream -------------------------------------------------------------------------


class SseUsage:
    """Reads the ``usage`` out of a Messages API event stream as its bytes pass by, unbuffered.

    ``message_start`` carries the input-side fields, ``message_delta`` the final ``output_tokens``
    (and, on the API, the cumulative usage); the last value of each field wins.
    """

    def __init__(self) -> None:
        self._buffer = b""
        self.usage: Dict[str, Any] = {}
        self.model: Optional[str] = None
        self.message_id: Optional[str] = None
        self.error: Optional[Dict[str, Any]] = None
        self.stop_reason: Optional[str] = None

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk
        while b"\n\n" in self._buffer:
            event, self._buffer = self._buffer.split(b"\n\n", 1)
            self._event(event)

    def _event(self, raw: bytes) -> None:
        data = b"\n".join(line[5:].strip() for line in raw.replace(b"\r\n", b"\n").split(b"\n")
                          if line.startswith(b"data:"))
        if not data:
            return
        try:
            payload = json.loads(data)
        except ValueError:
            return
        if not isinstance(payload, Mapping):
            return
        kind = payload.get("type")
        if kind == "message_start" and isinstance(payload.get("message"), Mapping):
            message = payload["message"]
            self.model, self.message_id = message.get("model"), message.get("id")
            self._merge(message.get("usage"))
        elif kind == "message_delta":
            self._merge(payload.get("usage"))
            delta = payload.get("delta")
            if isinstance(delta, Mapping):
                self.stop_reason = delta.get("stop_reason") or self.stop_reason
        elif kind == "error":
            self.error = payload.get("error") if isinstance(payload.get("error"), Mapping) else {"message": str(payload)}

    def _merge(self, usage: Any) -> None:
        if not isinstance(usage, Mapping):
            return
        for key, value in usage.items():
            if value is None:
                continue
            if isinstance(value, Mapping):
                self.usage[key] = {**(self.usage.get(key) or {}), **value}
            else:
                self.usage[key] = value
