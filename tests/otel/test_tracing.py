"""Tracing with the SDK's in-memory exporter: the span tree a user sees, the
GenAI attributes of a model call, replays that call no model, and one trace
per run across executions, workers and a crash."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.otel.app import crashy, lookup, model

import stalwart as sw
from stalwart.core.message import Message
from stalwart.otel import Tracing

ROOT = Path(__file__).resolve().parents[2]


def traced() -> tuple[Tracing, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Tracing(provider), exporter


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    ctx = span.get_span_context()
    assert ctx is not None
    return ctx.span_id


def trace_id(span: ReadableSpan) -> int:
    ctx = span.get_span_context()
    assert ctx is not None
    return ctx.trace_id


@sw.policy
async def agent(ctx: sw.Context, question: str) -> str:
    turn = await ctx.call(model, observations=[Message.user(question)], options=[lookup])
    final = await ctx.call(model, observations=[Message.user(question), *turn])
    return str(final[0].text)


async def test_run_step_model_and_tool_spans_in_one_tree(sqlite_url: str) -> None:
    tracing, exporter = traced()
    async with sw.Runner(sqlite_url, hooks=[tracing]) as runner:
        assert await runner.run(agent, "weather?") == "done"
    spans = exporter.get_finished_spans()
    start, run = by_name(spans, "start agent")[0], by_name(spans, "run agent")[0]
    chats = by_name(spans, "chat gpt-test")
    tool = by_name(spans, "execute_tool lookup")
    assert len(chats) == 2 and len(tool) == 1
    assert {trace_id(s) for s in spans} == {trace_id(start)}  # one trace
    assert parent_of(run) == span_id(start)
    assert all(parent_of(s) == span_id(run) for s in [*chats, *tool])
    first = chats[0].attributes or {}
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.provider.name"] == "openai"
    assert first["gen_ai.request.model"] == "gpt-test"
    assert first["gen_ai.response.model"] == "gpt-test"
    assert first["gen_ai.usage.input_tokens"] == 12
    assert first["gen_ai.usage.output_tokens"] == 5
    assert first["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert first["stalwart.step.replayed"] is False
    assert first["stalwart.step.attempt"] == 1
    assert first["stalwart.run.id"] == (run.attributes or {})["stalwart.run.id"]
    assert (tool[0].attributes or {})["gen_ai.tool.name"] == "lookup"
    assert (run.attributes or {})["stalwart.run.status"] == "succeeded"


async def test_a_retried_step_says_its_attempt_and_a_failure_is_an_error(sqlite_url: str) -> None:
    tries: list[int] = []

    @sw.policy(retries=2, backoff=0)
    async def flaky() -> str:
        tries.append(1)
        if len(tries) < 2:
            raise ConnectionError("blip")
        return "ok"

    @sw.policy
    async def broken() -> None:
        raise ValueError("no")

    @sw.policy
    async def root(ctx: sw.Context) -> str:
        with contextlib.suppress(ValueError):
            await ctx.call(broken)
        return await ctx.call(flaky)

    tracing, exporter = traced()
    async with sw.Runner(sqlite_url, hooks=[tracing]) as runner:
        assert await runner.run(root) == "ok"
    spans = exporter.get_finished_spans()
    retried = by_name(spans, "step flaky")[0]
    assert (retried.attributes or {})["stalwart.step.attempt"] == 2
    assert [e.name for e in retried.events] == ["retry"]
    failed = by_name(spans, "step broken")[0]
    assert not failed.status.is_ok and (failed.attributes or {})["error.type"] == "ValueError"


@sw.policy
async def asks(ctx: sw.Context) -> str:
    await ctx.call(model, observations=[Message.user("hi")])
    answer = await ctx.wait_for("go")
    return f"got {answer}"


async def test_a_resumed_run_joins_its_trace_and_replays_no_model_call(sqlite_url: str) -> None:
    tracing, exporter = traced()
    async with sw.Runner(sqlite_url, hooks=[tracing]) as runner:
        handle = await runner.start(asks, run_id="r1")
        while (await runner.get_run("r1")).status != "suspended":
            await asyncio.sleep(0.01)
        await runner.signal("r1", "go", 7)
        assert await handle.result() == "got 7"
    spans = exporter.get_finished_spans()
    start = by_name(spans, "start asks")[0]
    runs = by_name(spans, "run asks")
    assert len(runs) == 2
    assert all(parent_of(r) == span_id(start) and trace_id(r) == trace_id(start) for r in runs)
    first, second = sorted(runs, key=lambda r: (r.attributes or {})["stalwart.run.execution"])
    assert (first.attributes or {})["stalwart.run.status"] == "suspended"
    assert (second.attributes or {})["stalwart.run.resumed"] is True
    assert len(by_name(spans, "chat gpt-test")) == 1  # the replay called no model
    replayed = by_name(spans, "step openai:gpt-test")
    assert len(replayed) == 1 and (replayed[0].attributes or {})["stalwart.step.replayed"] is True
    assert "gen_ai.operation.name" not in (replayed[0].attributes or {})
    assert parent_of(replayed[0]) == span_id(second)


@sw.policy
async def child(n: int) -> int:
    return n * 2


@sw.policy
async def parent(ctx: sw.Context) -> int:
    kid = await ctx.spawn(child, 21, queue="other")
    return int(await kid.result())


async def test_a_child_run_on_another_worker_joins_the_parents_trace(sqlite_url: str) -> None:
    url = sqlite_url
    mine, mine_spans = traced()
    theirs, their_spans = traced()
    worker = sw.Runner(url, hooks=[theirs], policies=[child], queues=["other"], poll_interval=0.05)
    stop = asyncio.Event()
    serving = asyncio.create_task(worker.serve(stop))
    try:
        async with sw.Runner(url, hooks=[mine], poll_interval=0.05) as runner:
            assert await asyncio.wait_for(runner.run(parent), 20) == 42
    finally:
        stop.set()
        await serving
    parent_runs = by_name(mine_spans.get_finished_spans(), "run parent")
    assert len(parent_runs) >= 1
    assert by_name(mine_spans.get_finished_spans(), "run child") == []  # not executed here
    spawned = by_name(mine_spans.get_finished_spans(), "start child")[0]
    assert parent_of(spawned) == span_id(parent_runs[0])  # spawned inside the parent's run
    child_run = by_name(their_spans.get_finished_spans(), "run child")[0]
    assert trace_id(child_run) == trace_id(parent_runs[0])
    assert parent_of(child_run) == span_id(spawned)


def test_a_run_killed_and_resumed_in_another_process_keeps_its_trace(tmp_path: Path) -> None:
    db, spans_file, marker = tmp_path / "a.db", tmp_path / "spans.jsonl", tmp_path / "ready"
    url = f"sqlite:///{db}"
    env = {**os.environ, "CRASH_MARKER": str(marker), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.otel.crash_worker", url, str(spans_file)], cwd=ROOT, env=env
    )
    try:
        deadline = time.monotonic() + 20
        while not marker.exists():
            assert proc.poll() is None, "the first process ended early"
            assert time.monotonic() < deadline, "the first process never reached its hang"
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    before = [json.loads(line) for line in spans_file.read_text().splitlines()]
    assert {s["name"] for s in before} == {"start crashy", "chat gpt-test"}
    (trace,) = {s["trace_id"] for s in before}
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT trace FROM runs WHERE id = 'crashy'").fetchone()[0]
    assert f"{trace:032x}" in json.loads(stored)["traceparent"]

    async def resume() -> tuple[Any, tuple[ReadableSpan, ...]]:
        tracing, exporter = traced()
        async with sw.Runner(url, hooks=[tracing], policies=[crashy]) as runner:
            await runner.recover()
            return await asyncio.wait_for(
                runner.outcome("crashy"), 20
            ), exporter.get_finished_spans()

    result, after = asyncio.run(resume())
    assert result == "done / resumed"
    run = by_name(after, "run crashy")[0]
    assert trace_id(run) == trace and (run.attributes or {})["stalwart.run.resumed"] is True
    assert by_name(after, "chat gpt-test") == []  # paid for once, in the first process
    assert len(by_name(after, "step openai:gpt-test")) == 1
    assert {trace_id(s) for s in after} == {trace}


def test_stalwart_without_tracing_never_imports_opentelemetry(tmp_path: Path) -> None:
    code = (
        "import asyncio, sys, stalwart as sw\n"
        "@sw.policy\n"
        "async def f() -> int:\n"
        "    return 1\n"
        f"assert sw.Runner('sqlite:///{tmp_path / 'a.db'}').run_sync(f) == 1\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')], 'imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=60)


def test_the_example_runs_offline_to_the_console_and_to_an_absent_collector() -> None:
    example = [sys.executable, "examples/otel_tracing.py"]
    console = subprocess.run(example, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert console.returncode == 0, console.stderr
    assert '"name": "chat demo-model"' in console.stdout and "sunny in Paris" in console.stdout
    absent = [*example, "--otlp", "http://127.0.0.1:9/v1/traces"]  # nothing listens there
    otlp = subprocess.run(absent, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert otlp.returncode == 0 and "It is sunny in Paris." in otlp.stdout
