"""The edge's Prometheus metrics, named as APISIX's `prometheus` plugin names them, plus the
edge's own operational counters.

One view over all data-plane processes: with `PROMETHEUS_MULTIPROC_DIR` set (the edge primary
creates the directory and passes it to its workers in their environment), every process
writes its values to memory-mapped files there and `exposition()` in the primary aggregates
them (prometheus_client's multiprocess mode). Without it, one in-process registry.

The data plane sets `process_metrics()` (one `EdgeMetrics` per process) as `env.metrics`;
the primary serves its `exposition()` on :9091 `/apisix/prometheus/metrics`.
"""

from __future__ import annotations

import functools
import glob
import logging
import os
import struct
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, values
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

log = logging.getLogger(__name__)
MERGE_ATTEMPTS = 3
# APISIX's default buckets, in milliseconds.
LATENCY_BUCKETS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000)
STATUS_LABELS = ("code", "route", "matched_uri", "matched_host", "service", "consumer", "node")
ROUTE_LABELS = ("type", "route", "service", "consumer", "node")
# The plugins that let a request through when the rate-limit store is unreachable.
FAIL_OPEN_PLUGINS = ("tenant-rate-limit",)
# prometheus_client spells counters `<name>_total`; APISIX's exporter does not.
_APISIX_COUNTERS = (b"apisix_http_status", b"apisix_bandwidth")


class EdgeMetrics:
    def __init__(self, multiproc_dir: str | None = None) -> None:
        self.multiproc_dir = multiproc_dir
        self.registry = CollectorRegistry()
        registry = None if multiproc_dir else self.registry
        counter, gauge = _kind(Counter, multiproc_dir), _kind(Gauge, multiproc_dir)
        histogram = _kind(Histogram, multiproc_dir)
        self.http_status = counter(
            "apisix_http_status", "HTTP status codes per route in APISIX",
            STATUS_LABELS, registry=registry,
        )  # fmt: skip
        self.http_latency = histogram(
            "apisix_http_latency", "HTTP request latency in milliseconds per route in APISIX",
            ROUTE_LABELS, buckets=LATENCY_BUCKETS_MS, registry=registry,
        )  # fmt: skip
        self.bandwidth = counter(
            "apisix_bandwidth", "Total bandwidth in bytes consumed per route in APISIX",
            ROUTE_LABELS, registry=registry,
        )  # fmt: skip
        self.current_connections = gauge(
            "apisix_nginx_http_current_connections", "Number of HTTP connections",
            ["state"], registry=registry, multiprocess_mode="livesum",
        )  # fmt: skip
        self.rate_limit_fail_open = counter(
            "strata_edge_rate_limit_fail_open",
            "Requests let through because the rate-limit store was unreachable",
            ["plugin"], registry=registry,
        )  # fmt: skip
        self.analytics_rows_dropped = counter(
            "strata_edge_analytics_rows_dropped",
            "Request-log rows dropped after buffer_duration of failed writes",
            registry=registry,
        )
        self.analytics_write_failures = counter(
            "strata_edge_analytics_write_failures",
            "Failed request-log batch writes (each retry counts)",
            registry=registry,
        )
        # The fail-open series exists at 0 from the start, so that a dashboard and an alert
        # see "none yet" instead of "no such series" (Prometheus's advice for labelled counters).
        for plugin in FAIL_OPEN_PLUGINS:
            self.rate_limit_fail_open.labels(plugin)

    @classmethod
    def from_env(cls) -> EdgeMetrics:
        return cls(os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None)

    def exposition(self) -> bytes:
        """The text exposition of every process's values (this process's alone without a
        multiprocess directory)."""
        if self.multiproc_dir:
            registry = CollectorRegistry()
            registry.register(_SizedFiles(self.multiproc_dir))
        else:
            registry = self.registry
        text = generate_latest(registry)
        for name in _APISIX_COUNTERS:
            text = text.replace(name + b"_total", name)
        # Nor has it `_created` series (only single-process registries make them).
        return b"\n".join(line for line in text.split(b"\n") if b"_created" not in line)


class _SizedFiles:
    """Every process's files but those it cannot read whole now: a worker creates its file
    for a metric type on that type's first use and sizes it an instant later, and an entry
    read while it is being written may be torn. Such a file is left out of this scrape (its
    values are in the next one) rather than failing the scrape with a 500."""

    def __init__(self, path: str) -> None:
        self.path = path

    def collect(self) -> Any:
        for attempt in range(MERGE_ATTEMPTS):  # a file may change between the check and the read
            files = [f for f in glob.glob(os.path.join(self.path, "*.db")) if _readable(f)]
            try:
                return MultiProcessCollector.merge(files, accumulate=True)
            except (OSError, ValueError, struct.error):
                if attempt == MERGE_ATTEMPTS - 1:
                    raise
        return []


def _readable(path: str) -> bool:
    try:
        if not os.path.getsize(path):
            return False
        for _ in MmapedDict.read_all_values_from_file(path):
            pass
    except (OSError, ValueError, struct.error) as exc:  # UnicodeDecodeError is a ValueError
        log.warning("metrics file %s left out of this scrape: %r", path, exc)
        return False
    return True


@functools.cache
def process_metrics() -> EdgeMetrics:
    """This process's edge metrics, built once from the environment: what the data plane
    sets as `env.metrics` and what the primary's metrics app exposes."""
    return EdgeMetrics.from_env()


def prepare_multiproc_dir(path: str) -> None:
    """For the primary, before it starts workers: an empty directory (stale files from an
    earlier run would be summed in)."""
    os.makedirs(path, exist_ok=True)
    for stale in glob.glob(os.path.join(path, "*.db")):
        os.remove(stale)


def worker_exited(path: str, pid: int) -> None:
    """For the primary, when a worker process ends: its live gauges stop counting."""
    mark_process_dead(pid, path)


_mmap_value: object = None


def _kind(cls: type, multiproc_dir: str | None) -> type:
    """`cls`, or in multiprocess mode a subclass whose values (labelled children included,
    which are built on first use) live in the directory's memory-mapped files.
    prometheus_client picks that mode globally, and only when the variable is set before its
    first import; the edge's metrics choose per metric, leaving the runtime's registry alone."""
    if not multiproc_dir:
        return cls
    global _mmap_value
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = multiproc_dir
    if _mmap_value is None:  # one per process: one file per metric type and process
        # A worker inherits the variable, so prometheus_client chose its multiprocess mode at
        # import and its own value class already writes this process's files: a second one
        # would write the same files at its own offsets, tearing the other's entries.
        inherited = values.ValueClass is not values.MutexValue
        _mmap_value = values.ValueClass if inherited else values.MultiProcessValue()

    class Mmapped(cls):  # type: ignore[misc]
        def _metric_init(self) -> None:
            saved = values.ValueClass
            values.ValueClass = _mmap_value
            try:
                super()._metric_init()
            finally:
                values.ValueClass = saved

    return Mmapped
