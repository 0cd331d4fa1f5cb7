"""When the edge sends a request again (issue 19, defect 1), against real upstreams on loopback
that count what they received: a request that timed out on a kept-alive connection reached the
upstream and is never sent there again; a kept-alive connection the upstream had closed is
replaced without the client noticing; other nodes are tried by APISIX's rules (idempotent
methods, `retries`, `retry_timeout`)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web
from edge_kit import Edge, route, serve_edge, upstream
from shared_kit import free_port

pytestmark = pytest.mark.timeout(60)

READ = {"connect": 2, "send": 2, "read": 0.5}
TIMED_OUT = (504, {"error_msg": "504 Gateway Timeout"})


class Counting:
    """An upstream's handler: counts each request it received (`"GET /path"`) as it arrives;
    a path under /hang/ gets no answer until the test ends (unless `hang` is False)."""

    def __init__(self, hang: bool = True) -> None:
        self.hang = hang
        self.hits: Counter[str] = Counter()
        self.release = asyncio.Event()

    async def __call__(self, request: web.Request) -> web.Response:
        self.hits[f"{request.method} {request.path}"] += 1
        if self.hang and request.path.startswith("/hang/"):
            await self.release.wait()
        return web.json_response({"path": request.path})

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[int]:
        """An aiohttp upstream with this handler; yields its port."""
        async with upstream(self) as port:
            try:
                yield port
            finally:
                self.release.set()  # the hung handlers end, so the upstream can stop


@pytest.fixture
def counting() -> Counting:
    return Counting()


@pytest.fixture
async def edge() -> AsyncIterator[Edge]:
    async with serve_edge() as plane:
        yield plane


async def test_a_timeout_on_a_kept_alive_connection_is_not_sent_again(
    edge: Edge, counting: Counting
) -> None:
    """The upstream has the request and may be running it (an `/approve`): the client gets
    the 504 of the first timeout and the upstream saw the request once."""
    async with counting.serving() as port:
        edge.apply(routes=[route("r", "/*", port, timeout=READ)])
        for method in ("GET", "POST", "DELETE"):
            # a first request leaves a kept-alive connection in the pool: the next one uses it
            assert (await edge.call("/warm"))[0] == 200
            status, body, _ = await edge.call(f"/hang/{method}", method)
            assert (status, body) == TIMED_OUT
            assert counting.hits[f"{method} /hang/{method}"] == 1
        # one connection per warm-up: none was opened to send a request again
        assert sum(p.opened for p in edge.plane.pools.pools.values()) == 3


async def test_a_kept_alive_connection_the_upstream_closed_is_replaced(edge: Edge) -> None:
    """The upstream answers the first request of each connection and closes the connection
    when the next one comes, without a byte of answer: what a client sees when a server's
    keep-alive timer closed the connection as the request was on its way. The request is sent
    again on a new connection, and the client never knows."""
    connections, answered = 0, 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections, answered
        connections += 1
        if await _read_head(reader):
            answered += 1
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: 4\r\n\r\n\"ok\"")  # fmt: skip
            await writer.drain()
        await _read_head(reader)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    async with server:
        port = server.sockets[0].getsockname()[1]
        edge.apply(routes=[route("r", "/*", port, timeout=READ)])
        for method in ("GET", "POST"):
            for _ in range(2):
                assert (await edge.call("/x", method))[:2] == (200, "ok")
    assert (connections, answered) == (4, 4)


async def _read_head(reader: asyncio.StreamReader) -> bool:
    try:
        await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return False
    return True


async def test_another_node_by_apisix_rules(edge: Edge) -> None:
    """A node that timed out: an idempotent request goes to the next node, a POST (sent, maybe
    run) does not; a POST that could not connect does (it was never sent); `retries: 0` and a
    passed `retry_timeout` stop the retries."""
    slow, good = Counting(), Counting(hang=False)
    async with slow.serving() as slow_port, good.serving() as good_port:
        nodes = {f"127.0.0.1:{slow_port}": 1, f"127.0.0.1:{good_port}": 1}  # first try: slow

        async def call(path: str, method: str = "GET", **upstream_conf: object) -> Any:
            # a new version each time: the balancer starts again from the first node
            conf = {"nodes": nodes, "timeout": READ, **upstream_conf}
            edge.apply(routes=[{"id": "r", "uri": "/*", "upstream": conf}])
            return (await edge.call(path, method))[:2]

        assert await call("/hang/get") == (200, {"path": "/hang/get"})
        assert (slow.hits["GET /hang/get"], good.hits["GET /hang/get"]) == (1, 1)
        assert await call("/hang/post", "POST") == TIMED_OUT
        assert (slow.hits["POST /hang/post"], good.hits["POST /hang/post"]) == (1, 0)
        assert await call("/hang/none", retries=0) == TIMED_OUT
        assert (slow.hits["GET /hang/none"], good.hits["GET /hang/none"]) == (1, 0)
        # past by the time the read timeout (0.5 s) fires
        assert await call("/hang/late", retry_timeout=0.2) == TIMED_OUT
        assert (slow.hits["GET /hang/late"], good.hits["GET /hang/late"]) == (1, 0)
        assert (await call("/hang/in-time", retry_timeout=30))[0] == 200
        assert (slow.hits["GET /hang/in-time"], good.hits["GET /hang/in-time"]) == (1, 1)

        nodes = {f"127.0.0.1:{free_port()}": 1, f"127.0.0.1:{good_port}": 1}
        assert (await call("/refused", "POST"))[0] == 200
        assert good.hits["POST /refused"] == 1


async def test_a_post_whose_node_died_goes_to_another_node_with_its_body(edge: Edge) -> None:
    """A replica killed between two requests (issue 24, chaos): the edge's kept-alive
    connection to it is found closed as a POST goes out (its body already streaming), and a
    new connection to it is refused. The request never reached it, so it goes to the other
    node, body and all, instead of answering 502."""
    answered: list[bytes] = []

    async def dying(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if await _read_head(reader):  # the first request of the connection is answered
            await reader.readexactly(len(b"first"))
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: 7\r\n\r\n\"dying\"")  # fmt: skip
            await writer.drain()
        await _read_head(reader)  # the next one: the process is gone, nothing answers
        writer.close()

    async def echo(request: web.Request) -> web.Response:
        answered.append(await request.read())
        return web.json_response({"echo": answered[-1].decode()})

    server = await asyncio.start_server(dying, "127.0.0.1", 0)
    dying_port = server.sockets[0].getsockname()[1]
    async with upstream(echo) as good_port:
        nodes = {f"127.0.0.1:{dying_port}": 1, f"127.0.0.1:{good_port}": 1}  # the first try
        edge.apply(routes=[{"id": "r", "uri": "/*", "upstream": {"nodes": nodes, "timeout": READ}}])
        assert (await edge.call("/chat", "POST", data=b"first"))[:2] == (200, "dying")
        assert (await edge.call("/chat", "POST", data=b"second"))[:2] == (200, {"echo": "second"})
        server.close()  # no new connection; the kept-alive one closes at its next request
        body = b'{"messages": [{"role": "user", "content": "third"}]}'
        status, answer, _ = await edge.call("/chat", "POST", data=body)
        assert (status, answer) == (200, {"echo": body.decode()})
        assert answered == [b"second", body]
