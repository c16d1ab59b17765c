"""Mail between runs, as data: the envelope a store keeps, delivery ids,
the filters of a receive and the waits they suspend on.

The wire format of mailboxes (:mod:`.engine.mailbox` sends and receives),
here beside the ledger's record format so that a store reads and writes
mail without importing the engine. Everything here is JSON read as data,
never imported or called (S13).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from .ledger import CHILD_MARK, Ledger, StoredStep

__all__ = [
    "GENERATION_KEY",
    "MAIL",
    "Delivery",
    "Mail",
    "MailLedger",
    "archive_run_id",
    "envelope",
    "mail_filter",
    "mail_matches",
    "mail_uid",
    "mail_wait",
    "mail_wakes",
]

#: The signal name every mailbox message is stored under (the ``signals``
#: table holds both): a name no ``wait_for`` should use.
MAIL = "stalwart.mail"

#: The key of the record that opens a generation after continue-as-new: a key
#: no context hands out (they count from 1), so it takes none from the run.
GENERATION_KEY = "0"

#: What a delivery did: ``sent``; ``again`` (this id was delivered before: a
#: resumed sender); ``missing`` (no such run); ``finished`` (the run ended).
Delivery = Literal["sent", "again", "missing", "finished"]


@dataclass(frozen=True, slots=True)
class Mail:
    """A message a run received: what :meth:`Context.receive` returns.

    ``sender`` is the sending run's id (None when sent from outside any run),
    ``sent_at`` the sender's clock (Unix seconds) when it first sent, ``id``
    the delivery id (the same every time the send is replayed).
    """

    payload: Any
    sender: str | None
    kind: str
    sent_at: float
    id: str


@runtime_checkable
class MailLedger(Ledger, Protocol):
    """What the mailbox needs from a store beyond :class:`~..ledger.Ledger`
    (:class:`~stalwart.stores.base.Store` implements it)."""

    async def deliver_mail(
        self, run_id: str, envelope: str, uid: str, wakes: Sequence[str]
    ) -> Delivery:
        """Append ``envelope`` to the run's mailbox unless ``uid`` was delivered;
        wake the run if it waits for one of ``wakes``."""
        ...

    async def take_mail(
        self, run_id: str, step_key: str, sender: str | None, kind: str | None
    ) -> str | None:
        """The oldest unread matching message, marked read by ``step_key``
        (the same one again for the same key)."""
        ...

    async def continue_run(
        self, run_id: str, fence: int, inputs: str, archive_id: str, first: StoredStep
    ) -> None:
        """Move the run's steps and read messages to ``archive_id``, give it
        ``inputs``, and record ``first``: all or nothing."""
        ...


# -- the wire format (shared with the stores) ----------------------------------------


def mail_uid(sender: str, key: str, to: str, generation: int = 1) -> str:
    """The delivery id of the send at step ``key`` of run ``sender``, in its
    ``generation``: after continue-as-new the keys count from 1 again, and a
    send of the new generation at a key an earlier one sent from is another
    message, which the store must not take for a resumed sender's."""
    parts: list[Any] = [sender, key, to] if generation == 1 else [sender, key, to, generation]
    raw = json.dumps(parts, separators=(",", ":"))
    return "mail:" + hashlib.blake2b(raw.encode(), digest_size=16).hexdigest()


def envelope(uid: str, sender: str | None, kind: str, sent_at: float, body: str) -> str:
    """A message as stored: JSON, ``body`` being the payload's codec JSON."""
    head = json.dumps(
        {"id": uid, "from": sender, "kind": kind, "sent_at": sent_at}, separators=(",", ":")
    )
    return f'{head[:-1]},"body":{body}}}'


def mail_matches(text: str, sender: str | None, kind: str | None) -> bool:
    """Whether the stored message ``text`` passes the filters. A message that
    is not an envelope matches nothing (it is left for a human to look at)."""
    if sender is None and kind is None:
        return True
    try:
        env = json.loads(text)
    except (ValueError, RecursionError):  # a forged row nested past the parser's depth
        return False
    if not isinstance(env, dict):
        return False
    return (sender is None or env.get("from") == sender) and (
        kind is None or env.get("kind") == kind
    )


def mail_wait(sender: str | None, kind: str | None) -> str:
    """What a run waiting for mail is suspended on (``runs.waiting_for``)."""
    if sender is None and kind is None:
        return MAIL
    return MAIL + "?" + json.dumps([sender, kind], separators=(",", ":"))


def mail_filter(waiting_for: str | None) -> tuple[str | None, str | None] | None:
    """The ``(sender, kind)`` filters of a wait for mail, or None if
    ``waiting_for`` is no wait for mail (a store checks unread matching mail
    before suspending, so that mail that arrived meanwhile is not missed)."""
    if waiting_for == MAIL:
        return (None, None)
    if waiting_for is None or not waiting_for.startswith(MAIL + "?"):
        return None
    try:
        sender, kind = json.loads(waiting_for[len(MAIL) + 1 :])
    except (ValueError, TypeError, RecursionError):
        return None
    if not isinstance(sender, str | None) or not isinstance(kind, str | None):
        return None
    return (sender, kind)


def mail_wakes(sender: str | None, kind: str) -> tuple[str, str, str, str]:
    """The four waits a message from ``sender`` of ``kind`` satisfies: no
    filter, its kind, its sender, both (a store wakes a run waiting for any)."""
    return (
        mail_wait(None, None),
        mail_wait(None, kind),
        mail_wait(sender, None),
        mail_wait(sender, kind),
    )


def archive_run_id(run_id: str, generation: int) -> str:
    """The run that keeps generation ``generation`` of ``run_id`` after it
    continued as new (``~`` is kept for runs the engine makes, so it never
    clashes with a user's run id)."""
    return f"{run_id}{CHILD_MARK}{generation}"
