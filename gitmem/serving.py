"""Listening sockets for gitmem's local servers (web UI, emulator, router), the one thread a
long-lived server runs the library on, and what the emulator and the router both refuse in a request
body as the API does (over its size limit, a lone surrogate).

The socket is bound before a server says it is serving, so a port that is taken is one clear
error instead of a "serving ..." line followed by uvicorn's exit.
"""

from __future__ import annotations

import re
import socket
import threading
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, List, Literal, Optional, TypeVar

from .errors import GitmemError

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

T = TypeVar("T")
_LIBRARY: Optional["ThreadPoolExecutor"] = None
_LIBRARY_LOCK = threading.Lock()


def on_library_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` run on the one thread this process runs the library on, waited for.

    The MCP SDK and Starlette run a synchronous handler on whichever of anyio's worker threads is
    free, and glibc's malloc gives each thread an arena of its own: a server's calls then filled and
    emptied the process's caches (tree entries, SQLite's pages, parsed blobs) in three or four arenas
    in turn, and each arena kept its high-water mark, free but resident (the MCP server over 100,000
    writes: 115 MB at 10,000, 172 MB at 100,000, 51 MB of it free in the workers' arenas). On one
    thread the library's memory is one arena's (the library itself is safe to call from several)."""
    if threading.current_thread().name.startswith("gitmem-library"):
        return fn(*args, **kwargs)  # already there (a handler calling another)
    return _library().submit(fn, *args, **kwargs).result()


def _library() -> "ThreadPoolExecutor":
    global _LIBRARY
    if _LIBRARY is None:
        from concurrent.futures import ThreadPoolExecutor

        with _LIBRARY_LOCK:
            if _LIBRARY is None:
                _LIBRARY = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gitmem-library")
    return _LIBRARY


def warm_up(path: str, branch: Optional[str] = None) -> None:
    """Queue on the library's thread, not waited for, what a server's first call reads: the summaries and
    the search postings of the branch's memory. After a clone or a pull that is the whole store (at 100,000
    memories about 11 s), which the agent's first recall would otherwise wait for; on a warm index it costs
    milliseconds. A call that comes meanwhile waits its turn on that thread, no longer than it would have."""
    _library().submit(_warm, path, branch)


def _warm(path: str, branch: Optional[str]) -> None:
    from . import postings
    from .store import Store

    try:
        store = Store.open(path, branch)
        store.summary()
        tip = store.tip()
        if tip is not None:  # the view brought to the tip, reading none of its rows (all of them: 0.1 s at 100,000)
            postings.IndexedMemories(store, tip).answers()
    except (GitmemError, OSError):
        pass  # the first call meets it again, and says it to the client


#: A Host header (RFC 9110: host, optionally ``:port``) naming this machine's loopback, and nothing after it.
_LOOPBACK_HOST = re.compile(r"(?:127\.0\.0\.1|localhost|\[::1\])(?::[0-9]{1,5})?", re.IGNORECASE)


def scope_refusal(scope: Dict[str, Any], same_origin: bool = False) -> Optional[str]:
    """:func:`refusal` of an ASGI HTTP request, from its Host and Origin headers."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
    return refusal(headers.get("host"), headers.get("origin"), same_origin)


def refusal(host: Optional[str], origin: Optional[str], same_origin: bool = False) -> Optional[str]:
    """Why a request to a local server must be refused (a Host or Origin that is not this machine's loopback
    name: a page that rebinds its DNS name to 127.0.0.1 would read the team's memory), or None.
    ``same_origin``: an Origin must also be the server's own (``http://`` and the Host), as a page's own
    forms send it: another port on this machine is another site (a dev server, a tool's page).

    Both are matched whole against the forms a client sends, not picked apart: a lenient parse reads
    ``127.0.0.1:x@evil`` or ``[::1]evil`` as loopback."""
    if not host or not _LOOPBACK_HOST.fullmatch(host.strip()):
        return f"refused: Host {host or '(none)'!r} is not this machine's loopback address"
    if origin is not None:
        scheme, _, rest = origin.partition("://")
        if scheme.lower() not in ("http", "https") or not _LOOPBACK_HOST.fullmatch(rest):
            return f"refused: Origin {origin!r} is not this machine's loopback address"
        if same_origin and (scheme.lower() != "http" or rest.lower() != host.strip().lower()):
            return f"refused: Origin {origin!r} is another site than this one (http://{host.strip()})"
    return None


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (0: a free port), or a one-line error naming the port."""
    if not 0 <= port <= 65535:
        raise GitmemError(f"cannot listen on {host}:{port}: a port is 0-65535 (0: any free one)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)  # connections wait from the moment the address is printed, not once uvicorn has started
    except OSError as e:
        sock.close()
        raise GitmemError(f"cannot listen on {host}:{port}: {e.strerror or e} (choose another with --port)") from None
    return sock


def run(app: Any, sock: socket.socket, log_level: str = "warning",
        lifespan: Literal["auto", "on", "off"] = "auto") -> None:
    """Serve ``app`` on an already bound socket until interrupted."""
    import uvicorn

    uvicorn.Server(uvicorn.Config(app, log_level=log_level, lifespan=lifespan)).run(sockets=[sock])


#: What a server answers for a body :func:`lone_surrogate` finds one in (the API's words for a body it cannot read).
LONE_SURROGATE = ("There was an error parsing the body of your request: it holds a lone surrogate (\\ud800-\\udfff), "
                  "which is not valid UTF-8.")


def lone_surrogate(value: Any) -> bool:
    """Whether parsed JSON holds a lone surrogate anywhere: ``"\\ud800"`` is valid JSON and no valid UTF-8,
    so a server refuses it as the client's error, or encoding the text later fails as the server's."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(lone_surrogate(k) or lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(lone_surrogate(v) for v in value)
    return False


#: The Messages API's request size limit (https://platform.claude.com/docs/en/api/overview), which the emulator
#: and the router both keep.
MAX_REQUEST_BYTES = 32 * 1024 * 1024
#: The API's 413 request_too_large message.
TOO_LARGE = "Request exceeds the maximum allowed number of bytes."


async def read_body(scope: Dict[str, Any], receive: Callable[[], Awaitable[Dict[str, Any]]],
                    limit: int = MAX_REQUEST_BYTES) -> Optional[bytes]:
    """An ASGI HTTP request's body, or None if it is over ``limit`` bytes.

    A Content-Length over the limit is refused before a byte of the body is read; a body without one (chunked)
    is counted as it arrives, and reading stops at the piece that passes the limit. So a client holds at most
    ``limit`` bytes of a server's memory, however much it sends (uvicorn drops the rest once the answer is sent).
    """
    declared = dict(scope.get("headers", [])).get(b"content-length", b"")
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks: List[bytes] = []
    size, more = 0, True
    while more:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)
