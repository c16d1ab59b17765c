"""Process A of the crash test: start a traced run, export finished spans to a
file as they end, and hang in the run's second step until killed."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from tests.otel.app import crashy

import stalwart as sw
from stalwart.otel import Tracing


class FileExporter(SpanExporter):
    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self.path, "a") as f:
            for s in spans:
                ctx = s.get_span_context()
                assert ctx is not None
                f.write(json.dumps({"name": s.name, "trace_id": ctx.trace_id}) + "\n")
        return SpanExportResult.SUCCESS


async def main(url: str, spans: str) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileExporter(spans)))
    runner = sw.Runner(url, hooks=[Tracing(provider)])
    await runner.run(crashy, "weather?", run_id="crashy")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
