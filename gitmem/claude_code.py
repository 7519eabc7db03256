"""Claude Code hooks: ``gitmem hook claude-code EVENT`` reads the hook's JSON on stdin and answers.

Claude Code runs the command for each hook event with the event's JSON on stdin
(``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name`` and the event's own fields)
and puts ``hookSpecificOutput.additionalContext`` of SessionStart and UserPromptSubmit into the
model's context (https://code.claude.com/docs/en/hooks). What each event does here:

- **SessionStart** (startup, resume, clear, compact): where the branch stands (the last
  checkpoint, commits since, next step, an earlier branch's memory set aside here), the conventions,
  and the decisions and rejections ranked for the files the branch changed, as ``<memory>``
  elements within a token budget.
- **UserPromptSubmit**: memories relevant to the prompt that SessionStart did not already
  bring, and every earlier rejection the prompt re-proposes, with its reason.
- **PostToolUse**: Read writes a ``file`` memory with the file's blob id (once per path and
  blob); Edit, Write and MultiEdit add the file to the session's ``action`` memory (one per
  session), which the next code commit links; Bash running ``git commit`` links that commit
  like the post-commit hook. A file git ignores and does not track is left out. Capture runs
  detached, so Claude Code does not wait for it.
- **PreCompact** and **SessionEnd**: a checkpoint from the session's last state (its last
  prompt, last reply, the files it read and changed).

On a detached HEAD nothing is recorded, and SessionStart says whose memory it shows. Without a git
identity every write is refused (never signed with a made-up address), and SessionStart says so to
the model and, as ``systemMessage``, to the person.

Every write has source ``claude-code/<version>`` and the tag ``session:<session id>``, so
``gitmem log`` and ``gitmem list --tag session:<id>`` show what a session wrote. A hook never
blocks the session: any failure is a warning on stderr and exit status 0.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sys
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

from .gitdir import blob_id
from .text import inert_json, plural

if TYPE_CHECKING:
    from .store import Store

EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "PreCompact", "SessionEnd")
#: The tools PostToolUse captures; setup's matcher names exactly these.
CAPTURED_TOOLS = ("Read", "Edit", "Write", "MultiEdit", "Bash")
#: Token budgets of the injected context (SessionStart, UserPromptSubmit).
SESSION_BUDGET = 1500
PROMPT_BUDGET = 600
#: A recalled memory must share this much (search's ``match``) with the prompt to be injected.
PROMPT_MATCH_FLOOR = 0.3
PROMPT_LIMIT = 5
FILE_SUMMARY_CHARS = 300
_SESSION_RE = re.compile(r"[^A-Za-z0-9_-]+")
_AGENT_RE = re.compile(r"^claude-code_(\d+(?:-\d+)*)")
_GIT_COMMIT_RE = re.compile(r"(?:^|[;&|(]|\$\()\s*(?:\w+=\S*\s+)*git(?:\s+(?:-[Cc]\s+\S+|--?[\w-]+(?:=\S+)?))*"
                            r"\s+commit(?:\s|$)")
_DEFINES_RE = re.compile(r"^[ \t]*(?:async\s+def|def|class|function|export\s+(?:default\s+)?(?:function|class|const)|"
                         r"func|fn|pub\s+fn|struct|interface|type)\s+([A-Za-z_][\w]*)", re.M)

#: What a first line quoted in a file summary is trimmed of: comment marks, quotes, blanks.
_DECORATION = "#/*\"' "


@dataclass(frozen=True)
class HookInput:
    """One hook invocation: the event and the JSON Claude Code sent."""

    event: str
    data: Mapping[str, Any]

    @property
    def session_id(self) -> str:
        """Safe as a file name, and redacted: it names the session's scratch file and goes into tags and logs."""
        from .redact import redact_bare

        raw = redact_bare(str(self.data.get("session_id") or "unknown"))[0]
        return _SESSION_RE.sub("-", raw)[:64] or "unknown"

    @property
    def cwd(self) -> str:
        cwd = self.data.get("cwd")
        return cwd if isinstance(cwd, str) and cwd else "."

    def text(self, key: str) -> str:
        """The string field ``key`` ("" if absent), as valid UTF-8: JSON may escape half of a surrogate pair (a
        prompt cut inside an emoji), which every write would refuse, the session's checkpoint among them."""
        value = self.data.get(key)
        return value.encode("utf-8", "replace").decode("utf-8") if isinstance(value, str) else ""

    @classmethod
    def parse(cls, event: str, raw: str) -> "HookInput":
        from .errors import GitmemError

        if event not in EVENTS:
            raise GitmemError(f"unknown Claude Code hook event {event!r} (valid: {', '.join(EVENTS)})")
        try:
            data = json.loads(raw) if raw.strip() else {}
        except ValueError as e:
            raise GitmemError(f"hook input is not JSON: {e}") from None
        if not isinstance(data, dict):
            raise GitmemError("hook input is not a JSON object")
        return cls(event, data)


