"""The edge configuration in the key-value store, etcd-like: one hash per kind (id → JSON of
`{value, createdIndex, modifiedIndex}`) and one revision counter.

Writes are optimistic transactions: a caller reads a consistent `State` (MULTI/EXEC), decides
what to write from it (validation, references, uniqueness), and `write` applies the change
only if the revision has not moved since (one Lua script: the revision check, the new
revision, every hash change and the change notification together — nothing half-written).
On `Conflict` the caller reads again and retries.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis

from gateways.edge.model import KINDS, Snapshot

PREFIX = "edge:config"
REVISION = f"{PREFIX}:revision"
CHANNEL = f"{PREFIX}:changes"  # PUBLISHed the new revision on every write
SEEDED = f"{PREFIX}:seeded"  # set once, by the first seeding of the reference routes
IDS = f"{PREFIX}:ids"  # generated ids (POST)

# ARGV: expected revision, marker key ('' for none), channel, then (hash, id, entry) triples,
# an empty entry deleting. Returns the new revision, -1 on a moved revision, -2 when the
# marker already exists.
_WRITE = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current ~= tonumber(ARGV[1]) then return -1 end
if ARGV[2] ~= '' and not redis.call('SET', ARGV[2], current + 1, 'NX') then return -2 end
local nxt = current + 1
redis.call('SET', KEYS[1], nxt)
for i = 4, #ARGV, 3 do
  if ARGV[i + 2] == '' then
    redis.call('HDEL', ARGV[i], ARGV[i + 1])
  else
    redis.call('HSET', ARGV[i], ARGV[i + 1], ARGV[i + 2])
  end
end
redis.call('PUBLISH', ARGV[3], nxt)
return nxt
"""


class Conflict(Exception):
    """The revision moved between the read and the write (or the seed marker exists)."""


@dataclass(frozen=True)
class Entry:
    value: dict[str, Any]
    created_index: int
    modified_index: int


@dataclass(frozen=True)
class State:
    """The whole edge configuration at one revision."""

    revision: int
    entries: dict[str, dict[str, Entry]] = field(default_factory=dict)

    def of(self, kind: str) -> dict[str, Entry]:
        return self.entries.get(kind, {})

    def snapshot(self) -> Snapshot:
        return Snapshot(
            self.revision,
            {kind: {i: e.value for i, e in self.of(kind).items()} for kind in KINDS},
        )


# A change: (kind, id, entry), None deleting.
Op = tuple[str, str, Entry | None]


def _hash(kind: str) -> str:
    return f"{PREFIX}:{kind}"


class EdgeConfigStore:
    def __init__(self, kv: Redis) -> None:
        self.kv = kv
        self._write = kv.register_script(_WRITE)

    async def revision(self) -> int:
        return int(await self.kv.get(REVISION) or 0)

    async def load(self) -> State:
        async with self.kv.pipeline(transaction=True) as pipe:
            pipe.get(REVISION)
            for kind in KINDS:
                pipe.hgetall(_hash(kind))
            revision, *hashes = await pipe.execute()
        entries: dict[str, dict[str, Entry]] = {}
        for kind, raw in zip(KINDS, hashes, strict=True):
            entries[kind] = {}
            for key, text in raw.items():
                data = json.loads(text)
                entries[kind][_text(key)] = Entry(
                    data["value"], data["createdIndex"], data["modifiedIndex"]
                )
        return State(int(revision or 0), entries)

    async def write(self, expected: int, ops: list[Op], *, marker: str = "") -> int:
        """Apply `ops` as revision `expected + 1`; Conflict when the store is not at `expected`."""
        args: list[Any] = [expected, marker, CHANNEL]
        for kind, id_, entry in ops:
            encoded = "" if entry is None else json.dumps(
                {
                    "value": entry.value,
                    "createdIndex": entry.created_index,
                    "modifiedIndex": entry.modified_index,
                }
            )  # fmt: skip
            args += [_hash(kind), id_, encoded]
        result = int(await self._write(keys=[REVISION], args=args))
        if result < 0:
            raise Conflict("marker exists" if result == -2 else "revision moved")
        return result

    async def next_id(self) -> str:
        """APISIX's generated id: a 20-digit zero-padded number."""
        return f"{int(await self.kv.incr(IDS)):020d}"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
