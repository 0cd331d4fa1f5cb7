"""Budget reservations that are always given back (issue 24, "Replicas under failure"): each
reservation has an id in `{tenant}:budget:held`, a settlement lands once, a request cancelled
after its reservation script was sent gives it back, and the reservations of a process that
died are given back by another replica's sweep once their deadline has passed — counted
against the budget, token for token.

The chaos suite (tests/chaos) found the leak from outside: after a kill -9 of an AI gateway,
one in-flight chat's whole reservation (519 tokens, about 104 chats of the echo's 5) stayed
taken for good."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
from ai_kit import Scripted, client, gateway_process_handles
from ai_kit import tenant as new_tenant
from redis.asyncio import Redis
from shared_kit import MASTER_KEY

from gateways.ai.background import Background
from gateways.ai.budget_reservation import Budgets, Reservation, sweep
from gateways.ai.metering import metered
from gateways.ai.metrics import AiMetrics
from gateways.ai.tenants.keys import budget_key, held_key
from runtime.idle_release import IdleRelease
from runtime.telemetry import Metrics

# Store-facing: runs on the session's Valkey cluster (tests/conftest.py).
pytestmark = pytest.mark.kv_cluster

BUDGET, ESTIMATE, USED = 10_000, 519, 5


async def budgeted(kv: Redis) -> str:
    tenant = new_tenant()
    await kv.set(budget_key(tenant), BUDGET)
    return tenant


async def left(kv: Redis, tenant: str) -> int:
    value = await kv.get(budget_key(tenant))
    assert value is not None
    return int(value)


class Warnings:
    """What `metered` hands to the background: budget warnings (none expected here)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []

    def budget_warning(self, tenant_id: str, remaining: int, limit: int | None) -> None:
        self.sent.append((tenant_id, remaining))


async def settled(budgets: Budgets) -> None:
    """Every settlement and release this process started has landed."""
    while budgets._tasks:
        await asyncio.wait(list(budgets._tasks))


async def test_a_reservation_settles_once(kv: Redis) -> None:
    tenant = await budgeted(kv)
    budgets = Budgets(kv)
    held = await budgets.reserve(tenant, ESTIMATE)
    assert await left(kv, tenant) == BUDGET - ESTIMATE
    assert await kv.hkeys(held_key(tenant)) == [held.id]
    first = await budgets.settle(held, USED)
    assert first.remaining == BUDGET - USED
    again = await budgets.settle(held, USED)  # a settlement sent twice lands once
    assert again.remaining is None
    assert await left(kv, tenant) == BUDGET - USED
    assert await kv.exists(held_key(tenant)) == 0
    assert budgets.holding == {tenant: {held.id}}  # renewed until `settle_surely` is done
    assert await budgets.settle_surely(held, USED) is not None
    assert budgets.holding == {}


async def test_a_request_cancelled_after_its_reservation_was_sent_gives_it_back(
    kv: Redis,
) -> None:
    """The reservation script is sent, then the request is cancelled before the reply (a
    drained handler, a client gone): the script ran, and its reservation is released."""
    tenant = await budgeted(kv)
    budgets = Budgets(kv)
    for _ in range(20):
        reserving = asyncio.create_task(budgets.reserve(tenant, ESTIMATE))
        await asyncio.sleep(0)  # the request queues its script
        await asyncio.sleep(0)  # the batcher writes it
        reserving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reserving
    await settled(budgets)
    print("DEBUG", await kv.hgetall(held_key(tenant)), budgets.holding)
    assert await left(kv, tenant) == BUDGET
    assert await kv.exists(held_key(tenant)) == 0
    assert budgets.holding == {}


