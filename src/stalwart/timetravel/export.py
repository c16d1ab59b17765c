"""Runs as versioned JSON Lines: export from one store, import into another.

The format (``docs/time-travel.md``) is one JSON object per line. The first
is the header, ``{"format": "stalwart.runs", "version": 1, ...}``; then each
run as ``{"type": "run", "run": {...}}`` followed by its steps
(``{"type": "step", "run": ID, "step": {...}}``, in S1 order) and its signals
(``{"type": "signal", "run": ID, "signal": {...}}``). Recorded values
(inputs, results, arguments, outputs, errors, payloads) stay the JSON text
the store keeps, so a run moves between SQLite and PostgreSQL byte for byte,
spilled values included; a run's steps move as stored (``StoredStep``):
arguments that refer to an earlier step's (``core/stepargs.py``) stay
compact in the file, and a reader gets them whole from the store the run is
imported into (or :meth:`RunDump.records`).

Reading a file is data, never code (S13): each field is checked for its type
and a line that does not fit is a :class:`CorruptedRecord` naming the line
and the field; values are decoded only later, by whoever replays them, with
the types the program declared.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, fields
from pathlib import Path
from typing import IO, Any, get_args

from ..core.errors import CorruptedRecord, RunNotFound
from ..core.ledger import (
    CHILD_MARK,
    TERMINAL,
    RunRecord,
    RunStatus,
    StoredStep,
    check_run_id,
)
from ..core.stepargs import check_references
from ..core.tags import check_tags, encode_tags
from ..stores.base import RunDump, SignalRecord, Store, run_from_row
from .keys import key_parts

__all__ = [
    "FORMAT",
    "VERSION",
    "export_runs",
    "export_tagged",
    "import_runs",
    "read_export",
    "spawn_record",
    "spawned_ids",
    "write_export",
]

FORMAT = "stalwart.runs"
VERSION = 1
SPAWN_PREFIX = "stalwart.spawn:"

_RUN_FIELDS = tuple(f.name for f in fields(RunRecord))
_STEP_TYPES: dict[str, tuple[type, ...]] = {
    "key": (str,),
    "name": (str,),
    "args_hash": (str,),
    "args": (str, type(None)),
    "output": (str, type(None)),
    "error": (str, type(None)),
    "attempts": (int,),
    "started_at": (int, float),
    "finished_at": (int, float),
    "kind": (str,),
}
_TEXT = (str,)
_TEXT_OR_NULL = (str, type(None))
_TIME = (int, float)
_TIME_OR_NULL = (int, float, type(None))
# Every field a run line may hold, and its JSON type: checked before the
# record is built, so a value of another type is an error naming the file,
# the line and the field, not a TypeError (or worse, a run) further on.
_RUN_TYPES: dict[str, tuple[type, ...]] = {
    "id": _TEXT,
    "policy": _TEXT,
    "inputs": _TEXT,
    "status": _TEXT,
    "result": _TEXT_OR_NULL,
    "error": _TEXT_OR_NULL,
    "created_at": _TIME,
    "updated_at": _TIME,
    "code_version": _TEXT,
    "wake_at": _TIME_OR_NULL,
    "waiting_for": _TEXT_OR_NULL,
    "owner": _TEXT_OR_NULL,
    "lease_expires_at": _TIME_OR_NULL,
    "fence": (int,),
    "cancel_requested": (bool,),
    "queue": _TEXT,
    "priority": (int,),
    "parent_id": _TEXT_OR_NULL,
    "trace": _TEXT_OR_NULL,
    "tags": _TEXT_OR_NULL,
    "cleared": _TEXT_OR_NULL,
}
_STATUSES: tuple[str, ...] = get_args(RunStatus)
_RUN_TIMES = ("created_at", "updated_at", "wake_at", "lease_expires_at")
_STEP_TIMES = ("started_at", "finished_at")
_SIGNAL_TIMES = ("created_at",)
_SIGNAL_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "payload": (str,),
    "consumed_by": (str, type(None)),
    "uid": (str, type(None)),
    "created_at": (int, float),
}


def spawn_record(run_id: str, step: StoredStep) -> list[str]:
    """The child run ids a spawn step of run ``run_id`` recorded (none when
    it recorded no output, or is not a spawn).

    The output is data from a store, so it is checked before anything
    follows it: text that is not a JSON list of strings is a
    :class:`CorruptedRecord` naming the run and step. An id that is not
    under ``run_id`` (``<run_id>~...``) is left out: the engine never
    records one, and following it would copy an unrelated run's ledger.
    """
    if not (step.name.startswith(SPAWN_PREFIX) and step.output):
        return []
    where = f"run {run_id[:80]!r}, step {step.key[:80]!r}"
    try:
        ids = json.loads(step.output, parse_constant=_refuse_constant)
    except ValueError:
        raise CorruptedRecord(f"{where}: the spawn record is not JSON") from None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise CorruptedRecord(f"{where}: the spawn record is not a list of run ids")
    mine = run_id + CHILD_MARK
    return [i for i in ids if i.startswith(mine)]


def spawned_ids(dump: RunDump) -> list[str]:
    """The child runs this run's recorded spawns started, in step order."""
    out: list[str] = []
    for step in sorted(dump.steps, key=lambda s: key_parts(s.key)):
        out.extend(spawn_record(dump.run.id, step))
    return out


