"""What PocketJoe 0.1's and 0.2's runners share: a top-level call as a run.

A bound policy awaited outside any run asks its runner for one
(:meth:`PocketJoeRunner.run_top`): the call's arguments become the run's
inputs and its binding's Stalwart policy the run's policy. In memory each
call is a fresh run; :class:`Durable` names the run after the call instead,
so the same program started again after a crash resumes it by replay.

Each release line keeps its own classes (its ``InMemoryRunner`` and
``DurableRunner``), which add one thing here: the binding they make of a
policy (``_bind_strategy``, the name PocketJoe's contexts call) and the name
a binding goes by in run ids (:meth:`PocketJoeRunner.run_name`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Generic, Protocol, TypeVar

from ..core import codec
from ..core.policy import Policy as SwPolicy
from ..runner import Runner

__all__ = ["Binding", "Durable", "PocketJoeRunner"]


class Binding(Protocol):
    """A policy bound on an application context, as a runner sees it."""

    def step_policy(self) -> SwPolicy[Any, Any]:
        """The Stalwart policy a call of this binding runs as."""
        ...


B = TypeVar("B", bound=Binding)


class PocketJoeRunner(Generic[B]):
    """Runs PocketJoe programs on Stalwart's engine, in memory.

    ``store``: where runs are recorded; "memory" here (see :class:`Durable`).
    """

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

    def _bind_strategy(self, policy: Any, ctx: Any) -> B:
        """What a context's ``_bind`` asks the runner for: a binding of
        ``policy`` on ``ctx`` that runs as Stalwart steps of this runner's runs."""
        raise NotImplementedError(f"{type(self).__name__} does not say how it binds a policy")

    def run_name(self, bound: B) -> str:
        """The name a binding goes by in the ids of its runs."""
        raise NotImplementedError(f"{type(self).__name__} does not say how it names a run")

    def run_id(self, bound: B, kwargs: dict[str, Any]) -> str | None:
        """The id of a top-level call's run: None (a fresh one) in memory."""
        return None

    async def run_top(self, bound: B, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A call made outside any run: a run of its own. Positional
        arguments are named by the policy's signature (PocketJoe's policies
        take keywords; a positional call keeps working)."""
        policy = bound.step_policy()
        if args:
            names = [p.name for p in policy.signature.params]
            kwargs = {**dict(zip(names, args, strict=False)), **kwargs}
        self._calls += 1
        return await self.runner.run(policy, run_id=self.run_id(bound, kwargs), **kwargs)

    async def close(self) -> None:
        """Close the store (a durable runner's database connection)."""
        if self._runner is not None:
            await self._runner.close()


class Durable(PocketJoeRunner[B]):
    """A runner whose runs are recorded in ``store`` (``sqlite:///app.db`` or
    a PostgreSQL URL) and named by their calls.

    The n-th top-level call a program makes, with its arguments, names its run
    (``prefix:name:n:hash``): run the same program again after a crash and
    each call resumes its run by replay, finished steps answered from the
    ledger; with other arguments it is a new run.
    """

    def __init__(self, store: str, *, prefix: str = "pocketjoe") -> None:
        super().__init__(store)
        self.prefix = prefix

    def run_id(self, bound: B, kwargs: dict[str, Any]) -> str | None:
        blob = json.dumps(codec.encode(kwargs, "arguments"), sort_keys=True, default=str)
        digest = hashlib.sha256(blob.encode()).hexdigest()[:16]
        return f"{self.prefix}:{self.run_name(bound)}:{self._calls}:{digest}"
