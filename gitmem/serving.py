"""Listening sockets for gitmem's local servers (web UI, emulator, router).

The socket is bound before a server says it is serving, so a port that is taken is one clear
error instead of a "serving ..." line followed by uvicorn's exit.
"""

from __future__ import annotations

import socket
from typing import Any, Literal

from .errors import GitmemError


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (0: a free port), or a one-line error naming the port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise GitmemError(f"cannot listen on {host}:{port}: {e.strerror or e} (choose another with --port)") from None
    return sock


def run(app: Any, sock: socket.socket, log_level: str = "warning",
        lifespan: Literal["auto", "on", "off"] = "auto") -> None:
    """Serve ``app`` on an already bound socket until interrupted."""
    import uvicorn

    uvicorn.Server(uvicorn.Config(app, log_level=log_level, lifespan=lifespan)).run(sockets=[sock])
