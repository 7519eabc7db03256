"""Refs: compare-and-swap updates, ref locks and reflogs for ``refs/memory/*``, and which memory refs a clone has.

A write never forces a ref: it moves it only from the tip it read
(:func:`move_ref`), and :func:`retrying` re-runs the whole write when another
writer won the race. A lock left by a dead writer is judged by
:class:`LockFile` (no process has it open, older than
:data:`STALE_LOCK_SECONDS`).
"""

from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple, TypeVar

import pygit2

from .errors import ConcurrentUpdate, GitmemError, RefClash, RefLocked, StorageError
from .repo import ASIDE_PREFIX, REF_PREFIX, aside_of, branch_command, common_dir, memory_ref, ref_target

T = TypeVar("T")
MAX_ATTEMPTS = 400
#: A ref update holds its lock for milliseconds: writers wait this long for a lock,
#: and a lock this old that no process holds open was left by a dead process.
STALE_LOCK_SECONDS = 5.0


class Locked(GitmemError):
    """libgit2 or git found the ref's lock file taken (raised inside a retry loop)."""

    def __init__(self, ref: str, text: str):
        m = re.search(r"'([^']+\.lock)'", text)
        self.lock_path = m.group(1) if m else ref + ".lock"
        super().__init__(text)


@dataclass(frozen=True)
class LockFile:
    """A ref lock file on disk: its age and the pids that have it open (Linux only)."""

    path: str
    age: float
    holders: Tuple[int, ...]

    @property
    def stale(self) -> bool:
        return not self.holders and self.age >= STALE_LOCK_SECONDS

    def describe(self) -> str:
        if self.holders:
            return f"lock file held open by pid {', '.join(map(str, self.holders))} ({self.age:.0f}s old)"
        if not self.stale:
            return f"lock file is {self.age:.0f}s old: a write may be in progress (stale after {STALE_LOCK_SECONDS:.0f}s)"
        return (f"stale lock file ({self.age:.0f}s old, no process holds it): the next write takes it over, "
                "`gitmem doctor --fix` removes it now")

    def to_dict(self) -> Dict[str, Any]:
        return {"path": self.path, "age": round(self.age, 1), "holders": list(self.holders), "stale": self.stale}


def lock_file(repo: pygit2.Repository, ref: str) -> Optional[LockFile]:
    """The ref's lock file, if one exists, with its age and the processes holding it open."""
    path = os.path.join(common_dir(repo), *ref.split("/")) + ".lock"
    try:
        age = time.time() - os.path.getmtime(path)
    except OSError:
        return None
    return LockFile(path, age, _holders(path))


def clear_stale_lock(repo: pygit2.Repository, ref: str) -> LockFile:
    """Remove the ref's lock file, only when no live process holds it and it is old.

    libgit2 and git lock files carry no pid, so ownership is judged by two
    signs: no process has the file open (Linux /proc; a writer keeps it open
    until it renames it into place) and it is older than
    :data:`STALE_LOCK_SECONDS` (a ref update holds its lock for milliseconds).
    The file judged stale is moved aside and checked to be that same file
    before it is deleted: a fresh lock a live writer took meanwhile is put back.
    ``gitmem doctor --fix`` and every writer (:func:`retrying`) use this one rule.
    """
    import random

    lock = lock_file(repo, ref)
    if lock is None:
        raise GitmemError(f"{ref} is not locked")
    if not lock.stale:
        raise RefLocked(ref, lock.path, lock.describe())
    try:
        judged = os.stat(lock.path)
    except FileNotFoundError:
        return lock  # its owner finished meanwhile
    except OSError as e:
        raise StorageError(f"could not read {lock.path}: {e.strerror}") from None
    if time.time() - judged.st_mtime < STALE_LOCK_SECONDS:  # replaced by a fresh lock since it was judged
        raise RefLocked(ref, lock.path, "a new lock was just taken")
    aside = f"{lock.path}.stale-{os.getpid()}-{random.getrandbits(32):08x}.lock"  # never a valid ref name
    try:
        os.rename(lock.path, aside)
    except FileNotFoundError:
        return lock  # another writer took it over first
    except OSError as e:
        raise StorageError(f"could not remove {lock.path}: {e.strerror}") from None
    moved = os.stat(aside)
    if (moved.st_ino, moved.st_mtime_ns) != (judged.st_ino, judged.st_mtime_ns):
        try:  # a live writer's fresh lock: give it back before its owner renames it into place
            os.link(aside, lock.path)
        except OSError:
            pass
        os.unlink(aside)
        raise RefLocked(ref, lock.path, "a new lock was just taken")
    os.unlink(aside)
    return lock


