"""What the metrics read from the runners they watch, when they are read:
lease counts (:class:`~stalwart.runner.leases.Leases`) and how long the
store could not be reached (:class:`~stalwart.stores.outages.Outages`).

These are pulled, not pushed: the runner and the store keep plain counts
as they work, and a scrape (Prometheus) or a collection (OpenTelemetry)
adds them up, so a claim, a heartbeat or a step record pays nothing for
being measured.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..runner import Runner

__all__ = ["Reader", "Readings", "read_runners"]


@dataclass(frozen=True, slots=True)
class Readings:
    """Totals over the watched runners (and their stores, each counted once)."""

    leases_taken: int = 0
    leases_renewed: int = 0
    leases_lost: int = 0
    store_outages: int = 0
    store_unavailable_seconds: float = 0.0


#: What an output calls to read the totals now.
Reader = Callable[[], Readings]


def read_runners(runners: Sequence[Runner]) -> Readings:
    """The totals of ``runners`` now: their leases, summed; their stores'
    outages, each store once however many runners share it."""
    taken = renewed = lost = outages = 0
    seconds = 0.0
    stores: set[int] = set()
    for runner in runners:
        leases = runner.leases
        taken += leases.taken
        renewed += leases.renewed
        lost += leases.lost
        store = runner.store
        if id(store) not in stores:
            stores.add(id(store))
            seen = store.outages
            outages += seen.count
            seconds += seen.seconds
    return Readings(taken, renewed, lost, outages, seconds)
