"""The control plane's public JSON routes, bound to the RPCs of `strata.controlplane.v1`.

One row per endpoint of the spec's control plane table and of its "additional endpoints" paragraph;
`/health`, `/metrics` and `/` are served by the runtime, and `LogIngestService/WriteLogBatch` is
internal (gRPC only). Every RPC named here is declared in `proto/strata/controlplane/v1/`; one
not yet implemented answers UNIMPLEMENTED (HTTP 501) through its generated base servicer.

Five answers are not plain proto-JSON and carry a renderer below: the audit query (JSON, or a
raw CSV attachment), the table export (a raw CSV attachment), the provider list (a key source
shows only its variant's fields), and the provider upsert and test (one JSON shape per `status`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from aiohttp import web
from google.protobuf.message import Message

from runtime.errors import StrataError
from runtime.http_rules import HttpRule
from runtime.openapi import ApiDocs, describe_envelope, ref
from runtime.protojson import to_json
from runtime.service import spec_error

if TYPE_CHECKING:
    from strata.controlplane.v1 import audit_pb2, provider_pb2

PKG = "strata.controlplane.v1"


@describe_envelope(
    "OAuthError",
    {
        "type": "object",
        "description": "RFC 6749 section 5.2's error body (`invalid_request`, "
        "`invalid_grant`, `unauthorized_client`, `unsupported_grant_type`, `invalid_target`, …).",
        "required": ["error"],
        "properties": {"error": {"type": "string"}, "error_description": {"type": "string"}},
    },
)
def oauth_error(err: StrataError) -> dict[str, Any]:
    """RFC 6749 section 5.2's error body, which the STS answers in (RFC 8693 section 2.2.2):
    `{error, error_description}`."""
    return {"error": err.error or "invalid_request", "error_description": err.message}


def _csv_response(csv: audit_pb2.CsvFile) -> web.Response:
    """A CSV attachment, sent raw with its file name."""
    return web.Response(
        body=csv.body,
        headers={
            "Content-Type": csv.content_type or "text/csv",
            "Content-Disposition": f"attachment; filename={csv.filename}",
        },
    )


def _render_audit(response: Message) -> dict[str, Any] | web.Response:
    """QueryAuditResponse: `format=csv` → the raw `audit_log.csv`; otherwise {data, rows}."""
    answer = cast("audit_pb2.QueryAuditResponse", response)
    if answer.WhichOneof("answer") == "csv":
        return _csv_response(answer.csv)
    return to_json(answer.log)


def _render_export(response: Message) -> web.Response:
    """ExportTableResponse → the raw `{table}.csv`."""
    return _csv_response(cast("audit_pb2.ExportTableResponse", response).csv)


def _render_providers(response: Message) -> dict[str, Any]:
    """ListProvidersResponse as {providers:[...]}, each `key_source` showing only the fields of
    its variant (`{type:'env_var', var_name}`) rather than every variant's field as null."""
    rendered = to_json(response)
    for provider in rendered["providers"]:
        if provider.get("key_source") is not None:
            source = provider["key_source"]
            provider["key_source"] = {k: v for k, v in source.items() if v is not None}
    return rendered


def _render_provider_saved(response: Message) -> dict[str, Any]:
    """UpsertProviderResponse: {status:'saved', provider} or {status:'error', message}."""
    answer = cast("provider_pb2.UpsertProviderResponse", response)
    if answer.status == "saved":
        return {"status": answer.status, "provider": answer.provider}
    return {"status": answer.status, "message": answer.message}


def _render_provider_test(response: Message) -> dict[str, Any]:
    """TestProviderResponse: {status:'valid', models_discovered, models},
    {status:'invalid', http_status, message} or {status:'error', message}."""
    answer = cast("provider_pb2.TestProviderResponse", response)
    if answer.status == "valid":
        return {
            "status": answer.status,
            "models_discovered": answer.models_discovered,
            "models": list(answer.models),
        }
    if answer.status == "invalid":
        return {
            "status": answer.status,
            "http_status": answer.http_status,
            "message": answer.message,
        }
    return {"status": answer.status, "message": answer.message}


_CSV = {"text/csv": {"schema": {"type": "string"}}}
AUDIT = {
    200: {
        "description": "`format=json` (default): `{data, rows}`; `format=csv`: the attachment "
        "`audit_log.csv`",
        "content": {"application/json": {"schema": ref(f"{PKG}.AuditLog")}, **_CSV},
    }
}
EXPORT = {200: {"description": "the attachment `{table}.csv`", "content": _CSV}}

