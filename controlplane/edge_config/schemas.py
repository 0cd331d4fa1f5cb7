"""APISIX's core resource schemas (Admin API v3, reference section 1.5) and the checks that
name the failing field the way APISIX's Admin API does (`invalid configuration: ...`,
`failed to check the configuration of plugin <name> err: ...`)."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from gateways.edge.plugins import REGISTRY
from gateways.edge.resource_schemas import (
    COMMON,
    DESC,
    HOST,
    ID,
    IP,
    LABELS,
    METHODS,
    NAME,
    PLUGINS,
    TIMEOUT,
    TIMESTAMP,
    UPSTREAM,
)
from gateways.edge.schema import check, with_defaults
from runtime.errors import InvalidRequest


def _one_of_or_none(a: str, b: str) -> dict[str, Any]:
    return {
        "oneOf": [
            {"required": [a]},
            {"required": [b]},
            {"not": {"anyOf": [{"required": [a]}, {"required": [b]}]}},
        ]
    }


ROUTE: dict[str, Any] = {
    "type": "object",
    "properties": {
        **COMMON,
        "name": NAME,
        "desc": DESC,
        "labels": LABELS,
        "uri": {"type": "string", "minLength": 1, "maxLength": 4096},
        "uris": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": 4096},
            "minItems": 1,
            "uniqueItems": True,
        },
        "methods": {
            "type": "array",
            "items": {"type": "string", "enum": METHODS},
            "uniqueItems": True,
        },
        "host": HOST,
        "hosts": {"type": "array", "items": HOST, "minItems": 1, "uniqueItems": True},
        "remote_addr": IP,
        "remote_addrs": {"type": "array", "items": IP, "minItems": 1, "uniqueItems": True},
        "priority": {"type": "integer"},
        "vars": {"type": "array"},
        "filter_func": {"type": "string", "minLength": 10, "pattern": "^function"},
        "script": {"type": "string", "minLength": 10, "maxLength": 102400},
        "script_id": ID,
        "plugins": PLUGINS,
        "plugin_config_id": ID,
        "upstream": UPSTREAM,
        "upstream_id": ID,
        "service_id": ID,
        "timeout": TIMEOUT,
        "enable_websocket": {"type": "boolean"},
        "status": {"type": "integer", "enum": [0, 1]},
    },
    "allOf": [
        {"oneOf": [{"required": ["uri"]}, {"required": ["uris"]}]},
        _one_of_or_none("host", "hosts"),
        _one_of_or_none("remote_addr", "remote_addrs"),
    ],
    "anyOf": [
        {"required": [what]}
        for what in (
            "plugins",
            "upstream",
            "upstream_id",
            "service_id",
            "plugin_config_id",
            "script",
        )
    ],
    "not": {
        "anyOf": [{"required": ["script", "plugins"]}, {"required": ["script", "plugin_config_id"]}]
    },
    "additionalProperties": False,
}
SERVICE: dict[str, Any] = {
    "type": "object",
    "properties": {
        **COMMON,
        "name": NAME,
        "desc": DESC,
        "labels": LABELS,
        "plugins": PLUGINS,
        "upstream": UPSTREAM,
        "upstream_id": ID,
        "script": {"type": "string", "minLength": 10, "maxLength": 102400},
        "enable_websocket": {"type": "boolean"},
        "hosts": {"type": "array", "items": HOST, "minItems": 1, "uniqueItems": True},
    },
    "additionalProperties": False,
}
CONSUMER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "username": {
            "type": "string",
            "minLength": 1,
            "maxLength": 256,
            "pattern": r"^[a-zA-Z0-9_\-]+$",
        },
        "group_id": ID,
        "plugins": PLUGINS,
        "desc": DESC,
        "labels": LABELS,
        "create_time": TIMESTAMP,
        "update_time": TIMESTAMP,
    },
    "required": ["username"],
    "additionalProperties": False,
}


def _plugins_holder(*, named: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {**COMMON, "plugins": PLUGINS}
    if named:
        properties |= {"name": NAME, "desc": DESC, "labels": LABELS}
    return {
        "type": "object",
        "properties": properties,
        "required": ["id", "plugins"],
        "additionalProperties": False,
    }


PROTO: dict[str, Any] = {
    "type": "object",
    "properties": {
        **COMMON,
        "name": NAME,
        "desc": DESC,
        "labels": LABELS,
        "content": {"type": "string", "minLength": 1, "maxLength": 1 << 20},
    },
    "required": ["content"],
    "additionalProperties": False,
}

SCHEMAS: dict[str, dict[str, Any]] = {
    "routes": ROUTE,
    "services": SERVICE,
    "upstreams": UPSTREAM,
    "consumers": CONSUMER,
    "consumer_groups": _plugins_holder(named=True),
    "global_rules": _plugins_holder(named=False),
    "plugin_configs": _plugins_holder(named=True),
    "protos": PROTO,
}


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
        if name in unchecked and name not in REGISTRY:
            continue
        plugin = REGISTRY.get(name)
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
