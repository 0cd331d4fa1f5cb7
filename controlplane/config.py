"""The control plane's configuration: tenants and keys, the STS, IdP provisioning, and the
peers its platform health view probes."""

from __future__ import annotations

from dataclasses import dataclass

from runtime.config import (
    AgentIdentityConfig,
    EnvironmentConfig,
    grpc_port,
    http_port,
    loopback,
    var,
)


# The two checks import their modules when a value is given: the launcher reads this class to
# plan its processes, and stays small without the STS's and the licence's dependencies.
def load_private_der_b64(value: str) -> object:
    from controlplane.agent_identity.keys import load_private_der_b64 as load

    return load(value)


def check_public_key(value: str) -> None:
    from controlplane.licensing import check_public_key as check

    check(value)


@dataclass(frozen=True, kw_only=True)
class ControlPlaneConfig(AgentIdentityConfig, EnvironmentConfig):
    service = "controlplane"
    http_port: int = http_port(4001)
    grpc_port: int = grpc_port(14001)

    allowed_origins: tuple[str, ...] = var(
        "ALLOWED_ORIGINS", (), "comma-separated CORS origins of the operator and developer portals"
    )
    # IdP provisioning (users and service accounts).
    idp_token_url: str | None = var("IDP_TOKEN_URL", None, "IdP token endpoint")
    idp_admin_url: str | None = var("IDP_ADMIN_URL", None, "IdP admin API of the realm")
    idp_admin_token: str | None = var("IDP_ADMIN_TOKEN", None, "bearer token of the IdP admin API")
    # The STS signer.
    svc_env: str = var("SVC_ENV", "local", "`local` generates ephemeral STS signing keys")
    sts_private_der_b64: str | None = var(
        "STS_ED25519_PRIVATE_DER_B64",
        None,
        "STS Ed25519 signing key (PKCS#8 DER, base64)",
        check=load_private_der_b64,
    )
    sts_token_ttl_secs: int = var(
        "STS_TOKEN_TTL_SECS", 120, "lifetime of STS hop tokens, seconds", bounds=(1, 120)
    )
    # The layers the platform health view probes (gRPC health) and links to (HTTP).
    edge_grpc: str = var("EDGE_GRPC", loopback(19080), "edge proxy gRPC target")
    ai_gateway_grpc: str = var("AI_GATEWAY_GRPC", loopback(14000), "AI gateway gRPC target")
    agent_gateway_grpc: str = var(
        "AGENT_GATEWAY_GRPC", loopback(15001), "agent gateway gRPC target"
    )
    edge_url: str = var("EDGE_URL", loopback(9080, "http://"), "edge proxy data plane URL")
    ai_gateway_url: str = var("AI_GATEWAY_URL", loopback(4000, "http://"), "AI gateway URL")
    agent_gateway_url: str = var(
        "AGENT_GATEWAY_URL", loopback(5001, "http://"), "agent gateway URL"
    )

    edge_admin_url: str = var(
        "EDGE_ADMIN_URL",
        loopback(9180, "http://"),
        "edge Admin API URL (the portal forwards platform administrators' `/apisix/admin/…` calls)",
    )

    # The portal (controlplane/portal): OAuth 2.0 code flow with PKCE against the IdP.
    portal_client_id: str = var(
        "PORTAL_CLIENT_ID", "strata-portal", "the portal's public OAuth client at the IdP"
    )
    portal_public_url: str | None = var(
        "PORTAL_PUBLIC_URL",
        None,
        "the portal's public origin behind a proxy (`https://strata.example.com`): its OAuth "
        "redirect URI is this + `/portal/callback`; unset: the origin each request arrived at",
    )
    portal_authorization_url: str | None = var(
        "PORTAL_AUTHORIZATION_URL",
        None,
        "the IdP's authorization endpoint as browsers reach it (unset: IDP_ISSUER + "
        "`/protocol/openid-connect/auth`)",
    )
    portal_session_max_secs: int = var(
        "PORTAL_SESSION_MAX_SECS",
        12 * 3600,
        "longest life of a portal session, seconds (it ends sooner when the IdP's refresh "
        "token does)",
        bounds=(60, 30 * 86400),
    )
    portal_static_dir: str | None = var(
        "PORTAL_STATIC_DIR",
        None,
        "directory the portal's pages are served from (unset: controlplane/portal/static)",
    )

    # The edge configuration (served to the edge's admin front door and, over xDS, its workers).
    admin_api_key: str | None = var("ADMIN_API_KEY", None, "edge admin API key (`X-API-KEY`)")
    mock_backend_url: str = var(
        "MOCK_BACKEND_URL", loopback(8081, "http://"), "mock backend URL (reference edge routes)"
    )
    edge_config_poll_secs: float = var(
        "EDGE_CONFIG_POLL_SECS",
        2.0,
        "seconds between edge configuration revision polls (besides change notifications)",
        bounds=(0.1, 60),
    )

    analytics_owner: bool = var(
        "CONTROLPLANE_ANALYTICS_OWNER",
        True,
        "`off` with an embedded chDB: another control plane replica owns its directory; this "
        "one ships its rows to CONTROLPLANE_GRPC and answers analytics queries 503",
    )

    # Notification delivery (controlplane/notifications): e-mail over SMTP, and the worker.
    smtp_host: str | None = var(
        "SMTP_HOST", None, "SMTP server of notification e-mail (unset: e-mail is not sent)"
    )
    smtp_port: int = var("SMTP_PORT", 587, "SMTP server port", bounds=(1, 65535))
    smtp_from: str = var("SMTP_FROM", "strata@localhost", "sender address of notification e-mail")
    smtp_user: str | None = var("SMTP_USER", None, "SMTP user name (no AUTH when unset)")
    smtp_password: str | None = var("SMTP_PASSWORD", None, "SMTP password")
    smtp_starttls: str = var(
        "SMTP_STARTTLS",
        "required",
        "STARTTLS before sending (`opportunistic`: when the server offers it)",
        choices=("required", "opportunistic", "off"),
    )
    notify_delivery: bool = var(
        "NOTIFY_DELIVERY", True, "`off`: this process runs no notification delivery worker"
    )
    notify_max_attempts: int = var(
        "NOTIFY_MAX_ATTEMPTS", 6, "delivery attempts per target before giving up", bounds=(1, 100)
    )
    notify_retry_base_secs: float = var(
        "NOTIFY_RETRY_BASE_SECS",
        2.0,
        "delay before the first retry, seconds (doubled per attempt, with jitter)",
        bounds=(0.001, 3600),
    )
    notify_retry_max_secs: float = var(
        "NOTIFY_RETRY_MAX_SECS",
        600.0,
        "longest delay between retries, seconds",
        bounds=(0.001, 86400),
    )
    notify_timeout_secs: float = var(
        "NOTIFY_TIMEOUT_SECS", 10.0, "timeout of one delivery attempt, seconds", bounds=(0.1, 120)
    )
    notify_poll_secs: float = var(
        "NOTIFY_POLL_SECS",
        1.0,
        "seconds between checks of the delivery queue (new items in this process wake it at once)",
        bounds=(0.01, 60),
    )
    notify_claim_idle_secs: float = var(
        "NOTIFY_CLAIM_IDLE_SECS",
        60.0,
        "a delivery another replica took and left unfinished this long is taken over, seconds",
        bounds=(1, 86400),
    )
    notify_keep_per_tenant: int = var(
        "NOTIFY_KEEP_PER_TENANT",
        1000,
        "notifications kept per tenant (the oldest are dropped)",
        bounds=(1, 1_000_000),
    )

    # Platform health (the background probes behind /api/health/alerts) and the license.
    health_probe_interval_secs: float = var(
        "HEALTH_PROBE_INTERVAL_SECS",
        30.0,
        "seconds between background probes of the layers and stores (health alerts and "
        "`health_degraded` notifications); 0 probes only when asked",
        bounds=(0, 86400),
    )
    license_key: str | None = var(
        "LICENSE_KEY", None, "platform license (a signed JWT); none: the community tier"
    )
    license_public_key: str | None = var(
        "LICENSE_PUBLIC_KEY",
        None,
        "public key verifying LICENSE_KEY (PEM, or base64 of its DER SubjectPublicKeyInfo)",
        check=check_public_key,
    )

    def problems(self) -> list[str]:
        problems = super().problems()
        if self.notify_claim_idle_secs < 2 * self.notify_timeout_secs:
            problems.append(
                "NOTIFY_CLAIM_IDLE_SECS must be at least twice NOTIFY_TIMEOUT_SECS (a delivery "
                "still running must not be taken over by another replica)"
            )
        if self.notify_retry_max_secs < self.notify_retry_base_secs:
            problems.append("NOTIFY_RETRY_MAX_SECS must not be below NOTIFY_RETRY_BASE_SECS")
        if self.smtp_password and not self.smtp_user:
            problems.append("SMTP_PASSWORD is set without SMTP_USER")
        if (
            self.agent_identity
            and not self.sts_private_der_b64
            and self.svc_env != "local"
            and not self.sts_signing_key
        ):
            problems.append(
                "SVC_AGENT_IDENTITY=on needs an STS signing key: STS_ED25519_PRIVATE_DER_B64 "
                "(or SVC_ENV=local for a generated one, or the legacy STS_SIGNING_KEY)"
            )
        if self.license_key and not self.license_public_key:
            problems.append("LICENSE_KEY is set without LICENSE_PUBLIC_KEY to verify it")
        return problems

    @property
    def owns_analytics(self) -> bool:
        """The control plane owns chDB, and writes to a remote ClickHouse like everyone. A
        replica beside the chDB owner (`strata up --replicas N`) ships to it instead."""
        return self.analytics_owner or not self.clickhouse_url.startswith("chdb://")
