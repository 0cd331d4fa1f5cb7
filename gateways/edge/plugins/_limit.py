"""What the limiting plugins (limit-count, limit-req, limit-conn) share, as APISIX's share
their key code and `apisix/utils/redis-schema.lua`: the key a request is counted under, the
`policy` and `redis_*` fields of their schemas, and one atomic script call in the key-value
store."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from redis.exceptions import RedisError

from gateways.edge.plugin import RequestContext
from gateways.edge.variables import TEMPLATE_VAR, variable
from runtime.stores.kv_pipeline import PipelinedScript

# What a store call may raise: the store refused, is unreachable, or slower than redis_timeout.
STORE_ERRORS = (RedisError, OSError, TimeoutError)


class Script(PipelinedScript):
    """A Lua script run by hash, loaded again when the store lost it; concurrent requests'
    calls share one round trip (`runtime/stores/kv_pipeline.py`)."""

    async def run(self, kv: Any, seconds: float, keys: tuple[str, ...], *args: Any) -> Any:
        """The script's result within `seconds`; raises one of `STORE_ERRORS`."""
        if kv is None:
            raise RedisError("no key-value store")
        async with asyncio.timeout(seconds):
            return await self(kv, keys, args)


def conf_digest(conf: Mapping[str, Any]) -> str:
    """A short hash of a configuration: counters keyed by it restart when it changes."""
    return hashlib.sha1(json.dumps(conf, sort_keys=True).encode()).hexdigest()[:12]


def rejected_body(msg: str | None) -> Any:
    """`{"error_msg": rejected_msg}` when the configuration has one, else no body."""
    return {"error_msg": msg} if msg else b""


def key_getter(key_type: str, key: str) -> Callable[[RequestContext], str]:
    """APISIX's limit key of a request. `var`: `key` names one variable (`remote_addr`,
    `consumer_name`, `route_id`, `http_x_user`, `arg_page`...); `var_combination`: `key`
    joins `$var`s (`"$remote_addr $consumer_name"`, absent ones empty); `constant`: `key`
    itself. A key that resolves to nothing (no variable of a combination present) is the
    client address."""
    if key_type == "constant":
        return lambda ctx: key
    if key_type == "var_combination":
        names = [braced or bare for braced, bare in TEMPLATE_VAR.findall(key)]

        def combined(ctx: RequestContext) -> str:
            values = {name: _value(ctx, name) for name in names}
            if not any(v is not None for v in values.values()):
                return ctx.client_ip
            return TEMPLATE_VAR.sub(lambda m: values[m.group(1) or m.group(2)] or "", key)

        return combined
    if key == "remote_addr":  # the common case, without a variable lookup
        return lambda ctx: ctx.client_ip
    return lambda ctx: _value(ctx, key) or ctx.client_ip


def _value(ctx: RequestContext, name: str) -> str | None:
    if name == "server_addr":  # the address the client reached: its Host here
        return ctx.host or None
    value = variable(ctx, name)
    return None if value is None or value == "" else str(value)
