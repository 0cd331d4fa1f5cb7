"""`prometheus` (APISIX priority 500, log): per-route status, latency and bandwidth in
APISIX's metric names (gateways/edge/metrics.py), counted in the worker's `env.metrics`.

Labels are bounded: route and service ids (or names with `prefer_name`), the route's
configured `uri`/`host` as `matched_uri`/`matched_host`, never the raw path. The labelled
children of each (route, status, consumer, node) are bound once and cached, so a request
costs a dict lookup and a few increments. `node` is the upstream address the data plane
leaves in `ctx.vars["upstream_addr"]` (empty when none).
"""

from __future__ import annotations

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

    def log(self, ctx: RequestContext) -> None:
        metrics = self.env.metrics
        if metrics is None:
            return
        node = ctx.vars.get("upstream_addr", "")
        key = (ctx.route_id, ctx.status, ctx.consumer_name, node)
        children = self._children.get(key)
        if children is None:
            children = self._bind(metrics, ctx, node)
            if len(self._children) < MAX_CHILDREN:
                self._children[key] = children
        status, request, upstream, apisix, ingress, egress = children
        total_ms = (time.perf_counter() - ctx.started) * 1000
        upstream_ms = ctx.upstream_latency * 1000
        status.inc()
        request.observe(total_ms)
        if upstream_ms:
            upstream.observe(upstream_ms)
        apisix.observe(total_ms - upstream_ms)
        ingress.inc(ctx.bytes_received)
        egress.inc(ctx.bytes_sent)

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
