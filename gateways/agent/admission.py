"""The tool-call pipeline's admission steps, in the spec's order, with one store round trip
before the forward and one after it:

    entry = await admit(kv, call, version=..., want=..., recent=...)  # 2 session, 3 allowlist,
                                                            # 4 call limit, 6 budget
    if entry.hitl:                                          # 5 HITL, between 4 and 6
        held = await admit_hitl(queue, events, entry.policy, call)    # PendingApproval → 202
        reserved = await reserve_budget(kv, entry.session, want)      # 6, after the release
    ... validate arguments, forward ...
    await settle(kv, session, reserved=..., used=..., keep_slot=...)

`admit` is two Lua scripts, each over one hash-tag slot of a clustered store (`keys.py`):
- `CONFIG` (the `{mcp}` slot) checks that the caller's cached server record is current (`Stale`
  otherwise) and reads what every call needs: the tenant's policy, the server's auth config and
  cached token;
- for a call in a session, `DECIDE` (the session's tenant slot) runs steps 2, 3, 4 and 6 in
  order: 404 / 403 session, 403 `tool_not_allowed`, 429 `tool_call_limit_exceeded`, 429
  `budget_exceeded`, with the policy's call limit and HITL flag as arguments. An admitted
  call holds one of the session's `max_tool_calls_per_session` slots and a reservation of
  `want` tokens (at most what is left), both taken atomically, so the limit and the budget are
  exact across replicas under any concurrency: a call is admitted only while the session's
  budget, less what calls in flight reserved, is not used up. A tool that needs HITL stops the
  script after step 4 (slot taken, nothing reserved); the pipeline runs step 5 and then
  reserves with `reserve_budget`.

Both scripts go out in the same batch (one round trip): `DECIDE` is sent with the policy the
tenant's previous session call was admitted under (`RecentPolicies`), and `CONFIG`'s answer
confirms it. When it does not — the policy changed, or the registry did (`Stale`) — what
`DECIDE` took is given back (`settle`) and the call is decided again; a tenant's first call
(nothing recent) reads `CONFIG` first, then decides: one round trip more.

`settle` ends the call: the reservation becomes the tokens the call used (`tokens_used` counts
reservations while their calls are in flight), and the slot is kept when the call reached the
upstream (its tool may have run) or given back when it was stopped before (held for approval,
invalid arguments, an upstream that could not be reached). `max_concurrent_sessions` is
enforced at session creation (`sessions/store.py`). An unreachable store is 503
`store_unavailable` (fail closed).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import NoScriptError, RedisError

from gateways.agent.approvals.events import ApprovalEvents
from gateways.agent.approvals.store import ApprovalQueue
from gateways.agent.keys import calls_key, policy_key, session_key
from gateways.agent.keys import tokens_key as session_tokens_key
from gateways.agent.mcp import keys as mcp_keys
from gateways.agent.policies import Policy
from gateways.agent.sessions.store import SessionRecord, SessionStore
from runtime.errors import NotFound, PermissionDenied, ResourceExhausted, StrataError
from runtime.fields import now_iso
from runtime.stores.kv_errors import kv_unavailable
from runtime.stores.kv_pipeline import PipelinedScript, pipelined

__all__ = [
    "Admission",
    "PendingApproval",
    "RecentPolicies",
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

# KEYS: registry version, policy, auth config, cached token (all under `{mcp}`). ARGV: the
# registry version the server record was read at ('' = read during this call).
# Returns {'stale'} or {'ok', policy, auth, token, the token's TTL in ms}.
CONFIG = PipelinedScript("""
if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) ~= ARGV[1] then return {'stale'} end
local token = redis.call('GET', KEYS[4])
return {'ok', redis.call('GET', KEYS[2]), redis.call('GET', KEYS[3]), token,
        redis.call('PTTL', KEYS[4])}
""")

# KEYS: the session's record, call counter, token counter (the tenant's slot). ARGV: tenant,
# tool, tokens wanted, the policy's call limit, '1' when the policy wants HITL for the tool.
# Returns {outcome, session record, number}: outcome `ok` (number: tokens reserved), `hitl`
# (slot taken, nothing reserved), `no_session`, `inactive`, `not_allowed`, `limit` (number:
# the limit), `budget`.
DECIDE = PipelinedScript("""
local raw = redis.call('GET', KEYS[1])
if not raw then return {'no_session', false, 0} end
local session = cjson.decode(raw)
if session['tenant_id'] ~= ARGV[1] then return {'no_session', false, 0} end
if session['status'] ~= 'active' then return {'inactive', raw, 0} end
local allowed = false
for _, name in ipairs(session['tool_allowlist']) do
  if name == ARGV[2] then allowed = true end
