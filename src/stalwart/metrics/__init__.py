"""Metrics of a worker's runs (the ``stalwart[metrics]`` extra).

``Metrics()`` is a hook: pass it to ``Runner(url, hooks=[metrics])`` and it
counts what runs do in this process (and what their model calls cost, given
``prices=``); ``metrics.serve(runner, port)`` exposes those counts, and the
store's queue depths read when scraped, at ``http://HOST:PORT/metrics``;
``meter_provider=`` records them through OpenTelemetry too
(docs/metrics.md). Importing this package imports ``prometheus_client``;
``import stalwart`` never does.
"""

from __future__ import annotations

try:
    from .hook import Metrics
    from .prometheus import MetricsServer
    from .readings import Readings
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise ImportError(
        "stalwart.metrics needs prometheus_client, which is not installed: "
        "pip install 'stalwart[metrics]'"
    ) from exc

__all__ = ["Metrics", "MetricsServer", "Readings"]
