"""Client sessions to upstream MCP servers, kept open and shared by every call (the `mcp`
SDK's `Client` over streamable HTTP).

One `Connection` per server (and URL and protocol era) is opened on first use and then
multiplexes every call to that server: JSON-RPC ids tell the answers apart and httpx2 keeps
its HTTP connections alive, so there is no handshake per call. The SDK's client lives inside
an anyio task group that must be entered and left by one task, so each connection has an
owner task that opens it, waits until it is closed, and closes it; callers only send
requests through it.

Protocol era per server (`protocol` of the server record): `auto` lets the SDK probe
`server/discover` (2026-07-28, stateless) and fall back to the `initialize` handshake;
`2025-11-25` forces the handshake (`Mcp-Session-Id`, `MCP-Protocol-Version`); `2026-07-28`
adopts the stateless revision without a probe. JSON and SSE answers are both read by the SDK.

Per-call HTTP headers (the upstream's bearer token, the caller's extra headers) travel in a
context variable: the SDK sends each request from a task that runs in the sending task's
context, so an httpx2 request hook sees the headers of exactly the call it is sending. The
same hook records the HTTP statuses a call saw (a 401 makes the forwarder renew the token)
and the `Mcp-Session-Id` the handshake gave.

The SDK serves the handshake, discovery and `tools/list`; `tools/call`, the hot path, goes
through `tools_call.py` on the same negotiated session: `stamp()` is the SDK's own
per-request stamp, `session_id` the handshake's session, `http` a keep-alive pool of plain
HTTP/1.1 connections (httptools, the edge's) to the address the outbound guard checked when the
connection was opened (TLS to the URL's host name for https).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from runtime.config import VERSION
from runtime.http1.pool import Pool
from runtime.outbound import check_outbound_url

if TYPE_CHECKING:  # the SDK is imported when the first session opens (`Connection._own`)
    import httpx2
    from mcp import Client
    from mcp.shared.dispatcher import CallOptions

log = logging.getLogger(__name__)

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
PROTOCOLS = ("auto", LEGACY, MODERN)
MAX_SSE_EVENT_BYTES = 16 * 1024 * 1024  # a larger single answer is refused, not buffered
KEEPALIVE_CONNECTIONS = 64  # idle tools/call connections kept per server
KEEPALIVE_IDLE_SECS = 4.0  # under common servers' keep-alive timeouts (uvicorn's 5 s)


@dataclass
class CallState:
    """What one call sends beyond the MCP body, and what its HTTP exchanges answered."""

    headers: Mapping[str, str] = field(default_factory=dict)
    statuses: list[int] = field(default_factory=list)


_CALL: contextvars.ContextVar[CallState | None] = contextvars.ContextVar("mcp_call", default=None)


async def _stamp_request(request: httpx2.Request) -> None:
    state = _CALL.get()
    if state is not None:
        request.headers.update(state.headers)


async def _record_response(response: httpx2.Response) -> None:
    state = _CALL.get()
    if state is not None:
        state.statuses.append(response.status_code)


def sdk_mode(protocol: str) -> str:
    """The SDK's `mode` for a server's protocol setting."""
    return "legacy" if protocol == LEGACY else protocol


class Connection:
    """One open MCP client session to one upstream server."""

    def __init__(self, url: str, protocol: str, timeout: float, *, address: str) -> None:
        """`address`: the IP address the outbound guard allowed for the URL's host."""
        self.url = url
        self.protocol = protocol
        self.timeout = timeout
        self.client: Client | None = None
        self.session_id: str | None = None  # the handshake's `Mcp-Session-Id` (2025-11-25)
        parts = urlsplit(url)
        tls = parts.scheme == "https"
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.host_header = parts.netloc.rsplit("@", 1)[-1]

        # tools/call's HTTP connections (`tools_call.py`), kept alive between calls
        async def vetted(host: str, port: int) -> str:
            return address  # connect where the guard looked, TLS checked against the name

        self.http = Pool(
            parts.hostname or address,
            parts.port or (443 if tls else 80),
            KEEPALIVE_CONNECTIONS,
            KEEPALIVE_IDLE_SECS,
            1_000_000,
            tls=ssl.create_default_context() if tls else None,
            resolve=vetted,
        )
        self._ready: asyncio.Future[None] | None = None
        self._close = asyncio.Event()
        self._owner: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return self._owner is not None and not self._owner.done() and not self._close.is_set()

    @property
    def protocol_version(self) -> str | None:
        return self.client.protocol_version if self.client is not None else None

    def stamp(self, message: dict[str, Any]) -> dict[str, str]:
        """Stamp a JSON-RPC request as the SDK's session stamps its own (the negotiated
        version; on 2026-07-28 the `_meta` envelope, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`):
        adds to `message` in place, returns the HTTP headers to send with it."""
        assert self.client is not None
        options: CallOptions = {}
        self.client.session._stamp(message, options)  # the SDK's, so both eras stay its own
        return dict(options.get("headers") or {})

    def protocol_headers(self) -> dict[str, str]:
        """The negotiated version header, for a message the session's stamp does not cover
        (a response to a server request)."""
        version = self.protocol_version
        return {"MCP-Protocol-Version": version} if version else {}

    async def _note_session(self, response: httpx2.Response) -> None:
        session_id = response.headers.get("mcp-session-id")
        if session_id:
            self.session_id = session_id

    async def open(self, headers: Mapping[str, str]) -> None:
        """Connect and negotiate; raises what the handshake raised. The handshake's requests
        carry `headers` (the upstream's bearer token)."""
        self._ready = asyncio.get_running_loop().create_future()
        context = contextvars.copy_context()
        context.run(_CALL.set, CallState(headers=dict(headers)))
        self._owner = asyncio.create_task(self._own(), name=f"mcp:{self.url}", context=context)
        try:
            async with asyncio.timeout(self.timeout):
                await asyncio.shield(self._ready)
        except BaseException:
            await self.close()
            raise

    async def _own(self) -> None:
        assert self._ready is not None
        # The SDK (and httpx2, pydantic, its types: about 27 MB resident) only once a
        # session is opened: a gateway that forwards to no MCP server never loads it.
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
        from mcp_types import Implementation

        http = httpx2.AsyncClient(
            timeout=httpx2.Timeout(self.timeout),
            follow_redirects=False,
            trust_env=False,
            event_hooks={
                "request": [_stamp_request],
                "response": [_record_response, self._note_session],
            },
        )
        try:
            async with (
                http,
                Client(
                    streamable_http_client(
                        self.url, http_client=http, max_sse_event_size=MAX_SSE_EVENT_BYTES
                    ),
                    mode=sdk_mode(self.protocol),
                    read_timeout_seconds=self.timeout,
                    client_info=Implementation(name="strata-agent-gateway", version=VERSION),
                    cache=None,  # tool sets are compared by the gateway, never served stale
                ) as client,
            ):
                self.client = client
                self._ready.set_result(None)
                await self._close.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
                self._ready.exception()  # retrieved: open() re-raises it
            elif not isinstance(exc, asyncio.CancelledError):
                log.info("MCP connection to %s ended: %s", self.url, exc)
        finally:
            self._close.set()

    async def close(self) -> None:
        self._close.set()
        if self._owner is not None and not self._owner.done():
            try:
                async with asyncio.timeout(self.timeout):
                    await asyncio.shield(self._owner)
            except (TimeoutError, Exception):
                self._owner.cancel()
        for idle in list(self.http.idle):
            idle.close()


