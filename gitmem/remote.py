"""Sharing memory through the git remotes a team already has: fetch, push, pull.

Transport: the network step is delegated to the user's ``git`` executable
(``git fetch`` / ``git push --porcelain`` / ``git ls-remote`` with explicit
refspecs), so ssh keys and ``~/.ssh/config``, credential helpers, https tokens,
proxies and ``insteadOf`` rewrites work exactly as they do for code. libgit2's
own transport would need all of that re-implemented. Everything else (which
commits and blobs go out, merging, moving refs) stays in pygit2. When stdin is
not a terminal (hooks, agents, CI) ``GIT_TERMINAL_PROMPT=0`` makes git fail
instead of waiting for a password nobody will type.

Layout: local memory is ``refs/memory/<branch>``; what a fetch brings lives on
``refs/memory-remotes/<remote>/<branch>`` and never overwrites local memory.
A push sends ``refs/memory/<b>:refs/memory/<b>`` without force; when the
remote moved on it fetches, merges with :func:`gitmem.merge.merge_into` and
pushes again, a bounded number of times, until it lands or a merge conflict
needs a person. Before anything leaves, every blob and commit message not yet
on the remote is scanned for secrets (a memory planted with plain git skips
the write-time redaction), and the push is refused if one matches.
"""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import pygit2

from .branches import (REMOTE_PREFIX, aside_notice, blocked_entry, damaged_copy, dropped_here, earlier_root,
                       merged_back, reachable, renamed_here, set_aside_for, set_aside_from, take_late_parent)
from .errors import GitmemError, RefClash, RemoteError, SecretFound, StorageError
from .index import process_gone
from .model import Author
from .refs import memory_names
from .repo import (ASIDE_PREFIX, INCOMING_PREFIX, REF_PREFIX, check_branch_name, common_dir, config_get, damaged,
                   memory_ref, partial_clone, ref_target, shared_ref)
from .store import Store
from .text import plural

MAX_PUSH_ATTEMPTS = 8

__all__ = [
    "REMOTE_PREFIX", "BranchPush", "FetchResult", "PullResult", "SetupChange", "Divergence", "RemoteBranch",
    "default_remote", "tracking_ref", "local_branches", "remote_branches", "fetch", "pull", "push",
    "outgoing_secrets", "carry_memory", "divergence", "missing_here",
]


# --- plain data ------------------------------------------------------------------


@dataclass(frozen=True)
class BranchPush:
    """What a push did for one memory branch.

    ``status``: "pushed" (the remote moved to ``commit``), "up-to-date",
    "no-memory" (nothing to push), "conflict" (a merge with the remote's memory
    left conflicts for a person; nothing pushed), "rejected" (the remote
    refused; ``message`` says why). ``merges`` counts merges made on the way; ``taken``, the memories the
    remote's added or changed here on the way (a push of memory the remote is ahead of takes it in: "up-to-date"
    then means here too)."""

    branch: str
    status: str
    commit: Optional[str] = None
    merges: int = 0
    attempts: int = 0
    conflicts: Tuple[str, ...] = ()
    message: str = ""
    taken: int = 0

    def to_dict(self) -> Dict[str, Any]:
        return {**asdict(self), "conflicts": list(self.conflicts)}


@dataclass(frozen=True)
class RemoteBranch:
    """One memory branch of a remote: the fetched tip moved from ``old`` to ``new``."""

    branch: str
    ref: str
    old: Optional[str]
    new: Optional[str]

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class FetchResult:
    """``refused``: what the trust gate kept out (:class:`gitmem.trust.Refusal`), one per ref."""

    remote: str
    branches: List[RemoteBranch] = field(default_factory=list)
    refused: List[Any] = field(default_factory=list)

    @property
    def changed(self) -> List[RemoteBranch]:
        return [b for b in self.branches if b.old != b.new]

    def refused_branches(self) -> Set[str]:
        return {r.what[len(REF_PREFIX):] for r in self.refused if r.what.startswith(REF_PREFIX)}

    def to_dict(self) -> Dict[str, Any]:
        return {"remote": self.remote, "branches": [b.to_dict() for b in self.branches],
                "refused": [r.to_dict() for r in self.refused]}


@dataclass(frozen=True)
class PullResult:
    """``merged``: one entry per branch: {"branch", "kind", "commit", "added", "changed", "conflicts"};
    ``kind`` is "new" (local memory created at the remote's tip), or a MergeResult kind. ``skipped``: branches
    `gitmem prune` dropped or a new branch set aside here whose remote memory holds nothing newer (their fetched
    copy stays), named by the pull that fetched that copy (or more of it), not by every later one
    (:attr:`Divergence.skipped` keeps it for `gitmem status`).
    ``set_aside``: branch -> the name this clone's memory of an earlier branch of that name is kept under, set
    aside because the remote's is a new branch's (:func:`gitmem.branches.set_aside_for`). An entry with ``as_of``
    and ``into`` merged the memory ``branch`` held at that fork point into branch ``into``, which started before
    it arrived (:func:`gitmem.branches.take_late_parent`); ``late`` is such a branch whose parent's memory at the
    fork cannot be told, named by the pull that brought (more of) the parent's memory, not by every later one.
    ``renamed``: branch -> the name its memory was renamed to here (:func:`gitmem.branches.renamed_here`), whose
    fetched copy, never taken, holds memory that name's lacks, named by the pull that fetched it."""

    fetch: FetchResult
    merged: List[Dict[str, Any]] = field(default_factory=list)
    skipped: List[str] = field(default_factory=list)
    set_aside: Dict[str, str] = field(default_factory=dict)
    late: List[Any] = field(default_factory=list)  # :class:`gitmem.branches.LateParent` left to a person
    blocked: List[Dict[str, str]] = field(default_factory=list)  # as :attr:`gitmem.branches.SyncResult.blocked`
    renamed: Dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> Dict[str, Any]:
        return {"remote": self.fetch.remote, "fetched": self.fetch.to_dict()["branches"], "merged": self.merged,
                "refused": [r.to_dict() for r in self.fetch.refused], "skipped": self.skipped,
                "set_aside": self.set_aside, "late": [x.to_dict() for x in self.late], "blocked": self.blocked,
                "renamed": self.renamed}


@dataclass(frozen=True)
class SetupChange:
    """One git config value ``action`` ("added", "removed", "kept") by ``gitmem remote setup``."""

    key: str
    value: str
    action: str
    why: str = ""

    def to_dict(self) -> Dict[str, str]:
        return asdict(self)

    def config_args(self) -> List[str]:
        """The ``git config`` arguments that make this change (added or removed), as setup runs them and as a
        person may run them again. ``--unset`` reads its value as a regular expression, where a refspec's ``+``
        and ``*`` are operators: the value goes in escaped and anchored, so it matches itself and nothing else
        (``--fixed-value`` says the same plainly, but only git 2.30 and later know it)."""
        if self.action == "added":
            return ["config", "--local", "--add", self.key, self.value]
        return ["config", "--local", "--unset", self.key, "^" + _ERE_SPECIAL.sub(r"\\\g<0>", self.value) + "$"]


#: What a POSIX extended regular expression (git config's value pattern) reads as an operator.
_ERE_SPECIAL = re.compile(r"[.\[{()\\*+?^$|]")


