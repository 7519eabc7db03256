"""The few reads of a git directory a warm command needs, in pure Python: where the repository is,
the branch HEAD names, where a ref points, the tree of a loose commit, a plain config value and
whether any config names a remote.

Importing pygit2 costs about 65 ms (libgit2, OpenSSL, its enums): more than a warm ``list`` or
``status`` spends reading the derived index. These reads are all such a command asks of git, so the
store opens libgit2 only when one of them raises :class:`Unsure` ("ask libgit2": a packed commit, a
symbolic ref, a reftable, an include in config, an environment that relocates the repository). A
guess is never given.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple, Optional, Tuple

#: Variables with which git (and the hooks it runs) relocate or reshape a repository: with any of them
#: set, libgit2 decides, as before.
RELOCATING = ("GIT_DIR", "GIT_COMMON_DIR", "GIT_WORK_TREE", "GIT_OBJECT_DIRECTORY",
              "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CEILING_DIRECTORIES", "GIT_NAMESPACE")
_HEX = frozenset("0123456789abcdef")
#: Characters of ref names plainly valid under every rule of git-check-ref-format (others: libgit2
#: judges). No regular expressions at import: every command imports this module.
_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


class Unsure(Exception):
    """This module cannot answer: ask libgit2."""


class GitDir(NamedTuple):
    """A non-bare repository found by :func:`discover`."""

    path: str  # its git directory (a linked worktree has its own)
    common: str  # the directory refs and objects are shared in
    workdir: str


def discover(start: str) -> GitDir:
    """The repository holding ``start``, found as git finds it (a ``.git`` directory or a ``gitdir:``
    file in ``start`` or above it)."""
    if any(os.environ.get(name) for name in RELOCATING) or not os.path.isdir(start):
        raise Unsure("git environment set, or no such directory")
    here = os.path.abspath(start)
    try:
        device = os.stat(here).st_dev
        while True:
            dot = os.path.join(here, ".git")
            if os.path.isdir(dot):
                path = dot
                break
            if os.path.isfile(dot):
                path = _pointer(dot, "gitdir: ")
                break
            parent = os.path.dirname(here)
            if parent == here or os.stat(parent).st_dev != device:  # git stops at a file system's edge
                raise Unsure("no .git found")  # libgit2 also knows bare repositories
            here = parent
        common = path
        if os.path.isfile(os.path.join(path, "commondir")):
            common = _pointer(os.path.join(path, "commondir"), "")
        uid = os.geteuid() if hasattr(os, "geteuid") else None
        if (uid is None or os.stat(here).st_uid != uid or os.stat(common).st_uid != uid
                or os.path.exists(os.path.join(common, "reftable"))):
            raise Unsure("ownership or ref format for libgit2 to judge")
    except (OSError, UnicodeDecodeError):
        raise Unsure("unreadable") from None
    return GitDir(path=path, common=common, workdir=here)


def _pointer(file: str, prefix: str) -> str:
    with open(file, encoding="utf-8") as f:
        text = f.read().strip()
    if not text.startswith(prefix):
        raise Unsure(f"unexpected {file}")
    return os.path.normpath(os.path.join(os.path.dirname(file), text[len(prefix):]))


def head_branch(git: GitDir) -> str:
    """The branch HEAD names (born or not)."""
    try:
        with open(os.path.join(git.path, "HEAD"), encoding="utf-8") as f:
            text = f.read().strip()
    except (OSError, UnicodeDecodeError):
        raise Unsure("no HEAD") from None
    if not text.startswith("ref: refs/heads/"):
        raise Unsure("detached HEAD")  # the default branch comes from config and remotes
    return text[len("ref: refs/heads/"):]


def _is_sha(text: str) -> bool:
    return len(text) == 40 and _HEX.issuperset(text)


def plain_ref_name(name: str) -> bool:
    """Whether ``name`` is a ref name git accepts, judged without libgit2 (False: ask it)."""
    return len(name) <= 255 and ".." not in name and all(
        part and part[0] not in ".-" and _PLAIN.issuperset(part) and not part.endswith((".lock", "."))
        for part in name.split("/"))


def ref(git: GitDir, name: str) -> Optional[str]:
    """The commit ``name`` (a full ref under refs/, shared by worktrees) points at, None when absent.

    A loose ref is read before packed-refs: ``git pack-refs`` writes packed-refs before it deletes
    a loose ref, so a ref seen in neither is absent."""
    try:
        with open(os.path.join(git.common, name), encoding="utf-8") as f:
            text = f.read().strip()
    except FileNotFoundError:
        text = None
    except (OSError, UnicodeDecodeError):
        raise Unsure(f"{name} unreadable") from None
    if text is not None:
        if not _is_sha(text):
            raise Unsure(f"{name} is symbolic or unexpected")
        return text
    try:
        with open(os.path.join(git.common, "packed-refs"), encoding="utf-8") as f:
            for line in f:
                sha, _, refname = line.rstrip("\n").partition(" ")
                if refname == name and _is_sha(sha):
                    return sha
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError):
        raise Unsure("packed-refs unreadable") from None
    return None


def tree_of(git: GitDir, commit: str) -> str:
    """The tree of ``commit`` when it is a loose object (as every memory write leaves it)."""
    if not _is_sha(commit):
        raise Unsure("not an object id")
    import zlib  # here: a command that reads no loose commit need not load it

    try:
        with open(os.path.join(git.common, "objects", commit[:2], commit[2:]), "rb") as f:
            head = zlib.decompressobj().decompress(f.read(512), 64)
    except (OSError, zlib.error):
        raise Unsure("not a loose object") from None
    kind, _, body = head.partition(b"\0")
    if not kind.startswith(b"commit ") or not body.startswith(b"tree ") or len(body) < 45:
        raise Unsure("not a commit")
    tree = body[5:45].decode("ascii")
    if not _is_sha(tree):
        raise Unsure("unexpected commit")
    return tree


_REMOTE_OR_INCLUDE = r"^\s*\[\s*(remote|include|includeif)\b"


def has_no_remotes(git: GitDir) -> bool:
    """True when no config file git or libgit2 reads can name a remote (none has a ``[remote]`` or an
    ``[include]`` section); False means "maybe": ask libgit2."""
    if os.environ.get("GIT_CONFIG_COUNT"):
        return False
    chosen = os.environ.get("GIT_CONFIG_GLOBAL")
    files = [os.path.join(git.common, "config"), os.path.join(git.path, "config.worktree"),
             *([chosen] if chosen else []), *filter(None, _user_files()), "/etc/gitconfig"]
    for file in files:
        try:
            with open(file, encoding="utf-8", errors="replace") as f:
                text = f.read().lower()  # the words first: most files have neither, and need no pattern compiled
                if ("remote" in text or "include" in text) and re.search(_REMOTE_OR_INCLUDE, text, re.MULTILINE):
                    return False
        except FileNotFoundError:
            continue
        except OSError:
            return False
    return True


def may_be_renamed(git: GitDir, branch: str) -> bool:
    """False when ``branch``'s reflog records no `git branch -m` (so no memory can have stayed behind under an
    older name: see gitmem.branches.renamed_from); True means "maybe": ask libgit2."""
    try:
        with open(os.path.join(git.common, "logs", "refs", "heads", *branch.split("/")), "rb") as f:
            return b"\tBranch: renamed refs/heads/" in f.read()
    except FileNotFoundError:
        return False
    except OSError:
        return True


def _last_written(git: GitDir, name: str) -> Optional[Tuple[str, str]]:
    """(the tip gitmem last moved the ref ``name`` to, the message of the move that came next, "" if none), as the
    ref's reflog says; None when gitmem wrote nothing there (or it has no reflog). A store written a memory at a
    time has a reflog line per write: the whole file is read only when its last line is not gitmem's own move."""
    try:
        with open(os.path.join(git.common, "logs", *name.split("/")), "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            lines = f.read().rstrip(b"\n").split(b"\n")
            if not _by_gitmem(lines[-1]):
                f.seek(0)
                lines = f.read().rstrip(b"\n").split(b"\n")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise Unsure(f"{name}'s reflog unreadable") from e
    by = b""
    for line in reversed(lines):
        parts = line.split(b" ", 2)
        if not _by_gitmem(line):
            by = line.partition(b"\t")[2].strip()  # newest first: ends at the move right after gitmem's
        elif len(parts) == 3:
            return parts[1].decode("ascii", "replace"), by.decode("utf-8", "replace")
    return None


def may_be_dropped(git: GitDir, name: str) -> Optional[Tuple[str, str]]:
    """(the tip gitmem last wrote on the ref ``name``, the message of the move that came next) when the ref's tip is
    not that tip, so a move gitmem did not make may have dropped it: libgit2 tells whether the tip still holds it
    (gitmem.refs.dropped_writes). None when it is the tip, gitmem wrote nothing there, or the reflog cannot be
    read (nor could libgit2 read it)."""
    try:
        written = _last_written(git, name)
    except Unsure:
        return None
    if written is None:
        return None
    try:
        return None if written[0] == ref(git, name) else written
    except Unsure:
        return written


def _by_gitmem(line: bytes) -> bool:
    """Whether a reflog line records a move gitmem made (its messages start with "gitmem")."""
    return line.partition(b"\t")[2].strip().startswith(b"gitmem")


def may_hold_aside(git: GitDir) -> bool:
    """False when no ref under ``refs/memory/`` or ``refs/memory-aside/``, loose or packed, has ``.earlier-`` in
    its name (so no memory was set aside here: see gitmem.branches.kept_aside); True means "maybe": ask libgit2."""
    try:
        for folder in ("memory", "memory-aside"):
            top = os.path.join(git.common, "refs", folder)
            if os.path.isdir(top) and any(".earlier-" in name for _, _, files in os.walk(top, onerror=_raise)
                                          for name in files):
                return True
        try:
            with open(os.path.join(git.common, "packed-refs"), encoding="utf-8", errors="replace") as f:
                return any(".earlier-" in line and line.partition(" ")[2].startswith(("refs/memory/", "refs/memory-aside/"))
                           for line in f)
        except FileNotFoundError:
            return False
    except OSError:
        return True


def may_be_shallow(git: GitDir) -> bool:
    """False when git keeps no ``shallow`` file (no `git fetch --depth` cut any history here, memory's or code's);
    True means "maybe": libgit2 tells whether memory's history is cut (gitmem.merge.shallow_cut)."""
    return os.path.exists(os.path.join(git.common, "shallow"))


def _raise(error: OSError) -> None:
    raise error

def _user_files() -> Tuple[Optional[str], Optional[str]]:
    """The user's config files, in the order git reads them: the XDG one, then ``~/.gitconfig``. As git finds
    them: ``~`` is HOME alone (never the account's home directory, where ``expanduser`` falls back to), so with
    HOME unset there is no ``~/.gitconfig``, and no XDG file unless XDG_CONFIG_HOME names one: a file git does
    not read is None."""
    home = os.environ.get("HOME")
    return _xdg_file("config"), None if home is None else os.path.join(home or os.sep, ".gitconfig")


def _xdg_file(name: str) -> Optional[str]:
    """git's ``$XDG_CONFIG_HOME/git/<name>``, else ``$HOME/.config/git/<name>``; None with neither set (an
    empty XDG_CONFIG_HOME counts as unset, an empty HOME as the root folder, as for git)."""
    home = os.environ.get("HOME")
    base = os.environ.get("XDG_CONFIG_HOME") or (None if home is None else os.path.join(home or os.sep, ".config"))
    return None if base is None else os.path.join(base, "git", name)


_SECTION = r'\[\s*([A-Za-z0-9.-]+)\s*(?:"((?:[^"\\]|\\.)*)")?\s*\]\s*(?:[#;].*)?'
_ENTRY = r"([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*(.*))?"


def config_in_environment() -> bool:
    """Whether the environment gives git configuration of its own (``git -c``, CI's GIT_CONFIG_COUNT, another
    global or system file), which libgit2 does not read: then only git itself answers as git would."""
    if any(os.environ.get(v) for v in ("GIT_CONFIG_COUNT", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG", "GIT_CONFIG_SYSTEM")):
        return True
    chosen, user = os.environ.get("GIT_CONFIG_GLOBAL"), _user_files()[1]
    return chosen is not None and chosen != "" and (user is None or os.path.realpath(chosen) != os.path.realpath(user))


def config(git: GitDir, key: str) -> Optional[str]:
    """``git config --get key`` from the files git reads (system, global, the repository's), for a
    plain value; anything this reader does not handle exactly (includes, quotes, escapes,
    continuation lines, inline comments in the value, config from the environment) is Unsure."""
    if config_in_environment():
        raise Unsure("config from the environment")
    if os.path.exists(os.path.join(git.path, "config.worktree")):
        raise Unsure("per-worktree config")
    section, _, name = key.rpartition(".")
    head, _, sub = section.partition(".")
    wanted = (head.lower(), sub or None, name.lower())
    files = [] if os.environ.get("GIT_CONFIG_NOSYSTEM") else ["/etc/gitconfig"]
    files += [*filter(None, _user_files()), os.path.join(git.common, "config")]
    found: Optional[str] = None
    for file in files:
        try:
            with open(file, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError):
            raise Unsure(f"{file} unreadable") from None
        where: Optional[tuple] = None
        for line in lines:
            text = line.strip()
            if not text or text[0] in "#;":
                continue
            if text.endswith("\\"):
                raise Unsure("a continued line")
            if text[0] == "[":
                match = re.fullmatch(_SECTION, text)
                if match is None or match.group(1).lower() in ("include", "includeif"):
                    raise Unsure("a section this reader does not follow")
                title, subsection = match.group(1), match.group(2)
                if subsection is not None and "\\" in subsection:
                    raise Unsure("an escaped subsection")
                if subsection is None and "." in title:  # [section.sub], the old spelling
                    title, _, subsection = title.partition(".")
                    subsection = subsection.lower()
                where = (title.lower(), subsection)
                continue
            entry = re.fullmatch(_ENTRY, text)
            if entry is None:
                raise Unsure("a line this reader does not follow")
            if where is None or (*where, entry.group(1).lower()) != wanted:
                continue
            value = entry.group(2)
            if value is None or any(c in value for c in '"\\#;'):
                raise Unsure("a value this reader does not follow")
            found = value.strip()
    return found


def blob_id(path: str) -> Optional[str]:
    """git's blob id of a working file (what ``git hash-object`` prints, what a commit of it holds); None when
    it cannot be read. A link is its target's path, as git stores one. A file with CRLF line ends is hashed
    by git itself: its attributes and core.autocrlf may turn them to LF in the blob, and a teammate whose
    checkout has LF must get the same id (else every summary of the file reads as stale there)."""
    import hashlib  # here: most commands never hash a file

    link = os.path.islink(path)
    try:
        data = os.fsencode(os.readlink(path)) if link else _read_bytes(path)
    except OSError:
        return None
    if b"\r\n" in data and not link and _may_convert(path):
        import subprocess

        try:
            found = subprocess.run(["git", "hash-object", "--", os.path.basename(path)], cwd=os.path.dirname(path) or ".",
                                   capture_output=True, text=True, stdin=subprocess.DEVNULL)
            if found.returncode == 0 and len(found.stdout.strip()) in (40, 64):
                return found.stdout.strip()
        except OSError:
            pass  # no git to ask: the bytes as they are
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _may_convert(path: str) -> bool:
    """Whether git may store this file's CRLF as LF: core.autocrlf, or an attributes file that could name it
    (a few stats and the config files; asking git costs a process per file, and a repository committed with
    CRLF and no attributes has many such files). True when it cannot tell."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        git = discover(folder)
        if (config(git, "core.autocrlf") or "false").lower() not in ("false", "no", "off", "0") or \
                config(git, "core.attributesFile"):
            return True
    except Unsure:
        return True
    attributes = _xdg_file("attributes")  # core.attributesFile's default
    if os.path.exists(os.path.join(git.common, "info", "attributes")) or (attributes and os.path.exists(attributes)):
        return True
    top = os.path.abspath(git.workdir)
    while True:
        if os.path.exists(os.path.join(folder, ".gitattributes")):
            return True
        parent = os.path.dirname(folder)
        if folder == top or parent == folder:
            return False
        folder = parent


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()
