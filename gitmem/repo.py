"""The repository edge: opening a repository, its config, branch names and identities.

Every other git-facing module builds on these helpers; this module imports no
other gitmem module but the model, the errors, gitdir and loose (and, for an error that quotes a
name, redact), so it can sit at the bottom of the import graph.
"""

from __future__ import annotations

import os
import re
import sys
from contextlib import contextmanager
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import pygit2

from .errors import BranchError, GitmemError, NoIdentity, NotARepository, StorageError
from .gitdir import config_in_environment, plain_ref_name
from .model import Author, check_email, check_kind, check_name, undecodable

REF_PREFIX = "refs/memory/"
#: Where memory set aside here (:func:`gitmem.branches.set_aside`) is kept: outside ``refs/memory/``, which
#: `gitmem remote setup`'s push refspec sends, so a plain `git push` never shares it.
ASIDE_PREFIX = "refs/memory-aside/"
#: Where a fetch keeps each remote's copy of the memory: ``refs/memory-remotes/<remote>/<branch>``.
REMOTE_PREFIX = "refs/memory-remotes/"
#: Where a fetch holds what it brought until the trust gate passes it: ``refs/gitmem-incoming/<pid>/<remote>/<b>``.
INCOMING_PREFIX = "refs/gitmem-incoming/"
#: Every ref namespace of gitmem's: each holds memory, so a push sending any of them is scanned as memory is.
GITMEM_PREFIXES = (REF_PREFIX, ASIDE_PREFIX, REMOTE_PREFIX, INCOMING_PREFIX)
#: The name set-aside memory is given: ``<branch>.earlier-<tip>`` (its first 8 hex digits, or all).
_ASIDE_RE = re.compile(r"(.+)\.earlier-[0-9a-f]{8,64}")
_CREATED_RE = re.compile(r"^branch: Created from (.+)$")


def memory_ref(branch: str) -> str:
    """The local ref of ``branch``'s memory: ``refs/memory/<branch>``, or ``refs/memory-aside/<branch>`` for a
    set-aside name (:func:`aside_of`). A remote holds every branch's under ``refs/memory/``: :func:`shared_ref`."""
    return (ASIDE_PREFIX if aside_of(branch) else REF_PREFIX) + branch


def shared_ref(branch: str) -> str:
    """The ref ``branch``'s memory has on a remote, where pushes send it and fetches read it: ``refs/memory/<b>``
    for every name, set-aside memory's too when a person pushes it by name."""
    return REF_PREFIX + branch


def aside_of(name: str) -> Optional[str]:
    """The branch whose earlier memory a set-aside name (``<branch>.earlier-<tip>``) names, else None."""
    found = _ASIDE_RE.fullmatch(name)
    return found.group(1) if found else None


def shown_name(name: str, limit: Optional[int] = None) -> str:
    """``name`` as an error quotes it, cut to ``limit`` characters: a token pasted where a branch name goes
    is redacted (before the cut, so no piece of it survives), not echoed to a terminal or a CI log."""
    from .redact import redact  # an error's: the happy path needs no secret rules

    return repr(redact(name)[0][:limit])


def check_branch_name(name: str) -> str:
    """Refuse names git would refuse, so a branch can never address outside refs/memory/."""
    if not name:
        raise BranchError("invalid branch name '': it is empty; name a branch, e.g. main")
    if len(name) > 255:
        raise BranchError(f"invalid branch name {shown_name(name, 40)}... ({len(name)} characters) is too long: "
                          "git allows 255 at most; use a shorter name")
    if "\x00" in name:
        raise BranchError(f"invalid branch name {shown_name(name, 80)}: it holds a NUL byte")
    shown = undecodable(name)
    if shown is not None:
        raise BranchError(f"invalid branch name {shown}: not valid UTF-8")
    if not (plain_ref_name(memory_ref(name)) or pygit2.reference_is_valid_name(memory_ref(name))):
        raise BranchError(f"invalid branch name {shown_name(name, 80)}")
    if name == "HEAD" or name.startswith("-"):
        raise BranchError(f"invalid branch name {shown_name(name)}")
    return name