# One row per endpoint, grouped by resource; kept as a table rather than in ruff's layout.
# fmt: off
HTTP_RULES: tuple[HttpRule, ...] = (
    # Platform health (L1/L2/L3 probes and alerts).
    HttpRule("GET", "/api/health/services", f"{PKG}.PlatformHealthService/ListServiceHealth",
          body=None, response_body="services"),
    HttpRule("GET", "/api/health/alerts", f"{PKG}.PlatformHealthService/ListHealthAlerts",
          body=None, response_body="alerts"),
    # Tenants, their IP allowlist and prompt configuration.
    HttpRule("GET", "/api/tenants", f"{PKG}.TenantService/ListTenants",
          body=None, response_body="tenants"),
    HttpRule("POST", "/api/tenants", f"{PKG}.TenantService/CreateTenant",
          status=201, response_body="tenant", required=("name", "plan")),
    HttpRule("GET", "/api/tenants/{id}", f"{PKG}.TenantService/GetTenant",
          body=None, response_body="tenant"),
    HttpRule("PATCH", "/api/tenants/{id}", f"{PKG}.TenantService/UpdateTenant"),
    HttpRule("DELETE", "/api/tenants/{id}", f"{PKG}.TenantService/DeleteTenant", body=None),
    HttpRule("GET", "/api/tenants/{id}/ip-allowlist", f"{PKG}.TenantService/GetIpAllowlist",
          body=None),
    HttpRule("PUT", "/api/tenants/{id}/ip-allowlist", f"{PKG}.TenantService/PutIpAllowlist"),
    HttpRule("GET", "/api/tenants/{id}/prompt-config", f"{PKG}.TenantService/GetPromptConfig",
          body=None, response_body="config"),
    HttpRule("PUT", "/api/tenants/{id}/prompt-config", f"{PKG}.TenantService/PutPromptConfig",
          body="config", response_body="config"),
    # API keys and the key request workflow.
    HttpRule("GET", "/api/keys", f"{PKG}.ApiKeyService/ListApiKeys",
          body=None, response_body="keys"),
    HttpRule("POST", "/api/keys/request", f"{PKG}.ApiKeyService/RequestApiKey",
          status=201, response_body="key_request",
          required=("name", "tenant_id", "routes", "reason", "email")),
    HttpRule("GET", "/api/keys/requests", f"{PKG}.ApiKeyService/ListKeyRequests",
          body=None, response_body="key_requests"),
    HttpRule("POST", "/api/keys/requests/{id}/approve", f"{PKG}.ApiKeyService/ApproveKeyRequest",
          body=None, credential=True),  # full_key
    HttpRule("POST", "/api/keys/requests/{id}/deny", f"{PKG}.ApiKeyService/DenyKeyRequest",
          body=None),
    HttpRule("DELETE", "/api/keys/{id}", f"{PKG}.ApiKeyService/RevokeApiKey", body=None),
    # Rate limits: the tenant's hierarchy, its override, its per-route overrides.
    HttpRule("GET", "/api/rate-limits/{tenant_id}", f"{PKG}.RateLimitService/GetRateLimitHierarchy",
          body=None, response_body="hierarchy"),
    HttpRule("PUT", "/api/rate-limits/{tenant_id}", f"{PKG}.RateLimitService/PutTenantRateLimit",
          required=("limit",)),
    HttpRule("PUT", "/api/rate-limits/{tenant_id}/routes/{route_id}",
          f"{PKG}.RateLimitService/PutRouteRateLimit", required=("limit",)),
    # Analytics and the agent topology.
    HttpRule("GET", "/api/analytics/traffic", f"{PKG}.AnalyticsService/GetTrafficAnalytics",
          body=None),
    HttpRule("GET", "/api/analytics/llm", f"{PKG}.AnalyticsService/GetLlmAnalytics", body=None),
    HttpRule("GET", "/api/analytics/agents", f"{PKG}.AnalyticsService/GetAgentAnalytics",
          body=None),
    HttpRule("GET", "/api/analytics/consumers", f"{PKG}.AnalyticsService/GetConsumerAnalytics",
          body=None),
    HttpRule("GET", "/api/agent-topology", f"{PKG}.AnalyticsService/GetAgentTopology", body=None),
    # Audit query (JSON or CSV) and table export (CSV).
    HttpRule("GET", "/api/audit", f"{PKG}.AuditService/QueryAudit",
          body=None, render=_render_audit, responses=AUDIT),
    HttpRule("GET", "/api/export/{table}", f"{PKG}.AuditService/ExportTable",
          body=None, render=_render_export, responses=EXPORT),
    # Notifications and delivery preferences.
    HttpRule("GET", "/api/notifications", f"{PKG}.NotificationService/ListNotifications",
          body=None),
    HttpRule("POST", "/api/notifications", f"{PKG}.NotificationService/CreateNotification",
          status=201, required=("tenant_id", "notification_type", "title", "message")),
    HttpRule("POST", "/api/notifications/{id}/read",
          f"{PKG}.NotificationService/MarkNotificationRead", body=None),
    HttpRule("GET", "/api/notifications/preferences",
          f"{PKG}.NotificationService/GetNotificationPreferences",
          body=None, response_body="preferences", credential=True),  # signing_secret
    HttpRule("PUT", "/api/notifications/preferences",
          f"{PKG}.NotificationService/PutNotificationPreferences", body="preferences"),
    # Tenant branding.
    HttpRule("GET", "/api/tenants/{id}/branding", f"{PKG}.BrandingService/GetBranding",
          body=None, response_body="branding"),
    HttpRule("POST", "/api/tenants/{id}/branding", f"{PKG}.BrandingService/UpdateBranding",
          response_body="branding"),
    # Platform settings and license.
    HttpRule("GET", "/api/settings", f"{PKG}.SettingsService/GetSettings",
          body=None, response_body="settings"),
    HttpRule("PUT", "/api/settings", f"{PKG}.SettingsService/PutSettings", body="settings"),
    HttpRule("GET", "/api/license", f"{PKG}.LicenseService/GetLicense", body=None),
    # Edge route lifecycle and canary split.
    # (a missing lifecycle is the spec's `{error:'Invalid lifecycle state'}`, as a wrong one)
    HttpRule("PATCH", "/api/routes/{id}/lifecycle", f"{PKG}.RouteService/UpdateRouteLifecycle"),
    HttpRule("PATCH", "/api/routes/{id}/canary", f"{PKG}.RouteService/UpdateRouteCanary"),
    # LLM providers (platform admins only).
    HttpRule("GET", "/api/providers", f"{PKG}.ProviderService/ListProviders",
          body=None, render=_render_providers),
    HttpRule("POST", "/api/providers", f"{PKG}.ProviderService/UpsertProvider",
          body="provider", render=_render_provider_saved),
    HttpRule("DELETE", "/api/providers/{id}", f"{PKG}.ProviderService/DeleteProvider", body=None),
    HttpRule("POST", "/api/providers/{id}/test", f"{PKG}.ProviderService/TestProvider",
          body=None, render=_render_provider_test),
    # Webhooks.
    HttpRule("GET", "/api/webhooks", f"{PKG}.WebhookService/ListWebhooks", body=None),
    HttpRule("POST", "/api/webhooks", f"{PKG}.WebhookService/CreateWebhook",
          status=201, response_body="webhook", credential=True),  # its secret
    HttpRule("DELETE", "/api/webhooks/{id}", f"{PKG}.WebhookService/DeleteWebhook", body=None),
    # Agent registry (feature-flagged, platform admins only).
    HttpRule("POST", "/api/agents", f"{PKG}.AgentRegistryService/RegisterAgent", body="agent",
          required=("agent_id", "tenant_id")),
    HttpRule("GET", "/api/agents", f"{PKG}.AgentRegistryService/ListAgents", body=None),
    HttpRule("GET", "/api/agents/{agent_id}", f"{PKG}.AgentRegistryService/GetAgent",
          body=None, response_body="agent"),
    HttpRule("DELETE", "/api/agents/{agent_id}", f"{PKG}.AgentRegistryService/DeleteAgent",
          body=None),
    # Token exchange service (feature-flagged; no bearer header).
    HttpRule("POST", "/sts/token", f"{PKG}.TokenExchangeService/ExchangeToken",
             envelope=oauth_error, form=True, json_method="exchange_json", credential=True),
    HttpRule("GET", "/sts/jwks", f"{PKG}.TokenExchangeService/GetJwks", body=None,
             envelope=oauth_error),
)
# fmt: on

API_DOCS = ApiDocs(
    title="Strata control plane",
    description="The control plane: tenants and their plans, API keys, rate limits, analytics "
    "and audit, notifications and webhooks, branding, settings, LLM providers, edge route "
    "lifecycle, the agent registry and the token exchange service (STS, RFC 8693).",
    rules=HTTP_RULES,
    envelope=spec_error,
    file_name="controlplane.json",
)
