"""Issue 20: each front door serves its OpenAPI document, and does what it says. The four
services run in-process (their own Valkey, the session's IdP and chDB); every operation of each
served `/openapi.json` is called once with a valid example below, and the answer's status must
be one the operation documents and its body must match the documented schema (jsonschema, the
document's components resolving the references); server-sent events are checked one by one.

The operation list comes from the documents: an operation without an example here (a new
endpoint) fails the test, as does an example of an operation the document does not describe.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from string import Template
from typing import Any

import aiohttp
import pytest
from identity_kit import Sts, registered_agents
from jsonschema import Draft202012Validator
from mcp_servers import UpstreamMcp
from shared_kit import (
    ADMIN_API_KEY,
    MASTER_KEY,
    ConfigFor,
    free_port,
    running,
    user_token,
    valkey_server,
)

from cli.docs import API_DIR, api_documents
from controlplane.app import build as build_controlplane
from controlplane.config import ControlPlaneConfig
from controlplane.edge_config.servicer import PATCHABLE, POSTABLE
from gateways.agent.app import build as build_agent
from gateways.agent.config import AgentGatewayConfig
from gateways.ai.app import build as build_ai
from gateways.ai.config import AiGatewayConfig
from gateways.edge.app import build as build_edge
from gateways.edge.config import EdgeConfig
from gateways.edge.model.resources import KINDS
from runtime.config import ServiceConfig
from runtime.openapi import operations
from runtime.serve import start as start_service
from runtime.stores import Stores
from runtime.testing import serving
from sidecars.echo_llm.app import build_app as build_echo
from sidecars.echo_llm.provider import KEY_VAR, echo_provider

pytestmark = pytest.mark.timeout(300)

MASTER = {"Authorization": f"Bearer {MASTER_KEY}"}
EDGE_KEY = {"X-API-KEY": ADMIN_API_KEY}
T = "oas-" + uuid.uuid4().hex[:8]  # the tenant the examples create and use


@dataclass
class Call:
    """One example: the operation (as the document writes it), what to send, the success
    status expected, and the answer's values to keep for later calls (`$name` in strings)."""

    method: str
    path: str
    status: int = 200
    params: Mapping[str, str] = field(default_factory=dict)
    query: Mapping[str, str] = field(default_factory=dict)
    body: Any = None
    form: bool = False
    headers: Mapping[str, str] = field(default_factory=lambda: MASTER)
    keep: Mapping[str, str] = field(default_factory=dict)  # name → dotted path in the answer
    again: bool = False  # a second example of an operation (another shape of its answer)
    keep_header: Mapping[str, str] = field(default_factory=dict)  # name → answer header

    @property
    def operation(self) -> tuple[str, str]:
        return self.method, self.path


def meta(headers: Mapping[str, str] = MASTER) -> list[Call]:
    return [Call("GET", p, headers=headers) for p in ("/", "/health", "/metrics",
                                                      "/openapi.json", "/docs")]  # fmt: skip


