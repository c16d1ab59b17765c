"""The pages and actions: each handler reads the store, or acts through the runner.

A run id can hold any printable character (``/`` in a child's), so runs are
addressed by a query parameter (``/run?id=…``), never by a path segment.
Pages come whole (``/runs``) or as the live part a script swaps in every few
seconds (``/runs/live``), rendered by the same template. A live part reads
what moved only: a run's answers 204 when its row, step count and children
are what the browser shows (:mod:`.live`), and the waiting list reads the
ledger of a run new to it only.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from ..core.errors import ApprovalError, RunNotFound, SerializationError, StoreUnavailable
from ..core.inputs import inputs_by_name
from ..core.ledger import CHILDREN_WAIT, TERMINAL, RunRecord
from ..core.policy import Policy
from ..core.tags import decode_tags, parse_tag
from ..runner import Runner
from ..runner.registry import Registry
from ..runner.routing import fleet_of
from ..stores import Store
from ..stores.base import StepPage, StepPosition, owner_is_dead
from ..stores.versions import cleared_versions
from . import actions
from .compare import compare, origin_of
from .conversation import Asked, bubbles, pending_ask, turns, usage_by_model
from .cost import cost_table, time_split
from .family import family_tree
from .graph import run_graph
from .health import DEFAULT_WINDOW, WINDOWS, read_health
from .live import SHOWN, Memory, WaitMark, parse_shown, same_shown, shown_token
from .search import check_query, hits_of
from .security import CSRF_FIELD, check_post
from .steps import child_ids, events_of, step_tree
from .timeline import timeline
from .values import (
    RUN_FIELDS,
    STEP_FIELDS,
    age,
    cut,
    error_summary,
    fmt_duration,
    fmt_time,
    load,
    parse_time,
    pretty,
    reading,
    run_duration,
    shown,
    value_link,
)

__all__ = [
    "cancel",
    "compare_page",
    "fork",
    "health_page",
    "home",
    "problem",
    "render",
    "rerun",
    "run_live",
    "run_page",
    "runs_live",
    "runs_page",
    "signal",
    "store_error",
    "value_page",
    "waiting_live",
    "waiting_page",
]

STATUSES = ("pending", "running", "suspended", "succeeded", "failed", "cancelled")
PAGE = 50
MAX_PAGE = 500
WAITING_LIMIT = 100
#: Steps a run's page shows: the latest ones, with links to earlier pages.
#: Each is a whole record (a model call's holds the conversation so far), so
#: a page costs this many records whatever the run's length.
STEP_PAGE = 50


def link(path: str, **params: Any) -> str:
    """``path`` with the non-empty ``params`` as its query, for ``href``s."""
    query = {k: v for k, v in params.items() if v not in (None, "")}
    return f"{path}?{urlencode(query)}" if query else path


_env = jinja2.Environment(
    loader=jinja2.PackageLoader("stalwart.web", "templates"),
    autoescape=True,  # every value is text; none is ever marked safe
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_env.globals.update(
    link=link,
    fmt_time=fmt_time,
    fmt_duration=fmt_duration,
    run_duration=run_duration,
    error_summary=error_summary,
    pretty=pretty,
    age=age,
    decode_tags=decode_tags,
    TERMINAL=TERMINAL,
)


def _page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    context.setdefault("note", "")
    context.setdefault("csrf", getattr(request.state, "csrf", ""))
    context.setdefault("refresh_ms", int(request.app.state.refresh * 1000))
    html = _env.get_template(template).render(request=request, **context)
    return HTMLResponse(html, status_code)


def _problem(request: Request, status_code: int, message: str) -> HTMLResponse:
    return _page(request, "problem.html", status_code, message=message)


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
    """A page of the inspector from one of its templates: what the page
    modules beside this one (:mod:`.experiments`) answer with."""
    return _page(request, template, status_code, **context)


def problem(request: Request, status_code: int, message: str) -> Response:
    """The page that says what is wrong, with ``status_code``."""
    return _problem(request, status_code, message)


def _runner(request: Request) -> Runner:
    runner: Runner = request.app.state.runner
    return runner


def _store(request: Request) -> Store:
    return _runner(request).store  # durable: create_app refuses a memory store


async def store_error(request: Request, exc: Exception) -> Response:
    """A store that is down or refuses a query: say so, don't show a traceback."""
    code = 503 if isinstance(exc, StoreUnavailable) else 500
    return _problem(request, code, f"the store failed: {type(exc).__name__}: {exc}")


