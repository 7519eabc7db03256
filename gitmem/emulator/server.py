"""The HTTP way in: ``gitmem emulator serve`` runs the emulator's ASGI app with uvicorn on 127.0.0.1.

Point any client at it with ``ANTHROPIC_BASE_URL=http://127.0.0.1:PORT`` (no ``/v1`` suffix: the SDK
adds the ``/v1/...`` paths itself) and any non-empty ``ANTHROPIC_API_KEY``.
"""

from __future__ import annotations

from typing import Optional

from .app import Emulator
from .clock import RealClock, VirtualClock

DEFAULT_PORT = 8765


def serve(port: int = DEFAULT_PORT, host: str = "127.0.0.1", virtual_clock: bool = False,
          emulator: Optional[Emulator] = None, log_level: str = "warning") -> None:
    """Serve until interrupted. Binds to loopback by default: the emulator has no real auth."""
    import uvicorn

    emulator = emulator or Emulator(clock=VirtualClock() if virtual_clock else RealClock())
    uvicorn.run(emulator.asgi(), host=host, port=port, log_level=log_level, lifespan="on")