#: libgit2 keeps the objects it reads in a process-wide cache of up to 256 MiB by default. gitmem keeps
#: what it reuses in its own bounded caches and in the derived index, so a server that makes 100,000
#: writes lets libgit2 hold this much at most (each write reads a few new trees).
GIT_OBJECT_CACHE = 16 * 1024 * 1024


@contextmanager
def objects_read_once() -> Iterator[None]:
    """libgit2's object cache off for a walk of a whole history, which reads each object once: caching
    them only fills the cache, and its size counts an object's raw bytes, not what its parsed form
    holds (about 50 MB more at 10,000 commits, under a 16 MiB cap). Process-wide, for the walk only."""
    pygit2.settings.enable_caching(False)
    try:
        yield
    finally:
        pygit2.settings.enable_caching(True)


def entries_by_name(trees: Sequence[pygit2.Tree]) -> List[Dict[str, pygit2.Object]]:
    """Each tree's entries by name, read by iterating it: pygit2 1.21 keeps every str it is given as
    a key (``name in tree``, ``tree[name]``, ``TreeBuilder.get``, ``references[name]``) alive, so a
    history walk that looks names up in parent trees grew by the names it asked (about 210 MB over
    100,000 commits); iterating keeps nothing. A ref name, one of a few, is interned instead: the
    same str kept alive again costs nothing."""
    return [{entry.name or "": entry for entry in tree} for tree in trees]


def below_parents(held: Sequence[Dict[str, pygit2.Object]], entry: pygit2.Object) -> Optional[List[pygit2.Tree]]:
    """For a walk that checks each commit against its parents (``held``: their trees' entries, by
    :func:`entries_by_name`): None when a parent holds this very ``entry`` under its name (it is checked
    with that parent), else the parents' subtrees of that name, to compare the entry's own with."""
    name = entry.name or ""
    if any(name in h and h[name].id == entry.id for h in held):
        return None
    return [h[name].peel(pygit2.Tree) for h in held if name in h and h[name].filemode == pygit2.GIT_FILEMODE_TREE]


def open_repository(path: str = ".") -> pygit2.Repository:
    """The repository git would use when run in ``path``. libgit2 reads none of git's environment, and git
    and its hooks may set it, so it is followed here: GIT_DIR is the git directory (no search), GIT_WORK_TREE
    the work tree (with GIT_DIR alone, ``path`` itself unless core.worktree says), each relative to ``path``
    as under ``git -C path``. A GIT_COMMON_DIR libgit2 would not use is refused, not ignored."""
    here = os.path.abspath(path)
    if not os.path.isdir(here):
        raise NotARepository(here, f"no such directory: {here}")
    named = os.environ.get("GIT_DIR")
    if named:
        found: Optional[str] = os.path.join(here, named)
    else:
        try:
            found = pygit2.discover_repository(here)
        except (pygit2.GitError, OSError, ValueError):
            found = None
    if not found:
        raise NotARepository(here)
    pygit2.settings.cache_max_size(GIT_OBJECT_CACHE)
    try:
        repo = _open_exactly(found)
    except pygit2.GitError as e:
        if named:
            raise NotARepository(found, f"not a git repository: {found} (GIT_DIR)") from None
        raise NotARepository(f"{path} ({e})") from None
    guard_loose_objects(repo)
    work_tree = os.environ.get("GIT_WORK_TREE")
    if work_tree:
        work_tree = os.path.join(here, work_tree)
        if not os.path.isdir(work_tree):
            raise NotARepository(work_tree, f"no such directory: {work_tree} (GIT_WORK_TREE)")
        repo.workdir = work_tree
    elif named and not repo.is_bare and "core.worktree" not in repo.config:
        repo.workdir = here
    shared = os.environ.get("GIT_COMMON_DIR")
    if shared:
        common = common_dir(repo)
        if os.path.realpath(os.path.join(here, shared)) != os.path.realpath(common):
            raise GitmemError(f"GIT_COMMON_DIR={shared} is not supported (libgit2 reads {common}): unset it")
    follow_shared_repository(config_get(repo, "core.sharedRepository"))
    return repo


