"""The agent gateway's change feed: when a replica may use its in-memory copies of shared state
(`runtime/change_feed.py` explains the mechanism).

Every write of what a tool call outside a session reads — the MCP registry (`{mcp}:servers`,
with a server's auth and token), a tenant's policy, a server's auth config or OAuth token —
also increments `{mcp}:changes` and publishes on `{mcp}:changed` in the same Lua script
(`write`, or the write's own script), then calls `changed_here()`. The counter and the channel
carry the tag of what they guard (`keys.py`), so on a clustered store the write and its
announcement stay one script on one slot (a script rather than MULTI/EXEC: redis-py's cluster
client refuses PUBLISH in a pipeline; a script may publish, its channel declared in KEYS).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from redis.asyncio import Redis

from gateways.agent.keys import CHANGES_CHANNEL as CHANNEL
from gateways.agent.keys import CHANGES_COUNTER as COUNTER
from runtime import change_feed

__all__ = ["CHANNEL", "COUNTER", "WRITE", "ChangeWatch", "changed_here", "write"]

# KEYS: the change counter, the channel, then the keys written. ARGV: what changed, then for
# each written key its value and TTL in seconds ('0': none; '-1': delete the key).
WRITE = """
for i = 3, #KEYS do
  local value, ttl = ARGV[2 * i - 4], tonumber(ARGV[2 * i - 3])
  if ttl < 0 then
    redis.call('DEL', KEYS[i])
  elseif ttl > 0 then
    redis.call('SET', KEYS[i], value, 'EX', ttl)
  else
    redis.call('SET', KEYS[i], value)
  end
end
redis.call('INCR', KEYS[1])
redis.call('PUBLISH', KEYS[2], ARGV[1])
return 1
"""


async def write(
    kv: Redis,
    what: str,
    *,
    put: Mapping[str, str] | None = None,
    delete: Sequence[str] = (),
    ttl_secs: int = 0,
) -> None:
    """Set `put` (each with `ttl_secs` when > 0) and delete `delete`, and announce the change
    (`what`: `policy`, `auth`, `token`), in one script; then this process's copies are
    dropped (`changed_here`). Raises RedisError/OSError when the store is down."""
    keys = [COUNTER, CHANNEL]
    args: list[str | int] = [what]
    for key, value in (put or {}).items():
        keys.append(key)
        args += [value, max(0, ttl_secs)]
    for key in delete:
        keys.append(key)
        args += ["", -1]
    await kv.register_script(WRITE)(keys=keys, args=args)
    changed_here()


def changed_here() -> None:
    """A write of this process is done: its watches drop their copies now."""
    change_feed.changed_here(CHANNEL)


class ChangeWatch(change_feed.ChangeWatch):
    """The watch of the agent gateway's feed."""

    def __init__(self, kv: Redis) -> None:
        super().__init__(kv, CHANNEL, COUNTER)