@dataclass(frozen=True)
class Divergence:
    """Local memory of ``branch`` against the last fetched copy on ``remote``. ``skipped``: the copy holds
    what this memory lacks, yet a pull does not take it: that branch's memory was dropped or set aside here
    (:func:`gitmem.branches.dropped_here`). ``aside``: for memory set aside here, the branch whose earlier memory
    it holds (:func:`gitmem.branches.set_aside_from`: kept in this clone, not pushed); ``aside_merged``: that
    branch's memory holds all of it now (:func:`gitmem.branches.merged_back`: prune drops it as merged).
    ``new_branch``: the copy is a new branch's memory of that name, which set this one aside
    (:func:`gitmem.branches.earlier_root`): a pull sets this memory aside here too and takes the copy.
    ``renamed_to``: the branch's memory was renamed to that name here (:func:`gitmem.branches.renamed_here`): a
    pull never takes the copy, and ``behind`` counts what that name's memory lacks of it (``skipped`` then).
    ``unfetched``: no copy of this remote's memory at all here (of any branch: gitmem has not fetched or pushed it,
    or the remote has none), so whether the remote holds the branch is unknown, not "no": a plain
    `git fetch origin 'refs/memory/*:refs/memory/*'` or `git push` of memory records no copy (yet when the last
    `git fetch` here took the very tip this memory is at from the remote, its FETCH_HEAD says so: that tip is
    the copy, see :func:`_fetched_by_git`).
    ``reads``: for a branch without memory of its own here, the branch whose memory it reads (its parent's, or the
    default branch's), which ``behind`` is counted against (``ahead`` is 0: it has nothing of its own to send)."""

    branch: str
    remote: str
    local: Optional[str]
    fetched: Optional[str]
    ahead: int
    behind: int
    skipped: bool = False
    aside: Optional[str] = None
    aside_merged: bool = False
    new_branch: bool = False
    renamed_to: Optional[str] = None
    unfetched: bool = False
    reads: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


# --- names -------------------------------------------------------------------------


def tracking_ref(remote: str, branch: str) -> str:
    return f"{REMOTE_PREFIX}{remote}/{branch}"


def _check_remote(repo: pygit2.Repository, remote: str) -> str:
    names: List[str] = list(repo.remotes.names())  # type: ignore[arg-type]  # pygit2 stub: Optional name
    if remote not in names:
        known = f" (remotes: {', '.join(names)})" if names else " (this repository has no remotes)"
        raise RemoteError(f"no remote named {remote!r}{known}; add one with `git remote add`")
    if not pygit2.reference_is_valid_name(tracking_ref(remote, "x")):
        raise RemoteError(f"remote name {remote!r} cannot be used in a ref name")
    return remote


def default_remote(repo: pygit2.Repository, branch: Optional[str] = None) -> str:
    """The code branch's upstream remote, else ``origin``, else the only remote."""
    names: List[str] = list(repo.remotes.names())  # type: ignore[arg-type]  # pygit2 stub: Optional name
    configured = config_get(repo, f"branch.{branch}.remote") if branch else None
    if configured and configured in names:
        return configured
    if "origin" in names:
        return "origin"
    if len(names) == 1:
        return names[0]
    if not names:
        raise RemoteError("this repository has no remotes; add one with `git remote add origin URL`")
    raise RemoteError(f"several remotes ({', '.join(names)}): name the one to use")


def _resolve_remote(repo: pygit2.Repository, remote: Optional[str], branch: Optional[str]) -> str:
    return _check_remote(repo, remote) if remote else default_remote(repo, branch)


def _refs_under(repo: pygit2.Repository, prefix: str) -> Dict[str, str]:
    out = {}
    for name in repo.references:
        if name.startswith(prefix):
            try:
                out[name[len(prefix):]] = str(repo.references[name].resolve().target)
            except (KeyError, pygit2.GitError):
                continue
    return out


def local_branches(repo: pygit2.Repository) -> Dict[str, str]:
    """branch -> tip of every local memory ref, memory set aside here too (:func:`gitmem.refs.memory_names`)."""
    return {name: tip for name, ref in memory_names(repo) if (tip := ref_target(repo, ref))}


def remote_branches(repo: pygit2.Repository, remote: str) -> Dict[str, str]:
    """branch -> tip of every fetched memory ref of ``remote`` (no network)."""
    return _refs_under(repo, f"{REMOTE_PREFIX}{remote}/")


# --- running git -------------------------------------------------------------------


def _git(repo: pygit2.Repository, args: Sequence[str], *, interactive: Optional[bool] = None,
         what: str, input: Optional[str] = None) -> subprocess.CompletedProcess:
    """Run the user's git on this repository, from its work tree as git itself runs there (a remote's relative
    URL is relative to it, whatever directory gitmem was started in); a missing git or a failure to start is
    a RemoteError."""
    if interactive is None:
        interactive = sys.stdin is not None and sys.stdin.isatty()
    env = dict(os.environ)
    if not interactive:
        env["GIT_TERMINAL_PROMPT"] = "0"
    try:  # surrogateescape: a remote's ref names need not be UTF-8 (they are refused by name, not crashed on)
        feed: Dict[str, Any] = {"input": input} if input is not None else \
            {"stdin": None if interactive else subprocess.DEVNULL}
        return subprocess.run(["git", f"--git-dir={repo.path}", *args], capture_output=True, text=True,
                              errors="surrogateescape", env=env, cwd=repo.workdir or repo.path, **feed)
    except OSError as e:
        raise RemoteError(f"could not run git to {what}: {e}") from None


_GENERIC = ("could not read from remote repository", "please make sure you have", "and the repository exists")


def _failure(result: subprocess.CompletedProcess) -> str:
    """git's own reason, in one line: its first specific fatal/error line (ssh's
    complaint or "does not appear to be a git repository"), not the generic
    "Could not read from remote repository" that follows it."""
    lines = [line.strip() for line in (result.stderr or "").splitlines() if line.strip()]
    specific = [line for line in lines if not any(g in line.lower() for g in _GENERIC)]
    for line in specific:
        if line.lower().startswith(("fatal:", "error:")):
            return line.split(":", 1)[1].strip()
    chosen = specific[0] if specific else (lines[0] if lines else f"git exited with {result.returncode}")
    return chosen.split(":", 1)[1].strip() if chosen.lower().startswith(("fatal:", "error:")) else chosen


def ls_remote(repo: pygit2.Repository, remote: str, *, interactive: Optional[bool] = None) -> Dict[str, str]:
    """branch -> tip of every memory ref on the remote itself (asks the network)."""
    _check_remote(repo, remote)
    result = _git(repo, ["ls-remote", "--refs", remote, REF_PREFIX + "*"], interactive=interactive,
                  what=f"list {remote}")
    if result.returncode != 0:
        raise RemoteError(f"could not reach {remote}: {_failure(result)}")
    out = {}
    for line in result.stdout.splitlines():
        oid, _, ref = line.partition("\t")
        if ref.startswith(REF_PREFIX):
            out[ref[len(REF_PREFIX):]] = oid
    return out


# --- fetch -------------------------------------------------------------------------

#: A fetch depth no history reaches: git's own "infinite" depth (2**31 - 1, what --unshallow sends) would
#: unshallow every shallow commit of the clone, and fetch the code's whole history with the memory's.
WHOLE_HISTORY = 2**31 - 2