@dataclass
class Outcome:
    """What a hook did: the JSON to print (None: nothing), ids written, and a log line."""

    output: Optional[Dict[str, Any]] = None
    written: List[str] = field(default_factory=list)
    note: str = ""


def client_version(env: Mapping[str, str], transcript_path: str = "") -> Optional[str]:
    """Claude Code's version: from ``AI_AGENT`` (``claude-code_2-1-332_...``, set for hook
    commands), else from the ``version`` field of the session transcript's lines."""
    match = _AGENT_RE.match(env.get("AI_AGENT", ""))
    if match:
        return match.group(1).replace("-", ".")
    if transcript_path and os.path.isfile(transcript_path):  # not a FIFO or a device: a hook must not wait on one
        try:
            with open(transcript_path, encoding="utf-8", errors="replace") as f:
                for line in f.read(256 * 1024).splitlines()[:20]:
                    version = json.loads(line).get("version")
                    if isinstance(version, str) and re.match(r"^\d+(\.\d+)*$", version):
                        return version
        except (OSError, ValueError, AttributeError):
            pass
    return None


def source_for(env: Mapping[str, str], transcript_path: str = "") -> str:
    version = client_version(env, transcript_path)
    return f"claude-code/{version}" if version else "claude-code"


def session_tag(session_id: str) -> str:
    return f"session:{session_id}"


# --- the session's own state (not memory: a scratch file under .git/gitmem/) ------------


class SessionState:
    """What one session injected, read, changed and asked, kept across its hook processes.

    A JSON file under ``<git common dir>/gitmem/claude-code/``, updated under an exclusive
    lock because detached capture processes can overlap."""

    def __init__(self, store: Store, session_id: str):
        folder = os.path.join(store.common_dir, "gitmem", "claude-code")
        os.makedirs(folder, exist_ok=True)
        self.path = os.path.join(folder, f"{session_id}.json")
        self.data: Dict[str, Any] = {}
        self._fd: Optional[int] = None

    def __enter__(self) -> "SessionState":
        import fcntl

        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        raw = b""
        while True:
            chunk = os.read(self._fd, 1 << 16)
            if not chunk:
                break
            raw += chunk
        try:
            loaded = json.loads(raw) if raw else {}
        except ValueError:
            loaded = {}
        self.data = loaded if isinstance(loaded, dict) else {}
        self.data.setdefault("started", time.time())
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._fd is not None
        try:
            if exc[0] is None:
                body = json.dumps(self.data, sort_keys=True).encode("utf-8")
                os.lseek(self._fd, 0, os.SEEK_SET)
                os.ftruncate(self._fd, 0)
                os.write(self._fd, body)
        finally:
            os.close(self._fd)

    def items(self, key: str) -> List[Any]:
        value = self.data.get(key)
        if not isinstance(value, list):
            value = self.data[key] = []
        return value

    def add(self, key: str, value: Any, keep: int = 200, chars: Optional[int] = None) -> bool:
        """Append ``value`` to the list ``key`` unless present; True when it was new. A string (a prompt, a
        path) is redacted first, as the store would, then cut to ``chars``: this file is on disk too."""
        if isinstance(value, str):
            from .redact import redact

            value = redact(value)[0][:chars]
        values = self.items(key)
        if value in values:
            return False
        values.append(value)
        del values[:-keep]
        return True