def _stale_age(repo: pygit2.Repository, ref: str) -> bool:
    """Cheap first sign (no /proc scan): the ref's lock file exists and is old enough to be stale."""
    try:
        return time.time() - os.path.getmtime(os.path.join(common_dir(repo), *ref.split("/")) + ".lock") \
            >= STALE_LOCK_SECONDS
    except OSError:
        return False


def move_ref(repo: pygit2.Repository, ref: str, expected: Optional[str], new: str, reflog: str) -> None:
    """Compare-and-swap ``ref`` from ``expected`` (None: must not exist) to ``new``."""
    ensure_reflog(repo, ref)
    if expected is None:
        return _create_ref(repo, ref, new, reflog)
    try:
        found = repo.lookup_reference(sys.intern(ref))  # interned: see repo.entries_by_name
        if str(found.target) != expected:
            raise ConcurrentUpdate(ref, expected, str(found.target))
        found.set_target(new, reflog)
    except (pygit2.AlreadyExistsError, KeyError):
        raise ConcurrentUpdate(ref, expected, ref_target(repo, ref)) from None
    except (pygit2.GitError, OSError) as e:  # libgit2 reports lock failures as OSError
        text = str(e)
        if "does not match" in text or "exists" in text:
            raise ConcurrentUpdate(ref, expected, ref_target(repo, ref)) from None
        if "lock" in text:
            raise Locked(ref, text) from None
        raise StorageError(f"could not move {ref}: {text}") from None


def _create_ref(repo: pygit2.Repository, ref: str, new: str, reflog: str) -> None:
    """Create ``ref`` at ``new`` only if it does not exist, checked under the ref's lock.

    libgit2 checks a non-forced create's "must not exist" *before* taking the
    lock (refdb_fs_backend__write), so two first writes on a branch could both
    succeed and the first would be lost (seen under load in the 8x50 test).
    `git update-ref REF NEW ""` checks under the lock; this runs once per branch."""
    import subprocess

    try:
        result = subprocess.run(["git", f"--git-dir={repo.path}", "update-ref", "-m", reflog, ref, new, ""],
                                capture_output=True, text=True, stdin=subprocess.DEVNULL)
    except OSError as e:
        raise StorageError(f"could not run git to create {ref}: {e}") from None
    if result.returncode == 0:
        return
    text = (result.stderr.strip().splitlines() or ["git update-ref failed"])[0].replace("fatal: ", "")
    if "already exists" in text:
        raise ConcurrentUpdate(ref, None, ref_target(repo, ref))
    if ".lock" in text:
        raise Locked(ref, text)
    clash = clashing_ref(ref, repo.references)
    if clash:  # git's own words ("cannot lock ref ... exists") do not say what to do
        raise RefClash(ref, clash)
    raise StorageError(f"could not create {ref}: {text}")


def clashing_ref(ref: str, names: Iterable[str]) -> Optional[str]:
    """Of the ref ``names`` (this repository's, or a remote's), one whose name is a folder of ``ref``'s, or the
    first one inside ``ref`` as a folder: git cannot create ``ref`` beside it."""
    names = set(names)
    parts = ref.split("/")
    for n in range(3, len(parts)):  # refs/memory/<first part>, ...
        if "/".join(parts[:n]) in names:
            return "/".join(parts[:n])
    return next((name for name in sorted(names) if name.startswith(ref + "/")), None)


