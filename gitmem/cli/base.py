"""What every command shares: the `main` group, the global options, opening the store,
JSON output and the author options. Library errors become one line and exit 1 here."""

from __future__ import annotations

import atexit
import contextlib
import errno
import functools
import gc
import importlib
import os
import re
import sys
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional

import click

from .. import __version__
from ..errors import GitmemError, NoIdentity
from ..text import inert, inert_json

if TYPE_CHECKING:
    from ..store import Store


# A command's process is about to end: its objects need no last garbage collection (the exit frees them
# all), and that collection scanned every object since start-up, 6-9 ms of each command. Registered first,
# so it runs after every other exit handler (the index closing its connection, for one).
atexit.register(gc.freeze)


class Settings:
    """The global options every command reads (a plain class: ``gitmem --version`` should not wait for
    the dataclasses module, about 2 ms of its start)."""

    __slots__ = ("path", "branch")

    def __init__(self, path: str = ".", branch: Optional[str] = None):
        self.path, self.branch = path, branch


def pad(text: str, width: int) -> str:
    """``text`` padded to ``width`` terminal columns, as ``str.ljust`` pads to characters: an East Asian wide
    or fullwidth character takes two columns (``ljust`` counted one, and the columns after a CJK branch
    name slipped), a combining mark none."""
    if text.isascii():
        return text.ljust(width)
    import unicodedata  # here: a 1 MB extension that ASCII names, most of them, never need

    used = sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)
    return text + " " * (width - used)


def echo(text: str = "", **kwargs: Any) -> None:
    """``click.echo`` for human output that may hold memory text or authors: control characters made inert."""
    click.echo(inert(text), **kwargs)


