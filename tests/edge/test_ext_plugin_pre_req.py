"""ext-plugin-pre-req through a real edge, a real upstream and a real Envoy ext_proc processor
(grpc.aio): header and path rewrites, body replacement, immediate answers, failures."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from edge_kit import route, serve_edge, upstream
from envoy.extensions.filters.http.ext_proc.v3 import processing_mode_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as ep
from ext_proc_server import Option, answer, edge_env, headers_of, immediate, option, processor
from google.protobuf.json_format import MessageToDict
from shared_kit import free_port

from gateways.edge.model.schema import check, with_defaults
from gateways.edge.plugins import REGISTRY, _ext_proc

CONF = [{"name": "ext-plugin-A", "value": '{"enable":"feature"}'}]  # APISIX's doc example
BUFFERED = processing_mode_pb2.ProcessingMode.BUFFERED


@pytest.fixture(autouse=True)
async def close_clients() -> AsyncIterator[None]:
    """The worker's gRPC channels and HTTP session, closed as at shutdown."""
    yield
    await _ext_proc.close()


def plugins(**conf: Any) -> dict[str, Any]:
    return {"ext-plugin-pre-req": {"conf": CONF, **conf}}


async def test_headers_and_path_rewritten_conf_sent_as_metadata() -> None:
    async with processor() as (proc, address), upstream() as port:
        proc.answer = lambda message: answer(
            "request_headers",
            set_headers=[
                option("x-added", "yes"),
                option(":path", "/rewritten?b=2"),
                option("x-app", "two", append=True),  # appended to the client's
                option("x-over", "new"),  # append unset: overwrite (Envoy's ext_proc default)
                option("x-keep", "new", action=Option.ADD_IF_ABSENT),
                option("x-absent", "no", action=Option.OVERWRITE_IF_EXISTS),
                option("host", "evil.example"),  # not settable
            ],
            remove=["x-secret", "host", ":method"],  # host and pseudo headers stay
        )
        async with serve_edge(edge_env(address)) as edge:
            edge.apply(routes=[route("r1", "/api/*", port, plugins=plugins())])
            status, body, _ = await edge.call(
                "/api/x?a=1",
                headers={"X-Secret": "s", "X-App": "one", "X-Over": "old", "X-Keep": "old"},
            )
    assert status == 200
    assert (body["path"], body["method"]) == ("/rewritten?b=2", "GET")
    seen_upstream = body["headers"]
    assert seen_upstream["x-added"] == "yes" and "x-secret" not in seen_upstream
    assert seen_upstream["x-app"] == "one, two" and seen_upstream["x-over"] == "new"
    assert seen_upstream["x-keep"] == "old" and "x-absent" not in seen_upstream
    assert seen_upstream["host"] == f"127.0.0.1:{edge.port}"

    (message,) = proc.seen  # no body: the headers message ends the stream
    assert message.WhichOneof("request") == "request_headers"
    assert message.request_headers.end_of_stream
    sent = headers_of(message.request_headers)
    assert sent[":method"] == "GET" and sent[":path"] == "/api/x?a=1"
    assert sent[":authority"] == f"127.0.0.1:{edge.port}" and sent[":scheme"] == "http"
    assert sent["x-secret"] == "s" and sent["x-app"] == "one"
    assert MessageToDict(message.metadata_context.filter_metadata["ext-plugin-pre-req"]) == {
        "conf": CONF
    }
    attributes = MessageToDict(message.attributes["envoy.filters.http.ext_proc"])
    assert attributes["request.method"] == "GET" and attributes["request.path"] == "/api/x?a=1"
    assert attributes["xds.route_name"] == "r1" and attributes["source.address"] == "127.0.0.1"
    assert message.protocol_config.request_body_mode == BUFFERED


async def test_body_sent_after_the_headers_and_replaced() -> None:
    async with processor() as (proc, address), upstream() as port:

        def replace_body(message: Any) -> Any:
            if message.HasField("request_headers"):
                return answer("request_headers", set_headers=[option("x-seen", "headers")])
            assert message.request_body.body == b"hello" and message.request_body.end_of_stream
            return answer("request_body", body=b"HELLO, WORLD", remove=["x-remove"])

        proc.answer = replace_body
        async with serve_edge(edge_env(address)) as edge:
            edge.apply(routes=[route("r1", "/api/*", port, plugins=plugins())])
            status, body, _ = await edge.call(
                "/api/x", method="POST", data=b"hello", headers={"X-Remove": "1"}
            )
    assert status == 200 and body["body"] == "HELLO, WORLD"
    assert body["headers"]["content-length"] == "12" and body["headers"]["x-seen"] == "headers"
    assert "x-remove" not in body["headers"]
    first, second = proc.seen
    assert not first.request_headers.end_of_stream
    assert headers_of(first.request_headers)["content-length"] == "5"
    assert second.WhichOneof("request") == "request_body"