end
if not allowed then return {'not_allowed', raw, 0} end
local limit = tonumber(ARGV[4])
if tonumber(redis.call('GET', KEYS[2]) or '0') >= limit then return {'limit', raw, limit} end
if ARGV[5] == '1' then
  redis.call('INCR', KEYS[2])
  return {'hitl', raw, 0}
end
local left = session['token_budget'] - tonumber(redis.call('GET', KEYS[3]) or '0')
if left <= 0 then return {'budget', raw, 0} end
local take = math.min(left, tonumber(ARGV[3]))
redis.call('INCR', KEYS[2])
redis.call('INCRBY', KEYS[3], take)
return {'ok', raw, take}
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


MAX_RECENT = 10_000  # beyond that many tenants, `RecentPolicies` starts over


class RecentPolicies:
    """The policy (raw, as stored) each tenant's last session call was admitted under: what the
    next one's `DECIDE` is sent with, confirmed by the `CONFIG` read of the same round trip."""

    def __init__(self) -> None:
        self._raw: dict[str, bytes | None] = {}

    def get(self, tenant_id: str) -> tuple[bool, bytes | None]:
        """(known, the policy as stored: None for the defaults)."""
        if tenant_id in self._raw:
            return True, self._raw[tenant_id]
        return False, None

    def put(self, tenant_id: str, raw: bytes | None) -> None:
        if len(self._raw) >= MAX_RECENT and tenant_id not in self._raw:
            self._raw.clear()
        self._raw[tenant_id] = raw


@dataclass(frozen=True)
class _Config:
    """What `CONFIG` read: the policy, the server's auth config and cached token, as stored."""

    policy: bytes | None
    auth: bytes | None
    token: bytes | None
    token_ttl_secs: float


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _config_keys(call: ToolCall, server_id: str) -> list[str]:
    return [
        mcp_keys.SERVERS_VERSION,
        policy_key(call.tenant_id),
        mcp_keys.auth_config(server_id),
        mcp_keys.oauth_token(server_id),
    ]


def _config(answer: list[Any]) -> _Config:
    """`CONFIG`'s answer; `Stale` when the registry moved on."""
    if _text(answer[0]) == "stale":
        raise Stale
    _, policy, auth, token, ttl_ms = answer
    return _Config(policy, auth, token, max(0, int(ttl_ms)) / 1000)


async def _read_config(kv: Redis, call: ToolCall, server_id: str, version: str) -> _Config:
    """The registry check and what every call reads; `Stale` when `version` is no longer the
    registry's."""
    return _config(await CONFIG(kv, _config_keys(call, server_id), [version]))


def _session_keys(tenant_id: str, session_id: str) -> list[str]:
    return [
        session_key(tenant_id, session_id),
        calls_key(tenant_id, session_id),
        session_tokens_key(tenant_id, session_id),
    ]


def _decide_args(call: ToolCall, policy: Policy, want: int) -> tuple[list[str], list[Any]]:
    assert call.session_id is not None
    hitl = 1 if call.tool_name in policy.hitl_required_tools else 0
    args = [call.tenant_id, call.tool_name, want, policy.max_tool_calls_per_session, hitl]
    return _session_keys(call.tenant_id, call.session_id), args


async def _decide(kv: Redis, call: ToolCall, policy: Policy, want: int) -> list[Any]:
    """Steps 2, 3, 4 and 6 under `policy` (the `DECIDE` script's answer)."""
    keys, args = _decide_args(call, policy, want)
    return list(await DECIDE(kv, keys, args))


async def _give_back(kv: Redis, call: ToolCall, decided: list[Any]) -> None:
    """Undo what `DECIDE` took (a slot, and for `ok` a reservation), for a call decided under a
    policy or registry that was no longer current."""
    outcome = _text(decided[0])
    if outcome in ("ok", "hitl") and call.session_id is not None:
        reserved = int(decided[2]) if outcome == "ok" else 0
        keys = _session_keys(call.tenant_id, call.session_id)[1:]
        await SETTLE(kv, keys, [reserved, 0, 0])


async def _run(
    kv: Redis, script: PipelinedScript, sent: Any, keys: list[str], args: list[Any]
) -> Any:
    """The answer of `script`, already sent (`sent`: its reply's future), or the error it
    raised; a store that had not loaded it runs it again once loaded."""
    try:
        return await sent
    except NoScriptError:
        try:
            return await script(kv, keys, args)
        except (RedisError, OSError) as exc:
            return exc
    except (RedisError, OSError) as exc:
        return exc