async def export_runs(store: Store, run_id: str, *, children: bool = False) -> list[RunDump]:
    """The run ``run_id`` as its store keeps it, and with ``children`` every
    run it spawned, theirs included (found through its recorded spawns)."""
    return await _export(store, [run_id], set(), children)


async def export_tagged(
    store: Store, tags: Mapping[str, str], *, children: bool = False
) -> list[RunDump]:
    """Every run carrying all of ``tags`` (newest first), each as
    :func:`export_runs` exports it; a child that carries the tags too is
    written once."""
    found = [rec.id async for rec in store.iter_runs(tags=tags)]
    dumps: list[RunDump] = []
    seen: set[str] = set()
    for run_id in found:
        if run_id not in seen:
            dumps += await _export(store, [run_id], seen, children, missing_ok=True)
    return dumps


async def _export(
    store: Store, roots: list[str], seen: set[str], children: bool, *, missing_ok: bool = False
) -> list[RunDump]:
    dumps: list[RunDump] = []
    todo = list(roots)
    run_id = roots[0]
    while todo:
        current = todo.pop(0)
        if current in seen:
            continue
        seen.add(current)
        dump = await store.export_run(current)
        if dump is None:
            if current == run_id and not missing_ok:
                raise RunNotFound(f"no run {run_id!r}")
            continue  # a child pruned since: the parent's records still say what it returned
        dump.steps.sort(key=lambda s: key_parts(s.key))
        dumps.append(dump)
        if children:
            todo.extend(spawned_ids(dump))
    return dumps


def write_export(dumps: Iterable[RunDump], out: IO[str]) -> int:
    """Write ``dumps`` to ``out`` as JSON Lines; how many runs were written."""
    dumps = list(dumps)
    header = {"format": FORMAT, "version": VERSION, "exported_at": time.time(), "runs": len(dumps)}
    out.write(_line(header))
    for dump in dumps:
        out.write(_line({"type": "run", "run": asdict(dump.run)}))
        for step in dump.steps:
            out.write(_line({"type": "step", "run": dump.run.id, "step": _stored(step)}))
        for sig in dump.signals:
            record = {k: v for k, v in asdict(sig).items() if k != "run_id"}
            out.write(_line({"type": "signal", "run": dump.run.id, "signal": record}))
    return len(dumps)


def _stored(step: StoredStep) -> dict[str, Any]:
    """A step's fields as its store keeps them: compact arguments stay compact."""
    return {name: getattr(step, name) for name in _STEP_TYPES}


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False) + "\n"


def read_export(source: IO[str] | str | Path) -> list[RunDump]:
    """The runs of an export (a file object, or the path of one)."""
    if isinstance(source, str | Path):
        with open(source, encoding="utf-8") as f:
            return _read(f, str(source))
    return _read(source, getattr(source, "name", "<export>"))


