"""prometheus: APISIX's metric names, counted by several processes, one exposition."""

from __future__ import annotations

import asyncio
import multiprocessing
import re
from pathlib import Path
from typing import Any

import pytest
from edge_kit import count_requests, make_plugin, request

from gateways.edge.metrics import EdgeMetrics, prepare_multiproc_dir
from gateways.edge.plugin import PluginEnv
from gateways.edge.plugins import prometheus

SAMPLE = re.compile(r"^([a-z_]+)\{(.*)\} (\S+)$")
LABEL = re.compile(r'(\w+)="([^"]*)"')


def samples(text: bytes) -> dict[tuple[str, frozenset], float]:
    """Samples as written (prometheus_client's parser would rename `apisix_http_status`)."""
    found = {}
    for line in text.decode().splitlines():
        match = SAMPLE.match(line)
        if match:
            name, labels, value = match.groups()
            found[(name, frozenset(LABEL.findall(labels)))] = float(value)
    return found


def test_one_exposition_over_two_processes(tmp_path: Path) -> None:
    directory = str(tmp_path / "prom")
    prepare_multiproc_dir(directory)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.map(count_requests, [(directory, 3, 200), (directory, 4, 200)])
        pool.apply(count_requests, ((directory, 2, 429),))
    text = EdgeMetrics(directory).exposition()
    assert b"# TYPE apisix_http_status counter" in text
    assert b"apisix_http_status_total" not in text
    got = samples(text)
    status = {"route": "r1", "matched_uri": "/api/*", "matched_host": "edge.local",
              "service": "", "consumer": "", "node": ""}  # fmt: skip
    assert got[("apisix_http_status", frozenset({**status, "code": "200"}.items()))] == 7
    assert got[("apisix_http_status", frozenset({**status, "code": "429"}.items()))] == 2
    route = {"route": "r1", "service": "", "consumer": "", "node": ""}
    assert got[("apisix_bandwidth", frozenset({**route, "type": "egress"}.items()))] == 9000
    assert got[("apisix_bandwidth", frozenset({**route, "type": "ingress"}.items()))] == 900
    upstream = frozenset({**route, "type": "upstream", "le": "2.0"}.items())
    assert got[("apisix_http_latency_bucket", upstream)] == 9
    assert got[("apisix_http_latency_count", frozenset({**route, "type": "request"}.items()))] == 9


@pytest.fixture(autouse=True)
def own_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """EdgeMetrics with a directory sets PROMETHEUS_MULTIPROC_DIR in this process (the
    multiprocess mode reads it there): put it back after each test, or every stack this test
    process starts later inherits it."""
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)


def test_a_file_being_written_does_not_fail_the_scrape(tmp_path: Path) -> None:
    """A worker creates its file for a metric type on that type's first use and sizes it an
    instant later, and writes entries while a scrape may read them: a scrape reading a file in
    that state (seen in CI as a 500: an empty file, a torn key) leaves it out and reads the
    others' values."""
    directory = str(tmp_path / "prom")
    prepare_multiproc_dir(directory)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        pool.apply(count_requests, ((directory, 3, 200),))
    (tmp_path / "prom" / "histogram_4242.db").touch()  # created, not yet sized
    (written,) = (tmp_path / "prom").glob("counter_*.db")
    torn = bytearray(written.read_bytes())
    torn[20:24] = b"\xb2\xb2\xb2\xb2"  # inside the first entry's key
    (tmp_path / "prom" / "counter_4343.db").write_bytes(bytes(torn))
    got = samples(EdgeMetrics(directory).exposition())
    status = {"route": "r1", "matched_uri": "/api/*", "matched_host": "edge.local",
              "service": "", "consumer": "", "node": "", "code": "200"}  # fmt: skip
    assert got[("apisix_http_status", frozenset(status.items()))] == 3


def test_single_process_registry_and_cached_children() -> None:
    env = PluginEnv()
    env.metrics = EdgeMetrics()
    plugin = make_plugin("prometheus", {"prefer_name": True}, env)
    for _ in range(5):
        ctx = request(route_id="r9")
        ctx.route = {"name": "orders", "uris": ["/orders"]}
        ctx.status, ctx.consumer_name = 200, "jack"
        plugin.log(ctx)
    assert len(plugin._children) == 1
    got = samples(env.metrics.exposition())
    labels = {"code": "200", "route": "orders", "matched_uri": "/orders", "matched_host": "",
              "service": "", "consumer": "jack", "node": ""}  # fmt: skip
    assert got[("apisix_http_status", frozenset(labels.items()))] == 5


class FixedClock:
    """`time` for the plugin: perf_counter() is always 1000 (a request's latency is then
    1000 - ctx.started)."""

    @staticmethod
    def perf_counter() -> float:
        return 1000.0


# (total ms, upstream ms, status): every latency bucket's edges, both sides, and no upstream
LATENCIES = [(0.5, 0.2, 200), (1.0, 1.0, 200), (1.5, 0.0, 200), (2.0, 1.5, 200), (7, 5, 429),
             (99.9, 50, 200), (100.0, 100.0, 200), (45_000, 1, 200), (90_000, 80_000, 200),
             (3.0, 0.0, 429)]  # fmt: skip


def log_latencies(plugin: Any) -> None:
    for total_ms, upstream_ms, status in LATENCIES:
        ctx = request(route_id="r1")
        ctx.route = {"uri": "/api/*"}
        ctx.started = 1000.0 - total_ms / 1000
        ctx.upstream_latency = upstream_ms / 1000
        ctx.status, ctx.bytes_received, ctx.bytes_sent = status, 10, 100
        plugin.log(ctx)


async def test_a_turns_requests_are_written_together_as_each_would_be(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In a loop, the requests of one turn are tallied and written at the start of the next:
    the same series and values as writing each request at once (outside a loop)."""
    monkeypatch.setattr(prometheus, "time", FixedClock)
    at_once, tallied = PluginEnv(), PluginEnv()
    at_once.metrics, tallied.metrics = EdgeMetrics(), EdgeMetrics()
    await asyncio.to_thread(log_latencies, make_plugin("prometheus", {}, at_once))  # no loop
    log_latencies(make_plugin("prometheus", {}, tallied))
    await asyncio.sleep(0)  # the next turn
    expected, got = samples(at_once.metrics.exposition()), samples(tallied.metrics.exposition())
    assert got.keys() == expected.keys()
    for series, value in expected.items():
        assert got[series] == pytest.approx(value), series
    route = {"route": "r1", "service": "", "consumer": "", "node": ""}
    count = ("apisix_http_latency_count", frozenset({**route, "type": "upstream"}.items()))
    assert got[count] == 8  # not the requests without an upstream latency
    le_one = (
        "apisix_http_latency_bucket",
        frozenset({**route, "type": "request", "le": "1.0"}.items()),
    )
    assert got[le_one] == 2  # 0.5 and 1.0: a bucket holds its bound
