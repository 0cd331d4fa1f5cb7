"""RouteService: an edge route's lifecycle and canary split, written through the control
plane's edge configuration service (one atomic, checked read-modify-write of the route; every
edge data plane receives it over xDS), each change audited in `gateway.agent_audit_log`.

Lifecycle at the edge: the label `lifecycle`; `deprecated` adds `Deprecation: @<unix time>`
(RFC 9745) to responses through `response-rewrite`; `retired` disables the route (`status`
0, so the edge answers 404); leaving those states undoes it. Canary: the route's
`traffic-split` sends `weight`% to the canary upstream and the rest to the route's own.

No change without its audit row: the route is written first, then the row; when the row
cannot be written, the route is put back (unless it changed again meanwhile) and the call
fails with 503.
"""

from __future__ import annotations

import copy
import ipaddress
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import trace

from controlplane.edge_config.servicer import FORBIDDEN, EdgeConfigServicer
from controlplane.kv_errors import kv_unavailable
from gateways.edge.model import ROUTES, UPSTREAMS
from runtime.access import IDENTIFIER, current_caller
from runtime.context import ServicerContext
from runtime.errors import InvalidRequest, NotFound, Unavailable
from runtime.protojson import plain_json
from runtime.stores.analytics import AnalyticsSink
from strata.controlplane.v1 import route_pb2 as pb
from strata.controlplane.v1 import route_pb2_grpc

log = logging.getLogger(__name__)

LIFECYCLES = ("draft", "published", "deprecated", "retired")
LABEL = "lifecycle"
REWRITE = "response-rewrite"
SPLIT = "traffic-split"
DEPRECATION = "Deprecation"
AUDIT_TABLE = "agent_audit_log"
HOSTNAME = re.compile(
    r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)
HOST_PORT = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^\[\]:]+)):(?P<port>[0-9]{1,5})")


class _Unchanged(Exception):
    """The route already is as asked: nothing to write, nothing to audit."""


class _Moved(Exception):
    """The route changed again after our write: it is not put back."""


def route_not_found() -> NotFound:
    return NotFound("Route not found")


def invalid(message: str) -> InvalidRequest:
    return InvalidRequest(message, error="invalid_request")


def _headers_remove(headers: dict[str, Any], name: str) -> None:
    for key in [k for k in headers if k.lower() == name.lower()]:
        del headers[key]


def _is_operations(headers: Mapping[str, Any]) -> bool:
    """response-rewrite's `{add, set, remove}` form (else the legacy flat map)."""
    return any(k in headers for k in ("add", "set", "remove")) or not headers


def set_deprecation(plugins: dict[str, Any], value: str) -> None:
    """`Deprecation: value` on every response, merged into the route's response-rewrite."""
    conf = dict(plugins.get(REWRITE) or {})
    headers = dict(conf.get("headers") or {})
    if _is_operations(headers):
        setting = dict(headers.get("set") or {})
        _headers_remove(setting, DEPRECATION)
        setting[DEPRECATION] = value
        headers["set"] = setting
    else:
        _headers_remove(headers, DEPRECATION)
        headers[DEPRECATION] = value
    conf["headers"] = headers
    plugins[REWRITE] = conf


def clear_deprecation(plugins: dict[str, Any]) -> None:
    """Remove the header; then the plugin too when nothing else is left in it."""
    if not isinstance(plugins.get(REWRITE), dict):
        return
    conf = dict(plugins[REWRITE])
    headers = dict(conf.get("headers") or {})
    if _is_operations(headers):
        setting = dict(headers.get("set") or {})
        _headers_remove(setting, DEPRECATION)
        if setting:
            headers["set"] = setting
        else:
            headers.pop("set", None)
    else:
        _headers_remove(headers, DEPRECATION)
    if headers:
        conf["headers"] = headers
    else:
        conf.pop("headers", None)
    if {k for k in conf if k != "_meta"}:
        plugins[REWRITE] = conf
    else:
        del plugins[REWRITE]


def with_lifecycle(route: dict[str, Any], lifecycle: str, now: int) -> dict[str, Any]:
    """The route in `lifecycle`; _Unchanged when it already is."""
    labels = dict(route.get("labels") or {})
    previous = labels.get(LABEL)
    if previous == lifecycle:
        raise _Unchanged
    labels[LABEL] = lifecycle
    route["labels"] = labels
    if lifecycle == "retired":
        route["status"] = 0
    elif previous == "retired":
        route["status"] = 1
    plugins = dict(route.get("plugins") or {})
    if lifecycle == "deprecated":
        set_deprecation(plugins, f"@{now}")
    elif previous == "deprecated":
        clear_deprecation(plugins)
    if plugins or "plugins" in route:
        route["plugins"] = plugins
    return route


def inline_target(upstream: Mapping[str, Any]) -> dict[str, Any]:
    """An inline upstream object, or a nodes map made one (the edge's schema checks it)."""
    if not upstream:
        raise invalid("upstream must not be an empty object")
    if "nodes" in upstream or "service_name" in upstream:
        return {"upstream": dict(upstream)}
    return {"upstream": {"type": "roundrobin", "nodes": dict(upstream)}}


def canary_target(upstream: str, upstream_ids: Mapping[str, Any]) -> dict[str, Any]:
    """The weighted upstream entry (without its weight) of a canary named by a string."""
    if upstream in upstream_ids:
        return {"upstream_id": upstream}
    match = HOST_PORT.fullmatch(upstream)
    port = int(match.group("port")) if match else 0
    host = ""
    if match and match.group("v6"):
        try:
            host = f"[{ipaddress.IPv6Address(match.group('v6'))}]"
        except ValueError:
            host = ""
    elif match:
        name = match.group("host")
        host = name if HOSTNAME.fullmatch(name) and len(name) <= 253 else ""
    if not host or not 1 <= port <= 65535:
        raise invalid(f"upstream {upstream!r} is neither the id of an edge upstream nor host:port")
    return {"upstream": {"type": "roundrobin", "nodes": {f"{host}:{port}": 1}}}


