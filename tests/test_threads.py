"""One Store shared by the threads of one process: every write lands, every read answers, nothing hangs."""

from __future__ import annotations

import faulthandler
import threading
import traceback

from gitmem import Store
from gitmem.recall import recall

THREADS = 4
ROUNDS = 40  # each round: an add, a list, a search and a get (640 calls in all)
#: Seconds the threads may take (about 8 on a busy machine) before the test process ends with every thread's stack:
#: a deadlock holding the GIL (libgit2's lock on one handle, taken by one thread and awaited by another) leaves
#: no Python thread able to time out a join.
DEADLINE = 120


def test_threads_sharing_one_store_lose_nothing_and_never_hang(repo):
    store = Store.open(str(repo))
    added = {n: [] for n in range(THREADS)}
    failures = []
    start = threading.Barrier(THREADS)

    def work(n: int) -> None:
        try:
            start.wait()
            for i in range(ROUNDS):
                w = store.add("fact", f"thread {n} queue fact {i}", tags=[f"t{n}"], source="test")
                added[n].append(w.memory.id)
                assert [m.id for m in store.list(tag=f"t{n}")] == added[n]  # ids sort by time: oldest first
                assert any(h.memory.text.startswith("thread") for h in recall(store, "queue fact", paths=[]))
                assert store.get(w.memory.id).text == f"thread {n} queue fact {i}"
        except BaseException:
            failures.append(traceback.format_exc())

    threads = [threading.Thread(target=work, args=(n,), daemon=True) for n in range(THREADS)]
    faulthandler.dump_traceback_later(DEADLINE, exit=True)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        faulthandler.cancel_dump_traceback_later()
    assert not failures, failures[0]
    every = {i for ids in added.values() for i in ids}
    assert len(every) == THREADS * ROUNDS  # no id made twice
    assert every == set(store.memories())
