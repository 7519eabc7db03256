"""The bill: a recorded run turned into costs per policy and phase, the break-length table, plots.

A *run* is one JSON document (written by ``gitmem demo``; shape below) holding every request's
``usage`` exactly as the backend returned it. Every number of a bill is computed from those usage
fields and the price table the run names (:func:`gitmem.usage.cost`); the break-length table is
:func:`gitmem.policy.break_table` over the workload the run measured.

Run shape (``version`` 1)::

    {"version": 1, "kind": "cache-ttl", "created", "backend", "model", "prices": {"source", "checked"},
     "runs": N, "break_seconds", "guide_tokens", "memory_commit", "workload": {...}, "keepalive": {...},
     "requests": [{"policy", "run", "phase": "session1"|"break"|"session2", "label", "at", "question",
                   "usage": {...}, "cites": [id, ...], "request_id", "backend"}]}

Runs live in the repository's ``.git/gitmem/runs/`` (``<UTC time>.<n>-<kind>.json``), the newest is
what ``gitmem bill`` and the web UI's cost page show. Single requests (``gitmem ask``, ``gitmem messages`` and every
request and ping through ``gitmem router``) are appended to ``.git/gitmem/requests.jsonl`` with the
memory commit they were built from; :func:`router_bill` prices the router's share by session and
break (``gitmem bill --router``). A request ask or messages sends through a router is on two lines, each
side's own record, linked by the ``client_request_id`` the command sent; the bill counts it once.

The price table a bill is priced with is the one in effect (:mod:`gitmem.price_table`).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence

from .errors import GitmemError
from .policy import FIXED, PHASES, KeepAlive, Row, Workload, break_table, simulate
from .pricing import DEFAULT_TABLE, PriceTable
from .text import plural
from .usage import Usage, cost

if TYPE_CHECKING:
    from .store import Store

__all__ = [
    "PolicyBill", "Bill", "make_bill", "runs_dir", "record_run", "latest_run", "load_run", "record_request",
    "latest_request", "render_text", "render_plot", "render_svg", "RUN_VERSION", "requests_path", "read_requests",
    "router_bill", "render_router_text", "why_cheapest", "NOTHING_TO_RANK",
]

RUN_VERSION = 1
#: What a bill says instead of its break-length table when the run's workload has no requests.
NOTHING_TO_RANK = "The run's workload has no requests: nothing to rank (every policy costs $0 for it)."
POLICY_LABELS = {"none": "uncached", "5m": "5-minute TTL", "1h": "1-hour TTL", "keepalive": "5m + keep-alive",
                 "auto": "auto"}


@dataclass(frozen=True)
class PolicyBill:
    """One policy's cost per run (mean over the runs), split by phase, and what the break did.

    ``usage`` is each phase's usage summed over the runs; ``to_dict`` gives it per run, as the cost."""

    policy: str
    runs: int
    phases: Dict[str, float]
    usage: Dict[str, Usage]
    ratio: float
    after_break: Dict[str, int]

    @property
    def total(self) -> float:
        return sum(self.phases.values())

    def to_dict(self) -> dict:
        return {"policy": self.policy, "runs": self.runs, "cost_per_run": {**self.phases, "total": self.total},
                "usage_per_run": {p: {k: n / self.runs for k, n in u.to_dict().items()} for p, u in self.usage.items()},
                "ratio_to_uncached": round(self.ratio, 4), "guide_after_break": self.after_break}


@dataclass(frozen=True)
class Bill:
    backend: str
    model: str
    source: str
    checked: str
    break_seconds: float
    policies: List[PolicyBill]
    table: List[Row]
    workload: Workload
    why: str = ""

    def policy(self, name: str) -> PolicyBill:
        return next(p for p in self.policies if p.policy == name)

    def to_dict(self) -> dict:
        return {"backend": self.backend, "model": self.model, "prices": {"source": self.source, "checked": self.checked},
                "break_seconds": self.break_seconds, "policies": [p.to_dict() for p in self.policies],
                "break_table": [r.to_dict() for r in self.table], "workload": self.workload.to_dict(),
                "why": self.why}


def _uncached(u: Usage) -> Usage:
    return Usage(input_tokens=u.total_input_tokens, output_tokens=u.output_tokens)


def _after_break(first: Usage, guide_tokens: int) -> str:
    if first.cache_read_input_tokens >= guide_tokens > 0:
        return "read"
    if first.cache_creation_input_tokens >= guide_tokens > 0:
        return "re-written"
    return "uncached"


