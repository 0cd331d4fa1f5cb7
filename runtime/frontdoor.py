"""The aiohttp front door: one generic handler serves every `HttpRule` of a service by
translating JSON to the RPC's request message, passing the guard, calling the servicer
in-process, and rendering the answer — plus the meta endpoints (`/`, `/health`, `/metrics`)
and the middlewares every front door shares (errors as JSON, CORS, request ids, access log).

Per request:
1. the guard authenticates the caller (401 before the body is even read),
2. the body picks the rule (`"stream": true` → the rule's `when_streaming` variant) and
   becomes the request message (400 naming the bad field) — or, for a rule with a
   `json_method`, goes to that servicer method as parsed,
3. the guard authorizes the caller against the RPC's declared rule (403),
4. the servicer runs with a `LocalContext`; the status and headers it sets with `respond`
   go on the response, a JSON body or server-sent events,
5. an error leaves in the endpoint's envelope, with the headers the servicer had set.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web
from google.protobuf import descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message

from runtime import json_codec
from runtime.access import authorize, bind_caller
from runtime.config import VERSION
from runtime.context import LocalAbort, LocalContext, http_reply
from runtime.errors import (
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    NotImplementedYet,
    PayloadTooLarge,
    StrataError,
    UnsupportedMediaType,
    error_for_code,
    error_for_status,
)
from runtime.guard import Guard
from runtime.http_rules import NO_STORE, Envelope, HttpRule
from runtime.logs import access_line
from runtime.openapi import document
from runtime.protojson import JSON_TYPES, merge_json, scalar_from_text, to_json
from runtime.service import ServiceDefinition
from runtime.stores.outbox import current_rows_held, rows_held, start_holding, stop_holding
from runtime.swagger import add_docs_routes

log = logging.getLogger(__name__)

DEFINITION = web.AppKey("definition", ServiceDefinition)
REQUEST_ID = web.RequestKey("request_id", str)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_END = object()  # an empty stream


def build_app(defn: ServiceDefinition, guard: Guard | None = None) -> web.Application:
    """The service's public aiohttp application. Every rule is checked against the service
    descriptors here, so a typo in a rule table fails at boot, not at the first request."""
    guard = guard or defn.guard()
    middlewares = [_access_log, _rows_durable, _errors, *defn.middlewares]
    if defn.allowed_origins:
        middlewares.insert(0, _preflight(frozenset(defn.allowed_origins)))
    app = web.Application(middlewares=middlewares, client_max_size=defn.client_max_size)
    app[DEFINITION] = defn
    app.on_response_prepare.append(_response_headers)
    app.router.add_get("/", _info)
    app.router.add_get("/health", _health)
    app.router.add_get("/metrics", _metrics)
    for rule in defn.http_rules:
        app.router.add_route(rule.method, rule.path, _rule_handler(defn, guard, rule))
    for method, path, handler in defn.routes:
        app.router.add_route(method, path, handler)
    if defn.api is not None:
        api, rules = defn.api, defn.http_rules
        add_docs_routes(app, lambda: document(api, rules))
    return app


def method_descriptor(rule: HttpRule) -> MethodDescriptor:
    try:
        return descriptor_pool.Default().FindMethodByName(rule.rpc.replace("/", "."))
    except KeyError:
        raise LookupError(f"{rule.method} {rule.path}: unknown rpc {rule.rpc}") from None


@dataclass(frozen=True)
class _Binding:
    """One rule, checked against its RPC's descriptors and bound to its servicer method."""

    rule: HttpRule
    request_class: type[Message]
    fields: Any
    call: Callable[[Message, LocalContext], Any]
    json_call: Callable[[Any, LocalContext], Any] | None

    @classmethod
    def of(cls, defn: ServiceDefinition, rule: HttpRule) -> _Binding:
        method = method_descriptor(rule)
        fields = method.input_type.fields_by_name
        where = f"{rule.method} {rule.path}"
        for param in _path_params(rule.path):
            if param not in fields:
                raise LookupError(f"{where}: no request field for path parameter {param}")
        if rule.body not in (None, "*") and rule.body not in fields:
            raise LookupError(f"{where}: body field {rule.body!r} not in request")
        if rule.passthrough is not None and rule.passthrough not in fields:
            raise LookupError(f"{where}: passthrough field {rule.passthrough!r} unknown")
        if rule.response_body and rule.response_body not in method.output_type.fields_by_name:
            raise LookupError(f"{where}: response field {rule.response_body!r} unknown")
        if rule.stream != method.server_streaming:
            raise LookupError(f"{where}: stream={rule.stream} but {rule.rpc} disagrees")
        if rule.json_method is not None and rule.body != "*":
            raise LookupError(f"{where}: json_method takes the whole body")
        if rule.required and rule.request_schema is None:
            # the body's JSON object fills the request, or its `body` field
            bound = fields
            inner = fields[rule.body].message_type if rule.body not in (None, "*") else None
            if inner is not None:
                bound = inner.fields_by_name
            if unknown := set(rule.required) - set(bound):
                raise LookupError(f"{where}: required fields {sorted(unknown)} not in the body")
        servicer = defn.servicer(rule.service)
        call = getattr(servicer, rule.method_name)
        # An unimplemented servicer (the generated base class) has no JSON face: its RPCs
        # answer 501 through the message path.
        json_call = getattr(servicer, rule.json_method, None) if rule.json_method else None
        request_class = message_factory.GetMessageClass(method.input_type)
        return cls(rule, request_class, fields, call, json_call)

    def message(self, request: web.Request, body: Any) -> Message:
        """The request message: JSON body, then path parameters, then query parameters."""
        rule, message = self.rule, self.request_class()
        if rule.body is not None:
            target = message if rule.body == "*" else getattr(message, rule.body)
            if target.DESCRIPTOR.full_name in JSON_TYPES:  # any JSON, kept as sent (APISIX)
                _parse_json_value(target, body)
            elif rule.passthrough is None:
                merge_json(target, body)
            else:
                try:
                    merge_json(target, body, lenient=True)
                except InvalidRequest:
                    # A passthrough body whose typed fields do not parse (OpenAI's content
                    # part arrays where the proto has a string) still reaches the servicer,
                    # whole in the Struct: the servicer validates it and names the field.
                    message.Clear()
            if rule.passthrough is not None:
                getattr(message, rule.passthrough).update(body)
        for name, text in request.match_info.items():
            setattr(message, name, scalar_from_text(self.fields[name], text))
        _bind_query(message, self.fields, request, skip=set(request.match_info))
        return message


