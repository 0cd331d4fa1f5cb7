"""AgentRegistryService: `/api/agents` (platform administrators only; served only with
`SVC_AGENT_IDENTITY=on`) — the single source of truth for delegation policy.

Store (read by the STS at mint time and by the agent gateway at call time):
- `svc:agent-registry`, a hash: field = agent_id, value = the registration JSON
  (`agent_id`, `tenant_id`, `allowed_audiences`, `allowed_tools`, `credential_ref`,
  `description`);
- `svc:deleg:{agent_id}`, a set: the agent's allowed audiences (absent when it has none);
  the spec's template read literally, so the agent id is its hash tag;
- `{svc:agent-registry}:credentials`, a hash: credential_ref → agent_id, so that an actor
  token without an `agent_id` claim (Keycloak without the mapper) finds its agent by client
  id (`azp`); tagged with the registry's name, so it shares the registry's slot.

The registration and its credential entry change together, in one Lua script (one slot of a
clustered store). The delegation set lives in the agent's own slot and changes in a second
step, ordered so that a crash between the two never lets an agent delegate more than its
registration says: register writes the registration, then the set (grant last); delete removes
the registration, then the set (revoke first). The STS allows an audience only when both the
registration and the set name it, and a re-sent PUT or DELETE repairs a half-done one. Changes
of one agent hold its lock (`cp:agent-lock:{agent_id}`), so two racing PUTs cannot leave one's
registration with the other's set. A credential_ref already bound to another agent is 409
(nothing written).
"""

from __future__ import annotations

import contextlib
import json
import unicodedata
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from runtime.access import IDENTIFIER
from runtime.context import ServicerContext
from runtime.errors import AlreadyExists, InvalidRequest, NotFound
from runtime.fields import invalid
from runtime.hop_tokens import (
    CREDENTIALS_KEY,
    REGISTRY_KEY,
    deleg_key,
    is_agent_id,
    parse_registration,
)
from runtime.stores.kv_errors import store_errors
from runtime.stores.lock import StoreLock
from strata.controlplane.v1 import agent_registry_pb2 as pb
from strata.controlplane.v1 import agent_registry_pb2_grpc

MAX_LIST = 500  # audiences or tools of one agent
MAX_TOOL = 256
MAX_REF = 256
MAX_DESCRIPTION = 2000

# KEYS: registry, credentials index (one slot).
# ARGV: agent_id, registration JSON, credential_ref ('' for none).
REGISTER = """
local old = redis.call('HGET', KEYS[1], ARGV[1])
if ARGV[3] ~= '' then
  local owner = redis.call('HGET', KEYS[2], ARGV[3])
  if owner and owner ~= ARGV[1] then return {'taken', owner} end
end
if old then
  local ref = cjson.decode(old)['credential_ref']
  if type(ref) == 'string' and ref ~= '' and ref ~= ARGV[3]
     and redis.call('HGET', KEYS[2], ref) == ARGV[1] then
    redis.call('HDEL', KEYS[2], ref)
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[2], ARGV[3], ARGV[1]) end
return {'ok', ''}
"""

# KEYS: registry, credentials index (one slot). ARGV: agent_id.
DEREGISTER = """
local old = redis.call('HGET', KEYS[1], ARGV[1])
if not old then return 0 end
local ref = cjson.decode(old)['credential_ref']
if type(ref) == 'string' and ref ~= '' and redis.call('HGET', KEYS[2], ref) == ARGV[1] then
  redis.call('HDEL', KEYS[2], ref)
end
redis.call('HDEL', KEYS[1], ARGV[1])
return 1
"""


# KEYS: the agent's delegation set. ARGV: the audiences (none: the set goes).
REPLACE_SET = """
redis.call('DEL', KEYS[1])
if #ARGV > 0 then redis.call('SADD', KEYS[1], unpack(ARGV)) end
return 1
"""
LOCK_TTL_MS = 10_000
LOCK_WAIT_SECS = 10.0


