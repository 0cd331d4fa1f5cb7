"""The agent gateway's configuration: its ports, how it verifies STS hop tokens, how it talks
to upstream MCP servers, and how long its human-facing state (approvals, elicitations) and A2A
forwards may take."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from runtime.config import AgentIdentityConfig, EnvironmentConfig, grpc_port, http_port, var


def http_url(value: str) -> None:
    """The check of a configured endpoint: an absolute http(s) URL."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL")


def public_origin(value: str) -> None:
    """The check of AGENT_PUBLIC_URL: `http(s)://host[:port]`, nothing after it."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError("must be an origin (scheme://host[:port]) without a path")


@dataclass(frozen=True, kw_only=True)
class AgentGatewayConfig(AgentIdentityConfig, EnvironmentConfig):
    service = "agent-gateway"
    http_port: int = http_port(5001)
    grpc_port: int = grpc_port(15001)

    sts_jwks_url: str | None = var(
        "STS_JWKS_URL", None, "STS key set (EdDSA hop tokens); unset: HS256 with STS_SIGNING_KEY"
    )
    hitl_ttl_secs: int = var(
        "AGENT_HITL_TTL_SECS",
        3600,
        "how long a HITL approval stays pending before it expires (a decision after that is "
        "409), and how long an approval, once granted, may release its held call, seconds",
        bounds=(1, 30 * 86_400),
    )
    elicitation_ttl_secs: int = var(
        "AGENT_ELICITATION_TTL_SECS",
        86_400,
        "how long an elicitation can be answered (and read back), seconds",
        bounds=(1, 30 * 86_400),
    )
    a2a_timeout_secs: float = var(
        "A2A_TIMEOUT_SECS",
        30.0,
        "timeout of one A2A `message/send` forward to a target agent, seconds (then 502)",
        bounds=(0.01, 3600),
    )
    # Upstream MCP servers (gateways/agent/mcp/).
    mcp_timeout_secs: float = var(
        "AGENT_MCP_TIMEOUT_SECS",
        30.0,
        "timeout of one upstream MCP request (connect, handshake, tools/list, tools/call), seconds",
        bounds=(0.01, 3600),
    )
    mcp_max_result_bytes: int = var(
        "AGENT_MCP_MAX_RESULT_BYTES",
        4 * 1024 * 1024,
        "largest tool result an upstream MCP server may answer, bytes of JSON or of its event "
        "stream; a larger one is a 502 `upstream_result_too_large` (the call counts: it ran)",
        bounds=(1024, 256 * 1024 * 1024),
    )
    tool_result_reserve_tokens: int = var(
        "AGENT_TOOL_RESULT_RESERVE_TOKENS",
        512,
        "tokens a session call reserves for its result, beyond its arguments', while it runs "
        "(at most what the session's budget has left); settled to the real use after it",
        bounds=(0, 10_000_000),
    )
    mcp_relist_secs: float = var(
        "AGENT_MCP_RELIST_SECS",
        300.0,
        "seconds between re-listings of every MCP server's tools (rug-pull detection; one "
        "replica per round); 0 turns the schedule off (on-demand `?refresh=true` remains)",
        bounds=(0, 86400),
    )
    public_url: str | None = var(
        "AGENT_PUBLIC_URL",
        None,
        "the gateway's origin as MCP clients reach it (`https://agents.example.com`): `/mcp`'s "
        "OAuth protected resource metadata names `<it>/mcp` as the resource; set it behind a "
        "proxy, an ingress or TLS termination; unset: the scheme and host each request came to",
        check=public_origin,
    )
    mcp_session_ttl_secs: int = var(
        "AGENT_MCP_SESSION_TTL_SECS",
        86_400,
        "how long an MCP session of the gateway's own `/mcp` lives after its last request "
        "(then its `Mcp-Session-Id` answers 404 and the client initializes again), seconds",
        bounds=(1, 30 * 86_400),
    )
    # The platform identity provider's settings for MCP servers, which a server's own auth
    # config overrides (spec: "Per-server auth config").
    mcp_client_id: str | None = var(
        "AGENT_MCP_CLIENT_ID",
        None,
        "OAuth client (client credentials) the gateway uses at the platform identity provider "
        "for MCP servers whose auth config names no `client_id` (the secret is the server's "
        "`client_secret`); unset: `strict` and `permissive` need a per-server `client_id`",
    )
    mcp_token_endpoint: str | None = var(
        "AGENT_MCP_TOKEN_ENDPOINT",
        None,
        "token endpoint for MCP servers whose auth config names neither `token_endpoint` nor "
        "`oauth_url`; unset: the identity provider's, `<issuer>/protocol/openid-connect/token`",
        check=http_url,
    )
    secrets_key: str | None = var(
        "AGENT_SECRETS_KEY",
        None,
        "legacy: the key MCP client secrets were sealed under before STRATA_DATA_KEYS (`v1:` "
        "values, re-sealed under the keyring at start); unset: MASTER_KEY",
    )

    @property
    def mcp_token_endpoint_url(self) -> str:
        """AGENT_MCP_TOKEN_ENDPOINT, else the IdP's token endpoint (Keycloak's layout)."""
        return self.mcp_token_endpoint or f"{self.idp_issuer_url}/protocol/openid-connect/token"

    def problems(self) -> list[str]:
        problems = super().problems()
        if self.agent_identity and not self.sts_jwks_url and not self.sts_signing_key:
            problems.append(
                "SVC_AGENT_IDENTITY=on needs STS_JWKS_URL (EdDSA hop tokens) or the legacy "
                "STS_SIGNING_KEY (HS256) to verify hop tokens"
            )
        return problems
