"""Token budgets on the request path: reserve before forwarding, settle after the answer.

Keys (per tenant; `budget.py` owns GET/POST/DELETE and writes them):
- `{tenant_id}:budget:tokens`: the tokens left; absent = unlimited;
- `{tenant_id}:budget:limit`: the budget last set by POST /v1/budget (the 80% reference);
- `{tenant_id}:budget:warned`: set (SET NX) when the tenant crosses 80% used; POST clears it,
  so each crossing of a newly set budget warns once.

Reservation (one server-side script, atomic on every replica): the request's estimate — prompt
characters / 4 plus `max_tokens` (or AI_COMPLETION_ESTIMATE_TOKENS when absent) — is taken
from the counter if that many are left; otherwise 429 `budget_exceeded` and nothing is taken.
Settlement (another script): the reservation minus the real usage is given back (or, when the
answer used more than reserved, the difference is taken). So the counter goes below zero only
by what requests in flight used beyond their reservations (with `max_tokens` set, only the
error of the prompt estimate), never because of a race: N concurrent requests can reserve at
most what is left. A budget POSTed while a request is in flight is settled against the new
value (the give-back lands on it), and a budget deleted meanwhile stays deleted.

The store unreachable → 503 (a budget fails closed), within one short timeout
(`kv.HOT_PATH_SECS`): the first failure marks the store down for the whole process
(`kv_reachability.py`), and later requests are refused without trying it until a probe finds
it back. Except for a tenant
this process knows to have no budget (`no_budget.py`): it is served, with nothing reserved.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateways.ai.no_budget import NoBudgetTenants
from gateways.ai.tenants.keys import budget_key, limit_key, warned_key
from runtime.errors import ResourceExhausted, Unavailable
from runtime.stores.kv_pipeline import PipelinedScript
from runtime.stores.kv_reachability import reachability

log = logging.getLogger(__name__)

WARN_USED = 0.8  # the spec's budget_warning threshold: 80% used

# Both run through the client's batcher: concurrent requests' scripts share one round trip
# (`runtime/stores/kv_pipeline.py`); each still runs atomically in the store.
_RESERVE = PipelinedScript("""
local left = redis.call('GET', KEYS[1])
if not left then return {0, 0} end
left = tonumber(left)
local want = tonumber(ARGV[1])
if left < want then return {2, left} end
return {1, redis.call('DECRBY', KEYS[1], want)}
""")

_SETTLE = PipelinedScript("""
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, 0} end
local left = redis.call('INCRBY', KEYS[1], ARGV[1])
local limit = tonumber(redis.call('GET', KEYS[2]) or '')
local warn = 0
if limit and limit > 0 and left <= limit * (1 - tonumber(ARGV[2])) then
  if redis.call('SET', KEYS[3], '1', 'NX') then warn = 1 end
end
return {left, warn}
""")


def estimate_prompt_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """About four characters per token, plus a few per message for the roles and framing."""
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    return chars // 4 + 4 * len(messages) + 1


@dataclass
class Reservation:
    tenant_id: str
    amount: int  # 0 when the tenant is unlimited (nothing to settle)
    limited: bool


@dataclass(frozen=True)
class Settled:
    remaining: int | None
    warn: bool  # this settlement crossed 80% used, and is the one that says so


class Budgets:
    def __init__(self, kv: Redis) -> None:
        self.kv = kv
        self.no_budget = NoBudgetTenants(kv)
        self.reachability = reachability(kv)

    async def start(self) -> None:
        await self.no_budget.start()

    async def stop(self) -> None:
        await self.no_budget.stop()

    async def reserve(self, tenant_id: str, amount: int) -> Reservation:
        if self.reachability.down_for(budget_key(tenant_id)):
            return self._without_store(tenant_id, None)
        generation = self.no_budget.generation
        try:
            status, left = await _RESERVE(self.kv, [budget_key(tenant_id)], [amount], hot=True)
        except (RedisError, OSError) as exc:
            self.reachability.failed(exc)
            return self._without_store(tenant_id, exc)
        if status == 0:
            self.no_budget.found_none(tenant_id, generation)
            return Reservation(tenant_id, 0, limited=False)
        self.no_budget.found_budget(tenant_id)
        if status == 2:
            raise ResourceExhausted(
                f"token budget exceeded: {max(int(left), 0)} tokens left, this request may use "
                f"up to {amount}",
                error="budget_exceeded",
            )
        return Reservation(tenant_id, amount, limited=True)

    def _without_store(self, tenant_id: str, exc: BaseException | None) -> Reservation:
        """The store cannot answer: a tenant known to have no budget goes on unlimited;
        any other is refused (503)."""
        if self.no_budget.known(tenant_id):
            return Reservation(tenant_id, 0, limited=False)
        why = f": {exc}" if exc is not None else " (known to be out)"
        raise Unavailable(
            f"the key-value store holding budgets is unreachable{why}",
            error="service_unavailable",
        ) from exc

    async def settle(self, reservation: Reservation, used: int) -> Settled:
        """Give back what was reserved and not used (or take the excess)."""
        if not reservation.limited:
            return Settled(None, False)
        tenant = reservation.tenant_id
        if self.reachability.down_for(budget_key(tenant)):
            raise Unavailable("the key-value store holding budgets is known to be out")
        try:
            left, warn = await _SETTLE(
                self.kv,
                [budget_key(tenant), limit_key(tenant), warned_key(tenant)],
                [reservation.amount - used, WARN_USED],
                hot=True,
            )
        except (RedisError, OSError) as exc:
            self.reachability.failed(exc)
            raise
        return Settled(int(left), bool(warn))
