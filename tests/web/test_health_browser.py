"""In a real browser, on SQLite and PostgreSQL: the health page's charts
carry the numbers of the runs behind them, a run's page charts its cost
and time, a step replayed after a SIGKILL and a resume is drawn as such,
and markup in names and messages stays text; axe-core finds no serious or
critical violation on these pages."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.crash import kill, wait_for_line

from .axe import grave_violations
from .browser import chromium, inspector, require_browser
from .conftest import seed_sync, start, stop
from .health_seed import WORKER_VERSION, seed_health
from .replay_app import RUN_ID
from .web_app import HOSTILE, seed

REPLAY_APP = "tests.web.replay_app"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium(require_browser()) as b:
        yield b


def test_the_health_page_draws_the_store_s_numbers(browser: Any, store_url: str) -> None:
    seed_sync(store_url, lambda url: seed_health(url, time.time()))
    dialogs: list[str] = []
    with inspector(store_url) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(f"{base}/runs")
        page.locator("header.top a", has_text="Health").click()
        page.wait_for_url("**/health")
        totals = page.locator(".status-totals td")
        got = {
            totals.nth(i).get_attribute("data-status"): totals.nth(i).inner_text() for i in range(6)
        }
        assert got == {
            "pending": "2", "running": "1", "suspended": "1",
            "succeeded": "10", "failed": "4", "cancelled": "0",
        }  # fmt: skip
        chart = page.locator(".status-chart svg")
        failed = chart.locator("rect.failed")
        assert failed.count() == 1 and failed.get_attribute("data-count") == "4"
        assert failed.locator("title").text_content().startswith("4 failed, created ")
        drawn = sum(int(r.get_attribute("data-count")) for r in chart.locator("rect").all())
        assert drawn == 18

        row = page.locator(".latency tr.policy-row").first  # the slowest policy first
        assert row.get_attribute("data-policy") == HOSTILE
        assert row.locator("td.policy").inner_text() == HOSTILE
        cells = [row.locator(f"td.{c}").inner_text() for c in ("count", "p50", "p90", "p99")]
        assert cells == ["4", "30.00 s", "50.00 s", "50.00 s"]
        assert row.locator("rect.p50 title").text_content() == f"{HOSTILE}: p50 30.00 s"

        top = page.locator(".failures tr.failure").first
        assert top.locator("td.count").inner_text() == "3"
        assert top.locator(".message").inner_text() == HOSTILE
        links = top.locator("a.run-link")
        assert links.count() == 3
        links.first.click()
        page.wait_for_url("**/run?id=bad-*")
        assert page.locator(".run-head .status").inner_text() == "failed"
        page.go_back()

        mail = page.locator('.queues tr[data-queue="mail"]')
        assert [mail.locator(f"td.{c}").inner_text() for c in ("pending", "running")] == ["2", "1"]
        assert mail.locator(".worker").all_inner_texts() == [
            "h:1:w1 (v1)",
            f"h:2:w2 ({WORKER_VERSION})",
        ]
        assert page.locator("main script, main img, svg script, svg foreignObject").count() == 0
        assert grave_violations(page) == []
        page.goto(f"{base}/health?window=7d")
        assert page.locator(".runs-read").inner_text() == "19"
    assert dialogs == []


def test_a_run_page_charts_cost_by_model_and_where_its_time_went(
    browser: Any, store_url: str
) -> None:
    seed_sync(store_url, seed)
    prices = {"test-model-1": {"input": 1000.0, "output": 2000.0}}
    with inspector(store_url, prices=prices) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{base}/run?id=agent-1")
        row = page.locator(".cost tr.model-row")
        assert row.locator("td.model").inner_text() == "test-model-1"
        assert row.locator("td.cost").inner_text() == "0.1800 (priced)"  # 120 in, 30 out
        titles = row.locator("svg title").all_text_contents()
        assert titles == ["test-model-1: 120 input tokens", "test-model-1: 30 output tokens"]
        bar = row.locator("rect.input").bounding_box()
        assert bar is not None and bar["width"] > 50  # the only model: most of the chart
        parts = page.locator(".time-split rect")
        kinds = [parts.nth(i).get_attribute("class") for i in range(parts.count())]
        assert kinds[:2] == ["model", "tools"]
        assert (
            page.locator(".time-split rect.model title").text_content().startswith("model calls: ")
        )
        assert grave_violations(page) == []


def test_steps_replayed_after_a_sigkill_are_marked_on_the_timeline(
    browser: Any, store_url: str
) -> None:
    proc = start(["-m", REPLAY_APP, store_url, "crash"])
    wait_for_line(proc, "in crunch")  # inside batch's second call
    kill(proc)
    again = start(["-m", REPLAY_APP, store_url, "resume"])
    try:
        assert again.communicate(timeout=60)[0].strip() == "result 3"
    finally:
        stop(again)
    with inspector(store_url, app=REPLAY_APP) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{base}/run?id={RUN_ID}")
        assert page.locator(".run-head .status").inner_text() == "succeeded"
        rows = page.locator(".timeline tr.row")
        marked = {
            r.get_attribute("data-key"): "replayed" in (r.get_attribute("class") or "")
            for r in rows.all()
        }
        assert marked == {"1": True, "2": False, "2.1": True, "2.2": False}
        title = page.locator('.timeline tr[data-key="2.1"] title').text_content()
        assert "replayed after the resume at +" in title
        resume = page.locator(".timeline tr.axis path.resume title").all_text_contents()
        assert len(resume) == 1
        assert "step 2 batch ran again: its call 2.1 was recorded before it started" in resume[0]
        assert (
            "replayed: recorded by an earlier execution"
            in page.locator(".timeline .legend").inner_text()
        )
        assert grave_violations(page) == []