async def home(request: Request) -> Response:
    return RedirectResponse("/runs", 303)


# -- runs ------------------------------------------------------------------
@dataclass(frozen=True)
class Filters:
    """The runs list's query, as typed in the form, and as the store takes it."""

    status: str = ""
    policy: str = ""
    queue: str = ""
    text: str = ""
    words: str = ""
    tag: str = ""
    after: str = ""
    before: str = ""
    cursor: str = ""
    limit: int = PAGE

    @classmethod
    def of(cls, request: Request) -> Filters:
        q = request.query_params
        try:
            limit = min(max(int(q.get("limit") or PAGE), 1), MAX_PAGE)
        except ValueError:
            limit = PAGE
        return cls(
            status=q.get("status", ""),
            policy=q.get("policy", ""),
            queue=q.get("queue", ""),
            text=q.get("id", ""),
            words=q.get("q", ""),
            tag=q.get("tag", ""),
            after=q.get("after", ""),
            before=q.get("before", ""),
            cursor=q.get("cursor", ""),
            limit=limit,
        )

    def query(self, **change: Any) -> dict[str, Any]:
        """The query parameters of this list, with ``change`` applied."""
        params = {
            "status": self.status,
            "policy": self.policy,
            "queue": self.queue,
            "id": self.text,
            "q": self.words,
            "tag": self.tag,
            "after": self.after,
            "before": self.before,
            "cursor": self.cursor,
            "limit": self.limit if self.limit != PAGE else "",
        }
        params.update(change)
        return params

    def tags(self) -> dict[str, str] | None:
        """The tag typed as ``key:value`` (ValueError naming it), or None."""
        if not self.tag:
            return None
        key, value = parse_tag(self.tag, ":", "tag")
        return {key: value}

    def cursor_key(self) -> tuple[float, str] | None:
        """``(created_at, id)`` of the last run of the previous page.

        Written as ``<created_at>:<id>``: the timestamp has no colon, the id
        may, so the first colon splits them.
        """
        if not self.cursor:
            return None
        when, sep, run_id = self.cursor.partition(":")
        if not sep:
            raise ValueError(f"bad page cursor {self.cursor[:80]!r}")
        return float(when), run_id


async def _runs_context(request: Request) -> dict[str, Any]:
    store = _store(request)
    f = Filters.of(request)
    problem = ""
    try:
        if f.status and f.status not in STATUSES:
            raise ValueError(f"unknown status {f.status[:40]!r}")
        after = parse_time(f.after)
        before = parse_time(f.before)
        cursor = f.cursor_key()
        tags = f.tags()
        words = check_query(store, f.words) if f.words else []
    except ValueError as exc:
        problem = str(exc)
        after = before = cursor = tags = None
        words = []
        rows: list[RunRecord] = []
    if not problem:
        rows = await store.list_runs(
            f.status or None,
            f.limit,
            queue=f.queue or None,
            policy=f.policy or None,
            id_contains=f.text or None,
            created_after=after,
            created_before=before,
            before=cursor,
            tags=tags,
            text=f.words or None,
        )
    counts = await store.count_runs(queue=f.queue or None, policy=f.policy or None, tags=tags)
    totals = {s: sum(counts.get(s, {}).values()) for s in STATUSES}
    queues = sorted({q for by_queue in counts.values() for q in by_queue})
    last = rows[-1] if len(rows) == f.limit else None
    return {
        "f": f,
        "rows": rows,
        "problem": problem,
        "totals": totals,
        "total": sum(totals.values()),
        "counts": counts,
        "queues": queues,
        "statuses": STATUSES,
        "hits": hits_of(rows, words),
        "text_search": store.text_search,
        "next_cursor": None if last is None else f"{last.created_at!r}:{last.id}",
    }


async def runs_page(request: Request) -> Response:
    context = await _runs_context(request)
    return _page(request, "runs.html", 400 if context["problem"] else 200, **context)


async def runs_live(request: Request) -> Response:
    return _page(request, "runs_live.html", **await _runs_context(request))


# -- two runs --------------------------------------------------------------
async def compare_page(request: Request) -> Response:
    """Two runs side by side (``/compare?a=…&b=…``); with one or none, the
    form that asks for them."""
    q = request.query_params
    ids = (q.get("a", "").strip(), q.get("b", "").strip())
    if not all(ids):
        return _page(request, "compare.html", a=ids[0], b=ids[1], c=None)
    store = _store(request)
    found = {r.id: r for r in await store.get_runs(list(ids))}
    missing = [i for i in ids if i not in found]
    if missing:
        return _problem(request, 404, f"no run {missing[0][:200]!r} in this store")
    with reading():
        c = await compare(store, found[ids[0]], found[ids[1]])
        return _page(request, "compare.html", a=ids[0], b=ids[1], c=c)


