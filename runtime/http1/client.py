"""A lean HTTP/1.1 client for a hot path's outbound calls (the AI gateway's providers): the
keep-alive connections of `pool.py` (httptools), TLS for https, responses read as they arrive.

Why not aiohttp's client: here it costs 80 to 125 µs of CPU per request, this one about 30
(`tests/bench/http_client.py`, concurrency 16 and 1). It does what a provider call needs and
nothing more:
- one keep-alive pool per origin; a request that meets a keep-alive connection the server
  had closed (nothing answered) is sent again once on a new one, as browsers do;
- no redirects (a key never travels to another host), no cookies, no proxy from the
  environment, no compression; bodies are bytes with a Content-Length;
- `resolve` vets the address of every new connection (the outbound guard), so the address
  checked is the address connected to;
- one timer per request: `idle_secs` bounds every wait for the next bytes (connect, head,
  each body chunk) and `total_secs`, when given, the whole exchange.

Errors are `ClientError`: `timeout` when a limit passed, `broken` when the response was cut
(or malformed) after its head; otherwise nothing of an answer arrived.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping
from functools import lru_cache
from urllib.parse import urlsplit

from runtime.http1.pool import Pool, Resolve, UpstreamConnection, UpstreamError

HIGH_WATER = 256 * 1024  # pause reading the server while this much body waits unread


class ClientError(Exception):
    def __init__(self, message: str, *, timeout: bool = False, broken: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout
        self.broken = broken


@lru_cache(maxsize=1024)
def split_url(url: str) -> tuple[str, str, int, str, str]:
    """(scheme, host, port, Host header, request target) of an http(s) URL."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise ClientError(f"not an http(s) URL: {url[:200]!r}")
    default = 443 if scheme == "https" else 80
    port = parts.port or default
    host = parts.hostname
    literal = f"[{host}]" if ":" in host else host
    authority = literal if port == default else f"{literal}:{port}"
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return scheme, host, port, authority, target


