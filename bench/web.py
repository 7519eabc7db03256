"""Web UI benchmarks: page times at 100 vs 10,000 writes (one commit per write), side by side.

Run: python bench/web.py [--sizes 100,10000] [--json]
Target (issue 8): the audit trail's first page at 10,000 writes / at 100 writes <= 4. A page parses
the trailers of one page of commits only; what grows is libgit2's topological pre-pass over commit
headers (about 2.5 us a commit, in C), the price of an exact newest-first order with each commit's
branches across forks and merges. The memory page is listed for reference: it shows the newest 50
from the tree's summary, and a search is answered by the index (at 100,000 memories
`bench/server_memory.py --server ui` measures the server's memory).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import AUTHOR, TYPES, median_time, sample_repo, sizes_main  # noqa: E402

from gitmem import Author, Store  # noqa: E402
from gitmem.model import Memory, dump_yaml, memory_path, new_id, utc_now  # noqa: E402
from gitmem.audit import commit_message  # noqa: E402

HUMAN = Author("bench human", "human@example.com", "human")


def history(n: int) -> str:
    """A repository whose refs/memory/main has ``n`` write commits (agents and people, several sources)."""
    store = Store.open(sample_repo(f"web-{n}"))
    tip = None
    base_ms = 1_760_000_000_000
    for i in range(n):
        who = AUTHOR if i % 3 else HUMAN
        source = ("mcp:claude", "cli", "hook")[i % 3]
        m = Memory(id=new_id(base_ms + i), type=TYPES[i % len(TYPES)], author=who, source=source,
                   created=utc_now(), text=f"Write {i}: the service {i % 97} retries queue {i % 13}")
        tip = store.commit_tree({memory_path(m): dump_yaml(m)}, commit_message("add", m, who, source, 0, None), who,
                               base=tip)
    store.move_ref(None, tip, "bench seed")
    return store.repo.workdir


def run(sizes=(100, 10_000)) -> dict:
    from starlette.testclient import TestClient

    from gitmem.web import create_app

    clients = {n: TestClient(create_app(history(n)), base_url="http://127.0.0.1:8737") for n in sizes}
    pages = {"audit_first": "/audit", "audit_agents": "/audit?kind=agent", "audit_page_10": "/audit?page=10",
             "memory": "/memory", "search": "/memory?q=service+retries+queue"}
    out: dict = {}
    for name, path in pages.items():
        for n, c in clients.items():
            assert c.get(path).status_code == 200  # warm the blob cache as a running server would be
        # interleaved so machine noise hits both sizes alike
        times = {n: [] for n in sizes}
        for _ in range(5):
            for n, c in clients.items():
                times[n].append(median_time(lambda: c.get(path), 1))
        out[name] = {str(n): sorted(t)[len(t) // 2] * 1e3 for n, t in times.items()}
    small, large = (str(s) for s in sizes)
    return {"ms": out, "audit_first_page_ratio": out["audit_first"][large] / out["audit_first"][small],
            "targets": {"audit_first_page_ratio": 4.0}}


def show(sizes: tuple, result: dict) -> None:
    small, large = (str(n) for n in sizes)
    print(f"{'page':<16}{small + ' writes':>14}{large + ' writes':>16}")
    for name, t in result["ms"].items():
        print(f"{name:<16}{t[small]:>12.1f}ms{t[large]:>14.1f}ms")
    ratio = result["audit_first_page_ratio"]
    print(f"audit first page {large}/{small}: {ratio:.2f} (target <= {result['targets']['audit_first_page_ratio']})")


if __name__ == "__main__":
    sizes_main(__doc__, run, show)
