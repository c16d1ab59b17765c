"""PocketJoe 0.2's runners, on Stalwart's engine.

:class:`InMemoryRunner` runs a program in memory. :class:`DurableRunner`
records it in a store (``sqlite:///app.db`` or a PostgreSQL URL): the n-th
top-level call a program makes, with its arguments, names its run, so the
same program started again after a crash (``kill -9``) resumes each call by
replay, finished steps answered from the ledger, and gets a finished call's
recorded answer without running anything. What they do is in
:mod:`stalwart.pocketjoe.runners`; here is how 0.2 binds a policy function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..runners import Durable, PocketJoeRunner
from .core import BaseContext
from .policy_wrappers import BoundPolicy

__all__ = ["DurableRunner", "InMemoryRunner"]


class InMemoryRunner(PocketJoeRunner[BoundPolicy]):
    """Runs PocketJoe programs on Stalwart's engine, in memory."""

    def _bind_strategy(self, policy: Callable[..., Any], ctx: BaseContext) -> BoundPolicy:
        return BoundPolicy(policy, ctx, self)

    def run_name(self, bound: BoundPolicy) -> str:
        """The policy function's option name."""
        return bound.name


class DurableRunner(Durable[BoundPolicy], InMemoryRunner):
    """Runs PocketJoe programs durably: ``DurableRunner("sqlite:///app.db")``
    or a PostgreSQL URL. Run ids are ``prefix:name:n:hash``."""