def edge_calls() -> list[Call]:
    resources: dict[str, Any] = {
        "upstreams": {"type": "roundrobin", "nodes": {"127.0.0.1:9": 1}},
        "services": {"upstream": {"type": "roundrobin", "nodes": {"127.0.0.1:9": 1}}},
        "routes": {"uri": "/oas/*", "upstream": {"type": "roundrobin",
                                                 "nodes": {"127.0.0.1:9": 1}}},
        "consumers": {"username": "oasconsumer"},
        "consumer_groups": {"plugins": {}},
        "global_rules": {"plugins": {}},
        "plugin_configs": {"plugins": {}},
        "protos": {"content": 'syntax = "proto3"; package oas; message M { string a = 1; }'},
    }  # fmt: skip
    calls = [
        Call("GET", "/apisix/admin/plugins/list", headers=EDGE_KEY),
        Call("GET", "/apisix/admin/plugins/{name}", params={"name": "key-auth"}, headers=EDGE_KEY),
        Call("GET", "/apisix/admin/schema/plugins/{name}", params={"name": "key-auth"},
             headers=EDGE_KEY),
    ]  # fmt: skip
    for kind in KINDS:
        base = f"/apisix/admin/{kind}"
        body = resources[kind]
        ident = "oasconsumer" if kind == "consumers" else f"oas-{kind}"
        put_body = body if kind == "consumers" else {**body, "id": ident}
        calls += [
            Call("PUT", base, 201, body=put_body, headers=EDGE_KEY),
            Call("PUT", base + "/{id}", 200, params={"id": ident}, body=body, headers=EDGE_KEY),
            Call("GET", base, headers=EDGE_KEY),
            Call("GET", base + "/{id}", params={"id": ident}, headers=EDGE_KEY),
        ]
        if kind in PATCHABLE:
            name, value = ("plugins", {}) if kind == "global_rules" else ("desc", "patched")
            calls += [
                Call("PATCH", base + "/{id}", params={"id": ident}, body={name: value},
                     headers=EDGE_KEY),
                Call("PATCH", base + "/{id}/{path}", params={"id": ident, "path": name},
                     body=value, headers=EDGE_KEY),
            ]  # fmt: skip
        doomed = ident
        if kind in POSTABLE:
            created = kind.replace("_", "") + "id"
            calls.append(Call("POST", base, 201, body=body, headers=EDGE_KEY,
                              keep={created: "value.id"}))  # fmt: skip
            doomed = "$" + created
        calls.append(Call("DELETE", base + "/{id}", params={"id": doomed}, headers=EDGE_KEY))
    calls += [  # errors, in APISIX's bodies
        Call("GET", "/apisix/admin/routes/{id}", 404, params={"id": "oas-none"},
             headers=EDGE_KEY, again=True),
        Call("GET", "/apisix/admin/routes", 401, headers={}, again=True),
    ]  # fmt: skip
    calls.append(Call("HEAD", "/apisix/admin", headers={}))
    return calls + meta(EDGE_KEY)


TENANT = {**MASTER, "x-tenant-id": T}
OTHER = {**MASTER, "x-tenant-id": T + "-b"}
HELLO = [{"role": "user", "content": "hello"}]


def ai_calls() -> list[Call]:
    return [
        Call("GET", "/v1/models", headers=TENANT),
        Call("POST", "/v1/chat/completions", body={"model": "echo-1", "messages": HELLO},
             headers={**TENANT, "Cache-Control": "no-store"}),
        Call("POST", "/v1/chat/completions", body={"model": "echo-1", "messages": HELLO,
                                                   "stream": True},
             headers=TENANT, again=True),
        Call("GET", "/v1/budget/{tenant_id}", params={"tenant_id": T}, headers=TENANT),
        Call("POST", "/v1/budget/{tenant_id}", params={"tenant_id": T}, body={"tokens": 5000}),
        Call("GET", "/v1/budget/{tenant_id}", params={"tenant_id": T}, again=True),
        Call("DELETE", "/v1/budget/{tenant_id}", params={"tenant_id": T}),
        # errors, in OpenAI's envelope
        Call("POST", "/v1/chat/completions", 400, body={"model": "oas-none", "messages": HELLO},
             headers=TENANT, again=True),
        Call("GET", "/v1/models", 401, headers={}, again=True),
        *meta(),
    ]  # fmt: skip


