"""Prometheus: the counters a :class:`~stalwart.metrics.Metrics` hook feeds,
and the store's queues read when scraped.

Three sources, one registry. :class:`PrometheusOutput` holds the counters and
histograms of what happens in this process (from zero in each process; the
store holds the truth). Its readings collector adds up, when scraped, the
lease counts of the runners it watches and how long their stores could not
be reached (:mod:`.readings`). Its store collector asks the store for run
counts, the oldest due pending run and the runs waiting for a signal only
when Prometheus scrapes, never on a run's path. Policy, queue and model names are
data: they become label values, which ``prometheus_client`` escapes in the
exposition.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ..runner.routing import fleet_of
from .readings import Reader, Readings

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from ..stores.base import Store

__all__ = ["PENDING_SCAN", "SCRAPE_TIMEOUT", "MetricsServer", "PrometheusOutput"]

#: Seconds a scrape waits for the store before it reports ``stalwart_store_up 0``.
SCRAPE_TIMEOUT = 5.0

#: Most pending runs a scrape reads to find the oldest due one per queue (in
#: pages of 500, newest first): past it, the age is that of the oldest among
#: the newest ones read, an underestimate.
PENDING_SCAN = 5000
_PAGE = 500


class PrometheusOutput:
    """The Prometheus side of :class:`~stalwart.metrics.Metrics`: its
    counters and histograms in one registry, and the endpoint serving them."""

    def __init__(
        self, registry: CollectorRegistry | None = None, read: Reader | None = None
    ) -> None:
        self.registry = CollectorRegistry() if registry is None else registry
        r = self.registry
        if read is not None:
            r.register(_ReadingsCollector(read))
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
        self.tokens_used = Counter(
            "stalwart_model_tokens",
            "Model tokens of live model calls in this process, by model and kind "
            "(input, output), read from the usage the reply recorded",
            ["model", "kind"],
            registry=r,
        )
        self.cost_spent = Counter(
            "stalwart_model_cost",
            "What live model calls in this process cost, by model, at the prices given "
            "to Metrics(prices=...) (per million tokens, in their currency)",
            ["model"],
            registry=r,
        )
        self._serving: MetricsServer | None = None

    def run_started(self, policy: str, queue: str) -> None:
        self.runs_started.labels(policy, queue).inc()

    def run_finished(self, policy: str, queue: str, status: str) -> None:
        self.runs_finished.labels(policy, queue, status).inc()

    def run_stopped(self, policy: str, queue: str, reason: str) -> None:
        self.runs_stopped.labels(policy, queue, reason).inc()

    def step(self, policy: str, outcome: str, seconds: float) -> None:
        self.steps.labels(policy, outcome).observe(seconds)

    def step_replayed(self, policy: str) -> None:
        self.steps_replayed.labels(policy).inc()

    def tokens(self, model: str, kind: str, count: int) -> None:
        self.tokens_used.labels(model, kind).inc(count)

    def cost(self, model: str, amount: float) -> None:
        self.cost_spent.labels(model).inc(amount)

    def serve(self, store: Store, port: int, host: str = "127.0.0.1") -> MetricsServer:
        """Serve ``/metrics`` on ``host:port`` (0: any free port) from a
        thread, with ``store``'s queues read on each scrape."""
        if self._serving is not None:
            raise RuntimeError(
                f"Metrics.serve: already serving on port {self._serving.port}; close() that "
                "server first (one registry, one endpoint)"
            )
        loop = asyncio.get_running_loop()
        collector = _StoreCollector(store, loop)
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
        output: PrometheusOutput,
        collector: Collector,
    ) -> None:
        self._server = server
        self._thread = thread
        self._output = output
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
        if self._output._serving is self:
            self._output._serving = None
            self._output.registry.unregister(self._collector)


