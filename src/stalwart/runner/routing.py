"""Which worker may continue which run, across versions; and which runs none can.

A serving worker has an **application version**: the one it was given
(``Runner(code_version=...)``, ``stalwart worker --version``), or else a
digest of its policies' names and code versions (:mod:`.versions`). At each
heartbeat it records that version, the code version of each of its
policies and its queues in the store (:meth:`Store.beat_worker`), and
learns the versions the store knows: which is the **latest** and whether
its own is **retired**.

A run is **pinned** to the code version it started on (its
``code_version``). A serving worker claims a ready run only when it can
continue it:

* a run that has never started (pending, never claimed) goes to a worker
  of the latest version (to any, while none is latest): it has no steps,
  so any code can start it;
* any other run, when the worker's code version of the run's policy (or
  its application version, which a run pinned by hand names) is the
  run's ``code_version``, or the run is *cleared* for the worker's version
  (the deploy gate replayed it against that code and found it compatible:
  ``stalwart deploy check --clear``);
* a worker of a retired version takes nothing new (its held runs finish).

A worker that takes a run recorded under another code version, or a
cleared one, records its own and drops the clearances
(:meth:`Store.pin_run` under the claim's fence), so the run stays with
the code that continues it: a clearance vouches for the steps the gate
replayed, not for those a worker records after it. A single-version deployment pays one string
comparison per claimed run: every run's version is the worker's own.

A run that no live worker can continue is **stranded**: its version is
retired and no other live version can continue it, or no live worker of
its version (or cleared for it) has been seen for :data:`STRANDED_AFTER`
seconds. :func:`stranded` says why; the CLI, the API and the inspector show
it, and a serving worker logs each one it finds (:class:`Routing`). Only
versions are compared here, never acted on as code (S13).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.ledger import TERMINAL, RunRecord
from ..core.policy import Policy
from ..stores.base import Store, owner_is_dead
from ..stores.versions import VersionRecord, WorkerRecord, cleared_versions
from . import observe

__all__ = [
    "STRANDED_AFTER",
    "Fleet",
    "Routing",
    "app_version",
    "fleet_of",
    "fresh",
]

#: How long a run may wait with no live worker able to continue it before
#: it is called stranded (a retired version's runs are at once).
STRANDED_AFTER = 60.0


def app_version(explicit: str | None, policies: Mapping[str, Policy[Any, Any]], of: Any) -> str:
    """The application version: ``explicit`` if given, else 12 hex digits of
    a digest of each policy's name and code version (``of(pol)``)."""
    if explicit is not None:
        return explicit
    digest = hashlib.blake2b(digest_size=6)
    for name in sorted(policies):
        digest.update(f"{len(name)}:{name}={of(policies[name])};".encode())
    return digest.hexdigest()


def fresh(rec: RunRecord) -> bool:
    """Whether ``rec`` has never started: pending and never claimed."""
    return rec.status == "pending" and rec.fence == 0


def continues(rec: RunRecord, version: str, code_version: str) -> bool:
    """Whether code at ``code_version`` of the run's policy (application
    ``version``) can continue ``rec``, a run that has started. A run pinned
    by hand names an application version (``stalwart runs pin --version``,
    as ``versions list`` shows it): a digest, when workers are given none."""
    if rec.code_version in ("", code_version, version):
        return True
    cleared = cleared_versions(rec.cleared)
    return code_version in cleared or version in cleared


