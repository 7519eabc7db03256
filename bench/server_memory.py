"""A long-lived MCP server's memory over many writes: `gitmem mcp`'s resident size as an agent
remembers and recalls through it.

The real server (`python -m gitmem mcp`) is driven by the official `mcp` SDK's stdio client, as
Claude Code or Cursor drive it: one `remember` per memory (each its own commit) and a `recall`
every 100 writes. The server's resident set size (VmRSS, read from /proc) is sampled at every
tenth of the run. A server whose caches are bounded grows fast at first (imports, SQLite's page
cache, the caches of tree entries and parsed blobs filling) and then stays flat: the figure that
matters is the growth per write over the second half, measured against the first tenth in the same run.

`--server ui` measures the web UI (`python -m gitmem ui`) the same way, driven over HTTP as a browser
drives it: one form POST to /add per memory (with the page's CSRF token, redirects not followed) and a
search page (GET /memory?q=...) every 1,000 writes (before the page was answered by the index it ranked the
whole branch: at 100,000 memories one every 100 writes would have been most of the run).

Run: python bench/server_memory.py [--server mcp|ui] [--writes 100000] [--json]
Target (issue 20): the MCP server and the web UI stay flat in memory over 100,000 writes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from common import sample_repo  # noqa: E402

ENV = {**os.environ, "GITMEM_ENCODER": "none", "PYTHONPATH": os.path.join(HERE, "..")}


def _server_pid() -> Optional[int]:
    """The `gitmem mcp` process this one started (the SDK does not expose it)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and b"gitmem" in argv and b"mcp" in argv:
            return int(entry)
    return None


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def _text(i: int) -> str:
    return f"Memory {i}: the service {i % 97} uses queue {i % 13} for retries"


class _Samples:
    """The server's RSS at every tenth of the run."""

    def __init__(self, writes: int, pid: int):
        self.marks = {max(1, writes * k // 10) for k in range(1, 11)}
        self.pid, self.t0, self.rows = pid, time.perf_counter(), []  # type: List[Dict[str, float]]

    def after(self, i: int) -> None:
        if i in self.marks:
            self.rows.append({"writes": i, "rss_mb": _rss_mb(self.pid), "seconds": time.perf_counter() - self.t0})
            print(f"{i:>9,} writes  {self.rows[-1]['rss_mb']:7.1f} MB  {self.rows[-1]['seconds']:6.0f} s",
                  file=sys.stderr, flush=True)


def _mcp(root: str, writes: int) -> List[Dict[str, float]]:
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "gitmem", "mcp"], cwd=root, env=ENV)

    async def main() -> List[Dict[str, float]]:
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    pid = _server_pid()
                    if pid is None:
                        raise SystemExit("cannot find the gitmem mcp process")
                    samples = _Samples(writes, pid)
                    for i in range(1, writes + 1):
                        answer = await session.call_tool("remember", {"type": "fact", "text": _text(i)})
                        if answer.is_error:
                            raise SystemExit(f"remember failed: {answer.content}")
                        if i % 100 == 0:
                            await session.call_tool("recall", {"query": "queue retries for service 42", "limit": 10})
                        samples.after(i)
        return samples.rows

    return anyio.run(main)


def _ui(root: str, writes: int) -> List[Dict[str, float]]:
    import http.client
    import re
    import subprocess
    from urllib.parse import urlencode

    proc = subprocess.Popen([sys.executable, "-m", "gitmem", "ui", "--port", "0"], cwd=root, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", proc.stdout.readline())
        if found is None:
            raise SystemExit("gitmem ui did not say where it serves")
        port = int(found.group(1))
        conn = http.client.HTTPConnection("127.0.0.1", port)
        headers = {"Host": f"127.0.0.1:{port}", "Origin": f"http://127.0.0.1:{port}"}

        def get(path: str) -> str:
            conn.request("GET", path, headers=headers)
            answer = conn.getresponse()
            body = answer.read().decode()
            if answer.status != 200:
                raise SystemExit(f"GET {path}: {answer.status}")
            return body

        token = re.search(r'name="csrf" value="([^"]+)"', get("/memory"))
        if token is None:
            raise SystemExit("no CSRF token on /memory")
        samples = _Samples(writes, proc.pid)
        for i in range(1, writes + 1):
            form = urlencode({"csrf": token.group(1), "type": "fact", "text": _text(i)})
            conn.request("POST", "/add", body=form,
                         headers={**headers, "Content-Type": "application/x-www-form-urlencoded"})
            answer = conn.getresponse()
            answer.read()
            if answer.status != 303:
                raise SystemExit(f"POST /add: {answer.status}")
            if i % 1000 == 0:
                get("/memory?" + urlencode({"q": "queue retries for service 42"}))
            samples.after(i)
        return samples.rows
    finally:
        proc.terminate()
        proc.wait()


def run(writes: int, server: str = "mcp") -> Dict[str, Any]:
    samples = (_ui if server == "ui" else _mcp)(sample_repo(f"server-memory-{server}"), writes)
    first, half, last = samples[0], samples[len(samples) // 2 - 1], samples[-1]
    per_write = (last["rss_mb"] - half["rss_mb"]) * 1024 / max(1, last["writes"] - half["writes"])
    return {"server": server, "writes": writes, "samples": samples, "rss_first_tenth_mb": first["rss_mb"],
            "rss_end_mb": last["rss_mb"], "end_ratio_first_tenth": last["rss_mb"] / first["rss_mb"],
            "kib_per_write_second_half": per_write, "backend": "none (no model involved)",
            "encoder": "none (GITMEM_ENCODER=none)"}


def show(result: Dict[str, Any]) -> None:
    if result["server"] == "ui":
        print(f"gitmem ui over {result['writes']:,} form POSTs to /add (a search page every 1,000), over HTTP")
    else:
        print(f"gitmem mcp over {result['writes']:,} remembers (a recall every 100), official mcp SDK stdio client")
    for s in result["samples"]:
        print(f"{s['writes']:>9,} writes  RSS {s['rss_mb']:7.1f} MB  ({s['seconds']:.0f} s)")
    print(f"RSS at the end / at the first tenth: {result['end_ratio_first_tenth']:.2f} "
          f"({result['rss_end_mb']:.1f} vs {result['rss_first_tenth_mb']:.1f} MB); "
          f"growth over the second half: {result['kib_per_write_second_half']:.2f} KiB per write")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=("mcp", "ui"), default="mcp")
    parser.add_argument("--writes", type=int, default=100_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.writes < 10:
        parser.error("--writes must be at least 10")
    result = run(args.writes, args.server)
    print(json.dumps(result, indent=2)) if args.json else show(result)


if __name__ == "__main__":
    main()