def controlplane_calls(human: str) -> list[Call]:
    """`human`: a person's IdP token (tenant acme), for the token exchange."""
    tenant: dict[str, Any] = {"params": {"id": T}}
    hook = "http://127.0.0.1:9/hook"
    return [
        # tenants first: the rest acts for T
        Call("POST", "/api/tenants", 201, body={"name": "OpenAPI Corp", "plan": "pro", "id": T}),
        Call("GET", "/api/tenants"),
        Call("GET", "/api/tenants/{id}", **tenant),
        Call("PATCH", "/api/tenants/{id}", body={"plan": "enterprise"}, **tenant),
        Call("PUT", "/api/tenants/{id}/ip-allowlist", body={"cidrs": ["10.0.0.0/8"]}, **tenant),
        Call("GET", "/api/tenants/{id}/ip-allowlist", **tenant),
        Call("PUT", "/api/tenants/{id}/prompt-config", body={"system_prompt": "Be brief."},
             **tenant),
        Call("GET", "/api/tenants/{id}/prompt-config", **tenant),
        Call("POST", "/api/tenants/{id}/branding", body={"portal_title": "OpenAPI portal"},
             **tenant),
        Call("GET", "/api/tenants/{id}/branding", **tenant),
        # API keys: a request approved, one denied, the key revoked
        Call("POST", "/api/keys/request", 201, headers={**MASTER, "x-tenant-id": T},
             body={"name": "ci", "tenant_id": T, "routes": ["oas-cp-route"], "reason": "CI",
                   "email": "ci@example.com"},
             keep={"approve": "id"}),
        Call("POST", "/api/keys/request", 201, headers={**MASTER, "x-tenant-id": T},
             body={"name": "ci2", "tenant_id": T, "routes": ["oas-cp-route"], "reason": "CI",
                   "email": "ci@example.com"},
             keep={"deny": "id"}, again=True),
        Call("GET", "/api/keys/requests", query={"tenant_id": T}),
        Call("POST", "/api/keys/requests/{id}/approve", params={"id": "$approve"},
             keep={"key": "key_id"}),
        Call("POST", "/api/keys/requests/{id}/deny", params={"id": "$deny"}),
        Call("GET", "/api/keys", query={"tenant_id": T}),
        Call("DELETE", "/api/keys/{id}", params={"id": "$key"}, headers={**MASTER,
                                                                          "x-tenant-id": T}),
        # rate limits
        Call("PUT", "/api/rate-limits/{tenant_id}", params={"tenant_id": T},
             body={"limit": 500, "window": "60s"}),
        Call("PUT", "/api/rate-limits/{tenant_id}/routes/{route_id}",
             params={"tenant_id": T, "route_id": "oas-cp-route"},
             body={"limit": 50, "window": "60s"}),
        Call("GET", "/api/rate-limits/{tenant_id}", params={"tenant_id": T}),
        # analytics, audit, export
        Call("GET", "/api/analytics/traffic", query={"tenant_id": T}),
        Call("GET", "/api/analytics/llm", query={"tenant_id": T}),
        Call("GET", "/api/analytics/agents", query={"tenant_id": T}),
        Call("GET", "/api/analytics/consumers", query={"tenant_id": T}),
        Call("GET", "/api/agent-topology", query={"tenant_id": T}),
        Call("GET", "/api/audit", query={"tenant_id": T}),
        Call("GET", "/api/audit", query={"tenant_id": T, "format": "csv"}, again=True),
        Call("GET", "/api/export/{table}", params={"table": "request_log"},
             query={"tenant_id": T}),
        # notifications
        Call("POST", "/api/notifications", 201, body={"tenant_id": T,
             "notification_type": "budget_warning", "title": "Budget", "message": "80%"},
             keep={"notification": "id"}),
        Call("GET", "/api/notifications", query={"tenant_id": T}),
        Call("POST", "/api/notifications/{id}/read", params={"id": "$notification"},
             headers={**MASTER, "x-tenant-id": T}),
        Call("PUT", "/api/notifications/preferences", body={"tenant_id": T, "webhook_url": hook,
             "enabled_types": ["budget_warning"]}),
        Call("GET", "/api/notifications/preferences", query={"tenant_id": T}),
        # webhooks
        Call("POST", "/api/webhooks", 201, body={"url": hook, "event_types": ["budget_warning"],
             "tenant_id": T}, keep={"webhook": "id"}),
        Call("GET", "/api/webhooks", query={"tenant_id": T}),
        Call("DELETE", "/api/webhooks/{id}", params={"id": "$webhook"},
             headers={**MASTER, "x-tenant-id": T}),
        # settings, license, platform health
        Call("GET", "/api/settings"),
        Call("PUT", "/api/settings", body={"platform_name": "Strata (OpenAPI test)"}),
        Call("GET", "/api/license"),
        Call("GET", "/api/health/services"),
        Call("GET", "/api/health/alerts"),
        # edge route lifecycle and canary (the route `oas-cp-route`, made through the edge)
        Call("PATCH", "/api/routes/{id}/lifecycle", params={"id": "oas-cp-route"},
             body={"lifecycle": "deprecated"}),
        Call("PATCH", "/api/routes/{id}/canary", params={"id": "oas-cp-route"},
             body={"weight": 10, "upstream": "127.0.0.1:9"}),
        # providers
        Call("POST", "/api/providers", body={"id": "oas-local", "type": "openai_compatible",
             "base_url": "http://127.0.0.1:9/v1", "auth_type": "none",
             "model_patterns": ["oas-*"], "enabled": True}),
        Call("GET", "/api/providers"),
        Call("POST", "/api/providers/{id}/test", params={"id": "oas-local"}),
        Call("DELETE", "/api/providers/{id}", params={"id": "oas-local"}),
        # agent registry and the token exchange (a person's token, agent a's actor token)
        Call("POST", "/api/agents", body={"agent_id": "agent:oas-spare", "tenant_id": "acme",
             "allowed_audiences": [], "allowed_tools": []}),
        Call("GET", "/api/agents"),
        Call("GET", "/api/agents/{agent_id}", params={"agent_id": "agent:oas-spare"}),
        Call("DELETE", "/api/agents/{agent_id}", params={"agent_id": "agent:oas-spare"}),
        Call("POST", "/sts/token", headers={}, body={
            "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
            "subject_token": human, "audience": "$audience", "actor_token": "$actor",
            "subject_token_type": "urn:ietf:params:oauth:token-type:jwt"}),
        Call("GET", "/sts/jwks", headers={}),
        # last: the tenant goes
        Call("DELETE", "/api/tenants/{id}", **tenant),
        # errors: Strata's body, and RFC 6749's at the STS
        Call("GET", "/api/tenants/{id}", 404, params={"id": "oas-none"}, again=True),
        Call("GET", "/api/tenants", 401, headers={}, again=True),
        Call("POST", "/sts/token", 400, headers={}, body={"grant_type": "password"},
             again=True),
        *meta(),
    ]  # fmt: skip