def fetch(repo: pygit2.Repository, remote: Optional[str] = None, branches: Optional[Sequence[str]] = None, *,
          interactive: Optional[bool] = None) -> FetchResult:
    """Fetch the remote's memory refs into ``refs/memory-remotes/<remote>/``, through the trust gate.

    Local memory is never touched. Without ``branches`` every memory branch is
    fetched; fetched copies of branches deleted on the remote are pruned.
    The remote's memory refs are listed first and each name is checked
    (:func:`gitmem.trust.ref_name_problem`); the good ones are fetched into
    ``refs/gitmem-incoming/`` with git's strict object checks, and each tip
    whose new history breaks gitmem's layout (:func:`gitmem.trust.history_problem`)
    is left out. What was refused is in :attr:`FetchResult.refused`; the rest
    lands on the tracking refs. (The quarantine refs are per process and
    removed before returning; a killed fetch's are removed by the next fetch.)"""
    from .trust import Refusal, ref_name_problem, show_ref

    remote = _resolve_remote(repo, remote, None)
    names = [check_branch_name(b) for b in branches] if branches else None
    before = remote_branches(repo, remote)
    on_remote = ls_remote(repo, remote, interactive=interactive)
    refused: List[Refusal] = []
    wanted: List[str] = []
    for b in sorted(on_remote):
        if names is not None and b not in names:
            continue
        why = ref_name_problem(b)
        if why:
            refused.append(Refusal(show_ref(shared_ref(b)), why + "; skipped", remote))
        else:
            wanted.append(b)
    _drop_dead_incoming(repo)
    landed = _fetch_incoming(repo, remote, wanted, refused, interactive)
    if partial_clone(repo):  # before the gate, which reads every new commit's tree
        _fetch_unfetched(repo, remote, [*local_branches(repo).values(), *before.values(), *landed.values()],
                         interactive)
    if repo.is_shallow:  # a commit read before the fetch unshallowed it keeps its hidden parents until then
        repo.free()
    # Prune what the remote no longer has (of ``branches``, if given) first: a copy of its deleted `feature`
    # would keep its new `feature/billing` from landing (git keeps no ref that is also a folder of refs).
    for b in set(before) - set(on_remote):
        if names is None or b in names:
            _delete_ref(repo, tracking_ref(remote, b))
    _gate(repo, remote, landed, refused)
    after = remote_branches(repo, remote)
    shown = names if names is not None else sorted(set(before) | set(after))
    return FetchResult(remote, [RemoteBranch(b, tracking_ref(remote, b), before.get(b), after.get(b))
                                for b in shown], refused)


def _fetch_unfetched(repo: pygit2.Repository, remote: str, tips: Sequence[str], interactive: Optional[bool]) -> None:
    """Fetch, in one go, every object of the memory histories at ``tips`` a partial clone left on the remote:
    a plain `git fetch` of memory takes the clone's filter, and once the commits are here gitmem's own fetch
    wants nothing (git negotiates by commit), so the blobs (or trees) stayed behind while libgit2, which cannot
    fetch lazily, read the memory as missing; git's own lazy fetch asks once per object (minutes at 10,000)."""
    if not tips:
        return
    listed = _git(repo, ["rev-list", "--objects", "--missing=print", *dict.fromkeys(tips), "--"], interactive=False,
                  what="list the memory objects this partial clone lacks")
    missing = [line[1:] for line in listed.stdout.splitlines() if line.startswith("?")]
    if listed.returncode != 0 or not missing:
        return  # a history that cannot be walked is damage: the readers and doctor name it
    # As git's own lazy fetch asks: by object id (protocol v2 serves any object the remote holds), no negotiation;
    # unfiltered, so a tree comes with everything below it; checked strictly, as every fetch of memory is.
    from .trust import FSCK_CONFIG

    result = _git(repo, [*FSCK_CONFIG, "-c", "fetch.negotiationAlgorithm=noop", "fetch", "--quiet", "--no-tags",
                         "--no-write-fetch-head", "--recurse-submodules=no", "--no-filter", "--stdin", remote],
                  interactive=interactive, what=f"fetch from {remote}", input="\n".join(missing) + "\n")
    if result.returncode != 0:
        raise RemoteError(f"could not fetch the {plural(len(missing), 'memory object')} this partial clone lacks "
                          f"from {remote}: {_failure(result)}")


def _incoming_ref(remote: str, branch: str) -> str:
    """Per process, so two fetches in one repository never drop each other's quarantined tips."""
    return f"{INCOMING_PREFIX}{os.getpid()}/{remote}/{branch}"


def _drop_dead_incoming(repo: pygit2.Repository) -> None:
    """Remove quarantine refs a killed fetch left behind (their process is gone)."""
    for name in [n for n in repo.references if n.startswith(INCOMING_PREFIX)]:
        if process_gone(name[len(INCOMING_PREFIX):].split("/", 1)[0]):
            _delete_ref(repo, name)


def _fetch_incoming(repo, remote: str, wanted: Sequence[str], refused: List[Any],
                    interactive: Optional[bool]) -> Dict[str, str]:
    """Fetch ``wanted`` into refs/gitmem-incoming/ with git's strict object checks:
    branch -> fetched tip. When git refuses the pack, each branch is fetched alone,
    so one bad branch does not keep the others out."""
    from .trust import FSCK_CONFIG, Refusal

    if not wanted:
        return {}
    # --refmap= (empty): without it git also moves the tracking refs the configured fetch refspecs map these
    # refs to (`remote setup`'s refs/memory-remotes/<remote>/*), so a tip the gate then refuses was recorded.
    args = [*FSCK_CONFIG, "fetch", "--quiet", "--no-tags", "--recurse-submodules=no", "--refmap="]  # git 2.8 knows them
    if config_get(repo, f"remote.{remote}.partialCloneFilter"):
        # A partial clone's fetches take its filter (blob:none ...), memory's too: libgit2 cannot fetch the
        # blobs left out later, so the memory would be unreadable. Such a clone's git knows --no-filter.
        args.append("--no-filter")
    if repo.is_shallow:
        # A shallow clone's fetches stop at its shallow commits, and `git fetch --depth N` over `remote setup`'s
        # refspecs makes memory commits shallow too: a later merge's base is then hidden, and every memory one
        # side edited looks like a conflict. A depth past any history brings the memory's history whole and
        # unshallows its commits; the code's shallow commits, which no memory tip reaches, stay as they are.
        args.append(f"--depth={WHOLE_HISTORY}")
    specs = [f"+{shared_ref(b)}:{_incoming_ref(remote, b)}" for b in wanted]
    result = _git(repo, args + [remote, *specs], interactive=interactive, what=f"fetch from {remote}")
    if result.returncode != 0:
        _refuse_local_damage(repo, result)
        if len(wanted) == 1:
            if "couldn't find remote ref" in (result.stderr or ""):
                return {}  # deleted on the remote since it was listed
            if not _is_object_refusal(result):
                raise RemoteError(f"could not fetch memory from {remote}: {_failure(result)}")
            refused.append(Refusal(shared_ref(wanted[0]), f"git refused its objects: {_failure(result)}", remote))
            return {}
        if not _is_object_refusal(result) and "couldn't find remote ref" not in (result.stderr or ""):
            raise RemoteError(f"could not fetch memory from {remote}: {_failure(result)}")
        out: Dict[str, str] = {}
        for b in wanted:
            out.update(_fetch_incoming(repo, remote, [b], refused, interactive))
        return out
    return {b: tip for b in wanted if (tip := ref_target(repo, _incoming_ref(remote, b)))}


def _refuse_local_damage(repo: pygit2.Repository, result: subprocess.CompletedProcess) -> None:
    """git checks what a fetch brings against every local ref, so one here that points at a missing object fails
    every fetch with "bad object <ref>": this clone's damage, named with its repair, not the remote's objects."""
    from .doctor import damage

    bad = re.search(r"bad object (refs/\S+)", result.stderr or "")
    if not bad or bad.group(1) not in repo.references:
        return
    ref = bad.group(1)
    tip = ref_target(repo, ref) or ""
    why = damaged_copy(repo, ref, tip) if ref.startswith((REF_PREFIX, ASIDE_PREFIX, REMOTE_PREFIX)) else None
    raise StorageError(why or f"{ref} is damaged: {damage(repo, tip) or 'git calls it a bad object'}; "
                       f"no fetch works until it is repaired or deleted (`git update-ref -d {shlex.quote(ref)}`)")


def _is_object_refusal(result: subprocess.CompletedProcess) -> bool:
    text = (result.stderr or "").lower()
    return any(s in text for s in ("fsck", "index-pack", "unpack-objects", "did not send all necessary",
                                   "bad object", "invalid object", "error in ", "missing necessary objects"))


