"""The `gitmem` command line: a thin layer over the library.

Each area's commands live in a module of their own (``cli/memory.py``,
``cli/llm.py``, ...) and register on :data:`main`. Library errors become a
one-line ``Error: ...`` and exit code 1 here, in one place; usage errors exit 2.
Heavy libraries are imported inside the commands that need them, so hooks
and ``gitmem add`` start fast.
"""

from __future__ import annotations

from .base import main

__all__ = ["main"]

# Each area registers its commands on `main` when imported; keep one line per area.
from . import memory  # noqa: E402,F401
from . import llm  # noqa: E402,F401
from . import context  # noqa: E402,F401
from . import branches  # noqa: E402,F401
from . import remote  # noqa: E402,F401
from . import mcp  # noqa: E402,F401
from . import ui  # noqa: E402,F401
from . import router  # noqa: E402,F401
