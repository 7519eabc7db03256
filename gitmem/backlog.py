"""The semantic-recall backlog: memories no vector has been computed for yet, embedded in the background.

An agent's path (the MCP server, the Claude Code prompt hook, the web UI) answers by words alone while more
memories wait to be embedded than its :data:`gitmem.recall.AGENT_BUDGET` (about a second of CPU) covers: at about
65 ms of a core each, it cannot wait for them (nor can a person's `gitmem search` or `check` past
:data:`gitmem.recall.PERSON_BUDGET`), nor for any while that process embeds them (:func:`allowance`).
Before, nothing on those paths ever embedded them, so a teammate's new clone, or a pull that brought a hundred
memories, kept every agent on words alone until a person happened to run `gitmem search`, and that search
embedded it all before it answered, silently (an hour for a fresh clone of 100,000). Such a path or command now
starts, when it answered by words for that reason, one process per repository at the lowest CPU priority that
embeds the whole backlog (:func:`gitmem.recall.embed_backlog`) and exits: later calls find the vectors in the
index. A second start while one runs does nothing (an exclusive lock on
``<git dir>/gitmem/embed.lock``); its one line of outcome is appended to ``<git dir>/gitmem/embed.log``.
`gitmem embed` takes the same lock (:func:`embed`), so it waits for such a process rather than compute the
same vectors beside it.
"""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator, Optional

from .errors import GitmemError

if TYPE_CHECKING:
    from .recall import Budget
    from .store import Store

LOCK = "embed.lock"
LOG = "embed.log"


def _folder(store: "Store") -> Optional[str]:
    """The folder of the store's derived index, made if need be (None: it has none, so nothing keeps vectors)."""
    path = store.warm.index.path
    if path is None:
        return None
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:  # a repository gitmem cannot write (read-only, or damaged): it runs without the index, and
        return None  # so without its vectors
    return folder


@contextmanager
def _locked(folder: str, waiting: Optional[Callable[[], None]] = None) -> Iterator[Optional[int]]:
    """The file descriptor holding the folder's embedding lock, held inside (None: another process holds it).
    A process that inherits the descriptor holds the lock with it, until every copy is closed. Where there is
    no flock (Windows) it is never this process's: no embedding starts there. With ``waiting``, a lock another
    process holds is waited for, after ``waiting`` is called to say so."""
    try:
        import fcntl
    except ImportError:
        yield None
        return
    try:
        fd = os.open(os.path.join(folder, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise GitmemError(f"cannot open the embedding lock {os.path.join(folder, LOCK)}: {e.strerror or e}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            if waiting is None:
                yield None
                return
            waiting()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def running(folder: str) -> bool:
    """Whether a process embeds this index folder's backlog now (not where the lock cannot be opened: no
    process of gitmem's can hold it there either, and a search must not fail for it)."""
    try:
        with _locked(folder) as fd:
            return fd is None
    except GitmemError:
        return False


def allowance(store: "Store", ms: float) -> "Budget":
    """What one call over ``store`` may spend embedding inline (:class:`gitmem.recall.Budget`): ``ms``, or nothing
    while a process embeds the backlog (the call would compute the same vectors beside it, on the same cores)."""
    from .recall import Budget

    def busy() -> bool:
        folder = _folder(store)
        return folder is not None and running(folder)

    return Budget(ms, busy)


def start(store: "Store") -> bool:
    """Start embedding the backlog of ``store``'s memory in a detached process at the lowest priority, unless
    one runs already; whether one was started. No caller waits for it (a daemon thread reaps it), and it
    outlives this process. The lock is taken here and handed to the process, so two calls in a row never start
    two."""
    import subprocess

    folder = _folder(store)
    if folder is None:
        return False
    with _locked(folder) as fd:
        if fd is None:
            return False
        where = store.repo.workdir or store.repo.path
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # where gitmem is imported from
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}
        with open(os.path.join(folder, LOG), "ab") as log:
            process = subprocess.Popen([sys.executable, "-c", "from gitmem.backlog import _serve; _serve()", where,
                                        store.branch], stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                       start_new_session=True, pass_fds=(fd,))
    # Reaped as it exits: a long-lived server (MCP, the web UI) that starts no other process kept it <defunct>.
    threading.Thread(target=process.wait, name="gitmem-backlog-reaper", daemon=True).start()
    return True


def start_if_waiting(store: "Store") -> Optional[int]:
    """After an agent's path or a person's command answered: :func:`start` when it went without vectors for want
    of them; how many memories wait then (:func:`gitmem.recall.waiting`), else None. A process that cannot be
    started leaves the next call to try again; the answer given stands either way."""
    from .recall import waiting

    behind = waiting(store)
    if behind:
        try:
            start(store)
        except (OSError, GitmemError):
            pass
    return behind


def embed(store: "Store", waiting: Callable[[], None] = lambda: None) -> Optional[int]:
    """Embed the whole backlog in this process (:func:`gitmem.recall.embed_backlog`'s answer), holding the lock a
    background embedding holds: while one runs, ``waiting`` is called and this waits for it to finish, then
    embeds what is left (nothing, unless it failed or memories came since), never the same vectors beside it."""
    from .recall import embed_backlog

    folder = _folder(store)
    if folder is None:
        return embed_backlog(store)
    with _locked(folder, waiting):
        return embed_backlog(store)


def _serve() -> None:
    """The detached process, holding the lock :func:`start` handed it (the descriptor it inherited stays open
    until it exits): embed the backlog of the branch's memory, and say in one line what it did or why not."""
    import time

    from .recall import embed_backlog
    from .store import Store

    try:
        os.nice(19)  # an agent's own work comes first
    except OSError:
        pass
    path, branch = sys.argv[1], sys.argv[2]
    started = time.monotonic()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        store = Store.open(path, branch)
        done = embed_backlog(store)
    except (GitmemError, OSError) as e:
        print(f"{stamp} gitmem: memory of {branch!r} in {path}: not embedded: {e}", flush=True)
        return
    what = "no encoder, nothing to embed" if done is None else f"computed {done} vectors for semantic recall"
    print(f"{stamp} gitmem: {store.ref}: {what} in {time.monotonic() - started:.1f} s", flush=True)
