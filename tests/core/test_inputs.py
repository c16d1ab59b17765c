"""A run's recorded inputs by parameter name: what every surface shows when
it has the run's policy, and when it cannot name them, nothing (the caller
shows the inputs as recorded)."""

from __future__ import annotations

import json

import stalwart as sw
from stalwart.core.inputs import inputs_by_name


@sw.policy
async def refund(ctx: sw.Context, order: str, amount: int, note: str = "") -> str:
    return f"{order} {amount} {note}"


@sw.policy
async def spread(first: int, *rest: int, scale: int = 1) -> int:
    return (first + sum(rest)) * scale


@sw.policy
async def keyed(*, order: str) -> str:
    return order


async def recorded(target: sw.Policy, *args: object, **kwargs: object) -> object:
    """The inputs a real run records for this call, parsed from the ledger."""
    async with sw.Runner() as r:
        handle = await r.start(target, *args, run_id="one", **kwargs)
        await handle.result()
        run = await r.get_run("one")
    return json.loads(run.inputs)


async def test_inputs_given_by_keyword_are_named_by_the_policy() -> None:
    inputs = await recorded(refund, order="A-42", amount=120)
    assert inputs == {"args": ["A-42", 120], "kwargs": {}}  # how the ledger binds them
    assert inputs_by_name(inputs, refund) == {"order": "A-42", "amount": 120}
    mixed = await recorded(refund, "A-42", amount=120, note="late")
    assert inputs_by_name(mixed, refund) == {"order": "A-42", "amount": 120, "note": "late"}


async def test_positions_without_a_name_leave_the_inputs_as_recorded() -> None:
    assert inputs_by_name(await recorded(spread, 1, 2, 3, scale=2), spread) is None
    assert inputs_by_name(await recorded(spread, 1, scale=2), spread) == {"first": 1, "scale": 2}
    assert inputs_by_name(await recorded(keyed, order="A-1"), keyed) == {"order": "A-1"}


def test_without_the_policy_or_a_record_of_arguments_nothing_is_named() -> None:
    assert inputs_by_name({"args": ["A-42", 120], "kwargs": {}}, None) is None
    for tree in ("text", ["A-42"], {"args": "A-42", "kwargs": {}}, {"args": []}, None):
        assert inputs_by_name(tree, refund) is None
    assert inputs_by_name({"args": ["A-42"], "kwargs": {"order": "B"}}, refund) is None