def _parse_json_value(target: Message, body: Any) -> None:
    try:
        json_format.ParseDict(body, target)
    except json_format.ParseError as exc:
        raise InvalidRequest(f"invalid request body: {exc}", error="invalid_request") from exc


def _rule_handler(defn: ServiceDefinition, guard: Guard, rule: HttpRule) -> Handler:
    plain = _Binding.of(defn, rule)
    streaming = _Binding.of(defn, rule.when_streaming) if rule.when_streaming else None
    envelope = rule.envelope or defn.envelope
    rpc_rules = guard.rules

    async def handle(request: web.Request) -> web.StreamResponse:
        headers = {k.lower(): v for k, v in request.headers.items()}
        if REQUEST_ID in request:  # the id the answer carries reaches the servicer's calls
            headers["x-request-id"] = request[REQUEST_ID]
        context = LocalContext(headers, request.remote or "")
        try:
            principal = await guard.authenticate(rpc_rules[rule.rpc], headers)
            body = (
                await _body(request, rule, typed=not defn.any_content_type)
                if rule.body is not None
                else None
            )
            chosen = plain
            if streaming is not None and isinstance(body, dict) and body.get("stream") is True:
                chosen = streaming
            if chosen.json_call is not None:  # the JSON body as is, no request message
                if not isinstance(body, dict):
                    raise InvalidRequest("the JSON body must be an object", error="invalid_request")
                message = chosen.request_class()
                if request.match_info:  # path parameters: on the message, and in the body
                    body = {**body, **request.match_info}
                    for name, text in request.match_info.items():
                        setattr(message, name, scalar_from_text(chosen.fields[name], text))
                bind_caller(authorize(rpc_rules[chosen.rule.rpc], principal, headers, message))
                _check_required(chosen.rule, body)
                if chosen.rule.stream:
                    return await _stream(request, chosen.rule, chosen.json_call(body, context),
                                         context, envelope)  # fmt: skip
                value = await chosen.json_call(body, context)
                return _render_value(chosen.rule, value, context)
            message = chosen.message(request, body)  # a bad or unknown field first
            bind_caller(authorize(rpc_rules[chosen.rule.rpc], principal, headers, message))
            _check_required(chosen.rule, body)  # once the caller may call (403 first)
            if chosen.rule.stream:
                values = _values(chosen.rule, chosen.call(message, context))
                return await _stream(request, chosen.rule, values, context, envelope)
            response = await chosen.call(message, context)
            return _render(chosen.rule, response, context)
        except Exception as exc:  # every failure leaves in this endpoint's envelope
            return error_response(envelope, as_error(exc, request), context)

    if not rule.credential:
        return handle

    async def handle_credential(request: web.Request) -> web.StreamResponse:
        response = await handle(request)
        response.headers.update(NO_STORE)
        return response

    return handle_credential


