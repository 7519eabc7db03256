"""Router benchmark: the latency the router adds, and what ``auto`` costs against hindsight.

Run: python bench/router.py [--requests 300] [--days 30] [--json]

1. Latency. The same requests, interleaved one by one, (a) straight to `gitmem emulator serve` and
   (b) through `gitmem router serve` (memory attached, request recorded), each server its own process:
   once with the router's embedded emulator, once with a second `gitmem emulator serve` as its HTTP
   upstream (the real deployment: one more hop). The direct request carries the body the router would
   forward, memory included, so the emulators do the same work; the order of the three requests
   rotates each round. Per pair: router time - direct time; median and p99; and the ratio of
   the medians. Target: <= 5 ms added at the median (HTTP upstream).
2. Cost. Simulated days of one repository: sessions of requests 20-120 s apart, breaks between
   sessions drawn from a mixture (0-24 h), a night between days. For each mixture: the prefix's cost
   under every fixed policy, under ``auto`` run online (it sees each gap only after it ended, and
   learns from the gaps so far, as the router does from its request log), and under the hindsight-best
   choice (:func:`gitmem.policy.hindsight_cost`), plus the same per-request input and output for all.
   Targets: auto / hindsight <= 1.15 on every mixture, auto / best fixed <= 1.05.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from typing import Dict, List, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import sample_repo  # noqa: E402

from gitmem.pricing import DEFAULT_TABLE  # noqa: E402
from gitmem.policy import FIXED, PrefixCosts, fixed_cost, hindsight_cost, online_cost  # noqa: E402

MODEL = "claude-haiku-4-5"
#: A Claude Code-sized prefix: tools and system prompt (~20k tokens) plus the team memory.
PREFIX_TOKENS = 25_000
PING_INPUT = 50
REQUEST_INPUT, REQUEST_OUTPUT = 800, 400
MINUTE, HOUR = 60.0, 3600.0

#: name -> break sampler (seconds), from the issue's range 0-24 h
MIXTURES = {
    "short (0-4 min)": lambda r: r.uniform(0, 4 * MINUTE),
    "coffee (5-15 min)": lambda r: r.uniform(5 * MINUTE, 15 * MINUTE),
    "meetings (15-60 min)": lambda r: r.uniform(15 * MINUTE, 60 * MINUTE),
    "long (1-24 h)": lambda r: r.uniform(HOUR, 24 * HOUR),
    "short + long": lambda r: r.uniform(0, 4 * MINUTE) if r.random() < 0.5 else r.uniform(HOUR, 24 * HOUR),
    "coffee + long": lambda r: r.uniform(5 * MINUTE, 15 * MINUTE) if r.random() < 0.5 else r.uniform(2 * HOUR, 6 * HOUR),
    "coffee + meetings": lambda r: (r.uniform(5 * MINUTE, 15 * MINUTE) if r.random() < 0.5
                                    else r.uniform(30 * MINUTE, 90 * MINUTE)),
    "all four": lambda r: r.choice([r.uniform(0, 4 * MINUTE), r.uniform(5 * MINUTE, 15 * MINUTE),
                                    r.uniform(15 * MINUTE, 60 * MINUTE), r.uniform(HOUR, 24 * HOUR)]),
    "uniform 0-24 h": lambda r: r.uniform(0, 24 * HOUR),
    "log-uniform 10 s-24 h": lambda r: 10 * (24 * HOUR / 10) ** r.random(),
}


# --- 1. latency ---------------------------------------------------------------------------------


def _percentile(values: List[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _serve(args: List[str]):
    """A gitmem server as its own process (as it runs for real), and its URL."""
    import socket
    import subprocess

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "gitmem", *args, "--port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "PYTHONPATH": os.path.join(os.path.dirname(__file__), "..")})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return process, f"http://127.0.0.1:{port}"
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"gitmem {' '.join(args)} did not start")


def latency(requests: int = 300) -> dict:
    import httpx2

    from gitmem.router import attach
    from gitmem.router_app import Router
    from gitmem.store import Store

    repo = sample_repo("router")
    store = Store.open(repo)
    for i in range(40):
        store.add("decision", f"Service {i} retries with exponential backoff up to {i % 7 + 3} times",
                  reason="the provider rate-limits bursts", source="bench")
    guide = "\n".join(f"## Rule {i}\nLedger writes for payment {i} are idempotent." for i in range(400))
    body = {"model": MODEL, "max_tokens": 64,
            "system": [{"type": "text", "text": guide, "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": "Which service retries the most?"}]}
    headers = {"x-api-key": "bench", "anthropic-version": "2023-06-01", "content-type": "application/json"}
    blocks = Router(policy="5m", repo=repo, env={})._attachment(Store.open(repo), MODEL).blocks
    forwarded = json.dumps(attach(body, blocks, "5m").body).encode()  # what the router sends upstream
    plain = json.dumps(body).encode()
    processes = []
    try:
        for args in (["emulator", "serve"], ["emulator", "serve"]):
            processes.append(_serve(args))
        (_, direct), (_, upstream) = processes
        processes.append(_serve(["router", "serve", "--repo", repo, "--upstream", upstream]))
        processes.append(_serve(["router", "serve", "--repo", repo]))
        via_http, embedded = processes[2][1], processes[3][1]
        samples: Dict[str, List[float]] = {"direct": [], "embedded": [], "http": []}
        with httpx2.Client(timeout=30) as http:
            def timed(url: str, payload: bytes) -> float:
                t0 = time.perf_counter()
                response = http.post(url + "/v1/messages", content=payload, headers=headers)
                assert response.status_code == 200, response.text
                return time.perf_counter() - t0

            for _ in range(20):  # warm up: caches written, connections open, memory attachment built
                timed(direct, forwarded), timed(embedded, plain), timed(via_http, plain)
            targets = [("direct", direct, forwarded), ("embedded", embedded, plain), ("http", via_http, plain)]
            for n in range(requests):
                for name, url, payload in targets[n % 3:] + targets[:n % 3]:
                    samples[name].append(timed(url, payload))
    finally:
        for process, _ in processes:
            process.terminate()
            process.wait(10)
    out: dict = {"requests": requests, "ms": {}}
    for name, values in samples.items():
        out["ms"][name] = {"median": statistics.median(values) * 1000, "p99": _percentile(values, 0.99) * 1000}
    for name in ("embedded", "http"):
        added = [(a - d) * 1000 for a, d in zip(samples[name], samples["direct"])]
        out[f"added_ms_{name}"] = {"median": statistics.median(added), "p99": _percentile(added, 0.99)}
        out[f"ratio_{name}"] = out["ms"][name]["median"] / out["ms"]["direct"]["median"]
    return out


# --- 2. cost of auto ----------------------------------------------------------------------------


def simulate_days(mixture: str, days: int, seed: int) -> Tuple[List[float], int]:
    """The gaps (seconds) between one repository's requests over ``days``, and the number of requests."""
    rng = random.Random(seed)
    draw = MIXTURES[mixture]
    gaps: List[float] = []
    requests = 0
    for day in range(days):
        if day:
            gaps.append(rng.uniform(12 * HOUR, 16 * HOUR))  # the night
        sessions = rng.randint(4, 8)
        for s in range(sessions):
            if s:
                gaps.append(draw(rng))
            n = rng.randint(5, 15)
            requests += n
            gaps.extend(rng.uniform(20, 120) for _ in range(n - 1))
            requests += 0
    return gaps, requests + 0


