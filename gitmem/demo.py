"""``gitmem demo cache-ttl``: the issue's case end to end, in a temporary sample repository.

A payments team's agent on Claude Haiku 4.5. Every request carries the same 12,100-token guide
(estimated by :func:`gitmem.tokens.count_tokens`, the emulator's counter, calibrated to Claude's
tokenizer: see :data:`gitmem.tokens.ESTIMATE_NOTE`) plus the team's earlier
decisions, written as the ``gitmem fact add`` commands it prints would write them. Session 1 (4 questions, 30 s apart),
a 5.5-minute break, session 2 (4 more questions). Each session is run four ways (policies ``none``,
``5m``, ``1h``, ``keepalive`` = 5m plus one ``max_tokens: 0`` ping 4 minutes into the break), 6 runs each; run
*r* asks the 8 questions rotated by *r*.

All 24 timelines (4 policies x 6 runs) share one clock and are interleaved, so ``--real-time``
waits for one real break, not 24. Each timeline's body starts with a one-line system block naming
its run and policy: that keeps the cache prefixes of different timelines apart, which matters on the
real API, where all of them share one organization's cache. On the emulator the clock is virtual by
default and the whole demo takes seconds.

Every number comes from the ``usage`` a backend returned, priced with :func:`gitmem.usage.cost`; the run
is recorded (see :mod:`gitmem.bill`) so ``gitmem bill`` can show it again.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from .errors import GitmemError
from .policy import FIXED, KeepAlive, Request, Workload, policy_ttl
from .pricing import DEFAULT_TABLE, PriceTable
from .tokens import count_tokens, truncate_to_tokens

if TYPE_CHECKING:
    from .store import Store

__all__ = ["GUIDE_TOKENS", "DECISIONS", "QUESTIONS", "sample_guide", "DemoResult", "run_demo", "make_sample_repo"]

GUIDE_TOKENS = 12_100
MODEL = "claude-haiku-4-5"
REQUESTS_PER_SESSION = 4
GAP_SECONDS = 30.0
BREAK_MINUTES = 5.5
PING_AFTER = 240.0
#: The sample repository's fixed clock: decision *i* is written at this instant plus *i* minutes,
#: with an id built from that time and *i* (not the wall clock and a random tail), so the memory
#: block, and with it every prompt and every dollar the demo prints, is the same on every run.
SAMPLE_EPOCH_MS = 1_767_258_000_000  # 2026-01-01T09:00:00Z
_CITE = re.compile(r"\[([0-9a-hjkmnp-tv-z]{16})\]")

#: The team's earlier decisions: (command words, text, extra options).
DECISIONS: Tuple[Tuple[Tuple[str, ...], str, Tuple[str, ...]], ...] = (
    (("fact", "add"), "Refunds are idempotent on the payment_intent id: retrying a refund that timed out never pays twice",
     ("--tag", "refunds", "--path", "src/refunds")),
    (("fact", "add"), "Money amounts are stored as integer minor units (cents) plus an ISO 4217 currency code column",
     ("--tag", "money",)),
    (("fact", "add"), "Ledger entries are append-only: a wrong entry is fixed with a new reversing entry, never an update",
     ("--tag", "ledger", "--path", "src/ledger")),
    (("fact", "add"), "Webhook handlers check the Stripe-Signature header and drop duplicate event ids seen in the last 72 hours",
     ("--tag", "webhooks", "--path", "src/webhooks")),
    (("fact", "add"), "Payouts run once a day at 02:00 UTC, after the settlement reconciliation job has finished",
     ("--tag", "payouts",)),
    (("fact", "add"),
     "Currency conversion uses the exchange rate locked at checkout and stored on the order, never the current rate",
     ("--tag", "fx", "--path", "src/fx")),
    (("fact", "add"), "Chargeback disputes must be answered within 7 days; the disputes service pages the on-call engineer",
     ("--tag", "disputes",)),
    (("fact", "add"), "Card numbers never reach our servers or database: we store only vault tokens (PCI scope)",
     ("--tag", "pci",)),
    (("add", "rejection"), "Floats for money amounts in the FX service",
     ("--because", "rounding errors broke the 2023 reconciliation", "--tag", "fx")),
)

QUESTIONS = (
    "Can a refund be retried safely when the request timed out?",
    "How should a new table store a money amount?",
    "How do I fix a wrong ledger entry?",
    "What must a webhook handler check before it processes an event?",
    "When do payouts run?",
    "Which exchange rate converts an order's currency?",
    "How long do we have to answer a chargeback dispute?",
    "Can we keep card numbers in our database?",
)

_SERVICES = ("ledger", "refunds", "payouts", "disputes", "invoicing", "fx", "risk", "webhooks",
             "reconciliation", "settlement", "subscriptions", "tax", "checkout", "vault")


def _section(i: int, name: str) -> str:
    other = _SERVICES[(i + 3) % len(_SERVICES)]
    return f"""## The {name} service