def _path_params(path: str) -> list[str]:
    return [part[1:-1].split(":")[0] for part in path.split("/") if part.startswith("{")]


async def _body(request: web.Request, rule: HttpRule, *, typed: bool) -> Any:
    """The JSON body (an empty body is `{}`), or a form where the rule accepts one. When
    `typed`, a body sent with another Content-Type is 415 naming the expected one (a body
    without the header is read as JSON)."""
    raw = await request.read()
    if rule.form and request.content_type == "application/x-www-form-urlencoded":
        return _form(raw)
    if not raw.strip():
        return {}
    declared = "Content-Type" in request.headers
    if typed and declared and not json_codec.is_json_media_type(request.content_type):
        expected = "application/json"
        if rule.form:
            expected += " or application/x-www-form-urlencoded"
        raise UnsupportedMediaType(
            f"unsupported Content-Type {request.content_type!r}: this endpoint takes {expected}",
            error="unsupported_media_type",
            expected=expected,
        )
    try:
        return json_codec.loads(raw)
    except ValueError as exc:
        raise InvalidRequest(f"malformed JSON body: {exc}", error="invalid_request") from exc


def _check_required(rule: HttpRule, body: Any) -> None:
    """400 naming the first required field the body does not carry (absent or null)."""
    if not rule.required or not isinstance(body, dict):
        return  # a body that is not an object is refused by its binding
    for name in rule.required:
        if body.get(name) is None:
            raise InvalidRequest(f"{name} is required", error="invalid_request", field=name)


def _form(raw: bytes) -> dict[str, str]:
    """A form body, UTF-8 throughout, percent-escapes included (RFC 6749 appendix B); the
    first of repeated fields."""
    try:
        pairs = parse_qsl(raw.decode(), keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        raise InvalidRequest("the form body is not UTF-8", error="invalid_request") from None
    form: dict[str, str] = {}
    for name, value in pairs:
        form.setdefault(name, value)
    return form


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


def _value(rule: HttpRule, message: Message) -> Any:
    """The JSON value of one response message (or one streamed message) of `rule`."""
    if rule.render is not None:
        return rule.render(message)
    value = to_json(message)
    return value[rule.response_body] if rule.response_body else value


def _render(rule: HttpRule, response: Message, context: LocalContext) -> web.StreamResponse:
    return _render_value(rule, _value(rule, response), context)


def _render_value(rule: HttpRule, value: Any, context: LocalContext) -> web.StreamResponse:
    status, headers = http_reply(context.trailing_metadata())
    if isinstance(value, web.StreamResponse):
        answer = value
    else:
        answer = web.Response(
            body=json_codec.dumps(value),
            status=status or rule.status,
            content_type="application/json",
        )
    answer.headers.update(headers)
    return answer


async def _values(rule: HttpRule, messages: AsyncIterator[Message]) -> AsyncIterator[Any]:
    """The JSON values of a server-streaming RPC's messages; closing this closes the RPC's
    stream (and whatever upstream work it holds)."""
    try:
        async for message in messages:
            yield _value(rule, message)
    finally:
        await messages.aclose()  # type: ignore[attr-defined]


async def _stream(
    request: web.Request,
    rule: HttpRule,
    values: AsyncIterator[Any],
    context: LocalContext,
    envelope: Envelope,
) -> web.StreamResponse:
    """Server-streaming RPC → server-sent events, one `data:` event per message, closed by the
    rule's terminator. The first message is awaited before the response starts, so an early
    error keeps its status code and the servicer's headers make it onto the response; a later
    error becomes one last event in the endpoint's envelope. A client that disconnects
    cancels this task, and closing the servicer's stream cancels its upstream work."""
    try:
        first: Any = await anext(values, _END)
        status, headers = http_reply(context.trailing_metadata())
        response = web.StreamResponse(
            status=status or rule.status,
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",  # proxies must pass events as they come
                **headers,
            },
        )
        await response.prepare(request)  # its headers leave with the first event
        events = _Events(response)
        try:
            try:
                if first is not _END:
                    await events.send(first)
                    async for item in values:
                        await events.send(item)
            except Exception as exc:
                if events.failed:  # the client is gone: nothing more can reach it
                    raise
                await events.send(envelope(as_error(exc, request)))
            await current_rows_held()  # the stream's log rows durable before its end
            done = b"" if rule.sse_done is None else f"data: {rule.sse_done}\n\n".encode()
            await events.close(done)
        except BaseException:
            events.abandon()
            raise
        return response
    finally:
        await values.aclose()  # type: ignore[attr-defined]


