"""An HTTP/1.1 server: an `asyncio.Protocol` over httptools (llhttp), no framework. The edge's
data plane serves on it, and so do the sidecars (`sidecars/web.py`), which stay small with it.

One `Connection` per client socket parses requests into `Exchange`s and hands each to the
handler as a task, one at a time in arrival order (pipelined requests wait their turn).
`serve` returns a `Listening`, whose `drain` is the server's part of a graceful stop: no new
connection, idle ones closed, every request already begun answered (its answer says
`connection: close`), for at most DRAIN_SECS. An
`Exchange` is the request as parsed (method, target, lower-case headers, a streamed `Body`) plus
the primitives to answer it (`start`, `write`, `end`). Malformed input is answered here, before
any routing: 400 (bad syntax; both Content-Length and Transfer-Encoding; conflicting
Content-Lengths — llhttp refuses those, and we check again), 414 (a request target over
`MAX_TARGET_BYTES`), 431 (a header field over `MAX_FIELD_BYTES`, or request line and headers
over `MAX_HEADER_BYTES`), 413 (a body over the configured limit). These answers are JSON that
quote nothing of the request, and nothing of it is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any

import httptools

from runtime.http1.flow import FlowControl

log = logging.getLogger(__name__)

MAX_HEADER_BYTES = (
    32 * 1024
)  # request line + headers; nginx's large_client_header_buffers is 4 x 8k
# One header field (name + value) and the request target: aiohttp's limit (its default), which
# every aiohttp front door behind the edge keeps (runtime/http_parse_errors.py), so that the edge
# never forwards a request they would refuse.
MAX_FIELD_BYTES = MAX_TARGET_BYTES = 8190
BODY_HIGH_WATER = 256 * 1024  # pause reading the client when this much body waits unforwarded
# A body is kept as it is read, up to this size, so that a request that never reached its
# upstream node (its connection refused or found closed) can go to another one with its body,
# as nginx's buffered request bodies can; a longer body that began streaming is never replayed.
REPLAY_BYTES = 64 * 1024

# A drain (SIGTERM) waits this long at most for the requests its connections have begun, as
# aiohttp's shutdown timeout does at the front doors (an upstream's default read timeout is
# 60 s too), then closes what is left.
DRAIN_SECS = 60.0

STATUS_LINES = {s.value: f"HTTP/1.1 {s.value} {s.phrase}\r\n" for s in HTTPStatus}


def status_line(status: int) -> str:
    return STATUS_LINES.get(status) or f"HTTP/1.1 {status} Unknown\r\n"


def error_body(status: int) -> bytes:
    """APISIX answers errors with nginx's HTML pages; we send the same status with APISIX's JSON
    error shape, `{"error_msg": "<status> <reason>"}` (what its own 404 already looks like)."""
    reason = STATUS_LINES.get(status, f"HTTP/1.1 {status} Error\r\n")[9:-2]
    return b'{"error_msg":"' + reason.encode() + b'"}'


class BadRequest(Exception):
    def __init__(self, status: int) -> None:
        self.status = status


class Body:
    """A request body as it arrives: `read()` returns the next chunk, b"" at the end. Reading of
    the socket pauses while more than `BODY_HIGH_WATER` bytes wait, so a large upload is never
    held whole in memory. What was read is kept up to REPLAY_BYTES: `rewind()` reads it again."""

    __slots__ = (
        "_chunks",
        "_conn",
        "_kept",
        "_kept_size",
        "_size",
        "_waiter",
        "done",
        "error",
        "received",
        "started",
    )

    def __init__(self, conn: Connection, done: bool) -> None:
        self._conn = conn
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._waiter: asyncio.Future[None] | None = None
        self.done = done
        self.error: BaseException | None = None
        self.received = 0
        self.started = False  # someone read from it (replayable only by `rewind`)
        self._kept: list[bytes] | None = []  # what was read; None once over REPLAY_BYTES
        self._kept_size = 0

    def feed(self, chunk: bytes) -> None:
        self._chunks.append(chunk)
        self._size += len(chunk)
        self.received += len(chunk)
        if self._size > BODY_HIGH_WATER:
            self._conn.pause_reading()
        self._wake()

    def finish(self, error: BaseException | None = None) -> None:
        self.done = True
        self.error = error
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def read(self) -> bytes:
        self.started = True
        while not self._chunks:
            if self.error is not None:
                raise self.error
            if self.done:
                return b""
            self._waiter = self._conn.loop.create_future()
            await self._waiter
            self._waiter = None
        chunk = self._chunks.popleft()
        self._size -= len(chunk)
        if self._size <= BODY_HIGH_WATER:
            self._conn.resume_reading()
        if self._kept is not None:
            self._kept_size += len(chunk)
            if self._kept_size <= REPLAY_BYTES:
                self._kept.append(chunk)
            else:
                self._kept = None
        return chunk

    def rewind(self) -> bool:
        """Make what was read so far readable again, before what is still to come; False when
        more than REPLAY_BYTES were read (that part is gone)."""
        if not self.started:
            return True
        if self._kept is None:
            return False
        self._chunks.extendleft(reversed(self._kept))
        self._size += self._kept_size
        self._kept, self._kept_size = [], 0
        return True


class Exchange:
    """One request and its response. Headers are a dict of lower-case names (repeated headers
    joined with ", ")."""

    __slots__ = (
        "body",
        "chunked",
        "client_ip",
        "conn",
        "headers",
        "http11",
        "keep_alive",
        "method",
        "response_started",
        "target",
        "upgrade",
        "wants_continue",
    )

    def __init__(
        self,
        conn: Connection,
        method: str,
        target: bytes,
        headers: dict[str, str],
        http11: bool,
        keep_alive: bool,
        body: Body,
        upgrade: bool,
    ) -> None:
        self.conn = conn
        self.client_ip = conn.client_ip
        self.method = method
        self.target = target
        self.headers = headers
        self.http11 = http11
        self.keep_alive = keep_alive
        self.body = body
        self.upgrade = upgrade
        self.wants_continue = headers.get("expect", "").lower() == "100-continue"
        self.response_started = False
        self.chunked = False  # the response is sent chunked

    def head(
        self,
        status: int,
        headers: dict[str, str],
        length: int | None,
        extra: list[tuple[str, str]] | None = None,
        body: bool = True,
    ) -> bytes:
        """The status line and headers. `length` None: the body is streamed (chunked to an
        HTTP/1.1 client, close-delimited otherwise). `body` False: no body follows (HEAD, 204,
        304, 101)."""
        self.response_started = True
        parts = [status_line(status)]
        for name, value in headers.items():
            parts.append(f"{name}: {value}\r\n")
        if extra:
            for name, value in extra:
                parts.append(f"{name}: {value}\r\n")
        if status == 101:
            pass
        elif length is not None:
            parts.append(f"content-length: {length}\r\n")
        elif body and status not in (204, 304):
            if self.http11:
                self.chunked = True
                parts.append("transfer-encoding: chunked\r\n")
            else:
                self.keep_alive = False
        if not self.keep_alive and status != 101:
            parts.append("connection: close\r\n")
        parts.append("\r\n")
        return "".join(parts).encode("latin-1")

    def start(
        self,
        status: int,
        headers: dict[str, str],
        length: int | None,
        extra: list[tuple[str, str]] | None = None,
        body: bool = True,
    ) -> None:
        """Send the status line and headers (see `head`)."""
        self.conn.write(self.head(status, headers, length, extra, body))

    def write(self, chunk: bytes, head: bytes = b"") -> None:
        """A body chunk (framed when chunked), after `head` if given (one write, one segment)."""
        if not chunk:
            if head:
                self.conn.write(head)
            return
        if self.chunked:
            self.conn.write(b"%b%x\r\n%b\r\n" % (head, len(chunk), chunk))
        else:
            self.conn.write(head + chunk if head else chunk)

    def end(self, head: bytes = b"") -> None:
        if self.chunked:
            self.conn.write(head + b"0\r\n\r\n")
        elif head:
            self.conn.write(head)

    def respond(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        """A whole response at once (errors, replies)."""
        headers = headers if headers is not None else {"content-type": "application/json"}
        length = len(body) if status not in (204, 304) else None
        head = self.head(status, headers, length, body=False)
        send_body = self.method != "HEAD" and status not in (204, 304)
        self.conn.write(head + body if send_body else head)  # one write, one segment


Handler = Callable[[Exchange], Awaitable[None]]


ErrorBody = Callable[[int], bytes]


class Connection(FlowControl):
    """One client connection. The handler runs one exchange at a time; an exception in it is
    logged and closes this connection only. `errors` renders the JSON body of the errors this
    layer answers itself (malformed input, a handler that failed before answering)."""

    exchange_class = Exchange  # a subclass may carry more of the request
    listening: Listening | None = None  # the server that accepted it (`serve` sets it)

    def __init__(self, handler: Handler, max_body: int, errors: ErrorBody = error_body) -> None:
        super().__init__()
        self.handler = handler
        self.max_body = max_body
        self.errors = errors
        self.loop = asyncio.get_running_loop()
        self.transport: Any = None
        self.client_ip = ""
        self.parser = httptools.HttpRequestParser(self)
        self.pending: deque[Exchange] = deque()
        self.current: Exchange | None = None
        self.task: asyncio.Task[None] | None = None
        self.tunnel: Any = None  # after a WebSocket upgrade: the upstream transport
        self.upgrade_tail = b""  # bytes after an upgrade request's headers
        self.local_port = 0
        self.reading_paused = False
        self.on_drain: Callable[[], None] | None = None  # called when the client drains
        # httptools hands a header over once it is complete: an unterminated one is bounded by
        # counting what arrives while a request's head is incomplete.
        self._in_head = False
        self._head_seen = 0
        self._reset()

    def _reset(self) -> None:
        self._url = b""
        self._headers: dict[str, str] = {}
        self._header_bytes = 0
        self._body: Body | None = None
        self._error = 400

    # asyncio.Protocol
    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.client_ip = peer[0] if peer else ""
        sock = transport.get_extra_info("sockname")
        self.local_port = sock[1] if sock else 0
        if self.listening is not None:
            self.listening.connections.add(self)

    def data_received(self, data: bytes) -> None:
        if self.tunnel is not None:
            self.tunnel.write(data)
            return
        if self._in_head:
            self._head_seen += len(data)
        try:
            self.parser.feed_data(data)
            if self._in_head and self._head_seen > MAX_HEADER_BYTES:
                self._bad_request(431)
        except httptools.HttpParserUpgrade as upgrade:
            # The request asked to switch protocols: what follows its headers is not HTTP.
            # The handler decides (WebSocket tunnel, or an answer and a close).
            self.upgrade_tail = data[upgrade.args[0] :]
            self.reading_paused = True
            self.transport.pause_reading()
        except httptools.HttpParserError:
            self._bad_request(self._error)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self.tunnel is not None:
            self.tunnel.close()
        if self._body is not None and not self._body.done:
            self._body.finish(ConnectionResetError("client closed the connection"))
        if self.current is not None and not self.current.body.done:
            self.current.body.finish(ConnectionResetError("client closed the connection"))
        if self.task is not None and not self.task.done():
            self.task.cancel()
        if self.listening is not None:
            self.listening.lost(self)

    def wind_down(self) -> None:
        """The server drains: close now when idle (no request, not even part of a head),
        else once the request begun is answered (`finished`)."""
        current = self.current
        if current is None and not self._in_head and self.tunnel is None:
            self.close()
        elif current is not None and not current.response_started:
            current.keep_alive = False  # its answer says `connection: close`

    def resume_writing(self) -> None:
        super().resume_writing()
        if self.on_drain is not None:
            self.on_drain()

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._in_head = True
        self._head_seen = 0

    def on_url(self, url: bytes) -> None:
        self._url += url
        if len(self._url) > MAX_TARGET_BYTES:
            self._error = 414
            raise BadRequest(414)
        self._count(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) + len(value) > MAX_FIELD_BYTES:
            self._error = 431  # answered without a byte of the header, which may be a token
            raise BadRequest(431)
        self._count(len(name) + len(value) + 4)
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        seen = self._headers.get(key)
        if seen is None:
            self._headers[key] = text
        elif key == "content-length":
            raise BadRequest(400)  # repeated Content-Length: request smuggling territory
        else:
            self._headers[key] = f"{seen}, {text}"

    def _count(self, n: int) -> None:
        self._header_bytes += n
        if self._header_bytes > MAX_HEADER_BYTES:
            self._error = 431
            raise BadRequest(431)

    def on_headers_complete(self) -> None:
        self._in_head = False
        headers = self._headers
        parser = self.parser
        if "content-length" in headers and "transfer-encoding" in headers:
            raise BadRequest(400)
        length = headers.get("content-length")
        if length is not None and int(length) > self.max_body:
            self._error = 413
            raise BadRequest(413)
        has_body = length not in (None, "0") or "transfer-encoding" in headers
        body = Body(self, done=not has_body)
        self._body = body
        exchange = self.exchange_class(
            self,
            parser.get_method().decode("ascii"),
            self._url,
            headers,
            parser.get_http_version() == "1.1",
            parser.should_keep_alive(),
            body,
            parser.should_upgrade(),
        )
        if self.current is None:
            self._run(exchange)
        else:
            self.pending.append(exchange)

    def on_body(self, chunk: bytes) -> None:
        body = self._body
        if body is not None:
            if body.received + len(chunk) > self.max_body:
                self._error = 413
                raise BadRequest(413)
            body.feed(chunk)

    def on_message_complete(self) -> None:
        if self._body is not None:
            self._body.finish()
        self._reset()

    # running exchanges
    def _run(self, exchange: Exchange) -> None:
        self.current = exchange
        self.task = self.loop.create_task(self._serve(exchange))

    async def _serve(self, exchange: Exchange) -> None:
        try:
            await self.handler(exchange)
        except asyncio.CancelledError:
            self.close()
            return
        except Exception:
            log.exception("edge request failed", extra={"target": exchange.target[:200]})
            if not exchange.response_started and not self.closed:
                exchange.keep_alive = False
                exchange.respond(500, self.errors(500))
            self.close()
            return
        self.finished(exchange)

    def finished(self, exchange: Exchange) -> None:
        """The exchange's response is complete: next request, or close."""
        if self.tunnel is not None:
            return
        if not exchange.body.done:
            exchange.keep_alive = False  # unread body: we cannot find the next request
        draining = self.listening is not None and self.listening.draining
        if not exchange.keep_alive or exchange.upgrade or draining:
            self.close()  # a request pipelined behind it is not begun: never run
            return
        self.current = None
        self.task = None
        if self.pending:
            self._run(self.pending.popleft())

    def _bad_request(self, status: int) -> None:
        """Malformed input: answer (unless a response is under way) and close."""
        body = self._body
        if body is not None and not body.done:
            body.finish(BadRequest(status))
        if self.current is None or not self.current.response_started:
            reason = STATUS_LINES.get(status, "HTTP/1.1 400 Bad Request\r\n")
            payload = self.errors(status)
            self.write(
                f"{reason}content-type: application/json\r\ncontent-length: {len(payload)}\r\n"
                "connection: close\r\n\r\n".encode()
                + payload
            )
        if self.task is not None and not self.task.done():
            self.task.cancel()
        self.close()

    # writing and flow control
    def write(self, data: bytes) -> None:
        if not self.closed:
            self.transport.write(data)

    def pause_reading(self) -> None:
        if not self.reading_paused and not self.closed:
            self.reading_paused = True
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.reading_paused and not self.closed:
            self.reading_paused = False
            self.transport.resume_reading()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.transport.close()


