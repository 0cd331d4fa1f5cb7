"""Compare-and-set of one field of a hash in the key-value store: the field is written (or
deleted) only if it still holds what the caller read, in one script, so that of two replicas
racing on one field exactly one wins."""

from __future__ import annotations

from redis.asyncio import Redis

# KEYS: the hash. ARGV: the field, the expected value ('' = absent), the new value
# ('' = delete). Returns 1 when written, 0 when the field held something else.
COMPARE_AND_SET = """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if (current or '') ~= ARGV[2] then return 0 end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
end
return 1
"""


class FieldCas:
    def __init__(self, kv: Redis) -> None:
        self._script = kv.register_script(COMPARE_AND_SET)

    async def set(self, key: str, field: str, *, expected: str, new: str) -> bool:
        """Set `key`'s `field` to `new` ('' deletes it) if it holds `expected` ('' = absent);
        whether it did. Store errors propagate (the caller decides how it fails)."""
        return bool(await self._script(keys=[key], args=[field, expected, new]))
