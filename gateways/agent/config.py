"""The agent gateway's configuration: its ports and how it verifies STS hop tokens."""

from __future__ import annotations

from dataclasses import dataclass

from runtime.config import AgentIdentityConfig, grpc_port, http_port, var


@dataclass(frozen=True, kw_only=True)
class AgentGatewayConfig(AgentIdentityConfig):
    service = "agent-gateway"
    http_port: int = http_port(5001)
    grpc_port: int = grpc_port(15001)

    sts_jwks_url: str | None = var(
        "STS_JWKS_URL", None, "STS key set (EdDSA hop tokens); unset: HS256 with STS_SIGNING_KEY"
    )