def reopen(repo: pygit2.Repository) -> pygit2.Repository:
    """A handle of its own on the repository ``repo`` is open on, with its work tree, for another thread:
    libgit2 holds a handle's object database locked while :mod:`gitmem.loose` reads an object in Python,
    which needs the GIL, so a second thread on that handle, holding the GIL while it waits for the lock,
    hung both."""
    other = _open_exactly(repo.path)
    guard_loose_objects(other)
    if repo.workdir and other.workdir != repo.workdir:
        other.workdir = repo.workdir
    return other


def _open_exactly(git_dir: str) -> pygit2.Repository:
    """The repository whose git directory is ``git_dir``: no search, no ``.git`` appended."""
    return pygit2.Repository(git_dir, pygit2.enums.RepositoryOpenFlag.NO_SEARCH
                             | pygit2.enums.RepositoryOpenFlag.NO_DOTGIT)


#: core.sharedRepository's names, as the umask bits each clears: group may read and write (rwx on folders),
#: everybody also reads.
_SHARED = {**dict.fromkeys(("group", "true", "yes", "on", "1"), 0o070),
           **dict.fromkeys(("all", "world", "everybody", "2"), 0o075)}


def follow_shared_repository(value: Optional[str]) -> None:
    """`git init --shared=group`: git makes each object, ref and folder it writes there readable by the group
    whatever the writer's umask; libgit2 does not, so memory one teammate wrote under umask 077 would be
    objects and refs the others' git cannot read ("fatal: bad object refs/memory/main"). This process's umask
    is loosened to match (an octal value, as git, sets the mode exactly; folders get x where r)."""
    if not value or os.name != "posix":
        return
    value = value.strip().lower()
    if value in _SHARED:
        clear, exact = _SHARED[value], None
    else:
        try:
            perm = int(value, 8) & 0o666
        except ValueError:
            return  # umask, false, no, off, 0 or something git refuses: the user's umask stands
        if not perm:
            return
        clear, exact = 0, 0o777 & ~(perm | (perm & 0o444) >> 2)
    mask = os.umask(0)
    os.umask(exact if exact is not None else mask & ~clear)


def follow_home() -> None:
    """Have libgit2 find the global config (``$HOME/.gitconfig``, ``$XDG_CONFIG_HOME/git/config``) and ``~`` from
    this process's environment as it is now. libgit2 looks once, when pygit2 loads: a process that took on
    another's environment since (the command server's worker) would read the global config of the one that
    loaded it, not its caller's."""
    for level in (pygit2.enums.ConfigLevel.GLOBAL, pygit2.enums.ConfigLevel.XDG):
        pygit2.settings.search_path[level] = ""  # a look that finds nothing (HOME unset) keeps the path set before
        pygit2.settings.search_path[level] = None  # type: ignore[assignment]  # pygit2 stub: None looks again
    pygit2.settings.homedir = ""
    pygit2.settings.homedir = None  # type: ignore[assignment]


def guard_loose_objects(repo: pygit2.Repository) -> None:
    """Refuse a truncated loose object of ``repo`` before libgit2 loops on it (:mod:`gitmem.loose`): every
    repository gitmem opens, in this process or its parse helper, goes through here."""
    from .loose import guard  # here: it subclasses a pygit2 class, and only an opened repository needs it

    guard(repo, os.path.join(common_dir(repo), "objects"))


