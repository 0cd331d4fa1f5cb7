"""Token budgets on the request path: reserve before forwarding, settle after the answer.

Keys (per tenant, one hash tag; `budget.py` owns GET/POST/DELETE and writes the first three):
- `{tenant_id}:budget:tokens`: the tokens left; absent = unlimited;
- `{tenant_id}:budget:limit`: the budget last set by POST /v1/budget (the 80% reference);
- `{tenant_id}:budget:warned`: set (SET NX) when the tenant crosses 80% used; POST clears it,
  so each crossing of a newly set budget warns once;
- `{tenant_id}:budget:held`: the reservations held, id → `amount:deadline_ms`.

Reservation (one server-side script, atomic on every replica): the request's estimate — prompt
characters / 4 plus `max_tokens` (or AI_COMPLETION_ESTIMATE_TOKENS when absent) — is taken
from the counter if that many are left, and recorded under a random id with a deadline
(the store's clock + AI_BUDGET_HOLD_SECS); otherwise 429 `budget_exceeded` and nothing is
taken. Settlement (another script, by id): the reservation is removed and what was reserved
minus the real usage given back (or, when the answer used more than reserved, the difference
taken); a reservation already settled (or swept) settles to nothing, so a settlement may be
sent again whenever its fate is unknown. So the counter goes below zero only by what requests
in flight used beyond their reservations (with `max_tokens` set, only the error of the prompt
estimate), never because of a race: N concurrent requests can reserve at most what is left. A
budget POSTed while a request is in flight is settled against the new value (the give-back
lands on it), and a budget deleted meanwhile stays deleted.

No reservation is left taken for good:
- a request that fails or is cancelled settles off its path, in a task of its own that its
  cancellation does not reach; a settlement that fails is sent again (`SETTLE_TRIES`);
- a reservation whose reply never came (the caller gave up, timed out, or was cancelled after
  the script was sent: it may have run) is released by id, off the path (nothing if it never
  ran);
- a process renews the deadline of the reservations it holds every third of
  AI_BUDGET_HOLD_SECS; a reservation whose process died (kill -9, a lost node) is past its
  deadline soon and given back whole by a sweep: each replica sweeps every tenant it reserved
  for recently (`RECENT_SECS`) at that pace, and GET /v1/budget sweeps the tenant it reads.

The store unreachable → 503 (a budget fails closed), within one short timeout
(`kv.HOT_PATH_SECS`): the first failure marks the store down for the whole process
(`kv_reachability.py`), and later requests are refused without trying it until a probe finds
it back. Except for a tenant
this process knows to have no budget (`no_budget.py`): it is served, with nothing reserved.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from gateways.ai.no_budget import NoBudgetTenants
from gateways.ai.tenants.keys import budget_key, held_key, limit_key, warned_key
from runtime.cancelling import cancel_and_wait
from runtime.errors import ResourceExhausted, Unavailable
from runtime.stores.kv_pipeline import PipelinedScript
from runtime.stores.kv_reachability import reachability

log = logging.getLogger(__name__)

WARN_USED = 0.8  # the spec's budget_warning threshold: 80% used
HOLD_SECS = 30.0  # AI_BUDGET_HOLD_SECS' default
RECENT_SECS = 300.0  # a tenant reserved for this long ago is still swept by this process
SETTLE_TRIES = 4  # a settlement that failed is sent again, after 0.25, 0.5, 1 s
SETTLE_FIRST_RETRY_SECS = 0.25
STOP_SECS = 5.0  # at shutdown, settlements under way get this long to land

# The store's clock in ms (every replica's deadlines on one clock). A script may read TIME:
# scripts replicate their effects (Valkey, Redis >= 7).
_NOW_MS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# Both run through the client's batcher: concurrent requests' scripts share one round trip
# (`runtime/stores/kv_pipeline.py`); each still runs atomically in the store.
# KEYS: tokens, held. ARGV: amount, reservation id, hold ms.
_RESERVE = PipelinedScript(
    """
local left = redis.call('GET', KEYS[1])
if not left then return {0, 0} end
left = tonumber(left)
local want = tonumber(ARGV[1])
if left < want then return {2, left} end"""
    + _NOW_MS
    + """redis.call('HSET', KEYS[2], ARGV[2], ARGV[1] .. ':' .. (now + tonumber(ARGV[3])))