# -- one run ---------------------------------------------------------------
def _waits_for_signal(run: RunRecord) -> str | None:
    """The signal a suspended run waits for (None: a timer, or its children)."""
    if run.status != "suspended" or not run.waiting_for:
        return None
    return None if run.waiting_for.startswith(CHILDREN_WAIT) else run.waiting_for


async def _the_run(request: Request) -> RunRecord | Response:
    run_id = request.query_params.get("id", "")
    run = await _store(request).get_run(run_id) if run_id else None
    if run is None:
        return _problem(request, 404, f"no run {run_id[:200]!r} in this store")
    return run


def _abandoned(run: RunRecord) -> bool:
    """Whether a running run's holder is gone: a process of this host that
    exited, or a lease that ran out (a worker takes the run over)."""
    if run.status != "running":
        return False
    expired = run.lease_expires_at is not None and run.lease_expires_at < time.time()
    return expired or owner_is_dead(run.owner)


def _memory(request: Request) -> Memory:
    """What this app remembers between refreshes (made at its first use)."""
    state = request.app.state
    memory: Memory | None = getattr(state, "live_memory", None)
    if memory is None:
        memory = state.live_memory = Memory()
    return memory


def _secret(request: Request) -> str:
    """This server's secret, which keys the live tokens: its CSRF token."""
    return str(getattr(request.state, "csrf", ""))


def _policy(request: Request, name: str) -> Policy[Any, Any] | None:
    """The policy a run row names, when the app was given it (``create_app(
    policies=...)``): read for its parameters' names only, never executed."""
    known: Registry | None = getattr(request.app.state, "policies", None)
    return None if known is None else known.find(name)


def _inputs(request: Request, run: RunRecord) -> Any:
    """A run's inputs as shown: by parameter name when its policy is known
    here (:func:`~stalwart.core.inputs.inputs_by_name`), else as recorded."""
    href = value_link(run.id, "inputs")
    named = inputs_by_name(load(run.inputs), _policy(request, run.policy))
    if named is None:
        return shown(run.inputs, href)
    return cut(json.dumps(named, indent=2, ensure_ascii=False), href)


@dataclass(frozen=True)
class StepWindow:
    """Which of a run's steps its page shows, as the address says: the
    latest :data:`STEP_PAGE`, or those ``before`` or ``after`` a step's
    position (written ``<finished_at>:<key>``: the time has no colon)."""

    before: StepPosition | None = None
    after: StepPosition | None = None

    @classmethod
    def of(cls, request: Request) -> StepWindow:
        """The window the query asks for; ValueError naming a bad cursor."""
        q = request.query_params
        return cls(_position(q.get("before", "")), _position(q.get("after", "")))

    def query(self) -> dict[str, str]:
        """The query parameters that ask for this window again."""
        return {
            "before": _cursor(self.before),
            "after": "" if self.before is not None else _cursor(self.after),
        }


def _cursor(position: StepPosition | None) -> str:
    return "" if position is None else f"{position[0]!r}:{position[1]}"


def _position(text: str) -> StepPosition | None:
    if not text:
        return None
    when, sep, key = text.partition(":")
    try:
        at = float(when)
    except ValueError:
        at = math.nan
    if not sep or not math.isfinite(at):
        raise ValueError(f"bad step cursor {text[:80]!r}: <finished_at>:<key>")
    return at, key


async def _step_page(request: Request, run: RunRecord, window: StepWindow) -> StepPage:
    store = _store(request)
    if window.before is not None:
        return await store.step_page(run.id, STEP_PAGE, before=window.before)
    if window.after is not None:
        page = await store.step_page(run.id, STEP_PAGE, after=window.after)
        if page.later == 0:  # the last page: the latest steps, as the address without one
            return await store.step_page(run.id, STEP_PAGE)
        return page
    return await store.step_page(run.id, STEP_PAGE)


async def _latest_ask(store: Store, run: RunRecord, signal_name: str) -> Asked:
    """What ``run``, waiting for ``signal_name``, asked: its record is among
    the run's latest steps (recorded just before the wait)."""
    page = await store.step_page(run.id, STEP_PAGE)
    return pending_ask({s.key: s for s in page.steps}, signal_name, run.id)


