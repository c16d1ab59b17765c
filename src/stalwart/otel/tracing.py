"""Spans for runs, steps, model calls and tool calls, as one hook.

:class:`Tracing` is a :class:`~stalwart.core.events.Hook`; nothing else in
Stalwart knows OpenTelemetry exists, so a runner without it imports nothing
and pays nothing. The shape of a trace:

* ``start {policy}``: ended at once when a run is created, in the creating
  code's context (a user's span, or the step that spawned a child run). Its
  context is what the run keeps in the store (``RunRecord.trace``).
* ``run {policy}``: one per execution of the run (first, after a
  suspension, after a crash, on any worker), a child of the stored context,
  so every execution of a run is in one trace.
* Under it, one span per step: ``chat {model}`` for a model call (a step
  given ``observations``, GenAI semantic conventions), ``execute_tool
  {name}`` for a call the engine dispatched from a model's reply, ``step
  {name}`` otherwise. A step answered from the ledger is a ``step {name}``
  span marked ``stalwart.step.replayed``: never a new model-call span, since
  no model was called.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextvars import Token
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ..core.events import CallInfo, Hook, RunInfo

__all__ = ["Tracing"]

_W3C = TraceContextTextMapPropagator()

# Attribute names: the GenAI semantic conventions' for model and tool calls,
# Stalwart's own (stalwart.*) for what only a durable run has.
RUN_ID = "stalwart.run.id"
STEP_KEY = "stalwart.step.key"
STEP_NAME = "stalwart.step.name"
ATTEMPT = "stalwart.step.attempt"
REPLAYED = "stalwart.step.replayed"


@dataclass(slots=True)
class _Open:
    """A span this hook started and has yet to end, and the context token
    that made it current (None when it was never made current)."""

    span: Span
    token: Token[otel_context.Context] | None
    model: bool = False


class Tracing(Hook):
    """Trace runs with OpenTelemetry: ``Runner(url, hooks=[Tracing()])``.

    ``tracer_provider``: where spans go (default: the global provider, which
    the OpenTelemetry SDK or its auto-configuration sets up).
    ``replayed_steps``: emit a short span for each step answered from the
    ledger (on by default; off keeps a resumed run's trace to its live work).
    Message content is never put on spans: prompts and replies stay in the
    ledger, where access to them is the store's to control.
    """

    def __init__(self, tracer_provider: Any = None, *, replayed_steps: bool = True) -> None:
        from .. import __version__

        self._tracer: Tracer = trace.get_tracer(
            "stalwart", __version__, tracer_provider=tracer_provider
        )
        self.replayed_steps = replayed_steps
        self._runs: dict[str, _Open] = {}
        self._steps: dict[tuple[str, str], _Open] = {}

    # -- runs ------------------------------------------------------------------
    def start_trace(self, run_id: str, policy: str) -> str | None:
        span = self._tracer.start_span(
            f"start {policy}",
            kind=SpanKind.PRODUCER,
            attributes={RUN_ID: run_id, "stalwart.run.policy": policy},
        )
        span.end()
        carrier: dict[str, str] = {}
        _W3C.inject(carrier, context=trace.set_span_in_context(span))
        return json.dumps(carrier, sort_keys=True) if carrier else None

    async def on_run_start(self, run: RunInfo) -> None:
        parent = _extract(run.trace)
        attributes: dict[str, Any] = {
            RUN_ID: run.run_id,
            "stalwart.run.policy": run.policy,
            "stalwart.run.execution": run.execution,
            "stalwart.run.resumed": run.execution > 1,
            "stalwart.run.queue": run.queue,
        }
        if run.parent_id is not None:
            attributes["stalwart.run.parent_id"] = run.parent_id
        span = self._tracer.start_span(
            f"run {run.policy}", context=parent, kind=SpanKind.CONSUMER, attributes=attributes
        )
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        self._runs[run.run_id] = _Open(span, token)

    async def on_run_end(self, run: RunInfo, status: str, error: BaseException | None) -> None:
        # Steps still open stopped without an outcome: the run suspended,
        # was cancelled, or lost its store or its lease.
        for key in [k for k in self._steps if k[0] == run.run_id]:
            step = self._steps.pop(key)
            step.span.set_attribute("stalwart.step.outcome", status)
            step.span.end()
        opened = self._runs.pop(run.run_id, None)
        if opened is None:
            return
        span = opened.span
        span.set_attribute("stalwart.run.status", status)
        if status in ("failed", "cancelled"):
            _fail(span, error, status)
        if opened.token is not None:
            otel_context.detach(opened.token)
        span.end()

    # -- steps -----------------------------------------------------------------
    async def before_call(self, call: CallInfo) -> None:
        if not call.key:
            return  # the root policy: the run span stands for it
        model = "observations" in call.arguments
        tool = "#" in call.key.rsplit(".", 1)[-1]
        attributes: dict[str, Any] = {
            RUN_ID: call.run_id,
            STEP_KEY: call.key,
            STEP_NAME: call.name,
            ATTEMPT: 1,
            REPLAYED: False,
        }
        if model:
            name, kind = f"chat {call.name}", SpanKind.CLIENT
            attributes["gen_ai.operation.name"] = "chat"
            provider, _, requested = call.name.partition(":")
            if requested:  # a provider policy's default name: "openai:gpt-4o"
                attributes["gen_ai.provider.name"] = provider
                attributes["gen_ai.system"] = provider
                attributes["gen_ai.request.model"] = requested
        elif tool:
            name, kind = f"execute_tool {call.name}", SpanKind.INTERNAL
            attributes["gen_ai.operation.name"] = "execute_tool"
            attributes["gen_ai.tool.name"] = call.name
        else:
            name, kind = f"step {call.name}", SpanKind.INTERNAL
        span = self._tracer.start_span(name, kind=kind, attributes=attributes)
        token = otel_context.attach(trace.set_span_in_context(span))
        self._steps[(call.run_id, call.key)] = _Open(span, token, model)

    async def on_retry(self, call: CallInfo, attempt: int, error: BaseException) -> None:
        opened = self._steps.get((call.run_id, call.key))
        if opened is not None:
            opened.span.set_attribute(ATTEMPT, attempt)
            opened.span.add_event(
                "retry", {"stalwart.step.attempt": attempt, "error.type": type(error).__name__}
            )

    async def after_call(self, call: CallInfo, result: Any) -> None:
        opened = self._close(call)
        if opened is None:
            return
        if opened.model:
            _describe_reply(opened.span, result)
        opened.span.end()

    async def on_error(self, call: CallInfo, error: BaseException) -> None:
        opened = self._close(call)
        if opened is not None:
            _fail(opened.span, error, "failed")
            opened.span.end()

    async def on_replayed(self, call: CallInfo, error: BaseException | None) -> None:
        if not self.replayed_steps or not call.key:
            return
        span = self._tracer.start_span(
            f"step {call.name}",
            attributes={
                RUN_ID: call.run_id,
                STEP_KEY: call.key,
                STEP_NAME: call.name,
                REPLAYED: True,
            },
        )
        if error is not None:
            _fail(span, error, "failed")
        span.end()

    def _close(self, call: CallInfo) -> _Open | None:
        opened = self._steps.pop((call.run_id, call.key), None)
        if opened is not None and opened.token is not None:
            otel_context.detach(opened.token)
        return opened


def _extract(stored: str | None) -> otel_context.Context | None:
    """The context a run keeps, read back; None (the current context) when
    it has none or it cannot be read: a bad value loses the link, never the run."""
    if not stored:
        return None
    try:
        carrier = json.loads(stored)
    except ValueError:
        return None
    if not isinstance(carrier, dict):
        return None
    return _W3C.extract({k: v for k, v in carrier.items() if isinstance(v, str)})


def _fail(span: Span, error: BaseException | None, status: str) -> None:
    kind = type(error).__name__ if error is not None else status
    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, f"{kind}: {error}" if error is not None else status))
    if error is not None:
        span.record_exception(error)


def _describe_reply(span: Span, result: Any) -> None:
    """GenAI response attributes, from what the reply's messages carry in
    ``meta`` (usage, model, finish reason): data read, never code run."""
    if not isinstance(result, list | tuple):
        return
    finish: list[str] = []
    for message in result:
        meta = getattr(message, "meta", None)
        if not isinstance(meta, Mapping):
            continue
        usage = meta.get("usage")
        if isinstance(usage, Mapping):
            for field, attr in (
                ("input_tokens", "gen_ai.usage.input_tokens"),
                ("output_tokens", "gen_ai.usage.output_tokens"),
            ):
                value = usage.get(field)
                if isinstance(value, int) and not isinstance(value, bool):
                    span.set_attribute(attr, value)
        model = meta.get("model")
        if isinstance(model, str):
            span.set_attribute("gen_ai.request.model", model)
            response_model = meta.get("response_model", model)
            if isinstance(response_model, str):
                span.set_attribute("gen_ai.response.model", response_model)
            span.update_name(f"chat {model}")
        reason = meta.get("finish_reason")
        if isinstance(reason, str) and reason not in finish:
            finish.append(reason)
    if finish:
        span.set_attribute("gen_ai.response.finish_reasons", finish)
