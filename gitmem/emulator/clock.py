"""Clocks for the emulator's cache TTLs: real by default, virtual when tests or the demo move time."""

from __future__ import annotations

import threading
import time


class RealClock:
    """Seconds from a monotonic clock: TTLs survive wall-clock jumps, as a server's would."""

    virtual = False

    def now(self) -> float:
        return time.monotonic()


class WallClock:
    """Seconds since the epoch: the clock of an emulator whose cache outlives the process.

    A monotonic clock restarts with each process, so entries saved by one ``gitmem ask`` could not
    be aged by the next; wall time can (see ``Emulator(state_path=...)``).
    """

    virtual = False

    def now(self) -> float:
        return time.time()


def check_advance(seconds: float) -> None:
    """A virtual clock's one rule for moving it: forward, by a finite number of seconds (NaN compares false
    with everything: it would stop the clock for good; an endless move would send pings for ever)."""
    if not 0 <= seconds < float("inf"):
        raise ValueError("a virtual clock only moves forward, by a finite number of seconds")


class VirtualClock:
    """A clock that only moves when told to: ``advance(330)`` is a 5.5-minute break, instantly."""

    virtual = True

    def __init__(self, start: float = 0.0):
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def resume(self, at: float) -> None:
        """Continue from a saved virtual time (never backwards): a persisted virtual emulator."""
        with self._lock:
            self._now = max(self._now, float(at))

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds`` (never backwards, and by a finite amount) and return the new time."""
        check_advance(seconds)
        with self._lock:
            if not self._now + float(seconds) < float("inf"):  # two finite moves can still overflow
                raise ValueError("a virtual clock only moves to a finite time")
            self._now += float(seconds)
            return self._now
