"""The edge's limits on a request's head (issue 19, defect 8): a header field over 8190 bytes
(what the aiohttp services behind it accept) is answered 431 by the edge itself, in JSON that
quotes nothing of it, and nothing of it reaches the log or the upstream; a request target over
8190 bytes is 414; a head that never ends is cut at 32 KiB."""

from __future__ import annotations

import asyncio
import json
import logging
import select
import socket

import pytest
from aiohttp import web
from edge_kit import route, serve_edge, upstream

pytestmark = pytest.mark.timeout(60)

CANARY = "canary-7f3a9c"  # what must not come back, nor reach a log


def exchange(port: int, data: bytes) -> bytes:
    """Send raw bytes, read until the edge closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(data)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def head(target: str = "/api/x", **headers: str) -> bytes:
    lines = [f"GET {target} HTTP/1.1", "Host: edge.test", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def answer(reply: bytes) -> tuple[int, bytes]:
    status_line, _, rest = reply.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


async def test_a_header_over_8190_bytes_is_431_and_never_echoed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    seen: list[int] = []

    async def count(request: web.Request) -> web.Response:
        seen.append(len(request.headers.get("Authorization", "")))
        return web.json_response({"ok": True})

    async with upstream(count) as port, serve_edge() as edge:
        edge.apply(routes=[route("r", "/api/*", port)])
        token = "Bearer " + (CANARY * 800)[:9000]  # a 9 KB bearer token
        reply = await asyncio.to_thread(exchange, edge.port, head(Authorization=token))
        status, body = answer(reply)
        assert status == 431
        assert json.loads(body) == {"error_msg": "431 Request Header Fields Too Large"}
        assert CANARY.encode() not in reply
        assert seen == []  # the upstream never saw it

        # The longest field the services behind accept (name + value = 8190) goes through.
        longest = "x" * (8190 - len("Authorization"))
        reply = await asyncio.to_thread(exchange, edge.port, head(Authorization=longest))
        assert answer(reply)[0] == 200 and seen == [len(longest)]

        reply = await asyncio.to_thread(exchange, edge.port, head("/api/" + CANARY * 700))
        assert answer(reply) == (414, b'{"error_msg":"414 Request-URI Too Long"}')
        assert CANARY.encode() not in reply

        assert answer(await asyncio.to_thread(endless_header, edge.port))[0] == 431
        assert seen == [len(longest)]
    assert CANARY not in caplog.text
    assert all(CANARY not in repr(record.__dict__) for record in caplog.records)


def endless_header(port: int) -> bytes:
    """A header that never ends, sent piece by piece until the edge answers (it must, once
    the head passed 32 KiB, rather than let it grow) or 4 MiB went unanswered."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(b"GET /api/x HTTP/1.1\r\nHost: edge.test\r\nX-Long: ")
        try:
            for _ in range(1024):
                if select.select([conn], [], [], 0)[0]:
                    break  # answered
                conn.sendall(b"a" * 4096)
        except ConnectionError:
            pass  # it answered and closed while this was sending
        chunks = []
        try:
            while chunk := conn.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass  # (the edge closed with this request unread: what it sent is read first)
        return b"".join(chunks)