class Routing:
    """A serving worker's view of the versions: its own, the latest, retired."""

    def __init__(self) -> None:
        self.version = ""
        self.latest: str | None = None
        self.retired = False
        #: The store keeps versions (a custom store may not).
        self.kept = True
        #: The code versions it continues: its policies' and its own
        #: (which a run pinned by hand names); what its claims ask for.
        self.codes: frozenset[str] = frozenset()
        self._said: set[str] = set()
        self._state: tuple[tuple[str, bool, bool], ...] = ()

    def know(self, explicit: str | None, policies: Mapping[str, Policy[Any, Any]], of: Any) -> None:
        """Its own version and code versions, from its policies now."""
        self.version = app_version(explicit, policies, of)
        self.codes = frozenset({*(of(p) for p in policies.values()), self.version})

    def learn(self, versions: Sequence[VersionRecord]) -> bool:
        """What the store said at this heartbeat; whether it changed."""
        state = tuple((v.version, v.latest, v.retired) for v in versions)
        changed, self._state = state != self._state, state
        self.latest = next((v.version for v in versions if v.latest), None)
        retired = any(v.version == self.version and v.retired for v in versions)
        if retired and not self.retired:
            observe.emit(
                logging.WARNING,
                "version.retired",
                "version %r is retired: this worker takes no more runs "
                "(the runs it holds finish here)",
                self.version,
                version=self.version,
            )
        self.retired = retired
        return changed

    def can_take(self, rec: RunRecord, code_version: str) -> bool:
        """Whether this worker may claim ``rec`` (see the module's rules)."""
        if self.retired:
            return False
        if fresh(rec):
            return self.latest is None or self.latest == self.version
        return continues(rec, self.version, code_version)

    def say_stranded(self, found: Mapping[str, str]) -> None:
        """Log each stranded run once (until it is no longer stranded)."""
        for run_id, why in found.items():
            if run_id not in self._said:
                observe.emit(
                    logging.WARNING,
                    "run.stranded",
                    "run %r is stranded: %s",
                    run_id,
                    why,
                    run_id=run_id,
                )
        self._said = set(found)


@dataclass(frozen=True)
class Fleet:
    """The serving workers and versions a store knows, as of ``now``."""

    workers: list[WorkerRecord]
    versions: list[VersionRecord]
    now: float

    @property
    def live(self) -> list[WorkerRecord]:
        return [w for w in self.workers if w.live(self.now)]

    @property
    def latest(self) -> str | None:
        return next((v.version for v in self.versions if v.latest), None)

    @property
    def retired(self) -> set[str]:
        return {v.version for v in self.versions if v.retired}

    def takers(self, rec: RunRecord) -> list[WorkerRecord]:
        """The live workers of versions not retired that can continue ``rec``."""
        latest, retired = self.latest, self.retired
        found = []
        for w in self.live:
            if w.version in retired or rec.policy not in w.policies:
                continue
            if w.queues is not None and rec.queue not in w.queues:
                continue
            if fresh(rec):
                ok = latest is None or w.version == latest
            else:
                ok = continues(rec, w.version, w.policies[rec.policy])
            if ok:
                found.append(w)
        return found

    def stranded(self, rec: RunRecord, grace: float = STRANDED_AFTER) -> str | None:
        """Why no live worker can continue ``rec``, or None (it can be, or
        it is finished, or it is held by a live worker, or the store has no
        serving workers at all: runs are executed in process)."""
        if rec.status in TERMINAL or not self.workers:
            return None
        if (
            rec.status == "running"
            and (rec.lease_expires_at or 0) >= self.now
            and not owner_is_dead(rec.owner)
        ):
            return None  # held: its holder continues it
        if self.takers(rec):
            return None
        version = "(never started)" if fresh(rec) else rec.code_version or "(none)"
        of_version = {
            w.version
            for w in self.workers
            if not fresh(rec) and w.policies.get(rec.policy) == rec.code_version
        }
        if not fresh(rec):
            of_version.add(rec.code_version)  # an explicit version names its code
        retired = sorted(of_version & self.retired)
        if retired:
            return (
                f"its code version {version} of {rec.policy!r} is served only by retired "
                f"version {', '.join(retired)}; clear it for a newer version "
                "(stalwart deploy check --clear) or pin it (stalwart runs pin)"
            )
        waited = self.now - rec.updated_at
        if waited < grace:
            return None
        if fresh(rec):
            latest = self.latest
            whom = f"of the latest version {latest}" if latest else "not retired"
            return f"no live worker {whom} has policy {rec.policy!r} and queue {rec.queue!r}"
        return (
            f"no live worker can continue code version {version} of {rec.policy!r} "
            f"(none for {waited:.0f} s); start one, clear the run for a live version "
            "(stalwart deploy check --clear) or pin it (stalwart runs pin)"
        )


async def fleet_of(store: Store) -> Fleet | None:
    """The store's workers and versions now; None if it keeps none."""
    try:
        return Fleet(await store.list_workers(), await store.list_versions(), time.time())
    except NotImplementedError:
        return None
