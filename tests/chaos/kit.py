"""The chaos suite's stack and load: `strata up --replicas 2` (port offset 6600), steady
traffic through the edge from a few concurrent clients, every call recorded (kind, when it
started and ended, status), and the counts the issue asks for, printed as a table.

The stack is the reliability suite's `Stack` (its URLs, credentials, tenants, rows read back
through the control plane's CSV export) started with replicas on this suite's offset.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import aiohttp
from reliability.kit import Http, Reply, Stack

# No port of this stack is a port of another suite's stack (tests/README.md lists them).
OFFSET = 6600
REPLICAS = 2
EDGE_WORKERS = 2
REPLICATED = ("ai-gateway", "agent-gateway", "controlplane")
# A killed AI gateway's budget reservations are given back once their deadline has passed
# (`gateways/ai/budget_reservation.py`): a short one here, so that the test sees it happen.
BUDGET_HOLD_SECS = 5
STACK_ENV = {"AI_BUDGET_HOLD_SECS": str(BUDGET_HOLD_SECS)}


class ChaosStack(Stack):
    offset: ClassVar[int] = OFFSET

    def launch_args(self) -> tuple[str, ...]:
        return ("--replicas", str(REPLICAS), "--edge-workers", str(EDGE_WORKERS))

    def health_url(self, name: str) -> str:
        return str(next(p["health_url"] for p in self.state["processes"] if p["name"] == name))

    async def replaced(self, name: str, old_pid: int) -> int:
        """Wait until the launcher has started `name` again (the state file names its new pid
        once it is healthy); its new pid."""
        for _ in range(600):
            self.read_state()
            pid = self.pid(name)
            if pid != old_pid:
                async with Http(timeout=2) as http:
                    reply = await http.call("GET", self.health_url(name))
                if reply.status == 200:
                    return pid
            await asyncio.sleep(0.2)
        raise AssertionError(f"{name} was not started again")

    async def kill(self, name: str, sig: signal.Signals = signal.SIGKILL) -> int:
        """`sig` to one replica (its process only, not its group); its pid."""
        self.read_state()
        pid = self.pid(name)
        os.kill(pid, sig)
        return pid

    def edge_workers(self) -> list[int]:
        """The edge primary's data-plane workers (its child processes)."""
        primary = self.pid("edge-proxy")
        children = Path(f"/proc/{primary}/task/{primary}/children").read_text()
        return [int(c) for c in children.split()]

    async def worker_replaced(self, old_pid: int) -> int:
        """Wait until the edge primary has started a worker in place of `old_pid`; its pid."""
        for _ in range(600):
            now = [pid for pid in self.edge_workers() if pid != old_pid]
            if len(now) == EDGE_WORKERS - 1:
                return now[0]
            await asyncio.sleep(0.1)
        raise AssertionError("the edge primary did not replace its killed worker")

    async def gone(self, pid: int) -> float:
        """When `pid` has exited and its parent, the launcher, has reaped it. A dying process
        holds its sockets until its last thread is gone (connections the kernel accepts for it
        meanwhile are reset), and its main thread shows as a zombie before that: only the reap
        says it is all over."""
        for _ in range(6000):  # SIGTERM: the drain, at most the launcher's grace
            if reaped(pid):
                break
            await asyncio.sleep(0.01)
        return time.monotonic()


def reaped(pid: int) -> bool:
    return not os.path.exists(f"/proc/{pid}")


@dataclass
class Call:
    kind: str
    started: float
    ended: float
    status: int  # 0: no HTTP answer (connection failed)
    trace_id: str  # sent in `traceparent`: the rows the call left carry it
    detail: str = ""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


@dataclass
class Event:
    """A process taken down: which one, and when (monotonic clock)."""

    name: str
    at: float  # the signal sent
    serves: tuple[str, ...]  # the kinds of call it serves
    gone: float = float("inf")  # the process exited: until then it held its sockets


Caller = Callable[[Http, int, dict[str, str]], Awaitable[Reply]]  # (client, n, headers)
PACE_SECS = 0.05  # each client's pause between calls: steady load, CPU left for restarts


@dataclass
class Load:
    """Clients calling through the edge until stopped, every call recorded. Each call has a
    trace id of its own (W3C `traceparent`), so its analytics or audit row can be found."""

    calls: list[Call] = field(default_factory=list)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def start(self, kind: str, call: Caller, clients: int) -> None:
        for _ in range(clients):
            self.tasks.append(asyncio.create_task(self._client(kind, call)))

    async def _client(self, kind: str, call: Caller) -> None:
        n = 0
        async with Http(timeout=30) as http:
            while not self.stopping.is_set():
                n += 1
                trace = uuid.uuid4().hex
                headers = {"traceparent": f"00-{trace}-{uuid.uuid4().hex[:16]}-01"}
                started = time.monotonic()
                try:
                    reply = await call(http, n, headers)
                    status, detail = reply.status, "" if reply.status < 300 else reply.text[:200]
                except (aiohttp.ClientError, TimeoutError) as exc:
                    status, detail = 0, repr(exc)
                self.calls.append(Call(kind, started, time.monotonic(), status, trace, detail))
                await asyncio.sleep(PACE_SECS)

    async def stop(self) -> None:
        self.stopping.set()
        await asyncio.gather(*self.tasks)

    def of(self, kind: str) -> list[Call]:
        return [c for c in self.calls if c.kind == kind]


def in_flight(call: Call, events: list[Event]) -> bool:
    """Whether `call` was under way when a process serving its kind was taken down."""
    return any(
        call.kind in e.serves and call.started <= e.gone and call.ended >= e.at for e in events
    )


def table(rows: list[dict[str, Any]]) -> str:
    """A Markdown table of `rows` (one dict per row, the same keys), for the issue's note."""
    heads = list(rows[0])
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    lines += ["| " + " | ".join(str(r[h]) for h in heads) + " |" for r in rows]
    return "\n".join(lines)
