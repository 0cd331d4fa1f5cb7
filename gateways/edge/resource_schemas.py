"""The JSON Schemas of APISIX's core resources that plugins embed too (traffic-split's inline
`upstream`, `upstream_id`): the Admin API's resource schemas (`controlplane/edge_config/
schemas.py`) are built from these, so a plugin and the Admin API check an upstream alike."""

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