`src/{name}/` owns the {name} domain. Its public interface is `src/{name}/api.py`; everything else in
the package is private and may change without notice. Other services call it through the generated
client in `clients/{name}_client.py`, never by importing its modules.

### Layout
- `src/{name}/api.py`: request handlers, input validation, and the mapping to domain errors.
- `src/{name}/domain/`: pure functions and dataclasses, no I/O, fully unit tested.
- `src/{name}/store.py`: the only module that talks to the `{name}` schema in Postgres.
- `src/{name}/jobs/`: scheduled jobs, each idempotent and safe to re-run after a crash.
- `tests/{name}/`: unit tests next to integration tests marked `@pytest.mark.db`.

### Conventions
Handlers return typed results and raise only `{name.title()}Error` subclasses. Log lines carry the
request id and the {name} entity id, never personal data. Database migrations for `{name}` are
reviewed by the owning team and by the {other} team when they touch shared views. Feature flags live in
`config/flags/{name}.yaml` and are removed within two releases of being fully rolled out.

### Testing
Run `make test-{name}` for the fast suite and `make test-{name}-db` for the database suite, which
needs `docker compose up postgres`. New behaviour needs a test that fails without it. Property tests
cover the domain functions; contract tests in `tests/contracts/{name}_{other}.py` pin the interface
the {other} service relies on.

### Runbook
Alerts for {name} page the payments on-call. First check the dashboard `payments/{name}`, then the
job queue depth, then recent deploys. Roll back with `make rollback SERVICE={name}`; never hot-fix in
production. After an incident, write the timeline in `docs/incidents/` within two working days.
"""


def sample_guide(target: int = GUIDE_TOKENS) -> str:
    """A deterministic payments-repository guide of exactly ``target`` tokens."""
    head = """# Payments platform: repository guide

This guide is for people and agents changing this repository. Read it before your first change.
It explains how the code is laid out, the conventions every service follows, how to test, and how
to operate the services in production.

## Principles
Correctness over speed: a payment that is wrong costs more than one that is late. Every money
movement is recorded in the ledger. Every external call can fail, time out or be retried, so every
handler and job is idempotent. Reviews need one approval from the owning team.
"""
    sections, i = [head], 0
    while count_tokens("\n".join(sections)) < target:
        sections.append(_section(i, _SERVICES[i % len(_SERVICES)] if i < len(_SERVICES)
                                 else f"{_SERVICES[i % len(_SERVICES)]}-{i // len(_SERVICES)}"))
        i += 1
    text = truncate_to_tokens("\n".join(sections), target - 1).rstrip()
    while count_tokens(text) < target:
        text += " ok"
    if count_tokens(text) != target:  # pragma: no cover - the counter is additive over these pieces
        raise GitmemError(f"could not build a {target}-token guide")
    return text


def _git(cwd: str, *args: str) -> None:
    try:
        subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise GitmemError(f"git {' '.join(args)} failed in the sample repository: {getattr(e, 'stderr', e)}") from None


def _command(words: Sequence[str], text: str, extra: Sequence[str]) -> str:
    """The `gitmem` command a person would type for one decision (what the demo prints)."""
    shown = " ".join(f'"{a}"' if " " in a else a for a in extra)
    return f'$ gitmem {" ".join(words)} "{text}" {shown}'.rstrip()


def _options(extra: Sequence[str]) -> Dict[str, List[str]]:
    """``("--tag", "fx", "--because", "why")`` as ``{"tag": ["fx"], "because": ["why"]}``."""
    out: Dict[str, List[str]] = {}
    for flag, value in zip(extra[::2], extra[1::2]):
        out.setdefault(flag.lstrip("-"), []).append(value)
    return out


def sample_id(i: int) -> str:
    """Decision *i*'s fixed id: the sample clock's time in the id's 10 time characters, *i* in its tail."""
    from .model import new_id

    return new_id(SAMPLE_EPOCH_MS + i * 60_000, tail=i)


