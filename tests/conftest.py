"""Hermetic fixtures: no real home, no global or system git config, no network.

Scrubbed at import (before pygit2 reads any config), as dulwich's and
pygit2's own suites do.
"""

from __future__ import annotations

import faulthandler
import os
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path

for _key in list(os.environ):
    if _key == "GITMEM_LOAD_SECONDS":  # a test setting (tests/test_load.py), not gitmem configuration
        continue
    if _key.startswith(("GIT_", "GITMEM_")) or _key in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        del os.environ[_key]
# Recall is lexical unless a test asks for the encoder (tests/test_recall.py, tests/test_embedding.py): loading
# the model costs every gitmem process a second or more, and most tests are about something else.
os.environ["GITMEM_ENCODER"] = "none"
# Command servers the installed script starts (a real Claude Code's hooks, tests/test_cmdserver.py) listen in this
# run's own directory, never beside a developer's, and are stopped when the run ends (_stop_command_servers).
os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="gm-run-")
_HOME = tempfile.mkdtemp(prefix="gitmem-test-home-")
os.environ["HOME"] = _HOME
os.environ["XDG_CONFIG_HOME"] = os.path.join(_HOME, ".config")
os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
os.environ["GIT_CONFIG_GLOBAL"] = os.path.join(_HOME, ".gitconfig")
# git's automatic gc detaches by default and may still be packing (and removing loose objects it packed)
# while a test runs `git fsck`, which then reports objects vanishing under it; run it in the foreground.
with open(os.environ["GIT_CONFIG_GLOBAL"], "w") as _f:
    _f.write("[gc]\n\tautoDetach = false\n")
os.environ["GIT_AUTHOR_NAME"] = os.environ["GIT_COMMITTER_NAME"] = "Test Human"
os.environ["GIT_AUTHOR_EMAIL"] = os.environ["GIT_COMMITTER_EMAIL"] = "human@example.com"

import pygit2  # noqa: E402
import pytest  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402

# The property tests draw the same examples on every run, so the suite passes or fails alike on every machine
# (CI lands nothing on a failure drawn by chance); `pytest --hypothesis-profile explore` draws new ones each run,
# as CI's draw did when it found -0.0 written as 0.0 by gitmem.jsontext.
hypothesis_settings.register_profile("default", derandomize=True)
hypothesis_settings.register_profile("explore", derandomize=False)
hypothesis_settings.load_profile("default")

for _level in (pygit2.enums.ConfigLevel.GLOBAL, pygit2.enums.ConfigLevel.XDG, pygit2.enums.ConfigLevel.SYSTEM):
    pygit2.settings.search_path[_level] = _HOME

ROOT = Path(__file__).resolve().parent.parent
GITMEM = [sys.executable, "-m", "gitmem"]
_IN_PROCESS = threading.Lock()
#: A repository guide long enough (~10,000 tokens) to be cacheable on every model.
GUIDE = "# Guide\n\n" + "\n".join(
    f"## Rule {i}\nLedger writes for payment {i} are idempotent and retried with backoff." for i in range(400)
)


#: Host headers naming this machine's loopback, and near misses a local server must refuse (web UI, router).
LOOPBACK_HOSTS = ["127.0.0.1", "127.0.0.1:8765", "localhost:1234", "LocalHost", "[::1]:80", "[::1]"]
FOREIGN_HOSTS = ["127.0.0.1:x@evil", "[::1]evil", "[::1]:80evil", "127.0.0.1:", "127.0.0.1:80:80", "localhost.",
                 "127.0.0.1 evil", "::1", "[::1", "[127.0.0.1]", ""]


