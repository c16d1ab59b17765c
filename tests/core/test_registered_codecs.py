"""A program's own codecs (`stalwart.register_codec`): values of a type the
ledger cannot record become data the program turns back into the value, and a
row naming a codec the program did not register is refused, importing nothing."""

from __future__ import annotations

import fractions
import json
from pathlib import Path
from typing import Any

import pytest

import stalwart as sw
from stalwart.core import codec
from stalwart.core.errors import CorruptedRecord, SerializationError


class Point:
    """Not JSON, not a dataclass: only a codec records it."""

    def __init__(self, x: int, y: int) -> None:
        self.x, self.y = x, y

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Point) and (other.x, other.y) == (self.x, self.y)

    def __hash__(self) -> int:
        return hash((self.x, self.y))


class Point3(Point):
    """A subclass: recorded by its base's codec unless it has its own."""


class Blob:
    def __init__(self, data: bytes) -> None:
        self.data = data


class Stubborn:
    pass


class Failing:
    pass


sw.register_codec(Point, lambda p: [p.x, p.y], lambda v: Point(*v), name="test.point")
sw.register_codec(Blob, lambda b: b.data, Blob, name="test.blob")
sw.register_codec(Stubborn, lambda s: s, lambda v: v, name="test.stubborn")


def _refuse(_: Failing) -> Any:
    raise OSError("the device is gone")


sw.register_codec(Failing, _refuse, lambda v: v, name="test.failing")


def test_a_registered_type_is_recorded_as_its_data_and_read_back_as_itself() -> None:
    text = codec.dumps({"at": Point(1, 2), "path": [Point(3, 4)]})
    assert json.loads(text) == {
        "at": {"$t": "codec", "c": "test.point", "v": [1, 2]},
        "path": [{"$t": "codec", "c": "test.point", "v": [3, 4]}],
    }
    assert codec.loads(text) == {"at": Point(1, 2), "path": [Point(3, 4)]}


def test_a_codec_may_return_bytes() -> None:
    back = codec.loads(codec.dumps(Blob(b"\x00\xffpng")))
    assert isinstance(back, Blob) and back.data == b"\x00\xffpng"


def test_a_subclass_is_recorded_by_its_bases_codec() -> None:
    back = codec.loads(codec.dumps(Point3(5, 6)))
    assert type(back) is Point and back == Point(5, 6)


def test_a_type_from_the_standard_library_gets_a_codec_by_its_qualified_name() -> None:
    sw.register_codec(
        fractions.Fraction, lambda f: [f.numerator, f.denominator], lambda v: fractions.Fraction(*v)
    )
    text = codec.dumps(fractions.Fraction(1, 3))
    assert json.loads(text)["c"] == "fractions:Fraction"
    assert codec.loads(text) == fractions.Fraction(1, 3)


def test_a_row_naming_a_codec_not_registered_here_is_corrupt_and_imports_nothing() -> None:
    row = json.dumps({"$t": "codec", "c": "os:system", "v": "rm -rf /"})
    with pytest.raises(CorruptedRecord) as caught:
        codec.loads(row, "result of step 2 of run 'r'")
    message = str(caught.value)
    assert message.startswith("result of step 2 of run 'r': ")
    assert "codec 'os:system'" in message and "not registered" in message
    assert "nothing was imported" in message


def test_a_codec_that_fails_names_where_the_value_was_and_the_codec() -> None:
    with pytest.raises(SerializationError) as caught:
        codec.dumps({"k": Failing()}, "result of step 1")
    message = str(caught.value)
    assert message.startswith("result of step 1['k']: the codec 'test.failing'")
    assert "OSError: the device is gone" in message


def test_a_codec_that_returns_its_own_type_again_is_refused_not_looped() -> None:
    with pytest.raises(SerializationError, match="returned a Stubborn again"):
        codec.dumps(Stubborn())


def test_types_the_ledger_records_itself_take_no_codec() -> None:
    for cls in (str, int, dict, list, tuple, bytes, sw.Message):
        with pytest.raises(ValueError, match=r"records .* values itself"):
            sw.register_codec(cls, lambda v: v, lambda v: v)


def test_a_name_is_one_codecs_only() -> None:
    class Other:
        pass

    with pytest.raises(ValueError, match=r"'test\.point' is the codec of .*Point"):
        sw.register_codec(Other, lambda v: 0, lambda v: Other(), name="test.point")
    with pytest.raises(ValueError, match="must be 1 to 200"):
        sw.register_codec(Other, lambda v: 0, lambda v: Other(), name="a name with spaces")


def test_registering_a_type_again_replaces_its_codec_and_frees_the_old_name() -> None:
    class Version:
        def __init__(self, v: str) -> None:
            self.v = v

    sw.register_codec(Version, lambda v: v.v, Version, name="test.version.1")
    sw.register_codec(Version, lambda v: v.v, Version, name="test.version.2")
    assert json.loads(codec.dumps(Version("x")))["c"] == "test.version.2"
    with pytest.raises(CorruptedRecord, match=r"test\.version\.1"):
        codec.loads('{"$t":"codec","c":"test.version.1","v":"x"}')


def test_an_unrecordable_value_says_how_to_register_a_codec() -> None:
    class Socketish:
        pass

    with pytest.raises(SerializationError, match=r"stalwart\.register_codec"):
        codec.dumps(Socketish())


@sw.policy
async def locate(ctx: sw.Context, name: str) -> Any:
    return await ctx.call(lookup_point, name=name)


EXECUTED: list[str] = []


@sw.policy
async def lookup_point(ctx: sw.Context, name: str) -> Any:
    EXECUTED.append(name)
    return {"name": name, "at": Point(7, 8)}


async def test_a_durable_step_returning_a_codec_type_replays_it_without_executing(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    EXECUTED.clear()
    async with sw.Runner(url, policies=[locate, lookup_point]) as runner:
        first = await runner.run(locate, name="home", run_id="where")
    async with sw.Runner(url, policies=[locate, lookup_point]) as runner:
        again = await runner.run(locate, name="home", run_id="where")
        steps = await runner.steps("where")
    assert first == again == {"name": "home", "at": Point(7, 8)}
    assert EXECUTED == ["home"]
    recorded = [s for s in steps if s.name == "lookup_point"]
    assert recorded and recorded[0].output is not None
    assert json.loads(recorded[0].output)["at"] == {"$t": "codec", "c": "test.point", "v": [7, 8]}


def test_a_live_object_is_refused_pointing_to_mailboxes_not_to_a_codec() -> None:
    import asyncio
    import threading

    def numbers() -> Any:
        yield 1

    for value in (asyncio.Queue(), threading.Lock(), numbers()):
        with pytest.raises(SerializationError) as caught:
            codec.dumps({"shared": value}, "inputs of run 'game'")
        message = str(caught.value)
        assert message.startswith("inputs of run 'game'['shared']: a value of type ")
        assert "it is a live object" in message
        assert "mailboxes (ctx.send and ctx.receive)" in message
        assert "register_codec" not in message