# --- the hooks -------------------------------------------------------------------------


def run(hook: HookInput, store: Store, *, source: str) -> Outcome:
    """Do the work of one hook on ``store``; may raise (``main`` turns that into a warning)."""
    handler = {"SessionStart": session_start, "UserPromptSubmit": user_prompt_submit,
               "PostToolUse": post_tool_use, "PreCompact": session_checkpoint,
               "SessionEnd": session_checkpoint}[hook.event]
    return handler(hook, store, source)


def _context_output(event: str, text: str) -> Dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def _fit(elements: Iterable[Tuple[str, str]], budget: int) -> List[Tuple[str, str]]:
    """The (id, element) pairs that fit in ``budget`` tokens, in order, each id once; a few
    that do not fit are skipped (a shorter one may still fit), then the rest is left out."""
    from .tokens import count_tokens

    out: List[Tuple[str, str]] = []
    seen = set()
    used = misses = 0
    for memory_id, element in elements:
        if memory_id in seen:
            continue
        cost = count_tokens(element) + 1
        if used + cost > budget:
            misses += 1
            if misses >= 3:  # full: later (lower-ranked) elements are not even rendered
                break
            continue
        seen.add(memory_id)
        used += cost
        out.append((memory_id, element))
    return out


def session_start(hook: HookInput, store: Store, source: str = "claude-code",
                  budget: int = SESSION_BUDGET) -> Outcome:
    """The branch's standing, conventions, and the decisions and rejections for the branch's files."""
    from .checkpoint import render_resume, resume
    from .conflicts import pending
    from .context import render_conflict, render_memory
    from .model import Memory, quoted
    from .warm import Warm
    from .tokens import count_tokens

    r = resume(store, limit=10)
    standing = render_resume(replace(r, relevant=[]), prompt=True).strip()  # the choices follow as elements
    if store.notice:  # or the model takes the default branch's standing for HEAD's own
        standing = (f"Note: {quoted(store.notice)}. What this session reads and changes is not recorded.\n"
                    + standing)
    refused = None if store.notice else _unsigned(store)
    if refused:
        standing = (f"Note: memory is not recorded here ({quoted(refused)}). What this session reads and changes "
                    "is not kept, and gitmem's tools refuse to write: tell the user.\n" + standing)
    summary = store.summary()
    counts = summary["counts"]
    everything: List[Memory] = []

    def listed(name: str, total: int, full: Callable[[Memory], bool], newest_first: bool) -> Iterator[Memory]:
        """The summary's list ``name``; past its end (a long list, a large budget), every memory."""
        kept = store.listed(name, Warm.NEWEST, summary) or []
        yield from kept
        if total > len(kept):
            if not everything:
                everything.extend(m for _, m in sorted(store.memories().items()))
            rest = [m for m in (everything[::-1] if newest_first else everything) if full(m)]
            yield from rest[len(kept):]

    n_conventions = counts.get("convention/active", 0)
    n_choices = counts.get("decision/active", 0) + counts.get("rejection/active", 0)
    conventions = listed("conventions", n_conventions, Warm.LISTS["conventions"][0], False)
    changed = set(r.changed_files)
    # resume found the choices about the branch's files: those naming a changed file first, newest first
    ranked = sorted(reversed(r.relevant), key=lambda m: not changed.intersection(m.paths))
    about = {m.id for m in ranked}
    newest_first = (m for m in listed("choices", n_choices, Warm.LISTS["choices"][0], True) if m.id not in about)
    # A branch name is anyone's who can push, the source is the hook input's: quoted, or one could close the
    # element and speak to the model outside it.
    header = (f'<gitmem branch="{quoted(store.branch)}" memory_commit="{store.tip() or "none"}" '
              f'session_source="{quoted(hook.text("source") or "startup")}">')
    intro = ("The team's conventions, then decisions and rejections"
             + (" about the files this branch changed first:" if ranked else ":"))
    total = n_conventions + n_choices
    more = "({} more not shown: call recall or check_proposal for them)"
    # A memory in conflict is shown as one side only: the notice (both versions) is never left out.
    unsettled = [render_conflict(c) for c in pending(store).values()]
    earlier = set_aside_notes(store)
    fixed = [header, "Where this branch stands:", standing, *earlier, intro, more.format(total), *unsettled,
             "</gitmem>"]
    candidates = itertools.chain(conventions, ranked, newest_first)
    fitted = _fit(((m.id, render_memory(m)) for m in candidates), budget - count_tokens("\n".join(fixed)))
    lines = [*fixed[:3], *earlier]
    if fitted:
        lines.append(intro)
        lines.extend(element for _, element in fitted)
    if total > len(fitted):
        lines.append(more.format(total - len(fitted)))
    lines.extend(unsettled)
    lines.append("</gitmem>")
    with SessionState(store, hook.session_id) as state:
        for memory_id, _ in fitted:
            state.add("injected", memory_id, keep=2000)
        state.data["branch"] = store.branch
    output = _context_output("SessionStart", "\n".join(lines))
    if refused:  # Claude Code shows it to the person, who can fix it
        output["systemMessage"] = f"gitmem: this session's memory is not recorded: {refused}"
    return Outcome(output, note=f"injected {plural(len(fitted), 'memory')}")