class _ReadingsCollector(Collector):
    """The watched runners' lease counts and their stores' outages, added
    up when scraped (plain reads: nothing waits on the event loop)."""

    def __init__(self, read: Reader) -> None:
        self.read = read

    def describe(self) -> Iterable[CounterMetricFamily]:
        return self._families(Readings())

    def collect(self) -> Iterable[CounterMetricFamily]:
        return self._families(self.read())

    def _families(self, now: Readings) -> list[CounterMetricFamily]:
        return [
            CounterMetricFamily(
                "stalwart_leases_taken",
                "Leases this process took: claims that began an execution of a run",
                value=now.leases_taken,
            ),
            CounterMetricFamily(
                "stalwart_leases_renewed",
                "Leases this process extended by a heartbeat, one per run executing at the beat",
                value=now.leases_renewed,
            ),
            CounterMetricFamily(
                "stalwart_leases_lost",
                "Executions stopped here because their lease was lost: another worker "
                "took the run over, or the store refused a write under the old fence",
                value=now.leases_lost,
            ),
            CounterMetricFamily(
                "stalwart_store_outages",
                "Times the store stopped answering this process (a retried operation "
                "failed for a reason that may pass)",
                value=now.store_outages,
            ),
            CounterMetricFamily(
                "stalwart_store_unavailable_seconds",
                "Seconds the store could not be reached by this process, from a first "
                "failed attempt to the next that succeeded (the outage under way included)",
                value=now.store_unavailable_seconds,
            ),
        ]


#: What a scrape reads: run counts by status and queue, the oldest due
#: pending run's age per queue, runs waiting for a signal per queue, runs no
#: live worker can continue per queue.
_Read = tuple[dict[str, dict[str, int]], dict[str, float], dict[str, int], dict[str, int]]


class _StoreCollector(Collector):
    """The store's counts, read when scraped: on the scraping thread, it runs
    the queries on the runner's event loop and waits up to SCRAPE_TIMEOUT."""

    def __init__(self, store: Store, loop: asyncio.AbstractEventLoop) -> None:
        self.store = store
        self.loop = loop

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return self._families(None)

    def collect(self) -> Iterable[GaugeMetricFamily]:
        read: _Read | None = None
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

    def _families(self, read: _Read | None) -> list[GaugeMetricFamily]:
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
        waiting = GaugeMetricFamily(
            "stalwart_runs_waiting_for_signal",
            "Runs suspended until a signal arrives (a human's answer, an approval, an "
            "event), per queue, at most PENDING_SCAN counted",
            labels=["queue"],
        )
        stuck = GaugeMetricFamily(
            "stalwart_runs_stranded",
            "Unfinished runs no live worker can continue (their version retired, or no "
            "worker of it), per queue, at most PENDING_SCAN of each status counted; "
            "only where serving workers are recorded",
            labels=["queue"],
        )
        families = [up, runs, oldest, waiting, stuck]
        if read is None:
            up.add_metric([], 0.0)
            return families
        up.add_metric([], 1.0)
        counts, ages, waits, stranded = read
        for status, by_queue in sorted(counts.items()):
            for queue, n in sorted(by_queue.items()):
                runs.add_metric([status, queue], float(n))
        for queue, age in sorted(ages.items()):
            oldest.add_metric([queue], age)
        for queue, n in sorted(waits.items()):
            waiting.add_metric([queue], float(n))
        for queue, n in sorted(stranded.items()):
            stuck.add_metric([queue], float(n))
        return families

    async def _read(self) -> _Read:
        counts = await self.store.count_runs()
        now = time.time()
        # Stranded runs are counted only where serving workers are recorded
        # (runs.routing): without any, runs execute in the process that made them.
        fleet = await fleet_of(self.store)
        if fleet is not None and not fleet.workers:
            fleet = None
        stranded: dict[str, int] = {}
        # Every queue with pending runs has an age, 0 while none is due yet.
        ages = dict.fromkeys(counts.get("pending", {}), 0.0)
        for status in ("pending", "suspended", "running"):
            if status != "pending" and fleet is None:
                break
            async for rec in self.store.iter_runs(status, most=PENDING_SCAN, page=_PAGE):
                if status == "pending":
                    due = (
                        rec.created_at if rec.wake_at is None else max(rec.created_at, rec.wake_at)
                    )
                    if due <= now:
                        ages[rec.queue] = max(ages.get(rec.queue, 0.0), now - due)
                if fleet is not None:
                    stranded.setdefault(rec.queue, 0)
                    if fleet.stranded(rec) is not None:
                        stranded[rec.queue] += 1
        # Every queue with suspended runs shows, 0 when none waits for a signal.
        waits = dict.fromkeys(counts.get("suspended", {}), 0)
        for rec in await self.store.waiting_for_signals(PENDING_SCAN):
            waits[rec.queue] = waits.get(rec.queue, 0) + 1
        return counts, ages, waits, stranded
