"""The memory store's mailboxes: a delivery id is kept once across every
run's mailbox, and freed with the run that held it (as the SQL stores do)."""

from __future__ import annotations

import time

from stalwart.core.ledger import RunRecord
from stalwart.core.mail import MAIL, envelope, mail_wakes
from stalwart.stores.base import SignalRecord
from stalwart.stores.memory import MemoryStore

WAKES = mail_wakes("sender", "note")


def _env(uid: str, body: str = '"hi"') -> str:
    return envelope(uid, "sender", "note", time.time(), body)


async def _store(*ids: str) -> MemoryStore:
    store = MemoryStore()
    for run_id in ids:
        await store.create_run(RunRecord(run_id, "p", "{}"))
    return store


async def test_a_delivery_id_is_kept_once_across_every_mailbox() -> None:
    store = await _store("a", "b")
    for i in range(50):  # a full mailbox elsewhere changes nothing
        assert await store.deliver_mail("b", _env(f"other-{i}"), f"other-{i}", WAKES) == "sent"
    first = _env("u1")
    assert await store.deliver_mail("a", first, "u1", WAKES) == "sent"
    assert await store.deliver_mail("a", _env("u1"), "u1", WAKES) == "again"
    assert await store.deliver_mail("b", _env("u1"), "u1", WAKES) == "again"
    assert await store.deliver_mail("ghost", _env("u1"), "u1", WAKES) == "again"
    assert await store.deliver_mail("ghost", _env("u2"), "u2", WAKES) == "missing"
    assert await store.take_mail("a", "k1", None, None) == first
    assert await store.take_mail("a", "k2", None, None) is None  # one message, read once
    assert await store.deliver_mail("a", _env("u1"), "u1", WAKES) == "again"  # read, still known


async def test_a_delivery_id_is_freed_with_its_run() -> None:
    store = await _store("a", "b")
    assert await store.deliver_mail("a", _env("u1"), "u1", WAKES) == "sent"
    assert store.forget("a") == ["a"]
    assert await store.deliver_mail("b", _env("u1"), "u1", WAKES) == "sent"
    # Pruned with its finished run, too.
    assert await store.deliver_mail("b", _env("u3"), "u3", WAKES) == "sent"
    cancelled = await store.request_cancel("b")
    assert cancelled is not None and cancelled.status == "cancelled"
    await store.create_run(RunRecord("c", "p", "{}"))
    assert await store.deliver_mail("c", _env("u3"), "u3", WAKES) == "again"
    assert await store.prune(older_than=time.time() + 1) == 1
    assert await store.deliver_mail("c", _env("u3"), "u3", WAKES) == "sent"


async def test_an_imported_run_brings_its_delivery_ids() -> None:
    source = await _store("a")
    assert await source.deliver_mail("a", _env("u1"), "u1", WAKES) == "sent"
    dump = await source.export_run("a")
    assert dump is not None
    assert [s.uid for s in dump.signals] == ["u1"]
    target = await _store("b")
    assert await target.import_run(dump)
    assert await target.deliver_mail("b", _env("u1"), "u1", WAKES) == "again"
    assert isinstance(dump.signals[0], SignalRecord) and dump.signals[0].name == MAIL
