"""What a store keeps about versions: the serving workers and the application versions.

A serving worker writes its :class:`WorkerRecord` at each heartbeat
(:meth:`Store.beat_worker`): its application version, the code version of
each policy it has, the queues it serves, its lease and when it last beat.
The store keeps a :class:`VersionRecord` per application version it has
seen; an operator names the latest (the version new runs go to; while
none is, any) with ``stalwart versions set-latest`` and retires a version
with ``stalwart versions retire``. The rules that read them (who
can continue which run, which runs are stranded) are the runner's
(:mod:`stalwart.runner.routing`).

Everything here is data (S13): versions and policy names are only compared
with the worker's own; a row that does not decode is a
:class:`~stalwart.core.errors.CorruptedRecord` naming the worker.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import CorruptedRecord

__all__ = [
    "FORGET_AFTER",
    "MAX_VERSION",
    "VERSION_COLUMNS",
    "WORKER_COLUMNS",
    "VersionRecord",
    "WorkerRecord",
    "check_version",
    "cleared_versions",
    "version_from_row",
    "with_cleared",
    "worker_from_row",
    "worker_row",
]

WORKER_COLUMNS = "owner, version, policies, queues, lease, started_at, beat_at"
VERSION_COLUMNS = "version, latest, retired_at, first_seen"

#: How long a worker's row outlives its last heartbeat before a beat prunes it.
FORGET_AFTER = 86400.0
#: The longest version an operator may name.
MAX_VERSION = 200


def check_version(version: str, where: str) -> str:
    """``version`` if an operator may name it (1 to :data:`MAX_VERSION`
    printable characters, no spaces: it is listed, compared and kept in a
    list separated by spaces); else a ValueError naming ``where``. An
    empty version would read as "recorded before versions": any code."""
    if (
        0 < len(version) <= MAX_VERSION
        and version.isprintable()
        and not any(c.isspace() for c in version)
    ):
        return version
    shown = version if len(version) <= 80 else f"{version[:80]}... ({len(version)} characters)"
    raise ValueError(
        f"{where}: a version is 1 to {MAX_VERSION} printable characters without spaces, "
        f"not {shown!r}"
    )


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    """A serving worker as its last heartbeat left it.

    ``policies``: the code version of each policy it has, by name.
    ``queues``: the queues it serves (None: every queue). It is live while
    ``beat_at + lease`` is in the future.
    """

    owner: str
    version: str
    policies: dict[str, str]
    queues: tuple[str, ...] | None
    lease: float
    started_at: float
    beat_at: float

    def live(self, now: float) -> bool:
        return self.beat_at + self.lease >= now


@dataclass(frozen=True, slots=True)
class VersionRecord:
    """An application version the store has seen: whether new runs go to it
    (``latest``), and when it was retired (None: it serves)."""

    version: str
    latest: bool
    retired_at: float | None
    first_seen: float

    @property
    def retired(self) -> bool:
        return self.retired_at is not None


def worker_row(w: WorkerRecord) -> tuple[Any, ...]:
    """The values of :data:`WORKER_COLUMNS` for ``w``."""
    policies = json.dumps(w.policies, sort_keys=True, separators=(",", ":"))
    queues = None if w.queues is None else json.dumps(list(w.queues), separators=(",", ":"))
    return (w.owner, w.version, policies, queues, w.lease, w.started_at, w.beat_at)


def worker_from_row(row: Sequence[Any]) -> WorkerRecord:
    """A WorkerRecord from a row selected with :data:`WORKER_COLUMNS`."""
    owner, version, policies_text, queues_text, lease, started_at, beat_at = row
    try:
        policies = json.loads(policies_text)
        queues = None if queues_text is None else json.loads(queues_text)
    except (TypeError, ValueError) as exc:
        raise CorruptedRecord(f"worker {str(owner)[:80]!r}: {exc}") from None
    if not (
        isinstance(policies, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in policies.items())
    ):
        raise CorruptedRecord(
            f"worker {str(owner)[:80]!r}: field 'policies' is not an object of texts"
        )
    if queues is not None and not (
        isinstance(queues, list) and all(isinstance(q, str) for q in queues)
    ):
        raise CorruptedRecord(f"worker {str(owner)[:80]!r}: field 'queues' is not a list of texts")
    return WorkerRecord(
        str(owner),
        str(version),
        policies,
        None if queues is None else tuple(queues),
        float(lease),
        float(started_at),
        float(beat_at),
    )


def version_from_row(row: Sequence[Any]) -> VersionRecord:
    """A VersionRecord from a row selected with :data:`VERSION_COLUMNS`."""
    version, latest, retired_at, first_seen = row
    return VersionRecord(
        str(version),
        bool(latest),
        None if retired_at is None else float(retired_at),
        float(first_seen),
    )


def cleared_versions(cleared: str | None) -> tuple[str, ...]:
    """The code versions a run's ``cleared`` column names."""
    return tuple(cleared.split()) if cleared else ()


def with_cleared(cleared: str | None, versions: Sequence[str]) -> str | None:
    """``cleared`` with ``versions`` added (each once, in order); a version
    holding a space is refused (it would read back as two)."""
    for v in versions:
        if not v or any(c.isspace() for c in v):
            raise ValueError(f"a version is a non-empty text without spaces, not {v!r}")
    merged = list(dict.fromkeys((*cleared_versions(cleared), *versions)))
    return " ".join(merged) or None
