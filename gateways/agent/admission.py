"""The tool-call pipeline's admission steps, in the spec's order, with one store round trip
before the forward and one after it:

    entry = await admit(kv, call, version=..., want=...)   # 2 session, 3 allowlist,
                                                            # 4 call limit, 6 budget (one script)
    if entry.hitl:                                          # 5 HITL, between 4 and 6
        held = await admit_hitl(queue, events, entry.policy, call)    # PendingApproval → 202
        reserved = await reserve_budget(kv, entry.session, want)      # 6, after the release
    ... validate arguments, forward ...
    await settle(kv, session_id, reserved=..., used=..., keep_slot=...)

`admit` is one Lua script (`ADMIT`): it checks that the caller's cached server record is current
(`Stale` otherwise, nothing taken), reads the tenant's policy and the server's auth config and
cached token (what every call needs), and for a call in a session runs steps 2, 3, 4 and 6 in
order: 404 / 403 session, 403 `tool_not_allowed`, 429 `tool_call_limit_exceeded`, 429
`budget_exceeded`. An admitted call holds one of the session's `max_tool_calls_per_session`
slots and a reservation of `want` tokens (at most what is left), both taken atomically, so the
limit and the budget are exact across replicas under any concurrency: a call is admitted only
while the session's budget, less what calls in flight reserved, is not used up. A tool that
needs HITL stops the script after step 4 (slot taken, nothing reserved); the pipeline runs
step 5 and then reserves with `reserve_budget`.

`settle` ends the call: the reservation becomes the tokens the call used (`tokens_used` counts
reservations while their calls are in flight), and the slot is kept when the call reached the
upstream (its tool may have run) or given back when it was stopped before (held for approval,
invalid arguments, an upstream that could not be reached). `max_concurrent_sessions` is
enforced at session creation (`sessions/store.py`). An unreachable store is 503
`store_unavailable` (fail closed).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from gateways.agent.approvals.events import ApprovalEvents
from gateways.agent.approvals.store import ApprovalQueue
from gateways.agent.mcp import keys as mcp_keys
from gateways.agent.policies import DEFAULT_MAX_TOOL_CALLS_PER_SESSION, Policy, policy_key
from gateways.agent.sessions.store import SessionRecord, SessionStore, calls_key, session_key
from gateways.agent.sessions.store import tokens_key as session_tokens_key
from runtime.errors import NotFound, PermissionDenied, ResourceExhausted, StrataError
from runtime.fields import now_iso
from runtime.stores.kv_errors import kv_unavailable
from runtime.stores.kv_pipeline import PipelinedScript

__all__ = [
    "Admission",
    "PendingApproval",
    "Released",
    "Stale",
    "ToolCall",
    "admit",
    "admit_hitl",
    "admit_session",
    "estimate_tokens",
    "json_chars",
    "reserve_budget",
    "settle",
    "tokens_for",
]

# KEYS: registry version, policy, auth config, cached token; for a session also its record,
# call counter and token counter. ARGV: the registry version the server record was read at
# ('' = read during this call), tenant, tool, tokens wanted, the default call limit.
# Returns {outcome, policy, auth, token, session record, number, the token's TTL in ms}:
# outcome `stale`, `ok` (number: tokens reserved), `hitl` (slot taken, nothing reserved),
# `no_session`, `inactive`, `not_allowed`, `limit` (number: the limit), `budget`.
ADMIT = PipelinedScript("""
if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) ~= ARGV[1] then return {'stale'} end
local policy = redis.call('GET', KEYS[2])
local auth = redis.call('GET', KEYS[3])
local token = redis.call('GET', KEYS[4])
if #KEYS < 5 then return {'ok', policy, auth, token, false, 0, redis.call('PTTL', KEYS[4])} end
local raw = redis.call('GET', KEYS[5])
if not raw then return {'no_session', policy, auth, token, false, 0} end
local session = cjson.decode(raw)
if session['tenant_id'] ~= ARGV[2] then return {'no_session', policy, auth, token, false, 0} end
if session['status'] ~= 'active' then return {'inactive', policy, auth, token, raw, 0} end
local allowed = false
for _, name in ipairs(session['tool_allowlist']) do
  if name == ARGV[3] then allowed = true end
end
if not allowed then return {'not_allowed', policy, auth, token, raw, 0} end
local limit = tonumber(ARGV[5])
local hitl = false
if policy then
  local rules = cjson.decode(policy)
  if type(rules['max_tool_calls_per_session']) == 'number' then
    limit = rules['max_tool_calls_per_session']
  end
  if type(rules['hitl_required_tools']) == 'table' then
    for _, name in ipairs(rules['hitl_required_tools']) do
      if name == ARGV[3] then hitl = true end
    end
  end
