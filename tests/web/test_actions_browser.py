"""In a real browser, on SQLite and PostgreSQL: fork a run from one of its
steps with the result edited and follow the link to the fork a worker
process finishes; answer a wait in the JSON editor, which refuses bad JSON
and a payload that does not fit the wait's schema with a message before
anything is sent; hostile strings stay text; axe-core finds no serious or
critical violation on these pages."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import stalwart as sw

from .act_app import HOSTILE, POLICIES, costly_ask, describe, order, refund
from .axe import grave_violations
from .browser import chromium, inspector, require_browser
from .conftest import seed_sync, start, stop

APP = "tests.web.act_app"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium(require_browser()) as b:
        yield b


@pytest.fixture
def act_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Start a worker process of ``act_app`` on a store (``act_worker(url)``)."""
    monkeypatch.setenv("STALWART_ACT_DIR", str(tmp_path))
    (tmp_path / "stock.txt").write_text("5")
    procs = []

    def run(url: str) -> None:
        proc = start(["-m", APP, url])
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "worker ready", stop(proc)
        procs.append(proc)

    yield run
    for proc in procs:
        stop(proc)


def seeding(url: str) -> Any:
    async def seed(url: str) -> None:
        async with sw.Runner(url, policies=POLICIES) as r:
            await r.run(order, HOSTILE, 2, run_id="order-1")
            await r.run(describe, "tea", run_id="describe-1")
            await r.start(refund, "A-7", run_id="refund-1")
            for _ in range(500):
                if (await r.get_run("refund-1")).status == "suspended":
                    return
                await __import__("asyncio").sleep(0.01)
        raise AssertionError("refund-1 never suspended")

    return seed


def test_fork_from_a_step_in_the_page_and_a_worker_finishes_it(
    browser: Any, store_url: str, act_worker: Any
) -> None:
    url = store_url
    seed_sync(url, seeding(url))
    dialogs: list[str] = []
    with inspector(url, app=APP) as base:
        act_worker(url)
        page = browser.new_page()
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{base}/run?id=order-1")
        page.locator('details[data-key="step 1"] > summary').click()
        page.locator('details[data-key="fork 1"] > summary').click()
        page.locator('details[data-key="fork inputs"] > summary').click()
        inputs = page.locator('textarea[data-json="inputs"]').input_value()
        assert json.loads(inputs) == {"item": HOSTILE, "qty": 2}  # markup as text, whole
        assert grave_violations(page) == []
        editor = page.locator('details[data-key="fork 1"] textarea[name="value"]')
        assert editor.input_value() == str(len(HOSTILE))
        editor.fill("[7")
        assert "not JSON" in page.locator('details[data-key="fork 1"] .check').inner_text()
        page.get_by_role("button", name="Fork with this result").click()
        assert page.url.endswith("/run?id=order-1")  # not sent
        editor.fill("7")
        page.get_by_role("button", name="Fork with this result").click()
        page.wait_for_url("**/run?id=order-1#history")
        history = page.locator("table.history")
        assert "at step 1, result replaced" in history.inner_text()
        assert "the inspector, from 127.0.0.1" in history.inner_text()
        history.locator("a.runid").first.click()
        page.wait_for_url("**/run?id=order-1-fork-*")
        page.locator(".run-head .status", has_text="succeeded").wait_for(timeout=20000)
        assert page.locator("pre.result").inner_text() == json.dumps(
            f"2 x {HOSTILE} at 7 each, 5 in stock"
        )
        assert "forked from" in page.locator("table.history").inner_text()
        assert grave_violations(page) == []
        assert page.locator("main script, main img").count() == 0
        # A result too long to come with the page is loaded when its form opens.
        page.goto(f"{base}/run?id=describe-1")
        page.locator('details[data-key="step 1"] > summary').click()
        long = page.locator('details[data-key="fork 1"] textarea[name="value"]')
        assert long.input_value() == ""
        page.locator('details[data-key="fork 1"] > summary').click()
        page.wait_for_function(
            "() => document.querySelector('details[data-key=\"fork 1\"] textarea').value !== ''"
        )
        assert json.loads(long.input_value()) == "tea: " + "lorem ipsum " * 400
        assert errors == []
    assert dialogs == []


def test_a_signal_edited_in_the_page_is_checked_then_wakes_the_run(
    browser: Any, store_url: str, act_worker: Any
) -> None:
    url = store_url
    seed_sync(url, seeding(url))
    with inspector(url, app=APP) as base:
        act_worker(url)
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{base}/run?id=refund-1")
        page.locator("details.expects > summary").click()
        assert '"minimum": 1' in page.locator("details.expects pre").inner_text()
        assert grave_violations(page) == []
        payload = page.locator('form.signal textarea[name="payload"]')
        check = page.locator("form.signal .check")
        send = page.get_by_role("button", name="Send signal")
        for text, said in [
            ("{bad", "not JSON"),
            ('{"amount": "ten"}', "answer.amount: expected integer, got string"),
            ('{"amount": 0}', "answer.amount must be at least 1"),
            ('{"amount": 5, "by": "me"}', "answer.by: not expected"),
        ]:
            payload.fill(text)
            send.click()
            assert said in check.inner_text(), text
            assert page.url.endswith("/run?id=refund-1")  # nothing was sent
        payload.fill('{"amount": 12, "note": "ok"}')
        assert check.inner_text() == ""
        send.click()
        page.wait_for_url("**answered=refund-1**")
        page.locator(".run-head .status", has_text="succeeded").wait_for(timeout=20000)
        assert page.locator("pre.result").inner_text() == '"refunded 12 on A-7"'
        assert "'refund', " in page.locator("table.history").inner_text()
        assert errors == []


def test_the_page_stops_checking_against_a_schema_too_costly_and_says_so(
    browser: Any, sqlite_url: str
) -> None:
    async def seed(url: str) -> None:
        async with sw.Runner(url, policies=POLICIES) as r:
            await r.start(costly_ask, run_id="costly-1")
            for _ in range(500):
                if (await r.get_run("costly-1")).status == "suspended":
                    return
                await __import__("asyncio").sleep(0.01)
        raise AssertionError("costly-1 never suspended")

    seed_sync(sqlite_url, seed)
    with inspector(sqlite_url, app=APP) as base:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{base}/run?id=costly-1")
        payload = page.locator('form.signal textarea[name="payload"]')
        check = page.locator("form.signal .check")
        payload.fill("1")
        page.get_by_role("button", name="Send signal").click()
        assert "answer: not checked: the schema takes more than 100000 steps" in check.inner_text()
        assert page.url.endswith("/run?id=costly-1")  # nothing was sent
        payload.fill('"fits"')
        assert check.inner_text() == ""
        assert errors == []