def set_aside_notes(store: Store) -> List[str]:
    """One line per memory of an earlier branch of this name set aside here and not merged back: the agent
    would never learn of it otherwise (it reads the new branch's). The refs are looked for without libgit2
    first: SessionStart runs on every session, and almost never finds any."""
    from .gitdir import may_hold_aside

    if store.git is not None and not may_hold_aside(store.git):
        return []
    from .branches import kept_aside
    from .model import quoted
    from .postings import members
    from .store import Store

    out = []
    here = None
    for a in kept_aside(store.repo, of=store.branch):
        if not a.aside_merged:
            # what the merge would bring: its active memories this branch lacks or holds in another version (the
            # parent's, which both read, are not news); a version is a blob, and the index numbers blobs alike
            here = members(store) or {} if here is None else here
            theirs = members(Store(store.repo, a.branch)) or {}
            n = sum(1 for i, (_, active, doc) in theirs.items() if active and (here.get(i) or (0, 0, None))[2] != doc)
            out.append(f"An earlier branch named {quoted(a.aside)} left memory, set aside as {quoted(a.branch)} "
                       f"({plural(n, 'memory')} this branch lacks) and not read here: "
                       f"`gitmem merge {quoted(a.branch)}` brings it in.")
    return out


def user_prompt_submit(hook: HookInput, store: Store, source: str = "claude-code",
                       budget: int = PROMPT_BUDGET) -> Outcome:
    """Memories relevant to the prompt (not injected yet) and rejections the prompt re-proposes, each in
    conflict followed by its conflict's notice."""
    from .conflicts import pending
    from .context import render_conflict, render_memory
    from .backlog import allowance, start_if_waiting
    from .recall import AGENT_BUDGET, check, recall

    # A pasted log of megabytes is a prompt too: its head says what it is about, and Claude Code waits
    # on this hook (judging 20 MB took 9 s of its 10).
    prompt = hook.text("prompt").strip()[:PROMPT_CHARS]
    if not prompt:
        return Outcome(note="empty prompt")
    with SessionState(store, hook.session_id) as state:
        state.add("prompts", prompt, keep=5, chars=2000)
        injected = set(state.items("injected"))
        spend = allowance(store, AGENT_BUDGET)  # one for the check and the recall: Claude Code waits on both
        rejections = check(store, prompt, budget=spend).repeats
        hits = [h for h in recall(store, prompt, limit=PROMPT_LIMIT + len(injected), budget=spend)
                if h.match >= PROMPT_MATCH_FLOOR and h.memory.type not in ("rejection", "checkpoint")
                and h.memory.id not in injected][:PROMPT_LIMIT]
        start_if_waiting(store)
        lines: List[str] = []
        for h in rejections:
            m = h.memory
            lines.append(f"This prompt re-proposes something the team rejected ({m.created[:10]}, by "
                         f"{m.author.name}, {m.source}); check with the user before going ahead:")
            lines.append(render_memory(m))
        fitted = _fit(((h.memory.id, render_memory(h.memory)) for h in hits), budget)
        if fitted:
            lines.append("Memory relevant to this prompt:")
            lines.extend(element for _, element in fitted)
        for memory_id, _ in fitted:
            state.add("injected", memory_id, keep=2000)
        shown = {h.memory.id for h in rejections} | {i for i, _ in fitted}
        conflicts = pending(store)
        lines.extend(render_conflict(conflicts[i]) for i in sorted(shown) if i in conflicts)
    if not lines:
        return Outcome(note="nothing relevant")
    text = "<gitmem>\n" + "\n".join(lines) + "\n</gitmem>"
    return Outcome(_context_output("UserPromptSubmit", text),
                   note=f"{plural(len(rejections), 'rejection')}, {plural(len(fitted), 'memory')}")


