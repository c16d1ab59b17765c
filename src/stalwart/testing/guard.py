"""What keeps a replay offline: the ledger, hook, host and replay map of the
engine, all refusing anything live.

The replay map handed to the engine notes every key looked up; a hook
refuses a live call at a key the record lacks, before it runs; the ledger
refuses any write (a step the record lacks would be written there);
spawning a child run is refused. A sync flow node asks for its record off
the event loop, where nothing can be awaited: its missing record stops the
replay at once. All of it goes through the engine's public API:
``Engine``, its ``replay`` map, hooks, and the :class:`Ledger` protocol.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from ..core import codec
from ..core.engine.engine import Engine
from ..core.engine.unwind import Halt
from ..core.errors import NonDeterminismError, StalwartError
from ..core.events import CallInfo, Hook
from ..core.ledger import TERMINAL, RunRecord, StoredStep
from ..core.mail import Delivery
from ..core.policy import Policy
from ..timetravel.fork import LINEAGE_KEY
from ..timetravel.keys import is_ancestor, key_parts
from .divergence import Divergence, ReplayReport, call_text, mismatch, same_value
from .recording import Recording

__all__ = ["REWALKED", "Guard"]

# A flow's journal entries: a finished flow visit would answer its whole
# subtree from its ``post`` record, so a replay hides them; the flow walks its
# graph again (its ``exec`` units answered from the record) and writes them
# again, compared with the record.
REWALKED = frozenset({"flow.post", "flow.prep"})


class _Stop(StalwartError):
    """Ends a replay: a divergence, or the end of an unfinished recording."""

    def __init__(self, divergence: Divergence | None) -> None:
        super().__init__(divergence.describe() if divergence else "end of the recording")
        self.divergence = divergence


class _Observed(dict[str, StoredStep]):
    """The replay map: notes each key the engine asks for."""

    def __init__(self, steps: dict[str, StoredStep], guard: Guard) -> None:
        super().__init__(steps)
        self.guard = guard

    def get(self, key: str, default: Any = None) -> Any:
        rec = super().get(key)
        if rec is not None:
            self.guard.seen.append(key)
            return rec
        self.guard.missed(key)
        return default

    def items(self) -> Any:
        """A layer reading records in bulk (a flow's journal) reads them all."""
        self.guard.seen.extend(self.keys())
        return super().items()


class Guard(Hook):
    """The hook, ledger and host of a replay: anything live stops it."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self.seen: list[str] = []
        self.misses: set[str] = set()
        self.last_miss = ""  # the key a live send (no key of its own here) is reported at
        self.x: Engine | None = None
        keys = [k for k in recording.steps if k != LINEAGE_KEY]
        self.last_key = max(keys, key=key_parts) if keys else None
        self.finished = recording.run.status in TERMINAL

    def engine(self) -> Engine:
        """The engine of the recorded run, with this guard as its
        ledger, hook and host and a replay map that reports to it: one per
        replay, so nothing the new code does escapes the guard."""
        run = self.recording.run
        x = Engine(run.id, store=self, fence=1, hooks=[self], inline_sleep=0.0)
        steps = self.recording.steps
        kept = {k: StoredStep.of(v) for k, v in steps.items() if v.kind not in REWALKED}
        x.replay = _Observed(kept, self)
        x.host = self
        x.parent_id = run.parent_id
        x.queue = run.queue
        self.x = x
        return x

    def read_halt(self, halt: Halt, report: ReplayReport) -> None:
        """What a halted replay means for ``report``: this guard's stop (a
        divergence, or the end of an unfinished recording), a step the
        engine found to differ from its record, or a replay that cannot go
        on."""
        cause = halt.cause
        if isinstance(cause, _Stop):
            if cause.divergence is None:
                report.ended_at = self.last_key
            else:
                report.divergences.append(cause.divergence)
        elif isinstance(cause, NonDeterminismError):
            key = self.seen.pop() if self.seen else ""  # looked up, then found to differ
            report.divergences.append(mismatch(cause, self.recording, key))
        else:
            report.divergences.append(Divergence("error", "", None, None, str(cause)))

    def stop(self, divergence: Divergence | None) -> Halt:
        assert self.x is not None
        return self.x.halt(_Stop(divergence))

    def extra(self, key: str, now: str | None, note: str = "") -> Halt:
        """A live call or record at ``key``: the end of an unfinished
        recording, or something the recording does not have."""
        last = self.last_key
        if not self.finished and (last is None or key_parts(key) > key_parts(last)):
            return self.stop(None)
        return self.stop(Divergence("extra", key, None, now, note))

    def missed(self, key: str) -> None:
        self.misses.add(key)
        self.last_miss = key
        hidden = self.recording.steps.get(key)
        if hidden is not None and hidden.kind in REWALKED:
            return  # written again and compared (record_step)
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # a sync flow node's thread: it would run the work now
            raise self.extra(key, None, "a flow node's exec with no record") from None

    # -- the hook: before a live call --------------------------------------------
    async def before_call(self, call: CallInfo) -> None:
        if call.key in self.misses and not self._in_flight(call.key):
            raise self.extra(call.key, call_text(call.name, _json(call.arguments)))

    def _in_flight(self, key: str) -> bool:
        """Whether the call at ``key`` was under way when an unfinished run
        stopped: it has no record of its own, but steps inside it do (a tool
        call waiting for a signal). A resumed run enters it again and its
        recorded steps answer; so does the replay."""
        return not self.finished and any(
            is_ancestor(key, k) for k in self.recording.steps if k != LINEAGE_KEY
        )

    # -- the ledger: nothing is written ----------------------------------------
    async def record_step(self, run_id: str, fence: int, step: StoredStep) -> StoredStep:
        was = self.recording.steps.get(step.key)
        if was is not None and was.kind in REWALKED:
            # A flow's journal entry, written again by the re-walk: it must
            # say what the record says (the node, its action, the store's change).
            if was.name == step.name and same_value(was.output, step.output or "null"):
                self.seen.append(step.key)
                return step
            raise self.stop(
                Divergence(
                    "record", step.key, f"{was.name}: {was.output}", f"{step.name}: {step.output}"
                )
            )
        raise self.extra(step.key, call_text(step.name, step.args))

    async def take_signal(self, run_id: str, name: str, step_key: str) -> str | None:
        raise self.extra(step_key, f"waits for signal {name!r}")

    # A mailbox, as a signal: a receive the recording does not answer is
    # where an unfinished run waits (a conversation between turns), or a
    # receive it lacks; a send or a continue-as-new it lacks is live.
    async def take_mail(
        self, run_id: str, step_key: str, sender: str | None, kind: str | None
    ) -> str | None:
        raise self.extra(step_key, f"receives a message (sender {sender!r}, kind {kind!r})")

    async def deliver_mail(
        self, run_id: str, envelope: str, uid: str, wakes: Sequence[str]
    ) -> Delivery:
        raise self.extra(self.last_miss, f"sends a message to run {run_id!r}")

    async def continue_run(
        self, run_id: str, fence: int, inputs: str, archive_id: str, first: StoredStep
    ) -> None:
        raise self.extra(first.key, "continues as new")

    async def get_runs(self, run_ids: Sequence[str]) -> list[RunRecord]:
        return [d.run for d in self.recording.children if d.run.id in run_ids]

    # -- the host: no child run is started -------------------------------------
    async def spawn_children(
        self,
        parent: Engine,
        pol: Policy[Any, Any],
        calls: list[tuple[tuple[Any, ...], dict[str, Any]]],
        ids: list[str],
        queue: str | None,
        priority: int,
    ) -> None:
        raise self.extra(ids[0].rsplit("~", 1)[-1].rsplit("/", 1)[0], f"spawns {pol.name}")

    async def await_memory_children(self, ids: list[str]) -> list[dict[str, Any]]:
        raise self.stop(Divergence("error", "", None, None, "children in memory"))

    def find_policy(self, name: str) -> Policy[Any, Any] | None:
        return None  # a replay is offered what the recording's program offered

    def live_engine(self, run_id: str) -> Engine | None:
        return None  # no other run executes beside a replay

    def wake_worker(self) -> None:
        pass


def _json(value: Any) -> str:
    try:
        return json.dumps(codec.encode(value, "arguments"), separators=(",", ":"))
    except Exception:  # only for the message
        return repr(value)
