"""`strata.agent.v1.PolicyService`: each tenant's security policy, the JSON value
`{mcp}:policy:<t>` (`keys.policy_key`: under the change feed's tag, so that a PUT and its
announcement are one script on a clustered store).

A tenant that never stored one has the defaults below (`updated_at` null): no tool needs a
human approval, at most 100 sessions active at once, at most 1000 tool calls per session, and
no extra network hosts. PUT replaces the policy whole; an absent limit keeps its default (0 is
a real limit: nothing allowed). Limits are read per call by the session and tool-call paths
(`gateways/agent/admission.py`), so a change applies at once on every replica. An unreachable
store is 503 (the limits are security controls: they fail closed).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from redis.asyncio import Redis

from gateways.agent import changes
from gateways.agent.keys import policy_key
from runtime.context import ServicerContext
from runtime.fields import identifier, invalid, now_iso
from runtime.stores.kv_errors import kv_unavailable
from strata.agent.v1 import policy_pb2, policy_pb2_grpc

DEFAULT_MAX_CONCURRENT_SESSIONS = 100
DEFAULT_MAX_TOOL_CALLS_PER_SESSION = 1000
MAX_LIMIT = 1_000_000_000
MAX_ITEMS = 1000
TOOL_NAME = re.compile(r"[^\s\x00-\x1f\x7f]{1,128}")  # MCP tool names: printable, no spaces
HOST = re.compile(r"(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9-]{1,63})*(:\d{1,5})?")


@dataclass(frozen=True)
class Policy:
    tenant_id: str
    hitl_required_tools: list[str] = field(default_factory=list)
    max_concurrent_sessions: int = DEFAULT_MAX_CONCURRENT_SESSIONS
    max_tool_calls_per_session: int = DEFAULT_MAX_TOOL_CALLS_PER_SESSION
    allowed_network_hosts: list[str] = field(default_factory=list)
    updated_at: str | None = None

    def to_proto(self) -> policy_pb2.SecurityPolicy:
        return policy_pb2.SecurityPolicy(**asdict(self))


async def load_policy(kv: Redis, tenant_id: str) -> Policy:
    """The tenant's stored policy, or the defaults. Raises RedisError/OSError (callers turn
    them into 503)."""
    raw = await kv.get(policy_key(tenant_id))
    if raw is None:
        return Policy(tenant_id)
    return Policy(**{**json.loads(raw), "tenant_id": tenant_id})


def _limit(request: Any, name: str, default: int) -> int:
    if not request.HasField(name):
        return default
    value = int(getattr(request, name))
    if not 0 <= value <= MAX_LIMIT:
        raise invalid(name, f"{name} must be an integer between 0 and {MAX_LIMIT}")
    return value


def _names(values: Any, name: str, pattern: re.Pattern[str], what: str) -> list[str]:
    if len(values) > MAX_ITEMS:
        raise invalid(name, f"{name} has more than {MAX_ITEMS} entries")
    for value in values:
        if not pattern.fullmatch(value):
            raise invalid(name, f"{name}: {value[:140]!r} is not a valid {what}")
    return list(dict.fromkeys(values))  # duplicates dropped, order kept


def policy_from_request(request: policy_pb2.PutPolicyRequest, updated_at: str) -> Policy:
    """Validate a PUT body; 400 naming the first field that fails."""
    return Policy(
        tenant_id=request.tenant_id,
        hitl_required_tools=_names(
            request.hitl_required_tools, "hitl_required_tools", TOOL_NAME, "tool name"
        ),
        max_concurrent_sessions=_limit(
            request, "max_concurrent_sessions", DEFAULT_MAX_CONCURRENT_SESSIONS
        ),
        max_tool_calls_per_session=_limit(
            request, "max_tool_calls_per_session", DEFAULT_MAX_TOOL_CALLS_PER_SESSION
        ),
        allowed_network_hosts=_names(
            request.allowed_network_hosts, "allowed_network_hosts", HOST, "host name"
        ),
        updated_at=updated_at,
    )


class PolicyServicer(policy_pb2_grpc.PolicyServiceServicer):
    def __init__(self, kv: Redis) -> None:
        self.kv = kv

    async def GetPolicy(
        self, request: policy_pb2.GetPolicyRequest, context: ServicerContext
    ) -> policy_pb2.GetPolicyResponse:
        tenant = identifier(request.tenant_id, "tenant_id")
        with kv_unavailable():
            policy = await load_policy(self.kv, tenant)
        return policy_pb2.GetPolicyResponse(policy=policy.to_proto())

    async def PutPolicy(
        self, request: policy_pb2.PutPolicyRequest, context: ServicerContext
    ) -> policy_pb2.PutPolicyResponse:
        identifier(request.tenant_id, "tenant_id")
        policy = policy_from_request(request, now_iso())
        stored = {k: v for k, v in asdict(policy).items() if k != "tenant_id"}
        with kv_unavailable():  # replicas drop their copies (`changes.py`)
            await changes.write(
                self.kv, "policy", put={policy_key(policy.tenant_id): json.dumps(stored)}
            )
        return policy_pb2.PutPolicyResponse(policy=policy.to_proto())
