"""The edge proxy service (L1): admin API on :9180, data plane on :9080, metrics on :9091.

The admin API is the JSON front door of `strata.edge.v1.EdgeAdminService` (APISIX-shaped,
`X-API-KEY`, private networks only); the data plane (`dataplane/`, a protocol server of its
own) and the metrics endpoint listen on their own ports.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from aiohttp import web

from gateways.edge.admin_http_rules import HTTP_RULES
from gateways.edge.config import EdgeConfig
from gateways.edge.dataplane.process import data_plane
from runtime.auth import authenticator_for
from runtime.config import VERSION
from runtime.errors import PermissionDenied
from runtime.service import ServiceDefinition, unimplemented
from runtime.stores import Stores
from runtime.stores.kv import kv_status
from runtime.telemetry import Metrics
from strata.edge.v1 import admin_pb2_grpc

SERVICE = "edge-proxy"
METRICS_PATH = "/apisix/prometheus/metrics"


def admin_network_guard(cidrs: tuple[str, ...]) -> Any:
    networks = [ipaddress.ip_network(c) for c in cidrs]

    @web.middleware
    async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
        peer = ipaddress.ip_address(request.remote or "0.0.0.0")
        if not any(peer in net for net in networks):
            raise PermissionDenied(
                "admin API is reachable from private networks only", error="forbidden"
            )
        return await handler(request)  # type: ignore[no-any-return]

    return guard


def build(
    config: EdgeConfig,
    stores: Stores,
    *,
    proxy_port: int | None = None,
    metrics_port: int | None = None,
) -> ServiceDefinition:
    metrics = Metrics(SERVICE)
    plane, listen, reload = data_plane(config, stores, metrics, proxy_port)

    async def prometheus(request: web.Request) -> web.Response:
        return web.Response(
            body=metrics.exposition(), headers={"Content-Type": "text/plain; version=0.0.4"}
        )

    metrics_app = web.Application()
    metrics_app.router.add_get(METRICS_PATH, prometheus)

    async def health() -> dict[str, Any]:
        return {
            "status": "healthy",
            "service": SERVICE,
            "version": VERSION,
            "checks": {"redis": await kv_status(stores.kv)},
        }

    return ServiceDefinition(
        name=SERVICE,
        bindings=unimplemented(admin_pb2_grpc),
        http_rules=HTTP_RULES,
        info={
            "service": SERVICE,
            "version": VERSION,
            "endpoints": {
                "/apisix/admin/routes": "routes",
                "/apisix/admin/upstreams": "upstreams",
                "/apisix/admin/consumers": "consumers",
                "/apisix/admin/consumer_groups": "consumer groups",
                "/apisix/admin/plugins/list": "enabled plugins",
            },
        },
        health=health,
        authenticator=authenticator_for(config, admin_api_key=config.admin_api_key),
        metrics=metrics,
        listeners=[listen],
        extra_apps=[
            (config.metrics_port if metrics_port is None else metrics_port, metrics_app),
        ],
        middlewares=[admin_network_guard(config.admin_allow_cidrs)],
        on_cleanup=[stores.close, plane.close_pools],
        on_reload=[reload],
        client_max_size=config.max_body_bytes,
    )
