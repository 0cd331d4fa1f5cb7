"""The edge configuration in the key-value store, etcd-like: one hash per kind (id → JSON of
`{value, createdIndex, modifiedIndex}`) and one revision counter.

Keys: `controlplane/edge_config/keys.py` (all under the hash tag `{edge:config}`).

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

from controlplane.edge_config.keys import CHANNEL, IDS, REVISION, SEEDED, kind_hash
from gateways.edge.model import KINDS, Snapshot

__all__ = [
    "CHANNEL",
    "IDS",
    "REVISION",
    "SEEDED",
    "Conflict",
    "EdgeConfigStore",
    "Entry",
    "Op",
    "State",
]

# KEYS: the revision, the hash of each change (in ARGV's order), then the seed marker when
# ARGV[2] is '1'. ARGV: expected revision, '1' to set the marker (NX) or '', the channel, then
# (id, entry) pairs, an empty entry deleting. Returns the new revision, -1 on a moved
# revision, -2 when the marker already exists. Every key is declared and under one hash tag.
_WRITE = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current ~= tonumber(ARGV[1]) then return -1 end
local ops = (#ARGV - 3) / 2
if ARGV[2] == '1' and not redis.call('SET', KEYS[ops + 2], current + 1, 'NX') then return -2 end
local nxt = current + 1
redis.call('SET', KEYS[1], nxt)
for i = 1, ops do
  local id, entry = ARGV[2 + 2 * i], ARGV[3 + 2 * i]
  if entry == '' then
    redis.call('HDEL', KEYS[1 + i], id)
  else
    redis.call('HSET', KEYS[1 + i], id, entry)
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
                pipe.hgetall(kind_hash(kind))
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
        keys = [REVISION]
        args: list[Any] = [expected, "1" if marker else "", CHANNEL]
        for kind, id_, entry in ops:
            encoded = "" if entry is None else json.dumps(
                {
                    "value": entry.value,
                    "createdIndex": entry.created_index,
                    "modifiedIndex": entry.modified_index,
                }
            )  # fmt: skip
            keys.append(kind_hash(kind))
            args += [id_, encoded]
        if marker:
            keys.append(marker)
        result = int(await self._write(keys=keys, args=args))
        if result < 0:
            raise Conflict("marker exists" if result == -2 else "revision moved")
        return result

    async def next_id(self) -> str:
        """APISIX's generated id: a 20-digit zero-padded number."""
        return f"{int(await self.kv.incr(IDS)):020d}"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
