"""The registry's records in the key-value store, every write one atomic script.

A server record is the spec's server object plus what the gateway needs (`protocol`,
`quarantine`), JSON in the hash `{mcp}:servers`. The tenant's tool owners (`{mcp}:tool-owner:<t>`,
tool name → server id) are written by the same script as the record, after checking that no
other server of the tenant serves one of its tool names: two replicas registering the same
tool name at once cannot both win. A write may name the record it expects to replace (compare
and set), so a quarantine, an approval and a registration never overwrite one another. Every
write also sets `{mcp}:servers:version` to a new random token, which tells the replicas' record
caches (`server_cache.py`) that what they hold may be stale, and announces itself on the
agent gateway's change feed (`changes.py`). Every key of a write, the feed's channel included,
is declared and under the tag `{mcp}` (`keys.py`): one slot on a clustered store.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from redis.asyncio import Redis

from gateways.agent.changes import CHANNEL, COUNTER, changed_here
from gateways.agent.mcp import keys
from gateways.agent.mcp.errors import RegistryConflict, ToolNamingCollision
from runtime.stores.kv_errors import kv_unavailable

Record = dict[str, Any]

# KEYS: servers, tool owners of the tenant, registry version, the change counter and channel
# (`changes.py`: the write is announced in the same step). ARGV: id, record JSON, tenant,
# the record JSON the write expects to replace ('' = any), the new version, then the tool names
# the server owns after the write.
_PUT = """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if current then
  if cjson.decode(current)['tenant_id'] ~= ARGV[3] then return {'taken'} end
end
if ARGV[4] ~= '' and current ~= ARGV[4] then return {'moved'} end
local wanted = {}
local clashes = {}
for i = 6, #ARGV do
  wanted[ARGV[i]] = true
  local owner = redis.call('HGET', KEYS[2], ARGV[i])
  if owner and owner ~= ARGV[1] then
    table.insert(clashes, ARGV[i])
    table.insert(clashes, owner)
  end
end
if #clashes > 0 then return {'collision', unpack(clashes)} end
local owned = redis.call('HGETALL', KEYS[2])
for i = 1, #owned, 2 do
  if owned[i + 1] == ARGV[1] and not wanted[owned[i]] then
    redis.call('HDEL', KEYS[2], owned[i])
  end
end
for i = 6, #ARGV do redis.call('HSET', KEYS[2], ARGV[i], ARGV[1]) end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SET', KEYS[3], ARGV[5])
redis.call('INCR', KEYS[4])
redis.call('PUBLISH', KEYS[5], 'servers')
if current then return {'replaced'} end
return {'created'}
"""

# KEYS: servers, tool owners of the tenant, auth config, cached token, registry version, the
# change counter and channel. ARGV: id, tenant, the new version.
_DELETE = """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then return 0 end
if cjson.decode(current)['tenant_id'] ~= ARGV[2] then return -1 end
local owned = redis.call('HGETALL', KEYS[2])
for i = 1, #owned, 2 do
  if owned[i + 1] == ARGV[1] then redis.call('HDEL', KEYS[2], owned[i]) end
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[3], KEYS[4])
redis.call('SET', KEYS[5], ARGV[3])
redis.call('INCR', KEYS[6])
redis.call('PUBLISH', KEYS[7], 'servers')
return 1
"""


def new_version() -> str:
    return secrets.token_hex(8)


def dumps(record: Record) -> str:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


class ServerStore:
    """Server records; every method raises 503 `store_unavailable` when the store is down."""

    def __init__(self, kv: Redis) -> None:
        self.kv = kv
        self._put = kv.register_script(_PUT)
        self._delete = kv.register_script(_DELETE)

    async def get_raw(self, server_id: str) -> str | None:
        with kv_unavailable():
            raw = await self.kv.hget(keys.SERVERS, server_id)
        return raw.decode() if isinstance(raw, bytes) else raw

    async def get(self, server_id: str) -> Record | None:
        raw = await self.get_raw(server_id)
        return None if raw is None else dict(json.loads(raw))

    async def all(self) -> list[Record]:
        with kv_unavailable():
            values = await self.kv.hvals(keys.SERVERS)
        records = [json.loads(v) for v in values]
        return sorted(records, key=lambda r: (r.get("registered_at", ""), r["id"]))

    async def put(self, record: Record, *, expected: str | None = None) -> bool:
        """Write `record` and its tool owners atomically; True when it replaced a record.

        Raises ToolNamingCollision (409) when another server of the tenant serves one of its
        tool names, RegistryConflict (409 `server_id_taken`) when the id belongs to another
        tenant, (409 `server_changed`) when `expected` is given and the stored record is no
        longer it."""
        names = [t["name"] for t in record["tools"]]
        tenant = record["tenant_id"]
        with kv_unavailable():
            answer = await self._put(
                keys=[
                    keys.SERVERS,
                    keys.tool_owners(tenant),
                    keys.SERVERS_VERSION,
                    COUNTER,
                    CHANNEL,
                ],
                args=[record["id"], dumps(record), tenant, expected or "", new_version(), *names],
            )
        changed_here()
        outcome, *rest = [a.decode() if isinstance(a, bytes) else a for a in answer]
        if outcome == "collision":
            raise ToolNamingCollision(record["id"], dict(zip(rest[::2], rest[1::2], strict=True)))
        if outcome == "taken":
            raise RegistryConflict(
                f"server id {record['id']!r} is registered by another tenant",
                error="server_id_taken",
            )
        if outcome == "moved":
            raise RegistryConflict(
                f"server {record['id']!r} changed meanwhile; try again", error="server_changed"
            )
        return bool(outcome == "replaced")

    async def delete(self, record: Record) -> bool:
        """Remove the server, its tool owners, auth config and cached token; False when it
        was already gone."""
        server_id, tenant = record["id"], record["tenant_id"]
        with kv_unavailable():
            removed = await self._delete(
                keys=[
                    keys.SERVERS,
                    keys.tool_owners(tenant),
                    keys.auth_config(server_id),
                    keys.oauth_token(server_id),
                    keys.SERVERS_VERSION,
                    COUNTER,
                    CHANNEL,
                ],
                args=[server_id, tenant, new_version()],
            )
        changed_here()
        return int(removed) == 1