def _write_fixed(store: Store, i: int, type_: str, text: str, options: Dict[str, List[str]]) -> str:
    """What ``store.add`` does (redaction, validation, one commit), with a fixed id and clock."""
    from datetime import datetime, timezone

    from . import model
    from .store import Built
    from .redact import redact_fields
    from .repo import default_author

    author = default_author(store.repo)
    fields_: Any
    fields_, redacted = redact_fields(text=text, reason=options.get("because", [None])[0])
    created = datetime.fromtimestamp((SAMPLE_EPOCH_MS + i * 60_000) / 1000, timezone.utc)
    memory = model.Memory(id=sample_id(i), type=type_, author=author, source="demo",
                          created=created.strftime("%Y-%m-%dT%H:%M:%SZ"), tags=tuple(options.get("tag", ())),
                          paths=tuple(options.get("path", ())), **fields_)
    model.validate(memory)
    store.commit(lambda snap: Built({model.memory_path(memory): model.dump_yaml(memory)}, memory, redacted),
                 op="add", author=author, source="demo")
    return memory.id


def make_sample_repo(path: str, log: Callable[[str], None] = lambda line: None) -> List[str]:
    """Create the sample repository at ``path``: the guide, its config, the decisions. Returns memory ids.

    Writes through the library (source ``demo``) and prints each write as the `gitmem` command that
    does the same, so the demo shows the commands without driving the CLI from below it. The ids and
    creation times come from a fixed clock (:data:`SAMPLE_EPOCH_MS`), so every run builds the same
    memory and sends byte-identical prompts."""
    from .context_inputs import set_guide
    from .store import Store

    if os.path.exists(path) and not (os.path.isdir(path) and not os.listdir(path)):  # `--keep .` in one's own
        # repository would write over its guide, commit on its HEAD and add to its memory
        what = "not empty" if os.path.isdir(path) else "not a folder"
        raise GitmemError(f"the sample repository needs a new or empty folder: {path} is {what}")
    os.makedirs(path, exist_ok=True)
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.name", "Payments Team")
    _git(path, "config", "user.email", "payments@example.com")
    with open(os.path.join(path, "AGENTS.md"), "w", encoding="utf-8") as f:
        f.write(sample_guide())
    _git(path, "add", "AGENTS.md")
    _git(path, "commit", "-q", "-m", "Add the repository guide")
    store = Store.open(path)
    log("$ gitmem guide set AGENTS.md")
    set_guide(store, os.path.join(path, "AGENTS.md"))
    ids = []
    for i, (words, text, extra) in enumerate(DECISIONS):
        log(_command(words, text, extra))
        type_ = words[0] if words[1:] == ("add",) else words[1]
        ids.append(_write_fixed(store, i, type_, text, _options(extra)))
    return ids


@dataclass
class DemoResult:
    run: Dict[str, Any]
    bill: Any
    checks: Dict[str, Any]
    context: Dict[str, Any]
    sample_repo: Optional[str]