def with_canary(
    route: dict[str, Any], target: dict[str, Any] | None, weight: int
) -> dict[str, Any]:
    """The route with its canary split (None: without); _Unchanged when it already is."""
    if not any(k in route for k in ("upstream", "upstream_id", "service_id")):
        raise invalid(f"route {route.get('id')!r} has no upstream of its own to split traffic with")
    plugins = dict(route.get("plugins") or {})
    if target is None:
        if SPLIT not in plugins:
            raise _Unchanged
        del plugins[SPLIT]
    else:
        split = {"rules": [{"weighted_upstreams": [{**target, "weight": weight},
                                                   {"weight": 100 - weight}]}]}  # fmt: skip
        if plugins.get(SPLIT) == split:
            raise _Unchanged
        plugins[SPLIT] = split
    route["plugins"] = plugins
    return route


def _plain(value: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in value.items() if k not in FORBIDDEN}


def _actor() -> str:
    principal = current_caller().principal
    if principal is None:
        return ""
    return str(principal.claims.get("preferred_username") or principal.subject)


def _trace_id() -> str:
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else ""


class RouteServicer(route_pb2_grpc.RouteServiceServicer):
    def __init__(self, edge: EdgeConfigServicer, sink: AnalyticsSink) -> None:
        self.edge = edge
        self.sink = sink

    async def _change(
        self,
        route_id: str,
        build: Callable[[dict[str, Any]], dict[str, Any]],
        action: str,
        status: str,
    ) -> None:
        """Write the route as `build` makes it, then its audit row (or put it back)."""
        if not IDENTIFIER.fullmatch(route_id):
            raise invalid("route id must match [A-Za-z0-9._:-]{1,128}")
        before: dict[str, Any] = {}

        def change(current: dict[str, Any]) -> dict[str, Any]:
            before.clear()
            before.update(copy.deepcopy(current))
            return build(current)

        try:
            with kv_unavailable():
                written = await self.edge.modify(ROUTES, route_id, change)
        except _Unchanged:
            return
        except NotFound as exc:
            if exc.error == "key_not_found":
                raise route_not_found() from None
            raise
        row = {
            "tenant_id": self._tenant_of(written),
            "session_id": "",
            "agent_id": _actor(),
            "tool_name": f"route:{route_id}",
            "action": action,
            "status": status,
            "trace_id": _trace_id(),
        }
        try:
            await self.sink.write(AUDIT_TABLE, [row])
        except Exception as exc:
            await self._put_back(route_id, _plain(written), before)
            raise Unavailable(
                "the audit trail cannot be written; the route was not changed",
                error="audit_unavailable",
            ) from exc

    async def _put_back(
        self, route_id: str, written: dict[str, Any], before: dict[str, Any]
    ) -> None:
        def restore(current: dict[str, Any]) -> dict[str, Any]:
            if current != written:
                raise _Moved
            return before

        try:
            await self.edge.modify(ROUTES, route_id, restore)
        except _Moved:
            log.error("route changed again before it could be put back", extra={"route": route_id})
        except Exception:
            log.exception("route could not be put back after the audit failure")

    @staticmethod
    def _tenant_of(route: Mapping[str, Any]) -> str:
        tenant = (route.get("labels") or {}).get("tenant_id", "")
        return tenant if isinstance(tenant, str) and IDENTIFIER.fullmatch(tenant) else ""

    async def UpdateRouteLifecycle(
        self, request: pb.UpdateRouteLifecycleRequest, context: ServicerContext
    ) -> pb.UpdateRouteLifecycleResponse:
        if request.lifecycle not in LIFECYCLES:
            raise InvalidRequest("Invalid lifecycle state")
        now = int(time.time())
        await self._change(
            request.id,
            lambda route: with_lifecycle(route, request.lifecycle, now),
            "route_lifecycle",
            request.lifecycle,
        )
        return pb.UpdateRouteLifecycleResponse(
            status="updated", route_id=request.id, lifecycle=request.lifecycle
        )

    async def UpdateRouteCanary(
        self, request: pb.UpdateRouteCanaryRequest, context: ServicerContext
    ) -> pb.UpdateRouteCanaryResponse:
        if not request.HasField("weight"):
            raise invalid("weight is required: the canary's share of traffic, 0..100")
        weight = request.weight
        if not 0 <= weight <= 100:
            raise invalid(f"weight must be between 0 and 100, got {weight}")
        target = None
        given = plain_json(request.upstream) if request.HasField("upstream") else None
        if weight > 0:
            if isinstance(given, str):
                given = given.strip()
            if given is None or given == "":
                raise invalid("upstream is required with a weight above 0")
            if isinstance(given, dict):
                target = inline_target(given)
            elif isinstance(given, str):
                with kv_unavailable():
                    upstreams = (await self.edge.store.load()).of(UPSTREAMS)
                target = canary_target(given, upstreams)
            else:
                raise invalid(
                    "upstream must be an edge upstream id, host:port, an upstream object "
                    "or a nodes map"
                )
        await self._change(
            request.id,
            lambda route: with_canary(route, target, weight),
            "route_canary",
            f"{weight}%",
        )
        answer = pb.UpdateRouteCanaryResponse(status="updated", route_id=request.id, weight=weight)
        if isinstance(given, dict) and weight > 0:
            answer.upstream.struct_value.update(given)
        elif isinstance(given, str) and weight > 0:
            answer.upstream.string_value = given
        return answer
