"""grpc-web: a gRPC-Web client (binary and text modes, framed here: there is no maintained
Python gRPC-Web client) through the edge to a real grpc.aio server."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from edge_kit import Edge, serve_edge
from grpc_upstream import Greeter, HelloReply, HelloRequest, grpc_server

from gateways.edge.model.schema import check
from gateways.edge.plugins import REGISTRY, _grpc

BINARY = "application/grpc-web+proto"
TEXT = "application/grpc-web-text"


# --- the client's framing (gRPC-Web protocol: PROTOCOL-WEB.md) ---------------------------


def frame(message: Any) -> bytes:
    """One uncompressed message frame: flag 0, 4-byte big-endian length, the message."""
    payload = message.SerializeToString()
    return b"\x00" + len(payload).to_bytes(4, "big") + payload


def parse(body: bytes) -> tuple[list[str], dict[str, str]]:
    """A response body → (the HelloReply messages, the trailers). Every frame is checked: the
    trailer frame (flag 0x80) comes last, once."""
    messages, trailers = [], None
    while body:
        assert trailers is None, "data after the trailer frame"
        flag, length = body[0], int.from_bytes(body[1:5], "big")
        payload, body = body[5 : 5 + length], body[5 + length :]
        assert len(payload) == length
        if flag == 0x80:
            lines = payload.decode().split("\r\n")
            assert lines[-1] == ""
            trailers = dict(line.split(":", 1) for line in lines[:-1])
        else:
            assert flag == 0x00
            messages.append(HelloReply.FromString(payload).message)
    assert trailers is not None, "no trailer frame"
    return messages, trailers


def from_text(body: bytes) -> bytes:
    """A grpc-web-text body: base64 in 4-character groups (a stream may concatenate several
    padded base64 chunks, as gRPC-Web's JavaScript client decodes them)."""
    return b"".join(base64.b64decode(body[i : i + 4]) for i in range(0, len(body), 4))


# --- fixtures ----------------------------------------------------------------------------


@pytest.fixture
async def greeter() -> AsyncIterator[tuple[int, Greeter]]:
    async with grpc_server() as server:
        yield server
    await _grpc.close()


@pytest.fixture
async def edge(greeter: tuple[int, Greeter]) -> AsyncIterator[Edge]:
    port, _ = greeter
    upstream = {"scheme": "grpc", "type": "roundrobin", "nodes": {f"127.0.0.1:{port}": 1}}
    async with serve_edge() as served:
        served.apply(
            routes=[
                # APISIX's doc example (the node is our server)
                {"id": "1", "uri": "/grpc/web/*", "plugins": {"grpc-web": {}},
                 "upstream": upstream},
                # not a prefix: the whole path is the method (APISIX 3.15+)
                {"id": "2", "uri": "/helloworld.Greeter/SayHello", "plugins": {"grpc-web": {}},
                 "upstream": upstream},
                {"id": "3", "uri": "/small/*",
                 "plugins": {"grpc-web": {"max_req_body_size": 8,
                                          "cors_allow_headers": "content-type,x-custom"}},
                 "upstream": upstream},
            ]
        )  # fmt: skip
        yield served


async def call(edge: Edge, path: str, message: Any, mime: str = BINARY) -> Any:
    body = frame(message)
    if mime.startswith(TEXT):
        body = base64.b64encode(body)
    return await edge.call(
        path, "POST", data=body, headers={"Content-Type": mime, "X-Grpc-Web": "1"}
    )


def cors(headers: Any) -> None:
    assert headers["Access-Control-Allow-Origin"] == "*"
    assert headers["Access-Control-Expose-Headers"] == "grpc-status,grpc-message"


# --- tests -------------------------------------------------------------------------------


@pytest.mark.parametrize("mime", ["application/grpc-web", BINARY, TEXT, f"{TEXT}+proto"])
async def test_unary(edge: Edge, mime: str) -> None:
    path = "/grpc/web/helloworld.Greeter/SayHello"
    status, body, headers = await call(edge, path, HelloRequest(name="web"), mime)
    assert status == 200
    assert headers["Content-Type"] == mime
    assert headers["Transfer-Encoding"] == "chunked"  # frames are sent as they arrive
    cors(headers)
    raw = from_text(body) if mime.startswith(TEXT) else body
    assert parse(raw) == (["Hello web"], {"grpc-status": "0", "grpc-message": ""})


async def test_whole_path_route_and_metadata(edge: Edge, greeter: tuple[int, Greeter]) -> None:
    _, server = greeter
    status, body, _ = await edge.call(
        "/helloworld.Greeter/SayHello",
        "POST",
        data=frame(HelloRequest(name="path")),
        headers={"Content-Type": BINARY, "X-User-Agent": "grpc-web-javascript/0.1"},
    )
    assert status == 200 and parse(body)[0] == ["Hello path"]
    assert server.metadata["SayHello"]["x-user-agent"] == "grpc-web-javascript/0.1"


@pytest.mark.parametrize("mime", [BINARY, TEXT])
async def test_server_streaming(edge: Edge, mime: str) -> None:
    request = HelloRequest(name="s", items=["1", "2", "3"])
    status, body, _ = await call(edge, "/grpc/web/helloworld.Greeter/SayHelloStream", request, mime)
    assert status == 200
    raw = from_text(body) if mime == TEXT else body
    assert parse(raw) == (["Hello s 1", "Hello s 2", "Hello s 3"],
                          {"grpc-status": "0", "grpc-message": ""})  # fmt: skip
    # an error after some messages ends the stream with its status
    request = HelloRequest(name="s", items=["1", "2", "boom", "3"])
    _, body, _ = await call(edge, "/grpc/web/helloworld.Greeter/SayHelloStream", request, mime)
    raw = from_text(body) if mime == TEXT else body
    assert parse(raw) == (["Hello s 1", "Hello s 2"], {"grpc-status": "13", "grpc-message": "boom"})


async def test_a_client_leaving_a_stream_cancels_the_call(
    edge: Edge, greeter: tuple[int, Greeter]
) -> None:
    _, server = greeter
    request = frame(HelloRequest(name="s", items=["1", "wait"]))
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            edge.url + "/grpc/web/helloworld.Greeter/SayHelloStream",
            data=request,
            headers={"Content-Type": BINARY},
        ) as resp,
    ):
        first = await resp.content.readexactly(
            5 + len(HelloReply(message="Hello s 1").SerializeToString())
        )
        assert HelloReply.FromString(first[5:]).message == "Hello s 1"
        resp.close()  # the client goes away mid-stream
    await asyncio.wait_for(server.cancelled.wait(), 10)


