"""The shipped price table: what each model costs, its caching and size limits, and its lifecycle.

What a reply used and what it cost are :mod:`gitmem.usage`'s. The rows are named tuples: every context
build reads this table, and a frozen dataclass costs about a millisecond to define at import.

Pure core, no I/O: an override file is read at the edge (:func:`gitmem.price_table.load_price_table`, from the
path in ``$GITMEM_PRICES`` or ``git config gitmem.prices``) and its text handed to :func:`parse_price_table`.

Sources, checked on :data:`CHECKED` (stored copies of the pages, read through the docs search; each
row's ``source`` names the page it came from):

- prices: https://platform.claude.com/docs/en/about-claude/pricing ("Model pricing": base input,
  5m cache writes, 1h cache writes, cache hits and refreshes, output, per MTok). Most rows follow
  the multipliers the page states (5-minute write 1.25x base input, 1-hour write 2x, read 0.1x);
  the exceptions are printed on the page and kept as printed: Fable 5.1 and Mythos 5.1 read at
  $0.25, Opus 5.5 at $0.20 and Sonnet 5.5 at $0.10 (cut from $0.20 on 2026-10-07), i.e. 0.05x or
  less. Claude Haiku 5.5 is priced by prompt length: up to 100,000 prompt tokens (input + cache
  reads + cache writes) $0.10 / $0.125 / $0.20 / $0.01 / $0.50, over it 5x that, on every token of
  the request (``long_prompt_threshold`` and ``long_prompt``).
- lifecycle: https://platform.claude.com/docs/en/about-claude/model-deprecations ("Active",
  "Legacy" = still active, "Deprecated", "Retired: ... Requests to retired models will fail") and
  the models' own pages (Sonnet 4.5: "deprecated ... retires on November 30, 2026"; the stored copy
  still says deprecated, so the row does too, with the date in its note). Retired rows stay in the
  table so recorded runs can still be priced; the emulator answers them as the API does (404
  ``not_found_error``, ``model: <id>``) and ``GET /v1/models`` leaves them out.
- minimum cacheable prefix: https://platform.claude.com/docs/en/build-with-claude/prompt-caching
  ("Cache limitations"): 4096 for Opus 4.6, Opus 4.5 and Haiku 4.5; 2048 for Opus 4.7; 1024 for
  Opus 4.8, Sonnet 5, Sonnet 4.6/4.5, Opus 4.1/4 and Sonnet 4; 512 for Fable 5.1, Mythos 5.1, Opus 5.5,
  Opus 5, Sonnet 5.5, Fable 5, Mythos 5 and Haiku 5.5 (the page as quoted, verified 2026-10-07 and
  2026-10-08, in two public repositories' notes: "512 tokens for Claude Fable 5.1, Claude Mythos 5.1,
  Claude Opus 5.5, Claude Opus 5, Claude Sonnet 5.5, Claude Fable 5, Claude Mythos 5, and Claude Haiku
  5.5"); 2048 for Haiku 3.5 and Haiku 3. A row an override file adds may say ``min_cacheable_source:
  "assumed"`` when no copy of the page names its minimum.
- model ids, context windows, output limits and tokenizer generation: the models overview and
  each model's page (Claude 4.7 and later use the newer tokenizer, ``tokenizer: "v4.7"``).
- release dates (``released``): each model's page, https://platform.claude.com/docs/en/models/<model>/overview
  ("Released February 5, 2026"). No stored copy of the pages of Opus 4.7, Opus 5.5, Sonnet 5.5, Fable 5.1,
  Mythos 5.1 or Mythos 5 was found, so those rows leave it empty (unknown).
"""

from __future__ import annotations

import math
from datetime import date
from typing import Any, Dict, Mapping, NamedTuple, Optional, Tuple

from .errors import PriceTableError, UnknownModel

__all__ = [
    "PRICES_SOURCE",
    "CACHING_SOURCE",
    "LIFECYCLE_SOURCE",
    "LIFECYCLES",
    "CHECKED",
    "ModelPrice",
    "PriceTable",
    "DEFAULT_TABLE",
    "parse_price_table",
]

