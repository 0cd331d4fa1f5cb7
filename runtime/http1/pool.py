"""HTTP/1.1 connections to one origin: one `asyncio.Protocol` per connection, parsed by
httptools' response parser, and a keep-alive `Pool` per origin (APISIX's `keepalive_pool`:
size, idle_timeout, requests). The edge's proxy and `client.py` are built on it.

A connection does not buffer the response: it calls its current `Receiver` as the head and each
body chunk arrive, so the proxy can stream them straight to the client.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import httptools

from runtime.http1.flow import FlowControl


class Receiver(Protocol):
    """Who gets an upstream response, as it arrives."""

    def response_head(self, status: int, headers: list[tuple[bytes, bytes]]) -> None: ...
    def response_body(self, chunk: bytes) -> None: ...
    def response_end(self) -> None: ...
    def response_failed(self, exc: BaseException) -> None: ...
    def upgraded(self, tail: bytes) -> None: ...
    def flush(self) -> None: ...


class UpstreamError(Exception):
    """The upstream refused, reset or broke the protocol (502), or timed out (504)."""

    def __init__(self, message: str, *, timeout: bool = False, fresh: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout
        self.fresh = fresh  # nothing of a response arrived: the request may go elsewhere


class UpstreamConnection(FlowControl):
    def __init__(self, pool: Pool) -> None:
        super().__init__()
        self.pool = pool
        self.transport: Any = None
        self.parser = httptools.HttpResponseParser(self)
        self.receiver: Receiver | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.status = 0
        self.head_request = False
        self.got_bytes = False  # any byte of the current response
        self.reusable = False
        self.requests = 0
        self.idle_since = 0.0
        self.last_read = 0.0
        self.tunnel: Any = None  # after a WebSocket upgrade: the client connection

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def begin(self, receiver: Receiver, head_request: bool) -> None:
        """Start one request/response on this connection."""
        self.receiver = receiver
        self.head_request = head_request
        self.got_bytes = False
        self.reusable = False
        self.requests += 1

    def data_received(self, data: bytes) -> None:
        if self.tunnel is not None:
            self.tunnel.write(data)
            return
        self.got_bytes = True
        self.last_read = time.monotonic()
        try:
            self.parser.feed_data(data)
            if self.receiver is not None:
                self.receiver.flush()
        except httptools.HttpParserUpgrade as upgrade:
            receiver, self.receiver = self.receiver, None
            if receiver is not None:
                receiver.upgraded(data[upgrade.args[0] :])
        except httptools.HttpParserError as exc:
            self.fail(UpstreamError(f"invalid response from upstream: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.pool.forget(self)
        if self.tunnel is not None:
            self.tunnel.close()
        if self.receiver is not None:
            self.fail(
                UpstreamError("upstream closed the connection", fresh=not self.got_bytes),
                close=False,
            )

    # httptools callbacks
    def on_message_begin(self) -> None:
        self.headers = []

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            return  # interim response (100 Continue): the real one follows
        self.status = status
        receiver = self.receiver
        if receiver is not None:
            receiver.response_head(status, self.headers)
        if self.head_request or status in (204, 304):
            # No body follows, whatever the headers say; llhttp cannot be told about HEAD, so
            # this message ends here and the next response gets a fresh parser.
            keep_alive = self.parser.should_keep_alive()
            self.parser = httptools.HttpResponseParser(self)
            self._complete(keep_alive)

    def on_body(self, chunk: bytes) -> None:
        if self.receiver is not None:
            self.receiver.response_body(chunk)

    def on_message_complete(self) -> None:
        if 100 <= self.status < 200 or self.receiver is None:
            return
        self._complete(self.parser.should_keep_alive())

    def _complete(self, keep_alive: bool) -> None:
        receiver, self.receiver = self.receiver, None
        self.reusable = keep_alive and not self.closed
        if receiver is not None:
            receiver.response_end()

    def fail(self, exc: UpstreamError, close: bool = True) -> None:
        receiver, self.receiver = self.receiver, None
        if close:
            self.close()
        if receiver is not None:
            receiver.response_failed(exc)

    def timed_out(self) -> None:
        self.fail(UpstreamError("upstream timed out", timeout=True, fresh=not self.got_bytes))

    def close(self) -> None:
        self.reusable = False
        if not self.closed:
            self.closed = True
            self.transport.close()
            self.pool.forget(self)


# Before a new connection: the address to connect to for (host, port), or an UpstreamError.
Resolve = Callable[[str, int], Awaitable[str]]


class Pool:
    """Idle keep-alive connections to one node, most recently used first. `tls`: connect with
    TLS (SNI and certificate checked against `host`); `resolve`: pick (and vet) the address a
    new connection goes to, so that the address checked is the address connected to."""

    def __init__(
        self,
        host: str,
        port: int,
        size: int,
        idle_timeout: float,
        requests: int,
        *,
        tls: ssl.SSLContext | None = None,
        resolve: Resolve | None = None,
    ) -> None:
        self.host, self.port = host, port
        self.size, self.idle_timeout, self.max_requests = size, idle_timeout, requests
        self.tls, self.resolve = tls, resolve
        self.idle: list[UpstreamConnection] = []
        self.opened = 0  # connections made, for tests and metrics

    async def acquire(
        self, connect_timeout: float, *, reuse: bool = True
    ) -> tuple[UpstreamConnection, bool]:
        """A connection: an idle one if any and `reuse` (reused=True), else a new one."""
        now = time.monotonic()
        while reuse and self.idle:
            conn = self.idle.pop()
            if not conn.closed and now - conn.idle_since < self.idle_timeout:
                return conn, True
            conn.close()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(connect_timeout):
                address = (
                    self.host if self.resolve is None else await self.resolve(self.host, self.port)
                )
                _, conn = await loop.create_connection(
                    lambda: UpstreamConnection(self),
                    address,
                    self.port,
                    ssl=self.tls,
                    server_hostname=self.host if self.tls is not None else None,
                )
        except TimeoutError:
            raise UpstreamError("connect timed out", timeout=True, fresh=True) from None
        except ssl.SSLError as exc:
            raise UpstreamError(f"TLS handshake failed: {exc}", fresh=True) from None
        except OSError as exc:
            raise UpstreamError(f"connect failed: {exc}", fresh=True) from None
        self.opened += 1
        return conn, False

    def release(self, conn: UpstreamConnection) -> None:
        if (
            conn.reusable
            and not conn.closed
            and conn.requests < self.max_requests
            and len(self.idle) < self.size
        ):
            conn.idle_since = time.monotonic()
            self.idle.append(conn)
        else:
            conn.close()

    def forget(self, conn: UpstreamConnection) -> None:
        if conn in self.idle:
            self.idle.remove(conn)


class Pools:
    """Every node's pool in one worker, kept across configuration versions."""

    def __init__(self) -> None:
        self.pools: dict[tuple[str, int, int, float, int], Pool] = {}

    def get(self, host: str, port: int, size: int, idle_timeout: float, requests: int) -> Pool:
        key = (host, port, size, idle_timeout, requests)
        pool = self.pools.get(key)
        if pool is None:
            pool = self.pools[key] = Pool(host, port, size, idle_timeout, requests)
        return pool

    def close(self) -> None:
        for pool in self.pools.values():
            for conn in list(pool.idle):
                conn.close()
