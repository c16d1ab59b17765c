"""Rebase: a fork's recorded prefix, given the identity new code gives it.

A fork replays its prefix under S5: the code must make the calls the record
holds. New code (other instructions, another model, a tool's new version)
makes other calls there: the model is shown another system prompt, so its
first step's arguments differ. :func:`rebase` walks the new code over the
prefix, in memory, before the fork is written: each recorded step answers
with its recorded outcome (nothing executes, no model is called), and a step
whose call differs takes the identity the new code gives it (its name, its
whole arguments, their hash). The walk stops at the first call the prefix
does not answer (``at`` or later), before it runs. The fork is then written
with those identities, so it replays its prefix under S5 as any run does,
and runs the new code live from ``at``.

A rebased prefix is "what the run saw, as the new code would have asked for
it": the outcomes are the recorded ones, whatever the new code would have
been answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace as copy
from typing import Any

from ..core.engine.engine import Engine
from ..core.engine.unwind import find_halt
from ..core.errors import ForkError, StalwartError
from ..core.events import CallInfo, Hook
from ..core.ledger import RunRecord, StoredStep
from ..core.mail import Delivery
from ..core.policy import Policy
from ..core.stepargs import full_args
from .keys import is_ancestor

__all__ = ["rebase"]


class _Reached(StalwartError):
    """Ends the walk: the new code asked for something the prefix lacks."""


class _Walk(Hook):
    """The hook, ledger and host of a rebase walk: anything live ends it."""

    def __init__(self, at: str | None) -> None:
        self.at = at
        self.x: Engine | None = None

    def end(self) -> BaseException:
        assert self.x is not None
        return self.x.halt(_Reached("the end of the prefix"))

    async def before_call(self, call: CallInfo) -> None:
        # A step enclosing ``at`` runs again (its record holds what ``at``
        # returned): its body is walked, its recorded children answer.
        if self.at is not None and is_ancestor(call.key, self.at):
            return
        raise self.end()

    async def record_step(self, run_id: str, fence: int, step: StoredStep) -> StoredStep:
        raise self.end()

    async def take_signal(self, run_id: str, name: str, step_key: str) -> str | None:
        raise self.end()

    async def take_mail(
        self, run_id: str, step_key: str, sender: str | None, kind: str | None
    ) -> str | None:
        raise self.end()

    async def deliver_mail(
        self, run_id: str, envelope: str, uid: str, wakes: Sequence[str]
    ) -> Delivery:
        raise self.end()

    async def continue_run(
        self, run_id: str, fence: int, inputs: str, archive_id: str, first: StoredStep
    ) -> None:
        raise self.end()

    async def get_runs(self, run_ids: Sequence[str]) -> list[RunRecord]:
        raise self.end()

    async def spawn_children(self, *args: Any, **kwargs: Any) -> None:
        raise self.end()

    async def await_memory_children(self, ids: list[str]) -> list[dict[str, Any]]:
        raise self.end()

    def find_policy(self, name: str) -> Policy[Any, Any] | None:
        return None

    def live_engine(self, run_id: str) -> Engine | None:
        return None

    def wake_worker(self) -> None:
        pass


async def rebase(
    run_id: str,
    prefix: list[StoredStep],
    at: str | None,
    pol: Policy[Any, Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> list[StoredStep]:
    """``prefix`` (steps of run ``run_id``, ending with step ``at``'s record
    if the fork replaces it) as ``pol`` called with ``args`` and ``kwargs``
    asks for it: every record with its whole arguments, those whose call
    differs under the identity ``pol`` gives them. Executes nothing."""
    steps = {s.key: s for s in prefix}
    walk = _Walk(at)
    x = Engine(run_id, store=walk, fence=1, replay=dict(steps), hooks=[walk], inline_sleep=0.0)
    walk.x = x
    x.host = walk
    x.adopted = {}
    try:
        await x.run_root(pol, args, kwargs)
    except BaseException as exc:
        halt = find_halt(exc)
        if halt is not None and not isinstance(halt.cause, _Reached):
            raise ForkError(
                f"fork of run {run_id!r} onto policy {pol.name!r}: the prefix cannot be "
                f"walked: {halt.cause}"
            ) from None
        if halt is None and not isinstance(exc, Exception):
            raise
    out = []
    for step in prefix:
        whole = full_args(run_id, step, steps)  # no record refers to another
        new = x.adopted.get(step.key)
        if new is None:
            out.append(copy(step, args=whole))
        else:
            name, args_json, args_hash = new
            out.append(copy(step, name=name, args=args_json, args_hash=args_hash))
    return out
