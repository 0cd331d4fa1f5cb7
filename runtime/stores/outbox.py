"""The analytics outbox: log rows made durable in the key-value store before the answer that
produced them leaves, then moved into ClickHouse by a drainer (`outbox_drain.py`).

Why: a row queued in a process's memory (`runtime/background.py`, written 0.2 s later) is
lost when that process is killed (`kill -9`, an OOM kill); the chaos suite counted 2-5 rows
per killed gateway. Here the request path appends each row to its table's stream

    analytics:outbox:{<table>}      XADD ... MAXLEN ~ 1000000 * row <JSON>

(one stream per table, its own hash tag: tables spread over a cluster's masters) through the
store client's batcher (`kv_pipeline`): under load one more command in the write that carries
the other requests' calls of that loop turn; a lone request pays a round trip of its own
(`tests/bench/outbox.py`: about 20-25 µs more CPU per request at 16 concurrent, a round
trip's 60-130 alone, on one Valkey) unless it has another store call to make in the same
turn: the AI gateway appends a chat's row in the turn it sends the budget's settlement
(`gateways/ai/metering.py`), so both leave in one write. The front door holds the answer
until the request's appends are confirmed (`hold_rows` / `rows_held`): a row the store has
is not lost with the process.

When the store cannot take a row (down, or the append fails), the row goes the old way,
queued in memory (`RowWriter`): logged, never a failed request. A row whose append fails
after the store applied it (the connection lost between the write and the reply) is then
written twice; that needs a failure at that exact moment.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import Any

from runtime import json_codec
from runtime.stores.analytics import Row
from runtime.stores.kv_pipeline import pipelined
from runtime.stores.kv_reachability import reachability

GROUP = "clickhouse"  # the drainers' consumer group
FIELD = "row"  # the entry's one field: the row as a JSON object
ROWS = "rows"  # or, an entry of a batch (`outbox_sink.py`): its rows' JSON lines, "\n" apart
MAXLEN = 1_000_000  # per table, approximate (`~`): rows kept through a long drainer outage


def stream_key(table: str) -> str:
    return f"analytics:outbox:{{{table}}}"


# The appends of the request being served (a list set by `hold_rows`), or None outside one.
_HELD: contextvars.ContextVar[list[asyncio.Future[Any]] | None] = contextvars.ContextVar(
    "outbox_held", default=None
)


class Outbox:
    """The request side: `append(table, row)` sends the row's XADD and returns its future
    (None when the store is known to be down for that stream: take the old path)."""

    def __init__(self, kv: Any) -> None:
        self.kv = kv
        self.reachability = reachability(kv)

    def append(self, table: str, row: Row) -> asyncio.Future[Any] | None:
        key = stream_key(table)
        if self.reachability.down_for(key):
            return None
        sent: Awaitable[Any] = pipelined(self.kv).command(
            "XADD", key, "MAXLEN", "~", MAXLEN, "*", FIELD, json_codec.dumps(row)
        )
        appended = asyncio.ensure_future(sent)  # a future already, or a cluster's coroutine
        held = _HELD.get()
        if held is not None:
            held.append(appended)
        return appended

    def failed(self, exc: BaseException) -> None:
        """An append failed: an unreachable store is skipped until it answers again."""
        self.reachability.failed(exc)


def start_holding() -> tuple[list[asyncio.Future[Any]], contextvars.Token[Any]]:
    """Collect the appends made while serving one request (its task and the tasks it starts
    meanwhile) into the list returned; `rows_held` waits for them; `stop_holding(token)` when
    the request is done (`hold_rows` as a context manager)."""
    held: list[asyncio.Future[Any]] = []
    return held, _HELD.set(held)


def stop_holding(token: contextvars.Token[Any]) -> None:
    _HELD.reset(token)


@contextmanager
def hold_rows() -> Iterator[list[asyncio.Future[Any]]]:
    held, token = start_holding()
    try:
        yield held
    finally:
        stop_holding(token)


async def rows_held(held: list[asyncio.Future[Any]]) -> None:
    """Wait until the appends in `held` are settled: written, or failed and queued in memory
    instead (by the writer's callback). A mute store delays an answer, never fails it: the
    batcher's watchdog fails its calls after the client's timeout (1 s), and the store is then
    skipped until it answers again. One future waited for, whatever the rows: a request
    cancelled meanwhile (its client gone) cancels it, never the appends, which finish
    (asyncio.wait with a timeout costs twice as much CPU, a shield per row more too)."""
    if not held:
        return
    pending = [f for f in held if not f.done()]
    held.clear()
    if not pending:
        return
    settled = asyncio.get_running_loop().create_future()
    left = len(pending)

    def one_settled(_: asyncio.Future[Any]) -> None:
        # Its outcome is the writer's business (a failed row is queued in memory).
        nonlocal left
        left -= 1
        if not left and not settled.done():
            settled.set_result(None)

    for appended in pending:
        appended.add_done_callback(one_settled)
    await settled


async def current_rows_held() -> None:
    """`rows_held` for the request being served (a stream, before its last event)."""
    held = _HELD.get()
    if held:
        await rows_held(held)
