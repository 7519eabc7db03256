"""Prompt-cache TTL policies and what a workload costs under each: pure arithmetic over a price table.

Policies:

- ``none``: no ``cache_control``; every request pays the whole prompt at the base input price.
- ``5m``: ``{"type": "ephemeral"}``; the first request writes the prefix (1.25x base input), later
  ones read it (0.1x) while it lives; an idle gap of 5 minutes or more expires it.
- ``1h``: ``{"type": "ephemeral", "ttl": "1h"}``; the write costs 2x base input, the entry lives
  an hour.
- ``keepalive``: the 5-minute TTL plus a ``max_tokens: 0`` request with the same prefix every
  :attr:`KeepAlive.ping_after` seconds of idleness (a read refreshes the entry at no extra cost), and
  no more pings once the idle time passes :attr:`KeepAlive.idle_limit`; none for a prefix shorter than
  the model's cache minimum, which nothing keeps.
- ``auto``: whichever of the four is cheapest for the *expected* break, computed here
  (:func:`choose`). The router cannot know the break while it lasts: its ``auto`` is the online
  rule :func:`choose_plan` (below), priced against hindsight by :func:`hindsight_cost`.

Cache rules follow https://platform.claude.com/docs/en/build-with-claude/prompt-caching ("each hit
refreshes the entry at no cost", 5-minute and 1-hour lifetimes, minimum cacheable length); prices are
:mod:`gitmem.pricing`'s. The simulation is the same arithmetic the emulator applies to one cached
prefix, so its 5.5-minute row can be checked against a measured run (``gitmem demo``).

A workload is the prefix (guide + memory, cached as one part) plus, per request, the tokens after it
(the question) and the output; session 1, then a break, then session 2, requests ``gap_seconds``
apart within a session. The break is measured from the last request of session 1 to the first of
session 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from .errors import GitmemError
from .pricing import DEFAULT_TABLE, PriceTable
from .text import plural
from .usage import Cost, Usage, cost

__all__ = [
    "POLICIES", "FIXED", "TTL_SECONDS", "DEFAULT_BREAKS", "Request", "Workload", "KeepAlive",
    "Estimate", "Row", "simulate", "choose", "break_table", "policy_ttl",
    "PrefixCosts", "Plan", "pings_needed", "break_cost", "ski_rental_pings", "choose_plan", "hindsight_cost",
    "online_cost", "fixed_cost", "MIN_HISTORY", "hour_ping_after",
]

FIXED = ("none", "5m", "1h", "keepalive")
POLICIES = FIXED + ("auto",)
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
PHASES = ("session1", "break", "session2")
#: Break lengths in minutes that ``gitmem bill`` tabulates (the issue's list).
DEFAULT_BREAKS = (0, 2, 4, 5.5, 10, 30, 59, 61, 120)
#: The most pings one idle period of a keep-alive may send (the shipped one sends 15): each is simulated.
MAX_PINGS = 1000


def _finite(value: float) -> bool:
    """0 or more and finite (NaN is not)."""
    return 0 <= value < math.inf


def policy_ttl(policy: str) -> str:
    """The ``cache_control`` TTL a policy sends: ``none``, ``5m`` or ``1h``."""
    if policy not in FIXED:
        raise GitmemError(f"unknown policy {policy!r} (valid: {', '.join(POLICIES)})")
    return {"none": "none", "1h": "1h"}.get(policy, "5m")


@dataclass(frozen=True)
class Request:
    """Tokens after the cached prefix (question, tail) and output tokens of one request."""

    uncached_input: int
    output: int


@dataclass(frozen=True)
class KeepAlive:
    """Ping after ``ping_after`` idle seconds (must be under the 5-minute TTL to keep it alive),
    and stop once idle for ``idle_limit`` seconds."""

    ping_after: float = 240.0
    idle_limit: float = 3600.0

    def __post_init__(self) -> None:
        if not (_finite(self.ping_after) and self.ping_after > 0 and _finite(self.idle_limit)
                and self.idle_limit / self.ping_after <= MAX_PINGS):
            raise GitmemError(f"a keep-alive pings after a positive idle time and stops after a finite one, at most "
                              f"{MAX_PINGS} pings a break (got ping_after {self.ping_after!r}, idle_limit "
                              f"{self.idle_limit!r})")


@dataclass(frozen=True)
class Workload:
    prefix_tokens: int
    session1: Tuple[Request, ...]
    session2: Tuple[Request, ...]
    gap_seconds: float = 30.0
    #: A keep-alive ping: the same prefix with ``max_tokens: 0``; default: the last question again.
    ping: Optional[Request] = None

    def __post_init__(self) -> None:
        requests = (*self.session1, *self.session2, *([self.ping] if self.ping else []))
        counts = [self.prefix_tokens, *(n for r in requests for n in (r.uncached_input, r.output))]
        if not _finite(self.gap_seconds) or min(counts) < 0:
            raise GitmemError(f"a workload has no negative token counts and a finite gap of 0 seconds or more "
                              f"(got gap_seconds {self.gap_seconds!r}, smallest count {min(counts)})")

    @property
    def ping_request(self) -> Request:
        if self.ping is not None:
            return self.ping
        last = (self.session1 or self.session2 or (Request(0, 0),))[-1]
        return Request(last.uncached_input, 0)

    def to_dict(self) -> dict:
        return {"prefix_tokens": self.prefix_tokens, "gap_seconds": self.gap_seconds,
                "session1": [[r.uncached_input, r.output] for r in self.session1],
                "session2": [[r.uncached_input, r.output] for r in self.session2],
                "ping": [self.ping_request.uncached_input, self.ping_request.output]}

    @classmethod
    def from_dict(cls, data: dict) -> "Workload":
        return cls(prefix_tokens=int(data["prefix_tokens"]), gap_seconds=float(data.get("gap_seconds", 30.0)),
                   session1=tuple(Request(int(a), int(b)) for a, b in data["session1"]),
                   session2=tuple(Request(int(a), int(b)) for a, b in data["session2"]),
                   ping=Request(*map(int, data["ping"])) if data.get("ping") else None)


@dataclass(frozen=True)
class Estimate:
    """A policy's cost for one break length, per phase; ``chosen`` is what ``auto`` picked; ``ping_cost``
    is what its pings cost, in whichever phase each fell."""

    policy: str
    break_seconds: float
    usage: Dict[str, Usage]
    costs: Dict[str, Cost]
    pings: int
    writes: int
    chosen: str
    ping_cost: float = 0.0

    @property
    def total(self) -> float:
        return sum(c.total for c in self.costs.values())

    def to_dict(self) -> dict:
        return {"policy": self.policy, "chosen": self.chosen, "break_seconds": self.break_seconds,
                "pings": self.pings, "ping_cost": self.ping_cost, "prefix_writes": self.writes, "total": self.total,
                "phases": {p: {"usage": self.usage[p].to_dict(), "cost": self.costs[p].total} for p in PHASES}}


def _timeline(w: Workload, break_seconds: float) -> List[Tuple[float, str, Request]]:
    events, t = [], 0.0
    for i, r in enumerate(w.session1):
        events.append((t, "session1", r))
        t += w.gap_seconds if i < len(w.session1) - 1 else 0.0
    t += break_seconds if w.session1 else 0.0
    for r in w.session2:
        events.append((t, "session2", r))
        t += w.gap_seconds
    return events


def simulate(w: Workload, policy: str, break_seconds: float, model: str = "claude-haiku-4-5",
             table: PriceTable = DEFAULT_TABLE, keepalive: KeepAlive = KeepAlive(),
             expected_break: Optional[float] = None) -> Estimate:
    """Cost of ``w`` under ``policy`` when the break lasts ``break_seconds``.

    ``auto`` picks with :func:`choose` for ``expected_break`` (default: the actual break).
    """
    if not _finite(break_seconds):
        raise GitmemError(f"a break is a finite number of seconds, not negative (got {break_seconds!r})")
    chosen = policy
    if policy == "auto":
        chosen = choose(w, break_seconds if expected_break is None else expected_break, model, table, keepalive)
    ttl = policy_ttl(chosen)
    row = table.get(model)
    cacheable = ttl != "none" and w.prefix_tokens >= row.min_cacheable_tokens
    life = TTL_SECONDS.get(ttl, 0.0)
    usage = {p: Usage() for p in PHASES}
    # Priced request by request: a price can depend on one request's size (Haiku 5.5's long prompts).
    costs = {p: Cost(row.id, source=table.source) for p in PHASES}
    expires, pings, writes = float("-inf"), 0, 0

    def send(at: float, phase: str, r: Request) -> float:
        """Send ``r`` at ``at``; what it cost."""
        nonlocal expires, writes
        u = Usage(input_tokens=r.uncached_input, output_tokens=r.output)
        if not cacheable:
            u = Usage(input_tokens=r.uncached_input + w.prefix_tokens, output_tokens=r.output)
        elif at < expires:
            u = Usage(input_tokens=r.uncached_input, output_tokens=r.output, cache_read_input_tokens=w.prefix_tokens)
        else:
            writes += 1
            u = Usage(input_tokens=r.uncached_input, output_tokens=r.output,
                      cache_creation_input_tokens=w.prefix_tokens,
                      ephemeral_5m_input_tokens=w.prefix_tokens if ttl == "5m" else 0,
                      ephemeral_1h_input_tokens=w.prefix_tokens if ttl == "1h" else 0)
        if cacheable:
            expires = at + life
        price = cost(u, model, table)
        usage[phase] = usage[phase] + u
        costs[phase] = costs[phase] + price
        return price.total

    last: Optional[Tuple[float, str]] = None
    ping_cost = 0.0
    for at, phase, r in _timeline(w, break_seconds):
        if chosen == "keepalive" and cacheable and last is not None:
            # Pings in the idle time before this request; those between the sessions are the break's. A prefix
            # too short to cache is not pinged: nothing is kept (and the router pings only an entry a reply showed).
            where = "break" if (last[1], phase) == ("session1", "session2") else phase
            k = 1
            while last[0] + k * keepalive.ping_after < at and k * keepalive.ping_after <= keepalive.idle_limit:
                ping_cost += send(last[0] + k * keepalive.ping_after, where, w.ping_request)
                pings += 1
                k += 1
        send(at, phase, r)
        last = (at, phase)
    return Estimate(policy, break_seconds, usage, costs, pings, writes, chosen, ping_cost)


def choose(w: Workload, expected_break: float, model: str = "claude-haiku-4-5",
           table: PriceTable = DEFAULT_TABLE, keepalive: KeepAlive = KeepAlive()) -> str:
    """The cheapest fixed policy for the expected break (ties: the first of none, 5m, 1h, keepalive)."""
    totals = [(simulate(w, p, expected_break, model, table, keepalive).total, i, p) for i, p in enumerate(FIXED)]
    return min(totals)[2]


@dataclass(frozen=True)
class Row:
    break_minutes: float
    totals: Dict[str, float]
    uncached: float
    cheapest: str
    auto_chose: str

    def ratio(self, policy: str) -> float:
        return self.totals[policy] / self.uncached if self.uncached else 0.0

    def to_dict(self) -> dict:
        return {"break_minutes": self.break_minutes, "totals": self.totals, "cheapest": self.cheapest,
                "auto_chose": self.auto_chose,
                "ratio_to_uncached": {p: round(self.ratio(p), 4) for p in self.totals}}


def break_table(w: Workload, breaks_minutes: Sequence[float] = DEFAULT_BREAKS, model: str = "claude-haiku-4-5",
                table: PriceTable = DEFAULT_TABLE, keepalive: KeepAlive = KeepAlive()) -> List[Row]:
    """Every policy's total for each break length; ``cheapest`` among the fixed policies. A workload
    of no requests costs nothing under every policy: nothing to rank, so no rows (every policy would
    tie at $0 and ``none`` win the tie)."""
    if not (w.session1 or w.session2):
        return []
    rows = []
    for minutes in breaks_minutes:
        estimates = {p: simulate(w, p, minutes * 60.0, model, table, keepalive) for p in POLICIES}
        totals = {p: e.total for p, e in estimates.items()}
        cheapest = min(FIXED, key=lambda p: (totals[p], FIXED.index(p)))
        rows.append(Row(minutes, totals, totals["none"], cheapest, estimates["auto"].chosen))
    return rows


# --- the online rule (the router's ``auto``) ---------------------------------------------------
#
# While a break lasts nobody knows how long it will be. The cached prefix costs, per request:
# a read (0.1x base input), a 5-minute write (1.25x) or a 1-hour write (2x); a keep-alive ping
# costs a read plus its few uncached tokens, and refreshes the entry for its whole TTL. Pinging is
# renting, letting the entry expire and re-writing it is buying: ski rental. The deterministic rule
# (rent until the rent paid equals the buy price, then buy) never pays more than twice the hindsight
# choice between the two. With a record of the line's breaks, ``auto`` does better: it picks
# the plan that is cheapest over the recorded breaks. A plan is the TTL of the next write plus the
# most pings per idle period: ``5m`` with K pings (every ``ping_after`` seconds, K = 0 lets the
# cache go at once), or ``1h`` with K pings (one a minute before each hour runs out: a 1-hour entry
# costs a read an hour to keep, a 5-minute one fifteen). K never exceeds the ski-rental K, past
# which letting go is cheaper for every break.

#: Breaks recorded before ``auto`` trusts the record instead of the deterministic ski-rental rule.
MIN_HISTORY = 5


def hour_ping_after(ping_after: float = 240.0) -> float:
    """When a 1-hour entry is pinged: as long before its expiry as a 5-minute one is."""
    return TTL_SECONDS["1h"] - (TTL_SECONDS["5m"] - ping_after)


@dataclass(frozen=True)
class PrefixCosts:
    """USD for one cached prefix: read, 5m write, 1h write, uncached, and one keep-alive ping."""

    read: float
    write_5m: float
    write_1h: float
    base: float
    ping: float

    @classmethod
    def of(cls, prefix_tokens: int, ping_input_tokens: int = 0, model: str = "claude-haiku-4-5",
           table: PriceTable = DEFAULT_TABLE) -> "PrefixCosts":
        row = table.get(model)
        per = 1_000_000
        read = prefix_tokens * row.cache_read / per
        return cls(read=read, write_5m=prefix_tokens * row.cache_write_5m / per,
                   write_1h=prefix_tokens * row.cache_write_1h / per, base=prefix_tokens * row.input / per,
                   ping=read + ping_input_tokens * row.input / per)

    def write(self, ttl: str) -> float:
        return self.write_1h if ttl == "1h" else self.write_5m


@dataclass(frozen=True)
class Plan:
    """What ``auto`` does next: the TTL of the next write, and the most pings per idle period."""

    ttl: str
    pings: int
    reason: str = ""

    def to_dict(self) -> dict:
        return {"ttl": self.ttl, "pings": self.pings, "reason": self.reason}


def pings_needed(gap: float, every: float = 240.0) -> int:
    """Pings a keep-alive sends in an idle ``gap``: one at each multiple of ``every`` before it ends."""
    if gap <= 0:
        return 0
    return max(0, int((gap - 1e-9) // every))


def _idle(ttl: str, pings: int, gap: float, c: PrefixCosts, ping_after: float) -> Tuple[float, bool]:
    """(cost of the pings sent in ``gap``, whether the entry is still alive at its end)."""
    every = ping_after if ttl == "5m" else hour_ping_after(ping_after)
    n = min(pings, pings_needed(gap, every))
    return n * c.ping, gap < n * every + TTL_SECONDS[ttl]


def break_cost(plan: Plan, gap: float, c: PrefixCosts, ping_after: float = 240.0) -> float:
    """The prefix's cost over one idle ``gap`` and the request after it, with ``plan`` in steady state."""
    pinged, alive = _idle(plan.ttl, plan.pings, gap, c, ping_after)
    return pinged + (c.read if alive else c.write(plan.ttl))