ECHO = {
    "name": "echo",
    "description": "Echo the text back (as first registered)",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}
ELICIT_SCHEMA = {
    "type": "object",
    "properties": {"email": {"type": "string"}},
    "required": ["email"],
}


def agent_calls(upstream: str) -> list[Call]:
    server: dict[str, Any] = {"params": {"server_id": "oas-srv"}, "headers": TENANT}
    session: dict[str, Any] = {"params": {"session_id": "$session"}, "headers": TENANT}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "openapi-test", "version": "1"},
        },
    }
    return [
        # the registry: a server, and one whose tool set changes (quarantined, re-approved)
        Call("POST", "/v1/mcp/servers", 201, headers=TENANT,
             body={"id": "oas-srv", "name": "oas", "url": upstream, "tenant_id": T}),
        Call("POST", "/v1/mcp/servers", 201, headers=OTHER, again=True,
             body={"id": "oas-rug", "name": "rug", "url": upstream, "tenant_id": T + "-b",
                   "tools": [ECHO]}),
        Call("GET", "/v1/mcp/servers", headers=TENANT),
        Call("GET", "/v1/mcp/servers/{server_id}", **server),
        Call("PUT", "/v1/mcp/servers/{server_id}/auth", **server,
             body={"mode": "optional", "client_secret": "", "required_scopes": []}),
        Call("GET", "/v1/mcp/servers/{server_id}/auth", **server),
        Call("GET", "/v1/mcp/servers/{server_id}/tools", **server),
        Call("GET", "/v1/mcp/servers/{server_id}/tools", params={"server_id": "oas-rug"},
             query={"refresh": "true"}, headers=OTHER, again=True),
        Call("GET", "/v1/mcp/servers/{server_id}", params={"server_id": "oas-rug"},
             headers=OTHER, keep={"pending": "quarantine.fingerprint"}, again=True),
        Call("POST", "/v1/mcp/servers/{server_id}/approve-tools",
             params={"server_id": "oas-rug"}, body={"fingerprint": "$pending"}),
        Call("GET", "/v1/mcp/tools", headers=TENANT),
        # tool calls, then a policy that holds `add` for a person's approval
        Call("POST", "/v1/mcp/tools/call", headers=TENANT, body={"server_id": "oas-srv",
             "tool_name": "echo", "arguments": {"text": "hi"}, "tenant_id": T}),
        Call("PUT", "/v1/policies/{tenant_id}", params={"tenant_id": T}, headers=TENANT,
             body={"hitl_required_tools": ["add"]}),
        Call("GET", "/v1/policies/{tenant_id}", params={"tenant_id": T}, headers=TENANT),
        Call("POST", "/v1/mcp/tools/call", 202, headers=TENANT, again=True,
             body={"server_id": "oas-srv", "tool_name": "add", "arguments": {"a": 1, "b": 2},
                   "tenant_id": T}, keep={"approval": "approval_id"}),
        Call("POST", "/v1/mcp/tools/call", 202, headers=TENANT, again=True,
             body={"server_id": "oas-srv", "tool_name": "add", "arguments": {"a": 2, "b": 2},
                   "tenant_id": T}, keep={"denied": "approval_id"}),
        Call("GET", "/v1/hitl/pending", headers=TENANT),
        Call("POST", "/v1/hitl/{approval_id}/approve", params={"approval_id": "$approval"},
             headers=TENANT),
        Call("POST", "/v1/hitl/{approval_id}/deny", params={"approval_id": "$denied"},
             headers=TENANT),
        # sessions
        Call("POST", "/v1/sessions", 201, headers=TENANT, keep={"session": "id"},
             body={"tenant_id": T, "agent_id": "oas-agent", "tool_allowlist": ["echo"],
                   "token_budget": 1000}),
        Call("GET", "/v1/sessions", headers=TENANT),
        Call("GET", "/v1/sessions/{session_id}", **session),
        Call("GET", "/v1/sessions/{session_id}/tools", **session),
        Call("POST", "/v1/sessions/{session_id}/execute", body={"server_id": "oas-srv",
             "tool_name": "echo", "arguments": {"text": "hi"}, "tenant_id": T}, **session),
        # A2A: an agent registered; a message to an unregistered one is queued (202)
        Call("POST", "/v1/a2a/agents", 201, headers=TENANT, body={"id": f"{T}-echo",
             "name": "echo agent", "url": "http://127.0.0.1:9/", "tenant_id": T,
             "capabilities": ["echo"], "description": "echoes"}),
        Call("GET", "/v1/a2a/agents", headers=TENANT),
        Call("POST", "/v1/a2a/send", 202, headers=TENANT, keep={"task": "task_id"},
             body={"from_agent": "planner", "to_agent": f"{T}-nobody",
                   "message": {"text": "hello"}, "tenant_id": T}),
        Call("GET", "/v1/a2a/tasks/{task_id}", params={"task_id": "$task"}, headers=TENANT),
        # elicitation
        Call("POST", "/v1/elicit", 202, headers=TENANT, keep={"elicit": "elicitation_id"},
             body={"session_id": "$session", "tenant_id": T, "tool_name": "signup",
                   "message": "Which e-mail?", "schema": ELICIT_SCHEMA}),
        Call("POST", "/v1/elicit/{elicit_id}/respond", params={"elicit_id": "$elicit"},
             headers=TENANT, body={"email": "ops@example.com"}),
        # the MCP endpoint and its OAuth metadata
        Call("POST", "/mcp", headers={**TENANT, "Accept": "application/json, text/event-stream"},
             body=initialize, keep_header={"mcp": "Mcp-Session-Id"}),
        Call("DELETE", "/mcp", 204, headers={**TENANT, "Mcp-Session-Id": "$mcp"}),
        Call("GET", "/mcp", 405, headers=TENANT),
        Call("GET", "/.well-known/oauth-protected-resource", headers={}),
        Call("GET", "/.well-known/oauth-protected-resource/mcp", headers={}),
        # last: the session and the server go
        Call("DELETE", "/v1/sessions/{session_id}", **session),
        Call("DELETE", "/v1/mcp/servers/{server_id}", **server),
        # errors
        Call("GET", "/v1/sessions/{session_id}", 404, params={"session_id": "oas-none"},
             headers=TENANT, again=True),
        Call("GET", "/v1/mcp/servers", 401, headers={}, again=True),
        *meta(),
    ]  # fmt: skip


