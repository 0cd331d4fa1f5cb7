"""The store's durable keys renamed to their cluster-safe names before the control plane serves.

Each layout's `keys` module declares its moves (`RENAMES`, `runtime/stores/renames.py`); this
module lists them all, and `rename_store_keys` runs them once per start under a store lock so
that two control planes starting together do not race. Gateways of an older release read the
old names: upgrade with them stopped for the control plane's first start (README, "Upgrading").
"""

from __future__ import annotations

import logging

from redis.asyncio import Redis
from redis.exceptions import RedisError

import controlplane.edge_config.keys
import controlplane.key_renames
import gateways.agent.keys
import gateways.ai.providers.keys
import gateways.ai.tenants.keys
import gateways.edge.keys
from runtime.stores.lock import StoreLock
from runtime.stores.renames import KeyRename, apply_renames

log = logging.getLogger(__name__)

LOCK = "cp:store-layout:lock"
LOCK_TTL_MS = 60_000

# Every layout's moves (one line per keys module).
RENAMES: tuple[KeyRename, ...] = (
    *gateways.edge.keys.RENAMES,
    *controlplane.edge_config.keys.RENAMES,
    *gateways.ai.tenants.keys.RENAMES,
    *gateways.ai.providers.keys.RENAMES,
    *controlplane.key_renames.RENAMES,
    *gateways.agent.keys.RENAMES,
)


async def rename_store_keys(kv: Redis, renames: tuple[KeyRename, ...] = RENAMES) -> int:
    """Moves every durable key still under an old name; returns how many moved."""
    if not renames:
        return 0
    lock = StoreLock(kv, LOCK_TTL_MS)
    token = await lock.acquire(LOCK, wait_secs=LOCK_TTL_MS / 1000)
    if token is None:
        raise RedisError("store layout lock still held after its TTL")
    try:
        moved = await apply_renames(kv, renames)
    finally:
        await lock.release(LOCK, token)
    if moved:
        log.info("store keys renamed to the cluster-safe layout", extra={"renamed": moved})
    return moved
