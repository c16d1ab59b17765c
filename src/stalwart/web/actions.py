"""Acting from a run's page: fork from a step, re-run a failed run, check a
signal's payload, and the history of what was done to a run here.

The inspector executes no run: a fork (:func:`~stalwart.timetravel.fork_pending`)
is written pending on the original's queue, and a worker serving that queue
executes it. Forking needs the run's policy (``stalwart ui --app MODULE``):
its type hints decode the edited values (S13), and the fork starts under it.

**History.** Every action taken here (a signal sent, a cancel, a fork made,
a re-run) is recorded with the run it acted on, in the store's memory
tables (:mod:`stalwart.core.memory`), namespace ``stalwart.actions`` and
the run's id: no schema of its own, every store that keeps memory keeps it,
and it can be written whatever the run's state (a finished run's ledger is
closed, a running one is fenced by its worker). A record says what was
done, when, and from which address; never a credential nor a signal's
payload (a person's answer may hold one), only its name and size. Pruning a
run leaves its history (``Memory(store).drop(("stalwart.actions", id))``
removes it).
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request

from ..core import codec
from ..core.approval import APPROVAL_PREFIX, waiting_calls
from ..core.errors import (
    ArgumentError,
    CorruptedRecord,
    ForkError,
    RunNotFound,
    SerializationError,
    StoreError,
)
from ..core.expects import schema_problems
from ..core.inputs import inputs_by_name
from ..core.keys import key_parts
from ..core.ledger import MAX_RUN_ID, RunRecord, StepRecord, check_run_id
from ..core.memory import Memory
from ..core.policy import Policy
from ..runner import Runner
from ..runner.registry import Registry
from ..timetravel.fork import LINEAGE_KEY, Replace, fork_pending, lineage
from .conversation import Asked
from .security import CSRF_FIELD, check_post
from .values import load

__all__ = [
    "HISTORY_SPACE",
    "Action",
    "Refusal",
    "approval_schema",
    "expected",
    "failed_step",
    "fork_id",
    "fork_run",
    "history",
    "note",
    "page_context",
    "payload_refusal",
    "rerun",
]

#: The memory namespace's first name under which a run's history is kept.
HISTORY_SPACE = "stalwart.actions"
#: The history entries a run's page shows, the latest first.
HISTORY_LIMIT = 50
#: The longest recorded value a step's fork form holds as the page comes,
#: in characters: each step of the page has one, so a longer value is
#: loaded into its form when the form is opened (``static/actions.js``).
PREFILL = 2_000
_PART = 256  # the longest name of a memory namespace


@dataclass(frozen=True)
class Action:
    """One entry of a run's history: ``what`` was done (``signal``,
    ``cancel``, ``fork``, ``re-run``, ``forked from``), ``by`` whom (the
    inspector and the client's address), ``at`` when, a line of ``detail``,
    and ``run``, another run it names (the fork made, the run forked)."""

    what: str
    by: str
    at: float
    detail: str = ""
    run: str | None = None


def _namespace(run_id: str) -> tuple[str, ...]:
    """The run's history namespace: its id cut into names a namespace can
    hold (each whole but the last, so no two ids share one)."""
    parts = [run_id[i : i + _PART] for i in range(0, len(run_id), _PART)] or ["-"]
    return (HISTORY_SPACE, *parts)


def _who(request: Request) -> str:
    """Who acted, as far as the inspector knows: its one token lets anyone
    holding it in, so the client's address (never the token)."""
    client = request.client
    return f"the inspector, from {client.host}" if client is not None else "the inspector"


async def note(
    request: Request, run_id: str, what: str, detail: str = "", other: str | None = None
) -> None:
    """Add an entry to run ``run_id``'s history. A store that keeps no
    memory keeps no history: the action stands, unrecorded."""
    at = time.time()
    entry = {"what": what, "by": _who(request), "at": at, "detail": detail, "run": other}
    key = f"{at:017.6f}-{secrets.token_hex(4)}"
    try:
        await Memory(_runner(request).store).put(_namespace(run_id), key, entry, text=what)
    except NotImplementedError:
        return


async def history(request: Request, run_id: str) -> list[Action]:
    """Run ``run_id``'s history, the latest first; an entry that is not one
    (data, S13) is left out."""
    try:
        items = await Memory(_runner(request).store).recent(_namespace(run_id), limit=HISTORY_LIMIT)
    except NotImplementedError:
        return []
    out = []
    for item in items:
        v = item.value
        if not isinstance(v, dict):
            continue
        what, by, at = v.get("what"), v.get("by"), v.get("at")
        detail, other = v.get("detail", ""), v.get("run")
        if not (isinstance(what, str) and isinstance(by, str) and isinstance(at, int | float)):
            continue
        try:
            when = float(at)
        except OverflowError:  # an int no float holds: not a time
            continue
        out.append(
            Action(
                what,
                by,
                when,
                detail if isinstance(detail, str) else "",
                other if isinstance(other, str) else None,
            )
        )
    out.sort(key=lambda a: a.at, reverse=True)
    return out


# -- what the page offers --------------------------------------------------
def _runner(request: Request) -> Runner:
    runner: Runner = request.app.state.runner
    return runner


def _policy(request: Request, name: str) -> Policy[Any, Any] | None:
    known: Registry | None = getattr(request.app.state, "policies", None)
    return None if known is None else known.find(name)


def _why_not(request: Request, run: RunRecord) -> str:
    """Why this run cannot be forked here ("" when it can)."""
    if run.parent_id is not None:
        return "A child run is forked with its parent: fork the parent."
    if _policy(request, run.policy) is None:
        return (
            f"To fork or re-run it here, start the inspector with the module that defines "
            f"policy {run.policy[:200]!r} (stalwart ui --app MODULE): a fork starts under it."
        )
    return ""


def fork_id(run_id: str) -> str:
    """The id a fork form names its fork by, made as the page is: the form
    sent twice (a double click, a reload) makes one fork, not two. The
    run's id begins it, cut so the whole is a run id (at most
    :data:`~stalwart.core.ledger.MAX_RUN_ID` characters)."""
    suffix = f"-fork-{secrets.token_hex(6)}"
    new = run_id[: MAX_RUN_ID - len(suffix)] + suffix
    try:
        return check_run_id(new)
    except ValueError:  # the cut made it one no run may have
        return suffix[1:]


def _editable(text: str | None) -> str | None:
    """A recorded value laid out to edit, or None if it is too long to come
    with the page (or is not JSON): the form loads it when opened."""
    if text is None or len(text) > PREFILL:
        return None
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):  # a row nested past the parser's depth
        return None