def cost_of_auto(days: int = 30, seeds: Tuple[int, ...] = (1, 2, 3)) -> dict:
    row = DEFAULT_TABLE.get(MODEL)
    costs = PrefixCosts.of(PREFIX_TOKENS, PING_INPUT, MODEL)
    per_request = (REQUEST_INPUT * row.input + REQUEST_OUTPUT * row.output) / 1_000_000
    out: Dict[str, dict] = {}
    for mixture in MIXTURES:
        totals: Dict[str, float] = {p: 0.0 for p in (*FIXED, "auto", "hindsight")}
        for seed in seeds:
            gaps, n = simulate_days(mixture, days, seed)
            base = n * per_request
            for policy in FIXED:
                totals[policy] += fixed_cost(policy, gaps, costs) + base
            totals["auto"] += online_cost(gaps, costs)[0] + base
            totals["hindsight"] += hindsight_cost(gaps, costs) + base
        best_fixed = min(FIXED, key=lambda p: totals[p])
        out[mixture] = {"totals_usd": {p: round(v / len(seeds), 4) for p, v in totals.items()},
                        "best_fixed": best_fixed,
                        "auto_vs_hindsight": totals["auto"] / totals["hindsight"],
                        "auto_vs_best_fixed": totals["auto"] / totals[best_fixed],
                        "best_fixed_vs_hindsight": totals[best_fixed] / totals["hindsight"]}
    return {"days": days, "seeds": list(seeds), "prefix_tokens": PREFIX_TOKENS, "model": MODEL,
            "per_request": {"input": REQUEST_INPUT, "output": REQUEST_OUTPUT}, "mixtures": out,
            "worst_auto_vs_hindsight": max(m["auto_vs_hindsight"] for m in out.values()),
            "worst_auto_vs_best_fixed": max(m["auto_vs_best_fixed"] for m in out.values())}


def run(requests: int = 300, days: int = 30) -> dict:
    return {"latency": latency(requests), "cost": cost_of_auto(days),
            "targets": {"added_ms_median": 5.0, "auto_vs_hindsight": 1.15, "auto_vs_best_fixed": 1.05}}


def show(result: dict) -> None:
    lat = result["latency"]
    print(f"latency over {lat['requests']} interleaved requests (ms):")
    for name, v in lat["ms"].items():
        print(f"  {name:<9} median {v['median']:7.2f}  p99 {v['p99']:7.2f}")
    for name in ("embedded", "http"):
        a = lat[f"added_ms_{name}"]
        print(f"  router ({name} upstream) adds: median {a['median']:.2f} ms, p99 {a['p99']:.2f} ms; "
              f"ratio of medians {lat[f'ratio_{name}']:.2f}")
    c = result["cost"]
    print(f"\ncost over {c['days']} simulated days x {len(c['seeds'])} seeds (USD per run, prefix {c['prefix_tokens']} tokens):")
    head = "".join(f"{p:>11}" for p in (*FIXED, "auto", "hindsight"))
    print(f"  {'mixture':<24}{head}  auto/hind  auto/best")
    for name, m in c["mixtures"].items():
        cells = "".join(f"{m['totals_usd'][p]:>11.3f}" for p in (*FIXED, "auto", "hindsight"))
        print(f"  {name:<24}{cells}  {m['auto_vs_hindsight']:>9.3f}  {m['auto_vs_best_fixed']:>9.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.requests, args.days)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        show(result)


if __name__ == "__main__":
    main()
