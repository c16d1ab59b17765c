"""How long a store could not be reached: measured by the store itself, as
its retried operations fail and succeed, for an operator's metrics.

A store whose operations retry transient failures (PostgreSQL, see its
``retry_for``) tells its :class:`Outages` when an attempt fails for a reason
that may pass and when one succeeds. An outage lasts from the first failed
attempt to the next one that succeeds, whichever operations they were: the
seconds the store could not be reached, whether or not its retries hid them
from the runs. Reading it is a plain read from any thread; what the store
pays on each success is one comparison.
"""

from __future__ import annotations

import threading
import time

__all__ = ["NO_OUTAGES", "Outages"]


class Outages:
    """The outages of one store: how many began, and their seconds so far
    (the current one's included, while it lasts)."""

    __slots__ = ("_lock", "_seconds", "count", "since")

    def __init__(self) -> None:
        #: When the current outage began (``time.monotonic()``), None while the store answers.
        self.since: float | None = None
        #: Outages begun.
        self.count = 0
        self._seconds = 0.0
        # A scrape reads from its own thread: the two fields an outage's end
        # changes are read and written together, so the total never goes back.
        self._lock = threading.Lock()

    def failed(self) -> None:
        """An attempt failed for a reason that may pass: an outage begins,
        unless one is under way."""
        if self.since is None:
            with self._lock:
                if self.since is None:
                    self.since = time.monotonic()
                    self.count += 1

    def answered(self) -> None:
        """An attempt succeeded: the outage under way, if any, ends."""
        if self.since is not None:  # the fast path: one comparison
            with self._lock:
                if self.since is not None:
                    self._seconds += time.monotonic() - self.since
                    self.since = None

    @property
    def seconds(self) -> float:
        """Seconds the store could not be reached, the current outage's so far included."""
        with self._lock:
            since = self.since
            return self._seconds + (0.0 if since is None else time.monotonic() - since)

    @property
    def down(self) -> bool:
        """Whether an outage is under way."""
        return self.since is not None


#: What a store that measures nothing reports: no outage, ever (nothing records into it).
NO_OUTAGES = Outages()
