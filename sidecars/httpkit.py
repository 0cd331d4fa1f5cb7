"""The serve loop, the JSON error middleware and the strict body readers the sidecars share.

`serve` runs an app until SIGINT/SIGTERM and logs the bound port, so a sidecar started with
`--port 0` still tells its parent where it listens. `error_middleware` turns the routing's own
errors (404, 405) and unhandled exceptions into each sidecar's JSON error shape.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from multidict import MultiDict, MultiDictProxy

from runtime import json_codec
from sidecars import web
from sidecars.jsonlog import configure_logging
from sidecars.web import Handler, Middleware

# Renders (status, machine-readable code, human message) into the sidecar's error body.
ErrorRenderer = Callable[[int, str, str], web.Response]

_log = logging.getLogger("sidecars.http")


def error_middleware(render: ErrorRenderer) -> Middleware:
    """Build a middleware that renders every error status through `render`.

    Handlers return their own JSON errors; this only catches what the routing raises (unknown
    path, wrong method) and unexpected exceptions, which become a 500 without leaking the
    exception text to the client. (A body over the limit, 413, is answered by the server in
    the same shape before any handler: `web.start`'s `render`.)
    """

    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            code = exc.reason.lower().replace(" ", "_")
            message = f"{exc.reason}: {request.method} {request.path}"
            response = render(exc.status, code, message)
            if "Allow" in exc.headers:
                response.headers["Allow"] = exc.headers["Allow"]
            return response
        except Exception:
            _log.exception(
                "unhandled error", extra={"method": request.method, "path": request.path}
            )
            return render(500, "server_error", "internal server error")

    return middleware


async def read_form(request: web.Request) -> MultiDictProxy[str]:
    """An `application/x-www-form-urlencoded` body, UTF-8 throughout, percent-escapes included
    (whatever charset the request claims); ValueError naming the problem otherwise."""
    try:
        pairs = parse_qsl((await request.read()).decode(), keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        raise ValueError("the form body is not UTF-8") from None
    return MultiDictProxy(MultiDict(pairs))


async def read_json(request: web.Request) -> Any:
    """A JSON body within the platform's JSON codec's limits (nesting, lone surrogates);
    ValueError naming the problem otherwise."""
    return json_codec.loads(await request.read())


async def serve(app: web.Application, host: str, port: int) -> None:
    """Serve `app` on host:port until SIGINT or SIGTERM, then shut down cleanly."""
    server = await web.start(app, host, port)
    try:
        _log.info("listening", extra={"host": server.host, "port": server.port})
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        _log.info("stopping")
    finally:
        await server.close()


def main(name: str, build_app: Callable[[], web.Application], default_port: int) -> None:
    """The whole `__main__` of a sidecar without options of its own: `--host`, `--port`,
    `--log-level`, JSON logs, serve until a signal."""
    parser = argparse.ArgumentParser(prog=f"python -m sidecars.{name}")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=default_port)
    parser.add_argument("--log-level", default=os.environ.get("LOG_LEVEL", "INFO"))
    args = parser.parse_args()
    configure_logging(args.log_level)
    asyncio.run(serve(build_app(), args.host, args.port))