return {1, redis.call('DECRBY', KEYS[1], want)}
"""
)

# KEYS: tokens, limit, warned, held. ARGV: reservation id, tokens used, the warning's share.
# Returns {1, left, warn} settled; {0, 0, 0} nothing held under that id (settled already,
# released, swept) or the budget deleted meanwhile: nothing to do.
_SETTLE = PipelinedScript("""
local held = redis.call('HGET', KEYS[4], ARGV[1])
if not held then return {0, 0, 0} end
redis.call('HDEL', KEYS[4], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, 0, 0} end
local amount = tonumber(string.match(held, '^(%d+)'))
local left = redis.call('INCRBY', KEYS[1], amount - tonumber(ARGV[2]))
local limit = tonumber(redis.call('GET', KEYS[2]) or '')
local warn = 0
if limit and limit > 0 and left <= limit * (1 - tonumber(ARGV[3])) then
  if redis.call('SET', KEYS[3], '1', 'NX') then warn = 1 end
end
return {1, left, warn}
""")

# The sweep of one tenant's reservations: those named in ARGV[2..] (the caller's own, live)
# get a new deadline (now + ARGV[1] ms); any other past its deadline is removed and given back.
# KEYS: tokens, held. Returns {tokens given back, 1 if the budget exists, tokens left}.
SWEEP = PipelinedScript(
    """
local all = redis.call('HGETALL', KEYS[2])
local back, left = 0, redis.call('GET', KEYS[1])
if #all > 0 then"""
    + _NOW_MS
    + """  local mine = {}
  for i = 2, #ARGV do mine[ARGV[i]] = true end
  local hold = tonumber(ARGV[1])
  for i = 1, #all, 2 do
    local amount, deadline = string.match(all[i + 1], '^(%d+):(%d+)$')
    if mine[all[i]] then
      redis.call('HSET', KEYS[2], all[i], amount .. ':' .. (now + hold))
    elseif not deadline or tonumber(deadline) <= now then
      redis.call('HDEL', KEYS[2], all[i])
      back = back + (tonumber(amount) or 0)
    end
  end
  if back > 0 and left then left = redis.call('INCRBY', KEYS[1], back) end
end
if not left then return {back, 0, 0} end
return {back, 1, tonumber(left)}
"""
)


def estimate_prompt_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """About four characters per token, plus a few per message for the roles and framing."""
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    return chars // 4 + 4 * len(messages) + 1


@dataclass
class Reservation:
    tenant_id: str
    amount: int  # 0 when the tenant is unlimited (nothing to settle)
    limited: bool
    id: str = ""  # the reservation's id in `{tenant}:budget:held`


@dataclass(frozen=True)
class Settled:
    remaining: int | None
    warn: bool  # this settlement crossed 80% used, and is the one that says so


def new_id() -> str:
    return os.urandom(9).hex()


async def sweep(
    kv: Any, tenant_id: str, mine: Sequence[str] = (), *, hold_secs: float = HOLD_SECS
) -> tuple[int, int | None]:
    """Give back the tenant's reservations past their deadline and renew `mine`: (tokens
    given back, tokens left or None when the tenant has no budget)."""
    back, exists, left = await SWEEP(
        kv, [budget_key(tenant_id), held_key(tenant_id)],
        [int(hold_secs * 1000), *mine],
    )  # fmt: skip
    return int(back), int(left) if exists else None