def common_dir(repo: pygit2.Repository) -> str:
    """The directory shared by all linked worktrees (where refs and logs live)."""
    path = repo.path
    pointer = os.path.join(path, "commondir")
    if os.path.exists(pointer):
        with open(pointer, encoding="utf-8") as f:
            return os.path.normpath(os.path.join(path, f.read().strip()))
    return os.path.normpath(path)


def config_set(repo: pygit2.Repository, key: str, value: str) -> None:
    """``git config key value``; a config file that cannot be written (a read-only .git) is one
    :class:`StorageError` naming the key, not libgit2's error from the command."""
    try:
        repo.config[key] = value
    except (pygit2.GitError, OSError) as e:
        raise StorageError(f"cannot record {key} in the repository's config: {e}") from None


def config_get(repo: pygit2.Repository, key: str) -> Optional[str]:
    """``git config --get key``: read by libgit2 from the files git reads, or by git itself where the
    environment gives it configuration libgit2 does not read (a CI job's identity, for one)."""
    if config_in_environment():
        import subprocess  # here: most commands never need it

        try:
            done = subprocess.run(["git", "config", "--get", key], cwd=repo.workdir or repo.path, capture_output=True,
                                  text=True, timeout=30)
            return done.stdout.rstrip("\n") if done.returncode == 0 else None
        except (OSError, subprocess.SubprocessError):  # no git to ask: what libgit2 reads
            pass
    try:
        return repo.config[key]
    except (KeyError, pygit2.GitError):
        return None


def default_branch(repo: pygit2.Repository) -> str:
    """`gitmem.defaultBranch`, else the remote's HEAD, else main/master, else `init.defaultBranch`."""
    configured = config_get(repo, "gitmem.defaultBranch")
    if configured:
        return configured
    try:
        target = repo.references["refs/remotes/origin/HEAD"].target
        if isinstance(target, str) and target.startswith("refs/remotes/origin/"):
            return target[len("refs/remotes/origin/"):]
    except (KeyError, pygit2.GitError):
        pass
    for name in ("main", "master"):
        if f"refs/heads/{name}" in repo.references or memory_ref(name) in repo.references:
            return name
    return config_get(repo, "init.defaultBranch") or "main"


def current_branch(repo: pygit2.Repository) -> Tuple[str, Optional[str]]:
    """The code branch HEAD names (born or not), and a notice when HEAD is detached."""
    try:
        head = repo.references["HEAD"]
    except (KeyError, pygit2.GitError):
        return default_branch(repo), "no HEAD"
    target = head.target
    if isinstance(target, str) and target.startswith("refs/heads/"):
        return target[len("refs/heads/"):], None
    busy = branch_in_progress(repo.path)
    if busy is not None:  # still a notice: hooks leave a rebase's or bisect's commits alone
        return busy[0], f"HEAD is detached while {busy[1]} {busy[0]!r}: using its memory"
    branch = default_branch(repo)
    return branch, f"HEAD is detached: using the memory of {branch!r} (pass --branch to choose another)"


def created_from(repo: pygit2.Repository, branch: str) -> Optional[Tuple[str, str]]:
    """(start point, commit) as the branch's own reflog names them ("branch: Created from <start>"), if it does:
    git keeps it with or without gitmem's hooks, so the commit is where the branch forked in any clone."""
    try:
        entries = list(repo.references[f"refs/heads/{branch}"].log())  # newest first
    except (KeyError, pygit2.GitError, OSError):
        return None
    m = _CREATED_RE.match(entries[-1].message or "") if entries else None
    return (m.group(1), str(entries[-1].oid_new)) if m else None


