"""runtime/idle_release.py: `release` is called once the work has stopped for `idle_secs`,
never while a piece of work runs, and once per idle spell."""

from __future__ import annotations

import asyncio

from runtime.idle_release import IdleRelease


async def test_released_once_idle_and_once_per_idle_spell() -> None:
    calls: list[float] = []
    idle = IdleRelease(lambda: calls.append(asyncio.get_running_loop().time()), idle_secs=0.2)
    idle.begin()
    idle.end()
    ended = asyncio.get_running_loop().time()
    await asyncio.sleep(0.5)
    assert len(calls) == 1 and calls[0] - ended >= 0.19
    await asyncio.sleep(0.3)
    assert len(calls) == 1  # nothing happened since: nothing more to give back
    idle.begin()
    idle.end()
    await asyncio.sleep(0.35)
    assert len(calls) == 2 and idle.released == 2


async def test_not_while_work_keeps_coming_or_runs() -> None:
    calls: list[int] = []
    idle = IdleRelease(lambda: calls.append(1), idle_secs=0.2)
    for _ in range(6):  # a piece of work every 0.1 s for 0.6 s
        idle.begin()
        idle.end()
        await asyncio.sleep(0.1)
    assert calls == []
    idle.begin()  # a long piece of work: the timer fires while it runs
    await asyncio.sleep(0.4)
    assert calls == []
    idle.end()
    await asyncio.sleep(0.1)
    assert calls == []  # 0.2 s after its end, not after the first piece's
    await asyncio.sleep(0.25)
    assert calls == [1]


async def test_zero_never_releases_and_close_cancels() -> None:
    calls: list[int] = []
    never = IdleRelease(lambda: calls.append(1), idle_secs=0)
    never.begin()
    never.end()
    closed = IdleRelease(lambda: calls.append(2), idle_secs=0.1)
    closed.begin()
    closed.end()
    closed.close()
    await asyncio.sleep(0.3)
    assert calls == []
