"""Trace a small agent with OpenTelemetry: run > step > model call / tool call.

    pip install 'stalwart[otel]'
    python examples/otel_tracing.py                      # spans printed to the console
    python examples/otel_tracing.py --otlp http://127.0.0.1:4318/v1/traces

With ``--otlp`` the spans go to an OpenTelemetry collector (Jaeger, Tempo,
Honeycomb's, ...) over OTLP/HTTP; if nothing listens there, the exporter
says so on stderr and the example still finishes. The model is scripted, so
no API key is needed; its replies carry the usage a real provider records,
which the ``chat`` spans report with the GenAI semantic conventions.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)

import stalwart as sw
from stalwart.core.message import Message
from stalwart.otel import Tracing
from stalwart.testing import ScriptedLLM, call


@sw.policy
async def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def reply(text_or_call: str | Message) -> Message:
    """A scripted reply with the usage and model a provider would record."""
    m = Message.assistant(text_or_call) if isinstance(text_or_call, str) else text_or_call
    meta = {"usage": {"input_tokens": 40, "output_tokens": 8}, "model": "demo-model"}
    return Message(m.role, m.actor, m.parts, m.action_call, None, m.id, meta)


model = ScriptedLLM(
    [reply(call("weather", city="Paris")), reply("It is sunny in Paris.")],
    name="demo:demo-model",
)


@sw.policy
async def forecaster(ctx: sw.Context, question: str) -> str:
    """Ask the model, run the tool it calls, and ask again."""
    conversation = [Message.user(question)]
    conversation += await ctx.call(model, observations=conversation, options=[weather])
    answer = await ctx.call(model, observations=conversation)
    return str(answer[0].text)


def exporter(otlp: str | None) -> SpanExporter:
    if otlp is None:
        return ConsoleSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=otlp, timeout=2)


async def main(otlp: str | None) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "stalwart-example"}))
    out = exporter(otlp)
    provider.add_span_processor(
        SimpleSpanProcessor(out) if otlp is None else BatchSpanProcessor(out)
    )
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'runs.db'}"
        async with sw.Runner(url, hooks=[Tracing(provider)]) as runner:
            print(await runner.run(forecaster, "What is the weather in Paris?"))
    provider.shutdown()  # flush what is batched; a collector that is down is only reported


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--otlp", help="an OTLP/HTTP traces endpoint, e.g. http://127.0.0.1:4318/v1/traces"
    )
    asyncio.run(main(parser.parse_args().otlp))