def _repo_path(store: Store, path: str, cwd: str) -> Optional[str]:
    """``path`` relative to the work tree, or None when it is outside it, no file of it (in a ``.git``), or not
    named in UTF-8 (no memory can name it)."""
    from .errors import InvalidMemory
    from .model import check_new_path, undecodable

    workdir = store.repo.workdir
    if not path or not workdir:
        return None
    full = os.path.realpath(os.path.join(cwd, path))
    rel = os.path.relpath(full, os.path.realpath(workdir)).replace(os.sep, "/")
    try:
        return check_new_path(rel) if undecodable(rel) is None else None
    except InvalidMemory:
        return None


def summarize_file(path: str, full_path: str) -> str:
    """A short, deterministic description of a file: size, what it defines, how it starts."""
    try:
        with open(full_path, "rb") as f:
            data = f.read(256 * 1024)
    except OSError:
        return f"{path} (not readable)"
    if b"\0" in data[:8192]:  # git's own test for binary: no lines, names or first line to quote
        return f"{path}: binary, {os.path.getsize(full_path):,} bytes"
    text = data.decode("utf-8", "replace")
    lines = text.splitlines()
    names = list(dict.fromkeys(_DEFINES_RE.findall(text)))
    parts = [f"{path}: {plural(len(lines), 'line')}"]
    if names:
        shown = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
        parts.append(f"defines {shown}")
    first = next((line for line in lines if line.strip().strip(_DECORATION)), "")
    if first:  # redacted whole, then trimmed and cut: a cut token or an unclosed quote no longer has a secret's shape
        from .redact import redact

        parts.append(f"starts: {redact(first)[0].strip().strip(_DECORATION)[:120]}")
    summary = "; ".join(parts)
    return summary if len(summary) <= FILE_SUMMARY_CHARS else summary[: FILE_SUMMARY_CHARS - 3] + "..."


#: The prompt's first characters that are judged and recalled on (see user_prompt_submit).
PROMPT_CHARS = 32 * 1024
#: A file read past this size gets no file memory (hashing it would hold the agent).
MAX_READ_BYTES = 16 * 1024 * 1024


def capture(tool: str, tool_input: Mapping[str, Any], cwd: str) -> Optional[Dict[str, Any]]:
    """The little a detached capture needs from a PostToolUse input (None: nothing to do).

    Runs in the foreground, so the blob id is the file's content when Claude Code read it."""
    if tool not in CAPTURED_TOOLS:
        return None
    if tool == "Bash":
        command = tool_input.get("command")
        if isinstance(command, str) and _GIT_COMMIT_RE.search(command):
            return {"tool": tool, "commit_after": time.time() - 600}
        return None
    path = tool_input.get("file_path") or tool_input.get("path")
    if not isinstance(path, str) or not path:
        return None
    full = os.path.join(cwd, path)
    out: Dict[str, Any] = {"tool": tool, "file_path": full}
    if tool == "Read":
        # The memory is about the file a link names (see _repo_path), and only a regular file of a bounded
        # size is hashed: a FIFO or /dev/zero would hold the agent, a huge log hashes for seconds.
        target = os.path.realpath(full)
        if not os.path.isfile(target) or os.path.getsize(target) > MAX_READ_BYTES:
            return None
        blob = blob_id(target)
        if blob is None:
            return None
        out["blob"] = blob
    return out


