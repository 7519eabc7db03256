"""The local web UI: a Starlette app over the library, bound to 127.0.0.1.

Pages (GET, read-only): ``/memory`` (one branch's memory, filters, search),
``/memory/<id>`` (YAML, history with diffs, linked code commits), ``/audit``
(every write across branches, paged), ``/branches`` (each branch against its
parent, conflicts), ``/cost`` (the last recorded run's bill and chart).
Writes (POST, form-encoded, CSRF token required): ``/add``, ``/supersede``,
``/retract``, ``/resolve``; each is recorded with the person's git identity and
source ``web-ui``, then redirects back (post/redirect/get). The add form carries a
one-time key, so the same form sent twice (a double click, a page the back
button restored) adds one memory; the supersede and retract forms carry the
version they showed, so neither lands on a newer one nobody read.

Security: the server only listens on 127.0.0.1; every request whose Host is not
a loopback name, or whose Origin (when sent) is not this server's own, is
refused, which defeats DNS rebinding and posts from another local port; every
write needs the per-process CSRF token embedded in the forms; all output goes
through the escaping helpers of :mod:`.html`, and a strict
Content-Security-Policy forbids scripts altogether.
"""

from __future__ import annotations

import functools
import hmac
import os
import secrets
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Union
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..errors import Changed, GitmemError, InvalidMemory, NotFound, Repeated, Superseded
from ..model import ID_RE, Author
from ..serving import on_library_thread, scope_refusal
from ..warm import Warm
from . import pages
from .html import url

if TYPE_CHECKING:
    from ..store import Page

