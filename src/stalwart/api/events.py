"""A run's events as Server-Sent Events, resumable with ``Last-Event-ID``.

Where the events come from. A run's durable history is its ledger: every
finished step is a record, whichever worker executed it and however often
it was resumed. So the stream is rebuilt from the store (the run's row and
its new steps, read every ``poll`` seconds), and any API process can serve
any run's stream. A poll reads what is new only: the run's step count, and
the new steps when it grew (see :class:`_Held`), never the whole ledger
again. When the run executes in this very process (``--execute``), the
runner's live events add what the ledger never holds (text deltas,
``ctx.emit`` values, calls as they start) and wake the reader at once.

Event types (``event:`` field; ``data:`` is always one line of JSON):

- ``status``: where the run stands: at the start, and after each read of
  the store that brought new steps or a new state.
- ``step``: one recorded step (:class:`~.models.Step`).
- ``end``: the final status, result or error; the stream closes after it.
- ``delta``, ``emit``, ``call``: live only, from a run executing here.

Resuming. Each ``status``, ``step`` and ``end`` event carries an ``id``
naming how far the client has read: how many steps it has seen, and the
latest ``(finished_at, key)`` among them. A client reconnecting with that
``Last-Event-ID`` (browsers do it by themselves) gets every step after it.
Steps are sent in ``(finished_at, key)`` order; should one be recorded
late with an earlier time (a slow commit, another worker's clock), the
count no longer matches the steps up to that point, and the stream starts
over from the first step rather than skip one: a client may then see a
step twice (each names its ``key``), never miss one. A run that continues
as new moves its steps to an archive run: its stream then sends the new
generation's steps from the first, the count in its ids from zero again.
Live-only events carry no id and are not replayed: what they showed is in
the step that follows them.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import json
import math
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from ..core.errors import StoreUnavailable
from ..core.events import CallStarted, Emitted, Event, TextDelta
from ..core.ledger import TERMINAL, RunRecord, StepRecord
from ..core.mail import GENERATION_KEY
from ..runner import Runner
from ..stores.base import StepPosition, Store
from .values import finite, plain, run_json, step_json

__all__ = ["CURSOR_PATTERN", "LIVE_BUFFER", "Cursor", "StreamEvent", "run_events", "run_stream"]

#: Seconds before the newest step read that the next read covers again: a
#: step committed a little after a newer one is found without reading every
#: step. Only a cost: a step later than this is found by a full read.
LATE = 1.0
KEEPALIVE = 15.0  # seconds of silence before a comment line keeps proxies from closing
#: Most live events kept for a stream whose client has not read them yet.
LIVE_BUFFER = 1000
#: Most steps read whole at once: a model call's record holds its whole
#: conversation, so a run's existing steps are sent a page at a time.
PAGE = 50


#: The form of an event id (``count`` or ``count_time_key``), as a regex
#: both Python and the OpenAPI document read alike: digits, a time as
#: ``repr`` writes it (finite, exponent bounded), the key in base64url.
CURSOR_PATTERN = (
    r"^[0-9]{1,18}(_-?[0-9]{1,17}(\.[0-9]{1,17})?(e[-+][0-9]{1,2})?"
    r"_([A-Za-z0-9_-]{4})*([A-Za-z0-9_-]{2}==|[A-Za-z0-9_-]{3}=)?)?$"
)
_CURSOR = re.compile(CURSOR_PATTERN.removesuffix("$"))


@dataclass(frozen=True, slots=True)
class Cursor:
    """How far a client has read: ``seen`` steps, the latest at ``last``."""

    seen: int = 0
    last: tuple[float, str] | None = None

    def encode(self) -> str:
        """The SSE ``id``: ``count_time_key`` with the key in base64url, so no
        character a ledger holds can break the event's framing."""
        if self.last is None:
            return str(self.seen)
        when, key = self.last
        return f"{self.seen}_{when!r}_{base64.urlsafe_b64encode(key.encode()).decode()}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        """A cursor from ``Last-Event-ID``; ValueError unless it has the form
        this API writes (:data:`CURSOR_PATTERN`, the OpenAPI document's).
        Any text of that form is a cursor: one this API never sent (another
        run's, a forged one) only makes the stream start over from the
        first step, so the key's bytes need not be text (replaced if not)."""
        if _CURSOR.fullmatch(text) is None:
            raise ValueError(f"Last-Event-ID {text[:100]!r} is not an event id this API sent")
        parts = text.split("_", 2)
        seen = int(parts[0])
        if len(parts) == 1:
            return cls(seen)
        key = base64.urlsafe_b64decode(parts[2].encode("ascii")).decode(errors="replace")
        return cls(seen, (float(parts[1]), key))


def _order(step: StepRecord) -> tuple[float, str]:
    return (step.finished_at, step.key)


def frame(event: str, data: Any, event_id: str | None = None) -> str:
    """One SSE event. ``data`` is one line of JSON (json.dumps escapes every
    newline), so nothing in it can add a field or end the event early."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return f"{head}event: {event}\ndata: {text}\n\n"


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One event of a run's stream, before it is framed: its type (empty
    for a keepalive), its data as JSON data, and the cursor it carries
    (None for live-only events). What another protocol's stream
    (:mod:`.uievents`) reads."""

    event: str
    data: Any = None
    id: str | None = None

    def sse(self) -> str:
        """The event as this API's SSE frame."""
        if not self.event:
            return ": keepalive\n\n"
        return frame(self.event, self.data, self.id)


_KEEPALIVE = StreamEvent("")


def _live_frame(ev: Event) -> StreamEvent | None:
    """A live event worth a frame: text deltas, emitted values, calls starting."""
    if isinstance(ev, TextDelta):
        return StreamEvent("delta", {"key": ev.key, "text": ev.text})
    if isinstance(ev, Emitted):
        return StreamEvent("emit", {"key": ev.key, "value": plain(_jsonable(ev.value))})
    if isinstance(ev, CallStarted) and ev.key:  # a call inside the run, not the run itself
        return StreamEvent("call", {"key": ev.key, "name": ev.name})
    return None


def _jsonable(value: Any) -> Any:
    """An emitted value as JSON data (the codec's tree, tags dropped by the
    caller); a value the codec refuses is shown as its type's name."""
    from ..core import codec

    try:
        return codec.encode(value, "emitted value", strict=False)
    except Exception:  # what a policy emits is its own business; the stream goes on
        return f"({type(value).__name__})"


async def run_events(
    runner: Runner,
    first: RunRecord,
    after: Cursor,
    *,
    poll: float,
    live: bool,
    find_policy: Callable[[str], Any],
) -> AsyncIterator[str]:
    """The SSE frames of a run from ``after`` on, ending with ``end``: the
    events of :func:`run_stream`, framed."""
    stream = run_stream(runner, first, after, poll=poll, live=live, find_policy=find_policy)
    async for ev in stream:
        yield ev.sse()


async def run_stream(
    runner: Runner,
    first: RunRecord,
    after: Cursor,
    *,
    poll: float,
    live: bool,
    find_policy: Callable[[str], Any],
) -> AsyncIterator[StreamEvent]:
    """The events of a run from ``after`` on, ending with ``end``.

    ``first``: the run's record, read by the caller (which answered 404 for a
    run that does not exist). ``live``: also listen to the runner's own
    events (the run may execute in this process).
    """
    store = runner.store
    wake: asyncio.Queue[Event | None] = asyncio.Queue()
    listener = asyncio.create_task(_listen(runner, first.id, wake)) if live else None
    held = _Held(first.id)
    later: collections.deque[StreamEvent] = collections.deque()
    have: int | None = None  # how many steps the client has; None until the first read
    cursor = after
    shown: tuple[str, str | None, float | None] | None = None
    quiet_since = time.monotonic()
    rec: RunRecord | None = first
    try:
        while True:
            if rec is None:  # pruned while streaming: nothing more will come
                yield StreamEvent("end", {"run_id": first.id, "status": "pruned"}, cursor.encode())
                return
            try:
                todo = await held.read(store)
            except StoreUnavailable:  # waited out, as a worker would: read again later
                async for text in _wait(wake, poll, later):
                    yield text
                continue
            if have is None or held.restarted:
                # The first read (the client may hold some of these already),
                # or the run's steps were moved away: the client holds none.
                skip = _already_sent(todo, after) if have is None else {}
                cursor = after if skip else Cursor()
                have, held.restarted = len(skip), False
                held.times.update(skip)
                todo = [p for p in todo if p[1] not in skip]
            fresh = False
            try:
                async for steps in held.records(store, todo):
                    for step in steps:
                        have += 1
                        last = (
                            cursor.last
                            if cursor.last and cursor.last > _order(step)
                            else _order(step)
                        )
                        cursor = Cursor(have, last)
                        yield StreamEvent("step", held.shown(step), cursor.encode())
                        quiet_since, fresh = time.monotonic(), True
            except StoreUnavailable:  # the rest is read again at the next poll
                async for text in _wait(wake, poll, later):
                    yield text
                continue
            while later:  # live frames that came after what this read found
                yield later.popleft()
            state = (rec.status, rec.waiting_for, rec.wake_at)
            if (fresh or state != shown) and rec.status not in TERMINAL:
                # After new steps too: a run that resumed and suspended again
                # between two reads is waiting anew, though its state reads the same.
                shown = state
                yield StreamEvent("status", _status(rec), cursor.encode())
            if rec.status in TERMINAL:
                pol = find_policy(rec.policy)
                done = run_json(rec, pol).model_dump(mode="json")
                yield StreamEvent("end", done, cursor.encode())
                return
            async for text in _wait(wake, poll, later):
                yield text
                quiet_since = time.monotonic()
            if time.monotonic() - quiet_since > KEEPALIVE:
                yield _KEEPALIVE
                quiet_since = time.monotonic()
            with contextlib.suppress(StoreUnavailable):  # else the same row, read again later
                rec = await store.get_run(first.id)  # the row first, then its steps: none missed
    finally:
        if listener is not None:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener


class _Held:
    """Which of a run's steps a stream's client holds, and how it reads the
    ones it lacks, a page at a time.

    Each poll asks the store where the run's steps sit (its step count, one
    number while the run is quiet) and, when the count grew, for the keys
    and times of the steps finished from :data:`LATE` seconds before the
    newest it read last; those that do not make up the count (a step
    recorded late with an earlier time, another worker's clock) are found
    by asking for every step's position. See
    :meth:`~stalwart.stores.base.Store.step_positions` for why a count, not
    a time, is what cannot miss a step. The steps the client lacks are then
    read whole, :data:`PAGE` at a time: a run of any length costs a page of
    records at once, a conversation's steps each holding the conversation.
    The latest page read is kept whole: the store rebuilds a new step's
    compact arguments against it, so a new step costs its own rows, not the
    run's.

    Continue-as-new moves a generation's steps away and the next one reuses
    their keys, beginning with the generation's own record (key ``"0"``),
    which every read returns: the stream sees a new generation when that
    record is not the one it holds (or it holds none, having shown the
    first generation), when the count falls below what it holds, or when a
    read finds another time under a key it holds; and starts over. A new
    generation exactly as long as the old one is so seen at once.
    """

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.times: dict[str, float] = {}  # the client's steps: key -> finished_at
        self.recent: dict[str, StepRecord] = {}  # the latest page read, whole
        self.since = -math.inf
        self.restarted = False  # the steps were moved away since the caller last looked

    def _start_over(self) -> None:
        self.times = {}
        self.recent = {}
        self.since = -math.inf
        self.restarted = True

    async def read(self, store: Store) -> list[StepPosition]:
        """Where the steps recorded since the last read sit, each once, in
        ``(finished_at, key)`` order: what :meth:`records` reads."""
        known, since = len(self.times), self.since
        while True:
            count, found = await store.step_positions(self.run_id, known, since)
            every = known < 0  # every step of the run was asked for
            if (
                count < len(self.times)
                or (every and any(k not in found for k in self.times))
                or (GENERATION_KEY in found and GENERATION_KEY not in self.times and self.times)
                or any(k in self.times and self.times[k] != t for k, t in found.items())
            ):
                # Continue-as-new archived the steps: the run's are new ones.
                self._start_over()
                known, since = -1, -math.inf
                continue
            new = [k for k in found if k not in self.times]
            if every or len(self.times) + len(new) >= count:
                return sorted((found[k], k) for k in new)
            known, since = -1, -math.inf  # one was recorded late, before the window

    async def records(
        self, store: Store, todo: list[StepPosition]
    ) -> AsyncIterator[list[StepRecord]]:
        """The steps at ``todo``, whole, :data:`PAGE` at a time, in order;
        each is the client's once yielded. One moved away meanwhile is left
        out (the next read sees the new generation)."""
        for at in range(0, len(todo), PAGE):
            chunk = todo[at : at + PAGE]
            found = await store.steps_by_key(self.run_id, [k for _, k in chunk], self.recent)
            steps = [found[k] for _, k in chunk if k in found]
            self.recent = {s.key: s for s in steps} or self.recent
            for s in steps:
                self.times[s.key] = s.finished_at
            if steps:
                self.since = max(self.since, max(s.finished_at for s in steps) - LATE)
            yield steps

    def shown(self, step: StepRecord) -> dict[str, Any]:
        """``step`` as its event's data."""
        return step_json(step).model_dump(mode="json")


def _already_sent(todo: list[StepPosition], after: Cursor) -> dict[str, float]:
    """The steps a client that read up to ``after`` has (key -> finished_at):
    the steps up to its cursor, when their count is what it saw; else none
    (start over)."""
    if after.last is None:
        return {}
    upto = {k: t for t, k in todo if (t, k) <= after.last}
    return upto if len(upto) == after.seen else {}


def _status(rec: RunRecord) -> dict[str, Any]:
    return {
        "run_id": rec.id,
        "status": rec.status,
        "waiting_for": rec.waiting_for,
        "wake_at": finite(rec.wake_at),
    }


async def _wait(
    wake: asyncio.Queue[Event | None], poll: float, later: collections.deque[StreamEvent]
) -> AsyncIterator[StreamEvent]:
    """Wait up to ``poll`` seconds; yield the live frames that arrive (first
    those the last wait left ``later``), and return early when a live event
    says the ledger changed."""
    while later:
        yield later.popleft()
    deadline = asyncio.get_running_loop().time() + poll
    while True:
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            return
        try:
            ev = await asyncio.wait_for(wake.get(), left)
        except TimeoutError:
            return
        if ev is None:
            return
        text = _live_frame(ev)
        if text is not None:
            yield text
            continue
        # A call finished or failed, or the run ended: read the store now,
        # after the calls already queued as starting (so a call's start
        # precedes its step); text and emitted values queued after it come
        # after that read (``later``), so a model's next text never comes
        # before the results it was given.
        while not wake.empty():
            queued = wake.get_nowait()
            text = None if queued is None else _live_frame(queued)
            if text is not None and text.event == "call":
                yield text
            elif text is not None:
                later.append(text)
        return


async def _listen(runner: Runner, run_id: str, wake: asyncio.Queue[Event | None]) -> None:
    """Feed the run's live events in this process to ``wake``, at most
    :data:`LIVE_BUFFER` unread: a client that stops reading (its frames wait
    on the socket) must not make the server keep every token of the run.
    Dropping is safe: live events are not replayed anyway, and the stream
    reads the store every ``poll`` seconds for the steps that hold them."""
    async for ev in runner.events(run_id):
        if wake.qsize() < LIVE_BUFFER:
            wake.put_nowait(ev)
    wake.put_nowait(None)
