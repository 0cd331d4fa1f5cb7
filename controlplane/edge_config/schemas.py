"""The Admin API's checks of a resource against its schema (gateways/edge/model/) that
name the failing field the way APISIX's Admin API does (`invalid configuration: ...`,
`failed to check the configuration of plugin <name> err: ...`)."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from gateways.edge.model import DECLARATIONS, SCHEMAS, check, with_defaults
from runtime.errors import InvalidRequest


def check_resource(kind: str, value: Mapping[str, Any]) -> None:
    """The resource schema of `kind` (400 `invalid configuration: ...`)."""
    problem = check(SCHEMAS[kind], value)
    if problem is not None:
        raise bad(f"invalid configuration: {problem}")


def check_plugins(
    plugins: Mapping[str, Any], *, consumer: bool = False, unchecked: Collection[str] = ()
) -> None:
    """Every plugin conf against its plugin's schema (a consumer's auth plugins against
    `consumer_schema`). `unchecked` names plugins accepted without a schema (the reference
    routes' plugins, seeded before their implementation exists)."""
    for name, conf in plugins.items():
        if name in unchecked and name not in DECLARATIONS:
            continue
        plugin = DECLARATIONS.get(name)
        if plugin is None:
            raise bad(f"unknown plugin [{name}]")
        if not isinstance(conf, Mapping):
            raise bad(f"invalid plugin conf {json.dumps(conf)} for plugin [{name}]")
        consumer_schema = plugin.consumer_schema if consumer else None
        schema = consumer_schema or plugin.schema
        conf = {k: v for k, v in conf.items() if k != "_meta"}  # APISIX's per-instance knobs
        problem = check(schema, conf)
        if problem is None and not consumer_schema:
            problem = plugin.check_conf(with_defaults(schema, conf))
        if problem is not None:
            message = f"failed to check the configuration of plugin {name} err: {problem}"
            raise bad(f"invalid plugins configuration: {message}" if consumer else message)


def bad(message: str) -> InvalidRequest:
    return InvalidRequest(message, error="invalid_configuration")
