"""The sidecars' web layer (`sidecars/web.py`): what the sidecars relied on aiohttp for —
keep-alive, streamed answers, HEAD, 404/405 with `Allow`, bodies over the limit — over the
edge data plane's httptools server."""

from __future__ import annotations

import asyncio
import json

from sidecars import web
from sidecars.echo_llm.app import build_app as build_echo
from sidecars.mock_backend.app import build_app as build_backend


async def _exchange(port: int, requests: list[bytes]) -> list[tuple[int, dict[str, str], bytes]]:
    """Send the requests on one connection, one after the other; read each answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answers = []
    try:
        for request in requests:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            headers = {}
            for line in lines[1:]:
                if line:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
            if request.startswith(b"HEAD "):
                body = b""  # whatever the headers say
            elif "content-length" in headers:
                body = await reader.readexactly(int(headers["content-length"]))
            elif headers.get("transfer-encoding") == "chunked":
                body = b""
                while True:
                    size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
                    chunk = await reader.readexactly(size + 2)
                    if size == 0:
                        break
                    body += chunk[:-2]
            else:
                body = b""
            answers.append((int(lines[0].split()[1]), headers, body))
    finally:
        writer.close()
    return answers


async def test_keep_alive_serves_several_requests_on_one_connection(running):
    async with running(build_backend()) as backend:
        get = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
        post = b"POST /api/x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
        answers = await _exchange(backend.port, [get, post, get])
    assert [status for status, _, _ in answers] == [200, 200, 200]
    assert all("connection" not in headers for _, headers, _ in answers)
    assert json.loads(answers[1][2])["body"] == {}


async def test_a_stream_is_chunked_and_the_connection_stays_open(running):
    body = json.dumps(
        {"model": "echo-1", "stream": True, "messages": [{"role": "user", "content": "a b"}]}
    )
    request = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}"
    ).encode()
    async with running(build_echo()) as llm:
        answers = await _exchange(llm.port, [request, request])
    for status, headers, text in answers:
        assert status == 200
        assert headers["content-type"] == "text/event-stream"
        assert headers["transfer-encoding"] == "chunked"
        assert text.endswith(b"data: [DONE]\n\n")


async def test_head_wrong_method_and_unknown_path(running):
    async with running(build_echo()) as llm:
        head, post, missing = await _exchange(
            llm.port,
            [
                b"HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n",
                b"POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
                b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n",
            ],
        )
    # HEAD: GET's headers, no body (the length is GET's)
    assert head[0] == 200 and int(head[1]["content-length"]) > 0
    assert post[0] == 405 and post[1]["allow"] == "GET,HEAD"
    assert json.loads(post[2])["error"]["code"] == "method_not_allowed"
    assert missing[0] == 404 and json.loads(missing[2])["error"]["code"] == "not_found"


async def test_a_body_over_the_limit_is_413_in_the_sidecars_shape(running):
    request = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\n"
        f"Content-Length: {web.MAX_BODY + 1}\r\n\r\n"
    ).encode()
    async with running(build_echo()) as llm:
        ((status, headers, body),) = await _exchange(llm.port, [request])
    assert status == 413 and headers["connection"] == "close"
    assert json.loads(body)["error"]["message"] == "Request Entity Too Large"


async def test_header_names_keep_their_case_and_repeats_stay_apart(running):
    request = (
        b"GET /api/h HTTP/1.1\r\nHost: x\r\nX-Thing: 1\r\nX-Thing: 2\r\nX-Tenant-ID: t\r\n\r\n"
    )
    async with running(build_backend()) as backend:
        ((status, _, body),) = await _exchange(backend.port, [request])
    echoed = json.loads(body)
    assert status == 200
    assert echoed["headers"]["X-Thing"] == ["1", "2"]
    assert echoed["tenant_id"] == "t"


async def test_a_client_that_expects_100_continue_gets_it_before_sending_the_body(running):
    head = b"POST /api/x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"
    async with running(build_backend()) as backend:
        reader, writer = await asyncio.open_connection("127.0.0.1", backend.port)
        try:
            writer.write(head)
            interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            writer.write(b"{}")
            final = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        finally:
            writer.close()
    assert interim.startswith(b"HTTP/1.1 100 Continue")
    assert final.startswith(b"HTTP/1.1 200 ")
