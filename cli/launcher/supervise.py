"""The launcher's children: start each with its own log file, wait until it is healthy, read
what it logged while starting (models loaded; the last lines of one that failed), measure its
memory, restart the key-value store when it exits, stop them all."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections import deque
from pathlib import Path

from cli.launcher import grpc_health
from cli.launcher.http import Http, HttpError
from cli.launcher.plan import Child
from cli.launcher.preload import Forked, Preloader

TAIL_LINES = 20

# Children started again when they exit on their own. Only the key-value store: the services
# reconnect to it by themselves (each command opens a connection as needed; the change feeds
# and the provider table's subscription follow again), and its data is in its append-only
# file. A service or sidecar that exits still stops the stack: a crash to look at, not to hide.
# (`--kv-cluster`'s nodes are restarted too, once the cluster has failed over: `up.py`.)
RESTARTED = frozenset({"valkey"})
RESTARTS_PER_MINUTE = 5
FIRST_DELAY_SECS = 0.5  # then doubled per restart within the minute
# How often a starting child is asked whether it is healthy: until it listens, an attempt is a
# refused connection, so asking often costs little and says "ready" sooner.
HEALTH_POLL_SECS = 0.05


class StartFailed(Exception):
    """A child exited or did not become healthy in time."""

    def __init__(self, child: Child, message: str) -> None:
        super().__init__(message)
        self.child = child


async def spawn(child: Child, log_dir: Path, preloader: Preloader | None = None) -> None:
    """Start `child`, its stdout and stderr appended to `<log_dir>/<name>.log`; a service
    forked from `preloader` when there is one (`preload.py`), else executed."""
    child.log_path = log_dir / f"{child.name}.log"
    # The child inherits the log file; the launcher's own handle closes right after the fork.
    with open(child.log_path, "ab") as log:  # noqa: ASYNC230 - once per child
        child.log_offset = log.tell()
        if preloader is not None and child.service:
            try:
                child.process = await preloader.fork(child.argv, child.env, child.log_path)
                return
            except RuntimeError as exc:  # its log says why; the service starts as a program
                print(f"{child.name}: {exc}; started without it", file=sys.stderr, flush=True)
        child.process = await asyncio.create_subprocess_exec(
            *child.argv,
            env=child.env,
            stdout=log,
            stderr=log,
            stdin=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )  # Ctrl-C reaches the launcher only; it stops children


async def wait_healthy(child: Child, deadline: float) -> None:
    """HTTP health 200 and, for Strata services, gRPC health SERVING."""
    assert child.process is not None
    async with Http(timeout=2) as http:
        while True:
            if child.process.returncode is not None:
                raise StartFailed(child, f"{child.name} exited with {child.process.returncode}")
            if time.monotonic() > deadline:
                raise StartFailed(child, f"{child.name} not healthy in time")
            if await http_ok(http, child.health_url, child.argv) and await grpc_serving(
                child.grpc_target
            ):
                return
            await asyncio.sleep(HEALTH_POLL_SECS)


async def http_ok(http: Http, health_url: str | None, argv: list[str]) -> bool:
    if health_url is None:
        return await port_open(int(argv[argv.index("--port") + 1]))
    try:
        status, _ = await http.request("GET", health_url)
    except HttpError:
        return False
    return status == 200


async def port_open(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    return True


async def grpc_serving(target: str | None) -> bool:
    if target is None:
        return True
    return await grpc_health.serving(target)


class Restarts:
    """When a child that exited may start again: at most RESTARTS_PER_MINUTE times in any
    60 seconds, each after a delay doubling from FIRST_DELAY_SECS (back to it once a minute
    has passed without a restart)."""

    def __init__(self, per_minute: int = RESTARTS_PER_MINUTE) -> None:
        self.per_minute = per_minute
        self.times: deque[float] = deque()

    def delay(self, now: float) -> float | None:
        """Seconds to wait before the next start, or None: too many in the last minute."""
        while self.times and now - self.times[0] >= 60:
            self.times.popleft()
        if len(self.times) >= self.per_minute:
            return None
        return FIRST_DELAY_SECS * (1 << len(self.times))

    def started(self, now: float) -> int:
        """Record a restart; how many there were in the last minute."""
        self.times.append(now)
        return len(self.times)


def kill_group(child: Child) -> None:
    """SIGKILL to a child's process group (it was started in a session of its own)."""
    if child.process is not None and child.process.returncode is None:
        os.killpg(child.process.pid, signal.SIGKILL)


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its descendants (Milvus Lite runs as a child)."""
    total = 0
    for p in [pid, *descendants(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def descendants(pid: int) -> list[int]:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    found = [int(c) for c in children]
    for c in list(found):
        found.extend(descendants(c))
    return found


# How long a child may take from SIGTERM to exit before it is killed. A service drains first
# (`runtime.serve.Running.stop`): its in-flight HTTP requests for up to 60 s (aiohttp's shutdown
# timeout at the front doors, DRAIN_SECS at the edge's data plane), then its in-flight RPCs for
# 5 s, its last analytics flush for 5 s and the tasks left running for 5 s; the edge's primary
# waits for its workers' drain (WORKER_STOP_SECS) too, then 1 s more. One second on top for
# the exit itself. Sidecars and the store exit at once. (tests/unit/test_launcher.py holds
# these to the services' own bounds.)
STOP_GRACE_SECS = 76.0
EDGE_STOP_GRACE_SECS = 77.0


def stop_grace_secs(child: Child) -> float:
    return EDGE_STOP_GRACE_SECS if child.service == "edge-proxy" else STOP_GRACE_SECS


async def stop_all(children: list[Child], hurry: asyncio.Event | None = None) -> None:
    """SIGTERM to each child's process group, the last started first (each is stopped while
    what it calls still runs), and SIGKILL to a child that outlasts its drain
    (`stop_grace_secs`), or at once to every child left once `hurry` is set (a second
    Ctrl-C)."""
    for child in reversed(children):
        proc = child.process
        if proc is None or proc.returncode is not None:
            continue
        if hurry is None or not hurry.is_set():
            with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
                os.killpg(proc.pid, signal.SIGTERM)
            if await _exited(proc, stop_grace_secs(child), hurry):
                continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


async def _exited(
    proc: asyncio.subprocess.Process | Forked, secs: float, hurry: asyncio.Event | None
) -> bool:
    """Whether `proc` exits within `secs`; False as soon as `hurry` is set."""
    exited = asyncio.ensure_future(proc.wait())
    waits = {exited}
    if hurry is not None:
        waits.add(asyncio.ensure_future(hurry.wait()))
    done, pending = await asyncio.wait(waits, timeout=secs, return_when=asyncio.FIRST_COMPLETED)
    for waiting in pending:
        waiting.cancel()
    return exited in done


def this_run(child: Child) -> list[str]:
    """The lines `child` wrote since it was started (its log file is appended across runs)."""
    if child.log_path is None:
        return []
    try:
        with open(child.log_path, "rb") as log:
            log.seek(child.log_offset)
            return log.read().decode(errors="replace").splitlines()
    except OSError:
        return []


def tail(child: Child, lines: int = TAIL_LINES) -> list[str]:
    return this_run(child)[-lines:]


async def models_loading(child: Child) -> dict[str, str]:
    """The features of `child` whose model is not loaded yet, with their state (`loading`,
    `failed`): what its `/health` reports under `features` (the AI gateway's)."""
    if child.health_url is None:
        return {}
    try:
        async with Http(timeout=2) as http:
            _, body = await http.request("GET", child.health_url)
        features = json.loads(body).get("features") or {}
    except (*HttpError, ValueError, AttributeError):
        return {"health": "no answer"}
    return {name: state for name, state in features.items() if state != "ready"}


class ModelLines:
    """The "model loaded" lines services log while starting, each reported once."""

    def __init__(self) -> None:
        self.seen: set[tuple[str, int]] = set()

    def new(self, children: list[Child]) -> list[str]:
        found = []
        for child in children:
            for number, line in enumerate(this_run(child)):
                if '"model loaded"' not in line or (child.name, number) in self.seen:
                    continue
                self.seen.add((child.name, number))
                found.append(describe_model(child.name, line))
        return found


def describe_model(service: str, line: str) -> str:
    """ "ai-gateway   model en_core_web_sm (PII names, 15.4 MB) loaded in 1.9s"."""
    try:
        entry = json.loads(line)
    except ValueError:
        return f"{service:<14} {line}"
    size = entry.get("size_mb")
    details = ", ".join(
        part for part in (entry.get("purpose"), f"{size} MB" if size is not None else "") if part
    )
    took = entry.get("load_secs")
    return (
        f"{service:<14} model {entry.get('model', '?')}"
        + (f" ({details})" if details else "")
        + (f" loaded in {took:.1f}s" if isinstance(took, int | float) else " loaded")
    )
