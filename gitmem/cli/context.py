"""Context, guide, ask, bill and demo commands.

The SDK, the emulator and the demo are imported inside the commands, so `gitmem add` stays quick.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, Optional

import click

from ..text import plural
from .base import REPO_PATH, echo, emit_json, json_option, main, pass_store

if TYPE_CHECKING:
    from ..store import Store

_TTL = click.Choice(["none", "5m", "1h", "auto"])


def _usage_line(u: dict) -> str:
    c = u["cache_creation"]
    return (f"input_tokens {u['input_tokens']}  output_tokens {u['output_tokens']}  "
            f"cache_creation_input_tokens {u['cache_creation_input_tokens']} "
            f"(5m {c['ephemeral_5m_input_tokens']}, 1h {c['ephemeral_1h_input_tokens']})  "
            f"cache_read_input_tokens {u['cache_read_input_tokens']}")


_AUTO_HELP = ("auto: 5m or 1h, as the router's auto policy would choose from the breaks recorded for this "
              "repository, branch and model.")


def _auto_ttl(store: Store, probe: Any, table: Any, model: str) -> str:
    """``--ttl auto``'s choice for a request like ``probe`` (its cached part's size and model), said on stderr:
    from the breaks of the router's line such a request joins (``model`` as given, as a client sends it)."""
    from ..policy import PrefixCosts, choose_plan
    from ..router_app import default_line, recorded_gaps

    gaps = recorded_gaps(store, default_line(store, model))
    plan = choose_plan(gaps, PrefixCosts.of(probe.cached_tokens, 0, probe.model, table))
    click.echo(f"gitmem: --ttl auto chose {plan.ttl}: {plan.reason}", err=True)
    return plan.ttl


@main.command("context")
@click.option("--query", "-q", help="The question the context is for (ranks an over-budget tail).")
@click.option("--path", "paths", multiple=True, type=REPO_PATH, help="A file in play (repeatable): its memories are preferred.")
@click.option("--ttl", type=_TTL, default="5m", show_default=True,
              help=f"cache_control TTL of the breakpoints; {_AUTO_HELP}")
@click.option("--model", default="claude-haiku-4-5", show_default=True, help="Model (its cache minimum applies).")
@click.option("--budget", type=click.IntRange(0), default=50_000, show_default=True,
              help="Tokens the memory blocks may take, their framing included (only notices of memories "
              "withdrawn since the cached part may go past it).")
@click.option("--advance", is_flag=True, help="First move the cache anchor to the memory tip.")
@json_option
@pass_store
def context_(store: Store, query, paths, ttl, model, budget, advance, as_json) -> None:
    """Print the Messages API body an agent sends: guide, team memory, question.

    Blocks: the guide (breakpoint), the memory as of the cache anchor (breakpoint), memory added
    since the anchor (breakpoint), the question. The same memory tip gives byte-identical blocks.

    JSON: {"model", "ttl", "memory_commit", "anchor_commit", "guide", "cached_tokens",
    "tail_tokens", "total_tokens", "parts": [{"name", "tokens", "prefix_tokens",
    "cache_control", "memory_ids"}], "dropped", "warnings", "body"}.

    Example: gitmem context --query "how do refunds work?" --ttl 1h --json
    """
    from ..context import assemble, query_refusal
    from ..context_inputs import gather, set_anchor
    from ..price_table import configured_price_table

    problem = query_refusal(query, "--query")
    if problem:
        raise click.UsageError(problem)
    if advance:
        set_anchor(store)
    table = configured_price_table(store)
    inputs = gather(store, budget=budget)
    if ttl == "auto":
        ttl = _auto_ttl(store, assemble(inputs, query=query, paths=paths, ttl="5m", model=model, budget=budget,
                                        table=table), table, model)
    ctx = assemble(inputs, query=query, paths=paths, ttl=ttl, model=model, budget=budget, table=table)
    for warning in ctx.warnings:
        click.echo(f"gitmem: warning: {warning}", err=True)
    if as_json:
        emit_json(ctx.to_dict())
        return
    click.echo(f"# memory commit {ctx.memory_commit or '-'} (cache anchor {ctx.anchor_commit or '-'}), "
               f"guide {ctx.guide_path or '-'}, model {ctx.model}")
    for part in ctx.parts:
        mark = f"cache_control {part.ttl}" if part.ttl else "not cached"
        ids = f", {plural(len(part.memory_ids), 'memory')}" if part.memory_ids else ""
        click.echo(f"# {part.name}: {plural(part.tokens, 'token')} (prefix {part.prefix_tokens}), {mark}{ids}")
    from ..tokens import ESTIMATE_NOTE

    click.echo(f"# {ESTIMATE_NOTE}")
    for block in ctx.body["system"]:  # for a person to read (the request itself is --json): made inert
        echo(block["text"])
        click.echo("")
    echo(ctx.body["messages"][0]["content"][0]["text"])


