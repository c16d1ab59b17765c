"""Counters of what a runner's runs do, and the store's queues read when scraped.

Two sources, one registry. :class:`Metrics` is a :class:`Hook`: it counts
executions, steps and model tokens as they happen in this process (the
counters start from zero in each process; the store holds the truth). Its
store collector asks the store for run counts and the oldest due pending
run only when Prometheus scrapes, never on a run's path. Policy, queue and
model names are data: they become label values, which ``prometheus_client``
escapes in the exposition.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..core.errors import StaleLeaseError, StoreUnavailable
from ..core.events import CallInfo, Hook, RunInfo

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from ..runner import Runner
    from ..stores.base import Store

__all__ = ["PENDING_SCAN", "SCRAPE_TIMEOUT", "Metrics", "MetricsServer"]

#: Seconds a scrape waits for the store before it reports ``stalwart_store_up 0``.
SCRAPE_TIMEOUT = 5.0

#: Most pending runs a scrape reads to find the oldest due one per queue (in
#: pages of 500, newest first): past it, the age is that of the oldest among
#: the newest ones read, an underestimate.
PENDING_SCAN = 5000
_PAGE = 500

_FINISHED = ("succeeded", "failed", "cancelled")


class Metrics(Hook):
    """Prometheus metrics of the runs a runner executes (docs/metrics.md).

    ``Runner(url, hooks=[metrics])`` installs it; :meth:`serve` exposes it.
    ``registry``: where its metrics live (a new one by default, so two
    runners in one process never share counters).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = CollectorRegistry() if registry is None else registry
        r = self.registry
        self.runs_started = Counter(
            "stalwart_runs_started",
            "Executions of runs begun in this process (a run's first, and each resumption)",
            ["policy", "queue"],
            registry=r,
        )
        self.runs_finished = Counter(
            "stalwart_runs_finished",
            "Runs finished in this process, by status (succeeded, failed, cancelled)",
            ["policy", "queue", "status"],
            registry=r,
        )
        self.runs_stopped = Counter(
            "stalwart_runs_stopped",
            "Executions that stopped here without finishing the run, by reason "
            "(suspended, released, lease_lost, store_unavailable, store_error)",
            ["policy", "queue", "reason"],
            registry=r,
        )
        self.steps = Histogram(
            "stalwart_step_seconds",
            "Steps executed live in this process (not replayed), by outcome, and how long "
            "each took (retries included)",
            ["policy", "outcome"],
            registry=r,
        )
        self.steps_replayed = Counter(
            "stalwart_steps_replayed",
            "Steps answered from the ledger in this process without executing",
            ["policy"],
            registry=r,
        )
        self.tokens = Counter(
            "stalwart_model_tokens",
            "Model tokens of live model calls in this process, by model and kind "
            "(input, output), read from the usage the reply recorded",
            ["model", "kind"],
            registry=r,
        )
        #: Run id -> (policy, queue) of the executions live here.
        self._runs: dict[str, tuple[str, str]] = {}
        #: Run id -> step key -> when its live call began (monotonic).
        self._began: dict[str, dict[str, float]] = {}
        self._serving: MetricsServer | None = None

    # -- the hook ------------------------------------------------------------
    async def on_run_start(self, run: RunInfo) -> None:
        self._runs[run.run_id] = (run.policy, run.queue)
        self.runs_started.labels(run.policy, run.queue).inc()

    async def on_run_end(self, run: RunInfo, status: str, error: BaseException | None) -> None:
        self._runs.pop(run.run_id, None)
        self._began.pop(run.run_id, None)  # calls that stopped without an outcome
        if status in _FINISHED:
            self.runs_finished.labels(run.policy, run.queue, status).inc()
            return
        if status == "lost":
            if isinstance(error, StoreUnavailable):
                status = "store_unavailable"
            elif error is None or isinstance(error, StaleLeaseError):
                status = "lease_lost"
            else:
                status = "store_error"
        self.runs_stopped.labels(run.policy, run.queue, status).inc()

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
            self._count_tokens(result)

    async def on_error(self, call: CallInfo, error: BaseException) -> None:
        if not call.key:
            return
        self._observe(call, "failed")

    async def on_replayed(self, call: CallInfo, error: BaseException | None) -> None:
        if not call.key:
            return
        self.steps_replayed.labels(self._policy(call.run_id)).inc()

    def _policy(self, run_id: str) -> str:
        known = self._runs.get(run_id)
        return "" if known is None else known[0]

    def _observe(self, call: CallInfo, outcome: str) -> None:
        began = self._began.get(call.run_id, {}).pop(call.key, None)
        seconds = 0.0 if began is None else time.monotonic() - began
        self.steps.labels(self._policy(call.run_id), outcome).observe(seconds)

    def _count_tokens(self, messages: Iterable[Any]) -> None:
        """Tokens from what a model call's reply messages carry in ``meta``
        (``model``, ``usage``): data read, never code run."""
        for message in messages:
            meta = getattr(message, "meta", None)
            if not isinstance(meta, Mapping):
                continue
            usage, model = meta.get("usage"), meta.get("model")
            if not isinstance(usage, Mapping) or not isinstance(model, str):
                continue
            for field, kind in (("input_tokens", "input"), ("output_tokens", "output")):
                n = usage.get(field)
                if isinstance(n, int) and not isinstance(n, bool) and n > 0:
                    self.tokens.labels(model, kind).inc(n)

    # -- exposing ------------------------------------------------------------
    def serve(self, runner: Runner, port: int, host: str = "127.0.0.1") -> MetricsServer:
        """Serve ``/metrics`` on ``host:port`` (0: any free port) from a
        thread, with the store's queues read on each scrape. Call it from
        the event loop the runner runs in; ``close()`` the server after."""
        if self._serving is not None:
            raise RuntimeError(
                f"Metrics.serve: already serving on port {self._serving.port}; close() that "
                "server first (one registry, one endpoint)"
            )
        loop = asyncio.get_running_loop()
        collector = _StoreCollector(runner.store, loop)
        self.registry.register(collector)
        try:
            server, thread = start_http_server(port, host, registry=self.registry)
        except BaseException:
            self.registry.unregister(collector)
            raise
        self._serving = MetricsServer(server, thread, self, collector)
        return self._serving


