"""A store that keeps every recorded value encrypted: the one seam.

:class:`EncryptedStore` wraps any store (SQLite, PostgreSQL) and owns a
:class:`~.cipher.Cipher` (the master keys) and the subjects' keys
(:class:`~.subjects.SubjectKeys`). Every value crosses it on the way in
(sealed) and on the way out (opened): run inputs, results and errors, step
arguments, outputs and errors, signal payloads, mail bodies, schedule inputs,
memory values, texts and vectors. What schedules and lists runs stays as it
is: ids, policy names, status, times, queues, tags, owners, fences, step
keys, names and argument hashes, signal names, mail senders and kinds.

A run tagged ``subject`` (``runner.start(p, tags={"subject": "u-42"})``,
inherited by its child runs) has its values sealed under that subject's own
key, so :meth:`EncryptedStore.erase_subject` makes them unreadable at once.

Reading never fails on a value it cannot open: the value stays sealed text
(``enc:...``), or becomes ``enc:erased:<subject>`` when its subject's key
is gone, and whoever needs it decodes it with :func:`stalwart.core.codec.loads`,
which raises :class:`~stalwart.core.errors.ValueEncrypted` or
:class:`~stalwart.core.errors.ValueErased` naming the run, the step and the
field. A run that needs such a value fails with that error; the CLI and the
inspector show "encrypted" or "erased" in its place.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar

from ...core.errors import StoreError
from ...core.ledger import CHILD_MARK, RunRecord, RunStatus, StoredStep
from ...core.mail import MAIL, Delivery, envelope
from ...core.memory import MemoryRecord, scan_text
from ...core.sealed import erased_text, sealed_state
from ...core.tags import decode_tags, encode_tags
from ..base import Beat, RunDump, ScheduleRecord, SignalRecord, Store, check_schedule
from ..outages import Outages
from ..versions import VersionRecord, WorkerRecord
from .cipher import Cipher, DataKey, place, sealed_label, subject_of_label
from .keys import KeyProvider, StaticKeys
from .subjects import SUBJECTS_NAMESPACE, SubjectKeys, subject_namespace

__all__ = [
    "RUN_FIELDS",
    "STEP_FIELDS",
    "SUBJECTS_PREFIX",
    "SUBJECT_TAG",
    "EncryptedStore",
    "owners_of",
]

#: The tag that ties a run's values to a subject's own key.
SUBJECT_TAG = "subject"

RUN_FIELDS = ("inputs", "result", "error")
STEP_FIELDS = ("args", "output", "error")
_ARCHIVE = re.compile(rf"^(.*){re.escape(CHILD_MARK)}\d+$")
SUBJECTS_PREFIX = json.dumps([SUBJECTS_NAMESPACE])[:-1]


_T = TypeVar("_T")

#: How many of a namespace's memories a text search opens and reads (the
#: most recently updated first): an encrypted store has no index to search.
SCANNED_MEMORIES = 10_000


def _with(record: _T, changes: Mapping[str, str | None]) -> _T:
    """A copy of ``record`` (a run's or a step's) with ``changes`` made."""
    new = copy.copy(record)
    for name, value in changes.items():
        setattr(new, name, value)
    return new


def _envelope(text: str) -> dict[str, Any] | None:
    """The fields of a mail envelope, None for text that is not one (kept as is)."""
    try:
        env = json.loads(text)
    except (ValueError, RecursionError):
        return None
    fields = ("id", "from", "kind", "sent_at", "body")
    return env if isinstance(env, dict) and all(f in env for f in fields) else None


def owners_of(run_id: str) -> tuple[str, ...]:
    """The run ids a value found in ``run_id`` may be bound to: its own, and
    for a generation archived by continue-as-new, the run it was written in."""
    found = _ARCHIVE.match(run_id)
    return (run_id,) if found is None else (run_id, found.group(1))


class EncryptedStore(Store):
    """``inner`` with every recorded value sealed by ``keys``.

    ``keys`` is a :class:`~.keys.KeyProvider` (or ``(id, key)`` pairs),
    asked once, when the store opens (a bad or missing key fails the open
    with :class:`~stalwart.core.errors.EncryptionKeyError`).
    """

    def __init__(self, inner: Store, keys: KeyProvider | Sequence[tuple[str, bytes]]) -> None:
        if isinstance(inner, EncryptedStore):
            raise StoreError("the store is encrypted already")
        self.inner = inner
        self.provider: KeyProvider = keys if isinstance(keys, KeyProvider) else StaticKeys(keys)
        self.url = inner.url
        self.ephemeral = inner.ephemeral
        self.text_search = False  # the inner store's index holds sealed text
        self._cipher: Cipher | None = None
        self._subjects: SubjectKeys | None = None
        self._run_subject: dict[str, str | None] = {}
        self._erased: set[tuple[str, str]] = set()

    # -- keys ------------------------------------------------------------------
    @property
    def cipher(self) -> Cipher:
        if self._cipher is None:
            self._cipher = Cipher(self.provider.master_keys(), type(self.provider).__name__)
        return self._cipher

    @property
    def subjects(self) -> SubjectKeys:
        if self._subjects is None:
            self._subjects = SubjectKeys(self.inner, self.cipher)
        return self._subjects

    async def open(self) -> None:
        self.cipher  # noqa: B018 - the keys are checked before anything is read
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def ddl(self) -> str:
        return await self.inner.ddl()

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "encrypted": True}

    @property
    def outages(self) -> Outages:
        return self.inner.outages

    async def erase_subject(self, subject: str) -> int:
        """Erase ``subject``: delete its keys, so no value sealed under them
        can be opened again, here, in backups taken from now on or in
        exports; how many keys went. Its runs stay, showing "erased" in
        place of each value; one that resumes fails with
        :class:`~stalwart.core.errors.ValueErased` naming the value it
        needed. Other processes see the erasure within
        :data:`~.subjects.RECHECK` seconds."""
        if not isinstance(subject, str) or not subject:
            raise ValueError("a subject is a non-empty string")
        return await self.subjects.erase(subject)

    async def sealing_key(self, run_id: str) -> DataKey:
        """The key a value of ``run_id`` is sealed with today: its
        subject's, or the newest master key."""
        subject = await self._subject_of(run_id)
        if subject is None:
            return self.cipher.newest
        return await self.subjects.sealing_key(subject)

    async def _subject_of(self, run_id: str) -> str | None:
        if run_id in self._run_subject:
            return self._run_subject[run_id]
        run = await self.inner.get_run(run_id)
        subject = None if run is None else self._note(run)
        return subject

    def _note(self, run: RunRecord) -> str | None:
        subject = decode_tags(run.tags).get(SUBJECT_TAG) if run.tags else None
        if len(self._run_subject) > 100_000:
            self._run_subject.clear()
        self._run_subject[run.id] = subject
        return subject

    # -- sealing and opening one value -------------------------------------------
    async def seal(self, text: str | None, key: DataKey, where: str) -> str | None:
        """``text`` sealed for ``where``; None and text sealed already pass."""
        if text is None or sealed_label(text) is not None:
            return text
        return key.seal(text, where)

    async def open_value(self, text: str | None, *wheres: str) -> str | None:
        """The JSON text sealed in ``text``, tried at each of ``wheres``; the
        sealed text itself when no key held opens it, the erased marker when
        its subject was erased; plain text passes."""
        if text is None:
            return None
        label = sealed_label(text)
        if label is None:
            return text
        subject = subject_of_label(label)
        key: DataKey | None
        if subject is None:
            key = self.cipher.master(label)
        else:
            if subject in self._erased:
                return erased_text(subject[0])
            key = await self.subjects.key(*subject)
            if key is None:
                row = await self.inner.memory_get(subject_namespace(subject[0]), subject[1])
                if row is not None:
                    return text  # kept, but no master key held opens it
                # Key ids are random and never made again: gone is gone for good.
                self._erased.add(subject)
                return erased_text(subject[0])
        if key is None:
            return text
        for where in wheres:
            opened = key.open(text, where)
            if opened is not None:
                return opened
        return text

    # -- runs --------------------------------------------------------------------
    async def _seal_run(self, run: RunRecord) -> RunRecord:
        if run.parent_id is not None and not (run.tags and SUBJECT_TAG in decode_tags(run.tags)):
            inherited = await self._subject_of(run.parent_id)
            if inherited is not None:
                tags = decode_tags(run.tags) if run.tags else {}
                run = dataclasses.replace(run, tags=encode_tags({**tags, SUBJECT_TAG: inherited}))
        self._note(run)
        key = await self.sealing_key(run.id)
        changes = {
            f: await self.seal(getattr(run, f), key, place("run", run.id, "", f))
            for f in RUN_FIELDS
        }
        return _with(run, changes)

    async def _open_run(self, run: RunRecord | None) -> RunRecord | None:
        if run is None:
            return None
        self._note(run)
        owners = owners_of(run.id)
        changes = {}
        for f in RUN_FIELDS:
            text = getattr(run, f)
            if text is not None and sealed_label(text) is not None:
                changes[f] = await self.open_value(text, *(place("run", o, "", f) for o in owners))
        return _with(run, changes) if changes else run

    async def _open_runs(self, runs: Sequence[RunRecord]) -> list[RunRecord]:
        out = []
        for run in runs:
            opened = await self._open_run(run)
            assert opened is not None
            out.append(opened)
        return out

    async def create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        stored, new = await self.inner.create_run(await self._seal_run(run))
        opened = await self._open_run(stored)
        assert opened is not None
        return opened, new

    async def create_runs(self, runs: Sequence[RunRecord]) -> list[RunRecord]:
        sealed = [await self._seal_run(r) for r in runs]
        return await self._open_runs(await self.inner.create_runs(sealed))

    async def get_run(self, run_id: str) -> RunRecord | None:
        return await self._open_run(await self.inner.get_run(run_id))

    async def get_runs(self, run_ids: Sequence[str]) -> list[RunRecord]:
        return await self._open_runs(await self.inner.get_runs(run_ids))

    async def list_runs(
        self,
        status: str | None = None,
        limit: int = 100,
        offset: int = 0,
        *,
        queue: str | None = None,
        policy: str | None = None,
        id_contains: str | None = None,
        created_after: float | None = None,
        created_before: float | None = None,
        before: tuple[float, str] | None = None,
        tags: Mapping[str, str] | None = None,
        text: str | None = None,
    ) -> list[RunRecord]:
        if text is not None:
            raise StoreError(
                "text search cannot read an encrypted store's runs: their inputs, "
                "results and errors are sealed (search by id, policy, status, tags or time)"
            )
        runs = await self.inner.list_runs(
            status,
            limit,
            offset,
            queue=queue,
            policy=policy,
            id_contains=id_contains,
            created_after=created_after,
            created_before=created_before,
            before=before,
            tags=tags,
        )
        return await self._open_runs(runs)

    async def count_runs(
        self,
        *,
        queue: str | None = None,
        policy: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> dict[str, dict[str, int]]:
        return await self.inner.count_runs(queue=queue, policy=policy, tags=tags)

    async def waiting_for_signals(self, limit: int = 100) -> list[RunRecord]:
        return await self._open_runs(await self.inner.waiting_for_signals(limit))

    async def claim(self, run_id: str, owner: str, lease: float) -> RunRecord | None:
        return await self._open_run(await self.inner.claim(run_id, owner, lease))

    async def claim_due(
        self,
        owner: str,
        lease: float,
        limit: int,
        accept: Callable[[RunRecord], bool],
        queues: Sequence[str] | None = None,
        *,
        policies: Collection[str] | None = None,
        versions: Collection[str] | None = None,
        fresh: bool = True,
    ) -> list[RunRecord]:
        # ``accept`` reads what schedules a run (its policy, its id), never a value.
        runs = await self.inner.claim_due(
            owner, lease, limit, accept, queues, policies=policies, versions=versions, fresh=fresh
        )
        return await self._open_runs(runs)

    async def park_run(self, seen: RunRecord, waiting_for: str) -> bool:
        # ``seen`` is compared by fence and status only: its values never cross.
        return await self.inner.park_run(seen, waiting_for)

    # -- versions: names, owners and clearances, never a value ---------------
    async def beat_worker(self, worker: WorkerRecord) -> list[VersionRecord]:
        return await self.inner.beat_worker(worker)

    async def forget_worker(self, owner: str) -> None:
        await self.inner.forget_worker(owner)

    async def list_workers(self) -> list[WorkerRecord]:
        return await self.inner.list_workers()

    async def list_versions(self) -> list[VersionRecord]:
        return await self.inner.list_versions()

    async def set_latest(self, version: str) -> None:
        await self.inner.set_latest(version)

    async def retire_version(self, version: str) -> None:
        await self.inner.retire_version(version)

    async def clear_run(
        self, run_id: str, versions: Sequence[str], fence: int | None = None
    ) -> RunRecord | None:
        return await self._open_run(await self.inner.clear_run(run_id, versions, fence))

    async def pin_run(
        self, run_id: str, code_version: str, fence: int | None = None
    ) -> RunRecord | None:
        return await self._open_run(await self.inner.pin_run(run_id, code_version, fence))

    async def set_queue(
        self, name: str, *, concurrency: int | None = None, rate: float | None = None
    ) -> None:
        await self.inner.set_queue(name, concurrency=concurrency, rate=rate)

    async def wake(self, run_id: str, waiting_for: str) -> None:
        await self.inner.wake(run_id, waiting_for)

    async def unfinished_children(self, parent_id: str, prefix: str) -> int:
        return await self.inner.unfinished_children(parent_id, prefix)

    async def heartbeat(self, owner: str, lease: float, run_ids: Sequence[str]) -> Beat:
        return await self.inner.heartbeat(owner, lease, run_ids)

    async def finish_run(
        self, run_id: str, fence: int, status: RunStatus, result: str | None, error: str | None
    ) -> None:
        key = await self.sealing_key(run_id)
        await self.inner.finish_run(
            run_id,
            fence,
            status,
            await self.seal(result, key, place("run", run_id, "", "result")),
            await self.seal(error, key, place("run", run_id, "", "error")),
        )

    async def suspend_run(
        self, run_id: str, fence: int, wake_at: float | None, waiting_for: str | None
    ) -> bool:
        return await self.inner.suspend_run(run_id, fence, wake_at, waiting_for)

    async def release(self, run_id: str, fence: int) -> None:
        await self.inner.release(run_id, fence)

    async def request_cancel(self, run_id: str) -> RunRecord | None:
        return await self._open_run(await self.inner.request_cancel(run_id))

    async def next_wake(self) -> float | None:
        return await self.inner.next_wake()

    async def prune(
        self,
        older_than: float | None = None,
        keep: int | None = None,
        *,
        tags: Mapping[str, str] | None = None,
    ) -> int:
        return await self.inner.prune(older_than, keep, tags=tags)

    # -- steps ---------------------------------------------------------------------
    async def _seal_step(self, run_id: str, step: StoredStep, key: DataKey) -> StoredStep:
        # Built field by field: a copy and setattr cost more than the sealing.
        args, output, error = step.args, step.output, step.error
        if args is not None and sealed_label(args) is None:
            args = key.seal(args, place("step", run_id, step.key, "args"))
        if output is not None and sealed_label(output) is None:
            output = key.seal(output, place("step", run_id, step.key, "output"))
        if error is not None and sealed_label(error) is None:
            error = key.seal(error, place("step", run_id, step.key, "error"))
        return StoredStep(
            step.key,
            step.name,
            step.args_hash,
            args,
            output,
            error,
            step.attempts,
            step.started_at,
            step.finished_at,
            step.kind,
        )

    async def _open_step(self, run_id: str, step: StoredStep) -> StoredStep:
        changes = {}
        for f in STEP_FIELDS:
            text = getattr(step, f)
            if text is not None and sealed_label(text) is not None:
                wheres = (place("step", o, step.key, f) for o in owners_of(run_id))
                changes[f] = await self.open_value(text, *wheres)
        return _with(step, changes) if changes else step

    async def _open_steps(self, run_id: str, steps: dict[str, StoredStep]) -> dict[str, StoredStep]:
        return {k: await self._open_step(run_id, s) for k, s in steps.items()}

    async def load_stored_steps(self, run_id: str) -> dict[str, StoredStep]:
        return await self._open_steps(run_id, await self.inner.load_stored_steps(run_id))

    async def stored_steps_by_key(
        self, run_id: str, keys: Collection[str]
    ) -> dict[str, StoredStep]:
        return await self._open_steps(run_id, await self.inner.stored_steps_by_key(run_id, keys))

    async def step_positions(
        self, run_id: str, known: int = -1, since: float = float("-inf")
    ) -> tuple[int, dict[str, float]]:
        return await self.inner.step_positions(run_id, known, since)

    async def record_step(self, run_id: str, fence: int, step: StoredStep) -> StoredStep:
        key = await self.sealing_key(run_id)
        sealed = await self._seal_step(run_id, step, key)
        won = await self.inner.record_step(run_id, fence, sealed)
        return step if won is sealed else await self._open_step(run_id, won)

    async def continue_run(
        self, run_id: str, fence: int, inputs: str, archive_id: str, first: StoredStep
    ) -> None:
        key = await self.sealing_key(run_id)
        sealed_inputs = await self.seal(inputs, key, place("run", run_id, "", "inputs"))
        assert sealed_inputs is not None
        await self.inner.continue_run(
            run_id, fence, sealed_inputs, archive_id, await self._seal_step(run_id, first, key)
        )

    # -- signals and mail ------------------------------------------------------------
    async def send_signal(
        self,
        run_id: str,
        name: str,
        payload: str,
        *,
        once: bool = False,
        uid: str | None = None,
        wait_fence: int | None = None,
    ) -> RunRecord:
        key = await self.sealing_key(run_id)
        sealed = await self.seal(payload, key, place("signal", run_id, name, "payload"))
        assert sealed is not None
        sent = await self.inner.send_signal(
            run_id, name, sealed, once=once, uid=uid, wait_fence=wait_fence
        )
        opened = await self._open_run(sent)
        assert opened is not None
        return opened

    async def take_signal(self, run_id: str, name: str, step_key: str) -> str | None:
        text = await self.inner.take_signal(run_id, name, step_key)
        return await self.open_value(text, place("signal", run_id, name, "payload"))

    async def deliver_mail(
        self, run_id: str, envelope_text: str, uid: str, wakes: Sequence[str]
    ) -> Delivery:
        env = json.loads(envelope_text)
        key = await self.sealing_key(run_id)
        body = await self.seal(
            json.dumps(env["body"], separators=(",", ":")), key, place("mail", run_id, uid, "body")
        )
        assert body is not None
        sealed = envelope(env["id"], env["from"], env["kind"], env["sent_at"], json.dumps(body))
        return await self.inner.deliver_mail(run_id, sealed, uid, wakes)

    async def _open_mail(self, run_id: str, text: str, bare: bool = False) -> str:
        """The envelope ``text`` with its body opened. A body no key opens
        stays a string in the envelope, or, when ``bare`` (what a receiving
        run gets), is returned alone, so decoding it names the run and step."""
        try:
            env = json.loads(text)
            body, uid = env["body"], env["id"]
        except (ValueError, KeyError, TypeError):
            return text
        if not isinstance(body, str) or sealed_label(body) is None:
            return text
        wheres = (place("mail", o, str(uid), "body") for o in owners_of(run_id))
        opened = await self.open_value(body, *wheres)
        assert opened is not None
        if sealed_state(opened) is not None:
            if bare:
                return opened
            opened = json.dumps(opened)  # the body stays a string saying so
        return envelope(env["id"], env["from"], env["kind"], env["sent_at"], opened)

    async def take_mail(
        self, run_id: str, step_key: str, sender: str | None, kind: str | None
    ) -> str | None:
        text = await self.inner.take_mail(run_id, step_key, sender, kind)
        return None if text is None else await self._open_mail(run_id, text, bare=True)

    # -- moving runs (stalwart.timetravel): values travel opened, sealed again where they land --
    async def export_run(self, run_id: str) -> RunDump | None:
        dump = await self.inner.export_run(run_id)
        if dump is None:
            return None
        run = await self._open_run(dump.run)
        assert run is not None
        steps = [await self._open_step(run_id, s) for s in dump.steps]
        signals = [await self._open_signal(s) for s in dump.signals]
        return RunDump(run, steps, signals)

    async def _open_signal(self, signal: SignalRecord) -> SignalRecord:
        if signal.name == MAIL:
            payload = await self._open_mail(signal.run_id, signal.payload)
        else:
            wheres = (place("signal", o, signal.name, "payload") for o in owners_of(signal.run_id))
            payload = await self.open_value(signal.payload, *wheres) or signal.payload
        return dataclasses.replace(signal, payload=payload)

    async def import_run(self, dump: RunDump) -> bool:
        run = await self._seal_run(dump.run)
        key = await self.sealing_key(run.id)
        steps = [await self._seal_step(run.id, s, key) for s in dump.steps]
        signals = []
        for s in dump.signals:
            # Signals land in the imported run: sealed for it, whatever run they came from.
            env = _envelope(s.payload) if s.name == MAIL else None
            if env is not None:
                sealed_body = isinstance(env["body"], str) and sealed_label(env["body"])
                body = (
                    env["body"]
                    if sealed_body
                    else await self.seal(
                        json.dumps(env["body"], separators=(",", ":")),
                        key,
                        place("mail", run.id, str(env["id"]), "body"),
                    )
                )
                payload = envelope(
                    env["id"], env["from"], env["kind"], env["sent_at"], json.dumps(body)
                )
            else:
                where = place("signal", run.id, s.name, "payload")
                payload = await self.seal(s.payload, key, where) or s.payload
            signals.append(dataclasses.replace(s, payload=payload))
        return await self.inner.import_run(RunDump(run, steps, signals))

    # -- schedules ---------------------------------------------------------------------
    async def _seal_schedule(self, schedule: ScheduleRecord) -> ScheduleRecord:
        where = place("schedule", schedule.name, "", "inputs")
        inputs = await self.seal(schedule.inputs, self.cipher.newest, where)
        assert inputs is not None
        return dataclasses.replace(schedule, inputs=inputs)

    async def _open_schedule(self, schedule: ScheduleRecord | None) -> ScheduleRecord | None:
        if schedule is None or sealed_label(schedule.inputs) is None:
            return schedule
        where = place("schedule", schedule.name, "", "inputs")
        opened = await self.open_value(schedule.inputs, where)
        return dataclasses.replace(schedule, inputs=schedule.inputs if opened is None else opened)

    async def _open_schedules(self, schedules: Sequence[ScheduleRecord]) -> list[ScheduleRecord]:
        out = []
        for s in schedules:
            opened = await self._open_schedule(s)
            assert opened is not None
            out.append(opened)
        return out

    async def create_schedule(self, schedule: ScheduleRecord) -> tuple[ScheduleRecord, bool]:
        stored, new = await self.inner.create_schedule(await self._seal_schedule(schedule))
        opened = await self._open_schedule(stored)
        assert opened is not None
        return opened, new

    async def redefine_schedule(self, schedule: ScheduleRecord, retime: bool) -> bool:
        return await self.inner.redefine_schedule(await self._seal_schedule(schedule), retime)

    async def get_schedule(self, name: str) -> ScheduleRecord | None:
        return await self._open_schedule(await self.inner.get_schedule(name))

    async def list_schedules(self, limit: int = 1000, check: bool = True) -> list[ScheduleRecord]:
        # Rows are checked once opened: a sealed row's inputs are not JSON yet.
        rows = await self._open_schedules(await self.inner.list_schedules(limit, check=False))
        if check:
            return [check_schedule(r) for r in rows]
        return rows

    async def due_schedules(
        self, now: float, limit: int, after: tuple[Any, str] | None = None
    ) -> list[ScheduleRecord]:
        return await self._open_schedules(await self.inner.due_schedules(now, limit, after))

    async def advance_schedule(
        self, name: str, expected: int, next_at: int, last_at: int | None
    ) -> bool:
        return await self.inner.advance_schedule(name, expected, next_at, last_at)

    async def pause_schedule(self, name: str, paused: bool, next_at: int | None) -> bool:
        return await self.inner.pause_schedule(name, paused, next_at)

    async def delete_schedule(self, name: str) -> bool:
        return await self.inner.delete_schedule(name)

    # -- memory --------------------------------------------------------------------------
    def _memory_place(self, record: MemoryRecord, field: str) -> str:
        return place("memory", record.namespace, record.key, field)

    async def _seal_memory(self, record: MemoryRecord) -> MemoryRecord:
        if record.namespace.startswith(SUBJECTS_PREFIX):
            raise ValueError(f"the memory namespace {SUBJECTS_NAMESPACE!r} is the store's own")
        key = self.cipher.newest
        value = await self.seal(record.value, key, self._memory_place(record, "value"))
        text = await self.seal(record.text, key, self._memory_place(record, "text"))
        vector = await self.seal(record.vector, key, self._memory_place(record, "vector"))
        assert value is not None and text is not None
        return dataclasses.replace(record, value=value, text=text, vector=vector)

    async def _open_memory(self, record: MemoryRecord | None) -> MemoryRecord | None:
        if record is None:
            return None
        value = await self.open_value(record.value, self._memory_place(record, "value"))
        text = await self.open_value(record.text, self._memory_place(record, "text"))
        vector = await self.open_value(record.vector, self._memory_place(record, "vector"))
        assert value is not None and text is not None
        return dataclasses.replace(record, value=value, text=text, vector=vector)

    async def _open_memories(self, records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        out = []
        for r in records:
            opened = await self._open_memory(r)
            assert opened is not None
            out.append(opened)
        return out

    async def memory_put(self, record: MemoryRecord) -> None:
        await self.inner.memory_put(await self._seal_memory(record))

    async def memory_insert(self, record: MemoryRecord) -> bool:
        return await self.inner.memory_insert(await self._seal_memory(record))

    async def memory_get(self, namespace: str, key: str) -> MemoryRecord | None:
        return await self._open_memory(await self.inner.memory_get(namespace, key))

    async def memory_list(self, namespace: str, limit: int) -> list[MemoryRecord]:
        return await self._open_memories(await self.inner.memory_list(namespace, limit))

    async def memory_search_text(
        self, namespace: str, words: Sequence[str], limit: int
    ) -> list[tuple[MemoryRecord, float]]:
        """The store holds only sealed text, which no index can search: the
        namespace's rows (up to :data:`SCANNED_MEMORIES`, most recently
        updated first) are opened and searched in this process, by the
        in-memory store's rule (how many of the words a row holds)."""
        rows = await self.memory_list(namespace, SCANNED_MEMORIES)
        return scan_text(rows, words, limit)

    async def memory_namespaces(self, after: str, limit: int) -> list[str]:
        return await self.inner.memory_namespaces(after, limit)

    async def memory_vectors(self, namespace: str) -> list[MemoryRecord]:
        return await self._open_memories(await self.inner.memory_vectors(namespace))

    async def memory_delete(self, namespace: str, key: str) -> bool:
        return await self.inner.memory_delete(namespace, key)

    async def memory_drop(self, namespace: str, keep_run: str | None = None) -> tuple[int, int]:
        return await self.inner.memory_drop(namespace, keep_run)

    async def watch(self, wake: Callable[[str, str | None], None]) -> None:
        await self.inner.watch(wake)
