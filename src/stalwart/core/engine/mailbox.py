"""Mailboxes: messages between runs, and continue-as-new.

A run sends with ``await ctx.send(to, payload, kind=...)`` and receives with
``await ctx.receive(sender=..., kind=..., timeout=...)``. Both are steps of
the sending or receiving run, built on the journaling API the way signals
are (``waits.py``):

* **Sending** is recorded under its key (S1). Delivery into the recipient's
  mailbox carries an id derived from the sender's run id, the step key and
  the recipient (:func:`mail_uid`), and the store keeps one message per id:
  a sender that dies between delivering and recording delivers again on
  resume, and the store keeps the first. A resumed sender whose send is
  recorded does not deliver at all (S2).
* **Receiving** takes the oldest unread message that matches the filters,
  marked read by the step key (so a crash between taking and recording
  takes the same message again), and records it: replay returns the same
  message. While none matches, the run suspends (S7) waiting for
  :func:`mail_wait`; a delivery that matches wakes it, one that does not
  leaves it asleep (no spin).
* **Continue-as-new** (:meth:`Mailbox.continue_as_new`): a long-lived run
  (a conversation) hands its state to a fresh generation of itself under the
  same run id. In one transaction the store moves the generation's steps (and
  the messages it read) to an archive run and gives the run its new inputs;
  the unread mailbox stays where it is, so nothing sent meanwhile is lost.
  The run then starts again from the top with an empty ledger: replay and
  the ledger stay bounded however long the run lives.

A part of the :class:`~.engine.Engine`, which makes it and owns it
(``engine.mailbox``). Messages are JSON data (:mod:`..codec`): the envelope is read as data, never
imported or called (S13). In memory (no ledger) a send is handed to the
recipient executing in the same runner, and a receive awaits inline.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from .. import codec
from ..errors import MailboxClosed, RunNotFound, StoreError
from ..ledger import StoredStep
from ..mail import (
    GENERATION_KEY,
    Mail,
    MailLedger,
    archive_run_id,
    envelope,
    mail_uid,
    mail_wait,
    mail_wakes,
)
from ..recorded import error_to_json
from .identity import identity_json, step_hash
from .unwind import Suspend

if TYPE_CHECKING:
    from .engine import Engine

__all__ = ["Mailbox"]


def _mail_of(value: Any, where: str) -> Mail:
    if not isinstance(value, Mapping) or not isinstance(value.get("id"), str):
        raise StoreError(f"{where}: a recorded message is not an envelope")
    sender = value.get("from")
    kind = value.get("kind")
    sent_at = value.get("sent_at")
    return Mail(
        payload=value.get("body"),
        sender=sender if isinstance(sender, str) else None,
        kind=kind if isinstance(kind, str) else "message",
        sent_at=float(sent_at) if isinstance(sent_at, int | float) else 0.0,
        id=str(value["id"]),
    )


def _check_address(to: object, run_id: str, key: str) -> str:
    if not isinstance(to, str) or not to:
        raise TypeError(
            f"run {run_id!r}, step {key}: send to a run id (a non-empty string), not {to!r}"
        )
    return to


def _check_kind(kind: object, run_id: str, key: str) -> str:
    if not isinstance(kind, str) or not kind:
        raise TypeError(f"run {run_id!r}, step {key}: a message kind is a non-empty string")
    return kind


class Mailbox:
    """``send``, ``receive`` and continue-as-new of one run."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # Messages sent to a run in memory, and its receives waiting for one.
        self._box: deque[Mail] = deque()
        self._waiters: list[asyncio.Future[None]] = []

    def _ledger(self, what: str) -> MailLedger:
        x = self.engine
        store = x.store
        if not isinstance(store, MailLedger):
            raise x.halt(
                StoreError(
                    f"run {x.run_id!r}: {what} needs a store with mailboxes; "
                    f"{type(store).__name__} has none"
                )
            )
        return store

    # -- sending -------------------------------------------------------------------
    async def send(self, key: str, to: str, payload: Any, kind: str) -> str:
        """``ctx.send``: deliver ``payload`` to run ``to``'s mailbox, once; the
        delivery id."""
        x = self.engine
        run_id = x.run_id
        to = _check_address(to, run_id, key)
        kind = _check_kind(kind, run_id, key)
        args_json = identity_json((), {"to": to, "kind": kind, "payload": payload}, key, run_id)
        args_hash = step_hash(args_json)
        if x.store is None:
            return self._send_in_memory(key, to, payload, kind)
        rec = x.replay.get(key)
        if rec is not None:  # S2: sent before; never again
            uid: str = x.replayed_value(rec, key, "stalwart.send", args_json, args_hash)
            return uid
        uid = mail_uid(run_id, key, to, self.generation)
        body = codec.dumps(payload, f"message of run {run_id!r}, step {key}")
        env = envelope(uid, run_id, kind, time.time(), body)
        started = time.time()
        ledger = self._ledger("ctx.send")
        status = await x.write(ledger.deliver_mail(to, env, uid, mail_wakes(run_id, kind)))
        output = error = None
        if status in ("sent", "again"):
            output = codec.dumps(uid)
        elif status == "missing":
            error = error_to_json(
                RunNotFound(f"run {run_id!r}, step {key}: no run {to!r} to send to")
            )
        else:
            error = error_to_json(
                MailboxClosed(
                    f"run {run_id!r}, step {key}: run {to!r} has finished; "
                    "it reads no more messages"
                )
            )
        rec = StoredStep(
            key,
            "stalwart.send",
            args_hash,
            args_json,
            output,
            error,
            1,
            started,
            time.time(),
            "send",
        )
        won = await x.record_step(rec)
        if x.host is not None:
            x.host.wake_worker()  # a recipient executed by this runner resumes now
        if won is rec and error is None:
            return uid
        # Another executor's outcome (S3), or the failure as a replay raises it (S4).
        sent: str = x.replayed_value(won, key, "stalwart.send", args_json, args_hash, False)
        return sent

    def _send_in_memory(self, key: str, to: str, payload: Any, kind: str) -> str:
        x = self.engine
        recipient = x.host.live_engine(to) if x.host is not None else None
        if recipient is None:
            raise RunNotFound(
                f"run {x.run_id!r}, step {key}: no run {to!r} executing in this runner "
                "to send to (in memory, messages go to live runs only)"
            )
        uid = mail_uid(x.run_id, key, to)
        mail = Mail(payload, x.run_id, kind, time.time(), uid)
        recipient.mailbox.take_delivery(mail)
        return uid

    def take_delivery(self, mail: Mail) -> None:
        """Queue a message sent in memory, and wake this run's receive."""
        self._box.append(mail)
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    # -- receiving -----------------------------------------------------------------
    async def receive(
        self,
        deadline_key: str,
        key: str,
        sender: str | None,
        kind: str | None,
        timeout: float | None,
    ) -> Mail:
        """``ctx.receive``: the oldest unread message that matches, suspending
        the run while there is none (S7); recorded, so replay returns the same
        message."""
        x = self.engine
        if x.store is None:
            return await self._receive_in_memory(sender, kind, timeout)
        deadline = await x.recorded(
            deadline_key, "deadline", lambda: None if timeout is None else time.time() + timeout
        )
        args_json = identity_json((), {"sender": sender, "kind": kind}, key, x.run_id)
        args_hash = step_hash(args_json)
        where = f"run {x.run_id!r}, step {key}"
        rec = x.replay.get(key)
        if rec is not None:
            value = x.replayed_value(rec, key, "stalwart.receive", args_json, args_hash, False)
            return _mail_of(value, where)
        text = await x.write(self._ledger("ctx.receive").take_mail(x.run_id, key, sender, kind))
        now = time.time()
        if text is not None:
            value = codec.loads(text, f"{where}: the message received")
            mail = _mail_of(value, where)
            await x.record_step(
                StoredStep(
                    key,
                    "stalwart.receive",
                    args_hash,
                    args_json,
                    text,
                    None,
                    1,
                    now,
                    now,
                    "receive",
                )
            )
            return mail
        if deadline is not None and now >= deadline:
            exc = TimeoutError(f"{where}: no message{_filters(sender, kind)} within {timeout} s")
            await x.record_step(
                StoredStep(
                    key,
                    "stalwart.receive",
                    args_hash,
                    args_json,
                    None,
                    error_to_json(exc),
                    1,
                    now,
                    now,
                    "receive",
                )
            )
            raise exc
        raise Suspend(deadline, mail_wait(sender, kind))

    async def _receive_in_memory(
        self, sender: str | None, kind: str | None, timeout: float | None
    ) -> Mail:
        box = self._box
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                while True:
                    for i, mail in enumerate(box):
                        if (sender is None or mail.sender == sender) and (
                            kind is None or mail.kind == kind
                        ):
                            del box[i]
                            return mail
                    fut: asyncio.Future[None] = loop.create_future()
                    self._waiters.append(fut)
                    await fut
        except TimeoutError:
            raise TimeoutError(
                f"run {self.engine.run_id!r}: no message{_filters(sender, kind)} within {timeout} s"
            ) from None

    # -- continue-as-new -----------------------------------------------------------
    @property
    def generation(self) -> int:
        """Which generation of the run this is: 1, then one more each time it
        continued as new (read from the record that opens the generation)."""
        x = self.engine
        rec = x.replay.get(GENERATION_KEY)
        if rec is None or rec.name != "stalwart.generation":
            return 1
        value = x.decode_output(rec, GENERATION_KEY)
        gen = value.get("generation") if isinstance(value, dict) else None
        if not isinstance(gen, int) or gen < 2:
            raise x.halt(
                StoreError(f"run {x.run_id!r}, step 0: the generation record is not a number")
            )
        return gen

    async def continue_as_new(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> NoReturn:
        """End this generation: the run starts again from the top with these
        arguments and an empty ledger; this generation's steps go to an archive
        run (:func:`archive_run_id`). Call it with nothing else of the run in
        flight: a step finishing after it would land in the new generation.
        The keys of the next generation must differ from this one's where they
        name child runs (scope them by generation): child ids derive from keys.
        """
        x = self.engine
        if x.store is None:
            raise RuntimeError(
                f"run {x.run_id!r}: continue-as-new needs a durable store "
                "(in memory nothing is recorded: go on in a loop)"
            )
        gen = self.generation
        archive = archive_run_id(x.run_id, gen)
        inputs = codec.dumps({"args": list(args), "kwargs": kwargs}, f"inputs of run {x.run_id!r}")
        now = time.time()
        first = StoredStep(
            GENERATION_KEY,
            "stalwart.generation",
            "",
            None,
            codec.dumps({"generation": gen + 1, "previous": archive, "continued_at": now}),
            None,
            1,
            now,
            now,
            "generation",
        )
        await x.write(
            self._ledger("continue-as-new").continue_run(x.run_id, x.fence, inputs, archive, first)
        )
        raise Suspend(now, None)  # due at once: a worker resumes the new generation


def _filters(sender: str | None, kind: str | None) -> str:
    parts = ([f"from {sender!r}"] if sender is not None else []) + (
        [f"of kind {kind!r}"] if kind is not None else []
    )
    return (" " + " ".join(parts)) if parts else ""
