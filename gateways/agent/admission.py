"""The admission steps of the tool-call pipeline, in the spec's order, each one function:

    session = await admit_session(kv, session_id, tenant_id)     # 404 / 403
    admit_allowlist(session, tool_name)                           # 403 tool_not_allowed
    policy = await load_policy(kv, tenant_id)
    await admit_call_limit(kv, session, policy)                   # 429 (takes a call slot)
    hitl = await admit_hitl(queue, events, policy, call)          # PendingApproval → 202
    await admit_token_budget(kv, session)                         # 429 budget_exceeded
    ... validate arguments, forward ...
    await record_call(kv, session.id, tokens)                     # after the forward

`admit_call_limit` counts the call when it admits it (check-and-increment in one script, so
`max_tool_calls_per_session` is exact across replicas): a later step that stops the call
(held for approval, over budget, invalid arguments, upstream failure, as the pipeline
decides) gives the slot back with `release_call`. `max_concurrent_sessions` is enforced at
session creation (`sessions/store.py`). Every step reads the shared store and fails closed:
an unreachable store is 503 `store_unavailable`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from gateways.agent.approvals.events import ApprovalEvents
from gateways.agent.approvals.store import ApprovalQueue
from gateways.agent.policies import Policy, load_policy
from gateways.agent.sessions.store import Counters, SessionRecord, SessionStore, calls_key
from gateways.agent.sessions.store import tokens_key as session_tokens_key
from runtime.errors import NotFound, PermissionDenied, ResourceExhausted
from runtime.fields import now_iso
from runtime.stores.kv_errors import kv_unavailable

__all__ = [
    "PendingApproval",
    "Released",
    "ToolCall",
    "admit_allowlist",
    "admit_call_limit",
    "admit_hitl",
    "admit_session",
    "admit_token_budget",
    "estimate_tokens",
    "load_policy",
    "record_call",
    "release_call",
]

# KEYS: the session's call counter. ARGV: the limit. The new count, or -1 at the limit.
TAKE_CALL = """
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used >= tonumber(ARGV[1]) then return -1 end
return redis.call('INCR', KEYS[1])
"""
# KEYS: the session's call counter. Gives one slot back, never below 0.
RELEASE_CALL = """
if tonumber(redis.call('GET', KEYS[1]) or '0') > 0 then return redis.call('DECR', KEYS[1]) end
return 0
"""


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


async def admit_session(kv: Redis, session_id: str, tenant_id: str) -> SessionRecord:
    """The session of the call: 404 `{error:'Session not found'}` when unknown or of another
    tenant, 403 `session_not_active` when it was terminated."""
    with kv_unavailable():
        session = await SessionStore(kv).get(session_id)
    if session is None or session.tenant_id != tenant_id:
        raise NotFound("Session not found")
    if not session.active:
        raise PermissionDenied(
            f"session {session_id} is {session.status}", error="session_not_active"
        )
    return session


def admit_allowlist(session: SessionRecord, tool_name: str) -> None:
    """403 `tool_not_allowed` unless the tool is on the session's allowlist (default deny)."""
    if tool_name not in session.tool_allowlist:
        raise PermissionDenied(
            f"tool {tool_name!r} is not in the allowlist of session {session.id}",
            error="tool_not_allowed",
            tool_name=tool_name,
        )


async def admit_call_limit(kv: Redis, session: SessionRecord, policy: Policy) -> int:
    """Take one of the session's `max_tool_calls_per_session` calls (atomic across replicas);
    returns the session's call count with this one. 429 `tool_call_limit_exceeded` when none
    is left."""
    limit = policy.max_tool_calls_per_session
    with kv_unavailable():
        taken = int(await kv.eval(TAKE_CALL, 1, calls_key(session.id), limit))
    if taken < 0:
        raise ResourceExhausted(
            f"session {session.id} has made its {limit} tool calls "
            "(the tenant policy's max_tool_calls_per_session)",
            error="tool_call_limit_exceeded",
        )
    return taken


async def release_call(kv: Redis, session_id: str) -> None:
    """Give back the slot `admit_call_limit` took, for a call a later step stopped."""
    with kv_unavailable():
        await kv.eval(RELEASE_CALL, 1, calls_key(session_id))


async def admit_hitl(
    queue: ApprovalQueue, events: ApprovalEvents, policy: Policy, call: ToolCall
) -> PendingApproval | Released | None:
    """The HITL step. None: the tool needs no approval. Released: a granted approval of
    exactly this call (same tool, same argument hash, same session or tenant scope) was
    consumed, once, and the call may go on. PendingApproval: a new approval was created
    (and announced: `hitl_pending` notification, audit row, metric); answer 202. A call with
    a session must have passed `admit_session` for `call.tenant_id` first: grants of a session
    are keyed by its id alone (the shared key layout)."""
    if call.tool_name not in policy.hitl_required_tools:
        return None
    with kv_unavailable():
        granted = await queue.consume_grant(
            call.tenant_id, call.session_id, call.tool_name, call.arguments
        )
        if granted is not None:
            return Released(granted)
        approval = await queue.create(
            call.tenant_id, call.session_id, call.tool_name, call.arguments, now_iso()
        )
    events.pending(approval)
    return PendingApproval(
        approval.id,
        f"Tool {call.tool_name!r} requires human approval: approval {approval.id} is pending; "
        "call again with the same arguments once it is approved.",
    )


async def admit_token_budget(kv: Redis, session: SessionRecord) -> int:
    """The session's tokens left; 429 `budget_exceeded` when none are."""
    with kv_unavailable():
        used = int(await kv.get(session_tokens_key(session.id)) or 0)
    left = session.token_budget - used
    if left <= 0:
        raise ResourceExhausted(
            f"session {session.id} has used its token budget of {session.token_budget}",
            error="budget_exceeded",
        )
    return left


async def record_call(kv: Redis, session_id: str, tokens: int) -> Counters:
    """After a forward: add the call's tokens to the session's `tokens_used` (its call was
    counted by `admit_call_limit`); returns the counters."""
    with kv_unavailable():
        async with kv.pipeline(transaction=True) as pipe:
            pipe.incrby(session_tokens_key(session_id), max(0, tokens))
            pipe.get(calls_key(session_id))
            tokens_used, calls = await pipe.execute()
    return Counters(tool_calls=int(calls or 0), tokens_used=int(tokens_used))


def estimate_tokens(arguments: Any, result: Any) -> int:
    """A tool call's tokens as a model would pay for them: about 4 characters of JSON per
    token, arguments in and result out (at least 1)."""
    size = len(json.dumps(arguments, separators=(",", ":"), default=str))
    size += len(json.dumps(result, separators=(",", ":"), default=str))
    return max(1, size // 4)
