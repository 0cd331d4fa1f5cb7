"""A drain (SIGTERM: the front door's runner cleaned up) answers every request already begun
(issue 24, rolling restart): one whose head came before the drain and whose body came after
is read to its end and answered, not left waiting for a body aiohttp dropped (its handler
waited until the 60 s shutdown timeout cancelled it; the chaos suite's chat through the edge
failed with a client timeout). A request sent on a connection the drain closed while idle is
never run: the connection closes without a byte of answer, which the edge sends again to
another replica."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from runtime.http_parse_errors import FrontDoorRunner

BODY = b'{"messages": [{"role": "user", "content": "steady load"}]}'


def head(length: int) -> bytes:
    return (
        b"POST /chat HTTP/1.1\r\nhost: ai\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n" % length
    )


class Front:
    def __init__(self) -> None:
        self.begun = asyncio.Event()
        self.ran = 0
        app = web.Application()
        app.router.add_post("/chat", self.chat)
        self.runner = FrontDoorRunner(app, handle_signals=False)
        self.port = 0

    async def chat(self, request: web.Request) -> web.Response:
        self.begun.set()
        body = await request.read()
        self.ran += 1
        return web.json_response({"read": len(body)})


@pytest.fixture
async def front() -> AsyncIterator[Front]:
    served = Front()
    await served.runner.setup()
    await web.TCPSite(served.runner, "127.0.0.1", 0).start()
    served.port = served.runner.addresses[0][1]
    yield served
    await served.runner.cleanup()


async def answered_in_the_drain(reader: asyncio.StreamReader, drain: asyncio.Task[None]) -> None:
    """The request is answered whole, and the drain ends."""
    async with asyncio.timeout(10):  # without the fixes: nothing until the 60 s timeout
        answer = await reader.read()
        await drain
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert answer.endswith(b'{"read": %d}' % len(BODY)), answer[-100:]


async def test_a_body_that_arrives_after_the_drain_began_is_read_and_answered(
    front: Front,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", front.port)
    writer.write(head(len(BODY)))
    await front.begun.wait()  # the handler runs, waiting for the body
    drain = asyncio.create_task(front.runner.cleanup())
    # The listener closes, the connections are told to close, then to shut down: by now the
    # drain waits for the handler.
    await asyncio.sleep(0.1)
    assert not front.runner.sites and not drain.done()
    writer.write(BODY)
    await answered_in_the_drain(reader, drain)
    assert front.ran == 1
    writer.close()


async def test_a_body_that_arrives_before_its_handler_first_ran_is_read_and_answered(
    front: Front,
) -> None:
    """The narrower window: the head is off aiohttp's queue, its handler's task is made but
    has not run (a loop turn on Python 3.11), the drain tells the connection to close, and the
    body lands in that turn (the chaos suite's rolling restart: a chat that waited 60 s)."""
    server = front.runner.server
    assert server is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", front.port)
    writer.write(head(len(BODY)) + BODY)  # one request answered: the connection is known
    await reader.readuntil(b'{"read": %d}' % len(BODY))
    (conn,) = server.connections
    # The bytes are handed to the connection as its transport would, so the order is exact.
    conn.data_received(head(len(BODY)))
    await asyncio.sleep(0)  # the connection's loop takes the head and makes the handler's task
    assert not conn._messages and not conn._request_in_progress  # the window
    conn.close()  # what the drain does first (`pre_shutdown`)
    conn.data_received(BODY)
    await answered_in_the_drain(reader, asyncio.create_task(front.runner.cleanup()))
    assert front.ran == 2
    writer.close()


async def test_a_request_on_a_connection_the_drain_closed_is_not_run(front: Front) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", front.port)
    writer.write(head(len(BODY)) + BODY)
    first = await reader.readuntil(b'{"read": 58}')
    assert first.startswith(b"HTTP/1.1 200")
    async with asyncio.timeout(10):
        await front.runner.cleanup()  # the idle connection is closed
    writer.write(head(len(BODY)) + BODY)
    async with asyncio.timeout(10):
        assert await reader.read() == b""  # closed without a byte: the edge sends it again
    assert front.ran == 1
    writer.close()