def branch_in_progress(git_dir: str) -> Optional[Tuple[str, str]]:
    """The branch a rebase or bisect under way in ``git_dir`` started from, and what is under way (HEAD stays
    detached until it ends, and what is written meanwhile belongs to that branch, not the default one)."""
    for name, doing in (("rebase-merge/head-name", "rebasing"), ("rebase-apply/head-name", "rebasing"),
                        ("BISECT_START", "bisecting")):
        try:
            with open(os.path.join(git_dir, name), encoding="utf-8") as f:
                text = f.read().strip()
        except (OSError, UnicodeDecodeError):
            continue
        if doing == "rebasing":  # refs/heads/<branch>, or "detached HEAD"
            branch = text[len("refs/heads/"):] if text.startswith("refs/heads/") else ""
        else:  # the branch bisect started on, or the commit id where HEAD was detached
            branch = "" if len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text) else text
        if branch and plain_ref_name(branch):
            return branch, doing
    return None


def parent_chain(repo: pygit2.Repository, branch: str) -> List[str]:
    """Branches whose memory ``branch`` inherits, nearest first, without cycles.

    Recorded as ``gitmem.branch.<name>.parent`` (see gitmem.branches); the default
    branch ends every chain."""
    from .repo import config_get, default_branch

    chain: List[str] = []
    seen = {branch}
    current = branch
    while True:
        parent = config_get(repo, f"gitmem.branch.{current}.parent")
        if not parent or parent in seen:
            break
        chain.append(parent)
        seen.add(parent)
        current = parent
    default = default_branch(repo)
    if default not in seen:
        chain.append(default)
    return chain


def default_author(repo: pygit2.Repository) -> Author:
    """Who writes when no author is given: the GITMEM_AUTHOR_* environment, else the repository's
    git identity (user.name / user.email), else GIT_AUTHOR_*, else ``$EMAIL`` (which git falls back to, so a
    machine whose commits git signs has memory signed alike). Without an email anywhere it raises
    :class:`NoIdentity`, as `git commit` refuses, rather than sign writes with a made-up address."""
    env = os.environ
    if env.get("GITMEM_AUTHOR_NAME"):
        check_name(env["GITMEM_AUTHOR_NAME"], "$GITMEM_AUTHOR_NAME")  # as --author's is
    name = (env.get("GITMEM_AUTHOR_NAME") or config_get(repo, "user.name") or env.get("GIT_AUTHOR_NAME")
            or env.get("USER") or "unknown")
    email = env.get("GITMEM_AUTHOR_EMAIL")
    if email:
        check_email(email, "$GITMEM_AUTHOR_EMAIL")  # as --author's is
    email = email or config_get(repo, "user.email") or env.get("GIT_AUTHOR_EMAIL") or env.get("EMAIL") or ""
    if not email:
        raise NoIdentity("run `git config user.email you@example.com` (and user.name) in this repository, "
                         "or set GITMEM_AUTHOR_EMAIL")
    return Author(name=name, email=email, kind=author_kind())


def author_kind() -> str:
    """``$GITMEM_AUTHOR_KIND`` (unset: human), refused by name unless it is agent or human."""
    kind = os.environ.get("GITMEM_AUTHOR_KIND") or "human"
    check_kind(kind, "$GITMEM_AUTHOR_KIND")
    return kind


def agent_author(repo: pygit2.Repository, name: str) -> Author:
    """An agent tool as the writer (``GITMEM_AUTHOR_NAME`` names it otherwise), signing with the email the
    CLI would: with none anywhere the write is refused, never signed with a made-up address. The email says
    whose agent wrote a memory the team pulls; a placeholder would say nobody's, in every clone, for good."""
    return Author(name=os.environ.get("GITMEM_AUTHOR_NAME") or name, email=default_author(repo).email, kind="agent")


def ref_target(repo: pygit2.Repository, ref: str) -> Optional[str]:
    """The commit ``ref`` points at (symbolic refs resolved), or None when it does not exist."""
    try:
        return str(repo.references[sys.intern(ref)].resolve().target)  # interned: see entries_by_name
    except (KeyError, pygit2.GitError):
        return None