class Response:
    """One response, fed by its connection (the pool's `Receiver`) and read by the caller."""

    __slots__ = (
        "_chunks",
        "_conn",
        "_deadline",
        "_head",
        "_paused",
        "_pool",
        "_size",
        "_timeout",
        "_timer",
        "_waiter",
        "done",
        "error",
        "headers",
        "status",
    )

    def __init__(
        self, pool: Pool, conn: UpstreamConnection, timeout: float, total: float | None
    ) -> None:
        loop = asyncio.get_running_loop()
        self._pool, self._conn = pool, conn
        self._timeout = timeout
        self._deadline = None if total is None else time.monotonic() + total
        self._head: asyncio.Future[None] = loop.create_future()
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self.status = 0
        self.headers: dict[str, str] = {}
        self.done = False
        self.error: UpstreamError | None = None
        conn.last_read = time.monotonic()
        first = timeout if total is None else min(timeout, total)
        self._timer: asyncio.TimerHandle | None = loop.call_later(first, self._check)

    # --- the timer: silence for `timeout`, or past the deadline -------------------------------

    def _check(self) -> None:
        self._timer = None
        if self.done:
            return
        now = time.monotonic()
        due = self._conn.last_read + self._timeout
        if self._deadline is not None:
            due = min(due, self._deadline)
        if now >= due - 0.001:
            self._conn.timed_out()
        else:
            self._timer = asyncio.get_running_loop().call_later(due - now, self._check)

    def _stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # --- Receiver (called by the connection) --------------------------------------------------

    def response_head(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.status = status
        own: dict[str, str] = {}
        for name, value in headers:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            own[key] = f"{own[key]}, {text}" if key in own else text
        self.headers = own
        if not self._head.done():
            self._head.set_result(None)

    def response_body(self, chunk: bytes) -> None:
        self._chunks.append(chunk)
        self._size += len(chunk)
        if self._size > HIGH_WATER and not self._paused:
            self._paused = True
            self._conn.transport.pause_reading()
        self._wake()

    def response_end(self) -> None:
        self.done = True
        self._stop()
        self._resume()
        self._pool.release(self._conn)  # the body is all here: the connection may serve others
        self._wake()

    def response_failed(self, exc: BaseException) -> None:
        self.done = True
        self._stop()
        error = exc if isinstance(exc, UpstreamError) else UpstreamError(str(exc))
        self.error = error
        if not self._head.done():
            self._head.set_exception(error)
        self._wake()

    def upgraded(self, tail: bytes) -> None:
        self._conn.close()
        self.response_failed(UpstreamError("the server switched protocols"))

    def flush(self) -> None:
        pass

    def _resume(self) -> None:
        if self._paused:
            self._paused = False
            if not self._conn.closed:
                self._conn.transport.resume_reading()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- reading ----------------------------------------------------------------------------

    async def next_chunk(self) -> bytes:
        """The next piece of the body; b"" at its end."""
        while not self._chunks:
            if self.error is not None:
                raise _client_error(self.error, broken=not self.error.timeout)
            if self.done:
                return b""
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        chunk = self._chunks.popleft()
        self._size -= len(chunk)
        if self._size <= HIGH_WATER:
            self._resume()
        return chunk

    async def read(self, limit: int | None = None) -> bytes:
        """The whole body (at most `limit` bytes: the rest is not read, and the connection is
        not reused)."""
        parts: list[bytes] = []
        size = 0
        while chunk := await self.next_chunk():
            parts.append(chunk)
            size += len(chunk)
            if limit is not None and size >= limit:
                self.close()
                return b"".join(parts)[:limit]
        return b"".join(parts) if len(parts) != 1 else parts[0]

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        while chunk := await self.next_chunk():
            yield chunk

    def close(self) -> None:
        """Done with the response: a connection whose response was not read to its end is
        closed (it cannot carry another)."""
        self._stop()
        if not self.done:
            self.done = True
            self._conn.receiver = None
            self._conn.close()


def _client_error(exc: UpstreamError, *, broken: bool = False) -> ClientError:
    return ClientError(str(exc), timeout=exc.timeout, broken=broken)


class HttpClient:
    """Requests to any number of origins, each with its keep-alive pool."""

    def __init__(
        self,
        *,
        pool_size: int = 256,
        idle_timeout: float = 60.0,
        max_requests: int = 10_000,
        resolve: Resolve | None = None,
        user_agent: str = "strata",
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.pool_size, self.idle_timeout, self.max_requests = pool_size, idle_timeout, max_requests
        self.resolve = resolve
        self.user_agent = user_agent
        self._pools: dict[tuple[str, str, int], Pool] = {}
        self._tls = tls  # the system's trust store unless given

    def _pool(self, scheme: str, host: str, port: int) -> Pool:
        pool = self._pools.get((scheme, host, port))
        if pool is None:
            tls = None
            if scheme == "https":
                if self._tls is None:
                    self._tls = ssl.create_default_context()
                tls = self._tls
            pool = Pool(
                host,
                port,
                self.pool_size,
                self.idle_timeout,
                self.max_requests,
                tls=tls,
                resolve=self.resolve,
            )
            self._pools[(scheme, host, port)] = pool
        return pool

    async def request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes = b"",
        *,
        idle_secs: float,
        total_secs: float | None = None,
    ) -> Response:
        """Send the request; returns once the response's head has arrived (its body is read
        from the `Response`, which the caller closes)."""
        scheme, host, port, authority, target = split_url(url)
        lines = [f"{method} {target} HTTP/1.1\r\nhost: {authority}\r\n"]
        for name, value in headers.items():
            if "\n" in value or "\r" in value or "\n" in name or "\r" in name:
                raise ClientError(f"header {name!r} contains a line break")
            lines.append(f"{name}: {value}\r\n")
        if "user-agent" not in headers and "User-Agent" not in headers:
            lines.append(f"user-agent: {self.user_agent}\r\n")
        lines.append(f"content-length: {len(body)}\r\n\r\n" if body or method != "GET" else "\r\n")
        message = "".join(lines).encode("latin-1") + body
        pool = self._pool(scheme, host, port)
        for attempt in (0, 1):
            try:
                conn, reused = await pool.acquire(idle_secs)
            except UpstreamError as exc:
                raise _client_error(exc) from None
            response = Response(pool, conn, idle_secs, total_secs)
            conn.begin(response, method == "HEAD")
            conn.transport.write(message)
            try:
                await response._head
            except UpstreamError as exc:
                if exc.fresh and reused and not exc.timeout and attempt == 0:
                    continue  # a keep-alive connection the server had closed: once more
                raise _client_error(exc) from None
            except BaseException:
                response.close()  # cancelled: this connection is mid-exchange
                raise
            return response
        raise AssertionError("unreachable")

    def close(self) -> None:
        for pool in self._pools.values():
            for conn in list(pool.idle):
                conn.close()
        self._pools.clear()


__all__ = ["ClientError", "HttpClient", "Response", "split_url"]
