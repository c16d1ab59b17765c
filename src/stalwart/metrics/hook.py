"""The hook that measures what a runner's runs do, and the outputs it feeds.

:class:`Metrics` is a :class:`~stalwart.core.events.Hook`: it turns the
runner's events (runs begun and ended, steps executed or replayed, model
replies) into measurements, and hands each to its outputs: always a
Prometheus registry (:mod:`.prometheus`), and OpenTelemetry's metrics API
when given a meter provider (:mod:`.opentelemetry`). What the runners it
watches count themselves (leases; how long their store could not be
reached) the outputs read when they are read (:mod:`.readings`). Policy, queue and model
names are data: they become label values (attributes), which the outputs
escape. Counters start from zero in each process; the store holds the truth.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..core.errors import StaleLeaseError, StoreUnavailable
from ..core.events import CallInfo, Hook, RunInfo
from ..llm import Price, Usage
from .prometheus import MetricsServer, PrometheusOutput
from .readings import Readings, read_runners

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from prometheus_client import CollectorRegistry

    from ..runner import Runner

__all__ = ["Metrics", "Output"]

_FINISHED = ("succeeded", "failed", "cancelled")


class Output(Protocol):
    """Where measurements go: one method per kind of measurement."""

    def run_started(self, policy: str, queue: str) -> None: ...
    def run_finished(self, policy: str, queue: str, status: str) -> None: ...
    def run_stopped(self, policy: str, queue: str, reason: str) -> None: ...
    def step(self, policy: str, outcome: str, seconds: float) -> None: ...
    def step_replayed(self, policy: str) -> None: ...
    def tokens(self, model: str, kind: str, count: int) -> None: ...
    def cost(self, model: str, amount: float) -> None: ...


class Metrics(Hook):
    """Metrics of the runs a runner executes (docs/metrics.md).

    ``Runner(url, hooks=[metrics])`` installs it; :meth:`serve` exposes the
    Prometheus endpoint. ``registry``: where its Prometheus metrics live (a
    new one by default, so two runners in one process never share
    counters). ``prices``: model name -> :class:`~stalwart.llm.Price`, to
    count what model calls cost (models not in it count tokens only).
    ``meter_provider``: an OpenTelemetry ``MeterProvider`` to record the
    same counters and histograms through too (the ``stalwart[otel]`` extra).
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        prices: Mapping[str, Price] | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        self.prices: dict[str, Price] = dict(prices or {})
        for model, price in self.prices.items():
            if not isinstance(price, Price):
                raise TypeError(
                    f"Metrics(prices=...)[{model!r}]: expected a stalwart.llm.Price, "
                    f"got {type(price).__name__}"
                )
        #: The runners whose leases and store outages it reports (:meth:`watch`).
        self._watched: list[Runner] = []
        self._prometheus = PrometheusOutput(registry, self.read)
        self._outputs: list[Output] = [self._prometheus]
        if meter_provider is not None:
            from .opentelemetry import OpenTelemetryOutput

            self._outputs.append(OpenTelemetryOutput(meter_provider, self.read))
        #: Run id -> (policy, queue) of the executions live here.
        self._runs: dict[str, tuple[str, str]] = {}
        #: Run id -> step key -> when its live call began (monotonic).
        self._began: dict[str, dict[str, float]] = {}

    @property
    def registry(self) -> CollectorRegistry:
        """The Prometheus registry its metrics live in."""
        return self._prometheus.registry

    def watch(self, runner: Runner) -> None:
        """Report ``runner``'s leases (taken, renewed, lost) and how long its
        store could not be reached, read whenever the metrics are read
        (:meth:`serve` watches the runner it serves; call this for a runner
        measured through OpenTelemetry only). Watching costs the runner
        nothing: it counts these anyway."""
        if all(r is not runner for r in self._watched):
            self._watched.append(runner)

    def read(self) -> Readings:
        """The watched runners' lease counts and store outages now."""
        return read_runners(self._watched)

    # -- the hook ------------------------------------------------------------
    async def on_run_start(self, run: RunInfo) -> None:
        self._runs[run.run_id] = (run.policy, run.queue)
        for out in self._outputs:
            out.run_started(run.policy, run.queue)

    async def on_run_end(self, run: RunInfo, status: str, error: BaseException | None) -> None:
        self._runs.pop(run.run_id, None)
        self._began.pop(run.run_id, None)  # calls that stopped without an outcome
        if status in _FINISHED:
            for out in self._outputs:
                out.run_finished(run.policy, run.queue, status)
            return
        if status == "lost":
            if isinstance(error, StoreUnavailable):
                status = "store_unavailable"
            elif error is None or isinstance(error, StaleLeaseError):
                status = "lease_lost"
            else:
                status = "store_error"
        for out in self._outputs:
            out.run_stopped(run.policy, run.queue, status)

    # A call without a key is the run's root policy: the run metrics count it.
    async def before_call(self, call: CallInfo) -> None:
        if not call.key:
            return
        self._began.setdefault(call.run_id, {})[call.key] = time.monotonic()

    async def after_call(self, call: CallInfo, result: Any) -> None:
        if not call.key:
            return
        self._observe(call, "succeeded")
        if isinstance(result, list | tuple):
            self._count_usage(result)

    async def on_error(self, call: CallInfo, error: BaseException) -> None:
        if not call.key:
            return
        self._observe(call, "failed")

    async def on_replayed(self, call: CallInfo, error: BaseException | None) -> None:
        if not call.key:
            return
        policy = self._policy(call.run_id)
        for out in self._outputs:
            out.step_replayed(policy)

    def _policy(self, run_id: str) -> str:
        known = self._runs.get(run_id)
        return "" if known is None else known[0]

    def _observe(self, call: CallInfo, outcome: str) -> None:
        began = self._began.get(call.run_id, {}).pop(call.key, None)
        seconds = 0.0 if began is None else time.monotonic() - began
        policy = self._policy(call.run_id)
        for out in self._outputs:
            out.step(policy, outcome, seconds)

    def _count_usage(self, messages: Iterable[Any]) -> None:
        """Tokens, and their cost where the model has a price, from what a
        model call's reply messages carry in ``meta`` (``model``,
        ``usage``): data read, never code run."""
        for message in messages:
            meta = getattr(message, "meta", None)
            if not isinstance(meta, Mapping):
                continue
            raw, model = meta.get("usage"), meta.get("model")
            if not isinstance(raw, Mapping) or not isinstance(model, str):
                continue
            read = Usage.from_dict(raw)
            usage = Usage(max(0, read.input_tokens), max(0, read.output_tokens))
            for kind, n in (("input", usage.input_tokens), ("output", usage.output_tokens)):
                if n > 0:
                    for out in self._outputs:
                        out.tokens(model, kind, n)
            price = self.prices.get(model)
            if price is not None and usage.total_tokens > 0:
                amount = price.cost(usage)
                for out in self._outputs:
                    out.cost(model, amount)

    # -- exposing ------------------------------------------------------------
    def serve(self, runner: Runner, port: int, host: str = "127.0.0.1") -> MetricsServer:
        """Serve ``/metrics`` on ``host:port`` (0: any free port) from a
        thread, with the store's queues read on each scrape. Call it from
        the event loop the runner runs in; ``close()`` the server after."""
        self.watch(runner)
        return self._prometheus.serve(runner.store, port, host)
