"""A durable conversation run by AG-UI's own client, ``HttpAgent`` from
``@ag-ui/client`` (Node.js, ``js/``): it posts ``RunAgentInput``, verifies
the events' order and applies them to its messages, against ``stalwart serve
--execute`` in a process of its own. The model is OpenAI Chat Completions
through the official SDK, answered by recorded streams; its ``get_time``
call waits for approval: an AG-UI interrupt, answered with ``resume``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from ag_ui.core import EventType, RunFinishedEvent
from pydantic import TypeAdapter

from .conftest import wait_status
from .ui_clients import node, ui_server

REPLY = "It is 18 °C and partly cloudy in Paris."
QUESTION = [{"id": "m1", "role": "user", "content": "Weather and time in Paris?"}]


def _run(
    js: Path, base: str, thread: str, run: str, messages: list[Any], resume: Any = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The events the client saw, and what it holds after the run."""
    stdin = {"messages": messages, **({"resume": resume} if resume is not None else {})}
    lines = node(js, "agui_client.mjs", f"{base}/agents/weather/agui", thread, run, stdin=stdin)
    events = [line["event"] for line in lines if "event" in line]
    (result,) = [line["result"] for line in lines if "result" in line]
    return events, result


def _approve(outcome: dict[str, Any], approved: bool = True) -> list[dict[str, Any]]:
    return [
        {"interruptId": i["id"], "status": "resolved", "payload": {"approved": approved}}
        for i in outcome["interrupts"]
    ]


