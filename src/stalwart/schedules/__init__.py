"""Recurring schedules over a runner (see :mod:`.schedules`): one layer
above the runner, whose worker loop ticks them through its
:class:`~stalwart.runner.Ticker` interface."""

from .schedules import Schedules
from .timing import DUE_BATCH, MISSED, Timing, plan, tick_of, tick_run_id

__all__ = ["DUE_BATCH", "MISSED", "Schedules", "Timing", "plan", "tick_of", "tick_run_id"]
