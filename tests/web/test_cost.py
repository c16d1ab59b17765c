"""A run's cost by model and the split of its time: recorded costs are
kept, missing ones priced from the table the inspector was given (or left
unknown), and the time bar adds up to the run's span."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import stalwart as sw
from stalwart.llm import Price
from stalwart.web.conversation import ModelUsage
from stalwart.web.cost import WIDTH, cost_table, time_split
from stalwart.web.timeline import Spent

from .conftest import client
from .web_app import seed


def test_a_recorded_cost_is_kept_and_a_missing_one_is_priced_from_the_table() -> None:
    usage = [
        ModelUsage("big", 2, 1_000_000, 500_000, None),
        ModelUsage("small", 3, 2_000, 1_000, 0.25),
    ]
    prices = {"big": Price(2.0, 8.0), "small": Price(100.0, 100.0)}
    table = cost_table(usage, prices)
    big, small = table.rows
    assert (big.cost, big.source) == (pytest.approx(2.0 + 4.0), "price table")
    assert (small.cost, small.source) == (0.25, "recorded")  # never re-priced
    assert table.cost == pytest.approx(6.25)
    assert (table.input_tokens, table.output_tokens) == (1_002_000, 501_000)
    assert big.input_width + big.output_width == pytest.approx(WIDTH)  # the most tokens: full width
    assert small.input_width == pytest.approx(WIDTH * 2_000 / 1_500_000, abs=0.01)


def test_a_model_without_a_price_has_an_unknown_cost_and_so_has_the_total() -> None:
    usage = [ModelUsage("known", 1, 10, 10, None), ModelUsage("other", 1, 10, 10, None)]
    table = cost_table(usage, {"known": Price(1.0, 1.0)})
    assert [r.source for r in table.rows] == ["price table", ""]
    assert table.rows[1].cost is None and table.cost is None
    unpriced = cost_table(usage, None)
    assert not unpriced.priced and all(r.cost is None for r in unpriced.rows)


def test_the_time_bar_splits_the_span_into_its_kinds_and_the_rest() -> None:
    spent = Spent(model=3.0, tools=1.0, waits=4.0, total=10.0)
    parts = {s.kind: s for s in time_split(spent)}
    assert list(parts) == ["model", "tools", "waits", "other"]
    assert parts["other"].seconds == pytest.approx(2.0)
    assert parts["model"].width == pytest.approx(WIDTH * 0.3)
    assert parts["tools"].left == pytest.approx(parts["model"].width)
    assert sum(s.width for s in parts.values()) == pytest.approx(WIDTH, abs=0.05)
    assert parts["waits"].title == "sleeping and waiting: 4.00 s"
    no_model = {s.kind for s in time_split(Spent(tools=1.0, total=1.0))}
    assert no_model == {"tools"}
    assert time_split(Spent()) == []


async def test_the_run_page_prices_usage_by_the_table_it_was_given(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cost.db"
    await seed(url)
    async with client(url, prices={"test-model-1": Price(1000.0, 2000.0)}) as c:
        page = (await c.get("/run", params={"id": "agent-1"})).text
    section = page.split('<section class="usage cost">', 1)[1].split("</section>", 1)[0]
    # 120 input and 30 output tokens at 1000 and 2000 a million: 0.12 + 0.06
    assert '<td class="cost" title="price table">0.1800' in section
    assert "<title>test-model-1: 120 input tokens</title>" in section
    split = page.split('<section class="time-split">', 1)[1].split("</section>", 1)[0]
    assert "<title>model calls: " in split and "<title>tools: " in split


@sw.policy
async def odd_usage(kind: str) -> sw.Message:
    """A reply whose recorded usage is not counts: too large for a float, or negative."""
    usage = {"input_tokens": 10**400 if kind == "huge" else -5, "output_tokens": 3}
    cost = 10**400 if kind == "huge" else 0.5
    return sw.Message.assistant("hi").replace(meta={"model": "m", "usage": usage, "cost": cost})


async def test_usage_that_is_not_a_count_is_left_out_and_the_page_still_shows(
    sqlite_url: str,
) -> None:
    async with sw.Runner(sqlite_url, policies=[odd_usage]) as r:
        for kind in ("huge", "negative"):
            await r.run(odd_usage, kind, run_id=f"usage-{kind}")
    async with client(sqlite_url, prices={"m": Price(1.0, 1.0)}) as c:
        for kind, cost in (("huge", "0.0000"), ("negative", "0.5000")):
            page = await c.get("/run", params={"id": f"usage-{kind}"})
            assert page.status_code == 200, page.text[-600:]
            row = re.search(r'<td class="model">m</td>(.*?)</tr>', page.text, re.S)
            assert row, page.text
            cells = re.findall(r"<td[^>]*>([^<]*)", row.group(1))
            assert cells[:4] == ["1", "0", "3", "3"]  # calls, input, output, total
            assert cells[4].startswith(cost)  # the huge cost is no cost: priced instead