@main.group()
def guide() -> None:
    """The repository guide every request carries (git config gitmem.guide).

    Example: gitmem guide set AGENTS.md
    """


@guide.command("set")
@click.argument("path", type=REPO_PATH)
@json_option
@pass_store
def guide_set(store: Store, path: str, as_json: bool) -> None:
    """Use PATH (a file in the repository, e.g. AGENTS.md or docs/agents.md) as the guide.

    JSON: {"guide", "tokens"} (guide: null when none is set).

    Example: gitmem guide set AGENTS.md
    """
    from ..context_inputs import read_guide, set_guide
    from ..tokens import count_tokens

    rel = set_guide(store, path)
    tokens = count_tokens(read_guide(store)[1])
    if as_json:
        emit_json({"guide": rel, "tokens": tokens})
    else:
        click.echo(f"guide: {rel} ({plural(tokens, 'token')}, estimated), recorded in git config gitmem.guide")


@guide.command("show")
@json_option
@pass_store
def guide_show(store: Store, as_json: bool) -> None:
    """Show which guide is used and its size.

    JSON: {"guide", "tokens"} (guide: null when none is set).

    Example: gitmem guide show
    """
    from ..context_inputs import read_guide
    from ..tokens import count_tokens

    path, text = read_guide(store)
    if as_json:
        emit_json({"guide": path, "tokens": count_tokens(text)})
    else:
        click.echo(f"guide: {path} ({plural(count_tokens(text), 'token')}, estimated)" if path else
                   "no guide (set one with: gitmem guide set AGENTS.md)")


@main.command()
@click.argument("question")
@click.option("--path", "paths", multiple=True, type=REPO_PATH, help="A file in play (repeatable).")
@click.option("--ttl", type=_TTL, default="5m", show_default=True, help=f"cache_control TTL; {_AUTO_HELP}")
@click.option("--model", default="claude-haiku-4-5", show_default=True)
@click.option("--max-tokens", type=click.IntRange(1), default=1024, show_default=True)
@click.option("--backend", type=click.Choice(["auto", "emulator", "anthropic"]), default="auto", show_default=True,
              help="auto: the real API when ANTHROPIC_API_KEY or ANTHROPIC_BASE_URL is set, else the in-process "
                   "emulator.")
