"""The edge proxy service (L1): admin API on :9180, data plane on :9080, metrics on :9091.

The admin API is the JSON front door of `strata.edge.v1.EdgeConfigService` (APISIX's Admin
API v3, `X-API-KEY`, private networks only), which the control plane serves: the edge
forwards every call to it (`admin_forward`). The data plane (`dataplane/`, a protocol
server of its own) and the metrics endpoint listen on their own ports.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from gateways.edge.admin_forward import forwarding_servicer
from gateways.edge.admin_http_rules import API_DOCS, HTTP_RULES, PREFIX, apisix_error
from gateways.edge.config import EdgeConfig
from gateways.edge.dataplane.process import data_plane
from gateways.edge.metrics import process_metrics
from runtime.auth import authenticator_for
from runtime.config import VERSION
from runtime.errors import PermissionDenied
from runtime.peers import Peer
from runtime.service import ServiceDefinition, bind
from runtime.stores import Stores
from runtime.stores.kv import kv_status
from runtime.telemetry import Metrics
from strata.edge.v1 import admin_pb2, admin_pb2_grpc

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


@web.middleware
async def admin_key_sources(request: web.Request, handler: Any) -> web.StreamResponse:
    """APISIX reads the admin key from query `api_key`, else header `X-API-KEY`, else cookie
    `x_api_key`; the guard reads the header. `HEAD /apisix/admin` is the keyless liveness
    probe."""
    if request.method == "HEAD" and request.path == PREFIX:
        return web.Response()
    key = request.query.get("api_key") or request.cookies.get("x_api_key")
    if key and "X-API-KEY" not in request.headers:
        headers = CIMultiDict(request.headers)
        headers["X-API-KEY"] = key
        request = request.clone(headers=headers)
    return await handler(request)  # type: ignore[no-any-return]


def build(
    config: EdgeConfig,
    stores: Stores,
    *,
    proxy_port: int | None = None,
    metrics_port: int | None = None,
) -> ServiceDefinition:
    metrics = Metrics(SERVICE)
    controlplane = Peer(config.controlplane_grpc, config.master_key, config.grpc_deadline_secs)
    admin = forwarding_servicer(
        admin_pb2_grpc.EdgeConfigServiceServicer,
        admin_pb2.DESCRIPTOR.services_by_name["EdgeConfigService"],
        controlplane,
    )

    async def close() -> None:
        await controlplane.close()
        await stores.close()

    # The plugins' metrics of every data-plane process (one view when the primary has set
    # PROMETHEUS_MULTIPROC_DIR for itself and its workers), after the primary's own.
    edge_metrics = process_metrics()
    plane = data_plane(config, stores, proxy_port)

    async def prometheus(request: web.Request) -> web.Response:
        return web.Response(
            body=metrics.exposition() + edge_metrics.exposition(),
            headers={"Content-Type": "text/plain; version=0.0.4"},
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
        bindings=[bind(admin_pb2_grpc, admin)],
        http_rules=HTTP_RULES,
        info={
            "service": SERVICE,
            "version": VERSION,
            "endpoints": {
                "/apisix/admin/{kind}": "routes, services, upstreams, consumers, "
                "consumer_groups, global_rules, plugin_configs (APISIX Admin API v3)",
                "/apisix/admin/plugins/list": "enabled plugins",
            },
        },
        health=health,
        authenticator=authenticator_for(config, admin_api_key=config.admin_api_key),
        metrics=metrics,
        envelope=apisix_error,
        listeners=plane.listeners,
        extra_apps=[
            (config.metrics_port if metrics_port is None else metrics_port, metrics_app),
        ],
        # The network first (403), then the key (401), as APISIX's allow_admin.
        middlewares=[admin_network_guard(config.admin_allow_cidrs), admin_key_sources],
        on_startup=plane.on_startup,
        on_cleanup=[close, *plane.on_cleanup],
        on_reload=plane.on_reload,
        client_max_size=config.max_body_bytes,
        any_content_type=True,  # APISIX reads any admin body as JSON
        api=API_DOCS,
    )
