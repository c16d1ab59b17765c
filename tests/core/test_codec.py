"""The JSON boundary (S11): values come back equal and of the same type."""

import dataclasses
import datetime as dt
import json
import math
import uuid
from typing import Any

import pytest

import stalwart as sw
from stalwart.core import codec

from ._support import Color, Forecast, Level, Mode, Point, Route, Weather

UTC = dt.UTC
CET = dt.timezone(dt.timedelta(hours=1))

VALUES: dict[str, Any] = {
    "none": None,
    "bool": True,
    "int": 42,
    "big int": 2**70,
    "float": 1.5,
    "str": "héllo",
    "list": [1, "a", None],
    "dict": {"a": 1, "b": [True]},
    "empty tuple": (),
    "tuple": (1, "a", None),
    "nested tuple": ((1, 2), [3, (4,)]),
    "set": {1, 2, 3},
    "frozenset": frozenset({"a", "b"}),
    "bytes": b"\x00\x01\xfe\xff",
    "empty bytes": b"",
    "datetime naive": dt.datetime(2024, 5, 6, 7, 8, 9, 123456),
    "datetime utc": dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC),
    "datetime offset": dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=CET),
    "date": dt.date(2024, 2, 29),
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "enum": Color.RED,
    "int enum": Level.HIGH,
    "str enum": Mode.SAFE,
    "int keys": {1: "one", 2: "two"},
    "tuple keys": {(1, 2): "a", (3, 4): "b"},
    "mixed keys": {1: "int", "1": "str", None: "none", 2.5: "float"},
    "enum keys": {Color.RED: 1, Color.GREEN: 2},
    "frozenset keys": {frozenset({1}): "x"},
    "user $t key": {"$t": "mine", "v": 1},
    "user $t key alone": {"$t": "tuple"},
    "nested $t key": {"outer": {"$t": "bytes", "v": "AA=="}},
    "$t in list": [{"$t": "set", "v": [1]}],
    "dataclass": Point(1, 2),
    "nested dataclass": Route("r", [Point(0, 0), Point(5, 6)], ("a", "b")),
    "pydantic": Weather(city="Oslo", celsius=3.5, tags=["wind"]),
    "nested pydantic": Forecast(days=[Weather(city="A", celsius=1.0)], source=None),
    "message": sw.Message.user("hi"),
    "list of messages": [sw.Message.user("q"), sw.Message.call("f", {"x": (1, 2)}, id="c")],
    "mixture": {"points": [Point(1, 1)], "when": dt.date(2020, 1, 1), "raw": b"x"},
}


def _same(a: Any, b: Any) -> None:
    """Equal, and of the same type all the way down."""
    assert type(a) is type(b), (a, b)
    assert a == b
    if isinstance(a, list | tuple):
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    elif isinstance(a, dict):
        for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True):
            _same(ka, kb)
            _same(va, vb)


@pytest.mark.parametrize("value", VALUES.values(), ids=VALUES.keys())
def test_round_trip(value: Any) -> None:
    text = codec.dumps(value)
    json.loads(text)  # real JSON
    _same(codec.loads(text), value)
    _same(codec.decode(json.loads(json.dumps(codec.encode(value)))), value)


def test_plain_json_passes_through_untagged() -> None:
    tree = {"a": [1, 2.5, "x", None, True], "b": {"c": "d"}}
    assert codec.encode(tree) == tree
    assert codec.dumps(tree) == json.dumps(tree, separators=(",", ":"))


def test_loads_accepts_bytes() -> None:
    assert codec.loads(codec.dumps((1, 2)).encode()) == (1, 2)


def test_datetime_keeps_its_timezone() -> None:
    back = codec.loads(codec.dumps(VALUES["datetime offset"]))
    assert back.utcoffset() == dt.timedelta(hours=1)
    assert codec.loads(codec.dumps(VALUES["datetime naive"])).tzinfo is None


class Opaque:
    pass


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        (object(), "builtins.object"),
        (Opaque(), "Opaque"),
        ([1, {"k": Opaque()}], "Opaque"),
        ({1: Opaque()}, "Opaque"),
        ((Opaque(),), "Opaque"),
        (lambda: 1, "function"),
        (dt.timedelta(seconds=1), "timedelta"),
        (Point(1, Opaque()), "Opaque"),  # type: ignore[arg-type]
    ],
)
def test_unserializable_values_fail_naming_the_type(value: Any, type_name: str) -> None:
    with pytest.raises(sw.SerializationError, match=type_name):
        codec.dumps(value, "result of step 3 (search)")
    with pytest.raises(sw.SerializationError, match=r"result of step 3 \(search\)"):
        codec.encode(value, "result of step 3 (search)")


def test_serialization_error_is_a_type_error_and_a_stalwart_error() -> None:
    with pytest.raises(TypeError):
        codec.dumps(object())
    with pytest.raises(sw.StalwartError):
        codec.dumps(object())


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_are_not_json(number: float) -> None:
    with pytest.raises(sw.SerializationError, match="step 9"):
        codec.dumps({"x": number}, "step 9")


def test_classes_defined_in_a_function_are_refused_at_record_time() -> None:
    # They could be written but never read back (no import path): say so now.
    @dataclasses.dataclass
    class Local:
        x: int

    with pytest.raises(sw.SerializationError, match="Local"):
        codec.dumps(Local(1), "result of step 1")


def test_an_unknown_tag_is_a_corrupted_record_naming_where() -> None:
    with pytest.raises(sw.CorruptedRecord, match=r"^output of step 4: .*nope"):
        codec.loads('{"$t": "nope", "v": 1}', "output of step 4")


def test_serialization_error_names_the_path_to_the_bad_value() -> None:
    import asyncio

    from stalwart.core import codec

    with pytest.raises(sw.SerializationError) as info:
        codec.dumps({"kwargs": {"shared": {"q": asyncio.Queue()}}}, "inputs of run r")
    assert str(info.value).startswith("inputs of run r['kwargs']['shared']['q']: ")
    assert "asyncio.queues.Queue" in str(info.value)
    with pytest.raises(sw.SerializationError, match=r"^result of step 1\[1\]\['a'\]\[0\]: "):
        codec.dumps([1, {"a": [object()]}], "result of step 1")