async def _run_context(
    request: Request, run: RunRecord, page: StepPage, window: StepWindow
) -> dict[str, Any]:
    steps = {s.key: s for s in page.steps}
    ids = child_ids(run, steps)
    found = {r.id: r for r in await _store(request).get_runs(ids)} if ids else {}
    children = [(i, found.get(i)) for i in ids]
    known = _memory(request).children
    if ids:
        known.put(run.id, tuple(ids))
    else:
        known.drop(run.id)
    signal_name = _waits_for_signal(run)
    if not signal_name:
        asked = pending_ask({}, None)
    elif page.later == 0:
        asked = pending_ask(steps, signal_name, run.id)
    else:
        asked = await _latest_ask(_store(request), run, signal_name)
    fleet = await fleet_of(_store(request))
    return {
        "origin": await origin_of(_store(request), run),
        "run": run,
        "cleared": cleared_versions(run.cleared),
        "fleet": fleet is not None and bool(fleet.workers),
        "takers": [] if fleet is None else fleet.takers(run),
        "stranded": None if fleet is None else fleet.stranded(run),
        "inputs": _inputs(request, run),
        "result": shown(run.result, value_link(run.id, "result")),
        "error": shown(run.error, value_link(run.id, "error")),
        "cost": cost_table(usage_by_model(run, steps), request.app.state.prices),
        "graph": run_graph(run, steps, _policy(request, run.policy), _abandoned(run)),
        "tree": step_tree(steps, run.id),
        "step_count": page.count,
        "page": page,
        "whole": len(page.steps) == page.count,
        "earlier_link": link("/run", id=run.id, before=_cursor(page.first)) if page.earlier else "",
        "later_link": link("/run", id=run.id, after=_cursor(page.last)) if page.later else "",
        "latest_link": link("/run", id=run.id) if page.later else "",
        "live": link("/run/live", id=run.id, **window.query()),
        "bubbles": (said := bubbles(steps, run.id)),
        "conversation": turns(said),
        "events": events_of(steps, run.id),
        "timeline": (drawn := timeline(run, steps)),
        "split": [] if drawn is None else time_split(drawn.spent),
        "children": children,
        "family": await family_tree(_store(request), run, children),
        "signal_name": signal_name,
        "asked": asked,
        "back": link("/run", id=run.id),
        "shown": shown_token(_secret(request), run, page.count, children),
        **await actions.page_context(request, run, signal_name, asked),
    }


async def run_page(request: Request) -> Response:
    run = await _the_run(request)
    if isinstance(run, Response):
        return run
    try:
        window = StepWindow.of(request)
    except ValueError as exc:
        return _problem(request, 400, str(exc))
    page = await _step_page(request, run, window)
    note = await _answered_note(request)
    with reading():
        context = await _run_context(request, run, page, window)
        return _page(request, "run.html", note=note, **context)


async def run_live(request: Request) -> Response:
    """The run's live region, or 204 when it shows what the browser has.

    The browser sends back the token of the fragment it shows
    (:mod:`.live`). When the store's step count is the one in it, the
    children's rows are read by the ids remembered for this run, and a token
    made now that equals the one sent means nothing moved: no step is read.
    Else the page of steps the region shows is read (the latest, or the one
    its address names), never the whole run.
    """
    run = await _the_run(request)
    if isinstance(run, Response):
        return run
    try:
        window = StepWindow.of(request)
    except ValueError as exc:
        return _problem(request, 400, str(exc))
    store = _store(request)
    given = parse_shown(request.query_params.get(SHOWN))
    if given is not None:
        known, token = given
        count, _ = await store.step_positions(run.id, known, math.inf)  # the count alone
        if count == known and await _still_shown(request, run, count, token):
            return Response(status_code=204)
    page = await _step_page(request, run, window)
    with reading():
        context = await _run_context(request, run, page, window)
        return _page(request, "run_live.html", **context)


async def _still_shown(request: Request, run: RunRecord, count: int, token: str) -> bool:
    """Whether ``token`` is what the run's fragment would carry now, its
    ``count`` steps being the ones the store counts."""
    ids = _memory(request).children.get(run.id) or ()
    found = {r.id: r for r in await _store(request).get_runs(ids)} if ids else {}
    now = shown_token(_secret(request), run, count, [(i, found.get(i)) for i in ids])
    return same_shown(token, now)


