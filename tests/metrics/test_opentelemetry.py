"""Metrics(meter_provider=...): the same counts through OpenTelemetry's
metrics API, read back with the OTel SDK's own in-memory reader."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from tests.llm.conftest import Replay, replay
from tests.llm.weather import ask

import stalwart as sw
from stalwart import llm
from stalwart.core.message import Message
from stalwart.metrics import Metrics

pytest.importorskip("opentelemetry.sdk")
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

__all__ = ["replay"]  # the fixture, used here


def points(reader: InMemoryMetricReader) -> dict[tuple[str, frozenset[tuple[str, Any]]], Any]:
    data = reader.get_metrics_data()
    assert data is not None
    out: dict[tuple[str, frozenset[tuple[str, Any]]], Any] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            assert scope.scope.name == "stalwart"
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    attrs = frozenset((point.attributes or {}).items())
                    out[(metric.name, attrs)] = point
    return out


@sw.policy
async def add_one(x: int) -> int:
    return x + 1


@sw.policy
async def count(n: int) -> int:
    total = 0
    for _ in range(n):
        total = await add_one(total)
    return total


async def test_runs_and_steps_are_counted_through_opentelemetry(sqlite_url: str) -> None:
    reader = InMemoryMetricReader()
    metrics = Metrics(meter_provider=MeterProvider(metric_readers=[reader]))
    async with sw.Runner(sqlite_url, hooks=[metrics]) as runner:
        assert await runner.run(count, 3) == 3
    got = points(reader)
    finished = frozenset({("policy", "count"), ("queue", "default"), ("status", "succeeded")})
    assert got[("stalwart.runs.finished", finished)].value == 1
    steps = got[
        ("stalwart.step.duration", frozenset({("policy", "count"), ("outcome", "succeeded")}))
    ]
    assert steps.count == 3
    # Prometheus counted the same, from the same hook.
    from prometheus_client import generate_latest

    assert (
        'stalwart_runs_finished_total{policy="count",queue="default",status="succeeded"} 1.0'
        in generate_latest(metrics.registry).decode()
    )


async def test_tokens_and_cost_reach_opentelemetry_by_model(
    replay: Callable[..., Replay], sqlite_url: str
) -> None:
    r = replay("openai_chat_text.json")
    reader = InMemoryMetricReader()
    metrics = Metrics(
        prices={"gpt-4o": llm.Price(2.5, 10.0)},
        meter_provider=MeterProvider(metric_readers=[reader]),
    )
    async with sw.Runner(sqlite_url, hooks=[metrics]) as runner:
        await ask(llm.openai("gpt-4o", client=r.openai()), [Message.user("Hi")], runner=runner)
    got = points(reader)
    tokens = "stalwart.model.tokens"
    assert got[(tokens, frozenset({("model", "gpt-4o"), ("kind", "input")}))].value == 128
    assert got[(tokens, frozenset({("model", "gpt-4o"), ("kind", "output")}))].value == 15
    cost = got[("stalwart.model.cost", frozenset({("model", "gpt-4o")}))].value
    assert cost == pytest.approx((128 * 2.5 + 15 * 10.0) / 1e6)