class _Events:
    """Server-sent events written as they come, those of one loop turn in one write: an
    upstream's events often come several in one read (a provider's stream, a fast model) and
    are relayed in one turn, so they leave in one write and one transmission instead of a
    write each (on loopback, most of a small write's CPU is its transmission, the receiving
    end's included). `send` queues an event, and the write runs once the relaying task
    yields to the loop: nothing waits longer than the turn that produced it. A client slower
    than the stream holds `send` once HIGH_WATER bytes are queued."""

    HIGH_WATER = 1 << 16

    __slots__ = ("failed", "queued", "response", "size", "writing")

    def __init__(self, response: web.StreamResponse) -> None:
        self.response = response
        self.queued: list[bytes] = []
        self.size = 0
        self.writing: asyncio.Task[None] | None = None  # kept once failed: the client is gone
        self.failed = False

    async def send(self, value: Any) -> None:
        event = b"data: " + json_codec.dumps(value) + b"\n\n"
        self.queued.append(event)
        self.size += len(event)
        if self.writing is None:
            self.writing = asyncio.ensure_future(self._write())
        elif self.writing.done() or self.size >= self.HIGH_WATER:
            await self._written()

    async def _write(self) -> None:
        while self.queued:
            data = b"".join(self.queued)
            self.queued.clear()
            self.size = 0
            await self.response.write(data)
        self.writing = None

    async def _written(self) -> None:
        """Wait for the writes under way; raise theirs if one failed."""
        if self.writing is not None:
            try:
                await asyncio.shield(self.writing)
            except Exception:
                self.failed = True
                raise

    async def close(self, last: bytes) -> None:
        """Write what is queued, then `last` and the end of the body."""
        await self._written()
        await self.response.write_eof(last)

    def abandon(self) -> None:
        """The stream ended early (a cancelled relay, or a failure): stop the writes."""
        writing = self.writing
        if writing is None:
            return
        if writing.done():
            if not writing.cancelled():
                writing.exception()  # retrieved: it was the client's going, already handled
        else:
            writing.cancel()


async def _info(request: web.Request) -> web.Response:
    return web.json_response({"version": VERSION, **request.app[DEFINITION].info})


async def _health(request: web.Request) -> web.Response:
    return web.json_response({"version": VERSION, **await request.app[DEFINITION].health()})


async def _metrics(request: web.Request) -> web.Response:
    body = request.app[DEFINITION].metrics.exposition()
    return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4"})


# --- errors ------------------------------------------------------------------------------


