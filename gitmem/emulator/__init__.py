"""A local emulator of the Anthropic Messages API with faithful prompt caching.

Reach it in-process (``Emulator().transport()`` as the SDK's ``httpx2`` transport; see
:func:`gitmem.backend.open_backend`) or over HTTP (``gitmem emulator serve``). Both call the same
:meth:`Emulator.handle`, so they share one cache and one clock.
"""

from __future__ import annotations

from .app import BACKEND_HEADER, Emulator, HttpResponse
from .cache import LOOKBACK_BLOCKS, TTL_SECONDS, Breakpoint, Entry, Outcome, PromptCache
from .clock import RealClock, VirtualClock, WallClock
from .validate import ApiError

__all__ = [
    "BACKEND_HEADER",
    "Emulator",
    "HttpResponse",
    "PromptCache",
    "Breakpoint",
    "Entry",
    "Outcome",
    "TTL_SECONDS",
    "LOOKBACK_BLOCKS",
    "RealClock",
    "VirtualClock",
    "WallClock",
    "ApiError",
]
