"""The MCP side assembled from the service's config and stores: what `app.py` binds and what
the tool-call pipeline uses (`forwarder`, `is_callable`, `store`)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from redis.exceptions import RedisError

from gateways.agent.audit import AuditTrail
from gateways.agent.config import AgentGatewayConfig
from gateways.agent.mcp.auth_config import PlatformClient
from gateways.agent.mcp.forwarder import McpForwarder
from gateways.agent.mcp.metrics import McpMetrics
from gateways.agent.mcp.oauth import OAuthTokens
from gateways.agent.mcp.registry import McpRegistryServicer
from gateways.agent.mcp.secrets import SecretBox, reseal_auth_configs
from gateways.agent.mcp.store import ServerStore
from gateways.agent.mcp.tool_sets import ToolSetWatch
from gateways.agent.mcp.upstream import UpstreamPool
from runtime.keyring import keyring_of
from runtime.stores import Stores
from runtime.telemetry import Metrics

log = logging.getLogger(__name__)


def now_iso() -> str:
    """The current time, ISO 8601 in UTC with seconds (`2025-01-31T12:00:00Z`)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class McpSide:
    def __init__(
        self,
        config: AgentGatewayConfig,
        stores: Stores,
        metrics: Metrics,
        audit: AuditTrail,
    ) -> None:
        self.kv = stores.kv
        self.box = SecretBox(keyring_of(config), config.secrets_key or config.master_key)
        self.store = ServerStore(stores.kv)
        self.pool = UpstreamPool(config.mcp_timeout_secs, development=config.development)
        platform = PlatformClient(config.mcp_client_id, config.mcp_token_endpoint_url)
        self.tokens = OAuthTokens(
            stores.kv,
            self.box,
            platform,
            development=config.development,
            timeout=config.mcp_timeout_secs,
        )
        self.forwarder = McpForwarder(
            self.pool, self.tokens, max_result_bytes=config.mcp_max_result_bytes
        )
        self.metrics = McpMetrics(metrics)
        self.audit = audit
        self.watch = ToolSetWatch(
            self.store,
            self.forwarder,
            self.metrics,
            self.audit,
            interval=config.mcp_relist_secs,
            now=now_iso,
        )
        self.registry = McpRegistryServicer(
            self.store,
            self.forwarder,
            self.pool,
            self.watch,
            self.box,
            platform,
            development=config.development,
            now=now_iso,
        )

    async def start(self) -> None:
        self.watch.start(self.kv)
        try:  # secrets sealed before the keyring, or under an older key (idempotent)
            await reseal_auth_configs(self.kv, self.box)
        except (RedisError, OSError) as exc:
            log.error("MCP client secrets not re-sealed at start", extra={"error": repr(exc)})

    async def close(self) -> None:
        await self.watch.close()
        await self.pool.close()