def _read(lines: Iterable[str], where: str) -> list[RunDump]:
    dumps: dict[str, RunDump] = {}
    keys: dict[str, set[str]] = {}
    numbered: Iterator[tuple[int, str]] = (
        (n, text) for n, text in enumerate(lines, 1) if text.strip()
    )
    first = next(numbered, None)
    if first is None:
        raise CorruptedRecord(f"{where}: empty, not a Stalwart export")
    header = _object(first[1], f"{where}:{first[0]}")
    if header.get("format") != FORMAT:
        raise CorruptedRecord(
            f"{where}:{first[0]}: not a Stalwart export (format {header.get('format')!r})"
        )
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version != VERSION:
        raise CorruptedRecord(
            f"{where}:{first[0]}: export version {version!r}; this Stalwart reads {VERSION}"
        )
    for n, text in numbered:
        at = f"{where}:{n}"
        obj = _object(text, at)
        kind = obj.get("type")
        if kind == "run":
            run = _run(obj.get("run"), at)
            if run.id in dumps:
                raise CorruptedRecord(f"{at}: run {run.id!r} appears twice")
            dumps[run.id] = RunDump(run, [], [])
            keys[run.id] = set()
            continue
        ref = obj.get("run")
        if not isinstance(ref, str):
            raise CorruptedRecord(
                f"{at}: field 'run' of a {str(kind)[:20]!r} line holds "
                f"{type(ref).__name__}, not a string (the id of a run listed before it)"
            )
        owner = dumps.get(ref)
        if owner is None:
            raise CorruptedRecord(f"{at}: field 'run' names no run listed before it")
        if kind == "step":
            step = StoredStep(**_checked(obj.get("step"), _STEP_TYPES, _STEP_TIMES, f"{at}: step"))
            if step.key in keys[owner.run.id]:
                raise CorruptedRecord(
                    f"{at}: step: field 'key' {step.key[:80]!r} appears twice "
                    f"for run {owner.run.id[:80]!r}"
                )
            keys[owner.run.id].add(step.key)
            owner.steps.append(step)
        elif kind == "signal":
            values = _checked(obj.get("signal"), _SIGNAL_TYPES, _SIGNAL_TIMES, f"{at}: signal")
            owner.signals.append(SignalRecord(owner.run.id, **values))
        else:
            raise CorruptedRecord(f"{at}: field 'type' is {kind!r}, not run, step or signal")
    for dump in dumps.values():
        steps = {s.key: s for s in dump.steps}
        try:  # every reference to an earlier step's arguments lands in this run
            check_references(dump.run.id, steps)
        except CorruptedRecord as exc:
            raise CorruptedRecord(f"{where}: {exc}") from None
    return list(dumps.values())


class _NonFinite(ValueError):
    """NaN or Infinity in JSON text: Python accepts them, JSON and stores do not."""


def _refuse_constant(name: str) -> Any:
    raise _NonFinite(name)


def _object(text: str, at: str) -> dict[str, Any]:
    try:
        obj = json.loads(text, parse_constant=_refuse_constant)
    except _NonFinite as exc:
        # Parse again, keeping the constant, only to name the field it sits in.
        path = _non_finite(json.loads(text), "")
        raise CorruptedRecord(
            f"{at}: field {path or '?'!r} holds {exc}, not a finite number"
        ) from None
    except ValueError as exc:
        raise CorruptedRecord(f"{at}: not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise CorruptedRecord(f"{at}: not a JSON object")
    return obj


def _non_finite(value: Any, path: str) -> str | None:
    """Where in ``value`` the first NaN or Infinity is (``run.created_at``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return path
    items: Iterable[tuple[str, Any]] = ()
    if isinstance(value, dict):
        items = ((str(k), v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((str(n), v) for n, v in enumerate(value))
    for name, inner in items:
        found = _non_finite(inner, f"{path}.{name}" if path else name)
        if found is not None:
            return found
    return None


def _finite(value: Any, name: str, at: str) -> None:
    """A time a page shows and a store compares: ``1e999`` parses as Infinity."""
    if isinstance(value, float) and not math.isfinite(value):
        raise CorruptedRecord(f"{at}: field {name!r} holds {value}, not a finite time")


def _run_id(run: RunRecord, at: str) -> None:
    """The id a file may give a run is one the engine could have made: a
    user's id as ``check_run_id`` allows it, or a child's, under its parent's."""
    run_id, parent = run.id, run.parent_id
    top = run_id
    if parent is not None and run_id.startswith(parent + CHILD_MARK):
        top = run_id.split(CHILD_MARK, 1)[0]
        if not run_id.isprintable():
            raise CorruptedRecord(f"{at}: field 'id' {run_id[:80]!r} contains control characters")
    try:
        check_run_id(top)
    except ValueError as exc:
        raise CorruptedRecord(f"{at}: field 'id': {exc}") from None


def _run(value: Any, at: str) -> RunRecord:
    if not isinstance(value, dict):
        raise CorruptedRecord(f"{at}: field 'run' is not an object")
    defaults = RunRecord("", "", "")
    # Fields this version does not know are left out; missing ones take
    # their defaults (an export from an older or newer Stalwart), except
    # those no run is without.
    for name in ("id", "policy", "inputs"):
        if name not in value:
            raise CorruptedRecord(f"{at}: run: field {name!r} is missing")
    for name, kinds in _RUN_TYPES.items():
        if name not in value:
            continue
        v = value[name]
        if not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds):
            raise CorruptedRecord(
                f"{at}: run: field {name!r} holds {'null' if v is None else type(v).__name__}, "
                f"not {' or '.join('null' if k is type(None) else k.__name__ for k in kinds)}"
            )
    if value.get("status", "pending") not in _STATUSES:
        raise CorruptedRecord(
            f"{at}: run: field 'status' is {str(value['status'])[:40]!r}, "
            f"not one of {', '.join(_STATUSES)}"
        )
    row = [value.get(name, getattr(defaults, name)) for name in _RUN_FIELDS]
    try:
        run = run_from_row(row)
    except CorruptedRecord as exc:
        raise CorruptedRecord(f"{at}: {exc}") from None
    _run_id(run, at)
    run.tags = _tags(run.tags, at)
    for name in _RUN_TIMES:
        _finite(getattr(run, name), name, at)
    return run


