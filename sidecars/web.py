"""The sidecars' web layer: routes, requests and responses over `runtime.http1.server` (asyncio
and httptools, the edge data plane's server), with no web framework.

aiohttp's `web` alone is 36 MB of RSS, more than a sidecar's whole budget; this layer keeps the
small part of its interface the sidecars use, under the same names (`Application`, `AppKey`,
`Request`, `Response`, `json_response`, `StreamResponse`, `middleware`), so a handler reads
the same. What it does:

- routes: a literal path, `{name}` (one path segment) or `{name:regex}`, per method (`*`: any);
  a GET route answers HEAD too unless `allow_head=False`. They are tried in the order they were
  added; a path some route has but not for this method is 405 with `Allow`, no route 404.
- `add_subapp(prefix, app)`: the app's routes under `prefix`, its own state (`request.app`) and
  middlewares (after the parent's); `request.config_dict` looks a key up in the app, then in
  its parents.
- middlewares: `async def mw(request, handler) -> Response`, outermost first. A route that is
  not there raises `HTTPException` (404, 405) into them, so an error middleware renders it.
- requests are parsed by httptools (`runtime.http1.server`): keep-alive, pipelining, bodies up
  to `MAX_BODY` (413 beyond), 400/414/431 for malformed input, answered in the sidecar's JSON
  error shape (`serve`'s `errors`) without quoting the request.
- one access log line per request (`sidecars.access`): method, path, status, duration, peer;
  never headers, body or query.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from http import HTTPStatus
from typing import Any, Generic, TypeVar, cast, overload
from urllib.parse import parse_qsl, unquote

from multidict import CIMultiDict, CIMultiDictProxy, MultiDict, MultiDictProxy

from runtime.http1.server import Connection, ErrorBody, Exchange, Listening
from runtime.http1.server import serve as serve_http

MAX_BODY = 1024**2  # aiohttp's client_max_size, which the sidecars ran with
T = TypeVar("T")
_access = logging.getLogger("sidecars.access")


class AppKey(Generic[T]):
    """A typed key of an application's state."""

    def __init__(self, name: str, _kind: type[T] | None = None) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<AppKey {self.name}>"


class HTTPException(Exception):
    """An error status the routing answers (404, 405); middlewares see it raised."""

    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(status)
        self.status = status
        self.reason = HTTPStatus(status).phrase
        self.headers = headers or {}


