"""The shape of the code, read from the code: the import graph has no loops, and the pure
core imports no git, network or filesystem code (docs/architecture.md draws the layers)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gitmem"

#: Plain data in, plain data out: these modules are tested without a repository.
PURE_CORE = ["model", "errors", "tokens", "redact", "policy", "pricing", "usage", "records", "search", "check", "context",
             "jsontext", "text"]
#: What the pure core may not import: git, processes, sockets and HTTP, databases, servers,
#: and every gitmem module that reaches git or the network.
EDGES = {
    "pygit2", "subprocess", "socket", "http", "httpx", "httpx2", "anthropic", "urllib", "sqlite3",
    "starlette", "uvicorn", "mcp", "shutil", "tempfile",
    "gitmem.repo", "gitmem.gitdir", "gitmem.refs", "gitmem.store", "gitmem.doctor", "gitmem.branches", "gitmem.remote",
    "gitmem.hooks", "gitmem.checkpoint", "gitmem.audit", "gitmem.index", "gitmem.backend", "gitmem.emulator",
}
#: Filesystem calls the pure core may not make (os.environ, os.urandom and os.getpid are fine).
FILE_CALLS = {"open", "listdir", "makedirs", "remove", "unlink", "replace", "rename", "stat", "scandir", "walk"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> Dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(name: str, path: Path, known: Set[str]) -> Set[str]:
    """Every module ``name`` imports, at the top or inside a function (both run), except
    imports under ``if TYPE_CHECKING:``, which never run."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
            and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING"
            for n in ast.walk(node)}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: Set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:  # `from . import model` imports the module gitmem.model
                out.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target)
    return out


def graph() -> Dict[str, Set[str]]:
    found = modules()
    return {name: {m for m in imports(name, path, set(found)) if m in found and m != name}
            for name, path in found.items()}


def cycles(edges: Dict[str, Set[str]]) -> List[List[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    out: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_import_graph_has_no_loops():
    edges = graph()
    assert len(edges) > 30  # the parser found the package
    assert cycles(edges) == []


def test_the_cycle_finder_finds_a_loop():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("name", PURE_CORE)
def test_the_pure_core_imports_no_git_network_or_filesystem(name):
    path = PACKAGE / f"{name}.py"
    found = modules()
    reached = imports(f"gitmem.{name}", path, set(found))
    bad = sorted(m for m in reached if m in EDGES or m.split(".")[0] in EDGES
                 or any(m.startswith(edge + ".") for edge in EDGES))
    assert bad == [], f"gitmem.{name} imports {bad}"
    calls = sorted({node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
                    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                    if isinstance(node, ast.Call) and (
                        (isinstance(node.func, ast.Name) and node.func.id == "open")
                        or (isinstance(node.func, ast.Attribute) and node.func.attr in FILE_CALLS
                            and isinstance(node.func.value, (ast.Name, ast.Attribute))
                            and ast.unparse(node.func.value) in ("os", "os.path", "shutil", "pathlib")))})
    assert calls == [], f"gitmem.{name} touches the filesystem: {calls}"


def test_no_module_imports_another_modules_private_names():
    """What modules share is public and named; a leading underscore means "this module only"."""
    found = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level and node.module != "__future__":
                found += [f"{name}: from {'.' * node.level}{node.module or ''} import {alias.name}"
                          for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert found == []
