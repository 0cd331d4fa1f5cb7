"""Real MCP servers for the agent gateway's tests: the `mcp` SDK's MCPServer (FastMCP) over
streamable HTTP, served by uvicorn on a loopback port in a thread of its own.

`UpstreamMcp` records what reached it (HTTP method, JSON-RPC method, the headers the gateway
sent) so tests can count handshakes and check the protocol era; `restart()` starts a fresh
server on the same port (every session forgotten); `set_tools` changes the tool set the next
`tools/list` shows (a rug pull). Optional tools: `huge` (a result of any size) and `hold`
(answers once `gate` is set).

`FaultyPath` stands between the gateway and a real MCP server on the network path: it passes
every request through, except that it answers `tools/call` as `fault` says (garbage, a JSON
body that is no JSON-RPC answer, silence, an event stream cut mid-event) — the upstream
failures a gateway must survive, with a real server doing the handshake.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import uvicorn
from aiohttp import web
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel
from shared_kit import free_port


class Confirmation(BaseModel):
    ok: bool


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
    huge_tool: bool = False
    asking_tool: bool = False  # an `ask` tool that sends the client an elicitation request
    gate: threading.Event | None = None  # given: a `hold` tool that answers once it is set
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

        if self.huge_tool:

            @server.tool(description="Answer `size` characters")
            def huge(size: int) -> str:
                return "x" * size

        if self.asking_tool:

            @server.tool(description="Ask the client before answering")
            async def ask(text: str, ctx: Context) -> str:
                try:
                    answer = await ctx.elicit(f"May I echo {text!r}?", Confirmation)
                except Exception as exc:  # the client refused to be asked
                    return f"not asked: {exc}"
                return f"asked: {answer.action}"

        gate = self.gate
        if gate is not None:

            @server.tool(description="Echo the text back once the gate opens")
            async def hold(text: str) -> str:
                await asyncio.to_thread(gate.wait, 30)  # the gate is set from the test's thread
                return text

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


class FaultyPath:
    """An HTTP hop in front of `target` (an MCP endpoint URL) that breaks `tools/call` answers
    while `fault` is set: `garbage` (an HTML page), `not_jsonrpc` (JSON, but no JSON-RPC
    answer), `hang` (no answer at all), `cut` (an event stream that stops mid-event and drops
    the connection). With `fault` None every request passes through untouched."""

    def __init__(self, target: str, fault: str | None = None) -> None:
        self.target = target
        self.fault = fault
        self.calls = 0  # tools/call requests that reached this hop

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/mcp", self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "GET":  # no standalone stream through this hop (the spec's 405)
            return web.Response(status=405)
        body = await request.read()
        method = None
        with contextlib.suppress(ValueError, AttributeError):
            method = json.loads(body).get("method")
        if method == "tools/call":
            self.calls += 1
            if self.fault is not None:
                return await self._broken(request)
        skip = {"host", "content-length", "transfer-encoding", "connection"}
        headers = {k: v for k, v in request.headers.items() if k.lower() not in skip}
        async with (
            aiohttp.ClientSession(auto_decompress=False) as http,
            http.request(request.method, self.target, data=body, headers=headers) as answer,
        ):
            payload = await answer.read()
            relayed = {k: v for k, v in answer.headers.items() if k.lower() not in skip}
            return web.Response(status=answer.status, body=payload, headers=relayed)

    async def _broken(self, request: web.Request) -> web.StreamResponse:
        if self.fault == "garbage":
            return web.Response(text="<html>surprise</html>", content_type="text/html")
        if self.fault == "not_jsonrpc":
            return web.json_response({"hello": "world"})
        if self.fault == "hang":
            await asyncio.sleep(5)  # longer than the tests' gateway timeout
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        await stream.write(b'event: message\ndata: {"jsonrpc": "2.0", "id": ')
        assert request.transport is not None
        request.transport.close()
        return stream
