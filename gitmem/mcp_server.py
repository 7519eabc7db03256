"""The MCP server: gitmem's memory as tools and resources for any MCP client.

Built on the official ``mcp`` SDK (2.x, ``MCPServer``), imported only here, so
nothing else pays for it. Thin: every tool parses its arguments, calls the
library (store, search, context, checkpoint) and returns plain JSON.

- The repository is re-opened on every call (cheap: the parsed-blob cache is
  per process), so the server follows ``git switch`` while it runs.
- Writes are authored by the agent (kind ``agent``) with source
  ``mcp:<client name>/<version>`` taken from the initialize handshake, so the
  audit trail says which tool wrote what.
- Tool descriptions and schemas are kept short on purpose: clients send them
  with every request. :func:`tool_schema_tokens` counts them.
- Errors from the library become MCP tool errors (``isError``) carrying the
  one-line message; nothing is written when arguments are invalid.
"""

from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, get_type_hints

from .errors import GitmemError
from .model import Author

if TYPE_CHECKING:
    from .store import Store

INSTRUCTIONS = (
    "gitmem is this repository's memory. Before proposing an approach, call check_proposal; "
    "call recall or context before your first step; remember decisions, facts and conventions; "
    "reject ideas you turn down, with the reason."
)
#: The memories resource lists at most this many, the newest: a client reads a resource whole into the agent's
#: context, where 100,000 summaries would be megabytes (recall finds the rest).
RESOURCE_LIMIT = 200
_SOURCE_CHARS = re.compile(r"[^A-Za-z0-9_.@/:+-]+")
_PLACEHOLDER = re.compile(r"REDACTED:[a-z0-9-]+")

# Short descriptions: every word here is paid for on every request.
DESCRIPTIONS = {
    "remember": "Store a memory: decision, convention, fact, action, note, or file (needs paths). Returns its id.",
    "recall": "Search memory, best first. Paths (or the current diff) boost memories about those files.",
    "get": "One memory by id (or its short id, or a unique prefix).",
    "history": "Commits that changed a memory: who, when, from which tool.",
    "reject": "Record a rejected proposal and why, so no agent proposes it again.",
    "check_proposal": "Was this proposal already rejected? repeat=true: `rejections` lists what it repeats, with "
                      "reason, author and time; `related` lists rejections on the same topic, for information.",
    "context": "The repository's memory as context for your first step.",
    "checkpoint": "Save where the work stands (text) and the next step (next, or text's ' / next: ...').",
    "resume": "Where the work on this branch stands: last checkpoint, commits and memories since, next step.",
}


def source_for(client: Optional[Any]) -> Tuple[str, int]:
    """``mcp:<name>/<version>`` from the client's Implementation info (``mcp`` when unknown), and how many
    secrets were redacted from them (a write reports those with its own, though the memory never held them).

    A secret in either is redacted before they are cut to length, so no piece of one survives."""
    from .redact import redact_bare

    found = 0

    def clean(value: Any, limit: int) -> str:
        nonlocal found
        text = value if isinstance(value, str) else ""
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "replace").decode("utf-8")
        text, hits = redact_bare(text)
        found += len(hits)
        # "/" parts name from version, and "." alone is no name: a client called "../../x" is "x"
        text = _SOURCE_CHARS.sub("-", text.replace("/", "-")).strip("-.")
        cut = min((m.start() for m in _PLACEHOLDER.finditer(text) if m.start() < limit < m.end()), default=limit)
        return text[:cut].rstrip("-.")  # a placeholder is kept whole or left out, never cut to "REDACTED:ge"

    name = clean(getattr(client, "name", ""), 40)
    version = clean(getattr(client, "version", ""), 20)
    if not name:
        return "mcp", found
    return (f"mcp:{name}/{version}" if version else f"mcp:{name}"), found


