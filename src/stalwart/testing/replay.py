"""Replay tests: run new code against a recorded run, executing nothing live.

``replay(recording, policy)`` executes ``policy`` from the top against the
record, as a resumed run would (S2), except that nothing may run live: every
call the new code makes must be answered from the record. The first call
that is not (another policy, other arguments, another order, a call the
record does not have) stops the replay, and the report names the step and
shows both sides; a record the new code never asked for, or another final
result, is reported too. Otherwise the new code reproduces the run.

How it stays offline: the replay map handed to the engine notes every key
looked up; a hook refuses a live call at a key the record lacks, before it
runs; the ledger refuses any write (a step the record lacks would be written
there); spawning a child run is refused. A sync flow node asks for its
record off the event loop, where nothing can be awaited: its missing record
stops the replay at once. All of it goes through the engine's public API:
``Execution``, its ``replay`` map, hooks, and the :class:`Ledger` protocol.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import codec
from ..core.engine.control import Halt, find_halt, find_suspend
from ..core.engine.execution import Execution
from ..core.engine.identity import step_hash
from ..core.engine.journal import Journal
from ..core.errors import NonDeterminismError, StalwartError
from ..core.events import CallInfo, Hook
from ..core.ledger import TERMINAL, RunRecord, StepRecord
from ..core.policy import Policy, as_policy
from ..core.recorded import error_to_json
from ..runner.identity import read_inputs
from ..stores import open_store
from ..stores.base import RunDump
from ..timetravel.export import export_runs, read_export
from ..timetravel.fork import LINEAGE_KEY
from ..timetravel.keys import is_ancestor, key_parts

__all__ = [
    "Divergence",
    "Recording",
    "ReplayReport",
    "load_recording",
    "replay",
    "replay_async",
]


@dataclass
class Recording:
    """A recorded run (and the child runs it spawned), from a store or a file."""

    run: RunRecord
    steps: dict[str, StepRecord]
    children: list[RunDump] = field(default_factory=list)
    source: str = ""

    @classmethod
    def of(cls, dumps: Sequence[RunDump], run_id: str | None, source: str) -> Recording:
        """The run ``run_id`` of ``dumps`` (default: the first top-level one)."""
        top = [d for d in dumps if (d.run.id == run_id if run_id else d.run.parent_id is None)]
        if not top:
            raise LookupError(f"{source}: no run {run_id!r}" if run_id else f"{source}: no run")
        main = top[0]
        rest = [d for d in dumps if d is not main]
        return cls(main.run, {s.key: s for s in main.steps}, rest, source)


async def load_recording(source: Any, run_id: str | None = None) -> Recording:
    """A :class:`Recording` from an export file's path, a ``(store URL,
    run id)`` pair, or a Recording (returned as is)."""
    if isinstance(source, Recording):
        return source
    if isinstance(source, tuple):
        url, run_id = source
        store = open_store(url)
        await store.open()
        try:
            dumps = await export_runs(store, run_id, children=True)
        finally:
            await store.close()
        return Recording.of(dumps, run_id, f"{store.url} run {run_id}")
    if isinstance(source, str | Path):
        return Recording.of(read_export(source), run_id, str(source))
    raise TypeError(
        f"a recording is a Recording, an export file's path or (store URL, run id), not {source!r}"
    )


@dataclass(frozen=True)
class Divergence:
    """Where the new code left the record.

    ``kind``: ``"name"`` (another policy at that step), ``"arguments"``,
    ``"order"`` (a call the record has at another step), ``"extra"`` (a call
    or record the recording does not have), ``"missing"`` (a recorded step
    the new code never made), ``"outcome"`` (another result or error), or
    ``"error"`` (the replay could not go on: a record that cannot be read).
    """

    kind: str
    key: str
    recorded: str | None
    now: str | None
    note: str = ""

    def describe(self) -> str:
        lines = [f"step {self.key or '(run)'}: {_KINDS.get(self.kind, self.kind)}"]
        if self.note:
            lines.append(f"    {self.note}")
        if self.recorded is not None:
            lines.append(f"    recorded: {self.recorded}")
        if self.now is not None:
            lines.append(f"    now:      {self.now}")
        return "\n".join(lines)


_KINDS = {
    "name": "the new code calls another policy",
    "arguments": "the new code passes other arguments",
    "order": "the new code makes its calls in another order",
    "extra": "the new code does something the recording does not have",
    "missing": "the recording has a step the new code never made",
    "record": "the new code records another value",
    "outcome": "the run ends differently",
    "error": "the replay cannot go on",
}


@dataclass
class ReplayReport:
    """What a replay found. True when the new code reproduces the run, so
    ``assert replay(...)`` fails with this report as its message."""

    run_id: str
    source: str
    policy: str
    divergences: list[Divergence]
    replayed: list[str]
    ended_at: str | None = None  # where an unfinished recording ends

    @property
    def ok(self) -> bool:
        return not self.divergences

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        head = f"replay of run {self.run_id!r} ({self.source}) with {self.policy}"
        if self.ok:
            tail = f"; the recording ends at step {self.ended_at}" if self.ended_at else ""
            return f"{head}: reproduces the run ({len(self.replayed)} steps replayed{tail})"
        first = self.divergences[0]
        lines = [f"{head}: DIVERGES at step {first.key or '(run)'}"]
        lines += [d.describe() for d in self.divergences]
        lines.append(
            f"  {len(self.replayed)} steps replayed before: {', '.join(self.replayed[-8:])}"
        )
        return "\n".join(lines)

    __repr__ = __str__

    def check(self) -> None:
        """Raise AssertionError with the report unless the run is reproduced."""
        if not self.ok:
            raise AssertionError(str(self))


# A flow's journal entries: a finished flow visit would answer its whole
# subtree from its ``post`` record, so a replay hides them; the flow walks its
# graph again (its ``exec`` units answered from the record) and writes them
# again, compared with the record.
REWALKED = frozenset({"flow.post", "flow.prep"})


class _Stop(StalwartError):
    """Ends a replay: a divergence, or the end of an unfinished recording."""

    def __init__(self, divergence: Divergence | None) -> None:
        super().__init__(divergence.describe() if divergence else "end of the recording")
        self.divergence = divergence


def _call(name: str, args: str | None) -> str:
    return f"{name}({args or ''})"


class _Observed(dict[str, StepRecord]):
    """The replay map: notes each key the engine asks for."""

    def __init__(self, steps: dict[str, StepRecord], guard: _Guard) -> None:
        super().__init__(steps)
        self.guard = guard

    def get(self, key: str, default: Any = None) -> Any:
        rec = super().get(key)
        if rec is not None:
            self.guard.seen.append(key)
            return rec
        self.guard.missed(key)
        return default

    def items(self) -> Any:
        """A layer reading records in bulk (a flow's journal) reads them all."""
        self.guard.seen.extend(self.keys())
        return super().items()


class _Guard(Hook):
    """The hook, ledger and host of a replay: anything live stops it."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self.seen: list[str] = []
        self.misses: set[str] = set()
        self.x: Journal | None = None
        keys = [k for k in recording.steps if k != LINEAGE_KEY]
        self.last_key = max(keys, key=key_parts) if keys else None
        self.finished = recording.run.status in TERMINAL

    def stop(self, divergence: Divergence | None) -> Halt:
        assert self.x is not None
        return self.x.halt(_Stop(divergence))

    def extra(self, key: str, now: str | None, note: str = "") -> Halt:
        """A live call or record at ``key``: the end of an unfinished
        recording, or something the recording does not have."""
        last = self.last_key
        if not self.finished and (last is None or key_parts(key) > key_parts(last)):
            return self.stop(None)
        return self.stop(Divergence("extra", key, None, now, note))

    def missed(self, key: str) -> None:
        self.misses.add(key)
        hidden = self.recording.steps.get(key)
        if hidden is not None and hidden.kind in REWALKED:
            return  # written again and compared (record_step)
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # a sync flow node's thread: it would run the work now
            raise self.extra(key, None, "a flow node's exec with no record") from None

    # -- the hook: before a live call --------------------------------------------
    async def before_call(self, call: CallInfo) -> None:
        if call.key in self.misses:
            raise self.extra(call.key, _call(call.name, _json(call.arguments)))

    # -- the ledger: nothing is written ----------------------------------------
    async def record_step(self, run_id: str, fence: int, step: StepRecord) -> StepRecord:
        was = self.recording.steps.get(step.key)
        if was is not None and was.kind in REWALKED:
            # A flow's journal entry, written again by the re-walk: it must
            # say what the record says (the node, its action, the store's change).
            if was.name == step.name and _same(was.output, step.output or "null"):
                self.seen.append(step.key)
                return step
            raise self.stop(
                Divergence(
                    "record", step.key, f"{was.name}: {was.output}", f"{step.name}: {step.output}"
                )
            )
        raise self.extra(step.key, _call(step.name, step.args))

    async def take_signal(self, run_id: str, name: str, step_key: str) -> str | None:
        raise self.extra(step_key, f"waits for signal {name!r}")

    async def get_runs(self, run_ids: Sequence[str]) -> list[RunRecord]:
        return [d.run for d in self.recording.children if d.run.id in run_ids]

    # -- the host: no child run is started -------------------------------------
    async def spawn_children(
        self,
        parent: Journal,
        pol: Policy[Any, Any],
        calls: list[tuple[tuple[Any, ...], dict[str, Any]]],
        ids: list[str],
        queue: str | None,
        priority: int,
    ) -> None:
        raise self.extra(ids[0].rsplit("~", 1)[-1].rsplit("/", 1)[0], f"spawns {pol.name}")

    async def await_memory_children(self, ids: list[str]) -> list[dict[str, Any]]:
        raise self.stop(Divergence("error", "", None, None, "children in memory"))


def _json(value: Any) -> str:
    try:
        return json.dumps(codec.encode(value, "arguments"), separators=(",", ":"))
    except Exception:  # only for the message
        return repr(value)


def replay(recording: Any, policy: Any, *, run_id: str | None = None) -> ReplayReport:
    """Replay ``recording`` (:func:`load_recording`'s sources) through
    ``policy`` and report; from synchronous code (a test)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(replay_async(recording, policy, run_id=run_id))
    raise RuntimeError("replay() cannot run inside an event loop; await replay_async(...)")


async def replay_async(recording: Any, policy: Any, *, run_id: str | None = None) -> ReplayReport:
    """:func:`replay`, awaited."""
    rec = await load_recording(recording, run_id)
    pol = as_policy(policy)
    pol.declare_types()
    guard = _Guard(rec)
    x = Execution(rec.run.id, store=guard, fence=1, hooks=[guard], inline_sleep=0.0)
    x.replay = _Observed({k: v for k, v in rec.steps.items() if v.kind not in REWALKED}, guard)
    x.host = guard
    x.parent_id = rec.run.parent_id
    x.queue = rec.run.queue
    guard.x = x
    data = read_inputs(rec.run.id, rec.run.inputs)
    report = ReplayReport(rec.run.id, rec.source, pol.name, [], [])
    outcome: tuple[str, Any] = ("succeeded", None)
    try:
        outcome = ("succeeded", await x.run_root(pol, tuple(data["args"]), data["kwargs"]))
    except BaseException as exc:
        halt, suspend = find_halt(exc), find_suspend(exc)
        if halt is not None:
            _halted(halt, rec, guard, report)
        elif suspend is not None:
            if rec.run.status in TERMINAL:
                report.divergences.append(
                    Divergence(
                        "extra", "", None, "suspends", "the new code waits where the run went on"
                    )
                )
            else:
                report.ended_at = guard.last_key
        elif isinstance(exc, Exception):
            outcome = ("failed", exc)
        else:
            raise
    report.replayed = _unique(guard.seen)
    if report.divergences or report.ended_at is not None or rec.run.status not in TERMINAL:
        if not report.divergences and report.ended_at is None:
            report.ended_at = guard.last_key
        return report
    report.divergences += _missing(rec, guard.seen)
    report.divergences += _outcome(rec.run, outcome)
    return report


def _halted(halt: Halt, rec: Recording, guard: _Guard, report: ReplayReport) -> None:
    cause = halt.cause
    if isinstance(cause, _Stop):
        if cause.divergence is None:
            report.ended_at = guard.last_key
        else:
            report.divergences.append(cause.divergence)
    elif isinstance(cause, NonDeterminismError):
        key = guard.seen.pop() if guard.seen else ""  # looked up, then found to differ
        report.divergences.append(_mismatch(cause, rec, key))
    else:
        report.divergences.append(Divergence("error", "", None, None, str(cause)))


_NOW = re.compile(r"^\s*now:\s+(.*?)\((.*)\)\s*$", re.M)


def _mismatch(err: NonDeterminismError, rec: Recording, key: str) -> Divergence:
    """A step whose record is another call: which kind of divergence it is."""
    recorded = rec.steps.get(key)
    found = _NOW.search(str(err))
    if recorded is None or found is None:
        return Divergence("name", key, None, None, str(err))
    name, args = found.group(1), found.group(2)
    was = _call(recorded.name, recorded.args)
    now = _call(name, args)
    digest = step_hash(args) if args else ""
    for other in rec.steps.values():
        if other.key != key and other.name == name and other.args_hash == digest:
            note = f"the record has this call at step {other.key}"
            return Divergence("order", key, was, now, note)
    if name != recorded.name:
        return Divergence("name", key, was, now)
    return Divergence("arguments", key, was, now, _first_difference(recorded.args, args))


def _first_difference(recorded: str | None, now: str) -> str:
    """Where two recorded argument lists first differ, as a path: the line
    a reader needs when the arguments are a whole conversation."""
    try:
        a, b = json.loads(recorded or "{}"), json.loads(now or "{}")
    except ValueError:
        return ""
    found = _diff(_plain(a), _plain(b), "")
    if found is None:
        return ""
    path, x, y = found
    return f"first difference at {path or 'the top'}: recorded {_short(x)}, now {_short(y)}"


def _diff(a: Any, b: Any, path: str) -> tuple[str, Any, Any] | None:
    if isinstance(a, dict) and isinstance(b, dict):
        if a.get("$t") == "msg" and b.get("$t") == "msg":
            return _diff(a.get("v"), b.get("v"), path)
        for k in [*a, *(k for k in b if k not in a)]:
            if k not in a or k not in b:
                return f"{path}[{k!r}]", a.get(k, "(absent)"), b.get(k, "(absent)")
            found = _diff(a[k], b[k], f"{path}[{k!r}]")
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = _diff(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        if len(a) != len(b):
            return f"{path} (length)", len(a), len(b)
        return None
    return None if a == b else (path, a, b)


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "..."


def _missing(rec: Recording, seen: list[str]) -> list[Divergence]:
    """The first recorded call after the last one the new code made: it
    stopped early. (A record skipped in between shows as a divergence at
    the next call, or in the outcome.)"""
    looked = set(seen)
    last = max((key_parts(k) for k in looked), default=())
    out = []
    for key in sorted(rec.steps, key=key_parts):
        if key in looked or key_parts(key) < last or rec.steps[key].kind != "call":
            continue  # the runtime's own records (time, signals, a flow's journal) are read in bulk
        if any(is_ancestor(k, key) for k in looked):
            continue  # answered by an enclosing step's record
        step = rec.steps[key]
        out.append(Divergence("missing", key, _call(step.name, step.args), None))
        break  # the first is what a reader needs
    return out


def _outcome(run: RunRecord, outcome: tuple[str, Any]) -> list[Divergence]:
    status, value = outcome
    if status == "succeeded":
        now = codec.dumps(value, "result of the replay")
        if run.status == "succeeded" and _same(run.result, now):
            return []
        return [Divergence("outcome", "", _ending(run), f"succeeded: {now}")]
    err = json.loads(error_to_json(value))
    if run.status == "failed" and run.error is not None:
        was = json.loads(run.error)
        if (was.get("type"), was.get("message")) == (err.get("type"), err.get("message")):
            return []
    return [
        Divergence("outcome", "", _ending(run), f"failed: {err.get('type')}: {err.get('message')}")
    ]


def _ending(run: RunRecord) -> str:
    if run.status == "succeeded":
        return f"succeeded: {run.result}"
    return f"{run.status}: {run.error}"


def _same(a: str | None, b: str) -> bool:
    try:
        return bool(_plain(json.loads(a or "null")) == _plain(json.loads(b)))
    except ValueError:
        return a == b


def _plain(tree: Any) -> Any:
    """A recorded value with message ids left out (random per execution)."""
    if isinstance(tree, list):
        return [_plain(v) for v in tree]
    if isinstance(tree, dict):
        if tree.get("$t") == "msg" and isinstance(tree.get("v"), dict):
            return {"$t": "msg", "v": {k: _plain(v) for k, v in tree["v"].items() if k != "id"}}
        return {k: _plain(v) for k, v in tree.items()}
    return tree


def _unique(keys: list[str]) -> list[str]:
    return list(dict.fromkeys(keys))