class Listening:
    """A listening server and its open connections."""

    def __init__(self) -> None:
        self.server: asyncio.Server | None = None
        self.connections: set[Connection] = set()
        self.draining = False
        self._emptied: asyncio.Event | None = None

    @property
    def sockets(self) -> Any:
        assert self.server is not None
        return self.server.sockets

    def close(self) -> None:
        """Stop accepting; the open connections stay."""
        if self.server is not None:
            self.server.close()

    async def wait_closed(self) -> None:
        if self.server is not None:
            await self.server.wait_closed()

    def lost(self, conn: Connection) -> None:
        self.connections.discard(conn)
        if self._emptied is not None and not self.connections:
            self._emptied.set()

    async def drain(self, grace: float = DRAIN_SECS) -> int:
        """Stop accepting, close the idle connections, and every other one once the request
        it has begun is answered; after `grace` seconds close what is left (their requests
        fail). The number of connections cut."""
        self.close()
        self.draining = True
        for conn in list(self.connections):
            conn.wind_down()
        if self.connections:
            self._emptied = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace):
                    await self._emptied.wait()
        cut = list(self.connections)
        for conn in cut:
            conn.close()
        if cut:
            log.warning("drain: %d connections still busy after %g s were closed", len(cut),
                        grace)  # fmt: skip
        return len(cut)


async def serve(
    handler: Handler,
    host: str,
    port: int,
    max_body: int,
    *,
    shared: bool = False,
    errors: ErrorBody = error_body,
    connection: type[Connection] = Connection,
) -> Listening:
    """Listen on host:port; `shared`: with SO_REUSEPORT, so that the edge's own worker
    processes share the port (the primary checks first that nobody else holds it)."""
    listening = Listening()

    def accepted() -> Connection:
        conn = connection(handler, max_body, errors)
        conn.listening = listening
        return conn

    loop = asyncio.get_running_loop()
    listening.server = await loop.create_server(
        accepted, host, port, reuse_port=shared, backlog=2048
    )
    return listening
