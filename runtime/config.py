"""Service configuration, read once from the spec's environment variables.

`Settings.from_env(environ, service)` is called in each service's `__main__` and passed down;
nothing below `__main__` reads the environment. Every problem is collected into one
`ConfigError`, so a misconfigured deployment learns all of its mistakes in one start.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

VERSION = "0.1.0"

# Default ports per service: (HTTP front door, gRPC). gRPC sits 10000 above the HTTP port.
PORTS: dict[str, tuple[int, int]] = {
    "controlplane": (4001, 14001),
    "ai-gateway": (4000, 14000),
    "agent-gateway": (5001, 15001),
    "edge-proxy": (9080, 19080),
}


# The edge admin API is reachable only from private networks (spec: edge fixed settings).
PRIVATE_CIDRS = "127.0.0.0/8,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,::1/128,fc00::/7"


class ConfigError(Exception):
    """Raised with every configuration problem found, one per line."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid configuration:\n  " + "\n  ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Settings:
    service: str
    environment: str  # ENVIRONMENT: development allows manual provider keys
    svc_env: str  # SVC_ENV: `local` generates ephemeral STS keys
    host: str
    http_port: int
    grpc_port: int
    admin_port: int  # edge admin API
    metrics_port: int  # edge Prometheus endpoint
    admin_allow_cidrs: tuple[str, ...]  # who may reach the edge admin API
    # Stores
    redis_url: str
    clickhouse_url: str
    clickhouse_password: str | None
    milvus_uri: str
    # Identity
    idp_jwks_url: str
    idp_issuer: str | None
    idp_token_url: str | None
    idp_admin_url: str | None
    idp_admin_token: str | None
    master_key: str
    admin_api_key: str | None
    allowed_origins: tuple[str, ...]
    # Agent identity and STS
    agent_identity: bool
    sts_private_der_b64: str | None
    sts_jwks_url: str | None
    sts_signing_key: str | None
    sts_issuer: str
    sts_token_ttl_secs: int
    # Peers (gRPC targets and HTTP URLs)
    controlplane_grpc: str
    ai_gateway_grpc: str
    agent_gateway_grpc: str
    edge_grpc: str
    controlplane_url: str
    ai_gateway_url: str
    agent_gateway_url: str
    edge_url: str
    # Behaviour
    grpc_deadline_secs: float
    max_body_bytes: int
    log_level: str
    otel_endpoint: str | None

    @property
    def owns_analytics(self) -> bool:
        """chDB lets one process own its data directory: the control plane. A remote
        ClickHouse serves many writers, so then every service writes directly."""
        return self.service == "controlplane" or not self.clickhouse_url.startswith("chdb://")

    @classmethod
    def from_env(cls, environ: Mapping[str, str], service: str) -> Settings:
        problems: list[str] = []
        env = _Reader(environ, problems)
        http_default, grpc_default = PORTS[service]
        agent_identity = env.text("SVC_AGENT_IDENTITY", "off")
        if agent_identity not in ("on", "off"):
            problems.append(f"SVC_AGENT_IDENTITY must be 'on' or 'off', got {agent_identity!r}")
        master_key = env.text("MASTER_KEY", "")
        if not master_key:
            problems.append("MASTER_KEY is required (the platform master key)")
        admin_api_key = env.optional("ADMIN_API_KEY")
        if service == "edge-proxy" and not admin_api_key:
            problems.append("ADMIN_API_KEY is required by the edge proxy admin API")
        settings = cls(
            service=service,
            environment=env.text("ENVIRONMENT", "development"),
            svc_env=env.text("SVC_ENV", "local"),
            host=env.text("BIND_HOST", "127.0.0.1"),
            http_port=env.integer("HTTP_PORT", http_default),
            grpc_port=env.integer("GRPC_PORT", grpc_default),
            admin_port=env.integer("ADMIN_PORT", 9180),
            metrics_port=env.integer("METRICS_PORT", 9091),
            admin_allow_cidrs=tuple(
                c.strip()
                for c in env.text("ADMIN_ALLOW_CIDRS", PRIVATE_CIDRS).split(",")
                if c.strip()
            ),
            redis_url=env.text("REDIS_URL", "redis://127.0.0.1:6379/0"),
            clickhouse_url=env.text("CLICKHOUSE_URL", "chdb://data/clickhouse"),
            clickhouse_password=env.optional("CLICKHOUSE_PASSWORD"),
            milvus_uri=env.text("MILVUS_URI", "data/milvus.db"),
            idp_jwks_url=env.text(
                "IDP_JWKS_URL", "http://127.0.0.1:8080/realms/strata/protocol/openid-connect/certs"
            ),
            idp_issuer=env.optional("IDP_ISSUER"),
            idp_token_url=env.optional("IDP_TOKEN_URL"),
            idp_admin_url=env.optional("IDP_ADMIN_URL"),
            idp_admin_token=env.optional("IDP_ADMIN_TOKEN"),
            master_key=master_key,
            admin_api_key=admin_api_key,
            allowed_origins=tuple(
                o.strip() for o in env.text("ALLOWED_ORIGINS", "").split(",") if o.strip()
            ),
            agent_identity=agent_identity == "on",
            sts_private_der_b64=env.optional("STS_ED25519_PRIVATE_DER_B64"),
            sts_jwks_url=env.optional("STS_JWKS_URL"),
            sts_signing_key=env.optional("STS_SIGNING_KEY"),
            sts_issuer=env.text("STS_ISSUER", "http://127.0.0.1:4001/sts"),
            sts_token_ttl_secs=env.integer("STS_TOKEN_TTL_SECS", 120),
            controlplane_grpc=env.text("CONTROLPLANE_GRPC", "127.0.0.1:14001"),
            ai_gateway_grpc=env.text("AI_GATEWAY_GRPC", "127.0.0.1:14000"),
            agent_gateway_grpc=env.text("AGENT_GATEWAY_GRPC", "127.0.0.1:15001"),
            edge_grpc=env.text("EDGE_GRPC", "127.0.0.1:19080"),
            controlplane_url=env.text("CONTROLPLANE_URL", "http://127.0.0.1:4001"),
            ai_gateway_url=env.text("AI_GATEWAY_URL", "http://127.0.0.1:4000"),
            agent_gateway_url=env.text("AGENT_GATEWAY_URL", "http://127.0.0.1:5001"),
            edge_url=env.text("EDGE_URL", "http://127.0.0.1:9080"),
            grpc_deadline_secs=env.decimal("GRPC_DEADLINE_SECS", 5.0),
            max_body_bytes=env.integer("MAX_BODY_BYTES", 1024 * 1024),
            log_level=env.text("LOG_LEVEL", "info"),
            otel_endpoint=env.optional("OTEL_EXPORTER_OTLP_ENDPOINT"),
        )
        if settings.sts_token_ttl_secs <= 0 or settings.sts_token_ttl_secs > 120:
            problems.append("STS_TOKEN_TTL_SECS must be between 1 and 120")
        if problems:
            raise ConfigError(problems)
        return settings


class _Reader:
    """Typed reads from an environment mapping that record problems instead of raising."""

    def __init__(self, environ: Mapping[str, str], problems: list[str]) -> None:
        self._env = environ
        self._problems = problems

    def text(self, name: str, default: str) -> str:
        return self._env.get(name, "") or default

    def optional(self, name: str) -> str | None:
        return self._env.get(name) or None

    def integer(self, name: str, default: int) -> int:
        return self._cast(name, default, int)

    def decimal(self, name: str, default: float) -> float:
        return self._cast(name, default, float)

    def _cast(self, name: str, default: Any, cast: Callable[[str], Any]) -> Any:
        raw = self._env.get(name)
        if not raw:
            return default
        try:
            return cast(raw)
        except ValueError:
            kind = "an integer" if cast is int else "a number"
            self._problems.append(f"{name} must be {kind}, got {raw!r}")
            return default
