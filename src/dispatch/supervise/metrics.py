"""Prometheus metrics and a health check for a supervisor process (``dispatch supervise --metrics-port N``).

Served over HTTP on ``host:port`` (127.0.0.1 unless told otherwise):

* ``/metrics``: the Prometheus text format, from the ``prometheus-client`` library (install
  ``dispatch-jobs[supervisor]``), in a registry of this process's own;
* ``/healthz``: ``200 ok`` while cycles complete, ``503`` once no cycle has completed for
  ``stale_after`` seconds (default 3 x poll + 10 s): a supervisor whose loop is stuck or keeps failing is
  restarted by whoever watches it (systemd's watchdog script, a Kubernetes liveness probe).

Metrics (all prefixed ``dispatch_supervisor_``). The series about the cluster's jobs carry a ``cluster`` label
(the supervised cluster's name, as the records name it), so that the supervisors of several clusters can share one
Prometheus and one dashboard:

=========================================  =========  =====================================================
``jobs{cluster,state,cause}``              gauge      open jobs this supervisor owns, after the last cycle (no
                                                      ``cause`` label for a state without one, e.g. running);
                                                      a (state, cause) once exported stays, reading 0 when no
                                                      job is in it (a series never vanishes)
``decisions_total{cluster,action,rule}``   counter    decisions carried out (resubmit, hold, escalate, ...),
                                                      counted in the cycle that carries each out: a resubmit
                                                      once the new submission exists on the scheduler, never
                                                      for a start that failed or waits (see
                                                      :mod:`dispatch.supervise.carried`)
``escalations_total{cluster,cause}``       counter    escalations recorded
``resubmissions_total{cluster,cause}``     counter    resubmissions carried out (as ``decisions_total`` counts
                                                      them), by the cause decided on; every ended cause reads
                                                      0 from the cluster's first cycle
``stalled_executions_total{cluster}``      counter    executions recorded as stalled (ended by the supervisor
                                                      after their ranks stopped reporting progress:
                                                      :mod:`dispatch.supervise.stall`); 0 from the first cycle
``cycle_seconds``                          histogram  wall time of a cycle
``poll_seconds``                           gauge      seconds between cycles (``/healthz`` and the shipped
                                                      alert judge the last cycle's age by it)
``scheduler_calls_per_cycle``              gauge      backend calls of the last cycle (observation + actions)
``scheduler_calls_total``                  counter    backend calls
``record_writes_total``                    counter    record writes
``lease_takeovers_total``                  counter    leases taken over from another (expired) supervisor
``owned_jobs``                             gauge      jobs this supervisor held a lease on in the last cycle
``records_seconds{op}``                    histogram  latency of record-store calls, by operation
``last_cycle_timestamp_seconds``           gauge      when the last cycle completed (Unix time)
``archive_entries_total{status}``          counter    output archive entries written (kept, gone, failed)
``archive_pruned_total``                   counter    output archive entries deleted by retention
``archive_prune_errors_total``             counter    retention calls that failed (the cycle went on)
``watch_failures_total{watch,reason}``     counter    failed lists and watch requests of the backend's watches
                                                      (e.g. ``watch="pods",reason="401 Unauthorized"``)
``watch_age_seconds``                      gauge      seconds since the backend's watch cache was last known in
                                                      sync (0 while every watch is open and live)
=========================================  =========  =====================================================

Every label takes a bounded set of values (cluster names, states, causes, actions, rule names, record operations):
no series is per job, so a cluster of any size exports about a hundred series (most of them histogram buckets;
docs/prometheus.md). The counters a first increment would create are made at 0 instead (the ended causes of
``resubmissions_total``, the cluster's ``stalled_executions_total``), so that PromQL's ``increase()`` counts that
first increment too (``deploy/prometheus/`` alerts on both).

The client library's ``*_created`` series (when each counter and histogram was created) are not served: they
say when this process started, which ``process_start_time_seconds``-style tooling already knows, and they
double the number of series.
The last two exist for a backend that keeps a watch cache (the Kubeflow adapter): :meth:`Metrics.watch` reads
its ``watch_failures()`` and ``watch_age()`` at each scrape (the :class:`WatchHealth` protocol; no adapter
pushes metrics, and none of them depends on prometheus-client).
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol, runtime_checkable

from dispatch.errors import ConfigError
from dispatch.outcome import RUNNING_CAUSES, WAITING_CAUSES, Cause

_RECORD_OPS = (
    "create", "get", "get_many", "update", "renew", "to_supervise", "jobs", "summaries", "events", "put_output",
    "prune_outputs",
)  # fmt: skip
ENDED_CAUSES = tuple(c.value for c in Cause if c not in WAITING_CAUSES and c not in RUNNING_CAUSES)
"""The causes an ended execution may carry: those a decision, and so a resubmission, can be made on."""


def _client() -> Any:
    try:
        import prometheus_client
    except ImportError:
        raise ConfigError(
            "metricsPort", "metrics need the prometheus-client library: install dispatch-jobs[supervisor]"
        ) from None
    return prometheus_client


@runtime_checkable
class WatchHealth(Protocol):
    """A backend that keeps a watch cache says how its watches fare (read at each scrape)."""

    def watch_failures(self) -> Mapping[tuple[str, str], int]:
        """Failed lists and watch requests since it opened, by (watch, reason)."""
        ...

    def watch_age(self) -> float:
        """Seconds since its cache was last known in sync."""
        ...


class Metrics:
    """The supervisor's metrics in a registry of their own, and its health."""

    def __init__(self, stale_after: float, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        """``monotonic``: the clock health is judged by (tests pass their own)."""
        pc = _client()
        self._pc = pc
        self.registry = pc.CollectorRegistry()
        self.stale_after = stale_after
        self._monotonic = monotonic
        self.started = monotonic()
        self.last_cycle: float | None = None
        p = "dispatch_supervisor_"
        r = self.registry
        self.jobs = _Jobs(pc, p + "jobs")
        r.register(self.jobs)
        self.decisions = pc.Counter(p + "decisions", "Decisions carried out", ["cluster", "action", "rule"], registry=r)
        self.escalations = pc.Counter(p + "escalations", "Escalations recorded", ["cluster", "cause"], registry=r)
        self.resubmissions = pc.Counter(
            p + "resubmissions", "Resubmissions carried out, by the cause decided on", ["cluster", "cause"], registry=r
        )
        self.stalled = pc.Counter(
            p + "stalled_executions",
            "Executions recorded as stalled (ended by the supervisor)",
            ["cluster"],
            registry=r,
        )
        self.cycle_seconds = pc.Histogram(p + "cycle_seconds", "Wall time of a supervisor cycle", registry=r)
        self.poll_seconds = pc.Gauge(p + "poll_seconds", "Seconds between supervisor cycles", registry=r)
        self._clusters: set[str] = set()
        self.calls_per_cycle = pc.Gauge(p + "scheduler_calls_per_cycle", "Backend calls of the last cycle", registry=r)
        self.calls = pc.Counter(p + "scheduler_calls", "Backend calls", registry=r)
        self.writes = pc.Counter(p + "record_writes", "Record writes", registry=r)
        self.takeovers = pc.Counter(p + "lease_takeovers", "Leases taken over from another supervisor", registry=r)
        self.owned = pc.Gauge(p + "owned_jobs", "Jobs leased by this supervisor in the last cycle", registry=r)
        self.records_seconds = pc.Histogram(
            p + "records_seconds",
            "Latency of record-store calls",
            ["op"],
            registry=r,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0),
        )
        self.last_cycle_ts = pc.Gauge(p + "last_cycle_timestamp_seconds", "When the last cycle completed", registry=r)
        self.archived = pc.Counter(p + "archive_entries", "Output archive entries written", ["status"], registry=r)
        self.pruned = pc.Counter(p + "archive_pruned", "Output archive entries deleted by retention", registry=r)
        self.prune_errors = pc.Counter(p + "archive_prune_errors", "Retention calls that failed", registry=r)
        self._server: ThreadingHTTPServer | None = None

    def set_poll(self, poll: float) -> None:
        """The supervisor cycles every ``poll`` seconds: export it, and judge health by it (a cycle is due at
        least every 3 x poll + 10 s)."""
        self.poll_seconds.set(poll)
        self.stale_after = 3 * poll + 10.0

    def cycle(self, report: Any, seconds: float) -> None:
        """Account for one completed cycle (a :class:`~dispatch.supervise.CycleReport`)."""
        self.cycle_seconds.observe(seconds)
        self.calls_per_cycle.set(report.backend_calls)
        self.calls.inc(report.backend_calls)
        self.writes.inc(report.writes)
        self.takeovers.inc(report.takeovers)
        self.owned.set(report.owned)
        cluster = report.cluster
        for (action, rule), n in report.carried_out.items():
            self.decisions.labels(cluster=cluster, action=action, rule=rule).inc(n)
        for cause, n in report.escalations.items():
            self.escalations.labels(cluster=cluster, cause=cause).inc(n)
        if cluster not in self._clusters:
            self._clusters.add(cluster)
            for cause in ENDED_CAUSES:
                self.resubmissions.labels(cluster=cluster, cause=cause)
        for cause, n in report.resubmissions.items():
            self.resubmissions.labels(cluster=cluster, cause=cause).inc(n)
        self.stalled.labels(cluster=cluster).inc(report.stalled)
        for status, n in report.archive.items():
            self.archived.labels(status=status).inc(n)
        self.pruned.inc(report.archive_pruned)
        self.prune_errors.inc(report.archive_prune_errors)
        self.jobs.update(cluster, report.states)
        self.last_cycle = self._monotonic()
        self.last_cycle_ts.set(time.time())

    def watch(self, backend: object) -> None:
        """Export ``backend``'s watch failures and cache age (if it is a :class:`WatchHealth`)."""
        if isinstance(backend, WatchHealth):
            self.registry.register(_WatchCollector(backend))

    def healthy(self) -> tuple[bool, str]:
        """Whether a cycle completed within ``stale_after`` seconds (counting from the start for the first)."""
        since = self._monotonic() - (self.last_cycle if self.last_cycle is not None else self.started)
        if since <= self.stale_after:
            return True, "ok"
        what = "the last cycle completed" if self.last_cycle is not None else "started, and no cycle completed"
        return False, f"unhealthy: {what} {since:.0f}s ago (limit {self.stale_after:g}s)"

    def timed(self, records: Any) -> Any:
        """``records`` with the latency of each call observed in ``records_seconds{op}``."""
        return _TimedRecords(records, self.records_seconds)

    # ----- HTTP ----------------------------------------------------------------------------------------------

    def serve(self, host: str, port: int) -> tuple[str, int]:
        """Serve ``/metrics`` and ``/healthz`` on ``host:port`` in a daemon thread; returns the bound address
        (port 0 picks a free one)."""
        metrics = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    body = metrics._pc.generate_latest(_WithoutCreated(metrics.registry))
                    self._send(200, body, metrics._pc.CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    ok, text = metrics.healthy()
                    self._send(200 if ok else 503, (text + "\n").encode(), "text/plain; charset=utf-8")
                else:
                    self._send(404, b"not found: try /metrics or /healthz\n", "text/plain; charset=utf-8")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # scrapes every few seconds: not worth a log line each

        try:
            self._server = ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:
            raise ConfigError("metricsPort", f"cannot listen on {host}:{port}: {exc.strerror}") from None
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="metrics", daemon=True).start()
        bound = self._server.server_address
        return str(bound[0]), int(bound[1])

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