def _gate(repo, remote: str, landed: Dict[str, str], refused: List[Any]) -> None:
    """Move each landed tip the gate accepts onto its tracking ref; drop the incoming refs."""
    from .trust import Refusal

    known = list(local_branches(repo).values())
    for b, tip in sorted(landed.items()):
        why = _history_refusal(repo, remote, b, tip, known)
        if why:
            refused.append(Refusal(shared_ref(b), why, remote))
        else:
            try:
                _record(repo, tracking_ref(remote, b), tip)
            except (GitmemError, pygit2.GitError, OSError, ValueError) as e:
                refused.append(Refusal(shared_ref(b), f"could not record it: {e}", remote))
        _delete_ref(repo, _incoming_ref(remote, b))


def _history_refusal(repo: pygit2.Repository, remote: str, branch: str, tip: str, known: Iterable[str]) -> Optional[str]:
    """Why the gate refuses the history of ``remote``'s tip ``tip`` of ``branch``, with how to end it: while the
    remote's ref holds the refused commit (plain git or another client pushed it), every teammate's pull and
    push of the branch is refused, and no push of gitmem's moves a memory ref back, so the line names the one
    that does (a forced push of the commit's parent, leased on ``tip``; --no-verify past gitmem's pre-push
    hook, which refuses it as memory forced back)."""
    from .trust import refused_commit

    found = refused_commit(repo, tip, known)
    if found is None:
        return None
    bad, why = found
    if bad is None:
        return why
    ref = shared_ref(branch)
    parents = repo[bad].peel(pygit2.Commit).parent_ids
    # Full ids: a lease or a source abbreviated resolves only while this clone still holds the objects.
    back = f"{parents[0]}:{ref}" if parents else f":{ref}"  # a refused first commit: only deleting ends it
    command = " ".join(shlex.quote(a) for a in ["git", "push", "--no-verify", f"--force-with-lease={ref}:{tip}",
                                                  remote, back])
    return (f"{why}; refused until that ref on {remote} is moved back past that commit, by someone allowed to "
            f"force it: `{command}` (see docs/remotes.md)")


def _record(repo: pygit2.Repository, ref: str, tip: str) -> None:
    """Point the tracking ref ``ref`` at ``tip``, through the writes' retry (:func:`gitmem.refs.retrying`): a
    lock a killed gitmem left here is taken over once stale, where it refused every later fetch and push."""
    from .refs import Locked, retrying

    def attempt() -> None:
        try:
            repo.references.create(ref, tip, force=True)
        except (pygit2.GitError, OSError) as e:  # libgit2 reports lock failures as OSError
            if "lock" in str(e):
                raise Locked(ref, str(e)) from None
            raise

    retrying(repo, ref, attempt)


def _delete_ref(repo, ref: str) -> None:
    try:
        repo.references.delete(ref)
    except (KeyError, pygit2.GitError, OSError, ValueError):
        pass


# --- pull --------------------------------------------------------------------------


def pull(store: Store, remote: Optional[str] = None, branches: Optional[Sequence[str]] = None, *,
         author: Optional[Author] = None, source: str = "pull",
         interactive: Optional[bool] = None) -> PullResult:
    """Fetch, then merge each fetched memory branch into the local one of the same name.

    A branch with no local memory yet is created at the remote's tip ("new");
    otherwise :func:`gitmem.merge.merge_into` fast-forwards or writes a merge
    commit (conflicts are stored for ``gitmem conflicts``), and so for a code
    branch here whose parent's memory, which it reads, holds what the remote's
    lacks. ``branches`` limits both steps. A branch whose merge clashes again on a pending conflict, or whose
    ref git cannot create beside a local one (:class:`~gitmem.errors.RefClash`), or whose merge base the remote
    cannot give whole (:class:`~gitmem.errors.ShallowHistory`), is left as it is (``blocked``), the others merged."""
    from .errors import NotFound, PendingConflict, ShallowHistory
    from .merge import merge_into
    from .trust import Refusal

    repo = store.repo
    remote = _resolve_remote(repo, remote, store.branch)
    fetched = fetch(repo, remote, branches, interactive=interactive)
    merged: List[Dict[str, Any]] = []
    skipped: List[str] = []
    aside: Dict[str, str] = {}
    renamed: Dict[str, str] = {}
    blocked: List[Dict[str, str]] = []
    refused = fetched.refused_branches()
    for b in fetched.branches:
        if not b.new or b.branch in refused:
            continue
        if b.new == b.old:  # not fetched just now (plain `git fetch` may have put it there): gate it here
            why = _history_refusal(repo, remote, b.branch, b.new, local_branches(repo).values())
            if why:
                fetched.refused.append(Refusal(b.ref, why, remote))
                continue
        target = store if b.branch == store.branch else Store(repo, b.branch)
        if dropped_here(repo, b.branch, b.new):  # dropped or set aside here, and the remote has nothing newer
            if b.new != b.old:  # news in the pull that fetched it; `gitmem status` names it after
                skipped.append(b.branch)
            continue
        if target.own_tip() is None and (heir := renamed_here(repo, b.branch)):  # that memory is heir's now
            if b.new != b.old and not reachable(repo, b.new, ref_target(repo, memory_ref(heir))):
                renamed[b.branch] = heir
            continue
        if name := set_aside_for(repo, b.branch, [b.new]):
            aside[b.branch] = name
        # A code branch here without memory of its own reads its parent's, which may hold what the copy lacks
        # (unpushed writes): merged below, as a `git pull` or sync would, so the branch's view loses nothing.
        read = target.tip() if f"refs/heads/{b.branch}" in repo.references else None
        try:
            if target.own_tip() is None and (read is None or reachable(repo, read, b.new)) \
                    and (created := _create(target, b.new, remote, author, source)):
                merged.append({"branch": b.branch, "kind": "new", "commit": created[0],
                               "added": target.snapshot(b.new).ids(), "changed": [], "conflicts": [], "kept": [],
                               "redacted": created[1]})
                continue
            r = merge_into(target, b.new, author=author, source=source,
                           message=f"merge memory of {b.branch} from {remote}", gated=True)
        except (RefClash, ShallowHistory) as e:  # `feature` here, `feature/billing` there; or a base a shallow
            # remote cannot give: this branch waits, the others merge
            blocked.append({"branch": b.branch, "ref": b.ref, "id": "", "why": str(e)})
            continue
        except PendingConflict as e:
            blocked.append(blocked_entry(b.branch, b.ref, e))
            continue
        except (NotFound, StorageError):  # the copy passed the gate: is the memory merged into damaged?
            name, tip = target.read_from()
            ref = memory_ref(name) if name else target.ref
            why = damaged_copy(repo, ref, tip) if tip else None
            if why is None:
                raise
            blocked.append({"branch": b.branch, "ref": ref, "id": "", "why": why})
            continue
        merged.append({"branch": b.branch, **r.to_dict(), "conflicts": [c.id for c in r.conflicts]})
    late = []
    # The parents whose memory this pull brought: a branch left to a person is named by that pull, not every
    # later one (`gitmem status` names it until it is merged).
    arrived = {b.branch for b in fetched.changed} | {m["branch"] for m in merged if m["kind"] != "up-to-date"}
    for name in sorted(local_branches(repo)):  # a branch whose memory started before its parent's came
        if branches is None or name in branches:
            taken, left, waiting = take_late_parent(store if name == store.branch else Store(repo, name),
                                                    author=author, source=source)
            merged += [{**m, "into": name, "conflicts": [c["id"] for c in m["conflicts"]]} for m in taken]
            late += [x for x in left if x.parent in arrived]
            blocked += waiting
    return PullResult(fetched, merged, skipped, aside, late, blocked, renamed)


def sync(store: Store, remote: Optional[str] = None, *, fetch_first: bool = True, author: Optional[Author] = None,
         source: str = "sync", interactive: Optional[bool] = None):
    """`git pull && gitmem sync`: fetch memory first (a plain `git pull` fetches none unless
    `gitmem remote setup` was run), then :func:`gitmem.branches.sync`. A repository without
    remotes only merges; a failed fetch raises, so sync never reports stale memory as merged."""
    from .branches import gone_unmerged, sync as sync_branches

    fetched, refused = None, []
    if fetch_first and (remote or list(store.repo.remotes.names())):
        fetched = _resolve_remote(store.repo, remote, store.branch)
        refused = fetch(store.repo, fetched, interactive=interactive).refused
    result = sync_branches(store, author=author, source=source)
    result.fetched, result.refused = fetched, refused
    result.unmerged = gone_unmerged(store)  # what sync cannot merge by itself: the command names it (the hooks do not)
    return result


