"""A durable conversation driven by the AI SDK's own client: its
``DefaultChatTransport`` posts the chat and resumes its stream, and
``readUIMessageStream`` builds the assistant's message from our UI message
stream (Node.js, ``js/``), against ``stalwart serve --execute`` in a process
of its own. The model is OpenAI Chat Completions through the official SDK,
answered by recorded streams; its ``get_time`` call waits for approval."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import httpx
import pytest

from .ui_clients import node, ui_server

REPLY = "It is 18 °C and partly cloudy in Paris."
WEATHER = {"temperature": 18, "unit": "celsius", "sky": "partly cloudy"}


def _user(mid: str, text: str) -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]}


def _chunks(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line["chunk"] for line in lines if "chunk" in line]


def _message(lines: list[dict[str, Any]]) -> dict[str, Any]:
    (last,) = [line for line in lines if "message" in line]
    message: dict[str, Any] = last["message"]
    return message


def _tools(message: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["toolName"]: p for p in message["parts"] if p["type"] == "dynamic-tool"}


def _answered(message: dict[str, Any], approved: bool, reason: str | None = None) -> dict[str, Any]:
    """The message as the SDK's ``addToolApprovalResponse`` leaves it."""
    out = copy.deepcopy(message)
    for part in out["parts"]:
        if part.get("state") == "approval-requested":
            part["state"] = "approval-responded"
            part["approval"] = {**part["approval"], "approved": approved}
            if reason is not None:
                part["approval"]["reason"] = reason
    return out


def _ask(js: Path, base: str, chat: str, *messages: dict[str, Any]) -> list[dict[str, Any]]:
    return node(js, "aisdk_client.mjs", "send", base, "weather", chat, stdin={"messages": messages})


def test_a_turn_streams_its_tool_calls_waits_for_approval_and_answers(
    js: Path, tmp_path: Path
) -> None:
    with ui_server(tmp_path) as s:
        question = _user("m1", "Weather and time in Paris?")
        first = _ask(js, s.base, "chat-1", question)
        kinds = [c["type"] for c in _chunks(first)]
        assert kinds[:2] == ["start", "start-step"]
        assert kinds[-2:] == ["finish-step", "finish"]
        asked = _message(first)
        tools = _tools(asked)
        assert tools["get_weather"]["input"] == {"city": "Paris", "unit": "celsius"}
        assert tools["get_weather"]["state"] == "input-available"  # not run: the reply waits
        assert tools["get_time"]["state"] == "approval-requested"
        assert tools["get_time"]["input"] == {"timezone": "Europe/Paris"}

        second = _ask(js, s.base, "chat-1", question, _answered(asked, approved=True))
        done = _message(second)
        assert done["id"] == asked["id"]  # the same assistant message, continued
        tools = _tools(done)
        assert tools["get_weather"]["state"] == "output-available"
        assert tools["get_weather"]["output"] == WEATHER
        assert tools["get_time"]["output"] == "14:05"
        texts = [p["text"] for p in done["parts"] if p["type"] == "text"]
        assert texts == [REPLY]
        deltas = [c for c in _chunks(second) if c["type"] == "text-delta"]
        assert len(deltas) > 1  # the model's tokens, live, as they came
        assert _chunks(second)[-1] == {"type": "finish", "finishReason": "stop"}
        # The turn's reply is the conversation's: the API says so too.
        with httpx.Client(base_url=s.base) as c:
            assert c.get("/runs/chat-1~turn-m1").json()["result"] == REPLY


def test_a_denied_call_is_shown_denied_and_the_model_reads_why(js: Path, tmp_path: Path) -> None:
    with ui_server(tmp_path) as s:
        question = _user("m1", "Weather and time in Paris?")
        asked = _message(_ask(js, s.base, "chat-2", question))
        denied = _answered(asked, approved=False, reason="not now")
        done = _message(_ask(js, s.base, "chat-2", question, denied))
        assert _tools(done)["get_time"]["state"] == "output-denied"
        assert _tools(done)["get_weather"]["output"] == WEATHER
        with httpx.Client(base_url=s.base) as c:
            steps = c.get("/runs/chat-2/steps", params={"limit": 500}).json()["steps"]
        (*_, last) = [s_ for s_ in steps if s_["name"] == "openai:gpt-4o"]
        (told,) = [
            m
            for m in last["arguments"]["observations"]
            if "get_time" in str(m) and m["role"] == "tool"
        ]
        assert "ApprovalDenied" in str(told) and "not now" in str(told)


def test_a_client_gone_mid_stream_resumes_the_turn_whole(js: Path, tmp_path: Path) -> None:
    with ui_server(tmp_path) as s:
        question = _user("m1", "Weather and time in Paris?")
        cut = _ask_cut(js, s.base, "chat-3", question, after=3)
        assert cut[-1]["aborted"] is True
        assert len(_chunks(cut)) == 3
        resumed = node(js, "aisdk_client.mjs", "resume", s.base, "weather", "chat-3")
        message = _message(resumed)
        assert _tools(message)["get_time"]["state"] == "approval-requested"
        assert _tools(message)["get_weather"]["input"] == {"city": "Paris", "unit": "celsius"}
        done = _message(_ask(js, s.base, "chat-3", question, _answered(message, approved=True)))
        assert [p["text"] for p in done["parts"] if p["type"] == "text"] == [REPLY]
        # Answered: nothing left to resume.
        assert node(js, "aisdk_client.mjs", "resume", s.base, "weather", "chat-3") == [
            {"none": True}
        ]


def _ask_cut(
    js: Path, base: str, chat: str, *messages: dict[str, Any], after: int
) -> list[dict[str, Any]]:
    args = ("send", base, "weather", chat, str(after))
    return node(js, "aisdk_client.mjs", *args, stdin={"messages": messages})


@pytest.mark.slow
def test_a_turn_survives_a_server_killed_while_it_waits(js: Path, tmp_path: Path) -> None:
    with ui_server(tmp_path) as s:
        question = _user("m1", "Weather and time in Paris?")
        asked = _message(_ask(js, s.base, "chat-4", question))
        s.kill()
        s.start()
        resumed = _message(node(js, "aisdk_client.mjs", "resume", s.base, "weather", "chat-4"))
        assert _tools(resumed) == _tools(asked)  # rebuilt from the ledger, the same
        done = _message(_ask(js, s.base, "chat-4", question, _answered(resumed, approved=True)))
        assert [p["text"] for p in done["parts"] if p["type"] == "text"] == [REPLY]
        assert _tools(done)["get_time"]["output"] == "14:05"


def test_a_request_the_sdk_would_not_send_is_refused_naming_the_field(tmp_path: Path) -> None:
    with ui_server(tmp_path) as s, httpx.Client(base_url=s.base) as c:
        r = c.post("/agents/weather/aisdk", json={"id": "c", "messages": []})
        assert r.status_code == 422 and r.json()["fields"][0]["field"] == "(body)"
        r = c.post("/agents/weather/aisdk", json={"id": "a~b", "messages": [_user("m", "hi")]})
        assert r.status_code == 422 and r.json()["fields"][0]["field"] == "id"
        r = c.post("/agents/nobody/aisdk", json={"id": "c", "messages": [_user("m", "hi")]})
        assert r.status_code == 404
        empty = {"id": "m", "role": "user", "parts": []}
        r = c.post("/agents/weather/aisdk", json={"id": "c", "messages": [empty]})
        assert r.status_code == 422 and r.json()["fields"][0]["field"] == "messages[0]"