# -- waiting for a human ---------------------------------------------------
async def _waiting_context(request: Request) -> dict[str, Any]:
    """The runs waiting for a signal, each with the question it asked.

    A question is read from a run's steps once, and remembered by the run's
    row (:data:`.live.WaitMark`): a waiting run's steps cannot change while
    its row does not, so a refresh reads the ledgers of runs new to the list
    only.
    """
    store = _store(request)
    questions = _memory(request).questions
    items = []
    for run in await store.waiting_for_signals(WAITING_LIMIT):
        mark: WaitMark = (run.id, run.fence, run.updated_at, run.waiting_for)
        asked = questions.get(mark)
        if asked is None:
            asked = await _latest_ask(store, run, run.waiting_for or "")
            questions.put(mark, asked)
        items.append((run, asked))
    return {"items": items, "now": time.time(), "limit": WAITING_LIMIT, "back": "/waiting"}


async def waiting_page(request: Request) -> Response:
    note = await _answered_note(request)
    return _page(request, "waiting.html", note=note, **await _waiting_context(request))


# -- health across runs ---------------------------------------------------
async def health_page(request: Request) -> Response:
    """``/health?window=24h``: runs by status over time, latency per policy,
    failure reasons, queues and their workers (:mod:`.health`)."""
    window = request.query_params.get("window", DEFAULT_WINDOW)
    try:
        health = await read_health(_store(request), window)
    except ValueError as exc:
        return _problem(request, 400, str(exc))
    return _page(request, "health.html", h=health, windows=list(WINDOWS), statuses=STATUSES)


# -- one whole value -------------------------------------------------------
async def value_page(request: Request) -> Response:
    """One recorded value whole, as plain text: what a page shows cut.

    ``/run/value?id=RUN&field=inputs|result|error`` for a run's,
    ``&step=KEY&field=args|output|error`` for a step's; laid out as the
    page lays it out (:func:`.values.pretty`), so the page's preview is its
    beginning. Anything unknown (run, step, field) or not recorded is a 404
    that says which.
    """
    run = await _the_run(request)
    if isinstance(run, Response):
        return run
    q = request.query_params
    field, key = q.get("field", ""), q.get("step")
    fields = RUN_FIELDS if key is None else STEP_FIELDS
    if field not in fields:
        where = "a run" if key is None else "a step"
        return _problem(
            request, 404, f"no field {field[:80]!r} of {where}: one of {', '.join(fields)}"
        )
    if key is None:
        text = getattr(run, field)
        what = f"run {run.id[:200]!r}"
    else:
        step = await _store(request).load_step(run.id, key)
        if step is None:
            return _problem(request, 404, f"run {run.id[:200]!r} has no step {key[:80]!r}")
        text = getattr(step, field)
        what = f"step {key[:80]!r} of run {run.id[:200]!r}"
    if text is None:
        return _problem(request, 404, f"{what} has no {field} recorded")
    body = pretty(text).encode("utf-8", "backslashreplace")  # a lone surrogate: shown escaped
    return Response(body, media_type="text/plain; charset=utf-8")


async def waiting_live(request: Request) -> Response:
    return _page(request, "waiting_live.html", **await _waiting_context(request))


# -- actions ---------------------------------------------------------------
ANSWERED = "answered"  # the query parameters a page is sent back with after a signal
ANSWER = "signal"


def _local(value: object) -> bool:
    """Whether ``value`` is a path on this server: ``/`` then no second
    ``/`` or ``\\``, and no control character a browser would drop."""
    return (
        isinstance(value, str)
        and value.startswith("/")
        and not value.startswith(("//", "/\\"))
        and not any(c < " " or c == "\x7f" for c in value)
    )


def _back(value: object, run_id: str) -> str:
    """Where to go after an action: a path on this server, else the run."""
    return value if isinstance(value, str) and _local(value) else link("/run", id=run_id)


def _with_answer(back: str, run_id: str, name: str) -> str:
    """``back`` with the run answered and the signal sent, for the page to
    say what happens next (:func:`_answered_note`)."""
    where = urlsplit(back)
    query = [(k, v) for k, v in parse_qsl(where.query) if k not in (ANSWERED, ANSWER)]
    query += [(ANSWERED, run_id), (ANSWER, name)]
    target = f"{where.path}?{urlencode(query)}"
    return target if _local(target) else link("/run", id=run_id, **{ANSWERED: run_id})