def test_a_turn_is_interrupted_for_approval_and_resumed(js: Path, tmp_path: Path) -> None:
    with ui_server(tmp_path) as s:
        events, held = _run(js, s.base, "thread-1", "run-1", QUESTION)
        kinds = [e["type"] for e in events]
        assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
        assert held["failed"] is None
        (interrupt,) = held["outcome"]["interrupts"]
        assert interrupt["reason"] == "tool_approval"
        assert interrupt["message"] == 'Approve get_time(timezone="Europe/Paris")?'
        (assistant,) = [m for m in held["messages"] if m["role"] == "assistant"]
        calls = {c["function"]["name"]: c for c in assistant["toolCalls"]}
        assert json.loads(calls["get_weather"]["function"]["arguments"]) == {
            "city": "Paris",
            "unit": "celsius",
        }
        assert interrupt["toolCallId"] == calls["get_time"]["id"]

        events, held = _run(
            js, s.base, "thread-1", "run-2", held["messages"], _approve(held["outcome"])
        )
        assert held["failed"] is None and held["outcome"]["type"] == "success"
        results = {m["toolCallId"]: m["content"] for m in held["messages"] if m["role"] == "tool"}
        assert results[calls["get_time"]["id"]] == '"14:05"'
        assert json.loads(results[calls["get_weather"]["id"]])["sky"] == "partly cloudy"
        said = [
            m["content"] for m in held["messages"] if m["role"] == "assistant" and m.get("content")
        ]
        assert said == [REPLY]
        contents = [e for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
        assert len(contents) > 1  # the model's tokens, live, as they came
        assert events[-1]["result"] == REPLY


def test_a_denied_call_reads_as_its_result(js: Path, tmp_path: Path) -> None:
    with ui_server(tmp_path) as s:
        _, held = _run(js, s.base, "thread-2", "run-1", QUESTION)
        resume = _approve(held["outcome"], approved=False)
        resume[0]["payload"]["reason"] = "not now"
        _, held = _run(js, s.base, "thread-2", "run-2", held["messages"], resume)
        (denied,) = [
            m["content"]
            for m in held["messages"]
            if m["role"] == "tool" and "Denied" in m["content"]
        ]
        assert denied == "ApprovalDenied: not now"
        assert held["outcome"]["type"] == "success"


def test_a_client_gone_mid_stream_posts_again_and_gets_the_same_turn(
    js: Path, tmp_path: Path
) -> None:
    """A client that lost its stream posts its input again: the same turn
    (never a second one), its events rebuilt from the ledger."""
    with ui_server(tmp_path) as s:
        url = f"{s.base}/agents/weather/agui"
        stdin = {"messages": QUESTION}
        cut = node(js, "agui_client.mjs", url, "thread-3", "run-1", "3", stdin=stdin)
        assert len([line for line in cut if "event" in line]) == 3  # it stopped reading there
        assert cut[-1]["result"]["outcome"] is None
        _, held = _run(js, s.base, "thread-3", "run-1", QUESTION)
        (interrupt,) = held["outcome"]["interrupts"]
        assert interrupt["metadata"] == {
            "tool": "get_time",
            "arguments": {"timezone": "Europe/Paris"},
        }
        with httpx.Client(base_url=s.base) as c:
            turns = c.get("/runs", params={"id_contains": "thread-3~turn-"}).json()["runs"]
        assert [t["id"] for t in turns] == ["thread-3~turn-m1"]
        _, done = _run(js, s.base, "thread-3", "run-2", held["messages"], _approve(held["outcome"]))
        said = [
            m["content"] for m in done["messages"] if m["role"] == "assistant" and m.get("content")
        ]
        assert said == [REPLY]


@pytest.mark.slow
def test_a_turn_survives_a_server_killed_while_it_waits(js: Path, tmp_path: Path) -> None:
    with ui_server(tmp_path) as s:
        _, held = _run(js, s.base, "thread-4", "run-1", QUESTION)
        s.kill()
        s.start()
        _, again = _run(js, s.base, "thread-4", "run-1", QUESTION)
        assert again["outcome"] == held["outcome"]  # rebuilt from the ledger
        _, done = _run(
            js, s.base, "thread-4", "run-2", again["messages"], _approve(again["outcome"])
        )
        said = [
            m["content"] for m in done["messages"] if m["role"] == "assistant" and m.get("content")
        ]
        assert said == [REPLY]


def test_a_run_streams_as_agui_events(tmp_path: Path) -> None:
    """``GET /runs/{run_id}/agui``: any durable run, each event one AG-UI's
    own types accept."""
    events = TypeAdapter(list[Any])
    with ui_server(tmp_path) as s, httpx.Client(base_url=s.base, timeout=30) as c:
        started = c.post("/policies/weather/runs", json={"inputs": {"question": "Paris?"}}).json()
        run_id = started["id"]

        def stream() -> list[dict[str, Any]]:
            with c.stream("GET", f"/runs/{run_id}/agui") as r:
                assert r.headers["content-type"].startswith("text/event-stream")
                lines = [line for line in r.iter_lines() if line.startswith("data: ")]
            return [json.loads(line[6:]) for line in lines]

        waiting = stream()
        assert waiting[-1]["outcome"]["type"] == "interrupt"
        signal = waiting[-1]["outcome"]["interrupts"][0]["id"].split("/")[0]
        assert (
            c.post(f"/runs/{run_id}/signals/{quote(signal, safe='')}", json=True).status_code == 202
        )
        wait_status(c, run_id, "succeeded")
        done = stream()  # the whole run again, from the ledger: the approval on the way
        finished = RunFinishedEvent.model_validate(done[-1])
        assert finished.type == EventType.RUN_FINISHED and finished.result == REPLY
        assert events.validate_python(done)


async def test_a_mounted_agui_app_answers_at_its_root(tmp_path: Path) -> None:
    """``agui_app`` mounted in a site (its lifespan run by the site's): a
    RunAgentInput posted to the mount's root is a turn, streamed as AG-UI."""
    from ag_ui.core import RunAgentInput, UserMessage
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from stalwart.api.mounts import agui_app
    from stalwart.llm import Agent
    from stalwart.testing import ScriptedLLM

    agent = Agent(ScriptedLLM(["Hello from the mount."]), name="greeter")
    copilot = agui_app(f"sqlite:///{tmp_path / 'mount.db'}", agent, execute=True, poll=0.05)
    site = Starlette(
        routes=[Mount("/copilot", copilot)],
        lifespan=lambda _: copilot.router.lifespan_context(copilot),
    )
    run = RunAgentInput(
        thread_id="t-1",
        run_id="r-1",
        messages=[UserMessage(id="m-1", content="hi")],
        state=None,
        tools=[],
        context=[],
        forwarded_props=None,
    )
    async with site.router.lifespan_context(site):
        transport = httpx.ASGITransport(app=site)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            body = run.model_dump_json(by_alias=True)
            r = await c.post(
                "/copilot/", content=body, headers={"content-type": "application/json"}
            )
    assert r.status_code == 200, r.text
    lines = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]
    kinds = [e["type"] for e in lines]
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
    said = "".join(e["delta"] for e in lines if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert said == "Hello from the mount." == lines[-1]["result"]


def test_a_waiting_run_shows_what_it_asks_as_its_state(tmp_path: Path) -> None:
    """A run waiting for a person (``ctx.wait_for(prompt=, about=)``, as a
    journey's steps do): its state snapshot says what it waits for and asks;
    the answer sent, the same stream goes on to the run's end."""
    with ui_server(tmp_path) as s, httpx.Client(base_url=s.base, timeout=30) as c:
        run_id = c.post("/policies/survey/runs", json={"inputs": {}}).json()["id"]
        wait_status(c, run_id, "suspended")
        seen: list[dict[str, Any]] = []
        with c.stream("GET", f"/runs/{run_id}/agui") as r:
            for line in r.iter_lines():
                if not line.startswith("data: "):
                    continue
                seen.append(json.loads(line[6:]))
                state = seen[-1].get("snapshot") or {}
                if state.get("waiting_for") == "answer":
                    assert state["asked"] == {"prompt": "Which city?", "about": {"step": "city"}}
                    sent = c.post(f"/runs/{run_id}/signals/answer", json="Lyon")
                    assert sent.status_code == 202
                if seen[-1]["type"] == "RUN_FINISHED":
                    break
        assert seen[-1]["result"] == "noted Lyon"
        assert any((e.get("snapshot") or {}).get("waiting_for") == "answer" for e in seen)
