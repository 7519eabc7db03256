"""Local servers: a taken port is one clear error before anything claims to be serving."""

import os
import socket

import pytest
from conftest import gitmem_process


@pytest.mark.parametrize("argv", [["ui"], ["emulator", "serve"], ["router", "serve"], ["mcp", "--http"]])
def test_a_taken_port_is_one_error_and_nothing_says_it_is_serving(repo, argv):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        result = gitmem_process(repo, *argv, "--port", str(port), check=False, timeout=60)  # serving would block
    finally:
        taken.close()
    assert result.returncode == 1
    expected = f"Error: cannot listen on 127.0.0.1:{port}: Address already in use (choose another with --port)"
    assert result.stderr.strip() == expected
    assert "serving" not in result.stdout + result.stderr and "http://" not in result.stdout


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_a_port_out_of_range_is_one_error(repo, port):
    for argv in (["ui"], ["emulator", "serve"]):
        result = gitmem_process(repo, *argv, "--port", port, check=False, timeout=60)
        assert result.returncode in (1, 2) and "Traceback" not in result.stderr, argv
        assert len(result.stderr.strip().splitlines()) <= 3 and "port" in result.stderr, argv


def test_the_library_runs_on_one_thread_whichever_thread_asks():
    """A server's handlers run on anyio's worker threads, each with a malloc arena of its own: the library's
    calls all run on one thread, so its caches fill one arena (bench/README, server memory)."""
    import threading

    from gitmem.errors import GitmemError
    from gitmem.serving import on_library_thread

    def where():
        return threading.current_thread().ident

    seen = set()
    askers = [threading.Thread(target=lambda: seen.add(on_library_thread(where))) for _ in range(8)]
    for t in askers:
        t.start()
    for t in askers:
        t.join()
    assert len(seen) == 1 and threading.current_thread().ident not in seen
    assert on_library_thread(lambda: on_library_thread(where)) in seen  # a nested call runs there, no deadlock

    def fails():
        raise GitmemError("no such memory")

    with pytest.raises(GitmemError, match="no such memory"):
        on_library_thread(fails)


def test_threads_sharing_a_store_through_the_library_thread_lose_no_write_and_read_the_latest(repo):
    """The README's recipe for a threaded program (a shared Store called from four threads at once hung in
    libgit2, and separate Stores in threads broke the shared index): every write lands, every read is current."""
    import threading

    from gitmem import Store
    from gitmem.recall import recall
    from gitmem.serving import on_library_thread

    store = Store.open(str(repo))
    failures = []

    def writer(n):
        try:
            for i in range(5):
                w = on_library_thread(store.add, "note", f"thread {n} note {i}")
                assert w.memory in on_library_thread(store.list, limit=5)
                on_library_thread(recall, store, "note thread")
        except Exception as e:  # any failure, reported below
            failures.append(repr(e))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert failures == [] and not any(t.is_alive() for t in threads)
    assert len(Store.open(str(repo)).list(type="note")) == 20


def test_the_servers_default_ports_differ_so_all_can_run_at_once():
    """An offline Claude Code session runs the emulator, the router and an MCP server over HTTP together."""
    from gitmem.cli import main

    def port_of(*names: str) -> int:
        command = main
        for name in names:
            command = command.get_command(None, name)  # type: ignore[attr-defined]
        return next(p.default for p in command.params if p.name == "port")

    ports = [port_of("ui"), port_of("emulator", "serve"), port_of("router", "serve"), port_of("mcp")]
    assert len(set(ports)) == 4, ports


def test_a_servers_warm_up_brings_the_index_to_the_tip_without_listing_every_memory(repo, monkeypatch):
    """A server starts by bringing the branch's index view to the tip, so its first call finds it there; it read
    every memory's row into a dict it then dropped (0.1 s at 100,000, which the first call waited for)."""
    import sqlite3

    from conftest import seeded
    from gitmem import postings, serving

    store = seeded(repo, 50)
    store.add("fact", "written since the index last saw the tip")
    index = repo / ".git" / "gitmem"
    for name in os.listdir(index):  # as a clone finds it: no derived index yet
        os.remove(index / name)
    listed = []
    real = postings.members
    monkeypatch.setattr(postings, "members", lambda *a, **k: listed.append(a) or real(*a, **k))

    serving.warm_up(str(repo))
    serving.on_library_thread(lambda: None)  # the warm-up queued before it is done

    with sqlite3.connect(f"file:{index / 'index.sqlite'}?mode=ro", uri=True) as db:
        views = db.execute("SELECT ref, tree FROM views").fetchall()
    assert views == [("refs/memory/main", store.tree_of(store.tip()))]
    assert listed == []