async def test_a_request_cancelled_between_reserve_and_settle_gives_it_back(
    kv: Redis,
) -> None:
    """Through `metered`, as the chat pipeline holds a reservation: requests cancelled after
    their reservation (before and while settling), and requests that failed."""
    tenant = await budgeted(kv)
    budgets = Budgets(kv)
    metrics = AiMetrics(Metrics("ai-gateway"))
    warnings = Warnings()
    background = cast(Background, warnings)
    idle = IdleRelease(lambda: None, idle_secs=0)  # no pages to give back here
    reserved = asyncio.Event()

    async def request(fail: bool) -> None:
        async with metered(budgets, metrics, background, idle) as meter:
            await meter.reserve(tenant, ESTIMATE)
            reserved.set()
            if fail:
                raise RuntimeError("the provider failed")
            meter.charge(2, USED - 2)
            await asyncio.sleep(3600)  # the provider is slow: cancelled here

    for fail in (False, True):
        for _ in range(5):
            reserved.clear()
            task = asyncio.create_task(request(fail))
            await reserved.wait()
            task.cancel()
            with pytest.raises((asyncio.CancelledError, RuntimeError)):
                await task

    async def settling_when_cancelled() -> None:
        async with metered(budgets, metrics, background, idle) as meter:
            await meter.reserve(tenant, ESTIMATE)
            meter.charge(2, USED - 2)
        # cancelled by the caller while `metered` awaits the settlement

    for _ in range(5):
        task = asyncio.create_task(settling_when_cancelled())
        for _ in range(6):  # into the settlement, wherever it is
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    await settled(budgets)
    # The slow ones were charged what they had used when cancelled, the failed ones nothing.
    charged = await left(kv, tenant)
    assert BUDGET - charged in {n * USED for n in range(5, 11)}, charged
    assert await kv.exists(held_key(tenant)) == 0
    assert budgets.holding == {}
    assert warnings.sent == []


async def test_the_reservations_of_a_dead_process_are_given_back_after_their_deadline(
    kv: Redis,
) -> None:
    """Process A (hold 1 s) holds reservations and dies without settling them (kill -9: no
    settlement, no renewal); B, which reserved for the same tenant, sweeps them back once
    their deadline has passed. A live process's reservations are renewed, never swept."""
    tenant = await budgeted(kv)
    dead = Budgets(kv, hold_secs=1.0)
    for _ in range(3):
        await dead.reserve(tenant, ESTIMATE)
    alive = Budgets(kv, hold_secs=5.0)
    mine = await alive.reserve(tenant, ESTIMATE)
    assert await left(kv, tenant) == BUDGET - 4 * ESTIMATE
    await asyncio.sleep(1.1)  # A's deadlines, on the store's clock, have passed
    assert await alive.sweep_once() == 3 * ESTIMATE
    assert await left(kv, tenant) == BUDGET - ESTIMATE  # B's own is held: renewed, not swept
    assert await kv.hkeys(held_key(tenant)) == [mine.id]
    assert await alive.sweep_once() == 0  # nothing twice
    await alive.settle(mine, USED)
    assert await left(kv, tenant) == BUDGET - USED


async def test_a_read_of_the_budget_gives_back_what_is_past_its_deadline(kv: Redis) -> None:
    """GET /v1/budget sweeps the tenant it reads (`sweep`): a tenant no replica serves any
    more still reads its whole budget back."""
    tenant = await budgeted(kv)
    dead = Budgets(kv, hold_secs=1.0)
    await dead.reserve(tenant, ESTIMATE)
    assert await sweep(kv, tenant) == (0, BUDGET - ESTIMATE)
    await asyncio.sleep(1.1)
    assert await sweep(kv, tenant) == (ESTIMATE, BUDGET)
    assert await sweep(kv, new_tenant()) == (0, None)


async def test_a_settlement_after_the_sweep_does_not_give_back_twice(kv: Redis) -> None:
    """A process that stalled past its deadline settles late: the sweep gave the reservation
    back already, the settlement finds nothing and takes nothing."""
    tenant = await budgeted(kv)
    slow = Budgets(kv, hold_secs=1.0)
    held = await slow.reserve(tenant, ESTIMATE)
    await asyncio.sleep(1.1)
    assert await sweep(kv, tenant) == (ESTIMATE, BUDGET)
    assert (await slow.settle(held, USED)).remaining is None
    assert await left(kv, tenant) == BUDGET


