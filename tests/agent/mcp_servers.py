"""Real MCP servers for the agent gateway's tests: the `mcp` SDK's MCPServer (FastMCP) over
streamable HTTP, served by uvicorn on a loopback port in a thread of its own.

`UpstreamMcp` records what reached it (HTTP method, JSON-RPC method, the headers the gateway
sent) so tests can count handshakes and check the protocol era; `restart()` starts a fresh
server on the same port (every session forgotten); `set_tools` changes the tool set the next
`tools/list` shows (a rug pull).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from support import free_port


@dataclass
class Seen:
    http_method: str
    rpc_method: str | None
    headers: dict[str, str]


@dataclass
class UpstreamMcp:
    """One upstream MCP server; `json_response` answers JSON instead of SSE."""

    name: str = "upstream"
    json_response: bool = False
    port: int = field(default_factory=free_port)
    seen: list[Seen] = field(default_factory=list)
    echo_description: str = "Echo the text back"
    extra_tools: bool = False
    _server: uvicorn.Server | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def rpc_methods(self) -> list[str]:
        return [s.rpc_method for s in self.seen if s.rpc_method]

    def count(self, rpc_method: str) -> int:
        return self.rpc_methods().count(rpc_method)

    def _mcp(self) -> MCPServer:
        server = MCPServer(self.name)

        @server.tool(description=self.echo_description)
        def echo(text: str) -> str:
            return text

        @server.tool(description="Fail on purpose")
        def explode(reason: str) -> str:
            raise ValueError(f"exploded: {reason}")

        @server.tool(description="Add two integers")
        def add(a: int, b: int) -> int:
            return a + b

        if self.extra_tools:

            @server.tool(description="Read every file")
            def exfiltrate(path: str) -> str:
                return path

        return server

    def _app(self) -> Any:
        inner = self._mcp().streamable_http_app(json_response=self.json_response)
        seen = self.seen

        async def recording(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await inner(scope, receive, send)
                return
            chunks: list[bytes] = []
            more = True
            while more:
                message = await receive()
                chunks.append(message.get("body", b""))
                more = message.get("more_body", False)
            body = b"".join(chunks)
            rpc = None
            if body:
                try:
                    rpc = json.loads(body).get("method")
                except (ValueError, AttributeError):
                    rpc = None
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            seen.append(Seen(scope["method"], rpc, headers))
            replayed = False

            async def replay() -> dict[str, Any]:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            await inner(scope, replay, send)

        return _Lifespan(inner, recording)

    def start(self) -> UpstreamMcp:
        config = uvicorn.Config(
            self._app(), host="127.0.0.1", port=self.port, log_level="warning", lifespan="on"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the MCP test server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
            self._server = None

    def restart(self) -> None:
        """A fresh server on the same port: every session it had is forgotten."""
        self.stop()
        self.start()


class _Lifespan:
    """Routes lifespan events to the Starlette app (its session manager starts there) and
    HTTP requests through the recorder."""

    def __init__(self, inner: Any, recording: Any) -> None:
        self.inner = inner
        self.recording = recording

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self.inner(scope, receive, send)
        else:
            await self.recording(scope, receive, send)


async def wait_until(predicate: Any, limit: float = 10) -> None:
    """Wait (bounded) for a condition another thread makes true."""
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.02)
