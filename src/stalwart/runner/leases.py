"""What a runner's leases did: taken, renewed, lost (S8), counted as it happens.

Three integers, each written by the one part of the runner that sees it
happen: a claim that launches an execution takes a lease (the driver), a
heartbeat renews the leases of the runs executing here (the worker loop),
and an execution stopped because another worker took its run over, or
because the store refused a write under its old fencing token, lost one
(the driver, as the execution ends). Counting is an addition; reading them
(``Runner.leases``, the metrics) is a plain read and costs the runs nothing.
Like every counter of a process, they start from zero in each one.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Leases"]


@dataclass(slots=True)
class Leases:
    """A runner's lease counts since it was made (``Runner.leases``)."""

    #: Claims that began an execution here (a run's first, each resumption).
    taken: int = 0
    #: Leases extended by a heartbeat, one per run executing here at the beat.
    renewed: int = 0
    #: Executions stopped because their lease was lost: a heartbeat found the
    #: run taken over, or the store refused a write under the old fence.
    lost: int = 0