async def test_a_deleted_budget_forgets_its_reservations(kv: Redis) -> None:
    tenant = await budgeted(kv)
    budgets = Budgets(kv)
    held = await budgets.reserve(tenant, ESTIMATE)
    await kv.delete(budget_key(tenant))
    assert (await budgets.settle(held, USED)).remaining is None
    assert await kv.get(budget_key(tenant)) is None  # stays deleted
    assert await kv.exists(held_key(tenant)) == 0


async def test_stop_waits_for_settlements_under_way(kv: Redis) -> None:
    tenant = await budgeted(kv)
    budgets = Budgets(kv)
    await budgets.start()
    holds: list[Any] = [await budgets.reserve(tenant, ESTIMATE) for _ in range(10)]
    for held in holds:
        budgets.spawn(budgets.settle_surely(cast(Reservation, held), USED))
    await budgets.stop()
    assert await left(kv, tenant) == BUDGET - 10 * USED


async def test_a_settlement_refused_while_the_store_is_marked_down_is_sent_again(
    kv: Redis,
) -> None:
    """Another request's store call timed out (0.25 s on a starved machine): the process marks
    the store down and refuses its calls until a ping finds it back. A chat that succeeded
    meanwhile lost its settlement (a whole reservation less its usage: 102.8 chats' worth in
    the chaos suite); it is sent again, and lands once the store is back."""
    tenant = await budgeted(kv)
    budgets = Budgets(kv)
    held = await budgets.reserve(tenant, ESTIMATE)
    budgets.reachability.down_since = time.monotonic()  # as `failed` marks it
    try:
        settling = budgets.spawn(budgets.settle_surely(held, USED))
        await asyncio.sleep(0.1)
        assert not settling.done()
        assert await left(kv, tenant) == BUDGET - ESTIMATE
    finally:
        budgets.reachability.down_since = None  # the probe found it back
    assert await settling is not None
    assert await left(kv, tenant) == BUDGET - USED
    assert budgets.holding == {}


async def test_a_killed_gateway_process_s_reservations_are_given_back(
    scripted: Scripted, kv: Redis, valkey_url: str, tmp_path: Path
) -> None:
    """Two AI gateway processes; chats held by a slow provider on the first, which is then
    killed (SIGKILL: nothing settled, nothing renewed). Once their deadline has passed, the
    other process gives their reservations back: the budget is whole again."""
    scripted.delay = 60.0  # the chats wait in the provider, their reservations held
    tenant = new_tenant()
    hold = {"AI_BUDGET_HOLD_SECS": "1"}
    async with gateway_process_handles(2, valkey_url, tmp_path, **hold) as (urls, procs):
        await kv.set(budget_key(tenant), BUDGET)
        sdk = client(urls[0], tenant)
        chats = [
            asyncio.create_task(sdk.chat.completions.create(
                model="m-1", messages=[{"role": "user", "content": "a b c"}], max_tokens=10))
            for _ in range(5)
        ]  # fmt: skip
        for _ in range(600):  # every chat has reserved and waits in the provider
            if len(scripted.attempts) >= 5:
                break
            await asyncio.sleep(0.05)
        assert await left(kv, tenant) == BUDGET - 5 * 16  # 6 of prompt, 10 of max_tokens
        procs[0].kill()
        await procs[0].wait()
        await asyncio.gather(*chats, return_exceptions=True)
        await sdk.close()
        await asyncio.sleep(1.1)  # the deadlines, on the store's clock, have passed
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{urls[1]}/v1/budget/{tenant}",
                     headers={"Authorization": f"Bearer {MASTER_KEY}"}) as resp,
        ):  # fmt: skip
            assert resp.status == 200, await resp.text()
            read = await resp.json()
    assert read["remaining_tokens"] == BUDGET
    assert await left(kv, tenant) == BUDGET
    assert await kv.exists(held_key(tenant)) == 0