class StreamResponse:
    """A response whose body is written as it goes (`prepare`, `write`, `write_eof`): chunked to
    an HTTP/1.1 client. Writes wait while the client's socket buffer is full."""

    def __init__(self, *, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.headers: dict[str, str] = dict(headers or {})
        self._exchange: Exchange | None = None

    async def prepare(self, request: Request) -> None:
        self._exchange = request.exchange
        self._exchange.start(self.status, self.headers, None)

    async def write(self, data: bytes) -> None:
        exchange = self._exchange
        assert exchange is not None, "prepare() first"
        conn = exchange.conn
        if conn.closed:
            raise ConnectionResetError("the client closed the connection")
        exchange.write(data)
        await conn.drain()

    async def write_eof(self) -> None:
        if self._exchange is not None:
            self._exchange.end()


class Response(StreamResponse):
    """A whole response. `text` is sent as UTF-8 with `content_type` (text/plain by default)."""

    def __init__(
        self,
        *,
        status: int = 200,
        body: bytes | None = None,
        text: str | None = None,
        content_type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(status=status, headers=headers)
        if text is not None:
            body = text.encode()
            content_type = f"{content_type or 'text/plain'}; charset=utf-8"
        self.body = body or b""
        if content_type is not None:
            self.headers["Content-Type"] = content_type
        elif body is not None and "Content-Type" not in self.headers:
            self.headers["Content-Type"] = "application/octet-stream"


def json_response(
    data: Any, *, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    """`data` as JSON (`application/json; charset=utf-8`)."""
    return Response(
        status=status,
        body=json.dumps(data).encode(),
        content_type="application/json; charset=utf-8",
        headers=headers,
    )


Handler = Callable[["Request"], Awaitable[StreamResponse]]
Middleware = Callable[["Request", Handler], Awaitable[StreamResponse]]


def middleware(fn: Middleware) -> Middleware:
    """Marks a middleware (aiohttp's decorator, kept so handlers read the same)."""
    return fn


class Request:
    """One request as a handler sees it."""

    def __init__(
        self, exchange: SidecarExchange, app: Application, match_info: dict[str, str]
    ) -> None:
        self.exchange = exchange
        self.app = app
        self.match_info = match_info
        self.method = exchange.method
        self.path = exchange.path
        self.query_string = exchange.query_string
        self._query: MultiDictProxy[str] | None = None
        self._body: bytes | None = None

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        return self.exchange.multi_headers

    @property
    def query(self) -> MultiDictProxy[str]:
        if self._query is None:
            pairs = parse_qsl(self.query_string, keep_blank_values=True)
            self._query = MultiDictProxy(MultiDict(pairs))
        return self._query

    @property
    def content_type(self) -> str:
        value = self.headers.get("Content-Type", "application/octet-stream")
        return value.partition(";")[0].strip().lower()

    @property
    def remote(self) -> str:
        return self.exchange.client_ip

    @property
    def config_dict(self) -> _ChainLookup:
        return _ChainLookup(self.app)

    async def read(self) -> bytes:
        if self._body is None:
            exchange = self.exchange
            if exchange.wants_continue:  # the client waits for this before it sends the body
                exchange.wants_continue = False
                exchange.conn.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            chunks = []
            while chunk := await exchange.body.read():
                chunks.append(chunk)
            self._body = b"".join(chunks)
        return self._body

    async def json(self) -> Any:
        return json.loads((await self.read()).decode())


class _ChainLookup:
    """An app's state, then its parents'."""

    def __init__(self, app: Application) -> None:
        self._app = app

    def __getitem__(self, key: AppKey[T]) -> T:
        app: Application | None = self._app
        while app is not None:
            if key in app:
                return app[key]
            app = app.parent
        raise KeyError(key)


class _Route:
    __slots__ = ("handler", "methods", "pattern")

    def __init__(self, pattern: re.Pattern[str], methods: frozenset[str], handler: Handler) -> None:
        self.pattern = pattern
        self.methods = methods  # empty: any method
        self.handler = handler


_PARAM = re.compile(r"\{(\w+)(?::([^}]*))?\}")


def _compile(path: str) -> re.Pattern[str]:
    out, last = [], 0
    for m in _PARAM.finditer(path):
        out.append(re.escape(path[last : m.start()]))
        out.append(f"(?P<{m.group(1)}>{m.group(2) or '[^/]+'})")
        last = m.end()
    out.append(re.escape(path[last:]))
    return re.compile("".join(out))


class Router:
    def __init__(self, app: Application) -> None:
        self._app = app

    def add_route(self, method: str, path: str, handler: Handler) -> None:
        methods = frozenset() if method == "*" else frozenset({method.upper()})
        self._app.entries.append(_Route(_compile(path), methods, handler))

    def add_get(self, path: str, handler: Handler, *, allow_head: bool = True) -> None:
        methods = frozenset({"GET", "HEAD"} if allow_head else {"GET"})
        self._app.entries.append(_Route(_compile(path), methods, handler))

    def add_post(self, path: str, handler: Handler) -> None:
        self.add_route("POST", path, handler)

    def add_delete(self, path: str, handler: Handler) -> None:
        self.add_route("DELETE", path, handler)


ErrorRenderer = Callable[[int, str, str], "Response"]


def spec_error(status: int, code: str, message: str) -> Response:
    """The spec's error body, `{error, message}`."""
    return json_response({"error": code, "message": message}, status=status)


class Application(MutableMapping[Any, Any]):
    """Routes, middlewares and state (`app[key]`). `errors(status, code, message)` renders the
    errors the server answers before any route (a malformed request, a body over MAX_BODY):
    the sidecar's own error shape, the spec's by default."""

    def __init__(
        self,
        *,
        middlewares: list[Middleware] | tuple[Middleware, ...] = (),
        errors: ErrorRenderer = spec_error,
    ) -> None:
        self.middlewares = list(middlewares)
        self.errors = errors
        self.entries: list[_Route | tuple[str, Application]] = []
        self.router = Router(self)
        self.parent: Application | None = None
        self._state: dict[Any, Any] = {}

    @overload
    def __getitem__(self, key: AppKey[T]) -> T: ...
    @overload
    def __getitem__(self, key: str) -> Any: ...
    def __getitem__(self, key: Any) -> Any:
        return self._state[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._state[key] = value

    def __delitem__(self, key: Any) -> None:
        del self._state[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._state)

    def __len__(self) -> int:
        return len(self._state)

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    def add_subapp(self, prefix: str, app: Application) -> None:
        app.parent = self
        self.entries.append((prefix.rstrip("/"), app))

    def resolve(
        self, method: str, path: str, allowed: set[str]
    ) -> tuple[Application, Handler, dict[str, str], list[Middleware]] | None:
        """The app, handler, path parameters and middlewares (outermost first) for a request;
        None when no route takes it (the methods of routes with its path are added to
        `allowed`)."""
        for entry in self.entries:
            if isinstance(entry, tuple):
                prefix, sub = entry
                if path == prefix or path.startswith(prefix + "/"):
                    found = sub.resolve(method, path[len(prefix) :], allowed)
                    if found is not None:
                        return found[0], found[1], found[2], self.middlewares + found[3]
                continue
            m = entry.pattern.fullmatch(path)
            if m is None:
                continue
            if entry.methods and method not in entry.methods:
                allowed.update(entry.methods)
                continue
            return self, entry.handler, m.groupdict(), self.middlewares
        return None


def _chain(handler: Handler, middlewares: list[Middleware]) -> Handler:
    for mw in reversed(middlewares):

        def bound(request: Request, mw: Middleware = mw, inner: Handler = handler) -> Any:
            return mw(request, inner)

        handler = bound
    return handler


def _refuse(status: int, headers: dict[str, str] | None = None) -> Handler:
    async def refuse(_request: Request) -> StreamResponse:
        raise HTTPException(status, headers)

    return refuse


class SidecarExchange(Exchange):
    """An exchange that also keeps the header names as sent, and repeated headers apart (the
    mock backend echoes them so)."""

    __slots__ = ("multi_headers", "path", "query_string")
    multi_headers: CIMultiDictProxy[str]
    path: str
    query_string: str


class SidecarConnection(Connection):
    exchange_class = SidecarExchange

    def __init__(self, handler: Any, max_body: int, errors: ErrorBody) -> None:
        super().__init__(handler, max_body, errors)
        self._raw: list[tuple[str, str]] = []

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._raw = []

    def on_header(self, name: bytes, value: bytes) -> None:
        super().on_header(name, value)  # the limits
        self._raw.append((name.decode("latin-1"), value.decode("utf-8", "surrogateescape")))

    def on_headers_complete(self) -> None:
        raw, self._raw = self._raw, []
        super().on_headers_complete()
        exchange = cast(SidecarExchange, self.pending[-1] if self.pending else self.current)
        exchange.multi_headers = CIMultiDictProxy(CIMultiDict(raw))
        target = exchange.target.decode("latin-1")
        path, _, exchange.query_string = target.partition("?")
        exchange.path = unquote(path.partition("#")[0])


class Server:
    """A running sidecar: `port` is the bound one; `close()` stops it."""

    def __init__(self, listening: Listening) -> None:
        self._listening = listening
        self.port: int = listening.sockets[0].getsockname()[1]
        self.host: str = listening.sockets[0].getsockname()[0]

    async def close(self) -> None:
        """Stop at once: a sidecar is a development stand-in, with nothing to drain."""
        self._listening.close()
        for conn in list(self._listening.connections):
            conn.close()
        await self._listening.wait_closed()


async def start(app: Application, host: str, port: int) -> Server:
    """Serve `app` on host:port (port 0: a free one, `Server.port`)."""

    def errors(status: int) -> bytes:  # never a byte of the request in it
        reason = HTTPStatus(status).phrase
        return app.errors(status, reason.lower().replace(" ", "_"), reason).body

    async def handle(exchange: Exchange) -> None:
        ex = cast(SidecarExchange, exchange)
        started = time.monotonic()
        allowed: set[str] = set()
        found = app.resolve(ex.method, ex.path, allowed)
        if found is None:
            status = 405 if allowed else 404
            headers = {"Allow": ",".join(sorted(allowed))} if allowed else None
            params: dict[str, str] = {}
            owner, handler, mws = app, _refuse(status, headers), app.middlewares
        else:
            owner, handler, params, mws = found
        request = Request(ex, owner, params)
        response = await _chain(handler, mws)(request)
        if isinstance(response, Response):
            ex.respond(response.status, response.body, response.headers)
        elif not ex.response_started:  # a stream that never began: say so
            ex.respond(500, errors(500))
        status = response.status
        _access.info(
            "request",
            extra={
                "method": ex.method,
                "path": ex.path,
                "status": status,
                "duration_ms": round((time.monotonic() - started) * 1000, 1),
                "remote": ex.client_ip,
            },
        )

    listening = await serve_http(
        handle, host, port, MAX_BODY, errors=errors, connection=SidecarConnection
    )
    return Server(listening)