def _create(store: Store, tip: str, remote: str, author: Optional[Author], source: str) -> Optional[Tuple[str, int]]:
    """Start local memory at the remote's tip (with the secrets it brings redacted on top: see
    :func:`gitmem.merge.redacted_onto`) and say how many; None when a concurrent write created it first."""
    from .errors import ConcurrentUpdate
    from .merge import redacted_onto

    start, redacted = redacted_onto(store, tip, None, author, source)
    try:
        store.move_ref(None, start, f"gitmem pull: from {remote}")
        return start, redacted
    except ConcurrentUpdate:
        return None


# --- the secret scan -----------------------------------------------------------------


def outgoing_secrets(repo: pygit2.Repository, tips: Iterable[str], known: Iterable[str] = ()) -> List[Tuple[str, str]]:
    """(where, rule) for every secret in what a push of ``tips`` sends that the remote lacks
    (``known``: tips the remote already has): blob text (UTF-8, and UTF-16 when the blob
    holds NUL bytes), tree entry names, commit messages, author and committer identities,
    and an annotated tag's message and tagger.

    A tip must be a commit: anything else (a blob, a tree, an annotated tag, whose message
    and tagger are scanned first) raises :class:`RemoteError`, since a memory ref only ever
    points at a commit. A tree or blob a known tip holds at the same path is skipped (only the known
    trees at the paths of new trees are read), so the cost is what the push sends: a walk of the known
    trees read all of them (0.2 s a push at 100,000 memories). Blobs found clean are remembered in the
    derived index (under a hash of the rules), so a blob is read and scanned once, however many pushes
    send it."""
    from .redact import redact, scan
    from .trust import printable, secret_blobs

    known = [k for k in dict.fromkeys(known) if k]
    held: List[pygit2.Tree] = []  # the known tips' trees
    for k in known:
        try:
            held.append(repo[k].peel(pygit2.Tree))
        except (KeyError, ValueError, pygit2.GitError):
            continue
    seen: Set[str] = {str(t.id) for t in held}
    found: List[Tuple[str, str]] = []

    def look(text: str, where: str) -> None:
        hits = scan(text)
        if hits:  # a path may itself hold a secret: never show it
            found.extend((printable(redact(where)[0], 200), f.rule) for f in hits)

    walker = None
    for tip in dict.fromkeys(tips):
        try:
            commit_id = _commit_tip(repo, tip, look)
        except RemoteError:
            if found:  # a tag's message held a secret: say so first
                raise SecretFound(found) from None
            raise
        if walker is None:
            walker = repo.walk(commit_id, pygit2.enums.SortMode.TOPOLOGICAL)
        else:
            walker.push(commit_id)
    if walker is None:
        return found
    for k in known:
        try:
            walker.hide(k)
        except (KeyError, ValueError, pygit2.GitError):
            continue
    blobs: Dict[str, str] = {}  # blob id -> where it was first seen
    for commit in walker:
        short = str(commit.id)[:10]
        look(commit.message, f"message of commit {short}")
        for role, who in (("author", commit.author), ("committer", commit.committer)):
            look(f"{_text(who.raw_name)} <{_text(who.raw_email)}>", f"{role} of commit {short}")
        stack: List[Tuple[str, pygit2.Tree]] = [("", commit.tree)]
        while stack:
            prefix, tree = stack.pop()
            if str(tree.id) in seen:
                continue
            seen.add(str(tree.id))
            seen.update(_held_at(repo, held, prefix))
            look("\n".join(_text(e.raw_name) for e in tree), f"entry names in {prefix or '/'} (commit {short})")
            for entry in tree:
                oid = str(entry.id)
                if oid in seen:
                    continue
                if entry.type_str == "tree":
                    stack.append((f"{prefix}{entry.name}/", repo[entry.id].peel(pygit2.Tree)))
                elif entry.type_str == "blob":
                    seen.add(oid)
                    blobs[oid] = f"{prefix}{entry.name} (commit {short})"
    for oid, rules in secret_blobs(repo, list(blobs)).items():
        found.extend((printable(redact(blobs[oid])[0], 200), rule) for rule in rules)
    return sorted(set(found), key=found.index)


def secret_names(refs: Iterable[str]) -> List[Tuple[str, str]]:
    """(where, rule) for each ref whose name holds a secret: a push sends the name too, which no object scan
    reads, and a branch is named as freely as a memory is written (`git checkout -b fix/<a pasted token>`)."""
    from .redact import redact, scan
    from .trust import printable

    return [(f"the name {printable(redact(ref)[0], 200)}", f.rule) for ref in dict.fromkeys(refs) for f in scan(ref)]


def _commit_tip(repo: pygit2.Repository, tip: str, look) -> pygit2.Oid:
    """The pushed tip, which must be a commit; an annotated tag's message and tagger are scanned
    before it is refused."""
    try:
        obj = repo[tip]
    except (KeyError, ValueError, pygit2.GitError):
        raise RemoteError(f"{tip[:10]} is not in this repository; nothing pushed") from None
    if isinstance(obj, pygit2.Tag):
        look(obj.message or "", f"message of tag {str(obj.id)[:10]}")
        if obj.tagger is not None:
            look(f"{_text(obj.tagger.raw_name)} <{_text(obj.tagger.raw_email)}>", f"tagger of tag {str(obj.id)[:10]}")
        raise RemoteError(f"{tip[:10]} is an annotated tag, not a memory commit; nothing pushed")
    if not isinstance(obj, pygit2.Commit):
        raise RemoteError(f"{tip[:10]} is a {obj.type_str}, not a memory commit; nothing pushed")
    return obj.id


def _text(raw: Any) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw or "")


def _held_at(repo: pygit2.Repository, held: Sequence[pygit2.Tree], prefix: str) -> Set[str]:
    """Ids of the entries of each of the ``held`` trees' subtree at ``prefix`` (``a/b/``; "" the root)."""
    out: Set[str] = set()
    for root in held:
        try:
            tree = repo[root[prefix[:-1]].id].peel(pygit2.Tree) if prefix else root
        except (KeyError, ValueError, pygit2.GitError):
            continue  # not there, or not a tree
        out.update(str(e.id) for e in tree)
    return out


def _leases(repo: pygit2.Repository, remote: str, tips: Dict[str, str]) -> Dict[str, str]:
    """branch -> the remote's tip as last fetched, for each branch whose ``tips`` tip is or descends from it.

    The scan skips what lies below such a tip, as what the remote has; the push then sends only while the
    remote still has it (``--force-with-lease``), so a ref the remote dropped or moved since the last fetch
    (a purge of a secret, say) is never taken for what it holds: the push is refused, fetched and scanned
    again. A branch without one is scanned whole (a blob found clean before is not read again)."""
    tracked = remote_branches(repo, remote)
    return {b: known for b, tip in tips.items() if (known := tracked.get(b)) and reachable(repo, known, tip)}


def earlier_memory_notice(remote: str, branch: str) -> str:
    """What a person pushing ``branch``'s memory is told when ``remote`` holds an earlier branch's memory of that
    name, dropped or set aside here (:func:`gitmem.branches.dropped_here`): no pull takes it, so no push goes on
    top of it (`gitmem push`, and the pre-push hook of a plain `git push`) until it is gone from there."""
    return (f"{remote} holds the memory of an earlier {branch!r}, dropped or set aside here: delete it there "
            f"(git push {remote} :{shared_ref(branch)}) or push this branch's memory under another name "
            "(`gitmem branch -m`)")


