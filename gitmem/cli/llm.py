"""Model and Messages API commands: models, messages, emulator serve.

anthropic, httpx2 and uvicorn are imported inside the commands (through gitmem.backend and
gitmem.emulator), so `gitmem --help` and `gitmem add` never load them.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import click

from .base import echo, emit_json, json_option, main

if TYPE_CHECKING:
    from ..store import Store


def _store_or_none() -> Optional[Store]:
    from ..errors import NotARepository
    from .base import open_store

    try:
        return open_store()
    except NotARepository:
        return None


def _price_table():
    """The configured price table; outside a repository, $GITMEM_PRICES or the shipped one."""
    from ..price_table import configured_price_table

    return configured_price_table(_store_or_none())


def _record(results: list, replies: list, model: str) -> Optional[str]:
    """Inside a repository, append each request to the log `ask` keeps, with the
    memory commit that was current, so one can later see what the agent knew."""
    import time

    from ..bill import record_request

    store = _store_or_none()
    if store is None:
        return None
    tip = store.tip()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for r, reply in zip(results, replies):
        record_request(store, {"command": "messages", "label": r["label"], "backend": r["backend"], "model": model,
                               "memory_commit": tip, "request_id": r["request_id"],
                               "client_request_id": reply.client_request_id, "usage": r["usage"],
                               "cost": r["cost"], "time": stamp})
    return tip


def _money(value: float) -> str:
    return f"${value:.6f}"


@main.command()
@click.option("--all", "show_all", is_flag=True, help="Also list retired models (kept to price recorded runs).")
@json_option
def models(show_all: bool, as_json: bool) -> None:
    """Show the model lineup and its prices: per model, its lifecycle status
    (active, deprecated, retired), USD per million tokens for base input, 5-minute
    cache write, 1-hour cache write, cache read and output, the minimum prefix
    length that can be cached, and its tokenizer generation.

    The shipped table names its source pages and the date they were checked.
    Retired models are hidden unless --all: the API (and the emulator) answers
    them with 404 not_found_error. Override the table with a YAML file: `git
    config gitmem.prices prices.yaml` or $GITMEM_PRICES (format in docs/emulator.md).

    JSON: {"source", "checked", "caching_source", "lifecycle_source", "models": [{"id",
    "display_name", "lifecycle", "input", "cache_write_5m", "cache_write_1h", "cache_read",
    "output", "min_cacheable_tokens", "min_cacheable_source", "context_window",
    "max_output_tokens", "aliases", "tokenizer", "long_prompt_threshold", "long_prompt", "note",
    "released"}]}
    (every model, retired included)

    Example: gitmem models --all
    """
    from ..tokens import ESTIMATE_NOTE

    table = _price_table()
    if as_json:
        emit_json(table.to_dict())
        return
    head = ("model", "status", "input", "5m write", "1h write", "cache read", "output", "min cache", "tokenizer")
    shown = [row for row in table.models if show_all or not row.retired]
    rows = [head] + [
        (row.id, row.lifecycle + (f" ({row.note})" if row.note else ""), f"{row.input:g}", f"{row.cache_write_5m:g}",
         f"{row.cache_write_1h:g}", f"{row.cache_read:g}", f"{row.output:g}",
         str(row.min_cacheable_tokens) + ("*" if row.min_cacheable_source == "assumed" else ""), row.tokenizer)
        for row in shown
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        click.echo("  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths))))
    hidden = len(table.models) - len(shown)
    assumed = any(row.min_cacheable_source == "assumed" for row in shown)
    click.echo("\nUSD per million tokens; min cache = minimum cacheable prefix in tokens"
               + (" (* = not on the stored docs page: the predecessor's, assumed)." if assumed else "."))
    for row in shown:
        if row.long_prompt:
            long = "/".join(f"{p:g}" for p in row.long_prompt)
            click.echo(f"{row.id}: prompts over {row.long_prompt_threshold:,} tokens pay {long} on every token.")
    if hidden:
        click.echo(f"{hidden} retired models hidden (--all shows them).")
    click.echo(f"prices: {table.source} (checked {table.checked})")
    click.echo(f"status: {table.lifecycle_source}")
    click.echo(f"caching rules: {table.caching_source}")
    click.echo(f"The emulator's {ESTIMATE_NOTE}.")


def _read_body(path: str) -> dict:
    from ..errors import GitmemError

    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
    except OSError as exc:
        raise GitmemError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise GitmemError(f"{path} is not UTF-8 (byte {exc.start})") from None
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise GitmemError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise GitmemError(f"{path}: a Messages API body is a JSON object")
    return body


@main.command()
@click.option("--body", "body_path", required=True, metavar="FILE",
              help="A Messages API request body as JSON ('-' for stdin).")
@click.option("--boundary", type=int, metavar="N",
              help="Put the one cache_control marker after prefix block N (1-based; tools, then system, then messages).")
@click.option("--ttl", type=click.Choice(["none", "5m", "1h"]),
              help="Marker TTL; 'none' sends no marker at all. Without --boundary it applies to the body's own markers.")
@click.option("--ping-at", "ping_at", type=float, multiple=True, metavar="SECONDS",
              help="Also send a max_tokens-0 keep-alive with the same prefix SECONDS after the request (repeatable).")
@click.option("--repeat-at", "repeat_at", type=float, multiple=True, metavar="SECONDS",
              help="Send the body again SECONDS after the first request (repeatable), to see what the cache kept.")
@click.option("--model", help="Override the body's model.")
@click.option("--backend", type=click.Choice(["auto", "emulator", "anthropic"]), default="auto", show_default=True,
              help="auto: the real API when ANTHROPIC_API_KEY or ANTHROPIC_BASE_URL is set, else the in-process emulator.")
@click.option("--real-time", is_flag=True,
              help="On the in-process emulator, really wait for --ping-at/--repeat-at (default: virtual time).")
@json_option
def messages(body_path: str, boundary: Optional[int], ttl: Optional[str], ping_at: Tuple[float, ...],
             repeat_at: Tuple[float, ...], model: Optional[str], backend: str, real_time: bool, as_json: bool) -> None:
    """Send a raw Messages API body through the official SDK and show the reply,
    every usage field, the cost and which backend answered.

    Usage fields: input_tokens, output_tokens, cache_creation_input_tokens,
    cache_read_input_tokens, cache_creation.ephemeral_5m_input_tokens and
    cache_creation.ephemeral_1h_input_tokens. The cost uses `gitmem models`.

    Inside a repository each request is recorded in .git/gitmem/requests.jsonl with
    the memory commit that was current (`memory_commit`, null outside one); one sent
    through a `gitmem router` is recorded by the router too, and `gitmem bill` counts it once.

    JSON: {"backend", "model", "memory_commit", "prices": {"source", "checked"}, "requests": [{"label",
    "at", "backend", "request_id", "text", "stop_reason", "usage": {...}, "cost": {...,
    "total"}}], "total_cost"}

    Example: gitmem messages --body body.json --boundary 2 --ttl 5m --ping-at 240 --repeat-at 330
    """
    from ..emulator import RealClock, VirtualClock
    from ..backend import open_backend, place_cache_control, run_schedule, schedule
    from ..usage import cost

    table = _price_table()
    body = _read_body(body_path)
    if model:
        body["model"] = model
    body = place_cache_control(body, boundary, ttl)
    timed = bool(ping_at or repeat_at)
    client = open_backend(backend, clock=RealClock() if real_time or not timed else VirtualClock(), command="messages")

    def tick(remaining: float) -> None:
        click.echo(f"\rwaiting {remaining:5.0f}s ", err=True, nl=False)

    done = run_schedule(client, schedule(body, ping_at, repeat_at), on_tick=None if as_json else tick)
    results: List[Dict[str, Any]] = []
    for step, reply in done:
        price = cost(reply.usage, reply.model or body.get("model", ""), table)
        results.append({"label": step.label, "at": step.at, "backend": reply.backend, "request_id": reply.request_id,
                        "text": reply.text, "stop_reason": reply.message.get("stop_reason"),
                        "usage": reply.usage.to_api(), "cost": price.to_dict()})
    total = sum(r["cost"]["total"] for r in results)
    memory_commit = _record(results, [reply for _, reply in done], done[0][1].model)
    if as_json:
        emit_json({"backend": results[0]["backend"], "model": done[0][1].model, "memory_commit": memory_commit,
                   "prices": {"source": table.source, "checked": table.checked},
                   "requests": results, "total_cost": total})
        return
    when = " virtual" if client.virtual_time else ""
    for r in results:
        u = r["usage"]
        at = f" at {r['at']:g}s{when}" if timed else ""
        click.echo(f"== {r['label']}{at} - backend: {r['backend']}, model {done[0][1].model}, "
                   f"request-id {r['request_id']}")
        if r["label"] != "ping":
            echo(r["text"])  # a reply may quote the body, whose memory anyone who can push wrote (as `ask`'s)
        click.echo(f"stop_reason: {r['stop_reason']}")
        click.echo(f"input_tokens: {u['input_tokens']}  output_tokens: {u['output_tokens']}  "
                   f"cache_creation_input_tokens: {u['cache_creation_input_tokens']}  "
                   f"cache_read_input_tokens: {u['cache_read_input_tokens']}")
        click.echo(f"cache_creation.ephemeral_5m_input_tokens: {u['cache_creation']['ephemeral_5m_input_tokens']}  "
                   f"cache_creation.ephemeral_1h_input_tokens: {u['cache_creation']['ephemeral_1h_input_tokens']}")
        c = r["cost"]
        click.echo(f"cost: {_money(c['total'])} (input {_money(c['input'])}, 5m write {_money(c['cache_write_5m'])}, "
                   f"1h write {_money(c['cache_write_1h'])}, cache read {_money(c['cache_read'])}, "
                   f"output {_money(c['output'])})\n")
    if len(results) > 1:
        click.echo(f"total cost: {_money(total)}")
    click.echo(f"prices: {table.source} (checked {table.checked})")
    if results[0]["backend"] == "emulator":
        from ..tokens import ESTIMATE_NOTE

        click.echo(f"The emulator's {ESTIMATE_NOTE}.")


@main.group()
def emulator() -> None:
    """The local Messages API emulator (the default backend without ANTHROPIC_API_KEY).

    Example: gitmem emulator serve --port 8765 --virtual-clock
    """


@emulator.command()
@click.option("--port", type=int, default=8765, show_default=True, help="TCP port on 127.0.0.1.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind (keep it local: no real auth).")
@click.option("--virtual-clock", is_flag=True,
              help="Cache TTLs run on a virtual clock moved by POST /_emulator/clock {\"advance\": SECONDS}.")
def serve(port: int, host: str, virtual_clock: bool) -> None:
    """Serve the emulator over HTTP for any client, the SDK included:
    POST /v1/messages, POST /v1/messages/count_tokens, GET /v1/models[/ID].

    Point a client at it with ANTHROPIC_BASE_URL=http://127.0.0.1:PORT (no /v1)
    and any ANTHROPIC_API_KEY. Admin: GET /_emulator/state, POST /_emulator/clock,
    POST /_emulator/reset, POST /_emulator/fail (see docs/emulator.md).

    Example: gitmem emulator serve --port 8765 --virtual-clock
    """
    from ..emulator.server import serve as run

    from ..serving import listen

    sock = listen(host, port)
    port = sock.getsockname()[1]
    clock = "virtual clock: POST /_emulator/clock to advance" if virtual_clock else "real clock"
    click.echo(f"gitmem emulator on http://{host}:{port} ({clock}); "
               f"use ANTHROPIC_BASE_URL=http://{host}:{port}", err=True)
    run(sock, virtual_clock=virtual_clock)
