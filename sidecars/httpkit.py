"""The serve loop, the JSON error middleware and the strict body readers the sidecars share.

`serve` runs an app until SIGINT/SIGTERM and logs the bound port, so a sidecar started with
`--port 0` still tells its parent where it listens. `error_middleware` turns aiohttp's own
HTML/text errors (404, 405, 413, unhandled exceptions) into each sidecar's JSON error shape.
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

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from multidict import MultiDict, MultiDictProxy

from runtime import json_codec
from runtime.http_parse_errors import FrontDoorRunner
from sidecars.jsonlog import JsonAccessLogger, configure_logging

# Renders (status, machine-readable code, human message) into the sidecar's error body.
ErrorRenderer = Callable[[int, str, str], web.Response]

_log = logging.getLogger("sidecars.http")


def error_middleware(render: ErrorRenderer) -> Middleware:
    """Build a middleware that renders every error status through `render`.

    Handlers return their own JSON errors; this only catches what aiohttp raises itself
    (unknown path, wrong method, body too large) and unexpected exceptions, which become a 500
    without leaking the exception text to the client.
    """

    # aiohttp 3 treats an undecorated middleware as an old-style factory.
    @web.middleware
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
    # FrontDoorRunner: a request aiohttp cannot parse is answered as JSON, never echoed
    runner = FrontDoorRunner(
        app, access_log_class=JsonAccessLogger, access_log=logging.getLogger("sidecars.access")
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0]
        _log.info("listening", extra={"host": bound[0], "port": bound[1]})
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        _log.info("stopping")
    finally:
        await runner.cleanup()


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