def _client(ctx: Any) -> Optional[Any]:
    try:
        params = ctx.session.client_params
    except (AttributeError, ValueError):
        return None
    return params.client_info if params is not None else None


def _compact(schema: Any) -> Any:
    """Drop pydantic's titles and collapse ``anyOf [X, null]`` to X: same meaning, fewer tokens."""
    if isinstance(schema, dict):
        out = {k: ({name: _compact(sub) for name, sub in v.items()} if k == "properties" else _compact(v))
               for k, v in schema.items() if k != "title" and not (k == "default" and v is None)}
        options = out.get("anyOf")
        if isinstance(options, list):
            real = [o for o in options if o != {"type": "null"}]
            if len(real) == 1 and len(real) < len(options):
                del out["anyOf"]
                out.update(real[0])
        return out
    if isinstance(schema, list):
        return [_compact(v) for v in schema]
    return schema


def _by_words(behind: Optional[int], lexical: bool) -> Dict[str, str]:
    """An answer's "recall" field when it went by words (``lexical``) because ``behind`` memories wait for
    vectors (:func:`gitmem.backlog.start_if_waiting`): the model may ask again, in other words, later."""
    if not behind or not lexical:
        return {}
    return {"recall": f"by words only: {behind} memories wait for vectors, embedded in the background"}


def _noticed(store: Store, out: Dict[str, Any]) -> Dict[str, Any]:
    """A reply with the notice the CLI prints when the branch is not HEAD's own (a detached HEAD reads and writes
    the default branch's memory), which a client reading only the reply would miss."""
    return {**out, "notice": store.notice} if store.notice else out


def _written(store: Store, w: Any) -> Dict[str, Any]:
    """A write's reply (:func:`_noticed`)."""
    return _noticed(store, {"id": w.memory.id, "commit": w.commit, "ref": store.ref, "redacted": w.redacted})


