"""The schema a wait records (``ctx.ask(..., schema=)``) and the check a
payload passes against it: every problem named by its field, the subset of
JSON Schema the inspector's page checks too."""

from __future__ import annotations

import json
from typing import Any

import pytest

import stalwart as sw
from stalwart.core.expects import check_schema, schema_problems

REFUND = {
    "type": "object",
    "required": ["amount"],
    "properties": {
        "amount": {"type": "integer", "minimum": 1, "maximum": 500},
        "reason": {"enum": ["damaged", "late"]},
        "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}, "maxItems": 2},
        "note": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]},
    },
    "additionalProperties": False,
    "$defs": {
        "Line": {"type": "object", "required": ["sku"], "properties": {"sku": {"type": "string"}}}
    },
}


@pytest.mark.parametrize(
    ("payload", "problems"),
    [
        ({"amount": 3}, []),
        ({"amount": 3.0, "reason": "late", "lines": [{"sku": "a"}], "note": None}, []),
        ({"amount": True}, ["answer.amount: expected integer, got boolean"]),
        ({"amount": 2.5}, ["answer.amount: expected integer, got number"]),
        ({"amount": 0}, ["answer.amount must be at least 1"]),
        ({"amount": 501}, ["answer.amount must be at most 500"]),
        ({}, ["answer.amount: required, missing"]),
        ({"amount": 1, "reason": "bored"}, ['answer.reason: must be one of "damaged", "late"']),
        ({"amount": 1, "x": 1}, ["answer.x: not expected (fields: amount, lines, note, reason)"]),
        (
            {"amount": 1, "lines": [{"sku": 1}]},
            ["answer.lines[0].sku: expected string, got integer"],
        ),
        (
            {"amount": 1, "lines": [{}, {}, {}]},
            [
                "answer.lines: item count must be at most 2",
                "answer.lines[0].sku: required, missing",
                "answer.lines[1].sku: required, missing",
                "answer.lines[2].sku: required, missing",
            ],
        ),
        ({"amount": 1, "note": "too long"}, ["answer.note: fits none of 2 choices"]),
        ([1], ["answer: expected object, got array"]),
    ],
)
def test_a_payload_is_checked_field_by_field(payload: Any, problems: list[str]) -> None:
    assert schema_problems(payload, REFUND) == problems


def test_a_schema_that_loops_or_points_away_stops_without_failing() -> None:
    looping = {
        "$ref": "#/$defs/A",
        "$defs": {"A": {"type": "array", "items": {"$ref": "#/$defs/A"}}},
    }
    deep: Any = []
    for _ in range(100):
        deep = [deep]
    assert schema_problems(deep, looping) == [
        "answer" + "[0]" * 65 + ": nested deeper than 64 levels"
    ]
    assert schema_problems({"a": 1}, {"$ref": "https://elsewhere.example/schema.json"}) == []
    assert schema_problems(1, {"type": "decimal"}) == []  # a type it does not know: not refused


def test_a_schema_is_a_json_object() -> None:
    with pytest.raises(TypeError, match="field 'schema': a JSON schema"):
        check_schema(int)
    with pytest.raises(TypeError, match="field 'schema' is not JSON"):
        check_schema({"default": object()})


async def test_the_wait_records_its_schema_with_its_question(tmp_path: Any) -> None:
    @sw.policy
    async def refund(ctx: sw.Context) -> int:
        answer = await ctx.ask("How much?", signal="refund", schema=REFUND)
        return int(answer["amount"])

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    async with sw.Runner(url, policies=[refund]) as r:
        handle = await r.start(refund, run_id="r1")
        while (await r.get_run("r1")).status != "suspended":
            await __import__("asyncio").sleep(0.01)
        steps = await r.store.load_steps("r1")
        notes = [
            json.loads(s.output) for s in steps.values() if s.name == "stalwart.ask" and s.output
        ]
        assert notes == [
            {"prompt": "How much?", "signal": "refund", "about": None, "schema": REFUND}
        ]
        await r.signal("r1", "refund", {"amount": 4})
        assert await handle.result() == 4


async def test_a_wait_refuses_a_schema_that_is_not_one(tmp_path: Any) -> None:
    @sw.policy
    async def asks(ctx: sw.Context) -> object:
        return await ctx.wait_for("x", schema="integer")  # type: ignore[arg-type]

    async with sw.Runner(f"sqlite:///{tmp_path / 'ledger.db'}", policies=[asks]) as r:
        with pytest.raises(TypeError, match=r"wait_for\('x'\): field 'schema': a JSON schema"):
            await r.run(asks, run_id="r2")


def test_a_schema_that_would_take_exponential_time_stops_at_its_step_limit() -> None:
    # Each level offers two choices that both lead to the next level: checking
    # a value that fits none would try 2**40 paths.
    levels = 40
    defs: dict[str, Any] = {
        f"L{i}": {"anyOf": [{"$ref": f"#/$defs/L{i + 1}"}, {"$ref": f"#/$defs/L{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"L{levels}"] = {"type": "string"}
    branching = {"$ref": "#/$defs/L0", "$defs": defs}
    assert schema_problems(1, branching) == [
        "answer: not checked: the schema takes more than 100000 steps to check against this "
        "value (anyOf or oneOf nested through $ref?)"
    ]
    assert schema_problems("fits", branching) == []  # the first path fits: found at once
    looping = {"anyOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/A"}], "$defs": {}}
    looping["$defs"]["A"] = {"anyOf": looping["anyOf"]}
    assert schema_problems(1, looping)[0].startswith("answer: not checked")


def test_a_huge_enum_counts_against_the_step_limit() -> None:
    many = {"type": "array", "items": {"enum": list(range(1000))}}
    assert schema_problems([1] * 10, many) == []
    assert schema_problems([1] * 200, many)[0].startswith("answer: not checked")


def test_a_long_pointer_met_at_every_item_is_walked_once() -> None:
    # 200,000 parts, met at each of 30,000 items: walked each time, that is
    # six billion steps (past the suite's timeout); walked once, 260,000.
    path = ["x"] * 200_000
    deep: dict[str, Any] = {"type": "integer"}
    for part in reversed(path):
        deep = {part: deep}
    schema = {"type": "array", "items": {"$ref": "#/" + "/".join(path)}, **deep}
    assert schema_problems([1] * 30_000, schema) == []
    assert schema_problems([1, "one"], schema) == ["answer[1]: expected integer, got string"]


def test_many_fields_refused_against_many_known_ones_stop_at_the_limits() -> None:
    known = {f"p{i}": {} for i in range(50_000)}
    schema = {"type": "object", "properties": known, "additionalProperties": False}
    problems = schema_problems({f"x{i}": 1 for i in range(3000)}, schema)
    assert len(problems) == 20
    assert problems[0] == "answer.x0: not expected (fields: p0, p1, p10, p100, p1000, " + (
        "p10000, p10001, p10002, p10003, p10004)"
    )
    required = {"type": "object", "required": [f"r{i}" for i in range(200_000)]}
    assert schema_problems({}, required)[0].startswith("answer: not checked")
