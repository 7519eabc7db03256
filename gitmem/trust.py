"""The trust gate: everything that enters from a remote passes here, or stays out.

A teammate's clone is not trusted to hold only what gitmem writes. Before a
fetched memory tip may land on ``refs/memory-remotes/`` (and so be merged),
:mod:`gitmem.remote` checks it here:

- its ref name, one by one (:func:`ref_name_problem`): a bad name is skipped,
  the other branches still arrive;
- its objects pass git's own strict object checks (:data:`FSCK_CONFIG` makes
  ``git fetch`` run them, the same checks as ``git fsck --strict``);
- every commit it brings (not the ones local memory already holds) has the
  layout gitmem writes (:func:`history_problem`): only ``<type>/<x>/<y>/<id>.yaml``
  and ``conflicts/<id>.yaml`` blobs, no symlinks, no submodules, no other files;
  each blob within its size limit and free of YAML anchors and aliases; each
  conflict file a real conflict naming only memory fields; and no root commit with
  an empty tree (gitmem's first write holds a memory; code whose history is all
  ``git commit --allow-empty`` has the layout of an empty memory, and would be merged in).

What a fast-forward or a first pull takes as it is is scanned for secrets here too (:func:`secret_blobs`,
used by :func:`gitmem.merge.redacted_onto`), as what a push sends is.

The same checks read conflict files for ``gitmem conflicts`` and ``status``
(:func:`load_yaml`, :func:`load_conflict_data`) and judge local history in
``gitmem doctor``. gitmem itself never writes YAML anchors, aliases or nesting
deeper than three levels, so refusing them costs nothing legitimate.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import pygit2

from . import model
from .errors import BranchError, GitmemError, InvalidMemory, Untrusted
from .records import CONFLICTS_DIR, Conflict, check_conflict
from .repo import below_parents, check_branch_name, common_dir, entries_by_name, objects_read_once

#: A conflict file holds three versions of one memory plus a little framing.
MAX_CONFLICT_BYTES = 4 * model.MAX_BLOB_BYTES
#: Mappings and lists nested deeper than this are refused (a memory or conflict needs 4).
MAX_YAML_DEPTH = 8
#: ``git -c ...`` options that make a fetch check every received object as strictly as
#: ``git fsck --strict`` (index-pack and unpack-objects get ``--strict``) and refuse the pack.
FSCK_CONFIG = ("-c", "fetch.fsckObjects=true")
_BLOB_MODES = (0o100644,)  # pygit2.GIT_FILEMODE_BLOB, spelled out so importing this module does not load libgit2
_FANOUT = set("0123456789abcdefghjkmnpqrstvwxyz")


@dataclass(frozen=True)
class Refusal:
    """One thing the gate kept out: ``what`` (a ref, an object), ``why``, and from which ``remote``."""

    what: str
    why: str
    remote: str = ""

    def line(self) -> str:
        where = f" from {self.remote}" if self.remote else ""
        return printable(f"refused {self.what}{where}: {self.why}")

    def to_dict(self) -> Dict[str, str]:
        return asdict(self)


# --- YAML with limits ------------------------------------------------------------

def load_yaml(data: bytes, *, limit: int = model.MAX_BLOB_BYTES, what: str = "document") -> Any:
    """Parse YAML from outside: at most ``limit`` bytes, UTF-8, no anchors or aliases
    (a 700-byte "billion laughs" file would otherwise expand to gigabytes once
    walked), at most :data:`MAX_YAML_DEPTH` levels of nesting. Raises :class:`Untrusted`."""
    if len(data) > limit:
        raise Untrusted(f"{what} is {len(data)} bytes, over the {limit}-byte limit")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Untrusted(f"{what} is not valid UTF-8 (byte {e.start})") from None
    import yaml  # on first use: commands that read no outside YAML need not load it

    loader = model.safe_loader()
    try:
        _check_events(text, what, loader)
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as e:
        raise Untrusted(f"{what} is not valid YAML: {str(e).splitlines()[0] if str(e) else 'parse error'}") from None
    except RecursionError:
        raise Untrusted(f"{what} nests too deeply") from None


def _check_events(text: str, what: str, loader: Any) -> None:
    import yaml

    depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise Untrusted(f"{what} uses YAML anchors or aliases (gitmem never writes them)")
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise Untrusted(f"{what} nests deeper than {MAX_YAML_DEPTH} levels")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def load_conflict_data(data: bytes) -> Dict[str, Any]:
    """A conflict file's content, read with the limits above and checked by :func:`gitmem.records.check_conflict`.
    Raises :class:`Untrusted`."""
    parsed = load_yaml(data, limit=MAX_CONFLICT_BYTES, what="conflict file")
    try:
        check_conflict(parsed)
    except InvalidMemory as e:
        raise Untrusted(f"not a valid conflict file ({e})") from None
    return parsed


def read_conflict(repo: pygit2.Repository, blob: Any) -> Optional[Conflict]:
    """The conflict stored in ``blob``, or None where gitmem cannot read one there (doctor names such a file):
    for a caller that only needs the conflict when there is one."""
    try:
        return Conflict.from_dict(load_conflict_data(repo[blob].peel(pygit2.Blob).data))
    except (GitmemError, KeyError, ValueError, pygit2.GitError):
        return None


def memory_blob_problem(data: bytes) -> Optional[str]:
    """Why a memory blob from outside is refused, or None. Only the limits: a blob that is
    within them but not a valid memory is reported by `list` and `doctor`, not refused
    (a newer gitmem's schema must still travel)."""
    if len(data) > model.MAX_BLOB_BYTES:
        return f"{len(data)} bytes, over the {model.MAX_BLOB_BYTES}-byte limit"
    if b"&" not in data and b"*" not in data:
        return None  # no anchor or alias is possible: skip the second parse
    try:
        load_yaml(data, what="memory")
    except Untrusted as e:
        if "not valid" in str(e):
            return None  # unreadable, not dangerous: `doctor` reports it
        return str(e)
    return None


# --- ref names ---------------------------------------------------------------------


def ref_name_problem(branch: str) -> Optional[str]:
    """Why a remote's ``refs/memory/<branch>`` cannot be taken in, or None.

    git allows a name with C1 controls (a CSI, U+009B) or bidi overrides, which every list of branches, pull
    and status would print as they are: refused here, the one place all of them come through."""
    from .text import inert

    try:
        check_branch_name(branch)
    except BranchError:
        if len(branch) > 255:
            return f"branch name of {len(branch)} characters (at most 255)"
        return "not a valid memory branch name"
    if inert(branch) != branch:
        return "branch name with control or text-reordering characters"
    return None


def show_ref(ref: str) -> str:
    """A ref name fit for a one-line message (long or odd names shortened and escaped)."""
    return printable(ref if len(ref) <= 100 else ref[:60] + f"...({len(ref)} characters)")


def printable(text: str, limit: Optional[int] = 400) -> str:
    """One line for a terminal: names from outside (tree entries, refs) may hold newlines or escapes.
    Cut to ``limit`` characters (None: never)."""
    if not text.isprintable():  # most text is: then it is its own escape, unread a character at a time
        text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return text if limit is None or len(text) <= limit else text[:limit - 3] + "..."


# --- history and trees -------------------------------------------------------------


def secret_blobs(repo: pygit2.Repository, blob_ids: Sequence[str]) -> Dict[str, List[str]]:
    """Those of ``blob_ids`` whose text holds a secret, each with the rules it matched. Blobs found clean
    are remembered in the derived index under a hash of the rules, so each is read and scanned once,
    whichever way it came or goes (a blob with a secret is scanned every time)."""
    from .index import index_for
    from .redact import blob_texts, rules_key, scan

    index, key = index_for(common_dir(repo)), rules_key()
    clean = set(index.clean(key, list(blob_ids)))
    newly_clean, found = [], {}
    for oid in dict.fromkeys(blob_ids):
        if oid in clean:
            continue
        rules = [f.rule for text in blob_texts(repo[oid].data) for f in scan(text)]  # type: ignore[attr-defined]
        if rules:
            found[oid] = rules
        else:
            newly_clean.append(oid)
    index.put_clean(key, newly_clean)
    return found


def history_problem(repo: pygit2.Repository, tip: str, known: Iterable[str] = ()) -> Optional[str]:
    """The first reason to refuse the history of ``tip`` (commits ``known`` tips already
    hold are trusted and skipped), or None when it is all gitmem's layout.

    Each new commit's tree is compared with its parents': only subtrees that
    differ from a parent's are walked, so the cost is the change, not the tree."""
    found = refused_commit(repo, tip, known)
    return found[1] if found else None


def refused_commit(repo: pygit2.Repository, tip: str, known: Iterable[str] = ()) -> Optional[Tuple[Optional[str], str]]:
    """As :func:`history_problem`, with the newest commit refused (None when the tip or the walk is at fault):
    the one a remote's ref must be moved back past before the gate lets the branch in again."""
    try:
        obj = repo[tip]
    except (KeyError, ValueError, pygit2.GitError):
        return None, f"tip {tip[:10]} is missing"
    if not isinstance(obj, pygit2.Commit):
        return None, f"tip {tip[:10]} is a {obj.type_str}, not a commit"
    walker = repo.walk(obj.id, pygit2.enums.SortMode.TOPOLOGICAL)
    for k in dict.fromkeys(known):
        try:
            walker.hide(k)
        except (KeyError, ValueError, pygit2.GitError):
            continue
    seen: Set[str] = set()
    try:
        with objects_read_once():  # each object is read once
            for commit in walker:
                parents = [p.tree for p in commit.parents]
                if not parents and not len(commit.tree):  # the tree problem below finds nothing in an empty tree
                    return str(commit.id), (f"commit {str(commit.id)[:10]}: a root commit with an empty tree is "
                                            "no memory (a history starts with a write): a code commit? name a "
                                            "memory ref, refs/memory/<branch>")
                why = _tree_problem(repo, commit.tree, parents, (), seen)
                if why:
                    return str(commit.id), printable(f"commit {str(commit.id)[:10]}: {why}")
    except (KeyError, ValueError, pygit2.GitError) as e:
        return None, f"history is unreadable ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
    return None


def tip_tree_problem(repo: pygit2.Repository, tip: str) -> Optional[str]:
    """Why the tree at ``tip`` itself (not its history) is not gitmem's layout, or None."""
    try:
        why = _tree_problem(repo, repo[tip].peel(pygit2.Tree), [], (), set())
    except (KeyError, ValueError, pygit2.GitError) as e:
        return f"tip {tip[:10]} cannot be read ({e})"
    return printable(why) if why else None


def _tree_problem(repo: pygit2.Repository, tree: pygit2.Tree, parents: List[pygit2.Tree],
                  path: tuple, seen: Set[str]) -> Optional[str]:
    key = f"{tree.id} {'/'.join(path)}"  # a tree is judged where it stands: the rules depend on the depth
    if key in seen or any(p.id == tree.id for p in parents):
        return None
    seen.add(key)
    depth = len(path)
    held = entries_by_name(parents)
    for entry in tree:
        name = entry.name or ""
        where = "/".join(path + (name,))
        mode = entry.filemode
        if mode == pygit2.GIT_FILEMODE_LINK:
            return f"{where} is a symlink (memory trees hold only YAML blobs)"
        if mode == pygit2.GIT_FILEMODE_COMMIT:
            return f"{where} is a submodule entry (memory trees hold only YAML blobs)"
        is_tree = mode == pygit2.GIT_FILEMODE_TREE
        if depth == 0:
            if name not in model.TYPES and name != CONFLICTS_DIR:
                return f"unknown top-level entry {where!r} (only memory types and {CONFLICTS_DIR}/)"
            if not is_tree:
                return f"{where} is not a folder"
        elif path[0] == CONFLICTS_DIR:
            why = _leaf_problem(repo, entry, where, None, seen) if depth == 1 else "too deep"
            if why:
                return why if why.startswith(where) else f"{where}: {why}"
            continue
        elif depth in (1, 2):
            if not is_tree or name not in _FANOUT:
                return f"{where} does not fit the layout <type>/<x>/<y>/<id>.yaml"
        elif depth == 3:
            why = _leaf_problem(repo, entry, where, path, seen)
            if why:
                return why if why.startswith(where) else f"{where}: {why}"
            continue
        else:
            return f"{where} does not fit the layout <type>/<x>/<y>/<id>.yaml"
        below = below_parents(held, entry)
        if below is None:
            continue  # a parent holds this very subtree here: judged with that parent (or trusted)
        why = _tree_problem(repo, repo[entry.id].peel(pygit2.Tree), below, path + (name,), seen)
        if why:
            return why
    return None


def _leaf_problem(repo: pygit2.Repository, entry: Any, where: str, path: Optional[tuple],
                  seen: Set[str]) -> Optional[str]:
    name = entry.name or ""
    memory_id = name[:-5] if name.endswith(".yaml") else ""
    if entry.filemode not in _BLOB_MODES:
        return f"{where} is not a plain file (mode {entry.filemode:o})"
    if not model.ID_RE.match(memory_id):
        return f"{where} does not fit the layout <type>/<x>/<y>/<id>.yaml"
    if path is not None and (path[1], path[2]) != (memory_id[-2], memory_id[-1]):
        return f"{where} is in the wrong folder for its id"
    key = f"{entry.id} {where}"
    if key in seen:
        return None
    seen.add(key)
    data = repo[entry.id].peel(pygit2.Blob).data
    if path is None:
        try:
            conflict = load_conflict_data(data)
        except Untrusted as e:
            return str(e)
        if conflict["id"] != memory_id:
            return "conflict file named for another id"
        return None
    return memory_blob_problem(data)


def tip_problems(repo: pygit2.Repository, tips: Dict[str, str], known: Iterable[str] = ()) -> Dict[str, str]:
    """branch -> why, for each tip whose new history the gate refuses."""
    known = list(known)
    out = {}
    for branch, tip in tips.items():
        why = history_problem(repo, tip, known)
        if why:
            out[branch] = why
    return out
