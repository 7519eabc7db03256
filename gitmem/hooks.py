"""Git hooks: installing the tiny hook scripts, and what each hook does.

The scripts (see :func:`script`, also shipped in the top-level ``hooks/``
folder) run the user's chained hook first, then call :func:`main` here through
the python that installed them (or ``gitmem`` on PATH). This module imports
only the store and what a hook needs, never click or the LLM/web stacks, so a
hook adds little to ``git commit``. A hook never blocks or breaks git: any
failure becomes a warning on stderr and exit status 0; a chained user hook's
exit status is kept, so a failing user pre-push hook still stops the push.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

import pygit2

from .errors import ForcedMemory, GitmemError, SecretFound, SetAsideMemory
from .files import replace_file
from .repo import GITMEM_PREFIXES, INCOMING_PREFIX, REF_PREFIX, head_commit, ref_target
from .text import plural

if TYPE_CHECKING:
    from .store import Store

HOOKS = ("post-commit", "post-checkout", "post-merge", "post-rewrite", "pre-push")
MARKER = "gitmem-hook v1"
CHAINED_SUFFIX = ".gitmem-chained"
#: Where an uninstall or a re-install keeps a hook of gitmem's that someone edited (see :func:`_edited`).
EDITED_SUFFIX = ".gitmem-edited"
#: The last line of a hook gitmem writes: a digest of the lines above, so an edit is told from an older
#: gitmem's script (which may differ from this one's and is replaced freely).
_SUM = "# gitmem-hook-sum: "
_STDIN_HOOKS = ("post-rewrite", "pre-push")
#: Run detached so `git commit` does not wait for python and pygit2 to start
#: (``gitmem.hookMode=foreground`` or GITMEM_HOOK_MODE=foreground to wait).
BACKGROUND_HOOKS = ("post-commit",)
PRE_PUSH_MODES = ("off", "warn", "push")
#: The exit status of :func:`main` that stops a push (all else exits 0).
REFUSED = 3
#: The status of a hook script's ``run`` when gitmem cannot be started (uninstalled, its python gone): it said so
#: in one line, so no "hook failed" follows; a push of memory still stops, unchecked.
SKIPPED = 4
_ZERO = "0" * 40

_TEMPLATE = """#!/bin/sh
# {marker}: {hook} (written by `gitmem hooks install`; `gitmem hooks uninstall` restores what was here)
# Runs the hook that was here before (saved as $0{suffix}), then gitmem.
# gitmem never blocks git: on failure it warns and exits 0.
hook={hook}
py="${{GITMEM_PYTHON:-{python}}}"
chained="$0{suffix}"
status=0
{read_stdin}if [ -x "$chained" ]; then
    # A sh or bash script runs in its shell with $0 still this hook's path: one that takes the hook's name
    # from $0 (husky v4, yorkie, dispatchers) must not see the .gitmem-chained name and skip its work.
    first=
    read -r first < "$chained" || :
    case "$first" in
        "#!/bin/sh"|"#!/bin/bash"|"#!/usr/bin/env sh"|"#!/usr/bin/env bash") {feed}${{first#??}} -c '. "$0{suffix}"' "$0" "$@" ;;
        *)  # another program (overcommit's Ruby reads its hook type from $0) runs as a link with the hook's name
            link=$(mktemp -d 2>/dev/null) || link=
            case "$chained" in /*) target=$chained ;; *) target=$PWD/$chained ;; esac
            if [ -n "$link" ] && ln -s "$target" "$link/$hook" 2>/dev/null; then
                {feed}"$link/$hook" "$@"
            else
                {feed}"$chained" "$@"
            fi ;;
    esac
    status=$?
    [ -n "${{link:-}}" ] && rm -rf "$link"
fi
[ "$hook" = pre-push ] && [ "$status" -ne 0 ] && exit "$status"
[ "${{GITMEM_HOOKS:-1}}" = 0 ] && exit "$status"
run() {{  # `del sys.path[0]`: a worktree file named like a stdlib module must not shadow it
    if [ -n "$py" ] && [ -x "$py" ]; then  # a python that lost gitmem says so in one line, not a traceback
        "$py" -c 'import sys; del sys.path[0]
try:
    from gitmem.hooks import main
except ImportError as e:
    print(f"gitmem: cannot load gitmem with {{sys.executable}} ({{e}}): run gitmem hooks install again; "
          f"{{sys.argv[1]}} skipped", file=sys.stderr)
    sys.exit({skipped})
sys.exit(main(sys.argv[1:]))' "$hook" "$@"
    elif command -v gitmem >/dev/null 2>&1; then
        gitmem hook "$hook" "$@"
    else
        echo "gitmem: not found (set GITMEM_PYTHON or run gitmem hooks install again); $hook skipped" >&2
        return {skipped}
    fi
}}
{precheck}{dispatch}
exit "$status"
"""

#: A shell ``case`` pattern matching every ref of gitmem's (:data:`gitmem.repo.GITMEM_PREFIXES`).
_GITMEM_GLOBS = "|".join(f"{prefix}*" for prefix in GITMEM_PREFIXES)

#: Shell tests run before Python starts: a hook with nothing to do costs a few git calls, not
#: ~100 ms of interpreter and pygit2 start-up. Each may answer "maybe" (start Python, which
#: decides), never "no" when there is work: a false "yes" costs time, a false "no" loses a merge.
_PRECHECKS = {
    "post-checkout": """\
# nothing to do unless this checkout created a branch (its reflog has one entry), or starts a rebase that
# picks nothing (HEAD detached; see gitmem.hooks)
rebase_picks_nothing() {
    if [ -d "$dir/rebase-merge" ]; then
        [ -f "$dir/rebase-merge/git-rebase-todo" ] || return 1
        while read -r command _; do
            case "$command" in ""|"#"*|noop) ;; *) return 1 ;; esac  # it picks, or may stop: post-rewrite's
        done < "$dir/rebase-merge/git-rebase-todo"
    else
        case "$(tail -n 1 "$dir/logs/HEAD" 2>/dev/null)" in *"rebase (start): checkout "*) ;; *) return 1 ;; esac  # --apply
    fi
    [ -n "$(git for-each-ref --count=1 --format=x refs/memory refs/memory-remotes 2>/dev/null)" ]  # any to merge?
}
has_work() {
    [ "$3" = 1 ] || return 1
    if [ -z "${GIT_DIR:-}" ] && [ -d .git ] && [ ! -f .git/commondir ] && read -r head < .git/HEAD; then
        dir=.git common=.git  # the usual layout, read without starting git
        ref=${head#ref: }
    else  # a linked worktree, a submodule, GIT_DIR
        out=$(git rev-parse --git-dir --git-common-dir --symbolic-full-name HEAD 2>/dev/null) || return 0
        dir=${out%%
*}
        out=${out#*
}
        common=${out%%
*}
        ref=${out##*
}
    fi
    case "$ref" in refs/heads/*) ;; *) rebase_picks_nothing; return ;; esac  # detached
    [ -f "$common/logs/$ref" ] || return 1  # no reflog: gitmem cannot tell either
    n=0
    while read -r line; do
        entry=$line  # (the read that ends the loop empties line)
        n=$((n + 1))
        if [ "$n" -gt 1 ]; then return 1; fi  # the branch existed and moved before
    done < "$common/logs/$ref"
    [ "$n" -eq 1 ] || return 1
    if [ "$1" = 0000000000000000000000000000000000000000 ]; then  # a clone's first checkout, or `git worktree add -b`
        case "$entry" in *"branch: Created from "*) ;; *) return 1 ;; esac
    fi
    # Seen already (checked out again before its first commit)? gitmem.branches.created_now notes the entry's
    # time, commit and message; a deleted branch's reflog went with it, so a new one of the name differs.
    section=
    seen=
    while IFS= read -r line; do  # gitmem.branch.<name>.created, read from the config file: no process
        case "$line" in
            "[gitmem \\"branch.${ref#refs/heads/}\\"]"*) section=1 ;;
            "["*) section= ;;
            *created*=*) [ -n "$section" ] && seen=${line#*= } ;;
        esac
    done < "$common/config"
    [ -n "$seen" ] || return 0
    tab=$(printf '\t')
    when=${entry%%"$tab"*}
    when=${when% *}
    new=${entry#* }
    [ "$seen" != "${when##* } ${new%% *} ${entry#*"$tab"}" ]
}
has_work "$@" || exit "$status"
""",
    "post-merge": """\
# nothing to do unless a branch with memory came in (tips reachable from HEAD, not from ORIG_HEAD)
has_work() {
    [ "$1" = 1 ] && return 0  # a squash merge moves no HEAD: Python says which command brings its memory
    mem=$(git for-each-ref --format='%(refname)' refs/memory refs/memory-remotes 2>/dev/null) || return 0
    [ -n "$mem" ] || return 1
    if [ -z "${GIT_DIR:-}" ] && [ -d .git ] && [ ! -f .git/commondir ] && read -r head < .git/HEAD; then
        b=${head#ref: refs/heads/}  # the usual layout, read without starting git
        [ "$b" != "$head" ] || return 1  # detached: gitmem does nothing there either
    else
        b=$(git symbolic-ref -q --short HEAD) || return 1
    fi
    brought=$(git for-each-ref --format='%(refname)' --merged HEAD --no-merged ORIG_HEAD refs/heads refs/remotes \
        2>/dev/null) || return 0
    for r in $brought; do
        case "$r" in
            "refs/heads/$b") continue ;;  # the branch itself: only its pulled (remote-tracking) tips count
            refs/heads/*) name=${r#refs/heads/} ;;
            *) name=${r#refs/remotes/*/} ;;
        esac
        for m in $mem; do
            case "$m" in "refs/memory/$name"|refs/memory-remotes/*/"$name") return 0 ;; esac
        done
    done
    return 1
}
has_work "$@" || exit "$status"
""",
    "post-rewrite": """\
# nothing to do in a repository without memory, its own or fetched (a rebasing pull brings the team's)
[ -n "$(git for-each-ref --count=1 --format=x refs/memory refs/memory-remotes 2>/dev/null)" ] || exit "$status"
""",
    "pre-push": """\
# nothing to do unless memory is pushed, or a pushed branch has memory the remote lacks (gitmem.prePush)
has_work() {
    mode=$(git config gitmem.prePush 2>/dev/null) || mode=warn
    printf '%s' "$input" | while read -r local_ref _ remote_ref _; do
        case "$remote_ref" in """ + _GITMEM_GLOBS + """) echo y; break ;; esac  # judged by where it goes, too
        [ "$local_ref" = HEAD ] && local_ref=$(git symbolic-ref -q HEAD)  # `git push origin HEAD`, remote setup's refspec
        case "$local_ref" in
            """ + _GITMEM_GLOBS + """) echo y; break ;;
            refs/heads/*)
                [ "$mode" = off ] && continue
                ours=$(git rev-parse -q --verify "refs/memory/${local_ref#refs/heads/}") || continue
                theirs=$(git rev-parse -q --verify "refs/memory-remotes/$1/${local_ref#refs/heads/}") || { echo y; break; }
                [ "$ours" = "$theirs" ] || { echo y; break; } ;;
        esac
    done | grep -q y
}
has_work "$@" || exit "$status"
""",
}

_FOREGROUND = """{feed}run "$@"; rc=$?
    [ "$rc" -eq {refused} ] && exit 1  # pre-push only: memory being pushed holds a secret
    if [ "$hook" = pre-push ] && [ "$rc" -ne 0 ]; then  # memory never leaves unchecked
        case "$input" in {anywhere}) echo "gitmem: the memory being pushed was not checked; push refused" >&2; exit 1;; esac
    fi
    [ "$rc" -ne 0 ] && [ "$rc" -ne {skipped} ] && echo "gitmem: $hook hook failed; git is not affected" >&2"""
_BACKGROUND = """if [ "${{GITMEM_HOOK_MODE:-$(git config gitmem.hookMode)}}" = foreground ]; then
    {foreground}
else  # background (default): git returns at once; messages go to gitmem/hooks.log
    ifs=$IFS; IFS='
'; set -f; set -- $(git rev-parse HEAD --symbolic-full-name HEAD --git-common-dir 2>/dev/null)  # as of this commit
    IFS=$ifs; set +f  # split on newlines only: a path may hold spaces (or glob characters)
    log="$3/gitmem/hooks.log"
    # exec first: `run ... >>"$log" &` had the shell keep a copy of git's stdout and stderr while run ran (to
    # restore them after), so a caller reading git's output to its end waited for the hook
    mkdir -p "${{log%/*}}" && (exec </dev/null >>"$log" 2>&1; run "$1" "$2" &)
fi"""


#: The variable the pre-commit framework sets instead of git's hook arguments (see _from_pre_commit):
#: under it the shell tests, which read git's arguments, are skipped and Python decides.
_PRE_COMMIT_VARS = {"post-checkout": "PRE_COMMIT_CHECKOUT_TYPE", "pre-push": "PRE_COMMIT_REMOTE_NAME"}


def _guarded(hook: str) -> str:
    test = _PRECHECKS.get(hook, "")
    var = _PRE_COMMIT_VARS.get(hook)
    if not test or not var:
        return test
    return f'if [ -z "${{{var}:-}}" ]; then  # not under the pre-commit framework\n{test}fi\n'


def script(hook: str, python: Optional[str] = None) -> str:
    """The hook program for ``hook``; ``python`` is the interpreter that has gitmem
    (None: find ``gitmem`` on PATH, as the copies in the repository's hooks/ do)."""
    if hook not in HOOKS:
        raise GitmemError(f"unknown hook {hook!r} (gitmem has: {', '.join(HOOKS)})")
    if python and any(c in python for c in '"$`\\\n'):
        raise GitmemError(f"cannot write {python!r} into a shell script; set GITMEM_PYTHON instead")
    feed = "printf '%s' \"$input\" | " if hook in _STDIN_HOOKS else ""
    foreground = _FOREGROUND.format(feed=feed, refused=REFUSED, skipped=SKIPPED,
                                    anywhere="|".join(f"*{prefix}*" for prefix in GITMEM_PREFIXES))
    return _summed(_TEMPLATE.format(
        marker=MARKER, hook=hook, suffix=CHAINED_SUFFIX, python=python or "", feed=feed, skipped=SKIPPED,
        read_stdin='input=$(cat; echo x); input=${input%x}\n' if feed else "",
        precheck=_guarded(hook),
        dispatch=_BACKGROUND.format(foreground=foreground) if hook in BACKGROUND_HOOKS else foreground,
    ))


def _digest(text: str) -> str:
    import hashlib  # here: only installs and uninstalls need it

    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _summed(text: str) -> str:
    return f"{text}{_SUM}{_digest(text)}\n"


def _edited(path: str) -> bool:
    """Whether a hook of gitmem's at ``path`` was changed since gitmem wrote it (a line added, say): its lines
    no longer match their digest, or something follows it. One without a digest (an older gitmem wrote it) is
    taken as written."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            text = f.read()
    except OSError:
        return False
    at = text.rfind(f"\n{_SUM}")
    if at < 0:
        return False
    body, rest = text[:at + 1], text[at + 1:]
    return rest != f"{_SUM}{_digest(body)}\n"


def _keep_edited(path: str) -> Optional[str]:
    """Move an edited hook of gitmem's (:func:`_edited`) aside, to the first free ``<hook>.gitmem-edited[.N]``,
    before gitmem replaces or removes it: the edits are someone's work. Returns where it went."""
    if not _edited(path):
        return None
    target, n = path + EDITED_SUFFIX, 1
    while os.path.lexists(target):
        target, n = f"{path}{EDITED_SUFFIX}.{n}", n + 1
    os.rename(path, target)
    return target


def hooks_dir(repo: pygit2.Repository) -> str:
    """Where git runs hooks from: ``core.hooksPath`` (relative to the worktree
    root), else the common git dir's hooks/ (shared by linked worktrees)."""
    from .repo import common_dir, config_get

    configured = config_get(repo, "core.hooksPath")
    if configured:
        path = os.path.expanduser(configured)
        if not os.path.isabs(path):
            path = os.path.join(repo.workdir or repo.path, path)
        return os.path.normpath(path)
    return os.path.join(common_dir(repo), "hooks")


def hooks_path_beyond(repo: pygit2.Repository) -> bool:
    """Whether ``core.hooksPath`` comes from a config file beyond this repository's (the user's or the system's):
    hooks installed there then run in every repository that reads that file, not only in this one."""
    from .repo import common_dir, config_get

    if not config_get(repo, "core.hooksPath"):
        return False
    for own in (os.path.join(common_dir(repo), "config"), os.path.join(repo.path, "config.worktree")):
        try:
            if "core.hooksPath" in pygit2.Config(own):
                return False
        except (pygit2.GitError, OSError):
            continue
    return True


#: Where gitmem keeps its scripts, under the common git dir, when the hooks folder is not its to write.
OWN_DIR = "gitmem/hooks"
#: The folders installs wrote scripts to, one a line, under the common git dir: ``core.hooksPath`` may change
#: after an install, and an uninstall must still find them (and put back the hooks they chained).
INSTALLED = "gitmem/hooks-installed"


@dataclass(frozen=True)
class Placement:
    """Where gitmem's scripts go. ``entry`` is None when git runs them straight from ``folder`` (the hooks
    folder); else it is the folder of the user's own hook files, each of which must call gitmem's script
    with :func:`line`, and ``reason`` says why gitmem may not write into the hooks folder."""

    folder: str
    entry: Optional[str] = None
    reason: Optional[str] = None
    #: The hooks folder (``entry``) does not exist in this worktree: git runs no hooks here, and no line helps.
    missing: bool = False


def placement(repo: pygit2.Repository) -> Placement:
    """A hooks folder git sees (a hook file tracked, or one gitmem would add shown as untracked) is the
    team's: a script written there would be committed with this machine's python in it, and a tracked hook
    moved aside would show as deleted. husky v9's folder (see :func:`husky_entry`) is husky's: rewritten on
    every `npm install`. gitmem's scripts then go under the git dir, and the user's hook files call them. One
    git would show that this worktree lacks (husky's in a new linked worktree, before `npm install` there) is
    the tool's to make: gitmem writes nothing into the worktree, and git runs no hooks here until it exists."""
    from .repo import common_dir

    folder = hooks_dir(repo)
    own = os.path.join(common_dir(repo), *OWN_DIR.split("/"))
    husky = husky_entry(folder)
    if husky:
        return Placement(own, husky, f"core.hooksPath ({folder}) is husky's folder, which husky writes again on "
                                     f"every `npm install` (gitmem's hooks there would vanish)")
    seen = _seen_by_git(repo, folder)
    if seen is None:
        return Placement(folder)
    if not os.path.isdir(folder):  # untracked and not here: a tool makes it (husky's, by `npm install`)
        return Placement(own, folder, f"core.hooksPath ({folder}) names a folder that does not exist in this "
                                      "worktree", missing=True)
    return Placement(own, folder, f"core.hooksPath ({folder}) is a folder git {seen}")


def husky_entry(folder: str) -> Optional[str]:
    """The folder of the user's husky hooks (``.husky``) when ``folder`` is husky v9's generated one:
    named ``_``, holding husky's dispatcher ``h``, which runs ``../<hook>`` with ``sh -e``."""
    if os.path.basename(folder) == "_" and os.path.isfile(os.path.join(folder, "h")):
        return os.path.dirname(folder)
    return None


def _seen_by_git(repo: pygit2.Repository, folder: str) -> Optional[str]:
    """How git sees hook files in ``folder`` ("tracks ..." / "would show ..."), or None when it does not."""
    from .repo import common_dir

    if repo.is_bare or not repo.workdir:
        return None
    root, where = os.path.realpath(repo.workdir), os.path.realpath(folder)
    if os.path.commonpath([root, where]) != root or any(
            os.path.commonpath([git_dir, where]) == git_dir for git_dir in map(os.path.realpath, (repo.path, common_dir(repo)))):
        return None
    rel = os.path.relpath(where, root).replace(os.sep, "/")
    files = [name if rel == "." else f"{rel}/{name}" for name in HOOKS]
    try:
        tracked = [f for f in files if f in repo.index]
        shown = [f for f in files if f not in tracked and not repo.path_is_ignored(f)]
    except pygit2.GitError:
        return "may track"
    if tracked:
        return f"tracks ({', '.join(tracked)})"
    if shown:
        return "would show as untracked files to commit"
    return None


def line(name: str) -> str:
    """The line a user's own hook file needs to run gitmem's script for ``name``: a no-op in a clone
    where gitmem's hooks are not installed; a refusing pre-push stops the hook (plain sh or ``sh -e``)."""
    return (f'gitmem_hook="$(git rev-parse --git-common-dir)/{OWN_DIR}/{name}"; '
            f'[ ! -x "$gitmem_hook" ] || "$gitmem_hook" "$@" || exit $?  # gitmem')


@dataclass(frozen=True)
class HookState:
    """``state``: "installed" (ours), "absent", "other" (a hook gitmem did not write), or "needs-line"
    (gitmem's script is ready but the user's hook file at ``path`` does not call it: add ``line``)."""

    name: str
    path: str
    state: str
    chained: bool
    line: Optional[str] = None
    #: Where this install or uninstall kept the edited copy of gitmem's hook it replaced or removed.
    kept: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "path": self.path, "state": self.state, "chained": self.chained,
                "line": self.line, "kept": self.kept}


def _is_ours(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return MARKER.encode() in f.read(300)
    except OSError:
        return False


def _calls_ours(path: str, name: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f"{OWN_DIR}/{name}".encode() in f.read()
    except OSError:
        return False


def status(repo: pygit2.Repository) -> List[HookState]:
    where = placement(repo)
    out = []
    for name in HOOKS:
        path = os.path.join(where.folder, name)
        state = "absent" if not os.path.lexists(path) else ("installed" if _is_ours(path) else "other")
        if where.entry is None:
            out.append(HookState(name, path, state, os.path.lexists(path + CHAINED_SUFFIX)))
            continue
        entry = os.path.join(where.entry, name)
        if where.missing:
            out.append(HookState(name, entry, "absent", False))  # no file git would run: the folder is not here
            continue
        if state == "installed" and not _calls_ours(entry, name):
            state = "needs-line"
        out.append(HookState(name, entry, state, False, line(name) if state != "installed" else None))
    return out


def install(repo: pygit2.Repository, *, python: Optional[str] = None,
            names: Sequence[str] = HOOKS) -> List[HookState]:
    """Write the hooks, moving any existing hook aside to ``<hook>.gitmem-chained``
    (it keeps running first). Re-installing only refreshes gitmem's scripts.
    Where the hooks folder is the team's (see :func:`placement`) nothing there changes:
    the scripts go under the git dir, and hooks whose file lacks :func:`line` come back "needs-line"."""
    where = placement(repo)
    folder = where.folder
    python = python or sys.executable
    kept: Dict[str, str] = {}
    try:
        _note_installed(repo, folder)  # first: a failure halfway leaves scripts an uninstall must find
        if where.entry is not None:  # an earlier gitmem wrote there: put back what it moved aside
            kept.update(_remove_ours(hooks_dir(repo)))
        os.makedirs(folder, exist_ok=True)
        for name in names:
            path = os.path.join(folder, name)
            if os.path.lexists(path) and not _is_ours(path):
                if os.path.lexists(path + CHAINED_SUFFIX):
                    raise GitmemError(f"{path}{CHAINED_SUFFIX} already exists; move it away and install again")
                os.rename(path, path + CHAINED_SUFFIX)
            elif os.path.lexists(path) and (aside := _keep_edited(path)):
                kept[name] = aside
            replace_file(path, script(name, python), follow=False, mode=0o755)
    except OSError as e:
        raise GitmemError(f"could not install hooks in {folder}: {e}") from None
    return _with_kept(status(repo), kept)


def uninstall(repo: pygit2.Repository) -> List[HookState]:
    """Remove gitmem's hooks and put back what was there before, byte for byte
    (a user's hook file calling gitmem is the user's: its line stays, and does nothing). Every folder an
    install wrote to is cleaned, not only the one ``core.hooksPath`` names now: a script left in another
    would run again, with the user's hook still renamed aside, once ``core.hooksPath`` points there again."""
    kept: Dict[str, str] = {}
    for folder in _installed_folders(repo):
        try:
            kept.update(_remove_ours(folder))
        except OSError as e:
            raise GitmemError(f"could not uninstall hooks in {folder}: {e}") from None
    try:
        os.unlink(_record(repo))
    except FileNotFoundError:
        pass
    except OSError as e:
        raise GitmemError(f"could not remove {_record(repo)}: {e}") from None
    return _with_kept(status(repo), kept)


def _record(repo: pygit2.Repository) -> str:
    from .repo import common_dir

    return os.path.join(common_dir(repo), *INSTALLED.split("/"))


def _noted(repo: pygit2.Repository) -> List[str]:
    """The folders installs wrote to, as :data:`INSTALLED` notes them."""
    try:
        with open(_record(repo), encoding="utf-8", errors="replace") as f:
            return [line for line in f.read().splitlines() if line]
    except FileNotFoundError:
        return []
    except OSError as e:
        raise GitmemError(f"could not read {_record(repo)}: {e}") from None


def _note_installed(repo: pygit2.Repository, folder: str) -> None:
    noted = _noted(repo)
    folder = os.path.abspath(folder)
    if folder not in noted:
        replace_file(_record(repo), "".join(f"{line}\n" for line in [*noted, folder]), follow=False)


def _installed_folders(repo: pygit2.Repository) -> List[str]:
    """Where gitmem's scripts may be: the folders installs noted, the hooks folder git uses now and where
    gitmem's scripts would go now, and the two an install that noted nothing (an older gitmem's) could have
    used: the git dir's hooks/ and gitmem's own folder."""
    from .repo import common_dir

    common = common_dir(repo)
    candidates = [*_noted(repo), placement(repo).folder, hooks_dir(repo), os.path.join(common, "hooks"),
                  os.path.join(common, *OWN_DIR.split("/"))]
    return list(dict.fromkeys(os.path.abspath(folder) for folder in candidates))


def _remove_ours(folder: str) -> Dict[str, str]:
    """Remove gitmem's hooks in ``folder``, putting back the ones they chained; an edited one is kept aside
    (:func:`_keep_edited`): answers where, by hook name."""
    kept = {}
    for name in HOOKS:
        path = os.path.join(folder, name)
        if os.path.lexists(path) and _is_ours(path):
            aside = _keep_edited(path)
            if aside:
                kept[name] = aside
            else:
                os.unlink(path)
            if os.path.lexists(path + CHAINED_SUFFIX):
                os.rename(path + CHAINED_SUFFIX, path)
    return kept


def _with_kept(states: List[HookState], kept: Mapping[str, str]) -> List[HookState]:
    from dataclasses import replace

    return [replace(s, kept=kept[s.name]) if s.name in kept else s for s in states]


# --- what the hooks do -----------------------------------------------------------


def main(argv: Sequence[str], stdin: Optional[str] = None, cwd: str = ".") -> int:
    """Entry of the hook scripts: run hook ``argv[0]``; exit 0, except that a
    plain `git push` of memory holding a secret is refused (:data:`REFUSED`)."""
    if not argv:
        print("gitmem: hook name missing", file=sys.stderr)
        return 0
    name, args = argv[0], list(argv[1:])
    try:
        if stdin is None:
            stdin = sys.stdin.read() if name in _STDIN_HOOKS and not sys.stdin.isatty() else ""
        if not args and any(k.startswith("PRE_COMMIT_") for k in os.environ):
            args, stdin = _from_pre_commit(name, stdin)
        for line in run(name, args, stdin, cwd):
            print(f"gitmem: {line}", file=sys.stderr)
    except SecretFound as e:  # the refusals: memory pushed by plain git with a secret in it ...
        print(f"gitmem: {e}; push refused (see docs/remotes.md to remove it)", file=sys.stderr)
        return REFUSED
    except (ForcedMemory, SetAsideMemory) as e:  # ... or forced back, or set aside here
        print(f"gitmem: {e}", file=sys.stderr)
        return REFUSED
    except Exception as e:  # noqa: BLE001 - a hook must never break git
        if name == "pre-push" and (memory_updates(stdin or "") or memory_deletions(stdin or "")):  # ... but memory
            # never leaves unscanned, nor goes from the remote unchecked
            print(f"gitmem: could not check the memory being pushed ({_one_line(e)}); push refused",
                  file=sys.stderr)
            return REFUSED
        print(f"gitmem: warning: {name} hook skipped: {e}", file=sys.stderr)
    return 0


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:200] if text else type(e).__name__


def _from_pre_commit(name: str, stdin: str):
    """The pre-commit framework passes git's hook arguments as PRE_COMMIT_* variables."""
    env = os.environ.get
    if name == "post-checkout":
        return [env("PRE_COMMIT_FROM_REF", ""), env("PRE_COMMIT_TO_REF", ""), env("PRE_COMMIT_CHECKOUT_TYPE", "")], stdin
    if name == "post-merge":
        return [env("PRE_COMMIT_IS_SQUASH_MERGE", "0")], stdin
    if name == "post-rewrite":
        return [env("PRE_COMMIT_REWRITE_COMMAND", "")], stdin
    if name == "pre-push" and env("PRE_COMMIT_REMOTE_NAME"):
        line = f"{env('PRE_COMMIT_LOCAL_BRANCH', '')} {env('PRE_COMMIT_TO_REF', '')} - -\n"
        return [env("PRE_COMMIT_REMOTE_NAME", ""), env("PRE_COMMIT_REMOTE_URL", "")], stdin or line
    return [], stdin


def run(name: str, args: Sequence[str], stdin: str = "", cwd: str = ".") -> List[str]:
    """Do the work of one hook; returns the messages to show. May raise."""
    handler = _HANDLERS.get(name)
    if handler is None:
        raise GitmemError(f"unknown hook {name!r}")
    from .store import Store

    branch = None
    if name == "post-commit" and len(args) >= 2:  # run in the background: HEAD may have moved since
        if not args[1].startswith("refs/heads/"):
            return []  # the commit was made on a detached HEAD
        branch = args[1][len("refs/heads/"):]
    store = Store.open(cwd, branch)
    if store.notice and name != "pre-push":  # detached HEAD (rebase in progress, bisect): nothing to do, but for
        return _rebase_checkout(store, list(args)) if name == "post-checkout" else []  # a rebase that picks nothing
    return handler(store, list(args), stdin)


def _post_commit(store: Store, args: List[str], stdin: str) -> List[str]:
    from .branches import record_fork
    from .checkpoint import link_commit

    head = args[0] if args else head_commit(store.repo)
    if not head:
        return []
    record_fork(store.repo, store.branch)  # first use of a branch created without the hook
    link = link_commit(store, head, source="hook")  # first: what was written while resolving, say
    # A merge commit made by `git commit` concludes a merge that stopped (a conflict, or --no-commit): git
    # runs post-merge only for a merge it commits itself, so the branches' memory merges here.
    commit = store.repo[head].peel(pygit2.Commit)
    out = _merge_memory(store, head, _before_merge(store.repo, head, commit)) if len(commit.parents) > 1 else []
    if link.memory_ids:
        out.append(f"linked {head[:10]} to {plural(len(link.memory_ids), 'memory')}")
    out.extend(_cherry_pick_hint(store, head))
    from .export import refresh  # opt-in with `gitmem export --write --on-commit`

    out.extend(refresh(store))
    return out


def _cherry_pick_hint(store: Store, head: str) -> List[str]:
    """A cherry-pick copies code, never memory: say so, and with `-x` name the memories linked to
    the picked commit and the branch whose memory holds them."""
    import re

    try:
        entries = list(store.repo.references[f"refs/heads/{store.branch}"].log())
    except (KeyError, pygit2.GitError, OSError):
        return []
    latest = entries[0] if entries else None
    if latest is None or str(latest.oid_new) != head or not (latest.message or "").startswith("cherry-pick"):
        return []
    picked = re.findall(r"\(cherry picked from commit ([0-9a-f]{40})\)", store.repo[head].peel(pygit2.Commit).message or "")
    if not picked:
        return ["cherry-pick copies code, not memory: if the picked commit had memory on another branch, "
                "`gitmem merge BRANCH` brings that branch's memory (with `git cherry-pick -x` gitmem names it)"]
    from .refs import memory_names
    from .store import Store

    mine = set(store.memories())
    found: Dict[str, List[str]] = {}
    for name, _ref in memory_names(store.repo):
        if name == store.branch:
            continue
        for m in Store(store.repo, name).memories().values():
            if picked[-1] in m.commits and m.id not in mine:
                found.setdefault(name, []).append(m.id)
    return [f"cherry-picked {picked[-1][:10]}: its memory on {name} did not come along ({', '.join(ids)}); "
            f"`gitmem merge {name}` brings it (with all of {name}'s memory)" for name, ids in found.items()]


def _post_checkout(store: Store, args: List[str], stdin: str) -> List[str]:
    from .branches import aside_notice, created_now, follow_rename, record_fork, set_aside, set_aside_for

    if len(args) < 3 or args[2] != "1":
        return []  # a file checkout
    try:
        log = list(store.repo.references[f"refs/heads/{store.branch}"].log())
    except (KeyError, pygit2.GitError, OSError):
        return []
    if len(log) != 1:  # not a branch created just now
        return []
    if args[0] == _ZERO and not (log[0].message or "").startswith("branch: Created from"):
        return []  # the initial checkout of a clone (`git worktree add -b` creates a branch from nothing, too)
    if not created_now(store.repo, store.branch, log[0]):
        return []  # checked out again before its first commit: decided when it was created
    out = []
    if renamed := follow_rename(store.repo, store.branch):
        heir, where = renamed
        out.append(f"the memory {store.branch!r} held when it was renamed to {heir!r} " + (
            f"moved with it to {heir!r}" if where == heir else
            f"is now {where!r} ({heir!r} has written memory since): `gitmem --branch {heir} merge {where}` brings it in"))
    elif aside := set_aside(store.repo, store.branch):
        out.append(f"the memory an earlier branch {store.branch!r} left is now {aside!r} (the code it was written for "
                   f"is gone, or it is merged already): `gitmem merge {aside}` brings it in")
    elif aside := set_aside_for(store.repo, store.branch):  # a teammate's branch, made again under that name
        out.append(aside_notice(store.branch, aside))
    parent = record_fork(store.repo, store.branch, commit=args[1], again=True)
    if parent:
        out.append(f"branch {store.branch!r} reads the memory of {parent!r} until its first write")
    return out


def _rebase_checkout(store: Store, args: List[str]) -> List[str]:
    """The checkout that starts a rebase, detaching HEAD at the new base. `git rebase main` on a branch with no
    commits main lacks picks nothing: git then moves the branch to main's tip and runs no post-rewrite, so the
    memory main's code brings merges here, as `git merge main`'s post-merge merges it. Only when the rebase has
    nothing left to do (its todo holds no command but noop): one that can still stop (a `break`, an `exec`) may
    be aborted, having brought nothing. The apply backend leaves no trace of the branch it moves before it
    ends: a fast-forward there is told the command that merges."""
    if len(args) < 3 or args[2] != "1":
        return []
    state = os.path.join(store.repo.path, "rebase-merge")
    if not os.path.isdir(state):
        return _apply_fast_forward_hint(store.repo, args[0], args[1])
    head_name, todo, onto, orig = (_read_text(os.path.join(state, name))
                                   for name in ("head-name", "git-rebase-todo", "onto", "orig-head"))
    if (head_name or "").strip() != f"refs/heads/{store.branch}" or todo is None or (onto or "").strip() != args[1] or not orig:
        return []
    commands = [line.split()[0] for line in todo.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if any(command != "noop" for command in commands):
        return []  # post-rewrite merges after the picks, once the rebase has ended
    return _merge_memory(store, args[1], orig.strip())


def _apply_fast_forward_hint(repo: pygit2.Repository, old: str, new: str) -> List[str]:
    """`git rebase --apply main` that fast-forwards (see :func:`_rebase_checkout`): HEAD's reflog says a rebase
    checked out ``new``, which contains ``old``, so git moves the branch there next."""
    from .branches import reachable

    try:
        latest = next(iter(repo.references["HEAD"].log()), None)
    except (KeyError, pygit2.GitError, OSError):
        return []
    start = "rebase (start): checkout "
    if latest is None or str(latest.oid_new) != new or not (latest.message or "").startswith(start) \
            or old == new or not reachable(repo, old, new):
        return []
    onto = latest.message[len(start):].strip()
    branch = onto if f"refs/heads/{onto}" in repo.references else "BRANCH"  # a commit, a remote-tracking ref
    return [f"this rebase fast-forwards the branch to {onto} and brings none of its memory (`git rebase --apply` "
            f"does not say which branch it moves): `gitmem merge {branch}` brings it"]


def _read_text(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def _post_merge(store: Store, args: List[str], stdin: str) -> List[str]:
    head = head_commit(store.repo)
    if not head:
        return []
    out = _merge_memory(store, head, _before_merge(store.repo, head, store.repo[head].peel(pygit2.Commit)))
    if args and args[0] == "1":
        out.append("squash merge: git does not say which branch it was; run `gitmem merge BRANCH`")
    return out


def _merge_memory(store: Store, head: str, before: Optional[str]) -> List[str]:
    """Merge the memory of the branches whose code moving the branch from ``before`` to ``head`` brought in;
    what it did, as lines."""
    from .branches import aside_notice, blocked_notice, held_notice, merge_branches, merged_by, reachable, \
        written_elsewhere
    from .checkpoint import link_commit
    from .store import Store

    repo = store.repo
    commit = repo[head].peel(pygit2.Commit)
    names = merged_by(repo, store.branch, head, before)
    for name in names:  # a merge run at once may beat the branch's last post-commit, run in the background
        code = ref_target(repo, f"refs/heads/{name}")
        if name != store.branch and code and reachable(repo, code, head):
            try:  # as that hook would; it then finds it done
                link_commit(Store(repo, name), code, source="hook")
            except GitmemError:  # damaged memory, no identity: the merge below names what stops it
                pass
    into = store.tip()
    held = [name for name in names if name != store.branch and written_elsewhere(repo, name, head, into)]
    result = merge_branches(store, [name for name in names if name not in held], source="hook")
    merged = result.merged
    if len(commit.parents) > 1 and any(m["kind"] != "up-to-date" for m in merged):
        link_commit(store, head, source="hook")  # a merge commit that brought memory: the checkpoint stands at it
    return [aside_notice(*item) for item in result.set_aside.items()] + [line for line in map(_describe, merged) if line] \
        + [blocked_notice(entry) for entry in result.blocked] + [held_notice(name, store.branch) for name in held]


def _before_merge(repo: pygit2.Repository, head: str, commit: pygit2.Commit) -> Optional[str]:
    """Where the branch stood before the merge: ORIG_HEAD, which git sets then. Not the merge commit's first
    parent: `git merge A B C` first fast-forwards to A when it can, which makes A's tip the first parent.
    A missing or stale ORIG_HEAD (not an ancestor of HEAD) gives the first parent, or None: all is new."""
    from .branches import reachable

    orig = _orig_head(repo)
    if orig and reachable(repo, orig, head):
        return orig
    return str(commit.parent_ids[0]) if len(commit.parents) > 1 else None


def _orig_head(repo: pygit2.Repository) -> Optional[str]:
    """ORIG_HEAD: where a merge, a rebase or a reset found the branch, or None."""
    try:
        return str(repo.revparse_single("ORIG_HEAD").peel(pygit2.Commit).id)
    except (KeyError, ValueError, pygit2.GitError):
        return None


def _describe(m: Dict[str, Any]) -> str:
    if m["kind"] == "up-to-date":
        return ""
    text = f"merged memory of {m['branch']} ({m['kind']}: {len(m['added'])} added, {len(m['changed'])} changed)"
    if m["conflicts"]:
        text += f"; {plural(len(m['conflicts']), 'conflict')}: see `gitmem conflicts`"
    if m.get("redacted"):
        from .merge import arrival_notice

        text += f"; {arrival_notice(m['redacted'])}"
    return text


def _post_rewrite(store: Store, args: List[str], stdin: str) -> List[str]:
    from .checkpoint import rewrite_commits

    mapping = {}
    for line in stdin.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            mapping[parts[0]] = parts[1]
    commit = rewrite_commits(store, mapping, source="hook")
    out = [f"memory follows {plural(len(mapping), 'rewritten commit')}"] if commit else []
    if args and args[0] == "rebase":  # `git pull --rebase` runs no post-merge: the memory its code brings, as sync
        from .branches import held_notice, sync
        from .checkpoint import link_commit, link_landed

        links = link_landed(store, list(mapping), source="hook")  # memory written while the rebase stopped
        out += [f"linked {link.code_commit[:10]} to {plural(len(link.memory_ids), 'memory')} written during the rebase"
                for link in links]

        # The code the rebase put under the branch (main's, after `git rebase main`) brings its memory, as `git
        # merge main` would: tips reachable now, not from where the branch stood (ORIG_HEAD). sync leaves out the
        # branches this one was forked from, whatever code came.
        head, orig, before = head_commit(store.repo), _orig_head(store.repo), store.own_tip()
        if head and orig:
            out += _merge_memory(store, head, orig)
        synced = sync(store, source="hook")
        out += [_describe(m) for m in synced.merged if m["kind"] != "up-to-date"]
        out += [line for line in (held_notice(name, store.branch) for name in synced.held) if line not in out]
        if head and store.own_tip() != before:  # the checkpoint stands at HEAD, as after a merge
            link_commit(store, head, source="hook")
    return out


def _pre_push(store: Store, args: List[str], stdin: str) -> List[str]:
    """Refuse a push that sends a secret or set-aside memory under refs/memory/, forces memory back or deletes
    it; then tell what it sends of a fetch's quarantine (a mirror's), and remind of the code's memory."""
    url = args[1] if len(args) > 1 else None  # where git pushes
    updates = memory_updates(stdin)
    _refuse_set_aside(store, updates)
    # first: what a push would send, and that its tips are commits
    _refuse_memory_secrets(store, updates, args[0] if args else None, url)
    remote = args[0] if args else "the remote"
    _refuse_forced_memory(store, remote, updates)
    _refuse_deleted_memory(store, remote, url, memory_deletions(stdin), updates)
    quarantined = [dst for _, _, dst, _ in updates if dst.startswith(INCOMING_PREFIX)]
    notes = [f"{', '.join(quarantined)}: memory a fetch that did not finish held for the trust gate, not checked by "
             f"it, goes too (scanned for secrets); `gitmem fetch` removes such refs"] if quarantined else []
    return notes + _memory_with_code(store, args, stdin, updates)


def _memory_with_code(store: Store, args: List[str], stdin: str, updates: List[List[str]]) -> List[str]:
    """gitmem.prePush: for each code branch pushed whose memory the remote lacks, nothing, a reminder, or a push
    of that memory."""
    from .branches import REMOTE_PREFIX, reachable
    from .repo import config_get, current_branch, memory_ref

    if os.environ.get("GITMEM_HOOK") == "pre-push":
        return []  # the memory push gitmem itself runs from here (it scanned already)
    mode = (config_get(store.repo, "gitmem.prePush") or "warn").lower()
    if mode not in PRE_PUSH_MODES:
        return [f"gitmem.prePush={mode!r} is not one of {', '.join(PRE_PUSH_MODES)}; treating it as warn"]
    if mode == "off" or not args:
        return []
    remote = args[0]
    sent = {dst[len(REF_PREFIX):]: tip for _, tip, dst, _ in updates if dst.startswith(REF_PREFIX)}  # this push
    head = current_branch(store.repo)
    branches, missing = [], []
    for line in stdin.splitlines():
        source = (line.split() or [""])[0]
        if source == "HEAD" and head[1] is None:  # `git push origin HEAD`, and `gitmem remote setup`'s push refspec
            source = f"refs/heads/{head[0]}"
        if source.startswith("refs/heads/"):
            name = source[len("refs/heads/"):]
            local = ref_target(store.repo, memory_ref(name))
            pushed = ref_target(store.repo, f"{REMOTE_PREFIX}{remote}/{name}")
            if local and not reachable(store.repo, local, pushed) and not reachable(store.repo, local, sent.get(name)):
                branches.append(name)
                if pushed is None:
                    missing.append(name)
    if not branches:
        return []
    if mode == "warn":
        command = f"gitmem push {remote}" + (" --all" if len(branches) > 1 else "")
        ahead = [b for b in branches if b not in missing]  # on the remote, without the latest writes
        # With no copy of the remote's memory here (never fetched or pushed by gitmem, or fetched with plain git),
        # that a branch is missing there is not known, as `gitmem status` says.
        copies = False
        if missing:
            from .remote import remote_branches

            copies = bool(remote_branches(store.repo, remote))
        said = ([f"memory of {', '.join(missing)} is {'not on' if copies else 'not known to be on'} {remote}"]
                if missing else []) + \
               ([f"memory of {', '.join(ahead)} has writes {remote} lacks"] if ahead else [])
        return [f"{'; '.join(said)}: run `{command}` (or `git config gitmem.prePush push` to push it with the code)"]
    try:
        from . import remote as remote_module
    except ImportError:
        return ["this gitmem cannot push memory yet; memory stays local"]
    os.environ["GITMEM_HOOK"] = "pre-push"
    try:
        outcome = remote_module.push(store, remote, branches=branches, source="hook", interactive=False)
    finally:
        os.environ.pop("GITMEM_HOOK", None)
    return [f"memory to {remote}: " + ", ".join(f"{b.branch} {b.status}{f' ({b.message})' if b.message else ''}"
                                                for b in outcome)]


def memory_updates(stdin: str) -> List[List[str]]:
    """The pre-push lines (local ref, local sha, remote ref, remote sha) that send memory: to or from any of
    gitmem's refs (:data:`gitmem.repo.GITMEM_PREFIXES`), not only ``refs/memory/``, since `git push --mirror`
    sends set-aside memory, fetched copies and a fetch's quarantine refs too. Judged by the destination ref as
    well as the source, so `git push origin <sha>:refs/memory/main` and `refs/heads/x:refs/memory/main` count.
    Deletions send nothing and are left out."""
    return [parts for parts in _push_lines(stdin)
            if parts[1] != _ZERO and (parts[0].startswith(GITMEM_PREFIXES) or parts[2].startswith(GITMEM_PREFIXES))]


def memory_deletions(stdin: str) -> List[Tuple[str, str]]:
    """(remote ref, its tip) of each pre-push line that deletes a memory ref on the remote."""
    return [(parts[2], parts[3]) for parts in _push_lines(stdin)
            if parts[1] == _ZERO and parts[2].startswith(REF_PREFIX) and parts[3] != _ZERO]


def _push_lines(stdin: str) -> List[List[str]]:
    """The lines git gives a pre-push hook, split: local ref, local sha, remote ref, remote sha."""
    return [parts for parts in map(str.split, stdin.splitlines()) if len(parts) == 4]


def _refuse_deleted_memory(store: Store, remote: str, url: Optional[str], deleted: List[Tuple[str, str]],
                           updates: List[List[str]]) -> None:
    """Memory is never deleted from a remote by accident: `git push --prune` and `--mirror` over `remote setup`'s
    refspec delete every remote memory ref this clone lacks, so a teammate's pushed memory nobody pulled went,
    and each clone's next fetch dropped its copy. A deletion (``deleted``: :func:`memory_deletions`) goes only
    when what the ref holds stays: in the memory another of the remote's memory refs holds after this push
    (``updates`` among them: merged, or renamed), or dropped here at that tip (`gitmem prune`, or set aside: what
    :func:`gitmem.remote.earlier_memory_notice` tells to delete)."""
    if not deleted:
        return
    from .branches import dropped_here, reachable
    from .remote import fetch, memory_refs_at

    repo = store.repo
    gone = {ref for ref, _ in deleted}
    after = {ref: tip for ref, tip in memory_refs_at(repo, url or remote, False, remote).items() if ref not in gone}
    after.update((dst, local) for _, local, dst, _ in updates if dst.startswith(REF_PREFIX))
    unseen = [ref[len(REF_PREFIX):] for ref, tip in [*deleted, *after.items()] if tip not in repo]
    if unseen and remote in repo.remotes.names():
        try:
            fetch(repo, remote, unseen, interactive=False)
        except GitmemError:
            pass  # what is still not here is refused below
    lost = [ref for ref, tip in deleted if tip not in repo or not (
        any(reachable(repo, tip, kept) for kept in after.values()) or dropped_here(repo, ref[len(REF_PREFIX):], tip))]
    if lost:
        raise ForcedMemory(f"refusing to delete {remote}'s {', '.join(lost)}: memory no other memory ref there holds, "
                           "not dropped here (`git push --prune` and `--mirror` delete every memory ref this clone "
                           f"lacks); push refused: `gitmem pull` brings it here; to delete it on purpose, "
                           f"`git push --no-verify {remote} {' '.join(':' + ref for ref in lost)}`")


def _refuse_set_aside(store: Store, updates: List[List[str]]) -> None:
    """Memory set aside here that an earlier gitmem kept under ``refs/memory/``, where `gitmem remote setup`'s
    refspec pushes from: a hook cannot leave it out of the push, so the push is refused once, with that memory
    moved where it is kept now (:func:`gitmem.refs.memory_names`); the same push again sends the rest."""
    from .refs import memory_names
    from .repo import memory_ref

    kept = [ref for ref, *_ in updates if ref.startswith(REF_PREFIX) and ref != memory_ref(ref[len(REF_PREFIX):])]
    if kept:
        memory_names(store.repo)
        raise SetAsideMemory(f"{', '.join(kept)}: memory set aside here, kept in this clone and not pushed, moved to "
                             f"refs/memory-aside/; push refused: push again to send the rest")


def _refuse_forced_memory(store: Store, remote: str, updates: List[List[str]]) -> None:
    """Memory is never forced. git applies `git push -f` and `--force-with-lease`, given for code, to every
    refspec, `gitmem remote setup`'s memory one too: a memory ref behind the remote's would be forced back and
    the team's memory rewound. So a push that would move a remote memory ref to a commit lacking its tip (or
    whose tip is not here to tell) is refused whole, before anything is sent.

    A tip moved since this clone's last fetch is fetched first: the memory of an earlier branch of that name,
    dropped or set aside here, is one no pull takes (:func:`gitmem.branches.dropped_here`), so "pull first"
    would lead to git's own non-fast-forward refusal; the advice is `gitmem push`'s
    (:func:`gitmem.remote.earlier_memory_notice`).

    Only memory to or from ``refs/memory/``, which the team shares: gitmem's other refs are this clone's own,
    sent only by `git push --mirror` to a copy of this clone, where whatever the last mirror left is replaced."""
    from .branches import dropped_here, reachable

    moved = [(ref, tip) for source, local, ref, tip in updates
             if (source.startswith(REF_PREFIX) or ref.startswith(REF_PREFIX))
             and tip != _ZERO and (tip not in store.repo or not reachable(store.repo, tip, local))]
    if not moved:
        return
    from .remote import earlier_memory_notice, fetch

    unseen = [ref[len(REF_PREFIX):] for ref, tip in moved if tip not in store.repo and ref.startswith(REF_PREFIX)]
    if unseen and remote in store.repo.remotes.names():
        try:
            fetch(store.repo, remote, unseen, interactive=False)
        except GitmemError:
            pass  # told as moved, below
    earlier = [ref[len(REF_PREFIX):] for ref, tip in moved if ref.startswith(REF_PREFIX) and tip in store.repo
               and dropped_here(store.repo, ref[len(REF_PREFIX):], tip)]
    if earlier:
        raise ForcedMemory(f"refusing: {'; '.join(earlier_memory_notice(remote, b) for b in earlier)}; push refused")
    behind = [ref for ref, tip in moved if tip in store.repo]
    why = f"{remote}'s {', '.join(behind)} holds memory this push lacks" if behind else \
        f"{remote}'s {', '.join(ref for ref, _ in moved)} moved since the last fetch"
    raise ForcedMemory(f"refusing: {why}, and memory is never forced back; push refused: run `gitmem pull` "
                       f"first (or `git fetch {remote}`), or push the code alone (`git push {remote} <branch>`)")


def _refuse_memory_secrets(store: Store, updates: List[List[str]], remote: Optional[str] = None,
                           url: Optional[str] = None) -> None:
    """A plain `git push` sending anything to or from gitmem's refs (after `gitmem remote setup`, by hand, or
    a `--mirror` sending set-aside memory, fetched copies and quarantine refs too) gets the same outgoing scan
    as `gitmem push`: every object it sends, and the tip must be a memory commit. Anything that goes wrong
    here refuses the push (see :func:`main`).
    A ref new to the remote is scanned past what ``url`` (where git pushes) holds under its other memory refs,
    as `gitmem push` does (:func:`gitmem.remote.held_tips`: tips this clone lacks are fetched from ``remote``)."""
    if not updates:
        return
    tips = [parts[1] for parts in updates]
    known = [parts[3] for parts in updates if parts[3] != _ZERO and parts[3] in store.repo]
    from .remote import held_tips, outgoing_secrets, secret_names

    named = secret_names(parts[2] for parts in updates)
    if named:
        raise SecretFound(named)
    if remote and url and any(parts[3] == _ZERO for parts in updates):
        known += held_tips(store.repo, remote, url=url, interactive=False)

    found = outgoing_secrets(store.repo, tips, known)
    if found:
        raise SecretFound(found)


_HANDLERS = {
    "post-commit": _post_commit, "post-checkout": _post_checkout, "post-merge": _post_merge,
    "post-rewrite": _post_rewrite, "pre-push": _pre_push,
}
