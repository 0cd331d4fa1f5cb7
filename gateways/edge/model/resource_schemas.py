"""The JSON Schemas of APISIX's core resources (Admin API v3, reference section 1.5): the parts
plugins embed too (traffic-split's inline `upstream`, `upstream_id`), and `SCHEMAS`, each kind's
resource schema as the Admin API checks it, so a plugin and the Admin API check an upstream
alike."""

from __future__ import annotations

from typing import Any

ID = {
    "anyOf": [
        {"type": "string", "minLength": 1, "maxLength": 64, "pattern": r"^[a-zA-Z0-9\-_.]+$"},
        {"type": "integer", "minimum": 1},
    ]
}
NAME = {"type": "string", "minLength": 1, "maxLength": 256}
DESC = {"type": "string", "maxLength": 256}
LABELS = {
    "type": "object",
    "patternProperties": {".*": {"type": "string", "minLength": 1, "pattern": r"^\S+$"}},
}
TIMESTAMP = {"type": "integer"}
PLUGINS = {"type": "object"}
HOST = {"type": "string", "pattern": r"^\*?[0-9a-zA-Z\-._\[\]:]+$"}
IP = {"type": "string", "minLength": 1}
METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "CONNECT", "TRACE",
           "PURGE"]  # fmt: skip
TIMEOUT = {
    "type": "object",
    "properties": {
        "connect": {"type": "number", "exclusiveMinimum": 0},
        "send": {"type": "number", "exclusiveMinimum": 0},
        "read": {"type": "number", "exclusiveMinimum": 0},
    },
    "required": ["connect", "send", "read"],
}
COMMON = {"id": ID, "create_time": TIMESTAMP, "update_time": TIMESTAMP}

NODE = {
    "type": "object",
    "properties": {
        "host": HOST,
        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
        "weight": {"type": "integer", "minimum": 0},
        "priority": {"type": "integer", "default": 0},
        "metadata": {"type": "object"},
    },
    "required": ["host", "weight"],
}
UPSTREAM: dict[str, Any] = {
    "type": "object",
    "properties": {
        **COMMON,
        "name": NAME,
        "desc": DESC,
        "labels": LABELS,
        "nodes": {
            "anyOf": [
                {"type": "object", "patternProperties": {".*": {"type": "integer", "minimum": 0}}},
                {"type": "array", "items": NODE},
            ]
        },
        "service_name": {"type": "string", "minLength": 1, "maxLength": 256},
        "discovery_type": {"type": "string"},
        "discovery_args": {"type": "object"},
        "type": {"type": "string", "enum": ["roundrobin", "chash", "ewma", "least_conn"]},
        "hash_on": {
            "type": "string",
            "enum": ["vars", "header", "cookie", "consumer", "vars_combinations"],
        },
        "key": {"type": "string"},
        "scheme": {
            "type": "string",
            "enum": ["http", "https", "grpc", "grpcs", "tcp", "udp", "tls", "kafka"],
        },
        "pass_host": {"type": "string", "enum": ["pass", "node", "rewrite"]},
        "upstream_host": HOST,
        "retries": {"type": "integer", "minimum": 0},
        "retry_timeout": {"type": "number", "minimum": 0},
        "timeout": TIMEOUT,
        "keepalive_pool": {
            "type": "object",
            "properties": {
                "size": {"type": "integer", "minimum": 1},
                "idle_timeout": {"type": "number", "minimum": 0},
                "requests": {"type": "integer", "minimum": 1},
            },
        },
        "checks": {"type": "object"},
        "tls": {"type": "object"},
    },
    "oneOf": [{"required": ["nodes"]}, {"required": ["service_name", "discovery_type"]}],
    "additionalProperties": False,
}


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
