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
(`{tenant_id}:budget:warned`), so a new budget warns again; DELETE removes all three and the
reservations held (`{tenant_id}:budget:held`). GET first gives back the reservations past
their deadline (`budget_reservation.sweep`: a process that held them died). The keys share
the tenant's hash tag: one script writes them and publishes the change on
`ai:budgets:changed`, atomically (one cluster slot), and `ai:budgets:version` is incremented
right after: every AI gateway process then forgets which tenants it knew to have no budget
(`no_budget.py`). An unreachable store is 503 (a budget is a security control: it fails
closed).
"""

from __future__ import annotations

import logging
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateways.ai import no_budget
from gateways.ai.budget_reservation import HOLD_SECS, sweep
from gateways.ai.tenants.keys import budget_key, held_key, limit_key, warned_key
from runtime.access import IDENTIFIER
from runtime.change_feed import changed_here
from runtime.context import ServicerContext
from runtime.errors import InvalidRequest, Unavailable
from strata.ai.v1 import budget_pb2, budget_pb2_grpc

# KEYS: the tenant's tokens, limit, warned marker and reservations held (one hash tag). ARGV:
# the tokens to set ('' deletes the budget), the feed's channel, the tenant. Returns 1 when a
# budget was removed.
# The message goes with the write (a classic PUBLISH: a cluster delivers it from any node).
_WRITE = """
local removed = 0
if ARGV[1] == '' then
  removed = redis.call('DEL', KEYS[1])
  redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
else
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('SET', KEYS[2], ARGV[1])
  redis.call('DEL', KEYS[3])
end
redis.call('PUBLISH', ARGV[2], ARGV[3])
return removed
"""

log = logging.getLogger(__name__)

INVALID = "invalid_request"  # the spec's `type` of a bad budget POST
MAX_TOKENS = 2**53 - 1  # stays exact in every JSON reader


def _tenant(tenant_id: str) -> str:
    if not IDENTIFIER.fullmatch(tenant_id):
        raise InvalidRequest(
            f"tenant_id {tenant_id[:140]!r} must match [A-Za-z0-9._:-]{{1,128}}", error=INVALID
        )
    return tenant_id


class BudgetServicer(budget_pb2_grpc.BudgetServiceServicer):
    def __init__(self, kv: Redis, hold_secs: float = HOLD_SECS) -> None:
        self.kv = kv
        self.hold_secs = hold_secs
        self._write = kv.register_script(_WRITE)

    async def GetBudget(
        self, request: budget_pb2.GetBudgetRequest, context: ServicerContext
    ) -> budget_pb2.GetBudgetResponse:
        tenant = _tenant(request.tenant_id)
        try:  # reservations past their deadline (their process died) are given back first
            back, value = await sweep(self.kv, tenant, hold_secs=self.hold_secs)
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc
        if back:
            log.info("budget of %s: %d tokens of expired reservations given back", tenant, back)
        if value is None:
            return budget_pb2.GetBudgetResponse(tenant_id=tenant, unlimited=True)
        return budget_pb2.GetBudgetResponse(tenant_id=tenant, remaining_tokens=value)

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
            await self._announced(tenant, str(request.tokens))
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc
        return budget_pb2.SetBudgetResponse(tenant_id=tenant, tokens_set=request.tokens)

    async def DeleteBudget(
        self, request: budget_pb2.DeleteBudgetRequest, context: ServicerContext
    ) -> budget_pb2.DeleteBudgetResponse:
        tenant = _tenant(request.tenant_id)
        try:
            removed = await self._announced(tenant, "")
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc
        return budget_pb2.DeleteBudgetResponse(tenant_id=tenant, deleted=bool(removed))

    async def _announced(self, tenant: str, tokens: str) -> int:
        """Write (or with no `tokens`, delete) the budget with its message, then move the
        feed's counter: the poll's safety net for a process whose subscription died
        silently. The counter cannot join the script (it is global, the budget is in its
        tenant's slot); moved after the write, a process that polls it forgets whatever it
        learnt before the write. Returns 1 when a budget was removed."""
        keys = [budget_key(tenant), limit_key(tenant), warned_key(tenant), held_key(tenant)]
        try:
            removed = int(await self._write(keys=keys, args=[tokens, no_budget.CHANNEL, tenant]))
            await self.kv.incr(no_budget.VERSION)
        finally:
            changed_here(no_budget.CHANNEL)  # even a failed write may have landed
        return removed


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
