"""Building plugins and request contexts in the edge plugin tests."""

from __future__ import annotations

import time
from typing import Any

from gateways.edge.plugin import Plugin, PluginEnv, RequestContext
from gateways.edge.plugins import REGISTRY
from gateways.edge.schema import check, with_defaults


def make_plugin(name: str, conf: dict[str, Any], env: PluginEnv | None = None) -> Any:
    """The plugin as the data plane builds it: schema-checked, defaults filled in."""
    cls: type[Plugin] = REGISTRY[name]
    problem = check(cls.schema, conf)
    assert problem is None, problem
    return cls(with_defaults(cls.schema, conf), env or PluginEnv())


def request(
    path: str = "/api/things",
    headers: dict[str, str] | None = None,
    query: str = "",
    method: str = "GET",
    route_id: str = "r1",
    client_ip: str = "127.0.0.1",
) -> RequestContext:
    ctx = RequestContext(
        method, path, query, {k.lower(): v for k, v in (headers or {}).items()}, client_ip,
        time.perf_counter(),
    )  # fmt: skip
    ctx.route_id = route_id
    return ctx