PRICES_SOURCE = "https://platform.claude.com/docs/en/about-claude/pricing"
CACHING_SOURCE = "https://platform.claude.com/docs/en/build-with-claude/prompt-caching"
LIFECYCLE_SOURCE = "https://platform.claude.com/docs/en/about-claude/model-deprecations"
MODELS_SOURCE = "https://platform.claude.com/docs/en/about-claude/models/overview"
CHECKED = "2026-12-04"
LIFECYCLES = ("active", "deprecated", "retired")

PRICE_FIELDS = ("input", "cache_write_5m", "cache_write_1h", "cache_read", "output")


class ModelPrice(NamedTuple):
    """One model's row: prices in USD per million tokens, and its caching and size limits."""

    id: str
    display_name: str
    input: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    output: float
    min_cacheable_tokens: int
    context_window: int = 200_000
    max_output_tokens: int = 64_000
    aliases: Tuple[str, ...] = ()
    lifecycle: str = "active"
    tokenizer: str = "v3"
    min_cacheable_source: str = "docs"
    long_prompt_threshold: int = 0
    long_prompt: Tuple[float, ...] = ()
    note: str = ""
    released: str = ""  # YYYY-MM-DD from the model's page; empty: unknown

    @property
    def retired(self) -> bool:
        return self.lifecycle == "retired"

    def to_dict(self) -> dict:
        data = self._asdict()
        data["aliases"] = list(self.aliases)
        data["long_prompt"] = dict(zip(PRICE_FIELDS, self.long_prompt)) if self.long_prompt else None
        return data


def _row(id, name, prices, minimum, aliases=(), context=200_000, max_out=64_000, lifecycle="active",
         tokenizer="v3", **extra):
    """One row; ``prices`` is (base input, 5m write, 1h write, read, output) as the page prints them."""
    base, write_5m, write_1h, read, output = prices
    return ModelPrice(id=id, display_name=name, input=base, cache_write_5m=write_5m, cache_write_1h=write_1h,
                      cache_read=read, output=output, min_cacheable_tokens=minimum, context_window=context,
                      max_output_tokens=max_out, aliases=tuple(aliases), lifecycle=lifecycle, tokenizer=tokenizer,
                      **extra)


_M, _K = 1_000_000, 128_000
_OPUS = (5.0, 6.25, 10.0, 0.5, 25.0)
_SONNET_4 = (3.0, 3.75, 6.0, 0.3, 15.0)
_SONNET_5 = (2.0, 2.5, 4.0, 0.2, 10.0)
_OPUS_OLD = (15.0, 18.75, 30.0, 1.5, 75.0)