def held_tips(repo: pygit2.Repository, remote: str, *, url: Optional[str] = None,
              interactive: Optional[bool] = None) -> List[str]:
    """The memory tips every URL `git push REMOTE` sends to holds right now (or ``url`` alone: where the git
    push a pre-push hook runs in sends), of those this repository has.

    A branch new to the remote has no lease, yet its history is mostly the memory it forked from, which the
    remote holds under other refs: a push sends none of that, so the scan need not read it (reading it, a
    secret a pull redacted here, on the remote below main's tip already, refused every new branch for good).
    Asked of the push URLs themselves, not of fetched copies, so a ref purged since the last fetch, or a
    pushurl apart from the fetch URL, is not taken for what is there. A tip this repository lacks (pushed
    since the last fetch) is fetched first, from ``remote`` when it is a configured remote: otherwise nothing
    told the scan what the remote holds, and a secret a pull redacted here, below the remote's tips, refused
    the push. A URL that cannot be asked is a RemoteError (nothing would reach it anyway)."""
    if url is None:
        listed = _git(repo, ["remote", "get-url", "--push", "--all", remote], what=f"read the push URLs of {remote}")
        urls = listed.stdout.splitlines() if listed.returncode == 0 else []
    else:
        urls = [url]
    held: Set[str] = set()
    for n, each in enumerate(urls):
        here = set(memory_refs_at(repo, each, interactive, remote).values())
        held = here if n == 0 else held & here
    if any(oid not in repo for oid in held) and remote in repo.remotes.names():
        fetch(repo, remote, interactive=interactive)
    return sorted(oid for oid in held if oid in repo)


def memory_refs_at(repo: pygit2.Repository, url: str, interactive: Optional[bool],
                   name: str) -> Dict[str, str]:
    """ref -> tip of the memory refs at ``url`` (`git ls-remote`). One that cannot be asked is a RemoteError
    naming ``name``, not an empty answer: taken for a remote holding none of the history, it had the scan read
    all of it and refuse the push for a secret a pull redacted here, telling the user to rotate it."""
    result = _git(repo, ["ls-remote", "--refs", url, REF_PREFIX + "*"], interactive=interactive,
                  what=f"list the memory {url} holds")
    if result.returncode != 0:
        raise RemoteError(f"could not reach {name}: {_failure(result)}")
    return {m.group(2): m.group(1) for line in result.stdout.splitlines()
            if (m := re.match(r"([0-9a-f]{40,64})\t(\S+)$", line))}


def _refuse_secrets(repo: pygit2.Repository, tips: Dict[str, str], known: Iterable[str]) -> None:
    """Fail closed: a secret (in a branch's name too), a tip that is not a commit, or any error while scanning
    stops the push."""
    named = secret_names(shared_ref(b) for b in tips)
    if named:
        raise SecretFound(named)
    try:
        found = outgoing_secrets(repo, tips.values(), known)
    except GitmemError:
        raise
    except Exception as e:  # noqa: BLE001 - an unscanned push never goes out
        raise RemoteError(f"could not scan outgoing memory ({type(e).__name__}: {e}); nothing pushed") from None
    if found:
        raise SecretFound(found)


# --- push --------------------------------------------------------------------------

_PORCELAIN_RE = re.compile(r"^(?P<flag>[ +\-*!=])\t(?P<src>[^:]*):(?P<dst>\S+)\t(?P<summary>.*)$")
# Lost a race for the ref lock on the server, or the ref clashes with one there (`feature` / `feature/billing`).
_LOCK_REASONS = ("failed to update ref", "cannot lock ref", "failed to lock")
# Moved meanwhile (fetch, merge, push again), or lost a race for the ref lock on the server.
_RETRY_REASONS = ("fetch first", "non-fast-forward", "stale info", "incorrect old value", *_LOCK_REASONS)


def _push_once(repo: pygit2.Repository, remote: str, tips: Dict[str, str], leases: Dict[str, str],
               interactive: Optional[bool]) -> Tuple[Dict[str, Tuple[str, str]], List[str]]:
    """One `git push --porcelain` of exactly these commits: branch -> (flag, summary), and what the remote
    said (its `remote:` lines: why a server hook declined, made printable).

    The commit ids, not the ref names, are pushed, so a write landing locally
    meanwhile is never sent unscanned. --no-verify: the pre-push hook is what
    calls us, and the scan already ran. ``leases`` (:func:`_leases`): only fast-forwards of them."""
    specs = [f"{tip}:{shared_ref(b)}" for b, tip in sorted(tips.items())]
    leased = [f"--force-with-lease={shared_ref(b)}:{known}" for b, known in sorted(leases.items())]
    result = _git(repo, ["push", "--porcelain", "--no-verify", "--recurse-submodules=no", *leased, remote, *specs],
                  interactive=interactive, what=f"push to {remote}")
    out: Dict[str, Tuple[str, str]] = {}
    for line in result.stdout.splitlines():
        m = _PORCELAIN_RE.match(line)
        if m and m.group("dst").startswith(REF_PREFIX):
            out[m.group("dst")[len(REF_PREFIX):]] = (m.group("flag"), m.group("summary"))
    if result.returncode != 0 and not out:
        raise RemoteError(f"could not push memory to {remote}: {_failure(result)}")
    from .trust import printable

    said = [printable(line[len("remote:"):].strip(), 200) for line in result.stderr.splitlines()
            if line.startswith("remote:") and line[len("remote:"):].strip()]
    return out, said