def approval_schema(calls: list[str]) -> dict[str, Any]:
    """The answer a tool approval's wait takes (:mod:`stalwart.core.approval`),
    as a JSON schema: true, false, or decisions by call id."""
    decision = {
        "type": "object",
        "required": ["decision"],
        "properties": {
            "decision": {"enum": ["approve", "deny", "edit"]},
            "reason": {"type": "string"},
            "arguments": {"type": "object"},
        },
        "additionalProperties": False,
    }
    return {
        "type": ["boolean", "object"],
        "properties": {c: decision for c in calls},
        "additionalProperties": False,
    }


def expected(signal_name: str | None, asked: Asked) -> dict[str, Any] | None:
    """The JSON schema a payload for the wait is checked against, if known:
    the one the wait recorded, or a tool approval's."""
    if asked.schema is not None:
        return dict(asked.schema)
    if signal_name and signal_name.startswith(APPROVAL_PREFIX):
        calls = waiting_calls({"about": asked.about_value})
        if calls is not None:
            return approval_schema(calls)
    return None


async def page_context(
    request: Request, run: RunRecord, signal_name: str | None, asked: Asked
) -> dict[str, Any]:
    """What the run's page needs to act: ``act`` for ``_actions.html``."""
    why_not = _why_not(request, run)
    pol = _policy(request, run.policy)
    inputs = ""
    if not why_not and pol is not None:
        named = inputs_by_name(load(run.inputs), pol)
        inputs = "" if named is None else json.dumps(named, indent=2, ensure_ascii=False)
    schema = expected(signal_name, asked)
    return {
        "act": {
            "why_not": why_not,
            "inputs": inputs,
            "history": await history(request, run.id),
            "schema": "" if schema is None else json.dumps(schema, ensure_ascii=False),
            "schema_shown": "" if schema is None else json.dumps(schema, indent=2),
            "editable": _editable,
            "fork_id": fork_id,
        }
    }