end
if tonumber(redis.call('GET', KEYS[6]) or '0') >= limit then
  return {'limit', policy, auth, token, raw, limit}
end
if hitl then
  redis.call('INCR', KEYS[6])
  return {'hitl', policy, auth, token, raw, 0}
end
local left = session['token_budget'] - tonumber(redis.call('GET', KEYS[7]) or '0')
if left <= 0 then return {'budget', policy, auth, token, raw, 0} end
local take = math.min(left, tonumber(ARGV[4]))
redis.call('INCR', KEYS[6])
redis.call('INCRBY', KEYS[7], take)
return {'ok', policy, auth, token, raw, take}
""")

# KEYS: the session's call counter, token counter. ARGV: its budget, tokens wanted. Reserves
# at most what is left (returns it); -1 when nothing is, giving the call's slot back.
RESERVE = PipelinedScript("""
local left = tonumber(ARGV[1]) - tonumber(redis.call('GET', KEYS[2]) or '0')
if left <= 0 then
  if tonumber(redis.call('GET', KEYS[1]) or '0') > 0 then redis.call('DECR', KEYS[1]) end
  return -1
end
local take = math.min(left, tonumber(ARGV[2]))
redis.call('INCRBY', KEYS[2], take)
return take
""")

# KEYS: the session's call counter, token counter. ARGV: tokens reserved, tokens used, keep
# the slot (1) or give it back (0, never below 0).
SETTLE = PipelinedScript("""
local delta = tonumber(ARGV[2]) - tonumber(ARGV[1])
if delta ~= 0 then redis.call('INCRBY', KEYS[2], delta) end
if ARGV[3] == '0' and tonumber(redis.call('GET', KEYS[1]) or '0') > 0 then
  redis.call('DECR', KEYS[1])
end
return 1
""")


@dataclass(frozen=True)
class ToolCall:
    """The call being admitted. `session_id` None: a call outside any session."""

    tenant_id: str
    tool_name: str
    arguments: Mapping[str, Any]
    session_id: str | None = None


@dataclass(frozen=True)
class PendingApproval:
    """The call is held: answer 202 `{status:'pending_approval', approval_id, message}`."""

    approval_id: str
    message: str


@dataclass(frozen=True)
class Released:
    """The call was approved: approval `approval_id` released it (and is now used up)."""

    approval_id: str


@dataclass(frozen=True)
class Admission:
    """What `admit` read and took: the tenant's policy, the server's auth config and cached
    token (as stored), the session (None outside one), and for a session call the slot taken
    and the tokens reserved; `hitl`: step 5 is due, and the budget is reserved after it."""

    policy: Policy
    auth_config: bytes | None
    auth_token: bytes | None
    session: SessionRecord | None
    reserved: int = 0
    hitl: bool = False
    refusal: StrataError | None = None  # the step that refused the call (nothing taken)
    token_ttl_secs: float = 0.0  # how long the cached token lives on (outside a session)


class Stale(Exception):
    """The registry changed since the server record was read: nothing was taken."""


def _session_not_found() -> NotFound:
    return NotFound("Session not found")


def _not_active(session: SessionRecord) -> PermissionDenied:
    return PermissionDenied(f"session {session.id} is {session.status}", error="session_not_active")


def _not_allowed(session: SessionRecord, tool_name: str) -> PermissionDenied:
    return PermissionDenied(
        f"tool {tool_name!r} is not in the allowlist of session {session.id}",
        error="tool_not_allowed",
        tool_name=tool_name,
    )


def _over_budget(session: SessionRecord) -> ResourceExhausted:
    return ResourceExhausted(
        f"session {session.id} has used its token budget of {session.token_budget}",
        error="budget_exceeded",
    )


def _policy(tenant_id: str, raw: bytes | None) -> Policy:
    if raw is None:
        return Policy(tenant_id)
    return Policy(**{**json.loads(raw), "tenant_id": tenant_id})


async def admit(kv: Redis, call: ToolCall, *, server_id: str, version: str, want: int) -> Admission:
    """Steps 2, 3, 4 and 6 for a call in a session (one atomic script), and what every call
    reads: the policy, the server's auth. Raises `Stale` when `version` is no longer the
    registry's, NotFound for an unknown session; a later step's refusal comes back as
    `refusal` (with the session, for the audit row)."""
    keys = [
        mcp_keys.SERVERS_VERSION,
        policy_key(call.tenant_id),
        mcp_keys.auth_config(server_id),
        mcp_keys.oauth_token(server_id),
    ]
    if call.session_id is not None:
        sid = call.session_id
        keys += [session_key(sid), calls_key(sid), session_tokens_key(sid)]
    args = [version, call.tenant_id, call.tool_name, want, DEFAULT_MAX_TOOL_CALLS_PER_SESSION]
    with kv_unavailable():
        answer = await ADMIT(kv, keys, args)
    outcome = answer[0].decode() if isinstance(answer[0], bytes) else answer[0]
    if outcome == "stale":
        raise Stale
    _, policy_raw, auth, token, raw, number, *ttl = answer
    policy = _policy(call.tenant_id, policy_raw)
    if outcome == "no_session":
        raise _session_not_found()
    session = SessionRecord.from_json(raw) if raw else None
    if session is None:  # a call outside a session
        ttl_ms = int(ttl[0]) if ttl else -1
        return Admission(policy, auth, token, None, token_ttl_secs=max(0, ttl_ms) / 1000)
    refusal: StrataError | None = None
    if outcome == "inactive":
        refusal = _not_active(session)
    elif outcome == "not_allowed":
        refusal = _not_allowed(session, call.tool_name)
    elif outcome == "limit":
        refusal = ResourceExhausted(
            f"session {session.id} has made its {number} tool calls "
            "(the tenant policy's max_tool_calls_per_session)",
            error="tool_call_limit_exceeded",
        )
    elif outcome == "budget":
        refusal = _over_budget(session)
    taken = int(number) if outcome == "ok" else 0
    return Admission(policy, auth, token, session, taken, outcome == "hitl", refusal)


async def reserve_budget(kv: Redis, session: SessionRecord, want: int) -> int:
    """Step 6 after a HITL release: reserve up to `want` tokens (returns how many); 429
    `budget_exceeded`, the call's slot given back, when the budget is used up."""
    keys = [calls_key(session.id), session_tokens_key(session.id)]
    with kv_unavailable():
        taken = int(await RESERVE(kv, keys, [session.token_budget, want]))
    if taken < 0:
        raise _over_budget(session)
    return taken