# --- the checks ----------------------------------------------------------------------------


def fill(value: Any, kept: Mapping[str, Any]) -> Any:
    if isinstance(value, str):
        return Template(value).safe_substitute({k: str(v) for k, v in kept.items()})
    if isinstance(value, dict):
        return {k: fill(v, kept) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, kept) for v in value]
    return value


def dig(value: Any, path: str) -> Any:
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def validator(document: Mapping[str, Any], schema: Mapping[str, Any]) -> Draft202012Validator:
    """A validator of `schema` whose `#/components/...` references resolve in `document`."""
    return Draft202012Validator({**schema, "components": document["components"]})


def problems(document: Mapping[str, Any], schema: Mapping[str, Any], value: Any) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}"
        for e in validator(document, schema).iter_errors(value)
    ]


async def check(
    http: aiohttp.ClientSession, base: str, document: Mapping[str, Any], call: Call,
    kept: dict[str, Any],
) -> list[str]:  # fmt: skip
    """Send `call`; the problems of its answer against the document (none: it conforms)."""
    where = f"{call.method} {call.path}"
    item = document["paths"].get(call.path, {})
    operation = item.get(call.method.lower())
    if operation is None:
        return [f"{where}: an example of an operation the document does not describe"]
    path = call.path
    for name, value in fill(call.params, kept).items():
        path = path.replace("{" + name + "}", str(value))
    body, headers = fill(call.body, kept), fill(dict(call.headers), kept)
    if body is not None:  # the example is valid by the document too
        media = operation.get("requestBody", {}).get("content", {})
        if "application/json" not in media:
            return [f"{where}: the document takes no JSON body"]
        wrong = problems(document, media["application/json"]["schema"], body)
        if wrong:
            return [f"{where}: request body {p}" for p in wrong]
    sending: dict[str, Any] = {}
    if call.form:
        sending["data"] = body
    elif body is not None:
        sending["data"] = json.dumps(body)
        headers["Content-Type"] = "application/json"
    async with http.request(
        call.method, base + path, params=fill(dict(call.query), kept), headers=headers,
        **sending,
    ) as resp:  # fmt: skip
        raw = await resp.read()
        status, content_type = resp.status, resp.content_type
        for name, header in call.keep_header.items():
            kept[name] = resp.headers.get(header, "")
    text = raw.decode(errors="replace")[:500]
    if status != call.status:
        return [f"{where}: status {status}, expected {call.status}: {text}"]
    answer = operation["responses"].get(str(status)) or operation["responses"].get("default")
    if answer is None:
        return [f"{where}: status {status} is not documented"]
    media = answer.get("content", {})
    if not media:
        return [] if not raw else [f"{where}: a body where the document says none: {text}"]
    if content_type not in media:
        return [f"{where}: {content_type} answered, the document says {sorted(media)}"]
    schema = media[content_type].get("schema", {})
    if content_type == "text/event-stream":
        events = [line[6:] for line in raw.decode().split("\n") if line.startswith("data: ")]
        event_schema = media[content_type]["x-strata-event-schema"]
        found = [p for e in events if e != "[DONE]" for p in
                 problems(document, event_schema, json.loads(e))]  # fmt: skip
        return [f"{where}: event {p}" for p in found]
    if content_type != "application/json":
        return problems(document, schema, raw.decode())
    value = json.loads(raw)
    for name, at in call.keep.items():
        kept[name] = dig(value, at)
    return [f"{where}: {p}" for p in problems(document, schema, value)]