def _timeline_line(run: int, runs: int, policy: str) -> str:
    # Numbers, not names: the same token count for every policy, so their prefixes are equally long.
    return f"Demo timeline: run {run} of {runs}, policy {FIXED.index(policy) + 1} of {len(FIXED)}."


def _timelines(runs: int, break_seconds: float) -> List[Tuple[float, str, int, str, str, Optional[str]]]:
    """(at, policy, run, phase, label, question) for every request, in send order."""
    events: List[Tuple[float, str, int, str, str, Optional[str]]] = []
    end1 = (REQUESTS_PER_SESSION - 1) * GAP_SECONDS
    for run in range(1, runs + 1):
        order = QUESTIONS[run - 1:] + QUESTIONS[:run - 1]
        for policy in FIXED:
            for i in range(REQUESTS_PER_SESSION):
                events.append((i * GAP_SECONDS, policy, run, "session1", f"s1.q{i + 1}", order[i]))
                events.append((end1 + break_seconds + i * GAP_SECONDS, policy, run, "session2", f"s2.q{i + 1}",
                               order[REQUESTS_PER_SESSION + i]))
            # The keep-alive policy: a ping every PING_AFTER idle seconds, up to the idle limit
            # (one ping, 4 minutes in, for the 5.5-minute break).
            k = 1
            while policy == "keepalive" and k * PING_AFTER < break_seconds and k * PING_AFTER <= KeepAlive().idle_limit:
                events.append((end1 + k * PING_AFTER, policy, run, "break", f"ping{k}" if k > 1 else "ping", None))
                k += 1
    return sorted(events, key=lambda e: (e[0], e[2], FIXED.index(e[1])))


class _ViaRouter:
    """The demo's client when it runs through ``gitmem router``: the SDK at the router's URL.

    The demo sends only its timeline line and the question; the router (on the sample repository,
    guide included, the embedded emulator on a virtual clock) attaches the guide and the memory and
    places the breakpoints for the policy each request names (``gitmem-policy``). Keep-alive pings
    are the router's own: :meth:`wait` moves the router's clock and returns the pings it sent.
    """

    def __init__(self, repo: str, table: PriceTable):
        import anthropic

        from .emulator import VirtualClock
        from .router_app import Router, serve_in_thread

        self.router = Router(policy="5m", repo=repo, clock=VirtualClock(), guide=True, table=table, env={})
        self.running = serve_in_thread(self.router)
        self.client = anthropic.Anthropic(base_url=self.running.url, api_key="gitmem-demo", max_retries=0)
        self.virtual_time = True

    def send(self, body: Dict[str, Any], policy: str, line: str) -> Any:
        from .backend import EMULATOR, Reply
        from .usage import Usage

        raw = self.client.messages.with_raw_response.create(
            **body, extra_headers={"gitmem-policy": policy, "gitmem-session": line})
        message = raw.parse()
        backend = EMULATOR if raw.headers.get("x-gitmem-backend") == EMULATOR else raw.headers.get("gitmem-upstream", "")
        return Reply(message=message.model_dump(mode="json"), usage=Usage.from_api(message.usage), backend=backend,
                     request_id=raw.headers.get("request-id"))

    def wait(self, seconds: float) -> List[dict]:
        import httpx2

        if seconds <= 0:
            return []
        response = httpx2.post(f"{self.running.url}/_router/clock", json={"advance": seconds}, timeout=60)
        return list(response.json()["pings"])

    def close(self) -> None:
        self.running.stop()


