"""The control plane service: its servicers, routes and meta endpoints.

Servicers that exist replace the generated base classes; every other RPC of
`strata.controlplane.v1` is still served, and answers UNIMPLEMENTED (its route 501).
The agent registry and the STS exist only when `SVC_AGENT_IDENTITY=on` (404 otherwise).
"""

from __future__ import annotations

from typing import Any

from controlplane.branding import BrandingServicer
from controlplane.config import ControlPlaneConfig
from controlplane.edge_config import EdgeConfiguration
from controlplane.edge_config.servicer import EdgeConfigServicer
from controlplane.edge_routes import RouteServicer
from controlplane.http_rules import HTTP_RULES
from controlplane.licensing import LicenseServicer
from controlplane.log_ingest import LogIngestServicer
from controlplane.platform_health import PlatformHealthServicer, Probe, log_health_degraded
from controlplane.platform_settings import SettingsServicer
from runtime.auth import authenticator_for
from runtime.config import VERSION
from runtime.service import Binding, ServiceDefinition, bind, unimplemented
from runtime.stores import Stores
from runtime.stores.kv import kv_status
from runtime.telemetry import Metrics
from strata.controlplane.v1 import (
    agent_registry_pb2_grpc,
    analytics_pb2_grpc,
    api_key_pb2_grpc,
    audit_pb2_grpc,
    branding_pb2_grpc,
    license_pb2_grpc,
    log_ingest_pb2_grpc,
    notification_pb2_grpc,
    platform_health_pb2_grpc,
    provider_pb2_grpc,
    rate_limit_pb2_grpc,
    route_pb2_grpc,
    settings_pb2_grpc,
    sts_pb2_grpc,
    tenant_pb2_grpc,
    webhook_pb2_grpc,
)

SERVICE = "controlplane"
PKG = "strata.controlplane.v1"
# Behind the SVC_AGENT_IDENTITY feature flag (spec: 404 while the flag is not `on`).
FLAGGED = frozenset({f"{PKG}.AgentRegistryService", f"{PKG}.TokenExchangeService"})


def build(config: ControlPlaneConfig, stores: Stores) -> ServiceDefinition:
    metrics = Metrics(SERVICE)
    edge_config = EdgeConfiguration.build(config, stores, metrics)
    health_servicer = PlatformHealthServicer(
        [
            Probe("L1", "edge-proxy", config.edge_grpc, config.edge_url),
            Probe("L2", "ai-gateway", config.ai_gateway_grpc, config.ai_gateway_url),
            Probe("L3", "agent-gateway", config.agent_gateway_grpc, config.agent_gateway_url),
        ],
        config.master_key,
        config.grpc_deadline_secs,
        kv=stores.kv,
        analytics=stores.analytics,
        # The `health_degraded` notification of each layer transition: logged until the
        # notification service's raise_notification is passed here.
        notify=log_health_degraded,
        interval_secs=config.health_probe_interval_secs,
    )
    settings_servicer = SettingsServicer(stores.kv, stores.analytics)
    implemented = {
        b.name: b
        for b in (
            bind(log_ingest_pb2_grpc, LogIngestServicer(stores.sink)),
            bind(platform_health_pb2_grpc, health_servicer),
            bind(branding_pb2_grpc, BrandingServicer(stores.kv)),
            bind(settings_pb2_grpc, settings_servicer),
            bind(license_pb2_grpc, LicenseServicer(config.license_key, config.license_public_key)),
            bind(route_pb2_grpc, RouteServicer(EdgeConfigServicer(edge_config.store), stores.sink)),
        )
    }
    declared = unimplemented(
        tenant_pb2_grpc,
        api_key_pb2_grpc,
        rate_limit_pb2_grpc,
        analytics_pb2_grpc,
        audit_pb2_grpc,
        notification_pb2_grpc,
        branding_pb2_grpc,
        settings_pb2_grpc,
        route_pb2_grpc,
        provider_pb2_grpc,
        license_pb2_grpc,
        webhook_pb2_grpc,
        agent_registry_pb2_grpc,
        sts_pb2_grpc,
        log_ingest_pb2_grpc,
        platform_health_pb2_grpc,
    )
    bindings: list[Binding] = [
        implemented.get(b.name, b)
        for b in declared
        if config.agent_identity or b.name not in FLAGGED
    ]
    bindings += edge_config.bindings
    served = {b.name for b in bindings}

    async def health() -> dict[str, Any]:
        redis = await kv_status(stores.kv)
        return {
            "status": "healthy" if redis == "connected" else "degraded",
            "service": SERVICE,
            "version": VERSION,
            "checks": {"redis": redis},
        }

    async def migrate() -> None:
        if stores.analytics is not None:
            await stores.analytics.migrate()
            await settings_servicer.apply_stored_retention()

    async def close() -> None:
        await edge_config.stop()
        await health_servicer.close()
        await stores.close()

    return ServiceDefinition(
        name=SERVICE,
        bindings=bindings,
        http_rules=[r for r in HTTP_RULES if r.service in served],
        info={
            "service": SERVICE,
            "version": VERSION,
            "endpoints": {
                "/health": "service health",
                "/metrics": "Prometheus metrics",
                "/api/*": "control plane API",
                "/sts/*": "token exchange (flagged)",
            },
        },
        health=health,
        # The edge admin key opens EdgeConfigService only (the edge's :9180 forwards it).
        authenticator=authenticator_for(config, admin_api_key=config.admin_api_key),
        metrics=metrics,
        on_startup=[migrate, edge_config.start, health_servicer.start],
        on_cleanup=[close],
        client_max_size=config.max_body_bytes,
        allowed_origins=config.allowed_origins,
    )