class _Jobs:
    """The ``jobs`` gauge: one sample per (cluster, state, cause) this process has ever exported, reading the
    count of the last cycle (0 when no job is in it now: a series that vanished would read as "no data", not
    as none), with no ``cause`` label where the state has none (a labelled gauge would write ``cause=""``)."""

    def __init__(self, pc: Any, name: str) -> None:
        self._pc = pc
        self.name = name
        self.counts: dict[tuple[str, str, str], int] = {}

    def update(self, cluster: str, states: Mapping[tuple[str, str], int]) -> None:
        """The cluster's open jobs after a cycle, by (state, cause); the cluster's others now read 0."""
        for key in self.counts:
            if key[0] == cluster:
                self.counts[key] = 0
        for (state, cause), n in states.items():
            self.counts[(cluster, state, cause)] = n

    def collect(self) -> Any:
        family = self._pc.metrics_core.GaugeMetricFamily(
            self.name, "Open jobs this supervisor owns, by state and cause"
        )
        for (cluster, state, cause), n in sorted(self.counts.items()):
            labels = {"cluster": cluster, "state": state, **({"cause": cause} if cause else {})}
            family.add_sample(self.name, labels, float(n))
        yield family


class _WithoutCreated:
    """A registry's metrics without the ``*_created`` samples (see the module docstring)."""

    def __init__(self, registry: Any) -> None:
        self._registry = registry

    def collect(self) -> Any:
        for metric in self._registry.collect():
            metric.samples = [s for s in metric.samples if not s.name.endswith("_created")]
            yield metric


class _WatchCollector:
    """Reads a :class:`WatchHealth` backend at each scrape."""

    def __init__(self, backend: WatchHealth) -> None:
        self._core: Any = importlib.import_module("prometheus_client.core")
        self._backend = backend

    def collect(self) -> Iterator[Any]:
        failures = self._core.CounterMetricFamily(
            "dispatch_supervisor_watch_failures",
            "Failed lists and watch requests of the backend's watches",
            labels=["watch", "reason"],
        )
        for (watch, reason), n in sorted(self._backend.watch_failures().items()):
            failures.add_metric([watch, reason], n)
        yield failures
        yield self._core.GaugeMetricFamily(
            "dispatch_supervisor_watch_age_seconds",
            "Seconds since the backend's watch cache was last known in sync",
            value=self._backend.watch_age(),
        )


class _TimedRecords:
    """A record store whose calls are timed; everything else passes through."""

    def __init__(self, inner: Any, histogram: Any) -> None:
        self._inner = inner
        self._h = histogram

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in _RECORD_OPS:
            return attr
        observe = self._h.labels(op=name).observe

        def call(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                observe(time.perf_counter() - t)

        return call


__all__ = ["ENDED_CAUSES", "Metrics"]