async def conform(
    base: str, calls: list[Call], document: Mapping[str, Any], **kept: Any
) -> list[str]:
    """Every example sent in order; every documented operation exercised exactly once."""
    documented = set(operations(document))
    exercised = [c.operation for c in calls]
    failures = [f"{m} {p}: documented, but no example calls it"
                for m, p in sorted(documented - set(exercised))]  # fmt: skip
    once = [c.operation for c in calls if not c.again]
    failures += [f"{m} {p}: more than one example" for m, p in sorted(set(once))
                 if once.count((m, p)) > 1]  # fmt: skip
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
        for call in calls:
            failures += await check(http, base, document, call, kept)
    return failures


# --- the platform --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def own_valkey(tmp_path_factory: pytest.TempPathFactory):
    with valkey_server(tmp_path_factory.mktemp("openapi-valkey")) as port:
        yield f"redis://127.0.0.1:{port}/0"


@dataclass
class Doors:
    cp: str
    ai: str
    agent: str
    edge: str
    echo: str
    idp: str


@pytest.fixture
async def doors(
    config_for: ConfigFor,
    stores_for: Callable[[ServiceConfig], Stores],
    own_valkey: str,
    idp: str,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Doors]:
    monkeypatch.setenv(KEY_VAR, "echo-key")

    def start(config_class: type[ServiceConfig], build: Callable[..., Any], **env: str) -> Any:
        config = config_for(config_class, REDIS_URL=own_valkey, **env)
        return serving(build(config, stores_for(config)))

    # The AI gateway first (the control plane provisions a tenant's budget there), told
    # where the control plane's gRPC will listen.
    cp_grpc = free_port()
    async with (
        running(build_echo()) as echo,
        start(AiGatewayConfig, build_ai, CONTROLPLANE_GRPC=f"127.0.0.1:{cp_grpc}") as ai,
    ):
        config = config_for(ControlPlaneConfig, REDIS_URL=own_valkey, SVC_AGENT_IDENTITY="on",
                            AI_GATEWAY_GRPC=ai.grpc_target)  # fmt: skip
        cp_running = await start_service(
            build_controlplane(config, stores_for(config)), "127.0.0.1", 0, cp_grpc
        )
        cp_url = f"http://127.0.0.1:{cp_running.http_port}"
        grpc = f"127.0.0.1:{cp_grpc}"
        try:
            async with (
            start(AgentGatewayConfig, build_agent, CONTROLPLANE_GRPC=grpc,
                  SVC_AGENT_IDENTITY="on", STS_JWKS_URL=f"{cp_url}/sts/jwks") as agent,
            start(EdgeConfig, build_edge, CONTROLPLANE_GRPC=grpc) as edge,
          ):  # fmt: skip
                yield Doors(cp_url, ai.http_url, agent.http_url, edge.http_url, echo, idp)
        finally:
            await cp_running.stop(grace=0.5)