class GitmemGroup(click.Group):
    """Turns library errors into one line and exit code 1, and imports a command's module only
    when that command runs (``lazy``: command name -> module under ``gitmem.cli``), so
    ``gitmem --version`` and each command start with only what they need."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: Dict[str, str] = {}

    def get_command(self, ctx: click.Context, cmd_name: str) -> Optional[click.Command]:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            importlib.import_module(f"{__package__}.{self.lazy[cmd_name]}")
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> List[str]:
        return sorted(set(self.commands) | set(self.lazy))

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except GitmemError as e:
            raise click.ClickException(inert(str(e))) from None
        except click.UsageError as e:  # it quotes the value given: a token pasted in the wrong place, into a CI log
            from ..redact import redact

            shown = redact(e.format_message())[0]
            if shown == e.format_message():
                raise
            raise click.UsageError(shown, e.ctx) from None
        except BrokenPipeError:  # `gitmem log | head`
            sys.stderr.close()
            raise SystemExit(0) from None
        except OSError as e:
            if e.errno not in _REFUSED:
                raise
            if e.filename is None:  # the output's own write: its flush at exit would fail and say so again
                with contextlib.suppress(OSError):  # (output a test captures has no descriptor)
                    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            what = e.strerror or str(e)
            raise click.ClickException(inert(f"{e.filename}: {what}" if e.filename else what)) from None


# What the system refuses to a write anywhere (a read-only .git, a full disk, a file of another user's): the
# machine's state, not a bug in gitmem, so one line like any other error and not a traceback.
_REFUSED = frozenset((errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT))


@click.group(cls=GitmemGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="gitmem")
@click.option("-C", "path", default=".", metavar="PATH", help="Run as if started in PATH.")
@click.option("--branch", metavar="NAME", help="Use the memory of code branch NAME instead of HEAD's.")
@click.pass_context
def main(ctx: click.Context, path: str, branch: Optional[str]) -> None:
    """gitmem: git-native memory for AI coding agents.

    Memories (decisions, rejections with their reason, conventions, facts,
    actions, file summaries, checkpoints, notes) are YAML blobs committed to
    refs/memory/<branch>, one commit per write, so `git log refs/memory/main`
    is the audit trail.

    Example: gitmem add decision "Use pygit2, not subprocess" --because "one process per write is slow"
    """
    if sys.stdin is None:  # started with stdin closed (`<&-`): `-` reads nothing, and the next file opened
        sys.stdin = open(os.devnull, encoding="utf-8")  # does not take descriptor 0, where children look for stdin
    ctx.obj = Settings(path=path, branch=branch)


def read_text_argument(text: str, name: str = "TEXT") -> str:
    """An argument ``-`` means: read it from stdin (`echo ... | gitmem add fact -`), as git and most tools do."""
    if text != "-":
        return text
    # A file saved on Windows (CRLF, a byte-order mark) reads as the same text as one saved elsewhere.
    data = sys.stdin.read().removeprefix("\ufeff").replace("\r\n", "\n")
    if not data.strip():
        raise click.UsageError(f"{name} is '-' but stdin was empty")
    return data.rstrip("\n")


class Utf8Text(click.ParamType):
    """Text a command searches for or echoes back (a query, a proposal): bytes that are not UTF-8 are
    refused here, as ``add`` refuses them in a memory, not written raw into JSON no parser accepts."""

    name = "text"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> Any:
        from ..repo import undecodable

        shown = undecodable(value)
        if shown is not None:
            raise GitmemError(f"invalid {param.name if param and param.name else 'text'} {shown}: not valid UTF-8")
        return value


UTF8_TEXT = Utf8Text()


class RepoPath(click.ParamType):
    """A path as git takes one on the command line: relative to where the command runs (``-C`` included),
    given to the library relative to the repository's root (``sub/`` + ``x.py`` is ``sub/x.py``, and
    ``./src`` is ``src``). One outside it is refused, as git refuses it, named as typed: relative to the root
    it would be ``../../etc/passwd`` for ``/etc/passwd``. Where the work tree is not found here, the path goes
    on as typed."""

    name = "path"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> Any:
        from ..gitdir import Unsure, discover
        from ..repo import open_repository, undecodable

        shown = undecodable(value)
        if shown is not None:  # an error here, not a crash where SQLite or libgit2 meets it
            raise GitmemError(f"invalid path {shown}: not valid UTF-8")
        settings = ctx.find_object(Settings) if ctx is not None else None
        here = os.path.abspath(settings.path if settings is not None else ".")
        try:
            root: Optional[str] = discover(here).workdir
        except Unsure:
            root = None
            if os.environ.get("GIT_DIR") or os.environ.get("GIT_WORK_TREE"):  # the work tree they name
                try:
                    root = open_repository(here).workdir
                except GitmemError:
                    pass
        if not root:
            return value
        if not value or "\x00" in value:
            return value  # the library names what is wrong with it
        from ..model import inside_repository

        inside = inside_repository(os.path.relpath(os.path.join(here, value), root).replace(os.sep, "/"), value)
        return value if inside == os.curdir else inside


#: The type of every ``--path`` option.
REPO_PATH = RepoPath()


def open_store(ctx: Optional[click.Context] = None) -> Store:
    """The store for the global -C/--branch options; prints a notice (detached HEAD) once."""
    from ..store import Store

    settings: Settings = (ctx or click.get_current_context()).find_object(Settings) or Settings()
    store = Store.open(settings.path, settings.branch)
    if settings.branch is not None:
        from ..branches import require_known

        require_known(store.repo, settings.branch)  # a typo must not read main's memory or fork a stray ref
    if store.notice:
        click.echo(f"gitmem: {store.notice}", err=True)
    return store


def note_backlog(store: Store) -> None:
    """After a person's search or check answered, bounded by :data:`gitmem.recall.PERSON_BUDGET`: when memories
    waited for vectors, start embedding them in the background and say so in one line on stderr (a search that
    sat silent for an hour, embedding a fresh clone, could not be told from a hung one)."""
    from ..backlog import start_if_waiting
    from ..recall import mode

    behind = start_if_waiting(store)
    if behind:
        words = "by words only: " if mode(store).startswith("lexical") else ""
        click.echo(f"gitmem: {words}{behind:,} memories wait for vectors; embedding them in the background "
                   "(`gitmem embed` embeds them now)", err=True)


def pass_store(f: Callable) -> Callable:
    """Give the command a ``store`` argument opened from the global options."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return f(open_store(), *args, **kwargs)

    return wrapper