def run_demo(*, runs: int = 6, break_minutes: float = BREAK_MINUTES, real_time: bool = False,
             backend: str = "emulator", keep: Optional[str] = None, table: PriceTable = DEFAULT_TABLE,
             log: Callable[[str], None] = lambda line: None,
             on_tick: Optional[Callable[[float], None]] = None, via_router: bool = False,
             sample_repo: Optional[str] = None) -> DemoResult:
    """Run the case; ``keep`` builds the sample repository there (else a temporary one, removed);
    ``sample_repo`` runs it on one :func:`make_sample_repo` built already.

    ``via_router``: send every request through ``gitmem router`` (in this process, on loopback) to
    the embedded emulator, which attaches the memory and sends the keep-alive pings itself."""
    from .bill import make_bill
    from .context_inputs import build, read_guide
    from .emulator import RealClock, VirtualClock
    from .backend import keepalive_body, open_backend
    from .store import Store

    if runs < 1:
        raise GitmemError("--runs must be at least 1")
    if not 0 <= break_minutes < math.inf:  # NaN too, which no comparison admits (a virtual clock cannot wait it)
        raise GitmemError(f"--break-minutes must be a number of minutes, 0 or more, not {break_minutes}")
    if backend == "anthropic" and not real_time:
        raise GitmemError("the real API runs on real time: add --real-time (the break takes minutes)")
    if via_router and (real_time or backend != "emulator"):
        raise GitmemError("--via-router runs the router on its embedded emulator in virtual time "
                          "(no --real-time, no --backend anthropic)")
    client = None if via_router else open_backend(backend, clock=RealClock() if real_time else VirtualClock())
    where = keep or tempfile.mkdtemp(prefix="gitmem-demo-")
    routed: Optional[_ViaRouter] = None
    try:
        home = sample_repo or (os.path.join(where, "payments") if keep is None else where)
        if sample_repo is None:
            ids = make_sample_repo(home, log)
            store = Store.open(home)
        else:
            store = Store.open(home)
            ids = sorted(m.id for m in store.memories().values())
        if via_router:
            routed = _ViaRouter(home, table)
        contexts: Dict[Tuple[str, str], Any] = {}

        def body_for(policy: str, run: int, question: str) -> dict:
            ttl = policy_ttl(policy)
            if (ttl, question) not in contexts:
                contexts[ttl, question] = build(store, query=question, ttl=ttl, model=MODEL, table=table)
            body = json.loads(json.dumps(contexts[ttl, question].body))
            body["system"].insert(0, {"type": "text", "text": _timeline_line(run, runs, policy)})
            return body

        def routed_body(policy: str, run: int, question: str) -> dict:
            ttl = policy_ttl(policy)
            if (ttl, question) not in contexts:
                contexts[ttl, question] = build(store, query=question, ttl=ttl, model=MODEL, table=table)
            messages = json.loads(json.dumps(contexts[ttl, question].body["messages"]))
            return {"model": MODEL, "max_tokens": contexts[ttl, question].body["max_tokens"],
                    "system": [{"type": "text", "text": _timeline_line(run, runs, policy)}], "messages": messages}

        break_seconds = break_minutes * 60.0
        last_body: Dict[Tuple[str, int], dict] = {}
        requests: List[Dict[str, Any]] = []
        now = 0.0
        phase_of: Dict[str, str] = {}
        for at, policy, run, phase, label, question in _timelines(runs, break_seconds):
            if routed is not None:
                if question is None:
                    continue  # the router sends the keep-alive pings itself
                for ping in routed.wait(at - now):
                    p_policy, p_run = ping["line"].rsplit("-r", 1)
                    n = len([r for r in requests if r["label"].startswith("ping") and r["policy"] == p_policy
                             and r["run"] == int(p_run)]) + 1
                    requests.append({"policy": p_policy, "run": int(p_run), "phase": phase_of.get(ping["line"], "break"),
                                     "label": "ping" if n == 1 else f"ping{n}", "at": ping["at"], "question": None,
                                     "usage": ping["usage"], "backend": requests[0]["backend"],
                                     "request_id": ping["request_id"], "cites": [], "answer": None, "via": "router"})
                now = max(now, at)
                line = f"{policy}-r{run}"
                phase_of[line] = "break" if phase == "session1" else phase
                reply = routed.send(routed_body(policy, run, question), policy, line)
                requests.append({"policy": policy, "run": run, "phase": phase, "label": label, "at": at,
                                 "question": question, "usage": reply.usage.to_api(), "backend": reply.backend,
                                 "request_id": reply.request_id, "cites": _CITE.findall(reply.text),
                                 "answer": reply.text, "via": "router"})
                continue
            assert client is not None
            client.wait(at - now, on_tick)
            now = max(now, at)
            body = keepalive_body(last_body[policy, run]) if question is None else body_for(policy, run, question)
            reply = client.send(body)
            if question is not None:
                last_body[policy, run] = body
            requests.append({"policy": policy, "run": run, "phase": phase, "label": label, "at": at,
                             "question": question, "usage": reply.usage.to_api(), "backend": reply.backend,
                             "request_id": reply.request_id, "cites": _CITE.findall(reply.text),
                             "answer": reply.text if question is not None else None})
        sample = contexts["5m", QUESTIONS[0]]
        guide_tokens = sample.part("guide").tokens
        first = [r for r in requests if r["policy"] == "5m" and r["run"] == 1]
        nonce = count_tokens(_timeline_line(1, runs, "5m"))
        workload = Workload(
            prefix_tokens=sample.cached_tokens + nonce,
            session1=tuple(Request(r["usage"]["input_tokens"], r["usage"]["output_tokens"])
                           for r in first if r["phase"] == "session1"),
            session2=tuple(Request(r["usage"]["input_tokens"], r["usage"]["output_tokens"])
                           for r in first if r["phase"] == "session2"),
            gap_seconds=GAP_SECONDS,
            ping=Request(first[REQUESTS_PER_SESSION - 1]["usage"]["input_tokens"], 0),
        )
        record = {
            "version": 1, "kind": "cache-ttl", "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "backend": requests[0]["backend"], "clock": "real" if real_time else "virtual",
            "via": "router" if via_router else "direct",
            "model": table.get(MODEL).id, "prices": {"source": table.source, "checked": table.checked},
            "runs": runs, "break_seconds": break_seconds, "guide_tokens": guide_tokens,
            "memory_commit": sample.memory_commit, "memory_ids": ids,
            "workload": workload.to_dict(),
            "workload_note": "the break table uses run 1's measured requests of the 5m policy",
            "keepalive": {"ping_after": PING_AFTER, "idle_limit": KeepAlive().idle_limit},
            "requests": requests,
        }
        bill = make_bill(record, table)
        context = {"guide": sample.guide_path, "guide_file_tokens": count_tokens(read_guide(store)[1]),
                   "guide_tokens": guide_tokens,
                   "memory_tokens": sample.part("memory").tokens if sample.part("memory") else 0,
                   "memories": len(ids), "memory_commit": sample.memory_commit,
                   "parts": [p.to_dict() for p in sample.parts], "warnings": list(sample.warnings)}
        return DemoResult(run=record, bill=bill, checks=checks(record, bill, set(ids)), context=context,
                          sample_repo=where if keep else None)
    finally:
        if routed is not None:
            routed.close()
        if keep is None:
            shutil.rmtree(where, ignore_errors=True)


def checks(run: Dict[str, Any], bill: Any, before_break: set) -> Dict[str, Any]:
    """What the issue says the demo must show, computed from the recorded requests."""
    cites: Dict[str, List[int]] = {}
    for r in run["requests"]:
        if r["phase"] == "session2":
            ok = bool(r["cites"]) and set(r["cites"]) <= before_break
            cites.setdefault(r["policy"], [0, 0])[0] += ok
            cites[r["policy"]][1] += 1
    order = [p.policy for p in sorted(bill.policies, key=lambda p: p.total)]
    return {
        "runs": run["runs"],
        "guide_after_break": {p.policy: p.after_break for p in bill.policies},
        "session2_answers_citing_pre_break_decisions": {p: f"{a}/{n}" for p, (a, n) in cites.items()},
        "cost_order_cheapest_first": order,
        "ratio_to_uncached": {p.policy: round(p.ratio, 3) for p in bill.policies},
    }