def as_error(exc: BaseException, request: web.Request) -> StrataError:
    """Any failure as the StrataError it answers with; a bug is logged, never leaked."""
    if isinstance(exc, StrataError):
        return exc
    if isinstance(exc, LocalAbort):
        return error_for_code(exc.code, exc.details or exc.code.name)
    if isinstance(exc, NotImplementedError):
        return NotImplementedYet(
            f"{request.method} {request.path} is declared but not implemented yet",
            error="not_implemented",
        )
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return PayloadTooLarge(
            f"request body exceeds the {request.app[DEFINITION].client_max_size} byte limit",
            error="payload_too_large",
        )
    if isinstance(exc, web.HTTPMethodNotAllowed):
        return MethodNotAllowed(
            f"method {request.method} is not allowed on {request.path}",
            error="method_not_allowed",
        )
    if isinstance(exc, web.HTTPNotFound):
        return NotFound(f"no route for {request.method} {request.path}", error="not_found")
    if isinstance(exc, web.HTTPException):
        return error_for_status(exc.status, exc.reason)
    log.error(
        "unhandled error",
        exc_info=exc,
        extra={"path": request.path, "request_id": request.get(REQUEST_ID)},
    )
    return StrataError("internal error", error="internal_error")


def error_response(
    envelope: Envelope, err: StrataError, context: LocalContext | None = None
) -> web.Response:
    headers = http_reply(context.trailing_metadata())[1] if context else {}
    response = web.json_response(envelope(err), status=err.http_status)
    response.headers.update(headers)  # e.g. X-RateLimit-* on a 429
    return response


# --- middlewares -------------------------------------------------------------------------


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Failures outside an endpoint (unknown path, wrong method, a service middleware) leave
    as JSON in the service's envelope; endpoints render their own."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(request.app[DEFINITION].envelope, as_error(exc, request))
    except Exception as exc:
        return error_response(request.app[DEFINITION].envelope, as_error(exc, request))


@web.middleware
async def _rows_durable(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The log rows a request appended to the analytics outbox are in the store before its
    answer is sent (`runtime/stores/outbox.py`)."""
    held, token = start_holding()
    try:
        response = await handler(request)
        if held:
            await rows_held(held)
    finally:
        stop_holding(token)
    return response


@web.middleware
async def _access_log(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Request id in and out, one JSON log line and the transport metrics per request.
    Headers are never logged: they carry credentials."""
    request_id = request.headers.get("x-request-id") or os.urandom(16).hex()
    request[REQUEST_ID] = request_id
    started = time.perf_counter()
    response = await handler(request)
    elapsed = time.perf_counter() - started
    defn = request.app[DEFINITION]
    resource = request.match_info.route.resource
    route = resource.canonical if resource is not None else "unmatched"
    metrics = defn.metrics
    metrics.http_requests_of(defn.name, route, request.method, response.status).inc()
    metrics.http_latency_of(defn.name, route).observe(elapsed)
    access_line(
        log,
        {
            "method": request.method,
            "path": request.path,
            "status": response.status,
            "latency_ms": round(elapsed * 1000, 2),
            "request_id": request_id,
        },
    )
    return response


async def _response_headers(request: web.Request, response: web.StreamResponse) -> None:
    """Headers every answer carries, streams included (this runs just before they are sent):
    the request id, and CORS for the allowed portal origins."""
    if REQUEST_ID in request:
        response.headers.setdefault("x-request-id", request[REQUEST_ID])
    origin = request.headers.get("Origin")
    if origin is not None and origin in request.app[DEFINITION].allowed_origins:
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Access-Control-Allow-Credentials"] = "true"
        response.headers.add("Vary", "Origin")


def _preflight(origins: frozenset[str]) -> Callable[..., Awaitable[web.StreamResponse]]:
    """CORS preflight requests from the allowed origins are answered here, before any auth."""

    @web.middleware
    async def preflight(request: web.Request, handler: Handler) -> web.StreamResponse:
        if (
            request.method == "OPTIONS"
            and request.headers.get("Origin") in origins
            and "Access-Control-Request-Method" in request.headers
        ):
            return web.Response(
                status=204,
                headers={
                    "Access-Control-Allow-Methods": "GET, POST, PUT, PATCH, DELETE, OPTIONS",
                    "Access-Control-Allow-Headers": request.headers.get(
                        "Access-Control-Request-Headers", "Authorization, Content-Type"
                    ),
                    "Access-Control-Max-Age": "600",
                },
            )
        return await handler(request)

    return preflight
