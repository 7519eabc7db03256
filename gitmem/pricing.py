"""The shipped price table, usage fields as the API reports them, and what a request cost.

Pure core: no I/O except :func:`load_price_table`, which reads an override file a caller names (the
CLI passes the path from ``git config gitmem.prices`` or ``$GITMEM_PRICES``).

Sources, checked on :data:`CHECKED`:

- prices: https://platform.claude.com/docs/en/about-claude/pricing ("Model pricing" table: base
  input, 5m cache writes, 1h cache writes, cache hits & refreshes, output, per MTok). The page
  states the multipliers the rows follow: 5-minute write = 1.25x base input, 1-hour write = 2x,
  cache read = 0.1x (Haiku 3's published cache prices are rounded; the table uses them as printed).
- minimum cacheable prefix: https://platform.claude.com/docs/en/build-with-claude/prompt-caching
  ("Cache limitations"): 4096 tokens for Claude Opus 4.5 and Haiku 4.5; 1024 for Sonnet 4.5,
  Opus 4.1, Opus 4 and Sonnet 4; 2048 for Haiku 3.5 and Haiku 3. Shorter prefixes are processed
  without caching, even when marked.
- model ids, aliases, context windows and output limits:
  https://platform.claude.com/docs/en/about-claude/models/overview; the ``lifecycle`` column
  follows the pricing page's "(retired ...)" and "(deprecated)" notes.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Dict, Mapping, Optional, Tuple

from .errors import PriceTableError, UnknownModel

__all__ = [
    "PRICES_SOURCE",
    "CACHING_SOURCE",
    "CHECKED",
    "ModelPrice",
    "PriceTable",
    "Usage",
    "Cost",
    "DEFAULT_TABLE",
    "load_price_table",
    "configured_price_table",
    "cost",
]

PRICES_SOURCE = "https://platform.claude.com/docs/en/about-claude/pricing"
CACHING_SOURCE = "https://platform.claude.com/docs/en/build-with-claude/prompt-caching"
CHECKED = "2026-12-02"

PRICE_FIELDS = ("input", "cache_write_5m", "cache_write_1h", "cache_read", "output")


@dataclass(frozen=True)
class ModelPrice:
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

    def to_dict(self) -> dict:
        data = asdict(self)
        data["aliases"] = list(self.aliases)
        return data


def _row(id, name, base, output, minimum, aliases, context=200_000, max_out=64_000, lifecycle="active"):
    # Cache prices derived with the documented multipliers; each derived value was compared with
    # the published row on the pricing page.
    return ModelPrice(
        id=id,
        display_name=name,
        input=base,
        cache_write_5m=round(base * 1.25, 6),
        cache_write_1h=round(base * 2, 6),
        cache_read=round(base * 0.1, 6),
        output=output,
        min_cacheable_tokens=minimum,
        context_window=context,
        max_output_tokens=max_out,
        aliases=tuple(aliases),
        lifecycle=lifecycle,
    )


_SHIPPED = (
    _row("claude-haiku-4-5-20251001", "Claude Haiku 4.5", 1.0, 5.0, 4096, ["claude-haiku-4-5"]),
    _row("claude-sonnet-4-5-20250929", "Claude Sonnet 4.5", 3.0, 15.0, 1024, ["claude-sonnet-4-5"]),
    _row("claude-opus-4-5-20251101", "Claude Opus 4.5", 5.0, 25.0, 4096, ["claude-opus-4-5"]),
    _row("claude-sonnet-4-20250514", "Claude Sonnet 4", 3.0, 15.0, 1024, ["claude-sonnet-4-0"]),
    _row("claude-opus-4-1-20250805", "Claude Opus 4.1", 15.0, 75.0, 1024, ["claude-opus-4-1"],
         max_out=32_000, lifecycle="retired"),
    _row("claude-opus-4-20250514", "Claude Opus 4", 15.0, 75.0, 1024, ["claude-opus-4-0"],
         max_out=32_000, lifecycle="retired"),
    _row("claude-3-5-haiku-20241022", "Claude Haiku 3.5", 0.8, 4.0, 2048, ["claude-3-5-haiku-latest"],
         max_out=8_192, lifecycle="deprecated"),
    # Haiku 3's published 5m write ($0.30) and read ($0.03) are rounded, not 1.25x / 0.1x of $0.25.
    replace(_row("claude-3-haiku-20240307", "Claude Haiku 3", 0.25, 1.25, 2048, [], max_out=4_096),
            cache_write_5m=0.30, cache_read=0.03),
)


@dataclass(frozen=True)
class PriceTable:
    """Rows plus where they came from; every printed cost should name ``source`` and ``checked``."""

    models: Tuple[ModelPrice, ...]
    source: str = PRICES_SOURCE
    checked: str = CHECKED
    caching_source: str = CACHING_SOURCE

    def find(self, model: str) -> Optional[ModelPrice]:
        """The row for a model id or alias (exact match), or None."""
        for row in self.models:
            if model == row.id or model in row.aliases:
                return row
        return None

    def get(self, model: str) -> ModelPrice:
        row = self.find(model)
        if row is None:
            known = ", ".join(row.id for row in self.models)
            raise UnknownModel(f"unknown model {model!r} (price table knows: {known})")
        return row

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "checked": self.checked,
            "caching_source": self.caching_source,
            "models": [row.to_dict() for row in self.models],
        }


DEFAULT_TABLE = PriceTable(models=_SHIPPED)


def _number(value: Any, where: str, integer: bool = False) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or math.isnan(value):
        raise PriceTableError(f"{where}: expected a non-negative number, got {value!r}")
    if integer:
        if int(value) != value:
            raise PriceTableError(f"{where}: expected a whole number, got {value!r}")
        return int(value)
    return float(value)


def _apply_row(base: Optional[ModelPrice], model_id: str, data: Any, where: str) -> ModelPrice:
    if not isinstance(data, Mapping):
        raise PriceTableError(f"{where}: expected a mapping of fields")
    known = {f.name for f in fields(ModelPrice)} - {"id"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise PriceTableError(f"{where}: unknown field(s) {', '.join(map(str, unknown))} (valid: {', '.join(sorted(known))})")
    values: Dict[str, Any] = {}
    for key, value in data.items():
        if key in PRICE_FIELDS:
            values[key] = _number(value, f"{where}.{key}")
        elif key in ("min_cacheable_tokens", "context_window", "max_output_tokens"):
            values[key] = _number(value, f"{where}.{key}", integer=True)
        elif key == "aliases":
            if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
                raise PriceTableError(f"{where}.aliases: expected a list of strings")
            values[key] = tuple(value)
        else:
            values[key] = str(value)
    if base is not None:
        return replace(base, **values)
    missing = [name for name in PRICE_FIELDS + ("min_cacheable_tokens",) if name not in values]
    if missing:
        raise PriceTableError(f"{where}: a new model needs {', '.join(missing)}")
    values.setdefault("display_name", model_id)
    return ModelPrice(id=model_id, **values)


def load_price_table(path: Optional[str] = None, base: PriceTable = DEFAULT_TABLE) -> PriceTable:
    """The shipped table, overridden by a YAML file when ``path`` is given.

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
    if path is None:
        return base
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle) or {}
    except OSError as exc:
        raise PriceTableError(f"cannot read price table {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
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


def configured_price_table(store: Any = None) -> PriceTable:
    """The table in effect: ``$GITMEM_PRICES``, else ``git config gitmem.prices`` of ``store``'s
    repository (a relative path is taken from the worktree root), else the shipped table."""
    path = os.environ.get("GITMEM_PRICES") or None
    if path is None and store is not None:
        from .repo import config_get

        path = config_get(store.repo, "gitmem.prices") or None
        if path and not os.path.isabs(path):
            path = os.path.join(store.repo.workdir or store.repo.path, path)
    return load_price_table(path)


def _get(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


@dataclass(frozen=True)
class Usage:
    """The ``usage`` fields of a Messages API reply, flattened.

    Arithmetic the API documents (prompt-caching page, "Tracking cache performance"): total input =
    ``cache_read_input_tokens + cache_creation_input_tokens + input_tokens``, where ``input_tokens``
    counts only what follows the last cache hit or write, and ``cache_creation_input_tokens`` =
    ``ephemeral_5m_input_tokens + ephemeral_1h_input_tokens`` (``usage.cache_creation.*``).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    ephemeral_5m_input_tokens: int = 0
    ephemeral_1h_input_tokens: int = 0

    @classmethod
    def from_api(cls, usage: Any) -> "Usage":
        """From an SDK ``Usage`` object or its JSON dict; missing or null fields count as 0.

        A reply without the ``cache_creation`` breakdown (older API versions) has all its cache
        writes counted as 5-minute writes, which is what they were before 1-hour TTLs existed.
        """
        created = int(_get(usage, "cache_creation_input_tokens") or 0)
        breakdown = _get(usage, "cache_creation")
        five = _get(breakdown, "ephemeral_5m_input_tokens")
        hour = _get(breakdown, "ephemeral_1h_input_tokens")
        if five is None and hour is None:
            five, hour = created, 0
        return cls(
            input_tokens=int(_get(usage, "input_tokens") or 0),
            output_tokens=int(_get(usage, "output_tokens") or 0),
            cache_creation_input_tokens=created,
            cache_read_input_tokens=int(_get(usage, "cache_read_input_tokens") or 0),
            ephemeral_5m_input_tokens=int(five or 0),
            ephemeral_1h_input_tokens=int(hour or 0),
        )

    def to_api(self) -> dict:
        """The API's JSON shape (nested ``cache_creation``)."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.ephemeral_5m_input_tokens,
                "ephemeral_1h_input_tokens": self.ephemeral_1h_input_tokens,
            },
        }

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def total_input_tokens(self) -> int:
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    def __add__(self, other: "Usage") -> "Usage":
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(Usage)})


