"""examples/chat_api: the app served with its static page, one process that
also executes (``--execute``), driven over HTTP and in a real browser."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from .conftest import Server, read_events, serving, spawn, stop, wait_status

APP = "examples/chat_api/app.py:policies"
STATIC = "examples/chat_api/static"


@pytest.fixture
def chat(tmp_path: Path) -> Iterator[Server]:
    store = f"sqlite:///{tmp_path / 'chat.db'}"
    with serving(store, "--execute", "--no-auth", "--static", STATIC, app=APP, token=None) as s:
        yield s


def test_a_conversation_over_http(chat: Server) -> None:
    with chat.client(None) as c:
        page = c.get("/")
        assert page.status_code == 200 and "chat.js" in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
        run = c.post("/policies/chat/runs", json={"inputs": {"name": "Ada"}}).json()
        path = f"/runs/{run['id']}"
        wait_status(c, run["id"], "suspended")
        for text in ("hello", "<b>bold?</b>", "bye"):
            wait_status(c, run["id"], "suspended")
            assert c.post(f"{path}/signals/message", json={"text": text}).status_code == 202
        with c.stream("GET", f"{path}/events") as r:
            events = read_events(r, lambda e: e.event == "end")
        talk = ("reply", "stalwart.signal:message")
        steps = [e.data for e in events if e.event == "step"]
        said = [(s["name"], s["output"]) for s in steps if s["name"] in talk]
        assert [name for name, _ in said] == ["reply", *["stalwart.signal:message", "reply"] * 3]
        assert said[0][1] == "Hi Ada! What shall we talk about? (say bye to finish)"
        assert said[3][1] == {"text": "<b>bold?</b>"}  # data, kept as the text it is
        assert events[-1].data["result"] == "Goodbye Ada! You sent 3 messages."


def test_the_page_chats_in_a_browser(chat: Server) -> None:
    from tests.web.browser import chromium, require_browser

    with chromium(require_browser()) as browser:
        page: Any = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(chat.base + "/")
        page.fill("#name", "Bo")
        page.click("#new")
        bubbles = page.locator("#log .bubble")
        bubbles.first.wait_for()
        assert bubbles.first.inner_text().startswith("Hi Bo!")
        for i, text in enumerate(["hello", "<img src=x onerror=alert(1)>"]):
            page.locator("#text:not([disabled])").wait_for()
            page.fill("#text", text)
            page.click("#send")
            page.locator("#log .bubble").nth(2 + 2 * i).wait_for()
        assert bubbles.nth(3).inner_text() == "<img src=x onerror=alert(1)>"  # text, not markup
        assert page.locator("#log img").count() == 0
        # A reload rebuilds the conversation from the run's stream.
        page.reload()
        page.locator("#log .bubble").nth(4).wait_for()
        assert bubbles.count() == 5
        page.locator("#text:not([disabled])").wait_for()
        page.fill("#text", "bye")
        page.click("#send")
        page.locator("#state", has_text="conversation succeeded").wait_for()
        assert bubbles.last.inner_text() == "Goodbye Bo! You sent 3 messages."
        assert errors == []
    with httpx.Client(base_url=chat.base) as c:
        assert c.get("/runs").json()["runs"][0]["status"] == "succeeded"


def test_messages_to_a_conversation(sqlite_url: str) -> None:
    store = sqlite_url
    with (
        serving(store, "--execute", app="tests/api/api_app.py:conversational") as srv,
        srv.client() as c,
    ):
        replies = []
        for i, text in enumerate(["hi", "again"]):
            body = {"agent": "parrot", "message": text, "message_id": f"m{i}"}
            r = c.post("/conversations/t-1/messages", json=body)
            assert r.status_code == 202, r.text
            turn = r.json()["turn_id"]
            assert r.headers["location"] == f"/runs/{quote(turn, safe='')}"
            replies.append(wait_status(c, quote(turn, safe=""), "succeeded")["result"])
        assert replies == ["hi (after 0 turns)", "again (after 1 turns)"]
        bad = c.post("/conversations/t-1/messages", json={"agent": "greet"})
        assert bad.status_code == 422
        assert {f["field"] for f in bad.json()["fields"]} == {"agent", "message"}


def test_messages_without_execute_are_answered_by_a_worker(sqlite_url: str) -> None:
    """A server that only enqueues: the conversation's run and each turn go to the
    queue, and a ``stalwart worker`` serving the conversation's policies answers."""
    store = sqlite_url
    app = "tests/api/api_app.py:conversation_worker"
    worker = spawn(["worker", "--store", store, "--app", app])
    try:
        with (
            serving(store, app="tests/api/api_app.py:conversational") as srv,
            srv.client() as c,
        ):
            replies = []
            for i, text in enumerate(["hi", "again"]):
                body = {"agent": "parrot", "message": text, "message_id": f"m{i}"}
                r = c.post("/conversations/t-1/messages", json=body)
                assert r.status_code == 202, r.text
                turn = quote(r.json()["turn_id"], safe="")
                replies.append(wait_status(c, turn, "succeeded")["result"])
            assert replies == ["hi (after 0 turns)", "again (after 1 turns)"]
            conversation = c.get("/runs/t-1").json()
            assert conversation["status"] == "suspended"  # between turns, held by nobody
            assert conversation["policy"] == "stalwart.thread:parrot"  # the stored name
    finally:
        print(f"worker output: {stop(worker)}")  # shown when the test fails