async def _answered_note(request: Request) -> str:
    """What happens to a run a signal was just sent to, said as it stands now.

    The inspector executes no run (its runner holds no policy): a signal
    makes a run waiting for it pending, and the process that started it,
    or a worker on this store, resumes it. Read from the store at each
    render, so the note is true when shown; nothing from the address is
    trusted but to name the run (its text is escaped like any other).
    """
    run_id = request.query_params.get(ANSWERED)
    if not run_id:
        return ""
    run = await _store(request).get_run(run_id)
    if run is None:
        return ""
    name = request.query_params.get(ANSWER, "")[:200]
    sent = f"Sent {name!r} to run {run.id[:200]!r}." if name else f"Answered run {run.id[:200]!r}."
    if run.status == "pending":
        return (
            f"{sent} It is pending until a worker on this store picks it up "
            f"(`stalwart worker --app MODULE`, MODULE defining policy {run.policy[:200]!r}), "
            "or the process that started it resumes it: this inspector executes no run."
        )
    if run.status == "running":
        return f"{sent} A worker is executing it now."
    if run.status == "suspended":
        waits = run.waiting_for or "a timer"
        return (
            f"{sent} It still waits for {waits[:200]!r}; a signal it does not wait for yet "
            "is kept until it does."
        )
    return f"{sent} It has finished: {run.status}."


async def _acting_on(request: Request) -> tuple[dict[str, Any], RunRecord] | Response:
    """The form of an action and its run, or why it may not act."""
    form = dict(await request.form())
    refused = check_post(request, form.get(CSRF_FIELD))
    if refused is not None:
        return _problem(request, 403, refused)
    run_id = form.get("id")
    if not isinstance(run_id, str) or not run_id:
        return _problem(request, 400, "the form names no run")
    run = await _store(request).get_run(run_id)
    if run is None:
        return _problem(request, 404, f"no run {run_id[:200]!r} in this store")
    if run.status in TERMINAL:
        return _problem(request, 409, f"run {run_id[:200]!r} has finished ({run.status})")
    return form, run


async def signal(request: Request) -> Response:
    """Send a signal: the payload typed as JSON, or ``true``/``false`` from
    the approve and reject buttons. A worker resumes the run."""
    acting = await _acting_on(request)
    if isinstance(acting, Response):
        return acting
    form, run = acting
    name = form.get("name")
    if not isinstance(name, str) or not name.strip():
        return _problem(request, 400, "a signal needs a name")
    verdict = form.get("verdict")
    payload: Any
    if verdict in ("approve", "reject"):
        payload = verdict == "approve"
    else:
        text = form.get("payload")
        text = text if isinstance(text, str) and text.strip() else "null"
        try:
            payload = json.loads(text)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            return _problem(request, 400, f"the payload is not JSON: {exc}")
    if name.strip() == _waits_for_signal(run):
        asked = await _latest_ask(_store(request), run, name.strip())
        refusal = actions.payload_refusal(run, name.strip(), payload, asked)
        if refusal is not None:
            return _problem(request, 400, refusal)
    try:
        await _runner(request).signal(run.id, name.strip(), payload)
    except SerializationError as exc:  # text UTF-8 cannot encode: nothing was queued
        return _problem(request, 400, f"the payload cannot be recorded: {exc}")
    except ApprovalError as exc:  # a tool approval's decision that does not fit: not queued
        return _problem(request, 400, str(exc))
    size = len(json.dumps(payload, ensure_ascii=False).encode("utf-8", "replace"))
    await actions.note(request, run.id, "signal", f"{name.strip()[:200]!r}, {size} bytes of JSON")
    back = _with_answer(_back(form.get("back"), run.id), run.id, name.strip())
    return RedirectResponse(back, 303)


async def cancel(request: Request) -> Response:
    acting = await _acting_on(request)
    if isinstance(acting, Response):
        return acting
    form, run = acting
    try:
        await _runner(request).cancel(run.id)
    except RunNotFound:
        return _problem(request, 404, f"no run {run.id[:200]!r} in this store")
    await actions.note(request, run.id, "cancel", "requested")
    return RedirectResponse(_back(form.get("back"), run.id), 303)


async def fork(request: Request) -> Response:
    """Fork the run from a step, or with other inputs (:func:`.actions.fork_run`)."""
    return _acted(request, await actions.fork_run(request))


async def rerun(request: Request) -> Response:
    """Re-run a failed run from the step that failed (:func:`.actions.rerun`)."""
    return _acted(request, await actions.rerun(request))


def _acted(request: Request, done: str | actions.Refusal) -> Response:
    if isinstance(done, actions.Refusal):
        return _problem(request, done.status, done.message)
    return RedirectResponse(done, 303)
