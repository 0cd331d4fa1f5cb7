"""The demo agent's ASGI app: the official `mcp` SDK's MCPServer over streamable HTTP at
`/mcp` (tools `echo`, `add`, `word_count`), an A2A agent built with the official `a2a-sdk` at
`/a2a` (JSON-RPC, answering `echo: <text>`, its card at `/.well-known/agent-card.json`), and
`GET /health` for readiness checks."""

from __future__ import annotations

from typing import Any

from a2a.helpers.proto_helpers import new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def mcp_server() -> MCPServer:
    server = MCPServer("strata-demo", instructions="Demo tools for trying Strata.")

    @server.tool(description="Echo the text back")
    def echo(text: str) -> str:
        return text

    @server.tool(description="Add two integers")
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(description="Count the words of a text")
    def word_count(text: str) -> int:
        return len(text.split())

    return server


class EchoAgent(AgentExecutor):
    """Answers every message with `echo: <its text>`."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        await event_queue.enqueue_event(new_text_message(f"echo: {context.get_user_input()}"))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError("the echo agent answers at once; nothing to cancel")


def agent_card(url: str) -> AgentCard:
    return AgentCard(
        name="echo",
        description="Echoes the text it receives (a Strata demo agent)",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=False),
        skills=[AgentSkill(id="echo", name="echo", description="echoes text", tags=["demo"])],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )


async def health(_: Request) -> JSONResponse:
    return JSONResponse({"status": "ok", "service": "demo"})


def build_app(host: str, port: int) -> Any:
    """MCP's Starlette app (its DNS-rebinding protection allows the host it binds), with the
    A2A agent's routes and `/health` added beside `/mcp`."""
    app = mcp_server().streamable_http_app(host=host)
    card = agent_card(f"http://{host}:{port}/a2a")
    handler = DefaultRequestHandler(
        agent_executor=EchoAgent(), task_store=InMemoryTaskStore(), agent_card=card
    )
    app.router.routes.extend(
        [
            *create_jsonrpc_routes(handler, "/a2a", enable_v0_3_compat=True),
            *create_agent_card_routes(card),
            Route("/health", health, methods=["GET"]),
        ]
    )
    return app
