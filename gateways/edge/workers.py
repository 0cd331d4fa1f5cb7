"""Edge data-plane workers: more processes serving the data-plane port beside the primary.

SO_REUSEPORT (the data plane binds with it when there are several) lets the kernel spread
connections across them. The kernel would let any other process of the same user join too, so
the primary first checks that nobody else holds the port, before its workers start; every
other port of the edge is bound by the primary alone, unshared. A worker is a smaller edge:
the same config and the same serve loop (`runtime.main`), built by `build_worker` into an
apps-only definition: the data plane, no gRPC, no admin API. A worker that ends while its
primary serves (killed, crashed) is replaced by the primary.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from gateways.edge.config import EdgeConfig
from gateways.edge.dataplane.process import data_plane
from gateways.edge.metrics import worker_exited
from runtime.auth import authenticator_for
from runtime.config import VERSION
from runtime.http1.server import DRAIN_SECS
from runtime.ports import check_free
from runtime.service import ServiceDefinition
from runtime.stores import Stores
from runtime.telemetry import Metrics

SERVICE = "edge-proxy"
RESPAWN_FIRST_SECS = 0.1  # a worker that ended is replaced this soon, doubling while it
RESPAWN_MAX_SECS = 5.0  # ends again within a second of its start
# A worker's whole stop from its SIGTERM (it drains with its primary, from the start): its
# in-flight requests (DRAIN_SECS) and its cleanup (10 s); then SIGKILL. The pod's grace
# counts it.
WORKER_STOP_SECS = DRAIN_SECS + 10.0
Build = Callable[[EdgeConfig, Stores], ServiceDefinition]
log = logging.getLogger(__name__)


def build_worker(config: EdgeConfig, stores: Stores) -> ServiceDefinition:
    """One data-plane worker. Its stores are the ones the data plane's plugins will use (rate
    limits in the key-value store, request logs to analytics)."""

    async def health() -> dict[str, Any]:
        return {"status": "healthy", "service": SERVICE, "version": VERSION}

    plane = data_plane(config, stores)

    return ServiceDefinition(
        name=SERVICE,
        bindings=[],
        http_rules=[],
        info={"service": SERVICE, "version": VERSION},
        health=health,
        authenticator=authenticator_for(config),  # the data plane's jwt-auth will verify with it
        metrics=Metrics(SERVICE),
        listeners=plane.listeners,
        on_startup=plane.on_startup,
        on_cleanup=[stores.close, *plane.on_cleanup],  # run in reverse: the stores last
        on_reload=plane.on_reload,
        apps_only=True,
    )


def with_workers(build: Build) -> Build:
    """The primary's `build`, plus `config.workers - 1` worker processes: started with it,
    given the primary's own configuration, and stopped after it (SIGTERM: each drains)."""

    def build_primary(config: EdgeConfig, stores: Stores) -> ServiceDefinition:
        metrics_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
        definition = build(config, stores)
        workers: list[asyncio.subprocess.Process] = []
        keepers: list[asyncio.Task[None]] = []
        stopping = asyncio.Event()
        stop_began: list[float] = []  # when the workers were first told to stop (loop time)

        async def spawn() -> asyncio.subprocess.Process:
            env = {**os.environ, **config.environ(), "EDGE_PRIMARY_PID": str(os.getpid())}
            return await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gateways.edge", "--worker", env=env
            )

        async def keep(slot: int) -> None:
            """A worker that ends while the primary serves (killed, crashed) is replaced, as
            nginx's master replaces its workers; one that ends again within a second waits
            longer before its next start (up to RESPAWN_MAX_SECS: no crash loop)."""
            delay = RESPAWN_FIRST_SECS
            while True:
                worker = workers[slot]
                started = asyncio.get_running_loop().time()
                code = await worker.wait()
                if stopping.is_set():
                    return
                if metrics_dir:  # its live gauges stop counting in the shared view
                    worker_exited(metrics_dir, worker.pid)
                quick = asyncio.get_running_loop().time() - started < 1.0
                delay = min(delay * 2, RESPAWN_MAX_SECS) if quick else RESPAWN_FIRST_SECS
                log.warning(
                    "edge worker %d exited (code %s): starting another in %.1f s",
                    worker.pid, code, delay,
                )  # fmt: skip
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), delay)
                if stopping.is_set():
                    return
                workers[slot] = await spawn()
                if stopping.is_set():  # the stop began while it started: it drains too
                    workers[slot].terminate()

        async def start() -> None:
            for slot in range(config.workers - 1):
                workers.append(await spawn())
                keepers.append(asyncio.create_task(keep(slot), name=f"edge-worker-{slot}"))

        def told_to_stop() -> None:
            stopping.set()
            if not stop_began:
                stop_began.append(asyncio.get_running_loop().time())

        async def stop() -> None:
            told_to_stop()
            for worker in workers:
                with contextlib.suppress(ProcessLookupError):
                    worker.terminate()
            for worker in workers:
                await ended(worker)
            await asyncio.gather(*keepers, return_exceptions=True)
            for worker in workers:  # one started while the stop began (`keep` ended it)
                await ended(worker)

        async def ended(worker: asyncio.subprocess.Process) -> None:
            """`worker` drained (SIGKILL WORKER_STOP_SECS after the stop began) and reaped."""
            left = stop_began[0] + WORKER_STOP_SECS - asyncio.get_running_loop().time()
            try:
                await asyncio.wait_for(worker.wait(), max(left, 1.0))
            except TimeoutError:
                worker.kill()
                await worker.wait()
            if metrics_dir:  # its live gauges stop counting in the shared view (idempotent)
                worker_exited(metrics_dir, worker.pid)

        def relay() -> None:  # SIGHUP: every worker rereads the standalone file too
            for worker in workers:
                with contextlib.suppress(ProcessLookupError):
                    worker.send_signal(signal.SIGHUP)

        def drain_together() -> None:
            # SIGTERM to the primary alone (a pod's PID 1, `strata stop`): the workers begin
            # their drain with it rather than after it, so all of it fits the grace period.
            told_to_stop()  # and none is replaced
            for worker in workers:
                with contextlib.suppress(ProcessLookupError):
                    worker.terminate()

        async def data_plane_port_free() -> None:
            check_free(config.host, config.http_port, "edge-proxy's data-plane port (HTTP_PORT)")

        definition.on_startup.insert(0, data_plane_port_free)
        definition.on_startup.append(start)
        definition.on_reload.append(relay)
        definition.on_drain.append(drain_together)
        definition.on_cleanup.insert(0, stop)  # cleanups run in reverse: the workers last
        return definition

    return build_primary


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_primary(primary_pid: int) -> None:
    """A worker must not outlive its primary: it would go on serving the shared port with a
    configuration nobody updates. The kernel sends it SIGTERM (a graceful drain) when the
    primary exits, however it exits; a primary already gone before this call means exit now."""
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != primary_pid:
        sys.exit("the edge primary is gone")
