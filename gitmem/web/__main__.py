"""``python -m gitmem.web [--port P] [--open] [REPO]``: the same app as ``gitmem ui``."""

from __future__ import annotations

from .. import unshadow

unshadow()

import argparse  # noqa: E402
import sys  # noqa: E402

from ..errors import GitmemError  # noqa: E402
from .app import DEFAULT_PORT, serve  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gitmem.web", description="Serve the gitmem web UI on 127.0.0.1.")
    parser.add_argument("repo", nargs="?", default=".", help="repository (default: the current directory)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    parser.add_argument("--open", action="store_true", help="open it in the default browser")
    args = parser.parse_args(argv)
    try:
        serve(args.repo, args.port, args.open)
    except GitmemError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
