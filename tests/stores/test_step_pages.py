"""A page of a run's steps: what shows a run reads, whatever the run's length.

``Store.step_page`` returns at most ``limit`` steps, whole, in the order
they finished (``(finished_at, key)``): the latest, those before a step or
those after one, with the run's step count and how many come before the
page. Paging back from the latest (or on from the first) gives every step
exactly once; and only the page's records are rebuilt, so a page of a long
conversation (each model call's record holds the conversation so far) costs
its own records, not the run's.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from stalwart.core.ledger import RunRecord, StepRecord, StoredStep
from stalwart.core.stepargs import ext_node, step_hash
from stalwart.stores.base import StepPage, Store

START = 1_700_000_000.0


async def _claimed(store: Store, run_id: str) -> int:
    await store.create_run(RunRecord(run_id, "p", "{}"))
    claim = await store.claim(run_id, "host:1:a", 60.0)
    assert claim is not None
    return claim.fence


def _step(key: str, at: float, args: str = "{}", whole: str | None = None) -> StoredStep:
    return StoredStep(key, "echo", step_hash(whole or args), args, json.dumps(key), None, 1, at, at)


async def _run_of(store: Store, run_id: str, n: int) -> list[str]:
    """A run of ``n`` steps finished a second apart, recorded out of key
    order (as concurrent calls are); their keys in the order they finished."""
    fence = await _claimed(store, run_id)
    keys = [f"{i % 7 + 1}.{i}" for i in range(n)]
    for i in reversed(range(n)):
        await store.record_step(run_id, fence, _step(keys[i], START + i))
    return keys


def _keys(page: StepPage) -> list[str]:
    return [s.key for s in page.steps]


async def test_the_latest_page_is_the_last_steps_in_the_order_they_finished(
    any_store: Store,
) -> None:
    keys = await _run_of(any_store, "r", 12)
    page = await any_store.step_page("r", 5)
    assert _keys(page) == keys[-5:]
    assert all(type(s) is StepRecord for s in page.steps)
    assert (page.count, page.earlier, page.later) == (12, 7, 0)
    # More than the run has: every step, none before.
    whole = await any_store.step_page("r", 100)
    assert _keys(whole) == keys and (whole.count, whole.earlier, whole.later) == (12, 0, 0)
    # No limit but the count: no record.
    counted = await any_store.step_page("r", 0)
    assert (counted.steps, counted.count) == ([], 12)
    empty = await any_store.step_page("no-such-run", 5)
    assert (empty.steps, empty.count, empty.earlier) == ([], 0, 0)


async def test_paging_back_and_on_covers_every_step_exactly_once(any_store: Store) -> None:
    keys = await _run_of(any_store, "r", 23)
    back: list[str] = []
    page = await any_store.step_page("r", 5)
    pages = 1
    while True:
        assert len(page.steps) <= 5
        assert page.earlier + len(page.steps) + page.later == 23
        back = _keys(page) + back
        if not page.earlier:
            break
        page = await any_store.step_page("r", 5, before=page.first)
        pages += 1
    assert back == keys and pages == 5
    # On from the first, with ``after``.
    on: list[str] = []
    page = await any_store.step_page("r", 5, after=(-math.inf, ""))
    while page.steps:
        assert page.earlier == len(on)
        on += _keys(page)
        page = await any_store.step_page("r", 5, after=page.last)
    assert on == keys


async def test_steps_finished_at_one_instant_are_paged_by_key(any_store: Store) -> None:
    fence = await _claimed(any_store, "tie")
    for key in ("b", "a", "d", "c"):
        await any_store.record_step("tie", fence, _step(key, START))
    first = await any_store.step_page("tie", 2)
    assert _keys(first) == ["c", "d"]
    rest = await any_store.step_page("tie", 2, before=first.first)
    assert _keys(rest) == ["a", "b"] and rest.earlier == 0


async def test_a_page_before_and_after_at_once_or_of_negative_size_is_refused(
    any_store: Store,
) -> None:
    with pytest.raises(ValueError, match=r"run 'r'.*not both"):
        await any_store.step_page("r", 5, before=(1.0, "1"), after=(0.0, "1"))
    with pytest.raises(ValueError, match=r"run 'r'.*negative"):
        await any_store.step_page("r", -1)


async def test_a_page_of_a_long_conversation_rebuilds_only_its_own_records(
    any_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each model call's arguments extend the previous call's history by one
    message (stored compact): the latest page's records are whole, and only
    they are rebuilt."""
    import stalwart.stores.base as base

    fence = await _claimed(any_store, "talk")
    history: list[str] = []
    for i in range(1, 201):
        history.append(json.dumps(f"message {i}"))
        whole = '{"history":[' + ",".join(history) + "]}"
        stored = (
            whole if i == 1 else '{"history":' + ext_node(str(i - 1), i - 1, history[-1:]) + "}"
        )
        await any_store.record_step("talk", fence, _step(str(i), START + i, stored, whole))

    rebuilt: list[str] = []  # the keys of the records the store makes whole
    real = base.whole_steps

    def counting(run_id: str, steps: Any, refs: Any = None) -> dict[str, StepRecord]:
        rebuilt.extend(steps)
        return real(run_id, steps, refs)

    monkeypatch.setattr(base, "whole_steps", counting)
    page = await any_store.step_page("talk", 3)
    assert _keys(page) == ["198", "199", "200"]
    assert json.loads(page.steps[-1].args or "")["history"][-1] == "message 200"
    assert len(json.loads(page.steps[0].args or "")["history"]) == 198
    assert rebuilt == ["198", "199", "200"]  # the page's, not the run's 200