@json_option
@pass_store
def ask(store: Store, question, paths, ttl, model, max_tokens, backend, as_json) -> None:
    """Ask one question with the team's memory and the guide; print answer, usage, cost.

    The request is recorded in .git/gitmem/requests.jsonl with the memory commit it was built
    from, so you can later see exactly what the agent knew. Sent through a `gitmem router`, it
    is recorded by the router too, under the same id, and `gitmem bill` counts it once.

    JSON: {"backend", "model", "ttl", "memory_commit", "request_id", "question", "answer", "usage": {...},
    "cost": {..., "total"}, "prices": {"source", "checked"}, "warnings"}.

    Example: gitmem ask "Can a refund be retried after a timeout?"
    """
    if not question.strip():  # a paid request (on the API) that asks nothing
        raise click.UsageError("QUESTION is empty: give the question to ask")
    from ..bill import record_request
    from ..price_table import configured_price_table
    from ..context_inputs import build, note_sent
    from ..backend import open_backend
    from ..usage import cost
    from ..repo import common_dir

    table = configured_price_table(store)
    if ttl == "auto":
        ttl = _auto_ttl(store, build(store, query=question, paths=paths, ttl="5m", model=model, max_tokens=max_tokens,
                                     table=table), table, model)
    ctx = build(store, query=question, paths=paths, ttl=ttl, model=model, max_tokens=max_tokens, table=table)
    # The in-process emulator keeps its cache in .git/gitmem/, so the next ask reads what this one wrote.
    reply = open_backend(backend, state_path=os.path.join(common_dir(store.repo), "gitmem", "emulator-cache.json"),
                         sdk=False, command="ask").send(ctx.body)
    note_sent(store, ctx)
    price = cost(reply.usage, reply.model or ctx.model, table)
    data = {"backend": reply.backend, "model": reply.model, "ttl": ttl, "memory_commit": ctx.memory_commit,
            "request_id": reply.request_id, "question": question, "answer": reply.text,
            "usage": reply.usage.to_api(), "cost": price.to_dict(),
            "prices": {"source": table.source, "checked": table.checked}, "warnings": list(ctx.warnings)}
    record_request(store, {**{k: v for k, v in data.items() if k != "answer"}, "command": "ask",
                           "client_request_id": reply.client_request_id,
                           "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    if as_json:
        emit_json(data)
        return
    for warning in ctx.warnings:
        click.echo(f"gitmem: warning: {warning}", err=True)
    echo(reply.text)  # a model's reply may quote memory, which anyone who can push wrote
    click.echo("")
    click.echo(f"backend: {reply.backend}, model {reply.model}, request-id {reply.request_id}, "
               f"memory commit {ctx.memory_commit or '-'}")
    click.echo(_usage_line(data["usage"]))
    click.echo(f"cost: ${price.total:.6f} (prices: {table.source}, checked {table.checked})")
    if reply.backend == "emulator":
        from ..tokens import ESTIMATE_NOTE

        click.echo(f"The emulator's {ESTIMATE_NOTE}.")


@main.command()
@click.option("--run", "run_path", metavar="FILE", help="A recorded run (default: the newest in .git/gitmem/runs/).")
@click.option("--svg", "svg_path", metavar="OUT", callback=lambda ctx, param, value: _svg_target(value),
              help="Also write the break-length chart as SVG to OUT.")
@click.option("--plot/--no-plot", default=True, show_default=True, help="Print the terminal chart.")
@click.option("--router", "router_traffic", is_flag=True,
              help="Bill the traffic `gitmem router` recorded instead: by session and break, pings included.")
@click.option("--requests", "all_requests", is_flag=True,
              help="Bill every recorded request instead: the router's, `gitmem ask` and `gitmem messages`.")
@json_option
def bill(run_path: Optional[str], svg_path: Optional[str], plot: bool, router_traffic: bool, all_requests: bool,
         as_json: bool) -> None:
    """The bill of a recorded run: session 1 / break / session 2 per policy, the ratio to
    uncached, and a computed table for other break lengths with the cheapest marked.

    How to read it: the first line names the backend (emulator or the real API) and the price table.
    Each policy's row is in USD per run (the mean over the runs), priced from the usage fields each
    reply returned: session 1, the break (keep-alive pings) and session 2, their total, and vs
    uncached (that total over the uncached policy's). guide after the break counts the runs whose
    first request after it read the cached guide, re-wrote it or sent it uncached. The table below is
    computed, not measured: the same workload for other break lengths; * marks the cheapest fixed
    policy, auto picks what auto would send knowing the break. Figures have 4 decimals (two
    significant digits at least); a total is of the unrounded costs, so it can differ from the sum
    of the figures beside it in the last digit.

    JSON: {"backend", "model", "prices", "break_seconds", "policies": [{"policy", "runs",
    "cost_per_run": {"session1", "break", "session2", "total"}, "usage_per_run",
    "ratio_to_uncached", "guide_after_break"}], "break_table": [{"break_minutes", "totals",
    "cheapest", "auto_chose", "ratio_to_uncached"}], "workload", "why", "run"} (why: the
    policies at the run's break, cheapest first, with the prefix writes and pings behind each total).

    With --router: the requests and keep-alive pings `gitmem router` recorded in
    .git/gitmem/requests.jsonl, by session, each break with its pings and whether the
    prefix the line's last request cached was read, partly re-written or re-written after
    it; clients counts the requests `gitmem ask` and
    `gitmem messages` sent through the router. JSON: {"requests", "pings", "failed",
    "total_cost", "usage", "prices", "sessions": [{"session", "requests", "pings",
    "policies", "upstreams", "memory_commits", "clients": {COMMAND: N}, "usage", "cost",
    "breaks": [{"seconds", "policy", "pings", "ping_cost", "prefix_after", "next_session"}]}]}.

    With --requests: every request `gitmem ask`, `gitmem messages` and the router recorded, in
    the same shape; a request without a session is billed under its command's name, and one
    that ask or messages sent through the router is counted once, by the router's record.

    Example: gitmem demo && gitmem bill --svg bill.svg
    """
    from ..bill import latest_run, load_run, make_bill, render_plot, render_svg, render_text
    from ..price_table import configured_price_table
    from ..errors import GitmemError
    from .base import open_store

    store: Optional[Store] = None
    if router_traffic or all_requests:
        from ..bill import read_requests, render_router_text, router_bill

        store = open_store()
        commands = ("router", "ask", "messages") if all_requests else ("router",)
        traffic = router_bill(read_requests(store), configured_price_table(store), commands)
        if not traffic["requests"] and not traffic["pings"]:
            if all_requests:
                raise GitmemError("no request recorded in this repository yet: `gitmem ask`, `gitmem messages` "
                                  "and `gitmem router serve` record theirs")
            raise GitmemError("no router traffic recorded in this repository yet: run `gitmem router serve` "
                              "and point a client at it")
        if as_json:
            emit_json(traffic)
        else:
            click.echo(render_router_text(traffic, "Recorded requests (ask, messages, router)" if all_requests
                                          else "Router traffic"))
        return
    if run_path is None:
        store = open_store()
        run_path = latest_run(store)
        if run_path is None:
            raise GitmemError("no recorded run in this repository yet: run `gitmem demo` first, or pass --run FILE "
                              "(`gitmem bill --requests` bills what ask, messages and the router recorded)")
    run = load_run(run_path)
    result = make_bill(run, configured_price_table(store))
    if svg_path:
        _write_svg(svg_path, render_svg(result))
    if as_json:
        emit_json({**result.to_dict(), "run": run_path})
        return
    click.echo(f"run: {run_path}")
    click.echo(render_text(result))
    if run.get("backend") == "emulator":
        from ..tokens import ESTIMATE_NOTE

        click.echo(f"The emulator's {ESTIMATE_NOTE}.")
    if plot:
        click.echo("")
        click.echo(render_plot(result))
    if svg_path:
        click.echo(f"chart written to {svg_path}")


def _demo_options(f):
    for option in reversed([
        click.option("--runs", type=click.IntRange(1, 50), default=6, show_default=True, help="Runs per policy."),
        click.option("--break-minutes", type=click.FloatRange(0, 180), default=5.5, show_default=True,
                     help="Length of the break between the sessions."),
        click.option("--real-time", is_flag=True, help="Wait for the break for real, with a countdown."),
        click.option("--backend", type=click.Choice(["emulator", "anthropic"]), default="emulator", show_default=True,
                     help="anthropic: the real API (needs ANTHROPIC_API_KEY and --real-time; costs money)."),
        click.option("--keep", metavar="DIR", help="Build the sample repository in DIR (new or empty) and keep it."),
        click.option("--svg", "svg_path", metavar="OUT", callback=lambda ctx, param, value: _svg_target(value),
                     help="Write the break-length chart as SVG to OUT."),
        click.option("--via-router", is_flag=True,
                     help="Send every request through `gitmem router` (in-process, loopback), which attaches the "
                          "memory and sends the keep-alive pings."),
        json_option,
    ]):
        f = option(f)
    return f


@main.group(invoke_without_command=True)
@_demo_options
@click.pass_context
def demo(ctx: click.Context, **options) -> None:
    """Demos; without a subcommand, runs `gitmem demo cache-ttl`.

    JSON: as `gitmem demo cache-ttl --json`.

    Example: gitmem demo
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(cache_ttl, **options)


@demo.command("cache-ttl")
@_demo_options
def cache_ttl(runs: int, break_minutes: float, real_time: bool, backend: str, keep: Optional[str],
              svg_path: Optional[str], via_router: bool, as_json: bool) -> None:
    """Prompt-cache TTLs on a payments team's agent: 12,100-token guide, earlier decisions,
    session 1, a 5.5-minute break, session 2; uncached, 5m, 1h and 5m + keep-alive; 6 runs.

    Prints every reply's usage (run 1 in full), which cache survived the break, the bill, the
    ratios and a table for other break lengths. The run is recorded in the current repository
    (if any) for `gitmem bill`. Virtual time on the emulator: takes seconds.

    JSON: {"backend", "clock", "model", "context", "checks", "bill", "recorded", "run"}.

    Example: gitmem demo cache-ttl --runs 6 --break-minutes 5.5
    """
    from ..bill import POLICY_LABELS, record_run, render_plot, render_svg, render_text
    from ..demo import run_demo
    from ..errors import NotARepository
    from .base import open_store

    say = (lambda line: None) if as_json else click.echo
    if not as_json:
        clock = "real time" if real_time else "virtual clock"
        via = ", through gitmem router" if via_router else ""
        say(f"gitmem demo cache-ttl - backend: {backend} ({clock}{via}), model claude-haiku-4-5, {plural(runs, 'run')}")
        say("Building the sample repository (the team's earlier decisions, as these commands write them):")

    def tick(remaining: float) -> None:
        click.echo(f"\rwaiting (real time): {remaining:5.0f}s ", err=True, nl=False)

    result = run_demo(runs=runs, break_minutes=break_minutes, real_time=real_time, backend=backend, keep=keep,
                      log=lambda line: say("  " + line), on_tick=None if as_json else tick, via_router=via_router)
    if real_time and not as_json:
        click.echo("", err=True)
    recorded = None
    try:
        recorded = record_run(open_store(), result.run)
    except NotARepository:
        pass
    if svg_path:
        _write_svg(svg_path, render_svg(result.bill))
    if as_json:
        emit_json({"backend": result.run["backend"], "clock": result.run["clock"], "model": result.run["model"],
                   "context": result.context, "checks": result.checks, "bill": result.bill.to_dict(),
                   "recorded": recorded, "run": result.run})
        return
    c = result.context
    say(f"\nContext (memory commit {c['memory_commit'][:10]}): guide {c['guide']} {plural(c['guide_file_tokens'], 'token')} "
        f"({c['guide_tokens']} with the preamble), {plural(c['memories'], 'memory')} {plural(c['memory_tokens'], 'token')}; "
        "a breakpoint after each part")
    from ..tokens import ESTIMATE_NOTE

    say(f"({ESTIMATE_NOTE}; the emulator bills with these counts)")
    say(f"\nRun 1, every reply (backend {result.run['backend']}):")
    for r in result.run["requests"]:
        if r["run"] != 1:
            continue
        u = r["usage"]
        write = u["cache_creation_input_tokens"]
        say(f"  {POLICY_LABELS[r['policy']]:<16} {r['label']:<6} t={r['at']:>5.0f}s  in {u['input_tokens']:>5}  "
            f"write {write:>6} (5m {u['cache_creation']['ephemeral_5m_input_tokens']}, "
            f"1h {u['cache_creation']['ephemeral_1h_input_tokens']})  read {u['cache_read_input_tokens']:>6}  "
            f"out {u['output_tokens']:>4}  cites {','.join(r['cites']) or '-'}")
    example = next(r for r in result.run["requests"] if r["run"] == 1 and r["policy"] == "5m" and r["label"] == "s2.q1")
    say(f"\nExample answer after the break (5m, run 1): {example['question']}")
    for line in example["answer"].splitlines():
        say("  | " + line)
    say("\nAfter the break:")
    for policy, states in result.checks["guide_after_break"].items():
        state = ", ".join(f"{k} {v}/{runs}" for k, v in sorted(states.items()))
        say(f"  {POLICY_LABELS[policy]:<16} guide {state}; session-2 answers citing decisions from before "
            f"the break: {result.checks['session2_answers_citing_pre_break_decisions'][policy]}")
    order = " < ".join(POLICY_LABELS[p] for p in result.checks["cost_order_cheapest_first"])
    say(f"  cost order: {order}")
    say("")
    say(render_text(result.bill))
    say("")
    say(render_plot(result.bill))
    say("\nPublished for this workload: 0.42 (5m), 0.37 (1h), 0.29 (keep-alive); see docs/demo.md.")
    say(f"Recorded: {recorded} (show again with `gitmem bill`)" if recorded else
        "Not recorded: not inside a git repository (run it in one to keep the run for `gitmem bill`).")
    if svg_path:
        say(f"Chart written to {svg_path}")


def _svg_target(path: Optional[str]) -> Optional[str]:
    """``--svg``'s file, checked before the work that fills it (a demo runs for a while): in a folder that
    exists, and no folder itself."""
    if path is None:
        return None
    folder = os.path.dirname(os.path.abspath(path))
    if not path or os.path.isdir(path) or not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise click.BadParameter(f"cannot write {path!r}: give a file in a folder that exists and you can write to",
                                 param_hint="--svg")
    return path


def _write_svg(path: str, text: str) -> None:
    from ..errors import GitmemError

    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise GitmemError(f"cannot write {path}: {e.strerror or e}") from None