def bind_call(state: CallState) -> contextvars.Token[CallState | None]:
    """Make `state` the current call's (reset with `unbind_call`)."""
    return _CALL.set(state)


def unbind_call(token: contextvars.Token[CallState | None]) -> None:
    _CALL.reset(token)


class UpstreamPool:
    """Open connections by server; opened on demand, replaced when dead or forgotten."""

    def __init__(self, timeout: float, *, development: bool) -> None:
        self.timeout = timeout
        self.development = development
        self._connections: dict[tuple[str, str, str], Connection] = {}
        self._locks: dict[tuple[str, str, str], asyncio.Lock] = {}
        self.opened = 0  # connections opened so far (handshakes), for tests and metrics

    @staticmethod
    def _key(server: Mapping[str, Any]) -> tuple[str, str, str]:
        return (server["id"], server["url"], server.get("protocol") or "auto")

    async def get(self, server: Mapping[str, Any], headers: Mapping[str, str]) -> Connection:
        key = self._key(server)
        conn = self._connections.get(key)
        if conn is not None and conn.alive:
            return conn
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            conn = self._connections.get(key)
            if conn is not None and conn.alive:
                return conn
            if conn is not None:
                await conn.close()
            # The URL was checked at registration; its name may resolve elsewhere now.
            addresses = await check_outbound_url(key[1], development=self.development, field="url")
            conn = Connection(key[1], key[2], self.timeout, address=str(addresses[0]))
            await conn.open(headers)
            self.opened += 1
            self._connections[key] = conn
            return conn

    async def discard(self, conn: Connection) -> None:
        """Drop a connection the upstream forgot or that failed; the next call reopens."""
        for key, known in list(self._connections.items()):
            if known is conn:
                del self._connections[key]
        await conn.close()

    async def forget_server(self, server_id: str) -> None:
        for key in [k for k in self._connections if k[0] == server_id]:
            await self._connections.pop(key).close()

    async def close(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        for conn in connections:
            await conn.close()