# -- checks ----------------------------------------------------------------
def payload_refusal(run: RunRecord, name: str, payload: Any, asked: Asked) -> str | None:
    """Why ``payload`` does not fit the schema run ``run``'s wait for
    ``name`` recorded (None: it fits, or the wait recorded none). A tool
    approval's answer is checked by the runner as it is sent
    (:func:`~stalwart.core.approval.read_decisions`), which names the call."""
    schema = asked.schema
    if schema is None:
        return None
    problems = schema_problems(payload, schema)
    if not problems:
        return None
    return (
        f"run {run.id[:200]!r}, signal {name[:200]!r}: the payload does not fit what the wait "
        f"expects: {'; '.join(problems)}"
    )


# -- fork and re-run -------------------------------------------------------
@dataclass(frozen=True)
class Refusal:
    """Why an action was not taken: the page answers ``status`` with ``message``."""

    status: int
    message: str


async def _acting(request: Request) -> tuple[dict[str, Any], RunRecord] | Refusal:
    """The form of a fork and its run, or why it may not act (any status
    may: a finished run is what one forks most)."""
    form = dict(await request.form())
    refused = check_post(request, form.get(CSRF_FIELD))
    if refused is not None:
        return Refusal(403, refused)
    run_id = form.get("id")
    if not isinstance(run_id, str) or not run_id:
        return Refusal(400, "the form names no run")
    run = await _runner(request).store.get_run(run_id)
    if run is None:
        return Refusal(404, f"no run {run_id[:200]!r} in this store")
    why_not = _why_not(request, run)
    if why_not:
        return Refusal(409, f"run {run_id[:200]!r}: {why_not}")
    return form, run


def _decoded(text: object, what: str) -> Any:
    """A value edited on the page, as the ledger writes it: JSON whose
    tagged objects are messages and declared types, decoded as data (S13)."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{what} is empty: give a JSON value")
    try:
        json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past the parser's depth
        raise ValueError(f"{what} is not JSON: {exc}") from None
    return codec.loads(text, what)


def _replace(form: dict[str, Any], at: str | None) -> Replace | Refusal:
    """What the form replaces: a step's result, the inputs, or nothing."""
    what = form.get("replace", "")
    try:
        if what == "result":
            if at is None:
                return Refusal(400, "field 'at': replacing a result needs a step")
            return Replace(result=_decoded(form.get("value"), f"field 'value' (step {at})"))
        if what == "inputs":
            inputs = _decoded(form.get("value"), "field 'value' (the run's inputs)")
            if not isinstance(inputs, dict):
                return Refusal(400, "field 'value': the inputs are a JSON object by parameter name")
            return Replace(inputs=inputs)
    except (ValueError, TypeError, SerializationError, CorruptedRecord) as exc:
        return Refusal(400, str(exc))
    if what == "nothing":
        return Replace()
    return Refusal(400, "field 'replace': one of result, inputs, nothing")


def _taken(run: RunRecord, pol: Policy[Any, Any], replace: Replace) -> Replace | Refusal:
    """``replace`` with its inputs as the run's policy reads them (``"3"``
    for an ``int`` is 3), or why they are not ones it takes (an unknown
    parameter, a missing one, a value of another type): refused here, not
    left to fail on a worker."""
    if replace.inputs is None:
        return replace
    named = inputs_by_name(load(run.inputs), pol) or {}
    try:
        read = pol.validate({**named, **replace.inputs})
    except ArgumentError as exc:
        return Refusal(400, f"field 'value': {exc}")
    return dataclasses.replace(replace, inputs={k: read[k] for k in replace.inputs if k in read})


async def _fork(
    request: Request, run: RunRecord, at: str | None, replace: Replace, new_id: str | None
) -> str | Refusal:
    """The fork's id, or why there is none."""
    try:
        return await fork_pending(
            _runner(request),
            run.id,
            at=at,
            new_run_id=new_id,
            replace=replace,
            policy=_policy(request, run.policy),
        )
    except (ForkError, RunNotFound, CorruptedRecord, SerializationError) as exc:
        return Refusal(400, f"fork of run {run.id[:200]!r}: {exc}")
    except StoreError:
        raise
    except (TypeError, ValueError) as exc:
        return Refusal(400, f"fork of run {run.id[:200]!r}: {exc}")