# The pricing page's order: newest first within each line.
_SHIPPED = (
    _row("claude-fable-5-1", "Claude Fable 5.1", (10.0, 12.5, 20.0, 0.25, 50.0), 512, context=_M, max_out=_K,
         tokenizer="v4.7"),
    _row("claude-mythos-5-1", "Claude Mythos 5.1", (10.0, 12.5, 20.0, 0.25, 50.0), 512, context=_M, max_out=_K,
         tokenizer="v4.7", note="limited availability"),
    _row("claude-fable-5", "Claude Fable 5", (10.0, 12.5, 20.0, 1.0, 50.0), 512, context=_M, max_out=_K,
         tokenizer="v4.7", released="2026-06-09"),
    _row("claude-mythos-5", "Claude Mythos 5", (10.0, 12.5, 20.0, 1.0, 50.0), 512, context=_M, max_out=_K,
         tokenizer="v4.7", note="limited availability"),
    _row("claude-opus-5-5", "Claude Opus 5.5", (4.0, 5.0, 8.0, 0.2, 20.0), 512, context=_M, max_out=_K,
         tokenizer="v4.7"),
    _row("claude-opus-5", "Claude Opus 5", _OPUS, 512, context=_M, max_out=_K, tokenizer="v4.7", note="legacy",
         released="2026-07-24"),
    _row("claude-opus-4-8", "Claude Opus 4.8", _OPUS, 1024, context=_M, max_out=_K, tokenizer="v4.7", note="legacy",
         released="2026-05-28"),
    _row("claude-opus-4-7", "Claude Opus 4.7", _OPUS, 2048, context=_M, max_out=_K, tokenizer="v4.7", note="legacy"),
    _row("claude-opus-4-6", "Claude Opus 4.6", _OPUS, 4096, context=_M, max_out=_K, note="legacy", released="2026-02-05"),
    _row("claude-opus-4-5-20251101", "Claude Opus 4.5", _OPUS, 4096, ["claude-opus-4-5"], note="legacy",
         released="2025-11-24"),
    _row("claude-opus-4-1-20250805", "Claude Opus 4.1", _OPUS_OLD, 1024, ["claude-opus-4-1"], max_out=32_000,
         lifecycle="retired"),
    _row("claude-opus-4-20250514", "Claude Opus 4", _OPUS_OLD, 1024, ["claude-opus-4-0"], max_out=32_000,
         lifecycle="retired"),
    _row("claude-sonnet-5-5", "Claude Sonnet 5.5", (2.0, 2.5, 4.0, 0.1, 10.0), 512, context=_M, max_out=_K,
         tokenizer="v4.7"),
    _row("claude-sonnet-5", "Claude Sonnet 5", _SONNET_5, 1024, context=_M, max_out=_K, tokenizer="v4.7",
         note="legacy", released="2026-06-30"),
    _row("claude-sonnet-4-6", "Claude Sonnet 4.6", _SONNET_4, 1024, context=_M, max_out=_K, note="legacy",
         released="2026-02-17"),
    _row("claude-sonnet-4-5-20250929", "Claude Sonnet 4.5", _SONNET_4, 1024, ["claude-sonnet-4-5"],
         lifecycle="deprecated", note="retirement date 2026-11-30", released="2025-09-29"),
    _row("claude-sonnet-4-20250514", "Claude Sonnet 4", _SONNET_4, 1024, ["claude-sonnet-4-0"], lifecycle="retired"),
    _row("claude-haiku-5-5", "Claude Haiku 5.5", (0.1, 0.125, 0.2, 0.01, 0.5), 512, context=_M, max_out=_K,
         tokenizer="v4.7", long_prompt_threshold=100_000, long_prompt=(0.5, 0.625, 1.0, 0.05, 2.5),
         released="2026-10-07"),
    _row("claude-haiku-4-5-20251001", "Claude Haiku 4.5", (1.0, 1.25, 2.0, 0.1, 5.0), 4096, ["claude-haiku-4-5"],
         released="2025-10-15"),
    _row("claude-3-5-haiku-20241022", "Claude Haiku 3.5", (0.8, 1.0, 1.6, 0.08, 4.0), 2048,
         ["claude-3-5-haiku-latest"], max_out=8_192, lifecycle="retired"),
    _row("claude-3-haiku-20240307", "Claude Haiku 3", (0.25, 0.30, 0.50, 0.03, 1.25), 2048, max_out=4_096,
         lifecycle="retired", note="no longer on the pricing page"),
)


class PriceTable(NamedTuple):
    """Rows plus where they came from; every printed cost should name ``source`` and ``checked``."""

    models: Tuple[ModelPrice, ...]
    source: str = PRICES_SOURCE
    checked: str = CHECKED
    caching_source: str = CACHING_SOURCE
    lifecycle_source: str = LIFECYCLE_SOURCE

    def find(self, model: str) -> Optional[ModelPrice]:
        """The row for a model id or alias (exact match), or None."""
        for row in self.models:
            if model == row.id or model in row.aliases:
                return row
        return None

    def get(self, model: str) -> ModelPrice:
        row = self.find(model)
        if row is None:
            raise UnknownModel(f"unknown model {model!r} ({self._close_to(model)}`gitmem models --all` lists every "
                               f"model the price table knows)")
        return row

    def _close_to(self, model: str) -> str:
        """The ids and aliases spelt most like ``model``, as the start of an error's aside (one line: the
        table has a score of models)."""
        from difflib import get_close_matches

        names = [name for row in self.models for name in (row.id, *row.aliases)]
        close = get_close_matches(model, names, n=3, cutoff=0.6)
        return f"did you mean {', '.join(close)}? " if close else ""

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "checked": self.checked,
            "caching_source": self.caching_source,
            "lifecycle_source": self.lifecycle_source,
            "models": [row.to_dict() for row in self.models],
        }


DEFAULT_TABLE = PriceTable(models=_SHIPPED)


def _number(value: Any, where: str, integer: bool = False) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:  # NaN fails too
        raise PriceTableError(f"{where}: expected a finite non-negative number, got {value!r}")
    if integer:
        if int(value) != value:
            raise PriceTableError(f"{where}: expected a whole number, got {value!r}")
        return int(value)
    return float(value)