class MetricsServer:
    """A running ``/metrics`` endpoint (from :meth:`Metrics.serve`)."""

    def __init__(
        self,
        server: WSGIServer,
        thread: threading.Thread,
        metrics: Metrics,
        collector: Collector,
    ) -> None:
        self._server = server
        self._thread = thread
        self._metrics = metrics
        self._collector = collector

    @property
    def port(self) -> int:
        """The port it listens on (the one chosen when asked for 0)."""
        return int(self._server.server_address[1])

    def close(self) -> None:
        """Stop serving and wait for the serving thread."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        if self._metrics._serving is self:
            self._metrics._serving = None
            self._metrics.registry.unregister(self._collector)


class _StoreCollector(Collector):
    """The store's counts, read when scraped: on the scraping thread, it runs
    the queries on the runner's event loop and waits up to SCRAPE_TIMEOUT."""

    def __init__(self, store: Store, loop: asyncio.AbstractEventLoop) -> None:
        self.store = store
        self.loop = loop

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return self._families(None)

    def collect(self) -> Iterable[GaugeMetricFamily]:
        read: tuple[dict[str, dict[str, int]], dict[str, float]] | None = None
        try:
            future = asyncio.run_coroutine_threadsafe(self._read(), self.loop)
        except RuntimeError:  # the loop is closed: the worker is stopping
            pass
        else:
            try:
                read = future.result(SCRAPE_TIMEOUT)
            except Exception:  # down, slow or refusing: the gauge says so
                future.cancel()
        return self._families(read)

    def _families(
        self, read: tuple[dict[str, dict[str, int]], dict[str, float]] | None
    ) -> list[GaugeMetricFamily]:
        up = GaugeMetricFamily(
            "stalwart_store_up",
            "1 when the store answered this scrape's queries, else 0",
        )
        runs = GaugeMetricFamily(
            "stalwart_runs",
            "Runs in the store by status and queue (every worker's: the store's count)",
            labels=["status", "queue"],
        )
        oldest = GaugeMetricFamily(
            "stalwart_oldest_pending_seconds",
            "Seconds the oldest pending run that is due has waited, per queue",
            labels=["queue"],
        )
        families = [up, runs, oldest]
        if read is None:
            up.add_metric([], 0.0)
            return families
        up.add_metric([], 1.0)
        counts, ages = read
        for status, by_queue in sorted(counts.items()):
            for queue, n in sorted(by_queue.items()):
                runs.add_metric([status, queue], float(n))
        for queue, age in sorted(ages.items()):
            oldest.add_metric([queue], age)
        return families

    async def _read(self) -> tuple[dict[str, dict[str, int]], dict[str, float]]:
        counts = await self.store.count_runs()
        now = time.time()
        # Every queue with pending runs has an age, 0 while none is due yet.
        ages = dict.fromkeys(counts.get("pending", {}), 0.0)
        cursor: tuple[float, str] | None = None
        read = 0
        while read < PENDING_SCAN:
            page = await self.store.list_runs(status="pending", limit=_PAGE, before=cursor)
            for rec in page:
                due = rec.created_at if rec.wake_at is None else max(rec.created_at, rec.wake_at)
                if due <= now:
                    ages[rec.queue] = max(ages.get(rec.queue, 0.0), now - due)
            read += len(page)
            if len(page) < _PAGE:
                break
            cursor = (page[-1].created_at, page[-1].id)
        return counts, ages
