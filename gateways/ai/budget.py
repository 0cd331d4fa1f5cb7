"""`strata.ai.v1.BudgetService`: each tenant's token budget, the key-value counter
`{tenant_id}:budget:tokens` (the tokens left; absent: no budget, the tenant is unlimited).

- `GET /v1/budget/{tenant_id}` → `{tenant_id, remaining_tokens}`, or
  `{tenant_id, remaining_tokens: null, unlimited: true}` when no budget is set. Tenant-scoped:
  a token of another tenant is refused (403) by the guard.
- `POST /v1/budget/{tenant_id}` `{tokens}` (platform administrators, e.g. the control plane
  provisioning a tenant) sets the tokens left → `{tenant_id, tokens_set}`. `tokens` missing,
  not an integer or negative → 400 in the OpenAI envelope with `type: invalid_request`.
- `DELETE /v1/budget/{tenant_id}` (platform administrators; beyond the spec) removes the counter
  → `{tenant_id, deleted}`; the control plane calls it when it deletes a tenant.

Chat completions reserve from the counter and settle it against their real usage
(`budget_reservation.py`); the key-value store is the one source, so every AI gateway replica
sees the same budget. POST also records the budget set (`{tenant_id}:budget:limit`, the
reference of the 80% `budget_warning`) and clears the warning marker
(`{tenant_id}:budget:warned`), so a new budget warns again; DELETE removes all three. Both
also announce the change (`ai:budgets:version` incremented, `ai:budgets:changed` published,
in the same transaction): every AI gateway process then forgets which tenants it knew to
have no budget (`no_budget.py`). An unreachable store is 503 (a budget is a security
control: it fails closed).
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateways.ai import no_budget
from gateways.ai.tenants.keys import budget_key, limit_key, warned_key
from runtime.access import IDENTIFIER
from runtime.change_feed import changed_here
from runtime.context import ServicerContext
from runtime.errors import InvalidRequest, Unavailable
from strata.ai.v1 import budget_pb2, budget_pb2_grpc

INVALID = "invalid_request"  # the spec's `type` of a bad budget POST
MAX_TOKENS = 2**53 - 1  # stays exact in every JSON reader


def _tenant(tenant_id: str) -> str:
    if not IDENTIFIER.fullmatch(tenant_id):
        raise InvalidRequest(
            f"tenant_id {tenant_id[:140]!r} must match [A-Za-z0-9._:-]{{1,128}}", error=INVALID
        )
    return tenant_id


class BudgetServicer(budget_pb2_grpc.BudgetServiceServicer):
    def __init__(self, kv: Redis) -> None:
        self.kv = kv

    async def GetBudget(
        self, request: budget_pb2.GetBudgetRequest, context: ServicerContext
    ) -> budget_pb2.GetBudgetResponse:
        tenant = _tenant(request.tenant_id)
        try:
            value = await self.kv.get(budget_key(tenant))
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc
        if value is None:
            return budget_pb2.GetBudgetResponse(tenant_id=tenant, unlimited=True)
        return budget_pb2.GetBudgetResponse(tenant_id=tenant, remaining_tokens=int(value))

    async def SetBudget(
        self, request: budget_pb2.SetBudgetRequest, context: ServicerContext
    ) -> budget_pb2.SetBudgetResponse:
        tenant = _tenant(request.tenant_id)
        if not request.HasField("tokens"):
            raise InvalidRequest("'tokens' is required: an integer number of tokens", error=INVALID)
        if not 0 <= request.tokens <= MAX_TOKENS:
            raise InvalidRequest(
                f"'tokens' must be an integer between 0 and {MAX_TOKENS}", error=INVALID
            )
        try:
            async with self.kv.pipeline(transaction=True) as pipe:
                pipe.set(budget_key(tenant), request.tokens)
                pipe.set(limit_key(tenant), request.tokens)
                pipe.delete(warned_key(tenant))
                _announce(pipe, tenant)
                await pipe.execute()
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc
        finally:
            changed_here(no_budget.CHANNEL)  # even a failed write may have landed
        return budget_pb2.SetBudgetResponse(tenant_id=tenant, tokens_set=request.tokens)

    async def DeleteBudget(
        self, request: budget_pb2.DeleteBudgetRequest, context: ServicerContext
    ) -> budget_pb2.DeleteBudgetResponse:
        tenant = _tenant(request.tenant_id)
        try:
            async with self.kv.pipeline(transaction=True) as pipe:
                pipe.delete(budget_key(tenant))
                pipe.delete(limit_key(tenant), warned_key(tenant))
                _announce(pipe, tenant)
                removed, *_ = await pipe.execute()
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc
        finally:
            changed_here(no_budget.CHANNEL)
        return budget_pb2.DeleteBudgetResponse(tenant_id=tenant, deleted=bool(removed))


def _announce(pipe: Any, tenant: str) -> None:
    """Queue the change's announcement beside the write (`no_budget.py` follows it)."""
    pipe.incr(no_budget.VERSION)
    pipe.publish(no_budget.CHANNEL, tenant)


def _unavailable(exc: BaseException) -> Unavailable:
    return Unavailable(
        f"the key-value store holding budgets is unreachable: {exc}", error="service_unavailable"
    )


def render_budget(response: Any) -> dict[str, Any]:
    """GetBudgetResponse in the spec's two shapes: `{tenant_id, remaining_tokens}`, or
    `{tenant_id, remaining_tokens: null, unlimited: true}` when no budget is set."""
    if response.HasField("remaining_tokens"):
        return {"tenant_id": response.tenant_id, "remaining_tokens": response.remaining_tokens}
    return {"tenant_id": response.tenant_id, "remaining_tokens": None, "unlimited": True}