async def test_continue_and_replace_or_mode_override_skip_the_body() -> None:
    async with (
        processor() as (proc, address),
        upstream() as port,
        serve_edge(edge_env(address)) as edge,
    ):
        edge.apply(routes=[route("r1", "/api/*", port, plugins=plugins())])
        proc.answer = lambda m: answer("request_headers", body=b"replaced", replace=True)
        status, body, _ = await edge.call("/api/x", method="PUT", data=b"original")
        assert (status, body["body"], len(proc.seen)) == (200, "replaced", 1)

        skip = ep.ProcessingResponse(
            request_headers=ep.HeadersResponse(),
            mode_override=processing_mode_pb2.ProcessingMode(
                request_body_mode=processing_mode_pb2.ProcessingMode.NONE
            ),
        )
        proc.answer = lambda m: skip
        status, body, _ = await edge.call("/api/x", method="PUT", data=b"original")
        assert (status, body["body"], len(proc.seen)) == (200, "original", 2)


async def test_immediate_response_answers_the_client() -> None:
    calls = []

    async def handler(request: web.Request) -> web.Response:
        calls.append(request.path)
        return web.Response(text="upstream")

    async with processor() as (proc, address), upstream(handler) as port:
        proc.answer = lambda message: immediate(
            403,
            b"denied by policy",
            [option("x-why", "policy"), option("content-type", "text/plain")],
        )
        async with serve_edge(edge_env(address)) as edge:
            edge.apply(routes=[route("r1", "/api/*", port, plugins=plugins())])
            status, body, headers = await edge.call("/api/x", method="POST", data=b"payload")
    assert (status, body) == (403, b"denied by policy")
    assert headers["X-Why"] == "policy" and headers["Content-Type"] == "text/plain"
    assert calls == []
    assert [m.WhichOneof("request") for m in proc.seen] == ["request_headers"]


async def test_processor_down_or_unconfigured_is_503_unless_degradation() -> None:
    dead = f"127.0.0.1:{free_port()}"
    async with upstream() as port:
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
                status, body, _ = await edge.call("/lenient", headers={"X-A": "1"})
                assert status == 200 and body["path"] == "/lenient"
                assert body["headers"]["x-a"] == "1"


async def test_processor_timeout_or_broken_stream_leaves_the_request_untouched() -> None:
    never = asyncio.Event()

    async def stall_on_body(message: Any) -> Any:
        if message.HasField("request_headers"):
            return answer("request_headers", set_headers=[option("x-added", "yes")])
        await never.wait()  # past the deadline

    async with (
        processor() as (proc, address),
        upstream() as port,
        serve_edge(edge_env(address, deadline=0.3)) as edge,
    ):
        edge.apply(
            routes=[
                route("strict", "/strict", port, plugins=plugins()),
                route("lenient", "/lenient", port, plugins=plugins(allow_degradation=True)),
            ]
        )
        proc.answer = stall_on_body
        status, body, _ = await edge.call("/strict", method="POST", data=b"x")
        assert (status, body) == (503, {"error_msg": "503 Service Temporarily Unavailable"})
        status, body, _ = await edge.call("/lenient", method="POST", data=b"body")
        assert status == 200 and body["body"] == "body"
        assert "x-added" not in body["headers"]  # the headers answer was not applied

        for broken in (
            lambda m: None,  # the processor ends the stream without answering
            lambda m: answer("response_headers"),  # answers another message
            lambda m: answer("request_headers", set_headers=[option("x-a", "1\r\nx-b: 2")]),
            lambda m: answer("request_headers", remove=["bad name"]),
        ):
            proc.answer = broken
            status, body, _ = await edge.call("/strict")
            assert status == 503


def test_schema_and_defaults() -> None:
    schema = REGISTRY["ext-plugin-pre-req"].schema
    assert "Envoy" in schema["description"]
    assert with_defaults(schema, {}) == {"allow_degradation": False}
    assert check(schema, {"conf": CONF}) is None
    assert check(schema, {"conf": []}) == (
        'property "conf" validation failed: expect array to have at least 1 items'
    )
    assert check(schema, {"conf": [{"name": "a"}]}) is not None
    assert check(schema, {"conf": [{"name": "", "value": "v"}]}) is not None
    assert check(schema, {"conf": [{"name": "a" * 129, "value": "v"}]}) is not None
    assert check(schema, {"conf": [{"name": "a", "value": 1}]}) is not None
    assert check(schema, {"allow_degradation": "yes"}) is not None
