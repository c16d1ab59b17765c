"""OpenTelemetry tracing for Stalwart runs (the ``stalwart[otel]`` extra).

``Runner(url, hooks=[Tracing()])`` traces every run the runner executes:
run > step > model call / tool call, model calls with the GenAI semantic
conventions, and one trace per run across processes (docs/tracing.md).
Importing this package imports OpenTelemetry; ``import stalwart`` never does.
"""

from __future__ import annotations

try:
    from .tracing import Tracing
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise ImportError(
        "stalwart.otel needs OpenTelemetry, which is not installed: pip install 'stalwart[otel]'"
    ) from exc

__all__ = ["Tracing"]