def _author(store: Store) -> Any:
    from .repo import agent_author  # on first write: reads never load pygit2 for it

    return agent_author(store.repo, "claude-code")


def _unsigned(store: Store) -> Optional[str]:
    """Why no write of this session could be signed (no git identity), or None. Said at SessionStart, where the
    model and the person see it: each capture's own refusal only reaches hooks.log or a stderr nobody reads."""
    from .errors import GitmemError

    try:
        _author(store)
    except GitmemError as e:
        return str(e)
    return None


def post_tool_use(hook: HookInput, store: Store, source: str = "claude-code") -> Outcome:
    """Record what a tool did: a file memory for Read, the session's changes, a commit link."""
    job = hook.data.get("capture")
    if not isinstance(job, dict):
        tool_input = hook.data.get("tool_input")
        job = capture(hook.text("tool_name"), tool_input if isinstance(tool_input, dict) else {}, hook.cwd)
    if not job:
        return Outcome(note="nothing to capture")
    tool = job.get("tool")
    if tool == "Bash":
        return _link_commit(store, source, float(job.get("commit_after") or 0))
    rel = _repo_path(store, str(job.get("file_path") or ""), hook.cwd)
    if rel is None:
        return Outcome(note="outside the work tree, or not a path a memory can name")
    if _ignored(store, rel):
        return Outcome(note=f"{rel} is ignored by git")
    if tool == "Read":
        return _record_read(hook, store, source, rel, str(job.get("blob") or ""))
    return _record_change(hook, store, source, rel)


def _ignored(store: Store, rel: str) -> bool:
    """Whether git ignores ``rel`` and does not track it: a local file (``.env``, ``node_modules/``), no part of the
    repository, whose summary (its first line) must not become memory the team pulls."""
    import pygit2

    try:
        return bool(store.repo.path_is_ignored(rel)) and rel not in store.repo.index
    except pygit2.GitError:
        return False


def _record_read(hook: HookInput, store: Store, source: str, rel: str, blob: str) -> Outcome:
    if not blob:
        return Outcome(note="no blob")
    # Under the session's lock: two captures of one file (parallel reads, detached) would each find no
    # memory of its blob and both add one.
    with SessionState(store, hook.session_id) as state:
        state.add("read", rel)
        mine = None
        for m in store.list(type="file", path=rel):
            if not m.paths or m.paths[0] != rel:
                continue
            if m.blob == blob:
                return Outcome(note=f"{rel} already recorded at {blob[:10]} ({m.id})")
            if m.source.startswith("claude-code") and mine is None:
                mine = m
        full = os.path.join(store.repo.workdir, rel)
        if not os.path.isfile(full):  # gone before a detached capture ran: nothing to describe
            return Outcome(note=f"{rel} is gone")
        text = summarize_file(rel, full)
        tags = ("claude-code", session_tag(hook.session_id))
        author = _author(store)
        if mine is not None:  # a file memory written by a hook: bring it up to the new content, with the tags
            # it holds when written (read again if a race is lost: a tag someone added meanwhile is kept)
            w = store.edit(mine.id, changes_of=lambda m: {"text": text, "blob": blob,
                                                           "tags": tuple(dict.fromkeys(m.tags + tags))},
                           author=author, source=source)
        else:
            w = store.add("file", text, paths=[rel], blob=blob, tags=tags, author=author, source=source)
    return Outcome(written=[w.memory.id], note=f"file memory {w.memory.id} for {rel} at {blob[:10]}")