async def settle(kv: Redis, session_id: str, *, reserved: int, used: int, keep_slot: bool) -> None:
    """After the call: its reservation becomes `used` tokens; its slot kept or given back."""
    keys = [calls_key(session_id), session_tokens_key(session_id)]
    with kv_unavailable():
        await SETTLE(kv, keys, [reserved, max(0, used), 1 if keep_slot else 0])


async def admit_session(kv: Redis, session_id: str, tenant_id: str) -> SessionRecord:
    """The session a client is bound to (the gateway's own `/mcp`): 404 `{error:'Session not
    found'}` when unknown or of another tenant, 403 `session_not_active` when terminated."""
    with kv_unavailable():
        session = await SessionStore(kv).get(session_id)
    if session is None or session.tenant_id != tenant_id:
        raise _session_not_found()
    if not session.active:
        raise _not_active(session)
    return session


async def admit_hitl(
    queue: ApprovalQueue, events: ApprovalEvents, policy: Policy, call: ToolCall
) -> PendingApproval | Released | None:
    """The HITL step. None: the tool needs no approval. Released: a granted approval of
    exactly this call (same tool, same argument hash, same session or tenant scope) was
    consumed, once, and the call may go on. PendingApproval: the call waits for an approval,
    answer 202 — the one already pending for exactly this call, or a new one (announced:
    `hitl_pending` notification, audit row, metric). A call with
    a session must have passed `admit` for `call.tenant_id` first: grants of a session are
    keyed by its id alone (the shared key layout)."""
    if call.tool_name not in policy.hitl_required_tools:
        return None
    with kv_unavailable():
        granted = await queue.consume_grant(
            call.tenant_id, call.session_id, call.tool_name, call.arguments
        )
        if granted is not None:
            return Released(granted)
        approval_id, created = await queue.open(
            call.tenant_id, call.session_id, call.tool_name, call.arguments, now_iso()
        )
    if created is not None:
        events.pending(created)
    return PendingApproval(
        approval_id,
        f"Tool {call.tool_name!r} requires human approval: approval {approval_id} is pending; "
        "call again with the same arguments once it is approved.",
    )


def json_chars(value: Any) -> int:
    """The length of `value` as compact JSON."""
    return len(json.dumps(value, separators=(",", ":"), default=str))


def tokens_for(chars: int) -> int:
    """Tokens as a model would pay for them: about 4 characters of JSON per token (at least
    1)."""
    return max(1, chars // 4)


def estimate_tokens(arguments: Any, result: Any) -> int:
    """A tool call's tokens: its arguments in and its result out."""
    return tokens_for(json_chars(arguments) + json_chars(result))