def ski_rental_pings(c: PrefixCosts, ttl: str = "5m") -> int:
    """Pings worth sending before letting go: rent paid never exceeds the extra cost of a re-write."""
    if c.ping <= 0:
        return 0
    return max(0, int((c.write(ttl) - c.read) / c.ping + 1e-9))


def choose_plan(gaps: Sequence[float], c: PrefixCosts, ping_after: float = 240.0,
                min_history: int = MIN_HISTORY) -> Plan:
    """``auto``'s plan for the next idle period of one cached prefix, from the recorded ``gaps`` (seconds)
    between the requests of that prefix's line: its own idle periods, not those of other lines beside it.

    Gaps shorter than ``ping_after`` are left out (every plan pays one read for them). Fewer than
    ``min_history`` breaks left: the deterministic ski-rental plan (``5m``, K pings, K =
    :func:`ski_rental_pings`), which costs at most twice the better of pinging through and letting
    go, whatever the break. Otherwise the candidate with the lowest total :func:`break_cost` over the
    breaks (ties: ``5m`` before ``1h``, fewer pings first).
    """
    k_5m = ski_rental_pings(c, "5m")
    gaps = [g for g in gaps if g >= ping_after]
    if len(gaps) < min_history:
        return Plan("5m", k_5m, f"cold start ({plural(len(gaps), 'break')} recorded): ski rental, up to {plural(k_5m, 'ping')}")
    candidates = [Plan("5m", k) for k in range(k_5m + 1)] + \
        [Plan("1h", k) for k in range(ski_rental_pings(c, "1h") + 1)]
    best, best_cost = candidates[0], float("inf")
    for plan in candidates:
        total = sum(break_cost(plan, g, c, ping_after) for g in gaps)
        if total < best_cost - 1e-12:
            best, best_cost = plan, total
    ttl = "1-hour TTL for the next write" if best.ttl == "1h" else "5-minute TTL"
    what = f"{ttl}, let the cache go" if best.pings == 0 else f"{ttl}, ping up to {plural(best.pings, 'time')}"
    return Plan(best.ttl, best.pings, f"{what}: cheapest over the {plural(len(gaps), 'recorded break')}")


