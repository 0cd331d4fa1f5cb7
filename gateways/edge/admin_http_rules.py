"""JSON rule table of the edge proxy's admin API (port 9180, APISIX Admin API v3), bound to
the generic `strata.edge.v1.EdgeConfigService` (which the edge forwards to the control
plane): `/apisix/admin/{kind}[/{id}[/{sub/path}]]`, the plugin list and plugin schemas.

Bodies are JSON values kept as sent (`google.protobuf.Struct` / `Value`); answers are
APISIX's envelopes, and errors APISIX's bodies (`apisix_error`). Rows are matched in order:
the plugin paths come before the generic `{kind}` ones.
"""

from __future__ import annotations

import copy
from typing import Any

from gateways.edge.model import ENABLED_PLUGINS, KINDS, PATCHABLE, POSTABLE, SCHEMAS
from runtime.errors import StrataError, Unauthenticated
from runtime.http_rules import HttpRule
from runtime.openapi import ApiDocs, Schema, describe_envelope, ref

PKG = "strata.edge.v1"
PREFIX = "/apisix/admin"
MALFORMED = "malformed JSON body: "

_CONFIG = f"{PKG}.EdgeConfigService"


@describe_envelope(
    "ApisixError",
    {
        "description": "APISIX's error bodies: `{error_msg}`; 404 `{message: 'Key not found'}`; "
        "401 `{error_msg: 'failed to check token', description}`.",
        "anyOf": [
            {
                "type": "object",
                "required": ["error_msg"],
                "properties": {"error_msg": {"type": "string"},
                               "description": {"type": "string"}},
            },
            {"type": "object", "required": ["message"],
             "properties": {"message": {"type": "string"}}},
        ],
    },
)  # fmt: skip
def apisix_error(err: StrataError) -> dict[str, Any]:
    """APISIX's error bodies: `{error_msg}`, 404 `{message:'Key not found'}`, and 401
    `{error_msg:'failed to check token', description:'missing apikey'|'wrong apikey'}`."""
    if err.error == "key_not_found":
        return {"message": err.message}
    if isinstance(err, Unauthenticated):
        wrong = err.message == "Invalid admin API key"  # runtime.auth: a key, not ours
        return {
            "error_msg": "failed to check token",
            "description": "wrong apikey" if wrong else "missing apikey",
        }
    if err.message.startswith(MALFORMED):
        return {"error_msg": "invalid request body: " + err.message.removeprefix(MALFORMED)}
    return {"error_msg": err.message}


def _rule(method: str, path: str, rpc: str, **options: Any) -> HttpRule:
    return HttpRule(method, PREFIX + path, f"{_CONFIG}/{rpc}", envelope=apisix_error, **options)


HTTP_RULES: tuple[HttpRule, ...] = (
    # plugins (the list answer is a bare JSON array, a schema answer the bare schema)
    _rule("GET", "/plugins/list", "ListPlugins", body=None, response_body="plugins"),
    _rule("GET", "/plugins/{name}", "GetPlugin", body=None, response_body="schema"),
    _rule("GET", "/schema/plugins/{name}", "GetPlugin", body=None, response_body="schema"),
    # every resource kind
    _rule("GET", "/{kind}", "ListResources", body=None),
    _rule("PUT", "/{kind}", "PutResource", body="resource"),  # id (username) in the body
    _rule("POST", "/{kind}", "CreateResource", status=201, body="resource"),
    _rule("GET", "/{kind}/{id}", "GetResource", body=None),
    _rule("PUT", "/{kind}/{id}", "PutResource", body="resource"),
    _rule("PATCH", "/{kind}/{id}", "PatchResource", body="patch"),
    _rule("PATCH", "/{kind}/{id}/{path:.+}", "PatchResource", body="patch"),
    _rule("DELETE", "/{kind}/{id}", "DeleteResource", body=None),
)


def _resource_schemas() -> dict[str, Schema]:
    """The Admin API's resource schemas, as the control plane checks them."""
    schemas = {}
    for kind in KINDS:
        stored = copy.deepcopy(SCHEMAS[kind])
        # a body whose id comes from the path (or is generated): the id may be left out
        body = {**stored, "required": [r for r in stored.get("required", []) if r != "id"]}
        schemas[f"apisix.{kind}"] = stored
        schemas[f"apisix.{kind}.body"] = body
    return schemas


def _per_kind(rule: HttpRule, operation: Schema) -> list[tuple[str, Schema]]:
    """`/apisix/admin/{kind}...` as one path per resource kind, with the kind's schema as the
    body and as the `value` of the answers; plugin names listed."""
    path = rule.path.replace("{path:.+}", "{path}")
    if "{kind}" not in path:
        if "{name}" in path:
            for param in operation["parameters"]:
                if param["name"] == "name":
                    param["schema"]["enum"] = sorted(ENABLED_PLUGINS)
        return [(path, operation)]
    supported = {"CreateResource": POSTABLE, "PatchResource": PATCHABLE}.get(
        rule.method_name, frozenset(KINDS)
    )
    expanded = []
    for kind in (k for k in KINDS if k in supported):
        one = copy.deepcopy(operation)
        one["operationId"] = f"{one['operationId']}_{kind}"
        one["tags"] = [kind]
        one["parameters"] = [p for p in one["parameters"] if p["name"] != "kind"]
        if not one["parameters"]:
            del one["parameters"]
        kind_ref = ref(f"apisix.{kind}")
        if rule.body == "resource":
            body = kind_ref if "{id}" not in path else ref(f"apisix.{kind}.body")
            if rule.method_name == "CreateResource":  # the id is generated: none in the body
                body = {"allOf": [ref(f"apisix.{kind}.body")], "not": {"required": ["id"]}}
            for media in one["requestBody"]["content"].values():
                media["schema"] = body
        for status, answer in one["responses"].items():
            if not status.startswith("2"):
                continue
            media = answer["content"]["application/json"]
            value = {"properties": {"value": kind_ref}}
            if rule.method_name == "ListResources":
                value = {"properties": {"list": {"items": value}}}
            if rule.method_name != "DeleteResource":
                media["schema"] = {"allOf": [media["schema"], value]}
        if rule.method_name == "PutResource":  # 201 when it creates, 200 when it replaces
            one["responses"]["201"] = copy.deepcopy(one["responses"]["200"])
        expanded.append((path.replace("{kind}", kind), one))
    return expanded


API_DOCS = ApiDocs(
    title="Strata edge Admin API",
    description="The edge proxy's Admin API (APISIX Admin API v3, port 9180): routes, "
    "services, upstreams, consumers, consumer groups, global rules, plugin configs and protos, "
    "the plugin list and plugin schemas. Only the networks of ADMIN_ALLOW_CIDRS reach it "
    "(403 otherwise), this document included.",
    rules=HTTP_RULES,
    envelope=apisix_error,
    file_name="edge-admin.json",
    schemas=_resource_schemas(),
    expand=_per_kind,
    paths={  # answered by `app.admin_key_sources`, before any rule
        PREFIX: {
            "head": {
                "operationId": "adminLiveness",
                "summary": "Liveness of the Admin API (no key needed)",
                "tags": ["meta"],
                "x-strata-access": "ACCESS_PUBLIC",
                "security": [],
                "responses": {"200": {"description": "the Admin API is up"}},
            }
        }
    },
)