def retrying(repo: pygit2.Repository, ref: str, attempt: Callable[[], T]) -> T:
    """Run ``attempt`` until it does not lose a compare-and-swap race (jittered backoff).

    A lock left by a dead writer is taken over by the rule ``gitmem doctor --fix``
    uses (:func:`clear_stale_lock`: no process holds it, older than
    :data:`STALE_LOCK_SECONDS`), so one killed writer does not block every later
    write. A lock a live process keeps longer than that ends the wait with
    :class:`RefLocked`, naming the lock and who holds it."""
    import random

    lock_since: Optional[float] = None
    for n in range(MAX_ATTEMPTS):
        try:
            return attempt()
        except ConcurrentUpdate:
            lock_since = None
        except Locked as e:
            lock_since = lock_since or time.monotonic()
            if _stale_age(repo, ref):
                try:
                    clear_stale_lock(repo, ref)
                    continue
                except GitmemError:
                    pass  # held by a live process, or just replaced by a fresh lock: wait as usual
            if time.monotonic() - lock_since > STALE_LOCK_SECONDS + 1:  # a dead writer's lock is stale by now
                lock = lock_file(repo, ref)
                raise RefLocked(ref, e.lock_path, lock.describe() if lock else None) from None
            time.sleep(random.uniform(0.02, 0.06))  # locks are rare: no need to spin through the attempts
            continue
        time.sleep(random.uniform(0.001, 0.004) * min(n + 1, 10))
    raise ConcurrentUpdate(ref, None, ref_target(repo, ref))


#: The reflog messages of the moves that take a tip made elsewhere as it is (a pull's, a merge's fast-forward).
TAKEN = ("gitmem merge: fast-forward", "gitmem pull:")


def written_here(repo: pygit2.Repository) -> Set[str]:
    """The memory commits this clone's writes made, as its memory refs' reflogs name them: each write's entry
    names the commit it made, unlike a move that takes a tip as it is (:data:`TAKEN`; a rename's or a set
    aside's "gitmem: ..."). No clock is read. A reflog that is gone (a pruned branch's) or expired names none."""
    out: Set[str] = set()
    for ref in [r for r in repo.references if r.startswith(REF_PREFIX)]:
        try:
            out.update(str(e.oid_new) for e in repo.references[ref].log()
                       if (e.message or "").startswith("gitmem ") and not e.message.startswith(TAKEN))
        except (KeyError, pygit2.GitError, OSError):
            continue  # no reflog: none of its commits can be told as written here
    return out


@dataclass(frozen=True)
class Dropped:
    """Memory gitmem wrote on ``ref`` at ``tip`` (as its reflog says) that the ref no longer holds: a move gitmem did
    not make took it away, ``by`` (that move's reflog message), such as a forced `git fetch` of ``refs/memory/*``.
    The reflog keeps the commit (until `git gc` expires the entry), so a merge of it brings the memory back."""

    ref: str
    tip: str
    by: str

    def notice(self, checked_out: Optional[str] = None) -> str:
        return (f"memory written here at {self.tip[:10]} is no longer in {self.ref}: a move gitmem did not make "
                f"({self.by or 'no reflog message'}) dropped it; bring it back with "
                f"`{branch_command(self.ref, 'merge ' + self.tip, checked_out)}`")


def dropped_writes(repo: pygit2.Repository, ref: str, written: str, by: str) -> Optional[Dropped]:
    """What gitmem last wrote on ``ref``, at ``written`` (before the move ``by``, as its reflog says:
    :func:`gitmem.gitdir.may_be_dropped`), when the ref's tip no longer contains it. Only the newest write counts:
    gitmem's own moves back (a recover, a rewrite) are themselves its newest entry."""
    tip = ref_target(repo, ref)
    try:
        if tip is None or written == tip or written not in repo or repo.descendant_of(tip, written):
            return None
    except (KeyError, ValueError, pygit2.GitError):
        return None  # a history too damaged to tell: doctor names the damage
    return Dropped(ref, written, by)


