"""The tenants this process knows to have no token budget, so that they can be served while
the key-value store is out (a tenant with a budget is refused then: budgets fail closed).

What it knows comes from the budget reservations themselves: every chat request runs the
reservation script, which reads `{tenant}:budget:tokens`; a run that found it absent records
the tenant here (when it was read), a run that found a budget removes it. Nothing else is
read, so knowing costs no store call.

What it knows is dropped when it may be wrong:
- every budget write (POST and DELETE `/v1/budget/{tenant}`, `budget.py`) publishes on
  `ai:budgets:changed` (in the write's own script) and then increments `ai:budgets:version`;
  every AI gateway process follows that feed (`runtime/change_feed.py`) and forgets
  everything it knows on a change (budget writes are rare operator actions; the next request
  of each tenant learns again, at no cost). The process that wrote forgets at once. (In a
  cluster the counter is in another slot than the budget, which is in its tenant's: it cannot
  be moved in the write's script. The message can, and does; the counter, moved right after,
  is the safety net of a subscription that died silently.)
- a read older than MAX_AGE_SECS does not count: a replica cut off from a store that others
  still reach (a partition) cannot hear of a budget set meanwhile, so it serves a tenant
  without a budget only for that long after it last saw the tenant's counter absent.
- losing contact with the feed keeps what is known (that is what it is for), and so does a
  store restarted with its data; once contact is back, a moved counter (a budget written
  meanwhile, or a store that lost it) drops it all.
A read that raced a budget write (a change came while it was in flight) is not recorded.

Memory is bounded: at most MAX_TENANTS tenants, the least recently confirmed leaving first.
"""

from __future__ import annotations

import time

from redis.asyncio import Redis

from runtime.change_feed import ChangeWatch

CHANNEL = "ai:budgets:changed"
VERSION = "ai:budgets:version"
MAX_TENANTS = 100_000
MAX_AGE_SECS = 300.0


class NoBudgetTenants:
    def __init__(self, kv: Redis) -> None:
        self.watch = ChangeWatch(kv, CHANNEL, VERSION)
        self.watch.on_change(self.forget_all, on_loss=False)
        self._seen: dict[str, float] = {}  # tenant → monotonic time of the read; oldest first

    async def start(self) -> None:
        await self.watch.start()

    async def stop(self) -> None:
        await self.watch.stop()

    @property
    def generation(self) -> int:
        """Take it before a read; pass it to `found_none` after."""
        return self.watch.generation

    def found_none(self, tenant_id: str, generation: int) -> None:
        """A read (begun at `generation`) found no budget for the tenant."""
        if generation != self.watch.generation or not self.watch.trusted:
            return  # a change may have come meanwhile, or could go unheard
        seen = self._seen
        seen.pop(tenant_id, None)
        if len(seen) >= MAX_TENANTS:
            del seen[next(iter(seen))]
        seen[tenant_id] = time.monotonic()

    def found_budget(self, tenant_id: str) -> None:
        self._seen.pop(tenant_id, None)

    def known(self, tenant_id: str) -> bool:
        """Whether the tenant is known to have no budget (for serving it without the store)."""
        seen = self._seen.get(tenant_id)
        return seen is not None and time.monotonic() - seen < MAX_AGE_SECS

    def forget_all(self) -> None:
        self._seen.clear()