def push(store: Store, remote: Optional[str] = None, branches: Optional[Sequence[str]] = None, *,
         author: Optional[Author] = None, source: str = "push", max_attempts: int = MAX_PUSH_ATTEMPTS,
         interactive: Optional[bool] = None) -> List[BranchPush]:
    """Push local memory (``branches``, default the store's branch) to the same refs on ``remote``.

    Never forces. A branch the remote moved on is fetched, merged and pushed
    again, up to ``max_attempts`` times; a merge that leaves conflicts stops
    that branch ("conflict") so a person can resolve before it goes out.
    Raises SecretFound before anything is sent when outgoing memory holds a
    secret, RemoteError when the remote cannot be reached; local memory is
    unchanged in both cases. Returns one :class:`BranchPush` per branch."""
    from .errors import PendingConflict, ShallowHistory
    from .merge import merge_into

    repo = store.repo
    remote = _resolve_remote(repo, remote, store.branch)
    if partial_clone(repo):  # as fetch does: a push that lands at once fetches nothing, and the memory read missing
        _fetch_unfetched(repo, remote, [*local_branches(repo).values(), *remote_branches(repo, remote).values()],
                         interactive)
    names = list(dict.fromkeys(check_branch_name(b) for b in (branches or [store.branch])))
    stores = {b: (store if b == store.branch else Store(repo, b)) for b in names}
    done: Dict[str, BranchPush] = {}
    merges = {b: 0 for b in names}
    taken = {b: 0 for b in names}
    pending = []
    for b in names:
        if stores[b].own_tip() is None:
            done[b] = BranchPush(b, "no-memory", message="no memory of its own to push")
        else:
            pending.append(b)
    attempt = 0
    # Branches whose lease the remote refused although a fetch finds its tip where the lease said (the push
    # goes elsewhere than the fetch: a pushurl, a mirror): pushed without one, and scanned whole.
    unleased: Set[str] = set()
    while pending:
        attempt += 1
        tips = {b: stores[b].own_tip() for b in pending}
        leases = {b: t for b, t in _leases(repo, remote, tips).items() if b not in unleased}  # type: ignore[arg-type]
        known = list(leases.values())
        if any(b not in leases for b in tips):  # new to the remote: what it holds under its other refs
            known += held_tips(repo, remote, interactive=interactive)
        _refuse_secrets(repo, tips, known)  # type: ignore[arg-type]
        outcome, said = _push_once(repo, remote, tips, leases, interactive)  # type: ignore[arg-type]
        retry = []
        for b in pending:
            flag, summary = outcome.get(b, ("!", "[no status] (git reported nothing for this ref)"))
            if flag in " *=+":
                _set_tracking(repo, remote, b, tips[b])  # type: ignore[arg-type]
                status = "up-to-date" if flag == "=" else "pushed"
                done[b] = BranchPush(b, status, tips[b], merges[b], attempt)
            elif any(reason in summary for reason in _RETRY_REASONS) and attempt < max_attempts:
                retry.append(b)
            else:
                if any(reason in summary for reason in _RETRY_REASONS):
                    summary += f"; the remote kept moving for {plural(attempt, 'attempt')}, run `gitmem push` again"
                elif "shallow update not allowed" in summary:
                    summary += (f"; a shallow fetch (`git fetch --depth`) cut this memory's history and {remote} lacks "
                                "what lies behind the cut: `gitmem fetch` it whole from a remote that holds it, then "
                                "push again")
                elif said:  # a server hook's reason (branch protection, a policy): the user needs its words
                    summary += f"; {remote} said: {' / '.join(said[:5])}"
                done[b] = BranchPush(b, "rejected", tips[b], merges[b], attempt, message=summary)
        for b, clash in _clashes(repo, remote, [b for b in retry if any(
                reason in outcome[b][1] for reason in _LOCK_REASONS)], interactive).items():
            done[b] = BranchPush(b, "rejected", tips[b], merges[b], attempt,
                                 message=f"{RefClash(shared_ref(b), clash, remote)}; nothing pushed")
            retry.remove(b)
        if retry:
            fetched = fetch(repo, remote, retry, interactive=interactive)
            for refusal in fetched.refused:
                b = refusal.what[len(REF_PREFIX):]
                if b in retry:
                    done[b] = BranchPush(b, "rejected", tips[b], merges[b], attempt,
                                         message=f"{refusal.line()}; nothing pushed")
                    retry.remove(b)
            for r in fetched.branches:
                if r.branch in leases and "stale info" in outcome.get(r.branch, ("", ""))[1] \
                        and r.new == leases[r.branch]:
                    unleased.add(r.branch)
                if not r.new or r.branch not in retry:  # the remote lost the branch meanwhile: just push again
                    continue
                said_no = outcome.get(r.branch, ("", ""))[1]
                if any(why in said_no for why in ("fetch first", "non-fast-forward")) and r.new != tips[r.branch] \
                        and reachable(repo, r.new, tips[r.branch]):  # yet fetching shows nothing it lacks
                    done[r.branch] = BranchPush(
                        r.branch, "rejected", tips[r.branch], merges[r.branch], attempt,
                        message=f"{remote} refused it, yet fetching from {remote} shows nothing this memory lacks: "
                        f"the push goes elsewhere than the fetch (remote.{remote}.pushurl?), and that repository's "
                        "memory differs; push to it by its own name")
                    retry.remove(r.branch)
                    continue
                if dropped_here(repo, r.branch, r.new):  # never merged back: a person decides
                    done[r.branch] = BranchPush(
                        r.branch, "rejected", tips[r.branch], merges[r.branch], attempt,
                        message=f"{earlier_memory_notice(remote, r.branch)}; nothing pushed")
                    retry.remove(r.branch)
                    continue
                if aside := set_aside_for(repo, r.branch, [r.new]):
                    done[r.branch] = BranchPush(r.branch, "rejected", tips[r.branch], merges[r.branch], attempt,
                                                message=f"{aside_notice(r.branch, aside)}; nothing pushed")
                    retry.remove(r.branch)
                    continue
                try:
                    result = merge_into(stores[r.branch], r.new, author=author, source=source,
                                        message=f"merge memory of {r.branch} from {remote}", gated=r.new != r.old)
                except (PendingConflict, ShallowHistory) as e:
                    done[r.branch] = BranchPush(r.branch, "rejected", tips[r.branch], merges[r.branch], attempt,
                                                message=f"{e}; nothing pushed")
                    retry.remove(r.branch)
                    continue
                merges[r.branch] += result.kind == "merge"
                taken[r.branch] += len(result.added) + len(result.changed)
                if result.conflicts:
                    done[r.branch] = BranchPush(
                        r.branch, "conflict", result.commit, merges[r.branch], attempt,
                        tuple(c.id for c in result.conflicts),
                        "merging the remote's memory left conflicts: see `gitmem conflicts`, resolve, "
                        "then push again")
                    retry.remove(r.branch)
            time.sleep(random.uniform(0.01, 0.05) * attempt)  # two pushers retrying in lockstep would collide
        pending = retry
    return [replace(done[b], taken=taken[b]) for b in names]


def _clashes(repo: pygit2.Repository, remote: str, refused: Sequence[str],
             interactive: Optional[bool]) -> Dict[str, str]:
    """branch -> the remote's ref its ref clashes with, of the ``refused`` branches the remote could not update:
    git keeps no ref that is also a folder of refs, and says only "failed to update ref", as for a lost race
    (retried, to no end)."""
    from .refs import clashing_ref

    if not refused:
        return {}
    there = [shared_ref(b) for b in ls_remote(repo, remote, interactive=interactive)]
    return {b: clash for b in refused if (clash := clashing_ref(shared_ref(b), there))}


def _set_tracking(repo: pygit2.Repository, remote: str, branch: str, tip: str) -> None:
    """Record what the remote now has, as git does for remote-tracking branches on push."""
    try:
        repo.references.create(tracking_ref(remote, branch), tip, force=True)
    except (pygit2.GitError, OSError):
        pass  # only a cache of the remote's state; the next fetch rewrites it


# --- refspecs that carry memory -----------------------------------------------------------------


def _setup_values(remote: str) -> List[Tuple[str, str, str]]:
    return [
        (f"remote.{remote}.fetch", f"+{REF_PREFIX}*:{REMOTE_PREFIX}{remote}/*",
         "plain `git fetch` also fetches memory (into refs/memory-remotes/, never over local memory)"),
        (f"remote.{remote}.push", f"{REF_PREFIX}*:{REF_PREFIX}*",
         "plain `git push` also pushes memory (never forced)"),
    ]


def _record_path(repo: pygit2.Repository, remote: str) -> str:
    return os.path.join(common_dir(repo), "gitmem", "remote-setup", f"{remote}.json")


def _values(repo: pygit2.Repository, key: str) -> List[str]:
    return list(repo.config.get_multivar(key)) if key in repo.config else []  # type: ignore[arg-type]  # pygit2 stub: Optional


def carry_memory(repo: pygit2.Repository, remote: Optional[str] = None, *, undo: bool = False) -> List[SetupChange]:
    """Add (or with ``undo`` remove) the refspecs that make plain git carry memory.

    As soon as a remote has any ``push`` refspec, git ignores ``push.default``;
    so when there was none, ``HEAD`` is added too, keeping `git push` pushing
    the current branch. What was added is recorded under .git/gitmem/ so undo
    removes exactly that and the config file ends as it was."""
    remote = _resolve_remote(repo, remote, None)
    path = _record_path(repo, remote)
    changes: List[SetupChange] = []
    if undo:
        try:
            with open(path, encoding="utf-8") as f:
                added = [tuple(x) for x in json.load(f)]
        except (OSError, ValueError):
            added = [(k, v) for k, v, _ in _setup_values(remote)]
        for key, value in reversed(added):
            if value in _values(repo, key):
                changes.append(_config_edit(repo, SetupChange(key, value, "removed")))
        try:
            os.unlink(path)
        except OSError:
            pass
        return list(reversed(changes))
    memory_names(repo)  # set-aside memory an earlier gitmem kept under refs/memory/ leaves what the refspec sends
    wanted = _setup_values(remote)
    push_key = f"remote.{remote}.push"
    if not _values(repo, push_key):
        wanted.insert(1, (push_key, "HEAD",
                          "git ignores push.default once a push refspec exists: keeps `git push` "
                          "pushing the current branch"))
    try:
        with open(path, encoding="utf-8") as f:
            recorded = [tuple(x) for x in json.load(f)]
    except (OSError, ValueError):
        recorded = []
    for key, value, why in wanted:
        if value in _values(repo, key):
            changes.append(SetupChange(key, value, "kept", "already set"))
            continue
        changes.append(_config_edit(repo, SetupChange(key, value, "added", why)))
        recorded.append((key, value))
    if recorded:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(recorded, f)
    return changes


