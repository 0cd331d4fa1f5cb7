"""HITL approvals in the key-value store, shared by every replica. Every key carries the
tenant as its hash tag (`gateways/agent/keys.py`), so each script below touches one slot of a
clustered store; an approval is found by its tenant and id.

- `agent:hitl:{t}:<id>`: the approval, JSON (`id` = `hitl-` + UUID, `session_id`,
  `tenant_id`, `tool_name`, `arguments`, `status`, `request_type`, `created_at`,
  `resolved_at`, and the internal `expires_at_ms`, `arguments_sha256`, `grant_scope`). It
  lives `ttl` past its expiry, so that a late decision finds it (409) rather than nothing
  (404).
- `agent:hitl-tenant:{<id>}`: the approval's tenant, written before the approval and living
  as long: a platform administrator decides by id alone.
- `agent:hitl-pending:{t}`: zset of the tenant's pending approval ids, scored by expiry (ms);
  expired entries are dropped when the list is read.
- `agent:hitl-open:{t}:<scope>:<tool>:<arguments_sha256>`: the id of the pending approval of
  exactly that call (scope as below), expiring with it (`PXAT` its expiry) and deleted by its
  decision: an identical call while it is pending is held on the same approval instead of
  creating another (the check and the creation are one script, so two identical calls racing
  on two replicas make one approval).
- `agent:hitl-grant:{t}:<scope>:<tool>:<arguments_sha256>`: list of approval ids, one per
  granted approval of exactly that call (same tool, same canonical arguments), in the scope
  of the session (its id) or, for calls without a session, of the tenant (`tenant=<t>`: `=`
  is in no identifier, so the two scopes cannot collide). Each entry releases one call
  (`LPOP`: exactly once, whichever replica pops it); the list expires `ttl` after the last
  grant.

A decision is a compare-and-set on the record (`DECIDE`): of two decisions racing on two
replicas exactly one changes the record; the other re-reads it and is refused (409).
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from redis.asyncio import Redis

from gateways.agent.keys import approval_key, approval_tenant, grant_key, open_key, pending_key

PENDING = "pending"
APPROVED = "approved"
DENIED = "denied"
REQUEST_TYPE = "tool_call"


def grant_scope(tenant_id: str, session_id: str | None) -> str:
    return session_id if session_id else f"tenant={tenant_id}"


def _canonical(value: Any) -> Any:
    """JSON numbers as the caller meant them: a whole float (protobuf Struct numbers are
    doubles) hashes like the integer, so `{"n": 2}` and `{"n": 2.0}` are the same call."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


def arguments_sha256(arguments: Mapping[str, Any]) -> str:
    """Hex SHA-256 of the arguments' canonical JSON (sorted keys, no spaces, UTF-8)."""
    text = json.dumps(
        _canonical(arguments), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Approval:
    id: str
    session_id: str
    tenant_id: str
    tool_name: str
    arguments: dict[str, Any]
    status: str
    request_type: str
    created_at: str
    expires_at_ms: int
    arguments_sha256: str
    grant_scope: str
    resolved_at: str | None = None

    @classmethod
    def from_json(cls, raw: str | bytes) -> Approval:
        return cls(**json.loads(raw))

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @property
    def expired(self) -> bool:
        return self.status == PENDING and self.expires_at_ms <= time.time() * 1000


class AlreadyDecided(Exception):
    """The approval was decided before (or expired): `status` says which."""

    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


# KEYS: open key, new record, pending zset. ARGV: new id, its record, expiry (ms), record
# ttl (s). The id of the approval now pending for this call: the open one if any, else the
# new one, created.
OPEN = """
local open = redis.call('GET', KEYS[1])
if open then return open end
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[4])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[3])
return ARGV[1]
"""

# KEYS: record, pending zset, grant list, open key. ARGV: expected record, decided record, id,
# ttl, grant (1: push the id on the grant list). 1 when this call decided, 0 when the record
# changed since it was read.
DECIDE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[4])
redis.call('ZREM', KEYS[2], ARGV[3])
if redis.call('GET', KEYS[4]) == ARGV[3] then redis.call('DEL', KEYS[4]) end
if ARGV[5] == '1' then
  redis.call('RPUSH', KEYS[3], ARGV[3])
  redis.call('EXPIRE', KEYS[3], ARGV[4])
