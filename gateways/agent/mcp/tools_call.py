"""The hot path's `tools/call`: one JSON-RPC POST on a kept-alive HTTP/1.1 connection, on the
MCP session the SDK negotiated (`upstream.Connection`), without the SDK's per-message machinery
(anyio task groups, httpx2, pydantic models) or aiohttp's client: measured here, those cost
most of a forwarded call's CPU (an aiohttp POST about 215 µs, this one about 45 µs).

What is sent is what the SDK would send: its own per-request stamp (`Connection.stamp`: the
negotiated `MCP-Protocol-Version`; on 2026-07-28 the `_meta` envelope and the `Mcp-Method` /
`Mcp-Name` / `Mcp-Param-*` headers), the `Mcp-Session-Id` the handshake gave (2025-11-25), and
`Accept: application/json, text/event-stream`. The answer may be JSON or server-sent events;
on a stream the events are read until the JSON-RPC response with this request's id (a
notification is skipped; a server request is answered with a JSON-RPC error, since the gateway
relays none).

Every way the upstream can misbehave ends in `McpUpstreamError` (502) with a reason: an HTTP
error, a redirect, `202` for a request, a foreign content type, a body that is not the JSON-RPC
response to this request, a stream that ends without one, a result over `max_bytes`
(`upstream_result_too_large`), a timeout, a dropped connection. Its `sent` says whether the
request may have reached the upstream (the tool may have run). Two answers are for the caller,
since they say the request was not run: `SessionForgotten` (404 on a known session: reopen,
resend once) and `Unauthorized` (401: renew the token, resend once). A kept-alive connection
the upstream closed while idle is replaced and the request written again, as HTTP clients do
when not a byte of an answer came.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Mapping
from typing import Any

from gateways.agent.mcp.errors import McpUpstreamError
from gateways.agent.mcp.upstream import Connection
from runtime import json_codec
from runtime.http1.pool import UpstreamConnection, UpstreamError

ACCEPT = "application/json, text/event-stream"
_ids = itertools.count(1)  # `strata-N`: never one of the SDK's integer ids on one session


class SessionForgotten(Exception):
    """404 on a request that carried `Mcp-Session-Id`: the upstream lost the session."""


class Unauthorized(Exception):
    """401: the upstream refused the bearer token."""


def failure(
    message: str, *, sent: bool, error: str = "upstream_error", **extra: Any
) -> McpUpstreamError:
    exc = McpUpstreamError(message, error=error, **extra)
    exc.sent = sent
    return exc


async def call_tool(
    conn: Connection,
    tool_name: str,
    arguments: Mapping[str, Any],
    headers: Mapping[str, str],
    *,
    timeout: float,  # noqa: ASYNC109  (the whole exchange, stream included)
    max_bytes: int,
    server_id: str,
) -> dict[str, Any]:
    """The `result` of one `tools/call` (a JSON object), or raises as the module says."""
    rpc_id = f"strata-{next(_ids)}"
    message: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": rpc_id,
        "method": "tools/call",
        "params": {"name": tool_name, "arguments": arguments},
    }
    where = f"MCP server {server_id!r}"
    request = _request(conn, message, headers, where)
    answer = _Answer(conn, rpc_id, where, max_bytes)
    try:
        async with asyncio.timeout(timeout):
            return await _exchange(conn, request, answer, where)
    except TimeoutError:
        raise failure(f"{where} did not answer tools/call within {timeout:g} s",
                      sent=answer.written) from None  # fmt: skip
    finally:
        answer.finish()


def _request(
    conn: Connection, message: dict[str, Any], headers: Mapping[str, str], where: str
) -> bytes:
    stamped = conn.stamp(message)  # adds the 2026-07-28 `_meta` to `message`
    body = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
    fields = {"Accept": ACCEPT, "Content-Type": "application/json", **stamped}
    if conn.session_id:
        fields["Mcp-Session-Id"] = conn.session_id
    fields.update(headers)
    lines = [f"POST {conn.target} HTTP/1.1\r\nHost: {conn.host_header}\r\n"]
    for name, value in fields.items():
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
            raise failure(f"{where}: header {name!r} has a line break", sent=False)
        lines.append(f"{name}: {value}\r\n")
    lines.append(f"Content-Length: {len(body)}\r\n\r\n")
    try:
        return "".join(lines).encode("latin-1") + body
    except UnicodeEncodeError:
        raise failure(f"{where}: a header is not latin-1 text", sent=False) from None


async def _exchange(
    conn: Connection, request: bytes, answer: _Answer, where: str
) -> dict[str, Any]:
    while True:
        try:
            http, reused = await conn.http.acquire(conn.timeout)
        except UpstreamError as exc:  # no connection: nothing was sent
            raise failure(f"{where} is unreachable ({exc})", sent=False) from None
        answer.start(http)
        http.begin(answer, head_request=False)
        http.transport.write(request)
        answer.written = True
        try:
            return await answer.done
        except UpstreamError as exc:
            if exc.fresh and reused:  # closed while idle, before reading the request
                answer.written = False
                continue
            raise failure(f"{where} dropped the connection ({exc})", sent=True) from None


class _Answer:
    """Receives one upstream response (the edge pool's `Receiver`): the JSON body, or the
    event stream read event by event, bounded by `max_bytes`."""

    def __init__(self, conn: Connection, rpc_id: str, where: str, max_bytes: int) -> None:
        self.conn, self.rpc_id, self.where, self.max_bytes = conn, rpc_id, where, max_bytes
        self.http: UpstreamConnection | None = None
        self.written = False
        self.done: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.stream = False
        self.chunks: list[bytes] = []
        self.size = 0
        self.pending = b""  # the stream's incomplete line
        self.data: list[bytes] = []  # the current event's `data` lines
        self.drain = False  # answered early: read the stream to its end, then reuse

    def start(self, http: UpstreamConnection) -> None:
        self.http = http
        self.done = asyncio.get_running_loop().create_future()
        self.stream, self.chunks, self.size, self.pending, self.data = False, [], 0, b"", []

    def finish(self) -> None:
        """The call is over (answered, failed, timed out or cancelled): a connection whose
        response ended goes back to the pool; one still answering is read to its end first
        (within the timeout) when the answer came early in a stream, else closed."""
        http = self.http
        if http is None or http.closed:
            return
        if http.receiver is None:  # the response ended
            if http.reusable:
                self.conn.http.release(http)
            else:
                http.close()
        elif self.done.done() and not self.done.cancelled() and self.done.exception() is None:
            self.drain = True  # response_end releases it
            asyncio.get_running_loop().call_later(self.conn.timeout, self._give_up, http)
        else:
            http.close()  # a late answer must not meet the next request

    def _give_up(self, http: UpstreamConnection) -> None:
        if http.receiver is self:
            http.close()

    # --- the pool's Receiver ---------------------------------------------------------------

    def response_head(self, status: int, raw: list[tuple[bytes, bytes]]) -> None:
        headers = {k.lower(): v for k, v in raw}
        kind = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        length = headers.get(b"content-length")
        if status == 404 and self.conn.session_id:
            return self._stop(SessionForgotten())
        if status == 401:
            return self._stop(Unauthorized())
        if status >= 300 or status == 202:
            return self._stop(_status_failure(status, self.where))
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            return self._stop(_too_large(self.where, self.max_bytes))
        if kind == b"text/event-stream":
            self.stream = True
        elif kind != b"application/json":
            name = kind.decode("latin-1") or "none"
            self._stop(failure(f"{self.where} answered tools/call with content type {name!r}",
                               sent=True))  # fmt: skip

    def response_body(self, chunk: bytes) -> None:
        if self.done.done():
            return
        self.size += len(chunk)
        if self.size > self.max_bytes:
            return self._stop(_too_large(self.where, self.max_bytes))
        if not self.stream:
            self.chunks.append(chunk)
            return
        *lines, self.pending = (self.pending + chunk).split(b"\n")
        for line in lines:
            self._line(line.removesuffix(b"\r"))
            if self.done.done():
                return

    def response_end(self) -> None:
        if self.drain:
            http = self.http
            if http is not None and http.reusable and not http.closed:
                self.conn.http.release(http)
            return
        if self.done.done():
            return
        if self.stream:
            self._line(self.pending)
            self._line(b"")
            if not self.done.done():
                self._stop(failure(f"{self.where} ended its event stream without answering "
                                   "tools/call", sent=True))  # fmt: skip
            return
        self._settle(self._decode(b"".join(self.chunks)))

    def response_failed(self, exc: BaseException) -> None:
        if not self.done.done():
            self.done.set_exception(exc)

    def upgraded(self, tail: bytes) -> None:
        self._stop(failure(f"{self.where} switched protocols", sent=True))

    def flush(self) -> None:
        pass

    # --- the answer ------------------------------------------------------------------------

    def _line(self, line: bytes) -> None:
        """One line of the event stream: `data` lines gather, an empty line ends the event
        (`event:`, `id:`, `retry:` and `:` comments carry nothing this call needs)."""
        if line.startswith(b"data:"):
            value = line[5:]
            self.data.append(value[1:] if value.startswith(b" ") else value)
        elif not line and self.data:
            event, self.data = b"\n".join(self.data), []
            message = self._decode(event)
            if self.done.done():
                return
            if isinstance(message, dict) and message.get("id") == self.rpc_id:
                self._settle(message)
            elif isinstance(message, dict) and "method" in message and "id" in message:
                asyncio.get_running_loop().create_task(_refuse(self.conn, message))

    def _decode(self, raw: bytes) -> Any:
        try:
            return json_codec.loads(raw)  # within the codec's limits (depth)
        except ValueError:
            self._stop(failure(f"{self.where} answered tools/call with something that is not "
                               "JSON", sent=True))  # fmt: skip
            return None

    def _settle(self, message: Any) -> None:
        if self.done.done():
            return
        try:
            self.done.set_result(_result(message, self.rpc_id, self.where))
        except McpUpstreamError as exc:
            self.done.set_exception(exc)

    def _stop(self, exc: BaseException) -> None:
        """Fail the call now; the connection carries a response that will not be read."""
        if not self.done.done():
            self.done.set_exception(exc)
        if self.http is not None:
            self.http.close()


def _result(message: Any, rpc_id: str, where: str) -> dict[str, Any]:
    """The CallToolResult of the JSON-RPC response, checked for the fields relied on."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        raise failure(f"{where} answered tools/call with no JSON-RPC 2.0 message", sent=True)
    if message.get("id") != rpc_id:
        raise failure(f"{where} answered tools/call with an answer to another request", sent=True)
    error = message.get("error")
    if error is not None:
        code = error.get("code") if isinstance(error, dict) else None
        text = error.get("message") if isinstance(error, dict) else error
        raise failure(f"{where} answered error {code}: {str(text)[:300]}", sent=True,
                      upstream_code=code)  # fmt: skip
    result = message.get("result")
    if not isinstance(result, dict):
        raise failure(f"{where} answered tools/call without a result object", sent=True)
    kind = result.get("resultType", "complete")
    if kind != "complete":  # 2026-07-28 MRTR (`input_required`): nothing to relay it to
        raise failure(f"{where} asked for input ({kind!r}), which the gateway does not relay",
                      sent=True)  # fmt: skip
    content = result.get("content")
    if not isinstance(content, list) or not all(
        isinstance(c, dict) and isinstance(c.get("type"), str) for c in content
    ):
        raise failure(f"{where} answered tools/call with a result that is not a "
                      "CallToolResult", sent=True)  # fmt: skip
    return result


def _status_failure(status: int, where: str) -> McpUpstreamError:
    if status == 202:
        return failure(f"{where} accepted tools/call without answering it (202)", sent=True)
    if status < 400:
        return failure(f"{where} answered a redirect ({status}), which is not followed", sent=True)
    return failure(f"{where} answered HTTP {status}", sent=True)


def _too_large(where: str, max_bytes: int) -> McpUpstreamError:
    return failure(
        f"{where} answered a tool result larger than {max_bytes} bytes "
        "(AGENT_MCP_MAX_RESULT_BYTES)",
        sent=True,
        error="upstream_result_too_large",
        limit_bytes=max_bytes,
    )


async def _refuse(conn: Connection, request: dict[str, Any]) -> None:
    """A legacy-era server request on the stream (sampling, elicitation, roots): the gateway
    has no client to ask, so it answers with a JSON-RPC error and the call goes on."""
    refusal = {"code": -32601, "message": "the Strata gateway relays no server requests"}
    reply = {"jsonrpc": "2.0", "id": request["id"], "error": refusal}
    body = json.dumps(reply).encode()
    head = [f"POST {conn.target} HTTP/1.1\r\nHost: {conn.host_header}\r\n",
            f"Accept: {ACCEPT}\r\nContent-Type: application/json\r\n"]  # fmt: skip
    for name, value in conn.protocol_headers().items():
        head.append(f"{name}: {value}\r\n")
    if conn.session_id:
        head.append(f"Mcp-Session-Id: {conn.session_id}\r\n")
    head.append(f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    try:
        http, _ = await conn.http.acquire(conn.timeout)
    except UpstreamError:
        return  # the call's own answer still decides
    http.begin(_Ignored(), head_request=False)
    http.transport.write("".join(head).encode("latin-1") + body)


class _Ignored:
    """The answer to a refusal: read and dropped (the connection closes after it)."""

    def response_head(self, status: int, raw: list[tuple[bytes, bytes]]) -> None: ...
    def response_body(self, chunk: bytes) -> None: ...
    def response_end(self) -> None: ...
    def response_failed(self, exc: BaseException) -> None: ...
    def upgraded(self, tail: bytes) -> None: ...
    def flush(self) -> None: ...
