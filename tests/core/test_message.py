"""Message: building, reading, and lossless JSON round trips."""

import dataclasses
import json

import pytest

import stalwart as sw
from stalwart import ActionCall, Media, Message, Text

from ._support import Color, Forecast, Point, Route, Weather

PNG = b"\x89PNG\r\n\x1a\n\x00\x01\xff"


# -- building and reading -------------------------------------------------------
def test_role_helpers_set_role_actor_and_text() -> None:
    s = Message.system("Be brief.")
    u = Message.user("Hello", " world")
    a = Message.assistant("Hi")
    assert (s.role, s.actor, s.text) == ("system", "system", "Be brief.")
    assert (u.role, u.actor, u.text) == ("user", "user", "Hello world")
    assert (a.role, a.actor, a.text) == ("assistant", "assistant", "Hi")
    assert Message.user("x", actor="alice").actor == "alice"
    assert Message.assistant("x", actor="planner").actor == "planner"
    for m in (s, u, a):
        assert not m.is_action_call and not m.is_action_result and not m.is_error


def test_ids_are_unique() -> None:
    assert len({Message.user("x").id for _ in range(100)}) == 100


def test_media_parts_keep_order_and_are_not_text() -> None:
    img = Media("image/png", data=PNG)
    link = Media("application/pdf", url="https://example.com/a.pdf")
    m = Message.user("look at", img, "and", link)
    assert m.parts == (Text("look at"), img, Text("and"), link)
    assert m.media == [img, link]
    assert m.text == "look atand"