async def test_errors_are_grpc_statuses(edge: Edge) -> None:
    # an error before any message: a trailers-only answer, the status in the headers too
    path = "/grpc/web/helloworld.Greeter/Fail"
    status, body, headers = await call(edge, path, HelloRequest(name="NOT_FOUND"))
    assert status == 200
    assert headers["grpc-status"] == "5" and headers["grpc-message"] == "failed: NOT_FOUND"
    assert parse(body) == ([], {"grpc-status": "5", "grpc-message": "failed: NOT_FOUND"})
    status, body, _ = await call(edge, "/grpc/web/helloworld.Greeter/Nope", HelloRequest())
    assert status == 200 and parse(body)[1]["grpc-status"] == "12"  # UNIMPLEMENTED


async def test_cors_preflight_and_refusals(edge: Edge) -> None:
    path = "/grpc/web/helloworld.Greeter/SayHello"
    status, body, headers = await edge.call(path, "OPTIONS")
    assert (status, body) == (204, b"")
    cors(headers)
    assert headers["Access-Control-Allow-Methods"] == "POST"
    assert headers["Access-Control-Allow-Headers"] == "content-type,x-grpc-web,x-user-agent"
    status, _, headers = await edge.call("/small/helloworld.Greeter/SayHello", "OPTIONS")
    assert headers["Access-Control-Allow-Headers"] == "content-type,x-custom"
    status, body, headers = await edge.call(path, "GET")
    assert (status, body) == (405, {"error_msg": "405 Method Not Allowed"})
    cors(headers)
    ok = frame(HelloRequest(name="x"))
    for mime, data in [
        ("application/grpc", ok),  # not gRPC-Web
        ("application/json", b"{}"),
        (BINARY, b""),  # no frame
        (BINARY, ok[:-1]),  # truncated
        (BINARY, ok + ok),  # two messages
        (BINARY, b"\x01" + ok[1:]),  # compressed
        (TEXT, b"not base64!"),
    ]:
        status, body, _ = await edge.call(path, "POST", data=data, headers={"Content-Type": mime})
        assert (status, body) == (400, {"error_msg": "400 Bad Request"}), (mime, data)
    big = frame(HelloRequest(name="more than eight bytes"))
    status, _, _ = await edge.call(
        "/small/helloworld.Greeter/SayHello", "POST", data=big, headers={"Content-Type": BINARY}
    )
    assert status == 413  # max_req_body_size


def test_schema() -> None:
    schema = REGISTRY["grpc-web"].schema
    assert check(schema, {}) is None
    assert check(schema, {"cors_allow_headers": "a,b", "max_req_body_size": 1}) is None
    for bad, field in [
        ({"cors_allow_headers": 1}, "cors_allow_headers"),
        ({"max_req_body_size": 0}, "max_req_body_size"),
        ({"max_req_body_size": "1k"}, "max_req_body_size"),
    ]:
        problem = check(schema, bad)
        assert problem is not None and field in problem, (bad, problem)
