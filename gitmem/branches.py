"""Memory branches: which memory a code branch reads, fork points, listing,
diffs for review, pruning, and finding code branches that have been merged.

A branch's parent is recorded (by the post-checkout hook or on first use) in
the repository's config as ``gitmem.branch.<name>.parent``, with the commit it
was created at as ``gitmem.branch.<name>.forkPoint``; without a record, the
default branch is the parent. Memory fetched from a remote lives on
``refs/memory-remotes/<remote>/<branch>`` (see gitmem.remote).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

import pygit2

from .errors import BranchError, GitmemError, InvalidMemory, NotFound, PendingConflict, StorageError
from .refs import memory_names, written_here
from .repo import (ASIDE_PREFIX, REF_PREFIX, REMOTE_PREFIX, aside_of, created_from, doctor_command, parent_chain,
                   ref_target)

if TYPE_CHECKING:
    from .store import Store

_MOVING_RE = re.compile(r"^checkout: moving from (\S+) to (\S+)$")


# --- fork points ---------------------------------------------------------------


def fork_point(repo: pygit2.Repository, branch: str) -> Tuple[Optional[str], Optional[str]]:
    """(recorded parent branch, commit the branch was created at), each None if unrecorded."""
    from .repo import config_get

    return (config_get(repo, f"gitmem.branch.{branch}.parent"),
            config_get(repo, f"gitmem.branch.{branch}.forkPoint"))


def code_fork(repo: pygit2.Repository, branch: str) -> Optional[str]:
    """The commit ``branch``'s code was created at: this clone's record, else the one its memory carries (the
    newest ``Fork-Point:`` trailer among the memory commits the default branch's memory lacks). A teammate's
    branch with no commit of its own has a tip main has, which only its fork point tells from a merged one."""
    from .audit import fork_in
    from .repo import default_branch

    recorded = fork_point(repo, branch)[1]
    if recorded or branch == default_branch(repo):
        return recorded
    try:
        walker = None
        for _, tip in memory_tips(repo, branch):
            if walker is None:
                walker = repo.walk(tip, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME)
            else:
                walker.push(tip)
        if walker is None:
            return None
        for _, tip in memory_tips(repo, default_branch(repo)):
            walker.hide(tip)
        for commit in walker:
            if fork := fork_in(commit.message):
                return fork
    except (KeyError, ValueError, pygit2.GitError):  # a memory ref that is no commit: no record to read
        return None
    return None


def _past_fork(repo: pygit2.Repository, name: str, tips: Sequence[str]) -> bool:
    """Whether one of ``tips`` (code of branch ``name``) is past the commit it was created at
    (:func:`code_fork`, read once): a branch with no commit of its own brings nothing a merge could take."""
    if not tips:
        return False
    fork = code_fork(repo, name)
    return any(tip != fork for tip in tips)


def record_fork(repo: pygit2.Repository, branch: str, parent: Optional[str] = None,
                commit: Optional[str] = None, again: bool = False) -> Optional[str]:
    """Record where ``branch`` was created from, once (an existing record is kept, unless ``again``: the code
    branch is new, see :func:`created_now`, so a record is an earlier, deleted branch's of that name).

    ``parent`` defaults to the branch whose memory applies at its start point (see
    :func:`_started_from`), else the default branch. Returns the parent recorded now,
    or None when nothing changed (already recorded, the default branch itself, or it
    already has memory)."""
    from .repo import check_branch_name, config_get, default_branch, memory_ref

    check_branch_name(branch)
    recorded = fork_point(repo, branch)[0]
    if (recorded and not again) or branch == default_branch(repo) or memory_ref(branch) in repo.references:
        return None
    parent = parent or _started_from(repo, branch) or default_branch(repo)
    if parent == branch:
        return None
    check_branch_name(parent)
    try:
        config = repo.config
        config[f"gitmem.branch.{branch}.parent"] = parent
        if commit:
            config[f"gitmem.branch.{branch}.forkPoint"] = commit
        elif recorded and config_get(repo, f"gitmem.branch.{branch}.forkPoint") is not None:
            del config[f"gitmem.branch.{branch}.forkPoint"]  # an earlier branch's
        if config_get(repo, f"gitmem.branch.{branch}.startedWithout") is not None:
            del config[f"gitmem.branch.{branch}.startedWithout"]  # an earlier branch's too
    except (pygit2.GitError, OSError) as e:
        raise GitmemError(f"could not record the fork point of {branch!r}: {e}") from None
    return parent


def created_now(repo: pygit2.Repository, branch: str, entry: Any) -> bool:
    """Whether the code branch whose reflog's first entry is ``entry`` is one gitmem has not seen yet, and note
    that it has: the entry's time, commit and message tell it from an earlier branch of its name (a deleted
    branch's reflog goes with it), and stay as they are when the branch is checked out again or `git gc`
    rewrites the reflog. Decided once per branch, whatever it finds then."""
    from .repo import config_get

    seen = f"{entry.committer.time} {entry.oid_new} {entry.message or ''}".strip()
    key = f"gitmem.branch.{branch}.created"
    if config_get(repo, key) == seen:
        return False
    try:
        repo.config[key] = seen
    except (pygit2.GitError, OSError):
        pass
    return True


def _started_from(repo: pygit2.Repository, branch: str) -> Optional[str]:
    """The code branch whose memory ``branch`` starts from: the start point its own reflog names ("branch:
    Created from <start>"), not the branch HEAD was on, which `git checkout -b hotfix main` made on an
    experiment would leak into main. Without that entry (no reflog; made by a fetch), the branch HEAD was on."""
    created = created_from(repo, branch)
    if created is None:
        return _checked_out_from(repo, branch)
    return _branch_named(repo, created[0]) or _branch_at(repo, branch, *created)


def _branch_named(repo: pygit2.Repository, start: str) -> Optional[str]:
    """The code branch ``start`` names: a local branch, or a remote-tracking one (``origin/x`` is ``x``)."""
    for ref in (start, f"refs/heads/{start}", f"refs/remotes/{start}"):
        if not ref.startswith(("refs/heads/", "refs/remotes/")) or ref_target(repo, ref) is None:
            continue
        if ref.startswith("refs/heads/"):
            return ref[len("refs/heads/"):]
        for remote in repo.remotes.names():
            if ref.startswith(f"refs/remotes/{remote}/") and ref != f"refs/remotes/{remote}/HEAD":
                return ref[len(f"refs/remotes/{remote}/"):]
    return None


def _branch_at(repo: pygit2.Repository, branch: str, start: str, commit: str) -> Optional[str]:
    """The branch whose memory applies at ``commit``, where ``branch`` was created from ``start`` (HEAD, a tag,
    a commit id): the branch whose tip it is, else the first that contains it. For HEAD the branch HEAD was on
    comes first (`git checkout -b x` forks the branch you are on), then the default branch; for a tag or an
    id the default branch comes first (a release tag is main's, whatever branch it was typed on); then the
    others by name. None (the default branch) when no branch has the commit."""
    from .repo import default_branch

    came, default = _checked_out_from(repo, branch), default_branch(repo)
    first = [came, default] if start == "HEAD" else [default, came]
    names = [n for n in dict.fromkeys([*first, *sorted(_all_code_branch_names(repo))]) if n and n != branch]
    for has in (lambda tip: tip == commit, lambda tip: reachable(repo, commit, tip)):
        for name in names:
            if any(has(tip) for tip in code_tips(repo, name)):
                return name
    return None


def _checked_out_from(repo: pygit2.Repository, branch: str) -> Optional[str]:
    """The branch the newest ``checkout: moving from X to <branch>`` names, if X is a branch."""
    try:
        entries = repo.references["HEAD"].log()
        for n, entry in enumerate(entries):
            if n > 20:
                break
            m = _MOVING_RE.match(entry.message or "")
            if m and m.group(2) == branch:
                source = m.group(1)
                return source if f"refs/heads/{source}" in repo.references else None
    except (KeyError, pygit2.GitError, OSError):
        return None
    return None


def require_known(repo: pygit2.Repository, name: str) -> str:
    """``name`` as a branch someone chose (``--branch``): a code branch (local or on a remote),
    a memory branch (own or fetched), or the branch HEAD names; otherwise a BranchError that
    suggests the nearest names, so a typo neither reads another branch's memory nor forks a ref."""
    import difflib

    from .repo import check_branch_name, current_branch, shown_name

    check_branch_name(name)
    known = set(_all_code_branch_names(repo)) | {n for n, _ in memory_names(repo)}
    known |= _remote_memory_names(repo) | {current_branch(repo)[0]}
    if name in known:
        return name
    for prefix in ("refs/heads/", REF_PREFIX, ASIDE_PREFIX):  # a ref typed where its branch's name goes
        if name.startswith(prefix) and name[len(prefix):] in known:
            raise BranchError(f"no branch {shown_name(name)}: that is a ref; give the branch's name, "
                              f"{shown_name(name[len(prefix):])}")
    close = difflib.get_close_matches(name, sorted(known), n=3)
    hint = f"; did you mean {' or '.join(shown_name(c) for c in close)}?" if close else ""
    raise BranchError(f"no branch {shown_name(name)} here (no code branch, no memory){hint}")


# --- listing -------------------------------------------------------------------


def ref_names(repo: pygit2.Repository, prefix: str) -> Iterator[Tuple[str, str]]:
    """(name after ``prefix``, full ref name) of every ref under ``prefix``."""
    for name in repo.references:
        if name.startswith(prefix):
            yield name[len(prefix):], name


def code_tips(repo: pygit2.Repository, branch: str, *, local: bool = True) -> List[str]:
    """Commits the code branch points at: local first (unless ``local`` is False), then remote-tracking copies."""
    tips = [ref_target(repo, f"refs/heads/{branch}")] if local else []
    for remote in repo.remotes.names():
        tips.append(ref_target(repo, f"refs/remotes/{remote}/{branch}"))
    return list(dict.fromkeys(t for t in tips if t))


def memory_tips(repo: pygit2.Repository, branch: str, *, remotes: bool = True) -> List[Tuple[str, str]]:
    """(ref, tip) of the branch's memory: ``refs/memory/<b>``, then fetched copies."""
    from .repo import memory_ref

    refs = [memory_ref(branch)]
    if remotes:
        refs += [f"{REMOTE_PREFIX}{r}/{branch}" for r in repo.remotes.names()]
    return [(ref, tip) for ref, tip in ((ref, ref_target(repo, ref)) for ref in refs) if tip]


def reachable(repo: pygit2.Repository, commit: str, tip: Optional[str]) -> bool:
    """True when ``commit`` is ``tip`` or one of its ancestors."""
    if not tip:
        return False
    try:
        return commit == tip or repo.descendant_of(tip, commit)
    except (pygit2.GitError, KeyError, ValueError):
        return False


@dataclass(frozen=True)
class BranchInfo:
    """One memory branch, as ``gitmem branch`` lists it."""

    name: str
    ref: str
    tip: str
    parent: Optional[str]
    memories: int
    code: str  # "exists" (a local or remote-tracking branch has it, as prune reads it) or "deleted"
    merged: bool  # its code is reachable from the parent's (or default) code branch
    conflicts: int = 0
    memory_merged: bool = False  # its memory tip is in the parent's (or default) memory, or ``merged_into``'s
    active: int = 0  # of ``memories`` (which also counts superseded, retracted and invalid ones), as status counts
    renamed_to: Optional[str] = None  # prune: the code branch renamed from it whose memory holds all of its
    #: the branch, other than the parent, whose memory holds all of its: for memory set aside here, the branch it
    #: was set aside from (:func:`merged_back`); prune: ``renamed_to`` too
    merged_into: Optional[str] = None
    #: for memory set aside here (:func:`set_aside_from`), the branch whose earlier memory it holds: it never had
    #: code of its own, so its ``code`` "deleted" says only that no code branch has its name
    set_aside_from: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "ref": self.ref, "tip": self.tip, "parent": self.parent,
                "memories": self.memories, "active": self.active, "code": self.code, "merged": self.merged,
                "conflicts": self.conflicts, "memory_merged": self.memory_merged, "renamed_to": self.renamed_to,
                "merged_into": self.merged_into, "set_aside_from": self.set_aside_from}


def list_branches(repo: pygit2.Repository) -> List[BranchInfo]:
    from .merge import conflict_blobs
    from .repo import default_branch
    from .store import Store
    from .warm import counted

    default = default_branch(repo)
    out = []
    for name, ref in memory_names(repo):
        store = Store(repo, name)
        tip = store.own_tip()
        if not tip:
            continue
        parent = None if name == default else parent_chain(repo, name)[0]
        tips = code_tips(repo, name)
        into = code_tips(repo, parent or default)
        merged = bool(parent and tips and into and reachable(repo, tips[0], into[0]) and _past_fork(repo, name, tips[:1]))
        into_memory = Store(repo, parent or default).tip() if name != default else None
        in_parent = reachable(repo, tip, into_memory)
        back = None if in_parent else merged_back(repo, name, tip)  # as prune and status count it
        counts = store.summary(tip)["counts"]  # kept per tree
        out.append(BranchInfo(name, ref, tip, parent, sum(counts.values()),
                              "exists" if tips else "deleted",
                              merged, len(conflict_blobs(store, tip)), in_parent or bool(back),
                              counted(counts), merged_into=back,
                              set_aside_from=set_aside_from(repo, name)))
    return out


# --- prune ---------------------------------------------------------------------


def prunable(b: BranchInfo, force: bool = False) -> bool:
    """Whether prune deletes ``b``: all its memory is in its parent's, or ``force`` (as `git branch -d`, `-D`)."""
    return b.memory_merged or force


def prune(repo: pygit2.Repository, *, dry_run: bool = True, force: bool = False) -> List[BranchInfo]:
    """Memory branches whose code branch is gone (locally and on every remote).

    With ``dry_run`` (the default) nothing is deleted: callers list first. Otherwise those whose memory
    is all in their parent's are deleted, and the others only with ``force`` (as `git branch -d` and
    `-D`): memory nobody merged may exist nowhere else. The deleted tips stay reachable through the
    reflog-free object store until gc; the caller prints them so ``git update-ref`` can bring one back."""
    from .repo import default_branch

    default = default_branch(repo)
    moved = renames(repo)  # not gone: renamed by git, which left the memory behind (see move)
    gone = [b for b in list_branches(repo) if b.name != default and not code_tips(repo, b.name) and b.name not in moved]
    # Renamed, and the memory left behind merged into the new name's since: in that memory, whatever the parent's
    # (memory set aside and merged into the new branch's of its name since: list_branches counts it merged)
    carried = {old: new for new, _ in ref_names(repo, "refs/heads/") if (old := renamed_from(repo, new, merged=True))}
    gone = [replace(b, memory_merged=True, renamed_to=carried[b.name], merged_into=carried[b.name])
            if not b.memory_merged and b.name in carried else b for b in gone]
    if not dry_run:
        for b in gone:
            if not prunable(b, force):
                continue
            try:
                ref = repo.references[b.ref]
                if str(ref.target) != b.tip:
                    raise BranchError(f"{b.ref} moved while pruning; run prune again")
                ref.delete()
            except (KeyError, pygit2.GitError) as e:
                raise BranchError(f"could not delete {b.ref}: {e}") from None
            _record_dropped(repo, b.name, b.tip)
            for key in (f"gitmem.branch.{b.name}.{k}" for k in ("parent", "forkPoint", "created", "startedWithout")):
                try:  # the fork record goes with the memory (a new branch of that name starts afresh)
                    del repo.config[key]
                except (KeyError, pygit2.GitError):
                    pass
    return gone


def move(repo: pygit2.Repository, old: str, new: str, *, after_code: bool = True) -> str:
    """Rename ``old``'s memory to ``new``, as `git branch -m old new` renames its code (git runs no hook for
    it): ``refs/memory/<new>`` takes the tip, the fork record moves, and branches forked from ``old`` now name
    ``new``. ``new`` must have no memory of its own (merge it instead), unless it is ``old``: as for git, a
    rename to the same name changes nothing. ``after_code`` (a person's rename): while ``old`` is still a code
    branch and ``new`` is none, the code was not renamed (yet), so it is refused: memory never leaves the code
    it was written for. Returns the tip moved."""
    from .refs import move_ref
    from .repo import check_branch_name, config_get, memory_ref

    check_branch_name(old)
    check_branch_name(new)
    tip = ref_target(repo, memory_ref(old))
    if tip is None:
        raise BranchError(f"{old!r} has no memory of its own to move")
    if new == old:
        return tip
    if ref_target(repo, memory_ref(new)) is not None:
        raise BranchError(f"{new!r} already has memory of its own: bring {old!r}'s in with "
                          f"`gitmem --branch {new} merge {old}`")
    if after_code and ref_target(repo, f"refs/heads/{old}") is not None \
            and ref_target(repo, f"refs/heads/{new}") is None:
        raise BranchError(f"code branch {old!r} is still here and {new!r} is not: moving the memory alone would "
                          f"part it from its code ({old!r} would read its parent's); rename the code first, "
                          f"`git branch -m {old} {new}`, then move the memory")
    try:
        move_ref(repo, memory_ref(new), None, tip, f"gitmem: branch {old} renamed to {new}")
    except GitmemError as e:
        raise BranchError(f"could not create {memory_ref(new)}: {e}") from None
    try:
        found = repo.references[memory_ref(old)]
        if str(found.target) != tip:
            raise BranchError(f"{memory_ref(old)} moved while renaming; run it again")
        found.delete()
    except BranchError:
        repo.references[memory_ref(new)].delete()  # as before: nothing half done
        raise
    except (KeyError, pygit2.GitError) as e:
        raise BranchError(f"could not delete {memory_ref(old)}: {e}") from None
    try:
        config = repo.config
        for key in ("parent", "forkPoint", "startedWithout"):
            value = config_get(repo, f"gitmem.branch.{old}.{key}")
            if value is not None:
                if config_get(repo, f"gitmem.branch.{new}.{key}") is None:
                    config[f"gitmem.branch.{new}.{key}"] = value
                del config[f"gitmem.branch.{old}.{key}"]
        if config_get(repo, f"gitmem.branch.{new}.renamedTo") is not None:
            del config[f"gitmem.branch.{new}.renamedTo"]  # its memory is here again
        if not aside_of(new):  # set aside is no rename: see set_aside
            config[f"gitmem.branch.{old}.renamedTo"] = new  # for renamed_here
        for entry in list(config):  # the branches forked from it
            if entry.name.startswith("gitmem.branch.") and entry.name.endswith(".parent") and entry.value == old:
                config[entry.name] = new
    except (KeyError, pygit2.GitError, OSError) as e:
        raise BranchError(f"moved the memory to {memory_ref(new)}, but not its fork records: {e}") from None
    return tip


def set_aside(repo: pygit2.Repository, branch: str) -> Optional[str]:
    """For a code branch created just now: rename the memory an earlier code branch of that name left to
    ``<branch>.earlier-<tip>``, and return that name; None when ``branch`` has no memory or it is not an
    earlier branch's.

    `git branch -D wip` leaves wip's memory behind (`gitmem branch` names it; only prune drops it), and a
    pull brings the memory of branches a teammate deleted. A new wip would take that memory as its own and,
    once merged, bring an abandoned spike's memory to main. It is an earlier branch's when one of its
    memories is linked to a code commit that no branch has any more (nor any remote-tracking one): the code
    it was written for is gone, or when all of it is in the memory the new branch starts from already (merged
    there: the new branch would read that old tip instead of its parent's). Only its own memories count (what
    the default branch has, it inherited). A
    branch a remote has, or one created from ``<remote>/<branch>``, is that branch, whatever its memory is
    linked to (a commit rewritten before the push, say); memory linked to nothing cannot be told apart, and
    stays. Renamed, never deleted: `gitmem merge <name>` brings it in, and
    a pull does not bring it back (as after prune) until the remote has more of it."""
    from .repo import default_branch, memory_ref

    tip = ref_target(repo, memory_ref(branch))
    created = created_from(repo, branch)
    if tip is None or created is None or branch == default_branch(repo) or code_tips(repo, branch, local=False) \
            or _branch_named(repo, created[0]) == branch:
        return None  # not a branch created from another (the first one), or one a remote has: its memory is its own
    parents = {_started_from(repo, branch), default_branch(repo)}
    merged = [t for name in parents if name and (t := ref_target(repo, memory_ref(name)))]
    if not any(reachable(repo, tip, t) for t in merged):  # in the memory it starts from already: nothing its own
        if not _any_unreachable(repo, _own_links(repo, branch, tip)):
            return None
    return _put_aside(repo, branch, tip)


def set_aside_for(repo: pygit2.Repository, branch: str, tips: Optional[Iterable[str]] = None) -> Optional[str]:
    """Set this clone's memory of ``branch`` aside, as :func:`set_aside` would, when one of ``tips`` (copies of
    it from a remote; by default every fetched one) is the memory of a new branch of that name whose writes say
    they set it aside (:func:`earlier_root`): a teammate deleted the branch and created it again. Return the
    name it is kept under, or None. Merging it instead would bring the earlier branch's speculative memory
    into the new one."""
    from .repo import memory_ref

    own = ref_target(repo, memory_ref(branch))
    if own is None:
        return None
    if tips is None:
        tips = [tip for ref, tip in memory_tips(repo, branch) if ref.startswith(REMOTE_PREFIX)]
    return _put_aside(repo, branch, own) if any(earlier_root(repo, branch, own, tip) for tip in tips) else None


def set_aside_from(repo: pygit2.Repository, name: str) -> Optional[str]:
    """The branch whose earlier memory memory branch ``name`` holds when it is memory set aside here
    (``<branch>.earlier-<tip>``, see :func:`_put_aside`), else None: a code branch of that name makes it that
    branch's memory. It is this clone's to keep apart, not to push: its name is this clone's tip (a teammate who
    held the same memory set it aside under his), and the remote holds the new branch under that name; `gitmem
    merge NAME` brings it in, `gitmem prune` drops it."""
    branch = aside_of(name)
    return branch if branch and not code_tips(repo, name) else None


def merged_back(repo: pygit2.Repository, name: str, tip: str) -> Optional[str]:
    """The branch whose earlier memory ``name`` (at ``tip``) holds, set aside here (:func:`set_aside_from`), when
    that branch's memory holds all of it now (`gitmem merge NAME`, as the set-aside notice offers): it is merged,
    and prune drops it as such, as it does a renamed branch's memory merged into the new name's. Else None."""
    from .repo import memory_ref

    branch = set_aside_from(repo, name)
    return branch if branch and reachable(repo, tip, ref_target(repo, memory_ref(branch))) else None


@dataclass(frozen=True)
class KeptAside:
    """Memory set aside here, as status names it: ``branch``, its name (``<aside>.earlier-<tip>``); ``aside``, the
    branch whose earlier memory it holds (:func:`set_aside_from`); ``aside_merged``: that branch's memory holds all
    of it (:func:`merged_back`: prune drops it as merged). Its keys are those status gives a remote's copy of it."""

    branch: str
    aside: str
    aside_merged: bool

    def to_dict(self) -> Dict[str, Any]:
        return {"branch": self.branch, "aside": self.aside, "aside_merged": self.aside_merged}


def kept_aside(repo: pygit2.Repository, of: Optional[str] = None) -> List[KeptAside]:
    """Every memory set aside here (kept in this clone, not pushed), whether or not a remote is configured;
    with ``of``, only the earlier memory of that branch (the others are not looked at)."""
    out = []
    for name, ref in memory_names(repo):
        if of is not None and aside_of(name) != of:
            continue
        if (branch := set_aside_from(repo, name)) and (tip := ref_target(repo, ref)):
            out.append(KeptAside(name, branch, merged_back(repo, name, tip) is not None))
    return out


def _put_aside(repo: pygit2.Repository, branch: str, tip: str) -> str:
    """Rename ``branch``'s memory (at ``tip``) to ``<branch>.earlier-<tip>`` (kept on ``refs/memory-aside/``, see
    :func:`gitmem.repo.memory_ref`) and record it as dropped here."""
    from .repo import memory_ref

    aside = f"{branch}.earlier-{tip[:8]}"
    if ref_target(repo, memory_ref(aside)) not in (None, tip):
        aside = f"{branch}.earlier-{tip}"  # that name holds other memory: the whole tip names this
    _record_dropped(repo, branch, tip)  # first: its first commits are found past its parents' memory
    if ref_target(repo, memory_ref(aside)) == tip:  # set aside before, merged back unchanged: kept there
        repo.references[memory_ref(branch)].delete()
    else:
        move(repo, branch, aside, after_code=False)  # the code under that name is the new branch's
    return aside


def _record_dropped(repo: pygit2.Repository, branch: str, tip: str) -> None:
    """Keep the memory of ``branch`` dropped or set aside here at ``tip`` apart from what comes later: its tip (a
    remote's copy holding nothing newer is not taken again, :func:`dropped_here`) and its first commits, which
    the next writes on ``branch`` name (``Set-Aside:`` trailers) for teammates' clones that still hold it."""
    for key, value in (("pruned", tip), ("setAside", " ".join(_first_commits(repo, branch, tip)))):
        try:
            repo.config[f"gitmem.branch.{branch}.{key}"] = value
        except (pygit2.GitError, OSError):
            pass


def _first_commits(repo: pygit2.Repository, branch: str, tip: str, limit: int = 8) -> List[str]:
    """The commits ``branch``'s memory at ``tip`` began with: of those the memory of its parents lacks, the ones
    whose parents it has. Every later copy of that memory holds one; a new branch of the name, forked from its
    parent's memory, none."""
    try:
        own = {str(c.id): c for c in _own_walk(repo, branch, tip)}
    except (KeyError, ValueError, pygit2.GitError):
        return []
    return sorted(c for c, commit in own.items() if not any(str(p) in own for p in commit.parent_ids))[:limit]


def _own_walk(repo: pygit2.Repository, branch: str, tip: str) -> pygit2.Walker:
    """The commits of ``branch``'s memory at ``tip`` that the memory of its parents lacks."""
    from .repo import memory_ref

    walker = repo.walk(tip)
    for parent in parent_chain(repo, branch):
        if (held := ref_target(repo, memory_ref(parent))) is not None:
            walker.hide(held)
    return walker


def earlier_root(repo: pygit2.Repository, branch: str, tip: str, current: Optional[str]) -> Optional[str]:
    """A first commit (:func:`_first_commits`) of memory of ``branch`` that was set aside or dropped, which
    ``tip`` holds and ``current`` (the memory of the branch of that name now; None before its first write)
    lacks: ``tip`` is then that earlier branch's memory, never merged into ``current``. What was set aside
    ``current``'s writes say (``Set-Aside:`` trailers, so a teammate's clone knows it too); for this clone's
    own memory, or a branch of that name here that has not written yet, also this clone's record."""
    from .audit import aside_in
    from .repo import config_get, memory_ref

    declared: Set[str] = set()
    here = ref_target(repo, memory_ref(branch))
    if current == here and (current or f"refs/heads/{branch}" in repo.references):
        declared.update((config_get(repo, f"gitmem.branch.{branch}.setAside") or "").split())
    if current:
        try:
            walker = repo.walk(current)
            walker.hide(tip)
            for commit in walker:
                declared.update(aside_in(commit.message))
        except (KeyError, ValueError, pygit2.GitError):
            return None
    root = next((c for c in sorted(declared) if reachable(repo, c, tip) and not reachable(repo, c, current)), None)
    return None if root and current and _merged_on_purpose(repo, branch, tip, current, root) else root


def _merged_on_purpose(repo: pygit2.Repository, branch: str, tip: str, current: str, root: str) -> bool:
    """Whether ``tip`` also holds a write of the branch's memory at ``current`` that names ``root`` set aside
    (``Set-Aside:``): ``tip`` is then that branch's memory, into which someone merged the earlier one (`gitmem
    merge B.earlier-TIP`, as the set-aside notice offers), not the earlier branch's that a teammate added to."""
    from .audit import aside_in

    try:
        base = repo.merge_base(tip, current)
        return base is not None and any(root in aside_in(c.message) for c in _own_walk(repo, branch, str(base)))
    except (KeyError, ValueError, pygit2.GitError):
        return False


def _own_links(repo: pygit2.Repository, branch: str, tip: str) -> Set[str]:
    """The code commits the memories at ``tip`` of ``branch``'s memory are linked to, but those the default
    branch's memory has (inherited, not the branch's own)."""
    from .repo import default_branch
    from .store import Store

    inherited = {b for _, b in Store(repo, default_branch(repo)).snapshot().entries()}
    own = Store(repo, branch)
    linked: Set[str] = set()
    for path, blob in own.snapshot(tip).entries():
        if blob not in inherited:
            try:
                linked.update(own.parse_blob(blob, path).commits)
            except InvalidMemory:
                continue
    return linked


def _any_unreachable(repo: pygit2.Repository, commits: Iterable[str]) -> bool:
    """Whether one of ``commits`` is on no local or remote-tracking branch (or not in this repository): one
    walk from them all that stops at every branch tip, so it reads only what no branch has."""
    tips = [t for prefix in ("refs/heads/", "refs/remotes/") for _, ref in ref_names(repo, prefix)
            if (t := ref_target(repo, ref))]
    wanted = set(commits)
    walker = None
    for c in wanted:
        try:
            if walker is None:
                walker = repo.walk(c)
            else:
                walker.push(c)
        except (KeyError, ValueError, pygit2.GitError):
            return True  # gone from this repository (gc'd, or a teammate's never fetched)
    if walker is None:
        return False
    for t in tips:
        walker.hide(t)
    return any(str(commit.id) in wanted for commit in walker)


def renames(repo: pygit2.Repository) -> Dict[str, str]:
    """old name -> new name, for each local code branch renamed from a branch whose memory stayed behind."""
    out: Dict[str, str] = {}
    for name, _ in ref_names(repo, "refs/heads/"):
        if old := renamed_from(repo, name):
            out[old] = name
    return out


def renamed_from(repo: pygit2.Repository, branch: str, *, merged: bool = False) -> Optional[str]:
    """The branch ``branch`` was renamed from (`git branch -m`), if its code's reflog says so and that name
    still has memory of its own that ``branch``'s lacks: the memory git did not move (``branch`` may have
    written since, forking its parent's). Renamed twice (a to b, then b to c), the reflog (which git moves
    with the branch) is followed back to the name the memory stayed under. With ``merged``, that name only
    when ``branch``'s memory holds all of its since (`gitmem --branch NEW merge OLD`): what prune drops."""
    from .repo import memory_ref

    found = _left_behind(repo, branch)
    if found is None or f"refs/heads/{found[0]}" in repo.references:  # that name is a new branch's: its memory now
        return None
    name, left = found
    return name if reachable(repo, left, ref_target(repo, memory_ref(branch))) == merged else None


def _left_behind(repo: pygit2.Repository, branch: str) -> Optional[Tuple[str, str]]:
    """(name, memory tip) of the name ``branch`` was renamed from, following its reflog back, that still has
    memory: what `git branch -m` left behind, whatever has happened to that name since."""
    from .repo import memory_ref

    try:
        entries = list(repo.references[f"refs/heads/{branch}"].log())
    except (KeyError, pygit2.GitError, ValueError):
        return None
    name = branch
    for entry in entries:  # newest first
        message = entry.message or ""
        if message.startswith("Branch: renamed refs/heads/") and message.endswith(f" to refs/heads/{name}"):
            name = message[len("Branch: renamed refs/heads/"):-len(f" to refs/heads/{name}")]
            if (left := ref_target(repo, memory_ref(name))) is not None:
                return name, left
    return None


def follow_rename(repo: pygit2.Repository, branch: str) -> Optional[Tuple[str, str]]:
    """For a code branch created just now under a name another branch was renamed from (`git branch -m`, which
    runs no hook), while the renamed branch's memory stayed under that name: that memory is the renamed
    branch's, its commits still on it, so neither :func:`set_aside` nor the new branch may take it. It moves to
    the renamed branch, or, when that one has written memory of its own since, is set aside (kept whole) for a
    person to merge there. Returns (the renamed branch, where the memory is now), or None."""
    from .repo import memory_ref

    tip = ref_target(repo, memory_ref(branch))
    if tip is None:
        return None
    heir = next((name for name, _ in ref_names(repo, "refs/heads/")
                 if name != branch and (_left_behind(repo, name) or ("",))[0] == branch), None)
    if heir is None:
        return None
    if ref_target(repo, memory_ref(heir)) is not None:
        return heir, _put_aside(repo, branch, tip)
    _record_dropped(repo, branch, tip)  # a remote's copy of it is not the new branch's either
    move(repo, branch, heir, after_code=False)
    return heir, heir


def renamed_here(repo: pygit2.Repository, branch: str) -> Optional[str]:
    """The name ``branch``'s memory was renamed to here (:func:`move`, followed through later renames), while
    ``branch`` has no memory here again: a remote's copy of ``branch`` is then that memory, as pushed before the
    rename or written since by a teammate still on the old name, and a pull must not make ``branch`` again (a
    branch of its own, which prune would later drop). None when it was not renamed here."""
    from .repo import config_get, memory_ref

    name, seen = branch, {branch}
    while ref_target(repo, memory_ref(name)) is None and \
            (heir := config_get(repo, f"gitmem.branch.{name}.renamedTo")) and heir not in seen:
        name = heir
        seen.add(name)
    return name if name != branch else None


def carry_over(repo: pygit2.Repository, old: str, new: str) -> str:
    """The command that brings the memory ``old`` left behind to ``new`` (renamed by git): a move, or a merge
    once ``new`` has memory of its own."""
    from .repo import memory_ref

    return f"gitmem branch -m {old} {new}" if ref_target(repo, memory_ref(new)) is None \
        else f"gitmem --branch {new} merge {old}"


# --- finding merged branches ------------------------------------------------------


def merged_by(repo: pygit2.Repository, branch: str, head: str, before: Optional[str]) -> List[str]:
    """Code branches (other than ``branch``'s own local one) that a merge moving
    ``branch`` from ``before`` to ``head`` brought in: tips reachable from
    ``head`` but not from ``before``. Used by the post-merge hook.

    For ``branch`` itself only its remote-tracking tips count (a `git pull`): after a
    fast-forward the local tip equals the pulled one, and the pulled memory must merge too.
    A tip still at its branch's recorded fork point is no code of that branch's (a spike forked
    from a merged branch, with memory but no commit yet): as in :func:`merged_elsewhere`."""
    names = set(_all_code_branch_names(repo)) | {n for n, _ in memory_names(repo)}
    out = []
    for name in sorted(names):
        tips = [t for t in code_tips(repo, name, local=name != branch)
                if reachable(repo, t, head) and not reachable(repo, t, before)]
        if _past_fork(repo, name, tips):
            out.append(name)
    return out


def merged_elsewhere(repo: pygit2.Repository, branch: str, head: str) -> List[str]:
    """Code branches whose tip ``head`` already contains although no local merge
    ran (a pull request merged on the server, seen after ``git pull``). A branch
    that has no commit of its own past its recorded fork point is not counted,
    nor are the branches ``branch`` itself was forked from. A branch whose code is gone everywhere (deleted
    once its pull request merged) is not counted: which of its memories are its own, and which a branch it
    was forked from holds, the fetched copies cannot tell; :func:`gone_unmerged` names it for a person."""
    skip = set(parent_chain(repo, branch)) | {branch}
    out = []
    for name in sorted({n for n, _ in memory_names(repo)} | _remote_memory_names(repo)):
        if name in skip:
            continue
        tips = [tip for tip in code_tips(repo, name) if reachable(repo, tip, head)]
        if _past_fork(repo, name, tips):
            out.append(name)
    return out


def written_elsewhere(repo: pygit2.Repository, name: str, head: str, into: Optional[str]) -> bool:
    """Whether every copy of ``name``'s memory that ``into`` (the memory it would merge into) lacks has own
    memories (:func:`_own_links`) linked to a code commit ``head`` lacks: its code was reset or rewritten away
    from what they were written for (a spike reset to where main is going looks merged once main gets there), so
    its tip being in ``head`` does not bring them. A person decides (:func:`held_notice`). One copy written for
    this code (a teammate's new branch of that name) is merged as before (:func:`merge_branches`)."""
    tips = [tip for _, tip in memory_tips(repo, name) if not reachable(repo, tip, into)]
    try:
        return bool(tips) and all(any(not reachable(repo, c, head) for c in _own_links(repo, name, tip)) for tip in tips)
    except StorageError:  # a copy that cannot be read: :func:`merge_branches` names it
        return False


def held_notice(name: str, into: str) -> str:
    """What a person is told about a branch :func:`written_elsewhere` kept out of ``into``'s memory."""
    return (f"{name}: not merged: its memory is linked to code {into} does not have (was {name} reset or "
            f"rewritten?): `gitmem merge {name}` brings it")


def _remote_memory_names(repo: pygit2.Repository) -> set:
    names = set()
    for remote in repo.remotes.names():
        names |= {n for n, _ in ref_names(repo, f"{REMOTE_PREFIX}{remote}/")}
    return names


def _all_code_branch_names(repo: pygit2.Repository) -> Iterator[str]:
    yield from (n for n, _ in ref_names(repo, "refs/heads/"))
    for remote in repo.remotes.names():
        yield from (n for n, _ in ref_names(repo, f"refs/remotes/{remote}/") if n != "HEAD")


@dataclass
class SyncResult:
    """What sync (or the post-merge hook) merged: one entry per branch (``refs``: the memory
    refs merged for it, local and fetched copies). ``fetched``: the remote sync fetched first."""

    merged: List[Dict[str, Any]] = field(default_factory=list)
    fetched: Optional[str] = None
    refused: List[Any] = field(default_factory=list)  # what the fetch's trust gate kept out (trust.Refusal)
    unmerged: List[str] = field(default_factory=list)  # :func:`gone_unmerged`, as `gitmem sync` reports it
    set_aside: Dict[str, str] = field(default_factory=dict)  # branch -> where :func:`set_aside_for` put its memory
    late: List["LateParent"] = field(default_factory=list)  # what :func:`take_late_parent` left to a person
    #: {"branch", "ref", "id", "why"} of each memory copy not merged because it clashes again on a memory whose
    #: conflict is pending (:class:`~gitmem.errors.PendingConflict`): the other branches are merged all the same.
    blocked: List[Dict[str, str]] = field(default_factory=list)
    held: List[str] = field(default_factory=list)  # whose code is here but not their memory's (written_elsewhere)

    def to_dict(self) -> Dict[str, Any]:
        return {"fetched": self.fetched, "merged": self.merged, "refused": [r.to_dict() for r in self.refused],
                "unmerged": self.unmerged, "set_aside": self.set_aside, "late": [x.to_dict() for x in self.late],
                "blocked": self.blocked, "held": self.held}


def blocked_entry(branch: str, ref: str, refused: PendingConflict) -> Dict[str, str]:
    """A :attr:`SyncResult.blocked` entry: the copy of ``branch``'s memory at ``ref`` that ``refused`` kept out."""
    return {"branch": branch, "ref": ref, "id": refused.memory_id, "why": str(refused)}


def damaged_copy(repo: pygit2.Repository, ref: str, tip: str) -> Optional[str]:
    """Why the copy of a branch's memory at ``ref`` (at ``tip``) cannot be merged, naming that ref and what
    repairs it, or None when its history is intact (:func:`gitmem.doctor.damage`). Only asked once a merge
    or a walk failed: it reads the copy's whole history."""
    import shlex

    from .doctor import damage

    found = damage(repo, tip)
    if found is None:
        return None
    repair = f"run `{doctor_command(ref)}`" if ref.startswith((REF_PREFIX, ASIDE_PREFIX)) else \
        f"fetch it again (`git update-ref -d {shlex.quote(ref)}`, then `gitmem fetch`)"
    return f"{ref} is damaged: {found}; {repair}"


def blocked_notice(entry: Dict[str, str], again: Optional[str] = None) -> str:
    """What a person is told about a :attr:`SyncResult.blocked` entry: which branch waits, on what, and
    ``again``, the command that merges it once that is settled: by default `gitmem merge BRANCH`, or for a
    parent's memory as of the fork (ref "", :func:`take_late_parent`) `gitmem sync`, which takes no more of it.
    A pending conflict's reason ends "then merge again", which the command spells out; a damaged ref's or a
    clashing one's ends in what repairs it, which the command follows."""
    branch = entry["branch"]
    again = again or (f"gitmem merge {branch}" if entry["ref"] else "gitmem sync")
    return f"{branch}: not merged: {entry['why']}" + (f" (`{again}`)" if entry["id"] else f", then `{again}`")


_NEW_BRANCHS = "a new branch's of that name, which set aside the earlier one's"


def aside_notice(branch: str, aside: str) -> str:
    """What a person is told when :func:`set_aside_for` set their memory of ``branch`` aside."""
    return (f"the remote's memory of {branch!r} is {_NEW_BRANCHS}: your memory of the earlier {branch!r} is now "
            f"{aside!r}, not merged (`gitmem merge {aside}` brings it in)")


def new_branch_notice(branch: str, remote: str) -> str:
    """What a person is told, before a pull, of ``remote``'s copy of ``branch``'s memory that is a new branch's
    (:func:`earlier_root`): not "N ahead, M behind", as if a pull merged the two, but what the pull does
    (:func:`set_aside_for`)."""
    return (f"{branch}: {remote}'s is {_NEW_BRANCHS}: `gitmem pull` sets your memory of the earlier {branch!r} "
            "aside, not merged, and takes it")


def skipped_notice(branch: str, remote: str) -> str:
    """What a person is told about ``remote``'s copy of ``branch``'s memory that a pull does not take
    (:func:`dropped_here`), and the command that brings it all the same."""
    return (f"{branch}: not taken again, it was dropped or set aside here (`gitmem merge "
            f"{REMOTE_PREFIX}{remote}/{branch}` brings it)")


def renamed_notice(branch: str, heir: str, remote: str, lacking: bool) -> str:
    """What a person is told about ``remote``'s copy of ``branch``'s memory when ``branch`` was renamed to ``heir``
    here (:func:`renamed_here`): a pull does not take it; when it holds memory ``heir``'s lacks (``lacking``: a
    teammate wrote under the old name), the command that brings that into ``heir``."""
    if not lacking:
        return f"{branch}: renamed to {heir} here, whose memory holds all of {remote}'s"
    return (f"{branch}: renamed to {heir} here; {remote}'s holds memory {heir} lacks, not taken "
            f"(`gitmem --branch {heir} merge {REMOTE_PREFIX}{remote}/{branch}` brings it)")


_KIND_RANK = {"up-to-date": 0, "new": 1, "fast-forward": 2, "merge": 3}


def dropped_here(repo: pygit2.Repository, branch: str, tip: str) -> bool:
    """Whether ``branch``'s memory was dropped here (`gitmem prune`) or set aside (:func:`set_aside`) at a tip
    that holds ``tip``: a remote's copy then only brings back what was dropped (the remote keeps its refs). Or
    whether ``tip`` is an earlier branch's memory, with more on it, that the branch of that name now lacks
    (:func:`earlier_root`): a teammate still writing to it must not bring it into the new branch."""
    from .repo import config_get, memory_ref

    dropped = config_get(repo, f"gitmem.branch.{branch}.pruned")
    return (bool(dropped) and reachable(repo, tip, dropped)) or \
        earlier_root(repo, branch, tip, ref_target(repo, memory_ref(branch))) is not None


def merge_branches(store: Store, names: Sequence[str], *, author=None, source: str = "merge") -> SyncResult:
    """Merge the memory of each named branch (local ref and fetched copies) into ``store``:
    one entry per branch, however many copies of its memory there are; never a fetched copy of what was
    dropped or set aside here (:func:`dropped_here`), nor this clone's memory of an earlier branch of that name
    that a fetched copy says was set aside (:func:`set_aside_for`: it is set aside here too). A copy that
    clashes again on a pending conflict, or whose history is damaged (:func:`damaged_copy`; ``id`` ""), is left
    out (``blocked``), the rest merged."""
    from .merge import merge_into

    result = SyncResult()
    for name in names:
        if aside := set_aside_for(store.repo, name):
            result.set_aside[name] = aside
        entry: Optional[Dict[str, Any]] = None
        for ref, tip in memory_tips(store.repo, name):
            if ref == store.ref or (ref.startswith(REMOTE_PREFIX) and dropped_here(store.repo, name, tip)):
                continue
            fetched = f" from {ref[len(REMOTE_PREFIX):-len(name) - 1]}" if ref.startswith(REMOTE_PREFIX) else ""
            try:
                r = merge_into(store, tip, author=author, source=source,  # the journal says which copy came in
                               message=f"merge memory of {name}{fetched} into {store.branch}").to_dict()
            except PendingConflict as e:
                result.blocked.append(blocked_entry(name, ref, e))
                continue
            except (NotFound, StorageError):  # named for the memory merged into, maybe: whose is damaged?
                why = damaged_copy(store.repo, ref, tip)
                if why is None:
                    raise
                result.blocked.append({"branch": name, "ref": ref, "id": "", "why": why})
                continue
            if entry is None:
                entry = {"branch": name, "ref": ref, "refs": [ref], **r}
                continue
            entry["refs"].append(ref)
            if _KIND_RANK.get(r["kind"], 0) > _KIND_RANK.get(entry["kind"], 0):
                entry.update(kind=r["kind"], ref=ref)
            entry["commit"] = r["commit"]
            for key in ("added", "changed", "kept"):
                entry[key] = list(dict.fromkeys(entry[key] + r[key]))
            entry["conflicts"] = entry["conflicts"] + r["conflicts"]
        if entry is not None:
            result.merged.append(entry)
    return result


def sync(store: Store, *, author=None, source: str = "sync") -> SyncResult:
    """Merge the memory of every code branch the current code already contains, and this
    branch's own fetched memory when the code it came with is here (a `git pull` without hooks).
    Works on what was fetched: :func:`gitmem.remote.sync` fetches first."""
    repo = store.repo
    head = ref_target(repo, f"refs/heads/{store.branch}")
    if not head:
        return SyncResult()
    names = merged_elsewhere(repo, store.branch, head)
    held = [name for name in names if written_elsewhere(repo, name, head, store.tip())]
    names = [name for name in names if name not in held]
    if any(reachable(repo, tip, head) for tip in code_tips(repo, store.branch, local=False)):
        names.insert(0, store.branch)  # merge_branches skips the local ref itself: its fetched copies
    result = merge_branches(store, names, author=author, source=source)
    result.held = held
    taken, result.late, blocked = take_late_parent(store, author=author, source=source)
    result.merged += taken
    result.blocked += blocked
    return result


@dataclass(frozen=True)
class LateParent:
    """A branch whose memory started while its parent had none here (its first write forked an older branch's,
    see :meth:`gitmem.store.Store.commit`), and still lacks what the parent's held at the fork. ``as_of``: the
    parent's memory commit that links the code commit the branch forked at (the post-commit hook writes it when
    that commit is made: what the parent's memory held then, and nothing written after), None when no memory
    commit tells that."""

    branch: str
    parent: str
    fork: Optional[str]
    as_of: Optional[str]

    def notice(self) -> str:
        """What a person is told, and the command that brings the parent's memory in."""
        started = f"{self.branch} started before {self.parent}'s memory arrived"
        if self.as_of:
            return f"{started}: `gitmem sync` brings {self.parent}'s memory as of {(self.fork or '')[:10]}, where " \
                   f"{self.branch} forked"
        return (f"{started}; no memory commit of {self.parent}'s links the commit {self.branch} forked at, so what "
                f"it held then cannot be told: `gitmem merge {self.parent}` brings all of it in (also what "
                f"{self.parent} wrote after {self.branch} forked)")

    def to_dict(self) -> Dict[str, Any]:
        return {"branch": self.branch, "parent": self.parent, "fork": self.fork, "as_of": self.as_of,
                "notice": self.notice()}


def late_parent(repo: pygit2.Repository, branch: str) -> Optional[LateParent]:
    """``branch``'s :class:`LateParent`, or None: it did not start without its parent's memory (no record), the
    parent has none here yet, none of what it has came by a fetch (:func:`_fetched`), or the branch holds what it
    should. Sync skips a branch's parents (their later writes are speculation it must not take), so without this
    it would never get what the parent held at the fork. Only a link of the fork point (:func:`code_fork`) is
    taken as that: the writes after the parent's previous link may precede the fork or follow it, and a guess
    could leak speculation."""
    from .audit import code_commit_in
    from .repo import config_get, memory_ref

    parent = config_get(repo, f"gitmem.branch.{branch}.startedWithout")
    own = ref_target(repo, memory_ref(branch))
    tips = [tip for _, tip in memory_tips(repo, parent)] if parent and own else []
    if not parent or not own or not tips:
        return None
    fork = code_fork(repo, branch)
    try:
        lacking = _walk(repo, tips, [own])
        links = [c for c in lacking if fork and code_commit_in(c.message) == fork]
        if links:
            return LateParent(branch, parent, fork, str(links[-1].id))  # the oldest: made with the commit
        inherited = [t for name in parent_chain(repo, parent) if (t := ref_target(repo, memory_ref(name)))]
        parents_own = _walk(repo, tips, inherited)
        if not _fetched(repo, parent, [own, *inherited]):
            return None
    except (KeyError, ValueError, pygit2.GitError):
        return None
    held = {str(c.id) for c in parents_own} - {str(c.id) for c in lacking}
    return None if held or not parents_own else LateParent(branch, parent, fork, None)


def _fetched(repo: pygit2.Repository, branch: str, hidden: Sequence[str]) -> bool:
    """Whether some of ``branch``'s memory that none of ``hidden`` holds came by a fetch: a fetched copy holds it
    and no write of this clone's made it (a push moves the fetched copy too). A branch that started while its
    parent had no memory here started before all of the parent's own writes here: what the parent wrote since
    is its later memory, not what it held at the fork."""
    copies = [tip for ref, tip in memory_tips(repo, branch) if ref.startswith(REMOTE_PREFIX)]
    fetched = {str(c.id) for c in _walk(repo, copies, hidden)} if copies else set()
    return bool(fetched and fetched - written_here(repo))


def _walk(repo: pygit2.Repository, tips: Sequence[str], hidden: Iterable[str]) -> List[pygit2.Commit]:
    """The commits of ``tips`` that none of ``hidden`` holds, newest first."""
    walker = repo.walk(tips[0], pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME)
    for tip in tips[1:]:
        walker.push(tip)
    for tip in hidden:
        walker.hide(tip)
    return list(walker)


def take_late_parent(store: Store, *, author=None, source: str = "sync"
                     ) -> Tuple[List[Dict[str, Any]], List[LateParent], List[Dict[str, str]]]:
    """Bring in the memory ``store``'s branch's parent held at the fork, when :func:`late_parent` can tell it:
    a three-way merge (conflicts kept, nothing dropped), as a sync entry of the parent with ``as_of`` (the fork
    point). Returns (merged entries, the :class:`LateParent` it could not tell, for a person to decide, and the
    merge refused over a pending conflict, as :attr:`SyncResult.blocked` lists one)."""
    from .merge import merge_into

    late = late_parent(store.repo, store.branch)
    if late is None or late.as_of is None or late.fork is None:
        return [], [late] if late else [], []
    try:
        r = merge_into(store, late.as_of, author=author, source=source,
                       message=f"merge memory of {late.parent} as of {late.fork[:10]}, where {store.branch} forked, "
                               f"into {store.branch}")
    except PendingConflict as e:
        return [], [], [blocked_entry(late.parent, "", e)]
    return [{"branch": late.parent, "ref": None, "refs": [], "as_of": late.fork, **r.to_dict()}], [], []


def gone_unmerged(store: Store) -> List[str]:
    """Memory branches (own or fetched) whose code branch is gone everywhere and whose memory this branch's
    lacks: what a squash or rebase merge on the server leaves, which no code history can tell sync about
    (`gitmem merge NAME` brings one, `gitmem prune` drops it)."""
    from .repo import default_branch

    repo, tip = store.repo, store.tip()
    names = {n for n, _ in memory_names(repo)} | _remote_memory_names(repo)
    return [name for name in sorted(names - {store.branch, default_branch(repo)})
            if not code_tips(repo, name) and any(not reachable(repo, t, tip) for _, t in memory_tips(repo, name))]


# --- diff ----------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryDiff:
    """Memory changes from ``base`` (the merge base of the two sides) to ``to``."""

    left: str
    right: str
    base: Optional[str]
    to: Optional[str]
    added: List[Any]
    changed: List[Tuple[Any, Any, Tuple[str, ...]]]
    removed: List[Any]

    def to_dict(self) -> Dict[str, Any]:
        return {"from": self.left, "to": self.right, "base": self.base, "tip": self.to,
                "added": [m.to_dict() for m in self.added],
                "changed": [{"id": new.id, "fields": list(f), "before": old.to_dict(), "after": new.to_dict()}
                            for old, new, f in self.changed],
                "removed": [m.to_dict() for m in self.removed]}


def check_side(name: str) -> str:
    """``name``, a branch or a commit-ish, unless it is not valid UTF-8: then a BranchError that says so
    (libgit2 can name neither), rather than "neither a branch nor a commit"."""
    from .repo import undecodable

    shown = undecodable(name)
    if shown is not None:
        raise BranchError(f"invalid branch or commit {shown}: not valid UTF-8")
    return name


def resolve_side(store: Store, name: str) -> Optional[str]:
    """A branch name (its memory, own or inherited) or any commit-ish, as a memory commit."""
    from .repo import check_branch_name
    from .store import Store

    check_side(name)
    try:
        check_branch_name(name)
        if code_tips(store.repo, name) or memory_tips(store.repo, name):  # a branch: its memory, own or inherited
            return Store(store.repo, name).tip()  # None: none yet, an empty memory (not its code commit)
    except BranchError:
        pass
    from .trust import tip_tree_problem

    try:
        commit = str(store.repo.revparse_single(name).peel(pygit2.Commit).id)
    except (KeyError, ValueError, pygit2.GitError):
        raise BranchError(f"{name!r} is neither a branch with memory nor a commit") from None
    why = tip_tree_problem(store.repo, commit)  # a code commit, most often (`HEAD~1`, `refs/heads/main`)
    if why:
        raise BranchError(f"{name!r} is not a memory commit ({why}): name a branch, or a commit of "
                          "`git log refs/memory/<branch>`")
    return commit


def diff(store: Store, left: str, right: str) -> MemoryDiff:
    """What ``right`` changed since it diverged from ``left`` (like ``git diff A...B``)."""
    from .errors import ShallowHistory
    from .merge import changed_blobs, load_ids, shallow_cut

    a, b = resolve_side(store, left), resolve_side(store, right)
    base = None
    if a and b:
        found = store.repo.merge_base(a, b)
        base = str(found) if found else None
        if cut := shallow_cut(store.repo, [a, b], base):  # the base is hidden: all of one side read as its change
            raise ShallowHistory(left, right, cut, diff=True)
    e_base, e_to = changed_blobs(store, base, b)
    touched = sorted(i for i in set(e_base) | set(e_to) if e_base.get(i) != e_to.get(i))
    before, after = load_ids(store, e_base, touched), load_ids(store, e_to, touched)
    added = [after[i] for i in touched if i in after and i not in before]
    removed = [before[i] for i in touched if i in before and i not in after]
    changed = []
    for i in touched:
        if i in before and i in after:
            fields_ = tuple(k for k, v in after[i].to_dict().items() if before[i].to_dict().get(k) != v and k != "updated")
            fields_ += tuple(k for k in before[i].to_dict() if k not in after[i].to_dict())
            changed.append((before[i], after[i], fields_))
    return MemoryDiff(left, right, base, b, added, changed, removed)


def _value(v: Any) -> str:
    text = ", ".join(v) if isinstance(v, (list, tuple)) else str(v)
    text = text.replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "..."


def _label(m: Any) -> str:
    why = f" (because: {m.reason})" if m.type == "rejection" and m.reason else ""
    return f"{m.type} {m.id}: {m.summary}{why}"


def render_diff(d: MemoryDiff, markdown: bool = False) -> str:
    """A review of the memory change, as plain text or Markdown for a pull request."""
    lines: List[str] = []
    count = f"{len(d.added)} added, {len(d.changed)} changed, {len(d.removed)} removed"
    if markdown:
        lines.append(f"### Memory changes `{d.left}..{d.right}` ({count})")
        for title, items in (("Added", [_label(m) for m in d.added]),
                             ("Changed", [_change(o, n, f, True) for o, n, f in d.changed]),
                             ("Removed", [_label(m) for m in d.removed])):
            if items:
                lines += ["", f"**{title}**", ""] + [f"- {x}" for x in items]
        return "\n".join(lines) + "\n"
    lines.append(f"memory {d.left}..{d.right} (base {(d.base or 'none')[:10]}): {count}")
    lines += [f"+ {_label(m)}" for m in d.added]
    lines += [f"~ {_change(o, n, f, False)}" for o, n, f in d.changed]
    lines += [f"- {_label(m)}" for m in d.removed]
    return "\n".join(lines) + "\n"


def _change(old: Any, new: Any, fields_: Sequence[str], markdown: bool) -> str:
    q = "`" if markdown else '"'
    parts = [f"{f}: {q}{_value(getattr(old, f))}{q} -> {q}{_value(getattr(new, f))}{q}" for f in fields_]
    return f"{_label(new)} ({'; '.join(parts) or 'metadata'})"