def json_option(f: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON (its shape: the JSON line above).")(f)


def emit_json(data: Any) -> None:
    """Print ``data`` as JSON: the exact text, its control characters escaped (:func:`~gitmem.text.inert_json`)."""
    click.echo(inert_json(data, indent=2))


def emit_json_list(head: Dict[str, Any], key: str, items: Iterable[Any]) -> int:
    """:func:`emit_json` of ``head`` with ``key`` last holding ``items``, byte for byte, each item printed as
    it comes (a listing of 100,000 memories need not be held whole); returns how many there were."""
    text = inert_json({**head, key: []}, indent=2)
    n = 0
    for n, item in enumerate(items, 1):
        body = inert_json(item, indent=2).replace("\n", "\n    ")
        click.echo(f"{text[:-3]}\n    {body}" if n == 1 else f",\n    {body}", nl=False)
    click.echo(text if n == 0 else "\n  ]\n}")
    return n


def edit_in_editor(header: str, values: dict, allowed) -> dict:
    """Open $EDITOR on ``values`` as YAML under a comment ``header``; return the
    parsed mapping, refusing keys outside ``allowed``."""
    import yaml

    if not (sys.stdin.isatty() and sys.stdout.isatty()) and not (os.environ.get("VISUAL") or os.environ.get("EDITOR")):
        raise click.UsageError("no terminal to open an editor in: pass the fields as options (e.g. --text), "
                               "or set $EDITOR")
    edited = click.edit(header + yaml.safe_dump(values, sort_keys=False, allow_unicode=True))
    if edited is None:
        raise click.ClickException("edit aborted: nothing saved")
    from ..model import safe_load

    try:
        data = safe_load(edited) or {}  # a key typed twice is named, not the last one silently kept
    except yaml.YAMLError as e:
        raise click.ClickException(f"not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict) or set(data) - set(allowed):
        raise click.ClickException(f"only these fields can be edited: {', '.join(allowed)}")
    return data


_AUTHOR_RE = re.compile(r"^\s*(?P<name>[^<>]+?)\s*<(?P<email>[^<>]*)>\s*$")


def author_options(f: Callable) -> Callable:
    """--author/--agent/--source for every write; default author is git's user.name/email.

    Goes below ``@pass_store``, which supplies the store the default author comes from."""

    @click.option("--author", metavar='"NAME <EMAIL>"', help="Who is writing (default: git user.name/email).")
    @click.option("--agent", is_flag=True, help="The writer is an AI agent.")
    @click.option("--human", is_flag=True, help="The writer is a person (default).")
    @click.option("--source", default=None, metavar="TOOL",
                  help="Which tool writes: cli, hook, ci, mcp:<client>... (default: cli, or $GITMEM_SOURCE).")
    @functools.wraps(f)
    def wrapper(*args: Any, author: Optional[str], agent: bool, human: bool, source: Optional[str], **kwargs: Any):
        from ..model import Author, check_email, check_name, check_source
        from ..repo import author_kind, default_author

        if agent and human:
            raise click.UsageError("--agent and --human contradict each other: give one")
        kind = "agent" if agent else "human" if human else author_kind()
        if author:
            m = _AUTHOR_RE.match(author)
            if not m:
                raise click.BadParameter(f'{author!r}: use "Name <email>"', param_hint="--author")
            name, email = m.group("name"), m.group("email")
            check_name(name, "--author")
            check_email(email, "--author")
        else:
            try:
                base = default_author(args[0].repo)  # pass_store sits above: args[0] is the store
            except NoIdentity as e:  # a hook or an agent's tool has no --author: only a command's refusal names it
                raise NoIdentity(f'{e.fix}, or pass --author "Name <email>"') from None
            name, email = base.name, base.email
        who = Author(name=name, email=email, kind=kind)
        where = "--source" if source else "$GITMEM_SOURCE"
        source = source or os.environ.get("GITMEM_SOURCE") or "cli"
        check_source(source, where)  # one rule, and the error names where the source came from
        return f(*args, who=who, source=source, **kwargs)

    return wrapper