async def served(base: str, headers: Mapping[str, str] = MASTER) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{base}/openapi.json", headers=headers) as resp,
    ):
        assert resp.status == 200
        return dict(await resp.json())


async def test_served_documents_are_the_committed_ones(doors: Doors) -> None:
    """A process with every feature on serves exactly the committed document; /docs is
    Swagger UI with its assets from the service itself (no CDN)."""
    committed = {name: (API_DIR / name).read_text() for name in api_documents()}
    for base, name, headers in (
        (doors.cp, "controlplane.json", MASTER), (doors.ai, "ai-gateway.json", MASTER),
        (doors.agent, "agent-gateway.json", MASTER), (doors.edge, "edge-admin.json", EDGE_KEY),
    ):  # fmt: skip
        assert await served(base, headers) == json.loads(committed[name]), name
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/docs") as resp:
                page = await resp.text()
                assert resp.status == 200 and "SwaggerUIBundle" in page
            assets = re.findall(r'(?:src|href)="(/docs/[^"]+)"', page)
            assert assets and not re.search(r'(?:src|href)="https?:', page)
            for asset in assets:
                async with http.get(base + asset) as resp:
                    assert resp.status == 200 and len(await resp.read()) > 100, asset


async def request(method: str, url: str, body: Any = None) -> tuple[int, Any]:
    """A call made to set the stage (not an example)."""
    async with aiohttp.ClientSession() as http, http.request(
        method, url, json=body, headers=MASTER
    ) as resp:  # fmt: skip
        return resp.status, await resp.json()


