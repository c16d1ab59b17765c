"""Move every value to the newest key: ``stalwart store reencrypt``.

One pass reads the store run by run (newest first, a page at a time) and
schedule by schedule, and writes again every value that is not sealed
under the key it would be sealed with today: the newest master key, or its
run's subject's key; values recorded before encryption was on are sealed
too. Each rewrite is a compare-and-set (:meth:`Store.reseal`): a value a
worker changed in between is left as that worker wrote it (under the
newest key already), so the pass runs beside live workers and loses
nothing. Memory rows are moved too, namespace by namespace. The subjects
met are wrapped again under the newest master key.

A pass killed at any point (SIGKILL) is resumed by running it again: what
was rewritten is under the newest key and is skipped; nothing is half
written, each run's rewrite being one transaction. A value no key held
opens (an erased subject's, or one sealed under a key no longer given) is
left as it is and counted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from ...core.mail import MAIL, envelope
from ...core.tags import decode_tags
from ..base import Reseal, RunDump
from .cipher import place, sealed_label
from .store import RUN_FIELDS, STEP_FIELDS, SUBJECT_TAG, SUBJECTS_PREFIX, EncryptedStore, owners_of

__all__ = ["Progress", "reencrypt"]

_PAGE = 100


@dataclass(slots=True)
class Progress:
    """What a pass did so far."""

    runs: int = 0
    values: int = 0
    unopened: int = 0
    changed_meanwhile: int = 0
    schedules: int = 0
    memories: int = 0
    subjects: int = 0
    seen_subjects: set[str] = field(default_factory=set)


async def reencrypt(
    store: EncryptedStore, *, report: Callable[[Progress], None] | None = None
) -> Progress:
    """One pass over ``store``: every value under the newest key; what it did."""
    progress = Progress()
    inner = store.inner
    before: tuple[float, str] | None = None
    while True:
        page = await inner.list_runs(limit=_PAGE, before=before)
        if not page:
            break
        for run in page:
            dump = await inner.export_run(run.id)
            if dump is not None:
                await _run(store, dump, progress)
            progress.runs += 1
        before = (page[-1].created_at, page[-1].id)
        if report is not None:
            report(progress)
    for schedule in await inner.list_schedules(10_000, check=False):
        where = place("schedule", schedule.name, "", "inputs")
        change = await _change(
            store,
            "schedules",
            schedule.name,
            "",
            "inputs",
            schedule.inputs,
            store.cipher.newest.label,
            (where,),
            where,
            progress,
        )
        if change is not None:
            progress.schedules += await _apply(store, [change], progress)
    await _memory(store, progress)
    for subject in sorted(progress.seen_subjects):
        progress.subjects += await store.subjects.rewrap(subject)
    if report is not None:
        report(progress)
    return progress


async def _change(
    store: EncryptedStore,
    table: str,
    owner: str,
    key: str,
    fld: str,
    text: str | None,
    target: str,
    wheres: tuple[str, ...],
    where: str,
    progress: Progress,
) -> Reseal | None:
    """The rewrite of one value onto the key labelled ``target``, or None."""
    if text is None or sealed_label(text) == target:
        return None
    opened = await store.open_value(text, *wheres)
    if opened is None or sealed_label(opened) is not None or opened.startswith("enc:"):
        progress.unopened += 1
        return None
    key_now = await store.sealing_key(owner) if table in ("runs", "steps", "signals") else None
    sealing = key_now if key_now is not None else store.cipher.newest
    return Reseal(table, owner, key, fld, text, sealing.seal(opened, where))


async def _run(store: EncryptedStore, dump: RunDump, progress: Progress) -> None:
    run = dump.run
    subject = decode_tags(run.tags).get(SUBJECT_TAG) if run.tags else None
    if subject is not None:
        progress.seen_subjects.add(subject)
    target = (await store.sealing_key(run.id)).label
    owners = owners_of(run.id)
    changes: list[Reseal] = []
    for f in RUN_FIELDS:
        wheres = tuple(place("run", o, "", f) for o in owners)
        c = await _change(
            store, "runs", run.id, "", f, getattr(run, f), target, wheres, wheres[0], progress
        )
        if c is not None:
            changes.append(c)
    for step in dump.steps:
        for f in STEP_FIELDS:
            wheres = tuple(place("step", o, step.key, f) for o in owners)
            c = await _change(
                store,
                "steps",
                run.id,
                step.key,
                f,
                getattr(step, f),
                target,
                wheres,
                wheres[0],
                progress,
            )
            if c is not None:
                changes.append(c)
    for signal in dump.signals:
        if signal.name == MAIL:
            c = await _mail(store, run.id, signal.payload, target, progress)
        else:
            wheres = tuple(place("signal", o, signal.name, "payload") for o in owners)
            c = await _change(
                store,
                "signals",
                run.id,
                signal.name,
                "payload",
                signal.payload,
                target,
                wheres,
                wheres[0],
                progress,
            )
        if c is not None:
            changes.append(c)
    if changes:
        await _apply(store, changes, progress)


async def _mail(
    store: EncryptedStore, run_id: str, text: str, target: str, progress: Progress
) -> Reseal | None:
    try:
        env = json.loads(text)
        body, uid = env["body"], str(env["id"])
    except (ValueError, KeyError, TypeError):
        return None
    body_text = (
        body
        if isinstance(body, str) and sealed_label(body)
        else json.dumps(body, separators=(",", ":"))
    )
    wheres = tuple(place("mail", o, uid, "body") for o in owners_of(run_id))
    c = await _change(
        store, "signals", run_id, MAIL, "payload", body_text, target, wheres, wheres[0], progress
    )
    if c is None:
        return None
    new = envelope(env["id"], env["from"], env["kind"], env["sent_at"], json.dumps(c.new))
    return Reseal("signals", run_id, MAIL, "payload", text, new)


async def _apply(store: EncryptedStore, changes: list[Reseal], progress: Progress) -> int:
    done = await store.inner.reseal(changes)
    progress.values += done
    # A step value lives in its row or in payloads, never both: one of the
    # two updates of each changes nothing.
    missed = len(changes) - done
    if missed > 0:
        progress.changed_meanwhile += missed
    return done


async def _memory(store: EncryptedStore, progress: Progress) -> None:
    """Every memory row's value, text and vector under the newest key."""
    inner = store.inner
    target = store.cipher.newest.label
    after = ""
    while namespaces := await inner.memory_namespaces(after, _PAGE):
        for namespace in namespaces:
            if namespace.startswith(SUBJECTS_PREFIX):
                continue  # the subjects' keys: wrapped again below
            changes: list[Reseal] = []
            for row in await inner.memory_list(namespace, 100_000):
                for f in ("value", "text", "vector"):
                    where = place("memory", namespace, row.key, f)
                    c = await _change(
                        store,
                        "memory",
                        namespace,
                        row.key,
                        f,
                        getattr(row, f),
                        target,
                        (where,),
                        where,
                        progress,
                    )
                    if c is not None:
                        changes.append(c)
            if changes:
                progress.memories += await _apply(store, changes, progress)
        after = namespaces[-1]