def make_bill(run: Mapping[str, Any], table: PriceTable = DEFAULT_TABLE) -> Bill:
    """Price a recorded run. The ratio is to the run's own uncached policy when it has one, else to
    the same requests priced without caching (pings excluded: an uncached agent sends none)."""
    if not isinstance(run, Mapping) or run.get("version") != RUN_VERSION or not isinstance(run.get("requests"), list) \
            or not run["requests"]:
        raise GitmemError("not a gitmem run record (expected version 1 with requests)")
    try:
        return _priced(run, table)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:  # a file edited or cut by hand
        raise GitmemError(f"not a gitmem run record: {type(e).__name__} {e}") from None


def _priced(run: Mapping[str, Any], table: PriceTable) -> Bill:
    model = run["model"]
    guide_tokens = int(run.get("guide_tokens") or 0)
    by_policy: Dict[str, List[Mapping[str, Any]]] = {}
    for r in run["requests"]:
        if r["phase"] not in PHASES:  # left out of every column, it was still in the uncached baseline
            raise ValueError(f"phase {r['phase']!r} is none of {', '.join(PHASES)}")
        by_policy.setdefault(r["policy"], []).append(r)
    order = [p for p in FIXED if p in by_policy] + sorted(set(by_policy) - set(FIXED))

    def mean_cost(requests: Sequence[Mapping[str, Any]], runs: int, uncached: bool = False) -> float:
        """Priced request by request: a price can depend on one request's size (Haiku 5.5's long prompts)."""
        total = 0.0
        for r in requests:
            u = Usage.from_api(r["usage"])
            total += cost(_uncached(u) if uncached else u, model, table).total
        return total / runs

    baseline: Optional[float] = None
    if "none" in by_policy:
        reqs = by_policy["none"]
        baseline = mean_cost(reqs, len({r["run"] for r in reqs}))
    bills = []
    for name in order:
        reqs = by_policy[name]
        runs = len({r["run"] for r in reqs})
        phases, usage = {}, {}
        for phase in PHASES:
            mine = [r for r in reqs if r["phase"] == phase]
            phases[phase] = mean_cost(mine, runs)
            total = Usage()
            for r in mine:
                total = total + Usage.from_api(r["usage"])
            usage[phase] = total
        base = baseline if baseline is not None else mean_cost([r for r in reqs if r["phase"] != "break"], runs, True)
        after: Dict[str, int] = {}
        for n in sorted({r["run"] for r in reqs}):
            s2 = [r for r in reqs if r["run"] == n and r["phase"] == "session2"]
            if s2:
                state = _after_break(Usage.from_api(min(s2, key=lambda r: r["at"])["usage"]), guide_tokens)
                after[state] = after.get(state, 0) + 1
        bills.append(PolicyBill(name, runs, phases, usage, sum(phases.values()) / base if base else 0.0, after))
    workload = Workload.from_dict(run["workload"])
    keep = KeepAlive(**run.get("keepalive", {}))
    return Bill(backend=run["backend"], model=model, source=table.source, checked=table.checked,  # what priced it
                break_seconds=float(run.get("break_seconds", 0)), policies=bills,
                table=break_table(workload, model=model, table=table, keepalive=keep), workload=workload,
                why=why_cheapest(workload, float(run.get("break_seconds", 0)), model, table, keep))


def why_cheapest(w: Workload, break_seconds: float, model: str, table: PriceTable = DEFAULT_TABLE,
                 keepalive: KeepAlive = KeepAlive()) -> str:
    """The fixed policies for one break, cheapest first, each with the prefix writes and pings that make its
    total: the reason the table marks the one it marks."""
    row = table.get(model)
    if not (w.session1 or w.session2):
        return NOTHING_TO_RANK
    estimates = sorted((simulate(w, p, break_seconds, model, table, keepalive) for p in FIXED),
                       key=lambda e: (e.total, FIXED.index(e.policy)))
    text = ""
    for e in estimates:
        if not e.writes:
            what = "the whole prefix at the base input price on every request"
        else:
            price = row.cache_write_1h if e.policy == "1h" else row.cache_write_5m
            what = f"{plural(e.writes, 'prefix write')} at {price / row.input:g}x base input" if row.input else \
                f"{plural(e.writes, 'prefix write')}"
            if e.pings:
                what += f", {plural(e.pings, 'ping')} {_usd(e.ping_cost)} to keep it"
        if text:
            text += " = " if e.total - estimates[0].total < 1e-12 else " < "
        text += f"{POLICY_LABELS[e.policy]} {_usd(e.total)} ({what})"
    return f"At a {_minutes(break_seconds / 60)} break, cheapest first: {text}"