def lock_key(agent_id: str) -> str:
    """Held while one request changes the agent (its registration, then its set)."""
    return f"cp:agent-lock:{{{agent_id}}}"


@asynccontextmanager
async def agent_locked(kv: Redis, agent_id: str) -> AsyncIterator[None]:
    """One change of the agent at a time, across every control plane replica (409 after
    LOCK_WAIT_SECS; a crashed holder's lock expires after LOCK_TTL_MS)."""
    lock = StoreLock(kv, LOCK_TTL_MS)
    token = await lock.acquire(lock_key(agent_id), wait_secs=LOCK_WAIT_SECS)
    if token is None:
        raise AlreadyExists(
            f"agent {agent_id} is being changed by another request; try again", error="conflict"
        )
    try:
        yield
    finally:
        with contextlib.suppress(RedisError, OSError):  # it expires after LOCK_TTL_MS
            await lock.release(lock_key(agent_id), token)


async def deregister(kv: Redis, agent_id: str) -> bool:
    """Remove the registration (with its credential entry), then the delegation set: revoke
    first, the registration being what the STS and the gateway check before the set. The set
    goes also when the registration is already gone (a delete re-sent after a crash between
    the two). False when the agent was not registered."""
    async with agent_locked(kv, agent_id):
        removed = await kv.eval(DEREGISTER, 2, REGISTRY_KEY, CREDENTIALS_KEY, agent_id)
        await kv.delete(deleg_key(agent_id))
    return bool(removed)


def _text(field: str, value: str, limit: int, *, spaces: bool) -> str:
    if len(value) > limit:
        raise invalid(field, f"{field} must be at most {limit} characters")
    for c in value:
        if unicodedata.category(c) == "Cc" or (not spaces and c.isspace()):
            raise invalid(field, f"{field} must not contain control characters"
                          + ("" if spaces else " or whitespace"))  # fmt: skip
    return value


def _agent_id(value: str, field: str = "agent_id") -> str:
    if not is_agent_id(value):
        raise invalid(
            field,
            f"{field} must have the form agent:<name> (letters, digits, '.', '_', ':', '-'; "
            f"at most 128 characters), got {value[:140]!r}",
        )
    return value


def _unique(values: Any) -> list[str]:
    return list(dict.fromkeys(values))


def registration(message: pb.AgentRegistration) -> dict[str, Any]:
    """The stored registration of a request, validated (400 naming the field)."""
    if not message.agent_id:
        raise InvalidRequest("agent_id cannot be empty")  # the spec's body: {error: <text>}
    agent_id = _agent_id(message.agent_id)
    if not message.tenant_id:
        raise invalid("tenant_id", "tenant_id is required")
    if not IDENTIFIER.fullmatch(message.tenant_id):
        raise invalid("tenant_id", "tenant_id must match [A-Za-z0-9._:-]{1,128}")
    for field in ("allowed_audiences", "allowed_tools"):
        if len(getattr(message, field)) > MAX_LIST:
            raise invalid(field, f"{field} holds at most {MAX_LIST} entries")
    audiences = _unique(_agent_id(a, "allowed_audiences") for a in message.allowed_audiences)
    tools = []
    for tool in message.allowed_tools:
        if not tool:
            raise invalid("allowed_tools", "allowed_tools must not hold an empty name")
        tools.append(_text("allowed_tools", tool, MAX_TOOL, spaces=False))
    return {
        "agent_id": agent_id,
        "tenant_id": message.tenant_id,
        "allowed_audiences": audiences,
        "allowed_tools": _unique(tools),
        "credential_ref": _text("credential_ref", message.credential_ref, MAX_REF, spaces=False),
        "description": _text("description", message.description, MAX_DESCRIPTION, spaces=True),
    }


def to_message(record: dict[str, Any]) -> pb.AgentRegistration:
    return pb.AgentRegistration(
        agent_id=str(record.get("agent_id", "")),
        tenant_id=str(record.get("tenant_id", "")),
        allowed_audiences=[str(a) for a in record.get("allowed_audiences") or ()],
        allowed_tools=[str(t) for t in record.get("allowed_tools") or ()],
        credential_ref=str(record.get("credential_ref") or ""),
        description=str(record.get("description") or ""),
    )