SOURCE = "web-ui"
DEFAULT_PORT = 8737
MAX_FORM_BYTES = 256 * 1024
PAGE_SIZE = 50
#: The memory page shows this many a page (its newer/older links lead on), the newest a tree's summary keeps:
#: the first page reads no further (a page of 10,000 cards helps nobody and takes seconds to render).
LIST_LIMIT = Warm.NEWEST
#: A search pages through its best this many pages: a page is ranked with every page above it (page 1,000
#: of 90,000 matches took 5 s at 100,000 memories), and words or a filter find the rest sooner.
SEARCH_PAGES = 20
#: The forms' label of each field a memory's check may name (the library's words are the CLI's: --because).
LABELS = {"type": "Type", "title": "Title", "text": "Text", "reason": "Reason", "tags": "Tags", "paths": "Paths"}
HEADERS = [
    (b"content-security-policy", b"default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
                                 b"frame-ancestors 'none'; base-uri 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
]
_STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")


class LocalOnly:
    """ASGI middleware: refuse a foreign Host or Origin (DNS rebinding, another site), add security headers."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = scope_refusal(scope, same_origin=True)
        if problem:
            await PlainTextResponse(problem + "\n", status_code=403)(scope, receive, send)
            return

        async def with_headers(message: Dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = list(message["headers"]) + HEADERS
            await send(message)

        await self.app(scope, receive, with_headers)


class _Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def create_app(repo_path: str = ".", *, csrf_token: Optional[str] = None) -> Starlette:
    """The web UI for the repository at ``repo_path`` (opened now, so a wrong path fails fast).

    ``csrf_token`` defaults to a fresh random token per app (per server process)."""
    from ..store import Store

    root = Store.open(repo_path)  # raises NotARepository
    repo_label = root.repo.workdir or root.repo.path
    token = csrf_token or secrets.token_urlsafe(32)

    def open_store(branch: Optional[str]) -> Store:
        """The store of ``branch`` (none: the one HEAD names); a name that is no branch here is an error, as
        the CLI's ``--branch`` is, never a read of main's memory or, on a form, a stray memory ref."""
        from ..branches import require_known

        store = Store.open(repo_path, branch or None)
        if branch:
            require_known(store.repo, branch)
        return store

    def person(store: Store) -> Author:
        from ..repo import default_author

        found = default_author(store.repo)
        return Author(found.name, found.email, "human")  # a person clicked the button

    def signer(store: Store) -> Union[Author, str]:
        """Who a page's forms record a write as, or why none can be (no git identity): reading needs none, as
        `gitmem list` does not, so a page shows the memory and says what to set instead of failing."""
        try:
            return person(store)
        except GitmemError as e:
            return str(e)

    def page_number(params: Mapping[str, str]) -> int:
        """A page link's ``page=N`` (1 where it is none)."""
        try:
            return max(1, int(params.get("page", "1")))
        except ValueError:
            return 1

    def html(body: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(body, status_code=status)

    def failure(e: Exception) -> HTMLResponse:
        status = 404 if isinstance(e, NotFound) else 400
        return html(pages.error_page(repo=repo_label, status=status, message=str(e)), status)

    def page(fn: Callable[[Request], Any]) -> Callable[[Request], Any]:
        """A GET page, run on the library's one thread (see :func:`gitmem.serving.on_library_thread`): library
        errors become an escaped error page, not a traceback."""

        @functools.wraps(fn)
        def wrapper(request: Request) -> Any:
            try:
                return on_library_thread(fn, request)
            except GitmemError as e:
                return failure(e)

        return wrapper

    def done(params: Mapping[str, str]) -> Optional[str]:
        """The flash line after a redirect; only well-formed ids are echoed back."""
        for key, verb in (("added", "Added"), ("superseded", "Superseded"), ("retracted", "Retracted"),
                          ("resolved", "Resolved the conflict in")):
            value = params.get(key, "")
            if ID_RE.match(value):
                return f"{verb} {value}."
        return None

    def branch_names(store: Store) -> List[str]:
        from ..audit import memory_branches

        names = {b for b, _ in memory_branches(store.repo)}
        names |= {r[len("refs/heads/"):] for r in store.repo.references if r.startswith("refs/heads/")}
        names.add(store.branch)
        return sorted(names)

    # --- memory ------------------------------------------------------------------

    def memory_view(params: Mapping[str, str], *, form: Optional[Mapping[str, str]] = None,
                    error: Optional[str] = None, status: int = 200) -> HTMLResponse:
        from ..conflicts import pending
        from ..model import inside_repository
        from ..backlog import allowance, start_if_waiting
        from ..recall import AGENT_BUDGET, find, waiting
        from ..search import is_stale

        store = open_store(params.get("branch"))
        read_from, tip = store.read_from()
        keys = ("q", "type", "tag", "path", "author_kind", "source", "status")
        filters = {k: params.get(k, "").strip() for k in keys}
        wanted = filters["status"] or "active"
        narrowing = {k: filters[k] or None for k in ("type", "tag", "path", "author_kind", "source")}
        if filters["path"]:  # refused as `gitmem list --path` refuses it, not shown as "0 memories"
            narrowing["path"] = inside_repository(filters["path"])
        status_kept = None if wanted == "all" else wanted
        items: List[Any]
        shown: List[Any]
        problems: List[Any] = []
        listed: Optional["Page"] = None  # a list's page; a search's is ``number``, with ``more`` after it
        number, more = page_number(params), False
        by_words: Optional[int] = None  # memories still to embed when the search went by words for them
        if filters["q"]:  # from the index when nothing narrows it, as `gitmem search`; paged by rank, not by id
            number = min(number, SEARCH_PAGES)
            hits = find(store, filters["q"], number * LIST_LIMIT + 1, filters=narrowing, status=status_kept,
                        budget=allowance(store, AGENT_BUDGET))
            start_if_waiting(store)
            behind = waiting(store)
            if behind and hits and all(hit.similarity is None for hit in hits):  # as MCP recall says it
                by_words = behind
            items, shown = hits[(number - 1) * LIST_LIMIT:number * LIST_LIMIT], []  # a hit says whether it is stale
            more = len(hits) > number * LIST_LIMIT
            if store.summary()["counts"].get("invalid"):  # named as the plain page names them (a full load: rare)
                store.memories()
                problems = store.problems
        else:
            before, after = (cursor(params, k) for k in ("before", "after"))
            listed = store.page(LIST_LIMIT, before=before, after=after, **narrowing, status=status_kept)
            problems = store.problems
            items = shown = listed.memories
        blobs = store.current_blobs(shown)
        body = pages.memory_page(conflicts=pending(store, tip) if items else {},
            repo=repo_label, branch=store.branch, branches=branch_names(store), read_from=read_from, tip=tip,
            filters=filters, items=items, listed=listed, number=number, more=more, per_page=LIST_LIMIT,
            last_page=SEARCH_PAGES, by_words=by_words,
            stale_ids={m.id for m in shown if is_stale(m, blobs)}, csrf=token, key=secrets.token_urlsafe(24),
            who=signer(store), form=form or {}, flash=done(params), error=error, problems=problems)
        return html(body, status)

    def cursor(params: Mapping[str, str], name: str) -> Optional[str]:
        """A page link's ``before``/``after`` id: a position among ids, so only a well-formed one."""
        value = params.get(name, "").strip()
        if value and not ID_RE.match(value):
            raise GitmemError(f"{name}={value!r} is not a memory id: follow the page's newer/older links")
        return value or None

    @page
    def memory(request: Request) -> Response:
        return memory_view(request.query_params)

    def one_memory_view(branch: Optional[str], memory_id: str, params: Mapping[str, str], *,
                        form: Optional[Mapping[str, str]] = None, error: Optional[str] = None,
                        status: int = 200) -> HTMLResponse:
        from ..audit import code_commits, versions
        from ..conflicts import pending
        from ..model import dump_yaml
        from ..search import is_stale

        store = open_store(branch)
        m = store.get(memory_id)
        linked = list(m.commits) + ([m.commit] if m.commit else [])
        body = pages.one_memory_page(
            repo=repo_label, branch=store.branch, m=m, yaml_text=dump_yaml(m).decode("utf-8"),
            versions=versions(store, m.id), commits=code_commits(store.repo, linked),
            stale=is_stale(m, store.current_blobs([m])), csrf=token, who=signer(store),
            flash=done(params), error=error, conflict=pending(store).get(m.id), form=form)
        return html(body, status)

    @page
    def one_memory(request: Request) -> Response:
        return one_memory_view(request.query_params.get("branch"), request.path_params["id"], request.query_params)

    # --- audit -------------------------------------------------------------------

    @page
    def audit(request: Request) -> Response:
        import calendar
        import time

        from ..audit import memory_branches, trail
        from ..branches import require_known
        from ..model import check_choice

        q = request.query_params
        filters = {k: q.get(k, "").strip() for k in ("branch", "kind", "source", "since", "until")}
        if filters["branch"]:  # as open_store: a typo is an error, not an empty trail
            require_known(root.repo, filters["branch"])
        check_choice("author kind", filters["kind"] or None, ("agent", "human"))

        def day(value: str, end: bool) -> Optional[int]:
            if not value:
                return None
            try:
                start = calendar.timegm(time.strptime(value, "%Y-%m-%d"))
            except ValueError:
                raise GitmemError(f"{value!r} is not a date like 2026-01-31") from None
            return start + 86399 if end else start

        number = page_number(q)
        result = trail(root.repo, offset=(number - 1) * PAGE_SIZE, limit=PAGE_SIZE,
                       branches=[filters["branch"]] if filters["branch"] else None,
                       author_kind=filters["kind"] or None, source=filters["source"] or None,
                       since=day(filters["since"], False), until=day(filters["until"], True))
        names = [b for b, _ in memory_branches(root.repo)]
        return html(pages.audit_page(repo=repo_label, page=result, filters=filters, branches=names, number=number))

    # --- branches ----------------------------------------------------------------

    def branches_view(params: Mapping[str, str], error: Optional[str] = None, status: int = 200) -> HTMLResponse:
        from ..branches import diff, list_branches
        from ..errors import ShallowHistory
        from ..merge import list_conflicts
        from ..repo import default_branch
        from ..store import Store

        rows = []
        for info in list_branches(root.repo):
            store = Store(root.repo, info.name)
            row: Dict[str, Any] = {"info": info}
            if info.parent:
                try:
                    row["diff"] = diff(store, info.parent, info.name)
                except ShallowHistory as e:  # its base is behind a shallow fetch's cut: said, not guessed
                    row["no_diff"] = str(e)
            if info.conflicts:
                row["conflicts"] = list_conflicts(store)
            rows.append(row)
        body = pages.branches_page(repo=repo_label, rows=rows, default=default_branch(root.repo), csrf=token,
                                   who=signer(root), flash=done(params), error=error)
        return html(body, status)

    @page
    def branches(request: Request) -> Response:
        return branches_view(request.query_params)

    # --- cost --------------------------------------------------------------------

    @page
    def cost(request: Request) -> Response:
        from ..bill import POLICY_LABELS, latest_request, latest_run, load_run, make_bill, render_svg
        from ..price_table import configured_price_table

        path = latest_run(root)
        run = bill = svg = last = None
        errors = []
        if path:
            try:
                run = load_run(path)
                bill = make_bill(run, configured_price_table(root))
                svg = render_svg(bill)
            except (GitmemError, KeyError, TypeError, ValueError) as e:
                errors.append(f"the last run ({os.path.basename(path)}) cannot be billed: {e}")
        try:
            last = latest_request(root)
        except GitmemError as e:
            errors.append(str(e))
        body = pages.cost_page(repo=repo_label, bill=bill, run_path=path, run=run, svg=svg,
                               request=last, labels=POLICY_LABELS, error="; ".join(errors) or None)
        return html(body)

    # --- writes ------------------------------------------------------------------

    async def read_form(request: Request) -> Dict[str, str]:
        """The urlencoded form (no other body: 415), line breaks as LF, after checking its CSRF token (constant-time)."""
        media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media != "application/x-www-form-urlencoded":  # what the pages' forms send; text/plain is a script's
            raise _Refused(415, "a form is sent as application/x-www-form-urlencoded")
        too_big = _Refused(413, f"form is over {MAX_FORM_BYTES} bytes")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_FORM_BYTES:
            raise too_big  # refused before a byte of the body is read
        chunks: List[bytes] = []
        size = 0
        async for chunk in request.stream():  # counted while it arrives: an undeclared body stops here
            size += len(chunk)
            if size > MAX_FORM_BYTES:
                raise too_big
            chunks.append(chunk)
        body = b"".join(chunks)
        try:
            # strict: %ff%fe is bytes that are no UTF-8 as much as raw ones are (not stored as U+FFFD)
            parsed = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False, errors="strict")
        except UnicodeDecodeError:
            raise _Refused(400, "form is not UTF-8") from None
        # a browser sends each line break of a form as CRLF (HTML's form encoding): stored as `gitmem add` stores one
        form = {k: v[0].replace("\r\n", "\n") for k, v in parsed.items()}
        if not hmac.compare_digest(form.get("csrf", "").encode(), token.encode()):
            raise _Refused(403, "missing or wrong CSRF token: reload the page and submit again")
        return form

    def action(fn: Callable[[Dict[str, str]], Any]) -> Callable[[Request], Any]:
        @functools.wraps(fn)
        async def endpoint(request: Request) -> Response:
            try:
                form = await read_form(request)
            except _Refused as e:
                return PlainTextResponse(str(e) + "\n", status_code=e.status)
            return await run_in_threadpool(on_library_thread, fn, form)

        return endpoint

    def split(value: str) -> List[str]:
        return [p for p in value.replace(",", " ").split() if p]

    def worded(e: GitmemError) -> str:
        """``e`` naming a field by the form's label (Reason, not --because)."""
        return e.worded(LABELS[e.field]) if isinstance(e, InvalidMemory) and e.field in LABELS else str(e)

    @action
    def add(form: Dict[str, str]) -> Response:
        branch = form.get("branch", "")
        try:
            store = open_store(branch)
            w = store.add(form.get("type", ""), form.get("text", ""), title=form.get("title", "").strip() or None,
                          reason=form.get("reason", "").strip() or None, tags=split(form.get("tags", "")),
                          paths=split(form.get("paths", "")), author=person(store), source=SOURCE,
                          key=form.get("key") or None, since=form.get("since") or None)
        except GitmemError as e:
            status, then = 400, ""
            if isinstance(e, Repeated):
                if e.same:  # the same form sent again (a double click): answered as the first send was
                    return RedirectResponse(url("/memory", branch=store.branch, added=e.memory_id), status_code=303)
                status, then = 409, "; send the form again to add this text as another memory"
            try:
                return memory_view({"branch": branch}, form=form, error=f"Not added: {worded(e)}{then}", status=status)
            except GitmemError:
                return failure(e)
        return RedirectResponse(url("/memory", branch=store.branch, added=w.memory.id), status_code=303)

    @action
    def supersede(form: Dict[str, str]) -> Response:
        memory_id = form.get("id", "").strip()
        try:
            if not memory_id:  # as retract: a form without its memory is a bad request
                raise GitmemError("no memory to supersede: use the Supersede form on the memory's page")
            store = open_store(form.get("branch"))
            # paths left as the form showed them are kept as stored: split again, "docs/My Notes.md" would be two
            paths = form.get("paths", "")
            kept = paths == pages.as_typed(store.get(memory_id))["paths"]
            w = store.supersede(memory_id, form.get("text", ""), title=form.get("title", "").strip() or None,
                                reason=form.get("reason", "").strip() or None, tags=split(form.get("tags", "")),
                                paths=None if kept else split(paths), author=person(store), source=SOURCE,
                                seen=form.get("seen") or None)
        except NotFound as e:
            return failure(e)
        except Superseded as e:  # by this form sent before (answered as then), or by another: shown, with the text
            if e.same:
                return RedirectResponse(url(f"/memory/{e.successor}", branch=store.branch, superseded=e.memory_id),
                                        status_code=303)
            return one_memory_view(store.branch, e.successor, {}, form=form, error=f"Not superseded: {e}", status=409)
        except GitmemError as e:  # shown on the memory's page as it is now, the form holding what was typed
            try:
                return one_memory_view(form.get("branch"), memory_id, {}, form=form,
                                       error=f"Not superseded: {worded(e)}",
                                       status=409 if isinstance(e, Changed) else 400)
            except GitmemError:
                return failure(e)
        return RedirectResponse(url(f"/memory/{w.memory.id}", branch=store.branch, superseded=w.memory.supersedes),
                                status_code=303)

    @action
    def retract(form: Dict[str, str]) -> Response:
        try:
            if not form.get("id", "").strip():  # a form without its memory is a bad request, not a missing memory
                raise GitmemError("no memory to retract: use the Retract button on the memory's page")
            store = open_store(form.get("branch"))
            w = store.retract(form.get("id", ""), reason=form.get("reason", "").strip() or None,
                              author=person(store), source=SOURCE, seen=form.get("seen") or None)
        except Changed as e:  # decided on an older version: show the newer one, with a form for it
            try:
                return one_memory_view(form.get("branch"), form.get("id", ""), {}, error=f"Not retracted: {e}",
                                       status=409)
            except GitmemError:
                return failure(e)
        except GitmemError as e:
            return failure(e)
        return RedirectResponse(url(f"/memory/{w.memory.id}", branch=store.branch, retracted=w.memory.id),
                                status_code=303)

    @action
    def resolve(form: Dict[str, str]) -> Response:
        from ..merge import resolve as resolve_conflict

        try:
            store = open_store(form.get("branch"))
            take = form.get("take", "")
            if take not in ("ours", "theirs"):
                raise GitmemError("choose which side to keep: ours or theirs")
            w = resolve_conflict(store, form.get("id", ""), take=take, author=person(store), source=SOURCE,
                                 seen=form.get("seen") or None)
        except GitmemError as e:  # a conflict changed since the page showed it (409) is shown as it is now
            try:
                return branches_view({}, error=f"Not resolved: {e}", status=409 if isinstance(e, Changed) else 400)
            except GitmemError:
                return failure(e)
        return RedirectResponse(url("/branches", resolved=w.memory.id), status_code=303)

    def home(request: Request) -> Response:
        query = request.url.query  # /?q=redis is the memory page's search, as a bookmark or a shared link
        return RedirectResponse("/memory" + (f"?{query}" if query else ""), status_code=307)

    app = Starlette(routes=[
        Route("/", home),
        Route("/memory", memory),
        Route("/memory/{id}", one_memory),
        Route("/audit", audit),
        Route("/branches", branches),
        Route("/cost", cost),
        Route("/add", add, methods=["POST"]),
        Route("/supersede", supersede, methods=["POST"]),
        Route("/retract", retract, methods=["POST"]),
        Route("/resolve", resolve, methods=["POST"]),
        Mount("/static", StaticFiles(directory=_STATIC), name="static"),
    ], middleware=[Middleware(LocalOnly)])
    app.state.csrf_token = token
    app.state.repo_path = repo_path
    return app


def serve(repo_path: str = ".", port: int = DEFAULT_PORT, open_browser: bool = False,
          echo: Callable[[str], None] = print) -> None:
    """Serve the UI on 127.0.0.1:``port`` until interrupted (the host is not configurable on purpose)."""
    import threading
    import webbrowser

    from ..serving import listen, run, warm_up

    app = create_app(repo_path)
    sock = listen("127.0.0.1", port)
    warm_up(repo_path)
    address = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    echo(f"gitmem ui: serving {os.path.abspath(repo_path)} on {address} (Ctrl-C stops)")
    if open_browser:
        threading.Timer(0.8, webbrowser.open, [address]).start()
    run(app, sock)


__all__ = ["create_app", "serve", "SOURCE", "DEFAULT_PORT"]