def hindsight_cost(gaps: Sequence[float], c: PrefixCosts, ping_after: float = 240.0) -> float:
    """The prefix's cost for a first request and one request after each gap, choosing with hindsight.

    Knowing every gap, each write picks its TTL and each idle period picks between pinging through
    (same cadence as the router) and letting the entry go, or no caching at all: a dynamic program
    over the entry's TTL. The lower bound ``auto`` is measured against.
    """
    best = {"5m": c.write_5m, "1h": c.write_1h}
    for gap in gaps:
        after = {"5m": float("inf"), "1h": float("inf")}
        for state, so_far in best.items():
            pinged = 0.0 if gap < TTL_SECONDS[state] else _idle(state, 10**9, gap, c, ping_after)[0]
            after[state] = min(after[state], so_far + pinged + c.read)
            for ttl in ("5m", "1h"):
                after[ttl] = min(after[ttl], so_far + c.write(ttl))
        best = after
    return min(min(best.values()), c.base * (len(gaps) + 1))


def fixed_cost(policy: str, gaps: Sequence[float], c: PrefixCosts, ping_after: float = 240.0,
               keepalive: KeepAlive = KeepAlive()) -> float:
    """The prefix's cost under a fixed policy for a first request and one after each gap."""
    if policy == "none":
        return c.base * (len(gaps) + 1)
    if policy == "1h":
        return c.write_1h + sum(break_cost(Plan("1h", 0), g, c, ping_after) for g in gaps)
    pings = int(keepalive.idle_limit // ping_after) if policy == "keepalive" else 0
    if policy not in ("5m", "keepalive"):
        raise GitmemError(f"unknown fixed policy {policy!r}")
    return c.write_5m + sum(break_cost(Plan("5m", pings), g, c, ping_after) for g in gaps)


def online_cost(gaps: Sequence[float], c: PrefixCosts, history: Optional[List[float]] = None,
                ping_after: float = 240.0) -> Tuple[float, List[Plan]]:
    """``auto`` run online over ``gaps``: before each gap it plans from the gaps seen so far.

    ``history`` (gaps recorded earlier) is extended in place, as the router's request log grows.
    A plan's TTL applies to the next write: a live entry keeps the TTL it was written with (the
    emulator's rule) and is pinged at that TTL's cadence, up to the plan's number of pings.
    """
    seen = history if history is not None else []
    plan = choose_plan(seen, c, ping_after)
    entry = plan.ttl
    total = c.write(entry)
    plans = []
    for gap in gaps:
        plans.append(plan)
        pinged, alive = _idle(entry, plan.pings, gap, c, ping_after)
        total += pinged
        if alive:
            total += c.read
        else:
            entry = plan.ttl
            total += c.write(entry)
        seen.append(gap)
        if gap >= ping_after:  # only a break can change the plan (see choose_plan)
            plan = choose_plan(seen, c, ping_after)
    return total, plans