async def _forked(
    request: Request, run: RunRecord, new: str, what: str, at: str | None, detail: str
) -> str:
    """Write the fork in both runs' histories; where the page goes next."""
    where = "from the start" if at is None else f"at step {at}"
    await note(request, run.id, what, f"{where}{detail}", new)
    await note(request, new, "forked from", f"{where}{detail}", run.id)
    return _history_of(run.id)


def _history_of(run_id: str) -> str:
    return f"/run?{urlencode({'id': run_id})}#history"


async def _forked_from(request: Request, new_id: str, run_id: str) -> bool:
    """Whether run ``new_id`` is a fork of run ``run_id`` (its lineage says so)."""
    step = await _runner(request).store.load_step(new_id, LINEAGE_KEY)
    try:
        found = None if step is None else lineage([step])
    except CorruptedRecord:
        return False
    return found is not None and found.run_id == run_id


async def fork_run(request: Request) -> str | Refusal:
    """Fork a run from the page: at step ``at`` with its result replaced
    (``replace=result``, ``value`` the new result as JSON), or with the
    run's inputs replaced (``replace=inputs``, ``value`` a JSON object by
    parameter name), or at ``at`` with nothing replaced. The fork is left
    for a worker. Returns where the page goes next (the run's history,
    which links to the fork), or why there is no fork."""
    acting = await _acting(request)
    if isinstance(acting, Refusal):
        return acting
    form, run = acting
    at = form.get("at") or None
    if at is not None and not isinstance(at, str):
        return Refusal(400, "field 'at': a step key")
    new_id = form.get("new_id") or None
    if new_id is not None and not isinstance(new_id, str):
        return Refusal(400, "field 'new_id': a run id")
    pol = _policy(request, run.policy)
    if pol is not None:
        pol.declare_types()  # the types its hints name decode the edited value
    replace = _replace(form, at)
    if not isinstance(replace, Refusal) and pol is not None:
        replace = _taken(run, pol, replace)
    if isinstance(replace, Refusal):
        return Refusal(replace.status, f"fork of run {run.id[:200]!r}: {replace.message}")
    new = await _fork(request, run, at, replace, new_id)
    if isinstance(new, Refusal):
        if new_id is not None and await _forked_from(request, new_id, run.id):
            return _history_of(run.id)  # this form was sent before: its fork stands
        return new
    changed = replace.changes()
    detail = f", {changed[0]} replaced" if changed else ""
    return await _forked(request, run, new, "fork", at, detail)


def failed_step(steps: dict[str, StepRecord]) -> str | None:
    """Where a failed run failed: of its steps that recorded an error, the
    last in S1 order (the innermost of a failure that climbed up through its
    callers); None if none did (it failed in its own code)."""
    failed = [k for k, s in steps.items() if s.error is not None and k != LINEAGE_KEY]
    return max(failed, key=key_parts) if failed else None


async def rerun(request: Request) -> str | Refusal:
    """Re-run a failed run from its last good step: a fork at the step that
    failed, nothing replaced, so it replays every step before it and runs
    that one again, live (from the start if no step failed). Returns where
    the page goes next, or why there is no re-run."""
    acting = await _acting(request)
    if isinstance(acting, Refusal):
        return acting
    form, run = acting
    new_id = form.get("new_id") or None
    if new_id is not None and not isinstance(new_id, str):
        return Refusal(400, "field 'new_id': a run id")
    if new_id is not None and await _forked_from(request, new_id, run.id):
        return _history_of(run.id)  # this form was sent before: its re-run stands
    if run.status != "failed":
        return Refusal(409, f"run {run.id[:200]!r} is {run.status}, not failed")
    at = failed_step(await _runner(request).store.load_steps(run.id))
    new = await _fork(request, run, at, Replace(), new_id)
    if isinstance(new, Refusal):
        if new_id is not None and await _forked_from(request, new_id, run.id):
            return _history_of(run.id)
        return new
    return await _forked(request, run, new, "re-run", at, "")
