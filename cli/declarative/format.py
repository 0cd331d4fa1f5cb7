"""The declarative document: `apiVersion: strata/v1`, `kind: Platform`, and its sections.

    apiVersion: strata/v1
    kind: Platform
    settings: {...}               platform settings (PUT /api/settings)
    providers: [...]              LLM providers (POST /api/providers, by id)
    tenants: [...]                tenants with their plan, status, token budget, rate limits,
                                  IP allowlist, prompt configuration, branding, agent policy
                                  and notification preferences
    edge: {routes, services, upstreams, consumers, consumer_groups, plugin_configs,
           global_rules, protos}  the edge Admin API's resources, as APISIX shows them
    mcp_servers: [...]            MCP servers with their tools and auth configuration
    a2a_agents: [...]             A2A agent cards
    agents: [...]                 the agent registry (SVC_AGENT_IDENTITY=on)

Lists are sorted by their id and mappings by key when written, so two exports of one
configuration are byte-identical. YAML is read with the safe loader only.
"""

from __future__ import annotations

from typing import Any

import yaml

API_VERSION = "strata/v1"
KIND = "Platform"
EDGE_KINDS = (
    "protos",
    "upstreams",
    "services",
    "plugin_configs",
    "consumer_groups",
    "consumers",
    "routes",
    "global_rules",
)  # fmt: skip  (the order they are created in: what a resource refers to comes first)
EDGE_ID = {kind: ("username" if kind == "consumers" else "id") for kind in EDGE_KINDS}
SECTIONS = ("settings", "providers", "tenants", "edge", "mcp_servers", "a2a_agents", "agents")

_ID = {"type": "string", "minLength": 1}
_STRINGS = {"type": "array", "items": {"type": "string"}}
_NULLABLE_STRING = {"type": ["string", "null"]}
_LIMIT = {
    "type": "object",
    "properties": {"limit": {"type": "integer"}, "window": {"type": "string"}},
    "required": ["limit"],
    "additionalProperties": False,
}


def _obj(required: list[str], **properties: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


TENANT = _obj(
    ["id", "name", "plan"],  # the three a tenant is created with
    id=_ID,
    name={"type": "string"},
    plan={"type": "string"},
    status={"type": "string"},
    token_budget={"type": "integer"},
    rate_limit=_LIMIT,
    route_rate_limits={"type": "object", "additionalProperties": _LIMIT},
    ip_allowlist=_STRINGS,
    prompt_config={"type": "object"},
    branding=_obj(
        [],
        portal_title={"type": "string"},
        logo_base64=_NULLABLE_STRING,
        primary_color=_NULLABLE_STRING,
    ),
    policy=_obj(
        [],
        hitl_required_tools=_STRINGS,
        max_concurrent_sessions={"type": "integer"},
        max_tool_calls_per_session={"type": "integer"},
        allowed_network_hosts=_STRINGS,
    ),
    notifications=_obj(
        [],
        webhook_url=_NULLABLE_STRING,
        slack_url=_NULLABLE_STRING,
        email=_NULLABLE_STRING,
        enabled_types=_STRINGS,
    ),
)
TOOL = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "inputSchema": {"type": "object"},
    },
    "required": ["name"],
}
MCP_AUTH = _obj(
    ["mode"],
    mode={"type": "string"},
    oauth_url=_NULLABLE_STRING,
    client_id=_NULLABLE_STRING,
    client_secret=_NULLABLE_STRING,
    required_scopes=_STRINGS,
    token_endpoint=_NULLABLE_STRING,
)
MCP_SERVER = _obj(
    ["id", "tenant_id", "name", "url"],
    id=_ID,
    tenant_id=_ID,
    name={"type": "string"},
    url={"type": "string"},
    protocol={"type": "string"},
    tools={"type": "array", "items": TOOL},
    auth=MCP_AUTH,
)
A2A_AGENT = _obj(
    ["id", "tenant_id", "name", "url"],
    id=_ID,
    tenant_id=_ID,
    name={"type": "string"},
    url={"type": "string"},
    capabilities=_STRINGS,
    description={"type": "string"},
)
AGENT = _obj(
    ["agent_id", "tenant_id"],
    agent_id=_ID,
    tenant_id=_ID,
    allowed_audiences=_STRINGS,
    allowed_tools=_STRINGS,
    credential_ref={"type": "string"},
    description={"type": "string"},
)
# Providers and settings are checked field by field by the control plane's own validators
# (validate.py); here only their shape.
PROVIDER = {"type": "object", "properties": {"id": _ID}, "required": ["id"]}
EDGE_RESOURCE = {"type": "object"}  # the edge's own resource schemas check each (validate.py)

DOCUMENT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"const": API_VERSION},
        "kind": {"const": KIND},
        "settings": {"type": "object"},
        "providers": {"type": "array", "items": PROVIDER},
        "tenants": {"type": "array", "items": TENANT},
        "edge": {
            "type": "object",
            "properties": {k: {"type": "array", "items": EDGE_RESOURCE} for k in EDGE_KINDS},
            "additionalProperties": False,
        },
        "mcp_servers": {"type": "array", "items": MCP_SERVER},
        "a2a_agents": {"type": "array", "items": A2A_AGENT},
        "agents": {"type": "array", "items": AGENT},
    },
    "required": ["apiVersion", "kind"],
    "additionalProperties": False,
}


class FormatError(Exception):
    """The file is not a YAML mapping at all (nothing more can be checked)."""


def load(text: str) -> dict[str, Any]:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FormatError(f"not valid YAML: {exc}") from None
    if not isinstance(document, dict):
        raise FormatError("the document must be a YAML mapping (apiVersion, kind, sections)")
    return document


def empty() -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND}


def dump(document: dict[str, Any]) -> str:
    """Stable YAML: keys sorted (apiVersion and kind first), block style, unicode kept."""
    head = {k: document[k] for k in ("apiVersion", "kind") if k in document}
    body = {k: v for k, v in document.items() if k not in head}
    text = yaml.safe_dump(head, sort_keys=False, default_flow_style=False)
    if body:
        text += yaml.safe_dump(
            body, sort_keys=True, default_flow_style=False, allow_unicode=True, width=100
        )
    return text


def items(document: dict[str, Any], section: str) -> list[dict[str, Any]]:
    value = document.get(section) or []
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def edge_items(document: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    edge = document.get("edge") or {}
    value = edge.get(kind) or [] if isinstance(edge, dict) else []
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
