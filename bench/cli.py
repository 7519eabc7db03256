"""CLI start-up: `gitmem --version` and `gitmem --help` vs `python -c "import click"`, side by side.

Every gitmem command pays this start-up; hooks pay it on every commit. The
package's public names are imported lazily (gitmem/__init__.py), and the CLI
modules import pygit2, the anthropic SDK, mcp and starlette only inside the
commands that need them, so start-up should stay close to click's own.

Run: python bench/cli.py [--runs 15] [--json]
Target: `gitmem --version` within 2x of `python -c "import click"`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
COMMANDS = {
    "import_click": [sys.executable, "-c", "import click"],
    "gitmem_version": [sys.executable, "-m", "gitmem", "--version"],
    "gitmem_help": [sys.executable, "-m", "gitmem", "--help"],
}
HEAVY = ("anthropic", "mcp", "starlette", "uvicorn", "httpx", "pygit2")


def _once(argv) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": ROOT})
    return time.perf_counter() - t0


def heavy_imports() -> list:
    """Heavy modules `gitmem --help` imports (should be none)."""
    code = ("import sys, runpy; sys.argv=['gitmem','--help']\n"
            "try:\n runpy.run_module('gitmem', run_name='__main__')\nexcept SystemExit: pass\n"
            f"print('HEAVY:' + ','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": ROOT}).stdout
    line = next((x for x in out.splitlines() if x.startswith("HEAVY:")), "HEAVY:")
    return [m for m in line[len("HEAVY:"):].split(",") if m]


def run(runs: int = 15) -> dict:
    for argv in COMMANDS.values():  # warm the page cache and .pyc files
        _once(argv)
    samples = {k: [] for k in COMMANDS}
    for _ in range(runs):
        for name, argv in COMMANDS.items():
            samples[name].append(_once(argv))
    ms = {k: statistics.median(v) * 1e3 for k, v in samples.items()}
    return {
        "median_ms": ms,
        "version_ratio_to_click": ms["gitmem_version"] / ms["import_click"],
        "help_ratio_to_click": ms["gitmem_help"] / ms["import_click"],
        "heavy_imports_on_help": heavy_imports(),
        "targets": {"version_ratio_to_click": 2.0},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.runs)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    ms = result["median_ms"]
    print(f"python -c 'import click' {ms['import_click']:.0f} ms, gitmem --version {ms['gitmem_version']:.0f} ms "
          f"(x{result['version_ratio_to_click']:.2f}), gitmem --help {ms['gitmem_help']:.0f} ms "
          f"(x{result['help_ratio_to_click']:.2f}); heavy imports on --help: "
          f"{', '.join(result['heavy_imports_on_help']) or 'none'}")


if __name__ == "__main__":
    main()