def not_registered(agent_id: str) -> NotFound:
    return NotFound(f"agent {agent_id} is not registered")


@dataclass(frozen=True)
class TenantAgents:
    """A tenant's registrations, as `controlplane/tenants/owned.py` lists what a tenant owns:
    removed as a delete removes one (registration, delegation set and credential entry in one
    step each)."""

    async def find(self, kv: Redis, tenant_id: str) -> list[str]:
        return [f"{REGISTRY_KEY}[{agent}]" for agent in await self._agents(kv, tenant_id)]

    async def remove(self, kv: Redis, tenant_id: str) -> int:
        removed = 0
        for agent in await self._agents(kv, tenant_id):
            removed += int(await deregister(kv, agent))
        return removed

    @staticmethod
    async def _agents(kv: Redis, tenant_id: str) -> list[str]:
        found = []
        async for agent, text in kv.hscan_iter(REGISTRY_KEY, count=1000):
            record = parse_registration(text)
            if record is not None and record.get("tenant_id") == tenant_id:
                found.append(str(agent))
        return found


class AgentRegistryServicer(agent_registry_pb2_grpc.AgentRegistryServiceServicer):
    def __init__(self, kv: Redis) -> None:
        self.kv = kv
        self._register = kv.register_script(REGISTER)
        self._replace_set = kv.register_script(REPLACE_SET)

    @store_errors
    async def RegisterAgent(
        self, request: pb.RegisterAgentRequest, context: ServicerContext
    ) -> pb.RegisterAgentResponse:
        record = registration(request.agent)
        agent_id = record["agent_id"]
        async with agent_locked(self.kv, agent_id):
            outcome, owner = await self._register(
                keys=[REGISTRY_KEY, CREDENTIALS_KEY],
                args=[agent_id, json.dumps(record), record["credential_ref"]],
            )
            if outcome == "taken":
                raise AlreadyExists(
                    f"credential_ref {record['credential_ref']!r} is bound to agent {owner}",
                    error="credential_ref_taken",
                )
            # Grant last: the set after the registration (the STS asks both).
            await self._replace_set(keys=[deleg_key(agent_id)], args=record["allowed_audiences"])
        return pb.RegisterAgentResponse(status="registered", agent_id=agent_id)

    @store_errors
    async def ListAgents(
        self, request: pb.ListAgentsRequest, context: ServicerContext
    ) -> pb.ListAgentsResponse:
        stored = await self.kv.hgetall(REGISTRY_KEY)
        records = [parse_registration(stored[k]) for k in sorted(stored)]
        return pb.ListAgentsResponse(agents=[to_message(r) for r in records if r is not None])

    @store_errors
    async def GetAgent(
        self, request: pb.GetAgentRequest, context: ServicerContext
    ) -> pb.GetAgentResponse:
        agent_id = _lookup_id(request.agent_id)
        record = parse_registration(await self.kv.hget(REGISTRY_KEY, agent_id))
        if record is None:
            raise not_registered(agent_id)
        return pb.GetAgentResponse(agent=to_message(record))

    @store_errors
    async def DeleteAgent(
        self, request: pb.DeleteAgentRequest, context: ServicerContext
    ) -> pb.DeleteAgentResponse:
        agent_id = _lookup_id(request.agent_id)
        if not await deregister(self.kv, agent_id):
            raise not_registered(agent_id)
        return pb.DeleteAgentResponse(status="deleted", agent_id=agent_id)


def _lookup_id(value: str) -> str:
    """A path's agent_id: a store identifier (400 otherwise)."""
    if not value:
        raise InvalidRequest("agent_id cannot be empty")
    if not IDENTIFIER.fullmatch(value):
        raise invalid("agent_id", "agent_id must match [A-Za-z0-9._:-]{1,128}")
    return value
