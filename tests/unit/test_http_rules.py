"""Every public JSON endpoint is bound to a declared RPC, and the declared API is fully bound."""

import importlib
import pkgutil
import re

import pytest
from aiohttp import web
from google.protobuf import descriptor_pool

import strata
from controlplane.http_rules import HTTP_RULES as CONTROLPLANE
from gateways.agent.http_rules import HTTP_RULES as AGENT
from gateways.ai.http_rules import HTTP_RULES as AI
from gateways.ai.http_rules import STREAM_CHAT
from gateways.edge.admin_http_rules import HTTP_RULES as EDGE
from runtime.frontdoor import method_descriptor
from runtime.http_rules import HttpRule

# Load every generated module so the descriptor pool knows the whole declared API.
for module in pkgutil.walk_packages(strata.__path__, "strata."):
    if module.name.endswith("_pb2"):
        importlib.import_module(module.name)

TABLES = {
    "controlplane": CONTROLPLANE,
    "agent": AGENT,
    "ai": (*AI, STREAM_CHAT),
    "edge": EDGE,
}
INTERNAL_RPCS = {
    "strata.controlplane.v1.LogIngestService/WriteLogBatch",
    "strata.ai.v1.ProbeService/ProbeProvider",
}

# Spec endpoints (method, path) per service, with `:param` written as `{param}`.
SPEC_ENDPOINTS = {
    "ai": {
        ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions"),
        ("GET", "/v1/budget/{tenant_id}"),
        ("POST", "/v1/budget/{tenant_id}"),
    },
    "agent": {
        ("GET", "/v1/mcp/servers"),
        ("POST", "/v1/mcp/servers"),
        ("GET", "/v1/mcp/servers/{server_id}"),
        ("DELETE", "/v1/mcp/servers/{server_id}"),
        ("GET", "/v1/mcp/servers/{server_id}/auth"),
        ("PUT", "/v1/mcp/servers/{server_id}/auth"),
        ("GET", "/v1/mcp/servers/{server_id}/tools"),
        ("GET", "/v1/mcp/tools"),
        ("POST", "/v1/mcp/tools/call"),
        ("GET", "/v1/a2a/agents"),
        ("POST", "/v1/a2a/agents"),
        ("POST", "/v1/a2a/send"),
        ("GET", "/v1/a2a/tasks/{task_id}"),
        ("GET", "/v1/sessions"),
        ("POST", "/v1/sessions"),
        ("GET", "/v1/sessions/{session_id}"),
        ("DELETE", "/v1/sessions/{session_id}"),
        ("GET", "/v1/sessions/{session_id}/tools"),
        ("POST", "/v1/sessions/{session_id}/execute"),
        ("GET", "/v1/policies/{tenant_id}"),
        ("PUT", "/v1/policies/{tenant_id}"),
        ("GET", "/v1/hitl/pending"),
        ("POST", "/v1/hitl/{approval_id}/approve"),
        ("POST", "/v1/hitl/{approval_id}/deny"),
        ("POST", "/v1/elicit"),
        ("POST", "/v1/elicit/{elicit_id}/respond"),
    },
    "controlplane": {
        ("GET", "/api/health/services"),
        ("GET", "/api/health/alerts"),
        ("GET", "/api/tenants"),
        ("POST", "/api/tenants"),
        ("GET", "/api/tenants/{id}"),
        ("PATCH", "/api/tenants/{id}"),
        ("DELETE", "/api/tenants/{id}"),
        ("GET", "/api/keys"),
        ("POST", "/api/keys/request"),
        ("GET", "/api/keys/requests"),
        ("POST", "/api/keys/requests/{id}/approve"),
        ("POST", "/api/keys/requests/{id}/deny"),
        ("DELETE", "/api/keys/{id}"),
        ("GET", "/api/rate-limits/{tenant_id}"),
        ("PUT", "/api/rate-limits/{tenant_id}"),
        ("PUT", "/api/rate-limits/{tenant_id}/routes/{route_id}"),
        ("GET", "/api/analytics/traffic"),
        ("GET", "/api/analytics/llm"),
        ("GET", "/api/analytics/agents"),
        ("GET", "/api/analytics/consumers"),
        ("GET", "/api/audit"),
        ("GET", "/api/export/{table}"),
        ("GET", "/api/notifications"),
        ("POST", "/api/notifications"),
        ("POST", "/api/notifications/{id}/read"),
        ("GET", "/api/notifications/preferences"),
        ("PUT", "/api/notifications/preferences"),
        ("GET", "/api/tenants/{id}/branding"),
        ("POST", "/api/tenants/{id}/branding"),
        ("GET", "/api/settings"),
        ("PUT", "/api/settings"),
        ("PATCH", "/api/routes/{id}/lifecycle"),
        ("GET", "/api/providers"),
        ("POST", "/api/providers"),
        ("DELETE", "/api/providers/{id}"),
        ("POST", "/api/providers/{id}/test"),
        ("POST", "/api/agents"),
        ("GET", "/api/agents"),
        ("GET", "/api/agents/{agent_id}"),
        ("DELETE", "/api/agents/{agent_id}"),
        ("GET", "/api/agent-topology"),
        ("POST", "/sts/token"),
        ("GET", "/sts/jwks"),
        ("PATCH", "/api/routes/{id}/canary"),
        ("GET", "/api/license"),
        ("GET", "/api/tenants/{id}/ip-allowlist"),
        ("PUT", "/api/tenants/{id}/ip-allowlist"),
        ("GET", "/api/webhooks"),
        ("POST", "/api/webhooks"),
        ("DELETE", "/api/webhooks/{id}"),
    },
}


