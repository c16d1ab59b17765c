"""Fork: a new run that replays another's recorded prefix, then runs live.

``await fork(runner, "ticket-42", at="3", new_run_id="ticket-42-b",
replace=Replace(result=...))`` copies every step of ``ticket-42`` that
finished before step ``3`` (S1 order, :mod:`.keys`) into the new run, sets
step ``3``'s record as ``replace`` says, and starts the new run on
``runner``: it replays that prefix without executing it (S2) and runs live
from there. The original run is only read.

What a fork records about where it came from is its first record, the step
``0`` named ``stalwart.fork`` (no policy's step is ever keyed ``0``: keys
count from 1), so no store needs a new column; :func:`lineage` reads it.

Child runs spawned in the copied prefix are copied too, under the fork's
ids (a child's id embeds its parent's, S1), with their whole ledgers: a
finished child keeps its outcome, an unfinished one is copied pending and
is executed by whoever serves its queue (``runner.recover()``, a worker).
Children spawned at or after ``at`` are not copied: the fork spawns its own.
Signals are not copied: those the prefix consumed are in its records; a
fork that waits for one later gets it by ``runner.signal`` like any run.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from dataclasses import replace as copy
from typing import Any

from ..core import codec
from ..core.engine.engine import Engine
from ..core.errors import CorruptedRecord, ForkError, RunNotFound, StoreError
from ..core.ledger import CHILD_MARK, TERMINAL, RunRecord, StepRecord, StoredStep, check_run_id
from ..core.policy import Policy, as_policy
from ..core.recorded import error_to_json
from ..core.stepargs import full_args
from ..runner.handle import RunHandle
from ..runner.inputs import read_inputs, run_inputs
from ..runner.runner import Runner
from ..stores.base import RunDump
from .export import SPAWN_PREFIX, export_runs, spawn_record
from .keys import before, sort_keys
from .rebase import rebase as rebased

__all__ = ["LINEAGE_KEY", "LINEAGE_NAME", "Lineage", "Replace", "fork", "fork_pending", "lineage"]

LINEAGE_KEY = "0"
LINEAGE_NAME = "stalwart.fork"


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass(frozen=True)
class Replace:
    """What a fork changes.

    ``result`` or ``error``: step ``at`` is recorded with this outcome (a
    model's reply edited, a tool's answer corrected): the fork replays it
    and goes live right after it. ``args``: step ``at`` is called again, at
    fork time, with its recorded arguments updated by these (``policy``: the
    policy recorded there, if the runner was not given it; ``options``: the
    policies an offered ``options`` list names); its outcome is recorded
    under the identity of the call the code makes, so the fork replays it.
    ``inputs``: the run's keyword arguments updated by these.
    """

    result: Any = UNSET
    error: BaseException | None = None
    args: dict[str, Any] | None = None
    inputs: dict[str, Any] | None = None
    policy: Any = None
    options: Sequence[Any] = ()

    def changes(self) -> list[str]:
        out = [] if self.result is UNSET else ["result"]
        out += [name for name in ("error", "args", "inputs") if getattr(self, name) is not None]
        return out


@dataclass(frozen=True)
class Lineage:
    """Where a fork came from: the run, the step it left that run at, and
    what it replaced (``result``, ``error``, ``args``, ``inputs``)."""

    run_id: str
    at: str | None
    replaced: list[str] = field(default_factory=list)
    forked_at: float = 0.0


def lineage(steps: Sequence[StepRecord] | dict[str, StepRecord]) -> Lineage | None:
    """The lineage a fork recorded among ``steps`` (a run's records), if any."""
    found = (
        steps.get(LINEAGE_KEY)
        if isinstance(steps, dict)
        else next((s for s in steps if s.key == LINEAGE_KEY), None)
    )
    if found is None or found.name != LINEAGE_NAME or found.output is None:
        return None
    try:
        data = json.loads(found.output)
        return Lineage(
            str(data["from"]),
            None if data["at"] is None else str(data["at"]),
            [str(x) for x in data["replaced"]],
            float(data["forked_at"]),
        )
    except (ValueError, KeyError, TypeError):
        raise CorruptedRecord(f"step {LINEAGE_KEY}: the fork's lineage cannot be read") from None


async def fork(
    runner: Runner,
    run_id: str,
    *,
    at: str | None = None,
    new_run_id: str | None = None,
    replace: Replace | None = None,
    policy: Any = None,
    rebase: bool = False,
) -> RunHandle:
    """Fork run ``run_id`` at step ``at`` and start the fork on ``runner``.

    ``at`` None replays nothing (the run again, from the top, with
    ``replace.inputs``). ``policy``: the run's policy, if ``runner`` was not
    given it. ``rebase``: ``policy`` is new code (other instructions, another
    model) whose calls differ from the record's: the prefix takes the identity
    ``policy`` gives its calls, with their recorded outcomes (:mod:`.rebase`).
    Returns the fork's handle; the fork is executed by ``runner``.
    """
    pol, args, kwargs, new_id = await _plant(
        runner, run_id, at, new_run_id, replace or Replace(), policy, rebase
    )
    return await runner.start(pol, *args, run_id=new_id, **kwargs)


async def fork_pending(
    runner: Runner,
    run_id: str,
    *,
    at: str | None = None,
    new_run_id: str | None = None,
    replace: Replace | None = None,
    policy: Any = None,
) -> str:
    """:func:`fork`, the fork left pending on the original's queue for a
    worker to execute, never executed by ``runner``; returns its id.

    What a process that executes no run (the inspector) forks with:
    ``replace`` may set a step's result or error, or the run's inputs, but
    not its arguments (that calls the step's policy again, here).
    """
    replace = replace or Replace()
    if replace.args is not None:
        raise ForkError(
            f"fork of run {run_id!r}: a fork left for a worker cannot call step {at!r} again "
            "with new arguments here; replace its result, or fork with stalwart runs fork"
        )
    _, _, _, new_id = await _plant(runner, run_id, at, new_run_id, replace, policy, False)
    return new_id


async def _plant(
    runner: Runner,
    run_id: str,
    at: str | None,
    new_run_id: str | None,
    replace: Replace,
    policy: Any,
    rebase: bool,
) -> tuple[Policy[Any, Any], list[Any], dict[str, Any], str]:
    """Write the fork (its run row, lineage and copied prefix, pending):
    its policy, the arguments to start it with, and its id."""
    await runner.open()
    store = runner.store
    if store.ephemeral:
        raise StoreError("a fork replays recorded steps: it needs a durable store, not memory")
    try:
        new_id = (
            check_run_id(new_run_id) if new_run_id else f"{run_id}-fork-{int(time.time() * 1000)}"
        )
    except ValueError as exc:
        raise ForkError(f"fork of run {run_id!r}: new_run_id: {exc}") from None
    dumps = await export_runs(store, run_id, children=True)
    original = dumps[0]
    if original.run.parent_id is not None:
        raise ForkError(f"run {run_id!r} is a child run; fork its parent")
    if at is not None:
        _has_step(run_id, at, [s.key for s in original.steps if s.key != LINEAGE_KEY])
    pol = as_policy(policy) if policy is not None else runner.find_policy(original.run.policy)
    if pol is None:
        raise RunNotFound(
            f"run {run_id!r} is a run of policy {original.run.policy!r}, which this runner "
            "was not given: pass policy=... or Runner(policies=[...])"
        )
    pol.declare_types()
    steps = {s.key: s for s in original.steps if s.key != LINEAGE_KEY}
    prefix = [s for s in original.steps if at is not None and s.key in steps and before(s.key, at)]
    changed = replace.changes()
    if at is not None and {"result", "error", "args"} & set(changed):
        prefix.append(await _replaced(run_id, steps, at, replace, runner, new_id))
    inputs = original.run.inputs
    data = read_inputs(run_id, inputs)
    args, kwargs = list(data["args"]), dict(data["kwargs"])
    if replace.inputs is not None:
        args, kwargs = [], {**_by_name(pol, args, kwargs), **replace.inputs}
        inputs = run_inputs(pol, new_id, (), kwargs)
    if rebase:
        prefix = await rebased(new_id, prefix, at, pol, tuple(args), kwargs)
    renamed = _Renamer(run_id, new_id)
    copied = [renamed.step(s, run_id) for s in prefix]
    now = time.time()
    record = {"from": run_id, "at": at, "replaced": changed, "forked_at": now}
    mark = json.dumps(record, separators=(",", ":"))
    origin = StoredStep(LINEAGE_KEY, LINEAGE_NAME, "", None, mark, None, 1, now, now, "fork")
    run = RunRecord(
        new_id,
        pol.name if rebase else original.run.policy,
        inputs,
        code_version=original.run.code_version,
        queue=original.run.queue,
        priority=original.run.priority,
        fence=1,  # the first claim then makes it 2, and loads the prefix to replay
    )
    for child in _children(dumps[1:], copied, run_id):
        await store.import_run(renamed.child(child))
    if not await store.import_run(RunDump(run, [origin, *copied], [])):
        raise ForkError(f"run {new_id!r} exists; choose another new_run_id")
    return pol, args, kwargs, new_id


def _has_step(run_id: str, at: str, keys: list[str]) -> None:
    """``at`` is a step ``run_id`` recorded: a fork "at" any other key would
    replay the whole run, or set the record of a step the code never made."""
    if at in keys:
        return
    if not keys:
        raise ForkError(
            f"run {run_id!r} has no step {at!r}: it recorded no step; fork it without --at "
            "(at=None) to run it again from the start"
        )
    ordered = sort_keys(keys)
    shown = (
        ", ".join(ordered)
        if len(ordered) <= 12
        else (", ".join(ordered[:8]) + ", ..., " + ", ".join(ordered[-3:]))
    )
    raise ForkError(
        f"run {run_id!r} has no step {at!r}: its {len(ordered)} recorded step(s), from "
        f"{ordered[0]!r} to {ordered[-1]!r}, are {shown}"
    )


def _kind(tree: Any, many: bool = False) -> str:
    """A JSON tree's shape in words (its JSON type, or its codec tag):
    ``a string``, ``a list of 'msg' values``; ``many``: the plural."""
    if isinstance(tree, dict):
        tag = tree.get("$t")
        name = f"{tag!r} value" if isinstance(tag, str) else "object"
    elif isinstance(tree, list):
        inner = {_kind(v, many=True) for v in tree}
        name = f"list of {inner.pop()}" if len(inner) == 1 else "list"
    elif isinstance(tree, bool):
        name = "boolean"
    elif isinstance(tree, int | float):
        name = "number"
    elif isinstance(tree, str):
        name = "string"
    else:
        return "nulls" if many else "null"
    return f"{name}s" if many else f"an {name}" if name[0] in "aeio" else f"a {name}"


def _same_shape(recorded: Any, new: Any) -> bool:
    """Whether ``new`` has the shape of the recorded value: the same JSON type
    (or codec tag) at the top, and for a list whose items are all of one
    tagged kind (a model's messages), every item of that kind. ``null`` on
    either side passes: an optional value."""
    if recorded is None or new is None:
        return True
    if isinstance(recorded, list) and isinstance(new, list):
        kinds = {_kind(v, many=True) for v in recorded}
        one = kinds.pop() if len(kinds) == 1 else ""
        return not one.endswith(" values") or all(_kind(v, many=True) == one for v in new)
    return _kind(recorded) == _kind(new)


def _check_shape(run_id: str, target: StoredStep, output: str) -> None:
    """A replacement result of another shape than the step recorded would
    only fail later, deep in the code that reads it (a model step's reply is
    a list of messages, not a string): refused here, with the recorded
    value as the example to follow."""
    if target.output is None:
        return  # the step recorded an error: any result may take its place
    try:
        recorded = json.loads(target.output)
    except ValueError:
        return
    new = json.loads(output)
    if _same_shape(recorded, new):
        return
    example = target.output if len(target.output) <= 400 else target.output[:400] + "..."
    raise ForkError(
        f"run {run_id!r}, step {target.key!r} ({target.name}): the new result is {_kind(new)}, "
        f"but the step recorded {_kind(recorded)}; give a value of that shape, as "
        f"`stalwart runs show {run_id} --json` prints the step's output, e.g. {example}"
    )


async def _replaced(
    run_id: str,
    steps: dict[str, StoredStep],
    at: str,
    replace: Replace,
    runner: Runner,
    new_id: str,
) -> StoredStep:
    """Step ``at``'s record as ``replace`` sets it, under its recorded
    identity, its arguments as recorded (compact stays compact)."""
    now = time.time()
    target = stored = steps[at]
    if replace.args is None:
        if replace.error is not None:
            return copy(stored, output=None, error=error_to_json(replace.error), attempts=1)
        where = f"replaced result of step {target.key}"
        output = codec.dumps(replace.result, where)
        _check_shape(run_id, target, output)
        return copy(stored, output=output, error=None, attempts=1)
    pol = (
        as_policy(replace.policy) if replace.policy is not None else runner.find_policy(target.name)
    )
    if pol is None:
        raise ForkError(
            f"run {run_id!r}, step {target.key} is a call of {target.name!r}: "
            "pass Replace(policy=...) to call it again"
        )
    pol.declare_types()
    whole = full_args(run_id, target, steps)
    recorded = codec.loads(whole or "{}", f"arguments of step {target.key}")
    if not isinstance(recorded, dict):
        raise CorruptedRecord(f"arguments of step {target.key} are not a record of arguments")
    kwargs = {**_by_name(pol, list(recorded.pop("*", [])), recorded), **replace.args}
    args: list[Any] = []
    if "options" in kwargs:
        kwargs["options"] = _options(kwargs["options"], replace.options, runner)
    engine = Engine(new_id)  # in memory: the call's own steps are not recorded
    started = time.time()
    try:
        value = await pol.invoke(engine.context(target.key), tuple(args), kwargs)
    except Exception as exc:
        return copy(
            stored,
            output=None,
            error=error_to_json(exc),
            started_at=started,
            finished_at=time.time(),
            attempts=1,
        )
    output = codec.dumps(value, f"result of step {target.key} called again")
    return copy(stored, output=output, error=None, started_at=started, finished_at=now, attempts=1)


def _by_name(pol: Policy[Any, Any], args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """A run's recorded arguments all by keyword, so some can be replaced."""
    fn: Any = pol.fn
    sig = inspect.signature(fn if inspect.isroutine(fn) else type(fn).__call__.__get__(fn))
    params = list(sig.parameters.values())[1 if pol.takes_ctx else 0 :]
    bound = sig.replace(parameters=params).bind(*args, **kwargs)
    return dict(bound.arguments)


def _options(names: Any, given: Sequence[Any], runner: Runner) -> list[Policy[Any, Any]]:
    """The policies a recorded options list names (``"<policy web_search>"``)."""
    known = {p.name: p for p in map(as_policy, given)}
    out: list[Policy[Any, Any]] = []
    for name in names if isinstance(names, list) else []:
        bare = str(name).removeprefix("<policy ").removesuffix(">")
        pol = known.get(bare) or runner.find_policy(bare)
        if pol is None:
            raise ForkError(f"option {bare!r} of the step: pass it in Replace(options=[...])")
        out.append(pol)
    return out


def _children(children: list[RunDump], prefix: list[StoredStep], run_id: str) -> list[RunDump]:
    """The child runs the copied prefix spawned, and theirs, deepest first."""
    roots: set[str] = set()
    for step in prefix:
        roots.update(spawn_record(run_id, step))
    kept = [
        d
        for d in children
        if any(d.run.id == r or d.run.id.startswith(r + CHILD_MARK) for r in roots)
    ]
    return sorted(kept, key=lambda d: -d.run.id.count(CHILD_MARK))


class _Renamer:
    """Moves child run ids from under the original's id to under the fork's."""

    def __init__(self, old: str, new: str) -> None:
        self.old = old + CHILD_MARK
        self.new = new + CHILD_MARK

    def id(self, run_id: str) -> str:
        return self.new + run_id[len(self.old) :] if run_id.startswith(self.old) else run_id

    def step(self, step: StoredStep, owner: str) -> StoredStep:
        """``step`` of run ``owner`` (its original id), its spawned ids
        renamed; compact arguments are copied as they are."""
        if not (step.name.startswith(SPAWN_PREFIX) and step.output):
            return copy(step)
        renamed = [self.id(i) for i in spawn_record(owner, step)]
        return copy(step, output=json.dumps(renamed, separators=(",", ":")))

    def child(self, dump: RunDump) -> RunDump:
        run = copy(dump.run, id=self.id(dump.run.id), created_at=time.time())
        run.parent_id = None if run.parent_id is None else self.id(run.parent_id)
        if run.status not in TERMINAL:
            run.status, run.owner, run.lease_expires_at = "pending", None, None
            run.fence = max(run.fence, 1)
        return RunDump(run, [self.step(s, dump.run.id) for s in dump.steps], [])