async def test_ai_gateway_answers_as_documented(doors: Doors) -> None:
    assert await request("POST", f"{doors.cp}/api/providers", echo_provider(doors.echo)) == (
        200, {"status": "saved", "provider": "echo"})  # fmt: skip
    for _ in range(200):  # the provider reaches the gateway through its change feed
        async with aiohttp.ClientSession() as http, http.get(
            f"{doors.ai}/v1/models", headers=TENANT
        ) as resp:  # fmt: skip
            if "echo-1" in {m["id"] for m in (await resp.json())["data"]}:
                break
        await asyncio.sleep(0.05)
    document = await served(doors.ai)
    failures = await conform(doors.ai, ai_calls(), document)
    assert not failures, "\n".join(failures)


async def test_controlplane_answers_as_documented(doors: Doors) -> None:
    route = {"uri": "/oas/*", "upstream": {"type": "roundrobin", "nodes": {"127.0.0.1:9": 1}}}
    async with aiohttp.ClientSession() as http, http.put(
        f"{doors.edge}/apisix/admin/routes/oas-cp-route", json=route, headers=EDGE_KEY
    ) as resp:  # fmt: skip
        assert resp.status in (200, 201), await resp.text()
    human = await user_token(doors.idp, "alice", "alice")
    a, b = await registered_agents(doors.idp, Sts(_Svc(doors.cp)), ("oas-a", "oas-b"))
    document = await served(doors.cp)
    failures = await conform(doors.cp, controlplane_calls(human), document,
                             actor=a.token, audience=b.agent_id)  # fmt: skip
    assert not failures, "\n".join(failures)


async def test_agent_gateway_answers_as_documented(doors: Doors) -> None:
    upstream = UpstreamMcp().start()
    try:
        document = await served(doors.agent)
        failures = await conform(doors.agent, agent_calls(upstream.url), document)
    finally:
        upstream.stop()
    assert not failures, "\n".join(failures)


@dataclass
class _Svc:  # what identity_kit.Sts takes: a service by its URL
    http_url: str


async def test_edge_admin_answers_as_documented(doors: Doors) -> None:
    document = await served(doors.edge, EDGE_KEY)
    failures = await conform(doors.edge, edge_calls(), document)
    assert not failures, "\n".join(failures)
