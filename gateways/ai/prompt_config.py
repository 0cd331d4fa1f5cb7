"""A tenant's chat configuration (`cp:prompt-config:{tenant_id}`, JSON `{system_prompt,
prefix, suffix, pii_redaction, cache_enabled}`, written by the control plane), applied to its
chat requests: `system_prompt` becomes the first message (a system message), `prefix` and
`suffix` wrap the content of the last user message; `pii_redaction` and `cache_enabled`
(both on unless set to false) switch PII redaction and the response cache. Read from the
key-value store and kept in memory for at most TTL_SECS, so a change applies within a second
without a store read per request.

While the store is out (`runtime/stores/kv_reachability.py`), the last configuration read is
used however old it is, without trying the store; a tenant never read by this process (or
pushed out of the MAX_TENANTS kept) is refused (503) rather than served without its
configuration."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateways.ai.tenants.keys import prompt_config_key
from runtime.errors import Unavailable
from runtime.stores.kv_pipeline import hot_command
from runtime.stores.kv_reachability import reachability

TTL_SECS = 1.0
MAX_TENANTS = 100_000  # configurations kept; the least recently read leaves first
TEXTS = ("system_prompt", "prefix", "suffix")
SWITCHES = ("pii_redaction", "cache_enabled")


class PromptConfigs:
    def __init__(self, kv: Redis) -> None:
        self.kv = kv
        self.reachability = reachability(kv)
        self._cache: dict[str, tuple[float, Mapping[str, Any]]] = {}  # oldest read first

    async def get(self, tenant_id: str) -> Mapping[str, Any]:
        now = time.monotonic()
        cached = self._cache.get(tenant_id)
        if cached is not None and (cached[0] > now or self.reachability.down):
            return cached[1]
        if self.reachability.down:
            raise _unavailable(None)
        try:
            raw = await hot_command(self.kv, "GET", prompt_config_key(tenant_id))
        except (RedisError, OSError) as exc:
            self.reachability.failed(exc)
            if cached is not None:
                return cached[1]
            raise _unavailable(exc) from exc
        config: dict[str, Any] = {}
        if raw:
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = {}
            if isinstance(parsed, dict):
                config = {
                    k: v
                    for k, v in parsed.items()
                    if (k in TEXTS and isinstance(v, str) and v)
                    or (k in SWITCHES and isinstance(v, bool))
                }
        kept = config or NONE
        self._cache.pop(tenant_id, None)
        if len(self._cache) >= MAX_TENANTS:
            del self._cache[next(iter(self._cache))]
        self._cache[tenant_id] = (now + TTL_SECS, kept)
        return kept


NONE: Mapping[str, Any] = MappingProxyType({})  # the configuration of most tenants, shared


def _unavailable(exc: BaseException | None) -> Unavailable:
    why = f": {exc}" if exc is not None else " (known to be out)"
    return Unavailable(
        f"the key-value store holding prompt configurations is unreachable{why}",
        error="service_unavailable",
    )


def apply(config: Mapping[str, Any], messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with the configuration applied (a new list; the input is not changed)."""
    if not config:
        return messages
    out = [dict(m) for m in messages]
    prefix, suffix = config.get("prefix", ""), config.get("suffix", "")
    if prefix or suffix:
        for message in reversed(out):
            if message.get("role") == "user":
                message["content"] = f"{prefix}{message.get('content') or ''}{suffix}"
                break
    if config.get("system_prompt"):
        out.insert(0, {"role": "system", "content": config["system_prompt"]})
    return out


def redaction_enabled(config: Mapping[str, Any]) -> bool:
    return config.get("pii_redaction") is not False


def cache_enabled(config: Mapping[str, Any]) -> bool:
    return config.get("cache_enabled") is not False
