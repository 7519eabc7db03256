"""One exception tree for the whole library.

Interfaces (CLI, MCP, web) catch :class:`GitmemError` in one place and show its
message; anything else escaping the library is a bug and keeps its traceback.
A raw ``pygit2.GitError`` never leaves the library.
"""

from __future__ import annotations

from typing import Optional, Sequence

from .text import plural


def echoed(value: str) -> str:
    """``value`` as a message repeats it: an id or commit is at most 64 characters, so one past 80 (a pasted
    file) is named by its start, not echoed back whole."""
    return repr(value if len(value) <= 80 else value[:40] + "...")


class GitmemError(Exception):
    """Base class: the message is one line, meant for the user."""


class NotARepository(GitmemError):
    def __init__(self, path: str, message: Optional[str] = None):
        self.path = path
        super().__init__(message or f"not a git repository (or any parent): {path}")


class NoIdentity(GitmemError):
    """No email to sign a write with: git has no identity here, and gitmem makes none up (``git commit`` refuses
    too). ``fix`` says what to do; an interface with a way of its own (the CLI's ``--author``) adds it."""

    def __init__(self, fix: str):
        self.fix = fix
        super().__init__(f"who is writing? no git identity: {fix}")


class InvalidMemory(GitmemError):
    """A memory (or an input meant to become one) breaks the schema."""

    def __init__(self, field: str, problem: str, choices: Optional[Sequence[str]] = None, *,
                 option: Optional[str] = None):
        self.field = field
        self.problem = problem
        self.choices = tuple(choices or ())
        self.option = option  # the CLI's option that sets the field, where its name is not the field's
        super().__init__(self.worded(f"invalid {field}", option))

    def worded(self, name: str, option: Optional[str] = None) -> str:
        """The message with the field called ``name``, and ``option`` said after the problem: an interface
        with its own words for a field (the web form's labels) says it in those, not in the CLI's."""
        message = f"{name}: {self.problem}" + (f" ({option})" if option else "")
        return message + (f" (valid: {', '.join(self.choices)})" if self.choices else "")


class NotFound(GitmemError):
    def __init__(self, memory_id: str, ref: str):
        self.memory_id = memory_id
        self.ref = ref
        super().__init__(f"no memory {echoed(memory_id)} on {ref}")


class AmbiguousId(GitmemError):
    def __init__(self, prefix: str, matches: Sequence[str]):
        self.prefix = prefix
        self.matches = tuple(matches)
        super().__init__(
            f"id {prefix!r} is ambiguous: it matches {', '.join(self.matches[:5])}"
            + (" ..." if len(self.matches) > 5 else "") + "; give more characters"
        )


class IdTooShort(NotFound):
    """An abbreviated id shorter than the shortest form gitmem prints (a NotFound: it names nothing)."""

    def __init__(self, prefix: str, minimum: int, ref: str = ""):
        self.memory_id = self.prefix = prefix
        self.ref = ref
        self.minimum = minimum
        GitmemError.__init__(self, f"id {prefix!r} is too short: give at least {minimum} characters "
                         "(the short ids `gitmem list` prints), or the full id")


class ConcurrentUpdate(GitmemError):
    """The ref moved between reading its tip and moving it (compare-and-swap lost)."""

    def __init__(self, ref: str, expected: Optional[str], actual: Optional[str]):
        self.ref = ref
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"{ref} moved during the write (expected {expected or 'no ref'}, found {actual or 'no ref'})"
        )


class PendingConflict(GitmemError):
    """A merge would clash again on memory ``memory_id``, whose earlier conflict nobody resolved: refused,
    nothing written (a conflict file holds two versions). A caller merging several things merges the rest."""

    def __init__(self, memory_id: str, message: str):
        super().__init__(message)
        self.memory_id = memory_id


class Changed(GitmemError):
    """The memory is no longer the version the writer saw (another process wrote it since): a write decided
    on the old version is refused, so it never lands on a newer one nobody looked at."""


class Superseded(Changed):
    """A supersede decided on a memory that another write superseded since, by ``successor``: what is there to
    replace now is that one. ``same``: the successor holds what this supersede would have written (its form sent
    twice), so the successor is this send's answer, not a refusal."""

    def __init__(self, memory_id: str, successor: str, same: bool):
        self.memory_id = memory_id
        self.successor = successor
        self.same = same
        super().__init__(f"{memory_id} was superseded by {successor} since you opened it: read that version, then "
                         "supersede it")


class Repeated(GitmemError):
    """An add carries the one-time key of an earlier add (a form sent twice): it is not written again.
    ``same``: whether it would have stored what the earlier one did (a replay) or other content."""

    def __init__(self, memory_id: str, same: bool):
        self.memory_id = memory_id
        self.same = same
        super().__init__(f"this form was already sent: it added {memory_id}")


