"""Load: 16 writers at once through the CLI, the Python API and the MCP server, then a
push/pull cycle between two clones. The memory count equals the count of writes that
reported success, one commit each, and `git fsck` is clean everywhere.

GITMEM_LOAD_SECONDS sets how long the writers run (5 by default here; the issue's
figure is 30: `GITMEM_LOAD_SECONDS=30 pytest -m slow tests/test_load.py`).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT, git, gitmem, make_repo
from gitmem import Store

SECONDS = float(os.environ.get("GITMEM_LOAD_SECONDS", "5"))
WRITERS = {"cli": 5, "api": 6, "mcp": 5}  # 16 at once

WRITER = r"""
import json, os, subprocess, sys, time
mode, repo, name, seconds, go = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]


def start():
    # say ready, wait until every writer is, then run for `seconds` (MCP start-up is not counted)
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.01)
    return time.monotonic() + seconds


if mode == "api":
    from gitmem import Store
    store = Store.open(repo)
    deadline = start()
    i = 0
    while time.monotonic() < deadline:
        print(store.add("fact", f"{name} fact {i}", source="load").memory.id, flush=True)
        i += 1
elif mode == "cli":
    deadline = start()
    i = 0
    while time.monotonic() < deadline:
        out = subprocess.run([sys.executable, "-m", "gitmem", "-C", repo, "add", "fact", f"{name} fact {i}",
                              "--source", "load", "--json"], capture_output=True, text=True, check=True)
        print(json.loads(out.stdout)["id"], flush=True)
        i += 1
else:
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from mcp.types import Implementation

    async def main():
        params = StdioServerParameters(command=sys.executable, args=["-m", "gitmem", "mcp"], cwd=repo,
                                       env=dict(os.environ))
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write, client_info=Implementation(name=name, version="1")) as s:
                    await s.initialize()
                    deadline = start()
                    i = 0
                    while time.monotonic() < deadline:
                        r = await s.call_tool("remember", {"type": "fact", "text": f"{name} fact {i}"})
                        assert not r.is_error, r.content[0].text
                        data = r.structured_content or json.loads(r.content[0].text)
                        print(data["id"], flush=True)
                        i += 1

    anyio.run(main)
"""


@pytest.mark.slow
def test_sixteen_writers_through_cli_api_and_mcp_then_push_pull_lose_nothing(tmp_path):
    pytest.importorskip("mcp")
    repo = make_repo(tmp_path / "a")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    go = tmp_path / "go"
    procs = [(mode, subprocess.Popen([sys.executable, "-c", WRITER, mode, str(repo), f"{mode}{n}", str(SECONDS),
                                      str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
             for mode, count in WRITERS.items() for n in range(count)]
    for mode, p in procs:
        assert p.stdout.readline().strip() == "ready", f"{mode} writer did not start: {p.stderr.read()[-2000:]}"
    go.touch()  # all 16 start writing together
    written = {mode: [] for mode in WRITERS}
    for mode, p in procs:
        out, err = p.communicate(timeout=SECONDS * 20 + 120)
        assert p.returncode == 0, f"{mode} writer failed: {err[-2000:]}"
        written[mode] += out.split()
    ids = [i for mode in WRITERS for i in written[mode]]
    assert all(written.values()), {m: len(v) for m, v in written.items()}
    assert len(set(ids)) == len(ids)

    stored = Store.open(str(repo)).memories()
    assert set(stored) == set(ids)
    assert len(git(repo, "rev-list", "refs/memory/main").split()) == len(ids)
    sources = {m.source for m in stored.values()}
    assert "load" in sources and {f"mcp:mcp{n}/1" for n in range(WRITERS["mcp"])} <= sources
    git(repo, "fsck", "--strict", "--no-dangling")

    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(repo, "remote", "add", "origin", str(bare))
    git(repo, "push", "-q", "origin", "main")  # the code, so the second clone checks out main
    gitmem(repo, "push")
    b = tmp_path / "b"
    git(tmp_path, "clone", "-q", str(bare), str(b))
    git(b, "config", "user.name", "Clone B")
    git(b, "config", "user.email", "b@example.com")
    gitmem(b, "pull")
    assert set(Store.open(str(b)).memories()) == set(ids)
    extra = gitmem(b, "fact", "add", "written on the other clone").stdout.split()[2]
    gitmem(b, "push")
    gitmem(repo, "pull")
    for path in (repo, b, bare):
        git(path, "fsck", "--strict", "--no-dangling")
    for path in (repo, b):
        assert set(Store.open(str(path)).memories()) == set(ids) | {extra}
    print(f"\nload: {SECONDS:g}s, {len(ids)} writes "
          f"({', '.join(f'{m} {len(v)}' for m, v in written.items())}), nothing lost")