def _rows() -> list[tuple[str, HttpRule]]:
    return [(name, route) for name, table in TABLES.items() for route in table]


@pytest.mark.parametrize(("table", "route"), _rows(), ids=lambda v: getattr(v, "path", v))
def test_rule_binds_a_declared_rpc_with_real_fields(table: str, route: HttpRule) -> None:
    method = method_descriptor(route)
    fields = method.input_type.fields_by_name
    for param in re.findall(r"{(\w+)}", route.path):
        assert param in fields, f"{route.path}: no request field {param}"
    if route.body not in (None, "*"):
        assert route.body in fields
    if route.response_body:
        assert route.response_body in method.output_type.fields_by_name
    assert route.stream == method.server_streaming
    if route.method in ("GET", "DELETE"):
        assert route.body is None


@pytest.mark.parametrize("table", sorted(SPEC_ENDPOINTS))
def test_every_spec_endpoint_has_a_rule(table: str) -> None:
    routed = {(r.method, r.path) for r in TABLES[table]}
    assert SPEC_ENDPOINTS[table] - routed == set()


def test_every_declared_rpc_is_bound_or_internal() -> None:
    pool = descriptor_pool.Default()
    routed = {r.rpc for table in TABLES.values() for r in table}
    declared = set()
    for module in pkgutil.walk_packages(strata.__path__, "strata."):
        if module.name.endswith("_pb2"):
            fd = pool.FindFileByName(module.name.replace(".", "/").removesuffix("_pb2") + ".proto")
            for service in fd.services_by_name.values():
                declared |= {f"{service.full_name}/{m.name}" for m in service.methods}
    assert declared - routed == INTERNAL_RPCS


def test_a_rule_naming_an_unknown_rpc_fails_at_boot() -> None:
    with pytest.raises(LookupError, match="unknown rpc"):
        method_descriptor(HttpRule("GET", "/x", "strata.ai.v1.ChatService/Nope"))


def test_streaming_variant_shares_its_endpoint() -> None:
    chat = next(r for r in AI if r.path == "/v1/chat/completions")
    assert chat.when_streaming is STREAM_CHAT
    assert (STREAM_CHAT.method, STREAM_CHAT.path, STREAM_CHAT.stream) == (
        chat.method,
        chat.path,
        True,
    )


async def empty(_: web.Request) -> web.Response:
    return web.Response()


def test_aiohttp_accepts_every_table() -> None:
    for name, table in TABLES.items():
        app = web.Application()
        for route in table:
            if route is not STREAM_CHAT:  # served through the chat rule's `when_streaming`
                app.router.add_route(route.method, route.path, empty)
        assert len(app.router.routes()) >= len(table) - 1, name
