"""Forwarding one request upstream and streaming the answer back.

Forwarding picks a node, takes a keep-alive connection from its pool and writes the request
head; the request body (if any) is pumped chunk by chunk as it arrives, beside the wait for
the response. The response is never buffered: the upstream connection hands its head and body
chunks to `Forward`, which runs `header_filter`/`body_filter` and writes them to the client,
pausing the upstream socket while the client's socket is full. A failure before any response
byte goes to another node as APISIX does (`retries`, default nodes - 1, within `retry_timeout`;
a sent request only if its method is idempotent; its body read again from the copy kept of
its first 64 KiB, so a longer body that began streaming never), then 502,
or 504 for a timeout. A kept-alive connection the upstream had closed is replaced once, on the
same node; a timeout is never a reason to send a request again on the same node.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from gateways.edge.dataplane.chain import Chain
from gateways.edge.dataplane.reply import headers_out, upstream_failed
from gateways.edge.dataplane.upstream import Node, Timeouts, Upstream
from gateways.edge.hop_by_hop import HOP_BY_HOP, RESPONSE_SKIP
from gateways.edge.plugin import RequestContext
from runtime.http1.pool import UpstreamConnection, UpstreamError
from runtime.http1.server import Exchange

if TYPE_CHECKING:
    from gateways.edge.dataplane import DataPlane
    from gateways.edge.dataplane.compile import RouteTarget

# RFC 9110 9.2.2: sending one of these twice has the effect of sending it once.
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})


def request_head(
    ex: Exchange, ctx: RequestContext, up: Upstream, node: Node, uri: str, websocket: bool
) -> bytes:
    """The request line and headers sent upstream."""
    headers = ctx.headers
    changes = ctx.upstream_headers
    if up.pass_host == "pass":
        host = changes.get("host") or ctx.host
    # (a plugin's "host" change is the Host sent under pass_host "pass")
    elif up.pass_host == "node":
        host = node.host_header
    else:
        host = up.upstream_host
    lines = [f"{ctx.method} {uri} HTTP/1.1\r\nhost: {host}\r\n"]
    skip = HOP_BY_HOP if ctx.body is None else HOP_BY_HOP | {"content-length"}
    connection = headers.get("connection")
    if connection is not None and connection.lower() not in ("keep-alive", "close", "upgrade"):
        skip = skip | {t.strip().lower() for t in connection.split(",")}  # named hop-by-hop
    for name, value in headers.items():
        if name not in skip and name not in changes:
            lines.append(f"{name}: {value}\r\n")
    for name, change in changes.items():
        if change is not None and name not in HOP_BY_HOP:
            lines.append(f"{name}: {change}\r\n")
    # As APISIX: the client address appended to X-Forwarded-For, X-Real-IP the client
    # address, X-Forwarded-Proto/-Host/-Port kept from the client when sent, else ours.
    forwarded_for = headers.get("x-forwarded-for")
    client = ctx.client_ip
    lines.append(
        f"x-forwarded-for: {forwarded_for + ', ' + client if forwarded_for else client}\r\n"
        f"x-real-ip: {client}\r\n"
        f"x-forwarded-proto: {headers.get('x-forwarded-proto') or ctx.scheme}\r\n"
        f"x-forwarded-host: {headers.get('x-forwarded-host') or ctx.host}\r\n"
        f"x-forwarded-port: {headers.get('x-forwarded-port') or ex.conn.local_port}\r\n"
    )
    if websocket:
        lines.append(f"connection: upgrade\r\nupgrade: {headers.get('upgrade', 'websocket')}\r\n")
    elif ctx.body is not None:
        if ctx.body or ctx.method not in ("GET", "HEAD", "DELETE", "OPTIONS"):
            lines.append(f"content-length: {len(ctx.body)}\r\n")
    elif "transfer-encoding" in headers:
        lines.append("transfer-encoding: chunked\r\n")
    lines.append("\r\n")
    return "".join(lines).encode("latin-1")


class Forward:
    """Receives one upstream response (`pool.Receiver`) and streams it to the client."""

    __slots__ = (
        "chain",
        "conn",
        "ctx",
        "done",
        "ex",
        "has_body",
        "head",
        "head_sent",
        "sent_at",
        "timeouts",
        "timer",
        "upstream_status",
        "websocket",
    )

    def __init__(
        self,
        ex: Exchange,
        ctx: RequestContext,
        chain: Chain,
        conn: UpstreamConnection,
        timeouts: Timeouts,
        websocket: bool,
    ) -> None:
        self.ex, self.ctx, self.chain, self.conn = ex, ctx, chain, conn
        self.timeouts = timeouts
        self.websocket = websocket
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.head_sent = False
        self.has_body = True
        self.upstream_status = 0  # what the upstream answered (header_filter may change ctx's)
        self.head = b""  # the response head, written with the first body bytes
        self.sent_at = 0.0
        self.timer: asyncio.TimerHandle | None = None

    def arm(self) -> None:
        """Start the read timeout: it fires when the upstream is silent for `read` seconds."""
        self.conn.last_read = self.sent_at = time.monotonic()
        self.timer = asyncio.get_running_loop().call_later(self.timeouts.read, self._check)

    def _check(self) -> None:
        idle = time.monotonic() - self.conn.last_read
        if self.done.done():
            return
        if idle >= self.timeouts.read - 0.001:
            self.conn.timed_out()
        else:
            self.timer = asyncio.get_running_loop().call_later(
                self.timeouts.read - idle, self._check
            )

    def stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def response_head(self, status: int, raw: list[tuple[bytes, bytes]]) -> None:
        ctx, ex = self.ctx, self.ex
        ctx.upstream_latency = time.monotonic() - self.sent_at
        ctx.status = self.upstream_status = status
        headers: dict[str, str] = {}
        cookies: list[tuple[str, str]] | None = None
        for raw_name, raw_value in raw:
            name = raw_name.decode("latin-1").lower()
            value = raw_value.decode("latin-1")
            if name in RESPONSE_SKIP and status != 101:
                continue
            if name in headers:
                if name == "set-cookie":  # cannot be joined: sent as separate lines
                    cookies = cookies or []
                    cookies.append((name, value))
                else:
                    headers[name] = f"{headers[name]}, {value}"
            else:
                headers[name] = value
        ctx.response_headers = headers
        for header_filter in self.chain.header_filter:
            header_filter(ctx)
        headers = ctx.response_headers
        length = headers.pop("content-length", None)
        if status == 101:
            self.head = ex.head(101, headers, None, cookies, body=False)
        else:
            status = ctx.status  # as the header filters left it (response-rewrite)
            self.has_body = has_body = ex.method != "HEAD" and status not in (204, 304)
            sized = int(length) if length is not None and not self.chain.body_filter else None
            if not has_body and length is not None:
                sized = int(length)
            self.head = ex.head(status, headers_out(headers), sized, cookies, body=has_body)
        self.head_sent = True

    def response_body(self, chunk: bytes) -> None:
        for body_filter in self.chain.body_filter:
            chunk = body_filter(self.ctx, chunk, False)
        if not self.has_body:
            return  # a header filter made it a 204/304: the upstream's body is dropped
        self.ctx.bytes_sent += len(chunk)
        ex = self.ex
        ex.write(chunk, self.head)
        self.head = b""
        if ex.conn.write_paused:  # the client is slower: stop reading the upstream for now
            transport = self.conn.transport
            transport.pause_reading()
            ex.conn.on_drain = transport.resume_reading

    def response_end(self) -> None:
        self.stop_timer()
        if self.chain.body_filter and not self.websocket:
            tail = b""
            for body_filter in self.chain.body_filter:  # eof: buffering filters flush
                tail = body_filter(self.ctx, tail, True)
            if tail and self.has_body:
                self.ctx.bytes_sent += len(tail)
                self.ex.write(tail, self.head)
                self.head = b""
        self.ex.end(self.head)
        self.head = b""
        self.ex.conn.on_drain = None
        if not self.done.done():
            self.done.set_result(None)

    def response_failed(self, exc: BaseException) -> None:
        self.stop_timer()
        self.ex.conn.on_drain = None
        if self.head_sent:
            self.ex.conn.close()  # mid-body: the client must see a truncated response
        if not self.done.done():
            self.done.set_exception(exc)

    def flush(self) -> None:
        """The end of what the upstream sent for now: the head goes out even without body."""
        if self.head:
            self.ex.conn.write(self.head)
            self.head = b""

    def upgraded(self, tail: bytes) -> None:
        """The upstream switched protocols (101): from now on, bytes flow both ways as is."""
        self.stop_timer()
        self.flush()
        client = self.ex.conn
        upstream = self.conn
        upstream.tunnel = client
        client.tunnel = upstream.transport
        if tail:
            client.write(tail)
        leftover = client.upgrade_tail
        if leftover:
            upstream.transport.write(leftover)
        client.resume_reading()
        if not self.done.done():
            self.done.set_result(None)


async def forward(
    dp: DataPlane,
    ex: Exchange,
    ctx: RequestContext,
    up: Upstream,
    rt: RouteTarget,
    chain: Chain,
    raw_path: str,
    query: str,
) -> None:
    timeouts = rt.timeouts if up is rt.upstream else up.timeouts
    uri = ctx.upstream_uri or (f"{raw_path}?{query}" if query else raw_path)
    websocket = ex.upgrade and rt.websocket and ex.headers.get("upgrade", "").lower() == "websocket"
    buffered = ctx.body  # a plugin read (or replaced) the whole body: it is sent from here
    has_body = bool(buffered) if buffered is not None else not ex.body.done or ex.body.received > 0
    chunked = buffered is None and "transfer-encoding" in ex.headers
    tried: list[Node] = []
    # APISIX's retry rules (nginx's proxy_next_upstream "error timeout"): another node is
    # tried after a connect failure, a reset or a timeout before any response byte, at most
    # `retries` times and, with `retry_timeout`, only within that many seconds of the first
    # try; a request that was sent goes to another node only when its method is idempotent
    # (nginx's default, without `non_idempotent`), with its body read again from what was kept
    # of it (`Body.rewind`: up to REPLAY_BYTES; a longer body that began streaming never is).
    deadline = time.monotonic() + up.retry_timeout if up.retry_timeout > 0 else None
    may_resend = ctx.method in IDEMPOTENT
    stale: Node | None = None  # a node whose kept-alive connection was found closed
    while True:
        node = stale or up.pick(ctx, tried)
        reuse, stale = stale is None, None
        ctx.vars["upstream_addr"] = node.address  # the node the log phase reports
        try:
            conn, reused = await node.pool.acquire(timeouts.connect, reuse=reuse)
        except UpstreamError as exc:
            _report(up, node, exc)
            tried.append(node)
            if len(tried) <= up.retries and _in_time(deadline) and ex.body.rewind():
                continue  # nothing was sent: any method may go to another node
            return upstream_failed(ex, ctx, chain, exc)
        receiver = Forward(ex, ctx, chain, conn, timeouts, websocket)
        conn.begin(receiver, ctx.method == "HEAD")  # the method sent (proxy-rewrite)
        conn.transport.write(request_head(ex, ctx, up, node, uri, websocket))
        sender = None
        if buffered is not None:
            if buffered:
                conn.transport.write(buffered)
        elif has_body:
            sender = asyncio.get_running_loop().create_task(
                send_body(ex, conn, receiver, chunked, timeouts.send)
            )
        receiver.arm()
        try:
            await receiver.done
        except UpstreamError as exc:
            if sender is not None:
                sender.cancel()
            if receiver.head_sent:
                _report(up, node, exc)
                return
            if _closed_before_reading(exc, reused) and _in_time(deadline) and ex.body.rewind():
                stale = node  # once more on a new connection to it, not counted as a retry
                continue
            _report(up, node, exc)
            tried.append(node)
            if (
                exc.fresh
                and may_resend
                and len(tried) <= up.retries
                and _in_time(deadline)
                and ex.body.rewind()
            ):
                continue
            return upstream_failed(ex, ctx, chain, exc)
        finally:
            receiver.stop_timer()
        if sender is not None and not sender.done():
            sender.cancel()  # the upstream answered before the whole body was sent
            conn.reusable = False
        up.report_status(node, receiver.upstream_status)
        if websocket and conn.tunnel is not None:
            return  # the tunnel lives on; both sockets close together
        node.pool.release(conn)
        return


def _closed_before_reading(exc: UpstreamError, reused: bool) -> bool:
    """A kept-alive connection the upstream closed without a byte of answer: it had closed it
    while idle, and the request never reached it (the rule of runtime/http1/client.py). A
    timeout is never that: the upstream has the request and may be running it."""
    return reused and exc.fresh and not exc.timeout


def _in_time(deadline: float | None) -> bool:
    return deadline is None or time.monotonic() < deadline


def _report(up: Upstream, node: Node, exc: UpstreamError) -> None:
    if exc.timeout:
        up.report_timeout(node)
    else:
        up.report_tcp_failure(node)


async def send_body(
    ex: Exchange, conn: UpstreamConnection, receiver: Forward, chunked: bool, send_timeout: float
) -> None:
    """Pump the client's body to the upstream as it arrives (flow-controlled both ways)."""
    try:
        if ex.wants_continue:
            ex.wants_continue = False  # once, also when the body is sent again to another node
            ex.conn.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = ex.body
        write = conn.transport.write
        while True:
            chunk = await body.read()
            if not chunk:
                break
            write(b"%x\r\n%b\r\n" % (len(chunk), chunk) if chunked else chunk)
            if conn.write_paused:
                async with asyncio.timeout(send_timeout):
                    await conn.drain()
        if chunked:
            write(b"0\r\n\r\n")
    except TimeoutError:
        conn.fail(UpstreamError("sending the body upstream timed out", timeout=True))
    except ConnectionError as exc:
        receiver.response_failed(UpstreamError(str(exc)))
        conn.close()
