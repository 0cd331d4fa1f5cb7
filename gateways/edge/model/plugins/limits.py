"""The `policy` and `redis_*` fields the limiting plugins' schemas share (limit-count,
limit-req, limit-conn), as APISIX's `apisix/utils/redis-schema.lua`."""

from __future__ import annotations

from typing import Any

POLICY: dict[str, Any] = {
    "type": "string",
    "enum": ["local", "redis", "redis-cluster"],
    "default": "local",
}
# Accepted for compatibility: the data plane counts in the worker's shared client (`env.kv`,
# from REDIS_URL), whatever store these name (see tenant-rate-limit for why).
REDIS_PROPERTIES: dict[str, Any] = {
    "redis_host": {"type": "string", "minLength": 2},
    "redis_port": {"type": "integer", "minimum": 1, "default": 6379},
    "redis_username": {"type": "string", "minLength": 1},
    "redis_password": {"type": "string", "minLength": 0},
    "redis_database": {"type": "integer", "minimum": 0, "default": 0},
    "redis_timeout": {"type": "integer", "minimum": 1, "default": 1000},
    "redis_ssl": {"type": "boolean", "default": False},
    "redis_ssl_verify": {"type": "boolean", "default": False},
    "redis_keepalive_timeout": {"type": "integer", "minimum": 1000, "default": 10000},
    "redis_keepalive_pool": {"type": "integer", "minimum": 1, "default": 100},
    "redis_cluster_nodes": {"type": "array", "items": {"type": "string"}},
    "redis_cluster_name": {"type": "string"},
}
# `policy: redis` needs `redis_host`, as in APISIX.
REDIS_REQUIRED: dict[str, Any] = {
    "if": {"properties": {"policy": {"const": "redis"}}, "required": ["policy"]},
    "then": {"required": ["redis_host"]},
}