def head_commit(repo: pygit2.Repository) -> Optional[str]:
    """The code commit HEAD points at, or None on an unborn branch."""
    try:
        return None if repo.head_is_unborn else str(repo.head.target)
    except pygit2.GitError:
        return None


def blob_at(repo: pygit2.Repository, treeish: str, path: str) -> Optional[str]:
    """The id of what ``path`` names in the commit or tree ``treeish``, or None. Asked of libgit2 by
    revision (``<treeish>:<path>``), not as ``tree[path]``: pygit2 1.21 keeps every str key a tree is
    given alive (see :func:`entries_by_name`), and a server asks this on every recall."""
    try:
        return str(repo.revparse_single(f"{treeish}:{path}").id)
    except (KeyError, ValueError, pygit2.GitError):
        return None


def damaged(ref: str, oid: Optional[str], e: Exception, repo: Optional[pygit2.Repository] = None) -> StorageError:
    """The error for an object that cannot be read: names the ref, the object (the one libgit2 did not find,
    which may lie below ``oid`` in its history) and the doctor that repairs that ref. In a partial clone of
    ``repo`` a missing object is one a filtered `git fetch` left on the remote, which libgit2 cannot fetch
    lazily as git does: nothing is damaged, and `gitmem fetch` fetches it (:func:`unfetched`)."""
    # libgit2 names it in parentheses ("no match for id (...)"), pygit2's lookup alone (KeyError('...'))
    named = re.search(r"\b([0-9a-f]{40}|[0-9a-f]{64})\b", str(e)) if isinstance(e, KeyError) else None
    if isinstance(e, KeyError) and repo is not None and partial_clone(repo):
        return StorageError(f"{ref}: {unfetched(ref, f'object {named.group(1) if named else oid}')}")
    detail = "missing" if isinstance(e, KeyError) else f"unreadable ({str(e).splitlines()[0] if str(e) else e!r})"
    return StorageError(f"{ref} is damaged: object {named.group(1) if named else oid} is {detail}; "
                        f"run `{doctor_command(ref)}`")


def unfetched(ref: str, what: str) -> str:
    """What a partial clone's missing object (``what``: "object <id>") under ``ref`` is, and the command that
    fetches it: `gitmem fetch` fetches every object the memory histories lack in one request (libgit2 cannot fetch
    lazily, and git's lazy fetch, `git rev-list --objects`, asks once per object)."""
    return f"{what} is not in this partial clone yet; fetch it with `gitmem fetch`"


def partial_clone(repo: pygit2.Repository) -> bool:
    """Whether git may leave objects on a promisor remote (`git clone --filter`): git 2.39 marks the remote
    (remote.<name>.promisor), later ones also set extensions.partialClone."""
    try:
        return any(e.name.lower().startswith("remote.") and e.name.lower().endswith(".promisor")
                   and (e.value or "").lower() in ("true", "yes", "on", "1") for e in repo.config) \
            or config_get(repo, "extensions.partialClone") is not None
    except (pygit2.GitError, OSError):
        return False


def doctor_command(ref: str, checked_out: Optional[str] = None) -> str:
    """The doctor that checks and repairs memory ref ``ref``, whichever branch is checked out (a bare
    `gitmem doctor` checks HEAD's branch's memory, and says it is fine when another branch's is damaged).
    ``checked_out``: the branch HEAD is on, when the command is for a person in this checkout (doctor's
    own hint): for that branch's memory it is plain `gitmem doctor`."""
    return branch_command(ref, "doctor", checked_out)


def branch_command(ref: str, command: str, checked_out: Optional[str] = None) -> str:
    """``gitmem COMMAND`` run on the memory of ref ``ref``, as :func:`doctor_command` names it."""
    import shlex

    branch = next((ref[len(p):] for p in (REF_PREFIX, ASIDE_PREFIX) if ref.startswith(p)), None)
    return f"gitmem {command}" if branch is None or branch == checked_out else \
        f"gitmem --branch {shlex.quote(branch)} {command}"