# --- storage -------------------------------------------------------------------


def runs_dir(store: Store) -> str:
    return os.path.join(store.common_dir, "gitmem", "runs")


def record_run(store: Store, run: Mapping[str, Any]) -> str:
    """Write ``run`` to the repository's runs directory; returns the file's path."""
    folder = runs_dir(store)
    os.makedirs(folder, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    n = 1  # names sort by time, then by this counter
    while any(name.startswith(f"{stamp}.{n:03d}-") for name in os.listdir(folder)):
        n += 1
    path = os.path.join(folder, f"{stamp}.{n:03d}-{run.get('kind', 'run')}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(run, f, indent=1, ensure_ascii=False)
    return path


def latest_run(store: Store) -> Optional[str]:
    folder = runs_dir(store)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    except OSError:
        return None
    return os.path.join(folder, names[-1]) if names else None


def load_run(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise GitmemError(f"cannot read run {path}: {e.strerror or e}") from None
    except ValueError:
        raise GitmemError(f"run {path} is not valid JSON") from None


def record_request(store: Store, entry: Mapping[str, Any]) -> str:
    """Append one sent request (backend, model, memory commit, usage, cost) to requests.jsonl, every text in
    it redacted: a question or a session name can hold a secret pasted into it, and nothing else gitmem keeps
    does."""
    path = requests_path(store)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(_redacted(dict(entry)), ensure_ascii=False, sort_keys=True) + "\n")
    return path


def _redacted(value: Any) -> Any:
    from .redact import redact

    if isinstance(value, str):
        return redact(value)[0]
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value


def latest_request(store: Store) -> Optional[dict]:
    """The last request ``record_request`` appended (by ``gitmem ask``, ``messages`` or the router), or None."""
    entries = read_requests(store)
    return entries[-1] if entries else None


def requests_path(store: Store) -> str:
    return os.path.join(store.common_dir, "gitmem", "requests.jsonl")


def read_requests(store: Store, command: Optional[str] = None) -> List[dict]:
    """Every whole line of requests.jsonl (optionally only one ``command``'s), oldest first.

    A line cut short by a crash is skipped; a model that is not text is read as null, as the router records
    it now; a whole line that is not a request as gitmem records it (a hand edit, another tool) raises
    :class:`GitmemError` naming it, since every reader would misread it."""
    path = requests_path(store)
    try:  # a line cut inside a character by a crash is skipped below, not a reason to read nothing
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return []
    out = []
    for number, line in enumerate(lines, 1):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and not isinstance(entry.get("model"), (str, type(None))):
            entry["model"] = None  # an older router recorded the client's model as sent; it records null now
        problem = _request_problem(entry)
        if problem:
            raise GitmemError(f"{path} line {number} is not a request gitmem recorded: {problem}")
        if command is None or entry.get("command") == command:
            out.append(entry)
    return out


_TEXT_FIELDS = ("command", "kind", "session", "policy", "upstream", "backend", "memory_commit", "question", "time",
                "client", "client_request_id")


def _request_problem(entry: Any) -> Optional[str]:
    """What in a parsed line the bill or the cost page could not read, or None."""
    if not isinstance(entry, dict):
        return "not a JSON object"
    for key in _TEXT_FIELDS:
        if not isinstance(entry.get(key), (str, type(None))):
            return f"{key} is not text"
    if not isinstance(entry.get("at"), (int, float, type(None))):
        return "at is not a number"
    usage = entry.get("usage")
    try:
        if usage is not None:
            if not isinstance(usage, dict):
                raise TypeError
            Usage.from_api(usage)
    except (TypeError, ValueError):
        return "usage is not an object of token counts"
    price = entry.get("cost")
    if price is not None and not (isinstance(price, dict) and isinstance(price.get("total", 0.0), (int, float))):
        return "cost is not an object with a numeric total"
    return None


#: A gap between two requests of one cache line at least this long is a break.
BREAK_SECONDS = 60.0


def _prefix_state(usage: Optional[Mapping[str, Any]], before: Optional[Mapping[str, Any]] = None) -> str:
    """What became of the prefix the line's request ``before`` the break left in the cache: ``read`` when the
    request after it read at least that much (what it writes past it is the new turn of a conversation),
    ``partly re-written`` when it read less and wrote the rest, ``re-written`` when it read nothing."""
    u = Usage.from_api(usage) if usage else Usage()
    was = Usage.from_api(before) if before else Usage()
    if u.cache_read_input_tokens and u.cache_read_input_tokens >= was.cache_read_input_tokens \
            + was.cache_creation_input_tokens:
        return "read"
    if u.cache_creation_input_tokens:
        return "partly re-written" if u.cache_read_input_tokens else "re-written"
    if u.cache_read_input_tokens:
        return "read"
    return "uncached"


def router_bill(entries: Sequence[Mapping[str, Any]], table: PriceTable = DEFAULT_TABLE,
                commands: Sequence[str] = ("router",)) -> dict:
    """Recorded traffic (the router's, or with ``commands`` also `gitmem ask` and `messages`) by
    session, with each break (a gap of :data:`BREAK_SECONDS` or more between two requests of one
    cache line): its pings, what they cost, and whether the prefix was read or re-written after it.
    A request without a session (ask, messages) is billed under its command. Costs are recomputed
    from each entry's usage fields.

    A request ask or messages sent through the router is counted once: by the router's line when the
    router's traffic is billed (it names the upstream that served it and the command, as the session's
    ``clients``; the memory commit is the command's, since the router attached none), else by the
    command's own line."""
    total = Usage()
    sessions: Dict[str, Dict[str, Any]] = {}
    lines: Dict[str, Dict[str, Any]] = {}
    count = {"request": 0, "ping": 0, "failed": 0}
    money = 0.0
    routed = ({e["client_request_id"] for e in entries if e.get("command") == "router" and e.get("client_request_id")}
              if "router" in commands else set())
    by_client = {e["client_request_id"]: e for e in entries if e.get("command") != "router" and e.get("client_request_id")}
    for e in entries:
        if e.get("command") not in commands:
            continue
        if e.get("command") != "router" and e.get("client_request_id") in routed:
            continue  # the router recorded this request too: its line counts it
        usage = Usage.from_api(e["usage"]) if e.get("usage") else None
        price = 0.0
        if usage is not None and e.get("model"):
            try:
                price = cost(usage, e["model"], table).total
            except GitmemError:
                price = 0.0
        kind = e.get("kind", "request")
        count[kind if kind in count else "request"] += 1
        if e.get("status", 200) != 200:
            count["failed"] += 1
        money += price
        if usage is not None:
            total = total + usage
        name = str(e.get("session") or e.get("command"))
        session = sessions.setdefault(name, {
            "session": name, "requests": 0, "pings": 0, "policies": [], "upstreams": [],
            "usage": Usage(), "cost": 0.0, "breaks": [], "memory_commits": [], "clients": {}})
        session["requests" if kind == "request" else "pings"] += 1
        if e.get("command") == "router" and e.get("client"):
            session["clients"][e["client"]] = session["clients"].get(e["client"], 0) + 1
        for key, value in (("policies", e.get("policy")), ("upstreams", e.get("upstream") or e.get("backend")),
                           ("memory_commits", e.get("memory_commit")
                                               or by_client.get(e.get("client_request_id"), {}).get("memory_commit"))):
            if value and value not in session[key]:
                session[key].append(value)
        session["cost"] += price
        if usage is not None:
            session["usage"] = session["usage"] + usage
        key = f"{e.get('clock')}|{e.get('run') if e.get('clock') != 'wall' else ''}|{e.get('line')}"
        state = lines.setdefault(key, {"last": None, "pings": []})
        if kind == "ping":
            state["pings"].append((e, price))
            continue
        last = state["last"]
        if last is not None and isinstance(e.get("at"), (int, float)) and e["at"] - last["at"] >= BREAK_SECONDS:
            pings = state["pings"]
            sessions[str(last.get("session") or last.get("command"))]["breaks"].append({
                "seconds": e["at"] - last["at"], "policy": e.get("policy"), "pings": len(pings),
                "ping_cost": sum(p for _, p in pings), "prefix_after": _prefix_state(e.get("usage"), last.get("usage")),
                "next_session": None if e.get("session") == last.get("session") else e.get("session")})
        state["last"], state["pings"] = e, []
    out_sessions = []
    for s in sessions.values():
        out_sessions.append({**s, "usage": s["usage"].to_api()})
    return {"requests": count["request"], "pings": count["ping"], "failed": count["failed"], "total_cost": money,
            "usage": total.to_api(), "prices": {"source": table.source, "checked": table.checked},
            "sessions": out_sessions}


def render_router_text(bill: Mapping[str, Any], title: str = "Router traffic") -> str:
    """The router's bill as text: one block per session, one line per break."""
    lines = [f"{title}: {plural(bill['requests'], 'request')}, "
             f"{plural(bill['pings'], 'keep-alive ping')}, {bill['failed']} failed; {_usd(bill['total_cost'])} "
             f"(prices: {bill['prices']['source']}, checked {bill['prices']['checked']})"]
    for s in bill["sessions"]:
        u = s["usage"]
        lines.append("")
        sent = ", ".join(f"gitmem {name} ({n})" for name, n in s["clients"].items())
        lines.append(f"session {s['session']}  policy {','.join(s['policies']) or '-'}  "
                     f"upstream {','.join(s['upstreams']) or '-'}  memory {','.join(c[:10] for c in s['memory_commits']) or '-'}"
                     + (f"  sent by {sent}" if sent else ""))
        lines.append(f"  {plural(s['requests'], 'request')}, {plural(s['pings'], 'ping')}, {_usd(s['cost'])}: "
                     f"input {u['input_tokens']}, "
                     f"cache write {u['cache_creation_input_tokens']}, cache read {u['cache_read_input_tokens']}, "
                     f"output {u['output_tokens']}")
        for b in s["breaks"]:
            nxt = f", then session {b['next_session']}" if b["next_session"] else ""
            lines.append(f"  break {b['seconds'] / 60:.1f} min ({b['policy']}): {plural(b['pings'], 'ping')} "
                         f"{_usd(b['ping_cost'])}, prefix {b['prefix_after']} after it{nxt}")
    return "\n".join(lines)


# --- rendering -----------------------------------------------------------------


def _usd(x: float) -> str:
    """Dollars to 4 decimals, more for a smaller amount: two significant digits at least, so no cost shows as
    ``$0.0000`` (a Haiku 5.5 ping can cost $0.00004)."""
    places = 4 if x == 0 else min(10, max(4, 1 - math.floor(math.log10(abs(x)))))
    return f"${x:.{places}f}"


def _cell(text: str, width: int) -> str:
    """``text`` right-aligned in ``width``, and at least one space before it when it is wider."""
    return f" {text}".rjust(width)


def _minutes(m: float) -> str:
    return f"{m:g} min"


def render_text(bill: Bill) -> str:
    """The bill and the break-length table as aligned text."""
    lines = [f"Bill ({bill.backend}, {bill.model}; prices: {bill.source}, checked {bill.checked})",
             f"break: {_minutes(bill.break_seconds / 60)}; cost per run, mean of {plural(bill.policies[0].runs, 'run')}", ""]
    lines.append(f"{'policy':<17}{'session 1':>11}{'break':>10}{'session 2':>11}{'total':>11}{'vs uncached':>13}"
                 f"  guide after the break")
    for p in bill.policies:
        after = ", ".join(f"{state} {n}/{p.runs}" for state, n in sorted(p.after_break.items())) or "-"
        lines.append(f"{POLICY_LABELS.get(p.policy, p.policy):<17}{_cell(_usd(p.phases['session1']), 11)}"
                     f"{_cell(_usd(p.phases['break']), 10)}{_cell(_usd(p.phases['session2']), 11)}"
                     f"{_cell(_usd(p.total), 11)}{_cell(f'{p.ratio:.2f}', 13)}  {after}")
    if not bill.table:
        return "\n".join(lines + ["", bill.why])
    lines += ["", "Computed for other break lengths (same workload, same prices; * = cheapest):"]
    header = f"{'break':>9}" + "".join(f"{POLICY_LABELS[p]:>18}" for p in FIXED) + f"{'auto picks':>13}"
    lines.append(header)
    for row in bill.table:
        cells = []
        for name in FIXED:
            mark = "*" if name == row.cheapest else " "
            cells.append(_cell(f"{_usd(row.totals[name])} {row.ratio(name):.2f}{mark}", 18))
        lines.append(f"{_minutes(row.break_minutes):>9}" + "".join(cells) + f"{row.auto_chose:>13}")
    if bill.why:
        lines += ["", bill.why]
    return "\n".join(lines)


_MARKS = {"none": "u", "5m": "5", "1h": "h", "keepalive": "k"}


def render_plot(bill: Bill, height: int = 12) -> str:
    """A terminal chart: cost relative to uncached (y) per break length (x), one letter per policy."""
    rows = bill.table
    if not rows:
        return bill.why
    top = max(max(r.ratio(p) for p in FIXED) for r in rows)
    top = max(1.0, top)
    width = 8
    grid = [[" "] * (len(rows) * width) for _ in range(height + 1)]
    for x, row in enumerate(rows):
        for p in FIXED:
            y = round(row.ratio(p) / top * height)
            col = x * width + 3 + FIXED.index(p) % 2
            cell = grid[height - y][col]
            grid[height - y][col if cell == " " else col + 2] = _MARKS[p]
    out = [f"cost / uncached   ({', '.join(f'{m}={POLICY_LABELS[p]}' for p, m in _MARKS.items())})"]
    for i, line in enumerate(grid):
        value = top * (height - i) / height
        out.append(f"{value:5.2f} |" + "".join(line).rstrip())
    out.append("      +" + "-" * (len(rows) * width))
    out.append("       " + "".join(f"{r.break_minutes:g}".center(width) for r in rows) + "  break (min)")
    return "\n".join(out)


_COLOURS = {"none": "#888888", "5m": "#d62728", "1h": "#1f77b4", "keepalive": "#2ca02c"}


def render_svg(bill: Bill) -> str:
    """The break-length table as an SVG line chart (ratio to uncached per policy)."""
    from html import escape

    w, h, left, right, top, bottom = 720, 400, 60, 170, 40, 50
    rows = bill.table
    if not rows:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="80" viewBox="0 0 {w} 80" '
                f'font-family="sans-serif" font-size="12"><rect width="{w}" height="80" fill="white"/>'
                f'<text x="20" y="44">{escape(bill.why)}</text></svg>\n')
    ymax = max(1.0, max(max(r.ratio(p) for p in FIXED) for r in rows)) * 1.05
    # Breaks are placed by their length (on a square-root scale, so minutes and hours both read).
    span = math.sqrt(max(r.break_minutes for r in rows)) or 1.0
    xs = [left + math.sqrt(r.break_minutes) / span * (w - left - right) for r in rows]

    def y(v: float) -> float:
        return top + (1 - v / ymax) * (h - top - bottom)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
             f'font-family="sans-serif" font-size="12">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<text x="{left}" y="22" font-size="14">'
             f'{escape(f"Cost relative to uncached by break length ({bill.model}, {bill.backend})")}</text>']
    for i in range(6):
        v = ymax * i / 5
        parts.append(f'<line x1="{left}" x2="{w - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{left - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.2f}</text>')
    labelled = -100.0
    for x, r in zip(xs, rows):
        if x - labelled >= 22:  # close breaks (59 and 61 min) share one label's room: the first is named
            parts.append(f'<text x="{x:.1f}" y="{h - bottom + 18}" text-anchor="middle">{r.break_minutes:g}</text>')
            labelled = x
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{h - bottom}" y2="{h - bottom + 5}" stroke="#999"/>')
    parts.append(f'<text x="{(left + w - right) / 2:.1f}" y="{h - 12}" text-anchor="middle">'
                 f'break (minutes, square-root scale)</text>')
    for n, p in enumerate(FIXED):
        points = " ".join(f"{x:.1f},{y(r.ratio(p)):.1f}" for x, r in zip(xs, rows))
        parts.append(f'<polyline fill="none" stroke="{_COLOURS[p]}" stroke-width="2" points="{points}"/>')
        for x, r in zip(xs, rows):
            if r.cheapest == p:
                parts.append(f'<circle cx="{x:.1f}" cy="{y(r.ratio(p)):.1f}" r="4" fill="{_COLOURS[p]}"/>')
        ly = top + 20 + n * 20
        parts.append(f'<line x1="{w - right + 15}" x2="{w - right + 40}" y1="{ly}" y2="{ly}" '
                     f'stroke="{_COLOURS[p]}" stroke-width="2"/>')
        parts.append(f'<text x="{w - right + 46}" y="{ly + 4}">{escape(POLICY_LABELS[p])}</text>')
    parts.append(f'<text x="{w - right + 15}" y="{top + 110}">● cheapest</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