def _config_edit(repo: pygit2.Repository, change: SetupChange) -> SetupChange:
    result = _git(repo, change.config_args(), interactive=False, what="edit git config")
    if result.returncode != 0:
        raise GitmemError(f"could not {'set' if change.action == 'added' else 'remove'} {change.key}: "
                          f"{_failure(result)}")
    return change


# --- status and doctor -------------------------------------------------------------


def divergence(repo: pygit2.Repository, branches: Optional[Sequence[str]] = None) -> List[Divergence]:
    """Ahead/behind of each local memory branch against each remote's fetched copy
    (no network: as of the last fetch or push)."""
    local = local_branches(repo)
    out = []
    for remote in repo.remotes.names():
        theirs = remote_branches(repo, remote)  # type: ignore[arg-type]  # pygit2 stub: Optional name
        by_git = _fetched_by_git(repo, remote)  # type: ignore[arg-type]  # pygit2 stub: Optional name
        for b in sorted(set(branches) if branches is not None else set(local) | set(theirs)):
            mine, fetched = local.get(b), theirs.get(b)
            if fetched is None and mine and by_git.get(b) == mine:  # a plain `git fetch` of memory took this tip
                fetched = mine
            if not mine and not fetched:
                continue
            heir = renamed_here(repo, b) if fetched and not mine else None  # its memory is heir's: behind heir's
            moved = heir and ref_target(repo, memory_ref(heir))
            # no memory of its own: what it reads
            reads, inherited = _inherited(repo, b) if fetched and not mine and not moved else (None, None)
            base = mine or moved or inherited
            try:
                if base and fetched:
                    ahead, behind = repo.ahead_behind(base, fetched)
                    ahead = ahead if mine else 0
                else:
                    ahead = _count(repo, mine) if mine else 0
                    behind = _count(repo, fetched) if fetched else 0
            except (KeyError, ValueError, pygit2.GitError) as e:
                copies = [(memory_ref(b), mine), (tracking_ref(remote, b), fetched)]  # type: ignore[arg-type]  # pygit2 stub
                raise _damage_among(repo, copies, e) from None
            skipped = bool(fetched and behind and (heir or dropped_here(repo, b, fetched)))  # a pull does not take it
            aside = set_aside_from(repo, b) if mine else None
            merged = bool(aside and mine and merged_back(repo, b, mine))
            new = bool(mine and fetched and ahead and behind and earlier_root(repo, b, mine, fetched))
            unknown = fetched is None and not theirs
            out.append(Divergence(b, remote, mine, fetched, ahead, behind, skipped, aside, merged, new,  # type: ignore[arg-type]  # pygit2 stub
                                  heir, unknown, reads))
    return out


def _fetched_by_git(repo: pygit2.Repository, remote: str) -> Dict[str, str]:
    """branch -> tip of the memory refs the last `git fetch` here took from ``remote``, as its FETCH_HEAD lists
    them: a plain `git fetch origin 'refs/memory/*:refs/memory/*'` records no copy, yet says what origin held
    then (until the next fetch of anything rewrites the file)."""
    url = repo.remotes[remote].url
    try:
        with open(os.path.join(repo.path, "FETCH_HEAD"), encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    named = _fetch_head_url(url) if url else None
    return {m.group(2): m.group(1) for line in lines
            if (m := re.fullmatch(r"([0-9a-f]{40,64})\t[^\t]*\t'refs/memory/(.+)' of (.*)", line))
            and m.group(3) == named}


def _fetch_head_url(url: str) -> str:
    """``url`` as git writes it in FETCH_HEAD (builtin/fetch.c, transport_anonymize_url): the user and password
    of a network URL left out, then trailing slashes and a ``.git`` ending."""
    colon, slash, at = url.find(":"), url.find("/"), url.find("@")
    scheme = url.find("://")
    if colon >= 0 and not 0 <= slash < colon and at >= 0:  # not a local path
        if scheme < 0 and ":" in url[at + 1:]:  # user@host:path
            url = url[at + 1:]
        elif scheme >= 0 and re.fullmatch(r"[A-Za-z0-9+.-]*", url[:scheme]) and not 0 <= url.find("/", scheme + 3) < at:
            url = url[:scheme + 3] + url[at + 1:]
    url = url.rstrip("/")
    return url[:-4] if url.endswith(".git") and len(url) > 5 else url


def _damage_among(repo: pygit2.Repository, copies: Sequence[Tuple[str, Optional[str]]], e: Exception) -> StorageError:
    """The error for a walk over these (ref, tip) copies of one branch's memory that failed: names the copy whose
    history is damaged and what repairs it (:func:`gitmem.branches.damaged_copy`), not libgit2's error."""
    for ref, tip in copies:
        if tip and (why := damaged_copy(repo, ref, tip)):
            return StorageError(why)
    return damaged(copies[0][0], copies[0][1], e)


def _inherited(repo: pygit2.Repository, branch: str) -> Tuple[Optional[str], Optional[str]]:
    """(branch, memory tip) a branch without memory of its own reads (its parent's, or the default branch's)."""
    from .repo import parent_chain

    for parent in parent_chain(repo, branch):
        tip = ref_target(repo, memory_ref(parent))
        if tip:
            return parent, tip
    return None, None


def _count(repo: pygit2.Repository, tip: str) -> int:
    return sum(1 for _ in repo.walk(tip))


def missing_here(repo: pygit2.Repository, remotes: Optional[Sequence[str]] = None, *,
                 interactive: Optional[bool] = False) -> Tuple[List[Dict[str, Any]], List[str]]:
    """Memory on a remote that local memory does not contain (asks each remote).

    Returns (missing, unreachable): missing entries are {"remote", "branch",
    "tip", "fetched"} where ``fetched`` says the commit is here but not merged;
    unreachable holds one line per remote that could not be asked."""
    from .trust import ref_name_problem

    local = local_branches(repo)
    missing: List[Dict[str, Any]] = []
    unreachable: List[str] = []
    for remote in (remotes if remotes is not None else list(repo.remotes.names())):
        try:
            there = ls_remote(repo, remote, interactive=interactive)  # type: ignore[arg-type]  # pygit2 stub: Optional name
        except RemoteError as e:
            unreachable.append(str(e))
            continue
        for b, tip in sorted(there.items()):
            if ref_name_problem(b):
                continue  # never fetched: `gitmem pull` says so
            mine = local.get(b)
            present = tip in repo
            try:
                if mine == tip or (present and mine and repo.descendant_of(mine, tip)):
                    continue
            except (KeyError, ValueError, pygit2.GitError) as e:
                raise _damage_among(repo, [(memory_ref(b), mine)], e) from None
            missing.append({"remote": remote, "branch": b, "tip": tip, "fetched": present})
    return missing, unreachable


def doctor_problems(repo: pygit2.Repository) -> List[Any]:
    """`gitmem doctor`'s remote checks, as warnings: memory on a remote but not here,
    and remotes that could not be asked."""
    from .store import Problem

    missing, unreachable = missing_here(repo)
    out = [Problem("warning", f"{m['remote']}:{shared_ref(m['branch'])}",
                   f"memory on the remote but not here ({m['tip'][:10]}"
                   + (", fetched, not merged" if m["fetched"] else "") + "): run `gitmem pull`")
           for m in missing]
    return out + [Problem("warning", "remote", f"{line} (cannot check for memory missing here)")
                  for line in unreachable]
