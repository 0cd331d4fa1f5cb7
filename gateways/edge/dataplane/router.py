"""The route table, compiled once per configuration version, and the match of one request.

As APISIX's radixtree router: an exact `uri` beats a prefix (`/api/*`), a longer prefix beats a
shorter one, and routes on the same path are tried by descending `priority`; the first whose
hosts, methods, remote addresses and `vars` all match wins. Exact paths are one dict lookup;
prefixes sit in a dict per distinct prefix length, so a match costs one lookup per length
(longest first), never a scan of every route. A `:name` segment (`/users/:id`) makes the route
a prefix route on the part before it, checked with a regular expression.

`vars` are lua-resty-expr conditions (gateways/edge/variables.py).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from typing import Any

from gateways.edge.model.resources import ConfigRejected
from gateways.edge.plugin import RequestContext
from gateways.edge.variables import compile_vars


class Route:
    """A compiled route: its match conditions, and what the proxy needs when it matches."""

    __slots__ = (
        "addrs",
        "conditions",
        "conf",
        "hosts",
        "id",
        "methods",
        "param",
        "priority",
        "service_id",
        "target",
        "wildcards",
    )

    def __init__(self, conf: Mapping[str, Any], target: Any) -> None:
        self.id = str(conf.get("id", ""))
        self.conf = conf
        self.service_id = str(conf.get("service_id", "") or "")
        self.priority = int(conf.get("priority", 0))
        self.target = target  # what the proxy runs (compile.RouteTarget)
        methods = conf.get("methods")
        self.methods = frozenset(methods) if methods else None
        hosts = conf.get("hosts") or ([conf["host"]] if conf.get("host") else [])
        self.hosts = frozenset(h.lower() for h in hosts if not h.startswith("*")) or None
        self.wildcards = tuple(h[1:].lower() for h in hosts if h.startswith("*")) or None
        if self.wildcards and not self.hosts:
            self.hosts = frozenset()
        addrs = conf.get("remote_addrs") or (
            [conf["remote_addr"]] if conf.get("remote_addr") else []
        )
        try:
            self.addrs = tuple(ipaddress.ip_network(a, strict=False) for a in addrs) or None
        except ValueError as exc:
            raise ConfigRejected(f"route {self.id}: {exc}") from None
        self.conditions = compile_vars(conf["vars"]) if conf.get("vars") else None
        self.param: re.Pattern[str] | None = None

    def matches(self, ctx: RequestContext, method: str, host: str) -> bool:
        if self.methods is not None and method not in self.methods:
            return False
        if self.hosts is not None and host not in self.hosts:
            wild = self.wildcards
            if not wild or not any(host.endswith(w) for w in wild):
                return False
        if self.addrs is not None and not self._addr(ctx.client_ip):
            return False
        return self.conditions is None or self.conditions(ctx)

    def _addr(self, ip: str) -> bool:
        try:
            address = ipaddress.ip_address(ip)
        except ValueError:
            return False
        return any(address in net for net in self.addrs or ())


_PARAM = re.compile(r":([A-Za-z_][A-Za-z0-9_]*)")


def _param_pattern(uri: str) -> re.Pattern[str]:
    """`/users/:id/posts` → ^/users/(?P<id>[^/]+)/posts$ (a trailing `*` or `*name`: any tail)."""
    tail = ""
    if uri.endswith("*") or re.search(r"/\*[A-Za-z_]\w*$", uri):
        head, _, star = uri.rpartition("*")
        uri, tail = head, f"(?P<{star}>.*)" if star else ".*"
    pattern = _PARAM.sub(lambda m: f"(?P<{m.group(1)}>[^/]+)", re.escape(uri).replace("\\:", ":"))
    return re.compile(f"^{pattern}{tail}$")


class Router:
    """All routes of one configuration version."""

    def __init__(self, routes: Iterable[tuple[Route, list[str]]]) -> None:
        self.exact: dict[str, list[Route]] = {}
        self.prefix: dict[int, dict[str, list[Route]]] = {}
        for route, uris in routes:
            for uri in uris:
                self._add(route, uri)
        order = lambda r: -r.priority  # noqa: E731 (a sort key)
        for bucket in self.exact.values():
            bucket.sort(key=order)
        for table in self.prefix.values():
            for bucket in table.values():
                bucket.sort(key=order)
        self.lengths = sorted(self.prefix, reverse=True)

    def _add(self, route: Route, uri: str) -> None:
        if not uri.startswith("/"):
            raise ConfigRejected(f"route {route.id}: uri must start with /")
        if ":" in uri or re.search(r"/\*\w+$", uri):
            if route.param is not None:
                raise ConfigRejected(f"route {route.id}: one parameterised uri per route")
            route.param = _param_pattern(uri)
            cut = min(i for i in (uri.find(":"), uri.find("*")) if i >= 0)
            self.prefix.setdefault(cut, {}).setdefault(uri[:cut], []).append(route)
        elif uri.endswith("*"):
            key = uri[:-1]
            self.prefix.setdefault(len(key), {}).setdefault(key, []).append(route)
        else:
            self.exact.setdefault(uri, []).append(route)

    def match(self, ctx: RequestContext) -> Route | None:
        path, method = ctx.path, ctx.method
        host = ctx.host
        if ":" in host:
            host = host.rpartition(":")[0] if not host.endswith("]") else host
        host = host.lower()
        bucket = self.exact.get(path)
        if bucket is not None:
            for route in bucket:
                if route.matches(ctx, method, host):
                    return route
        size = len(path)
        for length in self.lengths:
            if length > size:
                continue
            bucket = self.prefix[length].get(path[:length])
            if bucket is None:
                continue
            for route in bucket:
                if route.param is not None:
                    found = route.param.match(path)
                    if found is None:
                        continue
                    if not route.matches(ctx, method, host):
                        continue
                    ctx.vars["uri_params"] = found.groupdict()
                    return route
                if route.matches(ctx, method, host):
                    return route
        return None