class RefLocked(GitmemError):
    """Another process holds (or a dead one left) the ref's lock file."""

    def __init__(self, ref: str, lock_path: str, detail: Optional[str] = None):
        self.ref = ref
        self.lock_path = lock_path
        super().__init__(
            f"{ref} is locked by {lock_path}: {detail}" if detail else
            f"{ref} is locked by {lock_path}; if no gitmem or git process is running, "
            "run `gitmem doctor --fix` to remove a stale lock"
        )


class StorageError(GitmemError):
    """git could not write objects or refs (disk full, read-only repository, corruption)."""


class RefClash(StorageError):
    """``ref`` cannot be created while ``clash`` exists (here, or on ``remote``): git keeps no ref name that is
    also a folder of refs (``feature`` and ``feature/billing``). A caller creating several refs leaves this one
    out, not the rest."""

    def __init__(self, ref: str, clash: str, remote: Optional[str] = None):
        self.ref = ref
        self.clash = clash
        self.remote = remote
        where, there = (f" on {remote}", f" here, `git push {remote} :{clash}` there") if remote else ("", "")
        super().__init__(f"could not create {ref}{where}: {clash} exists{' there' if remote else ''}, and git "
                         "cannot keep a ref name that is also a folder of refs; rename one of the two branches "
                         "(`git branch -m OLD NEW`, then `gitmem branch -m OLD NEW`), or drop the memory of one "
                         f"whose code is gone (`gitmem prune`{there})")


class ShallowHistory(GitmemError):
    """A merge into ``ref`` of ``theirs`` refused: the history of one side since the merge base libgit2 found
    reaches ``cut``, a commit a shallow fetch left without its parents, so the true base may lie behind it and
    every memory one side changed would look like a conflict. Nothing written; whole history fixes it. ``diff``:
    refused as a diff of ``ref``...``theirs`` (two names), whose base the cut hides alike."""

    def __init__(self, ref: str, theirs: str, cut: str, diff: bool = False):
        self.ref, self.theirs, self.cut = ref, theirs, cut
        doing, harm = ((f"cannot diff {ref}...{theirs}", "memory both sides share would show as changed") if diff else
                       (f"cannot merge {theirs[:10]} into {ref}",
                        "conflicts that are not real would be reported; nothing merged"))
        super().__init__(f"{doing}: the memory history here is cut at {cut[:10]}, which a shallow fetch "
                         f"(`git fetch --depth`) left without its parents, so the merge base is unknown and {harm}: "
                         "fetch the memory's whole history from a remote that holds it (`gitmem fetch`)")


class BranchError(GitmemError):
    """The branch name or HEAD state does not allow the operation."""


class SecretFound(GitmemError):
    """Memory about to leave the machine contains something that looks like a secret."""

    def __init__(self, findings: Sequence[tuple]):
        self.findings = tuple(findings)
        where = ", ".join(f"{m} ({rule})" for m, rule in self.findings[:5])
        super().__init__(f"refusing: {plural(len(self.findings), 'possible secret')} in memory: {where}")


class RemoteError(GitmemError):
    """A fetch or push failed (unreachable remote, rejected update)."""


class ForcedMemory(RemoteError):
    """A plain `git push` would move a remote's memory ref to a commit that lacks its tip: memory is never forced."""


class SetAsideMemory(RemoteError):
    """A plain `git push` would send memory set aside here that an earlier gitmem kept under refs/memory/."""


class BackendError(GitmemError):
    """The Messages API backend (real or emulated) failed or refused the request."""

    # Set on an HTTP error reply (status code, the API's error type, its request-id); absent otherwise.
    status: int
    error_type: Optional[str]
    request_id: Optional[str]


class UnknownModel(GitmemError):
    """A model id or alias that the price table (and so the emulator) does not know."""


class PriceTableError(GitmemError):
    """A price-table override file is unreadable or malformed."""


class Untrusted(GitmemError):
    """Data from outside (a remote, a hand edit) that gitmem refuses to read: over a size
    limit, YAML anchors or deep nesting, a conflict naming fields that are not memory fields."""


class EditedByHand(GitmemError):
    """The generated section of a file was changed by hand since gitmem wrote it: replacing it would lose the
    edit."""

    def __init__(self, path: str, fmt: str):
        self.path, self.format = path, fmt
        super().__init__(
            f"{path}: the text between gitmem's markers was edited since gitmem wrote it, and an export would "
            "replace it: move your edit above or below the markers, or record it as memory "
            f"(`gitmem add convention \"...\"`), then export again; or overwrite it with "
            f"`gitmem export --format {fmt} --write --force`")
