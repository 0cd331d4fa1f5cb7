"""Cancelling tasks that must end, when one cancellation may not be enough.

On Python 3.11 a cancellation that lands while redis-py connects or subscribes can be
swallowed, and the loop around the call goes on (measured: of 200 change feeds cancelled in
their first milliseconds, 23 kept running, into a subscription that waits for ever). A stop
that cancelled once then waited in vain, and so did `asyncio.run` at exit: the process never
ended, until the launcher or the kubelet killed it. Cancelling again once the task has moved
on ends it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

AGAIN_SECS = 0.05  # how long a cancelled task is given before it is cancelled again


async def cancel_and_wait(
    tasks: Iterable[asyncio.Task[object]], within_secs: float
) -> set[asyncio.Task[object]]:
    """Cancel `tasks` and wait for them to end, cancelling again every AGAIN_SECS while one
    goes on, for `within_secs` at most; the tasks still running then."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_secs
    pending = {task for task in tasks if not task.done()}
    while pending:
        left = deadline - loop.time()
        if left <= 0:
            break
        for task in pending:
            task.cancel()
        done, pending = await asyncio.wait(pending, timeout=min(AGAIN_SECS, left))
        for task in done:  # an error it ended with is the stop's to ignore, not the GC's to log
            if not task.cancelled():
                task.exception()
    return pending