@pytest.mark.parametrize("kwargs", [{}, {"data": b"x", "url": "https://x"}])
def test_media_needs_exactly_one_of_data_or_url(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Media("image/png", **kwargs)  # type: ignore[arg-type]


def test_messages_are_immutable() -> None:
    m = Message.user("x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.actor = "mallory"  # type: ignore[misc]


def test_call_builds_an_action_call() -> None:
    args = {"query": "python"}
    m = Message.call("web_search", args, id="call_1")
    assert m.is_action_call and not m.is_action_result
    assert m.role == "assistant" and m.actor == "assistant"
    assert m.action_call == ActionCall("call_1", "web_search", {"query": "python"})
    args["query"] = "changed"  # the message took a copy
    assert m.action_call.arguments == {"query": "python"}
    assert m.text == ""


def test_call_gets_a_fresh_id_and_defaults_to_no_arguments() -> None:
    a, b = Message.call("f"), Message.call("f")
    assert a.action_call is not None and b.action_call is not None
    assert a.action_call.id != b.action_call.id
    assert a.action_call.arguments == {}


def test_call_can_carry_invalid_arguments() -> None:
    m = Message.call("f", id="c", invalid="Expecting ',' delimiter")
    assert m.action_call is not None
    assert m.action_call.invalid == "Expecting ',' delimiter"


def test_result_pairs_with_its_call_from_message_call_or_id() -> None:
    call = Message.call("add", {"a": 1}, id="c7")
    assert call.action_call is not None
    for source in (call, call.action_call):
        r = Message.result(source, 3)
        assert r.action_result is not None
        assert (r.action_result.call_id, r.action_result.name) == ("c7", "add")
        assert r.role == "tool" and r.actor == "add"
        assert r.is_action_result and not r.is_action_call and not r.is_error
        assert r.action_result.value == 3
        assert r.text == "3"
    bare = Message.result("c7", "ok", name="add")
    assert bare.action_result is not None and bare.action_result.call_id == "c7"
    assert bare.text == "ok"


def test_result_needs_a_name_with_a_bare_id() -> None:
    with pytest.raises(ValueError, match="name"):
        Message.result("c7", 1)


def test_result_of_a_message_that_is_not_a_call_is_refused() -> None:
    with pytest.raises(ValueError, match="action call"):
        Message.result(Message.user("hi"), 1)


def test_error_result_from_an_exception() -> None:
    call = Message.call("divide", {"a": 1, "b": 0}, id="c1")
    r = Message.result(call, error=ZeroDivisionError("division by zero"))
    assert r.is_error
    assert r.action_result is not None
    assert r.action_result.error_type == "ZeroDivisionError"
    assert r.action_result.error_message == "division by zero"
    assert r.text == "ZeroDivisionError: division by zero"


def test_error_result_from_type_and_message() -> None:
    r = Message.result("c1", name="f", error_type="Timeout", error_message="too slow")
    assert r.is_error and r.text == "Timeout: too slow"


def test_result_text_is_json_for_structured_values() -> None:
    call = Message.call("weather", id="c")
    assert json.loads(Message.result(call, {"a": [1, 2]}).text) == {"a": [1, 2]}
    assert json.loads(Message.result(call, Weather(city="Oslo", celsius=3.5)).text) == {
        "city": "Oslo",
        "celsius": 3.5,
        "tags": [],
    }
    assert json.loads(Message.result(call, Point(1, 2)).text) == {"x": 1, "y": 2}
    assert json.loads(Message.result(call, (1, 2)).text) == [1, 2]
    assert json.loads(Message.result(call, {1: "a"}).text) == {"1": "a"}
    assert json.loads(Message.result(call, Color.RED).text) == "red"


def test_result_text_of_a_user_dict_holding_the_codec_tag_key() -> None:
    # The codec escapes such dicts; the text a model reads must show the data.
    call = Message.call("f", id="c")
    assert json.loads(Message.result(call, {"$t": "hello"}).text) == {"$t": "hello"}
    assert json.loads(Message.result(call, {"$t": "x", "v": 5}).text) == {"$t": "x", "v": 5}


def test_result_text_of_messages_is_their_text() -> None:
    call = Message.call("sub_agent", id="c")
    r = Message.result(call, [Message.assistant("done"), Message.assistant("really")])
    assert json.loads(r.text) == ["done", "really"]


# -- JSON ----------------------------------------------------------------------
def _call(name: str = "f") -> Message:
    return Message.call(name, {"n": 7, "tags": ("a", "b"), "when": None}, id="call_x")


ROUND_TRIP = {
    "system": Message.system("rules"),
    "user text": Message.user("Hello", "again", actor="alice"),
    "unicode": Message.assistant("héllo ✓ 日本"),
    "media bytes": Message.user("see", Media("image/png", data=PNG)),
    "media url": Message.user(Media("image/jpeg", url="https://example.com/x.jpg")),
    "call": _call(),
    "call invalid": Message.call("f", id="c", invalid="bad JSON at 1:3"),
    "call no args": Message.call("ping", id="c0"),
    "result str": Message.result(_call(), "plain"),
    "result falsy": Message.result(_call(), 0),
    "result none": Message.result(_call(), None),
    "result model": Message.result(_call(), Weather(city="Oslo", celsius=-2.0, tags=["snow"])),
    "result nested model": Message.result(
        _call(), Forecast(days=[Weather(city="A", celsius=1.0)], source="met")
    ),
    "result dataclass": Message.result(_call(), Point(3, 4)),
    "result nested dataclass": Message.result(
        _call(), Route("r1", [Point(0, 0), Point(1, 1)], ("x",))
    ),
    "result enum": Message.result(_call(), Color.GREEN),
    "result error": Message.result(_call(), error=ValueError("bad value")),
    "result error typed": Message.result(
        "c9", name="g", error_type="UnknownOption", error_message="no such option"
    ),
    "result message": Message.result(_call(), Message.assistant("inner")),
    "result messages": Message.result(
        _call(),
        [
            Message.user("q"),
            Message.call("g", {"x": 1}, id="c2"),
            Message.result("c2", {"ok": True}, name="g"),
        ],
    ),
    "result with actor": Message.result(_call(), 1, actor="worker"),
}


@pytest.mark.parametrize("message", ROUND_TRIP.values(), ids=ROUND_TRIP.keys())
def test_json_round_trip_is_lossless(message: Message) -> None:
    text = message.to_json()
    assert isinstance(text, str)
    back = Message.from_json(text)
    assert back == message
    assert back.id == message.id
    if message.action_result is not None:
        assert back.action_result is not None
        assert type(back.action_result.value) is type(message.action_result.value)
    # to_dict is JSON-ready, and from_dict inverts it.
    d = message.to_dict()
    assert Message.from_dict(json.loads(json.dumps(d))) == message
    # bytes work too
    assert Message.from_json(text.encode()) == message


def test_round_trip_keeps_nested_message_types() -> None:
    inner = [Message.user("q"), Message.result("c", Point(1, 2), name="p")]
    m = Message.result(Message.call("agent", id="a"), inner)
    back = Message.from_json(m.to_json())
    assert back.action_result is not None
    value = back.action_result.value
    assert isinstance(value, list) and all(isinstance(x, Message) for x in value)
    assert value[1].action_result.value == Point(1, 2)


def test_from_json_refuses_json_that_is_not_a_message() -> None:
    with pytest.raises(TypeError, match="Message"):
        Message.from_json('{"a": 1}')


def test_a_result_that_cannot_be_json_fails_loudly_naming_the_type() -> None:
    class Opaque:
        pass

    m = Message.result(Message.call("f", id="c"), Opaque())
    with pytest.raises(sw.SerializationError, match="Opaque") as info:
        m.to_json()
    assert "'f'" in str(info.value)  # names the option whose result it is
