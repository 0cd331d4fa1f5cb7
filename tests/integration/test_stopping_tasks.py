"""Tasks a stop cancels end, even when a cancellation is swallowed (`runtime/cancelling.py`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys

from runtime.cancelling import cancel_and_wait
from runtime.change_feed import ChangeWatch
from runtime.stores.kv import connect_kv


async def swallows_one_cancellation(forever: asyncio.Event) -> None:
    """As a loop around a redis-py call that turned a cancellation into its own error does."""
    with contextlib.suppress(asyncio.CancelledError):
        await forever.wait()
    await forever.wait()


async def test_a_task_that_swallowed_a_cancellation_is_cancelled_again_until_it_ends() -> None:
    forever = asyncio.Event()
    once = asyncio.create_task(swallows_one_cancellation(forever))
    await asyncio.sleep(0)
    once.cancel()
    await asyncio.wait([once], timeout=0.2)
    assert not once.done()  # what a stop that cancels once was left with

    assert await cancel_and_wait([once], 1.0) == set()
    assert once.cancelled()


async def test_change_feeds_stopped_in_their_first_milliseconds_all_end(valkey_url: str) -> None:
    """Stopped while they connect and subscribe, about one in ten swallowed the stop's single
    cancellation and followed its channel for ever (a process that never exited)."""
    kv = connect_kv(valkey_url)
    watches = [ChangeWatch(kv, f"test:stopping:{i}", f"test:stopping:{i}:n") for i in range(60)]
    try:
        for i, watch in enumerate(watches):
            await watch.start()
            tasks = list(watch._tasks)
            await asyncio.sleep((i % 11) * 0.0007)
            await watch.stop()
            assert all(task.done() for task in tasks), f"watch {i} still follows its channel"
    finally:
        await kv.aclose()


SERVICE = """
import asyncio
from runtime.logs import setup_logging
from runtime.serve import run
from runtime.service import ServiceDefinition
from runtime.telemetry import Metrics


async def swallows_one_cancellation():
    forever = asyncio.Event()
    try:
        await forever.wait()
    except asyncio.CancelledError:
        pass
    await forever.wait()


def build():
    async def follow():
        asyncio.get_running_loop().create_task(swallows_one_cancellation(), name="follower")

    async def health():
        return {"status": "healthy"}

    return ServiceDefinition(
        name="probe", bindings=[], http_rules=[], info={}, health=health, authenticator=None,
        metrics=Metrics("probe"), on_startup=[follow], apps_only=True,
    )


setup_logging("probe")
run(build, "127.0.0.1", 0, 0)
"""


async def test_a_stopping_service_exits_though_a_task_of_it_swallowed_a_cancellation() -> None:
    """asyncio.run cancels what is left once, then waits for it for ever: the process did not
    exit until it was killed (the AI gateway's change feeds, 71 s in a stack test)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SERVICE, stderr=asyncio.subprocess.PIPE
    )
    assert process.stderr is not None
    lines: list[dict[str, object]] = []
    async with asyncio.timeout(30):
        while not any(line.get("msg") == "serving" for line in lines):
            raw = await process.stderr.readline()
            assert raw, f"exited before serving: {lines}"
            lines.append(json.loads(raw))
    process.send_signal(signal.SIGTERM)
    try:
        async with asyncio.timeout(15):
            rest = await process.stderr.read()
            code = await process.wait()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError("the service did not exit after SIGTERM") from None
    assert code == 0
    messages = [json.loads(line)["msg"] for line in rest.decode().splitlines()]
    assert messages[:1] == ["stopping"] and "stopped" in messages
    assert "tasks still running after the stop" not in messages