async def _config_and_decision(
    kv: Redis, call: ToolCall, server_id: str, version: str, policy: bytes | None, want: int
) -> tuple[_Config, list[Any]]:
    """`CONFIG` and `DECIDE` (under `policy`) sent together: one round trip (both calls are
    queued on the batcher before either is awaited). When `CONFIG` fails (`Stale`, or the
    store), what `DECIDE` took is given back before it is raised."""
    calls = pipelined(kv)
    config_keys, config_args = _config_keys(call, server_id), [version]
    decide_keys, decide_args = _decide_args(call, _policy(call.tenant_id, policy), want)
    # A future on one node (no task); a batcher that routes per node may answer a coroutine,
    # made a task here so that both go out before either is awaited.
    config_sent = asyncio.ensure_future(
        calls.evalsha(CONFIG.sha, len(config_keys), *config_keys, *config_args)
    )
    decide_sent = asyncio.ensure_future(
        calls.evalsha(DECIDE.sha, len(decide_keys), *decide_keys, *decide_args)
    )
    read = await _run(kv, CONFIG, config_sent, config_keys, config_args)
    decided = await _run(kv, DECIDE, decide_sent, decide_keys, decide_args)
    if isinstance(decided, BaseException):
        raise decided
    try:
        if isinstance(read, BaseException):
            raise read
        return _config(read), list(decided)
    except (Stale, RedisError, OSError):
        with contextlib.suppress(RedisError, OSError):  # best effort: the error says why
            await _give_back(kv, call, list(decided))
        raise


async def admit(
    kv: Redis,
    call: ToolCall,
    *,
    server_id: str,
    version: str,
    want: int,
    recent: RecentPolicies | None = None,
) -> Admission:
    """Steps 2, 3, 4 and 6 for a call in a session (one atomic script), and what every call
    reads: the policy, the server's auth. Raises `Stale` when `version` is no longer the
    registry's (nothing taken), NotFound for an unknown session; a later step's refusal comes
    back as `refusal` (with the session, for the audit row). With `recent`, a call in a
    session whose tenant's policy is unchanged costs one round trip (two without)."""
    with kv_unavailable():
        if call.session_id is None:
            config = await _read_config(kv, call, server_id, version)
            policy = _policy(call.tenant_id, config.policy)
            return Admission(
                policy, config.auth, config.token, None, token_ttl_secs=config.token_ttl_secs
            )
        known, guess = recent.get(call.tenant_id) if recent is not None else (False, None)
        while True:
            if not known:  # nothing recent: the policy first, then the decision under it
                config = await _read_config(kv, call, server_id, version)
                guess, known = config.policy, True
                decided = await _decide(kv, call, _policy(call.tenant_id, guess), want)
            else:
                config, decided = await _config_and_decision(
                    kv, call, server_id, version, guess, want
                )
            if config.policy == guess:
                break
            await _give_back(kv, call, decided)  # decided under a policy no longer current
            guess = config.policy
        if recent is not None:
            recent.put(call.tenant_id, guess)
    policy = _policy(call.tenant_id, config.policy)
    outcome, raw, number = _text(decided[0]), decided[1], decided[2]
    if outcome == "no_session":
        raise _session_not_found()
    session = SessionRecord.from_json(raw)
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
    return Admission(policy, config.auth, config.token, session, taken, outcome == "hitl", refusal)


async def reserve_budget(kv: Redis, session: SessionRecord, want: int) -> int:
    """Step 6 after a HITL release: reserve up to `want` tokens (returns how many); 429
    `budget_exceeded`, the call's slot given back, when the budget is used up."""
    keys = _session_keys(session.tenant_id, session.id)[1:]
    with kv_unavailable():
        taken = int(await RESERVE(kv, keys, [session.token_budget, want]))
    if taken < 0:
        raise _over_budget(session)
    return taken


async def settle(
    kv: Redis, session: SessionRecord, *, reserved: int, used: int, keep_slot: bool
) -> None:
    """After the call: its reservation becomes `used` tokens; its slot kept or given back."""
    keys = _session_keys(session.tenant_id, session.id)[1:]
    with kv_unavailable():
        await SETTLE(kv, keys, [reserved, max(0, used), 1 if keep_slot else 0])


async def admit_session(kv: Redis, session_id: str, tenant_id: str) -> SessionRecord:
    """The session a client is bound to (the gateway's own `/mcp`): 404 `{error:'Session not
    found'}` when unknown or of another tenant, 403 `session_not_active` when terminated."""
    with kv_unavailable():
        session = await SessionStore(kv).get(tenant_id, session_id)
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
    `hitl_pending` notification, audit row, metric). Grants are kept per tenant, a session's
    by its id within its tenant."""
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
