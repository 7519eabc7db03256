"""The HTTP way in: ``gitmem emulator serve`` runs the emulator's ASGI app with uvicorn on 127.0.0.1.

Point any client at it with ``ANTHROPIC_BASE_URL=http://127.0.0.1:PORT`` (no ``/v1`` suffix: the SDK
adds the ``/v1/...`` paths itself) and any non-empty ``ANTHROPIC_API_KEY``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from .app import Emulator
from .clock import RealClock, VirtualClock

if TYPE_CHECKING:
    import socket

DEFAULT_PORT = 8765


def serve(sock: "socket.socket", virtual_clock: bool = False, emulator: Optional[Emulator] = None,
          log_level: str = "warning") -> None:
    """Serve on a bound socket (:func:`gitmem.serving.listen`: loopback by default, the emulator
    has no real auth) until interrupted."""
    from ..serving import run

    emulator = emulator or Emulator(clock=VirtualClock() if virtual_clock else RealClock())
    run(emulator.asgi(), sock, log_level=log_level, lifespan="on")