class Budgets:
    def __init__(self, kv: Redis, hold_secs: float = HOLD_SECS) -> None:
        self.kv = kv
        self.hold_secs = hold_secs
        self.no_budget = NoBudgetTenants(kv)
        self.reachability = reachability(kv)
        self.holding: dict[str, set[str]] = {}  # tenant → ids this process holds (renewed)
        self.recent: dict[str, float] = {}  # tenant → when this process last reserved for it
        self._tasks: set[asyncio.Task[Any]] = set()  # settlements and releases under way
        self._sweeper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.no_budget.start()
        self._sweeper = asyncio.create_task(self._sweep_forever(), name="budget-sweep")

    async def stop(self) -> None:
        """Stop sweeping; settlements under way get STOP_SECS to land (what does not is
        given back by another replica's sweep once its deadline has passed)."""
        if self._sweeper is not None:
            await cancel_and_wait([self._sweeper], STOP_SECS)  # (once may not do: cancelling.py)
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=STOP_SECS)
        await self.no_budget.stop()

    def spawn(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run `work` in a task of its own (the caller's cancellation does not reach it),
        kept until done; `stop` waits for it."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def reserve(self, tenant_id: str, amount: int) -> Reservation:
        if self.reachability.down_for(budget_key(tenant_id)):
            return self._without_store(tenant_id, None)
        generation = self.no_budget.generation
        rid = new_id()
        self._hold(tenant_id, rid)
        try:
            status, left = await _RESERVE(
                self.kv, [budget_key(tenant_id), held_key(tenant_id)],
                [amount, rid, int(self.hold_secs * 1000)], hot=True,
            )  # fmt: skip
        except (RedisError, OSError) as exc:
            self.release(Reservation(tenant_id, amount, True, rid))  # it may have run
            self.reachability.failed(exc)
            return self._without_store(tenant_id, exc)
        except BaseException:  # cancelled after the script was sent: it may have run
            self.release(Reservation(tenant_id, amount, True, rid))
            raise
        if status == 0:
            self._unhold(tenant_id, rid)
            self.no_budget.found_none(tenant_id, generation)
            return Reservation(tenant_id, 0, limited=False)
        self.no_budget.found_budget(tenant_id)
        self.recent[tenant_id] = time.monotonic()
        if status == 2:
            self._unhold(tenant_id, rid)
            raise ResourceExhausted(
                f"token budget exceeded: {max(int(left), 0)} tokens left, this request may use "
                f"up to {amount}",
                error="budget_exceeded",
            )
        return Reservation(tenant_id, amount, limited=True, id=rid)

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

    def _hold(self, tenant_id: str, rid: str) -> None:
        self.holding.setdefault(tenant_id, set()).add(rid)

    def _unhold(self, tenant_id: str, rid: str) -> None:
        ids = self.holding.get(tenant_id)
        if ids is not None:
            ids.discard(rid)
            if not ids:
                del self.holding[tenant_id]

    def release(self, reservation: Reservation) -> None:
        """Give a reservation back whole, off the path (nothing if it was never taken). Its
        tenant is swept by this process for a while: a release that never lands is given back
        once its deadline has passed."""
        self.recent[reservation.tenant_id] = time.monotonic()
        self.spawn(self.settle_surely(reservation, 0))

    async def settle_surely(self, reservation: Reservation, used: int) -> Settled | None:
        """`settle`, sent again after a failure (it is idempotent) up to SETTLE_TRIES times;
        None when it never landed: the reservation stops being renewed, and a sweep gives it
        back whole once its deadline has passed."""
        delay = SETTLE_FIRST_RETRY_SECS
        try:
            for attempt in range(1, SETTLE_TRIES + 1):
                try:
                    return await self.settle(reservation, used)
                except (RedisError, OSError, Unavailable) as exc:
                    if attempt == SETTLE_TRIES:
                        log.warning(
                            "budget of %s not settled (%d tries, given back whole after its "
                            "deadline): %s", reservation.tenant_id, attempt, exc,
                        )  # fmt: skip
                        return None
                await asyncio.sleep(delay)
                delay *= 2
            return None
        finally:
            self._unhold(reservation.tenant_id, reservation.id)

    async def settle(self, reservation: Reservation, used: int) -> Settled:
        """Give back what was reserved and not used (or take the excess); once per id."""
        if not reservation.limited:
            return Settled(None, False)
        tenant = reservation.tenant_id
        if self.reachability.down_for(budget_key(tenant)):
            raise Unavailable("the key-value store holding budgets is known to be out")
        try:
            done, left, warn = await _SETTLE(
                self.kv,
                [budget_key(tenant), limit_key(tenant), warned_key(tenant), held_key(tenant)],
                [reservation.id, used, WARN_USED],
                hot=True,
            )
        except (RedisError, OSError) as exc:
            self.reachability.failed(exc)
            raise
        if not done:
            return Settled(None, False)
        return Settled(int(left), bool(warn))

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self.hold_secs / 3)
            try:
                await self.sweep_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the store is out: the next round tries again
                log.info("budget sweep not done: %s", exc)

    async def sweep_once(self) -> int:
        """Renew what this process holds and give back what is past its deadline, for every
        tenant it holds reservations of or reserved for in the last RECENT_SECS; the tokens
        given back."""
        now = time.monotonic()
        for tenant in [t for t, at in self.recent.items() if now - at > RECENT_SECS]:
            del self.recent[tenant]
        tenants = set(self.recent) | set(self.holding)
        results = await asyncio.gather(
            *(sweep(self.kv, t, sorted(self.holding.get(t, ())), hold_secs=self.hold_secs)
              for t in tenants),
            return_exceptions=True,
        )  # fmt: skip
        back = 0
        for tenant, result in zip(tenants, results, strict=True):
            if isinstance(result, BaseException):
                if isinstance(result, asyncio.CancelledError):
                    raise result
                log.info("budget of %s not swept: %s", tenant, result)
                continue
            if result[0]:
                log.info("budget of %s: %d tokens of expired reservations given back",
                         tenant, result[0])  # fmt: skip
            back += result[0]
        return back
