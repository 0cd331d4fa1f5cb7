"""JSON rule table of the edge proxy's admin API (port 9180, APISIX Admin API v3), bound to
the generic `strata.edge.v1.EdgeConfigService` (which the edge forwards to the control
plane): `/apisix/admin/{kind}[/{id}[/{sub/path}]]`, the plugin list and plugin schemas.

Bodies are JSON values kept as sent (`google.protobuf.Struct` / `Value`); answers are
APISIX's envelopes, and errors APISIX's bodies (`apisix_error`). Rows are matched in order:
the plugin paths come before the generic `{kind}` ones.
"""

from __future__ import annotations

from typing import Any

from runtime.errors import StrataError, Unauthenticated
from runtime.http_rules import HttpRule

PKG = "strata.edge.v1"
PREFIX = "/apisix/admin"
MALFORMED = "malformed JSON body: "

_CONFIG = f"{PKG}.EdgeConfigService"


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
