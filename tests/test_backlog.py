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