def _record_change(hook: HookInput, store: Store, source: str, rel: str) -> Outcome:
    from .errors import GitmemError

    with SessionState(store, hook.session_id) as state:
        if not state.add("changed", rel):
            return Outcome(note=f"{rel} already linked to the session")
        changed = list(state.items("changed"))
        action = state.data.get("action")
        text = f"Claude Code session {hook.session_id} changed {', '.join(changed)}"
        tags = ("claude-code", session_tag(hook.session_id))
        author = _author(store)
        w = None
        if isinstance(action, str):
            try:
                w = store.edit(action, text=text, paths=changed[:64], author=author, source=source)
            except GitmemError:  # retracted or gone: start a new one
                w = None
        if w is None:
            w = store.add("action", text, paths=changed[:64], tags=tags, author=author, source=source)
            state.data["action"] = w.memory.id
    return Outcome(written=[w.memory.id], note=f"{rel} linked to session action {w.memory.id}")


def _link_commit(store: Store, source: str, after: float) -> Outcome:
    import pygit2

    from .checkpoint import link_commit
    from .repo import head_commit

    head = head_commit(store.repo)
    if not head or store.repo[head].peel(pygit2.Commit).commit_time < after:
        return Outcome(note="no new commit")
    link = link_commit(store, head, author=_author(store), source=source)
    return Outcome(written=list(link.memory_ids), note=f"linked {head[:10]} to {plural(len(link.memory_ids), 'memory')}")


