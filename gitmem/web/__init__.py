"""The local web UI (``gitmem ui``): browse, search, audit and compare memory, see the cost.

Imported only by ``gitmem ui`` and ``python -m gitmem.web``: it pulls in
Starlette, which the rest of gitmem must not load.
"""

from __future__ import annotations

from .app import DEFAULT_PORT, create_app, serve

__all__ = ["create_app", "serve", "DEFAULT_PORT"]
