"""The aiohttp front door: one generic handler that serves every `Route` of a service by
translating JSON to the RPC's request message, calling the servicer in-process, and rendering
the response back — plus the meta endpoints (`/`, `/health`, `/metrics`) and the middlewares
every front door shares (errors as JSON, authentication, CORS, request ids, access log).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message

from runtime.auth import Principal, bind_principal
from runtime.context import LocalAbort, LocalContext
from runtime.errors import (
    HTTP_STATUS,
    InvalidRequest,
    NotFound,
    NotImplementedYet,
    PayloadTooLarge,
    StrataError,
)
from runtime.protojson import merge_json, scalar_from_text, to_json
from runtime.routes import Route
from runtime.service import ServiceDefinition

log = logging.getLogger(__name__)

DEFINITION = web.AppKey("definition", ServiceDefinition)
PRINCIPAL = web.RequestKey("principal", Principal)
REQUEST_ID = web.RequestKey("request_id", str)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class MethodNotAllowed(StrataError):
    http_status = 405


def build_app(defn: ServiceDefinition) -> web.Application:
    """The service's public aiohttp application. Every route is checked against the service
    descriptors here, so a typo in a route table fails at boot, not at the first request."""
    middlewares = [_access_log, _errors, *defn.middlewares]
    if defn.allowed_origins:
        middlewares.insert(0, _cors(defn.allowed_origins))
    if defn.authenticator is not None:
        middlewares.append(_authenticate)
    app = web.Application(middlewares=middlewares, client_max_size=defn.client_max_size)
    app[DEFINITION] = defn
    app.router.add_get("/", _info)
    app.router.add_get("/health", _health)
    app.router.add_get("/metrics", _metrics)
    for route in defn.routes:
        app.router.add_route(route.method, route.path, _route_handler(defn, route))
    return app


def method_descriptor(route: Route) -> MethodDescriptor:
    try:
        return descriptor_pool.Default().FindMethodByName(route.rpc.replace("/", "."))
    except KeyError:
        raise LookupError(f"route {route.method} {route.path}: unknown rpc {route.rpc}") from None


def _route_handler(defn: ServiceDefinition, route: Route) -> Handler:
    method = method_descriptor(route)
    request_cls = message_factory.GetMessageClass(method.input_type)
    fields = method.input_type.fields_by_name
    for param in _path_params(route.path):
        if param not in fields:
            raise LookupError(f"route {route.path}: no request field for path parameter {param}")
    if route.body not in (None, "*") and route.body not in fields:
        raise LookupError(f"route {route.path}: body field {route.body!r} not in request")
    if route.passthrough is not None and route.passthrough not in fields:
        raise LookupError(f"route {route.path}: passthrough field {route.passthrough!r} unknown")
    if route.response_body and route.response_body not in method.output_type.fields_by_name:
        raise LookupError(f"route {route.path}: response field {route.response_body!r} unknown")
    servicer = defn.servicer(route.service)
    call = getattr(servicer, route.method_name)

    async def handle(request: web.Request) -> web.StreamResponse:
        message = request_cls()
        if route.body is not None:
            body = await _json_body(request)
            target = message if route.body == "*" else getattr(message, route.body)
            merge_json(target, body, lenient=route.passthrough is not None)
            if route.passthrough is not None:
                getattr(message, route.passthrough).update(body)
        for name, text in request.match_info.items():
            setattr(message, name, scalar_from_text(fields[name], text))
        _bind_query(message, fields, request, skip=set(request.match_info))
        context = LocalContext(request.headers, request.remote or "", None)
        bind_principal(request.get(PRINCIPAL))
        if route.stream:
            return await _stream(request, route, call(message, context))
        response = await call(message, context)
        return _render(route, response)

    return handle


def _path_params(path: str) -> list[str]:
    return [part[1:-1].split(":")[0] for part in path.split("/") if part.startswith("{")]


async def _json_body(request: web.Request) -> Any:
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise InvalidRequest(f"malformed JSON body: {exc}", error="invalid_request") from exc


def _bind_query(message: Message, fields: Any, request: web.Request, skip: set[str]) -> None:
    for name in set(request.query) - skip:
        field = fields.get(name)
        if field is None or field.message_type is not None:
            continue  # unknown query parameters are ignored, as HTTP APIs conventionally do
        values = request.query.getall(name)
        if field.is_repeated:
            getattr(message, name).extend(scalar_from_text(field, v) for v in values)
        else:
            setattr(message, name, scalar_from_text(field, values[-1]))


def _value(route: Route, message: Message) -> Any:
    """The JSON value of one response message (or one streamed message) of `route`."""
    if route.render is not None:
        return route.render(message)
    value = to_json(message)
    return value[route.response_body] if route.response_body else value


def _render(route: Route, response: Message) -> web.StreamResponse:
    value = _value(route, response)
    if isinstance(value, web.StreamResponse):
        return value
    return web.json_response(value, status=route.status)


async def _stream(request: web.Request, route: Route, messages: Any) -> web.StreamResponse:
    """Server-streaming RPC → server-sent events, closed by `data: [DONE]` (OpenAI framing).
    The first message is awaited before the response starts, so an early error keeps its
    status code; a client disconnect cancels this task and with it the servicer's stream."""
    iterator = aiter(messages)
    try:
        first = await anext(iterator)
    except StopAsyncIteration:
        first = None
    response = web.StreamResponse(
        status=route.status,
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"},
    )
    await response.prepare(request)

    async def send(message: Message) -> None:
        await response.write(f"data: {json.dumps(_value(route, message))}\n\n".encode())

    try:
        if first is not None:
            await send(first)
            async for message in iterator:
                await send(message)
    except StrataError as err:
        await response.write(f"data: {json.dumps(err.body())}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def _info(request: web.Request) -> web.Response:
    return web.json_response(dict(request.app[DEFINITION].info))


async def _health(request: web.Request) -> web.Response:
    return web.json_response(dict(await request.app[DEFINITION].health()))


async def _metrics(request: web.Request) -> web.Response:
    body = request.app[DEFINITION].metrics.exposition()
    return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4"})


# --- middlewares -------------------------------------------------------------------------


def error_response(defn: ServiceDefinition, err: StrataError) -> web.Response:
    body = defn.error_body(err) if defn.error_body else err.body()
    return web.json_response(body, status=err.http_status)


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure leaves as JSON in the service's envelope; nothing leaks a traceback."""
    defn = request.app[DEFINITION]
    try:
        return await handler(request)
    except StrataError as err:
        return error_response(defn, err)
    except LocalAbort as abort:
        response = error_response(defn, StrataError(abort.details or abort.code.name))
        response.set_status(HTTP_STATUS.get(abort.code, 500))
        return response
    except NotImplementedError:
        return error_response(defn, _not_implemented(request))
    except web.HTTPRequestEntityTooLarge:
        return error_response(
            defn,
            PayloadTooLarge(
                f"request body exceeds the {defn.client_max_size} byte limit",
                error="payload_too_large",
            ),
        )
    except web.HTTPMethodNotAllowed:
        return error_response(
            defn,
            MethodNotAllowed(
                f"method {request.method} is not allowed on {request.path}",
                error="method_not_allowed",
            ),
        )
    except web.HTTPNotFound:
        return error_response(
            defn, NotFound(f"no route for {request.method} {request.path}", error="not_found")
        )
    except web.HTTPException:
        raise
    except Exception:
        log.exception(
            "unhandled error", extra={"path": request.path, "request_id": request.get(REQUEST_ID)}
        )
        return error_response(defn, StrataError("internal error", error="internal_error"))


def _not_implemented(request: web.Request) -> StrataError:
    return NotImplementedYet(
        f"{request.method} {request.path} is declared but not implemented yet",
        error="not_implemented",
    )


@web.middleware
async def _authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
    defn = request.app[DEFINITION]
    if (
        request.match_info.http_exception is None
        and request.path not in defn.public_paths
        and request.method != "OPTIONS"
    ):
        assert defn.authenticator is not None
        headers = {k.lower(): v for k, v in request.headers.items()}
        principal: Principal = await defn.authenticator.authenticate(headers)
        request[PRINCIPAL] = principal
    return await handler(request)


@web.middleware
async def _access_log(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Request id in and out, one JSON log line and the transport metrics per request.
    Headers are never logged: they carry credentials."""
    request_id = request.headers.get("x-request-id") or uuid.uuid4().hex
    request[REQUEST_ID] = request_id
    started = time.perf_counter()
    response = await handler(request)
    elapsed = time.perf_counter() - started
    response.headers.setdefault("x-request-id", request_id)
    defn = request.app[DEFINITION]
    resource = request.match_info.route.resource
    route = resource.canonical if resource is not None else "unmatched"
    defn.metrics.http_requests.labels(defn.name, route, request.method, response.status).inc()
    defn.metrics.http_latency.labels(defn.name, route).observe(elapsed)
    log.info(
        "request",
        extra={
            "method": request.method,
            "path": request.path,
            "status": response.status,
            "latency_ms": round(elapsed * 1000, 2),
            "request_id": request_id,
        },
    )
    return response


def _cors(origins: tuple[str, ...]) -> Callable[..., Awaitable[web.StreamResponse]]:
    allowed = set(origins)

    @web.middleware
    async def cors(request: web.Request, handler: Handler) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin not in allowed:
            return await handler(request)
        if request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers:
            response: web.StreamResponse = web.Response(status=204)
            response.headers["Access-Control-Allow-Methods"] = (
                "GET, POST, PUT, PATCH, DELETE, OPTIONS"
            )
            response.headers["Access-Control-Allow-Headers"] = request.headers.get(
                "Access-Control-Request-Headers", "Authorization, Content-Type"
            )
            response.headers["Access-Control-Max-Age"] = "600"
        else:
            response = await handler(request)
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Access-Control-Allow-Credentials"] = "true"
        response.headers["Vary"] = "Origin"
        return response

    return cors