end
return 1
"""


class ApprovalQueue:
    """Create, list, decide and consume approvals. `ttl_secs` is how long one stays pending,
    and how long a grant may release its call. Methods raise RedisError/OSError when the store
    is down (callers turn them into 503)."""

    def __init__(self, kv: Redis, ttl_secs: int) -> None:
        self.kv = kv
        self.ttl_secs = ttl_secs
        self._decide = kv.register_script(DECIDE)
        self._open = kv.register_script(OPEN)

    async def open(
        self,
        tenant_id: str,
        session_id: str | None,
        tool_name: str,
        arguments: Mapping[str, Any],
        created_at: str,
    ) -> tuple[str, Approval | None]:
        """The pending approval of exactly this call (same tenant or session, tool and
        argument hash): `(its id, None)` when one was pending already, else `(id, the new
        approval)`, created."""
        expires = int(time.time() * 1000) + self.ttl_secs * 1000
        approval = Approval(
            id=f"hitl-{uuid.uuid4()}",
            session_id=session_id or "",
            tenant_id=tenant_id,
            tool_name=tool_name,
            arguments=_canonical(dict(arguments)),
            status=PENDING,
            request_type=REQUEST_TYPE,
            created_at=created_at,
            expires_at_ms=expires,
            arguments_sha256=arguments_sha256(arguments),
            grant_scope=grant_scope(tenant_id, session_id),
        )
        keys = [
            open_key(tenant_id, approval.grant_scope, tool_name, approval.arguments_sha256),
            approval_key(tenant_id, approval.id),
            pending_key(tenant_id),
        ]
        args: list[str | int] = [approval.id, approval.to_json(), expires, 2 * self.ttl_secs]
        # The id's tenant first (another slot): an approval is never without it. An identical
        # call already pending leaves this one unused; it expires.
        await self.kv.set(approval_tenant(approval.id), tenant_id, ex=2 * self.ttl_secs)
        pending_id = str(await self._open(keys=keys, args=args))
        return (pending_id, approval) if pending_id == approval.id else (pending_id, None)

    async def get(self, tenant_id: str, approval_id: str) -> Approval | None:
        """The tenant's approval `approval_id` (None: it has none by that id)."""
        raw = await self.kv.get(approval_key(tenant_id, approval_id))
        return None if raw is None else Approval.from_json(raw)

    async def tenant_of(self, approval_id: str) -> str | None:
        """The tenant of an approval that has not expired (None: unknown)."""
        tenant = await self.kv.get(approval_tenant(approval_id))
        return None if tenant is None else str(tenant)

    async def pending(self, tenant_id: str) -> list[Approval]:
        """The tenant's pending approvals that have not expired, oldest first."""
        key = pending_key(tenant_id)
        now = int(time.time() * 1000)
        async with self.kv.pipeline(transaction=True) as pipe:
            pipe.zremrangebyscore(key, "-inf", now)
            pipe.zrange(key, 0, -1)
            _, ids = await pipe.execute()
        if not ids:
            return []
        raws = await self.kv.mget([approval_key(tenant_id, str(i)) for i in ids])
        found = [Approval.from_json(raw) for raw in raws if raw is not None]
        return [a for a in found if a.status == PENDING and not a.expired]

    async def decide(self, approval: Approval, status: str, resolved_at: str) -> Approval:
        """Resolve a pending approval to `status` (approved or denied) exactly once; raises
        AlreadyDecided when it was decided before or has expired."""
        while True:
            if approval.status != PENDING:
                raise AlreadyDecided(approval.status)
            if approval.expired:
                raise AlreadyDecided("expired")
            decided = Approval(**{**asdict(approval), "status": status, "resolved_at": resolved_at})
            tenant = approval.tenant_id
            call = (tenant, approval.grant_scope, approval.tool_name, approval.arguments_sha256)
            keys = [
                approval_key(tenant, approval.id),
                pending_key(tenant),
                grant_key(*call),
                open_key(*call),
            ]
            args: list[str | int] = [approval.to_json(), decided.to_json(), approval.id]
            args.append(self.ttl_secs)
            args.append(1 if status == APPROVED else 0)
            if await self._decide(keys=keys, args=args):
                return decided
            current = await self.get(tenant, approval.id)
            if current is None:
                raise AlreadyDecided("expired")
            approval = current

    async def consume_grant(
        self, tenant_id: str, session_id: str | None, tool_name: str, arguments: Mapping[str, Any]
    ) -> str | None:
        """Take one grant for exactly this call; returns the approval id that released it, or
        None when there is none (each grant is taken once, across every replica)."""
        scope = grant_scope(tenant_id, session_id)
        key = grant_key(tenant_id, scope, tool_name, arguments_sha256(arguments))
        released = await self.kv.lpop(key)
        return None if released is None else str(released)

    async def restore_grant(
        self,
        approval_id: str,
        tenant_id: str,
        session_id: str | None,
        tool_name: str,
        arguments: Mapping[str, Any],
    ) -> None:
        """Put back the grant `consume_grant` took, for a call stopped before it reached its
        upstream (over budget, invalid arguments, upstream unreachable): the approval still
        releases one call (the grant list's expiry starts again)."""
        scope = grant_scope(tenant_id, session_id)
        key = grant_key(tenant_id, scope, tool_name, arguments_sha256(arguments))
        async with self.kv.pipeline(transaction=True) as pipe:
            pipe.lpush(key, approval_id)
            pipe.expire(key, self.ttl_secs)
            await pipe.execute()
