"""Real A2A agents for the A2A tests, built with the official `a2a-sdk` and served by uvicorn
on loopback: an echo agent answering A2A 1.0 JSON-RPC (`SendMessage`), and the same agent
behind the SDK's A2A 0.3 adapter only (`message/send`), so both protocol eras are exercised.
The agent answers `echo: <text>`; the text `fail` makes it raise (the SDK fails the task)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import a2a.server.routes as a2a_routes  # (imported before the compat module: import cycle)
import uvicorn
from a2a.compat.v0_3.jsonrpc_adapter import JSONRPC03Adapter
from a2a.helpers.proto_helpers import new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue_v2 import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from shared_kit import free_port
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


class EchoExecutor(AgentExecutor):
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []  # (text, metadata) of every message received

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        self.seen.append({"text": text, "metadata": dict(context.metadata)})
        if text == "fail":
            raise RuntimeError("the agent failed on purpose")
        await event_queue.enqueue_event(new_text_message(f"echo: {text}"))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


class Agent:
    """A running agent: its JSON-RPC `url`, what it received (`executor.seen`, `headers`)."""

    def __init__(self, url: str, executor: EchoExecutor, headers: list[dict[str, str]]) -> None:
        self.url = url
        self.executor = executor
        self.headers = headers


def _card(url: str) -> AgentCard:
    return AgentCard(
        name="echo",
        description="echoes the text it receives",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=False),
        skills=[AgentSkill(id="echo", name="echo", description="echoes text", tags=["test"])],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )


@contextlib.asynccontextmanager
async def a2a_agent(era: str = "1.0") -> AsyncIterator[Agent]:
    """Serve an echo agent; `era` "1.0" (SendMessage) or "0.3" (message/send only)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    executor = EchoExecutor()
    card = _card(url)
    handler = DefaultRequestHandler(
        agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card
    )
    if era == "1.0":
        routes = a2a_routes.create_jsonrpc_routes(handler, "/")
    else:
        adapter = JSONRPC03Adapter(http_handler=handler)

        async def legacy(request: Request) -> Response:
            body = await request.json()
            method = body.get("method", "")
            if not adapter.supports_method(method):
                error = {"code": -32601, "message": f"method not found: {method}"}
                reply = {"jsonrpc": "2.0", "id": body.get("id"), "error": error}
                return JSONResponse(reply)
            response: Response = await adapter.handle_request(
                request_id=body.get("id"), method=method, body=body, request=request
            )
            return response

        routes = [Route("/", legacy, methods=["POST"])]
    headers: list[dict[str, str]] = []
    inner = Starlette(routes=[*routes, *a2a_routes.create_agent_card_routes(card)])

    async def app(scope: Any, receive: Any, send: Any) -> None:  # records request headers
        if scope["type"] == "http":
            headers.append({k.decode().lower(): v.decode() for k, v in scope["headers"]})
        await inner(scope, receive, send)

    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 (uvicorn offers no started event)
        await asyncio.sleep(0.02)
    try:
        yield Agent(url, executor, headers)
    finally:
        server.should_exit = True
        await task
