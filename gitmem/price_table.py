"""The price table in effect: the shipped one, or it overridden by a YAML file named by
``$GITMEM_PRICES`` or ``git config gitmem.prices``.

The edge that reads the file, so :mod:`gitmem.pricing` stays free of I/O and takes it as text
(:func:`gitmem.pricing.parse_price_table` describes it). A module of its own: every command that
prices or sizes a request needs it (``context``, ``ask``, the router, the bill), and it imports
nothing but :mod:`gitmem.pricing`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Optional

from .errors import PriceTableError
from .pricing import DEFAULT_TABLE, PriceTable, parse_price_table

if TYPE_CHECKING:
    from .store import Store


def load_price_table(path: Optional[str] = None, base: PriceTable = DEFAULT_TABLE) -> PriceTable:
    """``base`` (the shipped table), overridden by the YAML file at ``path`` when one is given
    (:func:`gitmem.pricing.parse_price_table` describes the file); any problem is a
    :class:`PriceTableError` naming the file."""
    if path is None:
        return base
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise PriceTableError(f"cannot read price table {path}: {exc.strerror or exc}") from None
    return parse_price_table(text, path, base)


def configured_price_table(store: Optional[Store] = None) -> PriceTable:
    """The table in effect: ``$GITMEM_PRICES``, else ``git config gitmem.prices`` of ``store``'s
    repository (a relative path is taken from the worktree root), else the shipped table."""
    path = os.environ.get("GITMEM_PRICES") or None
    if path is None and store is not None:
        path = store.config("gitmem.prices") or None
        if path and not os.path.isabs(path):
            path = os.path.join(store.workdir, path)
    return load_price_table(path)
