"""Run a service: a grpc.aio server (health checking and reflection on, so grpcurl can list and
call everything) and its aiohttp front door, in one asyncio event loop. An apps-only service
(an edge data-plane worker) runs through the same loop with its aiohttp apps alone.

`start()` brings both up and returns a `Running` handle (tests use it on port 0);
`run()` is what each `__main__` calls: start, serve until SIGTERM/SIGINT, stop gracefully.

No port is shared: gRPC and aiohttp bind without SO_REUSEPORT, and every fixed port is checked
before the service opens its stores or loads anything, so a busy port stops the start at once
with a message naming the port and its holder (`runtime/ports.py`). Only the edge's data plane
shares its port, among its own workers (gateways/edge/workers.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from runtime import collector
from runtime.cancelling import cancel_and_wait
from runtime.guard import Guard, GuardInterceptor
from runtime.logs import flush_periodically
from runtime.ports import PortInUse, check_free
from runtime.service import ServiceDefinition

# aiohttp, the front door and the gRPC server's interceptors are imported by `start` when the
# service has them, not here: an edge data-plane worker (apps-only, its own httptools server)
# has none, and idles 10 MB smaller without them.
if TYPE_CHECKING:
    from aiohttp import web

    from runtime.http1.server import Listening

log = logging.getLogger(__name__)

LEFTOVER_SECS = 5.0  # for the tasks a stop left running (a last flush, a follower) to end


@dataclass
class Running:
    """A started service: where it listens, and how to stop it. An apps-only service has no
    gRPC server and no front door (their fields are None)."""

    definition: ServiceDefinition
    server: grpc.aio.Server | None
    health: health.aio.HealthServicer | None
    runners: list[web.AppRunner]
    servers: list[Listening]
    http_port: int | None
    grpc_port: int | None
    extra_ports: list[int]

    async def stop(self, grace: float = 5.0) -> None:
        """Drain: health NOT_SERVING first so load balancers stop sending, then every HTTP
        server stops accepting and finishes its in-flight requests (together: the longest
        bounds the wait), then in-flight RPCs get `grace` seconds. `on_drain` hooks run first
        (the edge's workers start their own drain at once)."""
        started = time.monotonic()

        def done(stage: str) -> None:  # a stop that hangs says after which stage
            log.info(stage, extra={"secs": round(time.monotonic() - started, 3)})

        for drain in self.definition.on_drain:
            drain()
        if self.health is not None:
            await self.health.enter_graceful_shutdown()
        await asyncio.gather(
            *(listener.drain() for listener in self.servers),  # the edge's data plane
            *(runner.cleanup() for runner in self.runners),  # aiohttp's shutdown timeout
        )
        done("HTTP drained")
        if self.server is not None:
            await self.server.stop(grace)
            done("RPCs ended")
        for cleanup in reversed(self.definition.on_cleanup):
            await cleanup()
        done("stopped")


async def start(defn: ServiceDefinition, host: str, http_port: int, grpc_port: int) -> Running:
    """Open stores, then serve gRPC on `grpc_port`, the front door on `http_port` and any extra
    apps on their own ports (0 picks a free port; chosen ports are on the returned handle).
    An apps-only definition serves its extra apps alone; the two ports are not used.
    A busy port raises PortInUse before anything else happens."""
    fixed = [(port, "port") for port, _ in defn.extra_apps]
    if not defn.apps_only:
        fixed[:0] = [(http_port, "HTTP port"), (grpc_port, "gRPC port")]
    for port, what in fixed:
        check_free(host, port, f"{defn.name}'s {what}")
    for startup in defn.on_startup:
        await startup()
    server, health_servicer, bound_grpc = None, None, None
    apps = list(defn.extra_apps)
    if not defn.apps_only:
        from runtime.frontdoor import build_app

        guard = defn.guard()  # every RPC's declared access rule, or no start at all
        server, health_servicer, bound_grpc = await _start_grpc(defn, guard, host, grpc_port)
        apps.insert(0, (http_port, build_app(defn, guard)))
    servers = [await listen(host) for listen in defn.listeners]
    listener_ports = [s.sockets[0].getsockname()[1] for s in servers]
    runners: list[web.AppRunner] = []
    ports: list[int] = []
    if apps:
        from aiohttp import web

        from runtime.http_parse_errors import FrontDoorRunner
    for port, application in apps:
        # a request aiohttp cannot parse is answered in the service's envelope, never echoed
        runner = FrontDoorRunner(application, defn.envelope, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port).start()  # no SO_REUSEPORT: never shared
        except OSError as exc:  # taken between the check and now
            if exc.errno != errno.EADDRINUSE:
                raise
            raise PortInUse(f"{defn.name}'s port {port} on {host} is in use") from None
        runners.append(runner)
        ports.append(runner.addresses[0][1])
    if health_servicer is not None:
        # SERVING only now that every port listens: the launcher and Kubernetes' gRPC
        # readiness probe take it to mean the whole service answers.
        for name in ["", *(b.name for b in defn.bindings)]:
            await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    log.info("serving", extra={"grpc_port": bound_grpc, "http_ports": listener_ports + ports})
    if defn.apps_only:
        return Running(defn, None, None, runners, servers, None, None, listener_ports + ports)
    return Running(
        defn, server, health_servicer, runners, servers, ports[0], bound_grpc,
        listener_ports + ports[1:],
    )  # fmt: skip


async def _start_grpc(
    defn: ServiceDefinition, guard: Guard, host: str, port: int
) -> tuple[grpc.aio.Server, health.aio.HealthServicer, int]:
    """The gRPC server: the service's bindings, health checking and reflection."""
    from opentelemetry.instrumentation.grpc import aio_server_interceptor

    server = grpc.aio.server(
        interceptors=[aio_server_interceptor(), GuardInterceptor(guard)],
        options=[("grpc.so_reuseport", 0)],  # gRPC sets SO_REUSEPORT unless told not to
    )
    for binding in defn.bindings:
        binding.add_to_server(binding.servicer, server)
    health_servicer = health.aio.HealthServicer()
    # grpcio's servicer starts with "" SERVING: not before every port listens (`start`).
    await health_servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = [b.name for b in defn.bindings]
    reflection.enable_server_reflection(
        [*names, health.SERVICE_NAME, reflection.SERVICE_NAME], server
    )
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError:  # grpc says only "Failed to bind"
        raise PortInUse(f"{defn.name}'s gRPC port {port} on {host} is in use") from None
    await server.start()
    return server, health_servicer, bound


def _reload(definition: ServiceDefinition) -> None:
    for reload in definition.on_reload:
        try:
            reload()
        except Exception:
            log.exception("reload failed")


def run(
    build: Callable[[], ServiceDefinition],
    host: str,
    http_port: int,
    grpc_port: int,
    *,
    uvloop: bool = False,
) -> None:
    """Build the service inside the event loop (as tests do: clients and channels belong to
    the loop that creates them), serve until SIGTERM or SIGINT (SIGHUP runs `on_reload`),
    then drain (`Running.stop`). Every Strata process runs through here, edge data-plane
    workers included. `uvloop`: run on uvloop's event loop (the edge, where the loop's own
    cost is most of a request's)."""

    async def main() -> None:
        collector.tune()
        definition = build()
        # Lines written while starting (models loaded, ports bound) reach the log as they
        # happen: the launcher shows them as progress.
        flusher = asyncio.create_task(flush_periodically())
        running = await start(definition, host, http_port, grpc_port)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        if definition.on_reload:
            loop.add_signal_handler(signal.SIGHUP, _reload, definition)
        # After the handlers: a SIGTERM during the collection (~0.1 s) still drains.
        collector.freeze_startup_heap()
        await stop.wait()
        log.info("stopping")
        await running.stop()
        flusher.cancel()
        # What the stop left running ends here, cancelled until it does: asyncio.run cancels
        # once and then waits for ever, and one swallowed cancellation (cancelling.py) kept
        # a stopping process alive until it was killed.
        me = asyncio.current_task()
        left = await cancel_and_wait((t for t in asyncio.all_tasks() if t is not me), LEFTOVER_SECS)
        if left:
            log.error(
                "tasks still running after the stop",
                extra={"tasks": sorted(t.get_name() for t in left)},
            )

    if uvloop:
        import uvloop as uv

        asyncio.set_event_loop_policy(uv.EventLoopPolicy())
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(main())
    except PortInUse as exc:
        log.error("cannot start: %s", exc)
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.exit(f"cannot start: {exc}")