class Gitmem:
    """The tools' implementation over one repository (no MCP types: testable directly)."""

    def __init__(self, path: str = ".", branch: Optional[str] = None):
        self.path = path
        self.branch = branch

    def store(self):
        from .store import Store

        return Store.open(self.path, self.branch)

    def author(self, store: Store, source: str) -> Author:
        """The client as the writer, named by its source (``mcp:cursor/1.2``: cursor)."""
        from .repo import agent_author

        return agent_author(store.repo, source.split(":", 1)[-1].split("/", 1)[0] or "agent")

    def _write(self, source: str, type_: str, text: str, **fields: Any) -> Dict[str, Any]:
        store = self.store()
        return _written(store, store.add(type_, text, author=self.author(store, source), source=source, **fields))

    def remember(self, source: str, type: str, text: str, title: Optional[str] = None,
                 tags: Optional[List[str]] = None, paths: Optional[List[str]] = None,
                 reason: Optional[str] = None) -> Dict[str, Any]:
        if type in ("rejection", "checkpoint"):
            raise GitmemError(f"use the {'reject' if type == 'rejection' else 'checkpoint'} tool for a {type}")
        return self._write(source, type, text, title=title, reason=reason, tags=tags or (), paths=paths or ())

    def reject(self, source: str, proposal: str, reason: str, paths: Optional[List[str]] = None) -> Dict[str, Any]:
        return self._write(source, "rejection", proposal, reason=reason, paths=paths or ())

    def recall(self, query: str = "", type: Optional[str] = None, paths: Optional[List[str]] = None,
               limit: int = 10) -> Dict[str, Any]:
        from .conflicts import pending
        from .model import TYPES, check_choice
        from .backlog import allowance, start_if_waiting
        from .recall import AGENT_BUDGET, changed_paths, find

        check_choice("type", type, TYPES)
        if limit < 1:  # as `gitmem search -n 0` is: asking for no memory is a mistake, not a request for one
            raise GitmemError(f"limit must be at least 1 (got {limit}); at most 50 are returned")
        store = self.store()
        if paths is None:
            paths = changed_paths(store)
        if not query.strip() and not paths:  # as `gitmem search ""` is: nothing ranks, and no hits reads as none
            raise GitmemError("query is empty and there are no paths to rank by: give words to search for, or paths")
        hits = find(store, query, min(limit, 50), filters={"type": type}, paths=paths,
                    budget=allowance(store, AGENT_BUDGET))
        behind = start_if_waiting(store)
        conflicts = pending(store)
        out: Dict[str, Any] = {"ref": store.ref, "memories": [_hit(h, conflicts) for h in hits]}
        # only when every hit went without a similarity: else the model cannot tell words from meaning
        out.update(_by_words(behind, bool(hits) and all(h.similarity is None for h in hits)))
        if any(h.stale for h in hits):
            out["note"] = "stale: the file changed since that file memory was written; re-read it"
        return _noticed(store, out)

    def check_proposal(self, proposal: str, paths: Optional[List[str]] = None) -> Dict[str, Any]:
        from .backlog import allowance, start_if_waiting
        from .check import HYBRID_JUDGE
        from .recall import AGENT_BUDGET, check

        if not proposal.strip():  # as `gitmem check ""` is: there is nothing to judge
            raise GitmemError("proposal is empty: say what you are about to do")
        from .conflicts import check_json, pending

        store = self.store()
        verdict = check(store, proposal, paths=paths or (), budget=allowance(store, AGENT_BUDGET))
        behind = start_if_waiting(store)
        out = check_json(verdict, pending(store) if verdict.hits else {})
        return {**out, **_by_words(behind, verdict.judge != HYBRID_JUDGE)}

    def get(self, id: str) -> Dict[str, Any]:
        from .conflicts import pending, with_conflict

        store = self.store()
        m = store.get(id)
        return with_conflict(m.to_dict(), m.id, pending(store))

    def history(self, id: str) -> Dict[str, Any]:
        return {"changes": [c.to_dict() for c in self.store().history(id)]}

    def context(self, query: Optional[str] = None) -> Dict[str, Any]:
        from .context import query_refusal
        from .context_inputs import build

        problem = query_refusal(query)  # as `gitmem context --query ""` refuses it
        if problem:
            raise GitmemError(problem)
        store = self.store()
        ctx = build(store, query=query, guide_optional=True)
        text = "\n\n".join(b["text"] for b in ctx.body["system"] if b.get("type") == "text")
        return _noticed(store, {"memory_commit": ctx.memory_commit, "tokens": ctx.total_tokens, "context": text,
                                "warnings": list(ctx.warnings)})

    def checkpoint(self, source: str, text: str, next: Optional[str] = None) -> Dict[str, Any]:
        from .checkpoint import checkpoint

        store = self.store()
        return _written(store, checkpoint(store, text, next=next, author=self.author(store, source), source=source,
                                          marked=True))

    def resume(self) -> Dict[str, Any]:
        from .checkpoint import resume

        store = self.store()
        return _noticed(store, resume(store).to_dict())

    def memory_list(self) -> str:
        from .warm import counted

        store = self.store()
        newest = store.list(limit=RESOURCE_LIMIT)
        count = counted(store.summary()["counts"])
        listing: Dict[str, Any] = {"ref": store.ref, "count": count, "memories": [
            {"id": m.id, "type": m.type, "summary": m.summary} for m in newest]}
        if count > len(newest):
            listing["note"] = f"the newest {len(newest)} of {count} active memories: recall finds the others"
        return json.dumps(listing, ensure_ascii=False)

    def memory_yaml(self, id: str) -> str:
        from .model import dump_yaml

        return dump_yaml(self.store().get(id)).decode("utf-8")


