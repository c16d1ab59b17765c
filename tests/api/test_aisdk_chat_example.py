"""examples/aisdk_chat: the AI SDK page, bundled from its own lock file,
served with its agent by ``stalwart serve --execute``, driven in a real
browser: a refund asked, the page reloaded while the turn waits (the
turn's stream resumed from the ledger), approved, answered; a denial
reaches the model."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.npm import npm_dir

from .conftest import Server, serving

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "aisdk_chat"
APP = "examples/aisdk_chat/app.py:policies"


@pytest.fixture
def chat(tmp_path: Path) -> Iterator[Server]:
    folder = npm_dir(EXAMPLE)
    built = subprocess.run(
        ["npm", "run", "build"], cwd=folder, capture_output=True, text=True, timeout=120
    )
    assert built.returncode == 0, built.stderr
    store = f"sqlite:///{tmp_path / 'chat.db'}"
    static = str(EXAMPLE / "static")
    with serving(store, "--execute", "--no-auth", "--static", static, app=APP, token=None) as s:
        yield s


def test_the_page_asks_for_approval_and_answers(chat: Server) -> None:
    from tests.web.browser import chromium, require_browser

    with chromium(require_browser()) as browser:
        page: Any = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(chat.base + "/")
        page.locator("#state", has_text="ready").wait_for()
        page.fill("#text", "Refund order A-17, please <b>now</b>")
        page.click("#send")
        approve = page.locator("button.approve")
        approve.wait_for()
        assert "refund" in page.locator(".tool code").first.inner_text()
        assert page.locator("#log b").count() == 0  # text, not markup
        assert "<b>now</b>" in page.locator(".bubble.user").first.inner_text()
        page.reload()  # the turn waits durably; the page resumes its stream
        approve.wait_for()
        assert page.locator(".bubble.user").count() == 0  # the page kept no history itself
        approve.click()
        page.locator(".bubble.assistant p", has_text="Done: refunded 20.00 on A-17.").wait_for()
        assert page.locator(".tool .output").first.inner_text() == '"refunded 20.00 on A-17"'

        page.fill("#text", "And B-2?")
        page.click("#send")
        page.locator("button.deny").wait_for()
        page.locator("button.deny").click()
        said = page.locator(".bubble.assistant p", has_text="I did not refund it")
        said.wait_for()
        assert "the customer said no" in said.inner_text()
        assert errors == []
    with httpx.Client(base_url=chat.base) as c:
        turns = c.get("/runs", params={"policy": "stalwart.turn"}).json()["runs"]
        assert sorted(t["status"] for t in turns) == ["succeeded", "succeeded"]
