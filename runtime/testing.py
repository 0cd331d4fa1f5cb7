"""Run a service inside a test exactly as `__main__` builds it, on free ports.

async with serving(definition) as svc:
    stub = HealthStub(svc.channel)
    async with aiohttp.ClientSession(svc.http_url) as http: ...
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import grpc

from runtime.serve import Running, start
from runtime.service import ServiceDefinition


@dataclass
class Serving:
    running: Running
    channel: grpc.aio.Channel

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.running.http_port}"

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.running.grpc_port}"

    def extra_url(self, index: int) -> str:
        return f"http://127.0.0.1:{self.running.extra_ports[index]}"


@asynccontextmanager
async def serving(definition: ServiceDefinition) -> AsyncIterator[Serving]:
    """Start on 127.0.0.1 with the ports the definition was built with (0 = any free port)."""
    running = await start(definition, "127.0.0.1", 0, 0)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.grpc_port}")
    try:
        yield Serving(running, channel)
    finally:
        await channel.close()
        await running.stop(grace=0.5)