def _tags(text: str | None, at: str) -> str | None:
    """A run line's tags (JSON text of an object of strings) as checked tags,
    in the text a store keeps: a store reads them as rows, so nothing else
    may reach it."""
    if text is None:
        return None
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
        return encode_tags(check_tags(value, "run: field 'tags'"))
    except (ValueError, TypeError) as exc:
        raise CorruptedRecord(f"{at}: {exc}") from None


def _checked(
    value: Any, types: dict[str, tuple[type, ...]], times: tuple[str, ...], at: str
) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise CorruptedRecord(f"{at} is not an object")
    out: dict[str, Any] = {}
    for name, kinds in types.items():
        if name not in value:
            raise CorruptedRecord(f"{at}: field {name!r} is missing")
        v = value[name]
        if not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds):
            raise CorruptedRecord(
                f"{at}: field {name!r} holds {type(v).__name__}, "
                f"not {' or '.join(k.__name__ for k in kinds)}"
            )
        if name in times:
            _finite(v, name, at)
        out[name] = v
    return out


async def import_runs(store: Store, dumps: Iterable[RunDump]) -> list[str]:
    """Insert ``dumps`` into ``store``; the ids imported (one that exists is
    left as it is, not overwritten).

    A run that was executing where it was exported is imported as pending,
    held by nobody: the process that held it does not exist here. Its fence
    is at least 1 when it has steps, so the first claim here loads and
    replays them (a first claim, fence 0 to 1, has nothing to replay).

    A child run comes with its parent, or into a store that has its parent:
    an orphan would be executed by a worker with no run to hand its result
    to. Such an import is refused before anything is written.
    """
    dumps = list(dumps)
    await _parents_known(store, dumps)
    done: list[str] = []
    for dump in dumps:
        run = dump.run
        if run.status not in TERMINAL:
            if run.status == "running":
                run.status = "pending"
            run.owner = None
            run.lease_expires_at = None
        if dump.steps and run.fence < 1:
            run.fence = 1
        if await store.import_run(dump):
            done.append(run.id)
    return done


async def _parents_known(store: Store, dumps: list[RunDump]) -> None:
    """Every child run among ``dumps`` has its parent among them or in ``store``."""
    ids = {d.run.id for d in dumps}
    for dump in dumps:
        parent = dump.run.parent_id
        if parent is None or parent in ids:
            continue
        if await store.get_run(parent) is None:
            raise CorruptedRecord(
                f"run {dump.run.id[:80]!r} is a child run of {parent[:80]!r}, which is neither "
                "in this export nor in the store: export the parent with its children "
                f"(`stalwart runs export {parent[:80]} --children`) and import that"
            )