def _last_reply(transcript_path: str, limit: int = 300) -> str:
    """The last assistant text in a Claude Code transcript (JSON lines), shortened."""
    if not transcript_path or not os.path.isfile(transcript_path):
        return ""
    try:
        with open(transcript_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 512 * 1024))
            tail = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    for line in reversed(tail):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get("message") if isinstance(entry, dict) else None
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        texts = [content] if isinstance(content, str) else [
            b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
        text = " ".join(" ".join(t.split()) for t in texts if t).strip()
        if text:
            return text if len(text) <= limit else text[: limit - 3] + "..."
    return ""


def session_checkpoint(hook: HookInput, store: Store, source: str = "claude-code") -> Outcome:
    """A checkpoint from the session's last state. None when the session changed no file (on
    SessionEnd; before a compaction, prompts are enough), when nothing happened since its last
    one, or when the agent wrote its own checkpoint during the session (it says more; another session's
    hook checkpoint is not this one's)."""
    from .checkpoint import latest_checkpoint
    from .model import new_id, utc_now

    with SessionState(store, hook.session_id) as state:
        prompts = [p for p in state.items("prompts") if isinstance(p, str)]
        changed, read = state.items("changed"), state.items("read")
        if not changed and (hook.event == "SessionEnd" or not prompts):
            return Outcome(note="the session changed nothing: no checkpoint")  # a question is not a run
        # by id (milliseconds), not by the second `created` names: a checkpoint written a moment before the
        # session started, in the same second, is not one written during it
        started = new_id(int(float(state.data.get("started") or 0) * 1000), tail=0)
        done = len(prompts) + len(changed)
        if state.data.get("checkpointed") == done:
            return Outcome(note="nothing new since this session's last checkpoint")
        latest = latest_checkpoint(store)
        # the agent's own (through MCP or the CLI: no session tag) says more; another session's hook does not
        if latest is not None and latest[1].id >= started \
                and not any(t.startswith(session_tag("")) for t in latest[1].tags):
            return Outcome(note=f"checkpoint {latest[1].id} was written during this session")
        how = "was compacted" if hook.event == "PreCompact" else f"ended ({hook.text('reason') or 'other'})"
        parts = [f"Claude Code session {hook.session_id} {how} at {utc_now()}."]
        if prompts:
            parts.append(f"Last prompt: {' '.join(prompts[-1].split())[:300]}")
        reply = _last_reply(hook.text("transcript_path"))
        if reply:
            parts.append(f"Last reply: {reply}")
        if changed:
            parts.append(f"Changed: {', '.join(changed[:20])}")
        if read:
            parts.append(f"Read: {', '.join(read[-20:])}")
        previous = latest[1].next if latest is not None else None
        next_step = (f"continue: {' '.join(prompts[-1].split())[:300]}" if hook.event == "PreCompact" and prompts
                     else previous)
        # store.add, not checkpoint(): that reads a next step after " / ", and a quoted prompt may hold one
        w = store.add("checkpoint", "\n".join(parts), next=next_step, author=_author(store), source=source,
                      tags=("claude-code", session_tag(hook.session_id)), paths=changed[:64])
        state.data["checkpointed"] = done
    return Outcome(written=[w.memory.id], note=f"checkpoint {w.memory.id}")


# --- the entry point -------------------------------------------------------------------


def detach(event: str, job: Mapping[str, Any], data: Mapping[str, Any], env: Mapping[str, str],
           log_path: Optional[str]) -> None:
    """Run the capture in a new process that outlives this one (Claude Code does not wait)."""
    import subprocess

    payload = {k: data[k] for k in ("session_id", "cwd", "transcript_path", "hook_event_name") if k in data}
    payload["capture"] = dict(job)
    child_env = dict(env)
    child_env["GITMEM_CLAUDE_SOURCE"] = source_for(env, str(data.get("transcript_path") or ""))
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL
    try:
        subprocess.Popen(
            [sys.executable, "-c", "import sys; del sys.path[0]; from gitmem.claude_code import main; "
             "sys.exit(main(sys.argv[1], sys.argv[2], detached=True))", event, json.dumps(payload)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=child_env, start_new_session=True,
            cwd=str(data.get("cwd") or "."), close_fds=True)
    finally:
        if log_path:
            out.close()  # type: ignore[union-attr]


def _log_path(cwd: str) -> Optional[str]:
    """``<git dir>/gitmem/hooks.log`` (where the git hooks log too), found without pygit2."""
    path = os.path.abspath(cwd)
    while True:
        dot_git = os.path.join(path, ".git")
        if os.path.isdir(dot_git):
            os.makedirs(os.path.join(dot_git, "gitmem"), exist_ok=True)
            return os.path.join(dot_git, "gitmem", "hooks.log")
        if os.path.isfile(dot_git):
            return None  # a linked worktree: no log rather than a guess
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def main(event: str, stdin: Optional[str] = None, *, path: Optional[str] = None, branch: Optional[str] = None,
         detached: bool = False, env: Optional[Mapping[str, str]] = None) -> int:
    """Run one Claude Code hook: print its JSON answer (if any) and return 0, whatever happens."""
    env = os.environ if env is None else env
    started = time.monotonic()
    try:
        raw = stdin if stdin is not None else sys.stdin.read()
        hook = HookInput.parse(event, raw)
        if event == "PostToolUse" and not detached:
            tool_input = hook.data.get("tool_input")
            job = capture(hook.text("tool_name"), tool_input if isinstance(tool_input, dict) else {}, hook.cwd)
            if job is None:
                return 0
            if env.get("GITMEM_HOOK_MODE", "") != "foreground":
                detach(event, job, hook.data, env, _log_path(hook.cwd))
                return 0
            hook = HookInput(event, {**hook.data, "capture": job})
        from .store import Store

        store = Store.open(path or hook.cwd, branch)
        if store.notice and event in ("PostToolUse", "PreCompact", "SessionEnd"):
            return 0  # detached HEAD: nothing to record against (a checkpoint would be the default branch's)
        source = env.get("GITMEM_CLAUDE_SOURCE") or source_for(env, hook.text("transcript_path"))
        outcome = run(hook, store, source=source)
        if outcome.output is not None:
            sys.stdout.write(inert_json(outcome.output) + "\n")
            sys.stdout.flush()
        if detached or env.get("GITMEM_HOOK_DEBUG"):
            ms = (time.monotonic() - started) * 1000
            _log(f"claude-code {event} {hook.session_id}: {outcome.note} ({ms:.0f} ms)")
    except Exception as e:  # noqa: BLE001 - a hook must never break the session
        _log(f"warning: claude-code {event} hook skipped: {e}")
    return 0


def _log(line: str) -> None:
    """One line on stderr, redacted: a detached capture's stderr is ``hooks.log``, and its notes name the paths
    and errors the session handled."""
    from .redact import redact

    print(f"gitmem: {redact(line)[0]}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover - `python -m gitmem.claude_code EVENT`
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ""))
