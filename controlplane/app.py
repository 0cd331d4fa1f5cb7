"""The control plane service: its servicers, routes and meta endpoints.

Servicers that exist replace the generated base classes; every other RPC of
`strata.controlplane.v1` is still served, and answers UNIMPLEMENTED (its route 501).
The agent registry and the STS exist only when `SVC_AGENT_IDENTITY=on` (404 otherwise).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from redis.exceptions import RedisError

from controlplane.agent_identity.keys import StsKeys
from controlplane.agent_identity.registry import AgentRegistryServicer
from controlplane.agent_identity.sts import TABLE as STS_TABLE
from controlplane.agent_identity.sts import TokenExchangeServicer
from controlplane.analytics import AnalyticsServicer, AuditServicer
from controlplane.api_keys import ApiKeyServicer
from controlplane.branding import BrandingServicer
from controlplane.config import ControlPlaneConfig
from controlplane.edge_config import EdgeConfiguration
from controlplane.edge_routes import RouteServicer
from controlplane.http_rules import API_DOCS, HTTP_RULES
from controlplane.licensing import LicenseServicer
from controlplane.log_ingest import LogIngestServicer
from controlplane.notifications.delivery import DeliveryWorker
from controlplane.notifications.servicer import NotificationServicer, WebhookServicer
from controlplane.platform_health import PlatformHealthServicer, Probe, health_degraded_notifier
from controlplane.platform_settings import SettingsServicer
from controlplane.portal import Portal
from controlplane.providers import ProviderServicer
from controlplane.rate_limits import RateLimitServicer
from controlplane.secrets_at_rest import protect_secrets_at_rest
from controlplane.store_layout import rename_store_keys
from controlplane.tenancy import mark_tenants
from controlplane.tenants import TenantServicer
from runtime.auth import authenticator_for
from runtime.background import RowWriter
from runtime.config import VERSION
from runtime.errors import Unavailable
from runtime.keyring import keyring_of
from runtime.peers import Peer
from runtime.service import Binding, ServiceDefinition, bind, unimplemented
from runtime.stores import Stores
from runtime.stores.analytics import Analytics
from runtime.stores.kv import kv_status, ready_kv
from runtime.stores.outbox import Outbox
from runtime.telemetry import Metrics
from runtime.tenant_realms import tenant_realms_for
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

log = logging.getLogger(__name__)

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
        notify=health_degraded_notifier(stores.kv),  # health_degraded per layer transition
        interval_secs=config.health_probe_interval_secs,
    )
    tenants = TenantServicer(config, stores, edge_config.servicer)
    delivery = DeliveryWorker(config, stores.kv, metrics)
    settings_servicer = SettingsServicer(
        stores.kv, stores.analytics, config.development, keyring_of(config)
    )
    # The edge admin key opens EdgeConfigService only (the edge's :9180 forwards it).
    realms = tenant_realms_for(config, stores.kv)  # tokens of tenants' own realms
    authenticator = authenticator_for(config, admin_api_key=config.admin_api_key, realms=realms)
    sts_audit = RowWriter(stores.sink, STS_TABLE, Outbox(stores.kv))
    sts_keys = StsKeys(
        stores.kv,
        private_der_b64=config.sts_private_der_b64,
        local=config.svc_env == "local",
        hs256_secret=config.sts_signing_key,
        ttl_secs=config.sts_token_ttl_secs,
    )
    sts = TokenExchangeServicer(
        stores.kv,
        sts_keys,
        authenticator,
        issuer=config.sts_issuer,
        ttl_secs=config.sts_token_ttl_secs,
        audit=sts_audit,
        metrics=metrics,
    )
    portal = Portal.build(config, stores, authenticator)
    api_keys = ApiKeyServicer(stores.kv, edge_config.servicer, stores.analytics)
    providers = ProviderServicer(
        stores.kv,
        config.development,
        keyring_of(config),
        Peer(config.ai_gateway_grpc, config.master_key, config.grpc_deadline_secs),
    )
    implemented = {
        b.name: b
        for b in (
            bind(log_ingest_pb2_grpc, LogIngestServicer(stores.sink)),
            bind(platform_health_pb2_grpc, health_servicer),
            bind(analytics_pb2_grpc, AnalyticsServicer(stores.analytics)),
            bind(audit_pb2_grpc, AuditServicer(stores.analytics)),
            bind(api_key_pb2_grpc, api_keys),
            bind(rate_limit_pb2_grpc, RateLimitServicer(stores.kv, edge_config.store)),
            bind(tenant_pb2_grpc, tenants),
            bind(notification_pb2_grpc, NotificationServicer(config, stores.kv)),
            bind(webhook_pb2_grpc, WebhookServicer(config, stores.kv)),
            bind(branding_pb2_grpc, BrandingServicer(stores.kv)),
            bind(settings_pb2_grpc, settings_servicer),
            bind(license_pb2_grpc, LicenseServicer(config.license_key, config.license_public_key)),
            bind(route_pb2_grpc, RouteServicer(edge_config.servicer, stores.sink)),
            bind(provider_pb2_grpc, providers),
            bind(agent_registry_pb2_grpc, AgentRegistryServicer(stores.kv)),
            bind(sts_pb2_grpc, sts),
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

    async def migrate_analytics(analytics: Analytics) -> None:
        # An unreachable analytics store does not stop the control plane: its analytics
        # endpoints answer 503 and apply the migrations on their first successful query.
        try:
            await analytics.migrate()
            await settings_servicer.apply_stored_retention()
        except Unavailable as exc:
            log.error("analytics store unreachable at start", extra={"error": exc.message})
            return
        released = await analytics.release_engine_pages()
        if released:
            log.info(
                "analytics engine started", extra={"startup_pages_released_mb": released // 1024}
            )

    migrating: list[asyncio.Task[None]] = []

    async def migrate() -> None:
        # In the background: the control plane answers meanwhile (starting embedded chDB and
        # migrating takes a second or two). The store runs its calls one at a time, in order,
        # and the migration is its first (queued before this returns), so every analytics
        # call waits for it as it did when this step waited itself.
        if stores.analytics is not None:
            migrating.append(asyncio.create_task(migrate_analytics(stores.analytics)))
            await asyncio.sleep(0)  # the task runs up to its first call on the store's thread

    async def publish_sts_key() -> None:
        # The key set lists this process's key before its first token (also done per token).
        if config.agent_identity:
            try:
                await sts_keys.ensure_published()
            except (RedisError, OSError) as exc:
                log.error("STS key not published at start", extra={"error": repr(exc)})

    async def rename_keys() -> None:
        # Durable keys written under names from before the cluster-safe layout (idempotent).
        try:
            await rename_store_keys(stores.kv)
        except (RedisError, OSError) as exc:
            log.error("store key layout not checked at start", extra={"error": repr(exc)})

    async def mark_existing_tenants() -> None:
        # Tenants created before their markers existed get theirs (idempotent).
        try:
            await mark_tenants(stores.kv)
        except (RedisError, OSError) as exc:
            log.error("tenant markers not checked at start", extra={"error": repr(exc)})

    async def project_api_keys() -> None:
        # Keys issued before the gateways' projection existed get their entries (idempotent).
        try:
            await api_keys.project_all()
        except (RedisError, OSError) as exc:
            log.error("API key projection not checked at start", extra={"error": repr(exc)})

    async def protect_secrets() -> None:
        # Secrets stored in clear before, or under an older data key (idempotent).
        await protect_secrets_at_rest(stores.kv, edge_config.servicer, providers, settings_servicer)

    async def start_delivery() -> None:
        if config.notify_delivery:
            await delivery.start()

    async def close() -> None:
        for task in migrating:
            task.cancel()
        await delivery.stop()
        await sts_audit.flush()
        await edge_config.stop()
        await health_servicer.close()
        await tenants.close()
        await providers.close()
        await portal.close()
        await realms.stop()
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
                "/portal/": "the web portal",
            },
        },
        health=health,
        authenticator=authenticator,
        metrics=metrics,
        routes=portal.routes,
        on_startup=[
            lambda: ready_kv(stores.kv),  # the slot map before the first burst
            rename_keys,
            mark_existing_tenants,
            migrate,
            stores.start_drain,  # the analytics outbox into ClickHouse, if this one writes it
            edge_config.start,
            start_delivery,
            health_servicer.start,
            publish_sts_key,
            project_api_keys,
            protect_secrets,
            realms.start,
        ],
        on_cleanup=[close],
        client_max_size=config.max_body_bytes,
        allowed_origins=config.allowed_origins,
        api=API_DOCS,
    )