def _hit(h: Any, conflicts: Dict[str, Any]) -> Dict[str, Any]:
    from .conflicts import with_conflict

    m = h.memory
    out = {"id": m.id, "type": m.type, "text": m.text, "score": round(h.score, 3)}
    for key in ("title", "reason", "next"):
        if getattr(m, key):
            out[key] = getattr(m, key)
    if m.paths:
        out["paths"] = list(m.paths)
    if h.stale:
        out["stale"] = True
    return with_conflict(out, m.id, conflicts)


def build_server(path: str = ".", branch: Optional[str] = None):
    """An ``MCPServer`` with gitmem's tools and resources, serving the repository at ``path``."""
    from typing import Annotated, Literal

    try:
        from mcp.server.mcpserver import Context, MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:
        raise GitmemError("the MCP server needs the mcp SDK 2.x: pip install 'mcp>=2.3'") from None
    from pydantic import Field, ValidationError

    from . import __version__
    from .model import TYPES
    from .serving import on_library_thread

    impl = Gitmem(path, branch)
    names = {"Annotated": Annotated, "Context": Context, "Field": Field}

    class Server(MCPServer):
        async def call_tool(self, name: str, arguments: Dict[str, Any], context: Any = None) -> Any:
            tool = self._tool_manager.get_tool(name)
            if tool is not None and isinstance(arguments, dict):
                # pydantic drops a name the tool does not take: `remember` called with `because` (the CLI's
                # option) stored the decision without its reason and said nothing; the model learns the name
                taken = list(tool.parameters.get("properties", {}))
                unknown = [k for k in arguments if k not in taken]
                if unknown:
                    raise ToolError(f"invalid arguments for {name}: "
                                    + "; ".join(f"{k}: not an argument of {name}" for k in unknown)
                                    + f" (it takes {', '.join(taken) or 'none'})")
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as e:
                if not isinstance(e.__cause__, ValidationError):
                    raise
                # pydantic's report is several lines and a link; a model reads one line, as a person does
                problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
                                     for err in e.__cause__.errors())
                raise ToolError(f"invalid arguments for {name}: {problems}") from e.__cause__

        async def list_tools(self):
            tools = await super().list_tools()
            for tool in tools:
                tool.input_schema = _compact(tool.input_schema)
                tool.output_schema = None  # results are self-describing JSON; no schema to pay for
            return tools

    server = Server("gitmem", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    def call(fn, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        try:  # every tool on one thread: see on_library_thread
            return on_library_thread(fn, *args, **{k: v for k, v in kwargs.items() if v is not None})
        except GitmemError as e:
            raise ToolError(str(e)) from None

    def write(ctx: Context, fn, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        """A write as the client (:func:`source_for`): its ``redacted`` counts the secrets taken out of the
        client's name and version too."""
        source, redacted = source_for(_client(ctx))
        out = call(fn, source, *args, **kwargs)
        return {**out, "redacted": out["redacted"] + redacted}

    Kind = Literal["decision", "convention", "fact", "action", "note", "file"]
    Type = Literal[TYPES]  # type: ignore[valid-type]
    Paths = Annotated[Optional[List[str]], Field(description="repo-relative file paths")]
    MemoryId = Annotated[str, Field(description="memory id, short id or unique prefix")]
    names.update(Paths=Paths, MemoryId=MemoryId, Kind=Kind, Type=Type)

    def tool(fn):
        # Results are annotated with the builtin ``dict[str, Any]``, which the SDK returns as
        # structured content as is (``typing.Dict`` would be wrapped in {"result": ...}).
        # Annotations are strings (postponed evaluation) naming the local types above:
        # resolve them here, where those names are visible, before the SDK reads them.
        fn.__annotations__ = get_type_hints(fn, localns={**globals(), **names}, include_extras=True)
        server.add_tool(fn, description=DESCRIPTIONS[fn.__name__])
        return fn

    @tool
    def remember(type: Kind, text: str, ctx: Context, title: Optional[str] = None,
                 tags: Optional[List[str]] = None, paths: Paths = None,
                 reason: Annotated[Optional[str], Field(description="why")] = None) -> dict[str, Any]:
        return write(ctx, impl.remember, type, text, title=title, tags=tags, paths=paths, reason=reason)

    @tool
    def recall(query: str, type: Optional[Type] = None, paths: Paths = None,
               limit: Annotated[int, Field(strict=True)] = 10) -> dict[str, Any]:  # strict: "5" and true are no limit
        return call(impl.recall, query, type=type, paths=paths, limit=limit)

    @tool
    def get(id: MemoryId) -> dict[str, Any]:
        return call(impl.get, id)

    @tool
    def history(id: MemoryId) -> dict[str, Any]:
        return call(impl.history, id)

    @tool
    def reject(proposal: str, reason: str, ctx: Context, paths: Paths = None) -> dict[str, Any]:
        return write(ctx, impl.reject, proposal, reason, paths=paths)

    @tool
    def check_proposal(proposal: str, paths: Paths = None) -> dict[str, Any]:
        return call(impl.check_proposal, proposal, paths=paths)

    @tool
    def context(query: Optional[str] = None) -> dict[str, Any]:
        return call(impl.context, query=query)

    @tool
    def checkpoint(text: str, ctx: Context, next: Optional[str] = None) -> dict[str, Any]:
        return write(ctx, impl.checkpoint, text, next=next)

    @tool
    def resume() -> dict[str, Any]:
        return call(impl.resume)

    @server.resource("gitmem://memories", name="memories", description=f"The newest {RESOURCE_LIMIT} active memories "
                     "of this branch (id, type, summary) and how many there are",
                     mime_type="application/json")
    def memories() -> str:
        return read(impl.memory_list)

    @server.resource("gitmem://memory/{id}", name="memory", description="One memory (YAML)",
                     mime_type="application/yaml")
    def memory(id: str) -> str:
        return read(impl.memory_yaml, id)

    def read(fn, *args: Any) -> str:
        """A resource's text; a gitmem error is the client's one line (else the SDK says only 'Error reading
        resource' and logs a traceback)."""
        from mcp.server.mcpserver.exceptions import ResourceError

        try:
            return on_library_thread(fn, *args)
        except GitmemError as e:
            raise ResourceError(str(e)) from None

    return server


def serve(path: str = ".", branch: Optional[str] = None, http: bool = False, port: int = 8767,
          echo: Callable[[str], None] = print) -> None:
    """Run until the client disconnects: stdio by default, or streamable HTTP on 127.0.0.1 (``echo`` says the
    address once it listens, as `gitmem ui` does: a client needs it, and ``--port 0`` picks one)."""
    from .repo import check_branch_name, open_repository

    open_repository(path)  # fail fast, before the client waits on a handshake
    if branch is not None:
        check_branch_name(branch)
    server = build_server(path, branch)
    from .serving import warm_up

    warm_up(path, branch)
    if http:
        from mcp.server.transport_security import TransportSecuritySettings

        from .serving import listen, run

        sock = listen("127.0.0.1", port)  # a taken port: one clear line, not uvicorn's error and exit 3
        echo(f"gitmem mcp: serving {os.path.abspath(path)} on http://127.0.0.1:{sock.getsockname()[1]}/mcp "
             "(Ctrl-C stops)")
        sdk_check = TransportSecuritySettings(enable_dns_rebinding_protection=False)  # loopback_only's instead
        run(loopback_only(checked_posts(server.streamable_http_app(transport_security=sdk_check))), sock)
    else:
        import anyio

        try:
            anyio.run(_serve_stdio, server)
        except Exception as e:  # noqa: BLE001 - re-raised unless it is only the client's end
            if not _only_broken_pipes(e):  # else the client went away (killed mid-call): the session's end,
                raise  # not a crash; the writes it asked for were made


def _only_broken_pipes(e: BaseException) -> bool:
    """Whether ``e`` (a plain error, or the exception group anyio raises) is nothing but writes to a closed pipe."""
    inner = getattr(e, "exceptions", None)
    if inner is None:
        return isinstance(e, BrokenPipeError)
    return all(_only_broken_pipes(x) for x in inner)


def loopback_only(app: Any) -> Any:
    """``app`` answering only a loopback Host and Origin, by the rule the web UI and the router use
    (:func:`gitmem.serving.refusal`): a page that rebinds its DNS name to 127.0.0.1 must not reach the memory.
    The SDK's own check, turned off for it, takes any Host that starts with ``localhost:``."""
    from .serving import scope_refusal

    async def guarded(scope: Dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            problem = scope_refusal(scope)
            if problem:
                await send({"type": "http.response.start", "status": 403,
                            "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
                await send({"type": "http.response.body", "body": problem.encode("utf-8") + b"\n"})
                return
        await app(scope, receive, send)

    return guarded


def checked_posts(app: Any) -> Any:
    """``app`` with each POST's body checked as a stdio line is (:func:`check_request_line`): the SDK took an id
    that is a list, 1.5 or true as a notification (202, and the client waited for ever) and answered a message of
    the wrong shape with pydantic's many lines. Such a body gets its JSON-RPC error as a 400; a malformed
    notification a 202, as a notification does; a body over the API's size limit a 413."""
    from .serving import TOO_LARGE, read_body

    async def checked(scope: Dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        body = await read_body(scope, receive)
        if body is None:
            return await _answer(send, 413, {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32600, "message": f"Invalid Request: {TOO_LARGE}"}})
        error, _ = check_request_line(body.decode("utf-8", "surrogateescape"))
        if error is not None:
            return await _answer(send, 400 if error else 202, error or None)
        sent = False

        async def replay() -> Dict[str, Any]:  # the body once, then the client's own events (its disconnect)
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await app(scope, replay, send)

    return checked


async def _answer(send: Any, status: int, message: Optional[Dict[str, Any]]) -> None:
    body = json.dumps(message).encode("utf-8") if message else b""
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json")] if body else []})
    await send({"type": "http.response.body", "body": body})


def check_request_line(line: str) -> Tuple[Optional[Dict[str, Any]], Any]:
    """(None, the message) when the SDK can take ``line`` (a stdio line, an HTTP body); else the JSON-RPC error
    reply it must get instead.

    The SDK drops a line it cannot parse or validate without a word, so a client waits for ever.
    Three cases get a reply here: not JSON (-32700, id null), a lone surrogate anywhere (-32602,
    which the SDK's parser refuses and no tool could store; bytes that are no UTF-8 arrive as ones), and a
    message the SDK's schema refuses (-32600). A notification (no id) that is malformed is dropped, as JSON-RPC says."""
    from mcp.server import stdio as sdk_stdio

    from .serving import lone_surrogate

    try:
        data = json.loads(line)
    except ValueError:
        return {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error: not JSON"}}, None
    request_id = data.get("id") if isinstance(data, dict) else None
    if not _valid_id(request_id):
        request_id = None
    problem = None
    if isinstance(data, dict) and data.get("id") is not None and request_id is None:
        # The SDK takes a list, an object, 1.5 or true as an id (or as no id at all) and then fails on it.
        problem = (-32600, "Invalid Request: an id must be a string or an integer")
    elif lone_surrogate(data):
        problem = (-32602, "Invalid params: text that is not valid UTF-8 (a lone surrogate)")
    else:
        try:
            sdk_stdio.types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except Exception:  # noqa: BLE001 - whatever the SDK's schema refuses
            problem = (-32600, "Invalid Request: not a JSON-RPC 2.0 message the server understands")
    if problem is None:
        return None, data
    if request_id is None and isinstance(data, dict) and "method" in data and "id" not in data:
        return {}, data  # a malformed notification: no reply, but not passed on either
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": problem[0], "message": problem[1]}}, data


def _valid_id(value: Any) -> bool:
    """A JSON-RPC id the server answers by: a string or an integer (not a bool, a float, a list or an object)."""
    return isinstance(value, (int, str)) and not isinstance(value, bool)


#: On end of input, how long the server waits for the requests it is still answering (a tool call that
#: writes is answered before the server exits, so a client that closed its side early still learns the id).
DRAIN_SECONDS = 60.0


class _CheckedStdin:
    """The wire's stdin for the SDK: lines it can take pass on; the others are answered here. End of input
    is passed on only once every request passed on has been answered: the SDK cancels what is still running
    then, and a write a tool had made would go unreported."""

    def __init__(self, stream: Any):
        import anyio

        self.stream = stream
        self.reply: Any = None
        self.pending: set = set()  # ids of requests passed on and not answered yet
        self.answered = anyio.Event()

    def __aiter__(self) -> "_CheckedStdin":
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self.stream.readline()
            if not line:
                await self._drain()
                raise StopAsyncIteration
            if not line.strip():
                continue
            error, message = check_request_line(line)
            if error is None:
                self._track(message)
                return line
            if error and self.reply is not None:
                await self.reply(error)

    def _track(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        if "method" in message and _valid_id(message.get("id")):
            self.pending.add(message["id"])
        elif message.get("method") == "notifications/cancelled":  # the SDK answers a cancelled request not at all
            cancelled = (message.get("params") or {}).get("requestId")
            if _valid_id(cancelled):
                self.pending.discard(cancelled)

    def sent(self, message: Any) -> None:
        """Called with each message the server writes: a response or error settles its request."""
        inner = getattr(message, "root", message)
        if hasattr(inner, "id") and not hasattr(inner, "method"):
            self.pending.discard(inner.id)
            self.answered.set()

    async def _drain(self) -> None:
        import anyio

        with anyio.move_on_after(DRAIN_SECONDS):
            while self.pending:
                await self.answered.wait()
                self.answered = anyio.Event()


class _Sending:
    """The write stream the SDK is given: each message goes on, and ``stdin`` learns which requests it answers."""

    def __init__(self, stream: Any, stdin: _CheckedStdin):
        self.stream, self.stdin = stream, stdin

    async def send(self, item: Any) -> None:
        await self.stream.send(item)
        self.stdin.sent(item.message)

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def __aenter__(self) -> "_Sending":
        await self.stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self.stream.__aexit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


async def _serve_stdio(server: Any) -> None:
    """``server.run("stdio")``, except that every request line gets a reply (see :func:`check_request_line`).

    Like the SDK, fd 0 is pointed at the null device while serving, so a child process never reads
    the wire (stdout keeps the SDK's own protection)."""
    from io import TextIOWrapper

    import anyio
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage
    from mcp.types import JSONRPCError

    wire = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    # bytes that are no UTF-8 become lone surrogates, which check_request_line refuses: replaced by U+FFFD,
    # a client's Latin-1 "café" was stored as "caf\ufffd" with no word
    stdin = _CheckedStdin(anyio.wrap_file(TextIOWrapper(os.fdopen(wire, "rb"), encoding="utf-8",
                                                        errors="surrogateescape")))
    lowlevel = server._lowlevel_server
    async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]
        async def reply(error: Dict[str, Any]) -> None:
            await write_stream.send(SessionMessage(JSONRPCError.model_validate(error)))

        stdin.reply = reply
        await lowlevel.run(read_stream, _Sending(write_stream, stdin),
                           lowlevel.create_initialization_options())


def tool_schema_tokens(server: Any = None) -> int:
    """Tokens an agent pays per request for gitmem's tool names, descriptions and schemas."""
    import anyio

    from .tokens import count_tokens

    server = server or build_server()
    tools = anyio.run(server.list_tools)
    return sum(count_tokens(t.name + (t.description or "") + json.dumps(t.input_schema, separators=(",", ":")))
               for t in tools)