def processes_naming(text: str) -> list:
    """The pids of this user's processes whose command line holds ``text`` (as `pgrep -f`, which a minimal
    machine may lack), this one left out."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if text.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            pass
    return found


@pytest.fixture(scope="session", autouse=True)
def _stop_command_servers():
    yield
    for pid in processes_naming(os.environ["XDG_RUNTIME_DIR"]):
        try:
            os.kill(pid, 15)
        except OSError:
            pass


def git(cwd, *args, check=True, env=None, input=None) -> str:
    """Run the real git executable; returns stdout."""
    result = subprocess.run(["git", *args], cwd=str(cwd), capture_output=True, text=True,
                            env={**os.environ, **(env or {})}, input=input)
    if check and result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {result.stderr}")
    return result.stdout


def gitmem(cwd, *args, check=True, env=None, input=None, timeout=None) -> subprocess.CompletedProcess:
    """Run the gitmem CLI in this process, in ``cwd``, as a subprocess would see it (exit code, stdout,
    stderr, a traceback on stderr for an uncaught exception). A call still running after ``timeout``
    seconds ends this test process with every thread's stack on stderr: a hang fails, loudly.

    A new Python process costs a few hundred milliseconds of imports, most of the suite's time when
    every CLI call paid it. Tests about the process itself (startup imports, signals, servers that
    must not block the test) use :func:`gitmem_process`."""
    from click.testing import CliRunner

    from gitmem.cli import main
    from gitmem.warm import forget_warm

    with _IN_PROCESS:  # the working directory is per process: one CLI call at a time
        before = os.getcwd()
        os.chdir(cwd)
        if timeout is not None:
            faulthandler.dump_traceback_later(timeout, exit=True)
        try:
            ran = CliRunner().invoke(main, [str(a) for a in args], input=input, env=env, prog_name="gitmem")
        finally:
            faulthandler.cancel_dump_traceback_later()
            os.chdir(before)
            # A process ends here: drop the per-repository caches a long-lived process keeps (and close the
            # index they hold open). Not gc.collect(): in a worker that has run hundreds of tests, a full
            # collection per call costs more than the process start it replaces.
            forget_warm()
    stderr = ran.stderr
    if ran.exception is not None and not isinstance(ran.exception, SystemExit):
        stderr += "".join(traceback.format_exception(*ran.exc_info))  # what the interpreter would print
    return _checked(subprocess.CompletedProcess([*GITMEM, *args], ran.exit_code, ran.stdout, stderr), args, check)


def gitmem_process(cwd, *args, check=True, env=None, input=None, timeout=None) -> subprocess.CompletedProcess:
    """Run the gitmem CLI as a real subprocess."""
    result = subprocess.run([*GITMEM, *args], cwd=str(cwd), capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, input=input)
    return _checked(result, args, check)


def _checked(result: subprocess.CompletedProcess, args, check: bool) -> subprocess.CompletedProcess:
    if check and result.returncode != 0:
        raise AssertionError(f"gitmem {' '.join(map(str, args))} exited {result.returncode}: {result.stderr}")
    return result


DAMAGES = ["a missing object", "a tree", "a blob"]


def damage_ref(repo: Path, ref: str, damage: str) -> None:
    """Point ``ref`` at a missing object, or at HEAD's tree or a blob of it (objects that are no commit), as
    a disk error, a hand edit or a stray `git update-ref` leaves a ref (one of :data:`DAMAGES`)."""
    if damage == "a missing object":
        (repo / ".git" / ref).parent.mkdir(parents=True, exist_ok=True)  # a loose ref wins over packed-refs
        (repo / ".git" / ref).write_text("1234567890" * 4 + "\n")
    else:
        git(repo, "update-ref", ref, git(repo, "rev-parse", "HEAD^{tree}" if damage == "a tree"
                                         else "HEAD:README.md").strip())


def make_repo(path: Path, commit: bool = True, branch: str = "main") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", branch)
    git(path, "config", "user.name", "Test Human")
    git(path, "config", "user.email", "human@example.com")
    if commit:
        (path / "README.md").write_text("# sample\n")
        git(path, "add", "README.md")
        git(path, "commit", "-q", "-m", "initial")
    return path


def make_origin(tmp_path: Path) -> Path:
    """A bare repository holding one code commit on main, as a team's server would."""
    seed = make_repo(tmp_path / "seed")
    bare = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(seed, "push", "-q", str(bare), "main")
    return bare


def clone(origin: Path, path: Path, name: str) -> Path:
    """A teammate's clone of ``origin`` at ``path``, committing as ``name``."""
    git(path.parent, "clone", "-q", str(origin), path.name)
    git(path, "config", "user.name", name)
    git(path, "config", "user.email", f"{name.lower()}@example.com")
    return path


@pytest.fixture
def repo(tmp_path) -> Path:
    """A real repository with one commit on main."""
    return make_repo(tmp_path / "repo")


@pytest.fixture
def empty_repo(tmp_path) -> Path:
    """A real repository with no commits yet."""
    return make_repo(tmp_path / "empty", commit=False)


@pytest.fixture
def store(repo):
    from gitmem import Store

    return Store.open(str(repo))


def conflicted(repo):
    """main, and the id of a decision main ("Use Postgres 16") and branch feature ("Use Postgres 15") both
    changed: merging feature's memory into main leaves its conflict pending there."""
    from gitmem.model import Author
    from gitmem.store import Store

    main = Store.open(str(repo), "main")
    shared = main.add("decision", "Use Postgres", author=Author("Alice", "alice@example.com", "human")).memory
    git(repo, "branch", "feature")
    Store.open(str(repo), "feature").edit(shared.id, text="Use Postgres 15")
    main.edit(shared.id, text="Use Postgres 16")
    return main, shared.id


class ReadSpy(pygit2.OdbBackend):
    """Ahead of every other backend: counts the objects libgit2 is asked to read, then lets the next answer."""

    def __init__(self):
        super().__init__()
        self.reads = 0

    def read_cb(self, oid):
        self.reads += 1
        raise KeyError(str(oid))

    def read_prefix_cb(self, prefix):
        raise KeyError(prefix)

    def read_header_cb(self, oid):
        raise KeyError(str(oid))

    def exists_cb(self, oid):
        return False


def seeded(repo: Path, n: int):
    """A store of ``n`` memories on five topics in one commit (one id a millisecond, oldest first), a
    convention every 500: a large store made in a moment."""
    from gitmem.model import Author, Memory, dump_yaml, memory_path, new_id
    from gitmem.store import Store

    store = Store.open(str(repo))
    who = Author("Seed", "seed@example.com", "human")
    topics = ["billing invoices", "search ranking", "deploy pipeline", "auth sessions", "image uploads"]
    updates = {}
    for i in range(n):
        kind = "convention" if i % 500 == 0 else "fact"
        m = Memory(id=new_id(1_760_000_000_000 + i), type=kind, author=who, source="test",
                   created="2026-01-01T00:00:00Z",
                   text=f"Note {i} about {topics[i % len(topics)]}: detail {i * 7919 % 10007}")
        updates[memory_path(m)] = dump_yaml(m)
    store.move_ref(None, store.commit_tree(updates, "seed", who, base=None), "seed")
    return store
