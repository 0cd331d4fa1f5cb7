"""ext-plugin-post-resp through a real edge, a real upstream and a real Envoy ext_proc processor
(grpc.aio): the edge calls the upstream itself and the processor rewrites the response."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from edge_kit import route, serve_edge, upstream
from ext_proc_server import answer, edge_env, headers_of, immediate, option, processor
from google.protobuf.json_format import MessageToDict
from shared_kit import free_port

from gateways.edge.plugins import REGISTRY, _ext_proc

CONF = [{"name": "ext-plugin-A", "value": '{"enable":"feature"}'}]


@pytest.fixture(autouse=True)
async def close_clients() -> AsyncIterator[None]:
    """The worker's gRPC channels and HTTP session, closed as at shutdown."""
    yield
    await _ext_proc.close()


def plugins(**conf: Any) -> dict[str, Any]:
    return {"ext-plugin-post-resp": {"conf": CONF, **conf}, "request-id": {}}


async def tagged(request: web.Request) -> web.Response:
    """The echo upstream, with headers of its own."""
    body = await request.read()
    seen = {
        "path": request.path_qs,
        "method": request.method,
        "headers": {k.lower(): v for k, v in request.headers.items()},
        "body": body.decode(),
    }
    return web.json_response(seen, headers={"X-Upstream": "1", "X-Kept": "k"})


async def test_response_rewritten_by_the_processor() -> None:
    async with processor() as (proc, address), upstream(tagged) as port:

        def rewrite(message: Any) -> Any:
            if message.HasField("response_headers"):
                return answer(
                    "response_headers",
                    set_headers=[option(":status", "201"), option("x-added", "yes")],
                    remove=["x-upstream"],
                )
            return answer("response_body", body=b"rewritten")

        proc.answer = rewrite
        async with serve_edge(edge_env(address)) as edge:
            edge.apply(routes=[route("r1", "/api/*", port, plugins=plugins())])
            status, body, headers = await edge.call(
                "/api/x?a=1", method="POST", data=b"payload", headers={"X-Client": "c"}
            )
    assert (status, body) == (201, b"rewritten")
    assert headers["X-Added"] == "yes" and headers["X-Kept"] == "k" and "X-Upstream" not in headers
    assert headers["X-Request-Id"]  # the other plugins' header_filter still runs

    first, second = proc.seen
    assert first.WhichOneof("request") == "response_headers"
    sent = headers_of(first.response_headers)
    assert sent[":status"] == "200" and sent["x-upstream"] == "1"
    assert not first.response_headers.end_of_stream
    assert MessageToDict(first.metadata_context.filter_metadata["ext-plugin-post-resp"]) == {
        "conf": CONF
    }
    attributes = MessageToDict(first.attributes["envoy.filters.http.ext_proc"])
    assert attributes["response.code"] == 200 and attributes["request.method"] == "POST"
    # what the upstream received, as the edge sent it
    seen_upstream = json.loads(second.response_body.body)
    assert second.response_body.end_of_stream
    assert (seen_upstream["path"], seen_upstream["method"]) == ("/api/x?a=1", "POST")
    assert seen_upstream["body"] == "payload"
    assert seen_upstream["headers"]["x-client"] == "c"
    assert seen_upstream["headers"]["x-request-id"] == headers["X-Request-Id"]
    assert seen_upstream["headers"]["x-forwarded-for"] == "127.0.0.1"
    assert seen_upstream["headers"]["host"] == f"127.0.0.1:{edge.port}"


async def test_immediate_response_replaces_the_answer() -> None:
    async with processor() as (proc, address), upstream(tagged) as port:
        proc.answer = lambda message: immediate(
            418, b"teapot", [option("x-why", "processor"), option(":status", "200")]
        )
        async with serve_edge(edge_env(address)) as edge:
            edge.apply(routes=[route("r1", "/api/*", port, plugins=plugins())])
            status, body, headers = await edge.call("/api/x")
    assert (status, body, headers["X-Why"]) == (418, b"teapot", "processor")
    assert "X-Upstream" not in headers


async def test_processor_failure_is_503_unless_degradation() -> None:
    dead = f"127.0.0.1:{free_port()}"
    async with upstream(tagged) as port:
        for address in (dead, None):
            async with serve_edge(edge_env(address)) as edge:
                edge.apply(
                    routes=[
                        route("strict", "/strict", port, plugins=plugins()),
                        route("lenient", "/lenient", port, plugins=plugins(allow_degradation=True)),
                    ]
                )
                status, body, _ = await edge.call("/strict")
                assert (status, body) == (503, {"error_msg": "503 Service Temporarily Unavailable"})
                # the upstream's answer goes out unchanged
                status, body, headers = await edge.call("/lenient?q=1")
                assert (status, body["path"], headers["X-Upstream"]) == (200, "/lenient?q=1", "1")


async def test_upstream_down_is_502() -> None:
    async with processor() as (proc, address), serve_edge(edge_env(address)) as edge:
        edge.apply(routes=[route("r1", "/api/*", free_port(), plugins=plugins())])
        status, body, _ = await edge.call("/api/x")
    assert (status, body) == (502, {"error_msg": "502 Bad Gateway"})
    assert proc.seen == []


def test_schema_is_pre_req_s() -> None:
    assert REGISTRY["ext-plugin-post-resp"].schema is REGISTRY["ext-plugin-pre-req"].schema
    assert REGISTRY["ext-plugin-post-resp"].priority == -4000
    assert REGISTRY["ext-plugin-post-resp"].phases() == frozenset({"before_proxy"})
