"""What a Messages API reply used (its ``usage`` fields) and what that cost under a price table.

Pure arithmetic over :mod:`gitmem.pricing`'s table: the emulator, the router, the bill and the
cache-policy simulation all price usage here, so every figure agrees.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping

from .pricing import DEFAULT_TABLE, PRICE_FIELDS, PRICES_SOURCE, PriceTable

__all__ = ["Usage", "Cost", "cost"]


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
        A negative count is a ``ValueError``.
        """
        created = int(_get(usage, "cache_creation_input_tokens") or 0)
        breakdown = _get(usage, "cache_creation")
        five = _get(breakdown, "ephemeral_5m_input_tokens")
        hour = _get(breakdown, "ephemeral_1h_input_tokens")
        if five is None and hour is None:
            five, hour = created, 0
        counts = cls(
            input_tokens=int(_get(usage, "input_tokens") or 0),
            output_tokens=int(_get(usage, "output_tokens") or 0),
            cache_creation_input_tokens=created,
            cache_read_input_tokens=int(_get(usage, "cache_read_input_tokens") or 0),
            ephemeral_5m_input_tokens=int(five or 0),
            ephemeral_1h_input_tokens=int(hour or 0),
        )
        if min(counts.to_dict().values()) < 0:  # no reply has one; priced, a hand-edited one cost negative dollars
            raise ValueError(f"a negative token count: {counts.to_dict()}")
        return counts

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
        return Cost(model, **{n: getattr(self, n) + getattr(other, n) for n in PRICE_FIELDS}, source=self.source)


def cost(usage: Usage, model: str, table: PriceTable = DEFAULT_TABLE) -> Cost:
    """Price ``usage`` for ``model`` (id or alias) with ``table``.

    Writes are priced by their TTL from the ``cache_creation`` breakdown; if the breakdown sums to
    less than ``cache_creation_input_tokens``, the rest is priced as 5-minute writes.
    """
    row = table.get(model)
    prices = dict(zip(PRICE_FIELDS, (row.input, row.cache_write_5m, row.cache_write_1h, row.cache_read, row.output)))
    if row.long_prompt and row.long_prompt_threshold and usage.total_input_tokens > row.long_prompt_threshold:
        prices = dict(zip(PRICE_FIELDS, row.long_prompt))  # every token of a long prompt, output included
    per = 1_000_000
    five = usage.ephemeral_5m_input_tokens + max(
        0, usage.cache_creation_input_tokens - usage.ephemeral_5m_input_tokens - usage.ephemeral_1h_input_tokens
    )
    return Cost(
        model=row.id,
        input=usage.input_tokens * prices["input"] / per,
        cache_write_5m=five * prices["cache_write_5m"] / per,
        cache_write_1h=usage.ephemeral_1h_input_tokens * prices["cache_write_1h"] / per,
        cache_read=usage.cache_read_input_tokens * prices["cache_read"] / per,
        output=usage.output_tokens * prices["output"] / per,
        source=table.source,
    )
