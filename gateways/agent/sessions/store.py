"""Sessions in the key-value store, shared by every replica. Every key carries the tenant as
its hash tag (`gateways/agent/keys.py`): a tenant's sessions share one slot of a clustered
store, so the scripts below and the MGETs stay single-slot, and a session is found by its
tenant and id (every caller knows the tenant: its token, or the `/mcp` session's record).

- `agent:session:{t}:<id>`: the session record, JSON (`id, tenant_id, agent_id,
  tool_allowlist, token_budget, status, created_at, metadata`); never rewritten except on
  termination.
- `agent:session-calls:{t}:<id>`, `agent:session-tokens:{t}:<id>`: the counters `tool_calls`
  and `tokens_used` (absent: 0), changed by the tool-call pipeline only (`admission.py`).
- `agent:sessions:{t}`: zset of the tenant's session ids by creation time (ms).
- `agent:active-sessions:{t}`: set of the tenant's active session ids; its size is what
  `max_concurrent_sessions` limits, checked and added to in one script (`CREATE`), so two
  replicas creating at once cannot both take the last place.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Any

from redis.asyncio import Redis

from gateways.agent.keys import active_key, calls_key, session_key, sessions_key, tokens_key

ACTIVE = "active"
TERMINATED = "terminated"
LIST_LIMIT = 1000  # GET /v1/sessions shows the tenant's most recent sessions, up to this many


@dataclass(frozen=True)
class SessionRecord:
    id: str
    tenant_id: str
    agent_id: str
    tool_allowlist: list[str]
    token_budget: int
    status: str
    created_at: str
    metadata: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, raw: str | bytes) -> SessionRecord:
        return cls(**json.loads(raw))

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @property
    def active(self) -> bool:
        return self.status == ACTIVE


@dataclass(frozen=True)
class Counters:
    tool_calls: int = 0
    tokens_used: int = 0


# KEYS: active set, session record, tenant zset. ARGV: limit, id, record JSON, score (ms).
# Returns 0 when the tenant already has `limit` active sessions, else 1.
CREATE = """
if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('SADD', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[2])
return 1
"""

# KEYS: session record, active set. ARGV: expected record JSON, terminated record JSON, id.
# Compare-and-set: 1 when this call terminated the session, 0 when the record changed since
# it was read (another replica terminated it first).
TERMINATE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SREM', KEYS[2], ARGV[3])
return 1
"""


class SessionStore:
    """Session records and counters. Methods raise RedisError/OSError when the store is down
    (callers turn them into 503)."""

    def __init__(self, kv: Redis) -> None:
        self.kv = kv
        self._create = kv.register_script(CREATE)
        self._terminate = kv.register_script(TERMINATE)

    async def create(self, session: SessionRecord, max_active: int) -> bool:
        """Store an active session unless its tenant already has `max_active` active ones."""
        tenant = session.tenant_id
        keys = [active_key(tenant), session_key(tenant, session.id), sessions_key(tenant)]
        args: list[str | int] = [max_active, session.id, session.to_json()]
        args.append(int(time.time() * 1000))
        return bool(await self._create(keys=keys, args=args))

    async def get(self, tenant_id: str, session_id: str) -> SessionRecord | None:
        """The tenant's session `session_id` (None: it has none by that id)."""
        raw = await self.kv.get(session_key(tenant_id, session_id))
        return None if raw is None else SessionRecord.from_json(raw)

    async def counters(self, session: SessionRecord) -> Counters:
        tenant, sid = session.tenant_id, session.id
        calls, tokens = await self.kv.mget(calls_key(tenant, sid), tokens_key(tenant, sid))
        return Counters(int(calls or 0), int(tokens or 0))

    async def list(self, tenant_id: str) -> list[SessionRecord]:
        ids = await self.kv.zrange(sessions_key(tenant_id), -LIST_LIMIT, -1)
        if not ids:
            return []
        raws = await self.kv.mget([session_key(tenant_id, str(i)) for i in ids])
        return [SessionRecord.from_json(raw) for raw in raws if raw is not None]

    async def terminate(self, session: SessionRecord) -> tuple[SessionRecord, bool]:
        """Mark the session terminated; returns the record and whether this call changed it
        (False: it was terminated already, by this replica or another)."""
        while session.active:
            ended = SessionRecord(**{**asdict(session), "status": TERMINATED})
            keys = [session_key(session.tenant_id, session.id), active_key(session.tenant_id)]
            args = [session.to_json(), ended.to_json(), session.id]
            if await self._terminate(keys=keys, args=args):
                return ended, True
            current = await self.get(session.tenant_id, session.id)
            if current is None:
                return ended, False
            session = current
        return session, False

    async def active_count(self, tenant_id: str) -> int:
        return int(await self.kv.scard(active_key(tenant_id)))