def _apply_row(base: Optional[ModelPrice], model_id: str, data: Any, where: str) -> ModelPrice:
    if not isinstance(data, Mapping):
        raise PriceTableError(f"{where}: expected a mapping of fields")
    known = set(ModelPrice._fields) - {"id"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise PriceTableError(f"{where}: unknown field(s) {', '.join(map(str, unknown))} (valid: {', '.join(sorted(known))})")
    values: Dict[str, Any] = {}
    for key, value in data.items():
        if key in PRICE_FIELDS:
            values[key] = _number(value, f"{where}.{key}")
        elif key == "tokenizer":
            from .tokens import FAMILIES

            if value not in FAMILIES:
                raise PriceTableError(f"{where}.tokenizer: expected one of {', '.join(FAMILIES)}")
            values[key] = value
        elif key == "lifecycle":
            if value not in LIFECYCLES:
                raise PriceTableError(f"{where}.lifecycle: expected one of {', '.join(LIFECYCLES)}")
            values[key] = value
        elif key == "long_prompt":
            if not isinstance(value, Mapping) or set(value) != set(PRICE_FIELDS):
                raise PriceTableError(f"{where}.long_prompt: expected all of {', '.join(PRICE_FIELDS)}")
            values[key] = tuple(_number(value[f], f"{where}.long_prompt.{f}") for f in PRICE_FIELDS)
        elif key in ("min_cacheable_tokens", "context_window", "max_output_tokens", "long_prompt_threshold"):
            values[key] = _number(value, f"{where}.{key}", integer=True)
        elif key == "released":  # YAML reads an unquoted 2026-02-05 as a date; either way, a day
            try:
                values[key] = date.fromisoformat(str(value)).isoformat()
            except ValueError:
                raise PriceTableError(f"{where}.released: expected a date YYYY-MM-DD, got {value!r}") from None
        elif key == "aliases":
            if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
                raise PriceTableError(f"{where}.aliases: expected a list of strings")
            values[key] = tuple(value)
        else:
            values[key] = str(value)
    if base is not None:
        return base._replace(**values)
    missing = [name for name in PRICE_FIELDS + ("min_cacheable_tokens",) if name not in values]
    if missing:
        raise PriceTableError(f"{where}: a new model needs {', '.join(missing)}")
    values.setdefault("display_name", model_id)
    return ModelPrice(id=model_id, **values)


def parse_price_table(text: str, path: str, base: PriceTable = DEFAULT_TABLE) -> PriceTable:
    """``base`` overridden by the YAML ``text`` of the override file at ``path`` (named in errors
    and in the table's default ``source``).

    File shape (every key optional; a known model overrides only the fields it names, a new model
    needs all prices and ``min_cacheable_tokens``)::

        source: https://example.com/our-negotiated-prices
        checked: 2026-12-01
        models:
          claude-haiku-4-5-20251001: {input: 0.9, output: 4.5}
          my-proxy-model: {input: 1, cache_write_5m: 1.25, cache_write_1h: 2,
                           cache_read: 0.1, output: 5, min_cacheable_tokens: 1024}

    Read with ``yaml.safe_load``; any problem is a :class:`PriceTableError` naming the file.
    """
    import yaml

    try:
        data = yaml.safe_load(text) or {}
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: a timestamp no date can hold (2026-13-01)
        raise PriceTableError(f"price table {path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, Mapping):
        raise PriceTableError(f"price table {path}: expected a mapping at the top level")
    unknown = sorted(set(data) - {"source", "checked", "models"})
    if unknown:
        raise PriceTableError(f"price table {path}: unknown key(s) {', '.join(map(str, unknown))}")
    rows = list(base.models)
    overrides = data.get("models") or {}
    if not isinstance(overrides, Mapping):
        raise PriceTableError(f"price table {path}: models must be a mapping of model id to fields")
    for model_id, row_data in overrides.items():
        model_id = str(model_id)
        existing = base.find(model_id)
        new_row = _apply_row(existing, existing.id if existing else model_id, row_data, f"{path}: models.{model_id}")
        if existing is None:
            rows.append(new_row)
        else:
            rows[rows.index(existing)] = new_row
    return PriceTable(
        models=tuple(rows),
        source=str(data.get("source", f"{base.source} (overridden by {path})")),
        checked=str(data.get("checked", base.checked)),
        caching_source=base.caching_source,
    )