def keep_dropped(repo: pygit2.Repository, ref: str, written: str, by: str) -> Optional[str]:
    """Keep memory gitmem wrote on the memory ref ``ref`` that a move it did not make dropped (:func:`dropped_writes`)
    as set aside here, under ``<branch>.earlier-<tip>`` (see :func:`gitmem.branches.set_aside_from`): status lists
    it, `gitmem merge NAME` brings it back, prune drops it once merged, and no reflog expiry loses it. Its name, or
    None when nothing was dropped."""
    found = dropped_writes(repo, ref, written, by) if ref.startswith(REF_PREFIX) else None
    if found is None:
        return None
    for name in (f"{ref[len(REF_PREFIX):]}.earlier-{found.tip[:8]}", f"{ref[len(REF_PREFIX):]}.earlier-{found.tip}"):
        held = ref_target(repo, ASIDE_PREFIX + name)
        if held == found.tip:
            return name
        if held is None:
            try:
                move_ref(repo, ASIDE_PREFIX + name, None, found.tip, f"gitmem: kept aside, dropped by {found.by or 'a move'}")
                return name
            except ConcurrentUpdate:  # another process kept it just now
                if ref_target(repo, ASIDE_PREFIX + name) == found.tip:
                    return name
    return None


def ensure_reflog(repo: pygit2.Repository, ref: str) -> None:
    """git writes reflogs for refs/memory/* only if the log file already exists."""
    path = os.path.join(common_dir(repo), "logs", *ref.split("/"))
    if not os.path.exists(path):
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "a").close()
        except OSError:
            pass  # the reflog is a recovery aid; the commit chain is the audit trail


def _holders(path: str) -> Tuple[int, ...]:
    """Pids with ``path`` open, from /proc (empty where /proc is not available)."""
    pids = []
    target = os.path.realpath(path)
    try:
        procs = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return ()
    for pid in procs:
        fd_dir = f"/proc/{pid}/fd"
        try:
            for fd in os.listdir(fd_dir):
                if os.readlink(f"{fd_dir}/{fd}") == target:
                    pids.append(int(pid))
                    break
        except OSError:
            continue
    return tuple(pids)


def memory_names(repo: pygit2.Repository) -> List[Tuple[str, str]]:
    """(name, ref) of every local memory branch, memory set aside here (``refs/memory-aside/``) too, sorted by
    name. Set-aside memory an earlier gitmem kept under ``refs/memory/``, which `gitmem remote setup`'s push
    refspec sends, is moved first (:func:`_keep_apart`): the first command that lists a clone's memory does it."""
    found: Dict[str, str] = {}
    for ref in [r for r in repo.references if r.startswith((REF_PREFIX, ASIDE_PREFIX))]:
        name = ref.split("/", 2)[2]
        if ref != memory_ref(name) and ref.startswith(REF_PREFIX) and (kept := _keep_apart(repo, ref, name)):
            name, ref = kept
        if ref == memory_ref(name):
            found[name] = ref
    return sorted(found.items())


def _keep_apart(repo: pygit2.Repository, legacy: str, name: str) -> Optional[Tuple[str, str]]:
    """Move set-aside memory ``name`` from ``legacy`` (``refs/memory/<name>``, where gitmem kept it before) to
    where it is kept now, or under its whole tip's name when that holds other memory (as
    :func:`gitmem.branches.set_aside` names it). Returns (name, ref) it is kept under, or None when it could not
    be moved (it stays where it was)."""
    tip = ref_target(repo, legacy)
    if tip is None:
        return None
    for kept in dict.fromkeys((name, f"{aside_of(name)}.earlier-{tip}")):
        held = ref_target(repo, memory_ref(kept))
        if held not in (None, tip):
            continue
        try:
            if held is None:
                move_ref(repo, memory_ref(kept), None, tip, f"gitmem: set aside, kept in this clone (was {legacy})")
            found = repo.references[legacy]
            if str(found.target) == tip:
                found.delete()
        except (GitmemError, KeyError, pygit2.GitError, OSError):
            return None
        return kept, memory_ref(kept)
    return None
