"""PocketJoe 0.2's runners, on Stalwart's runtime.

:class:`InMemoryRunner` runs a program in memory. :class:`DurableRunner`
records it in a store (``sqlite:///app.db`` or a PostgreSQL URL): the n-th
top-level call a program makes, with its arguments, names its run, so the
same program started again after a crash (``kill -9``) resumes each call by
replay, finished steps answered from the ledger, and gets a finished call's
recorded answer without running anything.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from ...core import codec
from ...runner import Runner
from .core import BaseContext
from .policy_wrappers import BoundPolicy

__all__ = ["DurableRunner", "InMemoryRunner"]


class InMemoryRunner:
    """Runs PocketJoe programs on Stalwart's runtime, in memory."""

    def __init__(self, store: str = "memory") -> None:
        self._store = store
        self._runner: Runner | None = None
        self._calls = 0

    @property
    def runner(self) -> Runner:
        """The Stalwart runner underneath (to stream, inspect or close runs)."""
        if self._runner is None:
            self._runner = Runner(self._store)
        return self._runner

    def _bind_strategy(self, policy: Callable[..., Any], ctx: BaseContext) -> BoundPolicy:
        return BoundPolicy(policy, ctx, self)

    def run_id(self, bound: BoundPolicy, kwargs: dict[str, Any]) -> str | None:
        """The id of a top-level call's run: a fresh one in memory."""
        return None

    async def run_top(
        self, bound: BoundPolicy, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """A call made outside any run: a run of its own."""
        if args:  # PocketJoe's bound policies take keywords; keep a positional call working
            names = list(bound.step_policy().signature.params)
            kwargs = {**{p.name: a for p, a in zip(names, args, strict=False)}, **kwargs}
        self._calls += 1
        return await self.runner.run(
            bound.step_policy(), run_id=self.run_id(bound, kwargs), **kwargs
        )

    async def close(self) -> None:
        """Close the store (a durable runner's database connection)."""
        if self._runner is not None:
            await self._runner.close()


class DurableRunner(InMemoryRunner):
    """Runs PocketJoe programs durably: ``DurableRunner("sqlite:///app.db")``
    or a PostgreSQL URL. Run ids are ``prefix:name:n:hash``."""

    def __init__(self, store: str, *, prefix: str = "pocketjoe") -> None:
        super().__init__(store)
        self.prefix = prefix

    def run_id(self, bound: BoundPolicy, kwargs: dict[str, Any]) -> str | None:
        blob = json.dumps(codec.encode(kwargs, "arguments"), sort_keys=True, default=str)
        digest = hashlib.sha256(blob.encode()).hexdigest()[:16]
        return f"{self.prefix}:{bound.name}:{self._calls}:{digest}"
