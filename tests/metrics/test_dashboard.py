"""examples/grafana/stalwart-dashboard.json asks only for what workers serve:
every query parses as PromQL, and every metric and label it names is in a
real scrape of a worker that ran models, waits and failures."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.llm.conftest import Replay, replay
from tests.llm.weather import ask

import stalwart as sw
from stalwart import llm
from stalwart.core.message import Message
from stalwart.metrics import Metrics

promql = pytest.importorskip("promql_parser")

__all__ = ["replay"]  # the fixture, used here

DASHBOARD = Path(__file__).parents[2] / "examples" / "grafana" / "stalwart-dashboard.json"
# Labels Prometheus adds to every series it scrapes.
SCRAPE_LABELS = {"instance", "job"}


@sw.policy
async def step_one(x: int) -> int:
    return x + 1


@sw.policy
async def steps(x: int) -> int:
    return await step_one(await step_one(x))


@sw.policy
async def fails(x: int) -> int:
    raise ValueError(f"no {x}")


@sw.policy
async def waits(ctx: sw.Context) -> str:
    await step_one(0)  # replayed when the run resumes
    return str(await ctx.wait_for("go"))


async def scraped_series(replay: Callable[..., Replay], url: str) -> dict[str, set[str]]:
    """Metric name -> its label names, from a real scrape after a workload."""
    r = replay("openai_chat_text.json")
    metrics = Metrics(prices={"gpt-4o": llm.Price(2.5, 10.0)})
    async with sw.Runner(
        url, hooks=[metrics], serving=True, policies=[steps, fails, waits, step_one]
    ) as runner:
        server = metrics.serve(runner, 0)
        try:
            assert await runner.run(steps, 1) == 3
            with pytest.raises(ValueError, match="no 1"):
                await runner.run(fails, 1)
            # Two wait for a signal; one is answered, and replays its steps as it resumes.
            waiting = [await runner.enqueue(waits) for _ in range(2)]
            for _ in range(300):
                if {await h.status() for h in waiting} == {"suspended"}:
                    break
                await asyncio.sleep(0.1)
            await runner.signal(waiting[0].run_id, "go", "now")
            assert await waiting[0].result(timeout=30) == "now"
            await ask(llm.openai("gpt-4o", client=r.openai()), [Message.user("Hi")], runner=runner)
            await runner.enqueue(steps, 5, delay=3600)  # stays pending: a queue age to report
            scrape = f"http://127.0.0.1:{server.port}/metrics"
            for _ in range(300):
                text = await asyncio.to_thread(
                    lambda: urllib.request.urlopen(scrape, timeout=30).read().decode()
                )
                if "stalwart_runs_waiting_for_signal{" in text and "pending_seconds{" in text:
                    break
                await asyncio.sleep(0.1)
        finally:
            server.close()
    series: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            series.setdefault(sample.name, set()).update(sample.labels)
    return series


def grafana_to_promql(expr: str) -> str:
    """Grafana's variables replaced by values a Prometheus would see."""
    return expr.replace("$__rate_interval", "5m").replace("$policy", ".*")


def selectors_and_groupings(node: Any) -> Iterator[tuple[str, Any]]:
    """("selector", VectorSelector) and ("by", (labels, subtree)) of a parsed expression."""
    if isinstance(node, promql.VectorSelector):
        yield "selector", node
    elif isinstance(node, promql.MatrixSelector):
        yield from selectors_and_groupings(node.vector_selector)
    elif isinstance(node, promql.AggregateExpr):
        if node.modifier is not None:
            yield "by", (list(node.modifier.labels), node.expr)
        yield from selectors_and_groupings(node.expr)
    elif isinstance(node, promql.BinaryExpr):
        yield from selectors_and_groupings(node.lhs)
        yield from selectors_and_groupings(node.rhs)
    elif isinstance(node, promql.Call):
        for arg in node.args:
            yield from selectors_and_groupings(arg)
    elif isinstance(node, promql.ParenExpr | promql.UnaryExpr | promql.SubqueryExpr):
        yield from selectors_and_groupings(node.expr)


def dashboard_queries() -> list[tuple[str, str]]:
    board = json.loads(DASHBOARD.read_text())
    out = [
        (f"panel {p['title']!r} {t['refId']}", t["expr"])
        for p in board["panels"]
        for t in p["targets"]
    ]
    assert len(out) >= 10
    return out


async def test_every_metric_and_label_the_dashboard_asks_for_is_served(
    replay: Callable[..., Replay], sqlite_url: str
) -> None:
    series = await scraped_series(replay, sqlite_url)
    for where, expr in dashboard_queries():
        tree = promql.parse(grafana_to_promql(expr))  # raises on a query Prometheus refuses
        for kind, found in selectors_and_groupings(tree):
            if kind == "selector":
                assert found.name in series, f"{where}: {found.name} is never served"
                used = {m.name for m in found.matchers.matchers}
                assert used <= series[found.name], (
                    f"{where}: {found.name} has no label {used - series[found.name]}"
                )
            else:
                labels, subtree = found
                below = set(SCRAPE_LABELS)
                for k, sel in selectors_and_groupings(subtree):
                    if k == "selector":
                        below |= series.get(sel.name, set())
                assert set(labels) <= below, f"{where}: groups by {labels}, not all are labels"


async def test_the_policy_variable_lists_a_served_label(
    replay: Callable[..., Replay], sqlite_url: str
) -> None:
    series = await scraped_series(replay, sqlite_url)
    board = json.loads(DASHBOARD.read_text())
    (policy,) = [v for v in board["templating"]["list"] if v["name"] == "policy"]
    name, label = re.fullmatch(r"label_values\((\w+), (\w+)\)", policy["query"]).groups()  # type: ignore[union-attr]
    assert label in series[name]
