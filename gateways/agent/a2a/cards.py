"""Agent cards in the key-value store: the hash `a2a:agents`, field = agent id, value = the
card as JSON (`id, name, url, tenant_id, capabilities, description, registered_at`). Agent ids
are global: an id another tenant registered cannot be taken over (409)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from redis.asyncio import Redis

AGENTS = "a2a:agents"

# KEYS: the hash. ARGV: agent id, tenant, card JSON. 1 stored, 0 when another tenant owns
# the id (read and written in one step, so two replicas cannot interleave).
REGISTER = """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if current and cjson.decode(current)['tenant_id'] ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""


@dataclass(frozen=True)
class AgentCard:
    id: str
    name: str
    url: str
    tenant_id: str
    capabilities: list[str] = field(default_factory=list)
    description: str = ""
    registered_at: str = ""

    @classmethod
    def from_json(cls, raw: str | bytes) -> AgentCard:
        return cls(**json.loads(raw))

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))


class AgentCards:
    """Methods raise RedisError/OSError when the store is down (callers: 503)."""

    def __init__(self, kv: Redis) -> None:
        self.kv = kv
        self._register = kv.register_script(REGISTER)

    async def register(self, card: AgentCard) -> bool:
        """Store (or replace) the card; False when the id belongs to another tenant."""
        args = [card.id, card.tenant_id, card.to_json()]
        return bool(await self._register(keys=[AGENTS], args=args))

    async def get(self, agent_id: str) -> AgentCard | None:
        raw = await self.kv.hget(AGENTS, agent_id)
        return None if raw is None else AgentCard.from_json(raw)

    async def list(self, tenant_id: str | None) -> list[AgentCard]:
        """The cards of `tenant_id` (None: every tenant's), by id."""
        cards = [AgentCard.from_json(raw) for raw in (await self.kv.hgetall(AGENTS)).values()]
        mine = [c for c in cards if tenant_id is None or c.tenant_id == tenant_id]
        return sorted(mine, key=lambda c: c.id)