@dataclass(frozen=True)
class Cost:
    """What one reply (or a sum of replies) cost, in USD, per usage field."""

    model: str
    input: float = 0.0
    cache_write_5m: float = 0.0
    cache_write_1h: float = 0.0
    cache_read: float = 0.0
    output: float = 0.0
    source: str = field(default=PRICES_SOURCE, compare=False)

    @property
    def total(self) -> float:
        return self.input + self.cache_write_5m + self.cache_write_1h + self.cache_read + self.output

    def to_dict(self) -> dict:
        data = asdict(self)
        data["total"] = self.total
        return data

    def __add__(self, other: "Cost") -> "Cost":
        if not isinstance(other, Cost):
            return NotImplemented
        model = self.model if self.model == other.model else "mixed"
        return Cost(model, *(getattr(self, n) + getattr(other, n) for n in PRICE_FIELDS), source=self.source)


def cost(usage: Usage, model: str, table: PriceTable = DEFAULT_TABLE) -> Cost:
    """Price ``usage`` for ``model`` (id or alias) with ``table``.

    Writes are priced by their TTL from the ``cache_creation`` breakdown; if the breakdown sums to
    less than ``cache_creation_input_tokens``, the rest is priced as 5-minute writes.
    """
    row = table.get(model)
    per = 1_000_000
    five = usage.ephemeral_5m_input_tokens + max(
        0, usage.cache_creation_input_tokens - usage.ephemeral_5m_input_tokens - usage.ephemeral_1h_input_tokens
    )
    return Cost(
        model=row.id,
        input=usage.input_tokens * row.input / per,
        cache_write_5m=five * row.cache_write_5m / per,
        cache_write_1h=usage.ephemeral_1h_input_tokens * row.cache_write_1h / per,
        cache_read=usage.cache_read_input_tokens * row.cache_read / per,
        output=usage.output_tokens * row.output / per,
        source=table.source,
    )
