"""`prometheus` (APISIX priority 500, log): per-route status, latency and bandwidth in
APISIX's metric names (gateways/edge/metrics.py), counted in the worker's `env.metrics`.

Labels are bounded: route and service ids (or names with `prefer_name`), the route's
configured `uri`/`host` as `matched_uri`/`matched_host`, never the raw path. The labelled
children of each (route, status, consumer, node) are bound once and cached. `node` is the
upstream address the data plane leaves in `ctx.vars["upstream_addr"]` (empty when none).

Within a running event loop, the requests logged in one turn of the loop are tallied per
label set and written once, at the start of the next turn (`call_soon`), before the loop
reads any more input: a scrape sees every request answered before it. A request costs a dict
lookup and an append instead of nine writes of shared values (each a lock, a pid check and a
write into the memory-mapped file in multiprocess mode); the turn's writes are one per
series touched (count, sums, bandwidth, and each latency bucket hit). Outside a loop (tools,
tests) each request is written at once.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from dataclasses import dataclass
from typing import Any

from gateways.edge.model.plugins import prometheus as declared
from gateways.edge.plugin import Plugin, PluginEnv, RequestContext, parse_conf

MAX_CHILDREN = 10_000  # label sets cached per plugin instance


@dataclass(frozen=True, slots=True)
class PrometheusConf:
    prefer_name: bool


class Prometheus(declared.Prometheus, Plugin):
    """Counts requests, latency and bandwidth per route in APISIX's metric names (exporter on
    :9091)."""

    def __init__(self, conf: Any, env: PluginEnv) -> None:
        super().__init__(conf, env)
        self.prefer_name = parse_conf(PrometheusConf, self.schema, conf).prefer_name
        self._children: dict[tuple[str, int, str, str], tuple[Any, ...]] = {}
        # This loop turn's requests, per label set: [children, (total_ms, upstream_ms,
        # bytes received, bytes sent) of each request].
        self._turn: dict[tuple[str, int, str, str], list[Any]] = {}

    def log(self, ctx: RequestContext) -> None:
        metrics = self.env.metrics
        if metrics is None:
            return
        node = ctx.vars.get("upstream_addr", "")
        key = (ctx.route_id, ctx.status, ctx.consumer_name, node)
        sample = (
            (time.perf_counter() - ctx.started) * 1000,
            ctx.upstream_latency * 1000,
            ctx.bytes_received,
            ctx.bytes_sent,
        )
        pending = self._turn.get(key)
        if pending is not None:
            pending.append(sample)
            return
        children = self._children.get(key)
        if children is None:
            children = self._bind(metrics, ctx, node)
            if len(self._children) < MAX_CHILDREN:
                self._children[key] = children
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop: write it now
            _write(children, [sample])
            return
        if not self._turn:
            loop.call_soon(self._write_turn)
        self._turn[key] = [children, sample]

    def _write_turn(self) -> None:
        turn, self._turn = self._turn, {}
        for children, *samples in turn.values():
            _write(children, samples)

    def _bind(self, metrics: Any, ctx: RequestContext, node: str) -> tuple[Any, ...]:
        route = ctx.route or {}
        route_label = (route.get("name") if self.prefer_name else None) or ctx.route_id
        uri = route.get("uri") or next(iter(route.get("uris") or ()), "")
        host = route.get("host") or next(iter(route.get("hosts") or ()), "")
        service, consumer = ctx.service_id, ctx.consumer_name
        common = (route_label, service, consumer, node)
        return (
            metrics.http_status.labels(str(ctx.status), route_label, uri, host, *common[1:]),
            metrics.http_latency.labels("request", *common),
            metrics.http_latency.labels("upstream", *common),
            metrics.http_latency.labels("apisix", *common),
            metrics.bandwidth.labels("ingress", *common),
            metrics.bandwidth.labels("egress", *common),
        )


def _write(children: tuple[Any, ...], samples: list[tuple[float, float, int, int]]) -> None:
    """Count `samples` (total_ms, upstream_ms, bytes received, bytes sent) of one label set:
    what observing each would write (the upstream latency only when there was one), in one
    write per series."""
    status, request, upstream, apisix, ingress, egress = children
    status.inc(len(samples))
    _observe(request, [total for total, _, _, _ in samples])
    _observe(upstream, [up for _, up, _, _ in samples if up])
    _observe(apisix, [total - up for total, up, _, _ in samples])
    ingress.inc(sum(sample[2] for sample in samples))
    egress.inc(sum(sample[3] for sample in samples))


def _observe(histogram: Any, amounts: list[float]) -> None:
    """`histogram.observe(a)` for each of `amounts`, each series written once: the sum, and
    each bucket by how many fell in it (prometheus_client keeps per-bucket counts and adds
    them up at exposition; an amount falls in the first bucket whose bound is >= it)."""
    if len(amounts) <= 1:
        if amounts:
            histogram.observe(amounts[0])
        return
    bounds = histogram._upper_bounds
    counts = [0] * len(bounds)
    for amount in amounts:
        counts[bisect.bisect_left(bounds, amount)] += 1
    histogram._sum.inc(sum(amounts))
    for bucket, count in zip(histogram._buckets, counts, strict=True):
        if count:
            bucket.inc(count)
